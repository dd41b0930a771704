//! AF_PACKET fanout groups as data: modes, flags, the option value the kernel takes and the
//! value it reports, the classic steering program of mode `cbpf`.
//!
//! Numbers from `include/uapi/linux/if_packet.h`; the kernel's rules in `net/packet/af_packet.c`
//! (`fanout_add`): a group is matched on (id, network namespace); a joiner must bring the same
//! mode, flags, protocol and device; rollover mode refuses the rollover flag; `uniqueid` needs
//! id 0 and lets the kernel choose one.

use std::fmt;

/// A fanout mode (`PACKET_FANOUT_*`): how the kernel picks the member for a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// `PACKET_FANOUT_HASH` (0): the symmetric flow hash of the packet, modulo the members.
    Hash,
    /// `PACKET_FANOUT_LB` (1): round robin.
    Lb,
    /// `PACKET_FANOUT_CPU` (2): the receiving CPU modulo the members.
    Cpu,
    /// `PACKET_FANOUT_ROLLOVER` (3): the first member with room.
    Rollover,
    /// `PACKET_FANOUT_RND` (4): a random member.
    Rnd,
    /// `PACKET_FANOUT_QM` (5): the packet's queue mapping modulo the members.
    Qm,
    /// `PACKET_FANOUT_CBPF` (6): a classic BPF program's return value modulo the members.
    Cbpf,
    /// `PACKET_FANOUT_EBPF` (7): an eBPF socket filter's return value modulo the members.
    Ebpf,
}

impl Mode {
    /// Every mode, in kernel order.
    pub const ALL: [Mode; 8] = [
        Mode::Hash,
        Mode::Lb,
        Mode::Cpu,
        Mode::Rollover,
        Mode::Rnd,
        Mode::Qm,
        Mode::Cbpf,
        Mode::Ebpf,
    ];

    /// The kernel's number.
    pub fn number(self) -> u16 {
        match self {
            Mode::Hash => 0,
            Mode::Lb => 1,
            Mode::Cpu => 2,
            Mode::Rollover => 3,
            Mode::Rnd => 4,
            Mode::Qm => 5,
            Mode::Cbpf => 6,
            Mode::Ebpf => 7,
        }
    }

    /// The mode of a kernel number.
    pub fn from_number(n: u16) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.number() == n)
    }

    /// The name pfanout uses (the kernel's without `PACKET_FANOUT_`, lower case).
    pub fn name(self) -> &'static str {
        match self {
            Mode::Hash => "hash",
            Mode::Lb => "lb",
            Mode::Cpu => "cpu",
            Mode::Rollover => "rollover",
            Mode::Rnd => "rnd",
            Mode::Qm => "qm",
            Mode::Cbpf => "cbpf",
            Mode::Ebpf => "ebpf",
        }
    }

    /// The mode of a name.
    pub fn parse(s: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == s)
    }

    /// The names, for messages.
    pub fn names() -> String {
        Mode::ALL.map(Mode::name).join(", ")
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Fanout flags, as the kernel stores them (`type_flags >> 8`): the bits of [`Flags::ROLLOVER`]
/// and so on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags(pub u8);

impl Flags {
    /// `PACKET_FANOUT_FLAG_ROLLOVER` (0x1000 in `type_flags`): a member without room passes the
    /// packet on to one with room.
    pub const ROLLOVER: Flags = Flags(0x10);
    /// `PACKET_FANOUT_FLAG_UNIQUEID` (0x2000): the kernel chooses a free group id (the id given
    /// must be 0). Not kept after creation.
    pub const UNIQUEID: Flags = Flags(0x20);
    /// `PACKET_FANOUT_FLAG_IGNORE_OUTGOING` (0x4000): the group sees no outgoing packets.
    pub const IGNORE_OUTGOING: Flags = Flags(0x40);
    /// `PACKET_FANOUT_FLAG_DEFRAG` (0x8000): IPv4 fragments are reassembled before the mode
    /// picks a member.
    pub const DEFRAG: Flags = Flags(0x80);

    const NAMED: [(Flags, &'static str); 4] = [
        (Flags::ROLLOVER, "rollover"),
        (Flags::DEFRAG, "defrag"),
        (Flags::UNIQUEID, "uniqueid"),
        (Flags::IGNORE_OUTGOING, "ignore-outgoing"),
    ];

    /// No flag.
    pub fn empty() -> Flags {
        Flags(0)
    }
    /// Whether every bit of `other` is set.
    pub fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }
    /// Both sets.
    pub fn union(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }
    /// Without `other`'s bits.
    pub fn without(self, other: Flags) -> Flags {
        Flags(self.0 & !other.0)
    }
    /// Whether no flag is set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// `rollover,defrag` (any order, each at most once). `none` is the empty set.
    pub fn parse(s: &str) -> Result<Flags, String> {
        if s == "none" {
            return Ok(Flags::empty());
        }
        let mut out = Flags::empty();
        for w in s.split(',') {
            let Some((f, _)) = Flags::NAMED.iter().find(|(_, n)| *n == w) else {
                return Err(format!(
                    "unknown fanout flag \"{w}\" (the flags are rollover, defrag, uniqueid, ignore-outgoing)"
                ));
            };
            if out.contains(*f) {
                return Err(format!("fanout flag \"{w}\" is listed twice"));
            }
            out = out.union(*f);
        }
        Ok(out)
    }

    /// The names of the flags set, in a fixed order.
    pub fn names(self) -> Vec<&'static str> {
        Flags::NAMED
            .iter()
            .filter(|(f, _)| self.contains(*f))
            .map(|(_, n)| *n)
            .collect()
    }
}

impl fmt::Display for Flags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&self.names().join(","))
        }
    }
}

/// The 16-bit `type_flags` of `PACKET_FANOUT`: the mode in the low byte, the flags above.
pub fn type_flags(mode: Mode, flags: Flags) -> u16 {
    mode.number() | (u16::from(flags.0) << 8)
}

/// The kernel's most members per group (`PACKET_FANOUT_MAX`, since the 8-byte `fanout_args`).
pub const MAX_MEMBERS: u32 = 65536;
/// The members a group takes when its creator names no maximum.
pub const DEFAULT_MAX_MEMBERS: u32 = 256;

/// A group as `getsockopt(PACKET_FANOUT)` reports it: `id | mode << 16 | flags << 24`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Joined {
    /// Group id.
    pub id: u16,
    /// Mode number (a [`Mode`] where known).
    pub mode: u16,
    /// Flags kept by the kernel (uniqueid never shows).
    pub flags: Flags,
}

impl Joined {
    /// Decode the getsockopt value.
    pub fn from_raw(v: u32) -> Joined {
        Joined {
            id: (v & 0xffff) as u16,
            mode: ((v >> 16) & 0xff) as u16,
            flags: Flags((v >> 24) as u8),
        }
    }
}

/// Split `PACKET_DIAG_FANOUT` (`id | mode << 16`, no flags) into (id, mode number).
pub fn diag_value(v: u32) -> (u16, u16) {
    ((v & 0xffff) as u16, (v >> 16) as u16)
}

/// `ETH_P_ALL`: every protocol (host order).
pub const ETH_P_ALL: u16 = 0x0003;
/// `ETH_P_IP`: IPv4 (host order).
pub const ETH_P_IP: u16 = 0x0800;

/// Protocol names for display (`ETH_P_*`, host order).
pub fn protocol_name(p: u16) -> String {
    match p {
        0x0003 => "all".into(),
        0x0800 => "ip".into(),
        0x86dd => "ipv6".into(),
        0x0806 => "arp".into(),
        0x8100 => "802.1q".into(),
        0 => "none".into(),
        other => format!("0x{other:04x}"),
    }
}

/// Parse a protocol (`all`, `ip`, `ipv6`, `arp` or a number) into `ETH_P_*` (host order).
pub fn parse_protocol(s: &str) -> Option<u16> {
    match s {
        "all" => Some(0x0003),
        "ip" | "ipv4" => Some(0x0800),
        "ipv6" => Some(0x86dd),
        "arp" => Some(0x0806),
        _ => {
            if let Some(h) = s.strip_prefix("0x") {
                u16::from_str_radix(h, 16).ok()
            } else {
                s.parse().ok()
            }
        }
    }
}

/// One classic BPF instruction (`struct sock_filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    /// Opcode.
    pub code: u16,
    /// Jump offset if true.
    pub jt: u8,
    /// Jump offset if false.
    pub jf: u8,
    /// Operand.
    pub k: u32,
}

const fn insn(code: u16, jt: u8, jf: u8, k: u32) -> Insn {
    Insn { code, jt, jf, k }
}

// classic BPF opcodes (include/uapi/linux/filter.h, bpf_common.h)
const LD_W_ABS: u16 = 0x20;
const LD_H_ABS: u16 = 0x28;
const LD_B_ABS: u16 = 0x30;
const LD_H_IND: u16 = 0x48;
const LD_MEM: u16 = 0x60;
const LDX_K: u16 = 0x01;
const LDX_B_MSH: u16 = 0xb1;
const ST: u16 = 0x02;
const TAX: u16 = 0x07;
const XOR_X: u16 = 0xac;
const JA: u16 = 0x05;
const JEQ_K: u16 = 0x15;
const JSET_K: u16 = 0x45;
const RET_A: u16 = 0x16;
const RET_K: u16 = 0x06;
/// `SKF_AD_OFF + SKF_AD_PROTOCOL`: the packet's protocol (host order) as an absolute load.
const AD_PROTOCOL: u32 = 0xffff_f000;
/// `SKF_NET_OFF`: loads at this offset and above are from the network header, wherever
/// `skb->data` is (the network header for received packets, the link header for the copies
/// of outgoing ones that the group also sees).
const NET: u32 = 0xfff0_0000;

/// One line of the program below: an instruction, or a label, or a jump to labels.
enum Line {
    I(u16, u32),
    Label(&'static str),
    /// Conditional jump `code k`: to the first label if true, else the second.
    J(u16, u32, &'static str, &'static str),
    /// Unconditional jump.
    Ja(&'static str),
}

/// Resolve the labels of `lines` into jump offsets.
fn assemble(lines: &[Line]) -> Vec<Insn> {
    let mut at = std::collections::HashMap::new();
    let mut n = 0usize;
    for l in lines {
        match l {
            Line::Label(name) => {
                at.insert(*name, n);
            }
            _ => n += 1,
        }
    }
    let mut out = Vec::with_capacity(n);
    for l in lines {
        let pc = out.len();
        // offsets are relative to the next instruction; every label lies ahead
        let off = |name: &str| {
            at.get(name)
                .map_or(0, |&t: &usize| t.saturating_sub(pc + 1))
        };
        match l {
            Line::Label(_) => continue,
            Line::I(code, k) => out.push(insn(*code, 0, 0, *k)),
            Line::J(code, k, t, f) => out.push(insn(*code, off(t) as u8, off(f) as u8, *k)),
            Line::Ja(t) => out.push(insn(JA, 0, 0, off(t) as u32)),
        }
    }
    out
}

/// The classic program mode `cbpf` installs: a symmetric XOR of the flow. Every load is
/// relative to the network header (`SKF_NET_OFF`), so the copies of outgoing packets, whose
/// `skb->data` is at the link header, steer as the received ones do.
///
/// IPv4: `saddr ^ daddr`, and for TCP, UDP or SCTP packets that are not fragments also
/// `sport ^ dport`. IPv6: the last 32 bits of each address XORed, and for TCP, UDP or SCTP
/// directly after the fixed header also the ports. Other packets: 0 (the first member). Both
/// directions of a flow give the same value; [`classic_value`] computes it in Rust.
pub fn classic_program() -> Vec<Insn> {
    use Line::*;
    assemble(&[
        I(LD_W_ABS, AD_PROTOCOL),
        J(JEQ_K, 0x0800, "v4", "not4"),
        Label("not4"),
        J(JEQ_K, 0x86dd, "v6", "other"),
        Label("other"),
        I(RET_K, 0),
        Label("v4"),
        I(LD_W_ABS, NET + 12),
        I(TAX, 0),
        I(LD_W_ABS, NET + 16),
        I(XOR_X, 0),
        I(ST, 0), // M[0] = saddr ^ daddr
        I(LD_H_ABS, NET + 6),
        J(JSET_K, 0x3fff, "addrs", "whole"), // MF or an offset: a fragment
        Label("whole"),
        I(LD_B_ABS, NET + 9),
        J(JEQ_K, 6, "l4v4", "v4udp"),
        Label("v4udp"),
        J(JEQ_K, 17, "l4v4", "v4sctp"),
        Label("v4sctp"),
        J(JEQ_K, 132, "l4v4", "addrs"),
        Label("l4v4"),
        I(LDX_B_MSH, NET), // X = 4 * ihl
        Ja("ports"),
        Label("v6"),
        I(LD_W_ABS, NET + 20),
        I(TAX, 0),
        I(LD_W_ABS, NET + 36),
        I(XOR_X, 0),
        I(ST, 0),
        I(LD_B_ABS, NET + 6),
        J(JEQ_K, 6, "l4v6", "v6udp"),
        Label("v6udp"),
        J(JEQ_K, 17, "l4v6", "v6sctp"),
        Label("v6sctp"),
        J(JEQ_K, 132, "l4v6", "addrs"),
        Label("l4v6"),
        I(LDX_K, 40),
        Label("ports"),
        I(LD_H_IND, NET),
        I(ST, 1),
        I(LD_H_IND, NET + 2),
        I(TAX, 0),
        I(LD_MEM, 1),
        I(XOR_X, 0),
        I(TAX, 0),
        I(LD_MEM, 0),
        I(XOR_X, 0),
        I(RET_A, 0),
        Label("addrs"),
        I(LD_MEM, 0),
        I(RET_A, 0),
    ])
}

/// What [`classic_program`] returns for the packet `net` (from its network header) of
/// protocol `proto` (`ETH_P_*`, host order); `None` where the program reads past the end (the
/// kernel then returns 0).
pub fn classic_value(proto: u16, net: &[u8]) -> Option<u32> {
    let w = |o: usize| -> Option<u32> {
        net.get(o..o + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    let h = |o: usize| -> Option<u32> {
        net.get(o..o + 2)
            .map(|b| u32::from(u16::from_be_bytes([b[0], b[1]])))
    };
    let b = |o: usize| -> Option<u32> { net.get(o).map(|&v| u32::from(v)) };
    let l4 = |p: u32| p == 6 || p == 17 || p == 132;
    match proto {
        0x0800 => {
            let addrs = w(12)? ^ w(16)?;
            if h(6)? & 0x3fff != 0 || !l4(b(9)?) {
                return Some(addrs);
            }
            let x = 4 * (b(0)? & 0xf) as usize;
            Some(addrs ^ h(x)? ^ h(x + 2)?)
        }
        0x86dd => {
            let addrs = w(20)? ^ w(36)?;
            if !l4(b(6)?) {
                return Some(addrs);
            }
            Some(addrs ^ h(40)? ^ h(42)?)
        }
        _ => Some(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers() {
        for m in Mode::ALL {
            assert_eq!(Mode::parse(m.name()), Some(m));
            assert_eq!(Mode::from_number(m.number()), Some(m));
        }
        assert_eq!(Mode::parse("roundrobin"), None);
        assert_eq!(type_flags(Mode::Hash, Flags::ROLLOVER), 0x1000);
        assert_eq!(
            type_flags(Mode::Cpu, Flags::DEFRAG.union(Flags::IGNORE_OUTGOING)),
            0xc002
        );
        assert_eq!(type_flags(Mode::Lb, Flags::UNIQUEID), 0x2001);
    }

    #[test]
    fn flags_parse_and_print() {
        let f = Flags::parse("defrag,rollover").expect("ok");
        assert_eq!(f, Flags::ROLLOVER.union(Flags::DEFRAG));
        assert_eq!(f.to_string(), "rollover,defrag");
        assert_eq!(Flags::parse("none").expect("ok"), Flags::empty());
        assert_eq!(Flags::empty().to_string(), "none");
        assert!(Flags::parse("rollover,rollover")
            .expect_err("twice")
            .contains("twice"));
        assert!(Flags::parse("fast").expect_err("unknown").contains("fast"));
        assert!(Flags::parse("").is_err());
    }

    #[test]
    fn kernel_values() {
        // getsockopt of a hash group 42 with rollover: 0x1000002a
        let j = Joined::from_raw(0x1000_002a);
        assert_eq!((j.id, j.mode, j.flags), (42, 0, Flags::ROLLOVER));
        assert_eq!(diag_value(0x0001_0007), (7, 1));
        assert_eq!(protocol_name(3), "all");
        assert_eq!(parse_protocol("0x88cc"), Some(0x88cc));
        assert_eq!(parse_protocol("ipv6"), Some(0x86dd));
    }

    /// A classic BPF interpreter for the opcodes [`classic_program`] uses, as the kernel runs
    /// them: a load past the end returns 0 from the program.
    fn run(prog: &[Insn], proto: u16, p: &[u8]) -> u32 {
        let (mut a, mut x, mut m) = (0u32, 0u32, [0u32; 16]);
        let mut pc = 0usize;
        let ld = |o: usize, n: usize| -> Option<u32> {
            // every load of the program is network-relative; the packet starts there
            let o = o.checked_sub(NET as usize)?;
            let b = p.get(o..o + n)?;
            Some(b.iter().fold(0u32, |acc, &v| acc << 8 | u32::from(v)))
        };
        loop {
            let i = prog[pc];
            pc += 1;
            let k = i.k as usize;
            match i.code {
                LD_W_ABS if i.k == AD_PROTOCOL => a = u32::from(proto),
                LD_W_ABS => match ld(k, 4) {
                    Some(v) => a = v,
                    None => return 0,
                },
                LD_H_ABS => match ld(k, 2) {
                    Some(v) => a = v,
                    None => return 0,
                },
                LD_B_ABS => match ld(k, 1) {
                    Some(v) => a = v,
                    None => return 0,
                },
                LD_H_IND => match ld(k + x as usize, 2) {
                    Some(v) => a = v,
                    None => return 0,
                },
                LDX_B_MSH => match ld(k, 1) {
                    Some(v) => x = 4 * (v & 0xf),
                    None => return 0,
                },
                LD_MEM => a = m[k],
                LDX_K => x = i.k,
                ST => m[k] = a,
                TAX => x = a,
                XOR_X => a ^= x,
                JA => pc += k,
                JEQ_K => pc += usize::from(if a == i.k { i.jt } else { i.jf }),
                JSET_K => pc += usize::from(if a & i.k != 0 { i.jt } else { i.jf }),
                RET_A => return a,
                RET_K => return i.k,
                other => panic!("opcode {other:#x} not interpreted"),
            }
        }
    }

    fn v4(src: [u8; 4], dst: [u8; 4], proto: u8, frag: u16, ports: (u16, u16)) -> Vec<u8> {
        let mut p = vec![0x45, 0, 0, 48, 0, 1];
        p.extend_from_slice(&frag.to_be_bytes());
        p.extend_from_slice(&[64, proto, 0, 0]);
        p.extend_from_slice(&src);
        p.extend_from_slice(&dst);
        p.extend_from_slice(&ports.0.to_be_bytes());
        p.extend_from_slice(&ports.1.to_be_bytes());
        p.extend_from_slice(&[0; 20]);
        p
    }

    #[test]
    fn classic_program_is_the_symmetric_xor() {
        let prog = classic_program();
        assert!(prog.len() < 64);
        let a = v4([192, 0, 2, 1], [192, 0, 2, 2], 17, 0, (4000, 53));
        let b = v4([192, 0, 2, 2], [192, 0, 2, 1], 17, 0, (53, 4000));
        let want = 0xc000_0201 ^ 0xc000_0202 ^ 4000 ^ 53;
        assert_eq!(run(&prog, 0x0800, &a), want);
        assert_eq!(run(&prog, 0x0800, &b), want);
        assert_eq!(classic_value(0x0800, &a), Some(want));
        // a fragment: addresses only
        let f = v4([192, 0, 2, 1], [192, 0, 2, 2], 17, 0x2000, (4000, 53));
        assert_eq!(run(&prog, 0x0800, &f), 3);
        // not an L4 protocol: addresses only
        let icmp = v4([192, 0, 2, 1], [192, 0, 2, 2], 1, 0, (0x0800, 0));
        assert_eq!(run(&prog, 0x0800, &icmp), 3);
        assert_eq!(run(&prog, 0x0806, &a), 0);
        // random packets, truncated ones too: the program and the Rust function agree
        let mut rng = mpt_testkit::XorShift64(0x9e37_79b9_7f4a_7c15);
        let mut next = move || rng.next();
        for i in 0..20_000 {
            let len = (next() % 80) as usize;
            let mut p: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if len > 9 && i % 2 == 0 {
                p[0] = 0x45;
                p[6] &= 0x80; // mostly not fragments
                p[7] = 0;
                p[9] = [6u8, 17, 132, 1][i % 4];
            }
            if len > 6 && i % 3 == 0 {
                p[6] = [6u8, 17, 132, 58][i % 4];
            }
            let proto = [0x0800u16, 0x86dd, 0x0806][i % 3];
            assert_eq!(
                run(&prog, proto, &p),
                classic_value(proto, &p).unwrap_or(0),
                "packet {i} proto {proto:#x} {p:02x?}"
            );
        }
    }
}

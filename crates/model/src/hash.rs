//! The mproute flow hash: defined here once, reproduced bit for bit by the BPF dataplane
//! (`bpf/include/mpt/flowhash.h`, `mpt_flow_hash()`), and held together by the parity test
//! `crates/bpf/tests/hash_parity.rs` (BPF_PROG_TEST_RUN against [`flow_hash`]).
//!
//! # Primitive
//!
//! [`jhash2`] is Bob Jenkins' lookup3 over 32-bit words exactly as the Linux kernel's
//! `jhash2(const u32 *k, u32 length, u32 initval)` (`include/linux/jhash.h`):
//! `a = b = c = 0xdeadbeef + (length << 2) + initval`; while more than 3 words remain, add three
//! words to `a`, `b`, `c` and `__jhash_mix` (rotates 4, 6, 8, 16, 19, 4); add the remaining 1–3
//! words (`c += k[2]`, `b += k[1]`, `a += k[0]`) and `__jhash_final` (rotates 14, 11, 25, 16, 4,
//! 14, 24); zero remaining words skip the final mix. The result is `c`.
//!
//! # Key
//!
//! A [`FlowKey`] is what the packet parser extracts: family, the two addresses as network-order
//! bytes (IPv4 in the first 4 bytes, the other 12 ignored), the IP protocol and the two ports as
//! host-order values. The parser is responsible for:
//!
//! * fragments, the first one too (as the kernel's flow dissection): it zeroes the ports and
//!   calls with `l4 = false`;
//! * ICMP / ICMPv6 errors (unreachable, time exceeded, parameter problem, packet too big): it
//!   extracts the key from the *embedded* header. Because the hash is direction-symmetric, the
//!   error (which travels back towards the flow's source) hashes like the flow it is about.
//!
//! # Canonical order
//!
//! The pair `(src, sport)` / `(dst, dport)` is put in order so that both directions of a flow
//! hash alike. Addresses are compared as byte strings (`memcmp` order over 4 bytes for IPv4,
//! 16 for IPv6 — the same as comparing them as big-endian numbers); if they are equal the ports
//! are compared as numbers. The lower pair comes first: `lo = (lo_addr, lo_port)`,
//! `hi = (hi_addr, hi_port)`. A port always moves with its address.
//!
//! # Word layout (the C MUST follow it exactly)
//!
//! `A(addr, i)` is the `i`-th 4-byte group of an address read big-endian
//! (`u32::from_be_bytes(addr[4*i..4*i+4])`; in C `(p[0] << 24) | (p[1] << 16) | (p[2] << 8) | p[3]`,
//! i.e. `bpf_ntohl` of the `__be32`).
//!
//! | case | words | count |
//! |---|---|---|
//! | IPv4, l3 | `A(lo,0), A(hi,0)` | 2 |
//! | IPv6, l3 | `A(lo,0..4), A(hi,0..4)` | 8 |
//! | IPv4, l4 | l3 words, `(lo_port << 16) \| hi_port`, `proto` | 4 |
//! | IPv6, l4 | l3 words, `(lo_port << 16) \| hi_port`, `proto` | 10 |
//!
//! The l4 words are appended only when the caller asks for l4 **and** the protocol is TCP (6),
//! UDP (17) or SCTP (132); for every other protocol the hash is the l3 hash (ports and protocol
//! are ignored). The hash is `jhash2(words, seed) >> 1`: a 31-bit value as the kernel's
//! `fib_multipath_hash()` returns, ready for [`crate::route::threshold::select`].

use std::net::IpAddr;

use crate::Family;

/// `JHASH_INITVAL` of the kernel's jhash.
pub const JHASH_INITVAL: u32 = 0xdead_beef;

/// Most words [`flow_hash`] ever hashes (IPv6 with l4). The C `mpt_jhash2` accepts up to 11.
pub const MAX_FLOW_WORDS: usize = 10;

/// IP protocols whose ports take part in the l4 hash.
pub const L4_PROTOS: [u8; 3] = [IPPROTO_TCP, IPPROTO_UDP, IPPROTO_SCTP];
/// TCP.
pub const IPPROTO_TCP: u8 = 6;
/// UDP.
pub const IPPROTO_UDP: u8 = 17;
/// SCTP.
pub const IPPROTO_SCTP: u8 = 132;

/// The kernel's `__jhash_mix`.
#[inline(always)]
fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(4);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(6);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(8);
    *b = b.wrapping_add(*a);
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(16);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(19);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(4);
    *b = b.wrapping_add(*a);
}

/// The kernel's `__jhash_final`.
#[inline(always)]
fn final_mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(14));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(11));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(25));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(16));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(4));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(14));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(24));
}

/// The kernel's `jhash2(k, k.len(), initval)`: lookup3 over 32-bit words.
pub fn jhash2(k: &[u32], initval: u32) -> u32 {
    // The kernel's `length` is a u32; `<< 2` wraps like the C does.
    let len = k.len() as u32;
    let init = JHASH_INITVAL
        .wrapping_add(len.wrapping_shl(2))
        .wrapping_add(initval);
    let (mut a, mut b, mut c) = (init, init, init);
    let mut rest = k;
    while rest.len() > 3 {
        a = a.wrapping_add(rest[0]);
        b = b.wrapping_add(rest[1]);
        c = c.wrapping_add(rest[2]);
        mix(&mut a, &mut b, &mut c);
        rest = &rest[3..];
    }
    if rest.is_empty() {
        return c;
    }
    if let Some(w) = rest.get(2) {
        c = c.wrapping_add(*w);
    }
    if let Some(w) = rest.get(1) {
        b = b.wrapping_add(*w);
    }
    a = a.wrapping_add(rest[0]);
    final_mix(&mut a, &mut b, &mut c);
    c
}

/// What the parser extracts from a packet for hashing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowKey {
    /// Address family: how many bytes of `src`/`dst` count (4 or 16).
    pub family: Family,
    /// Source address, network order; IPv4 in bytes 0..4 (the rest is ignored).
    pub src: [u8; 16],
    /// Destination address, network order; IPv4 in bytes 0..4 (the rest is ignored).
    pub dst: [u8; 16],
    /// IP protocol (IPv6: the upper-layer next header).
    pub proto: u8,
    /// Source port, host-order value (0 when unknown, e.g. fragments).
    pub sport: u16,
    /// Destination port, host-order value (0 when unknown).
    pub dport: u16,
}

impl FlowKey {
    /// A key from two addresses of the same family; `None` if the families differ.
    pub fn from_addrs(src: IpAddr, dst: IpAddr, proto: u8, sport: u16, dport: u16) -> Option<Self> {
        let (family, src, dst) = match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let mut sb = [0u8; 16];
                let mut db = [0u8; 16];
                sb[..4].copy_from_slice(&s.octets());
                db[..4].copy_from_slice(&d.octets());
                (Family::V4, sb, db)
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => (Family::V6, s.octets(), d.octets()),
            _ => return None,
        };
        Some(FlowKey {
            family,
            src,
            dst,
            proto,
            sport,
            dport,
        })
    }

    /// Number of meaningful address bytes.
    fn addr_len(&self) -> usize {
        match self.family {
            Family::V4 => 4,
            Family::V6 => 16,
        }
    }
}

/// Whether `proto`'s ports take part in the l4 hash (TCP, UDP, SCTP).
pub fn is_l4_proto(proto: u8) -> bool {
    L4_PROTOS.contains(&proto)
}

/// The words hashed for `key`, in the documented layout (see the module doc); returns the
/// buffer and how many of its words are used.
pub fn flow_words(key: &FlowKey, l4: bool) -> ([u32; MAX_FLOW_WORDS], usize) {
    flow_words_fields(key, l4, HashFields::L4)
}

/// [`flow_words`] over the fields of a hash recipe (see [`HashFields`]): the addresses when
/// the recipe has them, and the l4 words (ports, protocol; a field left out is a 0) when it
/// has any of them and the packet is TCP, UDP or SCTP with `l4`. With [`HashFields::L4`] this
/// is the l4 layout, with [`HashFields::L3`] (or `l4 = false`) the l3 one, word for word.
/// The canonical order is decided by the hashed fields only (the addresses, then the ports;
/// the ports alone when the addresses are left out), so two flows that differ only in a field
/// left out hash alike, and both directions of a flow hash alike.
pub fn flow_words_fields(
    key: &FlowKey,
    l4: bool,
    fields: HashFields,
) -> ([u32; MAX_FLOW_WORDS], usize) {
    let alen = key.addr_len();
    let use_ip = fields.has(HashFields::IPS);
    let (s, d) = if use_ip {
        (&key.src[..alen], &key.dst[..alen])
    } else {
        (&key.src[..0], &key.dst[..0])
    };
    // memcmp order on the addresses, then the ports: the lower (addr, port) pair first.
    let src_first = (s, key.sport) <= (d, key.dport);
    let (lo, lo_port, hi, hi_port) = if src_first {
        (s, key.sport, d, key.dport)
    } else {
        (d, key.dport, s, key.sport)
    };

    let mut words = [0u32; MAX_FLOW_WORDS];
    let mut n = 0;
    for addr in [lo, hi] {
        for chunk in addr.chunks_exact(4) {
            words[n] = u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
            n += 1;
        }
    }
    let l4_fields = fields.0 & (HashFields::PORTS | HashFields::IP_PROTO) != 0;
    if l4 && l4_fields && is_l4_proto(key.proto) {
        if fields.has(HashFields::PORTS) {
            words[n] = (u32::from(lo_port) << 16) | u32::from(hi_port);
        }
        if fields.has(HashFields::IP_PROTO) {
            words[n + 1] = u32::from(key.proto);
        }
        n += 2;
    }
    (words, n)
}

/// The fields of a route's hash recipe (`hash-fields`), as bits of the kernel's
/// `net.ipv4.fib_multipath_hash_fields` (and the names `ip route` documents for it). Only the
/// outer fields are hashed, in pairs, so that both directions of a flow hash alike whatever
/// the recipe: `src-ip` with `dst-ip`, `src-port` with `dst-port` (a hash of the source alone
/// cannot be the same for both directions unless it is the same for every flow). The flow
/// label and the inner fields are refused by [`HashFields::parse`], each with its reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct HashFields(pub u16);

impl HashFields {
    /// `src-ip`.
    pub const SRC_IP: u16 = 0x0001;
    /// `dst-ip`.
    pub const DST_IP: u16 = 0x0002;
    /// `ip-proto`.
    pub const IP_PROTO: u16 = 0x0004;
    /// `flowlabel` (refused).
    pub const FLOWLABEL: u16 = 0x0008;
    /// `src-port`.
    pub const SRC_PORT: u16 = 0x0010;
    /// `dst-port`.
    pub const DST_PORT: u16 = 0x0020;
    /// Both addresses.
    pub const IPS: u16 = Self::SRC_IP | Self::DST_IP;
    /// Both ports.
    pub const PORTS: u16 = Self::SRC_PORT | Self::DST_PORT;
    /// What `l3-hash` hashes without a recipe.
    pub const L3: HashFields = HashFields(Self::IPS);
    /// What `l4-hash` hashes without a recipe.
    pub const L4: HashFields = HashFields(Self::IPS | Self::IP_PROTO | Self::PORTS);
    /// Every field we hash, in the kernel's bit order, with its name.
    pub const NAMES: [(&'static str, u16); 5] = [
        ("src-ip", Self::SRC_IP),
        ("dst-ip", Self::DST_IP),
        ("ip-proto", Self::IP_PROTO),
        ("src-port", Self::SRC_PORT),
        ("dst-port", Self::DST_PORT),
    ];

    /// Whether every bit of `bits` is set.
    pub const fn has(self, bits: u16) -> bool {
        self.0 & bits == bits
    }

    /// Whether the recipe reads the ports or the protocol (an l4 recipe).
    pub const fn is_l4(self) -> bool {
        self.0 & (Self::PORTS | Self::IP_PROTO) != 0
    }

    /// `F[,F...]` with the kernel's names; one line saying what is wrong otherwise.
    pub fn parse(s: &str) -> Result<HashFields, String> {
        let mut bits = 0u16;
        for f in s.split(',') {
            let bit = match f {
                "flowlabel" => {
                    return Err(
                        "hash field flowlabel: each direction of a flow carries its own \
                                label, so hashing it would part the two directions (the hash is \
                                symmetric)"
                            .into(),
                    )
                }
                _ if f.starts_with("inner-") => {
                    return Err(format!(
                        "hash field {f}: inner fields are not supported (the dataplane does \
                         not parse encapsulated packets)"
                    ))
                }
                _ => match Self::NAMES.iter().find(|(n, _)| *n == f) {
                    Some((_, b)) => *b,
                    None => {
                        return Err(format!(
                            "unknown hash field \"{f}\" (expected src-ip, dst-ip, ip-proto, \
                             src-port, dst-port, separated by commas)"
                        ))
                    }
                },
            };
            bits |= bit;
        }
        for (pair, a, b) in [
            (Self::IPS, "src-ip", "dst-ip"),
            (Self::PORTS, "src-port", "dst-port"),
        ] {
            if bits & pair != 0 && bits & pair != pair {
                return Err(format!(
                    "hash fields {a} and {b} go together: one without the other would hash the \
                     two directions of a flow apart (the hash is symmetric)"
                ));
            }
        }
        Ok(HashFields(bits))
    }

    /// The names of the fields, comma-separated, in the kernel's bit order.
    pub fn names(self) -> String {
        let v: Vec<&str> = Self::NAMES
            .iter()
            .filter(|(_, b)| self.0 & b != 0)
            .map(|(n, _)| *n)
            .collect();
        v.join(",")
    }
}

impl std::fmt::Display for HashFields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.names())
    }
}

/// A route's hash recipe: `hash-fields` and `seed` as written (`None`: the algorithm's fields,
/// the namespace's seed). The default recipe hashes exactly as a route without one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct HashRecipe {
    /// `hash-fields F[,F...]`.
    pub fields: Option<HashFields>,
    /// `seed N`.
    pub seed: Option<u32>,
}

impl HashRecipe {
    /// Whether nothing was written (today's hash).
    pub fn is_default(&self) -> bool {
        self.fields.is_none() && self.seed.is_none()
    }

    /// The fields hashed for a route whose algorithm hashes the ports (`l4`) or not.
    pub fn fields_for(&self, l4: bool) -> HashFields {
        self.fields
            .unwrap_or(if l4 { HashFields::L4 } else { HashFields::L3 })
    }

    /// The seed hashed with, given the namespace's.
    pub fn seed_or(&self, namespace: u32) -> u32 {
        self.seed.unwrap_or(namespace)
    }
}

/// [`flow_hash`] over a recipe's fields: `jhash2(flow_words_fields(..), seed) >> 1`.
pub fn flow_hash_fields(key: &FlowKey, l4: bool, seed: u32, fields: HashFields) -> u32 {
    let (words, n) = flow_words_fields(key, l4, fields);
    jhash2(&words[..n], seed) >> 1
}

/// The 31-bit flow hash of `key`: `jhash2(words, seed) >> 1` over the canonical word layout of
/// the module doc. `l4` selects the l4 hash (honoured only for TCP, UDP and SCTP); the parser
/// passes `false` for fragments.
pub fn flow_hash(key: &FlowKey, l4: bool, seed: u32) -> u32 {
    let (words, n) = flow_words(key, l4);
    jhash2(&words[..n], seed) >> 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::threshold::{select, upper_bounds};
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// The word vector the reference values below were computed on.
    const W: [u32; 12] = [
        0x0102_0304,
        0x9c33_7fb1,
        0x3f68_fa7e,
        0xdeae_613b,
        0x7dd7_e9f0,
        0x1119_7285,
        0xb242_cf4a,
        0x5b94_4c2f,
        0xf8a9_d6ec,
        0x85e7_59a9,
        0x253c_e016,
        0xc07a_1ec3,
    ];

    /// `(length, initval, jhash2(W, length, initval))`, computed by a C program (gcc) that
    /// re-implements the kernel's `__jhash_mix` / `__jhash_final` / `jhash2` macros verbatim.
    const VECTORS: [(usize, u32, u32); 39] = [
        (0, 0x0000_0000, 0xdead_beef),
        (1, 0x0000_0000, 0xec5b_1971),
        (2, 0x0000_0000, 0x18bc_6d4e),
        (3, 0x0000_0000, 0x6769_8722),
        (4, 0x0000_0000, 0x01a7_56eb),
        (5, 0x0000_0000, 0x389b_a1bd),
        (6, 0x0000_0000, 0x6543_ee4a),
        (7, 0x0000_0000, 0xa8fa_868b),
        (8, 0x0000_0000, 0x2ab6_97c8),
        (9, 0x0000_0000, 0xc098_cff2),
        (10, 0x0000_0000, 0x15f3_9e4c),
        (11, 0x0000_0000, 0xe268_6987),
        (12, 0x0000_0000, 0xdd03_3991),
        (0, 0x0000_0001, 0xdead_bef0),
        (1, 0x0000_0001, 0xdce1_4329),
        (2, 0x0000_0001, 0x75e4_6428),
        (3, 0x0000_0001, 0xba6d_5166),
        (4, 0x0000_0001, 0xc6a7_7705),
        (5, 0x0000_0001, 0x103a_a47e),
        (6, 0x0000_0001, 0x47ed_edff),
        (7, 0x0000_0001, 0x5b22_6eac),
        (8, 0x0000_0001, 0xdfc2_507e),
        (9, 0x0000_0001, 0x630d_5df7),
        (10, 0x0000_0001, 0xd53e_fcbd),
        (11, 0x0000_0001, 0x3ee2_9fab),
        (12, 0x0000_0001, 0x0da8_791f),
        (0, 0x1234_5678, 0xf0e2_1567),
        (1, 0x1234_5678, 0xe4e9_385a),
        (2, 0x1234_5678, 0x6e05_13f8),
        (3, 0x1234_5678, 0x8cab_bd16),
        (4, 0x1234_5678, 0x604f_7029),
        (5, 0x1234_5678, 0xe730_528a),
        (6, 0x1234_5678, 0xfb20_588e),
        (7, 0x1234_5678, 0x88df_5573),
        (8, 0x1234_5678, 0xc79a_2e6f),
        (9, 0x1234_5678, 0xcf60_0aa5),
        (10, 0x1234_5678, 0x4ee7_e347),
        (11, 0x1234_5678, 0xae7d_deb0),
        (12, 0x1234_5678, 0x072b_750c),
    ];

    #[test]
    fn jhash2_matches_kernel_vectors() {
        for (n, iv, want) in VECTORS {
            assert_eq!(jhash2(&W[..n], iv), want, "length {n} initval {iv:#x}");
        }
    }

    /// The kernel's `jhash_2words(a, b, iv)` is `__jhash_nwords(a, b, 0, iv + 0xdeadbeef + 8)`,
    /// which equals `jhash2(&[a, b], iv)`; the C reference printed 0x371b217e for this input.
    #[test]
    fn jhash2_two_words_fixed() {
        assert_eq!(jhash2(&[0xc0a8_0001, 0x0a00_0001], 7), 0x371b_217e);
    }

    fn v4(s: [u8; 4], d: [u8; 4], proto: u8, sport: u16, dport: u16) -> FlowKey {
        FlowKey::from_addrs(
            IpAddr::V4(Ipv4Addr::from(s)),
            IpAddr::V4(Ipv4Addr::from(d)),
            proto,
            sport,
            dport,
        )
        .expect("same family")
    }

    fn v6(s: &str, d: &str, proto: u8, sport: u16, dport: u16) -> FlowKey {
        FlowKey::from_addrs(
            IpAddr::V6(s.parse::<Ipv6Addr>().expect("v6")),
            IpAddr::V6(d.parse::<Ipv6Addr>().expect("v6")),
            proto,
            sport,
            dport,
        )
        .expect("same family")
    }

    fn reversed(k: &FlowKey) -> FlowKey {
        FlowKey {
            src: k.dst,
            dst: k.src,
            sport: k.dport,
            dport: k.sport,
            ..*k
        }
    }

    #[test]
    fn word_layout_is_as_documented() {
        // 10.0.0.2:80 -> 10.0.0.1:4000, TCP: 10.0.0.1 is lower, its port 4000 moves with it.
        let k = v4([10, 0, 0, 2], [10, 0, 0, 1], IPPROTO_TCP, 80, 4000);
        let (w, n) = flow_words(&k, true);
        assert_eq!(&w[..n], &[0x0a00_0001, 0x0a00_0002, (4000 << 16) | 80, 6]);
        let (w, n) = flow_words(&k, false);
        assert_eq!(&w[..n], &[0x0a00_0001, 0x0a00_0002]);

        let k = v6("2001:db8::2", "2001:db8::1", IPPROTO_UDP, 53, 5353);
        let (w, n) = flow_words(&k, true);
        assert_eq!(
            &w[..n],
            &[
                0x2001_0db8,
                0,
                0,
                1,
                0x2001_0db8,
                0,
                0,
                2,
                (5353 << 16) | 53,
                17
            ]
        );
        // The hash is the documented jhash2 of those words, shifted to 31 bits.
        assert_eq!(flow_hash(&k, true, 99), jhash2(&w[..n], 99) >> 1);
    }

    #[test]
    fn hash_is_31_bits() {
        for i in 0..1000u32 {
            let k = v4(i.to_be_bytes(), [1, 2, 3, 4], IPPROTO_UDP, i as u16, 7);
            assert!(flow_hash(&k, true, i) <= 0x7fff_ffff);
        }
    }

    #[test]
    fn symmetric_v4_and_v6() {
        let keys = [
            v4([192, 0, 2, 1], [198, 51, 100, 7], IPPROTO_TCP, 40000, 443),
            v4([198, 51, 100, 7], [192, 0, 2, 1], IPPROTO_UDP, 53, 53),
            // Equal addresses: the ports decide the order.
            v4([10, 1, 1, 1], [10, 1, 1, 1], IPPROTO_TCP, 1, 2),
            v6("2001:db8::1", "2001:db8:1::9", IPPROTO_TCP, 1234, 22),
            v6("fe80::1", "::1", IPPROTO_SCTP, 9, 36412),
            v6("2001:db8::5", "2001:db8::5", IPPROTO_UDP, 7, 3),
        ];
        for k in keys {
            for l4 in [false, true] {
                for seed in [0, 1, 0xdead_beef] {
                    assert_eq!(
                        flow_hash(&k, l4, seed),
                        flow_hash(&reversed(&k), l4, seed),
                        "{k:?} l4={l4} seed={seed}"
                    );
                }
            }
        }
    }

    #[test]
    fn l4_uses_ports_l3_does_not() {
        let a = v4([192, 0, 2, 1], [198, 51, 100, 7], IPPROTO_TCP, 40000, 443);
        let b = FlowKey { sport: 40001, ..a };
        assert_ne!(flow_hash(&a, true, 0), flow_hash(&b, true, 0));
        assert_eq!(flow_hash(&a, false, 0), flow_hash(&b, false, 0));
        assert_ne!(flow_hash(&a, true, 0), flow_hash(&a, false, 0));

        let a = v6("2001:db8::1", "2001:db8::2", IPPROTO_UDP, 1000, 2000);
        let b = FlowKey { dport: 2001, ..a };
        assert_ne!(flow_hash(&a, true, 5), flow_hash(&b, true, 5));
        assert_eq!(flow_hash(&a, false, 5), flow_hash(&b, false, 5));
    }

    #[test]
    fn seed_changes_hash() {
        let k = v4([192, 0, 2, 1], [198, 51, 100, 7], IPPROTO_TCP, 40000, 443);
        let k6 = v6("2001:db8::1", "2001:db8::2", IPPROTO_UDP, 1000, 2000);
        for l4 in [false, true] {
            assert_ne!(flow_hash(&k, l4, 0), flow_hash(&k, l4, 1));
            assert_ne!(flow_hash(&k6, l4, 0), flow_hash(&k6, l4, 0x8000_0000));
        }
    }

    #[test]
    fn non_l4_protocol_ignores_ports() {
        for proto in [1u8, 47, 58, 50, 0] {
            let a = v4([192, 0, 2, 1], [198, 51, 100, 7], proto, 1, 2);
            let b = FlowKey {
                sport: 999,
                dport: 31337,
                ..a
            };
            assert_eq!(flow_hash(&a, true, 3), flow_hash(&b, true, 3));
            assert_eq!(flow_hash(&a, true, 3), flow_hash(&a, false, 3));
            // ...and the protocol itself does not enter the l3 hash either.
            let c = FlowKey { proto: 17, ..a };
            assert_eq!(flow_hash(&a, true, 3), flow_hash(&c, false, 3));
        }
    }

    #[test]
    fn ipv4_ignores_bytes_beyond_four() {
        let a = v4([192, 0, 2, 1], [198, 51, 100, 7], IPPROTO_TCP, 1, 2);
        let mut b = a;
        b.src[4..].fill(0xff);
        b.dst[15] = 1;
        assert_eq!(flow_hash(&a, true, 0), flow_hash(&b, true, 0));
    }

    #[test]
    fn families_must_match() {
        assert!(FlowKey::from_addrs(
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
            6,
            1,
            2
        )
        .is_none());
    }

    #[test]
    fn feeds_threshold_selection() {
        let b = upper_bounds(&[1, 1, 1, 1], &[true; 4]);
        let mut seen = [0usize; 4];
        for i in 0..4000u32 {
            let k = v4(
                [10, 0, (i >> 8) as u8, i as u8],
                [10, 9, 9, 9],
                IPPROTO_TCP,
                1,
                2,
            );
            let nh = select(flow_hash(&k, true, 42), &b).expect("all usable");
            seen[nh] += 1;
        }
        assert!(seen.iter().all(|&n| n > 800), "{seen:?}");
    }

    #[test]
    fn default_recipes_hash_as_the_algorithms() {
        let keys = [
            v4([192, 0, 2, 1], [198, 18, 0, 7], IPPROTO_TCP, 40000, 443),
            v4([203, 0, 113, 9], [192, 0, 2, 1], 1, 0, 0),
            v6("2001:db8::1", "2001:db8:1::2", IPPROTO_UDP, 53, 5353),
        ];
        for k in keys {
            for seed in [0, 7, 0xdead_beef] {
                for l4 in [false, true] {
                    assert_eq!(
                        flow_hash_fields(&k, l4, seed, HashFields::L4),
                        flow_hash(&k, l4, seed)
                    );
                    assert_eq!(
                        flow_hash_fields(&k, l4, seed, HashFields::L3),
                        flow_hash(&k, false, seed)
                    );
                }
            }
        }
    }

    #[test]
    fn recipes_are_symmetric_and_ignore_what_they_leave_out() {
        let recipes = [
            "src-ip,dst-ip",
            "src-port,dst-port",
            "ip-proto",
            "src-ip,dst-ip,ip-proto",
            "src-port,dst-port,ip-proto",
            "src-ip,dst-ip,src-port,dst-port",
        ];
        let mut rng = 0x1234_5678u32;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 17;
            rng ^= rng << 5;
            rng
        };
        for r in recipes {
            let f = HashFields::parse(r).expect("valid recipe");
            for _ in 0..200 {
                let a = next().to_be_bytes();
                let b = next().to_be_bytes();
                let (sp, dp) = ((next() >> 16) as u16, next() as u16);
                let proto = [IPPROTO_TCP, IPPROTO_UDP][(next() & 1) as usize];
                let k = v4(a, b, proto, sp, dp);
                let h = flow_hash_fields(&k, true, 5, f);
                assert_eq!(
                    h,
                    flow_hash_fields(&reversed(&k), true, 5, f),
                    "{r}: symmetric"
                );
                let mut o = k;
                if !f.has(HashFields::IPS) {
                    o.src = v4(next().to_be_bytes(), [0; 4], 0, 0, 0).src;
                    o.dst = v4(next().to_be_bytes(), [0; 4], 0, 0, 0).src;
                }
                if !f.has(HashFields::PORTS) {
                    o.sport = next() as u16;
                    o.dport = next() as u16;
                }
                if !f.has(HashFields::IP_PROTO) {
                    o.proto = if proto == IPPROTO_TCP {
                        IPPROTO_UDP
                    } else {
                        IPPROTO_TCP
                    };
                }
                assert_eq!(h, flow_hash_fields(&o, true, 5, f), "{r}: fields left out");
            }
        }
        // and a field kept does count
        let f = HashFields::parse("src-port,dst-port").expect("valid");
        let k = v4([192, 0, 2, 1], [198, 18, 0, 7], IPPROTO_TCP, 40000, 443);
        let mut o = k;
        o.sport = 40001;
        assert_ne!(
            flow_hash_fields(&k, true, 0, f),
            flow_hash_fields(&o, true, 0, f)
        );
    }

    #[test]
    fn recipe_words() {
        let f = HashFields::parse("dst-port,src-port,ip-proto").expect("valid");
        assert_eq!(f.0, 0x34);
        assert_eq!(f.to_string(), "ip-proto,src-port,dst-port");
        for bad in [
            "src-ip",
            "dst-port,ip-proto",
            "flowlabel",
            "inner-src-ip",
            "src",
            "",
        ] {
            let e = HashFields::parse(bad).expect_err(bad);
            assert!(!e.contains('\n'), "{e}");
        }
    }
}

//! Root test: pfanout's steering program (`bpf/pfanout/pfanout_steer.bpf.c`, loaded with
//! [`mpt_bpf::pfanout::Steering`]) returns `mpt_model::hash::flow_hash(key, true, seed)` of a
//! packet's flow, by BPF_PROG_TEST_RUN on crafted Ethernet frames: TCP, UDP and SCTP over IPv4
//! and IPv6 with several seeds, both directions alike, IPv4 options and IPv6 extension headers
//! skipped, fragments by addresses only, ICMP and ICMPv6 errors as the flow they quote, 0 for
//! what is not IP or cannot be read; then 100,000 random and truncated frames against a
//! reference parser written here from the program's specification; then a real fanout group
//! on `lo` of a throwaway namespace, whose members receive (outgoing and incoming copies alike)
//! what the hash says.
//!
//! A test run of a socket filter (bpf_prog_test_run_skb) takes the Ethernet frame, sets
//! skb->protocol with eth_type_trans and leaves skb->data and the network header after the
//! Ethernet header, as fanout sees a received packet: offset 0 of BPF_HDR_START_NET is the IP
//! header (`net_offset_is_the_ip_header` holds that; the fanout test holds the outgoing copies,
//! whose skb->data is at the MAC header, to the same values).
//!
//! Needs root (CAP_BPF to load, CAP_NET_ADMIN/CAP_NET_RAW for the test runs and the packet
//! sockets). It fails, it does not skip, when run without root.

use std::collections::{HashMap, HashSet};
use std::mem::size_of;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use mpt_bpf::pfanout::Steering;
use mpt_model::hash::{flow_hash, FlowKey};
use mpt_model::Family;
use mpt_testkit::packet::{
    eth, icmp4_port_unreach, icmp6_port_unreach, parse_ethernet, tagged, tcp, udp, Ip4, Ip6,
    DST_MAC, ETH_P_8021Q, ETH_P_ARP, ETH_P_IP, ETH_P_IPV6, IPPROTO_ICMP, IPPROTO_ICMPV6,
    IPPROTO_TCP, IPPROTO_UDP, MF, SRC_MAC,
};
use mpt_testkit::progrun::kernel_refuses;
use mpt_testkit::{require_root, Netns, XorShift64};

/// Seeds every known-answer case is checked with.
const SEEDS: [u32; 5] = [0, 1, 0x9e37_79b9, 0xdead_beef, u32::MAX];
/// Random and truncated frames.
const RANDOM_FRAMES: usize = 100_000;
/// `IPPROTO_SCTP`.
const IPPROTO_SCTP: u8 = 132;
/// `BPF_PROG_TYPE_SOCKET_FILTER`.
const BPF_PROG_TYPE_SOCKET_FILTER: u32 = 1;
/// `PACKET_FANOUT` and `PACKET_FANOUT_DATA` (SOL_PACKET options), `PACKET_FANOUT_EBPF`.
const PACKET_FANOUT: libc::c_int = 18;
const PACKET_FANOUT_DATA: libc::c_int = 22;
const PACKET_FANOUT_EBPF: u32 = 7;
/// `PACKET_OUTGOING` (sll_pkttype).
const PACKET_OUTGOING: u8 = 4;
/// `ETH_P_ALL`.
const ETH_P_ALL: u16 = 0x0003;

// ---------------------------------------------------------------------------------------------
// Running the program

/// BPF_PROG_TEST_RUN of the program on `frame`: its return value, or the errno.
fn try_run(prog: BorrowedFd<'_>, frame: &[u8]) -> Result<u32, i32> {
    let mut opts = libbpf_sys::bpf_test_run_opts {
        sz: size_of::<libbpf_sys::bpf_test_run_opts>() as _,
        data_in: frame.as_ptr().cast(),
        data_size_in: frame.len() as u32,
        repeat: 1,
        ..Default::default()
    };
    // SAFETY: opts and the frame it points to outlive the call; sz is its size.
    let rc = unsafe { libbpf_sys::bpf_prog_test_run_opts(prog.as_raw_fd(), &mut opts) };
    if rc < 0 {
        Err(-rc)
    } else {
        Ok(opts.retval)
    }
}

fn run(prog: &Steering, frame: &[u8]) -> u32 {
    try_run(prog.fd(), frame).unwrap_or_else(|e| {
        panic!(
            "BPF_PROG_TEST_RUN of pfanout_steer failed (errno {e}) on {}",
            mpt_testkit::packet::hex(frame)
        )
    })
}

/// One loaded program per seed.
fn programs() -> Vec<(u32, Steering)> {
    require_root();
    SEEDS
        .iter()
        .map(|&s| {
            (
                s,
                Steering::load(s).expect("load pfanout_steer (verifier log: run with -v)"),
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Frames and keys

fn ip(s: &str) -> IpAddr {
    s.parse().expect("address")
}

fn key(src: &str, dst: &str, proto: u8, sport: u16, dport: u16) -> FlowKey {
    FlowKey::from_addrs(ip(src), ip(dst), proto, sport, dport).expect("one family")
}

/// An IPv4 or IPv6 packet (by the addresses) in an Ethernet frame.
fn frame(src: &str, dst: &str, proto: u8, payload: Vec<u8>) -> Vec<u8> {
    if ip(src).is_ipv4() {
        Ip4::new(src, dst, proto, payload).frame()
    } else {
        Ip6::new(src, dst, proto, payload).frame()
    }
}

/// The L4 header of a flow: TCP, UDP, or SCTP's common header.
fn l4(proto: u8, sport: u16, dport: u16) -> Vec<u8> {
    match proto {
        IPPROTO_TCP => tcp(sport, dport),
        IPPROTO_UDP => udp(sport, dport, 12),
        IPPROTO_SCTP => {
            let mut s = Vec::new();
            s.extend_from_slice(&sport.to_be_bytes());
            s.extend_from_slice(&dport.to_be_bytes());
            s.extend_from_slice(&[0x11, 0x22, 0x33, 0x44, 0, 0, 0, 0]);
            s
        }
        _ => panic!("no ports in protocol {proto}"),
    }
}

/// An IPv6 extension header of `units` 8-byte units after the first (hop-by-hop, routing,
/// destination options), followed by `next`.
fn ext6(next: u8, units: u8) -> Vec<u8> {
    let mut h = vec![0u8; (usize::from(units) + 1) * 8];
    h[0] = next;
    h[1] = units;
    if h.len() >= 8 {
        h[2] = 1; // a PadN option filling the rest (for hop-by-hop / destination options)
        h[3] = (h.len() - 4) as u8;
    }
    h
}

/// An IPv6 fragment header followed by `next`: offset in 8-byte units, more fragments.
fn frag6(next: u8, offset: u16, more: bool) -> Vec<u8> {
    let mut h = vec![next, 0];
    h.extend_from_slice(&((offset << 3) | u16::from(more)).to_be_bytes());
    h.extend_from_slice(&0x0102_0304u32.to_be_bytes());
    h
}

/// An IPv6 packet from `src` to `dst` whose payload starts with the headers `chain` (the first
/// one's type `first`).
fn frame6_chain(src: &str, dst: &str, first: u8, chain: &[Vec<u8>]) -> Vec<u8> {
    Ip6::new(src, dst, first, chain.concat()).frame()
}

// ---------------------------------------------------------------------------------------------
// The reference: the program's specification (see the head of pfanout_steer.bpf.c), written
// again over a byte slice that stands for the skb's linear data from the network header.

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// `len` bytes at `off`, as bpf_skb_load_bytes_relative reads them (or not).
fn at(l3: &[u8], off: usize, len: usize) -> Option<&[u8]> {
    l3.get(off..off.checked_add(len)?)
}

struct Parsed {
    key: FlowKey,
    l4_off: usize,
    frag: bool,
}

fn ref_parse_ip(l3: &[u8], off: usize, v6: bool) -> Option<Parsed> {
    let mut key = FlowKey {
        family: Family::V4,
        src: [0; 16],
        dst: [0; 16],
        proto: 0,
        sport: 0,
        dport: 0,
    };
    if !v6 {
        let h = at(l3, off, 20)?;
        let ihl = usize::from(h[0] & 0x0f);
        if h[0] >> 4 != 4 || ihl < 5 {
            return None;
        }
        key.proto = h[9];
        key.src[..4].copy_from_slice(&h[12..16]);
        key.dst[..4].copy_from_slice(&h[16..20]);
        return Some(Parsed {
            key,
            l4_off: off + ihl * 4,
            frag: be16(h, 6) & 0x3fff != 0,
        });
    }
    let h = at(l3, off, 40)?;
    if h[0] >> 4 != 6 {
        return None;
    }
    key.family = Family::V6;
    key.src.copy_from_slice(&h[8..24]);
    key.dst.copy_from_slice(&h[24..40]);
    let mut nh = h[6];
    let mut pos = off + 40;
    let mut frag = false;
    for _ in 0..4 {
        if !matches!(nh, 0 | 43 | 60 | 44) {
            break;
        }
        let e = at(l3, pos, 2)?;
        if nh == 44 {
            frag = true;
            pos += 8;
            nh = e[0];
            break;
        }
        pos += (usize::from(e[1]) + 1) * 8;
        nh = e[0];
    }
    key.proto = nh;
    Some(Parsed {
        key,
        l4_off: pos,
        frag,
    })
}

fn l4_proto(p: u8) -> bool {
    matches!(p, IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP)
}

/// What pfanout_steer returns for `frame` (an Ethernet frame of a test run).
fn reference(frame: &[u8], seed: u32) -> u32 {
    let v6 = match be16(frame, 12) {
        ETH_P_IP => false,
        ETH_P_IPV6 => true,
        _ => return 0,
    };
    let l3 = &frame[14..];
    let Some(mut outer) = ref_parse_ip(l3, 0, v6) else {
        return 0;
    };
    if outer.frag {
        return flow_hash(&outer.key, false, seed);
    }
    if l4_proto(outer.key.proto) {
        let Some(p) = at(l3, outer.l4_off, 4) else {
            return 0;
        };
        outer.key.sport = be16(p, 0);
        outer.key.dport = be16(p, 2);
        return flow_hash(&outer.key, true, seed);
    }
    let icmp = if v6 { IPPROTO_ICMPV6 } else { IPPROTO_ICMP };
    if outer.key.proto == icmp {
        let Some(t) = at(l3, outer.l4_off, 1) else {
            return 0;
        };
        let err = if v6 {
            (1..=4).contains(&t[0])
        } else {
            matches!(t[0], 3 | 4 | 5 | 11 | 12)
        };
        if err {
            if let Some(mut inner) = ref_parse_ip(l3, outer.l4_off + 8, v6) {
                if !inner.frag && l4_proto(inner.key.proto) {
                    if let Some(p) = at(l3, inner.l4_off, 4) {
                        inner.key.sport = be16(p, 0);
                        inner.key.dport = be16(p, 2);
                        return flow_hash(&inner.key, true, seed);
                    }
                }
                return flow_hash(&inner.key, false, seed);
            }
        }
    }
    flow_hash(&outer.key, false, seed)
}

// ---------------------------------------------------------------------------------------------
// Known answers

#[test]
fn program_is_a_socket_filter_held_by_its_descriptor() {
    require_root();
    let s = Steering::load(7).expect("load pfanout_steer");
    let mut info = libbpf_sys::bpf_prog_info::default();
    let mut len = size_of::<libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: info outlives the call; len is its size.
    let rc =
        unsafe { libbpf_sys::bpf_prog_get_info_by_fd(s.fd().as_raw_fd(), &mut info, &mut len) };
    assert_eq!(rc, 0, "bpf_prog_get_info_by_fd");
    assert_eq!(info.type_, BPF_PROG_TYPE_SOCKET_FILTER);
    let name: Vec<u8> = info
        .name
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    assert_eq!(name, mpt_bpf::pfanout::PROG_NAME.as_bytes());
    println!(
        "pfanout_steer: {} instructions, {} processed by the verifier",
        info.xlated_prog_len / 8,
        info.verified_insns
    );
    // Still runs with the object it came from closed.
    let f = frame("10.0.0.1", "10.0.0.2", IPPROTO_UDP, l4(IPPROTO_UDP, 1, 2));
    assert_eq!(
        run(&s, &f),
        flow_hash(&key("10.0.0.1", "10.0.0.2", IPPROTO_UDP, 1, 2), true, 7)
    );
    // Gone with the value (the id is freed when the last reference goes).
    let id = info.id;
    drop(s);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match mpt_bpf::prog::fd(id) {
            Err(e) if e.errno() == Some(libc::ENOENT) => break,
            Err(e) => panic!("program {id}: {e}"),
            Ok(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(_) => panic!("program {id} still loaded 5 s after its Steering went"),
        }
    }
}

#[test]
fn flows_hash_as_the_model_both_directions_alike() {
    let progs = programs();
    let flows: &[(&str, &str, u16, u16)] = &[
        ("10.0.0.1", "10.0.0.2", 40_000, 80),
        ("192.0.2.77", "198.51.100.3", 53, 53),
        ("172.16.5.4", "172.16.5.4", 1, 65_535),
        ("2001:db8::1", "2001:db8::2", 40_000, 443),
        ("fe80::1", "2001:db8:ffff::abcd", 5_000, 5_001),
        ("2001:db8::7", "2001:db8::7", 9, 8),
    ];
    let mut values = HashSet::new();
    for &(seed, ref prog) in &progs {
        for &(a, b, pa, pb) in flows {
            for proto in [IPPROTO_TCP, IPPROTO_UDP, IPPROTO_SCTP] {
                let want = flow_hash(&key(a, b, proto, pa, pb), true, seed);
                let fwd = frame(a, b, proto, l4(proto, pa, pb));
                let rev = frame(b, a, proto, l4(proto, pb, pa));
                assert_eq!(
                    run(prog, &fwd),
                    want,
                    "{a}:{pa} -> {b}:{pb} proto {proto} seed {seed:#x}"
                );
                assert_eq!(
                    run(prog, &rev),
                    want,
                    "{b}:{pb} -> {a}:{pa} proto {proto} seed {seed:#x}"
                );
                assert!(want < 1 << 31);
                values.insert(want);
            }
        }
    }
    // Seeds, ports and protocols all count.
    assert!(
        values.len() > progs.len() * flows.len() * 3 - 3,
        "{} values",
        values.len()
    );
}

#[test]
fn net_offset_is_the_ip_header() {
    let progs = programs();
    let (seed, prog) = (&progs[2].0, &progs[2].1);
    let want = flow_hash(
        &key("10.1.2.3", "10.3.2.1", IPPROTO_UDP, 1234, 5678),
        true,
        *seed,
    );
    let f = frame(
        "10.1.2.3",
        "10.3.2.1",
        IPPROTO_UDP,
        l4(IPPROTO_UDP, 1234, 5678),
    );
    assert_eq!(run(prog, &f), want);
    // The MACs are not read.
    let mut g = f.clone();
    g[..12].copy_from_slice(&[0xff; 12]);
    assert_eq!(run(prog, &g), want);
    // Trailing bytes (link padding) are not read.
    let mut p = f.clone();
    p.extend_from_slice(&[0x5a; 30]);
    assert_eq!(run(prog, &p), want);
    // IPv4 options: the ports are at ihl * 4.
    let o = Ip4::new(
        "10.1.2.3",
        "10.3.2.1",
        IPPROTO_UDP,
        l4(IPPROTO_UDP, 1234, 5678),
    )
    .options(&[1, 1, 1, 1, 0x94, 4, 0, 0])
    .frame();
    assert_eq!(run(prog, &o), want);
}

#[test]
fn fragments_hash_by_addresses_only() {
    let progs = programs();
    for &(seed, ref prog) in &progs {
        // IPv4: first fragment (MF, offset 0, ports present), a later one, the last one.
        let l3 = flow_hash(&key("10.0.0.1", "10.0.0.2", IPPROTO_UDP, 0, 0), false, seed);
        for (sport, fragf) in [(1111, MF), (2222, MF), (0, MF | 185), (0, 370)] {
            let f = Ip4::new(
                "10.0.0.1",
                "10.0.0.2",
                IPPROTO_UDP,
                l4(IPPROTO_UDP, sport, 53),
            )
            .frag(fragf)
            .frame();
            assert_eq!(run(prog, &f), l3, "IPv4 fragment {fragf:#x} seed {seed:#x}");
            let r = Ip4::new(
                "10.0.0.2",
                "10.0.0.1",
                IPPROTO_UDP,
                l4(IPPROTO_UDP, 53, sport),
            )
            .frag(fragf)
            .frame();
            assert_eq!(run(prog, &r), l3, "reverse IPv4 fragment {fragf:#x}");
        }
        // DF alone is not a fragment.
        let df = frame(
            "10.0.0.1",
            "10.0.0.2",
            IPPROTO_UDP,
            l4(IPPROTO_UDP, 1111, 53),
        );
        assert_eq!(
            run(prog, &df),
            flow_hash(
                &key("10.0.0.1", "10.0.0.2", IPPROTO_UDP, 1111, 53),
                true,
                seed
            )
        );
        // IPv6: a fragment header, first or later, right after the header or after
        // hop-by-hop options.
        let (a, b) = ("2001:db8::1", "2001:db8::2");
        let l3v6 = flow_hash(&key(a, b, IPPROTO_UDP, 0, 0), false, seed);
        let udp_hdr = l4(IPPROTO_UDP, 4000, 53);
        let cases = [
            frame6_chain(a, b, 44, &[frag6(IPPROTO_UDP, 0, true), udp_hdr.clone()]),
            frame6_chain(a, b, 44, &[frag6(IPPROTO_UDP, 100, false), vec![0xab; 16]]),
            frame6_chain(
                a,
                b,
                0,
                &[ext6(44, 0), frag6(IPPROTO_UDP, 0, true), udp_hdr.clone()],
            ),
            frame6_chain(
                b,
                a,
                44,
                &[frag6(IPPROTO_UDP, 0, true), l4(IPPROTO_UDP, 53, 4000)],
            ),
        ];
        for (i, f) in cases.iter().enumerate() {
            assert_eq!(run(prog, f), l3v6, "IPv6 fragment case {i} seed {seed:#x}");
        }
    }
}

#[test]
fn ipv6_extension_headers_are_skipped() {
    let progs = programs();
    let (a, b) = ("2001:db8:1::10", "2001:db8:2::20");
    for &(seed, ref prog) in &progs {
        let l4v = flow_hash(&key(a, b, IPPROTO_TCP, 33_000, 22), true, seed);
        let l3v = flow_hash(&key(a, b, IPPROTO_TCP, 0, 0), false, seed);
        let t = l4(IPPROTO_TCP, 33_000, 22);
        // hop-by-hop, destination options, routing (various lengths), then TCP.
        let three = frame6_chain(
            a,
            b,
            0,
            &[ext6(60, 0), ext6(43, 2), ext6(IPPROTO_TCP, 1), t.clone()],
        );
        assert_eq!(run(prog, &three), l4v, "three extension headers");
        let four = frame6_chain(
            a,
            b,
            0,
            &[
                ext6(60, 0),
                ext6(43, 0),
                ext6(60, 3),
                ext6(IPPROTO_TCP, 0),
                t.clone(),
            ],
        );
        assert_eq!(run(prog, &four), l4v, "four extension headers");
        // A fifth is beyond the walk: addresses only.
        let five = frame6_chain(
            a,
            b,
            0,
            &[
                ext6(60, 0),
                ext6(43, 0),
                ext6(60, 0),
                ext6(60, 0),
                ext6(IPPROTO_TCP, 0),
                t.clone(),
            ],
        );
        assert_eq!(run(prog, &five), l3v, "five extension headers");
        // AH is not walked: addresses only.
        let mut ah = vec![IPPROTO_TCP, 4, 0, 0];
        ah.resize(24, 0x77);
        let ahf = frame6_chain(a, b, 51, &[ah, t.clone()]);
        assert_eq!(run(prog, &ahf), l3v, "AH");
        // The reverse direction through other extension headers hashes alike.
        let rev = frame6_chain(
            b,
            a,
            60,
            &[ext6(IPPROTO_TCP, 5), l4(IPPROTO_TCP, 22, 33_000)],
        );
        assert_eq!(run(prog, &rev), l4v, "reverse");
        // An extension header cut short: unreadable, 0.
        let mut cut = frame6_chain(a, b, 0, &[ext6(60, 0), ext6(IPPROTO_TCP, 0), t.clone()]);
        cut.truncate(14 + 40 + 8 + 1);
        assert_eq!(run(prog, &cut), 0, "extension header cut short");
        // One that says it is longer than the packet: the ports cannot be read, 0.
        let long = frame6_chain(a, b, 0, &[ext6(IPPROTO_TCP, 200), t.clone()]);
        let long = long[..14 + 40 + 8 + 20].to_vec();
        assert_eq!(
            run(prog, &long),
            0,
            "extension header longer than the packet"
        );
    }
}

#[test]
fn icmp_errors_follow_the_flow_they_quote() {
    let progs = programs();
    for &(seed, ref prog) in &progs {
        // IPv4: A:5353 -> B:53 UDP; the port unreachable B sends back, and a router's
        // time exceeded about A's TCP flow, both to A.
        let (a, b, r) = ("10.0.0.1", "10.9.0.2", "10.5.5.5");
        let udp_flow = flow_hash(&key(a, b, IPPROTO_UDP, 5353, 53), true, seed);
        let quoted = Ip4::new(a, b, IPPROTO_UDP, l4(IPPROTO_UDP, 5353, 53)).bytes();
        let err = frame(b, a, IPPROTO_ICMP, icmp4_port_unreach(&quoted[..28]));
        assert_eq!(
            run(prog, &err),
            udp_flow,
            "ICMP port unreachable, seed {seed:#x}"
        );
        let whole = frame(r, a, IPPROTO_ICMP, icmp4_port_unreach(&quoted));
        assert_eq!(
            run(prog, &whole),
            udp_flow,
            "ICMP error quoting the whole datagram"
        );

        let tcp_flow = flow_hash(&key(a, b, IPPROTO_TCP, 40_001, 443), true, seed);
        let q = Ip4::new(a, b, IPPROTO_TCP, l4(IPPROTO_TCP, 40_001, 443))
            .options(&[1, 1, 1, 0])
            .bytes();
        for ty in [3u8, 4, 5, 11, 12] {
            let mut m = icmp4_port_unreach(&q[..32]);
            m[0] = ty;
            m[1] = 0;
            assert_eq!(
                run(prog, &frame(r, a, IPPROTO_ICMP, m)),
                tcp_flow,
                "ICMP type {ty} with a quoted header with options"
            );
        }
        // Not an error (echo request, reply): the ICMP packet's own addresses.
        for ty in [8u8, 0, 13] {
            let mut m = icmp4_port_unreach(&quoted[..28]);
            m[0] = ty;
            assert_eq!(
                run(prog, &frame(r, a, IPPROTO_ICMP, m)),
                flow_hash(&key(r, a, IPPROTO_ICMP, 0, 0), false, seed),
                "ICMP type {ty}"
            );
        }
        // Quoted without its ports: the quoted addresses.
        let short = frame(r, a, IPPROTO_ICMP, icmp4_port_unreach(&quoted[..22]));
        assert_eq!(
            run(prog, &short),
            flow_hash(&key(a, b, IPPROTO_UDP, 0, 0), false, seed),
            "quote without ports"
        );
        // A quoted fragment: the quoted addresses, as the fragment itself hashed.
        let qf = Ip4::new(a, b, IPPROTO_UDP, l4(IPPROTO_UDP, 5353, 53))
            .frag(MF)
            .bytes();
        let ef = frame(r, a, IPPROTO_ICMP, icmp4_port_unreach(&qf[..28]));
        assert_eq!(
            run(prog, &ef),
            flow_hash(&key(a, b, IPPROTO_UDP, 0, 0), false, seed),
            "quoted fragment"
        );
        // Nothing readable quoted (too short, not IPv4): the error's own addresses.
        let own = flow_hash(&key(r, a, IPPROTO_ICMP, 0, 0), false, seed);
        let bare = frame(r, a, IPPROTO_ICMP, icmp4_port_unreach(&quoted[..12]));
        assert_eq!(run(prog, &bare), own, "quote shorter than an IPv4 header");
        let q6 = Ip6::new(
            "2001:db8::1",
            "2001:db8::2",
            IPPROTO_UDP,
            l4(IPPROTO_UDP, 1, 2),
        )
        .bytes();
        let wrong = frame(r, a, IPPROTO_ICMP, icmp4_port_unreach(&q6[..48]));
        assert_eq!(run(prog, &wrong), own, "IPv6 quoted in ICMP");

        // IPv6: port unreachable, packet too big, time exceeded, parameter problem, about
        // A's UDP flow (one quote through a destination options header).
        let (a6, b6, r6) = ("2001:db8:a::1", "2001:db8:b::2", "2001:db8:ffff::1");
        let flow6 = flow_hash(&key(a6, b6, IPPROTO_UDP, 7000, 7001), true, seed);
        let q6 = Ip6::new(a6, b6, IPPROTO_UDP, l4(IPPROTO_UDP, 7000, 7001)).bytes();
        let q6x = Ip6::new(
            a6,
            b6,
            60,
            [ext6(IPPROTO_UDP, 1), l4(IPPROTO_UDP, 7000, 7001)].concat(),
        )
        .bytes();
        for ty in 1u8..=4 {
            for q in [&q6, &q6x] {
                let mut m = icmp6_port_unreach(q);
                m[0] = ty;
                assert_eq!(
                    run(prog, &frame(r6, a6, IPPROTO_ICMPV6, m)),
                    flow6,
                    "ICMPv6 type {ty}, seed {seed:#x}"
                );
            }
        }
        let from_b = frame(b6, a6, IPPROTO_ICMPV6, icmp6_port_unreach(&q6[..48]));
        assert_eq!(run(prog, &from_b), flow6, "ICMPv6 from the destination");
        // Echo request (128): the packet's own addresses.
        let mut echo = icmp6_port_unreach(&q6[..8]);
        echo[0] = 128;
        assert_eq!(
            run(prog, &frame(r6, a6, IPPROTO_ICMPV6, echo)),
            flow_hash(&key(r6, a6, IPPROTO_ICMPV6, 0, 0), false, seed),
            "ICMPv6 echo"
        );
        // Quoted without ports: the quoted addresses.
        let cut = frame(r6, a6, IPPROTO_ICMPV6, icmp6_port_unreach(&q6[..42]));
        assert_eq!(
            run(prog, &cut),
            flow_hash(&key(a6, b6, IPPROTO_UDP, 0, 0), false, seed),
            "ICMPv6 quote without ports"
        );
        // An ICMPv6 error behind a fragment header is a fragment: its own addresses.
        let fragged = frame6_chain(
            r6,
            a6,
            44,
            &[frag6(IPPROTO_ICMPV6, 0, true), icmp6_port_unreach(&q6)],
        );
        assert_eq!(
            run(prog, &fragged),
            flow_hash(&key(r6, a6, IPPROTO_ICMPV6, 0, 0), false, seed),
            "fragmented ICMPv6 error"
        );
    }
}

#[test]
fn what_is_not_ip_or_cannot_be_read_returns_zero() {
    let progs = programs();
    let prog = &progs[3].1;
    // ARP.
    let mut arp = vec![0, 1, 8, 0, 6, 4, 0, 1];
    arp.extend_from_slice(&SRC_MAC);
    arp.extend_from_slice(&[10, 0, 0, 1]);
    arp.extend_from_slice(&[0; 6]);
    arp.extend_from_slice(&[10, 0, 0, 2]);
    assert_eq!(
        run(prog, &eth([0xff; 6], SRC_MAC, ETH_P_ARP, &arp)),
        0,
        "ARP"
    );
    // A test run's skb->protocol of a tagged frame is 802.1Q (a received packet's tag is off
    // before fanout sees it).
    let f = frame("10.0.0.1", "10.0.0.2", IPPROTO_UDP, l4(IPPROTO_UDP, 1, 2));
    assert_eq!(run(prog, &tagged(ETH_P_8021Q, 5, &f)), 0, "802.1Q");
    // 802.3 length field.
    assert_eq!(
        run(prog, &eth(DST_MAC, SRC_MAC, 64, &[0u8; 64])),
        0,
        "802.3"
    );
    // Not what the EtherType says.
    let v4 = Ip4::new("10.0.0.1", "10.0.0.2", IPPROTO_UDP, l4(IPPROTO_UDP, 1, 2)).bytes();
    let v6 = Ip6::new(
        "2001:db8::1",
        "2001:db8::2",
        IPPROTO_UDP,
        l4(IPPROTO_UDP, 1, 2),
    )
    .bytes();
    assert_eq!(
        run(prog, &eth(DST_MAC, SRC_MAC, ETH_P_IPV6, &v4)),
        0,
        "IPv4 as IPv6"
    );
    assert_eq!(
        run(prog, &eth(DST_MAC, SRC_MAC, ETH_P_IP, &v6)),
        0,
        "IPv6 as IPv4"
    );
    // ihl < 5.
    let mut bad = v4.clone();
    bad[0] = 0x44;
    assert_eq!(
        run(prog, &eth(DST_MAC, SRC_MAC, ETH_P_IP, &bad)),
        0,
        "ihl 4"
    );
    // ihl pointing past the packet: ports unreadable.
    let mut far = v4.clone();
    far[0] = 0x4f;
    far.truncate(40);
    assert_eq!(
        run(prog, &eth(DST_MAC, SRC_MAC, ETH_P_IP, &far)),
        0,
        "ihl 15"
    );
    // TCP, UDP cut before the ports are complete.
    for (l3, hl) in [(&v4, 20), (&v6, 40)] {
        let et = if hl == 20 { ETH_P_IP } else { ETH_P_IPV6 };
        for keep in [hl, hl + 3] {
            let f = eth(DST_MAC, SRC_MAC, et, &l3[..keep]);
            assert_eq!(run(prog, &f), 0, "cut at {keep} of {hl}");
        }
        // ...and just complete.
        let f = eth(DST_MAC, SRC_MAC, et, &l3[..hl + 4]);
        assert_ne!(run(prog, &f), 0, "ports complete");
    }
    // An ICMP packet with no ICMP header.
    let ic = Ip4::new("10.0.0.1", "10.0.0.2", IPPROTO_ICMP, Vec::new()).frame();
    assert_eq!(run(prog, &ic), 0, "ICMP without a header");
    // Headers cut short: what the kernel's test run accepts returns 0.
    for (et, l3, hl) in [(ETH_P_IP, &v4, 20), (ETH_P_IPV6, &v6, 40)] {
        for n in 0..hl {
            let f = eth(DST_MAC, SRC_MAC, et, &l3[..n]);
            match try_run(prog.fd(), &f) {
                Ok(v) => assert_eq!(v, 0, "{n} bytes of {et:#06x}"),
                Err(e) => {
                    assert_eq!(e, libc::EINVAL, "{n} bytes of {et:#06x}");
                    assert!(
                        kernel_refuses(true, &f),
                        "the test run refused {n} bytes of {et:#06x}, testkit does not know"
                    );
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Random and truncated frames

fn random_addr(rng: &mut XorShift64, v6: bool, other: Option<&[u8]>) -> Vec<u8> {
    let n = if v6 { 16 } else { 4 };
    let mut a = vec![0u8; n];
    rng.fill(&mut a);
    if let Some(o) = other {
        match rng.below(6) {
            0 => a.copy_from_slice(o),
            1 => a[..n - 1].copy_from_slice(&o[..n - 1]),
            _ => {}
        }
    }
    a
}

fn random_l4(rng: &mut XorShift64, proto: u8) -> Vec<u8> {
    let (s, d) = (rng.next() as u16, rng.next() as u16);
    match proto {
        IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP => l4(proto, s, d),
        _ => {
            let mut b = vec![0u8; rng.below(24) as usize];
            rng.fill(&mut b);
            b
        }
    }
}

const PROTOS: [u8; 7] = [
    IPPROTO_TCP,
    IPPROTO_UDP,
    IPPROTO_SCTP,
    IPPROTO_ICMP,
    IPPROTO_ICMPV6,
    47,
    0,
];

/// A random IPv4 packet (no Ethernet header), `depth` 0 for an outer one.
fn random_v4(rng: &mut XorShift64, depth: u32) -> Vec<u8> {
    let s = random_addr(rng, false, None);
    let d = random_addr(rng, false, Some(&s));
    let proto = match rng.below(8) {
        0 => IPPROTO_ICMP,
        _ => PROTOS[rng.below(PROTOS.len() as u64) as usize],
    };
    let payload = if proto == IPPROTO_ICMP && depth == 0 {
        let mut m = icmp4_port_unreach(&random_v4(rng, 1));
        m[0] = [3u8, 4, 5, 11, 12, 8, 0][rng.below(7) as usize];
        m
    } else {
        random_l4(rng, proto)
    };
    let mut p = Ip4 {
        src: s.try_into().expect("4 bytes"),
        dst: d.try_into().expect("4 bytes"),
        proto,
        ttl: 64,
        frag: 0x4000,
        options: Vec::new(),
        payload,
    };
    if rng.below(4) == 0 {
        p.options = vec![1; 4 * rng.below(11) as usize];
    }
    if rng.below(5) == 0 {
        p.frag = [MF, MF | 1, 1, 0x1fff, 0x8000][rng.below(5) as usize];
    }
    p.bytes()
}

/// A random chain of IPv6 extension headers ending in `last`: (first type, bytes).
fn random_chain(rng: &mut XorShift64, last: u8) -> (u8, Vec<u8>) {
    let n = rng.below(7);
    let mut types: Vec<u8> = (0..n)
        .map(|_| [0u8, 43, 60, 44, 51][rng.below(5) as usize])
        .collect();
    types.push(last);
    let mut bytes = Vec::new();
    for w in types.windows(2) {
        match w[0] {
            44 => bytes.extend(frag6(w[1], rng.below(3) as u16, rng.below(2) == 0)),
            51 => {
                let mut ah = vec![w[1], 1, 0, 0];
                ah.resize(12, 0);
                bytes.extend(ah);
            }
            _ => bytes.extend(ext6(w[1], rng.below(3) as u8)),
        }
    }
    (types[0], bytes)
}

/// A random IPv6 packet (no Ethernet header).
fn random_v6(rng: &mut XorShift64, depth: u32) -> Vec<u8> {
    let s = random_addr(rng, true, None);
    let d = random_addr(rng, true, Some(&s));
    let proto = match rng.below(8) {
        0 => IPPROTO_ICMPV6,
        _ => PROTOS[rng.below(PROTOS.len() as u64) as usize],
    };
    let l4b = if proto == IPPROTO_ICMPV6 && depth == 0 {
        let mut m = icmp6_port_unreach(&random_v6(rng, 1));
        m[0] = [1u8, 2, 3, 4, 128, 129, 0][rng.below(7) as usize];
        m
    } else {
        random_l4(rng, proto)
    };
    let (first, chain) = if rng.below(3) == 0 {
        random_chain(rng, proto)
    } else {
        (proto, Vec::new())
    };
    Ip6 {
        src: s.try_into().expect("16 bytes"),
        dst: d.try_into().expect("16 bytes"),
        nh: first,
        hop: 64,
        payload: [chain, l4b].concat(),
    }
    .bytes()
}

/// A random frame: mostly IP packets of every kind the program parses, some not IP, some
/// noise; then maybe a few bytes changed, maybe cut short.
fn random_frame(rng: &mut XorShift64) -> Vec<u8> {
    let mut f = match rng.below(10) {
        0..=3 => eth(DST_MAC, SRC_MAC, ETH_P_IP, &random_v4(rng, 0)),
        4..=7 => eth(DST_MAC, SRC_MAC, ETH_P_IPV6, &random_v6(rng, 0)),
        8 => {
            // noise after an IP EtherType (sometimes with a plausible version nibble)
            let mut b = vec![0u8; 14 + rng.below(120) as usize];
            rng.fill(&mut b);
            let et = if rng.below(2) == 0 {
                ETH_P_IP
            } else {
                ETH_P_IPV6
            };
            b[12..14].copy_from_slice(&et.to_be_bytes());
            if b.len() > 14 && rng.below(2) == 0 {
                b[14] = (b[14] & 0x0f) | if et == ETH_P_IP { 0x40 } else { 0x60 };
            }
            b
        }
        _ => {
            // anything: ARP, tagged, random EtherTypes
            let mut b = vec![0u8; 14 + rng.below(80) as usize];
            rng.fill(&mut b);
            if rng.below(2) == 0 {
                let et = [ETH_P_ARP, ETH_P_8021Q, 0x88a8, 0x8847][rng.below(4) as usize];
                b[12..14].copy_from_slice(&et.to_be_bytes());
            }
            b
        }
    };
    if rng.below(3) == 0 {
        for _ in 0..=rng.below(4) {
            let limit = f.len().min(14 + 120) as u64;
            if limit > 14 {
                let i = 14 + rng.below(limit - 14) as usize;
                f[i] = rng.next() as u8;
            }
        }
    }
    if rng.below(2) == 0 {
        let n = 14 + rng.below((f.len() - 14 + 1) as u64) as usize;
        f.truncate(n);
    }
    f
}

#[test]
fn random_and_truncated_frames() {
    let progs = programs();
    let mut rng = XorShift64(0x7066_616e_6f75_7421);
    let (mut zero, mut refused, mut checked) = (0usize, 0usize, 0usize);
    let mut distinct = HashSet::new();
    let mut i = 0;
    while checked < RANDOM_FRAMES {
        let f = random_frame(&mut rng);
        let (seed, prog) = (progs[i % progs.len()].0, &progs[i % progs.len()].1);
        i += 1;
        match try_run(prog.fd(), &f) {
            Ok(v) => {
                assert!(v < 1 << 31, "{v:#x} for {}", mpt_testkit::packet::hex(&f));
                assert_eq!(
                    v,
                    reference(&f, seed),
                    "program and reference differ, seed {seed:#x}, frame {}",
                    mpt_testkit::packet::hex(&f)
                );
                zero += usize::from(v == 0);
                distinct.insert(v);
                checked += 1;
            }
            // The test run itself refuses some short IP frames before the program runs.
            Err(e) if e == libc::EINVAL && kernel_refuses(true, &f) => refused += 1,
            Err(e) => panic!(
                "BPF_PROG_TEST_RUN failed (errno {e}) on {}",
                mpt_testkit::packet::hex(&f)
            ),
        }
    }
    println!(
        "pfanout_steer: {checked} random frames as the reference says ({zero} returned 0, \
         {} distinct values); {refused} short frames refused by the test run itself",
        distinct.len()
    );
    assert!(zero < checked / 2, "{zero} of {checked} returned 0");
    assert!(distinct.len() > checked / 3);
}

// ---------------------------------------------------------------------------------------------
// A real fanout group

fn packet_socket(ifindex: i32) -> OwnedFd {
    // SAFETY: plain socket(2).
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            i32::from(ETH_P_ALL.to_be()),
        )
    };
    assert!(
        fd >= 0,
        "AF_PACKET socket: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_ll is plain data; all zero is valid.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = ETH_P_ALL.to_be();
    sll.sll_ifindex = ifindex;
    // SAFETY: sll outlives the call; its size is passed.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            std::ptr::from_ref(&sll).cast(),
            size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    assert_eq!(
        rc,
        0,
        "bind to ifindex {ifindex}: {}",
        std::io::Error::last_os_error()
    );
    fd
}

fn set_packet_opt(fd: &OwnedFd, opt: libc::c_int, val: u32, what: &str) {
    // SAFETY: val outlives the call; its size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            opt,
            std::ptr::from_ref(&val).cast(),
            size_of::<u32>() as u32,
        )
    };
    assert_eq!(rc, 0, "{what}: {}", std::io::Error::last_os_error());
}

/// Frames waiting on a packet socket, with their sll_pkttype.
fn drain(fd: &OwnedFd) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    loop {
        let mut buf = vec![0u8; 4096];
        // SAFETY: sockaddr_ll is plain data.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut len = size_of::<libc::sockaddr_ll>() as u32;
        // SAFETY: buf and sll outlive the call, their sizes are passed.
        let n = unsafe {
            libc::recvfrom(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                0,
                std::ptr::from_mut(&mut sll).cast(),
                &mut len,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            assert_eq!(e.raw_os_error(), Some(libc::EAGAIN), "recvfrom: {e}");
            return out;
        }
        buf.truncate(n as usize);
        out.push((sll.sll_pkttype, buf));
    }
}

#[test]
fn fanout_group_steers_by_flow() {
    require_root();
    const MEMBERS: usize = 3;
    const PORT: u16 = 9_753;
    let ns = Netns::new("pfanout");
    let seed = 0x5eed_0001;
    let (by_member, outgoing) = ns.run_in_thread(false, move || {
        let steering = Steering::load(seed).expect("load pfanout_steer");
        let lo = 1; // lo is ifindex 1 in a new namespace
        let socks: Vec<OwnedFd> = (0..MEMBERS).map(|_| packet_socket(lo)).collect();
        let group = 0x4d50 | (PACKET_FANOUT_EBPF << 16);
        for s in &socks {
            set_packet_opt(
                s,
                PACKET_FANOUT,
                group,
                "join the fanout group (PACKET_FANOUT_EBPF)",
            );
        }
        let prog_fd = steering.fd().as_raw_fd() as u32;
        set_packet_opt(&socks[0], PACKET_FANOUT_DATA, prog_fd, "PACKET_FANOUT_DATA");
        // The group holds the program now.
        drop(steering);
        for s in &socks {
            drop(drain(s));
        }

        // UDP flows both ways over IPv4 and IPv6. The clients stay open to the end, so that no
        // two of them can be given the same ephemeral port (which would make two flows one).
        let mut clients = Vec::new();
        for host in ["127.0.0.1", "::1"] {
            let server = UdpSocket::bind((host, PORT)).expect("bind the server");
            server
                .set_read_timeout(Some(Duration::from_secs(2)))
                .expect("timeout");
            for _ in 0..8 {
                let c = UdpSocket::bind((host, 0)).expect("bind a client");
                c.send_to(b"ping", (host, PORT)).expect("send");
                let mut b = [0u8; 16];
                let (_, from): (usize, SocketAddr) = server.recv_from(&mut b).expect("recv");
                server.send_to(b"pong", from).expect("reply");
                c.set_read_timeout(Some(Duration::from_secs(2)))
                    .expect("timeout");
                c.recv(&mut b).expect("the reply");
                clients.push(c);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
        let mut by_member: Vec<Vec<(u8, Vec<u8>)>> = Vec::new();
        for s in &socks {
            by_member.push(drain(s));
        }
        let outgoing = by_member
            .iter()
            .flatten()
            .filter(|(t, _)| *t == PACKET_OUTGOING)
            .count();
        (by_member, outgoing)
    });

    let mut flows: HashMap<FlowKey, HashSet<usize>> = HashMap::new();
    let mut frames = 0;
    for (member, got) in by_member.iter().enumerate() {
        for (_, f) in got {
            let Some((t, _)) = parse_ethernet(f) else {
                continue;
            };
            if t.proto != IPPROTO_UDP || (t.sport != PORT && t.dport != PORT) {
                continue;
            }
            let k = FlowKey::from_addrs(t.src, t.dst, t.proto, t.sport, t.dport).expect("family");
            let want = flow_hash(&k, true, seed) as usize % MEMBERS;
            assert_eq!(
                member, want,
                "{t:?} went to member {member}, the hash says {want}"
            );
            // one entry per flow, either direction
            let canon = if (t.src, t.sport) <= (t.dst, t.dport) {
                k
            } else {
                FlowKey::from_addrs(t.dst, t.src, t.proto, t.dport, t.sport).expect("family")
            };
            flows.entry(canon).or_default().insert(member);
            frames += 1;
        }
    }
    // 16 flows, each seen 4 times (ping and pong, leaving and arriving on lo).
    assert_eq!(flows.len(), 16, "flows seen ({frames} frames): {flows:?}");
    assert_eq!(frames, 64, "frames seen");
    assert!(outgoing >= 32, "{outgoing} outgoing copies");
    assert!(flows.values().all(|m| m.len() == 1));
    let used: HashSet<usize> = flows.values().flatten().copied().collect();
    println!(
        "pfanout_steer in a fanout group of {MEMBERS}: {frames} frames of {} flows, members used \
         {used:?}, each flow on one member as the hash says",
        flows.len()
    );
    assert!(used.len() > 1, "every flow on one member: {used:?}");
}

#[test]
fn cost_per_packet() {
    let progs = programs();
    let prog = &progs[1].1;
    let q = Ip4::new("10.0.0.1", "10.0.0.2", IPPROTO_UDP, l4(IPPROTO_UDP, 1, 2)).bytes();
    let (a, b) = ("2001:db8::1", "2001:db8::2");
    let cases = [
        (
            "v4 tcp",
            frame("10.0.0.1", "10.0.0.2", IPPROTO_TCP, l4(IPPROTO_TCP, 1, 2)),
        ),
        ("v6 udp", frame(a, b, IPPROTO_UDP, l4(IPPROTO_UDP, 1, 2))),
        (
            "v6 4 ext + tcp",
            frame6_chain(
                a,
                b,
                0,
                &[
                    ext6(60, 0),
                    ext6(43, 0),
                    ext6(60, 0),
                    ext6(IPPROTO_TCP, 0),
                    l4(IPPROTO_TCP, 1, 2),
                ],
            ),
        ),
        (
            "v4 icmp error",
            frame(
                "10.0.0.9",
                "10.0.0.1",
                IPPROTO_ICMP,
                icmp4_port_unreach(&q[..28]),
            ),
        ),
    ];
    let mut out = Vec::new();
    for (what, f) in &cases {
        let mut opts = libbpf_sys::bpf_test_run_opts {
            sz: size_of::<libbpf_sys::bpf_test_run_opts>() as _,
            data_in: f.as_ptr().cast(),
            data_size_in: f.len() as u32,
            repeat: 100_000,
            ..Default::default()
        };
        // SAFETY: opts and the frame outlive the call; sz is its size.
        let rc = unsafe { libbpf_sys::bpf_prog_test_run_opts(prog.fd().as_raw_fd(), &mut opts) };
        assert_eq!(rc, 0, "test run of {what}");
        out.push(format!("{what}: {} ns", opts.duration));
    }
    println!(
        "pfanout_steer per packet (BPF_PROG_TEST_RUN average, incl. its overhead): {}",
        out.join(", ")
    );
}

//! Packets for tests and benchmarks: builders of Ethernet, IPv4, IPv6, UDP, TCP and ICMP
//! headers with their checksums, and a parser that reads a frame's 5-tuple (and the embedded
//! one of an ICMP error) independently of the code under test.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `ETH_P_IP`.
pub const ETH_P_IP: u16 = 0x0800;
/// `ETH_P_IPV6`.
pub const ETH_P_IPV6: u16 = 0x86DD;
/// `ETH_P_ARP`.
pub const ETH_P_ARP: u16 = 0x0806;
/// `ETH_P_8021Q`.
pub const ETH_P_8021Q: u16 = 0x8100;
/// `ETH_P_8021AD`.
pub const ETH_P_8021AD: u16 = 0x88A8;
/// `IPPROTO_ICMP`.
pub const IPPROTO_ICMP: u8 = 1;
/// `IPPROTO_TCP`.
pub const IPPROTO_TCP: u8 = 6;
/// `IPPROTO_UDP`.
pub const IPPROTO_UDP: u8 = 17;
/// `IPPROTO_ICMPV6`.
pub const IPPROTO_ICMPV6: u8 = 58;
/// IPv4 "don't fragment".
pub const DF: u16 = 0x4000;
/// IPv4 "more fragments".
pub const MF: u16 = 0x2000;

/// Default destination MAC of [`Ip4::frame`] and [`Ip6::frame`].
pub const DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x00, 0x01];
/// Default source MAC of [`Ip4::frame`] and [`Ip6::frame`].
pub const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x00, 0xaa];

/// The one's complement sum of `data` as big-endian 16-bit words, folded (an odd last byte is
/// padded with zero).
pub fn csum_sum(data: &[u8]) -> u32 {
    let mut s: u64 = data
        .chunks(2)
        .map(|c| u64::from(u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)])))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u32
}

/// The Internet checksum of `data`.
pub fn inet_csum(data: &[u8]) -> u16 {
    !(csum_sum(data) as u16)
}

/// The Internet checksum of several pieces laid end to end (each of even length but the last).
pub fn inet_csum_parts(parts: &[&[u8]]) -> u16 {
    inet_csum(&parts.concat())
}

/// Whether a header including its checksum sums to 0xffff.
pub fn csum_ok(hdr: &[u8]) -> bool {
    csum_sum(hdr) == 0xffff
}

/// The TCP/UDP/ICMPv6 pseudo-header of a segment of `len` bytes (RFC 793, RFC 8200 8.1).
pub fn pseudo_header(src: IpAddr, dst: IpAddr, proto: u8, len: usize) -> Vec<u8> {
    let mut p = Vec::with_capacity(40);
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            p.extend_from_slice(&s.octets());
            p.extend_from_slice(&d.octets());
            p.extend_from_slice(&[0, proto]);
            p.extend_from_slice(&(len as u16).to_be_bytes());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            p.extend_from_slice(&s.octets());
            p.extend_from_slice(&d.octets());
            p.extend_from_slice(&(len as u32).to_be_bytes());
            p.extend_from_slice(&[0, 0, 0, proto]);
        }
        _ => panic!("pseudo-header of mixed families {src} -> {dst}"),
    }
    p
}

/// Whether the transport checksum of `seg` (TCP, UDP or ICMPv6 with its checksum in place)
/// is right for the addresses. A UDP checksum of 0 over IPv4 means none and counts as right.
pub fn l4_csum_ok(src: IpAddr, dst: IpAddr, proto: u8, seg: &[u8]) -> bool {
    if proto == IPPROTO_UDP && src.is_ipv4() && seg.get(6..8) == Some(&[0, 0]) {
        return true;
    }
    let ph = pseudo_header(src, dst, proto, seg.len());
    csum_sum(&[ph.as_slice(), seg].concat()) == 0xffff
}

/// Fill in a TCP (or IPv6 UDP) checksum left at 0: a sender's stack completes it before the
/// packet leaves. IPv4 UDP keeps 0 (no checksum). `addrs` is source and destination back to
/// back.
pub fn fill_l4_csum(proto: u8, addrs: &[u8], l4: &mut [u8], v6: bool) {
    let at = match proto {
        IPPROTO_TCP => 16,
        IPPROTO_UDP if v6 => 6,
        _ => return,
    };
    if l4.len() < at + 2 || l4[at] != 0 || l4[at + 1] != 0 {
        return;
    }
    let mut pseudo = addrs.to_vec();
    pseudo.extend_from_slice(&[0, proto]);
    pseudo.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    let mut all = pseudo;
    all.extend_from_slice(l4);
    let c = inet_csum(&all);
    let c = if c == 0 && proto == IPPROTO_UDP {
        0xffff
    } else {
        c
    };
    l4[at..at + 2].copy_from_slice(&c.to_be_bytes());
}

/// An Ethernet frame.
pub fn eth(dst: [u8; 6], src: [u8; 6], ethertype: u16, l3: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + l3.len());
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(l3);
    f
}

/// `frame` with a VLAN tag inserted after the MACs.
pub fn tagged(tpid: u16, tci: u16, frame: &[u8]) -> Vec<u8> {
    let mut f = frame[..12].to_vec();
    f.extend_from_slice(&tpid.to_be_bytes());
    f.extend_from_slice(&tci.to_be_bytes());
    f.extend_from_slice(&frame[12..]);
    f
}

/// An IPv4 packet to build: header checksum computed, a TCP checksum left at 0 filled in.
#[derive(Clone, Debug)]
pub struct Ip4 {
    /// Source.
    pub src: [u8; 4],
    /// Destination.
    pub dst: [u8; 4],
    /// Protocol.
    pub proto: u8,
    /// TTL.
    pub ttl: u8,
    /// Flags and fragment offset.
    pub frag: u16,
    /// Options (a multiple of 4 bytes).
    pub options: Vec<u8>,
    /// What follows the header.
    pub payload: Vec<u8>,
}

impl Ip4 {
    /// A packet from `src` to `dst` (dotted quads), TTL 64, DF.
    pub fn new(src: &str, dst: &str, proto: u8, payload: Vec<u8>) -> Ip4 {
        let a = |s: &str| -> [u8; 4] { s.parse::<Ipv4Addr>().expect("ipv4").octets() };
        Ip4 {
            src: a(src),
            dst: a(dst),
            proto,
            ttl: 64,
            frag: DF,
            options: Vec::new(),
            payload,
        }
    }
    /// With this TTL.
    pub fn ttl(mut self, ttl: u8) -> Ip4 {
        self.ttl = ttl;
        self
    }
    /// With these flags and fragment offset.
    pub fn frag(mut self, frag: u16) -> Ip4 {
        self.frag = frag;
        self
    }
    /// With these options.
    pub fn options(mut self, o: &[u8]) -> Ip4 {
        self.options = o.to_vec();
        self
    }
    /// The packet (identification 0x1234).
    pub fn bytes(&self) -> Vec<u8> {
        self.bytes_with_id(0x1234)
    }
    /// The packet with this identification.
    pub fn bytes_with_id(&self, id: u16) -> Vec<u8> {
        let hl = 20 + self.options.len();
        assert!(hl % 4 == 0 && hl <= 60, "IPv4 options length");
        let tot = (hl + self.payload.len()) as u16;
        let mut h = vec![0u8; 20];
        h[0] = 0x40 | (hl / 4) as u8;
        h[2..4].copy_from_slice(&tot.to_be_bytes());
        h[4..6].copy_from_slice(&id.to_be_bytes());
        h[6..8].copy_from_slice(&self.frag.to_be_bytes());
        h[8] = self.ttl;
        h[9] = self.proto;
        h[12..16].copy_from_slice(&self.src);
        h[16..20].copy_from_slice(&self.dst);
        h.extend_from_slice(&self.options);
        let c = inet_csum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        let mut payload = self.payload.clone();
        if self.frag & 0x1fff == 0 {
            let addrs = [self.src, self.dst].concat();
            fill_l4_csum(self.proto, &addrs, &mut payload, false);
        }
        h.extend_from_slice(&payload);
        h
    }
    /// In an Ethernet frame from [`SRC_MAC`] to [`DST_MAC`].
    pub fn frame(&self) -> Vec<u8> {
        eth(DST_MAC, SRC_MAC, ETH_P_IP, &self.bytes())
    }
}

/// A UDP/IPv4 frame of a fixed length, for a generator's template or a benchmark's test run:
/// Ethernet, IPv4 (identification 0, DF, header checksum), UDP and a zero payload, with a
/// complete UDP checksum (0 becomes 0xffff) or, without `udp_csum`, none (0).
#[derive(Clone, Copy, Debug)]
pub struct Udp4Frame {
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// UDP source port.
    pub sport: u16,
    /// UDP destination port.
    pub dport: u16,
    /// TTL.
    pub ttl: u8,
    /// A UDP checksum, or 0.
    pub udp_csum: bool,
}

impl Udp4Frame {
    /// The frame, `N` bytes (at least the 42 of the headers).
    pub fn bytes<const N: usize>(&self) -> [u8; N] {
        assert!(N >= 42, "a UDP/IPv4 frame has at least 42 bytes");
        let payload = vec![0u8; N - 42];
        let mut seg = udp_segment(
            self.src.into(),
            self.dst.into(),
            self.sport,
            self.dport,
            &payload,
        );
        if !self.udp_csum {
            seg[6..8].copy_from_slice(&[0, 0]);
        }
        let ip = Ip4 {
            src: self.src.octets(),
            dst: self.dst.octets(),
            proto: IPPROTO_UDP,
            ttl: self.ttl,
            frag: DF,
            options: Vec::new(),
            payload: seg,
        };
        let mut f = [0u8; N];
        f.copy_from_slice(&eth(
            self.dst_mac,
            self.src_mac,
            ETH_P_IP,
            &ip.bytes_with_id(0),
        ));
        f
    }
}

/// An IPv6 packet to build: a TCP or UDP checksum left at 0 filled in.
#[derive(Clone, Debug)]
pub struct Ip6 {
    /// Source.
    pub src: [u8; 16],
    /// Destination.
    pub dst: [u8; 16],
    /// Next header.
    pub nh: u8,
    /// Hop limit.
    pub hop: u8,
    /// What follows the header.
    pub payload: Vec<u8>,
}

impl Ip6 {
    /// A packet from `src` to `dst`, hop limit 64.
    pub fn new(src: &str, dst: &str, nh: u8, payload: Vec<u8>) -> Ip6 {
        let a = |s: &str| -> [u8; 16] { s.parse::<Ipv6Addr>().expect("ipv6").octets() };
        Ip6 {
            src: a(src),
            dst: a(dst),
            nh,
            hop: 64,
            payload,
        }
    }
    /// With this hop limit.
    pub fn hop(mut self, hop: u8) -> Ip6 {
        self.hop = hop;
        self
    }
    /// The packet.
    pub fn bytes(&self) -> Vec<u8> {
        let mut h = vec![0x60, 0, 0, 0];
        h.extend_from_slice(&(self.payload.len() as u16).to_be_bytes());
        h.push(self.nh);
        h.push(self.hop);
        h.extend_from_slice(&self.src);
        h.extend_from_slice(&self.dst);
        let mut payload = self.payload.clone();
        let addrs = [self.src, self.dst].concat();
        fill_l4_csum(self.nh, &addrs, &mut payload, true);
        h.extend_from_slice(&payload);
        h
    }
    /// In an Ethernet frame from [`SRC_MAC`] to [`DST_MAC`].
    pub fn frame(&self) -> Vec<u8> {
        eth(DST_MAC, SRC_MAC, ETH_P_IPV6, &self.bytes())
    }
}

/// A UDP header and `n` payload bytes of 0xab (checksum 0).
pub fn udp(sport: u16, dport: u16, n: usize) -> Vec<u8> {
    let mut u = Vec::with_capacity(8 + n);
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&((8 + n) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.resize(8 + n, 0xab);
    u
}

/// A UDP header and `payload` with a complete checksum (0 becomes 0xffff).
pub fn udp_segment(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let len = 8 + payload.len();
    let mut seg = Vec::with_capacity(len);
    seg.extend_from_slice(&sport.to_be_bytes());
    seg.extend_from_slice(&dport.to_be_bytes());
    seg.extend_from_slice(&(len as u16).to_be_bytes());
    seg.extend_from_slice(&[0, 0]);
    seg.extend_from_slice(payload);
    let pseudo = pseudo_header(src, dst, IPPROTO_UDP, len);
    let c = match inet_csum_parts(&[&pseudo, &seg]) {
        0 => 0xffff,
        c => c,
    };
    seg[6..8].copy_from_slice(&c.to_be_bytes());
    seg
}

/// A 20-byte TCP header (ACK), checksum 0.
pub fn tcp(sport: u16, dport: u16) -> Vec<u8> {
    let mut t = Vec::with_capacity(20);
    t.extend_from_slice(&sport.to_be_bytes());
    t.extend_from_slice(&dport.to_be_bytes());
    t.extend_from_slice(&1u32.to_be_bytes());
    t.extend_from_slice(&1u32.to_be_bytes());
    t.extend_from_slice(&[0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0]);
    t
}

/// An ICMP destination unreachable / port unreachable quoting `quoted` (IP header + 8 bytes).
pub fn icmp4_port_unreach(quoted: &[u8]) -> Vec<u8> {
    let mut m = vec![3, 3, 0, 0, 0, 0, 0, 0];
    m.extend_from_slice(quoted);
    let c = inet_csum(&m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    m
}

/// An ICMPv6 destination unreachable / port unreachable quoting `quoted` (checksum 0).
pub fn icmp6_port_unreach(quoted: &[u8]) -> Vec<u8> {
    let mut m = vec![1, 4, 0, 0, 0, 0, 0, 0];
    m.extend_from_slice(quoted);
    m
}

/// Bytes as lowercase hex.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A MAC address as `aa:bb:cc:dd:ee:ff`.
pub fn hexmac(m: &[u8]) -> String {
    m.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// A flow's 5-tuple. Protocols without ports (ICMP, …) and fragments have ports 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowTuple {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// IP protocol (after IPv6 extension headers).
    pub proto: u8,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// Parse an Ethernet frame (one optional VLAN tag): the IPv4/IPv6 packet's 5-tuple and, for an
/// ICMP/ICMPv6 error, the 5-tuple of the packet embedded in it. `None` for anything else.
pub fn parse_ethernet(frame: &[u8]) -> Option<(FlowTuple, Option<FlowTuple>)> {
    let mut ethertype = be16(frame, 12)?;
    let mut off = 14;
    if ethertype == 0x8100 || ethertype == 0x88a8 {
        ethertype = be16(frame, 16)?;
        off = 18;
    }
    let l3 = frame.get(off..)?;
    match ethertype {
        0x0800 | 0x86dd => parse_ip(l3),
        _ => None,
    }
}

/// Parse an IPv4/IPv6 packet (no link header): its 5-tuple and, for an ICMP/ICMPv6 error, the
/// 5-tuple of the embedded packet.
pub fn parse_ip(pkt: &[u8]) -> Option<(FlowTuple, Option<FlowTuple>)> {
    let (t, l4) = ip_header(pkt, true)?;
    let inner = match (t.proto, l4.first()) {
        // ICMP: destination unreachable, source quench, redirect, time exceeded, parameter problem.
        (1, Some(3 | 4 | 5 | 11 | 12)) | (58, Some(1..=4)) => {
            let (it, _) = ip_header(l4.get(8..)?, false)?;
            Some(it)
        }
        _ => None,
    };
    Some((t, inner))
}

/// The 5-tuple of an IP packet and its L4 bytes. `outer`: trim to the header's length (link
/// padding); embedded packets are truncated, so their length field is not trusted.
fn ip_header(pkt: &[u8], outer: bool) -> Option<(FlowTuple, &[u8])> {
    let (src, dst, proto, l4, ports_ok) = match pkt.first()? >> 4 {
        4 => {
            let ihl = usize::from(pkt.first()? & 0x0f) * 4;
            if ihl < 20 || pkt.len() < ihl {
                return None;
            }
            let total = usize::from(be16(pkt, 2)?);
            let end = if outer && total >= ihl && total <= pkt.len() {
                total
            } else {
                pkt.len()
            };
            let src: [u8; 4] = pkt.get(12..16)?.try_into().ok()?;
            let dst: [u8; 4] = pkt.get(16..20)?.try_into().ok()?;
            let first_frag = be16(pkt, 6)? & 0x1fff == 0;
            (
                IpAddr::from(src),
                IpAddr::from(dst),
                pkt[9],
                &pkt[ihl..end],
                first_frag,
            )
        }
        6 => {
            if pkt.len() < 40 {
                return None;
            }
            let plen = usize::from(be16(pkt, 4)?);
            let end = if outer && plen != 0 && 40 + plen <= pkt.len() {
                40 + plen
            } else {
                pkt.len()
            };
            let src: [u8; 16] = pkt.get(8..24)?.try_into().ok()?;
            let dst: [u8; 16] = pkt.get(24..40)?.try_into().ok()?;
            let mut nh = pkt[6];
            let mut off = 40;
            let mut first_frag = true;
            for _ in 0..8 {
                let hdr = pkt.get(off..end)?;
                let len = match nh {
                    0 | 43 | 60 => (usize::from(*hdr.get(1)?) + 1) * 8,
                    44 => {
                        first_frag &= be16(hdr, 2)? & 0xfff8 == 0;
                        8
                    }
                    51 => (usize::from(*hdr.get(1)?) + 2) * 4,
                    _ => break,
                };
                nh = *hdr.first()?;
                off += len;
            }
            (
                IpAddr::from(src),
                IpAddr::from(dst),
                nh,
                pkt.get(off..end)?,
                first_frag,
            )
        }
        _ => return None,
    };
    // TCP, UDP, DCCP, SCTP, UDP-Lite: ports are the first 4 bytes.
    let has_ports = matches!(proto, 6 | 17 | 33 | 132 | 136) && ports_ok;
    let (sport, dport) = match (has_ports, be16(l4, 0), be16(l4, 2)) {
        (true, Some(s), Some(d)) => (s, d),
        _ => (0, 0),
    };
    Some((
        FlowTuple {
            src,
            dst,
            proto,
            sport,
            dport,
        },
        l4,
    ))
}

/// What an independent parser makes of the transport checksum of an Ethernet frame carrying
/// IPv6 TCP, UDP or ICMPv6 (no extension headers) or IPv4 TCP or UDP. `partial`: the sender's
/// kernel left it to offload (`CHECKSUM_PARTIAL`), so the field must hold the folded
/// pseudo-header sum for the packet's addresses (0x0000 and 0xffff alike); otherwise the
/// whole checksum must verify (an IPv4 or IPv6 UDP checksum of 0: no checksum, `None`).
/// `None` for anything else (not such a packet, or captured short).
pub fn l4_csum_verdict(frame: &[u8], partial: bool) -> Option<bool> {
    let mut et = be16(frame, 12)?;
    let mut off = 14;
    if et == ETH_P_8021Q || et == ETH_P_8021AD {
        et = be16(frame, 16)?;
        off = 18;
    }
    let l3 = frame.get(off..)?;
    let (src, dst, proto, seg): (IpAddr, IpAddr, u8, &[u8]) = match et {
        ETH_P_IPV6 => {
            let plen = usize::from(be16(l3, 4)?);
            let s: [u8; 16] = l3.get(8..24)?.try_into().ok()?;
            let d: [u8; 16] = l3.get(24..40)?.try_into().ok()?;
            (
                IpAddr::from(s),
                IpAddr::from(d),
                *l3.get(6)?,
                l3.get(40..40 + plen)?,
            )
        }
        ETH_P_IP => {
            let ihl = usize::from(l3.first()? & 0x0f) * 4;
            let total = usize::from(be16(l3, 2)?);
            let s: [u8; 4] = l3.get(12..16)?.try_into().ok()?;
            let d: [u8; 4] = l3.get(16..20)?.try_into().ok()?;
            (
                IpAddr::from(s),
                IpAddr::from(d),
                *l3.get(9)?,
                l3.get(ihl..total)?,
            )
        }
        _ => return None,
    };
    let at = match proto {
        IPPROTO_TCP => 16,
        IPPROTO_UDP => 6,
        IPPROTO_ICMPV6 if dst.is_ipv6() => 2,
        _ => return None,
    };
    let field = be16(seg, at)?;
    if proto == IPPROTO_UDP && field == 0 && !partial {
        return None;
    }
    if partial {
        let ph = pseudo_header(src, dst, proto, seg.len());
        let sum = csum_sum(&ph) as u16;
        let zero = |v: u16| v == 0 || v == 0xffff;
        return Some(field == sum || (zero(field) && zero(sum)));
    }
    Some(l4_csum_ok(src, dst, proto, seg))
}

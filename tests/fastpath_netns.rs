//! Root integration tests of the router fast path (issue 4, "Correctness tests"): destinations
//! that are not managed routes, forwarded by the kernel FIB from the dataplane's programs.
//!
//! Topology: hosts `h1` – router `r` – `h2` over veth (`TwoPaths`: `h1:eth0` 10.1.0.2 /
//! 2001:db8:1::2 ↔ `r:va` .1 / ::1, `r:vb` 10.2.0.1 / 2001:db8:2::1 ↔ `h2:eth0` .2 / ::2), or
//! `FourPaths` (c → r → n0..n3) for the kernel's own multipath. The hosts keep their default
//! offloads (nothing here runs ethtool; native XDP attaches with `prepare-peers`, which is
//! mproute's business). Every test runs for each mode: `auto`, `tc`, `xdp-generic`, `xdp`.
//!
//! Two kinds of UDP traffic ([`Kind`]): from an ordinary socket (over veth the host's stack
//! leaves the checksum to "offload": `CHECKSUM_PARTIAL`), and from a raw socket with the checksum
//! computed here (complete, no offload state, as packets from a NIC). The XDP program hands the
//! first kind up (to the tc program attached next to it) and forwards the second itself, so both
//! paths are exercised in the XDP modes.
//!
//! The oracles are not mproute's: the receiving sockets (payloads compared), the kernel's error
//! reports on the sending socket (`IP_RECVERR` / `IPV6_RECVERR`), `ip -j route get … iif …` for
//! the kernel's multipath choice, the kernel's own forwarding counters (`ForwDatagrams`) and
//! neighbour table. The dataplane's counters only show that it, not the kernel, did the work.

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpt_testkit::traffic::{self, FlowCounter, FlowSpec, FourPaths};
use mpt_testkit::{require_root, Netns, Tool, TwoPaths, XorShift64};
use nix::sys::socket::{
    bind, sendto, socket, AddressFamily, MsgFlags, SockFlag, SockProtocol, SockType,
    SockaddrStorage,
};
use serde_json::Value;

const MPROUTE: &str = env!("CARGO_BIN_EXE_mproute");
/// mproute, run as an operator would (`-n NS`), its JSON decoded.
const MP: Tool = Tool::new(MPROUTE);

/// Short namespace tag for a mode.
fn tag(mode: &str) -> &'static str {
    match mode {
        "auto" => "au",
        "tc" => "tc",
        "xdp-generic" => "xg",
        "xdp" => "xd",
        m => panic!("unknown mode {m}"),
    }
}

fn fam(v6: bool) -> &'static str {
    if v6 {
        "IPv6"
    } else {
        "IPv4"
    }
}

fn h1_addr(v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 2))
    } else {
        IpAddr::V4(Ipv4Addr::new(10, 1, 0, 2))
    }
}

fn h2_addr(v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 2))
    } else {
        IpAddr::V4(Ipv4Addr::new(10, 2, 0, 2))
    }
}

/// The router's address on `va` (towards h1) or `vb` (towards h2).
fn r_addr(v6: bool, towards_h2: bool) -> IpAddr {
    let k = if towards_h2 { 2 } else { 1 };
    if v6 {
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, k, 0, 0, 0, 0, 1))
    } else {
        IpAddr::V4(Ipv4Addr::new(10, k as u8, 0, 1))
    }
}

/// h1 – r – h2. `r` forwards (v4 and v6) and sends ICMP errors without rate limit.
#[derive(Debug)]
struct Line {
    r: Netns,
    h1: Netns,
    h2: Netns,
}

impl Line {
    /// `permanent_neigh`: permanent neighbour entries on both links in both directions (no
    /// ARP/ND during the test); otherwise the kernel resolves them.
    fn new(tag: &str, permanent_neigh: bool) -> Line {
        let TwoPaths { r, a: h1, b: h2 } = TwoPaths::new(tag);
        for (h, gw4, gw6) in [
            (&h1, "10.1.0.1", "2001:db8:1::1"),
            (&h2, "10.2.0.1", "2001:db8:2::1"),
        ] {
            h.ip_ok(&["route", "add", "default", "via", gw4, "dev", "eth0"]);
            h.ip_ok(&["-6", "route", "add", "default", "via", gw6, "dev", "eth0"]);
        }
        traffic::sysctl(&r, "net.ipv4.ip_forward", "1");
        traffic::sysctl(&r, "net.ipv6.conf.all.forwarding", "1");
        traffic::sysctl(&r, "net.ipv4.icmp_ratelimit", "0");
        traffic::sysctl(&r, "net.ipv6.icmp.ratelimit", "0");
        if permanent_neigh {
            let (h1_mac, h2_mac) = (traffic::mac(&h1, "eth0"), traffic::mac(&h2, "eth0"));
            let (va_mac, vb_mac) = (traffic::mac(&r, "va"), traffic::mac(&r, "vb"));
            for (ns, addr, mac, dev) in [
                (&r, "10.1.0.2", &h1_mac, "va"),
                (&r, "2001:db8:1::2", &h1_mac, "va"),
                (&r, "10.2.0.2", &h2_mac, "vb"),
                (&r, "2001:db8:2::2", &h2_mac, "vb"),
                (&h1, "10.1.0.1", &va_mac, "eth0"),
                (&h1, "2001:db8:1::1", &va_mac, "eth0"),
                (&h2, "10.2.0.1", &vb_mac, "eth0"),
                (&h2, "2001:db8:2::1", &vb_mac, "eth0"),
            ] {
                ns.ip_ok(&[
                    "neigh",
                    "replace",
                    addr,
                    "lladdr",
                    mac,
                    "dev",
                    dev,
                    "nud",
                    "permanent",
                ]);
            }
        }
        Line { r, h1, h2 }
    }

    /// The dataplane on both of r's devices in `mode` (peers prepared for native XDP).
    fn attach(&self, mode: &str) -> Value {
        attach(
            &self.r,
            &["va", "vb"],
            mode,
            &[(&self.h1, "eth0"), (&self.h2, "eth0")],
        )
    }
}

/// `mproute -n R -j dataplane attach dev DEV… MODE [prepare-peers]`; checks every device got an
/// attachment in the mode asked for (any for `auto`) and, for native XDP, that the veth peers
/// redirected frames land on are ready (GRO on, read with `ETHTOOL_GGRO` in their namespace).
fn attach(r: &Netns, devs: &[&str], mode: &str, peers: &[(&Netns, &str)]) -> Value {
    let mut a = vec!["dataplane", "attach"];
    for d in devs {
        a.extend(["dev", d]);
    }
    a.push(mode);
    if mode == "xdp" {
        a.push("prepare-peers");
    }
    let v = MP.json(r, &a);
    let att = v["attachments"].as_array().cloned().unwrap_or_default();
    for d in devs {
        let modes: Vec<&str> = att
            .iter()
            .filter(|x| x["dev"] == *d)
            .filter_map(|x| x["mode"].as_str())
            .collect();
        if mode == "auto" {
            assert!(!modes.is_empty(), "auto: nothing attached to {d}: {v}");
        } else {
            assert!(modes.contains(&mode), "{mode}: {d} has {modes:?}: {v}");
        }
    }
    if mode == "xdp" {
        // how it tells checksums left to offload: from the sender's skb on a veth, where the
        // kernel's veth has a buffer to ask (6.3+); verified in software on the matrix's
        // older kernels
        let old = mpt_testkit::matrix::series_in(&["5.10", "6.1"]);
        let want = if old {
            "TCP/UDP checksums verified in software"
        } else {
            "checksum state read from the sender's skb"
        };
        for x in att.iter().filter(|x| x["mode"] == "xdp") {
            let why = x["why"].as_str().unwrap_or("");
            assert!(why.contains(want), "xdp on a veth: {why}");
        }
        for (ns, dev) in peers {
            assert!(
                gro_on(ns, dev),
                "xdp prepare-peers: GRO is off on {dev} in {} (attach notes: {})",
                ns.name(),
                v["notes"]
            );
        }
    }
    eprintln!(
        "{mode}: attached {:?}, notes {}",
        att.iter()
            .map(|x| format!("{}={}", x["dev"], x["mode"]))
            .collect::<Vec<_>>(),
        v["notes"]
    );
    v
}

/// Whether GRO is on for `dev` in `ns` (`SIOCETHTOOL` / `ETHTOOL_GGRO`: read only).
fn gro_on(ns: &Netns, dev: &str) -> bool {
    #[repr(C)]
    struct EthtoolValue {
        cmd: u32,
        data: u32,
    }
    const SIOCETHTOOL: libc::c_ulong = 0x8946;
    const ETHTOOL_GGRO: u32 = 0x2b;
    let dev = dev.to_string();
    traffic::in_netns(ns, move || {
        // SAFETY: a datagram socket we own for the ioctl; ifreq and the value outlive the call.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
            assert!(fd >= 0, "socket for SIOCETHTOOL");
            let mut v = EthtoolValue {
                cmd: ETHTOOL_GGRO,
                data: 0,
            };
            let mut ifr: libc::ifreq = std::mem::zeroed();
            for (i, b) in dev.bytes().take(libc::IFNAMSIZ - 1).enumerate() {
                ifr.ifr_name[i] = b as libc::c_char;
            }
            ifr.ifr_ifru.ifru_data = (&mut v as *mut EthtoolValue).cast();
            let rc = libc::ioctl(fd, SIOCETHTOOL, &mut ifr);
            libc::close(fd);
            assert!(rc == 0, "ETHTOOL_GGRO on {dev}");
            v.data != 0
        }
    })
}

/// The dataplane's counters by verdict.
fn counters(r: &Netns) -> BTreeMap<String, u64> {
    let v = MP.json(r, &["dataplane", "show"]);
    v["counters"]
        .as_object()
        .unwrap_or_else(|| panic!("dataplane show has no counters: {v}"))
        .iter()
        .map(|(k, n)| (k.clone(), n.as_u64().expect("a counter is a number")))
        .collect()
}

/// How much counter `key` grew from `a` to `b`.
fn grew(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>, key: &str) -> u64 {
    let get = |m: &BTreeMap<String, u64>| {
        *m.get(key)
            .unwrap_or_else(|| panic!("no counter {key:?} in {m:?}"))
    };
    get(b).saturating_sub(get(a))
}

/// The kernel's own count of forwarded packets in `ns` (`Ip: ForwDatagrams`,
/// `Ip6OutForwDatagrams`): packets the dataplane redirects never reach it.
fn kernel_forwarded(ns: &Netns, v6: bool) -> u64 {
    let file = if v6 {
        "/proc/net/snmp6"
    } else {
        "/proc/net/snmp"
    };
    let o = ns.exec("cat", &[file]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    if v6 {
        return text
            .lines()
            .find_map(|l| {
                let mut w = l.split_whitespace();
                (w.next() == Some("Ip6OutForwDatagrams")).then(|| w.next()?.parse().ok())?
            })
            .unwrap_or_else(|| panic!("no Ip6OutForwDatagrams in {file}: {text}"));
    }
    let ip: Vec<Vec<&str>> = text
        .lines()
        .filter(|l| l.starts_with("Ip:"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    let (Some(names), Some(values)) = (ip.first(), ip.get(1)) else {
        panic!("no Ip: lines in {file}: {text}");
    };
    let i = names
        .iter()
        .position(|n| *n == "ForwDatagrams")
        .unwrap_or_else(|| panic!("no ForwDatagrams in {file}: {text}"));
    values
        .get(i)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("bad ForwDatagrams in {file}: {text}"))
}

/// `setsockopt` of an int.
fn setopt(fd: RawFd, level: libc::c_int, name: libc::c_int, val: libc::c_int) {
    // SAFETY: `val` is a live c_int of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&val as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert!(
        rc == 0,
        "setsockopt({level}, {name}, {val}): {}",
        std::io::Error::last_os_error()
    );
}

/// A port no listener of this process had before: a closed socket's port can stay taken for a
/// moment (a child forked by a concurrent test holds the descriptor until it execs), so
/// listeners never rebind one.
fn fresh_port() -> u16 {
    static NEXT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(20000);
    NEXT.fetch_add(1, Ordering::SeqCst)
}

/// A UDP socket bound to `at` in `ns`, with a large receive buffer and a short read timeout.
fn udp_listen(ns: &Netns, at: SocketAddr) -> UdpSocket {
    traffic::in_netns(ns, move || {
        let s = UdpSocket::bind(at).unwrap_or_else(|e| panic!("bind UDP {at}: {e}"));
        setopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            8 << 20,
        );
        s.set_read_timeout(Some(Duration::from_millis(50)))
            .expect("SO_RCVTIMEO");
        s
    })
}

/// Send every payload from (`src`, any port) in `ns` to `to`.
fn send_udp(ns: &Netns, src: IpAddr, to: SocketAddr, payloads: &[Vec<u8>]) {
    traffic::in_netns(ns, || {
        let s = UdpSocket::bind(SocketAddr::new(src, 0))
            .unwrap_or_else(|e| panic!("bind UDP {src}: {e}"));
        for p in payloads {
            s.send_to(p, to)
                .unwrap_or_else(|e| panic!("send UDP {src} -> {to}: {e}"));
        }
    });
}

/// Receive until `n` datagrams came or `within` passed, then 100 ms more (duplicates show).
fn recv_datagrams(s: &UdpSocket, n: usize, within: Duration) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let deadline = Instant::now() + within;
    let mut extra_until: Option<Instant> = None;
    let mut buf = vec![0u8; 65536];
    loop {
        let now = Instant::now();
        if got.len() >= n && extra_until.is_none() {
            extra_until = Some(now + Duration::from_millis(100));
        }
        if now >= deadline || extra_until.is_some_and(|t| now >= t) {
            return got;
        }
        match s.recv_from(&mut buf) {
            Ok((len, _)) => got.push(buf[..len].to_vec()),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(e) => panic!("recv UDP: {e}"),
        }
    }
}

/// `n` distinct payloads of `size` bytes.
fn payloads(what: &str, n: usize, size: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let mut p = format!("{what} #{i} ").into_bytes();
            p.resize(size.max(p.len()), b'.');
            p
        })
        .collect()
}

/// Assert the same multiset of datagrams arrived as was sent.
fn assert_same(what: &str, sent: &[Vec<u8>], mut got: Vec<Vec<u8>>) {
    let mut sent = sent.to_vec();
    sent.sort();
    got.sort();
    if sent != got {
        let missing = sent.iter().filter(|p| !got.contains(p)).count();
        let unexpected = got.iter().filter(|p| !sent.contains(p)).count();
        let mut distinct = got.clone();
        distinct.dedup();
        panic!(
            "{what}: sent {} datagrams, received {} ({missing} missing, {unexpected} not sent, \
             {} duplicates)",
            sent.len(),
            got.len(),
            got.len() - distinct.len()
        );
    }
}

/// How a host sends its UDP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A UDP socket with the host's default offloads: over veth, `CHECKSUM_PARTIAL` (the
    /// checksum field holds only the pseudo-header sum).
    Offload,
    /// A raw socket sending a UDP header with its checksum computed here: complete, no offload
    /// state (as from a NIC). Source port [`RAW_SPORT`] unless given.
    Complete,
}

const KINDS: [Kind; 2] = [Kind::Offload, Kind::Complete];
const RAW_SPORT: u16 = 40000;

/// A raw IPPROTO_UDP socket bound to `src`, in the calling thread's namespace.
fn raw_udp_socket(src: IpAddr) -> OwnedFd {
    let family = if src.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    let fd = socket(
        family,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::Udp,
    )
    .unwrap_or_else(|e| panic!("raw UDP socket: {e}"));
    bind(
        fd.as_raw_fd(),
        &SockaddrStorage::from(SocketAddr::new(src, 0)),
    )
    .unwrap_or_else(|e| panic!("bind raw socket to {src}: {e}"));
    fd
}

/// Send one complete-checksum datagram on a raw socket.
fn raw_send(fd: &OwnedFd, src: IpAddr, sport: u16, to: SocketAddr, payload: &[u8]) {
    let seg = mpt_testkit::packet::udp_segment(src, to.ip(), sport, to.port(), payload);
    let n = sendto(
        fd.as_raw_fd(),
        &seg,
        &SockaddrStorage::from(SocketAddr::new(to.ip(), 0)),
        MsgFlags::empty(),
    )
    .unwrap_or_else(|e| panic!("send raw UDP {src} -> {to}: {e}"));
    assert_eq!(n, seg.len(), "short raw send");
}

/// Send every payload from `src` in `ns` to `to`, the `kind` way.
fn send(ns: &Netns, kind: Kind, src: IpAddr, to: SocketAddr, payloads: &[Vec<u8>]) {
    match kind {
        Kind::Offload => send_udp(ns, src, to, payloads),
        Kind::Complete => traffic::in_netns(ns, || {
            let fd = raw_udp_socket(src);
            for p in payloads {
                raw_send(&fd, src, RAW_SPORT, to, p);
            }
        }),
    }
}

/// One datagram per flow, the `kind` way.
fn send_flows(ns: &Netns, kind: Kind, flows: &[FlowSpec]) {
    match kind {
        Kind::Offload => traffic::send_udp_flows(ns, flows, 1),
        Kind::Complete => traffic::in_netns(ns, || {
            let Some(src) = flows.first().map(|f| f.src) else {
                return;
            };
            let fd = raw_udp_socket(src);
            for (i, f) in flows.iter().enumerate() {
                let payload = format!("mpt raw flow {i}");
                raw_send(
                    &fd,
                    f.src,
                    f.sport,
                    SocketAddr::new(f.dst, f.dport),
                    payload.as_bytes(),
                );
            }
        }),
    }
}

/// Counters that grew from `a` to `b` for packets handed to the stack, leaving out what the
/// links carry on their own (ARP: not-ip; MLD/ND to multicast MACs: not-host, or ttl/local
/// for its hop limit 1 or 255 and its multicast destination).
/// (`neigh-check`, XDP's one packet a second per neighbour through the kernel's neighbour
/// output, is the dataplane's own business: not counted here; `neighbour_changes_its_mac`
/// tests it.)
fn passed_up(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>) -> Vec<(String, u64)> {
    b.keys()
        .filter(|k| {
            !matches!(
                k.as_str(),
                "redirected" | "not-ip" | "not-host" | "ttl" | "local" | "neigh-check"
            )
        })
        .map(|k| (k.clone(), grew(a, b, k)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// Whether `mode` must forward `kind` traffic without handing any of it to the stack: tc
/// (and auto, tc on veth) always; the XDP modes for complete checksums (the others go up to
/// the tc program next to them, counted as l4-csum).
fn forwards_alone(mode: &str, kind: Kind) -> bool {
    kind == Kind::Complete || !mode.starts_with("xdp")
}

// ---------------------------------------------------------------------------------------------
// 1. IPv4 and IPv6 forwarding across r.

fn udp_forwarding(mode: &str) {
    require_root();
    let l = Line::new(&format!("fw{}", tag(mode)), true);
    l.attach(mode);
    for (v6, kind) in [false, true]
        .into_iter()
        .flat_map(|v| KINDS.map(|k| (v, k)))
    {
        const N: usize = 300;
        let what = format!("{mode} {} {kind:?}", fam(v6));
        let to = SocketAddr::new(h2_addr(v6), fresh_port());
        let rx = udp_listen(&l.h2, to);
        let sent = payloads(&format!("{what} forward"), N, 200);
        let (before, kf) = (counters(&l.r), kernel_forwarded(&l.r, v6));
        send(&l.h1, kind, h1_addr(v6), to, &sent);
        let got = recv_datagrams(&rx, N, Duration::from_secs(3));
        assert_same(&format!("{what}: h1 -> h2"), &sent, got);
        let after = counters(&l.r);
        let red = grew(&before, &after, "redirected");
        let kernel = kernel_forwarded(&l.r, v6) - kf;
        let up = passed_up(&before, &after);
        eprintln!(
            "{what}: {N} datagrams arrived; redirected +{red}, kernel forwarded +{kernel}, \
             handed up {up:?}"
        );
        assert!(
            red >= N as u64,
            "{what}: redirected grew by {red}, not by the {N} datagrams: {before:?} -> {after:?}"
        );
        assert_eq!(
            kernel, 0,
            "{what}: the kernel forwarded {kernel} packets itself (dataplane: {after:?})"
        );
        if forwards_alone(mode, kind) {
            assert!(up.is_empty(), "{what}: handed to the stack: {up:?}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 2. TCP with default offloads, data verified.

/// FNV-1a, 64 bits.
#[derive(Debug, Clone, Copy)]
struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn update(&mut self, b: &[u8]) {
        for x in b {
            self.0 ^= u64::from(*x);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// `len` bytes of a xorshift64 stream (no period a forwarding bug could hide in).
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut v = vec![0; len];
    XorShift64(seed | 1).fill(&mut v);
    v
}

const TCP_IO_TIMEOUT: Duration = Duration::from_secs(4);

/// The server in h2: accept one connection (until `stop`), read to EOF, reply with the length
/// and FNV-1a hash of what it read (16 bytes, little endian).
fn tcp_server(listener: TcpListener, stop: Arc<AtomicBool>) -> Result<(u64, u64), String> {
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let mut s = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if stop.load(Ordering::SeqCst) {
                    return Err("server: no connection arrived".into());
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(format!("server accept: {e}")),
        }
    };
    s.set_nonblocking(false).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(TCP_IO_TIMEOUT))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(TCP_IO_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let mut h = Fnv::new();
    let mut total = 0u64;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                h.update(&buf[..n]);
                total += n as u64;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("server read after {total} bytes: {e}")),
        }
    }
    let mut reply = total.to_le_bytes().to_vec();
    reply.extend_from_slice(&h.0.to_le_bytes());
    s.write_all(&reply)
        .map_err(|e| format!("server reply after {total} bytes: {e}"))?;
    Ok((total, h.0))
}

/// Send `len` pattern bytes from h1 to a server in h2 over TCP; the server's reply must carry
/// the length and hash of exactly what was sent. Returns the transfer time.
fn tcp_transfer(l: &Line, v6: bool, len: usize) -> Result<Duration, String> {
    let to = SocketAddr::new(h2_addr(v6), 5201);
    let listener = traffic::in_netns(&l.h2, move || {
        TcpListener::bind(to).unwrap_or_else(|e| panic!("listen TCP {to}: {e}"))
    });
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = Arc::clone(&stop);
    let server = std::thread::spawn(move || tcp_server(listener, stop2));
    let data = pattern(len, if v6 { 0x6666 } else { 0x4444 });
    let mut want = Fnv::new();
    want.update(&data);
    let start = Instant::now();
    let client = traffic::in_netns(&l.h1, move || -> Result<Vec<u8>, String> {
        let mut c = TcpStream::connect_timeout(&to, Duration::from_secs(3))
            .map_err(|e| format!("connect {to}: {e}"))?;
        c.set_write_timeout(Some(TCP_IO_TIMEOUT))
            .map_err(|e| e.to_string())?;
        c.set_read_timeout(Some(TCP_IO_TIMEOUT))
            .map_err(|e| e.to_string())?;
        c.write_all(&data)
            .map_err(|e| format!("client write of {} bytes: {e}", data.len()))?;
        c.shutdown(std::net::Shutdown::Write)
            .map_err(|e| format!("client shutdown: {e}"))?;
        let mut reply = Vec::new();
        c.read_to_end(&mut reply)
            .map_err(|e| format!("client read of the server's reply: {e}"))?;
        Ok(reply)
    });
    let elapsed = start.elapsed();
    stop.store(true, Ordering::SeqCst);
    let served = server
        .join()
        .unwrap_or_else(|_| Err("server thread panicked".into()));
    let reply = match (client, served) {
        (Ok(r), Ok(_)) => r,
        (c, s) => return Err(format!("client: {c:?}; server: {s:?}")),
    };
    let mut expect = (len as u64).to_le_bytes().to_vec();
    expect.extend_from_slice(&want.0.to_le_bytes());
    if reply != expect {
        return Err(format!(
            "the server received other bytes than were sent: reply {reply:02x?}, expected \
             {expect:02x?} (length, FNV-1a)"
        ));
    }
    Ok(elapsed)
}

fn tcp_data(mode: &str) {
    require_root();
    let l = Line::new(&format!("tcp{}", tag(mode)), true);
    l.attach(mode);
    let mut failures = Vec::new();
    for v6 in [false, true] {
        const LEN: usize = 2 << 20;
        let (before, kf) = (counters(&l.r), kernel_forwarded(&l.r, v6));
        let r = tcp_transfer(&l, v6, LEN);
        let after = counters(&l.r);
        let red = grew(&before, &after, "redirected");
        let kernel = kernel_forwarded(&l.r, v6) - kf;
        match r {
            Ok(t) => {
                eprintln!(
                    "{mode} {}: TCP {LEN} bytes verified in {:.1} ms; redirected +{red}, kernel \
                     forwarded +{kernel}",
                    fam(v6),
                    t.as_secs_f64() * 1e3
                );
                // tc keeps the skb (checksum state, GSO) and must carry TCP itself; the XDP
                // modes may hand CHECKSUM_PARTIAL packets to the stack: correct, not fast.
                if (red == 0 || kernel > 0) && matches!(mode, "auto" | "tc") {
                    failures.push(format!(
                        "{}: data arrived, but the dataplane redirected {red} packets and the \
                         kernel forwarded {kernel}: {after:?}",
                        fam(v6)
                    ));
                }
            }
            Err(e) => failures.push(format!(
                "{}: {e} (redirected +{red}; counters after {after:?})",
                fam(v6)
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{mode}: TCP from hosts with default offloads through r: {failures:#?}"
    );
}

// ---------------------------------------------------------------------------------------------
// 3. The kernel's multipath (an unmanaged route), by addresses (policy 0), then with ports
// (policy 1): `ip route get` is the oracle.

fn kernel_multipath(mode: &str) {
    require_root();
    let t = FourPaths::new(&format!("mp{}", tag(mode)));
    for v6 in [false, true] {
        let mut args: Vec<String> = Vec::new();
        if v6 {
            args.push("-6".into());
        }
        args.extend(["route", "add"].map(String::from));
        args.push(if v6 {
            traffic::DEST_PREFIX_V6.into()
        } else {
            traffic::DEST_PREFIX_V4.into()
        });
        for i in 0..4 {
            args.extend([
                "nexthop".into(),
                "via".into(),
                if v6 {
                    FourPaths::nexthop_v6(i)
                } else {
                    FourPaths::nexthop_v4(i)
                },
                "dev".into(),
                FourPaths::dev(i),
            ]);
        }
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        t.r.ip_ok(&a);
    }
    let peers: Vec<(&Netns, &str)> = t.n.iter().map(|n| (n, "eth0")).collect();
    attach(&t.r, &["vc"], mode, &peers);
    // Policy 0 (a namespace's default): IPv4 lookups hash addresses only, so one host pair's
    // flows all leave by the nexthop `ip route get` names (the flow cache keeps one answer for
    // them, port-less). (IPv6's policy 0 also hashes the flow label, which the sending socket
    // sets and `ip route get` cannot be given: IPv6 is checked with ports, below.)
    multipath_flows(&t, mode, false, Kind::Complete, 23000, false);
    // Policy 1, right after, while that answer is fresh: the next packets are asked with their
    // ports and spread as the kernel spreads them.
    traffic::sysctl(&t.r, "net.ipv4.fib_multipath_hash_policy", "1");
    traffic::sysctl(&t.r, "net.ipv6.fib_multipath_hash_policy", "1");
    for (v6, kind) in [false, true]
        .into_iter()
        .flat_map(|v| KINDS.map(|k| (v, k)))
    {
        let base = match (v6, kind) {
            (false, Kind::Offload) => 21000,
            (false, Kind::Complete) => 22000,
            (true, Kind::Offload) => 41000,
            (true, Kind::Complete) => 42000,
        };
        multipath_flows(&t, mode, v6, kind, base, true);
    }
}

/// 256 flows from the client to the destination of `t`'s four-path route, each checked against
/// `ip route get` (its nexthop), all forwarded by the dataplane; `spread`: the policy hashes
/// ports, every nexthop is used, else one.
fn multipath_flows(t: &FourPaths, mode: &str, v6: bool, kind: Kind, base: u16, spread: bool) {
    let flows = traffic::flows(256, v6, base);
    let before = counters(&t.r);
    let start = Instant::now();
    let fc: Vec<FlowCounter> = t.n.iter().map(|n| FlowCounter::start(n, "eth0")).collect();
    send_flows(&t.c, kind, &flows);
    let counts = FlowCounter::stop_all(fc);
    let seen = traffic::per_flow_counts(&flows, 17, &counts);
    let oracle = route_get_all(&t.r, "vc", &flows);
    let after = counters(&t.r);
    let mut share = [0usize; 4];
    let mut wrong = Vec::new();
    for ((f, c), dev) in flows.iter().zip(&seen).zip(&oracle) {
        let want = (0..4)
            .find(|i| FourPaths::dev(*i) == *dev)
            .unwrap_or_else(|| panic!("ip route get sends {f:?} to {dev}, not a nexthop"));
        let hit: Vec<usize> = (0..4).filter(|i| c[*i] > 0).collect();
        assert_eq!(
            c.iter().sum::<u64>(),
            1,
            "{mode} {} {kind:?}: flow {f:?} arrived {c:?} times at n0..n3",
            fam(v6)
        );
        share[hit[0]] += 1;
        if hit != [want] {
            wrong.push((f.sport, f.dport, want, hit[0]));
        }
    }
    let up = passed_up(&before, &after);
    eprintln!(
        "{mode} {} {kind:?}: {} flows per nexthop {share:?} in {:.2} s; redirected +{}, \
         handed up {up:?}",
        fam(v6),
        flows.len(),
        start.elapsed().as_secs_f64(),
        grew(&before, &after, "redirected")
    );
    assert!(
        wrong.is_empty(),
        "{mode} {} {kind:?}: {} of {} flows left by another nexthop than `ip route get` \
         says, e.g. (sport, dport, kernel's, taken): {:?}",
        fam(v6),
        wrong.len(),
        flows.len(),
        &wrong[..wrong.len().min(8)]
    );
    if spread {
        assert!(
            share.iter().all(|s| *s > 0),
            "{mode} {}: the kernel's multipath used every nexthop: {share:?}",
            fam(v6)
        );
    } else {
        assert_eq!(
            share.iter().filter(|s| **s > 0).count(),
            1,
            "{mode} {}: policy 0 hashes addresses only, one host pair's flows on one nexthop: \
             {share:?}",
            fam(v6)
        );
    }
    assert!(
        grew(&before, &after, "redirected") >= flows.len() as u64,
        "{mode} {} {kind:?}: the dataplane forwarded the flows, not the kernel: \
         {before:?} -> {after:?}",
        fam(v6)
    );
    if forwards_alone(mode, kind) {
        assert!(
            up.is_empty(),
            "{mode} {} {kind:?}: handed up {up:?}",
            fam(v6)
        );
    }
}

/// The device `ip -j route get DST from SRC iif IIF ipproto udp sport S dport D` names for
/// every flow (one `ip -batch -`).
fn route_get_all(r: &Netns, iif: &str, flows: &[FlowSpec]) -> Vec<String> {
    let lines: Vec<String> = flows
        .iter()
        .map(|f| {
            format!(
                "route get {} from {} iif {iif} ipproto udp sport {} dport {}",
                f.dst, f.src, f.sport, f.dport
            )
        })
        .collect();
    let devs: Vec<String> =
        mpt_testkit::batch_json_lines("ip", &["-n", r.name(), "-j", "-batch", "-"], &lines)
            .iter()
            .map(|j| {
                j[0]["dev"]
                    .as_str()
                    .unwrap_or_else(|| panic!("route get without dev: {j}"))
                    .to_string()
            })
            .collect();
    assert_eq!(devs.len(), flows.len(), "one answer per route get");
    devs
}

// ---------------------------------------------------------------------------------------------
// 4. and 5. ICMP errors from the kernel: read back with IP_RECVERR / IPV6_RECVERR.

/// One entry of a socket's error queue.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SockErr {
    errno: i32,
    /// `SO_EE_ORIGIN_ICMP` (2) or `SO_EE_ORIGIN_ICMP6` (3).
    origin: u8,
    icmp_type: u8,
    icmp_code: u8,
    /// The MTU for "fragmentation needed" / "packet too big".
    info: u32,
    /// Who sent the ICMP error.
    offender: Option<IpAddr>,
}

const SO_EE_ORIGIN_ICMP: u8 = 2;
const SO_EE_ORIGIN_ICMP6: u8 = 3;

/// Parse `struct sock_extended_err` and the offender address after it.
fn parse_ee(b: &[u8]) -> Option<SockErr> {
    let u32_at = |o: usize| Some(u32::from_ne_bytes(b.get(o..o + 4)?.try_into().ok()?));
    let off = b.get(16..).unwrap_or_default();
    let family = off
        .get(0..2)
        .map(|f| u16::from_ne_bytes([f[0], f[1]]))
        .unwrap_or(0);
    let offender = match i32::from(family) {
        libc::AF_INET => {
            let a: [u8; 4] = off.get(4..8)?.try_into().ok()?;
            Some(IpAddr::from(a))
        }
        libc::AF_INET6 => {
            let a: [u8; 16] = off.get(8..24)?.try_into().ok()?;
            Some(IpAddr::from(a))
        }
        _ => None,
    };
    Some(SockErr {
        errno: u32_at(0)? as i32,
        origin: *b.get(4)?,
        icmp_type: *b.get(5)?,
        icmp_code: *b.get(6)?,
        info: u32_at(8)?,
        offender,
    })
}

/// The first error-queue entry of `fd` within `within`, or None.
fn recv_err(fd: RawFd, within: Duration) -> Option<SockErr> {
    let deadline = Instant::now() + within;
    loop {
        let mut data = [0u8; 2048];
        let mut ctrl = [0u64; 64];
        let mut iov = libc::iovec {
            iov_base: data.as_mut_ptr().cast(),
            iov_len: data.len(),
        };
        // SAFETY: msghdr is plain data; all-zero is valid.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = ctrl.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&ctrl);
        // SAFETY: msg points to live buffers of the sizes it states.
        let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
        if n >= 0 {
            // SAFETY: walking the control messages the kernel wrote into `ctrl`, within
            // msg_controllen, with the libc macros.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&msg);
                while !c.is_null() {
                    let (level, ty) = ((*c).cmsg_level, (*c).cmsg_type);
                    if (level == libc::SOL_IP && ty == libc::IP_RECVERR)
                        || (level == libc::SOL_IPV6 && ty == libc::IPV6_RECVERR)
                    {
                        let len =
                            ((*c).cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize);
                        let b = std::slice::from_raw_parts(libc::CMSG_DATA(c), len);
                        if let Some(e) = parse_ee(b) {
                            return Some(e);
                        }
                    }
                    c = libc::CMSG_NXTHDR(&msg, c);
                }
            }
            continue;
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// From h1, one datagram of `size` payload bytes to h2, the `kind` way, with `prep` applied to
/// the socket (IP_RECVERR / IPV6_RECVERR set already); returns what came back on its error
/// queue (raw sockets get ICMP errors about their protocol as UDP sockets do).
fn send_and_read_error(
    l: &Line,
    to: SocketAddr,
    kind: Kind,
    size: usize,
    prep: impl FnOnce(RawFd) + Send,
) -> Option<SockErr> {
    let v6 = to.is_ipv6();
    let from = h1_addr(v6);
    traffic::in_netns(&l.h1, move || {
        let payload = vec![0x5au8; size];
        let (udp, raw) = match kind {
            Kind::Offload => (
                Some(UdpSocket::bind(SocketAddr::new(from, 0)).expect("bind UDP in h1")),
                None,
            ),
            Kind::Complete => (None, Some(raw_udp_socket(from))),
        };
        let fd = match (&udp, &raw) {
            (Some(u), _) => u.as_raw_fd(),
            (_, Some(r)) => r.as_raw_fd(),
            _ => unreachable!("one socket"),
        };
        if v6 {
            setopt(fd, libc::SOL_IPV6, libc::IPV6_RECVERR, 1);
        } else {
            setopt(fd, libc::SOL_IP, libc::IP_RECVERR, 1);
        }
        prep(fd);
        match (&udp, &raw) {
            (Some(u), _) => {
                u.send_to(&payload, to)
                    .unwrap_or_else(|e| panic!("send {size} bytes to {to}: {e}"));
            }
            (_, Some(r)) => raw_send(r, from, RAW_SPORT, to, &payload),
            _ => unreachable!("one socket"),
        }
        recv_err(fd, Duration::from_secs(3))
    })
}

fn ttl_expiry(mode: &str) {
    require_root();
    let l = Line::new(&format!("ttl{}", tag(mode)), true);
    l.attach(mode);
    for (v6, kind) in [false, true]
        .into_iter()
        .flat_map(|v| KINDS.map(|k| (v, k)))
    {
        let what = format!("{mode} {} {kind:?}", fam(v6));
        let to = SocketAddr::new(h2_addr(v6), fresh_port());
        let rx = udp_listen(&l.h2, to);
        let before = counters(&l.r);
        let e = send_and_read_error(&l, to, kind, 64, move |fd| {
            if v6 {
                setopt(fd, libc::SOL_IPV6, libc::IPV6_UNICAST_HOPS, 1);
            } else {
                setopt(fd, libc::SOL_IP, libc::IP_TTL, 1);
            }
        });
        let after = counters(&l.r);
        let e = e.unwrap_or_else(|| {
            panic!("{what}: no ICMP error came back for TTL 1 (dataplane {before:?} -> {after:?})")
        });
        eprintln!("{what}: TTL 1 -> {e:?}");
        let want = if v6 {
            (SO_EE_ORIGIN_ICMP6, 3, 0) // ICMPV6_TIME_EXCEED, ICMPV6_EXC_HOPLIMIT
        } else {
            (SO_EE_ORIGIN_ICMP, 11, 0) // ICMP_TIME_EXCEEDED, ICMP_EXC_TTL
        };
        assert_eq!((e.origin, e.icmp_type, e.icmp_code), want, "{what}: {e:?}");
        assert_eq!(e.errno, libc::EHOSTUNREACH, "{what}: {e:?}");
        assert_eq!(
            e.offender,
            Some(r_addr(v6, false)),
            "{what}: the router answered"
        );
        // once, in every mode (with XDP, by the tc program that meets the packet next)
        assert_eq!(
            grew(&before, &after, "ttl"),
            1,
            "{what}: the dataplane counts the packet it passed up as ttl once: {before:?} -> {after:?}"
        );
        let leaked = recv_datagrams(&rx, 1, Duration::from_millis(200));
        assert!(leaked.is_empty(), "{what}: a TTL 1 packet reached h2");
    }
}

fn mtu_exceeded(mode: &str) {
    require_root();
    let l = Line::new(&format!("mtu{}", tag(mode)), true);
    l.r.ip_ok(&["link", "set", "vb", "mtu", "1280"]);
    l.attach(mode);
    for (v6, kind) in [false, true]
        .into_iter()
        .flat_map(|v| KINDS.map(|k| (v, k)))
    {
        let what = format!("{mode} {} {kind:?}", fam(v6));
        let to = SocketAddr::new(h2_addr(v6), fresh_port());
        let rx = udp_listen(&l.h2, to);
        // h1 remembers the path MTU it learnt from the previous round: forget it.
        l.h1.ip_ok(&[if v6 { "-6" } else { "-4" }, "route", "flush", "cache"]);
        let before = counters(&l.r);
        let e = send_and_read_error(&l, to, kind, 1400, move |fd| {
            if v6 {
                setopt(
                    fd,
                    libc::SOL_IPV6,
                    libc::IPV6_MTU_DISCOVER,
                    libc::IPV6_PMTUDISC_DO,
                );
            } else {
                setopt(
                    fd,
                    libc::SOL_IP,
                    libc::IP_MTU_DISCOVER,
                    libc::IP_PMTUDISC_DO,
                );
            }
        });
        let after = counters(&l.r);
        let e = e.unwrap_or_else(|| {
            panic!(
                "{what}: no ICMP error came back for 1400 bytes over MTU 1280 (dataplane \
                 {before:?} -> {after:?})"
            )
        });
        eprintln!("{what}: 1400 bytes, DF -> {e:?}");
        let want = if v6 {
            (SO_EE_ORIGIN_ICMP6, 2, 0, 1280) // ICMPV6_PKT_TOOBIG
        } else {
            (SO_EE_ORIGIN_ICMP, 3, 4, 1280) // ICMP_DEST_UNREACH, ICMP_FRAG_NEEDED
        };
        assert_eq!(
            (e.origin, e.icmp_type, e.icmp_code, e.info),
            want,
            "{what}: {e:?}"
        );
        assert_eq!(e.errno, libc::EMSGSIZE, "{what}: {e:?}");
        assert_eq!(e.offender, Some(r_addr(v6, false)), "{what}");
        assert!(
            grew(&before, &after, "frag-needed") >= 1,
            "{what}: the dataplane passed it up as frag-needed: {before:?} -> {after:?}"
        );
        let leaked = recv_datagrams(&rx, 1, Duration::from_millis(200));
        assert!(
            leaked.is_empty(),
            "{what}: the oversized DF datagram reached h2 ({} bytes)",
            leaked.first().map_or(0, Vec::len)
        );
        // What fits still takes the fast path.
        let sent = payloads(&format!("{what} fits"), 20, 1200);
        let before = counters(&l.r);
        send(&l.h1, kind, h1_addr(v6), to, &sent);
        assert_same(
            &format!("{what}: 1200-byte datagrams over MTU 1280"),
            &sent,
            recv_datagrams(&rx, sent.len(), Duration::from_secs(2)),
        );
        let after = counters(&l.r);
        let red = grew(&before, &after, "redirected");
        assert!(
            red >= sent.len() as u64,
            "{what}: 1200-byte datagrams: redirected +{red}"
        );
        if forwards_alone(mode, kind) {
            let up = passed_up(&before, &after);
            assert!(
                up.is_empty(),
                "{what}: 1200-byte datagrams handed up: {up:?}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 6. Unresolved neighbours get resolved by the kernel, then the flow takes the fast path.

/// r's neighbour entry for `addr` on `dev`: (lladdr, states).
fn neighbour(r: &Netns, addr: IpAddr, dev: &str) -> Option<(String, Vec<String>)> {
    let j = r.ip_json(&["neigh", "show", "to", &addr.to_string(), "dev", dev]);
    let e = j.get(0)?;
    let ll = e["lladdr"].as_str()?.to_string();
    let st = e["state"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    Some((ll, st))
}

/// h2's second address (a second neighbour entry on r to resolve).
fn h2_second(v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 3))
    } else {
        IpAddr::V4(Ipv4Addr::new(10, 2, 0, 3))
    }
}

fn neighbour_resolution(mode: &str) {
    require_root();
    let l = Line::new(&format!("nb{}", tag(mode)), false);
    l.h2.ip_ok(&["addr", "add", "10.2.0.3/24", "dev", "eth0"]);
    l.h2.ip_ok(&["addr", "add", "2001:db8:2::3/64", "dev", "eth0", "nodad"]);
    l.attach(mode);
    let h2_mac = traffic::mac(&l.h2, "eth0");
    let xdp = mode.starts_with("xdp");
    // Each of h2's addresses is a neighbour of its own on r: the first one is met with a
    // complete-checksum packet (which the XDP program handles itself), the second with an
    // ordinary one.
    for v6 in [false, true] {
        for (dst, first_kind) in [
            (h2_addr(v6), Kind::Complete),
            (h2_second(v6), Kind::Offload),
        ] {
            let what = format!("{mode} {} {dst} (first packet {first_kind:?})", fam(v6));
            let to = SocketAddr::new(dst, fresh_port());
            let rx = udp_listen(&l.h2, to);
            assert_eq!(
                neighbour(&l.r, dst, "vb").map(|n| n.0),
                None,
                "{what}: r knows it already"
            );
            // The first packet: nobody knows its MAC yet.
            let c0 = counters(&l.r);
            let first = payloads(&format!("{what} first"), 1, 100);
            send(&l.h1, first_kind, h1_addr(v6), to, &first);
            assert_same(
                &format!("{what}: the first packet"),
                &first,
                recv_datagrams(&rx, 1, Duration::from_secs(3)),
            );
            let c1 = counters(&l.r);
            let n = neighbour(&l.r, dst, "vb");
            eprintln!(
                "{what}: redirected +{}, no-neigh +{}, l4-csum +{}; neighbour {n:?}",
                grew(&c0, &c1, "redirected"),
                grew(&c0, &c1, "no-neigh"),
                // (report only: the counter exists since ABI 4)
                c1.get("l4-csum").unwrap_or(&0) - c0.get("l4-csum").unwrap_or(&0),
            );
            let (ll, states) = n.unwrap_or_else(|| panic!("{what}: r did not resolve it"));
            assert_eq!(ll, h2_mac, "{what}: {states:?}");
            assert!(
                !states.iter().any(|s| s == "FAILED" || s == "INCOMPLETE"),
                "{what}: {states:?}"
            );
            if xdp && first_kind == Kind::Complete {
                assert!(
                    grew(&c0, &c1, "no-neigh") >= 1,
                    "{what}: XDP hands a packet for an unresolved neighbour to the stack: \
                     {c0:?} -> {c1:?}"
                );
            } else if mode == "tc" {
                assert!(
                    grew(&c0, &c1, "redirected") >= 1,
                    "{what}: tc resolves with bpf_redirect_neigh: {c0:?} -> {c1:?}"
                );
            }
            // Later packets, both kinds: the fast path.
            const N: usize = 100;
            let mut total = 0;
            for kind in KINDS {
                let later = payloads(&format!("{what} later {kind:?}"), N, 100);
                let b = counters(&l.r);
                send(&l.h1, kind, h1_addr(v6), to, &later);
                assert_same(
                    &format!("{what}: later {kind:?} packets"),
                    &later,
                    recv_datagrams(&rx, N, Duration::from_secs(3)),
                );
                let a = counters(&l.r);
                if forwards_alone(mode, kind) {
                    let up = passed_up(&b, &a);
                    assert!(
                        up.is_empty(),
                        "{what}: later {kind:?} packets handed up: {up:?}"
                    );
                }
                total += N;
            }
            let c2 = counters(&l.r);
            assert!(
                grew(&c1, &c2, "redirected") >= total as u64,
                "{what}: once resolved the dataplane forwards: {c1:?} -> {c2:?}"
            );
            assert_eq!(
                grew(&c1, &c2, "no-neigh"),
                0,
                "{what}: no-neigh after resolution: {c1:?} -> {c2:?}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 7. Traffic to the router itself reaches its sockets.

fn local_delivery(mode: &str) {
    require_root();
    let l = Line::new(&format!("lo{}", tag(mode)), true);
    l.attach(mode);
    for v6 in [false, true] {
        for towards_h2 in [false, true] {
            let at = SocketAddr::new(r_addr(v6, towards_h2), fresh_port());
            let rx = udp_listen(&l.r, at);
            for kind in KINDS {
                const N: usize = 50;
                let what = format!("{mode} {} {kind:?}: h1 -> r's {at}", fam(v6));
                let sent = payloads(&what, N, 100);
                let before = counters(&l.r);
                send(&l.h1, kind, h1_addr(v6), at, &sent);
                assert_same(&what, &sent, recv_datagrams(&rx, N, Duration::from_secs(3)));
                let after = counters(&l.r);
                assert!(
                    grew(&before, &after, "local") >= N as u64,
                    "{what}: the dataplane passed them up as local: {before:?} -> {after:?}"
                );
                assert_eq!(
                    grew(&before, &after, "redirected"),
                    0,
                    "{what}: nothing to r is redirected: {before:?} -> {after:?}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------

/// One test per mode: `NAME::auto`, `NAME::tc`, `NAME::xdp_generic`, `NAME::xdp`.
/// A neighbour that changes its MAC (no gratuitous ARP) is learnt again as the kernel alone
/// learns it: a STALE entry must see traffic through the kernel's neighbour output to be probed
/// (tc redirects through it, or delivering straight into a veth peer, hands it one packet a
/// second per neighbour as XDP does, `neigh-check`).
/// Short neighbour timers on r; UDP with complete checksums, so that XDP forwards it itself.
fn neighbour_changes_its_mac(mode: &str) {
    require_root();
    let l = Line::new(&format!("nmac{}", tag(mode)), false);
    for (k, v) in [
        ("base_reachable_time_ms", "1000"),
        ("delay_first_probe_time", "1"),
    ] {
        traffic::sysctl(&l.r, &format!("net.ipv4.neigh.vb.{k}"), v);
    }
    // r learns h2 by forwarding a ping itself, before the dataplane is there
    mpt_testkit::run_ok(
        "ip",
        &[
            "netns",
            "exec",
            l.h1.name(),
            "ping",
            "-c1",
            "-W2",
            &h2_addr(false).to_string(),
        ],
    );
    l.attach(mode);
    let to = SocketAddr::new(h2_addr(false), fresh_port());
    let rx = udp_listen(&l.h2, to);
    // one second of a slow flow (5 packets); how many arrived
    let second = |what: &str| -> usize {
        for p in payloads(what, 5, 64) {
            send(&l.h1, Kind::Complete, h1_addr(false), to, &[p]);
            std::thread::sleep(Duration::from_millis(200));
        }
        recv_datagrams(&rx, 5, Duration::from_millis(300)).len()
    };
    assert!(
        second("before 0") + second("before 1") >= 9,
        "{mode}: traffic flows before the change"
    );
    l.h2.ip_ok(&["link", "set", "eth0", "address", "02:00:00:00:aa:01"]);
    let start = Instant::now();
    let mut back = None;
    for i in 0..15 {
        if second(&format!("after {i}")) >= 4 {
            back = Some(start.elapsed());
            break;
        }
    }
    let mut n = neighbour(&l.r, h2_addr(false), "vb");
    let back = back.unwrap_or_else(|| {
        panic!(
            "{mode}: h2 unreachable for 15 s after its MAC changed; r's neighbour {n:?}; \
             counters {:?}",
            counters(&l.r)
        )
    });
    eprintln!("{mode}: traffic back {back:?} after the MAC change; neighbour {n:?}");
    // Delivered straight into h2's namespace (tc, bpf_redirect_peer), a frame reaches h2 whatever
    // its destination MAC: traffic may be back before r has learnt the address, which takes
    // the neighbour output's probes (one packet a second goes through it) to run out.
    for i in 0..15 {
        if n.as_ref().is_some_and(|n| n.0 == "02:00:00:00:aa:01") {
            break;
        }
        second(&format!("learning {i}"));
        n = neighbour(&l.r, h2_addr(false), "vb");
    }
    eprintln!(
        "{mode}: neighbour {n:?} {:?} after the MAC change",
        start.elapsed()
    );
    assert_eq!(
        n.map(|n| n.0),
        Some("02:00:00:00:aa:01".to_string()),
        "{mode}: r learnt the new address"
    );
}

/// A kernel of the matrix without what the dataplane needs: attach refuses, nothing to run.
fn refused_here() -> bool {
    mpt_testkit::matrix::dataplane_refused_here(&MP)
}

macro_rules! per_mode {
    ($name:ident) => {
        mod $name {
            #[test]
            fn auto() {
                if !super::refused_here() {
                    super::$name("auto");
                }
            }
            #[test]
            fn tc() {
                if !super::refused_here() {
                    super::$name("tc");
                }
            }
            #[test]
            fn xdp_generic() {
                if !super::refused_here() {
                    super::$name("xdp-generic");
                }
            }
            #[test]
            fn xdp() {
                if !super::refused_here() {
                    super::$name("xdp");
                }
            }
        }
    };
}

per_mode!(udp_forwarding);
per_mode!(tcp_data);
per_mode!(kernel_multipath);
per_mode!(ttl_expiry);
per_mode!(mtu_exceeded);
per_mode!(neighbour_resolution);
per_mode!(local_delivery);
per_mode!(neighbour_changes_its_mac);

/// Attaching in another mode replaces the earlier one: tc (asked for, or auto's pick on a veth)
/// over native or generic XDP leaves tc alone on the device, XDP over tc adds XDP next to it.
#[test]
fn attaching_in_another_mode_replaces_the_earlier_one() {
    require_root();
    let l = Line::new("remode", true);
    let modes = |dev: &str| -> Vec<String> {
        let v = MP.json(&l.r, &["dataplane", "show"]);
        let mut m: Vec<String> = v["attachments"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|a| a["dev"] == dev)
                    .filter_map(|a| a["mode"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        m.sort();
        m
    };
    let xdp_on = |dev: &str| l.r.ip_ok(&["link", "show", "dev", dev]).contains(" xdp");
    for (first, then) in [
        ("xdp", "tc"),
        ("xdp-generic", "tc"),
        ("xdp", "auto"),
        ("xdp-generic", "auto"),
    ] {
        l.attach(first);
        let mut both = vec![first.to_string(), "tc".to_string()];
        both.sort();
        assert_eq!(modes("va"), both, "{first}");
        l.attach(then);
        assert_eq!(modes("va"), vec!["tc".to_string()], "{first} then {then}");
        assert!(
            !xdp_on("va"),
            "{first} then {then}: an XDP program is left on va"
        );
    }
    l.attach("xdp");
    assert_eq!(
        modes("vb"),
        vec!["tc".to_string(), "xdp".to_string()],
        "tc then xdp"
    );
}

/// Native XDP into a veth whose peer is not prepared: the kernel drops every frame the dataplane
/// redirects, and `dataplane show` says so (`dropped`, from the kernel's XDP tracepoints). After
/// `prepare-peers` the same traffic arrives and `dropped` stands still. Detaching removes the
/// drop counter's pinned links.
#[test]
fn xdp_redirect_drops_are_counted() {
    require_root();
    let l = Line::new("xdrop", true);
    // the dataplane on va only, no prepare-peers: h2's eth0 (vb's peer) has no NAPI
    let v = MP.json(&l.r, &["dataplane", "attach", "dev", "va", "xdp"]);
    assert!(
        v["notes"]
            .to_string()
            .contains("neither an XDP program nor GRO")
            || !gro_on(&l.h2, "eth0"),
        "h2's eth0 must be unprepared for this test: {v}"
    );
    const N: usize = 200;
    let to = SocketAddr::new(h2_addr(false), fresh_port());
    let rx = udp_listen(&l.h2, to);
    let before = counters(&l.r);
    send(
        &l.h1,
        Kind::Complete,
        h1_addr(false),
        to,
        &payloads("dropped", N, 64),
    );
    let got = recv_datagrams(&rx, N, Duration::from_millis(500));
    let after = counters(&l.r);
    let (red, dropped) = (
        grew(&before, &after, "redirected"),
        grew(&before, &after, "dropped"),
    );
    eprintln!(
        "unprepared peer: received {}, redirected +{red}, dropped +{dropped}",
        got.len()
    );
    assert!(
        got.is_empty(),
        "frames arrived through an unprepared veth peer: {}",
        got.len()
    );
    assert!(
        red >= N as u64,
        "redirected grew by {red}, not {N}: {after:?}"
    );
    assert!(
        dropped >= N as u64 && dropped <= red,
        "dropped grew by {dropped}, expected {N}..={red}: {before:?} -> {after:?}"
    );
    // show says why, as attach did
    let v = MP.json(&l.r, &["dataplane", "show"]);
    assert!(
        v["notes"].to_string().contains(&format!(
            "its peer eth0 in namespace {} has neither an XDP program nor GRO",
            l.h2.name()
        )) && v["notes"].to_string().contains("ethtool -K eth0 gro on"),
        "dataplane show does not name the unprepared peer: {v}"
    );

    // prepared: everything arrives, nothing more is dropped
    MP.ok(
        &l.r,
        &["dataplane", "attach", "dev", "va", "xdp", "prepare-peers"],
    );
    assert!(
        gro_on(&l.h2, "eth0"),
        "prepare-peers left GRO off on h2's eth0"
    );
    let before = counters(&l.r);
    let sent = payloads("delivered", N, 64);
    send(&l.h1, Kind::Complete, h1_addr(false), to, &sent);
    assert_same(
        "prepared peer",
        &sent,
        recv_datagrams(&rx, N, Duration::from_secs(3)),
    );
    let after = counters(&l.r);
    assert_eq!(
        grew(&before, &after, "dropped"),
        0,
        "dropped grew with a prepared peer: {before:?} -> {after:?}"
    );
    assert!(grew(&before, &after, "redirected") >= N as u64);

    // detach: the drop counter's links go
    let cookie = mpt_testkit::netns_cookie(l.r.name()).expect("cookie of r");
    let dir = std::path::Path::new("/sys/fs/bpf/mproute").join(mpt_testkit::netns::id_name(cookie));
    let ifindex = traffic::in_netns(&l.r, || {
        nix::net::if_::if_nametoindex("va").expect("ifindex of va")
    });
    let pin = dir.join(format!("drops-{ifindex}-err"));
    assert!(pin.exists(), "{} missing while attached", pin.display());
    MP.ok(&l.r, &["dataplane", "detach", "dev", "va"]);
    assert!(!pin.exists(), "{} left after detach", pin.display());
}

/// XDP forwards only frames sent to the device's own MAC, read when it is attached: after the
/// address changes, `dataplane show` says the attachment is stale and what to do; attaching
/// again clears it.
#[test]
fn xdp_attachment_notices_a_changed_mac() {
    require_root();
    let l = Line::new("xmac", true);
    l.attach("xdp");
    let stale = |v: &Value| v["notes"].to_string().contains("MAC address changed");
    assert!(!stale(&MP.json(&l.r, &["dataplane", "show"])));
    l.r.ip_ok(&["link", "set", "va", "address", "02:00:5e:10:00:01"]);
    let v = MP.json(&l.r, &["dataplane", "show"]);
    assert!(stale(&v), "no note about va's new MAC: {v}");
    assert!(v["notes"].to_string().contains("va:"), "{v}");
    l.attach("xdp");
    let v = MP.json(&l.r, &["dataplane", "show"]);
    assert!(!stale(&v), "note left after attaching again: {v}");
}

/// Native XDP where the driver has none (lo): exit code 2, the kernel's words and a hint that
/// names the way out, and nothing left behind (no attachment, no drop counter).
#[test]
fn xdp_attach_without_native_xdp_fails_cleanly() {
    require_root();
    let l = Line::new("xnone", true);
    let o = MP.at(&l.r, &["dataplane", "attach", "dev", "lo", "xdp"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "exit code: {err}");
    assert!(
        err.contains("Operation not supported [EOPNOTSUPP]"),
        "{err}"
    );
    assert!(!err.contains("os error"), "Rust's errno wording: {err}");
    assert!(err.contains("no native XDP"), "no hint: {err}");
    let v = MP.json(&l.r, &["dataplane", "show"]);
    assert_eq!(
        v["attachments"].as_array().map_or(0, Vec::len),
        0,
        "a failed attach left an attachment: {v}"
    );
    let cookie = mpt_testkit::netns_cookie(l.r.name()).expect("cookie of r");
    let pin = std::path::Path::new("/sys/fs/bpf/mproute")
        .join(mpt_testkit::netns::id_name(cookie))
        .join("drops-1-err");
    assert!(!pin.exists(), "a failed attach left {}", pin.display());
}

/// `ip -j -s link show DEV` in `ns`: (tx packets, rx packets), the kernel's own counters.
fn link_packets(ns: &Netns, dev: &str) -> (u64, u64) {
    let v = ns.ip_json(&["-s", "link", "show", dev]);
    let s = &v[0]["stats64"];
    (
        s["tx"]["packets"].as_u64().expect("tx packets"),
        s["rx"]["packets"].as_u64().expect("rx packets"),
    )
}

/// `tc qdisc VERB dev DEV root [KIND]` in `ns`, which must succeed.
fn root_qdisc(ns: &Netns, verb: &str, dev: &str, kind: Option<&str>) {
    let mut a = vec!["qdisc", verb, "dev", dev, "root"];
    a.extend(kind);
    let out = ns.exec("tc", &a);
    assert!(
        out.status.success(),
        "tc {}: {}",
        a.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// 200 UDP datagrams h1 → h2 through r (complete checksums); all must arrive. Returns how many
/// packets r's `vb` transmitted meanwhile (`ip -s link`).
fn through_vb(l: &Line, what: &str) -> u64 {
    let to = SocketAddr::new(h2_addr(false), fresh_port());
    let rx = udp_listen(&l.h2, to);
    let p = payloads(what, 200, 64);
    let (tx0, _) = link_packets(&l.r, "vb");
    send(&l.h1, Kind::Complete, h1_addr(false), to, &p);
    assert_same(
        what,
        &p,
        recv_datagrams(&rx, p.len(), Duration::from_secs(3)),
    );
    link_packets(&l.r, "vb").0 - tx0
}

/// tc (auto on a veth) delivers straight into the egress veth's peer namespace
/// (`bpf_redirect_peer`): the packets do not pass `vb`'s transmit (its counters, qdisc, taps),
/// which `ip -s link` shows; `peer off`, or a qdisc of the operator's on `vb`, keeps them on
/// it; `dataplane show` names the devices and notes a qdisc added after the attach.
#[test]
fn tc_delivers_straight_into_the_veth_peer() {
    require_root();
    let l = Line::new("tcpeer", true);
    let v = l.attach("auto");
    let vb_peer = |v: &Value| -> bool {
        v["attachments"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["mode"] == "tc")
            .all(|a| {
                a["peer_devs"]
                    .as_array()
                    .is_some_and(|d| d.contains(&"vb".into()))
            })
    };
    assert!(vb_peer(&v), "auto: vb is not delivered into its peer: {v}");
    let before = counters(&l.r);
    let tx = through_vb(&l, "peer on");
    assert!(
        grew(&before, &counters(&l.r), "redirected") >= 200,
        "the dataplane did not forward them: {:?}",
        counters(&l.r)
    );
    // one a second per neighbour still goes through the neighbour output
    assert!(
        tx < 20,
        "peer on: {tx} of 200 packets went out through vb's transmit"
    );

    MP.json(
        &l.r,
        &[
            "dataplane",
            "attach",
            "dev",
            "va",
            "dev",
            "vb",
            "peer",
            "off",
        ],
    );
    let v = MP.json(&l.r, &["dataplane", "show"]);
    assert!(!vb_peer(&v), "peer off: still delivered into the peer: {v}");
    let tx = through_vb(&l, "peer off");
    assert!(
        tx >= 200,
        "peer off: only {tx} of 200 packets left through vb"
    );

    // an operator's qdisc on vb: attach leaves vb to its transmit path
    l.r.ip_ok(&["link", "set", "vb", "txqueuelen", "1000"]);
    root_qdisc(&l.r, "add", "vb", Some("pfifo"));
    let v = l.attach("auto");
    assert!(
        !vb_peer(&v),
        "vb has a qdisc, still delivered into the peer: {v}"
    );
    let tx = through_vb(&l, "qdisc");
    assert!(
        tx >= 200,
        "with a qdisc: only {tx} of 200 packets left through vb"
    );

    // a qdisc added after the attach is bypassed: show says so
    root_qdisc(&l.r, "del", "vb", None);
    let v = l.attach("auto");
    assert!(vb_peer(&v), "vb without its qdisc again: {v}");
    root_qdisc(&l.r, "add", "vb", Some("pfifo"));
    let v = MP.json(&l.r, &["dataplane", "show"]);
    assert!(
        v["notes"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|n| n.as_str().is_some_and(|n| n.starts_with("vb: has a qdisc"))),
        "show does not note vb's new qdisc: {v}"
    );
}

// ---------------------------------------------------------------------------------------------
// The flow cache (bpf/mproute/flow_cache.h) in native XDP: its governor, and its answers
// ended by a route change.

/// `bpftool -j ARGS`, which must succeed.
fn bpftool(args: &[&str]) -> Value {
    mpt_testkit::bpftool_json(args)
}

/// The per-CPU values of the map called `name` of the XDP program on `dev` in `ns`, as bytes:
/// one list of CPUs' values per entry (`bpftool map dump`).
fn xdp_map_values(ns: &Netns, dev: &str, name: &str) -> Vec<Vec<Vec<u8>>> {
    let link = ns.ip_json(&["link", "show", dev]);
    let prog = link[0]["xdp"]["prog"]["id"]
        .as_u64()
        .unwrap_or_else(|| panic!("no XDP program on {dev}: {link}"));
    let p = bpftool(&["prog", "show", "id", &prog.to_string()]);
    let map = p["map_ids"]
        .as_array()
        .unwrap_or_else(|| panic!("program {prog}: no maps: {p}"))
        .iter()
        .filter_map(Value::as_u64)
        .find(|id| bpftool(&["map", "show", "id", &id.to_string()])["name"] == name)
        .unwrap_or_else(|| panic!("program {prog} has no {name}: {p}"));
    let d = bpftool(&["map", "dump", "id", &map.to_string()]);
    let byte = |v: &Value| {
        let s = v.as_str().expect("a byte");
        u8::from_str_radix(s.trim_start_matches("0x"), 16).expect("hex byte")
    };
    d.as_array()
        .unwrap_or_else(|| panic!("{name} dump: {d}"))
        .iter()
        .map(|e| {
            e["values"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|c| {
                    c["value"]
                        .as_array()
                        .expect("value bytes")
                        .iter()
                        .map(byte)
                        .collect()
                })
                .collect()
        })
        .collect()
}

/// The flow cache governor's `off` per CPU (`struct fc_gov`: probes, hits, off, pkts; u32s) of
/// IPv4 (its first entry), read from the map of that name of the XDP program on `dev` in `ns`.
fn governor_off(ns: &Netns, dev: &str) -> Vec<u32> {
    xdp_map_values(ns, dev, "mpt_fc_gov")
        .first()
        .expect("mpt_fc_gov's first entry")
        .iter()
        .map(|b| u32::from_ne_bytes([b[8], b[9], b[10], b[11]]))
        .collect()
}

/// Whether the running kernel is at least `major.minor`.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    // SAFETY: uname fills the zeroed struct it is given; its release is NUL-terminated.
    let r = unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        assert_eq!(libc::uname(&mut u), 0, "uname");
        std::ffi::CStr::from_ptr(u.release.as_ptr())
            .to_string_lossy()
            .into_owned()
    };
    let mut it = r.split(|c: char| !c.is_ascii_digit());
    let a: u32 = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let b: u32 = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    (a, b) >= (major, minor)
}

/// From h1 on this thread's CPU: one complete-checksum datagram per (round, source port).
fn raw_flows(l: &Line, cpu: usize, to: SocketAddr, sports: &[u16], rounds: usize, what: &[u8]) {
    raw_flows_with(l, cpu, to, sports, rounds, |_| what.to_vec());
}

/// As [`raw_flows`], the payload chosen by source port.
fn raw_flows_with(
    l: &Line,
    cpu: usize,
    to: SocketAddr,
    sports: &[u16],
    rounds: usize,
    what: impl Fn(u16) -> Vec<u8> + Sync,
) {
    let src = h1_addr(to.is_ipv6());
    traffic::in_netns(&l.h1, || {
        let mut set = nix::sched::CpuSet::new();
        set.set(cpu).expect("CPU set");
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).expect("pin");
        let fd = raw_udp_socket(src);
        for _ in 0..rounds {
            for s in sports {
                raw_send(&fd, src, *s, to, &what(*s));
            }
        }
    })
}

/// Native XDP, IPv4 with complete checksums (forwarded by XDP itself): with far more flows
/// than the cache holds, each seen once, the governor turns the cache off on the sending CPU
/// and every packet is still forwarded (h2's own receive counter); a few flows sent again and
/// again turn it on; then a blackhole route for h2 stops the flows at once although their
/// answers are cached and fresh (the generation moved), and its removal lets them through.
/// The governor needs the flow cache, which needs the ingress device from XDP (6.2+); before
/// that only the forwarding and the route change are checked.
#[test]
fn flow_cache_governor_and_route_change() {
    require_root();
    if refused_here() {
        return;
    }
    let l = Line::new("fcg", true);
    // The ports in the key (multipath hash policy 1: the lookups read them), so that source
    // ports are flows to the cache; under policy 0 they share one answer
    // (flow_cache_key_is_what_the_lookup_reads).
    traffic::sysctl(&l.r, "net.ipv4.fib_multipath_hash_policy", "1");
    l.attach("xdp");
    let cached = kernel_at_least(6, 2);
    let cpu = 0;
    let to = SocketAddr::new(h2_addr(false), 9);
    let rx = |l: &Line| link_packets(&l.h2, "eth0").1;
    // many flows, once each: 30000 source ports (about 1900 probe lookups)
    let many: Vec<u16> = (20_000..50_000).collect();
    let (rx0, c0) = (rx(&l), counters(&l.r));
    raw_flows(&l, cpu, to, &many, 1, b"many");
    std::thread::sleep(Duration::from_millis(200));
    let got = rx(&l) - rx0;
    assert!(
        got >= many.len() as u64,
        "{} flows sent once: h2 received {got}",
        many.len()
    );
    let c1 = counters(&l.r);
    assert!(
        grew(&c0, &c1, "redirected") >= many.len() as u64,
        "XDP did not forward them itself: counters {c0:?} then {c1:?}"
    );
    if cached {
        let off = governor_off(&l.r, "va");
        assert_eq!(off.get(cpu), Some(&1), "governor after many flows: {off:?}");
    }
    // a few busy flows: the probes hit, the cache comes back
    let few: Vec<u16> = (20_000..20_008).collect();
    let rx0 = rx(&l);
    raw_flows(&l, cpu, to, &few, 4096, b"few");
    std::thread::sleep(Duration::from_millis(200));
    assert!(rx(&l) - rx0 >= 8 * 4096, "few flows: not all received");
    if cached {
        let off = governor_off(&l.r, "va");
        assert_eq!(
            off.get(cpu),
            Some(&0),
            "governor after a few busy flows: {off:?}"
        );
    }
    // the flows' answers are fresh (sent just now): a blackhole for h2 ends them at once
    // (answers live two ticks, 8 ms at HZ=250: only the generation can end them this soon)
    let sock = udp_listen(&l.h2, to);
    raw_flows(&l, cpu, to, &few, 16, b"fresh");
    l.r.ip_ok(&["route", "add", "blackhole", "10.2.0.2/32"]);
    raw_flows(&l, cpu, to, &few, 64, b"after");
    let got = recv_datagrams(&sock, 8 * 16 + 1, Duration::from_millis(500));
    let after = got.iter().filter(|d| d.as_slice() == b"after").count();
    assert_eq!(
        (got.len() - after, after),
        (8 * 16, 0),
        "(fresh, after) datagrams: cached flows forwarded after a blackhole route for their \
         destination, or the fresh ones lost"
    );
    l.r.ip_ok(&["route", "del", "blackhole", "10.2.0.2/32"]);
    raw_flows(&l, cpu, to, &few, 8, b"again");
    let got = recv_datagrams(&sock, 8 * 8, Duration::from_secs(3));
    assert_eq!(
        got.len(),
        64,
        "not forwarded again after the blackhole went"
    );
}

/// The flow cache's slots on CPU `cpu` (`None`: every CPU) holding an answer (a non-zero stamp)
/// for `dst`, as (source port, destination port, port-less), read from the map `mpt_flow_cache` (IPv4:
/// `struct fc_slot`, daddr at 12, ports at 16 and 18, portless at 59) or `mpt_flow_cache6`
/// (`struct fc6_slot`: daddr at 24, ports at 44 and 46, portless at 49) of the XDP program on
/// `dev` in `ns`.
fn cached_flows(ns: &Netns, dev: &str, cpu: Option<usize>, dst: IpAddr) -> Vec<(u16, u16, bool)> {
    let (map, daddr, ports, portless) = match dst {
        IpAddr::V4(_) => ("mpt_flow_cache", 12, 16, 59),
        IpAddr::V6(_) => ("mpt_flow_cache6", 24, 44, 49),
    };
    let want = match dst {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    };
    xdp_map_values(ns, dev, map)
        .iter()
        .flat_map(|cpus| {
            cpus.iter()
                .enumerate()
                .filter(|(c, _)| cpu.is_none_or(|want| *c == want))
                .map(|(_, b)| b)
        })
        .filter(|b| b[..8].iter().any(|x| *x != 0) && b[daddr..daddr + want.len()] == want[..])
        .map(|b| {
            (
                u16::from_be_bytes([b[ports], b[ports + 1]]),
                u16::from_be_bytes([b[ports + 2], b[ports + 3]]),
                b[portless] != 0,
            )
        })
        .collect()
}

/// Native XDP (complete checksums: forwarded by XDP itself), IPv4 then IPv6: the flow cache
/// keeps an answer under what the kernel's lookup reads. With a namespace's defaults (no rules
/// of its own, multipath hash policy 0: addresses only) the lookup reads no ports, so eight
/// flows from h1 to h2 share one answer on the sending CPU (one slot, port-less: 6.2+, where
/// the cache is). Then a blackhole for h2 in table 100 and a rule sending UDP from one of the
/// eight source ports there: in the burst right after it, while the shared answer would still
/// be fresh, that port's datagrams all stop and the seven others all arrive (h2's socket), and
/// the answers are kept per flow again. Before 6.2 (no cache) the same holds by lookups.
#[test]
fn flow_cache_key_is_what_the_lookup_reads() {
    require_root();
    if refused_here() {
        return;
    }
    let l = Line::new("fck", true);
    l.attach("xdp");
    let cached = kernel_at_least(6, 2);
    let cpu = 0;
    for v6 in [false, true] {
        let f = fam(v6);
        let dst = h2_addr(v6);
        let to = SocketAddr::new(dst, fresh_port());
        let sock = udp_listen(&l.h2, to);
        let sports: Vec<u16> = (21_000..21_008).collect();
        let ruled = sports[3];
        raw_flows(&l, cpu, to, &sports, 8, b"warm");
        let got = recv_datagrams(&sock, 64, Duration::from_secs(3));
        assert_eq!(
            got.len(),
            64,
            "{f}: 8 flows x 8 datagrams, h2 received {}",
            got.len()
        );
        if cached {
            let slots = cached_flows(&l.r, "va", Some(cpu), dst);
            assert_eq!(
                slots,
                vec![(0, 0, true)],
                "{f}: with the lookups reading no ports, one answer (port-less) for the 8 flows"
            );
        }
        let v = if v6 { "-6" } else { "-4" };
        let host = if v6 {
            format!("{dst}/128")
        } else {
            format!("{dst}/32")
        };
        l.r.ip_ok(&[v, "route", "add", "blackhole", &host, "table", "100"]);
        l.r.ip_ok(&[
            v,
            "rule",
            "add",
            "ipproto",
            "udp",
            "sport",
            &ruled.to_string(),
            "lookup",
            "100",
            "pref",
            "100",
        ]);
        // per port payloads, the ports interleaved, right after the rule
        raw_flows_with(&l, cpu, to, &sports, 16, |s| s.to_string().into_bytes());
        let got = recv_datagrams(&sock, 7 * 16 + 1, Duration::from_secs(2));
        let per_port: BTreeMap<u16, usize> = sports
            .iter()
            .map(|s| {
                let p = s.to_string();
                (
                    *s,
                    got.iter().filter(|d| d.as_slice() == p.as_bytes()).count(),
                )
            })
            .collect();
        let want: BTreeMap<u16, usize> = sports
            .iter()
            .map(|s| (*s, if *s == ruled { 0 } else { 16 }))
            .collect();
        assert_eq!(
            per_port, want,
            "{f}: datagrams at h2 per source port after a rule sent UDP from port {ruled} to \
             a blackhole"
        );
        if cached {
            // (the shared answer's slot may still hold it, of the generation before the rule)
            let mut slots = cached_flows(&l.r, "va", Some(cpu), dst);
            slots.retain(|s| !s.2);
            slots.sort_unstable();
            let want: Vec<(u16, u16, bool)> = sports
                .iter()
                .filter(|s| **s != ruled)
                .map(|s| (*s, to.port(), false))
                .collect();
            assert_eq!(
                slots, want,
                "{f}: with a rule by port, the answers kept per flow (the blackhole's not)"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The IPv6 flow cache: answers ended by a route delete, a route add, a rule add.

/// The test's IPv6 destination, owned by h2 (on its loopback): h2 receives what r forwards
/// to it; what r sends back to h1 (which does not forward) shows in h1's receive counter.
const D6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x99, 0, 0, 0, 0, 1);

/// An rtnetlink socket in `ns` (the change it makes takes microseconds, not a process start:
/// cached answers that were fresh before it are still fresh after it, whatever ends them but
/// the generation would not have yet).
fn rtnl_sock(ns: &Netns) -> mpt_netlink::sock::Socket {
    traffic::in_netns(ns, || {
        mpt_netlink::sock::Socket::route().expect("rtnetlink socket")
    })
}

/// A netlink attribute: length, type, value, padded to 4 bytes.
fn nla(b: &mut Vec<u8>, ty: u16, v: &[u8]) {
    b.extend_from_slice(&((4 + v.len()) as u16).to_ne_bytes());
    b.extend_from_slice(&ty.to_ne_bytes());
    b.extend_from_slice(v);
    b.resize(b.len().next_multiple_of(4), 0);
}

/// `ip -6 route add|del DST/LEN [via GW dev OIF] table TABLE` as one rtnetlink request.
fn rtnl_route6(
    s: &mut mpt_netlink::sock::Socket,
    add: bool,
    dst: Ipv6Addr,
    len: u8,
    via: Option<(Ipv6Addr, u32)>,
    table: u8,
) {
    const RTA_DST: u16 = 1;
    const RTA_OIF: u16 = 4;
    const RTA_GATEWAY: u16 = 5;
    // struct rtmsg: family, dst_len, src_len, tos, table, protocol (boot), scope (universe),
    // type (unicast), flags
    let mut p = vec![libc::AF_INET6 as u8, len, 0, 0, table, 3, 0, 1];
    p.extend_from_slice(&0u32.to_ne_bytes());
    nla(&mut p, RTA_DST, &dst.octets());
    if let Some((gw, oif)) = via {
        nla(&mut p, RTA_GATEWAY, &gw.octets());
        nla(&mut p, RTA_OIF, &oif.to_ne_bytes());
    }
    let (ty, flags) = if add {
        (
            24,
            mpt_netlink::msg::flags::CREATE | mpt_netlink::msg::flags::EXCL,
        )
    } else {
        (25, 0)
    };
    let req = mpt_netlink::msg::Request {
        ty,
        flags: mpt_netlink::msg::flags::REQUEST | flags,
        payload: p,
    };
    s.request(
        &req,
        format!("route {} {dst}/{len}", if add { "add" } else { "del" }),
    )
    .expect("IPv6 route change");
}

/// `ip -6 rule add to DST/LEN table TABLE pref PREF` as one rtnetlink request.
fn rtnl_rule6_add(s: &mut mpt_netlink::sock::Socket, dst: Ipv6Addr, len: u8, table: u8, pref: u32) {
    const FRA_DST: u16 = 1;
    const FRA_PRIORITY: u16 = 6;
    const FRA_TABLE: u16 = 15;
    // struct fib_rule_hdr: family, dst_len, src_len, tos, table, res1, res2, action (to table),
    // flags
    let mut p = vec![libc::AF_INET6 as u8, len, 0, 0, table, 0, 0, 1];
    p.extend_from_slice(&0u32.to_ne_bytes());
    nla(&mut p, FRA_DST, &dst.octets());
    nla(&mut p, FRA_PRIORITY, &pref.to_ne_bytes());
    nla(&mut p, FRA_TABLE, &u32::from(table).to_ne_bytes());
    let req = mpt_netlink::msg::Request {
        ty: 32, // RTM_NEWRULE
        flags: mpt_netlink::msg::flags::REQUEST
            | mpt_netlink::msg::flags::CREATE
            | mpt_netlink::msg::flags::EXCL,
        payload: p,
    };
    s.request(&req, "rule add").expect("IPv6 rule add");
}

/// Native XDP, IPv6 (complete checksums: forwarded by XDP itself). r has 2001:db8:99::/48 via
/// h2, which owns 2001:db8:99::1, and the more specific 2001:db8:99::/64 back via h1 (h1 does
/// not forward: what reaches it shows in its receive counter only). Eight flows go to h1,
/// their answers cached (6.2+: the cache's map holds them). Then, each made by one rtnetlink
/// request between a burst that leaves the answers fresh and the next burst: the /64's delete
/// (the /48 takes over: the count of discarded routes moves, fib6_sernum does not) moves every
/// flow to h2 at once; the /64 added again moves them back to h1; the /64 deleted again (to
/// h2) and a rule sending the /64 to a table that routes it via h1 moves them to h1. Answers
/// live two ticks, the requests take microseconds: only the generation can end the answers in
/// between. Before 6.2 (no cache) the same holds by lookups.
#[test]
fn flow_cache6_route_delete_add_and_rule() {
    require_root();
    if refused_here() {
        return;
    }
    let l = Line::new("fc6", true);
    l.h2.ip_ok(&["-6", "addr", "add", "2001:db8:99::1/128", "dev", "lo"]);
    let r = &l.r;
    let via_h1 = "2001:db8:99::/64 via 2001:db8:1::2 dev va";
    r.ip_ok(&[
        "-6",
        "route",
        "add",
        "2001:db8:99::/48",
        "via",
        "2001:db8:2::2",
        "dev",
        "vb",
    ]);
    r.ip_ok(&format!("-6 route add {via_h1}"));
    r.ip_ok(&format!("-6 route add {via_h1} table 100"));
    l.attach("xdp");
    let va = r.ip_json(&["link", "show", "va"])[0]["ifindex"]
        .as_u64()
        .and_then(|i| u32::try_from(i).ok())
        .expect("va's ifindex");
    let h1_rx = || link_packets(&l.h1, "eth0").1;
    let to = SocketAddr::new(IpAddr::V6(D6), fresh_port());
    let s2 = udp_listen(&l.h2, to);
    let sports: Vec<u16> = (30_000..30_008).collect();
    let n = sports.len();
    let (c0, rx0) = (counters(r), h1_rx());
    raw_flows(&l, 0, to, &sports, 64, b"first");
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        h1_rx() - rx0 >= (n * 64) as u64,
        "flows to the /64: not all reached h1"
    );
    let c1 = counters(r);
    assert!(
        grew(&c0, &c1, "redirected") >= (n * 64) as u64,
        "XDP did not forward them itself: counters {c0:?} then {c1:?}"
    );
    if kernel_at_least(6, 2) {
        assert!(
            !cached_flows(r, "va", None, IpAddr::V6(D6)).is_empty(),
            "no IPv6 answer for the flows in the cache"
        );
    }
    let mut nl = rtnl_sock(r);
    let fd = traffic::in_netns(&l.h1, || raw_udp_socket(h1_addr(true)));
    let prefix: Ipv6Addr = "2001:db8:99::".parse().expect("prefix");
    let gw: Ipv6Addr = "2001:db8:1::2".parse().expect("gateway");
    // a burst that leaves the answers fresh, the change, a burst after it; to_h2: where the
    // change sends the flows (from h1, or back to h1)
    let mut step =
        |what: &str, to_h2: bool, change: &mut dyn FnMut(&mut mpt_netlink::sock::Socket)| {
            let send = |payload: &[u8], rounds: usize| {
                for _ in 0..rounds {
                    for s in &sports {
                        raw_send(&fd, h1_addr(true), *s, to, payload);
                    }
                }
            };
            let rx0 = h1_rx();
            send(b"fresh", 16);
            change(&mut nl);
            send(b"after", 64);
            let count = |v: &[Vec<u8>], p: &[u8]| v.iter().filter(|d| d.as_slice() == p).count();
            if to_h2 {
                let got = recv_datagrams(&s2, n * 64 + 1, Duration::from_secs(3));
                assert_eq!(
                (count(&got, b"fresh"), count(&got, b"after")),
                (0, n * 64),
                "{what}: (fresh, after) datagrams at h2: after the change not all at h2 at once"
            );
                assert!(
                    h1_rx() - rx0 >= (n * 16) as u64,
                    "{what}: the fresh burst did not reach h1"
                );
            } else {
                let got = recv_datagrams(&s2, n * 16 + 1, Duration::from_millis(500));
                assert_eq!(
                    (count(&got, b"fresh"), count(&got, b"after")),
                    (n * 16, 0),
                    "{what}: (fresh, after) datagrams at h2: after the change some still at h2"
                );
                assert!(
                    h1_rx() - rx0 >= (n * 64) as u64,
                    "{what}: the after burst did not reach h1"
                );
            }
        };
    step("route delete", true, &mut |nl| {
        rtnl_route6(nl, false, prefix, 64, None, 254)
    });
    step("route add", false, &mut |nl| {
        rtnl_route6(nl, true, prefix, 64, Some((gw, va)), 254)
    });
    r.ip_ok(&["-6", "route", "del", "2001:db8:99::/64", "table", "main"]);
    step("rule add", false, &mut |nl| {
        rtnl_rule6_add(nl, prefix, 64, 100, 100)
    });
}

//! Traffic for dataplane tests: a per-namespace AF_PACKET flow counter ([`FlowCounter`]) and
//! UDP/TCP flow generators ([`send_udp_flows`], [`send_tcp_syns`]) over the topologies of
//! [`crate::topo`].
//!
//! Every thread that works inside a namespace enters it with `setns(CLONE_NEWNET)` on that thread
//! only; the test's own threads never change namespace. Sockets created after the `setns` belong
//! to the namespace.

use std::collections::HashMap;
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::mem;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sched::{setns, CloneFlags};
use nix::sys::socket::{
    bind, connect, setsockopt, socket, sockopt, AddressFamily, SockFlag, SockType, SockaddrStorage,
};

use crate::netns::Netns;
pub use crate::packet::{parse_ethernet, parse_ip, FlowTuple};
pub use crate::topo::{
    mac, sysctl, FourPaths, CLIENT_V4, CLIENT_V6, DEST_PREFIX_V4, DEST_PREFIX_V6, DEST_V4, DEST_V6,
};

/// Enter `ns` (network namespace only) on the calling thread.
pub(crate) fn enter(ns_name: &str) -> io::Result<()> {
    let path = format!("/run/netns/{ns_name}");
    let f = File::open(&path).map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))?;
    setns(&f, CloneFlags::CLONE_NEWNET).map_err(|e| io::Error::other(format!("setns {path}: {e}")))
}

/// Run `f` on a fresh thread inside `ns` and return its result; a panic in `f` is re-raised here.
pub fn in_netns<T: Send>(ns: &Netns, f: impl FnOnce() -> T + Send) -> T {
    let name = ns.name();
    std::thread::scope(|s| {
        let h = s.spawn(move || {
            enter(name).unwrap_or_else(|e| panic!("cannot enter {name}: {e}"));
            f()
        });
        match h.join() {
            Ok(v) => v,
            Err(p) => std::panic::resume_unwind(p),
        }
    })
}

/// What a [`FlowCounter`] saw.
#[derive(Debug, Clone, Default)]
pub struct FlowCounts {
    /// Received IPv4/IPv6 packets per 5-tuple (ICMP errors included, under their own outer tuple).
    pub packets: HashMap<FlowTuple, u64>,
    /// Received ICMP/ICMPv6 errors, keyed by the 5-tuple of the packet embedded in them.
    pub icmp_errors: HashMap<FlowTuple, u64>,
    /// Received frames that were not IPv4/IPv6 or could not be parsed.
    pub other: u64,
    /// Drops reported by the socket (`PACKET_STATISTICS`); nonzero means counts are low.
    pub drops: u64,
}

/// Counts packets received on one device of one namespace, per 5-tuple, until [`stop`].
///
/// An AF_PACKET socket (ETH_P_ALL) bound to the device, on a thread inside the namespace;
/// outgoing packets (`PACKET_OUTGOING`) are ignored. Dropping the counter stops and joins the
/// thread too.
///
/// [`stop`]: FlowCounter::stop
#[derive(Debug)]
pub struct FlowCounter {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<FlowCounts>>,
    what: String,
}

/// Receive timeout of the capture socket: how often the thread looks at the stop flag.
const RCV_TIMEOUT: Duration = Duration::from_millis(100);
/// After stop: keep reading until the device was quiet for one `RCV_TIMEOUT`, at most this long.
const DRAIN_MAX: Duration = Duration::from_secs(1);

impl FlowCounter {
    /// Start counting on `dev` in `ns`; returns once the socket is bound (packets sent after
    /// this returns are counted). Panics if the socket cannot be set up.
    pub fn start(ns: &Netns, dev: &str) -> FlowCounter {
        let (ns_name, dev_name) = (ns.name().to_string(), dev.to_string());
        let what = format!("{dev} in {ns_name}");
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<(), String>>(1);
        let stop2 = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name(format!("flowcount-{dev}"))
            .spawn(move || {
                let sock = enter(&ns_name).and_then(|()| open_capture(&dev_name));
                match sock {
                    Ok((fd, ifindex)) => {
                        let _ = ready_tx.send(Ok(()));
                        capture(&fd, ifindex, &stop2)
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        FlowCounts::default()
                    }
                }
            })
            .expect("spawn flow counter thread");
        let mut counter = FlowCounter {
            stop,
            thread: Some(thread),
            what,
        };
        match ready_rx.recv() {
            Ok(Ok(())) => counter,
            Ok(Err(e)) => {
                counter.finish();
                panic!("flow counter on {}: {e}", counter.what)
            }
            Err(_) => {
                counter.finish();
                panic!("flow counter on {}: thread died before ready", counter.what)
            }
        }
    }

    /// Stop and return the counts. Waits until the device has been quiet for 100 ms (at most
    /// 1 s), so packets still in flight when this is called are counted.
    pub fn stop(mut self) -> FlowCounts {
        self.stop.store(true, Ordering::SeqCst);
        let what = mem::take(&mut self.what);
        self.finish()
            .unwrap_or_else(|| panic!("flow counter on {what} panicked"))
    }

    /// Stop several counters at once (their drain periods overlap); counts in the same order.
    pub fn stop_all(counters: Vec<FlowCounter>) -> Vec<FlowCounts> {
        for c in &counters {
            c.stop.store(true, Ordering::SeqCst);
        }
        counters.into_iter().map(FlowCounter::stop).collect()
    }

    /// Signal and join the thread (if still running); `None` if it panicked.
    fn finish(&mut self) -> Option<FlowCounts> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().and_then(|t| t.join().ok())
    }
}

impl Drop for FlowCounter {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// Last OS error as `io::Error` with context.
fn os_err(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// `setsockopt` with a plain value.
pub(crate) fn setopt<T>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    val: &T,
) -> io::Result<()> {
    // SAFETY: `val` points to a live `T` of the size passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (val as *const T).cast(),
            mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(os_err("setsockopt"));
    }
    Ok(())
}

/// An AF_PACKET/SOCK_RAW socket receiving every protocol on `dev` (in the current namespace),
/// with a 100 ms receive timeout. Returns it and the ifindex.
pub(crate) fn open_capture(dev: &str) -> io::Result<(OwnedFd, i32)> {
    let cdev = CString::new(dev).map_err(|e| io::Error::other(format!("{dev}: {e}")))?;
    // SAFETY: cdev is a valid NUL-terminated string.
    let ifindex = unsafe { libc::if_nametoindex(cdev.as_ptr()) };
    if ifindex == 0 {
        return Err(os_err(&format!("no device {dev}")));
    }
    // Protocol 0 at creation so nothing is queued before the bind below selects the device.
    // SAFETY: plain syscall.
    let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(os_err("socket(AF_PACKET)"));
    }
    // SAFETY: `raw` is a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // Room for bursts (root may exceed rmem_max); fall back to the ordinary option.
    let size: libc::c_int = 8 << 20;
    if setopt(
        fd.as_raw_fd(),
        libc::SOL_SOCKET,
        libc::SO_RCVBUFFORCE,
        &size,
    )
    .is_err()
    {
        setopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, &size)?;
    }
    let tv = libc::timeval {
        tv_sec: 0,
        tv_usec: RCV_TIMEOUT.as_micros() as libc::suseconds_t,
    };
    setopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv)?;
    // SAFETY: sockaddr_ll is plain data; all-zero is valid.
    let mut sll: libc::sockaddr_ll = unsafe { mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: `sll` is a valid sockaddr_ll of the size passed.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(os_err(&format!("bind AF_PACKET to {dev}")));
    }
    Ok((fd, ifindex as i32))
}

/// The capture loop: runs until `stop` is set and the device then stays quiet for one receive
/// timeout (or `DRAIN_MAX` passes).
fn capture(fd: &OwnedFd, ifindex: i32, stop: &AtomicBool) -> FlowCounts {
    let mut counts = FlowCounts::default();
    let mut buf = vec![0u8; 65536];
    let mut stop_seen: Option<Instant> = None;
    loop {
        if stop_seen.is_none() && stop.load(Ordering::SeqCst) {
            stop_seen = Some(Instant::now());
        }
        if stop_seen.is_some_and(|t| t.elapsed() > DRAIN_MAX) {
            break;
        }
        // SAFETY: sockaddr_ll is plain data; all-zero is valid.
        let mut sll: libc::sockaddr_ll = unsafe { mem::zeroed() };
        let mut len = mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: buf and sll are live, writable, and their sizes are passed.
        let n = unsafe {
            libc::recvfrom(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                0,
                (&mut sll as *mut libc::sockaddr_ll).cast(),
                &mut len,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                    // Quiet for a whole timeout: done if stopping.
                    if stop_seen.is_some() || stop.load(Ordering::SeqCst) {
                        break;
                    }
                    continue;
                }
                // The device went down under a link-failure test: wait for it to come back.
                _ if e.raw_os_error() == Some(libc::ENETDOWN) => {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    continue;
                }
                _ => panic!("recvfrom on AF_PACKET socket: {e}"),
            }
        }
        if sll.sll_pkttype == libc::PACKET_OUTGOING || sll.sll_ifindex != ifindex {
            continue;
        }
        let frame = &buf[..n as usize];
        match parse_ethernet(frame) {
            Some((t, inner)) => {
                *counts.packets.entry(t).or_default() += 1;
                if let Some(i) = inner {
                    *counts.icmp_errors.entry(i).or_default() += 1;
                }
            }
            None => counts.other += 1,
        }
    }
    let mut st = libc::tpacket_stats {
        tp_packets: 0,
        tp_drops: 0,
    };
    let mut len = mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
    // SAFETY: `st` is a live tpacket_stats of the size passed.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut st as *mut libc::tpacket_stats).cast(),
            &mut len,
        )
    };
    if r == 0 {
        counts.drops = u64::from(st.tp_drops);
    }
    counts
}

/// One flow to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowSpec {
    /// Source address (must be local in the sending namespace).
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
}

impl FlowSpec {
    /// The 5-tuple the flow's packets carry with protocol `proto` (6 TCP, 17 UDP).
    pub fn tuple(&self, proto: u8) -> FlowTuple {
        FlowTuple {
            src: self.src,
            dst: self.dst,
            proto,
            sport: self.sport,
            dport: self.dport,
        }
    }
}

/// `n` distinct flows from the client ([`CLIENT_V4`]/[`CLIENT_V6`]) to the managed destination
/// ([`DEST_V4`]/[`DEST_V6`]): source ports `base_sport..base_sport+n`, destination ports
/// `5000 + (i * 37) % 1000` (deterministic, varied).
pub fn flows(n: usize, v6: bool, base_sport: u16) -> Vec<FlowSpec> {
    assert!(
        usize::from(base_sport) + n <= 61000,
        "{n} flows from source port {base_sport} reach the client's ephemeral ports (61000+)"
    );
    let (src, dst) = if v6 {
        (IpAddr::V6(CLIENT_V6), IpAddr::V6(DEST_V6))
    } else {
        (IpAddr::V4(CLIENT_V4), IpAddr::V4(DEST_V4))
    };
    (0..n)
        .map(|i| FlowSpec {
            src,
            dst,
            sport: (usize::from(base_sport) + i) as u16,
            dport: (5000 + (i * 37) % 1000) as u16,
        })
        .collect()
}

/// Send `packets_per_flow` small UDP datagrams for each flow, from a socket bound to
/// (src, sport) inside `ns`, to (dst, dport). Returns when all were sent; panics on any error.
pub fn send_udp_flows(ns: &Netns, flows: &[FlowSpec], packets_per_flow: u32) {
    in_netns(ns, || {
        for (i, f) in flows.iter().enumerate() {
            let from = SocketAddr::new(f.src, f.sport);
            let to = SocketAddr::new(f.dst, f.dport);
            // Unconnected: ICMP port unreachable from the far end does not fail later sends.
            // (a bind has been seen to meet EADDRINUSE for a port no socket of the
            // namespace should hold, once, under a loaded suite: tried again a while)
            let mut tries = 0;
            let sock = loop {
                match UdpSocket::bind(from) {
                    Ok(s) => break s,
                    Err(e) if e.kind() == io::ErrorKind::AddrInUse && tries < 200 => {
                        tries += 1;
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(e) => panic!("bind UDP {from}: {e}"),
                }
            };
            for k in 0..packets_per_flow {
                let payload = format!("mpt flow {i} packet {k}");
                sock.send_to(payload.as_bytes(), to)
                    .unwrap_or_else(|e| panic!("send UDP {from} -> {to}: {e}"));
            }
        }
    });
}

/// For each of `count` rounds, start a TCP connection for every flow: a non-blocking socket
/// bound to (src, sport) (SO_REUSEADDR) connects to (dst, dport), which emits one SYN. The far
/// end has no listener and answers RST; each round waits (at most 500 ms) for the attempts to
/// resolve, then closes every socket.
///
/// Caveat for multipath tests: a TCP socket stamps its packets with a random per-socket L4 hash
/// (`sk_txhash`), veth keeps `skb->hash` across namespaces, and with
/// `fib_multipath_hash_policy=1` the kernel uses an existing L4 hash instead of hashing the
/// 5-tuple. So the router's choice for a TCP flow is per socket, not per 5-tuple: with
/// `count > 1` the same 5-tuple may take different nexthops in different rounds (and a SYN
/// retransmission re-rolls the hash too). UDP sockets set no such hash.
pub fn send_tcp_syns(ns: &Netns, flows: &[FlowSpec], count: u32) {
    in_netns(ns, || {
        for _ in 0..count {
            let socks: Vec<OwnedFd> = flows.iter().map(tcp_attempt).collect();
            wait_resolved(&socks, Duration::from_millis(500));
            drop(socks);
        }
    });
}

/// A non-blocking connect from (src, sport) to (dst, dport); the socket is returned open.
fn tcp_attempt(f: &FlowSpec) -> OwnedFd {
    let from = SocketAddr::new(f.src, f.sport);
    let to = SocketAddr::new(f.dst, f.dport);
    let family = if f.src.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    let fd = socket(
        family,
        SockType::Stream,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    )
    .unwrap_or_else(|e| panic!("TCP socket for {from}: {e}"));
    setsockopt(&fd, sockopt::ReuseAddr, &true)
        .unwrap_or_else(|e| panic!("SO_REUSEADDR for {from}: {e}"));
    bind(fd.as_raw_fd(), &SockaddrStorage::from(from))
        .unwrap_or_else(|e| panic!("bind TCP {from}: {e}"));
    match connect(fd.as_raw_fd(), &SockaddrStorage::from(to)) {
        Ok(()) | Err(nix::errno::Errno::EINPROGRESS) | Err(nix::errno::Errno::ECONNREFUSED) => {}
        Err(e) => panic!("connect TCP {from} -> {to}: {e}"),
    }
    fd
}

/// Wait until every socket's connect has resolved (writable, error or hangup), or `max`.
fn wait_resolved(socks: &[OwnedFd], max: Duration) {
    let deadline = Instant::now() + max;
    let mut pending: Vec<libc::pollfd> = socks
        .iter()
        .map(|s| libc::pollfd {
            fd: s.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        })
        .collect();
    while !pending.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        // SAFETY: `pending` is a live array of pollfd of the length passed.
        let r = unsafe {
            libc::poll(
                pending.as_mut_ptr(),
                pending.len() as libc::nfds_t,
                left.as_millis().max(1) as libc::c_int,
            )
        };
        if r < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        pending.retain(|p| p.revents == 0);
    }
}

/// For each flow (as protocol `proto`), how many of its packets each counter saw:
/// `result[flow][counter]`.
pub fn per_flow_counts(flows: &[FlowSpec], proto: u8, counts: &[FlowCounts]) -> Vec<Vec<u64>> {
    flows
        .iter()
        .map(|f| {
            let t = f.tuple(proto);
            counts
                .iter()
                .map(|c| c.packets.get(&t).copied().unwrap_or(0))
                .collect()
        })
        .collect()
}

/// TCP through a real stack: `n` bytes from a client in `client` to a server in `server`
/// bound to `addr`, echoed back and compared. The server gives up after 8 s without a
/// connection (a case that must fail ends too). Returns the client's address as the server
/// saw it.
pub fn tcp_echo(
    server: &Netns,
    client: &Netns,
    addr: std::net::SocketAddr,
    n: usize,
) -> Result<String, String> {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    let listener = server
        .spawn_in(move || TcpListener::bind(addr).map_err(|e| e.to_string()))
        .join()
        .map_err(|_| "bind panicked".to_string())??;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let serve = std::thread::spawn(move || -> Result<String, String> {
        let deadline = Instant::now() + Duration::from_secs(8);
        let (mut s, peer) = loop {
            match listener.accept() {
                Ok(c) => break c,
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(format!("accept: {e}")),
            }
        };
        s.set_nonblocking(false).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(|e| e.to_string())?;
        let mut buf = vec![0u8; 65536];
        loop {
            let k = s.read(&mut buf).map_err(|e| format!("server read: {e}"))?;
            if k == 0 {
                return Ok(peer.to_string());
            }
            s.write_all(&buf[..k])
                .map_err(|e| format!("server write: {e}"))?;
        }
    });
    let data: Vec<u8> = (0..n).map(|i| (i * 7 + i / 251) as u8).collect();
    let sent = data.clone();
    let got = client
        .spawn_in(move || -> Result<Vec<u8>, String> {
            let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
                .map_err(|e| format!("connect to {addr}: {e}"))?;
            s.set_read_timeout(Some(Duration::from_secs(10)))
                .map_err(|e| e.to_string())?;
            let mut w = s.try_clone().map_err(|e| e.to_string())?;
            let writer = std::thread::spawn(move || {
                let r = w.write_all(&sent);
                let _ = w.shutdown(std::net::Shutdown::Write);
                r
            });
            let mut got = Vec::with_capacity(n);
            s.read_to_end(&mut got)
                .map_err(|e| format!("client read: {e}"))?;
            writer
                .join()
                .map_err(|_| "writer panicked".to_string())?
                .map_err(|e| format!("client write: {e}"))?;
            Ok(got)
        })
        .join()
        .map_err(|_| "client panicked".to_string())?;
    let served = serve.join().map_err(|_| "server panicked".to_string())?;
    let got = got?;
    let peer = served?;
    if got != data {
        return Err(format!("echoed {} bytes, not the {n} sent", got.len()));
    }
    Ok(peer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv6Addr;

    fn eth(ethertype: u16, l3: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(l3);
        f
    }

    fn ipv4(proto: u8, src: [u8; 4], dst: [u8; 4], l4: &[u8]) -> Vec<u8> {
        let mut p = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, proto, 0, 0];
        p[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
        p.extend_from_slice(&src);
        p.extend_from_slice(&dst);
        p.extend_from_slice(l4);
        p
    }

    fn ipv6(nh: u8, src: Ipv6Addr, dst: Ipv6Addr, payload: &[u8]) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0];
        p.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        p.extend_from_slice(&[nh, 64]);
        p.extend_from_slice(&src.octets());
        p.extend_from_slice(&dst.octets());
        p.extend_from_slice(payload);
        p
    }

    fn ports(s: u16, d: u16) -> Vec<u8> {
        let mut v = s.to_be_bytes().to_vec();
        v.extend_from_slice(&d.to_be_bytes());
        v.extend_from_slice(&[0, 8, 0, 0]);
        v
    }

    #[test]
    fn udp_v4_with_padding() {
        let mut f = eth(
            0x0800,
            &ipv4(17, [10, 0, 0, 2], [198, 51, 100, 1], &ports(1234, 53)),
        );
        f.extend_from_slice(&[0; 10]); // Ethernet padding
        let (t, inner) = parse_ethernet(&f).expect("parsed");
        assert_eq!(
            t,
            FlowSpec {
                src: IpAddr::V4(CLIENT_V4),
                dst: IpAddr::V4(DEST_V4),
                sport: 1234,
                dport: 53
            }
            .tuple(17)
        );
        assert_eq!(inner, None);
    }

    #[test]
    fn icmp_v4_error_embeds_inner_tuple() {
        let inner = ipv4(6, [10, 0, 0, 2], [198, 51, 100, 1], &ports(40000, 80));
        let mut icmp = vec![3, 3, 0, 0, 0, 0, 0, 0];
        icmp.extend_from_slice(&inner[..28]);
        let f = eth(0x0800, &ipv4(1, [198, 51, 100, 1], [10, 0, 0, 2], &icmp));
        let (t, e) = parse_ethernet(&f).expect("parsed");
        assert_eq!((t.proto, t.sport, t.dport), (1, 0, 0));
        let e = e.expect("embedded tuple");
        assert_eq!((e.proto, e.sport, e.dport), (6, 40000, 80));
        assert_eq!(e.dst, IpAddr::V4(DEST_V4));
    }

    #[test]
    fn icmp_v4_echo_is_not_an_error() {
        let f = eth(
            0x0800,
            &ipv4(1, [1, 1, 1, 1], [2, 2, 2, 2], &[8, 0, 0, 0, 0, 1, 0, 1]),
        );
        assert_eq!(parse_ethernet(&f).expect("parsed").1, None);
    }

    #[test]
    fn udp_v6_through_extension_header_and_vlan() {
        let mut hbh = vec![17, 0, 1, 4, 0, 0, 0, 0]; // next header UDP, 8 bytes
        hbh.extend_from_slice(&ports(5555, 6666));
        let l3 = ipv6(0, CLIENT_V6, DEST_V6, &hbh);
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x81, 0x00, 0, 7, 0x86, 0xdd]);
        f.extend_from_slice(&l3);
        let (t, _) = parse_ethernet(&f).expect("parsed");
        assert_eq!((t.proto, t.sport, t.dport), (17, 5555, 6666));
        assert_eq!(t.src, IpAddr::V6(CLIENT_V6));
    }

    #[test]
    fn icmpv6_error_embeds_inner_tuple() {
        let inner = ipv6(17, CLIENT_V6, DEST_V6, &ports(7, 9));
        let mut icmp = vec![1, 4, 0, 0, 0, 0, 0, 0];
        icmp.extend_from_slice(&inner);
        let f = eth(0x86dd, &ipv6(58, DEST_V6, CLIENT_V6, &icmp));
        let (t, e) = parse_ethernet(&f).expect("parsed");
        assert_eq!(t.proto, 58);
        let e = e.expect("embedded tuple");
        assert_eq!(
            (e.src, e.proto, e.sport, e.dport),
            (IpAddr::V6(CLIENT_V6), 17, 7, 9)
        );
    }

    #[test]
    fn non_first_fragment_has_no_ports() {
        let mut p = ipv4(17, [1, 1, 1, 1], [2, 2, 2, 2], &ports(1, 2));
        p[6..8].copy_from_slice(&100u16.to_be_bytes());
        let (t, _) = parse_ip(&p).expect("parsed");
        assert_eq!((t.sport, t.dport), (0, 0));
    }

    #[test]
    fn arp_and_runts_are_not_ip() {
        assert_eq!(parse_ethernet(&eth(0x0806, &[0; 28])), None);
        assert_eq!(parse_ethernet(&[0; 10]), None);
        assert_eq!(parse_ethernet(&eth(0x0800, &[0x45, 0, 0])), None);
    }

    #[test]
    fn flows_are_distinct() {
        let f = flows(400, false, 20000);
        let set: std::collections::HashSet<_> = f.iter().map(|f| f.tuple(17)).collect();
        assert_eq!(set.len(), 400);
        assert_eq!(flows(3, true, 1)[2].dst, IpAddr::V6(DEST_V6));
    }
}

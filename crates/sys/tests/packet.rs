//! Root tests of the AF_PACKET layer in throwaway namespaces: the kernel's rules for joining a
//! fanout group, the counters, copy and `TPACKET_V3` receive of frames sent from the far end of
//! a veth pair, steering programs, and finding a socket's owner and group from outside.
//!
//! Every test makes its own namespaces `a` and `b` joined by `a:va` – `b:vb`, with IPv6 off on
//! both before the link comes up (no ND or MLD to count), so the only frames on the link are
//! the test's own.

use std::collections::HashSet;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant, SystemTime};

use mpt_sys::packet::{bpf_insn, fanout_of, PacketSocket, ETH_P_ALL, ETH_P_IP};
use mpt_sys::{iface, procfd, sysctl};
use mpt_testkit::packet::{eth, udp, Ip4, IPPROTO_UDP, SRC_MAC};
use mpt_testkit::{require_root, veth, Netns};

const HASH: u16 = 0;
const LB: u16 = 1;
const ROLLOVER: u16 = 3;
const CBPF: u16 = 6;
const EBPF: u16 = 7;
const FLAG_ROLLOVER: u16 = 0x1000;
const FLAG_UNIQUEID: u16 = 0x2000;

/// Namespaces `a` and `b` with the veth pair `a:va` – `b:vb`, IPv6 off on both ends.
fn link(tag: &str) -> (Netns, Netns) {
    require_root();
    let a = Netns::new(&format!("{tag}a"));
    let b = Netns::new(&format!("{tag}b"));
    for ns in [&a, &b] {
        // New devices take `default`: the veth ends have IPv6 off from birth, before they are up.
        ns.try_sysctl(&[
            ("net.ipv6.conf.all.disable_ipv6", "1"),
            ("net.ipv6.conf.default.disable_ipv6", "1"),
        ])
        .unwrap_or_else(|e| panic!("{e}"));
    }
    veth(&a, "va", &b, "vb");
    for (ns, dev) in [(&a, "va"), (&b, "vb")] {
        let key = format!("net.ipv6.conf.{dev}.disable_ipv6");
        let v = ns.run_in_thread(false, move || sysctl::read(&key));
        assert_eq!(v.expect("read disable_ipv6").as_str(), "1", "{dev}");
    }
    (a, b)
}

fn ifindex(ns: &Netns, dev: &str) -> u32 {
    let dev = dev.to_string();
    ns.run_in_thread(false, move || iface::index(&dev))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A packet socket on `dev` of `ns` (it stays in `ns` wherever it is used from).
fn open(ns: &Netns, dev: &str, protocol: u16) -> PacketSocket {
    let d = dev.to_string();
    ns.run_in_thread(false, move || {
        PacketSocket::open(iface::index(&d)?, protocol)
    })
    .unwrap_or_else(|e: mpt_sys::Error| panic!("packet socket on {dev}: {e}"))
}

/// A broadcast IPv4/UDP frame of `42 + n` bytes; `n` also picks the source port.
fn frame(n: usize) -> Vec<u8> {
    let ip = Ip4::new(
        "192.0.2.1",
        "192.0.2.2",
        IPPROTO_UDP,
        udp(4000 + n as u16, 5000, n),
    );
    eth([0xff; 6], SRC_MAC, ETH_P_IP, &ip.bytes())
}

/// Send `frames` out of `dev` of `ns` with a packet socket that receives nothing (protocol 0).
fn send(ns: &Netns, dev: &str, frames: &[Vec<u8>]) {
    let tx = open(ns, dev, 0);
    for f in frames {
        let n = tx.send(f).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(n, f.len());
    }
}

fn errno(r: Result<(), mpt_sys::Error>) -> Option<i32> {
    r.err().and_then(|e| e.errno())
}

#[test]
fn fanout_join_rules() {
    let (a, _b) = link("pkjoin");
    let s1 = open(&a, "va", ETH_P_ALL);
    let s2 = open(&a, "va", ETH_P_ALL);
    assert_eq!(s1.fanout().expect("fanout"), None, "not in a group yet");
    s1.join_fanout(7, LB, 0).expect("create group 7 (lb)");
    s2.join_fanout(7, LB, 0).expect("join group 7 (lb)");
    let want = 7 | u32::from(LB) << 16;
    assert_eq!(s1.fanout().expect("fanout"), Some(want));
    assert_eq!(s2.fanout().expect("fanout"), Some(want));

    // Another mode for the same group.
    let s3 = open(&a, "va", ETH_P_ALL);
    assert_eq!(errno(s3.join_fanout(7, HASH, 0)), Some(libc::EINVAL));
    // Already in a group.
    assert_eq!(errno(s1.join_fanout(8, LB, 0)), Some(libc::EALREADY));

    // A full group.
    let s4 = open(&a, "va", ETH_P_ALL);
    let s5 = open(&a, "va", ETH_P_ALL);
    s4.join_fanout(8, HASH, 1)
        .expect("create group 8, one member at most");
    assert_eq!(errno(s5.join_fanout(8, HASH, 1)), Some(libc::ENOSPC));

    // Rollover mode refuses the rollover flag.
    let s6 = open(&a, "va", ETH_P_ALL);
    assert_eq!(
        errno(s6.join_fanout(9, ROLLOVER | FLAG_ROLLOVER, 0)),
        Some(libc::EINVAL)
    );

    // uniqueid: id 0 only, the kernel picks the id, the flag is not kept. (LB, so that the
    // value cannot be 0, which would read as "no group" should the kernel pick id 0.)
    assert_eq!(
        errno(s6.join_fanout(5, LB | FLAG_UNIQUEID, 0)),
        Some(libc::EINVAL)
    );
    s6.join_fanout(0, LB | FLAG_ROLLOVER | FLAG_UNIQUEID, 0)
        .expect("create a uniqueid group");
    let v = s6.fanout().expect("fanout").expect("in a group");
    assert_eq!(v >> 16 & 0xff, u32::from(LB), "mode");
    assert_eq!(v >> 24 & 0x20, 0, "UNIQUEID is not kept: {v:#x}");
    assert_eq!(v >> 24, 0x10, "ROLLOVER is: {v:#x}");
    // Others join it by the id the kernel chose, without the flag.
    let s7 = open(&a, "va", ETH_P_ALL);
    s7.join_fanout((v & 0xffff) as u16, LB | FLAG_ROLLOVER, 0)
        .expect("join the uniqueid group by its id");
    assert_eq!(s7.fanout().expect("fanout"), Some(v));
}

#[test]
fn inode_and_owner() {
    let (a, _b) = link("pkino");
    let s = open(&a, "va", ETH_P_ALL);
    let fd = s.as_raw_fd();
    let ino = s.inode().expect("inode");
    let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).expect("readlink");
    assert_eq!(link.to_string_lossy(), format!("socket:[{ino}]"));
    let md = std::fs::metadata(format!("/proc/self/fd/{fd}")).expect("stat");
    assert_eq!(md.ino(), ino);

    let other = open(&a, "va", ETH_P_ALL).inode().expect("inode");
    let owners = procfd::socket_owners(&HashSet::from([ino]));
    assert!(!owners.contains_key(&other), "only wanted inodes");
    let mine = owners.get(&ino).expect("our socket has an owner");
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert_eq!(mine[0].pid, std::process::id());
    assert_eq!(mine[0].fd, fd);
    let comm = std::fs::read_to_string("/proc/self/comm").expect("comm");
    assert_eq!(mine[0].comm, comm.trim());
}

#[test]
fn copy_receive_and_statistics() {
    let (a, b) = link("pkcopy");
    let va = ifindex(&a, "va");
    let rx = open(&a, "va", ETH_P_ALL);
    rx.enable_timestamps().expect("SO_TIMESTAMPNS");
    rx.set_rcvbuf(1 << 20).expect("rcvbuf");
    assert!(rx.try_recv(&mut [0; 64]).expect("try_recv").is_none());
    assert!(rx
        .recv(&mut [0; 64], Duration::from_millis(30))
        .expect("recv")
        .is_none());

    let frames: Vec<Vec<u8>> = [10, 100, 500, 1000, 1400].map(frame).to_vec();
    let before = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("clock");
    send(&b, "vb", &frames);
    let mut buf = vec![0u8; 2048];
    for f in &frames[..4] {
        let r = rx
            .recv(&mut buf, Duration::from_secs(2))
            .expect("recv")
            .expect("a frame within 2 s");
        assert_eq!((r.len, r.orig_len), (f.len(), f.len()));
        assert_eq!(&buf[..r.len], &f[..]);
        assert_eq!(r.pkttype, libc::PACKET_BROADCAST);
        assert_eq!(r.ifindex, va);
        assert!(r.ts >= before - Duration::from_secs(1), "{:?}", r.ts);
        assert!(r.ts <= before + Duration::from_secs(60), "{:?}", r.ts);
    }
    // A short buffer: the copy is cut, orig_len is the frame's.
    let mut short = [0u8; 20];
    let r = rx
        .recv(&mut short, Duration::from_secs(2))
        .expect("recv")
        .expect("the last frame");
    assert_eq!((r.len, r.orig_len), (20, frames[4].len()));
    assert_eq!(short[..], frames[4][..20]);
    assert!(rx.try_recv(&mut buf).expect("try_recv").is_none());

    let st = rx.statistics().expect("statistics");
    assert_eq!((st.packets, st.drops, st.freeze_q), (5, 0, 0));
    let st = rx.statistics().expect("statistics");
    assert_eq!(st, Default::default(), "reset on read");
    assert_eq!(rx.rollover_stats().expect("rollover stats"), None);

    let mut rx = rx;
    let e = rx
        .ring_poll(Duration::ZERO, 1, &mut |_| {})
        .expect_err("no ring");
    assert!(e.to_string().contains("ring"), "{e}");
}

#[test]
fn ring_receive_in_a_rollover_group() {
    let (a, b) = link("pkring");
    let mut rx = open(&a, "va", ETH_P_ALL);
    rx.setup_ring_v3(1 << 16, 4, 2048, 10).expect("ring");
    rx.join_fanout(11, HASH | FLAG_ROLLOVER, 0)
        .expect("create group 11");
    assert_eq!(
        rx.rollover_stats().expect("rollover stats"),
        Some(Default::default()),
        "a rollover member, nothing rolled over yet"
    );

    // The ring is the group's only member for now, so it gets every frame.
    let frames: Vec<Vec<u8>> = (0..12).map(|i| frame(60 + i)).collect();
    send(&b, "vb", &frames);
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(3);
    while seen.len() < frames.len() && Instant::now() < deadline {
        rx.ring_poll(Duration::from_millis(200), 8, &mut |fr| {
            seen.push((fr.data.to_vec(), fr.orig_len, fr.ts));
        })
        .expect("ring_poll");
    }
    assert_eq!(seen.len(), frames.len());
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("clock");
    for (i, (data, orig_len, ts)) in seen.iter().enumerate() {
        assert_eq!(data, &frames[i], "frame {i}");
        assert_eq!(*orig_len, frames[i].len());
        assert!(
            *ts > now - Duration::from_secs(60) && *ts <= now + Duration::from_secs(1),
            "{ts:?}"
        );
    }
    let st = rx.statistics().expect("statistics");
    assert_eq!((st.packets, st.drops, st.freeze_q), (12, 0, 0));
    assert_eq!(
        rx.ring_poll(Duration::from_millis(30), 4, &mut |_| {})
            .expect("ring_poll"),
        0,
        "nothing more"
    );

    // A second member of the group has rollover state too.
    let other = open(&a, "va", ETH_P_ALL);
    other
        .join_fanout(11, HASH | FLAG_ROLLOVER, 0)
        .expect("join group 11");
    assert!(other.rollover_stats().expect("rollover stats").is_some());
    assert_eq!(
        other.fanout().expect("fanout"),
        rx.fanout().expect("fanout")
    );
    // A second ring on the same socket.
    assert!(rx.setup_ring_v3(1 << 16, 4, 2048, 10).is_err());
}

#[test]
fn ring_fills_blocks_in_order() {
    let (a, b) = link("pkblk");
    let mut rx = open(&a, "va", ETH_P_ALL);
    // A block of one page holds two of these ~1350-byte frames: 20 frames take 10 of the 16
    // blocks, so the walk wraps around the ring in the second round.
    rx.setup_ring_v3(4096, 16, 2048, 10).expect("ring");
    for round in 0..2 {
        let frames: Vec<Vec<u8>> = (0..20).map(|i| frame(1300 + i)).collect();
        send(&b, "vb", &frames);
        let mut seen = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut calls = 0;
        while seen.len() < frames.len() && Instant::now() < deadline {
            rx.ring_poll(Duration::from_millis(200), 3, &mut |fr| {
                seen.push(fr.orig_len);
            })
            .expect("ring_poll");
            calls += 1;
        }
        let want: Vec<usize> = frames.iter().map(Vec::len).collect();
        assert_eq!(seen, want, "round {round}");
        assert!(calls >= 4, "at most 3 blocks per call: {calls} calls");
    }
    let st = rx.statistics().expect("statistics");
    assert_eq!((st.packets, st.drops), (40, 0));
}

#[test]
fn cbpf_steering() {
    let (a, b) = link("pkcbpf");
    let s0 = open(&a, "va", ETH_P_ALL);
    let s1 = open(&a, "va", ETH_P_ALL);
    s0.join_fanout(3, CBPF, 0).expect("create a cbpf group");
    s1.join_fanout(3, CBPF, 0).expect("join it");
    // ret #1: every packet to the second member.
    s0.set_fanout_cbpf(&[bpf_insn(0x06, 0, 0, 1)])
        .expect("PACKET_FANOUT_DATA cbpf");
    send(&b, "vb", &[frame(10), frame(20), frame(30)]);
    let mut buf = [0u8; 2048];
    let mut n1 = 0;
    while s1
        .recv(&mut buf, Duration::from_millis(500))
        .expect("recv")
        .is_some()
    {
        n1 += 1;
    }
    assert_eq!(n1, 3);
    assert!(s0.try_recv(&mut buf).expect("try_recv").is_none());

    // Only cbpf and ebpf groups take a program.
    let lb = open(&a, "va", ETH_P_ALL);
    lb.join_fanout(4, LB, 0).expect("lb group");
    assert_eq!(
        errno(lb.set_fanout_cbpf(&[bpf_insn(0x06, 0, 0, 0)])),
        Some(libc::EINVAL)
    );
}

/// An eBPF socket filter `r0 = ret; exit`, loaded with bpf(BPF_PROG_LOAD).
fn ebpf_return(ret: i32) -> OwnedFd {
    let mut insns = [0u8; 16];
    insns[0] = 0xb7; // BPF_ALU64 | BPF_MOV | BPF_K, dst r0
    insns[4..8].copy_from_slice(&ret.to_ne_bytes());
    insns[8] = 0x95; // BPF_JMP | BPF_EXIT
    let license = c"GPL";
    let mut attr = [0u8; 128];
    attr[0..4].copy_from_slice(&1u32.to_ne_bytes()); // BPF_PROG_TYPE_SOCKET_FILTER
    attr[4..8].copy_from_slice(&2u32.to_ne_bytes()); // insn_cnt
    attr[8..16].copy_from_slice(&(insns.as_ptr() as u64).to_ne_bytes());
    attr[16..24].copy_from_slice(&(license.as_ptr() as u64).to_ne_bytes());
    // SAFETY: BPF_PROG_LOAD (5) with a zero-padded bpf_attr pointing at live insns and license.
    let fd = unsafe { libc::syscall(libc::SYS_bpf, 5, attr.as_ptr(), attr.len() as u32) };
    assert!(
        fd >= 0,
        "BPF_PROG_LOAD: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: a new descriptor nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd as i32) }
}

#[test]
fn ebpf_steering() {
    let (a, b) = link("pkebpf");
    let s0 = open(&a, "va", ETH_P_ALL);
    let s1 = open(&a, "va", ETH_P_ALL);
    s0.join_fanout(3, EBPF, 0).expect("create an ebpf group");
    s1.join_fanout(3, EBPF, 0).expect("join it");
    let prog = ebpf_return(1);
    use std::os::fd::AsFd;
    s0.set_fanout_ebpf(prog.as_fd())
        .expect("PACKET_FANOUT_DATA ebpf");
    send(&b, "vb", &[frame(10), frame(20)]);
    let mut buf = [0u8; 2048];
    let mut n1 = 0;
    while s1
        .recv(&mut buf, Duration::from_millis(500))
        .expect("recv")
        .is_some()
    {
        n1 += 1;
    }
    assert_eq!(n1, 2);
    assert!(s0.try_recv(&mut buf).expect("try_recv").is_none());
}

#[test]
fn fanout_seen_from_outside() {
    let (a, _b) = link("pkpidfd");
    let pid = std::process::id();
    let s = open(&a, "va", ETH_P_IP);
    let ino = s.inode().expect("inode");
    assert_eq!(fanout_of(pid, s.as_raw_fd(), ino).expect("fanout_of"), None);
    // another inode than the one expected: the fd is not taken for it
    assert!(fanout_of(pid, s.as_raw_fd(), ino + 1).is_err());
    s.join_fanout(21, HASH | FLAG_ROLLOVER, 0).expect("join");
    let v = s.fanout().expect("fanout");
    assert_eq!(v, Some(21 | 0x10 << 24));
    assert_eq!(fanout_of(pid, s.as_raw_fd(), ino).expect("fanout_of"), v);

    // Not a socket: the error names the pid and the fd.
    let f = std::fs::File::open("/dev/null").expect("/dev/null");
    let null_ino = std::os::unix::fs::MetadataExt::ino(&f.metadata().expect("stat"));
    let e = fanout_of(pid, f.as_raw_fd(), null_ino).expect_err("not a socket");
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("pid {pid}")) && msg.contains(&format!("fd {}", f.as_raw_fd())),
        "{msg}"
    );
    // No such fd.
    let e = fanout_of(pid, 1_000_000, ino).expect_err("no such fd");
    assert_eq!(e.errno(), Some(libc::EBADF), "{e}");
}

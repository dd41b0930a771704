//! Root tests against the running kernel, each inside a throwaway namespace: the generic netlink
//! controller answers for itself and says which families are absent, and a sock_diag dump of
//! packet sockets finds exactly the one the test opened, with its fanout group.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use mpt_netlink::msg::diag::packet;
use mpt_netlink::sock::Socket;
use mpt_testkit::traffic::in_netns;
use mpt_testkit::{require_root, Netns};

#[test]
fn nlctrl_resolves_itself_and_ila_is_absent_here() {
    require_root();
    let ns = Netns::new("genl");
    let (ctrl, ila) = in_netns(&ns, || {
        let mut s = Socket::generic().expect("generic netlink socket");
        (
            s.resolve_family("nlctrl").expect("resolve nlctrl"),
            s.resolve_family("ila")
                .expect("resolving ila is not an error"),
        )
    });
    let ctrl = ctrl.expect("nlctrl exists on every kernel");
    assert_eq!((ctrl.name.as_str(), ctrl.id), ("nlctrl", 16));
    assert!(
        ctrl.ops.contains(&3),
        "CTRL_CMD_GETFAMILY among {:?}",
        ctrl.ops
    );
    // This machine's kernel has no CONFIG_IPV6_ILA (and no modules): the family is absent.
    assert_eq!(ila, None);
}

/// An AF_PACKET socket (ETH_P_ALL) in fanout group `id` with mode `mode`, and its inode.
fn packet_socket_in_group(id: u16, mode: u16) -> (OwnedFd, u32) {
    // SAFETY: plain socket(2); the result is checked and owned.
    let raw = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            i32::from((libc::ETH_P_ALL as u16).to_be()),
        )
    };
    assert!(
        raw >= 0,
        "AF_PACKET socket: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: raw is a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let arg: u32 = u32::from(id) | u32::from(mode) << 16;
    // SAFETY: setsockopt with a live u32 and its size.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_FANOUT,
            std::ptr::from_ref(&arg).cast(),
            4,
        )
    };
    assert_eq!(rc, 0, "PACKET_FANOUT: {}", std::io::Error::last_os_error());
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("fd link");
    let ino: u32 = link
        .to_string_lossy()
        .trim_start_matches("socket:[")
        .trim_end_matches(']')
        .parse()
        .expect("socket inode");
    (fd, ino)
}

#[test]
fn packet_diag_dump_finds_our_socket_and_nothing_else() {
    require_root();
    let ns = Netns::new("pdiag");
    let (ino, socks) = in_netns(&ns, || {
        let (_fd, ino) = packet_socket_in_group(77, 1); // PACKET_FANOUT_LB
        let mut s = Socket::sock_diag().expect("sock_diag socket");
        let show = packet::show::INFO | packet::show::FANOUT | packet::show::MEMINFO;
        let answers = s
            .dump(&packet::dump_request(show), "list packet sockets")
            .expect("dump");
        let socks: Vec<packet::PacketSock> = answers
            .iter()
            .map(|p| packet::decode(p).expect("decodes"))
            .collect();
        (ino, socks)
    });
    assert_eq!(
        socks.len(),
        1,
        "a fresh namespace has only our socket: {socks:?}"
    );
    let s = &socks[0];
    assert_eq!(s.ino, ino);
    assert_eq!((s.sock_type, s.protocol), (3, 0x0003));
    assert_eq!(s.fanout, Some((77, 1)));
    assert!(s.meminfo.is_some_and(|m| m[packet::meminfo::RCVBUF] > 0));
    assert!(s.info.is_some());
}

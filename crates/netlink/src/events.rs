//! Notifications: a `NETLINK_ROUTE` socket that joins multicast groups and wakes its owner when
//! the kernel announces a change. What changed is not decoded: the owner looks again.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use crate::Error;

/// `RTNLGRP_LINK`: links added, removed, up, down, carrier.
pub const RTNLGRP_LINK: u32 = 1;
/// `RTNLGRP_IPV4_IFADDR`: IPv4 addresses.
pub const RTNLGRP_IPV4_IFADDR: u32 = 5;
/// `RTNLGRP_IPV4_ROUTE`: IPv4 routes.
pub const RTNLGRP_IPV4_ROUTE: u32 = 7;
/// `RTNLGRP_IPV4_RULE`: IPv4 rules.
pub const RTNLGRP_IPV4_RULE: u32 = 8;
/// `RTNLGRP_IPV6_IFADDR`: IPv6 addresses.
pub const RTNLGRP_IPV6_IFADDR: u32 = 9;
/// `RTNLGRP_IPV6_ROUTE`: IPv6 routes.
pub const RTNLGRP_IPV6_ROUTE: u32 = 11;
/// `RTNLGRP_IPV6_RULE`: IPv6 rules.
pub const RTNLGRP_IPV6_RULE: u32 = 19;
/// `RTNLGRP_IPV4_NETCONF`: IPv4 per-device settings (forwarding).
pub const RTNLGRP_IPV4_NETCONF: u32 = 24;
/// `RTNLGRP_NEXTHOP`: nexthop objects.
pub const RTNLGRP_NEXTHOP: u32 = 32;

/// A socket subscribed to route notifications of the calling thread's network namespace.
#[derive(Debug)]
pub struct Events {
    fd: OwnedFd,
    /// What the notifications read since [`Events::take_kinds`] were about.
    kinds: std::collections::BTreeSet<&'static str>,
}

/// What a notification is about, in words an operator reads in a log: `route`, `addr`,
/// `rule`, `netconf`, `nexthop`, `link-up` (administratively up with carrier), `link-down`,
/// `link-del`; `overrun` when the kernel dropped notifications. `msg` is one netlink message.
fn kind(msg: &[u8]) -> &'static str {
    const IFF_UP: u32 = 0x1;
    const IFF_LOWER_UP: u32 = 0x1_0000;
    let ty = msg
        .get(4..6)
        .map_or(0, |b| u16::from_ne_bytes([b[0], b[1]]));
    match ty {
        // RTM_NEWLINK: ifinfomsg's flags at 8 bytes into the payload
        16 => match msg.get(24..28) {
            Some(b) => {
                let f = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
                if f & (IFF_UP | IFF_LOWER_UP) == IFF_UP | IFF_LOWER_UP {
                    "link-up"
                } else {
                    "link-down"
                }
            }
            None => "link",
        },
        17 => "link-del",
        20 | 21 => "addr",
        24 | 25 => "route",
        32 | 33 => "rule",
        80 | 81 => "netconf",
        104 | 105 => "nexthop",
        _ => "other",
    }
}

/// The kinds of the netlink messages in one datagram (`nlmsg_len` walks them, 4-byte aligned).
fn kinds_of(mut buf: &[u8], into: &mut std::collections::BTreeSet<&'static str>) {
    while let Some(b) = buf.get(0..4) {
        let len = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize;
        if len < 16 || len > buf.len() {
            break;
        }
        into.insert(kind(&buf[..len]));
        buf = buf.get(len.next_multiple_of(4)..).unwrap_or_default();
    }
}

impl Events {
    /// Join `groups` (`RTNLGRP_*`).
    pub fn subscribe(groups: &[u32]) -> Result<Self, Error> {
        // SAFETY: plain socket(2); the result is checked and owned below.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                libc::NETLINK_ROUTE,
            )
        };
        if raw < 0 {
            return Err(Error::io("netlink socket", io::Error::last_os_error()));
        }
        // SAFETY: raw is a new descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // Bound (the kernel picks the port id): an unbound socket has port id 0, which the
        // kernel's own notifications (port id 0) skip as their sender.
        // SAFETY: an all-zero sockaddr_nl is valid; bind(2) with its size.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                std::ptr::from_ref(&sa).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(Error::io("bind netlink socket", io::Error::last_os_error()));
        }
        for g in groups {
            // SAFETY: setsockopt(2) with a pointer to a live u32 and its size.
            let rc = unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_NETLINK,
                    libc::NETLINK_ADD_MEMBERSHIP,
                    std::ptr::from_ref(g).cast(),
                    std::mem::size_of::<u32>() as libc::socklen_t,
                )
            };
            if rc < 0 {
                return Err(Error::io(
                    format!("join netlink group {g}"),
                    io::Error::last_os_error(),
                ));
            }
        }
        Ok(Events {
            fd,
            kinds: std::collections::BTreeSet::new(),
        })
    }

    /// Read and drop whatever is queued; `true` if anything was (an overrun counts).
    fn drain(&mut self) -> Result<bool, Error> {
        let mut buf = vec![0u8; 64 * 1024];
        let mut any = false;
        loop {
            // SAFETY: recv(2) into a live buffer of its length.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n > 0 {
                any = true;
                let n = usize::try_from(n).unwrap_or(0).min(buf.len());
                kinds_of(&buf[..n], &mut self.kinds);
                continue;
            }
            if n == 0 {
                return Ok(any);
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) => return Ok(any),
                Some(libc::EINTR) => continue,
                // notifications were lost: something changed
                Some(libc::ENOBUFS) => {
                    any = true;
                    self.kinds.insert("overrun");
                }
                _ => return Err(Error::io("read netlink notifications", e)),
            }
        }
    }

    /// Whether a notification arrives within `timeout` (`None`: wait for one).
    fn readable(&self, timeout: Option<Duration>) -> Result<bool, Error> {
        // rounded up: a timeout below a millisecond must not become a busy 0
        let ms = timeout.map_or(-1, |t| {
            i32::try_from(t.as_micros().div_ceil(1000)).unwrap_or(i32::MAX)
        });
        let mut p = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        loop {
            // SAFETY: poll(2) on one live pollfd.
            let rc = unsafe { libc::poll(&mut p, 1, ms) };
            if rc >= 0 {
                return Ok(rc > 0);
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(Error::io("wait for netlink notifications", e));
            }
        }
    }

    /// What the notifications read since the last call were about (sorted, each once; see
    /// [`kind`]), and forget them.
    pub fn take_kinds(&mut self) -> Vec<&'static str> {
        std::mem::take(&mut self.kinds).into_iter().collect()
    }

    /// Wait up to `timeout` (`None`: for ever) for a notification; then until `quiet` passes
    /// without another one, at most `settle_max` (a burst, such as a link going down with its
    /// routes, counts once; steady churn does not postpone the answer for ever). Returns
    /// whether anything changed.
    pub fn wait_change(
        &mut self,
        timeout: Option<Duration>,
        quiet: Duration,
        settle_max: Duration,
    ) -> Result<bool, Error> {
        let start = Instant::now();
        loop {
            let left = timeout.map(|t| t.saturating_sub(start.elapsed()));
            if left.is_some_and(|l| l.is_zero()) {
                return Ok(false);
            }
            if self.readable(left)? && self.drain()? {
                break;
            }
        }
        let settled = Instant::now();
        let mut last = settled;
        while last.elapsed() < quiet && settled.elapsed() < settle_max {
            let wait = quiet
                .saturating_sub(last.elapsed())
                .min(settle_max.saturating_sub(settled.elapsed()));
            if self.readable(Some(wait))? && self.drain()? {
                last = Instant::now();
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A netlink message of `ty` with `payload`, as the kernel lays it out.
    fn msg(ty: u16, payload: &[u8]) -> Vec<u8> {
        let len = 16 + payload.len();
        let mut v = Vec::new();
        v.extend_from_slice(&(len as u32).to_ne_bytes());
        v.extend_from_slice(&ty.to_ne_bytes());
        v.extend_from_slice(&[0; 10]);
        v.extend_from_slice(payload);
        v.resize(len.next_multiple_of(4), 0);
        v
    }

    fn ifinfo(flags: u32) -> Vec<u8> {
        let mut p = vec![0u8; 8];
        p.extend_from_slice(&flags.to_ne_bytes());
        p.extend_from_slice(&[0; 4]);
        p
    }

    #[test]
    fn kinds_of_a_datagram() {
        let mut buf = msg(24, &[0; 13]); // RTM_NEWROUTE, unaligned payload
        buf.extend(msg(16, &ifinfo(0x1 | 0x1_0000))); // up with carrier
        buf.extend(msg(16, &ifinfo(0x1))); // up, no carrier
        buf.extend(msg(21, &[0; 8])); // RTM_DELADDR
        let mut k = std::collections::BTreeSet::new();
        kinds_of(&buf, &mut k);
        assert_eq!(
            k.into_iter().collect::<Vec<_>>(),
            ["addr", "link-down", "link-up", "route"]
        );
    }

    #[test]
    fn a_truncated_message_ends_the_walk() {
        let mut buf = msg(32, &[0; 12]);
        buf.extend_from_slice(&200u32.to_ne_bytes());
        let mut k = std::collections::BTreeSet::new();
        kinds_of(&buf, &mut k);
        assert_eq!(k.into_iter().collect::<Vec<_>>(), ["rule"]);
    }
}

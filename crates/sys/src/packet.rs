//! AF_PACKET sockets for fanout groups: open and bind one, join a group
//! (`PACKET_FANOUT` with `struct fanout_args`), give a cbpf/ebpf group its steering program
//! (`PACKET_FANOUT_DATA`), read the kernel's counters (`PACKET_STATISTICS`,
//! `PACKET_ROLLOVER_STATS`), and receive, by copy (`recvmsg`) or from a `TPACKET_V3` ring.
//! [`fanout_of`] reads the group of a socket held by another process (`pidfd_getfd`).
//!
//! Numbers and layouts are `include/uapi/linux/if_packet.h`, through `libc`; the rules the
//! kernel applies to a join are in `net/packet/af_packet.c` (`fanout_add`). Everything acts in
//! the network namespace of the thread that opened the socket: fanout group ids are per
//! namespace.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime};

use crate::Error;

/// Every protocol (`ETH_P_ALL`), host byte order.
pub const ETH_P_ALL: u16 = 0x0003;
/// IPv4 (`ETH_P_IP`), host byte order.
pub const ETH_P_IP: u16 = 0x0800;

/// Kernel statistics of a packet socket (`PACKET_STATISTICS`; the kernel resets them on every
/// read).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Frames the socket was offered since the last read, drops included (`tp_packets`).
    pub packets: u32,
    /// Frames dropped for want of room (`tp_drops`).
    pub drops: u32,
    /// Times the `TPACKET_V3` ring was found full and froze (`tp_freeze_q_cnt`; 0 without a
    /// V3 ring).
    pub freeze_q: u32,
}

/// Rollover counters of a fanout member (`PACKET_ROLLOVER_STATS`, not reset on read).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RolloverStats {
    /// Packets moved to another member (`tp_all`).
    pub all: u64,
    /// Of those, packets moved away because their flow was huge and the socket was low on
    /// room (`tp_huge`).
    pub huge: u64,
    /// Packets no member had room for, kept on the chosen socket (`tp_failed`).
    pub failed: u64,
}

/// One received frame (copy mode).
#[derive(Debug, Clone, Copy)]
pub struct Received {
    /// Bytes copied into the caller's buffer.
    pub len: usize,
    /// The frame's length on the wire (more than `len` when the buffer was too short).
    pub orig_len: usize,
    /// Arrival time since the epoch: the kernel's (`SO_TIMESTAMPNS`, see
    /// [`PacketSocket::enable_timestamps`]), or the time of the read when there is none.
    pub ts: Duration,
    /// `sll_pkttype` (`PACKET_HOST`, `PACKET_BROADCAST`, … `PACKET_OUTGOING`).
    pub pkttype: u8,
    /// The device it came in on (or went out of).
    pub ifindex: u32,
}

/// A frame seen in a `TPACKET_V3` ring, borrowed from the ring for the length of the callback.
#[derive(Debug)]
pub struct RingFrame<'a> {
    /// The captured bytes from the MAC header on (`tp_snaplen` of them).
    pub data: &'a [u8],
    /// The frame's length on the wire (`tp_len`).
    pub orig_len: usize,
    /// Arrival time since the epoch (`tp_sec`, `tp_nsec`).
    pub ts: Duration,
}

/// The mapping of a `TPACKET_V3` receive ring, unmapped on drop.
#[derive(Debug)]
struct Ring {
    base: NonNull<u8>,
    len: usize,
    block_size: usize,
    block_nr: usize,
    /// The block the kernel hands to us next.
    next: usize,
}

// SAFETY: the mapping is owned by this value alone (nothing else holds `base`), and the ring's
// memory is only touched through `&mut PacketSocket`, so moving it to another thread is sound.
unsafe impl Send for Ring {}
// SAFETY: a shared reference gives no access to the mapped memory (every access goes through
// `&mut PacketSocket`), only to the plain numbers beside it.
unsafe impl Sync for Ring {}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: base and len are exactly what mmap returned and was given; no reference into
        // the mapping outlives the `&mut` borrow of `ring_poll` that created it.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// An `AF_PACKET` `SOCK_RAW` socket, with its `TPACKET_V3` receive ring when one was set up.
#[derive(Debug)]
pub struct PacketSocket {
    // Declared first so the ring is unmapped before the socket is closed.
    ring: Option<Ring>,
    fd: OwnedFd,
}

/// Types the kernel may fill with any bytes (`getsockopt`).
///
/// # Safety
/// Every bit pattern of the type's size must be a valid value.
unsafe trait Pod: Copy {}
// SAFETY: an integer is valid for every bit pattern.
unsafe impl Pod for libc::c_int {}
// SAFETY: an integer is valid for every bit pattern.
unsafe impl Pod for u32 {}
// SAFETY: three c_uint, valid for every bit pattern.
unsafe impl Pod for libc::tpacket_stats_v3 {}
// SAFETY: three u64, valid for every bit pattern.
unsafe impl Pod for libc::tpacket_rollover_stats {}

fn setopt<T>(fd: BorrowedFd<'_>, level: libc::c_int, name: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: the kernel reads size_of::<T>() bytes from `v`, a live value of that size.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `getsockopt` into a `T`: the value and the length the kernel wrote.
fn getopt<T: Pod>(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    mut v: T,
) -> io::Result<(T, usize)> {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `v`, a live T for which any bytes are
    // a valid value (Pod).
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut v as *mut T).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((v, len as usize))
}

/// The `struct fanout_args` of a join. libc lays it out per `target_endian`: on big-endian
/// `type_flags` comes first, so that the first four bytes read as the same native int as the
/// legacy `id | type_flags << 16` on every host.
fn fanout_args(id: u16, type_flags: u16, max_members: u32) -> libc::fanout_args {
    libc::fanout_args {
        id,
        type_flags,
        max_num_members: max_members,
    }
}

/// `getsockopt(PACKET_FANOUT)` on any descriptor.
fn fanout_value(fd: BorrowedFd<'_>) -> io::Result<Option<u32>> {
    let (v, _) = getopt::<u32>(fd, libc::SOL_PACKET, libc::PACKET_FANOUT, 0)?;
    Ok((v != 0).then_some(v))
}

/// Milliseconds for poll(2): rounded up (a nonzero timeout never becomes a busy loop), at most
/// `c_int::MAX`.
fn poll_ms(d: Duration) -> libc::c_int {
    let ms = d.as_nanos().div_ceil(1_000_000);
    libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX)
}

/// Wait up to `timeout` for `fd` to be readable: Ok(false) on timeout or EINTR.
fn wait_readable(fd: BorrowedFd<'_>, timeout: Duration, what: &str) -> Result<bool, Error> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one live pollfd, nfds 1.
    let rc = unsafe { libc::poll(&mut p, 1, poll_ms(timeout)) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINTR) {
            return Ok(false);
        }
        return Err(Error::io(format!("poll {what}"), e));
    }
    if rc > 0 && p.revents & libc::POLLIN == 0 && p.revents & libc::POLLERR != 0 {
        // a pending socket error (ENETDOWN when the device goes down): a ring never reads
        // it with recvmsg, so take it here, or every poll would return at once
        let mut err: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: SO_ERROR writes one int into err; len says its size.
        let rc = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                (&mut err as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        if rc == 0 && err != 0 {
            return Err(Error::io(
                format!("poll {what}"),
                io::Error::from_raw_os_error(err),
            ));
        }
    }
    Ok(rc > 0)
}

fn now_since_epoch() -> Duration {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
}

/// The time of an `SCM_TIMESTAMPNS` control message's data: a `struct timespec`, two native
/// longs (16 bytes on 64-bit hosts, 8 on 32-bit hosts with a 32-bit `time_t`).
fn timespec_of(data: &[u8]) -> Option<Duration> {
    let (sec, nsec) = match data.len() {
        16 => (
            i64::from_ne_bytes(data[..8].try_into().ok()?),
            i64::from_ne_bytes(data[8..16].try_into().ok()?),
        ),
        8 => (
            i64::from(i32::from_ne_bytes(data[..4].try_into().ok()?)),
            i64::from(i32::from_ne_bytes(data[4..8].try_into().ok()?)),
        ),
        _ => return None,
    };
    let sec = u64::try_from(sec).ok()?;
    let nsec = u32::try_from(nsec).ok().filter(|n| *n < 1_000_000_000)?;
    Some(Duration::new(sec, nsec))
}

impl PacketSocket {
    /// A `SOCK_RAW | SOCK_CLOEXEC` packet socket for `protocol` (host order, e.g.
    /// [`ETH_P_ALL`]), bound (`sockaddr_ll`) to `ifindex` (0 = every device).
    ///
    /// The socket is created with protocol 0, which receives nothing, and gets its protocol
    /// with the bind: no frame of another device is queued in between.
    pub fn open(ifindex: u32, protocol: u16) -> Result<Self, Error> {
        let what = || format!("packet socket for protocol {protocol:#06x} on ifindex {ifindex}");
        let index = libc::c_int::try_from(ifindex)
            .map_err(|_| Error::io(what(), io::Error::from_raw_os_error(libc::ENODEV)))?;
        // SAFETY: socket(2) with constant arguments; it returns a new descriptor or -1.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(Error::last(format!("socket ({})", what())));
        }
        // SAFETY: `raw` is a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: sockaddr_ll is plain old data; all zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as libc::c_ushort;
        sll.sll_protocol = protocol.to_be();
        sll.sll_ifindex = index;
        // SAFETY: bind reads size_of::<sockaddr_ll>() bytes from a live sockaddr_ll.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(Error::last(format!("bind {}", what())));
        }
        Ok(PacketSocket { ring: None, fd })
    }

    /// The socket's descriptor.
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The socket's inode (`fstat` `st_ino`): the `socket:[INO]` of `/proc/PID/fd` and the
    /// `pdiag_ino` that `packet_diag` reports.
    #[allow(clippy::useless_conversion)] // ino_t is u32 on some 32-bit targets
    pub fn inode(&self) -> Result<u64, Error> {
        // SAFETY: stat is plain old data; all zero is a valid value.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat fills the live `st` for our open descriptor.
        let rc = unsafe { libc::fstat(self.fd.as_raw_fd(), &mut st) };
        if rc != 0 {
            return Err(Error::last("fstat packet socket"));
        }
        Ok(u64::from(st.st_ino))
    }

    /// The receive buffer: `SO_RCVBUFFORCE` (beyond `net.core.rmem_max`, needs
    /// CAP_NET_ADMIN), falling back to `SO_RCVBUF` on EPERM. The kernel doubles the value for
    /// its bookkeeping; values above `i32::MAX` are taken as `i32::MAX`.
    pub fn set_rcvbuf(&self, bytes: u32) -> Result<(), Error> {
        let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
        match setopt(self.as_fd(), libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &v) {
            Ok(()) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                setopt(self.as_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, &v)
                    .map_err(|e| Error::io(format!("setsockopt SO_RCVBUF {bytes}"), e))
            }
            Err(e) => Err(Error::io(format!("setsockopt SO_RCVBUFFORCE {bytes}"), e)),
        }
    }

    /// Kernel receive timestamps (`SO_TIMESTAMPNS`) for [`PacketSocket::recv`].
    pub fn enable_timestamps(&self) -> Result<(), Error> {
        let on: libc::c_int = 1;
        setopt(self.as_fd(), libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &on)
            .map_err(|e| Error::io("setsockopt SO_TIMESTAMPNS", e))
    }

    /// Do not receive frames this host sends (`PACKET_IGNORE_OUTGOING`, ≥ 4.20).
    pub fn set_ignore_outgoing(&self) -> Result<(), Error> {
        let on: libc::c_int = 1;
        setopt(
            self.as_fd(),
            libc::SOL_PACKET,
            libc::PACKET_IGNORE_OUTGOING,
            &on,
        )
        .map_err(|e| Error::io("setsockopt PACKET_IGNORE_OUTGOING", e))
    }

    /// A `TPACKET_V3` receive ring: `PACKET_VERSION` = `TPACKET_V3`, then `PACKET_RX_RING`
    /// with `tpacket_req3 { block_size, block_nr, frame_size, frame_nr = block_size /
    /// frame_size * block_nr, retire_blk_tov = retire_ms, sizeof_priv 0, feature_req_word 0 }`,
    /// mapped `PROT_READ | PROT_WRITE`, `MAP_SHARED | MAP_LOCKED` (without `MAP_LOCKED` when
    /// that fails, e.g. beyond `RLIMIT_MEMLOCK`). `block_size` must be a multiple of the page
    /// size and `frame_size` of 16 (the kernel says EINVAL otherwise). Call it before
    /// [`PacketSocket::join_fanout`]. The ring is unmapped on drop.
    pub fn setup_ring_v3(
        &mut self,
        block_size: u32,
        block_nr: u32,
        frame_size: u32,
        retire_ms: u32,
    ) -> Result<(), Error> {
        let what = format!(
            "TPACKET_V3 ring of {block_nr} blocks of {block_size} bytes, frames of {frame_size}"
        );
        let invalid = |why: &str| {
            Error::io(
                format!("{what}: {why}"),
                io::Error::from_raw_os_error(libc::EINVAL),
            )
        };
        if self.ring.is_some() {
            return Err(Error::io(
                what.clone(),
                io::Error::from_raw_os_error(libc::EBUSY),
            ));
        }
        if frame_size == 0 || block_nr == 0 {
            return Err(invalid("no frames"));
        }
        let frame_nr = (block_size / frame_size)
            .checked_mul(block_nr)
            .ok_or_else(|| invalid("too many frames"))?;
        let len = (block_size as usize)
            .checked_mul(block_nr as usize)
            .ok_or_else(|| invalid("too large"))?;
        let version = libc::tpacket_versions::TPACKET_V3 as libc::c_int;
        setopt(
            self.as_fd(),
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            &version,
        )
        .map_err(|e| Error::io("setsockopt PACKET_VERSION TPACKET_V3", e))?;
        let req = libc::tpacket_req3 {
            tp_block_size: block_size,
            tp_block_nr: block_nr,
            tp_frame_size: frame_size,
            tp_frame_nr: frame_nr,
            tp_retire_blk_tov: retire_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setopt(self.as_fd(), libc::SOL_PACKET, libc::PACKET_RX_RING, &req)
            .map_err(|e| Error::io(format!("setsockopt PACKET_RX_RING ({what})"), e))?;
        let map = |flags: libc::c_int| {
            // SAFETY: a new shared mapping of the socket's ring, `len` bytes as configured
            // above; the kernel checks the size against the ring.
            unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    flags,
                    self.fd.as_raw_fd(),
                    0,
                )
            }
        };
        let mut p = map(libc::MAP_SHARED | libc::MAP_LOCKED);
        if p == libc::MAP_FAILED {
            p = map(libc::MAP_SHARED);
        }
        let base = match NonNull::new(p.cast::<u8>()) {
            Some(b) if p != libc::MAP_FAILED => b,
            _ => {
                let e = Error::last(format!("mmap {what}"));
                // Release the ring again so the socket is not left filling memory nobody
                // reads (a request of 0 blocks frees it); the mmap error is the one to report.
                // SAFETY: tpacket_req3 is plain old data; all zero is a valid value.
                let none: libc::tpacket_req3 = unsafe { std::mem::zeroed() };
                let _ = setopt(self.as_fd(), libc::SOL_PACKET, libc::PACKET_RX_RING, &none);
                return Err(e);
            }
        };
        self.ring = Some(Ring {
            base,
            len,
            block_size: block_size as usize,
            block_nr: block_nr as usize,
            next: 0,
        });
        Ok(())
    }

    /// Join (or create) fanout group `id` with `type_flags` = mode | flag bits (the 16-bit
    /// value, e.g. `0 | 0x1000` for hash with rollover), through `struct fanout_args` (8
    /// bytes, ≥ 5.11); `max_members` 0 is the kernel's default (256).
    pub fn join_fanout(&self, id: u16, type_flags: u16, max_members: u32) -> Result<(), Error> {
        let args = fanout_args(id, type_flags, max_members);
        setopt(self.as_fd(), libc::SOL_PACKET, libc::PACKET_FANOUT, &args).map_err(|e| {
            Error::io(
                format!(
                    "join fanout group {id} (type_flags {type_flags:#06x}, max members \
                     {max_members})"
                ),
                e,
            )
        })
    }

    /// `getsockopt(PACKET_FANOUT)`: `None` when not in a group, else the raw value
    /// `id | mode << 16 | flags << 24` (flags as the kernel stores them: `type_flags >> 8`,
    /// without `UNIQUEID`). The kernel answers 0 for "no group", so a member of group 0 in mode
    /// hash without flags reads as `None` too.
    pub fn fanout(&self) -> Result<Option<u32>, Error> {
        fanout_value(self.as_fd()).map_err(|e| Error::io("getsockopt PACKET_FANOUT", e))
    }

    /// `PACKET_FANOUT_DATA` with a classic program (`struct sock_fprog` over `prog`, which the
    /// kernel copies): for a group of mode cbpf, after joining it.
    pub fn set_fanout_cbpf(&self, prog: &[libc::sock_filter]) -> Result<(), Error> {
        let what = || format!("setsockopt PACKET_FANOUT_DATA (cbpf, {} insns)", prog.len());
        let len = libc::c_ushort::try_from(prog.len())
            .map_err(|_| Error::io(what(), io::Error::from_raw_os_error(libc::EINVAL)))?;
        let fprog = libc::sock_fprog {
            len,
            // The kernel only reads through it.
            filter: prog.as_ptr().cast_mut(),
        };
        setopt(
            self.as_fd(),
            libc::SOL_PACKET,
            libc::PACKET_FANOUT_DATA,
            &fprog,
        )
        .map_err(|e| Error::io(what(), e))
    }

    /// `PACKET_FANOUT_DATA` with the fd of an eBPF `BPF_PROG_TYPE_SOCKET_FILTER` program (a
    /// u32, optlen 4): for a group of mode ebpf, after joining it.
    pub fn set_fanout_ebpf(&self, prog_fd: BorrowedFd<'_>) -> Result<(), Error> {
        let v = prog_fd.as_raw_fd() as u32;
        setopt(self.as_fd(), libc::SOL_PACKET, libc::PACKET_FANOUT_DATA, &v).map_err(|e| {
            Error::io(
                format!("setsockopt PACKET_FANOUT_DATA (ebpf, prog fd {v})"),
                e,
            )
        })
    }

    /// `PACKET_STATISTICS`, which resets the kernel's counters. The buffer is a
    /// `tpacket_stats_v3`; the kernel fills all 12 bytes when the ring is V3, else the 8 of a
    /// `tpacket_stats` (then `freeze_q` is 0).
    pub fn statistics(&self) -> Result<Stats, Error> {
        let zero = libc::tpacket_stats_v3 {
            tp_packets: 0,
            tp_drops: 0,
            tp_freeze_q_cnt: 0,
        };
        let (st, len) = getopt(
            self.as_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            zero,
        )
        .map_err(|e| Error::io("getsockopt PACKET_STATISTICS", e))?;
        let v3 = len >= std::mem::size_of::<libc::tpacket_stats_v3>();
        Ok(Stats {
            packets: st.tp_packets,
            drops: st.tp_drops,
            freeze_q: if v3 { st.tp_freeze_q_cnt } else { 0 },
        })
    }

    /// `PACKET_ROLLOVER_STATS`; `Ok(None)` when the kernel answers EINVAL: the socket has no
    /// rollover state (it is not in a group of mode rollover or with the rollover flag).
    pub fn rollover_stats(&self) -> Result<Option<RolloverStats>, Error> {
        rollover_value(self.as_fd()).map_err(|e| Error::io("getsockopt PACKET_ROLLOVER_STATS", e))
    }

    /// Send one whole frame (link-layer header included) out of the bound device; the socket
    /// must have been opened with a nonzero ifindex.
    pub fn send(&self, frame: &[u8]) -> Result<usize, Error> {
        // SAFETY: send reads frame.len() bytes from a live slice.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            return Err(Error::last(format!(
                "send a frame of {} bytes on a packet socket",
                frame.len()
            )));
        }
        Ok(n as usize)
    }

    /// Send frames straight to the device's driver, past its queueing discipline
    /// (`PACKET_QDISC_BYPASS`, ≥ 3.14): a generator's frames are not held or dropped by a
    /// qdisc, and each costs less.
    pub fn set_qdisc_bypass(&self) -> Result<(), Error> {
        let on: libc::c_int = 1;
        setopt(
            self.as_fd(),
            libc::SOL_PACKET,
            libc::PACKET_QDISC_BYPASS,
            &on,
        )
        .map_err(|e| Error::io("setsockopt PACKET_QDISC_BYPASS", e))
    }

    /// Send whole frames (link-layer header included) out of the bound device in one
    /// `sendmmsg` (at most 1024 a call, the kernel's `UIO_MAXIOV`); the number sent, which
    /// is fewer than given when the kernel stopped early. An error only when not even the
    /// first was sent (`ENOBUFS`: the device's queue is full).
    pub fn send_many(&self, frames: &[&[u8]]) -> Result<usize, Error> {
        let frames = &frames[..frames.len().min(1024)];
        if frames.is_empty() {
            return Ok(0);
        }
        let mut iovs: Vec<libc::iovec> = frames
            .iter()
            .map(|f| libc::iovec {
                iov_base: f.as_ptr().cast_mut().cast(),
                iov_len: f.len(),
            })
            .collect();
        let mut msgs: Vec<libc::mmsghdr> = iovs
            .iter_mut()
            .map(|iov| {
                // SAFETY: mmsghdr is plain old data; all zero is a valid value.
                let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
                m.msg_hdr.msg_iov = iov;
                m.msg_hdr.msg_iovlen = 1;
                m
            })
            .collect();
        // SAFETY: msgs holds frames.len() headers, each over one iovec of a live frame (the
        // kernel only reads them); all outlive the call.
        let n = unsafe {
            libc::sendmmsg(
                self.fd.as_raw_fd(),
                msgs.as_mut_ptr(),
                msgs.len() as libc::c_uint,
                0,
            )
        };
        if n < 0 {
            return Err(Error::last(format!(
                "sendmmsg of {} frames on a packet socket",
                frames.len()
            )));
        }
        Ok(n as usize)
    }

    /// Wait up to `timeout` (poll) for a frame, then receive one into `buf` without blocking
    /// (see [`PacketSocket::try_recv`]). `Ok(None)` on timeout, EAGAIN or EINTR.
    pub fn recv(&self, buf: &mut [u8], timeout: Duration) -> Result<Option<Received>, Error> {
        if !wait_readable(self.as_fd(), timeout, "packet socket")? {
            return Ok(None);
        }
        self.try_recv(buf)
    }

    /// Receive one frame into `buf` without waiting (`recvmsg`, `MSG_DONTWAIT | MSG_TRUNC`,
    /// so `orig_len` is the real length when `buf` is short); the time is the
    /// `SCM_TIMESTAMPNS` control message when timestamps are on, else now. `Ok(None)` when
    /// nothing is queued (or EINTR).
    pub fn try_recv(&self, buf: &mut [u8]) -> Result<Option<Received>, Error> {
        // SAFETY: sockaddr_ll is plain old data; all zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // u64 for the alignment cmsghdr needs; room for a timespec and more.
        let mut control = [0u64; 16];
        // SAFETY: msghdr is plain old data; all zero is a valid value (the padding fields
        // some libcs have stay zero).
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = (&mut sll as *mut libc::sockaddr_ll).cast();
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: msg points at live name, iovec (over `buf`) and control buffers of the sizes
        // it states, all of which outlive the call.
        let n = unsafe {
            libc::recvmsg(
                self.fd.as_raw_fd(),
                &mut msg,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN | libc::EINTR) => Ok(None),
                _ => Err(Error::io("recvmsg on packet socket", e)),
            };
        }
        let orig_len = n as usize;
        let mut ts = None;
        // SAFETY: msg is the header recvmsg just filled; CMSG_FIRSTHDR reads its control
        // fields only.
        let mut c = unsafe { libc::CMSG_FIRSTHDR(&msg) };
        while !c.is_null() {
            // SAFETY: c is non-null and, by CMSG_FIRSTHDR/CMSG_NXTHDR, a header wholly inside
            // the control buffer; read unaligned all the same.
            let h = unsafe { std::ptr::read_unaligned(c) };
            if h.cmsg_level == libc::SOL_SOCKET && h.cmsg_type == libc::SCM_TIMESTAMPNS {
                // SAFETY: c is a valid header inside the control buffer.
                let data = unsafe { libc::CMSG_DATA(c) };
                // SAFETY: CMSG_LEN(0) is arithmetic only.
                let hdr_len = unsafe { libc::CMSG_LEN(0) } as usize;
                let data_len = (h.cmsg_len as usize).saturating_sub(hdr_len);
                let end = control.as_ptr() as usize + std::mem::size_of_val(&control);
                if data as usize + data_len <= end {
                    // SAFETY: data..data+data_len lies inside `control` (checked above),
                    // which the kernel initialised up to msg_controllen.
                    let bytes = unsafe { std::slice::from_raw_parts(data, data_len) };
                    ts = timespec_of(bytes);
                }
            }
            // SAFETY: msg and c are the header and a control message of it, as above.
            c = unsafe { libc::CMSG_NXTHDR(&msg, c) };
        }
        Ok(Some(Received {
            len: orig_len.min(buf.len()),
            orig_len,
            ts: ts.unwrap_or_else(now_since_epoch),
            pkttype: sll.sll_pkttype,
            ifindex: u32::try_from(sll.sll_ifindex).unwrap_or(0),
        }))
    }

    /// Ring mode: wait up to `timeout` for the current block to be handed to us
    /// (`TP_STATUS_USER`), call `f` for each packet in it (the `tpacket3_hdr` walk by
    /// `tp_next_offset`), hand the block back (`TP_STATUS_KERNEL`, a release store after our
    /// reads) and go on to the next; at most `max_blocks` blocks per call (0: none), no waiting
    /// once one was processed. Returns the number of packets. An error if no ring was set up
    /// ([`PacketSocket::setup_ring_v3`]).
    ///
    /// A block is handed over when it is full or when its retire timeout (`retire_ms`)
    /// expires with packets in it, so a quiet socket delivers a lone packet only that late.
    pub fn ring_poll(
        &mut self,
        timeout: Duration,
        max_blocks: usize,
        f: &mut dyn FnMut(RingFrame<'_>),
    ) -> Result<usize, Error> {
        let fd = self.fd.as_fd();
        let Some(ring) = self.ring.as_mut() else {
            return Err(Error::io(
                "ring_poll",
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "no receive ring (setup_ring_v3 first)",
                ),
            ));
        };
        let deadline = Instant::now().checked_add(timeout);
        let (mut packets, mut blocks) = (0usize, 0usize);
        while blocks < max_blocks {
            let block = ring.next * ring.block_size;
            // SAFETY: block < len (next < block_nr), inside the mapping; a block starts at a
            // multiple of block_size (a multiple of the page size) from a page-aligned base,
            // so block_status (the u32 at offset 8) is 4-aligned.
            let bd = unsafe { ring.base.as_ptr().add(block) };
            // SAFETY: as above: an aligned u32 inside the live mapping, shared with the
            // kernel, which only ever accesses it as a whole word.
            let status = unsafe { AtomicU32::from_ptr(bd.add(8).cast::<u32>()) };
            // Acquire: the kernel writes the block, then its status (smp_wmb); our reads of
            // the block must not move before this load.
            if status.load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
                if blocks > 0 {
                    break;
                }
                let left = match deadline {
                    Some(d) => d.saturating_duration_since(Instant::now()),
                    None => timeout,
                };
                if left.is_zero() || !wait_readable(fd, left, "packet ring")? {
                    // Timed out (or EINTR); one last look, in case poll and the block's
                    // status disagree.
                    if status.load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
                        break;
                    }
                }
                continue;
            }
            // SAFETY: the block is ours until we store TP_STATUS_KERNEL; the
            // tpacket_block_desc at its start lies inside the mapping (block_size ≥ a page).
            let desc = unsafe { std::ptr::read_unaligned(bd.cast::<libc::tpacket_block_desc>()) };
            // SAFETY: the kernel fills the bh1 variant of a TPACKET_V3 block; every field is a
            // plain integer.
            let h1 = unsafe { desc.hdr.bh1 };
            // SAFETY: the block's bytes are ours (status USER) and initialised by the kernel;
            // no one writes them until we hand the block back, after the last use of `mem`.
            let mem = unsafe { std::slice::from_raw_parts(bd.cast_const(), ring.block_size) };
            packets += walk_block(mem, h1.num_pkts, h1.offset_to_first_pkt, f);
            // Release: every read of the block above happens before the kernel may refill it.
            status.store(libc::TP_STATUS_KERNEL, Ordering::Release);
            ring.next = (ring.next + 1) % ring.block_nr;
            blocks += 1;
        }
        Ok(packets)
    }
}

/// Call `f` for each of the `num_pkts` packets of a `TPACKET_V3` block `mem`, the first at
/// `first`; returns how many were seen. A header or packet that would reach outside the block
/// (the kernel never writes one) ends the walk.
fn walk_block(mem: &[u8], num_pkts: u32, first: u32, f: &mut dyn FnMut(RingFrame<'_>)) -> usize {
    let hdr_len = std::mem::size_of::<libc::tpacket3_hdr>();
    let mut off = first as usize;
    let mut seen = 0;
    for _ in 0..num_pkts {
        let Some(hb) = off.checked_add(hdr_len).and_then(|end| mem.get(off..end)) else {
            break;
        };
        // SAFETY: hb is hdr_len bytes of the block; tpacket3_hdr is plain integers, valid for
        // any bytes, read unaligned.
        let h = unsafe { std::ptr::read_unaligned(hb.as_ptr().cast::<libc::tpacket3_hdr>()) };
        let start = off + h.tp_mac as usize;
        let Some(data) = start
            .checked_add(h.tp_snaplen as usize)
            .and_then(|end| mem.get(start..end))
        else {
            break;
        };
        f(RingFrame {
            data,
            orig_len: h.tp_len as usize,
            ts: Duration::new(u64::from(h.tp_sec), h.tp_nsec),
        });
        seen += 1;
        if h.tp_next_offset == 0 {
            break;
        }
        off += h.tp_next_offset as usize;
    }
    seen
}

impl AsFd for PacketSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for PacketSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// A duplicate of socket `fd` of process `pid`: `pidfd_open(pid)` and `pidfd_getfd(fd)`
/// (≥ 5.6; needs ptrace rights over the process, CAP_SYS_PTRACE for another user's), checked
/// to be socket `inode` still (the pid or the descriptor may have been reused since they were
/// found). Closed when dropped; the process's own descriptor is not touched.
fn borrow(pid: u32, fd: i32, inode: u64) -> Result<OwnedFd, Error> {
    let pid_t = libc::pid_t::try_from(pid).map_err(|_| {
        Error::io(
            format!("pidfd_open of pid {pid}"),
            io::Error::from_raw_os_error(libc::ESRCH),
        )
    })?;
    // SAFETY: pidfd_open(pid, 0) takes integers only; it returns a new descriptor or -1.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid_t, 0 as libc::c_uint) };
    if raw < 0 {
        return Err(Error::last(format!("pidfd_open of pid {pid}")));
    }
    // SAFETY: `raw` is a new descriptor (a small int) that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(raw as RawFd) };
    // SAFETY: pidfd_getfd(pidfd, fd, 0) takes integers only; it returns a new descriptor
    // (close-on-exec) or -1.
    let raw = unsafe {
        libc::syscall(
            libc::SYS_pidfd_getfd,
            pidfd.as_raw_fd(),
            fd,
            0 as libc::c_uint,
        )
    };
    if raw < 0 {
        return Err(Error::last(format!("pidfd_getfd of fd {fd} of pid {pid}")));
    }
    // SAFETY: `raw` is a new descriptor that nothing else owns; dropping it closes it.
    let dup = unsafe { OwnedFd::from_raw_fd(raw as RawFd) };
    let st = nix::sys::stat::fstat(dup.as_raw_fd())
        .map_err(|e| Error::io(format!("fstat fd {fd} of pid {pid}"), e.into()))?;
    if st.st_ino != inode {
        return Err(Error::NotFound(format!(
            "fd {fd} of pid {pid} is no longer socket {inode}"
        )));
    }
    Ok(dup)
}

/// The fanout value (as [`PacketSocket::fanout`]) of socket `fd` of process `pid`, through a
/// duplicate of it ([`borrow`]: ≥ 5.6, ptrace rights over the process). Errors name the pid
/// and fd.
pub fn fanout_of(pid: u32, fd: i32, inode: u64) -> Result<Option<u32>, Error> {
    let dup = borrow(pid, fd, inode)?;
    fanout_value(dup.as_fd()).map_err(|e| {
        Error::io(
            format!("getsockopt PACKET_FANOUT on fd {fd} of pid {pid}"),
            e,
        )
    })
}

/// The rollover counters (as [`PacketSocket::rollover_stats`]) of socket `fd` of process
/// `pid`, through a duplicate of it ([`borrow`]); `Ok(None)` when the socket has no rollover
/// state (its group's mode is not rollover and has no rollover flag).
pub fn rollover_stats_of(pid: u32, fd: i32, inode: u64) -> Result<Option<RolloverStats>, Error> {
    let dup = borrow(pid, fd, inode)?;
    rollover_value(dup.as_fd()).map_err(|e| {
        Error::io(
            format!("getsockopt PACKET_ROLLOVER_STATS on fd {fd} of pid {pid}"),
            e,
        )
    })
}

/// `getsockopt(PACKET_ROLLOVER_STATS)` on any descriptor; EINVAL (no rollover state) is None.
fn rollover_value(fd: BorrowedFd<'_>) -> io::Result<Option<RolloverStats>> {
    let zero = libc::tpacket_rollover_stats {
        tp_all: 0,
        tp_huge: 0,
        tp_failed: 0,
    };
    match getopt(fd, libc::SOL_PACKET, libc::PACKET_ROLLOVER_STATS, zero) {
        Ok((r, _)) => Ok(Some(RolloverStats {
            all: r.tp_all,
            huge: r.tp_huge,
            failed: r.tp_failed,
        })),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A classic BPF instruction (`struct sock_filter`), as the kernel's `BPF_STMT`/`BPF_JUMP`.
pub const fn bpf_insn(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, size_of};

    #[test]
    fn uapi_sizes() {
        assert_eq!(size_of::<libc::fanout_args>(), 8);
        assert_eq!(size_of::<libc::tpacket_rollover_stats>(), 24);
        assert_eq!(align_of::<libc::tpacket_rollover_stats>(), 8);
        assert_eq!(size_of::<libc::tpacket_stats>(), 8);
        assert_eq!(size_of::<libc::tpacket_stats_v3>(), 12);
        assert_eq!(size_of::<libc::tpacket_req3>(), 28);
        assert_eq!(size_of::<libc::tpacket3_hdr>(), 48);
        assert_eq!(size_of::<libc::tpacket_hdr_v1>(), 40);
        assert_eq!(size_of::<libc::tpacket_block_desc>(), 48);
        assert_eq!(size_of::<libc::sockaddr_ll>(), 20);
        assert_eq!(size_of::<libc::sock_filter>(), 8);
    }

    fn bytes_of(a: &libc::fanout_args) -> [u8; 8] {
        // SAFETY: fanout_args is 8 bytes of integers without padding (checked above).
        unsafe { std::mem::transmute_copy(a) }
    }

    #[test]
    fn fanout_args_first_word_is_the_legacy_int() {
        // Group 7, hash | rollover | defrag, at most 1000 members.
        let b = bytes_of(&fanout_args(7, 0x9000, 1000));
        let legacy = 7u32 | 0x9000 << 16;
        assert_eq!(b[..4], legacy.to_ne_bytes());
        assert_eq!(b[4..], 1000u32.to_ne_bytes());
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn fanout_args_bytes_on_little_endian() {
        let b = bytes_of(&fanout_args(0x0102, 0x1001, 0x0a0b0c0d));
        assert_eq!(b, [0x02, 0x01, 0x01, 0x10, 0x0d, 0x0c, 0x0b, 0x0a]);
    }

    #[test]
    fn bpf_insns() {
        // ldb [80]; ret a — psock_fanout's cbpf program.
        let ld = bpf_insn(0x30, 0, 0, 80);
        assert_eq!((ld.code, ld.jt, ld.jf, ld.k), (0x30, 0, 0, 80));
        let jeq = bpf_insn(0x15, 1, 2, 0x0800);
        assert_eq!((jeq.code, jeq.jt, jeq.jf, jeq.k), (0x15, 1, 2, 0x0800));
        const RET_A: libc::sock_filter = bpf_insn(0x16, 0, 0, 0);
        assert_eq!(RET_A.code, 0x16);
    }

    #[test]
    fn timespecs() {
        let mut b = Vec::new();
        b.extend_from_slice(&5i64.to_ne_bytes());
        b.extend_from_slice(&7i64.to_ne_bytes());
        assert_eq!(timespec_of(&b), Some(Duration::new(5, 7)));
        let mut b = Vec::new();
        b.extend_from_slice(&5i32.to_ne_bytes());
        b.extend_from_slice(&7i32.to_ne_bytes());
        assert_eq!(timespec_of(&b), Some(Duration::new(5, 7)));
        assert_eq!(timespec_of(&[0; 3]), None);
        let mut b = Vec::new();
        b.extend_from_slice(&(-1i64).to_ne_bytes());
        b.extend_from_slice(&0i64.to_ne_bytes());
        assert_eq!(timespec_of(&b), None);
    }

    #[test]
    fn poll_timeouts_round_up() {
        assert_eq!(poll_ms(Duration::ZERO), 0);
        assert_eq!(poll_ms(Duration::from_nanos(1)), 1);
        assert_eq!(poll_ms(Duration::from_millis(25)), 25);
        assert_eq!(poll_ms(Duration::MAX), libc::c_int::MAX);
    }

    /// A block of two packets laid out as the kernel does, walked.
    #[test]
    fn block_walk() {
        let mut mem = vec![0u8; 4096];
        let put = |mem: &mut [u8], off: usize, next: u32, mac: u16, snap: u32, len: u32| {
            // SAFETY: tpacket3_hdr is plain integers; all zero is a valid value.
            let mut h: libc::tpacket3_hdr = unsafe { std::mem::zeroed() };
            h.tp_next_offset = next;
            h.tp_sec = 10;
            h.tp_nsec = 20;
            h.tp_snaplen = snap;
            h.tp_len = len;
            h.tp_mac = mac;
            // SAFETY: off + hdr <= mem.len() for the offsets below.
            unsafe { std::ptr::write_unaligned(mem.as_mut_ptr().add(off).cast(), h) };
        };
        put(&mut mem, 48, 128, 80, 10, 60);
        mem[48 + 80..48 + 90].fill(0xaa);
        put(&mut mem, 176, 0, 80, 4, 4);
        mem[176 + 80..176 + 84].fill(0xbb);
        let mut seen = Vec::new();
        let n = walk_block(&mem, 2, 48, &mut |fr| {
            seen.push((fr.data.to_vec(), fr.orig_len, fr.ts));
        });
        assert_eq!(n, 2);
        assert_eq!(seen[0], (vec![0xaa; 10], 60, Duration::new(10, 20)));
        assert_eq!(seen[1], (vec![0xbb; 4], 4, Duration::new(10, 20)));
        // A packet that would reach past the block ends the walk.
        put(&mut mem, 4000, 0, 80, 100, 100);
        assert_eq!(walk_block(&mem, 1, 4000, &mut |_| {}), 0);
        assert_eq!(walk_block(&mem, 1, u32::MAX, &mut |_| {}), 0);
    }
}

//! Frames as they cross a device, for tests that check what is on the wire: an AF_PACKET
//! socket on one device of one namespace keeps every frame (both directions) with whether the
//! kernel still had its transport checksum to complete (`TP_STATUS_CSUMNOTREADY`:
//! `CHECKSUM_PARTIAL`, the field holding the pseudo-header sum), so that an independent parser
//! ([`crate::packet::l4_csum_verdict`]) can judge every checksum, offloaded or not.

use std::io;
use std::mem;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::netns::Netns;
use crate::traffic::{enter, open_capture, setopt};

/// `TP_STATUS_CSUMNOTREADY`: the skb's checksum is left to offload.
const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;
/// `PACKET_AUXDATA`.
const PACKET_AUXDATA: libc::c_int = 8;

/// One frame seen on the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    /// The frame as far as it was captured (up to 256 KB: a whole GSO packet).
    pub frame: Vec<u8>,
    /// Sent by the device's namespace (`PACKET_OUTGOING`), else received.
    pub outgoing: bool,
    /// The transport checksum is left to offload (the field holds the pseudo-header sum).
    pub csum_partial: bool,
}

/// A running capture; [`Capture::stop`] returns what it saw.
#[derive(Debug)]
pub struct Capture {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<Captured>>>,
    what: String,
}

impl Capture {
    /// Start capturing on `dev` in `ns`; returns once the socket is bound.
    pub fn start(ns: &Netns, dev: &str) -> Capture {
        let (ns_name, dev_name) = (ns.name().to_string(), dev.to_string());
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<(), String>>(1);
        let thread = std::thread::Builder::new()
            .name(format!("capture-{dev}"))
            .spawn(move || {
                let sock = enter(&ns_name)
                    .and_then(|()| open_capture(&dev_name))
                    .and_then(|(fd, ifindex)| {
                        let on: libc::c_int = 1;
                        setopt(fd.as_raw_fd(), libc::SOL_PACKET, PACKET_AUXDATA, &on)?;
                        Ok((fd, ifindex))
                    });
                match sock {
                    Ok((fd, ifindex)) => {
                        let _ = ready_tx.send(Ok(()));
                        run(&fd, ifindex, &stop2)
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        Vec::new()
                    }
                }
            })
            .expect("spawn a capture thread");
        let what = format!("{dev} in {}", ns.name());
        match ready_rx.recv() {
            Ok(Ok(())) => Capture {
                stop,
                thread: Some(thread),
                what,
            },
            Ok(Err(e)) => panic!("capture on {what}: {e}"),
            Err(_) => panic!("capture on {what}: the thread died before it was ready"),
        }
    }

    /// Stop (after the device was quiet for 100 ms, at most 1 s) and return the frames.
    pub fn stop(mut self) -> Vec<Captured> {
        self.stop.store(true, Ordering::SeqCst);
        let what = mem::take(&mut self.what);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_else(|| panic!("capture on {what} panicked"))
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(fd: &OwnedFd, ifindex: i32, stop: &AtomicBool) -> Vec<Captured> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 256 << 10];
    // room for one struct cmsghdr + struct tpacket_auxdata, aligned
    let mut cbuf = [0u64; 16];
    let mut stop_seen: Option<Instant> = None;
    loop {
        if stop_seen.is_none() && stop.load(Ordering::SeqCst) {
            stop_seen = Some(Instant::now());
        }
        if stop_seen.is_some_and(|t| t.elapsed() > Duration::from_secs(1)) {
            break;
        }
        // SAFETY: sockaddr_ll is plain data; all-zero is valid.
        let mut sll: libc::sockaddr_ll = unsafe { mem::zeroed() };
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: msghdr is plain data; all-zero is valid before the fields are set.
        let mut msg: libc::msghdr = unsafe { mem::zeroed() };
        msg.msg_name = (&mut sll as *mut libc::sockaddr_ll).cast();
        msg.msg_namelen = mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = mem::size_of_val(&cbuf) as _;
        // SAFETY: every pointer in msg refers to a live, writable buffer of the size given.
        let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, libc::MSG_TRUNC) };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                    if stop_seen.is_some() || stop.load(Ordering::SeqCst) {
                        break;
                    }
                    continue;
                }
                _ => panic!("recvmsg on the capture socket: {e}"),
            }
        }
        if sll.sll_ifindex != ifindex {
            continue;
        }
        let mut partial = false;
        // SAFETY: the cmsg macros walk the control buffer the kernel filled, within
        // msg_controllen; the auxdata payload is read unaligned.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_PACKET && (*c).cmsg_type == PACKET_AUXDATA {
                    let aux: libc::tpacket_auxdata =
                        std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    partial = aux.tp_status & TP_STATUS_CSUMNOTREADY != 0;
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        let len = (n as usize).min(buf.len());
        out.push(Captured {
            frame: buf[..len].to_vec(),
            outgoing: sll.sll_pkttype == libc::PACKET_OUTGOING,
            csum_partial: partial,
        });
    }
    out
}

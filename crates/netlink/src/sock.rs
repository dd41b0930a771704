//! Netlink sockets: request/ack, dumps, and a pipelined mode for batches.
//!
//! Built on neli's low-level `NlSocketHandle`: every message is parsed from the bytes with its
//! extended ack intact (neli's `NlRouter` loses it), and a dump that ends in an error inside
//! `NLMSG_DONE` becomes an `Err` here rather than a short table.

use std::io;
use std::os::fd::AsRawFd;

use neli::consts::nl::{NlmF, NlmsgerrAttr};
use neli::consts::socket::NlFamily;
use neli::err::Nlmsgerr;
use neli::nl::{NlPayload, Nlmsghdr, NlmsghdrBuilder};
use neli::socket::synchronous::NlSocketHandle;
use neli::types::Buffer;
use neli::utils::Groups;

use crate::msg::genl::ctrl::Family;
use crate::msg::{flags, Request, NLMSG_DONE, NLMSG_ERROR};
use crate::{Error, KernelError};

/// Netlink protocol of a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// `NETLINK_ROUTE`.
    Route,
    /// `NETLINK_GENERIC`.
    Generic,
    /// `NETLINK_SOCK_DIAG`.
    SockDiag,
}

/// Names the attribute at a byte offset of a request, for error messages.
pub type AttrNamer = fn(&[u8], usize) -> Option<String>;

/// One netlink socket with extended ack (and, for route sockets, strict checking) enabled.
pub struct Socket {
    h: NlSocketHandle,
    seq: u32,
    namer: AttrNamer,
    generic: bool,
}

impl std::fmt::Debug for Socket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Socket").field("seq", &self.seq).finish()
    }
}

fn sockerr(what: &str, e: impl std::fmt::Display) -> Error {
    Error::io(what, io::Error::other(e.to_string()))
}

/// Name the top-level attribute that starts at `off` (counted from the start of the echoed
/// `nlmsghdr`), given the family header length.
pub fn name_route_attr(req: &[u8], off: usize) -> Option<String> {
    let ty = u16::from_ne_bytes([*req.get(off + 2)?, *req.get(off + 3)?]) & 0x3fff;
    Some(crate::msg::rtnl::route::rta_name(ty))
}

/// Name a generic netlink attribute by its number (a family's own namer knows better).
pub fn name_genl_attr(req: &[u8], off: usize) -> Option<String> {
    let ty = u16::from_ne_bytes([*req.get(off + 2)?, *req.get(off + 3)?]) & 0x3fff;
    Some(format!("attribute {ty}"))
}

impl Socket {
    /// A socket of `proto` in the calling thread's network namespace.
    pub fn new(proto: Proto) -> Result<Self, Error> {
        let fam = match proto {
            Proto::Route => NlFamily::Route,
            Proto::Generic => NlFamily::Generic,
            Proto::SockDiag => NlFamily::SockOrInetDiag,
        };
        let h = NlSocketHandle::connect(fam, None, Groups::empty())
            .map_err(|e| sockerr("netlink socket", e))?;
        h.enable_ext_ack(true)
            .map_err(|e| sockerr("enable NETLINK_EXT_ACK", e))?;
        if proto == Proto::Route {
            h.enable_strict_checking(true)
                .map_err(|e| sockerr("enable NETLINK_GET_STRICT_CHK", e))?;
        }
        Ok(Socket {
            h,
            seq: std::process::id().wrapping_mul(7919),
            namer: name_route_attr,
            generic: proto == Proto::Generic,
        })
    }

    /// `-v`: the request about to be sent, one line ([`mpt_sys::trace`]).
    fn trace(&self, req: &Request, op: &dyn std::fmt::Display) {
        if mpt_sys::trace::on() {
            mpt_sys::trace::line(format_args!("netlink {}: {op}", req.describe(self.generic)));
        }
    }

    /// A `NETLINK_ROUTE` socket.
    pub fn route() -> Result<Self, Error> {
        Self::new(Proto::Route)
    }

    /// A `NETLINK_GENERIC` socket (attributes named by number until
    /// [`Socket::set_attr_namer`] says otherwise).
    pub fn generic() -> Result<Self, Error> {
        let mut s = Self::new(Proto::Generic)?;
        s.set_attr_namer(name_genl_attr);
        Ok(s)
    }

    /// A `NETLINK_SOCK_DIAG` socket: it sees the sockets of the calling thread's namespace.
    pub fn sock_diag() -> Result<Self, Error> {
        Self::new(Proto::SockDiag)
    }

    /// Resolve a generic netlink family by name through the controller. `Ok(None)` when the
    /// running kernel has no such family (the controller answers `ENOENT`: its module is not
    /// built or not loaded), which callers report as such rather than as a failure.
    pub fn resolve_family(&mut self, name: &str) -> Result<Option<Family>, Error> {
        let op = format!("resolve generic netlink family \"{name}\"");
        let answers = match self.transact(&crate::msg::genl::ctrl::get_family_request(name), &op) {
            Ok(a) => a,
            Err(e) if e.errno() == Some(libc::ENOENT) => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some(p) = answers.first() else {
            return Err(Error::io(
                op,
                io::Error::other("the controller did not answer"),
            ));
        };
        Ok(Some(crate::msg::genl::ctrl::decode_family(p)?))
    }

    /// Use another attribute namer (generic netlink families number attributes differently).
    pub fn set_attr_namer(&mut self, namer: AttrNamer) {
        self.namer = namer;
    }

    /// Our port id.
    pub fn pid(&self) -> u32 {
        self.h.pid()
    }

    fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    fn to_neli(req: &Request, seq: u32, flags: u16) -> Result<Nlmsghdr<u16, Buffer>, Error> {
        NlmsghdrBuilder::default()
            .nl_type(req.ty)
            .nl_flags(NlmF::from_bits_retain(flags))
            .nl_seq(seq)
            .nl_pid(0)
            .nl_payload(NlPayload::Payload(Buffer::from(req.payload.clone())))
            .build()
            .map_err(|e| sockerr("build netlink message", e))
    }

    fn kernel_error<M>(&self, e: &Nlmsgerr<M>, op: &str, sent: Option<&[u8]>) -> KernelError {
        let mut msg = None;
        let mut off = None;
        for a in e.ext_ack().iter() {
            let p: &[u8] = a.nla_payload().as_ref();
            match a.nla_type().nla_type() {
                NlmsgerrAttr::Msg => {
                    let end = p.iter().position(|b| *b == 0).unwrap_or(p.len());
                    msg = Some(String::from_utf8_lossy(&p[..end]).trim().to_string());
                }
                NlmsgerrAttr::Offset => {
                    if let Ok(b) = <[u8; 4]>::try_from(p.get(..4).unwrap_or(&[])) {
                        off = Some(u32::from_ne_bytes(b) as usize);
                    }
                }
                _ => {}
            }
        }
        let attr = match (off, sent) {
            (Some(o), Some(bytes)) => (self.namer)(bytes, o),
            _ => None,
        };
        KernelError {
            op: op.to_string(),
            errno: e.error().saturating_abs(),
            msg,
            attr,
        }
    }

    /// Send a request that answers with messages of its own, then an acknowledgement
    /// (`RTM_GETNSID`, a `GET` without `NLM_F_DUMP`): return the payloads of the answers.
    pub fn transact(&mut self, req: &Request, op: &str) -> Result<Vec<Vec<u8>>, Error> {
        self.trace(req, &op);
        let seq = self.next_seq();
        let bytes = req.to_bytes(seq, 0);
        let mut b = bytes.clone();
        let f = req.flags | flags::REQUEST | flags::ACK;
        b[6..8].copy_from_slice(&f.to_ne_bytes());
        self.send_raw(&b)?;
        let mut out = Vec::new();
        loop {
            let (iter, _) = self.h.recv::<u16, Buffer>().map_err(|e| sockerr(op, e))?;
            for m in iter {
                let m = m.map_err(|e| sockerr(op, e))?;
                if *m.nl_seq() != seq {
                    continue;
                }
                match m.nl_payload() {
                    NlPayload::Payload(p) => out.push(p.as_ref().to_vec()),
                    NlPayload::Err(e) => return Err(self.kernel_error(e, op, Some(&bytes)).into()),
                    _ => return Ok(out),
                }
            }
        }
    }

    /// Send one request that expects an acknowledgement and wait for it.
    pub fn request(&mut self, req: &Request, op: impl std::fmt::Display) -> Result<(), Error> {
        let mut r = self.pipeline(std::iter::once((req, op)), 1)?;
        r.pop().unwrap_or(Ok(())).map_err(Error::Kernel)
    }

    /// Send a dump request and return the payload of every answer (without `nlmsghdr`).
    pub fn dump(&mut self, req: &Request, op: &str) -> Result<Vec<Vec<u8>>, Error> {
        self.trace(req, &op);
        let seq = self.next_seq();
        let msg = Self::to_neli(req, seq, req.flags | flags::REQUEST)?;
        self.h.send(&msg).map_err(|e| sockerr(op, e))?;
        let mut out = Vec::new();
        loop {
            let (iter, _) = self.h.recv::<u16, Buffer>().map_err(|e| sockerr(op, e))?;
            for m in iter {
                let m = m.map_err(|e| sockerr(op, e))?;
                if *m.nl_seq() != seq {
                    continue;
                }
                match m.nl_payload() {
                    NlPayload::Payload(p) => {
                        if *m.nl_type() == NLMSG_DONE {
                            return Ok(out);
                        }
                        out.push(p.as_ref().to_vec());
                    }
                    NlPayload::DumpExtAck(e) => {
                        if *e.error() != 0 {
                            return Err(self.kernel_error(e, op, None).into());
                        }
                        return Ok(out);
                    }
                    NlPayload::Err(e) => {
                        let sent = req.to_bytes(seq, 0);
                        return Err(self.kernel_error(e, op, Some(&sent)).into());
                    }
                    NlPayload::Empty => {
                        if *m.nl_type() == NLMSG_DONE {
                            return Ok(out);
                        }
                    }
                    NlPayload::Ack(_) => return Ok(out),
                }
            }
        }
    }

    /// Send many requests with up to `window` in flight, several per `sendmsg`, and match the
    /// kernel's answers by sequence number. Returns one result per request, in order. An `Err`
    /// of the outer result means the socket itself failed.
    /// `op` names a request in its error; it is formatted only then.
    ///
    /// Only the last request of each datagram asks for an acknowledgement. The kernel reports
    /// a refusal whether asked or not (`netlink_rcv_skb` acks on error or `NLM_F_ACK`), and it
    /// takes a datagram's messages in order, so the acknowledgement of the last one comes
    /// after the refusals of those before it and settles the rest as applied: one answer per
    /// datagram instead of one per request. Not for dumps (the kernel answers a started dump
    /// with its messages, not an acknowledgement).
    pub fn pipeline<R: std::borrow::Borrow<Request>, O: std::fmt::Display>(
        &mut self,
        reqs: impl IntoIterator<Item = (R, O)>,
        window: usize,
    ) -> Result<Vec<Result<(), KernelError>>, Error> {
        let window = window.max(1);
        let mut results: Vec<Option<Result<(), KernelError>>> = Vec::new();
        // seq -> (index, request, op), until answered
        let mut pending: rustc_hash::FxHashMap<u32, (usize, R, O)> =
            rustc_hash::FxHashMap::default();
        // the datagrams sent and not yet acknowledged, oldest first: (first seq, last seq)
        let mut sent: std::collections::VecDeque<(u32, u32)> = Default::default();
        let mut it = reqs.into_iter();
        let mut batch: Vec<u8> = Vec::with_capacity(64 * 1024);
        let mut rbuf = vec![0u8; ACK_SLOTS * ACK_SLOT];
        loop {
            // Fill the window, writing several messages per sendmsg.
            let (mut first, mut last_at) = (None, 0);
            while pending.len() < window {
                let Some((req, op)) = it.next() else { break };
                let seq = self.next_seq();
                let r = req.borrow();
                self.trace(r, &op);
                last_at = batch.len();
                r.append_to(&mut batch, (r.flags | flags::REQUEST) & !flags::ACK, seq, 0);
                let f = *first.get_or_insert(seq);
                pending.insert(seq, (results.len(), req, op));
                results.push(None);
                if batch.len() >= 48 * 1024 {
                    self.send_acked(&mut batch, last_at)?;
                    sent.push_back((f, seq));
                    first = None;
                }
            }
            if let Some(f) = first.filter(|_| !batch.is_empty()) {
                self.send_acked(&mut batch, last_at)?;
                sent.push_back((f, self.seq));
            }
            if pending.is_empty() {
                break;
            }
            // Answers straight from the socket into one buffer, decoded here: neli's receive
            // zeroes a 32 KiB pool buffer per datagram (a fifth of a 100,000-route batch's
            // user time went to it). Every answer is a datagram of its own: recvmmsg takes up
            // to ACK_SLOTS of them per system call.
            let lens = recv_acks(self.h.as_raw_fd(), &mut rbuf)?;
            let acks = lens.iter().enumerate().flat_map(|(i, len)| {
                let slot = &mut rbuf[i * ACK_SLOT..(i + 1) * ACK_SLOT];
                decode_acks(clip(slot, *len))
            });
            let acks: Vec<_> = acks.collect();
            for (seq, ack) in acks {
                let refused = ack.is_some();
                if let Some(raw) = ack {
                    if let Some((idx, req, op)) = pending.remove(&seq) {
                        let mut k = KernelError {
                            op: op.to_string(),
                            errno: raw.errno,
                            msg: raw.msg,
                            attr: None,
                        };
                        if let Some(o) = raw.offset {
                            k.attr = (self.namer)(&req.borrow().to_bytes(seq, 0), o);
                        }
                        results[idx] = Some(Err(k));
                    }
                }
                // the answer to a datagram's last request: every request of it (and of any
                // before it) not refused by now was applied
                if sent.iter().any(|d| d.1 == seq) {
                    while let Some((mut s, last)) = sent.pop_front() {
                        loop {
                            if let Some((idx, _, _)) = pending.remove(&s) {
                                results[idx] = Some(Ok(()));
                            }
                            if s == last {
                                break;
                            }
                            s = s.wrapping_add(1);
                        }
                        if last == seq {
                            break;
                        }
                    }
                } else if !refused {
                    if let Some((idx, _, _)) = pending.remove(&seq) {
                        results[idx] = Some(Ok(()));
                    }
                }
            }
        }
        Ok(results.into_iter().map(|r| r.unwrap_or(Ok(()))).collect())
    }

    /// Send the datagram in `buf` with an acknowledgement asked of its last message (at
    /// `last_at`), and empty `buf`.
    fn send_acked(&self, buf: &mut Vec<u8>, last_at: usize) -> Result<(), Error> {
        if let Some(f) = buf.get_mut(last_at + 6..last_at + 8) {
            let asked = u16::from_ne_bytes([f[0], f[1]]) | flags::ACK;
            f.copy_from_slice(&asked.to_ne_bytes());
        }
        self.send_raw(buf)?;
        buf.clear();
        Ok(())
    }

    fn send_raw(&self, buf: &[u8]) -> Result<(), Error> {
        // neli's send() takes one typed message; a batch is several messages in one datagram,
        // which the kernel processes in order (netlink_rcv_skb walks them all).
        // SAFETY: buf is a valid slice for the duration of the call.
        let n = unsafe { libc::send(self.h.as_raw_fd(), buf.as_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(Error::io("send netlink batch", io::Error::last_os_error()));
        }
        Ok(())
    }

    /// Enlarge the receive buffer (acks of a large batch), ignoring refusal.
    pub fn set_rcvbuf(&self, bytes: usize) {
        let _ = self.h.set_recv_buffer_size(bytes);
    }

    /// Send one request through neli's typed path (used by tests to check that our bytes and
    /// neli's serialization agree).
    pub fn neli_bytes(req: &Request, seq: u32) -> Result<Vec<u8>, Error> {
        use neli::ToBytes;
        let m = Self::to_neli(req, seq, req.flags)?;
        let mut c = io::Cursor::new(Vec::new());
        m.to_bytes(&mut c).map_err(|e| sockerr("serialize", e))?;
        Ok(c.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_header_equals_nelis() {
        let req = crate::msg::rtnl::route::dump_request(Some(mpt_model::Family::V4), Some(100));
        let ours = req.to_bytes(42, 0);
        let theirs = Socket::neli_bytes(&req, 42).expect("serializes");
        assert_eq!(ours, theirs);
    }
}

/// A refusal as an `NLMSG_ERROR` message carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawErr {
    /// Positive errno.
    pub(crate) errno: i32,
    /// `NLMSGERR_ATTR_MSG`.
    pub(crate) msg: Option<String>,
    /// `NLMSGERR_ATTR_OFFS`: offset of the offending attribute in the request.
    pub(crate) offset: Option<usize>,
}

/// The `NLMSG_ERROR` messages of one datagram: (sequence number, `None` for an ack, the
/// refusal otherwise). Other messages and truncated ones are skipped.
/// Datagrams read per `recvmmsg`, and the room for each: an ack is 36 bytes, an error ack
/// echoes the request (ours are far below 4 KiB) and adds the extended ack.
const ACK_SLOTS: usize = 16;
const ACK_SLOT: usize = 4096;

/// Receive up to [`ACK_SLOTS`] datagrams into `buf`'s slots, waiting for the first only; the
/// length of each (its full length if it was cut to the slot).
fn recv_acks(fd: std::os::fd::RawFd, buf: &mut [u8]) -> Result<Vec<usize>, Error> {
    let slots = (buf.len() / ACK_SLOT).min(ACK_SLOTS);
    let base = buf.as_mut_ptr();
    // SAFETY: each iovec points at its own ACK_SLOT bytes inside `buf` (slots * ACK_SLOT <=
    // buf.len()), which outlives the call; mmsghdr and iovec are plain C structs for which
    // all-zero is a valid value.
    let mut iov: [libc::iovec; ACK_SLOTS] = unsafe { std::mem::zeroed() };
    let mut hdrs: [libc::mmsghdr; ACK_SLOTS] = unsafe { std::mem::zeroed() };
    for i in 0..slots {
        iov[i].iov_base = unsafe { base.add(i * ACK_SLOT) }.cast();
        iov[i].iov_len = ACK_SLOT;
        hdrs[i].msg_hdr.msg_iov = &mut iov[i];
        hdrs[i].msg_hdr.msg_iovlen = 1;
    }
    loop {
        // SAFETY: hdrs holds `slots` initialised headers whose buffers are valid (above).
        let n = unsafe {
            libc::recvmmsg(
                fd,
                hdrs.as_mut_ptr(),
                slots as libc::c_uint,
                libc::MSG_WAITFORONE | libc::MSG_TRUNC,
                std::ptr::null_mut(),
            )
        };
        if n >= 0 {
            return Ok(hdrs[..n as usize]
                .iter()
                .map(|h| h.msg_len as usize)
                .collect());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(Error::io("receive netlink acknowledgement", e));
        }
    }
}

/// The received part of a slot; a datagram cut to the slot keeps its header, errno and
/// sequence number (its length is set to what was kept, so that it still decodes).
fn clip(slot: &mut [u8], len: usize) -> &[u8] {
    if len > slot.len() {
        let kept = u32::try_from(slot.len()).unwrap_or(u32::MAX);
        slot[..4].copy_from_slice(&kept.to_ne_bytes());
        return slot;
    }
    &slot[..len]
}

pub(crate) fn decode_acks(buf: &[u8]) -> Vec<(u32, Option<RawErr>)> {
    const NLM_F_CAPPED: u16 = 0x100;
    const NLM_F_ACK_TLVS: u16 = 0x200;
    let u16_at = |b: &[u8], o: usize| b.get(o..o + 2).map(|x| u16::from_ne_bytes([x[0], x[1]]));
    let u32_at = |b: &[u8], o: usize| {
        b.get(o..o + 4)
            .map(|x| u32::from_ne_bytes([x[0], x[1], x[2], x[3]]))
    };
    let mut out = Vec::new();
    let mut off = 0;
    while let (Some(len), Some(ty), Some(fl), Some(seq)) = (
        u32_at(buf, off),
        u16_at(buf, off + 4),
        u16_at(buf, off + 6),
        u32_at(buf, off + 8),
    ) {
        let len = len as usize;
        if len < 16 || off + len > buf.len() {
            break;
        }
        let m = &buf[off..off + len];
        if ty == NLMSG_ERROR {
            if let Some(err) = u32_at(m, 16).map(|e| e as i32) {
                if err == 0 {
                    out.push((seq, None));
                } else {
                    // the request's header, and its payload unless the kernel capped it
                    let inner = u32_at(m, 20).unwrap_or(16) as usize;
                    let mut a = 20
                        + if fl & NLM_F_CAPPED != 0 {
                            16
                        } else {
                            inner.max(16)
                        };
                    a = (a + 3) & !3;
                    let (mut msg, mut offset) = (None, None);
                    if fl & NLM_F_ACK_TLVS == 0 {
                        a = m.len();
                    }
                    while let (Some(alen), Some(aty)) = (u16_at(m, a), u16_at(m, a + 2)) {
                        let alen = usize::from(alen);
                        if alen < 4 || a + alen > m.len() {
                            break;
                        }
                        let p = &m[a + 4..a + alen];
                        match aty {
                            1 => {
                                let end = p.iter().position(|b| *b == 0).unwrap_or(p.len());
                                msg = Some(String::from_utf8_lossy(&p[..end]).trim().to_string());
                            }
                            2 => offset = u32_at(p, 0).map(|o| o as usize),
                            _ => {}
                        }
                        a += (alen + 3) & !3;
                    }
                    out.push((
                        seq,
                        Some(RawErr {
                            errno: err.saturating_abs(),
                            msg,
                            offset,
                        }),
                    ));
                }
            }
        }
        off += (len + 3) & !3;
    }
    out
}

#[cfg(test)]
mod ack_tests {
    use super::*;

    fn nlmsg(ty: u16, fl: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&(16 + payload.len() as u32).to_ne_bytes());
        m.extend_from_slice(&ty.to_ne_bytes());
        m.extend_from_slice(&fl.to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(payload);
        while m.len() % 4 != 0 {
            m.push(0);
        }
        m
    }

    #[test]
    fn acks_and_refusals_with_extended_ack() {
        // an ack: error 0, the request's header
        let mut ack = 0i32.to_ne_bytes().to_vec();
        ack.extend_from_slice(&nlmsg(24, 0x5, 7, &[])[..16]);
        // a capped refusal with a message and an offset
        let mut err = (-101i32).to_ne_bytes().to_vec();
        err.extend_from_slice(&nlmsg(24, 0x5, 8, &[0; 12])[..16]);
        let text = b"Nexthop has invalid gateway\0";
        err.extend_from_slice(&((4 + text.len()) as u16).to_ne_bytes());
        err.extend_from_slice(&1u16.to_ne_bytes());
        err.extend_from_slice(text);
        while err.len() % 4 != 0 {
            err.push(0);
        }
        err.extend_from_slice(&8u16.to_ne_bytes());
        err.extend_from_slice(&2u16.to_ne_bytes());
        err.extend_from_slice(&44u32.to_ne_bytes());
        let mut buf = nlmsg(NLMSG_ERROR, 0x100, 7, &ack);
        buf.extend(nlmsg(NLMSG_ERROR, 0x100 | 0x200, 8, &err));
        buf.extend(nlmsg(NLMSG_DONE, 0, 9, &[0; 4]));
        let got = decode_acks(&buf);
        assert_eq!(
            got,
            vec![
                (7, None),
                (
                    8,
                    Some(RawErr {
                        errno: 101,
                        msg: Some("Nexthop has invalid gateway".into()),
                        offset: Some(44)
                    })
                )
            ]
        );
        // truncated: nothing, no panic
        assert!(decode_acks(&buf[..10]).is_empty());
        assert_eq!(decode_acks(&buf[..buf.len() - 3]).len(), 2);
    }

    #[test]
    fn an_error_ack_cut_to_its_slot_still_names_its_request_and_errno() {
        // an uncapped refusal echoing a request far larger than a slot
        let mut err = (-22i32).to_ne_bytes().to_vec();
        err.extend_from_slice(&nlmsg(24, 0x5, 9, &vec![0; 3 * ACK_SLOT]));
        let whole = nlmsg(NLMSG_ERROR, 0, 9, &err);
        assert!(whole.len() > ACK_SLOT);
        let mut slot = whole[..ACK_SLOT].to_vec();
        let got = decode_acks(clip(&mut slot, whole.len()));
        assert_eq!(
            got,
            vec![(
                9,
                Some(RawErr {
                    errno: 22,
                    msg: None,
                    offset: None
                })
            )]
        );
        // one that fits is left as it came
        let mut small = nlmsg(NLMSG_ERROR, 0, 3, &[0; 20]);
        small.resize(ACK_SLOT, 0);
        assert_eq!(clip(&mut small, 36).len(), 36);
    }

    /// An RTM_GETLINK of `ifindex` (read only, any user).
    fn get_link(ifindex: u32) -> Request {
        let mut p = vec![0u8; 16];
        p[4..8].copy_from_slice(&ifindex.to_ne_bytes());
        Request {
            ty: 18, // RTM_GETLINK
            flags: flags::REQUEST,
            payload: p,
        }
    }

    #[test]
    fn unacknowledged_requests_are_settled_by_their_datagrams_last_answer() {
        // RTM_GETLINKs of lo (answered with the link, never acknowledged: only the last
        // request of a datagram asks) between ones of devices that do not exist, 600 with
        // 256 in flight, so that datagrams end on either: each outcome is its request's
        let mut s = Socket::route().expect("route socket");
        s.set_rcvbuf(4 << 20); // room for the links
        s.seq = u32::MAX - 300; // the sequence numbers wrap inside a datagram
        let lo = |i: u32| i % 5 == 0 || i % 256 == 255;
        let reqs: Vec<(Request, String)> = (0..600u32)
            .map(|i| {
                let ifindex = if lo(i) { 1 } else { 0x7fff_0000u32 + i };
                (get_link(ifindex), format!("get link {i}"))
            })
            .collect();
        let got = s.pipeline(reqs, 256).expect("pipeline");
        assert_eq!(got.len(), 600);
        for (i, r) in got.iter().enumerate() {
            if lo(i as u32) {
                assert!(r.is_ok(), "request {i} (lo): {r:?}");
            } else {
                let e = r.as_ref().expect_err("no such device");
                assert_eq!(
                    (e.errno, e.op.as_str()),
                    (libc::ENODEV, format!("get link {i}").as_str())
                );
            }
        }
        // and the socket is clean for the next request: nothing of this batch is left
        let again = s.pipeline(
            std::iter::once((get_link(0x7ffe_0000), "get link again")),
            1,
        );
        let e = again.expect("pipeline")[0]
            .clone()
            .expect_err("no such device");
        assert_eq!((e.errno, e.op.as_str()), (libc::ENODEV, "get link again"));
    }

    #[test]
    fn many_refusals_in_flight_come_back_each_matched_to_its_request() {
        // 600 RTM_GETLINKs of devices that do not exist (read only, any user), 256 in
        // flight: the acks arrive many per recvmmsg, and each outcome is its request's
        let mut s = Socket::route().expect("route socket");
        let reqs: Vec<(Request, String)> = (0..600u32)
            .map(|i| (get_link(0x7fff_0000 + i), format!("get link {i}")))
            .collect();
        let got = s.pipeline(reqs, 256).expect("pipeline");
        assert_eq!(got.len(), 600);
        for (i, r) in got.iter().enumerate() {
            let e = r.as_ref().expect_err("no such device");
            assert_eq!(
                (e.errno, e.op.as_str()),
                (libc::ENODEV, format!("get link {i}").as_str())
            );
        }
    }
}

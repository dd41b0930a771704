//! Netlink sockets: request/ack, dumps, and a pipelined mode for batches.
//!
//! Built on neli's low-level `NlSocketHandle`: every message is parsed from the bytes with its
//! extended ack intact (neli's `NlRouter` loses it), and a dump that ends in an error inside
//! `NLMSG_DONE` becomes an `Err` here rather than a short table.

use std::collections::HashMap;
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
        })
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
    pub fn request(&mut self, req: &Request, op: &str) -> Result<(), Error> {
        let mut r = self.pipeline(std::iter::once((req.clone(), op.to_string())), 1)?;
        r.pop().unwrap_or(Ok(())).map_err(Error::Kernel)
    }

    /// Send a dump request and return the payload of every answer (without `nlmsghdr`).
    pub fn dump(&mut self, req: &Request, op: &str) -> Result<Vec<Vec<u8>>, Error> {
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
    /// acknowledgements by sequence number. Returns one result per request, in order. An `Err`
    /// of the outer result means the socket itself failed.
    pub fn pipeline(
        &mut self,
        reqs: impl IntoIterator<Item = (Request, String)>,
        window: usize,
    ) -> Result<Vec<Result<(), KernelError>>, Error> {
        let window = window.max(1);
        let mut results: Vec<Option<Result<(), KernelError>>> = Vec::new();
        // seq -> (index, op, bytes sent)
        let mut pending: HashMap<u32, (usize, String, Vec<u8>)> = HashMap::new();
        let mut it = reqs.into_iter().peekable();
        let mut batch: Vec<u8> = Vec::with_capacity(64 * 1024);
        loop {
            // Fill the window, writing several messages per sendmsg.
            while pending.len() < window {
                let Some((req, op)) = it.next() else { break };
                let seq = self.next_seq();
                let bytes = req.to_bytes(seq, 0);
                let mut b = bytes.clone();
                let f = req.flags | flags::REQUEST | flags::ACK;
                b[6..8].copy_from_slice(&f.to_ne_bytes());
                batch.extend_from_slice(&b);
                pending.insert(seq, (results.len(), op, bytes));
                results.push(None);
                if batch.len() >= 48 * 1024 {
                    self.send_raw(&batch)?;
                    batch.clear();
                }
            }
            if !batch.is_empty() {
                self.send_raw(&batch)?;
                batch.clear();
            }
            if pending.is_empty() {
                break;
            }
            let (iter, _) = self
                .h
                .recv::<u16, Buffer>()
                .map_err(|e| sockerr("receive netlink acknowledgement", e))?;
            for m in iter {
                let m = m.map_err(|e| sockerr("decode netlink acknowledgement", e))?;
                let seq = *m.nl_seq();
                let outcome = match m.nl_payload() {
                    NlPayload::Ack(_) => Ok(()),
                    NlPayload::Err(e) => {
                        let Some((_, op, sent)) = pending.get(&seq) else {
                            continue;
                        };
                        Err(self.kernel_error(e, op, Some(sent)))
                    }
                    _ if *m.nl_type() == NLMSG_ERROR => Ok(()),
                    _ => continue,
                };
                if let Some((idx, _, _)) = pending.remove(&seq) {
                    results[idx] = Some(outcome);
                }
            }
        }
        Ok(results.into_iter().map(|r| r.unwrap_or(Ok(()))).collect())
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

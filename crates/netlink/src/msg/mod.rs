//! Pure encoding and decoding of netlink messages (no sockets): the `nlmsghdr` and its flags
//! here, attributes in [`attr`], then one module per protocol: [`rtnl`] (routes, nexthop
//! objects, links), [`genl`] (generic netlink and its controller), [`diag`] (sock_diag).

pub mod attr;
pub mod diag;
pub mod genl;
pub mod rtnl;

pub use attr::{AttrBuf, Attrs, DecodeError};

/// `nlmsghdr` length.
pub const NLMSG_HDRLEN: usize = 16;
/// `NLMSG_ERROR`.
pub const NLMSG_ERROR: u16 = 2;
/// `NLMSG_DONE`.
pub const NLMSG_DONE: u16 = 3;

/// `NLM_F_*` flags.
pub mod flags {
    /// It is a request.
    pub const REQUEST: u16 = 0x1;
    /// Multipart answer.
    pub const MULTI: u16 = 0x2;
    /// Ask for an acknowledgement.
    pub const ACK: u16 = 0x4;
    /// Dump (ROOT | MATCH).
    pub const DUMP: u16 = 0x300;
    /// Replace an existing object.
    pub const REPLACE: u16 = 0x100;
    /// Fail if it exists.
    pub const EXCL: u16 = 0x200;
    /// Create if it does not exist.
    pub const CREATE: u16 = 0x400;
    /// Add at the end.
    pub const APPEND: u16 = 0x800;
    /// Extended-ack TLVs follow (in NLMSG_ERROR / NLMSG_DONE).
    pub const ACK_TLVS: u16 = 0x200;
    /// The echoed request is truncated to its header.
    pub const CAPPED: u16 = 0x100;
}

/// One request, before sequence number and port id are chosen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    /// `nlmsg_type`.
    pub ty: u16,
    /// `nlmsg_flags`, `NLM_F_REQUEST` included; the socket adds `NLM_F_ACK` for non-dumps.
    pub flags: u16,
    /// Family header and attributes.
    pub payload: Vec<u8>,
}

impl Request {
    /// The whole message as it goes on the wire.
    pub fn to_bytes(&self, seq: u32, pid: u32) -> Vec<u8> {
        let mut v = Vec::with_capacity(align4(NLMSG_HDRLEN + self.payload.len()));
        self.append_to(&mut v, self.flags, seq, pid);
        v
    }

    /// Append the message to `buf` (several messages make one datagram), with `flags` as
    /// its `nlmsg_flags`.
    pub fn append_to(&self, buf: &mut Vec<u8>, flags: u16, seq: u32, pid: u32) {
        let len = NLMSG_HDRLEN + self.payload.len();
        let end = buf.len() + align4(len);
        buf.extend_from_slice(&(len as u32).to_ne_bytes());
        buf.extend_from_slice(&self.ty.to_ne_bytes());
        buf.extend_from_slice(&flags.to_ne_bytes());
        buf.extend_from_slice(&seq.to_ne_bytes());
        buf.extend_from_slice(&pid.to_ne_bytes());
        buf.extend_from_slice(&self.payload);
        buf.resize(end, 0);
    }
}

/// Round up to the netlink alignment of 4.
pub const fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// A parsed `nlmsghdr` and its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    /// `nlmsg_type`.
    pub ty: u16,
    /// `nlmsg_flags`.
    pub flags: u16,
    /// `nlmsg_seq`.
    pub seq: u32,
    /// `nlmsg_pid`.
    pub pid: u32,
    /// Bytes after the header.
    pub payload: &'a [u8],
}

/// Split a datagram into messages.
pub fn messages(mut buf: &[u8]) -> Result<Vec<Message<'_>>, DecodeError> {
    let mut out = Vec::new();
    while buf.len() >= NLMSG_HDRLEN {
        let len = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        if len < NLMSG_HDRLEN || len > buf.len() {
            return Err(DecodeError::new("nlmsghdr", "length out of bounds"));
        }
        out.push(Message {
            ty: u16::from_ne_bytes([buf[4], buf[5]]),
            flags: u16::from_ne_bytes([buf[6], buf[7]]),
            seq: u32::from_ne_bytes([buf[8], buf[9], buf[10], buf[11]]),
            pid: u32::from_ne_bytes([buf[12], buf[13], buf[14], buf[15]]),
            payload: &buf[NLMSG_HDRLEN..len],
        });
        buf = &buf[align4(len).min(buf.len())..];
    }
    Ok(out)
}

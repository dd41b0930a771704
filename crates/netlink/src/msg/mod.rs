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
    /// The request as `-v` prints it: its message type by name (`RTM_NEWROUTE`; a generic
    /// netlink family by number and command), its flags by name (`create|excl`, `replace`,
    /// `append`, `dump`).
    pub fn describe(&self, proto_generic: bool) -> String {
        let ty = match (proto_generic, self.ty) {
            (false, 16) => "RTM_NEWLINK".to_string(),
            (false, 17) => "RTM_DELLINK".to_string(),
            (false, 18) => "RTM_GETLINK".to_string(),
            (false, 20) => "RTM_NEWADDR".to_string(),
            (false, 22) => "RTM_GETADDR".to_string(),
            (false, 24) => "RTM_NEWROUTE".to_string(),
            (false, 25) => "RTM_DELROUTE".to_string(),
            (false, 26) => "RTM_GETROUTE".to_string(),
            (false, 30) => "RTM_GETNEIGH".to_string(),
            (false, 90) => "RTM_GETNSID".to_string(),
            (false, 104) => "RTM_NEWNEXTHOP".to_string(),
            (false, 105) => "RTM_DELNEXTHOP".to_string(),
            (false, 106) => "RTM_GETNEXTHOP".to_string(),
            (true, 0x10) => format!("CTRL_CMD {}", self.payload.first().copied().unwrap_or(0)),
            (true, fam) => format!(
                "genl family {fam} cmd {}",
                self.payload.first().copied().unwrap_or(0)
            ),
            (false, t) => format!("type {t}"),
        };
        let mut f = Vec::new();
        // NLM_F_ROOT|NLM_F_MATCH share their bits with REPLACE|EXCL: a GET's are a dump's
        let dump = self.flags & flags::DUMP == flags::DUMP && self.flags & flags::CREATE == 0;
        if dump {
            f.push("dump");
        } else if self.flags & flags::REPLACE != 0 {
            f.push("replace");
        }
        if self.flags & flags::CREATE != 0 {
            f.push("create");
        }
        if !dump && self.flags & flags::EXCL != 0 {
            f.push("excl");
        }
        if self.flags & flags::APPEND != 0 {
            f.push("append");
        }
        if f.is_empty() {
            ty
        } else {
            format!("{ty} {}", f.join("|"))
        }
    }

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

#[cfg(test)]
mod tests {
    use super::{flags, Request};

    fn req(ty: u16, f: u16) -> Request {
        Request {
            ty,
            flags: flags::REQUEST | f,
            payload: vec![3],
        }
    }

    #[test]
    fn requests_are_described_by_name_and_flags() {
        assert_eq!(
            req(24, flags::CREATE | flags::EXCL).describe(false),
            "RTM_NEWROUTE create|excl"
        );
        assert_eq!(
            req(24, flags::CREATE | flags::REPLACE).describe(false),
            "RTM_NEWROUTE replace|create"
        );
        assert_eq!(req(26, flags::DUMP).describe(false), "RTM_GETROUTE dump");
        assert_eq!(req(25, 0).describe(false), "RTM_DELROUTE");
        assert_eq!(
            req(104, flags::CREATE).describe(false),
            "RTM_NEWNEXTHOP create"
        );
        assert_eq!(req(999, 0).describe(false), "type 999");
        assert_eq!(req(0x10, 0).describe(true), "CTRL_CMD 3");
        assert_eq!(
            req(30, flags::CREATE).describe(true),
            "genl family 30 cmd 3 create"
        );
    }
}

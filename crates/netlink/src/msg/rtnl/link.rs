//! `RTM_GETLINK`: what a device is (its kind, its veth peer), and `RTM_GETNSID`: the id a
//! namespace has in ours, to find which named namespace a veth peer lives in.

use crate::msg::attr::{get_str, get_u32, AttrBuf, Attrs, DecodeError};
use crate::msg::{flags, Request};

/// `RTM_GETLINK`.
pub const RTM_GETLINK: u16 = 18;
/// `RTM_GETNSID`.
pub const RTM_GETNSID: u16 = 90;
/// `RTM_NEWNSID`.
pub const RTM_NEWNSID: u16 = 88;

const IFLA_IFNAME: u16 = 3;
const IFLA_LINK: u16 = 5;
const IFLA_QDISC: u16 = 6;
const IFLA_LINKINFO: u16 = 18;
const IFLA_INFO_KIND: u16 = 1;
const IFLA_LINK_NETNSID: u16 = 37;
const NETNSA_NSID: u16 = 1;
const NETNSA_FD: u16 = 3;

/// A device as `ip -d link` would describe the parts we need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkMsg {
    /// ifindex.
    pub ifindex: u32,
    /// Name.
    pub name: String,
    /// `IFLA_INFO_KIND` (`veth`, `bridge`, ...), `None` for a plain device.
    pub kind: Option<String>,
    /// `IFLA_LINK`: for a veth, the peer's ifindex (in the peer's namespace).
    pub link: Option<u32>,
    /// `IFLA_LINK_NETNSID`: the peer's namespace id as seen from ours; absent when the peer
    /// is in the same namespace.
    pub link_netnsid: Option<i32>,
    /// `IFLA_QDISC`: the root qdisc's kind (`noqueue` on a new veth).
    pub qdisc: Option<String>,
}

/// Dump every device.
pub fn dump_request() -> Request {
    Request {
        ty: RTM_GETLINK,
        flags: flags::REQUEST | flags::DUMP,
        payload: vec![0u8; 16],
    }
}

/// Every device of the socket's namespace.
pub fn all(sock: &mut crate::sock::Socket) -> Result<Vec<LinkMsg>, crate::Error> {
    sock.dump(&dump_request(), "list devices")?
        .iter()
        .map(|p| decode(p).map_err(crate::Error::from))
        .collect()
}

/// Decode one `RTM_NEWLINK`.
pub fn decode(payload: &[u8]) -> Result<LinkMsg, DecodeError> {
    if payload.len() < 16 {
        return Err(DecodeError::new("ifinfomsg", "shorter than 16 bytes"));
    }
    let ifindex = i32::from_ne_bytes([payload[4], payload[5], payload[6], payload[7]]);
    let mut m = LinkMsg {
        ifindex: u32::try_from(ifindex).unwrap_or(0),
        name: String::new(),
        kind: None,
        link: None,
        link_netnsid: None,
        qdisc: None,
    };
    for (ty, v) in Attrs::new(&payload[16..])
        .to_vec()
        .map_err(|e| e.within("ifinfomsg"))?
    {
        match ty {
            IFLA_IFNAME => m.name = get_str(v),
            IFLA_LINK => m.link = Some(get_u32(v, "IFLA_LINK")?),
            IFLA_QDISC => m.qdisc = Some(get_str(v)),
            IFLA_LINK_NETNSID => m.link_netnsid = Some(get_u32(v, "IFLA_LINK_NETNSID")? as i32),
            IFLA_LINKINFO => {
                for (t, iv) in Attrs::new(v)
                    .to_vec()
                    .map_err(|e| e.within("IFLA_LINKINFO"))?
                {
                    if t == IFLA_INFO_KIND {
                        m.kind = Some(get_str(iv));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(m)
}

/// Ask which id the namespace behind `fd` has in ours.
pub fn nsid_request(fd: u32) -> Request {
    let mut a = AttrBuf::with_header(&[0u8; 1]);
    a.put_u32(NETNSA_FD, fd);
    Request {
        ty: RTM_GETNSID,
        flags: flags::REQUEST,
        payload: a.into_bytes(),
    }
}

/// The id in an `RTM_NEWNSID` answer (-1: none assigned).
pub fn decode_nsid(payload: &[u8]) -> Result<Option<i32>, DecodeError> {
    let body = payload.get(4..).unwrap_or(&[]);
    Attrs::new(body)
        .get(NETNSA_NSID)?
        .map(|v| get_u32(v, "NETNSA_NSID").map(|x| x as i32))
        .transpose()
}

/// `RTM_GETTFILTER`.
pub const RTM_GETTFILTER: u16 = 46;
/// `TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS)`: the egress hook of a clsact qdisc.
const CLSACT_EGRESS: u32 = 0xFFFF_FFF3;

/// Dump the classic tc filters on a device's clsact egress hook (`tc filter show dev DEV
/// egress`): a `tcmsg` naming the device and that parent.
pub fn egress_filters_request(ifindex: u32) -> Request {
    let mut payload = vec![0u8; 20];
    payload[4..8].copy_from_slice(&ifindex.to_ne_bytes());
    payload[12..16].copy_from_slice(&CLSACT_EGRESS.to_ne_bytes());
    Request {
        ty: RTM_GETTFILTER,
        flags: flags::REQUEST | flags::DUMP,
        payload,
    }
}

/// How many classic tc filters a device has on its egress hook (0 without a clsact qdisc:
/// the kernel answers an empty dump).
pub fn egress_filters(sock: &mut crate::sock::Socket, ifindex: u32) -> Result<usize, crate::Error> {
    Ok(sock
        .dump(
            &egress_filters_request(ifindex),
            "list the tc filters on egress",
        )?
        .len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The request is the one iproute2's `tc filter show dev lo egress` sends (read with
    /// strace): `RTM_GETTFILTER`, REQUEST|DUMP, a 20-byte tcmsg of family AF_UNSPEC, the
    /// device, handle 0, parent 0xFFFFFFF3, info 0, no attributes.
    #[test]
    fn egress_filters_request_is_tc_filter_show_egress() {
        let r = egress_filters_request(1);
        assert_eq!(r.ty, 46);
        assert_eq!(r.flags, flags::REQUEST | flags::DUMP);
        let mut want = vec![0u8; 4];
        want.extend_from_slice(&1i32.to_ne_bytes());
        want.extend_from_slice(&0u32.to_ne_bytes());
        want.extend_from_slice(&4_294_967_283u32.to_ne_bytes());
        want.extend_from_slice(&0u32.to_ne_bytes());
        assert_eq!(r.payload, want);
    }

    /// `IFLA_QDISC` is decoded (a veth's is `noqueue`).
    #[test]
    fn link_decodes_its_root_qdisc() {
        let mut a = AttrBuf::with_header(&[0u8; 16]);
        a.put_str(IFLA_QDISC, "noqueue");
        let m = decode(&a.into_bytes()).expect("decodes");
        assert_eq!(m.qdisc.as_deref(), Some("noqueue"));
    }
}

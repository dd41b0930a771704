//! Kernel nexthop objects (`RTM_NEWNEXTHOP` / `RTM_DELNEXTHOP` / `RTM_GETNEXTHOP`, Linux 5.3+).
//! Routes that reference one group install much faster in bulk than routes that each carry an
//! `RTA_MULTIPATH`, and `ip route` still lists their nexthops.

use std::net::IpAddr;

use mpt_model::Family;

use crate::msg::attr::{get_u32, AttrBuf, Attrs, DecodeError};
use crate::msg::{flags, Request};

/// `RTM_NEWNEXTHOP`.
pub const RTM_NEWNEXTHOP: u16 = 104;
/// `RTM_DELNEXTHOP`.
pub const RTM_DELNEXTHOP: u16 = 105;
/// `RTM_GETNEXTHOP`.
pub const RTM_GETNEXTHOP: u16 = 106;

/// `NHA_*` numbers.
#[allow(missing_docs)]
pub mod nha {
    pub const ID: u16 = 1;
    pub const GROUP: u16 = 2;
    pub const GROUP_TYPE: u16 = 3;
    pub const BLACKHOLE: u16 = 4;
    pub const OIF: u16 = 5;
    pub const GATEWAY: u16 = 6;
}

/// What a nexthop object is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NexthopObject {
    /// One path.
    Single {
        /// Gateway (family of the object).
        gateway: Option<IpAddr>,
        /// Output device.
        ifindex: u32,
        /// `RTNH_F_*` (onlink).
        flags: u8,
    },
    /// A hash-threshold group of `(id, weight)`.
    Group(Vec<(u32, u16)>),
}

/// A nexthop object with its id and protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NexthopMsg {
    /// `NHA_ID`.
    pub id: u32,
    /// `nh_protocol`.
    pub protocol: u8,
    /// `nh_family` (0 for groups).
    pub family: u8,
    /// Content.
    pub object: NexthopObject,
}

/// Encode `ip nexthop add id ID ...` (flags CREATE|EXCL) or `replace` (CREATE|REPLACE).
pub fn encode_new(msg: &NexthopMsg, replace: bool) -> Request {
    let (family, nh_flags) = match &msg.object {
        NexthopObject::Single { gateway, flags, .. } => (
            gateway.map_or(msg.family, |g| Family::of(&g).af()),
            u32::from(*flags),
        ),
        NexthopObject::Group(_) => (0, 0),
    };
    let mut hdr = [family, 0, msg.protocol, 0, 0, 0, 0, 0];
    hdr[4..8].copy_from_slice(&nh_flags.to_ne_bytes());
    let mut a = AttrBuf::with_header(&hdr);
    a.put_u32(nha::ID, msg.id);
    match &msg.object {
        NexthopObject::Single {
            gateway, ifindex, ..
        } => {
            if let Some(gw) = gateway {
                match gw {
                    IpAddr::V4(v) => a.put(nha::GATEWAY, &v.octets()),
                    IpAddr::V6(v) => a.put(nha::GATEWAY, &v.octets()),
                };
            }
            a.put_u32(nha::OIF, *ifindex);
        }
        NexthopObject::Group(members) => {
            let mut g = Vec::with_capacity(members.len() * 8);
            for (id, w) in members {
                let w1 = w.saturating_sub(1);
                g.extend_from_slice(&id.to_ne_bytes());
                g.push((w1 & 0xff) as u8);
                g.push((w1 >> 8) as u8);
                g.extend_from_slice(&[0, 0]);
            }
            a.put(nha::GROUP, &g);
        }
    }
    let f = if replace {
        flags::REQUEST | flags::CREATE | flags::REPLACE
    } else {
        flags::REQUEST | flags::CREATE | flags::EXCL
    };
    Request {
        ty: RTM_NEWNEXTHOP,
        flags: f,
        payload: a.into_bytes(),
    }
}

/// Encode `ip nexthop del id ID`.
pub fn encode_del(id: u32) -> Request {
    let mut a = AttrBuf::with_header(&[0u8; 8]);
    a.put_u32(nha::ID, id);
    Request {
        ty: RTM_DELNEXTHOP,
        flags: flags::REQUEST,
        payload: a.into_bytes(),
    }
}

/// Encode `ip nexthop show` (a dump of every object).
pub fn dump_request() -> Request {
    Request {
        ty: RTM_GETNEXTHOP,
        flags: flags::REQUEST | flags::DUMP,
        payload: vec![0u8; 8],
    }
}

/// Decode one nexthop object from a dump.
pub fn decode(payload: &[u8]) -> Result<NexthopMsg, DecodeError> {
    if payload.len() < 8 {
        return Err(DecodeError::new("nhmsg", "shorter than 8 bytes"));
    }
    let family = payload[0];
    let protocol = payload[2];
    let nh_flags = u32::from_ne_bytes([payload[4], payload[5], payload[6], payload[7]]);
    let mut id = 0;
    let mut ifindex = 0;
    let mut gateway = None;
    let mut group = None;
    for (ty, v) in Attrs::new(&payload[8..])
        .to_vec()
        .map_err(|e| e.within("nhmsg"))?
    {
        match ty {
            nha::ID => id = get_u32(v, "NHA_ID")?,
            nha::OIF => ifindex = get_u32(v, "NHA_OIF")?,
            nha::GATEWAY => {
                gateway = match v.len() {
                    4 => {
                        Some(IpAddr::from(<[u8; 4]>::try_from(v).map_err(|_| {
                            DecodeError::new("NHA_GATEWAY", "bad length")
                        })?))
                    }
                    16 => {
                        Some(IpAddr::from(<[u8; 16]>::try_from(v).map_err(|_| {
                            DecodeError::new("NHA_GATEWAY", "bad length")
                        })?))
                    }
                    _ => return Err(DecodeError::new("NHA_GATEWAY", "neither 4 nor 16 bytes")),
                }
            }
            nha::GROUP => {
                let mut m = Vec::new();
                for c in v.chunks_exact(8) {
                    let gid = get_u32(&c[0..4], "NHA_GROUP/id")?;
                    // weight (u8) and weight_high (u8, Linux 6.12+) hold weight - 1.
                    let w = u16::from(c[4]) | (u16::from(c[5]) << 8);
                    m.push((gid, w.saturating_add(1)));
                }
                group = Some(m);
            }
            _ => {}
        }
    }
    let object = match group {
        Some(g) => NexthopObject::Group(g),
        None => NexthopObject::Single {
            gateway,
            ifindex,
            flags: (nh_flags & 0xff) as u8,
        },
    };
    Ok(NexthopMsg {
        id,
        protocol,
        family,
        object,
    })
}

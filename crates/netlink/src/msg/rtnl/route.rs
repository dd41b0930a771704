//! `RTM_NEWROUTE` / `RTM_DELROUTE` / `RTM_GETROUTE`: encoding as iproute2 encodes the same
//! command (attribute order included, so golden bytes compare equal), and decoding of any route
//! the kernel dumps.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use mpt_model::route::RTNH_F_ONLINK;
use mpt_model::{Algo, Family, Nexthop, Route, RouteKey, Verb};

use crate::msg::attr::{get_u32, AttrBuf, Attrs, DecodeError};
use crate::msg::{align4, flags, Request};

/// `RTM_NEWROUTE`.
pub const RTM_NEWROUTE: u16 = 24;
/// `NLA_F_NESTED`: the attribute holds attributes.
pub const NLA_F_NESTED: u16 = 0x8000;
/// `RTM_DELROUTE`.
pub const RTM_DELROUTE: u16 = 25;
/// `RTM_GETROUTE`.
pub const RTM_GETROUTE: u16 = 26;

/// `RTA_*` attribute numbers used here.
#[allow(missing_docs)]
pub mod rta {
    pub const DST: u16 = 1;
    pub const SRC: u16 = 2;
    pub const IIF: u16 = 3;
    pub const OIF: u16 = 4;
    pub const GATEWAY: u16 = 5;
    pub const PRIORITY: u16 = 6;
    pub const PREFSRC: u16 = 7;
    pub const METRICS: u16 = 8;
    pub const MULTIPATH: u16 = 9;
    pub const FLOW: u16 = 11;
    pub const CACHEINFO: u16 = 12;
    /// Per-route multipath algorithm (2.6.12-2.6.22 and the 2015 patch); ignored by current
    /// kernels.
    pub const MP_ALGO: u16 = 14;
    pub const TABLE: u16 = 15;
    pub const MARK: u16 = 16;
    pub const VIA: u16 = 18;
    pub const PREF: u16 = 20;
    pub const ENCAP_TYPE: u16 = 21;
    pub const ENCAP: u16 = 22;
    pub const EXPIRES: u16 = 23;
    pub const UID: u16 = 25;
    pub const IP_PROTO: u16 = 27;
    pub const SPORT: u16 = 28;
    pub const DPORT: u16 = 29;
    pub const NH_ID: u16 = 30;
}

/// Name of an `RTA_*` number, for error messages that point at an attribute.
pub fn rta_name(ty: u16) -> String {
    const N: [&str; 32] = [
        "RTA_UNSPEC",
        "RTA_DST",
        "RTA_SRC",
        "RTA_IIF",
        "RTA_OIF",
        "RTA_GATEWAY",
        "RTA_PRIORITY",
        "RTA_PREFSRC",
        "RTA_METRICS",
        "RTA_MULTIPATH",
        "RTA_PROTOINFO",
        "RTA_FLOW",
        "RTA_CACHEINFO",
        "RTA_SESSION",
        "RTA_MP_ALGO",
        "RTA_TABLE",
        "RTA_MARK",
        "RTA_MFC_STATS",
        "RTA_VIA",
        "RTA_NEWDST",
        "RTA_PREF",
        "RTA_ENCAP_TYPE",
        "RTA_ENCAP",
        "RTA_EXPIRES",
        "RTA_PAD",
        "RTA_UID",
        "RTA_TTL_PROPAGATE",
        "RTA_IP_PROTO",
        "RTA_SPORT",
        "RTA_DPORT",
        "RTA_NH_ID",
        "RTA_FLOWLABEL",
    ];
    N.get(usize::from(ty))
        .map_or_else(|| format!("attribute {ty}"), |s| (*s).to_string())
}

/// Netlink flags for each verb, exactly as iproute2's `do_iproute()` maps them
/// (`NLM_F_ACK` is added by the socket).
pub const fn verb_flags(verb: Verb) -> u16 {
    match verb {
        Verb::Add => flags::REQUEST | flags::CREATE | flags::EXCL,
        Verb::Replace => flags::REQUEST | flags::CREATE | flags::REPLACE,
        Verb::Append => flags::REQUEST | flags::CREATE | flags::APPEND,
        Verb::Change => flags::REQUEST | flags::REPLACE,
        Verb::Del => flags::REQUEST,
    }
}

/// `RT_SCOPE_UNIVERSE`.
pub const RT_SCOPE_UNIVERSE: u8 = 0;
/// `RT_SCOPE_LINK`.
pub const RT_SCOPE_LINK: u8 = 253;
/// `RT_SCOPE_NOWHERE`.
pub const RT_SCOPE_NOWHERE: u8 = 255;
/// `RTN_UNICAST`.
pub const RTN_UNICAST: u8 = 1;

/// How the nexthops were written, which decides the encoding (as in iproute2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathForm {
    /// `via ADDR dev DEV`: `RTA_GATEWAY` + `RTA_OIF`, onlink in `rtm_flags`.
    Single,
    /// `nexthop via ... [nexthop ...]`: `RTA_MULTIPATH`.
    Multipath,
    /// `nhid N`: `RTA_NH_ID` referencing a kernel nexthop object.
    Object(u32),
}

/// A route request as mproute builds it.
#[derive(Debug, Clone)]
pub struct RouteRequest<'a> {
    /// What to do.
    pub verb: Verb,
    /// Destination and table. The metric is sent only if `metric_given`.
    pub key: RouteKey,
    /// Whether the user gave a metric (iproute2 sends `RTA_PRIORITY` only then).
    pub metric_given: bool,
    /// `rtm_protocol`; `None` on delete means "any".
    pub protocol: Option<u8>,
    /// Paths (ignored for `PathForm::Object`; may be empty for a delete).
    pub nexthops: &'a [Nexthop],
    /// Encoding of the paths.
    pub form: PathForm,
    /// Algorithm; `RTA_MP_ALGO` is sent only when it is not the default (`l3-hash`), as the
    /// kernels that had the attribute only reported it then.
    pub algo: Algo,
    /// A lightweight tunnel encapsulation (`encap ila ...`): sent after `RTA_DST` as
    /// `RTA_ENCAP` (its attributes, nested) and `RTA_ENCAP_TYPE`, in iproute2's order.
    pub encap: Option<LwtEncap<'a>>,
}

/// `RTA_ENCAP_TYPE` and the attributes nested in `RTA_ENCAP`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LwtEncap<'a> {
    /// `LWTUNNEL_ENCAP_*`.
    pub kind: u16,
    /// The nested attributes.
    pub attrs: &'a [u8],
}

fn addr_bytes(a: &IpAddr) -> Vec<u8> {
    match a {
        IpAddr::V4(v) => v.octets().to_vec(),
        IpAddr::V6(v) => v.octets().to_vec(),
    }
}

fn rtmsg(
    family: u8,
    dst_len: u8,
    table: u32,
    protocol: u8,
    scope: u8,
    rtype: u8,
    fl: u32,
) -> [u8; 12] {
    let t = if table < 256 { table as u8 } else { 0 };
    let f = fl.to_ne_bytes();
    [
        family, dst_len, 0, 0, t, protocol, scope, rtype, f[0], f[1], f[2], f[3],
    ]
}

/// Encode the `RTA_MULTIPATH` payload: `rtnexthop` records with `rtnh_hops = weight - 1`.
pub fn encode_multipath(route_family: Family, nexthops: &[Nexthop]) -> Vec<u8> {
    let mut out = Vec::with_capacity(nexthops.len() * 28);
    for nh in nexthops {
        let mut attrs = AttrBuf::default();
        if let Some(gw) = &nh.gateway {
            if Family::of(gw) == route_family {
                attrs.put(rta::GATEWAY, &addr_bytes(gw));
            } else {
                let mut via = u16::from(Family::of(gw).af()).to_ne_bytes().to_vec();
                via.extend(addr_bytes(gw));
                attrs.put(rta::VIA, &via);
            }
        }
        let a = attrs.into_bytes();
        let len = 8 + a.len();
        out.extend_from_slice(&(len as u16).to_ne_bytes());
        out.push(nh.flags);
        out.push(nh.weight.saturating_sub(1).min(255) as u8);
        out.extend_from_slice(&(nh.ifindex as i32).to_ne_bytes());
        out.extend_from_slice(&a);
        out.resize(align4(out.len()), 0);
    }
    out
}

/// Encode a route request.
pub fn encode(req: &RouteRequest<'_>) -> Request {
    let family = req.key.family();
    let dst_len = req.key.dst.prefix_len();
    let del = req.verb == Verb::Del;
    let (ty, protocol, scope, rtype) = if del {
        // iproute2: delete sends type 0; IPv4 scope NOWHERE, IPv6 universe.
        let scope = if family == Family::V4 {
            RT_SCOPE_NOWHERE
        } else {
            RT_SCOPE_UNIVERSE
        };
        (RTM_DELROUTE, req.protocol.unwrap_or(0), scope, 0)
    } else {
        let device_only = req.form == PathForm::Single
            && req.nexthops.first().is_some_and(|n| n.gateway.is_none());
        let scope = if device_only && family == Family::V4 {
            RT_SCOPE_LINK
        } else {
            RT_SCOPE_UNIVERSE
        };
        (
            RTM_NEWROUTE,
            req.protocol.unwrap_or(mpt_model::MPROUTE_PROTO),
            scope,
            RTN_UNICAST,
        )
    };
    let mut rtm_flags = 0u32;
    if req.form == PathForm::Single {
        if let Some(nh) = req.nexthops.first() {
            if nh.flags & RTNH_F_ONLINK != 0 {
                rtm_flags |= u32::from(RTNH_F_ONLINK);
            }
        }
    }
    let hdr = rtmsg(
        family.af(),
        dst_len,
        req.key.table,
        protocol,
        scope,
        rtype,
        rtm_flags,
    );
    let mut a = AttrBuf::with_header(&hdr);
    a.put(rta::DST, &addr_bytes(&req.key.dst.network()));
    if let Some(e) = &req.encap {
        a.put(NLA_F_NESTED | rta::ENCAP, e.attrs);
        a.put_u16(rta::ENCAP_TYPE, e.kind);
    }
    if req.key.table >= 256 {
        a.put_u32(rta::TABLE, req.key.table);
    }
    if req.metric_given {
        a.put_u32(rta::PRIORITY, req.key.metric);
    }
    match req.form {
        PathForm::Object(id) => {
            a.put_u32(rta::NH_ID, id);
        }
        PathForm::Single => {
            if let Some(nh) = req.nexthops.first() {
                if let Some(gw) = &nh.gateway {
                    if Family::of(gw) == family {
                        a.put(rta::GATEWAY, &addr_bytes(gw));
                    } else {
                        let mut via = u16::from(Family::of(gw).af()).to_ne_bytes().to_vec();
                        via.extend(addr_bytes(gw));
                        a.put(rta::VIA, &via);
                    }
                }
                if nh.ifindex != 0 {
                    a.put_u32(rta::OIF, nh.ifindex);
                }
            }
        }
        PathForm::Multipath => {
            if !req.nexthops.is_empty() {
                a.put(rta::MULTIPATH, &encode_multipath(family, req.nexthops));
            }
        }
    }
    if !del && req.algo != Algo::L3Hash {
        a.put_u32(rta::MP_ALGO, req.algo.as_u32());
    }
    Request {
        ty,
        flags: verb_flags(req.verb),
        payload: a.into_bytes(),
    }
}

/// A route dump request: one family (or both with `None`), optionally one table (sent as
/// `RTA_TABLE`, which strict checking accepts as a kernel-side filter).
pub fn dump_request(family: Option<Family>, table: Option<u32>) -> Request {
    let hdr = rtmsg(family.map_or(0, Family::af), 0, 0, 0, 0, 0, 0);
    let mut a = AttrBuf::with_header(&hdr);
    if let Some(t) = table {
        a.put_u32(rta::TABLE, t);
    }
    Request {
        ty: RTM_GETROUTE,
        flags: flags::REQUEST | flags::DUMP,
        payload: a.into_bytes(),
    }
}

/// `RTM_F_FIB_MATCH`: a lookup answers with the FIB entry that matched, not the resulting
/// route.
pub const RTM_F_FIB_MATCH: u32 = 0x2000;
/// `RTM_F_LOOKUP_TABLE`: the answer's table is the one the lookup found it in (iproute2 sets it
/// on every `ip route get`).
pub const RTM_F_LOOKUP_TABLE: u32 = 0x1000;

/// A route lookup, as `ip route get DST fibmatch`: the kernel answers with the FIB entry its
/// (output) lookup matched for a packet to `dst`. A lookup also marks the IPv4 entry it matched
/// as used, so that deleting or replacing it later moves the namespace's FIB generation.
pub fn get_request(dst: IpAddr) -> Request {
    let (fam, len) = match dst {
        IpAddr::V4(_) => (Family::V4, 32),
        IpAddr::V6(_) => (Family::V6, 128),
    };
    // IPv6's strict check takes RTM_F_FIB_MATCH alone ("Invalid flags for get route request")
    let fl = match fam {
        Family::V4 => RTM_F_FIB_MATCH | RTM_F_LOOKUP_TABLE,
        Family::V6 => RTM_F_FIB_MATCH,
    };
    let hdr = rtmsg(fam.af(), len, 0, 0, 0, 0, fl);
    let mut a = AttrBuf::with_header(&hdr);
    a.put(rta::DST, &addr_bytes(&dst));
    Request {
        ty: RTM_GETROUTE,
        flags: flags::REQUEST | flags::ACK,
        payload: a.into_bytes(),
    }
}

/// A flow for a route lookup ([`lookup_request`]): what `ip route get DST [from SRC]
/// [ipproto P] [sport S] [dport D]` sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    /// Destination.
    pub dst: IpAddr,
    /// Source, if given (of the destination's family).
    pub src: Option<IpAddr>,
    /// IP protocol, if given.
    pub proto: Option<u8>,
    /// Source port, if given.
    pub sport: Option<u16>,
    /// Destination port, if given.
    pub dport: Option<u16>,
    /// The device the packet arrives on (`iif`: an input lookup, as for a forwarded packet).
    pub iif: Option<u32>,
}

/// A route lookup as `ip route get` makes it (no `fibmatch`): the kernel answers with the route
/// a packet of the flow takes, the nexthop its own multipath hash picks included. Protocol and
/// ports are sent as `RTA_IP_PROTO`, `RTA_SPORT`, `RTA_DPORT` (Linux 4.17+), so that an L4 hash
/// policy (`fib_multipath_hash_policy`) sees them. With `fib_match`, the answer is the FIB
/// entry the lookup matched instead (`ip route get ... fibmatch`).
pub fn lookup_request(f: &Flow, fib_match: bool) -> Request {
    let (fam, len) = match f.dst {
        IpAddr::V4(_) => (Family::V4, 32),
        IpAddr::V6(_) => (Family::V6, 128),
    };
    // IPv6's strict check refuses RTM_F_LOOKUP_TABLE ("Invalid flags for get route request")
    let fl = match fam {
        Family::V4 => RTM_F_LOOKUP_TABLE,
        Family::V6 => 0,
    } | if fib_match { RTM_F_FIB_MATCH } else { 0 };
    let mut hdr = rtmsg(fam.af(), len, 0, 0, 0, 0, fl);
    if f.src.is_some() {
        hdr[2] = len; // rtm_src_len
    }
    let mut a = AttrBuf::with_header(&hdr);
    a.put(rta::DST, &addr_bytes(&f.dst));
    if let Some(s) = &f.src {
        a.put(rta::SRC, &addr_bytes(s));
    }
    if let Some(p) = f.proto {
        a.put(rta::IP_PROTO, &[p]);
    }
    if let Some(p) = f.sport {
        a.put(rta::SPORT, &p.to_be_bytes());
    }
    if let Some(p) = f.dport {
        a.put(rta::DPORT, &p.to_be_bytes());
    }
    if let Some(i) = f.iif {
        a.put_u32(rta::IIF, i);
    }
    Request {
        ty: RTM_GETROUTE,
        flags: flags::REQUEST | flags::ACK,
        payload: a.into_bytes(),
    }
}

/// A route as the kernel reports it, before it is joined with our state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteMsg {
    /// Model view (algo from `RTA_MP_ALGO` if the kernel echoed it, else `None`).
    pub route: Route,
    /// `rtm_flags`.
    pub rtm_flags: u32,
    /// `rtm_tos`: a route for one TOS value only (0: any).
    pub tos: u8,
    /// Raw `RTA_MP_ALGO` value if present (a value no version of ours knows is kept here).
    pub mp_algo_raw: Option<u32>,
    /// Attributes this decoder does not interpret, as `(type, bytes)`.
    pub other: Vec<(u16, Vec<u8>)>,
}

impl RouteMsg {
    fn attr(&self, ty: u16) -> Option<&[u8]> {
        self.other
            .iter()
            .find(|(t, _)| *t == ty)
            .map(|(_, v)| v.as_slice())
    }

    /// `RTA_PREFSRC`: the source address the route prefers (`src` in `ip route`).
    pub fn prefsrc(&self) -> Option<IpAddr> {
        let fam = self.route.key.family();
        self.attr(rta::PREFSRC)
            .and_then(|v| ip_from(fam, v, "RTA_PREFSRC").ok())
    }

    /// `RTA_PREF`: an IPv6 route's router preference (`ICMPV6_ROUTER_PREF_*`).
    pub fn pref(&self) -> Option<u8> {
        self.attr(rta::PREF).and_then(|v| v.first().copied())
    }
}

fn ip_from(family: Family, p: &[u8], what: &str) -> Result<IpAddr, DecodeError> {
    match family {
        Family::V4 => {
            let a: [u8; 4] = p
                .get(..4)
                .and_then(|s| s.try_into().ok())
                .ok_or_else(|| DecodeError::new(what, "IPv4 address shorter than 4 bytes"))?;
            Ok(IpAddr::V4(Ipv4Addr::from(a)))
        }
        Family::V6 => {
            let a: [u8; 16] = p
                .get(..16)
                .and_then(|s| s.try_into().ok())
                .ok_or_else(|| DecodeError::new(what, "IPv6 address shorter than 16 bytes"))?;
            Ok(IpAddr::V6(Ipv6Addr::from(a)))
        }
    }
}

fn via_from(p: &[u8], what: &str) -> Result<IpAddr, DecodeError> {
    let fam = p
        .get(..2)
        .map(|s| u16::from_ne_bytes([s[0], s[1]]))
        .ok_or_else(|| DecodeError::new(what, "RTA_VIA shorter than 2 bytes"))?;
    let f = u8::try_from(fam)
        .ok()
        .and_then(Family::from_af)
        .ok_or_else(|| DecodeError::new(what, "RTA_VIA of an unsupported family"))?;
    ip_from(f, &p[2..], what)
}

/// Decode an `RTA_MULTIPATH` payload.
pub fn decode_multipath(family: Family, mut p: &[u8]) -> Result<Vec<Nexthop>, DecodeError> {
    let mut out = Vec::new();
    let mut i = 0;
    while p.len() >= 8 {
        let path = format!("RTA_MULTIPATH/rtnexthop[{i}]");
        let len = usize::from(u16::from_ne_bytes([p[0], p[1]]));
        if len < 8 || len > p.len() {
            return Err(DecodeError::new(path, "rtnh_len out of bounds"));
        }
        let flags = p[2];
        let weight = u16::from(p[3]) + 1;
        let ifindex = i32::from_ne_bytes([p[4], p[5], p[6], p[7]]);
        let mut gateway = None;
        for (ty, v) in Attrs::new(&p[8..len])
            .to_vec()
            .map_err(|e| e.within(&path))?
        {
            match ty {
                rta::GATEWAY => gateway = Some(ip_from(family, v, &path)?),
                rta::VIA => gateway = Some(via_from(v, &path)?),
                _ => {}
            }
        }
        out.push(Nexthop {
            gateway,
            ifindex: u32::try_from(ifindex).unwrap_or(0),
            weight,
            flags,
        });
        p = &p[align4(len).min(p.len())..];
        i += 1;
    }
    Ok(out)
}

/// Decode a `RTM_NEWROUTE` (dump or notification) payload. Returns `Ok(None)` for families
/// other than IPv4 / IPv6.
pub fn decode(payload: &[u8]) -> Result<Option<RouteMsg>, DecodeError> {
    if payload.len() < 12 {
        return Err(DecodeError::new("rtmsg", "shorter than 12 bytes"));
    }
    let Some(family) = Family::from_af(payload[0]) else {
        return Ok(None);
    };
    let dst_len = payload[1];
    let mut table = u32::from(payload[4]);
    let protocol = payload[5];
    let scope = payload[6];
    let rtype = payload[7];
    let rtm_flags = u32::from_ne_bytes([payload[8], payload[9], payload[10], payload[11]]);
    let mut dst = None;
    let mut metric = 0;
    let mut oif = 0;
    let mut gateway = None;
    let mut multipath = None;
    let mut nh_id = None;
    let mut mp_algo_raw = None;
    let mut other = Vec::new();
    for (ty, v) in Attrs::new(&payload[12..])
        .to_vec()
        .map_err(|e| e.within("rtmsg"))?
    {
        let name = rta_name(ty);
        match ty {
            rta::DST => dst = Some(ip_from(family, v, &name)?),
            rta::TABLE => table = get_u32(v, &name)?,
            rta::PRIORITY => metric = get_u32(v, &name)?,
            rta::OIF => oif = get_u32(v, &name)?,
            rta::GATEWAY => gateway = Some(ip_from(family, v, &name)?),
            rta::VIA => gateway = Some(via_from(v, &name)?),
            rta::MULTIPATH => multipath = Some(decode_multipath(family, v)?),
            rta::NH_ID => nh_id = Some(get_u32(v, &name)?),
            rta::MP_ALGO => mp_algo_raw = Some(get_u32(v, &name)?),
            _ => other.push((ty, v.to_vec())),
        }
    }
    let unspecified = match family {
        Family::V4 => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        Family::V6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    let dst = IpNet::new(dst.unwrap_or(unspecified), dst_len)
        .map_err(|_| DecodeError::new("rtmsg", "prefix length too long for the family"))?;
    let nexthops = match multipath {
        Some(v) => v,
        None if gateway.is_some() || oif != 0 => vec![Nexthop {
            gateway,
            ifindex: oif,
            weight: 1,
            flags: (rtm_flags & 0xff) as u8,
        }],
        None => Vec::new(),
    };
    Ok(Some(RouteMsg {
        route: Route {
            key: RouteKey { dst, table, metric },
            protocol,
            scope,
            rtype,
            nexthops,
            nh_id,
            algo: mp_algo_raw.and_then(Algo::from_u32),
        },
        rtm_flags,
        tos: payload[3],
        mp_algo_raw,
        other,
    }))
}

/// The metric the kernel gives a route the user gave none: IPv4 0, IPv6 1024
/// (`IP6_RT_PRIO_USER`).
pub const fn default_metric(family: Family) -> u32 {
    match family {
        Family::V4 => 0,
        Family::V6 => 1024,
    }
}

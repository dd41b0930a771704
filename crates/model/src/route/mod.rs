//! Routes and nexthops as mproute understands them, independent of the wire format.

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;

pub mod algo;
pub mod consistent;
pub mod drift;
pub mod plan;
pub mod resilient;
pub mod spread;
pub mod threshold;
pub mod verify;

use crate::Algo;

/// Largest weight a nexthop may have (`rtnh_hops` is a u8 holding weight − 1).
pub const MAX_WEIGHT: u16 = 256;
/// Most nexthops one managed route may have (the BPF dataplane keeps them in a fixed array).
pub const MAX_NEXTHOPS: usize = 32;

/// Address family of a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// IPv4 (`AF_INET`).
    V4,
    /// IPv6 (`AF_INET6`).
    V6,
}

impl Family {
    /// The family of an address.
    pub fn of(addr: &IpAddr) -> Family {
        match addr {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }
    /// The family of a prefix.
    pub fn of_net(net: &IpNet) -> Family {
        match net {
            IpNet::V4(_) => Family::V4,
            IpNet::V6(_) => Family::V6,
        }
    }
    /// `AF_INET` / `AF_INET6` as the kernel numbers them.
    pub const fn af(self) -> u8 {
        match self {
            Family::V4 => 2,
            Family::V6 => 10,
        }
    }
    /// Inverse of [`Family::af`].
    pub const fn from_af(af: u8) -> Option<Family> {
        match af {
            2 => Some(Family::V4),
            10 => Some(Family::V6),
            _ => None,
        }
    }
    /// "inet" / "inet6", as iproute2 says.
    pub const fn name(self) -> &'static str {
        match self {
            Family::V4 => "inet",
            Family::V6 => "inet6",
        }
    }
}

/// What a mutating command asks of an existing route; the netlink flags for each verb are in
/// one table in the netlink crate (`msg::rtnl::route::verb_flags`), exactly as iproute2 maps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// Create; fail if the route exists.
    Add,
    /// Create or replace.
    Replace,
    /// Add an alternative (IPv4) or more ECMP siblings (IPv6).
    Append,
    /// Replace an existing route; fail if there is none.
    Change,
    /// Delete.
    Del,
}

impl Verb {
    /// The command-line word.
    pub const fn name(self) -> &'static str {
        match self {
            Verb::Add => "add",
            Verb::Replace => "replace",
            Verb::Append => "append",
            Verb::Change => "change",
            Verb::Del => "del",
        }
    }
}

/// The identity of a route in the FIB: family, destination prefix, table and metric
/// (TOS is not supported by mproute and always 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RouteKey {
    /// Destination prefix, host bits cleared.
    pub dst: IpNet,
    /// Routing table id (254 = main).
    pub table: u32,
    /// Metric / priority (`RTA_PRIORITY`). IPv6 routes the user gave no metric get 1024 from
    /// the kernel; IPv4 ones 0.
    pub metric: u32,
}

impl RouteKey {
    /// The family of the destination.
    pub fn family(&self) -> Family {
        Family::of_net(&self.dst)
    }
}

impl fmt::Display for RouteKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.dst)?;
        if self.table != crate::names::RT_TABLE_MAIN {
            write!(f, " table {}", crate::names::table_name(self.table))?;
        }
        write!(f, " metric {}", self.metric)
    }
}

/// `RTNH_F_ONLINK`: the gateway is on-link even if no prefix says so.
pub const RTNH_F_ONLINK: u8 = 4;
/// `RTNH_F_DEAD`.
pub const RTNH_F_DEAD: u8 = 1;
/// `RTNH_F_LINKDOWN`.
pub const RTNH_F_LINKDOWN: u8 = 16;

/// One path of a route.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Nexthop {
    /// Gateway; `None` for a device route.
    pub gateway: Option<IpAddr>,
    /// Output device (0 if the kernel chose none, e.g. for a blackhole).
    pub ifindex: u32,
    /// Weight, 1..=256.
    pub weight: u16,
    /// `RTNH_F_*` flags.
    pub flags: u8,
}

impl Nexthop {
    /// Whether `onlink` was given.
    pub fn onlink(&self) -> bool {
        self.flags & RTNH_F_ONLINK != 0
    }
    /// The flags as iproute2 names them, for display.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.flags & RTNH_F_DEAD != 0 {
            v.push("dead");
        }
        if self.flags & RTNH_F_ONLINK != 0 {
            v.push("onlink");
        }
        if self.flags & RTNH_F_LINKDOWN != 0 {
            v.push("linkdown");
        }
        if self.flags & 2 != 0 {
            v.push("pervasive");
        }
        if self.flags & 8 != 0 {
            v.push("offload");
        }
        if self.flags & 64 != 0 {
            v.push("trap");
        }
        v
    }
}

/// A unicast route: the FIB's view joined with the algorithm mproute keeps for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Identity.
    pub key: RouteKey,
    /// `rtm_protocol`.
    pub protocol: u8,
    /// `rtm_scope`.
    pub scope: u8,
    /// `rtm_type` (1 = unicast).
    pub rtype: u8,
    /// Paths, in kernel order.
    pub nexthops: Vec<Nexthop>,
    /// Kernel nexthop object the route references (`RTA_NH_ID`), if any.
    pub nh_id: Option<u32>,
    /// Algorithm, when known (from the kernel's `RTA_MP_ALGO` or from our state).
    pub algo: Option<Algo>,
}

/// Why a route specification is not acceptable before anything is sent to the kernel.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// Weight outside 1..=256.
    #[error("weight {0} is out of range (1..=256)")]
    Weight(u32),
    /// A gateway of another family than the prefix.
    #[error("gateway {gw} is not of the prefix's family ({fam})")]
    MixedFamily {
        /// The offending gateway.
        gw: IpAddr,
        /// The prefix's family name.
        fam: &'static str,
    },
    /// No nexthop at all.
    #[error(
        "no nexthop given (expected \"nexthop via ADDR [dev DEV] ...\" or \"via ADDR dev DEV\")"
    )]
    NoNexthop,
    /// More than [`MAX_NEXTHOPS`].
    #[error("{0} nexthops given; at most 32 are supported")]
    TooMany(usize),
    /// The same nexthop listed twice: its description and its index.
    #[error("nexthop {0} is listed twice")]
    Duplicate(String, usize),
    /// A nexthop with neither gateway nor device.
    #[error("a nexthop needs \"via ADDR\" or \"dev DEV\"")]
    Empty,
}

/// Check what the kernel would otherwise reject late or not at all: weights, families,
/// duplicates, count. Returns the first problem.
pub fn validate_nexthops(dst: &IpNet, nexthops: &[Nexthop]) -> Result<(), SpecError> {
    if nexthops.is_empty() {
        return Err(SpecError::NoNexthop);
    }
    if nexthops.len() > MAX_NEXTHOPS {
        return Err(SpecError::TooMany(nexthops.len()));
    }
    let fam = Family::of_net(dst);
    for (i, nh) in nexthops.iter().enumerate() {
        if nh.weight == 0 || nh.weight > MAX_WEIGHT {
            return Err(SpecError::Weight(nh.weight.into()));
        }
        match nh.gateway {
            Some(gw) if Family::of(&gw) != fam => {
                return Err(SpecError::MixedFamily {
                    gw,
                    fam: fam.name(),
                })
            }
            None if nh.ifindex == 0 => return Err(SpecError::Empty),
            _ => {}
        }
        if nexthops[..i]
            .iter()
            .any(|o| o.gateway == nh.gateway && o.ifindex == nh.ifindex)
        {
            let what = match nh.gateway {
                Some(g) if nh.ifindex != 0 => format!("via {g} dev #{}", nh.ifindex),
                Some(g) => format!("via {g}"),
                None => format!("dev #{}", nh.ifindex),
            };
            return Err(SpecError::Duplicate(what, i));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nh(gw: &str, w: u16) -> Nexthop {
        Nexthop {
            gateway: Some(gw.parse().expect("addr")),
            ifindex: 2,
            weight: w,
            flags: 0,
        }
    }

    #[test]
    fn validation() {
        let v4: IpNet = "10.0.0.0/8".parse().expect("net");
        assert_eq!(validate_nexthops(&v4, &[]), Err(SpecError::NoNexthop));
        assert_eq!(
            validate_nexthops(&v4, &[nh("10.1.0.1", 0)]),
            Err(SpecError::Weight(0))
        );
        assert_eq!(
            validate_nexthops(&v4, &[nh("10.1.0.1", 257)]),
            Err(SpecError::Weight(257))
        );
        assert!(validate_nexthops(&v4, &[nh("10.1.0.1", 256), nh("10.1.0.2", 1)]).is_ok());
        assert!(matches!(
            validate_nexthops(&v4, &[nh("2001:db8::1", 1)]),
            Err(SpecError::MixedFamily { .. })
        ));
        assert!(matches!(
            validate_nexthops(&v4, &[nh("10.1.0.1", 1), nh("10.1.0.1", 2)]),
            Err(SpecError::Duplicate(_, 1))
        ));
        let many: Vec<_> = (0..33)
            .map(|i| nh(&format!("10.1.0.{}", i + 1), 1))
            .collect();
        assert_eq!(validate_nexthops(&v4, &many), Err(SpecError::TooMany(33)));
    }

    #[test]
    fn af_numbers() {
        assert_eq!(Family::V4.af(), libc_af_inet());
        assert_eq!(Family::from_af(10), Some(Family::V6));
        assert_eq!(Family::from_af(0), None);
    }

    // AF_INET is 2 on every Linux architecture; the model may not depend on libc.
    fn libc_af_inet() -> u8 {
        2
    }
}

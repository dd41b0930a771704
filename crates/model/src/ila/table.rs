//! The two tables of ILA and their rules, as the kernel's ILA module keeps them.
//!
//! Receive side ([`Mapping`], `ila xlat`): a packet whose destination's upper 64 bits equal a
//! mapping's `locator_match` has them replaced by its `locator` (ILA to SIR). Mappings are
//! keyed by (locator match, device); for one locator match, one for the receiving device wins
//! over one for any device ([`lookup`]). Defaults: any device, `no-action`, `use-format`.
//!
//! Send side ([`RouteSpec`], `ila route`, the kernel's `encap ila` routes): a packet routed by
//! such a route has its destination's locator replaced (SIR to ILA) on output, or, with
//! `hook-type input`, on input (a router translating what it forwards). The kernel's rules for
//! such routes are [`validate_route`].

use std::fmt;
use std::net::Ipv6Addr;

use ipnet::Ipv6Net;

use super::{CsumMode, Locator};

/// `ILA_ATYPE_*`: the type of an identifier (the top 3 bits of its first byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IdentType {
    /// `iid` (0): an interface identifier.
    Iid,
    /// `luid` (1): a locally unique identifier, the one type the kernel translates.
    Luid,
    /// `virt-v4` (2).
    VirtV4,
    /// `virt-uni-v6` (3).
    VirtUniV6,
    /// `virt-multi-v6` (4).
    VirtMultiV6,
    /// `nonlocal-addr` (5).
    NonlocalAddr,
    /// `use-format` (32): take the type from the address's own type field (the default).
    #[default]
    UseFormat,
    /// Any other number.
    Other(u8),
}

impl IdentType {
    /// Its number.
    pub const fn as_u8(self) -> u8 {
        match self {
            IdentType::Iid => 0,
            IdentType::Luid => 1,
            IdentType::VirtV4 => 2,
            IdentType::VirtUniV6 => 3,
            IdentType::VirtMultiV6 => 4,
            IdentType::NonlocalAddr => 5,
            IdentType::UseFormat => 32,
            IdentType::Other(n) => n,
        }
    }
    /// From its number.
    pub const fn from_u8(v: u8) -> IdentType {
        match v {
            0 => IdentType::Iid,
            1 => IdentType::Luid,
            2 => IdentType::VirtV4,
            3 => IdentType::VirtUniV6,
            4 => IdentType::VirtMultiV6,
            5 => IdentType::NonlocalAddr,
            32 => IdentType::UseFormat,
            n => IdentType::Other(n),
        }
    }
    /// iproute2's word (`unknown` for numbers it has none for).
    pub const fn name(self) -> &'static str {
        match self {
            IdentType::Iid => "iid",
            IdentType::Luid => "luid",
            IdentType::VirtV4 => "virt-v4",
            IdentType::VirtUniV6 => "virt-uni-v6",
            IdentType::VirtMultiV6 => "virt-multi-v6",
            IdentType::NonlocalAddr => "nonlocal-addr",
            IdentType::UseFormat => "use-format",
            IdentType::Other(_) => "unknown",
        }
    }
    /// From a word on the command line: `luid` or `use-format`, the two iproute2 accepts.
    pub fn from_name(s: &str) -> Option<IdentType> {
        match s {
            "luid" => Some(IdentType::Luid),
            "use-format" => Some(IdentType::UseFormat),
            _ => None,
        }
    }
    /// The type an address's identifier says it has (its first byte's top 3 bits).
    pub fn of(addr: Ipv6Addr) -> IdentType {
        IdentType::from_u8(addr.octets()[8] >> 5)
    }
}

/// `ILA_HOOK_*`: where an `ila route` translates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum HookType {
    /// `output` (0, the default): packets this host sends.
    #[default]
    Output,
    /// `input` (1): packets this host receives and forwards.
    Input,
}

impl HookType {
    /// Its number.
    pub const fn as_u8(self) -> u8 {
        match self {
            HookType::Output => 0,
            HookType::Input => 1,
        }
    }
    /// From its number.
    pub const fn from_u8(v: u8) -> Option<HookType> {
        match v {
            0 => Some(HookType::Output),
            1 => Some(HookType::Input),
            _ => None,
        }
    }
    /// iproute2's word.
    pub const fn name(self) -> &'static str {
        match self {
            HookType::Output => "output",
            HookType::Input => "input",
        }
    }
    /// From iproute2's word.
    pub fn from_name(s: &str) -> Option<HookType> {
        match s {
            "output" => Some(HookType::Output),
            "input" => Some(HookType::Input),
            _ => None,
        }
    }
}

/// One receive-side mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mapping {
    /// The locator a packet's destination must have.
    pub locator_match: Locator,
    /// The locator it gets instead.
    pub locator: Locator,
    /// The receiving device (0: any).
    pub ifindex: u32,
    /// What happens to checksums.
    pub csum_mode: CsumMode,
    /// The identifier type.
    pub ident_type: IdentType,
}

impl Mapping {
    /// Its key: (locator match, device).
    pub fn key(&self) -> (Locator, u32) {
        (self.locator_match, self.ifindex)
    }
}

/// The mapping a packet to `dst` arriving on `ifindex` takes: the one for that device, else the
/// one for any device (as the kernel's list, which keeps device-bound entries first).
pub fn lookup(mappings: &[Mapping], dst: Ipv6Addr, ifindex: u32) -> Option<&Mapping> {
    let loc = Locator::of(dst);
    mappings
        .iter()
        .find(|m| m.locator_match == loc && m.ifindex == ifindex && ifindex != 0)
        .or_else(|| {
            mappings
                .iter()
                .find(|m| m.locator_match == loc && m.ifindex == 0)
        })
}

/// One send-side route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RouteSpec {
    /// The SIR prefix.
    pub dst: Ipv6Net,
    /// The locator destinations in it get.
    pub locator: Locator,
    /// What happens to checksums.
    pub csum_mode: CsumMode,
    /// The identifier type.
    pub ident_type: IdentType,
    /// Where it translates.
    pub hook_type: HookType,
}

/// An ILA route as the FIB holds it: the translation, and where the route sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RouteEntry {
    /// The translation (the SIR prefix, the locator, modes, hook).
    pub spec: RouteSpec,
    /// Gateway.
    pub via: Option<Ipv6Addr>,
    /// Device (0: none given).
    pub ifindex: u32,
    /// Table.
    pub table: u32,
}

/// Why the kernel refuses an ILA route (`EINVAL`), in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteError(pub String);

impl fmt::Display for RouteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RouteError {}

/// The kernel's rules for an ILA route (`ila_build_state()`): with `use-format` the prefix
/// must cover the locator and the identifier's type field (at least /67) and that type must
/// be `luid`; a type given explicitly must be `luid` or `use-format`; and `neutral-map` cannot
/// mark a destination whose C-bit is set already.
pub fn validate_route(r: &RouteSpec) -> Result<(), RouteError> {
    let dst = r.dst.network();
    let effective = match r.ident_type {
        IdentType::UseFormat => {
            if r.dst.prefix_len() < 67 {
                return Err(RouteError(format!(
                    "{}: with ident-type use-format the prefix must be at least /67 (the locator and the identifier's type)",
                    r.dst
                )));
            }
            IdentType::of(dst)
        }
        t => t,
    };
    if effective != IdentType::Luid {
        return Err(RouteError(format!(
            "{}: identifier type {} is not supported (only luid)",
            r.dst,
            effective.name()
        )));
    }
    if r.csum_mode == CsumMode::NeutralMap && dst.segments()[4] & super::csum::C_BIT != 0 {
        return Err(RouteError(format!(
            "{}: the C-bit is set in the destination, so neutral-map cannot mark it",
            r.dst
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(s: &str) -> Locator {
        s.parse().expect("locator")
    }

    fn m(lm: &str, l: &str, ifindex: u32) -> Mapping {
        Mapping {
            locator_match: loc(lm),
            locator: loc(l),
            ifindex,
            csum_mode: CsumMode::NoAction,
            ident_type: IdentType::UseFormat,
        }
    }

    #[test]
    fn the_receiving_devices_mapping_wins_over_any_devices() {
        let t = [
            m("2001:db8:ff:1", "2001:db8:1:2", 0),
            m("2001:db8:ff:1", "2001:db8:9:9", 5),
        ];
        let dst: Ipv6Addr = "2001:db8:ff:1:2000::7".parse().expect("addr");
        assert_eq!(
            lookup(&t, dst, 5).map(|m| m.locator),
            Some(loc("2001:db8:9:9"))
        );
        assert_eq!(
            lookup(&t, dst, 6).map(|m| m.locator),
            Some(loc("2001:db8:1:2"))
        );
        let other: Ipv6Addr = "2001:db8:ff:2:2000::7".parse().expect("addr");
        assert_eq!(lookup(&t, other, 5), None);
        let only_dev = [m("2001:db8:ff:1", "2001:db8:9:9", 5)];
        assert_eq!(lookup(&only_dev, dst, 6), None);
    }

    fn route(dst: &str, ident: IdentType, csum: CsumMode) -> RouteSpec {
        RouteSpec {
            dst: dst.parse().expect("prefix"),
            locator: loc("2001:db8:ff:1"),
            csum_mode: csum,
            ident_type: ident,
            hook_type: HookType::Output,
        }
    }

    #[test]
    fn the_kernels_route_rules() {
        use CsumMode::*;
        use IdentType::*;
        assert!(validate_route(&route("2001:db8:1:2:2000::7/128", UseFormat, NoAction)).is_ok());
        assert!(validate_route(&route("2001:db8:1:2:2000::/67", UseFormat, NoAction)).is_ok());
        let e = validate_route(&route("2001:db8:1:2::/64", UseFormat, NoAction)).expect_err("/64");
        assert!(e.0.contains("/67"), "{e}");
        // identifier type iid (000) through use-format
        let e =
            validate_route(&route("2001:db8:1:2::7/128", UseFormat, NoAction)).expect_err("iid");
        assert!(e.0.contains("iid"), "{e}");
        // luid given explicitly: no /67 needed
        assert!(validate_route(&route("2001:db8:1:2::/64", Luid, AdjustTransport)).is_ok());
        assert!(validate_route(&route("2001:db8:1:2::/64", Iid, NoAction)).is_err());
        // neutral-map and a destination with the C-bit
        let e = validate_route(&route("2001:db8:1:2:3000::7/128", UseFormat, NeutralMap))
            .expect_err("C-bit");
        assert!(e.0.contains("C-bit"), "{e}");
        assert!(validate_route(&route("2001:db8:1:2:2000::7/128", UseFormat, NeutralMap)).is_ok());
    }

    #[test]
    fn names_and_numbers() {
        assert_eq!(
            IdentType::from_u8(IdentType::UseFormat.as_u8()),
            IdentType::UseFormat
        );
        assert_eq!(IdentType::from_name("luid"), Some(IdentType::Luid));
        assert_eq!(
            IdentType::from_name("iid"),
            None,
            "iproute2 takes luid and use-format only"
        );
        assert_eq!(IdentType::Other(9).name(), "unknown");
        let a: Ipv6Addr = "2001:db8:1:2:2000::7".parse().expect("addr");
        assert_eq!(IdentType::of(a), IdentType::Luid);
        assert_eq!(HookType::from_name("input"), Some(HookType::Input));
        assert_eq!(HookType::default(), HookType::Output);
    }
}

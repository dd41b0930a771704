//! The structs of `bpf/include/mpt/ila_abi.h` (the ILA state maps), and their constants.
//!
//! That header is the one definition of the ILA BPF <-> user-space ABI. The structs here are
//! the types libbpf-cargo generates from the compiled state object's BTF
//! ([`crate::skel::ila::ila_state::types`]), named in Rust style and given what user space
//! needs: their bytes and back (`crate::layout`'s `impl_bytes!`), equality and hashing by
//! those bytes (the generated types derive only `Debug`, `Default`, `Copy`, `Clone`), and the
//! conversions to and from the model (`mpt_model::ila`) below. None is mirrored by hand: the
//! header has no `__be*` field (locators and addresses are byte arrays, network order, in BTF
//! and in the generated types alike; every other field is host order).
//!
//! `#define`d constants and `enum ila_reason` (used by no map) are not in BTF: they are
//! written here and checked against the header's text by `tests/abi_btf.rs`. The layout is
//! checked at compile time against the header's numbers and the BTF type ([`crate::layout`]),
//! by `tests/abi_btf.rs` at test time, and by the header's own static asserts. Any layout
//! change bumps [`ABI_VERSION`] (`ILA_ABI_VERSION`).

use mpt_model::ila::{CsumMode, HookType, IdentType, Locator, Mapping, RouteSpec};

use crate::layout::{assert_layout, impl_bytes, impl_bytes_eq};
use crate::skel::ila::ila_state::types as btf;

/// `ILA_ABI_VERSION`.
pub const ABI_VERSION: u32 = 4;
/// `ILA_META_F_DEV_MAPPINGS`: the mappings may include one for a single receiving device.
pub const META_F_DEV_MAPPINGS: u32 = 1;
/// `ILA_META_F_INPUT_ROUTES`: the routes may include one of hook type input.
pub const META_F_INPUT_ROUTES: u32 = 2;
/// `ILA_META_F_OUTPUT_ROUTES`: the routes may include one of hook type output.
pub const META_F_OUTPUT_ROUTES: u32 = 4;
/// `ILA_MAX_MAPPINGS`: the most mappings the state holds (its growable maps grow up to it).
pub const MAX_MAPPINGS: u32 = 1 << 20;
/// `ILA_MAX_ROUTES`.
pub const MAX_ROUTES: u32 = 1 << 16;
/// `ILA_TABLE_START`: the growable maps' capacity when the state is created.
pub const TABLE_START: u32 = 1 << 12;
/// `ILA_STATS_SLOTS`: slots of `ila_slot_stats` (slot 0: none).
pub const STATS_SLOTS: u32 = 8192;

/// `struct ila_meta`: the single value (key 0) of `ila_meta`. `abi_version` (`ILA_ABI_VERSION`
/// of the writer) stays the first field forever; `flags` holds `META_F_*` (which kinds of
/// entries the tables may hold); `netns_cookie` is the owning namespace's.
pub type IlaMeta = btf::ila_meta;

/// `struct ila_xlat_key`: key of `ila_xlat` (and of `ila_xlat_stats`): `locator_match` (the
/// locator a destination must have, network order), `ifindex` (the receiving device, 0: any),
/// `pad` (0).
pub type IlaXlatKey = btf::ila_xlat_key;

/// `struct ila_xlat_val`: value of `ila_xlat`: `locator` (the locator it gets, network order),
/// `csum_mode` (`ILA_CSUM_*`), `ident_type` (`ILA_ATYPE_*`), `pad` (0), `stats_slot` (its
/// counter in `ila_slot_stats`; 0: in `ila_xlat_stats`).
pub type IlaXlatVal = btf::ila_xlat_val;

/// `struct ila_route_key`: key of the `ila_routes` LPM trie (and of `ila_route_stats`):
/// `prefixlen` (the prefix length), `addr` (the prefix, network order, host bits zero).
pub type IlaRouteKey = btf::ila_route_key;

/// `struct ila_route_val`: value of `ila_routes`: `locator` (the locator destinations get,
/// network order), `csum_mode` (`ILA_CSUM_*`), `ident_type` (`ILA_ATYPE_*`), `hook_type`
/// (`ILA_HOOK_*`), `pad` (0), the route's key repeated as `prefix_len` and `prefix`, and
/// `stats_slot` (its counter in `ila_slot_stats`; 0: in `ila_route_stats`).
pub type IlaRouteVal = btf::ila_route_val;

/// `struct ila_counter`: the per-CPU packet and byte counter of one mapping or route
/// (`packets`, `bytes`).
pub type IlaCounter = btf::ila_counter;

/// `ILA_R_MAX`.
pub const R_MAX: u32 = 7;

/// `enum ila_reason`: what the programs did with each packet they saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// `ILA_R_XLAT_IN`.
    XlatIn = 0,
    /// `ILA_R_ROUTE_OUT`.
    RouteOut = 1,
    /// `ILA_R_ROUTE_IN`.
    RouteIn = 2,
    /// `ILA_R_NO_MATCH`.
    NoMatch = 3,
    /// `ILA_R_NOT_IPV6`.
    NotIpv6 = 4,
    /// `ILA_R_MALFORMED`.
    Malformed = 5,
    /// `ILA_R_NO_L4_CSUM`.
    NoL4Csum = 6,
}

impl Reason {
    /// Every reason, in index order.
    pub const ALL: [Reason; 7] = [
        Reason::XlatIn,
        Reason::RouteOut,
        Reason::RouteIn,
        Reason::NoMatch,
        Reason::NotIpv6,
        Reason::Malformed,
        Reason::NoL4Csum,
    ];
    /// The operator's word.
    pub const fn name(self) -> &'static str {
        match self {
            Reason::XlatIn => "translated-in",
            Reason::RouteOut => "translated-out",
            Reason::RouteIn => "translated-forwarded",
            Reason::NoMatch => "no-match",
            Reason::NotIpv6 => "not-ipv6",
            Reason::Malformed => "malformed",
            Reason::NoL4Csum => "no-transport-checksum",
        }
    }
}

assert_layout!(IlaMeta, btf::ila_meta, 16, {
    abi_version: u32 = 0,
    flags: u32 = 4,
    netns_cookie: u64 = 8,
});
assert_layout!(IlaXlatKey, btf::ila_xlat_key, 16, {
    locator_match: [u8; 8] = 0,
    ifindex: u32 = 8,
    pad: u32 = 12,
});
assert_layout!(IlaXlatVal, btf::ila_xlat_val, 16, {
    locator: [u8; 8] = 0,
    csum_mode: u8 = 8,
    ident_type: u8 = 9,
    pad: [u8; 2] = 10,
    stats_slot: u32 = 12,
});
assert_layout!(IlaRouteKey, btf::ila_route_key, 20, {
    prefixlen: u32 = 0,
    addr: [u8; 16] = 4,
});
assert_layout!(IlaRouteVal, btf::ila_route_val, 36, {
    locator: [u8; 8] = 0,
    csum_mode: u8 = 8,
    ident_type: u8 = 9,
    hook_type: u8 = 10,
    pad: u8 = 11,
    prefix_len: u32 = 12,
    prefix: [u8; 16] = 16,
    stats_slot: u32 = 32,
});
assert_layout!(IlaCounter, btf::ila_counter, 16, {
    packets: u64 = 0,
    bytes: u64 = 8,
});

const _: () = {
    assert!(Reason::ALL.len() == R_MAX as usize);
    let mut i = 0;
    while i < Reason::ALL.len() {
        assert!(Reason::ALL[i] as usize == i);
        i += 1;
    }
};

impl_bytes!(IlaMeta {
    abi_version: u32,
    flags: u32,
    netns_cookie: u64,
});
impl_bytes!(IlaXlatKey {
    locator_match: bytes,
    ifindex: u32,
    pad: u32,
});
impl_bytes!(IlaXlatVal {
    locator: bytes,
    csum_mode: u8,
    ident_type: u8,
    pad: bytes,
    stats_slot: u32,
});
impl_bytes!(IlaRouteKey {
    prefixlen: u32,
    addr: bytes,
});
impl_bytes!(IlaRouteVal {
    locator: bytes,
    csum_mode: u8,
    ident_type: u8,
    hook_type: u8,
    pad: u8,
    prefix_len: u32,
    prefix: bytes,
    stats_slot: u32,
});
impl_bytes!(IlaCounter {
    packets: u64,
    bytes: u64,
});

impl_bytes_eq!(
    IlaMeta,
    IlaXlatKey,
    IlaXlatVal,
    IlaRouteKey,
    IlaRouteVal,
    IlaCounter
);

impl IlaXlatKey {
    /// The key of a mapping.
    pub fn of(m: &Mapping) -> IlaXlatKey {
        IlaXlatKey {
            locator_match: m.locator_match.0,
            ifindex: m.ifindex,
            pad: 0,
        }
    }
}

impl IlaXlatVal {
    /// The value of a mapping.
    pub fn of(m: &Mapping) -> IlaXlatVal {
        IlaXlatVal {
            locator: m.locator.0,
            csum_mode: m.csum_mode.as_u8(),
            ident_type: m.ident_type.as_u8(),
            pad: [0; 2],
            stats_slot: 0,
        }
    }
    /// The mapping of a key and a value; `None` for a checksum mode this version does not know.
    pub fn mapping(&self, k: &IlaXlatKey) -> Option<Mapping> {
        Some(Mapping {
            locator_match: Locator(k.locator_match),
            locator: Locator(self.locator),
            ifindex: k.ifindex,
            csum_mode: CsumMode::from_u8(self.csum_mode)?,
            ident_type: IdentType::from_u8(self.ident_type),
        })
    }
}

impl IlaRouteKey {
    /// The key of an ILA route's prefix.
    pub fn of(dst: ipnet::Ipv6Net) -> IlaRouteKey {
        IlaRouteKey {
            prefixlen: u32::from(dst.prefix_len()),
            addr: dst.trunc().network().octets(),
        }
    }
}

impl IlaRouteVal {
    /// The value of an ILA route.
    pub fn of(r: &RouteSpec) -> IlaRouteVal {
        let k = IlaRouteKey::of(r.dst);
        IlaRouteVal {
            locator: r.locator.0,
            csum_mode: r.csum_mode.as_u8(),
            ident_type: r.ident_type.as_u8(),
            hook_type: r.hook_type.as_u8(),
            pad: 0,
            prefix_len: k.prefixlen,
            prefix: k.addr,
            stats_slot: 0,
        }
    }
    /// The route it describes; `None` for numbers this version does not know.
    pub fn route(&self) -> Option<RouteSpec> {
        let len = u8::try_from(self.prefix_len).ok()?;
        Some(RouteSpec {
            dst: ipnet::Ipv6Net::new(std::net::Ipv6Addr::from(self.prefix), len).ok()?,
            locator: Locator(self.locator),
            csum_mode: CsumMode::from_u8(self.csum_mode)?,
            ident_type: IdentType::from_u8(self.ident_type),
            hook_type: HookType::from_u8(self.hook_type)?,
        })
    }
}

/// The sum of a per-CPU counter's copies.
pub fn sum_percpu(values: &[Vec<u8>]) -> IlaCounter {
    values
        .iter()
        .filter_map(|v| IlaCounter::from_bytes(v.get(..IlaCounter::SIZE)?))
        .fold(IlaCounter::default(), |a, c| IlaCounter {
            packets: a.packets + c.packets,
            bytes: a.bytes + c.bytes,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mappings_and_routes_round_trip_through_their_map_entries() {
        let m = Mapping {
            locator_match: "2001:db8:ff:1".parse().expect("loc"),
            locator: "2001:db8:1:2".parse().expect("loc"),
            ifindex: 7,
            csum_mode: CsumMode::NeutralMapAuto,
            ident_type: IdentType::Luid,
        };
        let (k, v) = (IlaXlatKey::of(&m), IlaXlatVal::of(&m));
        assert_eq!(k.locator_match, [0x20, 0x01, 0x0d, 0xb8, 0, 0xff, 0, 1]);
        let back_k = IlaXlatKey::from_bytes(k.as_bytes()).expect("key");
        let back_v = IlaXlatVal::from_bytes(v.as_bytes()).expect("value");
        assert_eq!(back_v.mapping(&back_k), Some(m));
        let r = RouteSpec {
            dst: "2001:db8:1:2:2000::/67".parse().expect("prefix"),
            locator: "2001:db8:ff:1".parse().expect("loc"),
            csum_mode: CsumMode::AdjustTransport,
            ident_type: IdentType::UseFormat,
            hook_type: HookType::Input,
        };
        let rv = IlaRouteVal::of(&r);
        assert_eq!(rv.prefix_len, 67);
        assert_eq!(
            IlaRouteVal::from_bytes(rv.as_bytes()).and_then(|v| v.route()),
            Some(r)
        );
    }
}

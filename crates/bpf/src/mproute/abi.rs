//! The structs of `bpf/include/mpt/state_abi.h` (the state maps) and
//! `bpf/include/mpt/dp_abi.h` (the dataplane maps), and their constants.
//!
//! Those headers are the single definition of the BPF <-> user-space ABI. The structs here
//! are the types libbpf-cargo generates from the compiled object's BTF
//! ([`crate::skel::mproute::state::types`]), named in Rust style and given what user space
//! needs: their bytes and back (`crate::layout`'s `impl_bytes!`), equality and hashing by
//! those bytes (the generated types derive only `Debug`, `Default`, `Copy`, `Clone`), and the
//! helpers below. Two exceptions are written by hand, checked against BTF like the rest:
//! [`MptLpm4Key`] and [`MptLpm6Key`], whose `__be32 table_be` BTF knows only as a `u32` (a
//! byte array here, so that its byte order cannot be mistaken).
//!
//! `#define`d constants are not in BTF: they are written here and checked where possible
//! (the map sizes by `tests/abi_btf.rs`, the algorithm numbers against `mpt_model`).
//! `enum mpt_reason` is used by no map, so not in BTF either: [`Reason`] is checked against
//! the header's text by `tests/abi_btf.rs`. Three independent checks keep the layout in sync:
//!
//! * the `const` asserts below (sizes, offsets, no padding) against the header's numbers —
//!   a mismatch fails compilation;
//! * `tests/abi_btf.rs`, which reads the compiled object's BTF at test time;
//! * the `_Static_assert`s in the headers (BPF and host C compilers).
//!
//! Any layout change must bump [`ABI_VERSION`] (`MPT_ABI_VERSION`).
//!
//! All multi-byte integers are in host byte order; fields in network byte
//! order are byte arrays whose names say so (`*_be`, addresses, gateways).

use crate::layout::{assert_layout, impl_bytes, impl_bytes_eq};

use crate::skel::mproute::state::types as btf;

/// `MPT_ABI_VERSION`: layout version of every struct in this module.
pub const ABI_VERSION: u32 = 11;
/// `MPT_MAX_ROUTES`: the most routes the state holds (the per-route maps grow up to it).
pub const MAX_ROUTES: u32 = 1 << 20;
/// `MPT_ROUTES_START`: the per-route maps' capacity when the state is created.
pub const ROUTES_START: u32 = 1 << 12;

/// `MPT_ALGO_L3_HASH`.
pub const ALGO_L3_HASH: u8 = 0;
/// `MPT_ALGO_PER_PACKET`.
pub const ALGO_PER_PACKET: u8 = 1;
/// `MPT_ALGO_DRR`.
pub const ALGO_DRR: u8 = 2;
/// `MPT_ALGO_RANDOM`.
pub const ALGO_RANDOM: u8 = 3;
/// `MPT_ALGO_WRANDOM`.
pub const ALGO_WRANDOM: u8 = 4;
/// `MPT_ALGO_L4_HASH`.
pub const ALGO_L4_HASH: u8 = 5;

/// `AF_INET`, the value of `MptRouteKey::family` for IPv4.
pub const AF_INET: u8 = 2;
/// `AF_INET6`, the value of `MptRouteKey::family` for IPv6.
pub const AF_INET6: u8 = 10;

/// `struct mpt_meta`: the single value (key 0) of the `mpt_meta` array map. `abi_version`
/// (`MPT_ABI_VERSION` of the writer) must stay the first field forever; `hash_seed` seeds the
/// hash based algorithms; `netns_cookie` is the owning namespace's; `flags` holds `META_F_*`;
/// with [`META_F_FIB4_GEN`], `fib4_gen` is the IPv4 FIB generation (`net->ipv4.rt_genid`) at
/// which the routes flagged [`DPR_F_VERIFIED`] were verified.
pub type MptMeta = btf::mpt_meta;

/// `MPT_META_F_FIB4_GEN`: `MptMeta::fib4_gen` is set.
pub const META_F_FIB4_GEN: u32 = 0x4;
/// `MPT_DPR_F_VERIFIED`: a flag of `MptDpRoute::flags`: at generation `MptMeta::fib4_gen`
/// the kernel's FIB answers with this route for every address the LPM trie gives it for.
pub const DPR_F_VERIFIED: u8 = 0x1;
/// `MPT_DPR_F_FOREIGN`: the LPM entry is a hole, another owner's route inside a managed prefix
/// (the dataplane leaves its destinations to the kernel FIB).
pub const DPR_F_FOREIGN: u8 = 0x2;
/// `MPT_DPR_F_DRIFT`: a managed route whose kernel route is no longer the one mproute installed
/// (gone, or other nexthops): the dataplane leaves its destinations to the kernel FIB.
pub const DPR_F_DRIFT: u8 = 0x4;
/// `MPT_DPR_F_SEED`: the route hashes with `MptDpRoute::seed`, not `MptMeta::hash_seed`.
pub const DPR_F_SEED: u8 = 0x8;
/// `MPT_ROUTE_F_SEED`: a flag of `MptRouteVal::flags`: the route has its own seed.
pub const ROUTE_F_SEED: u8 = 0x1;

/// `struct mpt_route_key`: key of the `mpt_routes` hash map and of the per-route maps.
/// `family` is [`AF_INET`] or [`AF_INET6`], `dst_len` the prefix length, `reserved` must be 0
/// (it is part of the hashed key), `table` and `metric` are in host byte order, `dst_be` is
/// the prefix address in network byte order (IPv4 in the first 4 bytes, the rest zero).
pub type MptRouteKey = btf::mpt_route_key;

/// `struct mpt_route_val`: value of the `mpt_routes` hash map: `algo` (one of the `ALGO_*`
/// constants), `flags` (0 for now), `nh_count` (nexthops of the group), `protocol`
/// (`rtm_protocol` the route was installed with, 0: not recorded), `nh_group` (kernel nexthop
/// group id).
pub type MptRouteVal = btf::mpt_route_val;

// ---- dataplane (dp_abi.h) ---------------------------------------------------

/// `MPT_MAX_NH`: most nexthops of one route (= `mpt_model::MAX_NEXTHOPS`).
pub const MAX_NH: usize = 32;
/// `MPT_MAX_DP_ROUTES`: `max_entries` of the LPM tries and per-route maps
/// (`mpt_lpm4`, `mpt_lpm6`, `mpt_stats`, `mpt_pcpu`).
pub const MAX_DP_ROUTES: u32 = 1 << 20;
/// `MPT_MAX_GROUPS`: the most nexthop groups `mpt_groups` grows to.
pub const MAX_GROUPS: u32 = 1 << 20;
/// `MPT_GROUPS_START`: `mpt_groups`'s capacity when the state is created.
pub const GROUPS_START: u32 = 1 << 10;
/// `MPT_STATS_SLOTS`: `max_entries` of the `mpt_slot_stats` per-CPU array; slot 0 means none.
pub const STATS_SLOTS: u32 = 256;
/// `MPT_NH_F_ONLINK` (`RTNH_F_ONLINK`): a flag of `MptNh::flags`.
pub const NH_F_ONLINK: u8 = 0x04;

/// `struct mpt_lpm4_key`: key of the `mpt_lpm4` LPM trie.
///
/// `prefixlen` counts the 32 bits of `table_be` plus the prefix length, so a
/// lookup with `prefixlen = 32 + 32` matches only routes of that table.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MptLpm4Key {
    /// 32 + prefix length.
    pub prefixlen: u32,
    /// Routing table id, network byte order.
    pub table_be: [u8; 4],
    /// Address, network byte order.
    pub addr: [u8; 4],
}

/// `struct mpt_lpm6_key`: key of the `mpt_lpm6` LPM trie (see [`MptLpm4Key`]).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MptLpm6Key {
    /// 32 + prefix length.
    pub prefixlen: u32,
    /// Routing table id, network byte order.
    pub table_be: [u8; 4],
    /// Address, network byte order.
    pub addr: [u8; 16],
}

/// `struct mpt_dp_route`: value of both LPM tries, a managed route as the dataplane sees it:
/// `id` (the route, key of the per-route maps `mpt_stats`, `mpt_pcpu`), `algo` (an `ALGO_*` or
/// `DP_ALGO_*` constant), `flags` (`DPR_F_*` bits), `stats_slot` (index of its counters in
/// `mpt_slot_stats`; 0: none, counted in `mpt_stats`), `group` (key of `mpt_groups`).
pub type MptDpRoute = btf::mpt_dp_route;

/// `struct mpt_nh`: one nexthop of a group: `ifindex` (egress device), `upper_bound`
/// (hash-threshold bound over the usable nexthops; -1 = unusable), `cum_weight` (sum of the
/// weights of nexthops `0..=this one`), `weight` (1..=256), `flags` (`NH_F_*`), `family`
/// ([`AF_INET`] / [`AF_INET6`] of `gw`; 0 = device route), `gw` (gateway, network byte order;
/// IPv4 in the first 4 bytes).
pub type MptNh = btf::mpt_nh;

/// `struct mpt_group`: value of `mpt_groups`, the nexthops of one or more routes: `nh_count`
/// valid entries of `nh` whose weights sum to `total_weight`.
pub type MptGroup = btf::mpt_group;

/// `MPT_DP_ALGO_L3_RES`: `MptDpRoute::algo` of a resilient l3-hash route.
pub const DP_ALGO_L3_RES: u8 = 6;
/// `MPT_DP_ALGO_L4_RES`: `MptDpRoute::algo` of a resilient l4-hash route.
pub const DP_ALGO_L4_RES: u8 = 7;
/// `MPT_MAX_BUCKETS`: most buckets of a resilient table.
pub const MAX_BUCKETS: usize = 4096;
/// `MPT_MAX_RES_ROUTES`: the most resilient tables `mpt_res` grows to.
pub const MAX_RES_ROUTES: u32 = 1 << 16;
/// `MPT_RES_START`: `mpt_res`'s capacity when the state is created.
pub const RES_START: u32 = 1 << 8;

/// `struct mpt_res_table`: value of `mpt_res` (key: [`MptRouteKey`]), a resilient route's
/// bucket table: `n_buckets` (1..=[`MAX_BUCKETS`]), `flags` ([`RES_F_CONSISTENT`]), `idle_timer_s` (seconds
/// a bucket must be idle before a rebalance moves it), `nh` (bucket -> index into the route's
/// group), `used_s` (bucket -> CLOCK_MONOTONIC_COARSE second of its last packet, 0: never;
/// written by the dataplane). Only the first `n_buckets` entries of `nh` and `used_s` count.
pub type MptResTable = btf::mpt_res_table;
/// `MPT_RES_F_CONSISTENT`: a flag of `MptResTable::flags`: a consistent (Maglev) table,
/// computed from the route alone; never rebalanced by idle time.
pub const RES_F_CONSISTENT: u16 = 0x1;

impl MptResTable {
    /// The meaningful part of `nh`.
    pub fn buckets(&self) -> &[u8] {
        &self.nh[..usize::from(self.n_buckets).min(MAX_BUCKETS)]
    }
}

/// `struct mpt_counter`: a packet and byte counter (`packets`, `bytes`).
pub type MptCounter = btf::mpt_counter;

/// `struct mpt_route_stats`: per-CPU value of `mpt_stats` (key: [`MptRouteKey`]) and of
/// `mpt_slot_stats`: `route` (everything forwarded for the route), `nh` (per nexthop, indexed
/// like the group's).
pub type MptRouteStats = btf::mpt_route_stats;

/// `struct mpt_pcpu_state`: per-CPU value of `mpt_pcpu` (key: [`MptRouteKey`]), the
/// round-robin and DRR state: `rr` (per-packet: packets seen on this CPU), `drr_idx` (drr:
/// nexthop being served), `drr_deficit` (drr: bytes each nexthop may still send).
pub type MptPcpuState = btf::mpt_pcpu_state;

/// `MPT_R_MAX`: number of [`Reason`]s, `max_entries` of `mpt_reasons`.
pub const R_MAX: u32 = 18;

/// `enum mpt_reason`: why a packet went to the stack; the index of the
/// per-CPU `mpt_reasons` array (`u64` packet counters). Index 0 counts the
/// packets the dataplane redirected instead.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// `MPT_R_REDIRECTED`: forwarded by the dataplane.
    Redirected = 0,
    /// `MPT_R_NOT_IP`: not IPv4/IPv6.
    NotIp = 1,
    /// `MPT_R_MALFORMED`: truncated or inconsistent headers.
    Malformed = 2,
    /// `MPT_R_NO_ROUTE`: no managed route.
    NoRoute = 3,
    /// `MPT_R_TTL`: TTL / hop limit <= 1.
    Ttl = 4,
    /// `MPT_R_IP_OPTIONS`: IPv4 options.
    IpOptions = 5,
    /// `MPT_R_IPV6_EXT`: IPv6 extension headers.
    Ipv6Ext = 6,
    /// `MPT_R_LOCAL`: for this host, or not forwarded by the FIB.
    Local = 7,
    /// `MPT_R_FRAG_NEEDED`: larger than the egress MTU.
    FragNeeded = 8,
    /// `MPT_R_NO_NEIGH`: neighbour unresolved (XDP).
    NoNeigh = 9,
    /// `MPT_R_FWD_DISABLED`: forwarding disabled on the ingress device.
    FwdDisabled = 10,
    /// `MPT_R_FIB_OTHER`: blackhole, unreachable, prohibit, other FIB answers.
    FibOther = 11,
    /// `MPT_R_NO_NEXTHOP`: no usable nexthop.
    NoNexthop = 12,
    /// `MPT_R_VLAN`: VLAN tag could not be removed.
    Vlan = 13,
    /// `MPT_R_L4_CSUM`: XDP saw a TCP/UDP checksum that is not complete (a local stack's
    /// `CHECKSUM_PARTIAL` packet, which an XDP redirect would send out broken).
    L4Csum = 14,
    /// `MPT_R_NOT_HOST`: the Ethernet destination is not the ingress device's own address
    /// (another host's, broadcast, multicast): the kernel forwards only frames sent to it.
    NotHost = 15,
    /// `MPT_R_DROPPED`: of the packets XDP redirected, those the kernel then failed to deliver
    /// (redirect errors, frames a target device did not take); counted by `bpf/mproute/drops.bpf.c`.
    Dropped = 16,
    /// `MPT_R_NEIGH_CHECK`: XDP handed the packet to the kernel's neighbour output instead of
    /// redirecting it, once a second per neighbour, so that the kernel keeps the neighbour's
    /// state (a STALE entry is confirmed or learns a changed address).
    NeighCheck = 17,
}

impl Reason {
    /// Every reason, in index order (`ALL[i] as u32 == i`).
    pub const ALL: [Reason; R_MAX as usize] = [
        Reason::Redirected,
        Reason::NotIp,
        Reason::Malformed,
        Reason::NoRoute,
        Reason::Ttl,
        Reason::IpOptions,
        Reason::Ipv6Ext,
        Reason::Local,
        Reason::FragNeeded,
        Reason::NoNeigh,
        Reason::FwdDisabled,
        Reason::FibOther,
        Reason::NoNexthop,
        Reason::Vlan,
        Reason::L4Csum,
        Reason::NotHost,
        Reason::Dropped,
        Reason::NeighCheck,
    ];

    /// The `mpt_reasons` index (`MPT_R_*` value).
    pub const fn as_u32(self) -> u32 {
        self as u32
    }

    /// The reason with index `v`, if any.
    pub const fn from_u32(v: u32) -> Option<Reason> {
        if v < R_MAX {
            Some(Self::ALL[v as usize])
        } else {
            None
        }
    }

    /// Short operator-facing name (`MPT_R_FOO_BAR` is `"foo-bar"`).
    pub const fn name(self) -> &'static str {
        match self {
            Reason::Redirected => "redirected",
            Reason::NotIp => "not-ip",
            Reason::Malformed => "malformed",
            Reason::NoRoute => "no-route",
            Reason::Ttl => "ttl",
            Reason::IpOptions => "ip-options",
            Reason::Ipv6Ext => "ipv6-ext",
            Reason::Local => "local",
            Reason::FragNeeded => "frag-needed",
            Reason::NoNeigh => "no-neigh",
            Reason::FwdDisabled => "fwd-disabled",
            Reason::FibOther => "fib-other",
            Reason::NoNexthop => "no-nexthop",
            Reason::Vlan => "vlan",
            Reason::L4Csum => "l4-csum",
            Reason::NotHost => "not-host",
            Reason::Dropped => "dropped",
            Reason::NeighCheck => "neigh-check",
        }
    }
}

impl core::fmt::Display for Reason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

// ---- layout checks (compile time) -----------------------------------------

assert_layout!(MptMeta, btf::mpt_meta, 24, {
    abi_version: u32 = 0,
    hash_seed: u32 = 4,
    netns_cookie: u64 = 8,
    flags: u32 = 16,
    fib4_gen: u32 = 20,
});
assert_layout!(MptRouteKey, btf::mpt_route_key, 28, {
    family: u8 = 0,
    dst_len: u8 = 1,
    reserved: u16 = 2,
    table: u32 = 4,
    metric: u32 = 8,
    dst_be: [u8; 16] = 12,
});
assert_layout!(MptRouteVal, btf::mpt_route_val, 16, {
    algo: u8 = 0,
    flags: u8 = 1,
    nh_count: u8 = 2,
    protocol: u8 = 3,
    nh_group: u32 = 4,
    hash_fields: u16 = 8,
    reserved: u16 = 10,
    seed: u32 = 12,
});

assert_layout!(MptLpm4Key, btf::mpt_lpm4_key, 12, {
    prefixlen: u32 = 0,
    table_be: [u8; 4] = 4,
    addr: [u8; 4] = 8,
});
assert_layout!(MptLpm6Key, btf::mpt_lpm6_key, 24, {
    prefixlen: u32 = 0,
    table_be: [u8; 4] = 4,
    addr: [u8; 16] = 8,
});
assert_layout!(MptDpRoute, btf::mpt_dp_route, 44, {
    id: MptRouteKey = 0,
    algo: u8 = 28,
    flags: u8 = 29,
    stats_slot: u16 = 30,
    group: u32 = 32,
    hash_fields: u16 = 36,
    reserved: u16 = 38,
    seed: u32 = 40,
});
assert_layout!(MptNh, btf::mpt_nh, 32, {
    ifindex: u32 = 0,
    upper_bound: i32 = 4,
    cum_weight: u32 = 8,
    weight: u16 = 12,
    flags: u8 = 14,
    family: u8 = 15,
    gw: [u8; 16] = 16,
});
assert_layout!(MptGroup, btf::mpt_group, 8 + 32 * MAX_NH, {
    nh_count: u32 = 0,
    total_weight: u32 = 4,
    nh: [MptNh; MAX_NH] = 8,
});
assert_layout!(MptResTable, btf::mpt_res_table, 8 + 5 * MAX_BUCKETS, {
    n_buckets: u16 = 0,
    flags: u16 = 2,
    idle_timer_s: u32 = 4,
    nh: [u8; MAX_BUCKETS] = 8,
    used_s: [u32; MAX_BUCKETS] = 8 + MAX_BUCKETS,
});
assert_layout!(MptCounter, btf::mpt_counter, 16, {
    packets: u64 = 0,
    bytes: u64 = 8,
});
assert_layout!(MptRouteStats, btf::mpt_route_stats, 16 * (1 + MAX_NH), {
    route: MptCounter = 0,
    nh: [MptCounter; MAX_NH] = 16,
});
assert_layout!(MptPcpuState, btf::mpt_pcpu_state, 8 + 4 * MAX_NH, {
    rr: u32 = 0,
    drr_idx: u32 = 4,
    drr_deficit: [i32; MAX_NH] = 8,
});

// MPT_MAX_NH is mpt_model's limit; Reason::ALL is in index order.
const _: () = {
    assert!(MAX_NH == mpt_model::MAX_NEXTHOPS);
    assert!(Reason::ALL.len() == R_MAX as usize);
    let mut i = 0;
    while i < Reason::ALL.len() {
        assert!(Reason::ALL[i] as usize == i);
        i += 1;
    }
};

// The algorithm numbers are also the wire values of mpt_model::Algo.
const _: () = {
    use mpt_model::Algo;
    assert!(Algo::L3Hash.as_u32() == ALGO_L3_HASH as u32);
    assert!(Algo::PerPacket.as_u32() == ALGO_PER_PACKET as u32);
    assert!(Algo::Drr.as_u32() == ALGO_DRR as u32);
    assert!(Algo::Random.as_u32() == ALGO_RANDOM as u32);
    assert!(Algo::WRandom.as_u32() == ALGO_WRANDOM as u32);
    assert!(Algo::L4Hash.as_u32() == ALGO_L4_HASH as u32);
};

impl_bytes!(MptMeta {
    abi_version: u32,
    hash_seed: u32,
    netns_cookie: u64,
    flags: u32,
    fib4_gen: u32,
});
impl_bytes!(MptRouteKey {
    family: u8,
    dst_len: u8,
    reserved: u16,
    table: u32,
    metric: u32,
    dst_be: bytes,
});
impl_bytes!(MptRouteVal {
    algo: u8,
    flags: u8,
    nh_count: u8,
    protocol: u8,
    nh_group: u32,
    hash_fields: u16,
    reserved: u16,
    seed: u32,
});

impl_bytes!(MptLpm4Key {
    prefixlen: u32,
    table_be: bytes,
    addr: bytes,
});
impl_bytes!(MptLpm6Key {
    prefixlen: u32,
    table_be: bytes,
    addr: bytes,
});
impl_bytes!(MptDpRoute {
    id: struct,
    algo: u8,
    flags: u8,
    stats_slot: u16,
    group: u32,
    hash_fields: u16,
    reserved: u16,
    seed: u32,
});
impl_bytes!(MptNh {
    ifindex: u32,
    upper_bound: i32,
    cum_weight: u32,
    weight: u16,
    flags: u8,
    family: u8,
    gw: bytes,
});
impl_bytes!(MptResTable {
    n_buckets: u16,
    flags: u16,
    idle_timer_s: u32,
    nh: bytes,
    used_s: u32s,
});
impl_bytes!(MptGroup {
    nh_count: u32,
    total_weight: u32,
    nh: array,
});
impl_bytes!(MptCounter {
    packets: u64,
    bytes: u64,
});
impl_bytes!(MptRouteStats {
    route: struct,
    nh: array,
});
impl_bytes!(MptPcpuState {
    rr: u32,
    drr_idx: u32,
    drr_deficit: i32s,
});

impl_bytes_eq!(
    MptMeta,
    MptRouteKey,
    MptRouteVal,
    MptDpRoute,
    MptNh,
    MptGroup,
    MptResTable,
    MptCounter,
    MptRouteStats,
    MptPcpuState,
);

// ---- helpers ------------------------------------------------------------------

impl MptMeta {
    /// Metadata for the current ABI, with `flags` and `fib4_gen` zero.
    pub const fn new(hash_seed: u32, netns_cookie: u64) -> Self {
        Self {
            abi_version: ABI_VERSION,
            hash_seed,
            netns_cookie,
            flags: 0,
            fib4_gen: 0,
        }
    }
}

impl MptRouteKey {
    /// The key of route `k` (the prefix's network address: host bits never reach the map).
    pub fn of(k: &mpt_model::RouteKey) -> Self {
        let mut dst_be = [0u8; 16];
        match k.dst.network() {
            std::net::IpAddr::V4(a) => dst_be[..4].copy_from_slice(&a.octets()),
            std::net::IpAddr::V6(a) => dst_be.copy_from_slice(&a.octets()),
        }
        MptRouteKey {
            family: k.family().af(),
            dst_len: k.dst.prefix_len(),
            reserved: 0,
            table: k.table,
            metric: k.metric,
            dst_be,
        }
    }

    /// The route this key names; `None` if it is not a valid route identity (a family
    /// other than [`AF_INET`] / [`AF_INET6`], a prefix length beyond the address).
    pub fn route_key(&self) -> Option<mpt_model::RouteKey> {
        let addr = match mpt_model::Family::from_af(self.family)? {
            mpt_model::Family::V4 => {
                std::net::IpAddr::from(<[u8; 4]>::try_from(&self.dst_be[..4]).ok()?)
            }
            mpt_model::Family::V6 => std::net::IpAddr::from(self.dst_be),
        };
        Some(mpt_model::RouteKey {
            dst: ipnet::IpNet::new(addr, self.dst_len).ok()?,
            table: self.table,
            metric: self.metric,
        })
    }
}

impl MptLpm4Key {
    /// The key of `table`'s route `addr/prefix_len` (`prefix_len` <= 32;
    /// 32 for a lookup of the address itself).
    pub const fn new(table: u32, prefix_len: u8, addr: [u8; 4]) -> Self {
        Self {
            prefixlen: 32 + prefix_len as u32,
            table_be: table.to_be_bytes(),
            addr,
        }
    }
}

impl MptLpm6Key {
    /// The key of `table`'s route `addr/prefix_len` (`prefix_len` <= 128;
    /// 128 for a lookup of the address itself).
    pub const fn new(table: u32, prefix_len: u8, addr: [u8; 16]) -> Self {
        Self {
            prefixlen: 32 + prefix_len as u32,
            table_be: table.to_be_bytes(),
            addr,
        }
    }
}

impl MptNh {
    /// Its gateway (`None`: a device route).
    pub fn gateway(&self) -> Option<std::net::IpAddr> {
        let g = self.gw;
        match self.family {
            AF_INET => Some(std::net::IpAddr::from([g[0], g[1], g[2], g[3]])),
            AF_INET6 => Some(std::net::IpAddr::from(g)),
            _ => None,
        }
    }

    /// All fields zero.
    pub const fn zeroed() -> Self {
        Self {
            ifindex: 0,
            upper_bound: 0,
            cum_weight: 0,
            weight: 0,
            flags: 0,
            family: 0,
            gw: [0; 16],
        }
    }
}

impl MptGroup {
    /// All fields zero (no nexthops); the same as `Default`.
    pub const fn zeroed() -> Self {
        Self {
            nh_count: 0,
            total_weight: 0,
            nh: [MptNh::zeroed(); MAX_NH],
        }
    }

    /// The valid nexthops, `nh[..nh_count]` (clamped to [`MAX_NH`]).
    pub fn nexthops(&self) -> &[MptNh] {
        let n = usize::try_from(self.nh_count).map_or(MAX_NH, |n| n.min(MAX_NH));
        &self.nh[..n]
    }
}

impl MptCounter {
    /// Zero packets, zero bytes.
    pub const fn zeroed() -> Self {
        Self {
            packets: 0,
            bytes: 0,
        }
    }

    /// Adds `other` (wrapping, like the kernel's counters).
    pub fn add(&mut self, other: &MptCounter) {
        self.packets = self.packets.wrapping_add(other.packets);
        self.bytes = self.bytes.wrapping_add(other.bytes);
    }
}

impl MptRouteStats {
    /// All counters zero; the same as `Default`.
    pub const fn zeroed() -> Self {
        Self {
            route: MptCounter::zeroed(),
            nh: [MptCounter::zeroed(); MAX_NH],
        }
    }

    /// Adds every counter of `other` (wrapping).
    pub fn add(&mut self, other: &MptRouteStats) {
        self.route.add(&other.route);
        for (a, b) in self.nh.iter_mut().zip(other.nh.iter()) {
            a.add(b);
        }
    }

    /// The sum of the per-CPU values of one `mpt_stats` entry, as a per-CPU
    /// map lookup returns them (one value per possible CPU). `None` if any
    /// value is not exactly [`Self::SIZE`] bytes; no values sum to zero.
    pub fn sum_percpu(values: &[Vec<u8>]) -> Option<MptRouteStats> {
        values.iter().try_fold(Self::zeroed(), |mut sum, v| {
            sum.add(&Self::from_bytes(v)?);
            Some(sum)
        })
    }
}

/// The sum of the per-CPU `u64` values of one `mpt_reasons` entry (wrapping).
/// `None` if any value is not exactly 8 bytes; no values sum to zero.
pub fn sum_percpu_u64(values: &[Vec<u8>]) -> Option<u64> {
    values.iter().try_fold(0u64, |sum, v| {
        let b: [u8; 8] = v.as_slice().try_into().ok()?;
        Some(sum.wrapping_add(u64::from_ne_bytes(b)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> MptMeta {
        MptMeta {
            abi_version: ABI_VERSION,
            hash_seed: 0xdead_beef,
            netns_cookie: 0x0102_0304_0506_0708,
            flags: 0x11,
            fib4_gen: 0x2233_4455,
        }
    }

    fn key() -> MptRouteKey {
        let mut dst_be = [0u8; 16];
        dst_be[..4].copy_from_slice(&[192, 0, 2, 0]);
        MptRouteKey {
            family: AF_INET,
            dst_len: 24,
            reserved: 0xa55a,
            table: 254,
            metric: 1024,
            dst_be,
        }
    }

    fn val() -> MptRouteVal {
        MptRouteVal {
            algo: ALGO_WRANDOM,
            flags: 0x80,
            nh_count: 3,
            protocol: 7,
            nh_group: 0x1234_5678,
            hash_fields: 0x34,
            reserved: 0,
            seed: 0x0a0b_0c0d,
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(MptMeta::SIZE, 24);
        assert_eq!(MptRouteKey::SIZE, 28);
        assert_eq!(MptRouteVal::SIZE, 16);
        assert_eq!(meta().as_bytes().len(), 24);
        assert_eq!(key().as_bytes().len(), 28);
        assert_eq!(val().as_bytes().len(), 16);
    }

    #[test]
    fn round_trips() {
        let m = meta();
        assert_eq!(MptMeta::from_bytes(m.as_bytes()), Some(m));
        let k = key();
        assert_eq!(MptRouteKey::from_bytes(k.as_bytes()), Some(k));
        let v = val();
        assert_eq!(MptRouteVal::from_bytes(v.as_bytes()), Some(v));
        let d = MptRouteKey::default();
        assert_eq!(MptRouteKey::from_bytes(d.as_bytes()), Some(d));
    }

    #[test]
    fn byte_layout_is_native_endian_c_layout() {
        let m = meta().as_bytes().to_vec();
        assert_eq!(m[0..4], ABI_VERSION.to_ne_bytes());
        assert_eq!(m[4..8], 0xdead_beef_u32.to_ne_bytes());
        assert_eq!(m[8..16], 0x0102_0304_0506_0708_u64.to_ne_bytes());
        assert_eq!(m[16..20], 0x11_u32.to_ne_bytes());
        assert_eq!(m[20..24], 0x2233_4455_u32.to_ne_bytes());

        let k = key().as_bytes().to_vec();
        assert_eq!(k[0], AF_INET);
        assert_eq!(k[1], 24);
        assert_eq!(k[2..4], 0xa55a_u16.to_ne_bytes());
        assert_eq!(k[4..8], 254_u32.to_ne_bytes());
        assert_eq!(k[8..12], 1024_u32.to_ne_bytes());
        assert_eq!(k[12..16], [192, 0, 2, 0]);
        assert!(k[16..28].iter().all(|&b| b == 0));

        let v = val().as_bytes().to_vec();
        assert_eq!(v[..4], [ALGO_WRANDOM, 0x80, 3, 7]);
        assert_eq!(v[4..8], 0x1234_5678_u32.to_ne_bytes());
    }

    #[test]
    fn from_bytes_rejects_wrong_lengths() {
        let m = meta();
        let b = m.as_bytes();
        assert_eq!(MptMeta::from_bytes(&b[..23]), None);
        let mut long = b.to_vec();
        long.push(0);
        assert_eq!(MptMeta::from_bytes(&long), None);
        assert_eq!(MptMeta::from_bytes(&[]), None);
        assert_eq!(MptRouteKey::from_bytes(&[0u8; 27]), None);
        assert_eq!(MptRouteKey::from_bytes(&[0u8; 29]), None);
        assert_eq!(MptRouteVal::from_bytes(&[0u8; 15]), None);
        assert_eq!(MptRouteVal::from_bytes(&[0u8; 8]), None);
        assert_eq!(
            MptRouteVal::from_bytes(&[0u8; 16]),
            Some(MptRouteVal::default())
        );
    }

    fn nh(i: u8) -> MptNh {
        MptNh {
            ifindex: 10 + u32::from(i),
            upper_bound: if i % 2 == 0 {
                -1
            } else {
                0x1000 * i32::from(i)
            },
            cum_weight: 7 * u32::from(i),
            weight: 256 - u16::from(i),
            flags: NH_F_ONLINK,
            family: AF_INET6,
            gw: [i; 16],
        }
    }

    fn group() -> MptGroup {
        let mut g = MptGroup {
            nh_count: 3,
            total_weight: 0xabcd,
            ..MptGroup::default()
        };
        for (i, n) in g.nh.iter_mut().enumerate() {
            *n = nh(u8::try_from(i).expect("i < 32"));
        }
        g
    }

    fn stats(scale: u64) -> MptRouteStats {
        let mut s = MptRouteStats {
            route: MptCounter {
                packets: scale,
                bytes: 1500 * scale,
            },
            ..MptRouteStats::zeroed()
        };
        for (i, c) in (0u64..).zip(s.nh.iter_mut()) {
            *c = MptCounter {
                packets: i * scale,
                bytes: i * scale * 100,
            };
        }
        s
    }

    fn dp_route() -> MptDpRoute {
        MptDpRoute {
            id: key(),
            algo: ALGO_DRR,
            flags: 9,
            stats_slot: 0x0302,
            group: 0x0102_0304,
            hash_fields: 0x33,
            reserved: 0,
            seed: 0x1122_3344,
        }
    }

    #[test]
    fn dp_sizes() {
        assert_eq!(MptLpm4Key::SIZE, 12);
        assert_eq!(MptLpm6Key::SIZE, 24);
        assert_eq!(MptDpRoute::SIZE, 44);
        assert_eq!(MptNh::SIZE, 32);
        assert_eq!(MptGroup::SIZE, 8 + 32 * MAX_NH);
        assert_eq!(MptCounter::SIZE, 16);
        assert_eq!(MptRouteStats::SIZE, 16 * 33);
        assert_eq!(MptPcpuState::SIZE, 8 + 4 * MAX_NH);
        assert_eq!(group().as_bytes().len(), MptGroup::SIZE);
        assert_eq!(stats(1).as_bytes().len(), MptRouteStats::SIZE);
    }

    #[test]
    fn dp_round_trips() {
        let k4 = MptLpm4Key::new(254, 24, [192, 0, 2, 0]);
        assert_eq!(MptLpm4Key::from_bytes(k4.as_bytes()), Some(k4));
        let k6 = MptLpm6Key::new(
            1000,
            64,
            [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        );
        assert_eq!(MptLpm6Key::from_bytes(k6.as_bytes()), Some(k6));
        let r = dp_route();
        assert_eq!(MptDpRoute::from_bytes(r.as_bytes()), Some(r));
        let n = nh(5);
        assert_eq!(MptNh::from_bytes(n.as_bytes()), Some(n));
        let g = group();
        assert_eq!(MptGroup::from_bytes(g.as_bytes()), Some(g));
        let s = stats(3);
        assert_eq!(MptRouteStats::from_bytes(s.as_bytes()), Some(s));
        let c = MptCounter {
            packets: 1,
            bytes: u64::MAX,
        };
        assert_eq!(MptCounter::from_bytes(c.as_bytes()), Some(c));
        let mut p = MptPcpuState {
            rr: 1,
            drr_idx: 2,
            drr_deficit: [0; MAX_NH],
        };
        p.drr_deficit[3] = -3;
        p.drr_deficit[MAX_NH - 1] = 4;
        assert_eq!(MptPcpuState::from_bytes(p.as_bytes()), Some(p));
    }

    #[test]
    fn dp_byte_layout_is_native_endian_c_layout() {
        let k4 = MptLpm4Key::new(0x0102_0304, 24, [192, 0, 2, 0]);
        let b = k4.as_bytes();
        assert_eq!(b[0..4], 56_u32.to_ne_bytes());
        assert_eq!(b[4..8], [1, 2, 3, 4]);
        assert_eq!(b[8..12], [192, 0, 2, 0]);

        let k6 = MptLpm6Key::new(254, 128, [0xff; 16]);
        assert_eq!(k6.prefixlen, 160);
        assert_eq!(k6.as_bytes()[4..8], [0, 0, 0, 254]);
        assert_eq!(k6.as_bytes()[8..24], [0xff; 16]);

        let r = dp_route().as_bytes().to_vec();
        assert_eq!(r[..28], *key().as_bytes());
        assert_eq!(r[28..30], [ALGO_DRR, 9]);
        assert_eq!(r[30..32], 0x0302_u16.to_ne_bytes());
        assert_eq!(r[32..36], 0x0102_0304_u32.to_ne_bytes());

        let n = nh(3).as_bytes().to_vec();
        assert_eq!(n[0..4], 13_u32.to_ne_bytes());
        assert_eq!(n[4..8], 0x3000_i32.to_ne_bytes());
        assert_eq!(n[8..12], 21_u32.to_ne_bytes());
        assert_eq!(n[12..14], 253_u16.to_ne_bytes());
        assert_eq!(n[14..16], [NH_F_ONLINK, AF_INET6]);
        assert_eq!(n[16..32], [3; 16]);
        assert_eq!(nh(2).as_bytes()[4..8], (-1_i32).to_ne_bytes());

        let g = group();
        let gb = g.as_bytes();
        assert_eq!(gb[0..4], 3_u32.to_ne_bytes());
        assert_eq!(gb[4..8], 0xabcd_u32.to_ne_bytes());
        for (i, n) in g.nh.iter().enumerate() {
            assert_eq!(gb[8 + 32 * i..8 + 32 * (i + 1)], *n.as_bytes(), "nh[{i}]");
        }

        let s = stats(2);
        let sb = s.as_bytes();
        assert_eq!(sb[0..8], 2_u64.to_ne_bytes());
        assert_eq!(sb[8..16], 3000_u64.to_ne_bytes());
        assert_eq!(sb[16 + 16 * 5..16 + 16 * 5 + 8], 10_u64.to_ne_bytes());
        assert_eq!(sb[16 + 16 * 31 + 8..], 6200_u64.to_ne_bytes());

        let mut p = MptPcpuState {
            rr: 1,
            drr_idx: 2,
            drr_deficit: [0; MAX_NH],
        };
        p.drr_deficit[0] = -3;
        assert_eq!(p.as_bytes()[8..12], (-3_i32).to_ne_bytes());
    }

    #[test]
    fn dp_from_bytes_rejects_wrong_lengths() {
        assert_eq!(MptLpm4Key::from_bytes(&[0; 11]), None);
        assert_eq!(MptLpm6Key::from_bytes(&[0; 25]), None);
        assert_eq!(MptDpRoute::from_bytes(&[0; 43]), None);
        assert_eq!(MptDpRoute::from_bytes(&[0; 36]), None);
        assert_eq!(MptDpRoute::from_bytes(&[0; 28]), None);
        assert_eq!(MptNh::from_bytes(&[0; 33]), None);
        assert_eq!(MptGroup::from_bytes(&[0; 1031]), None);
        assert_eq!(MptGroup::from_bytes(&[0; 1040]), None);
        assert_eq!(MptCounter::from_bytes(&[0; 8]), None);
        assert_eq!(MptRouteStats::from_bytes(&[0; 527]), None);
        assert_eq!(MptPcpuState::from_bytes(&[]), None);
        assert_eq!(MptGroup::from_bytes(&[0; 1032]), Some(MptGroup::zeroed()));
        assert_eq!(
            MptRouteStats::from_bytes(&[0; 528]),
            Some(MptRouteStats::zeroed())
        );
    }

    #[test]
    fn zeroed_is_default() {
        assert_eq!(MptGroup::zeroed(), MptGroup::default());
        assert_eq!(MptNh::zeroed(), MptNh::default());
        assert_eq!(MptCounter::zeroed(), MptCounter::default());
        assert_eq!(MptRouteStats::zeroed(), MptRouteStats::default());
        assert!(MptGroup::zeroed().as_bytes().iter().all(|&b| b == 0));
        assert!(MptRouteStats::zeroed().as_bytes().iter().all(|&b| b == 0));
    }

    #[test]
    fn group_nexthops_is_clamped() {
        let mut g = group();
        assert_eq!(g.nexthops(), &g.nh[..3]);
        g.nh_count = 0;
        assert!(g.nexthops().is_empty());
        g.nh_count = 1000;
        assert_eq!(g.nexthops().len(), MAX_NH);
    }

    #[test]
    fn sum_percpu_adds_every_counter() {
        let per_cpu: Vec<Vec<u8>> = [1, 2, 4]
            .iter()
            .map(|&k| stats(k).as_bytes().to_vec())
            .collect();
        assert_eq!(MptRouteStats::sum_percpu(&per_cpu), Some(stats(7)));
        assert_eq!(
            MptRouteStats::sum_percpu(&[]),
            Some(MptRouteStats::zeroed())
        );
        let mut bad = per_cpu.clone();
        bad[1].pop();
        assert_eq!(MptRouteStats::sum_percpu(&bad), None);

        // Counters wrap like the kernel's instead of panicking.
        let mut big = MptRouteStats::zeroed();
        big.route.packets = u64::MAX;
        let one = stats(1);
        let sum = MptRouteStats::sum_percpu(&[big.as_bytes().to_vec(), one.as_bytes().to_vec()])
            .expect("valid values");
        assert_eq!(sum.route.packets, 0);

        let reasons: Vec<Vec<u8>> = [5u64, 6, 7]
            .iter()
            .map(|v| v.to_ne_bytes().to_vec())
            .collect();
        assert_eq!(sum_percpu_u64(&reasons), Some(18));
        assert_eq!(sum_percpu_u64(&[]), Some(0));
        assert_eq!(sum_percpu_u64(&[vec![0; 4]]), None);
    }

    #[test]
    fn reasons() {
        assert_eq!(Reason::ALL.len(), R_MAX as usize);
        for (i, r) in (0u32..).zip(Reason::ALL) {
            assert_eq!(r.as_u32(), i);
            assert_eq!(Reason::from_u32(i), Some(r));
            assert_eq!(r.to_string(), r.name());
            assert!(
                r.name()
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
                "{}",
                r.name()
            );
        }
        assert_eq!(Reason::from_u32(R_MAX), None);
        let mut names: Vec<_> = Reason::ALL.iter().map(|r| r.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Reason::ALL.len(), "names are unique");
        assert_eq!(Reason::Redirected.name(), "redirected");
        assert_eq!(Reason::NoRoute.name(), "no-route");
        assert_eq!(Reason::Vlan.as_u32(), 13);
    }

    #[test]
    fn route_key_roundtrip() {
        for (d, t, m) in [
            ("10.0.0.0/8", 254, 0),
            ("2001:db8::/32", 1000, 1024),
            ("0.0.0.0/0", 7, 9),
        ] {
            let k = mpt_model::RouteKey {
                dst: d.parse().expect("net"),
                table: t,
                metric: m,
            };
            assert_eq!(MptRouteKey::of(&k).route_key(), Some(k));
        }
        assert_eq!(
            key().route_key().map(|k| k.dst.to_string()),
            Some("192.0.2.0/24".into())
        );
        let bad = MptRouteKey { family: 7, ..key() };
        assert_eq!(bad.route_key(), None);
        let long = MptRouteKey {
            dst_len: 33,
            ..key()
        };
        assert_eq!(long.route_key(), None);
    }

    #[test]
    fn meta_new_uses_current_abi() {
        let m = MptMeta::new(7, 9);
        assert_eq!(m.abi_version, ABI_VERSION);
        assert_eq!(
            (m.hash_seed, m.netns_cookie, m.flags, m.fib4_gen),
            (7, 9, 0, 0)
        );
        // abi_version is readable from the first 4 bytes of any mpt_meta.
        assert_eq!(m.as_bytes()[..4], ABI_VERSION.to_ne_bytes());
    }
}

//! The dataplane's view of the managed routes, written by the control plane: LPM tries keyed by
//! table and prefix (`mpt_lpm4`, `mpt_lpm6`) pointing at nexthop groups (`mpt_groups`).
//!
//! Counters: a route's LPM entry may hold a slot of the per-CPU array `mpt_slot_stats`
//! (`stats_slot`, the first [`STATS_SLOTS`]` - 1` routes), which the dataplane finds without
//! hashing; any other route counts in the `mpt_stats` hash map. A route's counters are the sum
//! of both (see [`RouteState::dp_stats`]). Slots are handed out here, under the namespace lock:
//! a new route takes the lowest free one, zeroed; the same route written again keeps its own;
//! a route that loses its LPM entry to another one has its slot folded into its `mpt_stats`
//! entry first. Which slots are taken is recorded in slot 0, which no route uses (CPU 0's copy,
//! as a bitmap): taken before the LPM entry is written, freed after it is removed, so a crash
//! in between loses a slot (until `mproute sync`) and never gives one to two routes.
//!
//! Group ids: a route that references a kernel nexthop object uses that object's id, so routes
//! with the same nexthops share one group, collected together with the kernel object; any other
//! route gets a private group with an id of [`PRIVATE_GROUP_BASE`] or above, deleted with it.

use crate::log::Traced;
use std::net::IpAddr;
use std::sync::atomic::Ordering;

use libbpf_rs::{MapCore, MapFlags};
use mpt_model::hash::HashRecipe;
use mpt_model::{Algo, RouteKey};

use super::abi::{
    MptCounter, MptDpRoute, MptGroup, MptLpm4Key, MptLpm6Key, MptNh, MptRouteKey, MptRouteStats,
    AF_INET, AF_INET6, ALGO_L3_HASH, ALGO_L4_HASH, DPR_F_DRIFT, DPR_F_FOREIGN, DPR_F_VERIFIED,
    DP_ALGO_L3_RES, DP_ALGO_L4_RES, MAX_NH, STATS_SLOTS,
};
use super::resilient::ResTable;
use super::state::RouteState;
use crate::error::Error;

/// Byte of slot 0's CPU 0 copy (after the bitmap of [`STATS_SLOTS`] bits) that says the
/// bitmap is kept, and its value.
const SLOTS_MARK_AT: usize = STATS_SLOTS as usize / 8;
const SLOTS_KEPT: u8 = 0x5a;

/// First id of the private groups.
pub const PRIVATE_GROUP_BASE: u32 = 0x8000_0000;

/// A nexthop as the dataplane needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DpNexthop {
    /// Egress device.
    pub ifindex: u32,
    /// Gateway, `None` for a device route.
    pub gateway: Option<IpAddr>,
    /// 1..=256.
    pub weight: u16,
    /// `RTNH_F_*`.
    pub flags: u8,
    /// Whether the dataplane may use it (link up).
    pub usable: bool,
}

/// The dataplane's flags of an LPM entry (`DPR_F_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DpFlags {
    /// `DPR_F_VERIFIED`: at the recorded FIB generation the kernel's FIB answers with this
    /// route for every address the LPM trie gives it for.
    pub verified: bool,
    /// `DPR_F_DRIFT`: the kernel route is no longer the one mproute installed; the dataplane
    /// leaves its destinations to the kernel FIB.
    pub drift: bool,
    /// `DPR_F_FOREIGN`: a hole, another owner's route inside a managed prefix.
    pub foreign: bool,
}

impl DpFlags {
    fn of(bits: u8) -> DpFlags {
        DpFlags {
            verified: bits & DPR_F_VERIFIED != 0,
            drift: bits & DPR_F_DRIFT != 0,
            foreign: bits & DPR_F_FOREIGN != 0,
        }
    }
}

/// An LPM entry, a route as the dataplane sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DpEntry {
    /// The route holding the entry (for a hole: the other owner's route).
    pub id: RouteKey,
    /// Its algorithm (of a resilient route: the hash it buckets by).
    pub algo: Algo,
    /// Whether the entry names the route's bucket table (see [`RouteState::res_put`]).
    pub resilient: bool,
    /// Its flags.
    pub flags: DpFlags,
    /// Its nexthop group ([`RouteState::dp_group`]).
    pub group: u32,
    /// Its hash recipe.
    pub recipe: HashRecipe,
}

impl DpEntry {
    /// The entry, `None` if its key is not a valid route identity.
    fn of(r: &MptDpRoute) -> Option<DpEntry> {
        let (algo, resilient) = match r.algo {
            DP_ALGO_L3_RES => (Algo::L3Hash, true),
            DP_ALGO_L4_RES => (Algo::L4Hash, true),
            a => (Algo::from_u32(u32::from(a)).unwrap_or_default(), false),
        };
        Some(DpEntry {
            id: r.id.route_key()?,
            algo,
            resilient,
            flags: DpFlags::of(r.flags),
            group: r.group,
            recipe: HashRecipe {
                fields: (r.hash_fields != 0).then_some(mpt_model::hash::HashFields(r.hash_fields)),
                seed: (r.flags & super::abi::DPR_F_SEED != 0).then_some(r.seed),
            },
        })
    }
}

/// An LPM entry as it was before [`RouteState::dp_put_route`], to put back with
/// [`RouteState::dp_restore_route`] (counter slot included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SavedEntry(MptDpRoute);

impl SavedEntry {
    /// What the entry was.
    pub fn entry(&self) -> Option<DpEntry> {
        DpEntry::of(&self.0)
    }
}

/// A nexthop of a dataplane group, as read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupNexthop {
    /// Egress device.
    pub ifindex: u32,
    /// Gateway, `None` for a device route.
    pub gateway: Option<IpAddr>,
    /// 1..=256.
    pub weight: u16,
    /// `RTNH_F_*` flags.
    pub flags: u8,
    /// Hash-threshold upper bound over the usable nexthops; -1: unusable.
    pub upper_bound: i32,
}

impl GroupNexthop {
    fn of(n: &MptNh) -> GroupNexthop {
        GroupNexthop {
            ifindex: n.ifindex,
            gateway: n.gateway(),
            weight: n.weight,
            flags: n.flags,
            upper_bound: n.upper_bound,
        }
    }
}

/// A packet and byte counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counter {
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
}

impl Counter {
    fn of(c: &MptCounter) -> Counter {
        Counter {
            packets: c.packets,
            bytes: c.bytes,
        }
    }
}

/// A route's counters, summed over CPUs ([`RouteState::dp_stats`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RouteStats {
    /// Everything forwarded for the route.
    pub route: Counter,
    /// Per nexthop, by position in the route's group.
    pub nexthops: Vec<Counter>,
}

impl RouteStats {
    fn of(s: &MptRouteStats) -> RouteStats {
        RouteStats {
            route: Counter::of(&s.route),
            nexthops: s.nh.iter().map(Counter::of).collect(),
        }
    }
}

/// The recipe's part of an LPM entry (`hash_fields`, `seed` and `MPT_DPR_F_SEED`); the
/// rest zero.
pub fn dp_recipe(recipe: HashRecipe) -> MptDpRoute {
    MptDpRoute {
        flags: if recipe.seed.is_some() {
            super::abi::DPR_F_SEED
        } else {
            0
        },
        hash_fields: recipe.fields.map_or(0, |f| f.0),
        seed: recipe.seed.unwrap_or(0),
        ..MptDpRoute::default()
    }
}

fn bpf(what: &str) -> impl FnOnce(libbpf_rs::Error) -> Error + '_ {
    Error::libbpf(what)
}

/// Build the group value: hash-threshold bounds and cumulative weights over the usable
/// nexthops (an unusable one gets bound -1 and a zero-width weight range).
pub fn build_group(nhs: &[DpNexthop]) -> MptGroup {
    let mut g = MptGroup::default();
    let n = nhs.len().min(MAX_NH);
    let weights: Vec<u32> = nhs[..n].iter().map(|h| u32::from(h.weight)).collect();
    let usable: Vec<bool> = nhs[..n].iter().map(|h| h.usable).collect();
    let bounds = mpt_model::route::threshold::upper_bounds(&weights, &usable);
    let mut cum = 0u32;
    for (i, h) in nhs[..n].iter().enumerate() {
        if h.usable {
            cum += u32::from(h.weight);
        }
        let (family, gw) = match h.gateway {
            Some(IpAddr::V4(a)) => {
                let mut b = [0u8; 16];
                b[..4].copy_from_slice(&a.octets());
                (AF_INET, b)
            }
            Some(IpAddr::V6(a)) => (AF_INET6, a.octets()),
            None => (0, [0u8; 16]),
        };
        g.nh[i] = MptNh {
            ifindex: h.ifindex,
            upper_bound: bounds[i],
            cum_weight: cum,
            weight: h.weight,
            flags: h.flags,
            family,
            gw,
        };
    }
    g.nh_count = n as u32;
    g.total_weight = cum;
    g
}

enum Lpm {
    V4(MptLpm4Key),
    V6(MptLpm6Key),
}

impl Lpm {
    fn of(key: &MptRouteKey) -> Lpm {
        let table_be = key.table.to_be_bytes();
        if key.family == AF_INET {
            let mut addr = [0u8; 4];
            addr.copy_from_slice(&key.dst_be[..4]);
            Lpm::V4(MptLpm4Key {
                prefixlen: 32 + u32::from(key.dst_len),
                table_be,
                addr,
            })
        } else {
            Lpm::V6(MptLpm6Key {
                prefixlen: 32 + u32::from(key.dst_len),
                table_be,
                addr: key.dst_be,
            })
        }
    }
    fn bytes(&self) -> &[u8] {
        match self {
            Lpm::V4(k) => k.as_bytes(),
            Lpm::V6(k) => k.as_bytes(),
        }
    }
    fn map_name(&self) -> &'static str {
        match self {
            Lpm::V4(_) => "mpt_lpm4",
            Lpm::V6(_) => "mpt_lpm6",
        }
    }
}

/// What `mpt_groups` holds and the most it grows to (`MPT_MAX_GROUPS`), which a batch of
/// routes with distinct nexthop sets can reach.
const GROUPS: crate::grow::Limit = crate::grow::Limit {
    things: "nexthop groups (distinct nexthop sets)",
    most: super::abi::MAX_GROUPS,
};

impl RouteState {
    /// Write group `id` with `flags`; a full map grows (see [`crate::grow`]) up to
    /// [`GROUPS`], past which the error names the limit.
    fn put_group(&self, id: u32, g: &MptGroup, flags: MapFlags) -> Result<(), Error> {
        loop {
            match self
                .map("mpt_groups")?
                .put(&id.to_ne_bytes(), g.as_bytes(), flags)
            {
                Err(e) if crate::grow::is_full(&e) => {
                    self.pinned.grow("mpt_groups", 0, GROUPS, false)?;
                }
                r => {
                    return r.map_err(Error::full_or_libbpf(
                        "write mpt_groups",
                        GROUPS.things,
                        GROUPS.most,
                    ))
                }
            }
        }
    }

    /// Write a group.
    pub fn dp_put_group(&self, id: u32, nhs: &[DpNexthop]) -> Result<(), Error> {
        self.put_group(id, &build_group(nhs), MapFlags::ANY)
    }

    /// Whether a group exists.
    pub fn dp_has_group(&self, id: u32) -> Result<bool, Error> {
        Ok(self
            .map("mpt_groups")?
            .lookup(&id.to_ne_bytes(), MapFlags::ANY)
            .map_err(bpf("read mpt_groups"))?
            .is_some())
    }

    /// Delete a group (absent is fine).
    pub fn dp_delete_group(&self, id: u32) -> Result<(), Error> {
        match self.map("mpt_groups")?.remove(&id.to_ne_bytes()) {
            Err(e) if e.kind() != libbpf_rs::ErrorKind::NotFound => {
                Err(Error::libbpf("delete from mpt_groups")(e))
            }
            _ => Ok(()),
        }
    }

    /// Ids of every group (read in batches).
    pub fn dp_group_ids(&self) -> Result<Vec<u32>, Error> {
        Ok(self
            .dp_groups_raw()?
            .into_iter()
            .map(|(id, _)| id)
            .collect())
    }

    /// Delete groups (absent ones are fine), in batches.
    pub fn dp_delete_groups(&self, ids: &[u32]) -> Result<(), Error> {
        let keys: Vec<u8> = ids.iter().flat_map(|id| id.to_ne_bytes()).collect();
        crate::batch::delete_some_keys(self.map("mpt_groups")?, &keys, "mpt_groups").map(|_| ())
    }

    /// The group holding exactly `nhs`, written if no group has them yet: routes with the same
    /// nexthops share it. Returns (id, whether it was created here).
    pub fn dp_shared_group(&self, hint: u32, nhs: &[DpNexthop]) -> Result<(u32, bool), Error> {
        let want = build_group(nhs);
        let map = self.map("mpt_groups")?;
        let mut id = PRIVATE_GROUP_BASE | (hint & 0x7fff_ffff);
        for _ in 0..1024 {
            match map
                .lookup(&id.to_ne_bytes(), MapFlags::ANY)
                .map_err(bpf("read mpt_groups"))?
            {
                None => {
                    self.put_group(id, &want, MapFlags::NO_EXIST)?;
                    return Ok((id, true));
                }
                Some(v) if v == want.as_bytes() => return Ok((id, false)),
                Some(_) => id = PRIVATE_GROUP_BASE | (id.wrapping_add(1) & 0x7fff_ffff),
            }
        }
        Err(Error::io(
            "allocate a dataplane group id",
            std::io::Error::from_raw_os_error(libc::ENOSPC),
        ))
    }

    /// A free private group id, trying `hint` first.
    pub fn dp_private_group(&self, hint: u32) -> Result<u32, Error> {
        let mut id = PRIVATE_GROUP_BASE | (hint & 0x7fff_ffff);
        for _ in 0..1024 {
            if !self.dp_has_group(id)? {
                return Ok(id);
            }
            id = PRIVATE_GROUP_BASE | (id.wrapping_add(1) & 0x7fff_ffff);
        }
        Err(Error::io(
            "allocate a dataplane group id",
            std::io::Error::from_raw_os_error(libc::ENOSPC),
        ))
    }

    /// The dataplane entry of exactly this prefix/table (whichever metric it has); an LPM
    /// lookup alone would also answer with a shorter prefix that covers it.
    pub fn dp_get_route(&self, key: &RouteKey) -> Result<Option<DpEntry>, Error> {
        Ok(self
            .dp_get_raw(&MptRouteKey::of(key))?
            .and_then(|r| DpEntry::of(&r)))
    }

    /// [`RouteState::dp_get_route`], as the map has it.
    fn dp_get_raw(&self, key: &MptRouteKey) -> Result<Option<MptDpRoute>, Error> {
        Ok(self.dp_lpm_match(key)?.filter(|v| {
            v.id.family == key.family
                && v.id.dst_len == key.dst_len
                && v.id.table == key.table
                && v.id.dst_be == key.dst_be
        }))
    }

    /// Longest-prefix match, as the dataplane does it.
    fn dp_lpm_match(&self, key: &MptRouteKey) -> Result<Option<MptDpRoute>, Error> {
        let l = Lpm::of(key);
        Ok(self
            .map(l.map_name())?
            .lookup(l.bytes(), MapFlags::ANY)
            .map_err(bpf("read the LPM trie"))?
            .and_then(|v| MptDpRoute::from_bytes(&v)))
    }

    /// Whether the tries certainly hold no entry of exactly `l`'s prefix: both were empty when
    /// this process first asked, and it has not written `l` since (see `lpm_written`).
    fn lpm_absent(&self, l: &Lpm) -> Result<bool, Error> {
        let mut g = self
            .lpm_written
            .lock()
            .map_err(|_| Error::io("LPM bookkeeping", std::io::Error::other("poisoned lock")))?;
        if g.is_none() {
            let empty = self.map("mpt_lpm4")?.keys().next().is_none()
                && self.map("mpt_lpm6")?.keys().next().is_none();
            *g = Some(empty.then(rustc_hash::FxHashSet::default));
        }
        Ok(matches!(&*g, Some(Some(set)) if !set.contains(&super::state::set_key(l.bytes()))))
    }

    /// Record a write of `l` (before it is made: a failed write may have happened anyway).
    fn lpm_wrote(&self, l: &Lpm) {
        if let Ok(mut g) = self.lpm_written.lock() {
            if let Some(Some(set)) = g.as_mut() {
                set.insert(super::state::set_key(l.bytes()));
            }
        }
    }

    /// The resilient bucket table of a route, if it has one.
    /// Boxed: the table is 20 KiB, and a `Result` of it by value costs a copy of that size
    /// at every `?` (it was 40 % of a batch's instructions before any route was resilient).
    pub fn res_get(&self, key: &RouteKey) -> Result<Option<ResTable>, Error> {
        self.res_get_raw(&MptRouteKey::of(key))
    }

    fn res_get_raw(&self, key: &MptRouteKey) -> Result<Option<ResTable>, Error> {
        if self.res_known_empty()? {
            return Ok(None);
        }
        Ok(self
            .map("mpt_res")?
            .lookup(key.as_bytes(), MapFlags::ANY)
            .map_err(bpf("read mpt_res"))?
            .and_then(|v| ResTable::from_bytes(&v)))
    }

    /// Write a route's bucket table (before its LPM entry names a resilient algorithm).
    pub fn res_put(&self, key: &RouteKey, t: &ResTable) -> Result<(), Error> {
        let k = MptRouteKey::of(key);
        loop {
            match self
                .map("mpt_res")?
                .put(k.as_bytes(), t.as_bytes(), MapFlags::ANY)
            {
                // full: a larger copy (`crate::grow`), up to MPT_MAX_RES_ROUTES
                Err(e) if crate::grow::is_full(&e) => {
                    let limit = crate::grow::Limit {
                        things: "resilient routes",
                        most: super::abi::MAX_RES_ROUTES,
                    };
                    self.pinned.grow("mpt_res", 0, limit, false)?;
                }
                r => {
                    r.map_err(bpf("write mpt_res"))?;
                    break;
                }
            }
        }
        self.res_any.store(2, Ordering::Relaxed);
        Ok(())
    }

    /// Remove a route's bucket table (after its LPM entry stopped naming it); `true` if it had one.
    pub fn res_delete(&self, key: &RouteKey) -> Result<bool, Error> {
        if self.res_known_empty()? {
            return Ok(false);
        }
        match self.map("mpt_res")?.remove(MptRouteKey::of(key).as_bytes()) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(bpf("delete from mpt_res")(e)),
        }
    }

    /// Whether `mpt_res` is known to be empty (read once per process, kept up to date by
    /// [`RouteState::res_put`]).
    fn res_known_empty(&self) -> Result<bool, Error> {
        match self.res_any.load(Ordering::Relaxed) {
            1 => Ok(true),
            2 => Ok(false),
            _ => {
                let any = self.map("mpt_res")?.keys().next().is_some();
                self.res_any
                    .store(if any { 2 } else { 1 }, Ordering::Relaxed);
                Ok(!any)
            }
        }
    }

    /// The LPM entry's algorithm for a route whose state says `algo`: the resilient variant of
    /// a hash algorithm for a route with a bucket table.
    fn dp_algo(&self, key: &MptRouteKey, algo: u8) -> Result<u8, Error> {
        if !matches!(algo, ALGO_L3_HASH | ALGO_L4_HASH) || self.res_get_raw(key)?.is_none() {
            return Ok(algo);
        }
        Ok(if algo == ALGO_L4_HASH {
            DP_ALGO_L4_RES
        } else {
            DP_ALGO_L3_RES
        })
    }

    /// Point the prefix/table at `group` with `algo`, unless a managed route with a lower metric
    /// already holds it (the FIB prefers that one). Returns what was there before. A route with
    /// a bucket table ([`RouteState::res_put`], written first) gets the resilient variant of
    /// its hash algorithm.
    pub fn dp_put_route(
        &self,
        key: &RouteKey,
        algo: Algo,
        group: u32,
        recipe: HashRecipe,
    ) -> Result<Option<SavedEntry>, Error> {
        let key = &MptRouteKey::of(key);
        // the algorithm numbers are the wire values (checked in `abi`)
        let algo = self.dp_algo(key, algo.as_u32() as u8)?;
        let l = Lpm::of(key);
        let absent = self.lpm_absent(&l)?;
        let old = if absent { None } else { self.dp_get_raw(key)? };
        if let Some(o) = &old {
            if o.id.metric < key.metric {
                return Ok(old.map(SavedEntry));
            }
        }
        // The same route written again (nexthops, algorithm) keeps its slot: its counters go on.
        let kept = old
            .filter(|o| o.id == *key && o.stats_slot != 0)
            .map(|o| o.stats_slot);
        let v = MptDpRoute {
            id: *key,
            algo,
            stats_slot: kept.unwrap_or_else(|| self.slot_alloc()),
            group,
            // flags: only the recipe's; VERIFIED and DRIFT are the verification's to set
            ..dp_recipe(recipe)
        };
        self.lpm_wrote(&l);
        if absent {
            // no entry to replace: written with the others of its window (see `flush`)
            let which = match l {
                Lpm::V4(_) => super::state::DEFER_LPM4,
                Lpm::V6(_) => super::state::DEFER_LPM6,
            };
            self.defer(which, l.bytes(), v.as_bytes());
            return Ok(None);
        }
        let map = self.map(l.map_name())?;
        if let Err(e) = map.put(l.bytes(), v.as_bytes(), MapFlags::ANY) {
            if kept.is_none() {
                self.slot_release(v.stats_slot);
            }
            return Err(Error::libbpf("write the LPM trie")(e));
        }
        if let Some(o) = &old {
            if o.stats_slot != 0 && o.stats_slot != v.stats_slot {
                // Another route (a higher metric, shadowed now) keeps what it counted.
                self.slot_fold(&o.id, o.stats_slot);
                self.slot_release(o.stats_slot);
            }
        }
        Ok(old.map(SavedEntry))
    }

    /// Start the route's counters again from zero (its nexthops changed: the per-nexthop
    /// counters are by position in the group).
    pub fn dp_reset_stats(&self, key: &RouteKey) -> Result<(), Error> {
        let key = &MptRouteKey::of(key);
        if let Some(cur) = self.dp_get_raw(key)? {
            if cur.id == *key && cur.stats_slot != 0 {
                self.slot_zero(cur.stats_slot)?;
            }
        }
        // absent when the route counts in its slot only
        let _ = self.map("mpt_stats")?.remove(key.as_bytes());
        Ok(())
    }

    /// Set or clear `DPR_F_VERIFIED` on the route's LPM entry, if the entry is this route's.
    /// Returns whether it was.
    pub fn dp_set_verified(&self, key: &RouteKey, verified: bool) -> Result<bool, Error> {
        self.dp_set_flag(&MptRouteKey::of(key), DPR_F_VERIFIED, verified)
    }

    /// Set or clear `DPR_F_DRIFT` on the route's LPM entry, if the entry is this route's.
    /// Returns whether it was.
    pub fn dp_set_drift(&self, key: &RouteKey, drift: bool) -> Result<bool, Error> {
        self.dp_set_flag(&MptRouteKey::of(key), DPR_F_DRIFT, drift)
    }

    fn dp_set_flag(&self, key: &MptRouteKey, flag: u8, on: bool) -> Result<bool, Error> {
        let l = Lpm::of(key);
        let Some(mut cur) = self.dp_get_raw(key)? else {
            return Ok(false);
        };
        if cur.id != *key {
            return Ok(false);
        }
        let want = if on {
            cur.flags | flag
        } else {
            cur.flags & !flag
        };
        if want != cur.flags {
            cur.flags = want;
            self.map(l.map_name())?
                .put(l.bytes(), cur.as_bytes(), MapFlags::EXIST)
                .map_err(bpf("write the LPM trie"))?;
        }
        Ok(true)
    }

    /// Every entry of one LPM trie, holes ([`DpFlags::foreign`]) included (entries whose key
    /// is no route identity left out).
    pub fn dp_entries(&self, v6: bool) -> Result<Vec<DpEntry>, Error> {
        Ok(self
            .dp_entries_raw(v6)?
            .iter()
            .filter_map(DpEntry::of)
            .collect())
    }

    /// [`RouteState::dp_entries`], as the map has them.
    fn dp_entries_raw(&self, v6: bool) -> Result<Vec<MptDpRoute>, Error> {
        let name = if v6 { "mpt_lpm6" } else { "mpt_lpm4" };
        // LPM tries have no batch reads (see crate::batch): two system calls per entry
        let all = crate::batch::read_all(self.map(name)?, name)?;
        Ok(all
            .iter()
            .filter_map(|(_, v)| MptDpRoute::from_bytes(v))
            .collect())
    }

    /// Both LPM tries, read once: the entry of each prefix and table without a lookup each
    /// (`sync`, `flush`).
    pub fn dp_snapshot(&self) -> Result<DpSnapshot, Error> {
        let mut by_prefix = std::collections::HashMap::new();
        for v6 in [false, true] {
            for r in self.dp_entries_raw(v6)? {
                by_prefix.insert(prefix_of(&r.id), r);
            }
        }
        Ok(DpSnapshot { by_prefix })
    }

    /// Read the entries of `keys`' prefixes again into `snap` (after writes to them).
    pub fn dp_snapshot_refresh(
        &self,
        snap: &mut DpSnapshot,
        keys: &[RouteKey],
    ) -> Result<(), Error> {
        for k in keys {
            let id = MptRouteKey::of(k);
            match self.dp_get_raw(&id)? {
                Some(r) => snap.by_prefix.insert(prefix_of(&id), r),
                None => snap.by_prefix.remove(&prefix_of(&id)),
            };
        }
        Ok(())
    }

    /// Every group, read in batches: id and nexthops.
    pub fn dp_groups(&self) -> Result<std::collections::HashMap<u32, Vec<GroupNexthop>>, Error> {
        Ok(self
            .dp_groups_raw()?
            .into_iter()
            .map(|(id, g)| (id, g.nexthops().iter().map(GroupNexthop::of).collect()))
            .collect())
    }

    fn dp_groups_raw(&self) -> Result<Vec<(u32, MptGroup)>, Error> {
        let all = crate::batch::read_all(self.map("mpt_groups")?, "mpt_groups")?;
        Ok(all
            .iter()
            .filter_map(|(k, v)| {
                let id = u32::from_ne_bytes(k.get(..4)?.try_into().ok()?);
                Some((id, MptGroup::from_bytes(v)?))
            })
            .collect())
    }

    /// [`RouteState::dp_rescan_slots`] from a snapshot taken since the last write of the tries.
    pub fn dp_rescan_slots_in(&self, snap: &DpSnapshot) -> Result<usize, Error> {
        let held = slots_held(snap.by_prefix.values());
        self.rescan_with(held)
    }

    /// Remove the LPM entries of `keys` that are theirs (a snapshot taken since the last write
    /// of the tries says which), with their counters (`mpt_stats`, `mpt_pcpu`, `mpt_res`,
    /// slots), in batches where the map type has them: `flush`'s and `sync`'s many forgets,
    /// without a lookup per route. Returns the keys whose entry was removed.
    pub fn dp_delete_routes(
        &self,
        keys: &[RouteKey],
        snap: &mut DpSnapshot,
    ) -> Result<Vec<RouteKey>, Error> {
        let removed = self.dp_unroute(keys, snap)?;
        self.dp_drop_counters(keys)?;
        Ok(removed)
    }

    /// The first half of [`RouteState::dp_delete_routes`]: the LPM entries and counter slots of
    /// `keys` (a part of a long list may go at a time, `snap` carried from part to part).
    pub fn dp_unroute(
        &self,
        keys: &[RouteKey],
        snap: &mut DpSnapshot,
    ) -> Result<Vec<RouteKey>, Error> {
        let mut lpm: [Vec<u8>; 2] = Default::default();
        let mut slots = Vec::new();
        let mut removed = Vec::new();
        for k in keys {
            let id = MptRouteKey::of(k);
            let p = prefix_of(&id);
            if snap.by_prefix.get(&p).is_some_and(|c| c.id == id) {
                if let Some(cur) = snap.by_prefix.remove(&p) {
                    let l = Lpm::of(&id);
                    lpm[usize::from(matches!(l, Lpm::V6(_)))].extend_from_slice(l.bytes());
                    slots.push(cur.stats_slot);
                    removed.push(*k);
                }
            }
        }
        for (i, name) in ["mpt_lpm4", "mpt_lpm6"].into_iter().enumerate() {
            crate::batch::delete_keys(self.map(name)?, &lpm[i], name)?;
        }
        if !slots.is_empty() {
            let _ = self.with_slots(|u| {
                let mut changed = false;
                for s in slots.iter().filter(|s| **s != 0) {
                    if let Some(x) = u.get_mut(usize::from(*s)) {
                        changed |= *x;
                        *x = false;
                    }
                }
                ((), changed)
            });
        }
        Ok(removed)
    }

    /// The second half of [`RouteState::dp_delete_routes`]: the counters of `keys`, once for
    /// the whole list (each map is read once to find the few keys it holds).
    pub fn dp_drop_counters(&self, keys: &[RouteKey]) -> Result<(), Error> {
        let mut ids = Vec::with_capacity(keys.len() * MptRouteKey::SIZE);
        for k in keys {
            ids.extend_from_slice(MptRouteKey::of(k).as_bytes());
        }
        // most routes never counted in these (and few are resilient)
        for name in ["mpt_stats", "mpt_pcpu"] {
            crate::batch::delete_some_keys(self.map(name)?, &ids, name)?;
        }
        if !self.res_known_empty()? {
            crate::batch::delete_some_keys(self.map("mpt_res")?, &ids, "mpt_res")?;
        }
        Ok(())
    }

    /// The managed IPv4 routes of the LPM trie (the prefixes the dataplane knows, holes left out).
    pub fn dp_routes4(&self) -> Result<Vec<DpEntry>, Error> {
        self.dp_routes(false)
    }

    /// The managed routes of one family's LPM trie (holes left out).
    pub fn dp_routes(&self, v6: bool) -> Result<Vec<DpEntry>, Error> {
        let mut v = self.dp_entries(v6)?;
        v.retain(|r| !r.flags.foreign);
        Ok(v)
    }

    /// Make one family's holes exactly `want` (main-table prefixes), given the ones it `have`s
    /// (from [`RouteState::dp_entries`]): stale ones go, missing ones are added where the prefix
    /// has no entry (a managed route's is never replaced). Returns how many holes there are now.
    pub fn dp_sync_holes(
        &self,
        v6: bool,
        have: &[RouteKey],
        want: &[RouteKey],
    ) -> Result<usize, Error> {
        let have: Vec<MptRouteKey> = have.iter().map(MptRouteKey::of).collect();
        let want: Vec<MptRouteKey> = want.iter().map(MptRouteKey::of).collect();
        let same = |a: &MptRouteKey, b: &MptRouteKey| {
            a.dst_len == b.dst_len && a.table == b.table && a.dst_be == b.dst_be
        };
        let map = self.map(if v6 { "mpt_lpm6" } else { "mpt_lpm4" })?;
        for h in have.iter().filter(|h| !want.iter().any(|w| same(h, w))) {
            match map.remove(Lpm::of(h).bytes()) {
                Err(e) if e.kind() != libbpf_rs::ErrorKind::NotFound => {
                    return Err(Error::libbpf("delete from the LPM trie")(e))
                }
                _ => {}
            }
        }
        let mut n = have
            .iter()
            .filter(|h| want.iter().any(|w| same(h, w)))
            .count();
        for w in want.iter().filter(|w| !have.iter().any(|h| same(h, w))) {
            let v = MptDpRoute {
                id: *w,
                algo: 0,
                flags: DPR_F_FOREIGN,
                stats_slot: 0,
                group: 0,
                ..MptDpRoute::default()
            };
            self.lpm_wrote(&Lpm::of(w));
            match map.put(Lpm::of(w).bytes(), v.as_bytes(), MapFlags::NO_EXIST) {
                Ok(()) => n += 1,
                Err(e) if e.kind() == libbpf_rs::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(Error::libbpf("write the LPM trie")(e)),
            }
        }
        Ok(n)
    }

    /// Undo [`RouteState::dp_put_route`] of `key`, which returned `old`: put `old` back (or remove
    /// the entry for `None`), if the entry is still the one `key`'s write left (a later write of
    /// another route to the prefix stands).
    pub fn dp_restore_route(&self, key: &RouteKey, old: Option<SavedEntry>) -> Result<(), Error> {
        let key = &MptRouteKey::of(key);
        let l = Lpm::of(key);
        let Some(cur) = self.dp_get_raw(key)?.filter(|c| c.id == *key) else {
            return Ok(());
        };
        let Some(SavedEntry(mut v)) = old else {
            return self.dp_delete_raw(key).map(|_| ());
        };
        if v.id == cur.id {
            // The same route: it keeps the slot it has now, with what it counted meanwhile.
            v.stats_slot = cur.stats_slot;
        } else if v.stats_slot != 0 && !self.slot_claim(v.stats_slot) {
            // Its slot was folded into mpt_stats and freed when it lost the entry.
            v.stats_slot = 0;
        }
        self.map(l.map_name())?
            .put(l.bytes(), v.as_bytes(), MapFlags::ANY)
            .map_err(bpf("write the LPM trie"))?;
        if v.id != cur.id {
            // The route being undone: gone with what it counted.
            self.slot_release(cur.stats_slot);
            let _ = self.map("mpt_stats")?.remove(cur.id.as_bytes());
            let _ = self.map("mpt_pcpu")?.remove(cur.id.as_bytes());
        }
        Ok(())
    }

    /// Remove the prefix/table entry if it is this route's; returns whether it was. The
    /// route's `mpt_stats` and `mpt_pcpu` entries go either way (a shadowed route has them too).
    pub fn dp_delete_route(&self, key: &RouteKey) -> Result<bool, Error> {
        Ok(self.dp_delete_raw(&MptRouteKey::of(key))?.is_some())
    }

    fn dp_delete_raw(&self, key: &MptRouteKey) -> Result<Option<MptDpRoute>, Error> {
        let l = Lpm::of(key);
        let held = self.dp_get_raw(key)?.filter(|c| c.id == *key);
        if let Some(cur) = &held {
            match self.map(l.map_name())?.remove(l.bytes()) {
                Err(e) if e.kind() != libbpf_rs::ErrorKind::NotFound => {
                    return Err(Error::libbpf("delete from the LPM trie")(e))
                }
                _ => {}
            }
            self.slot_release(cur.stats_slot);
        }
        let _ = self.map("mpt_stats")?.remove(key.as_bytes());
        let _ = self.map("mpt_pcpu")?.remove(key.as_bytes());
        Ok(held)
    }

    /// Longest-prefix match of an address in a table, as the dataplane looks it up.
    pub fn dp_lookup(&self, table: u32, addr: IpAddr) -> Result<Option<DpEntry>, Error> {
        let mut dst_be = [0u8; 16];
        let (family, len) = match addr {
            IpAddr::V4(a) => {
                dst_be[..4].copy_from_slice(&a.octets());
                (AF_INET, 32)
            }
            IpAddr::V6(a) => {
                dst_be = a.octets();
                (AF_INET6, 128)
            }
        };
        let key = MptRouteKey {
            family,
            dst_len: len,
            reserved: 0,
            table,
            metric: 0,
            dst_be,
        };
        // a hole: the kernel FIB decides there, as for any unmanaged destination
        Ok(self
            .dp_lpm_match(&key)?
            .filter(|r| r.flags & DPR_F_FOREIGN == 0)
            .and_then(|r| DpEntry::of(&r)))
    }

    /// Per-route and per-nexthop counters summed over CPUs: the route's `mpt_stats` entry plus
    /// its counter slot, if its LPM entry holds one. `None` if it has neither.
    pub fn dp_stats(&self, key: &RouteKey) -> Result<Option<RouteStats>, Error> {
        let key = &MptRouteKey::of(key);
        let hashed = self
            .map("mpt_stats")?
            .lookup_percpu(key.as_bytes(), MapFlags::ANY)
            .map_err(bpf("read mpt_stats"))?
            .and_then(|v| MptRouteStats::sum_percpu(&v));
        let slotted = match self.dp_get_raw(key)? {
            Some(r) if r.id == *key && r.stats_slot != 0 => self
                .map("mpt_slot_stats")?
                .lookup_percpu(&u32::from(r.stats_slot).to_ne_bytes(), MapFlags::ANY)
                .map_err(bpf("read mpt_slot_stats"))?
                .and_then(|v| MptRouteStats::sum_percpu(&v)),
            _ => None,
        };
        Ok(match (hashed, slotted) {
            (Some(a), Some(b)) => {
                MptRouteStats::sum_percpu(&[a.as_bytes().to_vec(), b.as_bytes().to_vec()])
            }
            (a, b) => a.or(b),
        }
        .map(|s| RouteStats::of(&s)))
    }

    /// The slots the LPM entries hold, from the tries themselves (slot 0, "none", taken).
    fn scan_slots(&self) -> Result<Vec<bool>, Error> {
        let (v4, v6) = (self.dp_entries_raw(false)?, self.dp_entries_raw(true)?);
        Ok(slots_held(v4.iter().chain(&v6)))
    }

    /// The slot table as recorded: CPU 0's copy of slot 0, which no route uses, holds it as a
    /// bitmap (bit `i % 8` of byte `i / 8`: slot `i` is taken), then [`SLOTS_KEPT`]. Without that
    /// mark (a new map, re-created under existing tries) it is read from the tries: the second
    /// value says so, and that it must be recorded.
    fn load_slots(&self) -> Result<(Vec<bool>, bool), Error> {
        let v = self
            .map("mpt_slot_stats")?
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(bpf("read mpt_slot_stats"))?;
        let bits = v
            .as_ref()
            .and_then(|v| v.first())
            .map_or(&[][..], |b| &b[..]);
        if bits.get(SLOTS_MARK_AT) != Some(&SLOTS_KEPT) {
            return Ok((self.scan_slots()?, true));
        }
        let used = (0..STATS_SLOTS as usize)
            .map(|i| i == 0 || bits.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0))
            .collect();
        Ok((used, false))
    }

    fn store_slots(&self, used: &[bool]) -> Result<(), Error> {
        let cpus = libbpf_rs::num_possible_cpus().map_err(bpf("count the possible CPUs"))?;
        let mut v = vec![vec![0u8; MptRouteStats::SIZE]; cpus];
        let Some(first) = v.first_mut() else {
            return Ok(());
        };
        for (i, _) in used.iter().enumerate().filter(|(_, u)| **u) {
            first[i / 8] |= 1 << (i % 8);
        }
        first[SLOTS_MARK_AT] = SLOTS_KEPT;
        self.undeferred_map("mpt_slot_stats")?
            .update_percpu(&0u32.to_ne_bytes(), &v, MapFlags::ANY)
            .map_err(bpf("write mpt_slot_stats"))
    }

    /// Run `f` on the slot table (read once per handle, which lives while the namespace lock is
    /// held) and record it again if `f` says it changed it.
    fn with_slots<T>(&self, f: impl FnOnce(&mut [bool]) -> (T, bool)) -> Result<T, Error> {
        let mut g = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let mut scanned = false;
        let used = match &mut *g {
            Some(u) => u,
            none => {
                let (u, from_tries) = self.load_slots()?;
                scanned = from_tries;
                none.insert(u)
            }
        };
        let (out, changed) = f(used);
        if changed || scanned {
            if let Err(e) = self.store_slots(used) {
                // What is recorded is what counts: read it again next time.
                *g = None;
                return Err(e);
            }
        }
        Ok(out)
    }

    /// Record again which slots the LPM entries hold (`mproute sync`): slots lost to a crash
    /// between two writes come back. Returns how many were recorded as taken but held by none.
    pub fn dp_rescan_slots(&self) -> Result<usize, Error> {
        let held = self.scan_slots()?;
        self.rescan_with(held)
    }

    fn rescan_with(&self, held: Vec<bool>) -> Result<usize, Error> {
        self.with_slots(|u| {
            let lost = u.iter().zip(&held).filter(|(r, h)| **r && !**h).count();
            let changed = u != held.as_slice();
            u.copy_from_slice(&held);
            (lost, changed)
        })
    }

    /// Counter slots taken by routes and how many there are (slot 0 is nobody's).
    pub fn dp_slots_used(&self) -> Result<(usize, usize), Error> {
        let used = self.with_slots(|u| (u.iter().skip(1).filter(|x| **x).count(), false))?;
        Ok((used, STATS_SLOTS as usize - 1))
    }

    /// The lowest free slot, recorded as taken, its counters zeroed; 0 (count in `mpt_stats`)
    /// if none is free or the slots cannot be read or written: the slot only saves time.
    fn slot_alloc(&self) -> u16 {
        let taken = self.with_slots(|u| match u.iter().position(|x| !x) {
            Some(i) => {
                u[i] = true;
                (u16::try_from(i).ok(), true)
            }
            None => (None, false),
        });
        let Ok(Some(slot)) = taken else {
            return 0;
        };
        if self.slot_zero(slot).is_err() {
            self.slot_release(slot);
            return 0;
        }
        slot
    }

    /// Take `slot` if it is free, zeroed (it may have counted for another route meanwhile).
    fn slot_claim(&self, slot: u16) -> bool {
        let free = self
            .with_slots(|u| match u.get_mut(usize::from(slot)) {
                Some(x) if !*x => {
                    *x = true;
                    (true, true)
                }
                _ => (false, false),
            })
            .unwrap_or(false);
        if free && self.slot_zero(slot).is_err() {
            self.slot_release(slot);
            return false;
        }
        free
    }

    /// Free `slot` (its counters are zeroed when it is taken again). Best effort: a slot that
    /// stays recorded as taken is only lost until `mproute sync`.
    fn slot_release(&self, slot: u16) {
        if slot == 0 {
            return;
        }
        let _ = self.with_slots(|u| match u.get_mut(usize::from(slot)) {
            Some(x) if *x => {
                *x = false;
                ((), true)
            }
            _ => ((), false),
        });
    }

    fn slot_zero(&self, slot: u16) -> Result<(), Error> {
        let cpus = libbpf_rs::num_possible_cpus().map_err(bpf("count the possible CPUs"))?;
        let zero = vec![vec![0u8; MptRouteStats::SIZE]; cpus];
        self.undeferred_map("mpt_slot_stats")?
            .update_percpu(&u32::from(slot).to_ne_bytes(), &zero, MapFlags::ANY)
            .map_err(bpf("zero a counter slot"))
    }

    /// Add what `slot` counted to the `mpt_stats` entry of `id`, CPU by CPU, and zero the slot.
    /// Best effort: the route no longer has the LPM entry, a failure loses only its counts.
    fn slot_fold(&self, id: &MptRouteKey, slot: u16) {
        let fold = || -> Result<(), Error> {
            let slots = self.map("mpt_slot_stats")?;
            let Some(counted) = slots
                .lookup_percpu(&u32::from(slot).to_ne_bytes(), MapFlags::ANY)
                .map_err(bpf("read mpt_slot_stats"))?
            else {
                return Ok(());
            };
            if counted.iter().all(|v| v.iter().all(|b| *b == 0)) {
                return Ok(());
            }
            let stats = self.map("mpt_stats")?;
            let had = stats
                .lookup_percpu(id.as_bytes(), MapFlags::ANY)
                .map_err(bpf("read mpt_stats"))?;
            let zero = vec![0u8; MptRouteStats::SIZE];
            let sum: Vec<Vec<u8>> = counted
                .iter()
                .enumerate()
                .map(|(cpu, c)| {
                    let h = had.as_ref().and_then(|h| h.get(cpu)).unwrap_or(&zero);
                    MptRouteStats::sum_percpu(&[c.clone(), h.clone()])
                        .unwrap_or_default()
                        .as_bytes()
                        .to_vec()
                })
                .collect();
            stats
                .update_percpu(id.as_bytes(), &sum, MapFlags::ANY)
                .map_err(bpf("write mpt_stats"))?;
            self.slot_zero(slot)
        };
        let _ = fold();
    }

    /// The kernel nexthop objects managed routes name, each with the paths it was given: the
    /// groups below [`PRIVATE_GROUP_BASE`] (restore, the routes waiting for a link, and the
    /// object index's reservations all read them here).
    pub fn given_objects(&self) -> Result<Vec<(u32, Vec<mpt_model::Nexthop>)>, Error> {
        let mut given = Vec::new();
        // one batched read of the groups, not a lookup per group
        for (id, g) in self.dp_groups_raw()? {
            if id == 0 || id >= PRIVATE_GROUP_BASE {
                continue;
            }
            {
                let paths: Vec<mpt_model::Nexthop> =
                    g.nh.iter()
                        .take(g.nh_count as usize)
                        .map(|n| mpt_model::Nexthop {
                            gateway: n.gateway(),
                            ifindex: n.ifindex,
                            weight: n.weight,
                            flags: n.flags & mpt_model::route::RTNH_F_ONLINK,
                        })
                        .collect();
                if !paths.is_empty() {
                    given.push((id, paths));
                }
            }
        }
        Ok(given)
    }

    /// The nexthops of the group a route points at (`None`: no such group).
    pub fn dp_group(&self, id: u32) -> Result<Option<Vec<GroupNexthop>>, Error> {
        Ok(self
            .dp_group_raw(id)?
            .map(|g| g.nexthops().iter().map(GroupNexthop::of).collect()))
    }

    fn dp_group_raw(&self, id: u32) -> Result<Option<MptGroup>, Error> {
        Ok(self
            .map("mpt_groups")?
            .lookup(&id.to_ne_bytes(), MapFlags::ANY)
            .map_err(bpf("read mpt_groups"))?
            .and_then(|v| MptGroup::from_bytes(&v)))
    }
}

/// An LPM entry's place: family, prefix length, table, destination (a route identity without
/// its metric).
type Prefix = (u8, u8, u32, [u8; 16]);

fn prefix_of(id: &MptRouteKey) -> Prefix {
    (id.family, id.dst_len, id.table, id.dst_be)
}

/// The slots `entries` hold (slot 0, "none", taken).
fn slots_held<'a>(entries: impl Iterator<Item = &'a MptDpRoute>) -> Vec<bool> {
    let mut used = vec![false; STATS_SLOTS as usize];
    used[0] = true;
    for r in entries {
        if let Some(u) = used.get_mut(usize::from(r.stats_slot)) {
            *u = true;
        }
    }
    used
}

/// Both LPM tries as read by [`RouteState::dp_snapshot`].
#[derive(Debug, Default)]
pub struct DpSnapshot {
    by_prefix: std::collections::HashMap<Prefix, MptDpRoute>,
}

impl DpSnapshot {
    /// The entry of exactly this prefix/table (whichever metric it has), as
    /// [`RouteState::dp_get_route`] answers.
    pub fn get(&self, key: &RouteKey) -> Option<DpEntry> {
        self.by_prefix
            .get(&prefix_of(&MptRouteKey::of(key)))
            .and_then(DpEntry::of)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_bounds_and_cumulative_weights() {
        let nh = |w, usable| DpNexthop {
            ifindex: 2,
            gateway: Some("10.0.0.1".parse().expect("addr")),
            weight: w,
            flags: 0,
            usable,
        };
        let g = build_group(&[nh(3, true), nh(1, true)]);
        assert_eq!(g.nh_count, 2);
        assert_eq!(g.total_weight, 4);
        assert_eq!(g.nh[0].upper_bound, 0x5fff_ffff);
        assert_eq!(g.nh[1].upper_bound, 0x7fff_ffff);
        assert_eq!((g.nh[0].cum_weight, g.nh[1].cum_weight), (3, 4));
        let g = build_group(&[nh(3, true), nh(2, false), nh(1, true)]);
        assert_eq!(g.nh[1].upper_bound, -1);
        assert_eq!(
            (g.nh[0].cum_weight, g.nh[1].cum_weight, g.nh[2].cum_weight),
            (3, 3, 4)
        );
        assert_eq!(g.total_weight, 4);
    }
}

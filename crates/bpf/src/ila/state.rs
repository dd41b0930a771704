//! The ILA tables of one namespace (a [`Suite`] of [`crate::pinned`]): the maps of
//! `bpf/ila/maps.bpf.h`, held by the anchor `ila_anchor` of `bpf/ila/ila_state.bpf.c`, read
//! and written as the model's [`Mapping`]s and [`RouteSpec`]s.
//!
//! Every write is one map operation, so a table is never half-written; a mapping's or route's
//! counters are removed with it (a new one with the same key counts from zero) and kept by a
//! replace.

use crate::log::Traced;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use ipnet::Ipv6Net;
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use mpt_model::ila::plan::{self, Mode, Outcome, Refusal, Write};
use mpt_model::ila::{HookType, Locator, Mapping, RouteSpec};

use super::abi::{
    sum_percpu, IlaCounter, IlaMeta, IlaRouteKey, IlaRouteVal, IlaXlatKey, IlaXlatVal, Reason,
    ABI_VERSION, META_F_DEV_MAPPINGS, META_F_INPUT_ROUTES, META_F_OUTPUT_ROUTES, STATS_SLOTS,
};
use crate::error::Error;
use crate::pinned::{self, Pinned, Suite};
use crate::skel::ila::ila_state::IlaStateSkelBuilder;

/// Every map the anchor holds (`bpf/ila/maps.bpf.h`).
pub const STATE_MAPS: &[&str] = &[
    "ila_meta",
    "ila_xlat",
    "ila_routes",
    "ila_slot_stats",
    "ila_xlat_stats",
    "ila_route_stats",
    "ila_reasons",
];

/// Name of the anchor program.
pub const ANCHOR_PROG: &str = "ila_anchor";

/// The ILA suite: `/sys/fs/bpf/ila/<cookie>/`, `/run/ila/<cookie>.lock`.
pub static SUITE: Suite = Suite {
    name: "ila",
    anchor: ANCHOR_PROG,
    maps: STATE_MAPS,
    meta_map: "ila_meta",
    abi_version: ABI_VERSION,
};

/// The open ILA tables of the calling thread's namespace.
#[derive(Debug)]
pub struct IlaState {
    /// The maps, the namespace's cookie and the anchor.
    pub pinned: Pinned,
    meta: MapHandle,
    xlat: MapHandle,
    routes: MapHandle,
    slot_stats: MapHandle,
    xlat_stats: MapHandle,
    route_stats: MapHandle,
    reasons: MapHandle,
    /// Which `ila_slot_stats` slots mappings and routes hold, from their values: read on
    /// first use, written through (writes hold the namespace lock).
    slots: std::sync::Mutex<Option<Vec<bool>>>,
}

/// Load the anchor object, reusing the pins of `pins` or initialising `ila_meta` for `cookie`.
fn load_anchor(pins: Option<&Path>, cookie: u64) -> Result<OwnedFd, Error> {
    let mut obj = MaybeUninit::uninit();
    let mut open = IlaStateSkelBuilder::default()
        .open(&mut obj)
        .map_err(Error::libbpf("open the ILA state BPF object"))?;
    if let Some(dir) = pins {
        pinned::reuse_pins(dir, open.open_object_mut().maps_mut())?;
    }
    let skel = Error::loading("load the ILA state BPF object", || open.load())?;
    if pins.is_none() {
        let meta = IlaMeta {
            abi_version: ABI_VERSION,
            flags: 0,
            netns_cookie: cookie,
        };
        skel.maps
            .ila_meta
            .put(&0u32.to_ne_bytes(), meta.as_bytes(), MapFlags::ANY)
            .map_err(Error::libbpf("initialise ila_meta"))?;
    }
    skel.progs
        .ila_anchor
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| Error::io("keep the ILA state anchor", e))
}

fn not_found(e: &libbpf_rs::Error) -> bool {
    e.kind() == libbpf_rs::ErrorKind::NotFound
}

/// A mapping's key: its locator match and receiving device (0: any).
pub type MappingKey = (Locator, u32);

/// Packets and bytes one mapping or route translated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
}

impl From<IlaCounter> for Counts {
    fn from(c: IlaCounter) -> Counts {
        Counts {
            packets: c.packets,
            bytes: c.bytes,
        }
    }
}

fn xlat_key(key: MappingKey) -> IlaXlatKey {
    IlaXlatKey {
        locator_match: key.0 .0,
        ifindex: key.1,
        pad: 0,
    }
}

impl IlaState {
    /// Open the namespace's tables; create them when `create` and they do not exist yet.
    /// `None` when there are none and `create` is false.
    pub fn open(cookie: u64, create: bool) -> Result<Option<IlaState>, Error> {
        let Some(pinned) = Pinned::open(&SUITE, cookie, create, Box::new(load_anchor))? else {
            return Ok(None);
        };
        pinned.ensure_pinned();
        Ok(Some(IlaState {
            meta: pinned.dup("ila_meta")?,
            xlat: pinned.dup("ila_xlat")?,
            routes: pinned.dup("ila_routes")?,
            slot_stats: pinned.dup("ila_slot_stats")?,
            slots: std::sync::Mutex::new(None),
            xlat_stats: pinned.dup("ila_xlat_stats")?,
            route_stats: pinned.dup("ila_route_stats")?,
            reasons: pinned.dup("ila_reasons")?,
            pinned,
        }))
    }

    /// The namespace's cookie.
    pub fn cookie(&self) -> u64 {
        self.pinned.cookie
    }

    /// One of the maps (for loading the translator with them).
    pub fn map(&self, name: &str) -> Result<&MapHandle, Error> {
        self.pinned.map(name)
    }

    // ---- ila_meta.flags ------------------------------------------------------------------

    /// The meta record.
    pub fn meta(&self) -> Result<IlaMeta, Error> {
        let v = self
            .meta
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(Error::libbpf("read ila_meta"))?
            .unwrap_or_default();
        IlaMeta::from_bytes(&v).ok_or_else(|| {
            Error::io(
                "read ila_meta",
                std::io::Error::from_raw_os_error(libc::EINVAL),
            )
        })
    }

    fn set_flags(&self, set: u32, clear: u32) -> Result<(), Error> {
        let mut m = self.meta()?;
        let flags = (m.flags | set) & !clear;
        if flags == m.flags {
            return Ok(());
        }
        m.flags = flags;
        self.meta
            .put(&0u32.to_ne_bytes(), m.as_bytes(), MapFlags::ANY)
            .map_err(Error::libbpf("write ila_meta"))
    }

    /// Clear the flags of the kinds of entries the tables no longer hold (after deletes;
    /// a set flag without its entries only costs the programs a lookup).
    pub fn settle_flags(&self) -> Result<(), Error> {
        let dev = self.mappings()?.iter().any(|m| m.ifindex != 0);
        let routes = self.routes()?;
        let input = routes.iter().any(|r| r.hook_type == HookType::Input);
        let output = routes.iter().any(|r| r.hook_type == HookType::Output);
        let mut clear = 0;
        if !dev {
            clear |= META_F_DEV_MAPPINGS;
        }
        if !input {
            clear |= META_F_INPUT_ROUTES;
        }
        if !output {
            clear |= META_F_OUTPUT_ROUTES;
        }
        self.set_flags(0, clear)
    }

    // ---- counter slots --------------------------------------------------------------------

    /// Take the lowest free slot of `ila_slot_stats`, its counters zeroed; 0 when all are
    /// taken (the entry then counts in its per-CPU hash).
    fn take_slot(&self) -> Result<u32, Error> {
        let mut guard = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            let mut taken = vec![false; STATS_SLOTS as usize];
            taken[0] = true;
            for k in self.xlat.keys() {
                if let Some(v) =
                    IlaXlatKey::from_bytes(&k).and_then(|k| self.xlat_val(&k).ok().flatten())
                {
                    if let Some(t) = taken.get_mut(v.stats_slot as usize) {
                        *t = true;
                    }
                }
            }
            for k in self.routes.keys() {
                if let Some(v) =
                    IlaRouteKey::from_bytes(&k).and_then(|k| self.route_val(&k).ok().flatten())
                {
                    if let Some(t) = taken.get_mut(v.stats_slot as usize) {
                        *t = true;
                    }
                }
            }
            *guard = Some(taken);
        }
        let Some(taken) = guard.as_mut() else {
            return Ok(0);
        };
        let Some(slot) = taken.iter().position(|t| !t) else {
            return Ok(0);
        };
        let cpus = libbpf_rs::num_possible_cpus().map_err(Error::libbpf("count the CPUs"))?;
        let zero = vec![vec![0u8; IlaCounter::SIZE]; cpus];
        let slot = slot as u32;
        self.slot_stats
            .update_percpu(&slot.to_ne_bytes(), &zero, MapFlags::ANY)
            .map_err(Error::libbpf("reset a counter slot"))?;
        taken[slot as usize] = true;
        Ok(slot)
    }

    /// Give a slot back.
    fn free_slot(&self, slot: u32) {
        if slot == 0 {
            return;
        }
        let mut guard = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = guard.as_mut().and_then(|v| v.get_mut(slot as usize)) {
            *t = false;
        }
    }

    /// The counter of a slot, summed over CPUs.
    fn slot_counter(&self, slot: u32) -> Result<IlaCounter, Error> {
        Ok(self
            .slot_stats
            .lookup_percpu(&slot.to_ne_bytes(), MapFlags::ANY)
            .map_err(Error::libbpf("read ila_slot_stats"))?
            .map(|v| sum_percpu(&v))
            .unwrap_or_default())
    }

    // ---- ila xlat ------------------------------------------------------------------------

    fn xlat_val(&self, key: &IlaXlatKey) -> Result<Option<IlaXlatVal>, Error> {
        let v = self
            .xlat
            .lookup(key.as_bytes(), MapFlags::ANY)
            .map_err(Error::libbpf("read ila_xlat"))?;
        Ok(v.as_deref().and_then(IlaXlatVal::from_bytes))
    }

    /// The mapping for a locator match and device (0: any), exactly that key.
    pub fn mapping(&self, key: MappingKey) -> Result<Option<Mapping>, Error> {
        self.mapping_at(&xlat_key(key))
    }

    fn mapping_at(&self, key: &IlaXlatKey) -> Result<Option<Mapping>, Error> {
        Ok(self.xlat_val(key)?.and_then(|v| v.mapping(key)))
    }

    /// Every mapping.
    pub fn mappings(&self) -> Result<Vec<Mapping>, Error> {
        let mut out = Vec::new();
        for k in self.xlat.keys() {
            let Some(key) = IlaXlatKey::from_bytes(&k) else {
                continue;
            };
            if let Some(m) = self.mapping_at(&key)? {
                out.push(m);
            }
        }
        Ok(out)
    }

    /// Put a mapping, by the put rule ([`plan::put`]).
    pub fn put_mapping(&self, m: &Mapping, mode: Mode) -> Result<Outcome, Error> {
        let key = IlaXlatKey::of(m);
        let mut val = IlaXlatVal::of(m);
        let raw = self.xlat_val(&key)?;
        let old = raw.and_then(|v| v.mapping(&key));
        let write = match plan::put(old.as_ref(), m, mode) {
            Outcome::Write(w) => w,
            other => return Ok(other),
        };
        if m.ifindex != 0 {
            // before the entry: the programs must look for it from its first packet
            self.set_flags(META_F_DEV_MAPPINGS, 0)?;
        }
        let flags = if write == Write::Added {
            // counters of an earlier mapping with this key are not this one's
            self.xlat_stats.remove(key.as_bytes()).or_else(|e| {
                if not_found(&e) {
                    Ok(())
                } else {
                    Err(Error::libbpf("reset ila_xlat_stats")(e))
                }
            })?;
            val.stats_slot = self.take_slot()?;
            MapFlags::NO_EXIST
        } else {
            // a replace keeps the counters
            val.stats_slot = raw.map_or(0, |r| r.stats_slot);
            MapFlags::EXIST
        };
        let put = loop {
            match self.xlat.put(key.as_bytes(), val.as_bytes(), flags) {
                Err(e) if crate::grow::is_full(&e) => {
                    if let Err(g) = self.grow_mappings() {
                        if write == Write::Added {
                            self.free_slot(val.stats_slot);
                        }
                        return Err(g);
                    }
                }
                r => break r,
            }
        };
        match put {
            Ok(()) => Ok(Outcome::Write(write)),
            // another writer got there first (commands hold the namespace lock: only a tool
            // that does not)
            Err(e) if e.kind() == libbpf_rs::ErrorKind::AlreadyExists => {
                self.free_slot(val.stats_slot);
                Ok(Outcome::Refuse(Refusal::Exists))
            }
            Err(e) => {
                if write == Write::Added {
                    self.free_slot(val.stats_slot);
                }
                Err(Error::libbpf("write ila_xlat")(e))
            }
        }
    }

    /// Make room for more mappings: grow `ila_xlat` ([`crate::grow`]) and, to the same
    /// capacity, `ila_xlat_stats` (one entry per mapping at most).
    fn grow_mappings(&self) -> Result<(), Error> {
        let limit = crate::grow::Limit {
            things: "mappings",
            most: super::abi::MAX_MAPPINGS,
        };
        let cap = self.grow(&self.xlat, "ila_xlat", 0, limit, false)?;
        if crate::grow::capacity(&self.xlat_stats, "ila_xlat_stats")? < cap {
            self.grow(&self.xlat_stats, "ila_xlat_stats", cap, limit, true)?;
        }
        Ok(())
    }

    /// Grow the growable map `name`, of which `held` is this state's descriptor.
    fn grow(
        &self,
        held: &MapHandle,
        name: &str,
        at_least: u32,
        limit: crate::grow::Limit,
        counters: bool,
    ) -> Result<u32, Error> {
        let cap = self.pinned.grow(name, at_least, limit, counters)?;
        crate::grow::redirect(held, self.pinned.map(name)?, name)?;
        Ok(cap)
    }

    /// A zero counter for `key` in the counter map `map` (`name`), grown when full.
    fn make_counter(&self, map: &MapHandle, name: &str, key: &[u8]) -> Result<(), Error> {
        let zero = vec![0u8; map.value_size() as usize];
        loop {
            match map.update_percpu(
                key,
                &vec![zero.clone(); libbpf_rs::num_possible_cpus().unwrap_or(1)],
                MapFlags::NO_EXIST,
            ) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == libbpf_rs::ErrorKind::AlreadyExists => return Ok(()),
                Err(e) if crate::grow::is_full(&e) => {
                    let limit = crate::grow::Limit {
                        things: "routes",
                        most: super::abi::MAX_ROUTES,
                    };
                    self.grow(map, name, 0, limit, true)?;
                }
                Err(e) => return Err(Error::libbpf(format!("write {name}"))(e)),
            }
        }
    }

    /// Delete the mapping with this key; `false` if there was none.
    pub fn delete_mapping(&self, key: MappingKey) -> Result<bool, Error> {
        let key = &xlat_key(key);
        let slot = self.xlat_val(key)?.map_or(0, |v| v.stats_slot);
        match self.xlat.remove(key.as_bytes()) {
            Ok(()) => {
                let _ = self.xlat_stats.remove(key.as_bytes());
                self.free_slot(slot);
                Ok(true)
            }
            Err(e) if not_found(&e) => Ok(false),
            Err(e) => Err(Error::libbpf("delete from ila_xlat")(e)),
        }
    }

    /// Packets and bytes translated by the mapping with this key.
    pub fn mapping_counter(&self, key: MappingKey) -> Result<Counts, Error> {
        self.xlat_counter(&xlat_key(key)).map(Counts::from)
    }

    fn xlat_counter(&self, key: &IlaXlatKey) -> Result<IlaCounter, Error> {
        if let Some(slot) = self
            .xlat_val(key)?
            .map(|v| v.stats_slot)
            .filter(|s| *s != 0)
        {
            return self.slot_counter(slot);
        }
        Ok(self
            .xlat_stats
            .lookup_percpu(key.as_bytes(), MapFlags::ANY)
            .map_err(Error::libbpf("read ila_xlat_stats"))?
            .map(|v| sum_percpu(&v))
            .unwrap_or_default())
    }

    // ---- ila route -----------------------------------------------------------------------

    fn route_val(&self, key: &IlaRouteKey) -> Result<Option<IlaRouteVal>, Error> {
        let v = self
            .routes
            .lookup(key.as_bytes(), MapFlags::ANY)
            .map_err(Error::libbpf("read ila_routes"))?;
        Ok(v.as_deref().and_then(IlaRouteVal::from_bytes))
    }

    /// The route for exactly this prefix.
    pub fn route(&self, dst: Ipv6Net) -> Result<Option<RouteSpec>, Error> {
        Ok(self
            .route_val(&IlaRouteKey::of(dst))?
            .and_then(|v| v.route()))
    }

    /// Every route, in the trie's order.
    pub fn routes(&self) -> Result<Vec<RouteSpec>, Error> {
        let mut out = Vec::new();
        for k in self.routes.keys() {
            let Some(key) = IlaRouteKey::from_bytes(&k) else {
                continue;
            };
            let v = self
                .routes
                .lookup(key.as_bytes(), MapFlags::ANY)
                .map_err(Error::libbpf("read ila_routes"))?;
            if let Some(r) = v
                .as_deref()
                .and_then(IlaRouteVal::from_bytes)
                .and_then(|v| v.route())
            {
                out.push(r);
            }
        }
        Ok(out)
    }

    /// Put a route for its prefix, by the put rule ([`plan::put`]).
    pub fn put_route(&self, r: &RouteSpec, mode: Mode) -> Result<Outcome, Error> {
        let key = IlaRouteKey::of(r.dst);
        let raw = self.route_val(&key)?;
        let old = raw.and_then(|v| v.route());
        let mut val = IlaRouteVal::of(r);
        let write = match plan::put(old.as_ref(), r, mode) {
            Outcome::Write(w) => w,
            other => return Ok(other),
        };
        self.set_flags(
            match r.hook_type {
                HookType::Input => META_F_INPUT_ROUTES,
                HookType::Output => META_F_OUTPUT_ROUTES,
            },
            0,
        )?;
        let flags = if write == Write::Added {
            self.route_stats.remove(key.as_bytes()).or_else(|e| {
                if not_found(&e) {
                    Ok(())
                } else {
                    Err(Error::libbpf("reset ila_route_stats")(e))
                }
            })?;
            val.stats_slot = self.take_slot()?;
            MapFlags::NO_EXIST
        } else {
            val.stats_slot = raw.map_or(0, |r| r.stats_slot);
            MapFlags::EXIST
        };
        if write == Write::Added && val.stats_slot == 0 {
            // no counter slot left: its counters are an entry of ila_route_stats, made here
            // so that a full map grows (the translator cannot grow it)
            self.make_counter(&self.route_stats, "ila_route_stats", key.as_bytes())?;
        }
        match self.routes.put(key.as_bytes(), val.as_bytes(), flags) {
            Ok(()) => Ok(Outcome::Write(write)),
            Err(e) if e.kind() == libbpf_rs::ErrorKind::AlreadyExists => {
                self.free_slot(val.stats_slot);
                Ok(Outcome::Refuse(Refusal::Exists))
            }
            Err(e) => {
                if write == Write::Added {
                    self.free_slot(val.stats_slot);
                }
                Err(Error::libbpf("write ila_routes")(e))
            }
        }
    }

    /// Delete the route for this prefix; `false` if there was none.
    pub fn delete_route(&self, dst: Ipv6Net) -> Result<bool, Error> {
        let key = IlaRouteKey::of(dst);
        let slot = self.route_val(&key)?.map_or(0, |v| v.stats_slot);
        match self.routes.remove(key.as_bytes()) {
            Ok(()) => {
                let _ = self.route_stats.remove(key.as_bytes());
                self.free_slot(slot);
                Ok(true)
            }
            Err(e) if not_found(&e) => Ok(false),
            Err(e) => Err(Error::libbpf("delete from ila_routes")(e)),
        }
    }

    /// Packets and bytes translated by the route for this prefix.
    pub fn route_counter(&self, dst: Ipv6Net) -> Result<Counts, Error> {
        self.route_counter_at(&IlaRouteKey::of(dst))
            .map(Counts::from)
    }

    fn route_counter_at(&self, key: &IlaRouteKey) -> Result<IlaCounter, Error> {
        let key = *key;
        if let Some(slot) = self
            .route_val(&key)?
            .map(|v| v.stats_slot)
            .filter(|s| *s != 0)
        {
            return self.slot_counter(slot);
        }
        Ok(self
            .route_stats
            .lookup_percpu(key.as_bytes(), MapFlags::ANY)
            .map_err(Error::libbpf("read ila_route_stats"))?
            .map(|v| sum_percpu(&v))
            .unwrap_or_default())
    }

    // ---- the programs' verdicts ----------------------------------------------------------

    /// What the programs did with the packets they saw, by reason, summed over CPUs.
    pub fn reasons(&self) -> Result<Vec<(Reason, u64)>, Error> {
        let mut out = Vec::new();
        for r in Reason::ALL {
            let v = self
                .reasons
                .lookup_percpu(&(r as u32).to_ne_bytes(), MapFlags::ANY)
                .map_err(Error::libbpf("read ila_reasons"))?
                .unwrap_or_default();
            let n = v
                .iter()
                .filter_map(|b| <[u8; 8]>::try_from(b.get(..8)?).ok())
                .map(u64::from_ne_bytes)
                .fold(0u64, u64::wrapping_add);
            out.push((r, n));
        }
        Ok(out)
    }
}

/// Remove the ILA tables of the calling thread's namespace (detach the anchor, unpin).
pub fn destroy(cookie: u64) -> Result<(), Error> {
    pinned::destroy(&SUITE, cookie)
}

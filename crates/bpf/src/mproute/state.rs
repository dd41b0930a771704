//! mproute's per-namespace state (a [`Suite`] of [`crate::pinned`]): the maps of
//! `bpf/mproute/maps.bpf.h`, held by the anchor `mpt_anchor` of `bpf/mproute/state.bpf.c`. This
//! module reads and writes the control plane's record (`mpt_meta`, `mpt_routes`); the
//! dataplane's tables are in [`super::route_table`].

use crate::log::Traced;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use mpt_model::{Algo, RouteKey};

use super::abi::{MptMeta, MptRouteKey, MptRouteVal, ABI_VERSION};
use crate::error::Error;
use crate::pinned::{self, Pinned, Suite};
use crate::skel::mproute::state::StateSkelBuilder;

/// Every map the anchor holds (`bpf/mproute/maps.bpf.h`).
pub const STATE_MAPS: &[&str] = &[
    "mpt_meta",
    "mpt_routes",
    "mpt_lpm4",
    "mpt_lpm6",
    "mpt_groups",
    "mpt_stats",
    "mpt_res",
    "mpt_slot_stats",
    "mpt_pcpu",
    "mpt_reasons",
];

/// mproute's suite: `/sys/fs/bpf/mproute/<cookie>/`, `/run/mproute/<cookie>.lock`.
pub static SUITE: Suite = Suite {
    name: "mproute",
    anchor: ANCHOR_PROG,
    maps: STATE_MAPS,
    meta_map: "mpt_meta",
    abi_version: ABI_VERSION,
};

/// Name of the anchor program (as the kernel truncates it: at most 15 characters).
pub const ANCHOR_PROG: &str = "mpt_anchor";
/// `mpt_meta.flags`: the kernel was checked for native `RTA_MP_ALGO` support.
pub const META_F_NATIVE_CHECKED: u32 = 1;
/// `mpt_meta.flags`: the kernel keeps `RTA_MP_ALGO` (no current kernel does).
pub const META_F_NATIVE: u32 = 2;

/// What the state records of one managed route (a value of `mpt_routes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteRecord {
    /// Its algorithm.
    pub algo: Algo,
    /// Number of nexthops when it was written.
    pub nh_count: u8,
    /// Dataplane group the route points at (0 = none yet).
    pub group: u32,
    /// `rtm_protocol` it was installed with (0: not recorded, an older state).
    pub protocol: u8,
    /// Its hash recipe (`hash-fields`, `seed`).
    pub recipe: mpt_model::hash::HashRecipe,
}

impl RouteRecord {
    fn of(v: &MptRouteVal) -> RouteRecord {
        RouteRecord {
            algo: Algo::from_u32(u32::from(v.algo)).unwrap_or_default(),
            nh_count: v.nh_count,
            group: v.nh_group,
            protocol: v.protocol,
            recipe: mpt_model::hash::HashRecipe {
                fields: (v.hash_fields != 0).then_some(mpt_model::hash::HashFields(v.hash_fields)),
                seed: (v.flags & super::abi::ROUTE_F_SEED != 0).then_some(v.seed),
            },
        }
    }

    fn val(&self) -> MptRouteVal {
        MptRouteVal {
            // the algorithm numbers are the wire values (checked in `abi`)
            algo: self.algo.as_u32() as u8,
            flags: if self.recipe.seed.is_some() {
                super::abi::ROUTE_F_SEED
            } else {
                0
            },
            nh_count: self.nh_count,
            protocol: self.protocol,
            nh_group: self.group,
            hash_fields: self.recipe.fields.map_or(0, |f| f.0),
            reserved: 0,
            seed: self.recipe.seed.unwrap_or(0),
        }
    }
}

/// The open state of the calling thread's namespace.
#[derive(Debug)]
pub struct RouteState {
    /// The maps, the namespace's cookie and the anchor.
    pub pinned: Pinned,
    meta: MapHandle,
    routes: MapHandle,
    /// Which `mpt_slot_stats` slots are taken, as recorded in slot 0 (see `route_table.rs`):
    /// read on first use, written through (commands hold the namespace lock while they write).
    pub(crate) slots: std::sync::Mutex<Option<Vec<bool>>>,
    /// Whether `mpt_res` holds any table: 0 not read yet, 1 none, 2 some (so that a bulk
    /// install of plain routes never looks for tables).
    pub(crate) res_any: std::sync::atomic::AtomicU8,
    /// The LPM keys this process wrote, if both tries were empty when it first wrote one
    /// (`None`: not known to have been empty, so every write looks its key up first). With
    /// the namespace locked nobody else writes them, so a key not in the set has no entry:
    /// a bulk install into an empty table needs no lookup per route.
    pub(crate) lpm_written: std::sync::Mutex<Option<Option<rustc_hash::FxHashSet<SetKey>>>>,
    /// The same for `mpt_routes`: the state keys this process wrote, if the map was empty
    /// when it first wrote one.
    routes_written: std::sync::Mutex<Option<Option<rustc_hash::FxHashSet<SetKey>>>>,
    /// Writes of keys known to be absent (see `lpm_written`, `routes_written`), held back and
    /// made with one `BPF_MAP_UPDATE_BATCH` per map by [`RouteState::flush`] before any
    /// other access to the state's maps (every accessor flushes first), and by the batch
    /// driver (flush, or [`RouteState::hand_off`] for the tries) before it sends a window of
    /// routes to the FIB, so the maps still precede the FIB. One syscall per map and window
    /// instead of one per entry.
    deferred: std::sync::Mutex<[Batch; 3]>,
    /// `mpt_lpm4` and `mpt_lpm6`, for the writes handed to another thread
    /// ([`RouteState::hand_off`]).
    lpm: std::sync::Arc<[MapHandle; 2]>,
    /// The handed-off writes not made yet: every accessor waits for them (in `flush`).
    handed: std::sync::Arc<Handed>,
}

/// A map key as the bookkeeping sets (`lpm_written`, `routes_written`) hold it: its bytes,
/// zero-padded, and its length. Inline, so that recording a route costs no allocation.
pub(crate) type SetKey = ([u8; SET_KEY_MAX], u8);
const SET_KEY_MAX: usize = 28;
const _: () = assert!(
    std::mem::size_of::<MptRouteKey>() <= SET_KEY_MAX
        && std::mem::size_of::<super::abi::MptLpm6Key>() <= SET_KEY_MAX
        && std::mem::size_of::<super::abi::MptLpm4Key>() <= SET_KEY_MAX
);

/// `bytes` (a key of at most [`SET_KEY_MAX`] bytes, as the assertion above has them) as a
/// [`SetKey`].
pub(crate) fn set_key(bytes: &[u8]) -> SetKey {
    let mut k = [0u8; SET_KEY_MAX];
    let n = bytes.len().min(SET_KEY_MAX);
    k[..n].copy_from_slice(&bytes[..n]);
    (k, n as u8)
}

/// Count of the LPM writes handed to another thread and not made yet.
#[derive(Debug, Default)]
struct Handed {
    out: std::sync::Mutex<usize>,
    done: std::sync::Condvar,
}

impl Handed {
    /// One more handed over.
    fn add(&self) {
        *self.out.lock().unwrap_or_else(|e| e.into_inner()) += 1;
    }

    /// One made or dropped.
    fn settled(&self) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        *out = out.saturating_sub(1);
        self.done.notify_all();
    }

    /// Wait until every one handed over is made or dropped.
    fn wait(&self) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        while *out > 0 {
            out = self.done.wait(out).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// A window's held-back LPM writes, handed to another thread to make (see
/// [`RouteState::hand_off`]). Until they are made or dropped, every access to the state's
/// maps waits for them.
#[derive(Debug)]
pub struct LpmWrites {
    batches: [Batch; 2],
    maps: std::sync::Arc<[MapHandle; 2]>,
    handed: std::sync::Arc<Handed>,
}

impl LpmWrites {
    /// Make the writes, one `BPF_MAP_UPDATE_BATCH` per trie. On failure the writes not made
    /// are dropped, as by [`RouteState::flush`].
    pub fn write(self) -> Result<(), Error> {
        for (b, map) in self.batches.iter().zip(self.maps.iter()) {
            b.write(map, "write the LPM trie")?;
        }
        Ok(())
    }
}

impl Drop for LpmWrites {
    fn drop(&mut self) {
        self.handed.settled();
    }
}

/// Entries for one map, keys and values packed as `BPF_MAP_UPDATE_BATCH` takes them.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    keys: Vec<u8>,
    vals: Vec<u8>,
    n: u32,
}

impl Batch {
    /// Write the entries into `map` (one `BPF_MAP_UPDATE_BATCH`, none if empty); `what`
    /// names the write in the error.
    fn write(&self, map: &MapHandle, what: &'static str) -> Result<(), Error> {
        /// Kernels whose LPM tries have no batch operations (5.10: `ENOTSUPP`, 524): one update
        /// per entry instead, from the first refusal on.
        static ONE_BY_ONE: std::sync::atomic::AtomicBool =
            std::sync::atomic::AtomicBool::new(false);
        const ENOTSUPP: i32 = 524;
        if self.n == 0 {
            return Ok(());
        }
        if !ONE_BY_ONE.load(std::sync::atomic::Ordering::Relaxed) {
            match map.put_batch(&self.keys, &self.vals, self.n, MapFlags::ANY, MapFlags::ANY) {
                Ok(()) => return Ok(()),
                Err(e)
                    if matches!(
                        errno_of(&e),
                        Some(ENOTSUPP | libc::EOPNOTSUPP | libc::EINVAL)
                    ) && map.map_type() == libbpf_rs::MapType::LpmTrie =>
                {
                    ONE_BY_ONE.store(true, std::sync::atomic::Ordering::Relaxed);
                }
                Err(e) => return Err(full_or(what, e)),
            }
        }
        let n = self.n as usize;
        let (ks, vs) = (self.keys.len() / n.max(1), self.vals.len() / n.max(1));
        for (k, v) in self.keys.chunks_exact(ks).zip(self.vals.chunks_exact(vs)) {
            map.put(k, v, MapFlags::ANY).map_err(|e| full_or(what, e))?;
        }
        Ok(())
    }
}

/// `e` of a write `what`: a full map ([`crate::grow::FULL`]) as [`crate::error::ErrorKind::Full`]
/// (which the writer answers by growing the map), anything else as libbpf's.
fn full_or(what: &'static str, e: libbpf_rs::Error) -> Error {
    Error::full_or_libbpf(what, "routes", super::abi::MAX_ROUTES)(e)
}

/// The errno in a libbpf-rs error, if it carries one.
fn errno_of(e: &libbpf_rs::Error) -> Option<i32> {
    let s = e.to_string();
    s.rsplit("(os error ")
        .next()?
        .trim_end_matches(')')
        .parse()
        .ok()
}

/// Index in `RouteState::deferred`.
pub(crate) const DEFER_ROUTES: usize = 0;
pub(crate) const DEFER_LPM4: usize = 1;
pub(crate) const DEFER_LPM6: usize = 2;

/// Load the anchor object, reusing the pins of `pins` or initialising `mpt_meta` for `cookie`.
fn load_anchor(pins: Option<&Path>, cookie: u64) -> Result<OwnedFd, Error> {
    let mut obj = MaybeUninit::uninit();
    let mut open = StateSkelBuilder::default()
        .open(&mut obj)
        .map_err(Error::libbpf("open the state BPF object"))?;
    if let Some(dir) = pins {
        pinned::reuse_pins(dir, open.open_object_mut().maps_mut())?;
    }
    let skel = Error::loading("load the state BPF object", || open.load())?;
    if pins.is_none() {
        let meta = MptMeta {
            abi_version: ABI_VERSION,
            hash_seed: pinned::random_u32(),
            netns_cookie: cookie,
            flags: 0,
            fib4_gen: 0,
        };
        skel.maps
            .mpt_meta
            .put(&0u32.to_ne_bytes(), meta.as_bytes(), MapFlags::ANY)
            .map_err(Error::libbpf("initialise mpt_meta"))?;
    }
    skel.progs
        .mpt_anchor
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| Error::io("keep the state anchor", e))
}

impl RouteState {
    /// Open the namespace's state; create it when `create` and it does not exist yet. Returns
    /// `None` when there is no state and `create` is false.
    pub fn open(cookie: u64, create: bool) -> Result<Option<RouteState>, Error> {
        let Some(pinned) = Pinned::open(&SUITE, cookie, create, Box::new(load_anchor))? else {
            return Ok(None);
        };
        let meta = pinned.dup("mpt_meta")?;
        let routes = pinned.dup("mpt_routes")?;
        let lpm = std::sync::Arc::new([pinned.dup("mpt_lpm4")?, pinned.dup("mpt_lpm6")?]);
        Ok(Some(RouteState {
            pinned,
            meta,
            routes,
            slots: std::sync::Mutex::new(None),
            res_any: std::sync::atomic::AtomicU8::new(0),
            lpm_written: std::sync::Mutex::new(None),
            routes_written: std::sync::Mutex::new(None),
            deferred: std::sync::Mutex::new(Default::default()),
            lpm,
            handed: Default::default(),
        }))
    }

    /// The namespace's cookie.
    pub fn cookie(&self) -> u64 {
        self.pinned.cookie
    }

    /// One of the state's maps.
    pub fn map(&self, name: &str) -> Result<&MapHandle, Error> {
        self.flush()?;
        self.pinned.map(name)
    }

    /// A map that no write is ever held back for (the counter slots), without a flush.
    pub(crate) fn undeferred_map(&self, name: &str) -> Result<&MapHandle, Error> {
        self.pinned.map(name)
    }

    /// Hold back the write of `key` (known to be absent) to deferred map `which`.
    pub(crate) fn defer(&self, which: usize, key: &[u8], val: &[u8]) {
        let mut g = self.deferred.lock().unwrap_or_else(|e| e.into_inner());
        let b = &mut g[which];
        b.keys.extend_from_slice(key);
        b.vals.extend_from_slice(val);
        b.n += 1;
    }

    /// Replace the held-back value of state key `key`, looking from the newest entry back;
    /// `false` if no write of it is held back.
    fn replace_deferred(&self, key: &[u8], val: &[u8]) -> bool {
        let mut g = self.deferred.lock().unwrap_or_else(|e| e.into_inner());
        let b = &mut g[DEFER_ROUTES];
        let (kl, vl) = (key.len(), val.len());
        for i in (0..b.n as usize).rev() {
            if b.keys.get(i * kl..(i + 1) * kl) == Some(key) {
                if let Some(v) = b.vals.get_mut(i * vl..(i + 1) * vl) {
                    v.copy_from_slice(val);
                    return true;
                }
            }
        }
        false
    }

    /// Make the held-back writes, one `BPF_MAP_UPDATE_BATCH` per map. On failure the writes
    /// not made are dropped (the caller undoes the routes they belonged to, as after a FIB
    /// refusal) and the error says which map refused.
    pub fn flush(&self) -> Result<(), Error> {
        self.handed.wait();
        match self.hand_off()? {
            Some(lpm) => lpm.write(),
            None => Ok(()),
        }
    }

    /// Make the held-back writes to `mpt_routes` now and hand those to the LPM tries over, to
    /// be made (by another thread) with [`LpmWrites::write`] before the routes they belong
    /// to go to the FIB; `None` if there are none. Until they are made or dropped, every
    /// access to the state's maps waits for them, so none sees the tries without them.
    pub fn hand_off(&self) -> Result<Option<LpmWrites>, Error> {
        let [routes, lpm4, lpm6] = {
            let mut g = self.deferred.lock().unwrap_or_else(|e| e.into_inner());
            std::mem::take(&mut *g)
        };
        loop {
            match routes.write(&self.routes, "write mpt_routes") {
                Err(e) if e.errno() == Some(crate::grow::FULL) => self.grow_routes(routes.n)?,
                r => break r?,
            }
        }
        if lpm4.n == 0 && lpm6.n == 0 {
            return Ok(None);
        }
        self.handed.add();
        Ok(Some(LpmWrites {
            batches: [lpm4, lpm6],
            maps: self.lpm.clone(),
            handed: self.handed.clone(),
        }))
    }

    /// Pin the maps if they are not (see [`Pinned::ensure_pinned`]).
    pub fn ensure_pinned(&self) {
        self.pinned.ensure_pinned();
    }

    /// The seed of the dataplane's hash based algorithms.
    pub fn hash_seed(&self) -> Result<u32, Error> {
        Ok(self.meta()?.hash_seed)
    }

    /// `mpt_meta.flags` ([`META_F_NATIVE_CHECKED`], [`META_F_NATIVE`], ...).
    pub fn meta_flags(&self) -> Result<u32, Error> {
        Ok(self.meta()?.flags)
    }

    /// The meta record.
    pub(crate) fn meta(&self) -> Result<MptMeta, Error> {
        let v = self
            .meta
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(Error::libbpf("read mpt_meta"))?
            .unwrap_or_default();
        MptMeta::from_bytes(&v).ok_or_else(|| Error {
            what: String::new(),
            kind: crate::error::ErrorKind::Abi {
                suite: SUITE.name,
                found: 0,
                ours: ABI_VERSION,
            },
        })
    }

    /// Set bits in `mpt_meta.flags`.
    pub fn set_meta_flags(&self, bits: u32) -> Result<(), Error> {
        let mut m = self.meta()?;
        m.flags |= bits;
        self.meta
            .put(&0u32.to_ne_bytes(), m.as_bytes(), MapFlags::ANY)
            .map_err(Error::libbpf("write mpt_meta"))
    }

    /// Record the IPv4 FIB generation at which the `DPR_F_VERIFIED` flags were verified, or
    /// (`None`) that none is: the dataplane then checks every managed packet with the kernel.
    pub fn set_fib4_gen(&self, generation: Option<u32>) -> Result<(), Error> {
        let mut m = self.meta()?;
        match generation {
            Some(g) => {
                m.flags |= super::abi::META_F_FIB4_GEN;
                m.fib4_gen = g;
            }
            None => {
                m.flags &= !super::abi::META_F_FIB4_GEN;
                m.fib4_gen = 0;
            }
        }
        self.meta
            .put(&0u32.to_ne_bytes(), m.as_bytes(), MapFlags::ANY)
            .map_err(Error::libbpf("write mpt_meta"))
    }

    /// The IPv4 FIB generation recorded by [`RouteState::set_fib4_gen`].
    pub fn fib4_gen(&self) -> Result<Option<u32>, Error> {
        let m = self.meta()?;
        Ok((m.flags & super::abi::META_F_FIB4_GEN != 0).then_some(m.fib4_gen))
    }

    /// Look a route up.
    pub fn get(&self, key: &RouteKey) -> Result<Option<RouteRecord>, Error> {
        self.get_raw(&MptRouteKey::of(key))
    }

    fn get_raw(&self, key: &MptRouteKey) -> Result<Option<RouteRecord>, Error> {
        self.flush()?;
        Ok(self
            .routes
            .lookup(key.as_bytes(), MapFlags::ANY)
            .map_err(Error::libbpf("read mpt_routes"))?
            .and_then(|v| MptRouteVal::from_bytes(&v))
            .map(|v| RouteRecord::of(&v)))
    }

    /// Insert or overwrite a route.
    pub fn put(&self, key: &RouteKey, rec: &RouteRecord) -> Result<(), Error> {
        let (key, val) = (&MptRouteKey::of(key), &rec.val());
        // a route whose write is held back (its group learnt after the write): the held-back
        // value is replaced, newest first, as the write it stands for would have been
        if self.replace_deferred(key.as_bytes(), val.as_bytes()) {
            return Ok(());
        }
        self.flush()?;
        if let Some(Some(set)) = self
            .routes_written
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
        {
            set.insert(set_key(key.as_bytes()));
        }
        loop {
            match self
                .routes
                .put(key.as_bytes(), val.as_bytes(), MapFlags::ANY)
            {
                Err(e) if crate::grow::is_full(&e) => self.grow_routes(0)?,
                r => return r.map_err(Error::libbpf("write mpt_routes")),
            }
        }
    }

    /// Make room for `more` routes besides those `mpt_routes` holds: grow it (see
    /// [`crate::grow`]) and the per-route maps the dataplane fills (`mpt_stats`, `mpt_pcpu`:
    /// one entry per route at most) to the same capacity. [`crate::error::ErrorKind::Full`]
    /// at [`super::abi::MAX_ROUTES`].
    fn grow_routes(&self, more: u32) -> Result<(), Error> {
        let limit = crate::grow::Limit {
            things: "routes",
            most: super::abi::MAX_ROUTES,
        };
        let cap = crate::grow::capacity(&self.routes, "mpt_routes")?;
        let cap = self
            .pinned
            .grow("mpt_routes", cap.saturating_add(more), limit, false)?;
        // `routes` is a descriptor of its own: it names the new map too
        crate::grow::redirect(&self.routes, self.pinned.map("mpt_routes")?, "mpt_routes")?;
        // their entries of routes that are gone (a packet in flight can make one again just
        // after the route's deletion) are left behind
        let mut routes: Option<rustc_hash::FxHashSet<Vec<u8>>> = None;
        for (name, counters) in [("mpt_stats", true), ("mpt_pcpu", false)] {
            if crate::grow::capacity(self.pinned.map(name)?, name)? < cap {
                if routes.is_none() {
                    let all = crate::batch::read_all(&self.routes, "mpt_routes")?;
                    routes = Some(all.iter().map(|(k, _)| k.to_vec()).collect());
                }
                let held = routes.as_ref();
                let keep = |k: &[u8]| held.is_none_or(|r| r.contains(k));
                self.pinned
                    .grow_keeping(name, cap, limit, counters, &keep)?;
            }
        }
        Ok(())
    }

    /// The capacity of the per-route maps now (they grow with the table).
    pub fn route_capacity(&self) -> Result<u32, Error> {
        crate::grow::capacity(&self.routes, "mpt_routes")
    }

    /// Insert a route that must not exist yet; `false` (and nothing written) if it exists.
    pub fn insert_new(&self, key: &RouteKey, rec: &RouteRecord) -> Result<bool, Error> {
        let (key, val) = (&MptRouteKey::of(key), &rec.val());
        // a key this process has not written into a map that was empty: certainly new
        {
            let mut g = self
                .routes_written
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if g.is_none() {
                self.flush()?;
                *g = Some(
                    self.routes
                        .keys()
                        .next()
                        .is_none()
                        .then(rustc_hash::FxHashSet::default),
                );
            }
            if let Some(Some(set)) = g.as_mut() {
                if set.insert(set_key(key.as_bytes())) {
                    drop(g);
                    self.defer(DEFER_ROUTES, key.as_bytes(), val.as_bytes());
                    return Ok(true);
                }
            }
        }
        self.flush()?;
        loop {
            match self
                .routes
                .put(key.as_bytes(), val.as_bytes(), MapFlags::NO_EXIST)
            {
                Ok(()) => return Ok(true),
                Err(e) if e.kind() == libbpf_rs::ErrorKind::AlreadyExists => return Ok(false),
                Err(e) if crate::grow::is_full(&e) => self.grow_routes(0)?,
                Err(e) => return Err(Error::libbpf("write mpt_routes")(e)),
            }
        }
    }

    /// Delete a route; `false` if it was not there.
    pub fn delete(&self, key: &RouteKey) -> Result<bool, Error> {
        self.flush()?;
        match self.routes.remove(MptRouteKey::of(key).as_bytes()) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::libbpf("delete from mpt_routes")(e)),
        }
    }

    /// Delete many routes, in batches; returns how many were there.
    pub fn delete_many(&self, keys: &[RouteKey]) -> Result<usize, Error> {
        self.flush()?;
        let mut ids = Vec::with_capacity(keys.len() * MptRouteKey::SIZE);
        for k in keys {
            ids.extend_from_slice(MptRouteKey::of(k).as_bytes());
        }
        crate::batch::delete_keys(&self.routes, &ids, "mpt_routes")
    }

    /// Every route in the state (keys that are no route identity left out).
    pub fn entries(&self) -> Result<Vec<(RouteKey, RouteRecord)>, Error> {
        self.flush()?;
        // one BPF_MAP_LOOKUP_BATCH per 4096 routes, not two system calls per route
        let all = crate::batch::read_all(&self.routes, "mpt_routes")?;
        Ok(all
            .iter()
            .filter_map(|(k, v)| {
                let rk = MptRouteKey::from_bytes(k)?.route_key()?;
                Some((rk, RouteRecord::of(&MptRouteVal::from_bytes(v)?)))
            })
            .collect())
    }
}

/// Remove the state of the calling thread's namespace (`mproute sync --reset`, tests): detach
/// the anchor and unpin.
pub fn destroy(cookie: u64) -> Result<(), Error> {
    pinned::destroy(&SUITE, cookie)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two LPM tries as the state has them (root: BPF maps).
    fn tries() -> std::sync::Arc<[MapHandle; 2]> {
        let opts = libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_map_create_opts>() as _,
            map_flags: libbpf_sys::BPF_F_NO_PREALLOC,
            ..Default::default()
        };
        let trie = |key: usize| {
            MapHandle::create(
                libbpf_rs::MapType::LpmTrie,
                Some("mpt_test_lpm"),
                key as u32,
                std::mem::size_of::<super::super::abi::MptDpRoute>() as u32,
                16,
                &opts,
            )
            .expect("LPM trie (root)")
        };
        std::sync::Arc::new([
            trie(std::mem::size_of::<super::super::abi::MptLpm4Key>()),
            trie(std::mem::size_of::<super::super::abi::MptLpm6Key>()),
        ])
    }

    /// Handed-off trie writes: waiting returns once each is made or dropped unwritten (a
    /// worker gone), and only the written one is in the trie.
    #[test]
    fn handed_writes_are_waited_for_until_made_or_dropped() {
        let maps = tries();
        let handed = std::sync::Arc::new(Handed::default());
        let val = vec![0u8; std::mem::size_of::<super::super::abi::MptDpRoute>()];
        let key = |a: u8| {
            let mut k = vec![0u8; std::mem::size_of::<super::super::abi::MptLpm4Key>()];
            k[..4].copy_from_slice(&(32u32 + 24).to_ne_bytes());
            k[8..12].copy_from_slice(&[198, 18, a, 0]);
            k
        };
        let writes = |a: u8| {
            handed.add();
            LpmWrites {
                batches: [
                    Batch {
                        keys: key(a),
                        vals: val.clone(),
                        n: 1,
                    },
                    Batch::default(),
                ],
                maps: maps.clone(),
                handed: handed.clone(),
            }
        };
        let (made, dropped) = (writes(1), writes(2));
        let (tx, rx) = std::sync::mpsc::channel();
        let h = handed.clone();
        let waiter = std::thread::spawn(move || {
            h.wait();
            let _ = tx.send(());
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            rx.try_recv().is_err(),
            "returned with two writes outstanding"
        );
        made.write().expect("trie write");
        assert!(
            rx.recv_timeout(std::time::Duration::from_millis(50))
                .is_err(),
            "returned with one outstanding"
        );
        std::thread::spawn(move || drop(dropped))
            .join()
            .expect("dropped on another thread");
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .expect("wait returns once the last is dropped");
        waiter.join().expect("waiter");
        let found = |a: u8| maps[0].lookup(&key(a), MapFlags::ANY).expect("lookup");
        assert!(found(1).is_some() && found(2).is_none());
    }
}

//! One invocation's hold on the namespace: its netlink socket, mproute's state (and its lock),
//! a cache of the FIB tables it has read, the index of kernel nexthop objects, and what must be
//! done at the end (objects and groups to collect, routes to verify). Every command runs on a
//! [`Session`]; the lines of a batch share one.
//!
//! Here: opening what a command needs on first use, the FIB cache, garbage collection of
//! nexthop objects and dataplane groups, and who enforces a managed route. What works on a
//! session is above it: the route transaction (`txn.rs`), batches (`pipeline.rs`), FIB
//! verification (`verify.rs`), drift repair (`repair.rs`).

use std::collections::{HashMap, HashSet};

use rustc_hash::FxHashMap;

use mpt_cli::{names, Failure, GlobalOpts};
use mpt_model::{Family, Route, RouteKey, MPROUTE_PROTO, MPROUTE_PROTO_NAME};
use mpt_netlink::msg::rtnl::route as rmsg;
use mpt_netlink::sock::Socket;

use crate::kernel_nh::NhIndex;
use crate::store::{Managed, Store};

/// Sockets, state and a cache of the FIB, shared by the lines of a batch.
pub struct Session {
    /// Global options.
    pub opts: GlobalOpts,
    pub(crate) sock: Option<Socket>,
    pub(crate) store: Option<Store>,
    pub(crate) store_checked: bool,
    // Fx: hashed once or more per batch line; no flooding to fear from our own keys
    pub(crate) fib: FxHashMap<(Family, u32), FxHashMap<RouteKey, Route>>,
    pub(crate) nh: Option<Option<NhIndex>>,
    pub(crate) gc_needed: bool,
    pub(crate) dp_groups_known: HashSet<u32>,
    pub(crate) dp_groups_by_content: FxHashMap<u32, u32>,
    /// Install routes as references to kernel nexthop objects (`--nexthop-objects`).
    pub use_nh_objects: bool,
    /// Routes or attachments may have changed: verify the managed routes for the dataplane's
    /// FIB check at the end (`verify.rs`, `arm`).
    pub(crate) arm_needed: bool,
    /// The FIB generation reader (a small BPF program), loaded on first use.
    pub(crate) fibgen: Option<mpt_bpf::mproute::fib_generation::FibGenReader>,
    /// The invocation only reads (show): the state is opened without the lock, and where
    /// this user cannot read it the routes are shown without it (a warning says so).
    pub read_only: bool,
    /// `--check`: what earlier lines of the dry run would have left in mproute's state (the
    /// FIB's side is in the cache, `fib`): `None` for a route no longer managed.
    pub(crate) check_state: HashMap<RouteKey, Option<Managed>>,
    /// The nexthop objects the routes a `flush` of every table leaves reference, from its
    /// plan's dump (taken by the flush that carries the plan out).
    pub(crate) flush_referenced: Option<HashSet<u32>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").finish_non_exhaustive()
    }
}

impl Session {
    /// A context for one invocation (already inside the target namespace).
    pub fn new(opts: GlobalOpts) -> Self {
        Session {
            opts,
            sock: None,
            store: None,
            store_checked: false,
            fib: FxHashMap::default(),
            nh: None,
            gc_needed: false,
            dp_groups_known: HashSet::new(),
            dp_groups_by_content: FxHashMap::default(),
            use_nh_objects: false,
            flush_referenced: None,
            arm_needed: false,
            fibgen: None,
            read_only: false,
            check_state: HashMap::new(),
        }
    }

    pub(crate) fn sock(&mut self) -> Result<&mut Socket, Failure> {
        if self.sock.is_none() {
            let s = Socket::route().map_err(Failure::from)?;
            s.set_rcvbuf(4 << 20);
            self.sock = Some(s);
        }
        self.sock
            .as_mut()
            .ok_or_else(|| Failure::system("netlink socket unavailable"))
    }

    pub(crate) fn store(&mut self, create: bool) -> Result<Option<&Store>, Failure> {
        // a dry run creates nothing and reads without the lock
        let create = create && !self.opts.check;
        if self.store.is_none() && (create || !self.store_checked) {
            self.store = if (self.read_only || self.opts.check) && !create {
                self.store_checked = true;
                match Store::open_unlocked() {
                    Ok(s) => s,
                    Err(f) if !nix::unistd::geteuid().is_root() => {
                        mpt_cli::error::eprint_once(
                            "mproute",
                            "warning",
                            &format!("mproute's state cannot be read as this user, routes are shown without their algorithms ({})", f.message),
                        );
                        None
                    }
                    Err(f) => return Err(f),
                }
            } else {
                let store = Store::open(create)?;
                let who = store
                    .as_ref()
                    .and_then(Store::interrupted)
                    .map(str::to_string);
                self.store = store;
                if let Some(who) = who {
                    if let Err(f) = self.repair_interrupted(&who) {
                        // not repaired: the next invocation tries again
                        if let Some(s) = self.store.as_mut() {
                            s.keep_journal();
                        }
                        return Err(f);
                    }
                }
                // a command that announced its changes (disarm) before the state was there
                if self.arm_needed {
                    if let Some(s) = self.store.as_mut() {
                        s.begin()?;
                    }
                }
                self.store.take()
            };
            self.store_checked = true;
            if create && self.store.is_some() {
                // Best effort: lets `ip route` print "proto mproute".
                let _ = names::register_proto(MPROUTE_PROTO, MPROUTE_PROTO_NAME);
            }
        }
        Ok(self.store.as_ref())
    }

    /// The routes of one table, from the cache or a dump. With several routes of one key
    /// (IPv4 alternatives added with append) the first, which the kernel uses, is kept.
    pub(crate) fn table(
        &mut self,
        fam: Family,
        table: u32,
    ) -> Result<&FxHashMap<RouteKey, Route>, Failure> {
        if !self.fib.contains_key(&(fam, table)) {
            let mut m = FxHashMap::default();
            for r in dump(self.sock()?, Some(fam), Some(table))? {
                m.entry(r.key).or_insert(r);
            }
            self.fib.insert((fam, table), m);
        }
        Ok(self.fib.get(&(fam, table)).unwrap_or(&EMPTY))
    }

    /// mproute's state for one route; in a dry run, as the earlier lines would have left it.
    pub(crate) fn managed(&mut self, key: &RouteKey) -> Result<Option<Managed>, Failure> {
        if let Some(m) = self.check_state.get(key) {
            return Ok(*m);
        }
        match self.store(false)? {
            Some(s) => s.get(key),
            None => Ok(None),
        }
    }

    pub(crate) fn find(&mut self, key: &RouteKey) -> Result<Option<Route>, Failure> {
        Ok(self.table(key.family(), key.table)?.get(key).cloned())
    }

    /// Keep the cache right after a change we made, without dumping the table again (a batch of
    /// 100,000 adds must not dump a growing table 100,000 times).
    pub(crate) fn cache_set(&mut self, key: &RouteKey, route: Option<Route>) {
        if let Some(t) = self.fib.get_mut(&(key.family(), key.table)) {
            match route {
                Some(r) => {
                    t.insert(*key, r);
                }
                None => {
                    t.remove(key);
                }
            }
        }
    }

    pub(crate) fn invalidate(&mut self, key: &RouteKey) {
        self.fib.remove(&(key.family(), key.table));
    }

    /// Run `f` with the nexthop-object index and the socket; `None` when the kernel has no
    /// nexthop objects.
    pub(crate) fn with_nh<R>(
        &mut self,
        f: impl FnOnce(&mut NhIndex, &mut Socket) -> R,
    ) -> Result<Option<R>, Failure> {
        if self.nh.is_none() {
            let mut idx = NhIndex::load(self.sock()?)?;
            // the objects managed routes name, present or deleted with their link (see restore)
            if let (Some(i), Some(s)) = (idx.as_mut(), self.store(false)?) {
                let given: HashMap<u32, usize> = s
                    .bpf()
                    .given_objects()
                    .map_err(|e| Failure::bpf("read dataplane state", e))?
                    .into_iter()
                    .map(|(id, paths)| (id, paths.len()))
                    .collect();
                i.skip_shrunk(|id| given.get(&id).copied());
                i.reserve(given.keys().copied());
            }
            self.nh = Some(idx);
        }
        self.sock()?;
        match (self.nh.as_mut(), self.sock.as_mut()) {
            (Some(Some(idx)), Some(sock)) => Ok(Some(f(idx, sock))),
            _ => Ok(None),
        }
    }

    /// Collect nexthop objects and dataplane groups no route uses any more.
    pub(crate) fn collect(&mut self) -> Result<(), Failure> {
        if !self.gc_needed {
            return Ok(());
        }
        self.gc_needed = false;
        let referenced: HashSet<u32> = dump(self.sock()?, None, None)?
            .iter()
            .filter_map(|r| r.nh_id)
            .collect();
        self.collect_with(&referenced, None)
    }

    /// [`Session::collect`], the nexthop objects the FIB's routes reference given (from a dump
    /// just taken: `sync`'s), and the groups the state's routes use if known (`sync` read it).
    pub(crate) fn collect_with(
        &mut self,
        referenced: &HashSet<u32>,
        used: Option<HashSet<u32>>,
    ) -> Result<(), Failure> {
        self.gc_needed = false;
        let collected = self
            .with_nh(|idx, sock| idx.collect(sock, referenced))?
            .transpose()?
            .unwrap_or_default();
        if let Some(s) = self.store(false)? {
            // Routes naming an object no FIB route references were deleted behind our back
            // (ip route del): forgotten with it, or restore would bring them back.
            if !collected.is_empty() {
                for (k, m) in s.all()? {
                    if collected.contains(&m.group) {
                        s.forget(&k, true)?;
                    }
                }
            }
            // Dataplane groups no managed route points at any more.
            let used: HashSet<u32> = match used {
                Some(u) if collected.is_empty() => u,
                _ => s.all()?.into_iter().map(|(_, m)| m.group).collect(),
            };
            let raw = s.bpf();
            let unused: Vec<u32> = raw
                .dp_group_ids()
                .map_err(|e| Failure::bpf("read dataplane state", e))?
                .into_iter()
                .filter(|id| !used.contains(id))
                .collect();
            let _ = raw.dp_delete_groups(&unused);
        }
        self.dp_groups_known.clear();
        self.dp_groups_by_content.clear();
        Ok(())
    }

    pub(crate) fn forget(&mut self, k: &RouteKey, promote: bool) -> Result<(), Failure> {
        if let Some(s) = self.store(false)? {
            s.forget(k, promote)?;
        }
        Ok(())
    }

    pub(crate) fn enforced_by(&mut self) -> Result<&'static str, Failure> {
        if self.store(false)?.and_then(Store::native) == Some(true) {
            return Ok("kernel");
        }
        let att = match mpt_bpf::mproute::dataplane::attachments() {
            Ok(a) => a,
            // without the state nothing is managed: who would enforce is moot
            Err(_) if self.read_only && self.store.is_none() => return Ok("unknown"),
            Err(e) => return Err(Failure::bpf("list dataplane attachments", e)),
        };
        Ok(
            if att
                .iter()
                .any(|a| a.mode != mpt_bpf::mproute::dataplane::Mode::Tc)
            {
                "xdp"
            } else if att.is_empty() {
                "none"
            } else {
                "tc"
            },
        )
    }

    /// Who enforces one managed route, given who enforces the namespace's (`enforced`): the
    /// dataplane only for a main-table route whose LPM entry is its own (not shadowed by a lower
    /// metric) and not set aside as drifted from the kernel's route.
    pub(crate) fn route_enforced_by(
        &mut self,
        enforced: &'static str,
        k: &RouteKey,
    ) -> Result<&'static str, Failure> {
        if !matches!(enforced, "xdp" | "tc") {
            return Ok(enforced);
        }
        if k.table != mpt_model::route::verify::TABLE_MAIN {
            return Ok("none");
        }
        let Some(s) = self.store(false)? else {
            return Ok("none");
        };
        let e = s
            .bpf()
            .dp_get_route(k)
            .map_err(|e| Failure::bpf("read the dataplane's routes", e))?;
        Ok(match e {
            Some(e) if e.id == *k && !e.flags.drift && !e.flags.foreign => enforced,
            _ => "none",
        })
    }
}

static EMPTY: std::sync::LazyLock<FxHashMap<RouteKey, Route>> =
    std::sync::LazyLock::new(FxHashMap::default);

/// Dump routes (unicast FIB entries, no cache clones) of one family or both, one table or all.
pub fn dump(
    sock: &mut Socket,
    fam: Option<Family>,
    table: Option<u32>,
) -> Result<Vec<Route>, Failure> {
    Ok(dump_msgs(sock, fam, table)?
        .into_iter()
        .map(|m| m.route)
        .collect())
}

/// [`dump`], with what the kernel said beyond the model (flags, preferred source, ...).
pub fn dump_msgs(
    sock: &mut Socket,
    fam: Option<Family>,
    table: Option<u32>,
) -> Result<Vec<rmsg::RouteMsg>, Failure> {
    let req = rmsg::dump_request(fam, table);
    let what = match table {
        Some(t) => format!("list routes of table {}", names::table_name(t)),
        None => "list routes".to_string(),
    };
    let payloads = match sock.dump(&req, &what) {
        Ok(p) => p,
        // IPv4 answers ENOENT for a table that does not exist yet: it is empty.
        Err(e) if e.errno() == Some(libc::ENOENT) => Vec::new(),
        Err(e) => return Err(Failure::from(e)),
    };
    let mut out = Vec::with_capacity(payloads.len());
    for p in payloads {
        let m = rmsg::decode(&p).map_err(|e| Failure::system(format!("{what}: {e}")))?;
        if let Some(m) = m {
            // RTM_F_CLONED (0x200): route cache entries are not routes.
            if m.rtm_flags & 0x200 != 0 {
                continue;
            }
            if table.is_some_and(|t| t != m.route.key.table) {
                continue;
            }
            out.push(m);
        }
    }
    Ok(out)
}

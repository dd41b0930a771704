//! The commands. Each returns an [`Output`]; nothing here prints.
//!
//! Consistency rule for every mutation: write our state first, then the FIB, and put the state
//! back if the kernel refuses; deletes go the other way (FIB first, then state). So the FIB and
//! the state agree after every command, a refused one included.

use std::collections::{HashMap, HashSet};

use mpt_cli::{names, Failure, GlobalOpts};
use mpt_model::route::RTNH_F_ONLINK;
use mpt_model::{Algo, Family, Nexthop, Route, RouteKey, Verb, MPROUTE_PROTO, MPROUTE_PROTO_NAME};
use mpt_netlink::msg::rtnl::route::{self as rmsg, PathForm, RouteRequest};
use mpt_netlink::sock::Socket;
use serde::Serialize;

use crate::nhobj::NhIndex;
use crate::parse::{self, RouteSpec};
use crate::resolve::{self, Resolved};
use crate::state::{Managed, Store};
use crate::view::{ActionRow, RouteRow};

/// What a command produced.
#[derive(Debug)]
pub enum Output {
    /// Routes for `show`.
    Routes(Vec<RouteRow>),
    /// `get`.
    Get(Box<crate::view::GetRow>),
    /// `dataplane show` (and attach/detach reports).
    Dataplane(crate::view::DataplaneView),
    /// A mutation's report.
    Change(ChangeReport),
    /// `flush` / `sync`.
    Actions {
        /// Whether anything changed.
        changed: bool,
        /// What was done.
        rows: Vec<ActionRow>,
    },
}

/// The JSON answer of a mutating command.
#[derive(Debug, Serialize)]
pub struct ChangeReport {
    /// Whether the FIB or the state changed.
    pub changed: bool,
    /// The verb.
    pub action: &'static str,
    /// Prefix.
    pub dst: String,
    /// Table id.
    pub table: u32,
    /// Metric.
    pub metric: u32,
    /// Algorithm after the command (null after del).
    pub algo: Option<String>,
}

/// Sockets, state and a cache of the FIB, shared by the lines of a batch.
pub struct Ctx {
    /// Global options.
    pub opts: GlobalOpts,
    sock: Option<Socket>,
    store: Option<Store>,
    store_checked: bool,
    fib: HashMap<(Family, u32), HashMap<RouteKey, Route>>,
    nh: Option<Option<NhIndex>>,
    gc_needed: bool,
    dp_groups_known: HashSet<u32>,
    dp_groups_by_content: HashMap<u32, u32>,
    /// Install routes as references to kernel nexthop objects (`--nexthop-objects`).
    pub use_nh_objects: bool,
    /// Routes or attachments may have changed: verify the managed routes for the dataplane's
    /// FIB check at the end ([`crate::fibcheck::arm`]).
    arm_needed: bool,
    /// The FIB generation reader (a small BPF program), loaded on first use.
    fibgen: Option<mpt_bpf::mproute::fib_generation::FibGenReader>,
}

/// A planned change whose FIB request is still to be sent.
#[derive(Debug)]
struct Pending {
    verb: Verb,
    key: RouteKey,
    op: String,
    req: mpt_netlink::msg::Request,
    protocol: u8,
    old_state: Option<Managed>,
    algo: Algo,
    created: Vec<u32>,
    route: Route,
    replaced: bool,
    /// Dataplane group of the route, and whether this command allocated it privately.
    group: u32,
    new_private: bool,
    /// LPM entry before the change, to put back if the kernel refuses.
    old_lpm: Option<mpt_bpf::mproute::abi::MptDpRoute>,
}

#[derive(Debug)]
enum Planned {
    Unchanged(Output),
    Send(Pending),
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx").finish_non_exhaustive()
    }
}

fn op_name(verb: Verb, key: &RouteKey) -> String {
    let mut s = format!("{} {}", verb.name(), key.dst);
    if key.table != mpt_model::names::RT_TABLE_MAIN {
        s.push_str(&format!(" table {}", names::table_name(key.table)));
    }
    s
}

impl Ctx {
    /// A context for one invocation (already inside the target namespace).
    pub fn new(opts: GlobalOpts) -> Self {
        Ctx {
            opts,
            sock: None,
            store: None,
            store_checked: false,
            fib: HashMap::new(),
            nh: None,
            gc_needed: false,
            dp_groups_known: HashSet::new(),
            dp_groups_by_content: HashMap::new(),
            use_nh_objects: false,
            arm_needed: false,
            fibgen: None,
        }
    }

    fn sock(&mut self) -> Result<&mut Socket, Failure> {
        if self.sock.is_none() {
            let s = Socket::route().map_err(Failure::from)?;
            s.set_rcvbuf(4 << 20);
            self.sock = Some(s);
        }
        self.sock
            .as_mut()
            .ok_or_else(|| Failure::system("netlink socket unavailable"))
    }

    fn store(&mut self, create: bool) -> Result<Option<&Store>, Failure> {
        if self.store.is_none() && (create || !self.store_checked) {
            self.store = Store::open(create)?;
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
    fn table(&mut self, fam: Family, table: u32) -> Result<&HashMap<RouteKey, Route>, Failure> {
        if !self.fib.contains_key(&(fam, table)) {
            let mut m = HashMap::new();
            for r in dump(self.sock()?, Some(fam), Some(table))? {
                m.entry(r.key).or_insert(r);
            }
            self.fib.insert((fam, table), m);
        }
        Ok(self.fib.get(&(fam, table)).unwrap_or(&EMPTY))
    }

    fn find(&mut self, key: &RouteKey) -> Result<Option<Route>, Failure> {
        Ok(self.table(key.family(), key.table)?.get(key).cloned())
    }

    /// Keep the cache right after a change we made, without dumping the table again (a batch of
    /// 100,000 adds must not dump a growing table 100,000 times).
    fn cache_set(&mut self, key: &RouteKey, route: Option<Route>) {
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

    fn invalidate(&mut self, key: &RouteKey) {
        self.fib.remove(&(key.family(), key.table));
    }

    /// Run one command given as a verb and its words.
    pub fn run(&mut self, verb: &str, args: &[String]) -> Result<Output, Failure> {
        if changes_routes(verb, args) {
            self.disarm()?;
        }
        let v = match verb {
            "add" => Verb::Add,
            "replace" => Verb::Replace,
            "append" => Verb::Append,
            "change" | "chg" => Verb::Change,
            "del" | "delete" => Verb::Del,
            "show" | "list" | "ls" | "lst" => return self.show(args),
            "flush" => return self.flush(args),
            "sync" => return self.sync(args),
            "get" => return self.get(args),
            "dataplane" | "dp" => return self.dataplane(args),
            other => {
                return Err(Failure::usage(format!(
                    "unknown command \"{other}\" (expected add, replace, append, change, del, show, flush or sync)"
                )))
            }
        };
        let spec = parse::parse_route(v, args)
            .map_err(|e| Failure::usage(format!("{}: {e}", v.name())))?;
        if v == Verb::Del {
            self.del(&spec)
        } else {
            self.modify(&spec)
        }
    }

    fn modify(&mut self, spec: &RouteSpec) -> Result<Output, Failure> {
        let p = match self.plan(spec)? {
            Planned::Unchanged(out) => return Ok(out),
            Planned::Send(p) => p,
        };
        let sent = self.sock()?.request(&p.req, &p.op);
        self.settle(
            p,
            sent.map_err(|e| match e {
                mpt_netlink::Error::Kernel(k) => k,
                other => mpt_netlink::KernelError {
                    op: other.to_string(),
                    errno: libc::EIO,
                    msg: None,
                    attr: None,
                },
            }),
        )
    }

    /// Run `f` with the nexthop-object index and the socket; `None` when the kernel has no
    /// nexthop objects.
    fn with_nh<R>(
        &mut self,
        f: impl FnOnce(&mut NhIndex, &mut Socket) -> R,
    ) -> Result<Option<R>, Failure> {
        if self.nh.is_none() {
            let idx = NhIndex::load(self.sock()?)?;
            self.nh = Some(idx);
        }
        self.sock()?;
        match (self.nh.as_mut(), self.sock.as_mut()) {
            (Some(Some(idx)), Some(sock)) => Ok(Some(f(idx, sock))),
            _ => Ok(None),
        }
    }

    /// Everything before the FIB request: resolve, decide, write our state, create nexthop
    /// objects. The FIB request itself is sent by the caller (alone or pipelined).
    fn plan(&mut self, spec: &RouteSpec) -> Result<Planned, Failure> {
        let r = resolve::resolve(spec)?;
        let op = op_name(spec.verb, &r.key);
        let old_fib = if matches!(spec.verb, Verb::Replace | Verb::Change) {
            self.find(&r.key)?
        } else {
            None
        };
        let protocol = r.proto.unwrap_or(MPROUTE_PROTO);
        let store = self
            .store(true)?
            .ok_or_else(|| Failure::system(format!("{op}: cannot create mproute state")))?;
        let mut new_state = Managed {
            algo: r.algo,
            nh_count: r.nexthops.len().min(255) as u8,
            group: 0,
            protocol,
        };
        // 1. state (then 2. FIB, 3. undo the state if the FIB refused, in settle()).
        let old_state = if spec.verb == Verb::Add && store.put_new(&r.key, new_state)? {
            None
        } else {
            let old = store.get(&r.key)?;
            // replace and change install the route as given, as ip route does (no algo: the
            // default, l3-hash); append adds nexthops to a route and keeps its algorithm.
            if !r.algo_given && spec.verb == Verb::Append {
                new_state.algo = old.map_or(Algo::L3Hash, |m| m.algo);
            }
            if matches!(spec.verb, Verb::Replace | Verb::Change) {
                if let Some(cur) = &old_fib {
                    // Unchanged only if the dataplane's group is the kernel's route too: a
                    // route changed behind mproute's back is settled by writing it again.
                    if same_paths(cur, &r, protocol)
                        && old.map(|m| m.algo) == Some(new_state.algo)
                        && old.is_some_and(|m| group_is_route(store.raw(), m.group, cur))
                    {
                        return Ok(Planned::Unchanged(Output::Change(report(
                            false,
                            spec.verb,
                            &r.key,
                            Some(new_state.algo),
                        ))));
                    }
                }
            }
            store.put(&r.key, new_state)?;
            old
        };
        // Kernel nexthop objects where possible (not for append: IPv6 merges appended paths
        // into the route, which a route referencing an object cannot take).
        let mut form = r.form;
        let mut created = Vec::new();
        if self.use_nh_objects && spec.verb != Verb::Append && NhIndex::usable(&r.nexthops) {
            let nexthops = r.nexthops.clone();
            let op2 = op.clone();
            let fam = r.key.family();
            if let Some(ens) = self.with_nh(|idx, sock| idx.ensure(sock, &op2, fam, &nexthops))? {
                match ens {
                    Ok(e) => {
                        form = PathForm::Object(e.id);
                        created = e.created;
                    }
                    Err(f) => {
                        if let Some(s) = self.store(false)? {
                            s.restore(&r.key, old_state)?;
                        }
                        return Err(f);
                    }
                }
            }
        }
        let nh_id = match form {
            PathForm::Object(id) => Some(id),
            _ => None,
        };
        // Dataplane maps, before the FIB like the rest of our state.
        let (group, new_private, old_lpm) =
            match self.dp_prepare(&r, nh_id, old_state, new_state.algo) {
                Ok(v) => v,
                Err(f) => {
                    if let Some(s) = self.store(false)? {
                        s.restore(&r.key, old_state)?;
                    }
                    self.drop_created(&created)?;
                    return Err(f);
                }
            };
        if group != new_state.group {
            new_state.group = group;
            if let Some(s) = self.store(false)? {
                s.put(&r.key, new_state)?;
            }
        }
        let req = rmsg::encode(&RouteRequest {
            verb: spec.verb,
            key: r.key,
            metric_given: r.metric_given,
            protocol: Some(protocol),
            nexthops: &r.nexthops,
            form,
            algo: new_state.algo,
        });
        Ok(Planned::Send(Pending {
            verb: spec.verb,
            key: r.key,
            op,
            req,
            protocol,
            old_state,
            algo: new_state.algo,
            created,
            route: Route {
                key: r.key,
                protocol,
                scope: 0,
                rtype: rmsg::RTN_UNICAST,
                nexthops: r.nexthops,
                nh_id,
                algo: None,
            },
            replaced: old_fib.is_some(),
            group,
            new_private,
            old_lpm,
        }))
    }

    /// Choose the route's dataplane group, write it if needed, and point the LPM entry at it.
    /// Returns (group, allocated here as private, LPM entry before).
    fn dp_prepare(
        &mut self,
        r: &Resolved,
        nh_id: Option<u32>,
        old_state: Option<Managed>,
        algo: Algo,
    ) -> Result<(u32, bool, Option<mpt_bpf::mproute::abi::MptDpRoute>), Failure> {
        let known = nh_id.is_some_and(|id| self.dp_groups_known.contains(&id));
        let store = self
            .store(false)?
            .ok_or_else(|| Failure::system("dataplane state unavailable"))?;
        let raw = store.raw();
        let ctx = |e| crate::state::fail("write dataplane state", e);
        let key = crate::state::to_key(&r.key);
        let nhs = dp_nexthops(&r.nexthops);
        let (group, new_private) = match nh_id {
            Some(id) => {
                if !known && !raw.dp_has_group(id).map_err(ctx)? {
                    raw.dp_put_group(id, &nhs).map_err(ctx)?;
                }
                (id, false)
            }
            // A nexthop without a device: the kernel picks it, and the group is rewritten
            // from the kernel's answer after the FIB took the route; private to the route.
            None if r.nexthops.iter().any(|n| n.ifindex == 0) => {
                let g = match old_state.map(|m| m.group) {
                    Some(g) if g >= mpt_bpf::mproute::route_table::PRIVATE_GROUP_BASE => g,
                    _ => raw.dp_private_group(key_hash(&r.key)).map_err(ctx)?,
                };
                raw.dp_put_group(g, &nhs).map_err(ctx)?;
                (g, true)
            }
            // Shared by every route with the same nexthops.
            None => {
                let content = nh_content_hash(&r.nexthops);
                match self.dp_groups_by_content.get(&content) {
                    Some(g) => (*g, false),
                    None => {
                        let store = self
                            .store(false)?
                            .ok_or_else(|| Failure::system("dataplane state unavailable"))?;
                        let (g, created) =
                            store.raw().dp_shared_group(content, &nhs).map_err(ctx)?;
                        self.dp_groups_by_content.insert(content, g);
                        (g, created)
                    }
                }
            }
        };
        let store = self
            .store(false)?
            .ok_or_else(|| Failure::system("dataplane state unavailable"))?;
        let raw = store.raw();
        let old = raw
            .dp_put_route(&key, algo.as_u32() as u8, group)
            .map_err(ctx)?;
        if let Some(id) = nh_id {
            self.dp_groups_known.insert(id);
        }
        Ok((group, new_private, old))
    }

    /// After the FIB answered: keep or undo.
    fn settle(
        &mut self,
        p: Pending,
        res: Result<(), mpt_netlink::KernelError>,
    ) -> Result<Output, Failure> {
        if let Err(e) = res {
            self.undo(&p)?;
            self.drop_created(&p.created)?;
            return Err(Failure::from(mpt_netlink::Error::Kernel(e)));
        }
        self.settle_ok(p)
    }

    /// Put our state and the LPM entry back as they were before `p` was planned.
    fn undo(&mut self, p: &Pending) -> Result<(), Failure> {
        if let Some(s) = self.store(false)? {
            s.restore(&p.key, p.old_state)?;
            let _ = s
                .raw()
                .dp_restore_route(&crate::state::to_key(&p.key), p.old_lpm);
        }
        if p.new_private {
            // Possibly shared with later lines of a batch: collected at the end if unused.
            self.gc_needed = true;
        }
        self.invalidate(&p.key);
        Ok(())
    }

    fn settle_ok(&mut self, p: Pending) -> Result<Output, Failure> {
        // The same route with other nexthops (another group): its per-nexthop counters, kept
        // by position, would be the old nexthops' ones.
        let key = crate::state::to_key(&p.key);
        if p.old_lpm.is_some_and(|o| o.id == key && o.group != p.group) {
            // best effort: the route is in place; counters only
            if let Some(s) = self.store(false)? {
                let _ = s.raw().dp_reset_stats(&key);
            }
        }
        let needs_kernel_view =
            p.verb == Verb::Append || p.route.nexthops.iter().any(|n| n.ifindex == 0);
        if needs_kernel_view {
            // IPv6 merges appended nexthops into the route, and a nexthop typed without a
            // device got one from the kernel: learn the result and give it to the dataplane.
            self.invalidate(&p.key);
            if let Some(cur) = self.find(&p.key)? {
                if p.group >= mpt_bpf::mproute::route_table::PRIVATE_GROUP_BASE {
                    if let Some(s) = self.store(false)? {
                        s.raw()
                            .dp_put_group(p.group, &dp_nexthops(&cur.nexthops))
                            .map_err(|e| crate::state::fail("write dataplane state", e))?;
                    }
                }
            }
        } else {
            self.cache_set(&p.key, Some(p.route));
        }
        if p.old_state.is_some_and(|old| old.group != p.group) {
            self.gc_needed = true;
        }
        if p.replaced {
            self.gc_needed = true;
        }
        if p.algo != Algo::L3Hash {
            self.check_native(&p.key)?;
        }
        Ok(Output::Change(report(true, p.verb, &p.key, Some(p.algo))))
    }

    fn drop_created(&mut self, created: &[u32]) -> Result<(), Failure> {
        if created.is_empty() {
            return Ok(());
        }
        self.with_nh(|idx, sock| idx.remove(sock, created))?;
        Ok(())
    }

    /// Run the lines of a batch. Consecutive `add` lines are pipelined (up to `WINDOW` requests
    /// in flight); without `--force`, a refused line stops the batch and the lines after it that
    /// the kernel had already applied are rolled back, so the result is the same as running the
    /// lines one by one. `emit` gets every line's outcome in order.
    pub fn batch(
        &mut self,
        lines: &[(usize, String, Vec<String>)],
        emit: &mut dyn FnMut(usize, Result<Output, Failure>),
    ) -> bool {
        const WINDOW: usize = 256;
        let force = self.opts.force;
        if lines.iter().any(|(_, v, a)| changes_routes(v, a)) {
            if let Err(f) = self.disarm() {
                if let Some((line, _, _)) = lines.first() {
                    emit(*line, Err(f));
                }
                return false;
            }
        }
        let mut window: Vec<(usize, Pending)> = Vec::new();
        for (line, verb, args) in lines {
            if verb == "add" {
                let planned = parse::parse_route(Verb::Add, args)
                    .map_err(|e| Failure::usage(format!("add: {e}")))
                    .and_then(|spec| self.plan(&spec));
                match planned {
                    Ok(Planned::Send(p)) => {
                        window.push((*line, p));
                        if window.len() >= WINDOW && !self.flush_window(&mut window, emit) {
                            return false;
                        }
                        continue;
                    }
                    Ok(Planned::Unchanged(out)) => {
                        if !self.flush_window(&mut window, emit) {
                            return false;
                        }
                        emit(*line, Ok(out));
                        continue;
                    }
                    Err(f) => {
                        if !self.flush_window(&mut window, emit) {
                            return false;
                        }
                        emit(*line, Err(f));
                        if !force {
                            return false;
                        }
                        continue;
                    }
                }
            }
            if !self.flush_window(&mut window, emit) {
                return false;
            }
            let r = self.run(verb, args);
            let failed = r.is_err();
            emit(*line, r);
            if failed && !force {
                return false;
            }
        }
        self.flush_window(&mut window, emit)
    }

    /// Send the pending requests and settle them in order; `false` if the batch must stop.
    fn flush_window(
        &mut self,
        window: &mut Vec<(usize, Pending)>,
        emit: &mut dyn FnMut(usize, Result<Output, Failure>),
    ) -> bool {
        if window.is_empty() {
            return true;
        }
        let pending: Vec<(usize, Pending)> = std::mem::take(window);
        let reqs: Vec<(mpt_netlink::msg::Request, String)> = pending
            .iter()
            .map(|(_, p)| (p.req.clone(), p.op.clone()))
            .collect();
        let results = match self
            .sock()
            .and_then(|s| s.pipeline(reqs, pending.len()).map_err(Failure::from))
        {
            Ok(r) => r,
            Err(f) => {
                // The socket failed: we cannot know what the kernel applied; re-read it.
                self.fib.clear();
                // State and LPM entries back as they were (newest first), like a refusal.
                for (_, p) in pending.iter().rev() {
                    let _ = self.undo(p);
                }
                for (line, _) in pending {
                    emit(line, Err(f.clone()));
                }
                return false;
            }
        };
        // Which lines stand: applied, refused, or rolled back (applied after a refused line
        // without --force).
        #[derive(Clone, Copy, PartialEq)]
        enum V {
            Applied,
            Refused,
            RolledBack,
        }
        let force = self.opts.force;
        let mut verdict = Vec::with_capacity(results.len());
        let mut stopped = false;
        for r in &results {
            verdict.push(if stopped {
                V::RolledBack
            } else if r.is_err() {
                stopped = !force;
                V::Refused
            } else {
                V::Applied
            });
        }
        // Undo newest first: two lines of one key each saved the state the other wrote.
        let mut unsettled: Vec<RouteKey> = Vec::new();
        for i in (0..pending.len()).rev() {
            if verdict[i] == V::Applied {
                continue;
            }
            let p = &pending[i].1;
            unsettled.push(p.key);
            if (i + 1..pending.len()).any(|j| verdict[j] == V::Applied && pending[j].1.key == p.key)
            {
                // A later line of the same route stands (--force): its state is the route's.
                self.gc_needed = true;
                continue;
            }
            if verdict[i] == V::RolledBack && results[i].is_ok() {
                let del = rmsg::encode(&RouteRequest {
                    verb: Verb::Del,
                    key: p.key,
                    metric_given: true,
                    protocol: Some(p.protocol),
                    nexthops: &[],
                    form: PathForm::Multipath,
                    algo: Algo::L3Hash,
                });
                let op = format!("roll back {}", p.op);
                if let Ok(s) = self.sock() {
                    let _ = s.request(&del, &op);
                }
            }
            let _ = self.undo(p);
            // Objects this line created may be used by applied lines: collect at the end.
            self.gc_needed = true;
        }
        // With --force, a refused line's entry may have kept a later applied line of the same
        // prefix out of the LPM trie (a lower metric wins there): each prefix an undone line
        // touched goes to its lowest-metric managed route again, as the FIB has it.
        if let Err(f) = self.resettle_lpm(&unsettled) {
            if let Some((line, _)) = pending.first() {
                emit(*line, Err(f));
            }
            stopped = true;
        }
        for ((i, (line, p)), res) in pending.into_iter().enumerate().zip(results) {
            match (verdict[i], res) {
                (V::Applied, _) => emit(line, self.settle_ok(p)),
                (V::Refused, Err(e)) => {
                    emit(line, Err(Failure::from(mpt_netlink::Error::Kernel(e))))
                }
                _ => {}
            }
        }
        !stopped
    }

    /// Point the LPM entry of each of these routes' prefix (and table) at the lowest-metric
    /// managed route of it in our state, or remove it if none is left.
    fn resettle_lpm(&mut self, keys: &[RouteKey]) -> Result<(), Failure> {
        if keys.is_empty() {
            return Ok(());
        }
        let Some(s) = self.store(false)? else {
            return Ok(());
        };
        let ctx = |e| crate::state::fail("write dataplane state", e);
        let all = s.all()?;
        let raw = s.raw();
        let mut done: Vec<(ipnet::IpNet, u32)> = Vec::new();
        for k in keys {
            if done.contains(&(k.dst, k.table)) {
                continue;
            }
            done.push((k.dst, k.table));
            let best = all
                .iter()
                .filter(|(o, _)| o.dst == k.dst && o.table == k.table)
                .min_by_key(|(o, _)| o.metric);
            let cur = raw.dp_get_route(&crate::state::to_key(k)).map_err(ctx)?;
            // An entry of no managed route (an undone line's) goes first: dp_put_route would
            // keep it if its metric is lower. One of a managed route is folded by the put.
            if let Some(c) = cur {
                if !all.iter().any(|(o, _)| crate::state::to_key(o) == c.id) {
                    raw.dp_delete_route(&c.id).map_err(ctx)?;
                }
            }
            if let Some((o, m)) = best {
                let (key, algo) = (crate::state::to_key(o), m.algo.as_u32() as u8);
                // already the best route's, as it should be (most undone lines): leave it
                if cur.is_some_and(|c| c.id == key && c.algo == algo && c.group == m.group) {
                    continue;
                }
                raw.dp_put_route(&key, algo, m.group).map_err(ctx)?;
            }
        }
        Ok(())
    }

    /// Work left at the end of an invocation: collect nexthop objects no route uses any more,
    /// and verify the managed routes for the dataplane's FIB check.
    pub fn finish(&mut self) -> Result<(), Failure> {
        let collected = self.collect();
        if std::mem::take(&mut self.arm_needed) {
            if let Some(w) = self.arm() {
                eprintln!("mproute: warning: {w}");
            }
        }
        collected
    }

    /// Before a command changes routes or attachments: clear the recorded FIB generation, so
    /// that the dataplane checks every managed packet with the kernel while our maps and the
    /// FIB change (a delete of a route no lookup ever matched does not move the generation,
    /// and the LPM trie changes without it). [`Ctx::finish`] verifies again.
    fn disarm(&mut self) -> Result<(), Failure> {
        if self.arm_needed {
            return Ok(());
        }
        self.arm_needed = true;
        if let Some(store) = self.store(false)? {
            store
                .raw()
                .set_fib4_gen(None)
                .map_err(|e| crate::state::fail("write the FIB generation", e))?;
        }
        Ok(())
    }

    /// With a dataplane attached: verify the managed IPv4 routes against the FIB and record the
    /// generation (see [`crate::fibcheck`]). Never fails the command: the routes are in place;
    /// on trouble the per-packet check stays on (the generation was cleared by
    /// [`Ctx::disarm`]) and the reason is returned for a warning.
    fn arm(&mut self) -> Option<String> {
        let r = (|| -> Result<(), Failure> {
            let attached = !mpt_bpf::mproute::dataplane::attachments()
                .map_err(|e| crate::state::fail("list dataplane attachments", e))?
                .is_empty();
            if !attached || self.store(false)?.is_none() {
                return Ok(());
            }
            self.sock()?;
            let reader = crate::fibcheck::reader(&mut self.fibgen)?;
            let (Some(sock), Some(store)) = (self.sock.as_mut(), self.store.as_ref()) else {
                return Ok(());
            };
            crate::fibcheck::arm(sock, store.raw(), reader).map(|_| ())
        })();
        r.err().map(|f| {
            format!(
                "verifying the managed routes failed, the dataplane checks their packets with the kernel's FIB one by one: {}",
                f.message
            )
        })
    }

    /// `dataplane watch`, one round: verify the managed routes now and report the check. The
    /// namespace's lock is held only meanwhile (commands wait for it, and it for them).
    pub fn verify_now(&mut self) -> Result<crate::fibcheck::FibCheck, Failure> {
        self.store = None;
        self.store_checked = false;
        let r = (|| {
            if self.store(false)?.is_none() {
                return Err(Failure::system(
                    "dataplane watch: no mproute state in this namespace (yet)",
                ));
            }
            if let Some(w) = self.arm() {
                return Err(Failure::system(w));
            }
            self.sock()?;
            let reader = crate::fibcheck::reader(&mut self.fibgen)?;
            match (self.sock.as_mut(), self.store.as_ref()) {
                (Some(sock), Some(store)) => crate::fibcheck::status(sock, store.raw(), reader),
                _ => Err(Failure::system(
                    "dataplane watch: no mproute state in this namespace (yet)",
                )),
            }
        })();
        self.store = None;
        self.store_checked = false;
        r
    }

    /// The namespace's IPv4 FIB generation now.
    pub fn generation(&mut self) -> Result<u32, Failure> {
        crate::fibcheck::reader(&mut self.fibgen)?
            .read()
            .map(|g| g.v4)
            .map_err(|e| crate::state::fail("read the FIB generation", e))
    }

    /// Collect nexthop objects and dataplane groups no route uses any more.
    fn collect(&mut self) -> Result<(), Failure> {
        if !self.gc_needed {
            return Ok(());
        }
        self.gc_needed = false;
        let referenced: HashSet<u32> = dump(self.sock()?, None, None)?
            .iter()
            .filter_map(|r| r.nh_id)
            .collect();
        self.with_nh(|idx, sock| idx.collect(sock, &referenced))?
            .transpose()?;
        if let Some(s) = self.store(false)? {
            // Dataplane groups no managed route points at any more.
            let used: HashSet<u32> = s.all()?.into_iter().map(|(_, m)| m.group).collect();
            let raw = s.raw();
            let ids = raw
                .dp_group_ids()
                .map_err(|e| crate::state::fail("read dataplane state", e))?;
            for id in ids {
                if !used.contains(&id) {
                    let _ = raw.dp_delete_group(id);
                }
            }
        }
        self.dp_groups_known.clear();
        self.dp_groups_by_content.clear();
        Ok(())
    }

    /// Read the route back once per namespace to learn whether the kernel kept RTA_MP_ALGO.
    fn check_native(&mut self, key: &RouteKey) -> Result<(), Failure> {
        let checked = self.store(false)?.and_then(Store::native).is_some();
        if checked {
            return Ok(());
        }
        self.invalidate(key);
        let native = self.find(key)?.is_some_and(|r| r.algo.is_some());
        if let Some(s) = self.store(false)? {
            s.set_native(native)?;
        }
        Ok(())
    }

    fn del(&mut self, spec: &RouteSpec) -> Result<Output, Failure> {
        let table = resolve::table(spec.table.as_deref())?;
        let fam = Family::of_net(&spec.dst);
        let mut candidates: Vec<Route> = self
            .table(fam, table)?
            .values()
            .filter(|r| r.key.dst == spec.dst && spec.metric.is_none_or(|m| m == r.key.metric))
            .cloned()
            .collect();
        candidates.sort_by_key(|r| r.key.metric);
        let mut owned = None;
        for r in &candidates {
            // ours: in the state with the protocol it was installed with (a route replaced
            // with ip route under another protocol is its new owner's), or protocol mproute
            let in_state = match self.store(false)? {
                Some(s) => s.get(&r.key)?.is_some_and(|m| installed_as(&m, r)),
                None => false,
            };
            if in_state || r.protocol == MPROUTE_PROTO {
                owned = Some(r.clone());
                break;
            }
        }
        let key_guess = RouteKey {
            dst: spec.dst,
            table,
            metric: spec.metric.unwrap_or(rmsg::default_metric(fam)),
        };
        let Some(route) = owned else {
            if let Some(other) = candidates.first() {
                return Err(Failure::system(format!(
                    "{}: the route is not managed by mproute (protocol {})",
                    op_name(Verb::Del, &other.key),
                    names::proto_name(other.protocol)
                ))
                .hint("remove routes mproute does not own with \"ip route del\""));
            }
            // Nothing in the FIB: forget a stale state entry, and report what the kernel says.
            let managed: Vec<(RouteKey, Managed)> = match self.store(false)? {
                Some(s) => s.all()?,
                None => Vec::new(),
            };
            let stale = managed.iter().find(|(k, _)| {
                k.dst == spec.dst && k.table == table && spec.metric.is_none_or(|m| m == k.metric)
            });
            if let Some((k, _)) = stale {
                if let Some(s) = self.store(false)? {
                    // its dataplane entry too, or it would keep forwarding and hold its slot
                    forget_in(s, k, true)?;
                }
                return Ok(Output::Change(report(true, Verb::Del, k, None)));
            }
            return Err(Failure::system(format!(
                "{}: no such route [ESRCH]",
                op_name(Verb::Del, &key_guess)
            )));
        };
        let op = op_name(Verb::Del, &route.key);
        let req = rmsg::encode(&RouteRequest {
            verb: Verb::Del,
            key: route.key,
            metric_given: true,
            protocol: Some(route.protocol),
            nexthops: &[],
            form: PathForm::Multipath,
            algo: Algo::L3Hash,
        });
        // 1. FIB, 2. state.
        let r = self.sock()?.request(&req, &op);
        if r.is_err() {
            self.invalidate(&route.key);
        }
        r.map_err(Failure::from)?;
        self.gc_needed = true;
        // IPv4 append makes alternative routes with the same key: the state stays while one
        // of them does.
        self.invalidate(&route.key);
        if self.find(&route.key)?.is_none() {
            self.forget(&route.key, true)?;
        }
        Ok(Output::Change(report(true, Verb::Del, &route.key, None)))
    }

    /// Rewrite the LPM entry and group of every managed route whose dataplane entry is
    /// missing or points at a missing group.
    fn repair_dataplane(&mut self, fib: &[Route]) -> Result<Vec<ActionRow>, Failure> {
        let Some(s) = self.store(false)? else {
            return Ok(Vec::new());
        };
        let raw = s.raw();
        let ctx = |e| crate::state::fail("repair dataplane state", e);
        let all = s.all()?;
        let mut broken = Vec::new();
        for (k, m) in &all {
            let key = crate::state::to_key(k);
            let shadowed = all
                .iter()
                .any(|(o, _)| o.dst == k.dst && o.table == k.table && o.metric < k.metric);
            if shadowed {
                continue;
            }
            let entry_ok = raw
                .dp_get_route(&key)
                .map_err(ctx)?
                .is_some_and(|e| e.group == m.group && e.id == key);
            let group_ok = raw.dp_has_group(m.group).map_err(ctx)?;
            if entry_ok && group_ok {
                continue;
            }
            let Some(r) = fib.iter().find(|r| r.key == *k) else {
                continue;
            };
            if !group_ok {
                raw.dp_put_group(m.group, &dp_nexthops(&r.nexthops))
                    .map_err(ctx)?;
            }
            broken.push(*k);
        }
        // Written over, not deleted first (the route keeps its counters and slot); an entry
        // of no managed route in the way goes.
        self.resettle_lpm(&broken)?;
        let mut rows = Vec::new();
        if let Some(s) = self.store(false)? {
            for k in &broken {
                let key = crate::state::to_key(k);
                if s.raw()
                    .dp_get_route(&key)
                    .map_err(ctx)?
                    .is_some_and(|e| e.id == key)
                {
                    rows.push(action(
                        "repaired-dataplane",
                        k,
                        "its dataplane entry was missing",
                    ));
                }
            }
        }
        Ok(rows)
    }

    fn forget(&mut self, k: &RouteKey, promote: bool) -> Result<(), Failure> {
        if let Some(s) = self.store(false)? {
            forget_in(s, k, promote)?;
        }
        Ok(())
    }

    fn enforced_by(&mut self) -> Result<&'static str, Failure> {
        if self.store(false)?.and_then(Store::native) == Some(true) {
            return Ok("kernel");
        }
        let att = mpt_bpf::mproute::dataplane::attachments()
            .map_err(|e| crate::state::fail("list dataplane attachments", e))?;
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
    fn route_enforced_by(
        &mut self,
        enforced: &'static str,
        k: &RouteKey,
    ) -> Result<&'static str, Failure> {
        if !matches!(enforced, "xdp" | "tc") {
            return Ok(enforced);
        }
        if k.table != mpt_model::sole::TABLE_MAIN {
            return Ok("none");
        }
        let Some(s) = self.store(false)? else {
            return Ok("none");
        };
        let key = crate::state::to_key(k);
        let e = s
            .raw()
            .dp_get_route(&key)
            .map_err(|e| crate::state::fail("read the dataplane's routes", e))?;
        Ok(match e {
            Some(e)
                if e.id == key
                    && e.flags
                        & (mpt_bpf::mproute::abi::DPR_F_DRIFT
                            | mpt_bpf::mproute::abi::DPR_F_FOREIGN)
                        == 0 =>
            {
                enforced
            }
            _ => "none",
        })
    }

    fn get(&mut self, args: &[String]) -> Result<Output, Failure> {
        let g = parse::parse_get(args).map_err(|e| Failure::usage(format!("get: {e}")))?;
        let table = resolve::table(g.table.as_deref())?;
        let what = format!("get {}", g.dst);
        let enforced = self.enforced_by()?;
        let store = self.store(false)?.ok_or_else(|| {
            Failure::system(format!("{what}: no route managed by mproute covers it"))
        })?;
        let raw = store.raw();
        let ctx = |e| crate::state::fail(&what, e);
        let rt = raw.dp_lookup(table, g.dst).map_err(ctx)?.ok_or_else(|| {
            Failure::system(format!("{what}: no route managed by mproute covers it"))
        })?;
        let group = raw
            .dp_group(rt.group)
            .map_err(ctx)?
            .ok_or_else(|| Failure::system(format!("{what}: the route has no nexthop group")))?;
        let seed = raw.meta().map_err(ctx)?.hash_seed;
        let key = crate::state::from_key(&rt.id)
            .ok_or_else(|| Failure::system(format!("{what}: unreadable route key")))?;
        // (the flag is kept by verifications, which run while a dataplane is attached)
        if rt.flags & mpt_bpf::mproute::abi::DPR_F_DRIFT != 0 && matches!(enforced, "xdp" | "tc") {
            return Err(Failure::system(format!(
                "{what}: the kernel's route {} (metric {}) is no longer the one mproute installed, \
                 so the kernel forwards it",
                key.dst, key.metric
            ))
            .hint("\"mproute sync\" takes its nexthops from the FIB or forgets it"));
        }
        let enforced = self.route_enforced_by(enforced, &key)?;
        let algo = Algo::from_u32(u32::from(rt.algo)).unwrap_or_default();
        let src = g.src.unwrap_or(match g.dst {
            std::net::IpAddr::V4(_) => std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            std::net::IpAddr::V6(_) => std::net::IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
        });
        let fk = mpt_model::hash::FlowKey::from_addrs(src, g.dst, g.proto, g.sport, g.dport)
            .ok_or_else(|| {
                Failure::usage(format!("{what}: source and destination families differ"))
            })?;
        let hash_algo = matches!(algo, Algo::L3Hash | Algo::L4Hash);
        let nhs = group.nexthops();
        let (hash, index) = if hash_algo {
            let l4 = algo == Algo::L4Hash && mpt_model::hash::is_l4_proto(g.proto);
            let h = mpt_model::hash::flow_hash(&fk, l4, seed);
            let bounds: Vec<i32> = nhs.iter().map(|n| n.upper_bound).collect();
            (Some(h), mpt_model::threshold::select(h, &bounds))
        } else {
            (None, None)
        };
        let nhs = nhs.to_vec();
        let mut ifname = |i: u32| mpt_sys::iface::name(i);
        let mut row =
            crate::view::GetRow::new(g.dst, &key, algo, hash, index, &nhs, enforced, &mut ifname);
        // The kernel's flags of each path (dead, linkdown): a packet for a dead nexthop is
        // handed to the kernel, which forwards it by a live one.
        if let Some(r) = self.find(&key)? {
            row.set_flags(&nhs, &r);
        }
        Ok(Output::Get(Box::new(row)))
    }

    fn dataplane(&mut self, args: &[String]) -> Result<Output, Failure> {
        let spec =
            parse::parse_dataplane(args).map_err(|e| Failure::usage(format!("dataplane: {e}")))?;
        let fail = |what: String| move |e| crate::state::fail(&what, e);
        let mut notes = Vec::new();
        let attach = matches!(spec, parse::DpSpec::Attach { .. });
        match spec {
            parse::DpSpec::Attach {
                devs,
                mode,
                fastpath,
                prepare_peers,
            } => {
                let links = crate::dpmode::links(self.sock()?)?;
                let mut ifs = Vec::new();
                for d in &devs {
                    let Some(l) = links.iter().find(|l| &l.name == d) else {
                        return Err(Failure::system(format!(
                            "dataplane attach: cannot find device \"{d}\" [ENODEV]"
                        )));
                    };
                    let (m, _) = match mode.as_str() {
                        "xdp" => (mpt_bpf::mproute::dataplane::Mode::Xdp, ""),
                        "xdp-generic" => (mpt_bpf::mproute::dataplane::Mode::XdpGeneric, ""),
                        "tc" => (mpt_bpf::mproute::dataplane::Mode::Tc, ""),
                        _ => crate::dpmode::auto_mode(l),
                    };
                    ifs.push((l.ifindex, d.clone(), m, crate::dpmode::checksums(l)));
                }
                let auto = mode == "auto";
                let store = self.store(true)?.ok_or_else(|| {
                    Failure::system("dataplane attach: cannot create mproute state")
                })?;
                for (i, d, m, local) in &ifs {
                    let r =
                        mpt_bpf::mproute::dataplane::attach(store.raw(), *i, *m, fastpath, *local);
                    let xdp_refused =
                        auto && *m == mpt_bpf::mproute::dataplane::Mode::Xdp && r.is_err();
                    match r {
                        // auto: a driver without native XDP gets tc.
                        Err(_) if auto && *m == mpt_bpf::mproute::dataplane::Mode::Xdp => {}
                        r => {
                            r.map_err(fail(format!("dataplane attach dev {d} {}", m.name())))?;
                        }
                    }
                    // tc asked for (or picked) over an earlier XDP attachment: tc alone now
                    // (attached first, so that no packet goes unhandled meanwhile).
                    if *m == mpt_bpf::mproute::dataplane::Mode::Tc || xdp_refused {
                        if xdp_refused {
                            mpt_bpf::mproute::dataplane::attach(
                                store.raw(),
                                *i,
                                mpt_bpf::mproute::dataplane::Mode::Tc,
                                fastpath,
                                *local,
                            )
                            .map_err(fail(format!("dataplane attach dev {d} tc")))?;
                        }
                        mpt_bpf::mproute::dataplane::detach_xdp_only(*i)
                            .map_err(fail(format!("dataplane attach dev {d} tc")))?;
                        continue;
                    }
                    // XDP forwards what it can forward safely; a packet whose TCP/UDP checksum
                    // a local stack left to offload (CHECKSUM_PARTIAL) goes up as an skb, and
                    // the tc program next to it carries out the same algorithm on it.
                    if *m != mpt_bpf::mproute::dataplane::Mode::Tc {
                        mpt_bpf::mproute::dataplane::attach(
                            store.raw(),
                            *i,
                            mpt_bpf::mproute::dataplane::Mode::Tc,
                            fastpath,
                            *local,
                        )
                        .map_err(fail(format!("dataplane attach dev {d} tc")))?;
                    }
                }
                // A nexthop whose link lost carrier keeps its connected route (flagged
                // linkdown); unless the namespace ignores such routes, both the kernel's
                // multipath and the dataplane's gateway lookup keep sending into the dead link.
                set_ignore_linkdown().map_err(|e| {
                    Failure::system(format!(
                        "dataplane attach: set net.ipv{{4,6}}.conf.all.ignore_routes_with_linkdown: {e}"
                    ))
                })?;
                let att = mpt_bpf::mproute::dataplane::attachments()
                    .map_err(fail("list dataplane attachments".into()))?;
                if att
                    .iter()
                    .any(|a| a.mode == mpt_bpf::mproute::dataplane::Mode::Xdp)
                {
                    notes = crate::dpmode::check_peers(self.sock()?, prepare_peers)?;
                }
            }
            parse::DpSpec::Detach { devs } => {
                for d in &devs {
                    let i = mpt_sys::iface::index(d).map_err(|_| {
                        Failure::system(format!("dataplane detach: cannot find device \"{d}\""))
                    })?;
                    mpt_bpf::mproute::dataplane::detach(i)
                        .map_err(fail(format!("dataplane detach dev {d}")))?;
                }
            }
            parse::DpSpec::Watch => {
                return Err(Failure::usage(
                    "dataplane watch: runs on its own, not in a batch",
                ))
            }
            parse::DpSpec::Show => {
                // what attach would say about the veth peers native XDP redirects into
                let att = mpt_bpf::mproute::dataplane::attachments()
                    .map_err(fail("list dataplane attachments".into()))?;
                if att
                    .iter()
                    .any(|a| a.mode == mpt_bpf::mproute::dataplane::Mode::Xdp)
                {
                    notes = crate::dpmode::check_peers(self.sock()?, false)?;
                }
            }
        }
        let att = mpt_bpf::mproute::dataplane::attachments()
            .map_err(fail("list dataplane attachments".into()))?;
        for a in att
            .iter()
            .filter(|a| a.mode != mpt_bpf::mproute::dataplane::Mode::Tc)
        {
            if mpt_bpf::mproute::dataplane::xdp_mac_stale(a.prog_id, a.ifindex)
                .map_err(fail("read the dataplane's load-time constants".into()))?
            {
                let dev = mpt_sys::iface::name(a.ifindex)
                    .unwrap_or_else(|| format!("ifindex {}", a.ifindex));
                notes.push(format!(
                    "{dev}: its MAC address changed since the dataplane was attached; XDP forwards only frames sent to the old one (the rest goes to the stack as not-host): run dataplane attach again"
                ));
            }
        }
        let reasons = match self.store(false)? {
            Some(s) => mpt_bpf::mproute::dataplane::reasons(s.raw())
                .map_err(fail("read dataplane counters".into()))?,
            None => Vec::new(),
        };
        let links = crate::dpmode::links(self.sock()?)?;
        let mut view =
            crate::view::DataplaneView::new(&att, &reasons, ignore_linkdown(), &links, notes);
        for (row, a) in view.attachments.iter_mut().zip(&att) {
            if a.mode == mpt_bpf::mproute::dataplane::Mode::Xdp {
                if let Ok(Some(how)) = mpt_bpf::mproute::dataplane::xdp_checksum_handling(a.prog_id)
                {
                    row.why = format!("{}; {how}", row.why);
                }
            }
        }
        if let Some(s) = self.store(false)? {
            if let Ok((used, total)) = s.raw().dp_slots_used() {
                view.counter_slots = Some(crate::view::CounterSlots { used, total });
            }
        }
        if !att.is_empty() {
            if attach {
                // verify now, for the report; in a batch the end of the invocation verifies
                // again (later lines may change routes without going through run()), a lone
                // attach is done with it
                if let Some(w) = self.arm() {
                    view.notes.push(w);
                }
                if self.opts.batch.is_none() {
                    self.arm_needed = false;
                }
            }
            self.sock()?;
            let status = match crate::fibcheck::reader(&mut self.fibgen) {
                Ok(reader) => match (self.sock.as_mut(), self.store.as_ref()) {
                    (Some(sock), Some(store)) => {
                        Some(crate::fibcheck::status(sock, store.raw(), reader))
                    }
                    _ => None,
                },
                Err(f) => Some(Err(f)),
            };
            if let Some(status) = status {
                match status {
                    Ok(f) => view.fib_check = Some(f),
                    Err(f) => view
                        .notes
                        .push(format!("the dataplane's FIB check: {}", f.message)),
                }
            }
        }
        Ok(Output::Dataplane(view))
    }

    fn show(&mut self, args: &[String]) -> Result<Output, Failure> {
        let f = parse::parse_show(args).map_err(|e| Failure::usage(format!("show: {e}")))?;
        let table = match f.table.as_deref() {
            Some("all") => None,
            t => Some(resolve::table(t)?),
        };
        let fams: Vec<Family> = match &f.dst {
            Some(d) => vec![Family::of_net(d)],
            None => vec![Family::V4, Family::V6],
        };
        let managed: HashMap<RouteKey, Managed> = match self.store(false)? {
            Some(s) => s.all()?.into_iter().collect(),
            None => HashMap::new(),
        };
        let enforced = self.enforced_by()?;
        let mut names_cache: HashMap<u32, Option<String>> = HashMap::new();
        let mut ifname = |i: u32| {
            names_cache
                .entry(i)
                .or_insert_with(|| mpt_sys::iface::name(i))
                .clone()
        };
        let mut rows = Vec::new();
        for fam in fams {
            let routes = dump(self.sock()?, Some(fam), table)?;
            for mut r in routes {
                if f.dst.is_some_and(|d| d != r.key.dst) {
                    continue;
                }
                let m = managed.get(&r.key);
                if m.is_some() {
                    r.algo = m.map(|m| m.algo);
                }
                // Managed: in mproute's state. A protocol-mproute route that is not (added
                // with ip route, or left by a lost state) is not, until sync adopts it.
                let is_managed = m.is_some();
                if let Some(a) = f.algo {
                    if !is_managed || r.algo.unwrap_or_default() != a {
                        continue;
                    }
                }
                let by = if is_managed {
                    Some(self.route_enforced_by(enforced, &r.key)?)
                } else {
                    None
                };
                let mut row = RouteRow::new(&r, is_managed, by, &mut ifname);
                if self.opts.stats && m.is_some() {
                    if let Some(s) = self.store(false)? {
                        let st = s
                            .raw()
                            .dp_stats(&crate::state::to_key(&r.key))
                            .map_err(|e| crate::state::fail("read dataplane counters", e))?
                            .unwrap_or_default();
                        row.set_stats(&st);
                    }
                }
                rows.push(row);
            }
        }
        Ok(Output::Routes(rows))
    }

    fn flush(&mut self, args: &[String]) -> Result<Output, Failure> {
        let t = parse::parse_flush(args).map_err(|e| Failure::usage(format!("flush: {e}")))?;
        let table = match t.as_deref() {
            Some("all") | None => None,
            Some(s) => Some(resolve::table(Some(s))?),
        };
        let managed: Vec<(RouteKey, Managed)> = match self.store(false)? {
            Some(s) => s.all()?,
            None => Vec::new(),
        };
        let mut rows = Vec::new();
        let all = dump(self.sock()?, None, table)?;
        let managed_keys: HashMap<RouteKey, &Managed> =
            managed.iter().map(|(k, m)| (*k, m)).collect();
        let fib_keys: HashSet<RouteKey> = all.iter().map(|r| r.key).collect();
        for r in &all {
            let in_state = managed_keys.get(&r.key).is_some_and(|m| installed_as(m, r));
            if !(in_state || r.protocol == MPROUTE_PROTO) {
                continue;
            }
            let op = op_name(Verb::Del, &r.key);
            let req = rmsg::encode(&RouteRequest {
                verb: Verb::Del,
                key: r.key,
                metric_given: true,
                protocol: Some(r.protocol),
                nexthops: &[],
                form: PathForm::Multipath,
                algo: Algo::L3Hash,
            });
            match self.sock()?.request(&req, &op) {
                Ok(()) => {}
                Err(e) if e.errno() == Some(libc::ESRCH) => {}
                Err(e) => return Err(Failure::from(e)),
            }
            // Every owned route in scope goes: no shadowed one to promote (a scan per route
            // would make flushing 100,000 routes quadratic).
            self.forget(&r.key, false)?;
            rows.push(action("deleted", &r.key, "owned by mproute"));
        }
        // State entries whose route is already gone.
        for (k, _) in &managed {
            if table.is_some_and(|t| t != k.table) || fib_keys.contains(k) {
                continue;
            }
            self.forget(k, false)?;
            rows.push(action("forgotten", k, "route was no longer in the FIB"));
        }
        self.fib.clear();
        self.gc_needed = true;
        Ok(Output::Actions {
            changed: !rows.is_empty(),
            rows,
        })
    }

    fn sync(&mut self, args: &[String]) -> Result<Output, Failure> {
        let reset = match args {
            [] => false,
            [w] if w == "--reset" || w == "reset" => true,
            [w, ..] => return Err(Failure::usage(format!("sync: unexpected word \"{w}\""))),
        };
        let mut rows = Vec::new();
        if reset {
            let cookie = mpt_sys::netns::cookie()
                .map_err(|e| Failure::system(format!("sync reset: {e}")))?;
            if mpt_bpf::pinned::pin_dir(&mpt_bpf::mproute::state::SUITE, cookie).is_none() {
                // Under ip netns exec the host's bpffs is hidden: the pins would survive and a
                // later invocation would bring the old state back from them.
                return Err(Failure::system(
                    "sync --reset: the host's bpffs is not visible here, so the pinned state cannot be removed",
                )
                .hint("run it as \"mproute -n NAME sync --reset\" instead of under ip netns exec"));
            }
            self.store = None;
            mpt_bpf::mproute::state::destroy(cookie)
                .map_err(|e| Failure::system(format!("sync reset: {e}")))?;
            rows.push(ActionRow {
                action: "reset".into(),
                dst: "-".into(),
                table: None,
                metric: None,
                reason: "state of this namespace removed".into(),
            });
            return Ok(Output::Actions {
                changed: true,
                rows,
            });
        }
        let all = dump(self.sock()?, None, None)?;
        // the first route of a key: the one the kernel uses (IPv4 alternatives added with
        // append share it)
        let mut fib: HashMap<RouteKey, &Route> = HashMap::new();
        for r in &all {
            fib.entry(r.key).or_insert(r);
        }
        // Routes whose kernel route changed behind mproute's back with protocol mproute: taken
        // again below from the FIB, with the algorithm they had.
        let mut retake: HashMap<RouteKey, Algo> = HashMap::new();
        if let Some(s) = self.store(false)? {
            for (k, m) in s.all()? {
                let Some(r) = fib.get(&k) else {
                    forget_in(s, &k, true)?;
                    rows.push(action(
                        "forgotten",
                        &k,
                        "route was deleted behind mproute's back",
                    ));
                    continue;
                };
                let why = match r.nh_id {
                    // installed with another protocol than the kernel's route has now
                    _ if m.protocol != 0 && m.protocol != r.protocol => format!(
                        "its protocol is {} now, not {}",
                        names::proto_name(r.protocol),
                        names::proto_name(m.protocol)
                    ),
                    // a route on a kernel nexthop object: its group is that object
                    Some(id) if id != m.group => format!("it uses nexthop object {id} now"),
                    Some(_) => continue,
                    None => {
                        // a group gone missing (a crash between two writes) is repaired below
                        let Some((ours, ours_w)) = crate::fibcheck::group_of(s.raw(), m.group)?
                        else {
                            continue;
                        };
                        match route_drift(&ours, &ours_w, r) {
                            Some(why) => why,
                            None => continue,
                        }
                    }
                };
                forget_in(s, &k, true)?;
                if r.protocol == MPROUTE_PROTO {
                    retake.insert(k, m.algo);
                } else {
                    rows.push(action(
                        "forgotten",
                        &k,
                        &format!(
                            "route was replaced behind mproute's back (protocol {}): {why}",
                            names::proto_name(r.protocol)
                        ),
                    ));
                }
            }
        }
        self.gc_needed = true;
        let orphans: Vec<&Route> = all.iter().filter(|r| r.protocol == MPROUTE_PROTO).collect();
        if !orphans.is_empty() {
            let s = self
                .store(true)?
                .ok_or_else(|| Failure::system("sync: cannot create mproute state"))?;
            for r in orphans {
                if s.get(&r.key)?.is_none() {
                    let retaken = retake.get(&r.key).copied();
                    let algo = retaken.unwrap_or(Algo::L3Hash);
                    let raw = s.raw();
                    let ctx = |e| crate::state::fail("write dataplane state", e);
                    let group = match r.nh_id {
                        Some(id) => id,
                        None => raw.dp_private_group(key_hash(&r.key)).map_err(ctx)?,
                    };
                    raw.dp_put_group(group, &dp_nexthops(&r.nexthops))
                        .map_err(ctx)?;
                    raw.dp_put_route(&crate::state::to_key(&r.key), algo.as_u32() as u8, group)
                        .map_err(ctx)?;
                    s.put(
                        &r.key,
                        Managed {
                            algo,
                            nh_count: r.nexthops.len().min(255) as u8,
                            group,
                            protocol: r.protocol,
                        },
                    )?;
                    rows.push(match retaken {
                        Some(a) => action(
                            "updated",
                            &r.key,
                            &format!(
                                "nexthops changed behind mproute's back: taken from the FIB \
                                 (algorithm {} kept)",
                                a.name()
                            ),
                        ),
                        None => action(
                            "adopted",
                            &r.key,
                            "protocol mproute but not in state (algorithm l3-hash)",
                        ),
                    });
                }
            }
        }
        // Dataplane entries that went missing (a crash between two writes, an old ABI's
        // leftovers): every managed route must have its LPM entry and group.
        rows.extend(self.repair_dataplane(&all)?);
        // Counter slots recorded as taken that no LPM entry holds (a crash between two writes).
        if let Some(s) = self.store(false)? {
            // best effort: a lost slot only costs speed
            let lost = s.raw().dp_rescan_slots().unwrap_or(0);
            if lost > 0 {
                rows.push(ActionRow {
                    action: "reclaimed-counter-slots".into(),
                    dst: lost.to_string(),
                    table: None,
                    metric: None,
                    reason: "recorded as taken, held by no route".into(),
                });
            }
        }
        // State pinned for namespaces that no longer exist.
        let live = mpt_sys::netns::reachable_cookies();
        for dir in mpt_bpf::pinned::stale_pin_dirs(&mpt_bpf::mproute::state::SUITE, &live) {
            if mpt_bpf::pinned::remove_pin_dir(&dir).is_ok() {
                rows.push(ActionRow {
                    action: "removed-stale-state".into(),
                    dst: dir.display().to_string(),
                    table: None,
                    metric: None,
                    reason: "its network namespace no longer exists".into(),
                });
            }
        }
        Ok(Output::Actions {
            changed: !rows.is_empty(),
            rows,
        })
    }
}

/// Remove a route from our state and from the dataplane maps; with `promote`, hand its LPM
/// entry to the next managed route of the same prefix and table.
fn forget_in(s: &Store, k: &RouteKey, promote: bool) -> Result<(), Failure> {
    s.delete(k)?;
    let ctx = |e| crate::state::fail("write dataplane state", e);
    let removed = s
        .raw()
        .dp_delete_route(&crate::state::to_key(k))
        .map_err(ctx)?;
    // Its group may be shared: finish() removes it once no route uses it.
    if promote && removed.is_some() {
        // A managed route of the same prefix and table with a higher metric was shadowed in
        // the LPM trie; it is the FIB's choice now.
        let next = s
            .all()?
            .into_iter()
            .filter(|(o, _)| o.dst == k.dst && o.table == k.table)
            .min_by_key(|(o, _)| o.metric);
        if let Some((o, m)) = next {
            s.raw()
                .dp_put_route(&crate::state::to_key(&o), m.algo.as_u32() as u8, m.group)
                .map_err(ctx)?;
        }
    }
    Ok(())
}

/// Whether a command (verb and words) may change routes, our maps or attachments.
fn changes_routes(verb: &str, args: &[String]) -> bool {
    matches!(
        verb,
        "add" | "replace" | "append" | "change" | "chg" | "del" | "delete" | "flush" | "sync"
    ) || (matches!(verb, "dataplane" | "dp") && args.first().is_some_and(|a| a == "attach"))
}

/// The dataplane's nexthops (every one usable: a dead link shows up as a failed FIB lookup in
/// the program, which then leaves the packet to the kernel).
fn dp_nexthops(nhs: &[Nexthop]) -> Vec<mpt_bpf::mproute::route_table::DpNexthop> {
    nhs.iter()
        .map(|n| mpt_bpf::mproute::route_table::DpNexthop {
            ifindex: n.ifindex,
            gateway: n.gateway,
            weight: n.weight,
            flags: n.flags,
            usable: n.ifindex != 0,
        })
        .collect()
}

/// `net.ipv4.conf.all.ignore_routes_with_linkdown` and its IPv6 twin, in the calling thread's
/// namespace (/proc/sys/net follows the opener's network namespace).
pub fn set_ignore_linkdown() -> Result<(), mpt_sys::Error> {
    for fam in ["ipv4", "ipv6"] {
        mpt_sys::sysctl::write(
            &format!("net.{fam}.conf.all.ignore_routes_with_linkdown"),
            "1",
        )?;
    }
    Ok(())
}

/// Whether the namespace ignores routes whose link is down (IPv4 setting).
pub fn ignore_linkdown() -> bool {
    mpt_sys::sysctl::read("net.ipv4.conf.all.ignore_routes_with_linkdown").is_ok_and(|s| s == "1")
}

fn nh_content_hash(nhs: &[Nexthop]) -> u32 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    nhs.hash(&mut h);
    h.finish() as u32
}

fn key_hash(k: &RouteKey) -> u32 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    k.hash(&mut h);
    h.finish() as u32
}

static EMPTY: std::sync::LazyLock<HashMap<RouteKey, Route>> =
    std::sync::LazyLock::new(HashMap::new);

fn action(what: &str, k: &RouteKey, reason: &str) -> ActionRow {
    ActionRow {
        action: what.into(),
        dst: k.dst.to_string(),
        table: Some(k.table),
        metric: Some(k.metric),
        reason: reason.into(),
    }
}

fn report(changed: bool, verb: Verb, k: &RouteKey, algo: Option<Algo>) -> ChangeReport {
    ChangeReport {
        changed,
        action: verb.name(),
        dst: k.dst.to_string(),
        table: k.table,
        metric: k.metric,
        algo: algo.map(|a| a.name().to_string()),
    }
}

/// Whether the FIB route already has exactly the requested paths and protocol.
/// Whether kernel route `r` has the protocol state `m` was installed with (always, for a state
/// that did not record it).
fn installed_as(m: &Managed, r: &Route) -> bool {
    m.protocol == 0 || m.protocol == r.protocol
}

/// How kernel route `r` differs from the group paths (and weights) mproute gave it, if it does
/// ([`mpt_model::sole::drift_weighted`]).
fn route_drift(ours: &[mpt_model::sole::Path], ours_w: &[u16], r: &Route) -> Option<String> {
    let (p, w) = (crate::fibcheck::paths(r), crate::fibcheck::weights(r));
    mpt_model::sole::drift_weighted(ours, ours_w, Some((&p, &w, false)))
}

/// Whether dataplane group `group` holds exactly the paths and weights of kernel route `cur`.
/// An unreadable or missing group is not.
fn group_is_route(raw: &mpt_bpf::mproute::state::RouteState, group: u32, cur: &Route) -> bool {
    matches!(
        crate::fibcheck::group_of(raw, group),
        Ok(Some((p, w))) if route_drift(&p, &w, cur).is_none()
    )
}

fn same_paths(cur: &Route, want: &Resolved, protocol: u8) -> bool {
    if cur.protocol != protocol || cur.nexthops.len() != want.nexthops.len() {
        return false;
    }
    let norm = |n: &Nexthop, ifindex_known: bool| {
        (
            n.gateway,
            if ifindex_known { n.ifindex } else { 0 },
            n.weight,
            n.flags & RTNH_F_ONLINK,
        )
    };
    want.nexthops.iter().zip(&cur.nexthops).all(|(w, c)| {
        let known = w.ifindex != 0;
        norm(w, known) == norm(c, known)
    })
}

/// Dump routes (unicast FIB entries, no cache clones) of one family or both, one table or all.
pub fn dump(
    sock: &mut Socket,
    fam: Option<Family>,
    table: Option<u32>,
) -> Result<Vec<Route>, Failure> {
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
            out.push(m.route);
        }
    }
    Ok(out)
}

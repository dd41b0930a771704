//! The route transaction: one `add`, `replace`, `append`, `change` or `del` written to mproute's
//! state, the dataplane's group and LPM entry, kernel nexthop objects and the FIB so that they
//! agree after the command, a refused one included.
//!
//! Order: a mutation writes the state, the dataplane's entries and any nexthop objects first,
//! then the FIB ([`RouteTxn::plan`] prepares, the caller sends the request, [`RouteTxn::settle`]
//! keeps or undoes); a delete removes the FIB route first, then the state.

use std::collections::{HashMap, HashSet};

use mpt_cli::{names, Failure};
use mpt_model::route::plan::{self, Plan, Want};
use mpt_model::{Algo, Family, Nexthop, Route, RouteKey, Verb, MPROUTE_PROTO};
use mpt_netlink::msg::rtnl::route::{self as rmsg, PathForm, RouteRequest};

use crate::grammar::RouteSpec;
use crate::kernel_nh::NhIndex;
use crate::resolve::{self, Resolved};
use crate::session::{dump, Session};
use crate::store::{Managed, Store};
use crate::view::{action, ActionRow};

/// A planned change whose FIB request is still to be sent.
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) verb: Verb,
    pub(crate) key: RouteKey,
    pub(crate) op: Op,
    /// The FIB request (empty once a window has handed it to the worker).
    pub(crate) req: mpt_netlink::msg::Request,
    pub(crate) protocol: u8,
    pub(crate) old_state: Option<Managed>,
    pub(crate) algo: Algo,
    pub(crate) created: Vec<u32>,
    pub(crate) route: Route,
    pub(crate) replaced: bool,
    /// Dataplane group of the route, and whether this command allocated it privately.
    pub(crate) group: u32,
    pub(crate) new_private: bool,
    /// LPM entry before the change, to put back if the kernel refuses.
    pub(crate) old_lpm: Option<mpt_bpf::mproute::route_table::SavedEntry>,
    /// The route's resilient bucket table before the change (boxed: 20 KB).
    pub(crate) old_res: Option<mpt_bpf::mproute::resilient::ResTable>,
}

// Send is what nearly every line is: boxing it would allocate once per line of a batch
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Planned {
    Unchanged(Done),
    Send(Pending),
}

pub(crate) fn op_name(verb: Verb, key: &RouteKey) -> String {
    Op::new(verb, key).to_string()
}

/// What a route request does, in the operator's words (`add 10.0.0.0/8 table 100`): kept as
/// the verb and key and formatted only when a message names it (formatting it for every line
/// of a batch cost as much as encoding the request).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Op {
    verb: Verb,
    key: RouteKey,
}

impl Op {
    pub(crate) fn new(verb: Verb, key: &RouteKey) -> Op {
        Op { verb, key: *key }
    }
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.verb.name(), self.key.dst)?;
        if self.key.table != mpt_model::names::RT_TABLE_MAIN {
            write!(f, " table {}", names::table_name(self.key.table))?;
        }
        Ok(())
    }
}

/// The route transaction of one command or batch line on a session: [`RouteTxn::plan`]
/// writes the state, the dataplane's entries and any nexthop objects and prepares the FIB
/// request; the caller sends it (alone or pipelined); [`RouteTxn::settle`] keeps or undoes.
/// `del` and `flush` are decided ([`RouteTxn::del_target`], [`RouteTxn::flush_plan`]) before
/// they are carried out. It works on the session's socket, state and caches, and returns what
/// it did ([`Done`]), never the front end's output.
pub(crate) struct RouteTxn<'s>(&'s mut Session);

impl std::ops::Deref for RouteTxn<'_> {
    type Target = Session;
    fn deref(&self) -> &Session {
        self.0
    }
}

impl std::ops::DerefMut for RouteTxn<'_> {
    fn deref_mut(&mut self) -> &mut Session {
        self.0
    }
}

impl Session {
    /// The route transaction on this session.
    pub(crate) fn txn(&mut self) -> RouteTxn<'_> {
        RouteTxn(self)
    }
}

impl RouteTxn<'_> {
    /// Make the map writes held back for the routes planned so far (the dataplane's state
    /// before the FIB); see `RouteState::flush`.
    pub(crate) fn flush_maps(&mut self) -> Result<(), Failure> {
        match self.store(false)? {
            Some(s) => s
                .bpf()
                .flush()
                .map_err(|e| Failure::bpf("write dataplane state", e)),
            None => Ok(()),
        }
    }

    /// A window's held-back writes before its routes go to the FIB from another thread: the
    /// state's made here, the LPM tries' handed over (see `RouteState::hand_off`).
    pub(crate) fn hand_off_maps(
        &mut self,
    ) -> Result<Option<mpt_bpf::mproute::state::LpmWrites>, Failure> {
        match self.store(false)? {
            Some(s) => s
                .bpf()
                .hand_off()
                .map_err(|e| Failure::bpf("write dataplane state", e)),
            None => Ok(None),
        }
    }

    pub(crate) fn modify(&mut self, spec: &RouteSpec) -> Result<Done, Failure> {
        let p = match self.plan(spec)? {
            Planned::Unchanged(done) => return Ok(done),
            Planned::Send(p) => p,
        };
        if let Err(f) = self.flush_maps() {
            let _ = self.undo(&p);
            return Err(f);
        }
        let sent = self.sock()?.request(&p.req, p.op);
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

    /// Everything before the FIB request: resolve, decide, write our state, create nexthop
    /// objects. The FIB request itself is sent by the caller (alone or pipelined).
    pub(crate) fn plan(&mut self, spec: &RouteSpec) -> Result<Planned, Failure> {
        let r = resolve::resolve(spec)?;
        let op = Op::new(spec.verb, &r.key);
        let protocol = r.proto.unwrap_or(MPROUTE_PROTO);
        // The shared group this route will get, when an earlier line of the batch made it: the
        // state is then written once, with it (not once before and once after dp_prepare).
        let known_group = if self.use_nh_objects || r.nexthops.iter().any(|n| n.ifindex == 0) {
            None
        } else {
            self.dp_groups_by_content
                .get(&nh_content_hash(&r.nexthops))
                .copied()
        };
        let store = self
            .store(true)?
            .ok_or_else(|| Failure::system(format!("{op}: cannot create mproute state")))?;
        let mut new_state = Managed {
            algo: r.algo,
            nh_count: r.nexthops.len().min(255) as u8,
            group: known_group.unwrap_or(0),
            protocol,
            recipe: r.recipe,
        };
        // 1. state (then 2. FIB, 3. undo the state if the FIB refused, in settle()). An add
        // takes a new entry at once (one map update for each line of a batch of adds).
        let (old_state, old_fib) = if spec.verb == Verb::Add && store.put_new(&r.key, new_state)? {
            (None, None)
        } else {
            let old = store.get(&r.key)?;
            // append adds paths: the route keeps its hash recipe unless one is written
            if let (Verb::Append, true, Some(o)) = (spec.verb, r.recipe.is_default(), old) {
                new_state.recipe = o.recipe;
            }
            let want = want(spec.verb, &r, protocol);
            let mut facts = Facts {
                s: self,
                key: r.key,
                // replace and change learn whether the route is there as asked already
                read_fib: matches!(spec.verb, Verb::Replace | Verb::Change),
                fib: None,
                state: old,
                resilient: r.resilient,
                recipe: new_state.recipe,
            };
            match plan::plan(&want, &mut facts)? {
                Plan::Unchanged { algo } => {
                    return Ok(Planned::Unchanged(Done::new(
                        false,
                        spec.verb,
                        r.key,
                        Some(algo),
                    )));
                }
                // the kernel's refusal (`refused`) comes in its own words when it is asked
                Plan::Write { algo, .. } => new_state.algo = algo,
            }
            let old_fib = facts.fib.flatten();
            if let Some(s) = self.store(false)? {
                s.put(&r.key, new_state)?;
            }
            (old, old_fib)
        };
        // Kernel nexthop objects where possible (not for append: IPv6 merges appended paths
        // into the route, which a route referencing an object cannot take).
        let mut form = r.form;
        let mut created = Vec::new();
        if self.use_nh_objects && spec.verb != Verb::Append && NhIndex::usable(&r.nexthops) {
            let fam = r.key.family();
            if let Some(ens) = self.with_nh(|idx, sock| idx.ensure(sock, &op, fam, &r.nexthops))? {
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
        let (group, new_private, old_lpm, old_res) =
            match self.dp_prepare(&r, nh_id, old_state, new_state.algo, new_state.recipe) {
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
            encap: None,
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
            old_res,
        }))
    }

    /// Choose the route's dataplane group, write it if needed, write (or remove) its resilient
    /// bucket table, and point the LPM entry at it. Returns (group, allocated here as private,
    /// LPM entry before, bucket table before).
    #[allow(clippy::type_complexity)]
    pub(crate) fn dp_prepare(
        &mut self,
        r: &Resolved,
        nh_id: Option<u32>,
        old_state: Option<Managed>,
        algo: Algo,
        recipe: mpt_model::hash::HashRecipe,
    ) -> Result<
        (
            u32,
            bool,
            Option<mpt_bpf::mproute::route_table::SavedEntry>,
            Option<mpt_bpf::mproute::resilient::ResTable>,
        ),
        Failure,
    > {
        let known = nh_id.is_some_and(|id| self.dp_groups_known.contains(&id));
        let store = self
            .store(false)?
            .ok_or_else(|| Failure::system("dataplane state unavailable"))?;
        let raw = store.bpf();
        let ctx = |e| Failure::bpf("write dataplane state", e);
        let key = r.key;
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
                            store.bpf().dp_shared_group(content, &nhs).map_err(ctx)?;
                        self.dp_groups_by_content.insert(content, g);
                        (g, created)
                    }
                }
            }
        };
        let store = self
            .store(false)?
            .ok_or_else(|| Failure::system("dataplane state unavailable"))?;
        let raw = store.bpf();
        // the table before the LPM entry names it (a resilient algorithm without its table
        // falls back to hash-threshold), removed before an entry that does not
        let old_res = raw.res_get(&key).map_err(ctx)?;
        match r.resilient {
            Some(p) => {
                let t = crate::resilient::table_for(
                    raw,
                    &key,
                    &r.nexthops,
                    p,
                    recipe.seed.unwrap_or(0),
                )?;
                raw.res_put(&key, &t).map_err(ctx)?;
            }
            None if old_res.is_some() => {
                raw.res_delete(&key).map_err(ctx)?;
            }
            None => {}
        }
        let old = match raw.dp_put_route(&key, algo, group, recipe) {
            Ok(o) => o,
            Err(e) => {
                let _ = restore_res(raw, &key, old_res.as_ref());
                return Err(ctx(e));
            }
        };
        if let Some(id) = nh_id {
            self.dp_groups_known.insert(id);
        }
        Ok((group, new_private, old, old_res))
    }

    /// After the FIB answered: keep or undo.
    pub(crate) fn settle(
        &mut self,
        p: Pending,
        res: Result<(), mpt_netlink::KernelError>,
    ) -> Result<Done, Failure> {
        if let Err(e) = res {
            self.undo(&p)?;
            self.drop_created(&p.created)?;
            return Err(Failure::from(mpt_netlink::Error::Kernel(e)));
        }
        self.settle_ok(p)
    }

    /// Put our state and the LPM entry back as they were before `p` was planned.
    pub(crate) fn undo(&mut self, p: &Pending) -> Result<(), Failure> {
        if let Some(s) = self.store(false)? {
            s.restore(&p.key, p.old_state)?;
            let _ = restore_res(s.bpf(), &p.key, p.old_res.as_ref());
            let _ = s.bpf().dp_restore_route(&p.key, p.old_lpm);
        }
        if p.new_private {
            // Possibly shared with later lines of a batch: collected at the end if unused.
            self.gc_needed = true;
        }
        self.invalidate(&p.key);
        Ok(())
    }

    pub(crate) fn settle_ok(&mut self, p: Pending) -> Result<Done, Failure> {
        // The same route with other nexthops (another group): its per-nexthop counters, kept
        // by position, would be the old nexthops' ones.
        if p.old_lpm
            .and_then(|o| o.entry())
            .is_some_and(|o| o.id == p.key && o.group != p.group)
        {
            // best effort: the route is in place; counters only
            if let Some(s) = self.store(false)? {
                let _ = s.bpf().dp_reset_stats(&p.key);
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
                        s.bpf()
                            .dp_put_group(p.group, &dp_nexthops(&cur.nexthops))
                            .map_err(|e| Failure::bpf("write dataplane state", e))?;
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
        Ok(Done::new(true, p.verb, p.key, Some(p.algo)))
    }

    pub(crate) fn drop_created(&mut self, created: &[u32]) -> Result<(), Failure> {
        if created.is_empty() {
            return Ok(());
        }
        self.with_nh(|idx, sock| idx.remove(sock, created))?;
        Ok(())
    }

    /// Read the route back once per namespace to learn whether the kernel kept RTA_MP_ALGO.
    pub(crate) fn check_native(&mut self, key: &RouteKey) -> Result<(), Failure> {
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

    /// What `del` would delete: the first route of the prefix (lowest metric) that mproute
    /// owns, or a state entry whose route is gone already. Refused when the prefix has only
    /// routes of others, or none at all. The same decision for the real and the dry run.
    pub(crate) fn del_target(&mut self, spec: &RouteSpec) -> Result<DelTarget, Failure> {
        let table = resolve::table(spec.table.as_deref())?;
        let fam = Family::of_net(&spec.dst);
        let mut candidates: Vec<Route> = self
            .table(fam, table)?
            .values()
            .filter(|r| r.key.dst == spec.dst && spec.metric.is_none_or(|m| m == r.key.metric))
            .cloned()
            .collect();
        candidates.sort_by_key(|r| r.key.metric);
        for r in &candidates {
            // ours: in the state with the protocol it was installed with (a route replaced
            // with ip route under another protocol is its new owner's), or protocol mproute
            let m = self.managed(&r.key)?;
            let in_state = m.is_some_and(|m| installed_as(&m, r));
            if in_state || r.protocol == MPROUTE_PROTO {
                return Ok(DelTarget::Route(r.clone(), m));
            }
        }
        if let Some(other) = candidates.first() {
            return Err(Failure::system(format!(
                "{}: the route is not managed by mproute (protocol {})",
                op_name(Verb::Del, &other.key),
                names::proto_name(other.protocol)
            ))
            .hint("remove routes mproute does not own with \"ip route del\""));
        }
        // Nothing in the FIB: a stale state entry is forgotten; else the kernel's answer.
        let managed: Vec<(RouteKey, Managed)> = match self.store(false)? {
            Some(s) => s.all()?,
            None => Vec::new(),
        };
        let stale = managed.iter().find(|(k, _)| {
            k.dst == spec.dst && k.table == table && spec.metric.is_none_or(|m| m == k.metric)
        });
        if let Some((k, _)) = stale {
            return Ok(DelTarget::Stale(*k));
        }
        let key_guess = RouteKey {
            dst: spec.dst,
            table,
            metric: spec.metric.unwrap_or(rmsg::default_metric(fam)),
        };
        Err(Failure::system(format!(
            "{}: no such route [ESRCH]",
            op_name(Verb::Del, &key_guess)
        )))
    }

    /// `del` of what [`RouteTxn::del_target`] chose: the FIB route first, then the state (and
    /// the dataplane entry).
    pub(crate) fn delete(&mut self, target: DelTarget) -> Result<Done, Failure> {
        let route = match target {
            DelTarget::Stale(k) => {
                if let Some(s) = self.store(false)? {
                    // its dataplane entry too, or it would keep forwarding and hold its slot
                    s.forget(&k, true)?;
                }
                return Ok(Done::new(true, Verb::Del, k, None));
            }
            DelTarget::Route(r, _) => r,
        };
        let op = op_name(Verb::Del, &route.key);
        let req = del_request(&route);
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
        Ok(Done::new(true, Verb::Del, route.key, None))
    }

    /// What `flush` does in `table` (`None`: all): every route mproute owns, deleted, and
    /// the state entries whose route is gone already, forgotten. The same list for the real
    /// and the dry run.
    pub(crate) fn flush_plan(&mut self, table: Option<u32>) -> Result<Vec<FlushStep>, Failure> {
        // the state read (in batches) on another thread while the FIB is dumped
        self.store(false)?;
        self.sock()?;
        let sess: &mut Session = self.0;
        let store = sess.store.as_ref();
        let sock = sess
            .sock
            .as_mut()
            .ok_or_else(|| Failure::system("flush: no netlink socket"))?;
        let (managed, all) = std::thread::scope(|sc| {
            let reader = sc.spawn(move || store.map(Store::all).transpose());
            let all = dump(sock, None, table);
            let managed = reader
                .join()
                .unwrap_or_else(|_| Err(Failure::system("flush: the state reader failed")));
            (managed, all)
        });
        let managed: Vec<(RouteKey, Managed)> = managed?.unwrap_or_default();
        let all = all?;
        let mut steps = Vec::new();
        let managed_keys: HashMap<RouteKey, &Managed> =
            managed.iter().map(|(k, m)| (*k, m)).collect();
        let fib_keys: HashSet<RouteKey> = all.iter().map(|r| r.key).collect();
        // the nexthop objects the routes that stay reference (of every table only)
        let mut staying: Option<HashSet<u32>> = table.is_none().then(HashSet::new);
        for r in all {
            let in_state = managed_keys
                .get(&r.key)
                .is_some_and(|m| installed_as(m, &r));
            if in_state || r.protocol == MPROUTE_PROTO {
                steps.push(FlushStep::Delete(r));
            } else if let (Some(s), Some(id)) = (staying.as_mut(), r.nh_id) {
                s.insert(id);
            }
        }
        self.flush_referenced = staying;
        for (k, _) in &managed {
            if !(table.is_some_and(|t| t != k.table) || fib_keys.contains(k)) {
                steps.push(FlushStep::Forget(*k));
            }
        }
        Ok(steps)
    }

    /// Carry out a [`RouteTxn::flush_plan`]: the kernel's routes first, deleted in pipelined
    /// windows (several requests per datagram, as `ip route flush` sends them), while another
    /// thread reads the LPM tries and then forgets, part by part, what the state has of the
    /// routes the kernel no longer has (those of the plan first, then each part's as its
    /// deletes are answered): the map writes overlap the FIB's. Routes are deleted before
    /// their state (a failure in between leaves state without a route, which `sync`
    /// forgets). The first refusal stops the flush after its window, and is the error.
    pub(crate) fn flush(&mut self, steps: &[FlushStep]) -> Result<(), Failure> {
        let mut stale: Vec<RouteKey> = Vec::new();
        let mut dels: Vec<&Route> = Vec::new();
        for step in steps {
            match step {
                FlushStep::Delete(r) => dels.push(r),
                FlushStep::Forget(k) => stale.push(*k),
            }
        }
        self.store(false)?;
        self.sock()?;
        let sess: &mut Session = self.0;
        let store = sess.store.as_ref();
        let sock = sess
            .sock
            .as_mut()
            .ok_or_else(|| Failure::system("flush: no netlink socket"))?;
        let (refused, forgot) = std::thread::scope(|sc| {
            let (parts, part) = std::sync::mpsc::channel::<Vec<RouteKey>>();
            let forgetter = sc.spawn(move || -> Result<(), Failure> {
                let Some(st) = store else {
                    return Ok(());
                };
                let mut snap = st
                    .bpf()
                    .dp_snapshot()
                    .map_err(|e| Failure::bpf("read dataplane state", e))?;
                let mut gone = Vec::new();
                for keys in part {
                    st.forget_part(&keys, &mut snap)?;
                    gone.extend(keys);
                }
                st.forget_counters(&gone)
            });
            // a forgetter that failed has dropped its end: its error is what join returns
            let _ = parts.send(stale);
            let mut refused: Result<(), Failure> = Ok(());
            for chunk in dels.chunks(4096) {
                let reqs: Vec<_> = chunk
                    .iter()
                    .map(|r| (del_request(r), Op::new(Verb::Del, &r.key)))
                    .collect();
                let answers = match sock.pipeline(reqs.iter().map(|(r, o)| (r, *o)), 256) {
                    Ok(a) => a,
                    Err(e) => {
                        refused = Err(Failure::from(e));
                        break;
                    }
                };
                let mut gone = Vec::with_capacity(chunk.len());
                for (r, a) in chunk.iter().zip(answers) {
                    match a {
                        Ok(()) => gone.push(r.key),
                        Err(e) if e.errno == libc::ESRCH => gone.push(r.key),
                        Err(e) if refused.is_ok() => {
                            refused = Err(Failure::from(mpt_netlink::Error::Kernel(e)))
                        }
                        Err(_) => {}
                    }
                }
                let _ = parts.send(gone);
                if refused.is_err() {
                    break;
                }
            }
            drop(parts);
            let forgot = forgetter
                .join()
                .unwrap_or_else(|_| Err(Failure::system("flush: the state writer failed")));
            (refused, forgot)
        });
        // Every owned route in scope went: no shadowed one to promote.
        forgot?;
        self.fib.clear();
        self.gc_needed = true;
        // Of every table and all deleted: what the plan's dump left references the objects
        // still in use, and the collection needs no dump of its own.
        if let (Some(staying), true) = (self.flush_referenced.take(), refused.is_ok()) {
            self.collect_with(&staying, None)?;
        }
        refused
    }
}

/// One step of `flush`.
#[derive(Debug)]
pub(crate) enum FlushStep {
    /// A route mproute owns: deleted.
    Delete(Route),
    /// A state entry whose route is gone already: forgotten.
    Forget(RouteKey),
}

impl FlushStep {
    /// The row it is reported with.
    pub(crate) fn row(&self) -> ActionRow {
        match self {
            FlushStep::Delete(r) => action("deleted", &r.key, "owned by mproute"),
            FlushStep::Forget(k) => action("forgotten", k, "route was no longer in the FIB"),
        }
    }
}

/// What `del` deletes ([`RouteTxn::del_target`]).
#[derive(Debug)]
pub(crate) enum DelTarget {
    /// A FIB route mproute owns, and its state entry if it has one.
    Route(Route, Option<Managed>),
    /// A state entry whose route is gone already.
    Stale(RouteKey),
}

/// What a route transaction did, for the front end to report.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Done {
    /// Whether anything changed (`false`: the route was there as asked).
    pub(crate) changed: bool,
    pub(crate) verb: Verb,
    pub(crate) key: RouteKey,
    /// The algorithm the route has now (`None` for a delete).
    pub(crate) algo: Option<Algo>,
}

impl Done {
    pub(crate) fn new(changed: bool, verb: Verb, key: RouteKey, algo: Option<Algo>) -> Done {
        Done {
            changed,
            verb,
            key,
            algo,
        }
    }
}

/// The FIB request that deletes exactly route `r` (its metric and protocol).
fn del_request(r: &Route) -> mpt_netlink::msg::Request {
    rmsg::encode(&RouteRequest {
        verb: Verb::Del,
        key: r.key,
        metric_given: true,
        protocol: Some(r.protocol),
        nexthops: &[],
        form: PathForm::Multipath,
        algo: Algo::L3Hash,
        encap: None,
    })
}

/// Put a route's bucket table back as it was (`None`: it had none).
fn restore_res(
    raw: &mpt_bpf::mproute::state::RouteState,
    key: &RouteKey,
    old: Option<&mpt_bpf::mproute::resilient::ResTable>,
) -> Result<(), mpt_bpf::Error> {
    match old {
        Some(t) => raw.res_put(key, t),
        None => raw.res_delete(key).map(|_| ()),
    }
}

/// The dataplane's nexthops (every one usable: a dead link shows up as a failed FIB lookup in
/// the program, which then leaves the packet to the kernel).
pub(crate) fn dp_nexthops(nhs: &[Nexthop]) -> Vec<mpt_bpf::mproute::route_table::DpNexthop> {
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

fn nh_content_hash(nhs: &[Nexthop]) -> u32 {
    use std::hash::{Hash, Hasher};
    // FxHash: a hint only says where a group id search starts (groups are matched by
    // content), so it needs speed, not flooding resistance (SipHash was 6 % of a batch)
    let mut h = rustc_hash::FxHasher::default();
    nhs.hash(&mut h);
    h.finish() as u32
}

pub(crate) fn key_hash(k: &RouteKey) -> u32 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    k.hash(&mut h);
    h.finish() as u32
}

/// Whether the FIB route already has exactly the requested paths and protocol.
/// Whether kernel route `r` has the protocol state `m` was installed with (always, for a state
/// that did not record it).
pub(crate) fn installed_as(m: &Managed, r: &Route) -> bool {
    m.protocol == 0 || m.protocol == r.protocol
}

/// How kernel route `r` differs from the group paths (and weights) mproute gave it, if it does
/// ([`mpt_model::route::drift::drift_weighted`]).
pub(crate) fn route_drift(
    ours: &[mpt_model::route::drift::Path],
    ours_w: &[u16],
    r: &Route,
) -> Option<String> {
    let (p, w) = (crate::verify::paths(r), crate::verify::weights(r));
    mpt_model::route::drift::drift_weighted(ours, ours_w, Some((&p, &w, false)))
}

/// Whether dataplane group `group` holds exactly the paths and weights of kernel route `cur`.
/// An unreadable or missing group is not.
pub(crate) fn group_is_route(
    raw: &mpt_bpf::mproute::state::RouteState,
    group: u32,
    cur: &Route,
) -> bool {
    matches!(
        crate::verify::group_of(raw, group),
        Ok(Some((p, w))) if route_drift(&p, &w, cur).is_none()
    )
}

/// The write `verb` of resolved route `r`, for the planner.
pub(crate) fn want(verb: Verb, r: &Resolved, protocol: u8) -> Want<'_> {
    Want {
        verb,
        family: r.key.family(),
        nexthops: &r.nexthops,
        algo: r.algo,
        algo_given: r.algo_given,
        protocol,
    }
}

/// What is there for the real run's planner ([`plan::Known`]): the FIB route read only where
/// the verb needs it (`read_fib`), the state as the store has it.
struct Facts<'s> {
    s: &'s mut Session,
    key: RouteKey,
    read_fib: bool,
    /// The FIB route, once read.
    fib: Option<Option<Route>>,
    state: Option<Managed>,
    resilient: Option<crate::grammar::Resilient>,
    recipe: mpt_model::hash::HashRecipe,
}

impl plan::Known for Facts<'_> {
    type Error = Failure;
    fn fib(&mut self) -> Result<Option<Route>, Failure> {
        if !self.read_fib {
            return Ok(None);
        }
        if let Some(f) = &self.fib {
            return Ok(f.clone());
        }
        let f = self.s.find(&self.key)?;
        self.fib = Some(f.clone());
        Ok(f)
    }
    fn algo(&mut self) -> Result<Option<Algo>, Failure> {
        Ok(self.state.map(|m| m.algo))
    }
    fn dataplane_agrees(&mut self, cur: &Route) -> Result<bool, Failure> {
        let (Some(m), Some(store)) = (self.state, self.s.store(false)?) else {
            return Ok(false);
        };
        Ok(m.recipe == self.recipe
            && group_is_route(store.bpf(), m.group, cur)
            && crate::resilient::same_params(store.bpf(), &self.key, self.resilient)?)
    }
}

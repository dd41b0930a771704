//! `mproute sync`: what changed behind mproute's back, reported and repaired. A managed route
//! deleted with `ip route del` is forgotten; one replaced with other nexthops is forgotten
//! (another protocol) or taken again from the FIB with its algorithm (protocol mproute); routes
//! with protocol mproute missing from the state are adopted; dataplane entries lost in a crash
//! are rewritten; counter slots no route holds are reclaimed; the pins of dead namespaces go.

use std::collections::{HashMap, HashSet};

use mpt_cli::{names, Failure};
use mpt_model::{Algo, Route, RouteKey, MPROUTE_PROTO};

use mpt_bpf::mproute::route_table::DpSnapshot;

use crate::session::{dump, Session};
use crate::store::Managed;
use crate::txn::{dp_nexthops, key_hash, route_drift};
use crate::view::{action, ActionRow};

/// What `sync` writes, behind one interface: [`Repair`] writes it, [`DryRepair`] (`--check`)
/// only says it would. Both follow the one decision [`Session::sync`] makes.
pub(crate) trait SyncFx {
    /// Whether the writes are made (the rows' words: "removed" or "would be removed").
    fn done(&self) -> bool;
    /// Remove the namespace's whole state.
    fn reset(&mut self, s: &mut Session, cookie: u64) -> Result<(), Failure>;
    /// Put back the nexthop objects whose links came back: the rows, and the objects whose
    /// routes the FIB does not show yet (only planned).
    fn restore(&mut self, s: &mut Session) -> Result<(Vec<ActionRow>, HashSet<u32>), Failure>;
    /// Forget managed routes (their state and dataplane entries), all at once: the LPM entry
    /// of each goes to the next route of its prefix in `managed` (the state as read) that
    /// is not forgotten too; `snap` (the tries as read) follows.
    fn forget(
        &mut self,
        s: &mut Session,
        keys: &[RouteKey],
        managed: &HashMap<RouteKey, Managed>,
        snap: &mut DpSnapshot,
    ) -> Result<(), Failure>;
    /// Take FIB route `r` into the state with `algo`; what was recorded (`None`: dry run).
    fn adopt(&mut self, s: &mut Session, r: &Route, algo: Algo)
        -> Result<Option<Managed>, Failure>;
    /// Rewrite the dataplane entries of `broken` (each with the FIB route it is written
    /// from, and its group if that is missing too); returns those that stand now.
    fn repair_dataplane(
        &mut self,
        s: &mut Session,
        broken: &[(RouteKey, Route, Option<u32>)],
    ) -> Result<Vec<RouteKey>, Failure>;
    /// Reclaim the counter slots no route holds; how many. `snap`: the tries, if they are
    /// as read (else they are read again).
    fn reclaim_slots(
        &mut self,
        s: &mut Session,
        snap: Option<&DpSnapshot>,
    ) -> Result<usize, Failure>;
    /// Remove what namespaces that no longer exist left behind; what.
    fn sweep(&mut self, live: &[u64]) -> Vec<std::path::PathBuf>;
}

/// The real run's writes.
#[derive(Debug, Default)]
pub(crate) struct Repair;

impl SyncFx for Repair {
    fn done(&self) -> bool {
        true
    }
    fn reset(&mut self, s: &mut Session, cookie: u64) -> Result<(), Failure> {
        if let Some(st) = s.store.as_mut() {
            st.end()?;
        }
        s.store = None;
        mpt_bpf::mproute::state::destroy(cookie)
            .map_err(|e| Failure::system(format!("sync reset: {e}")))
    }
    fn restore(&mut self, s: &mut Session) -> Result<(Vec<ActionRow>, HashSet<u32>), Failure> {
        let plan = s.restore_plan()?;
        // what was put back is in the FIB now
        Ok((s.restore_apply(plan)?, HashSet::new()))
    }
    fn forget(
        &mut self,
        s: &mut Session,
        keys: &[RouteKey],
        managed: &HashMap<RouteKey, Managed>,
        snap: &mut DpSnapshot,
    ) -> Result<(), Failure> {
        if keys.is_empty() {
            return Ok(());
        }
        let Some(st) = s.store(false)? else {
            return Ok(());
        };
        let ctx = |e| Failure::bpf("write dataplane state", e);
        let raw = st.bpf();
        raw.delete_many(keys)
            .map_err(|e| Failure::bpf("write state", e))?;
        let removed = raw.dp_delete_routes(keys, snap).map_err(ctx)?;
        // A managed route of the same prefix and table with a higher metric was shadowed in
        // the LPM trie; it is the FIB's choice now. Groups go in finish(), once unused.
        let gone: HashSet<&RouteKey> = keys.iter().collect();
        let mut next: HashMap<(ipnet::IpNet, u32), (RouteKey, Managed)> = HashMap::new();
        let wanted: HashSet<(ipnet::IpNet, u32)> =
            removed.iter().map(|k| (k.dst, k.table)).collect();
        for (o, m) in managed {
            if gone.contains(o) || !wanted.contains(&(o.dst, o.table)) {
                continue;
            }
            let e = next.entry((o.dst, o.table)).or_insert((*o, *m));
            if o.metric < e.0.metric {
                *e = (*o, *m);
            }
        }
        let mut promoted = Vec::new();
        for (o, m) in next.values() {
            raw.dp_put_route(o, m.algo, m.group, m.recipe)
                .map_err(ctx)?;
            promoted.push(*o);
        }
        raw.dp_snapshot_refresh(snap, &promoted).map_err(ctx)
    }
    fn adopt(
        &mut self,
        s: &mut Session,
        r: &Route,
        algo: Algo,
    ) -> Result<Option<Managed>, Failure> {
        let st = s
            .store(true)?
            .ok_or_else(|| Failure::system("sync: cannot create mproute state"))?;
        let raw = st.bpf();
        let ctx = |e| Failure::bpf("write dataplane state", e);
        let group = match r.nh_id {
            Some(id) => id,
            None => raw.dp_private_group(key_hash(&r.key)).map_err(ctx)?,
        };
        raw.dp_put_group(group, &dp_nexthops(&r.nexthops))
            .map_err(ctx)?;
        let recipe = mpt_model::hash::HashRecipe::default();
        raw.dp_put_route(&r.key, algo, group, recipe).map_err(ctx)?;
        let m = Managed {
            algo,
            nh_count: r.nexthops.len().min(255) as u8,
            group,
            protocol: r.protocol,
            recipe,
        };
        st.put(&r.key, m)?;
        Ok(Some(m))
    }
    fn repair_dataplane(
        &mut self,
        s: &mut Session,
        broken: &[(RouteKey, Route, Option<u32>)],
    ) -> Result<Vec<RouteKey>, Failure> {
        let ctx = |e| Failure::bpf("repair dataplane state", e);
        if let Some(st) = s.store(false)? {
            for (_, r, missing) in broken {
                if let Some(group) = missing {
                    st.bpf()
                        .dp_put_group(*group, &dp_nexthops(&r.nexthops))
                        .map_err(ctx)?;
                }
            }
        }
        // Written over, not deleted first (the route keeps its counters and slot); an entry
        // of no managed route in the way goes.
        let keys: Vec<RouteKey> = broken.iter().map(|(k, _, _)| *k).collect();
        s.resettle_lpm(&keys)?;
        let mut fixed = Vec::new();
        if let Some(st) = s.store(false)? {
            for k in keys {
                if st
                    .bpf()
                    .dp_get_route(&k)
                    .map_err(ctx)?
                    .is_some_and(|e| e.id == k)
                {
                    fixed.push(k);
                }
            }
        }
        Ok(fixed)
    }
    fn reclaim_slots(
        &mut self,
        s: &mut Session,
        snap: Option<&DpSnapshot>,
    ) -> Result<usize, Failure> {
        // best effort: a lost slot only costs speed
        Ok(match (s.store(false)?, snap) {
            (Some(st), Some(snap)) => st.bpf().dp_rescan_slots_in(snap).unwrap_or(0),
            (Some(st), None) => st.bpf().dp_rescan_slots().unwrap_or(0),
            (None, _) => 0,
        })
    }
    fn sweep(&mut self, live: &[u64]) -> Vec<std::path::PathBuf> {
        mpt_bpf::pinned::sweep_stale(&mpt_bpf::mproute::state::SUITE, live)
    }
}

/// The dry run's: nothing is written.
#[derive(Debug, Default)]
pub(crate) struct DryRepair;

impl SyncFx for DryRepair {
    fn done(&self) -> bool {
        false
    }
    fn reset(&mut self, _: &mut Session, _: u64) -> Result<(), Failure> {
        Ok(())
    }
    fn restore(&mut self, s: &mut Session) -> Result<(Vec<ActionRow>, HashSet<u32>), Failure> {
        let plan = s.restore_plan()?;
        Ok((plan.dry_rows(), plan.ids()))
    }
    fn forget(
        &mut self,
        _: &mut Session,
        _: &[RouteKey],
        _: &HashMap<RouteKey, Managed>,
        _: &mut DpSnapshot,
    ) -> Result<(), Failure> {
        Ok(())
    }
    fn adopt(&mut self, _: &mut Session, _: &Route, _: Algo) -> Result<Option<Managed>, Failure> {
        Ok(None)
    }
    fn repair_dataplane(
        &mut self,
        _: &mut Session,
        broken: &[(RouteKey, Route, Option<u32>)],
    ) -> Result<Vec<RouteKey>, Failure> {
        Ok(broken.iter().map(|(k, _, _)| *k).collect())
    }
    fn reclaim_slots(&mut self, _: &mut Session, _: Option<&DpSnapshot>) -> Result<usize, Failure> {
        // found only by taking the slots back
        Ok(0)
    }
    fn sweep(&mut self, live: &[u64]) -> Vec<std::path::PathBuf> {
        mpt_bpf::pinned::stale_pin_dirs(&mpt_bpf::mproute::state::SUITE, live)
    }
}

impl Session {
    /// `sync`: report and repair drift, the writes made by `fx`; with `reset`, drop the
    /// namespace's state.
    pub(crate) fn sync(
        &mut self,
        reset: bool,
        fx: &mut dyn SyncFx,
    ) -> Result<Vec<ActionRow>, Failure> {
        let mut rows = Vec::new();
        let done = fx.done();
        if reset {
            let cookie = mpt_sys::netns::cookie()
                .map_err(|e| Failure::system(format!("sync reset: {e}")))?;
            fx.reset(self, cookie)?;
            rows.push(ActionRow {
                action: "reset".into(),
                dst: "-".into(),
                table: None,
                metric: None,
                reason: if done {
                    "state of this namespace removed"
                } else {
                    "state of this namespace would be removed"
                }
                .into(),
            });
            return Ok(rows);
        }
        // Objects the kernel deleted with a link that is back: put back first, with their
        // routes, so that those are not taken for routes deleted behind mproute's back.
        let (restored, restoring) = fx.restore(self)?;
        rows.extend(restored);
        let waiting = self.waiting_for_link()?;
        // The FIB's dump and the state's reads at once, on two threads: the state, its groups
        // and both LPM tries, each read in batches, then compared in memory (no system call
        // or search per route where nothing is to repair).
        self.store(false)?;
        self.sock()?;
        let (dumped, read) = {
            let store = self.store.as_ref();
            let sock = self
                .sock
                .as_mut()
                .ok_or_else(|| Failure::system("sync: no netlink socket"))?;
            std::thread::scope(|sc| {
                let reader = sc.spawn(move || store.map(read_state).transpose());
                let dumped = dump(sock, None, None);
                let read = reader
                    .join()
                    .unwrap_or_else(|_| Err(Failure::system("sync: the state reader failed")));
                (dumped, read)
            })
        };
        let all = dumped?;
        let (managed, groups, mut snap) = read?.unwrap_or_default();
        // the first route of a key: the one the kernel uses (IPv4 alternatives added with
        // append share it)
        let mut fib: HashMap<RouteKey, &Route> = HashMap::new();
        for r in &all {
            fib.entry(r.key).or_insert(r);
        }
        // Routes whose kernel route changed behind mproute's back with protocol mproute: taken
        // again below from the FIB, with the algorithm they had.
        let mut retake: HashMap<RouteKey, Algo> = HashMap::new();
        // state read without the lock (a dry run): an invocation that died mid-write left
        // state ahead of the FIB, which is not drift behind mproute's back (the next
        // invocation that takes the lock repairs it)
        let half = self.store(false)?.filter(|s| !s.locked()).and_then(|_| {
            mpt_sys::netns::cookie().ok().and_then(|c| {
                mpt_bpf::pinned::interrupted_writer(&mpt_bpf::mproute::state::SUITE, c)
            })
        });
        let gone_why = match &half {
            Some(who) => format!(
                "half-written by an invocation stopped mid-write ({who}): its route never reached the kernel"
            ),
            None => "route was deleted behind mproute's back".to_string(),
        };
        let ctx = |e| Failure::bpf("read dataplane state", e);
        let mut forget: Vec<RouteKey> = Vec::new();
        // each group's paths and weights, made once (routes share groups)
        let mut weighted: HashMap<u32, Option<crate::verify::Weighted>> = HashMap::new();
        for (k, m) in &managed {
            let (k, m) = (*k, *m);
            let Some(r) = fib.get(&k) else {
                if restoring.contains(&m.group) {
                    continue; // put back with its object (the row above)
                }
                if waiting.contains(&m.group) {
                    rows.push(action(
                        "waiting",
                        &k,
                        "the kernel deleted its nexthop object with its link; put back when the link is up",
                    ));
                    continue;
                }
                forget.push(k);
                rows.push(action("forgotten", &k, &gone_why));
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
                    let Some((ours, ours_w)) = weighted.entry(m.group).or_insert_with(|| {
                        groups.get(&m.group).map(|g| crate::verify::weighted(g))
                    }) else {
                        continue;
                    };
                    match route_drift(ours, ours_w, r) {
                        Some(why) => why,
                        None => continue,
                    }
                }
            };
            forget.push(k);
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
        let mut now: HashMap<RouteKey, Managed> = managed.into_iter().collect();
        fx.forget(self, &forget, &now, &mut snap)?;
        if done {
            for k in &forget {
                now.remove(k);
            }
        }
        let mut group_ids: HashSet<u32> = groups.keys().copied().collect();
        // Routes of protocol mproute the state does not have (any more): adopted, or taken
        // again with the algorithm they had.
        let mut adopted = Vec::new();
        for r in all.iter().filter(|r| r.protocol == MPROUTE_PROTO) {
            let retaken = retake.get(&r.key).copied();
            // the dry run forgot nothing: a retaken route is still in its state
            if retaken.is_none() && now.contains_key(&r.key) {
                continue;
            }
            if let Some(m) = fx.adopt(self, r, retaken.unwrap_or(Algo::L3Hash))? {
                now.insert(r.key, m);
                group_ids.insert(m.group);
                adopted.push(r.key);
            }
            let taken = if done { "taken" } else { "would be taken" };
            rows.push(match retaken {
                Some(a) => action(
                    "updated",
                    &r.key,
                    &format!(
                        "nexthops changed behind mproute's back: {taken} from the FIB \
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
        if let Some(s) = self.store(false)? {
            s.bpf()
                .dp_snapshot_refresh(&mut snap, &adopted)
                .map_err(ctx)?;
        }
        // Dataplane entries that went missing (a crash between two writes, an old ABI's
        // leftovers): every managed route must have its LPM entry and group.
        let broken = broken_dataplane(&fib, &now, &group_ids, &snap);
        let what = if done {
            "its dataplane entry was missing"
        } else {
            "its dataplane entry is missing"
        };
        for k in fx.repair_dataplane(self, &broken)? {
            rows.push(action("repaired-dataplane", &k, what));
        }
        // Counter slots recorded as taken that no LPM entry holds (a crash between two writes).
        let lost = fx.reclaim_slots(self, broken.is_empty().then_some(&snap))?;
        if lost > 0 {
            rows.push(ActionRow {
                action: "reclaimed-counter-slots".into(),
                dst: lost.to_string(),
                table: None,
                metric: None,
                reason: "recorded as taken, held by no route".into(),
            });
        }
        // Nexthop objects and groups no route uses any more, from the dump above (the FIB has
        // not changed since: sync writes only the state).
        if done {
            let referenced: HashSet<u32> = all.iter().filter_map(|r| r.nh_id).collect();
            let used: HashSet<u32> = now.values().map(|m| m.group).collect();
            self.collect_with(&referenced, Some(used))?;
        }
        // State pinned for namespaces that no longer exist.
        for path in fx.sweep(&mpt_sys::netns::reachable_cookies()) {
            rows.push(ActionRow {
                action: "removed-stale-state".into(),
                dst: path.display().to_string(),
                table: None,
                metric: None,
                reason: "its network namespace no longer exists".into(),
            });
        }
        Ok(rows)
    }
}

/// What `sync` compares with the FIB: the state, its groups, both LPM tries.
type StateRead = (
    Vec<(RouteKey, Managed)>,
    HashMap<u32, Vec<mpt_bpf::mproute::route_table::GroupNexthop>>,
    DpSnapshot,
);

fn read_state(s: &crate::store::Store) -> Result<StateRead, Failure> {
    let ctx = |e| Failure::bpf("read dataplane state", e);
    Ok((
        s.all()?,
        s.bpf().dp_groups().map_err(ctx)?,
        s.bpf().dp_snapshot().map_err(ctx)?,
    ))
}

/// The managed routes whose dataplane entry is missing or points at a missing group, each
/// with the FIB route it is written from and its group if that is missing; from the state,
/// group ids and tries as read.
#[allow(clippy::type_complexity)]
fn broken_dataplane(
    fib: &HashMap<RouteKey, &Route>,
    managed: &HashMap<RouteKey, Managed>,
    groups: &HashSet<u32>,
    snap: &DpSnapshot,
) -> Vec<(RouteKey, Route, Option<u32>)> {
    // the lowest metric of each prefix and table: the route the LPM entry is for
    let mut lowest: HashMap<(ipnet::IpNet, u32), u32> = HashMap::new();
    for k in managed.keys() {
        let e = lowest.entry((k.dst, k.table)).or_insert(k.metric);
        *e = (*e).min(k.metric);
    }
    let mut broken = Vec::new();
    for (k, m) in managed {
        if lowest.get(&(k.dst, k.table)).is_some_and(|l| *l < k.metric) {
            continue; // shadowed
        }
        let entry_ok = snap
            .get(k)
            .is_some_and(|e| e.group == m.group && e.id == *k && e.recipe == m.recipe);
        let group_ok = groups.contains(&m.group);
        if entry_ok && group_ok {
            continue;
        }
        let Some(r) = fib.get(k) else {
            continue;
        };
        broken.push((*k, (*r).clone(), (!group_ok).then_some(m.group)));
    }
    broken
}

impl Session {
    /// The lock was taken over from an invocation that died mid-write (`who`): what it left
    /// half-done (state and dataplane entries ahead of the FIB, a group half-written) is
    /// repaired now, as `sync` repairs, before this invocation changes anything, and said in
    /// one note. `sync` after it finds nothing to report.
    pub(crate) fn repair_interrupted(&mut self, who: &str) -> Result<(), Failure> {
        let rows = self.sync(false, &mut Repair)?;
        let count = |a: &str| rows.iter().filter(|r| r.action == a).count();
        let (dropped, retaken, adopted) = (count("forgotten"), count("updated"), count("adopted"));
        mpt_cli::error::eprint_once(
            "mproute",
            "note",
            &format!(
                "repaired what an invocation stopped mid-write left ({who}): {dropped} routes it had not installed dropped, {retaken} taken again from the FIB, {adopted} adopted"
            ),
        );
        Ok(())
    }
}

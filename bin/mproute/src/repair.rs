//! `mproute sync`: what changed behind mproute's back, reported and repaired. A managed route
//! deleted with `ip route del` is forgotten; one replaced with other nexthops is forgotten
//! (another protocol) or taken again from the FIB with its algorithm (protocol mproute); routes
//! with protocol mproute missing from the state are adopted; dataplane entries lost in a crash
//! are rewritten; counter slots no route holds are reclaimed; the pins of dead namespaces go.

use std::collections::HashMap;

use mpt_cli::{names, Failure};
use mpt_model::{Algo, Route, RouteKey, MPROUTE_PROTO};

use crate::session::{dump, Session};
use crate::store::Managed;
use crate::txn::{dp_nexthops, key_hash, route_drift};
use crate::view::{action, ActionRow};

impl Session {
    /// `sync`: report and repair drift; with `reset`, drop the namespace's state.
    pub(crate) fn sync(&mut self, reset: bool) -> Result<Vec<ActionRow>, Failure> {
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
            if self.opts.check {
                rows.push(ActionRow {
                    action: "reset".into(),
                    dst: "-".into(),
                    table: None,
                    metric: None,
                    reason: "state of this namespace would be removed".into(),
                });
                return Ok(rows);
            }
            if let Some(s) = self.store.as_mut() {
                s.end()?;
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
            return Ok(rows);
        }
        // Objects the kernel deleted with a link that is back: put back first, with their
        // routes, so that those are not taken for routes deleted behind mproute's back.
        let (restored, restoring) = self.restore_objects()?;
        rows.extend(restored);
        let waiting = self.waiting_for_link()?;
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
        let dry = self.opts.check;
        // a dry run reads without the lock: an invocation that died mid-write left state
        // ahead of the FIB, which is not drift behind mproute's back (the next invocation
        // that takes the lock repairs it)
        let half = dry
            .then(|| {
                mpt_sys::netns::cookie().ok().and_then(|c| {
                    mpt_bpf::pinned::interrupted_writer(&mpt_bpf::mproute::state::SUITE, c)
                })
            })
            .flatten();
        let gone_why = match &half {
            Some(who) => format!(
                "half-written by an invocation stopped mid-write ({who}): its route never reached the kernel"
            ),
            None => "route was deleted behind mproute's back".to_string(),
        };
        if let Some(s) = self.store(false)? {
            for (k, m) in s.all()? {
                let Some(r) = fib.get(&k) else {
                    if dry && restoring.contains(&m.group) {
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
                    if !dry {
                        s.forget(&k, true)?;
                    }
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
                        let Some((ours, ours_w)) = crate::verify::group_of(s.bpf(), m.group)?
                        else {
                            continue;
                        };
                        match route_drift(&ours, &ours_w, r) {
                            Some(why) => why,
                            None => continue,
                        }
                    }
                };
                if !dry {
                    s.forget(&k, true)?;
                }
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
        self.gc_needed = !dry;
        let orphans: Vec<&Route> = all.iter().filter(|r| r.protocol == MPROUTE_PROTO).collect();
        if dry {
            for r in orphans {
                let retaken = retake.get(&r.key).copied();
                if retaken.is_none() && self.managed(&r.key)?.is_some() {
                    continue;
                }
                rows.push(match retaken {
                    Some(a) => action(
                        "updated",
                        &r.key,
                        &format!(
                            "nexthops changed behind mproute's back: would be taken from the FIB \
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
        } else if !orphans.is_empty() {
            let s = self
                .store(true)?
                .ok_or_else(|| Failure::system("sync: cannot create mproute state"))?;
            for r in orphans {
                if s.get(&r.key)?.is_none() {
                    let retaken = retake.get(&r.key).copied();
                    let algo = retaken.unwrap_or(Algo::L3Hash);
                    let raw = s.bpf();
                    let ctx = |e| Failure::bpf("write dataplane state", e);
                    let group = match r.nh_id {
                        Some(id) => id,
                        None => raw.dp_private_group(key_hash(&r.key)).map_err(ctx)?,
                    };
                    raw.dp_put_group(group, &dp_nexthops(&r.nexthops))
                        .map_err(ctx)?;
                    raw.dp_put_route(&crate::store::to_key(&r.key), algo.as_u32() as u8, group)
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
        if let Some(s) = self.store(false)?.filter(|_| !dry) {
            // best effort: a lost slot only costs speed
            let lost = s.bpf().dp_rescan_slots().unwrap_or(0);
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
        let suite = &mpt_bpf::mproute::state::SUITE;
        let stale = if dry {
            mpt_bpf::pinned::stale_pin_dirs(suite, &live)
        } else {
            mpt_bpf::pinned::sweep_stale(suite, &live)
        };
        for path in stale {
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

    /// Rewrite the LPM entry and group of every managed route whose dataplane entry is
    /// missing or points at a missing group.
    pub(crate) fn repair_dataplane(&mut self, fib: &[Route]) -> Result<Vec<ActionRow>, Failure> {
        let dry = self.opts.check;
        let Some(s) = self.store(false)? else {
            return Ok(Vec::new());
        };
        let raw = s.bpf();
        let ctx = |e| Failure::bpf("repair dataplane state", e);
        let all = s.all()?;
        let mut broken = Vec::new();
        for (k, m) in &all {
            let key = crate::store::to_key(k);
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
            if dry {
                broken.push(*k);
                continue;
            }
            if !group_ok {
                raw.dp_put_group(m.group, &dp_nexthops(&r.nexthops))
                    .map_err(ctx)?;
            }
            broken.push(*k);
        }
        if dry {
            return Ok(broken
                .iter()
                .map(|k| action("repaired-dataplane", k, "its dataplane entry is missing"))
                .collect());
        }
        // Written over, not deleted first (the route keeps its counters and slot); an entry
        // of no managed route in the way goes.
        self.resettle_lpm(&broken)?;
        let mut rows = Vec::new();
        if let Some(s) = self.store(false)? {
            for k in &broken {
                let key = crate::store::to_key(k);
                if s.bpf()
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
}

impl Session {
    /// The lock was taken over from an invocation that died mid-write (`who`): what it left
    /// half-done (state and dataplane entries ahead of the FIB, a group half-written) is
    /// repaired now, as `sync` repairs, before this invocation changes anything, and said in
    /// one note. `sync` after it finds nothing to report.
    pub(crate) fn repair_interrupted(&mut self, who: &str) -> Result<(), Failure> {
        let rows = self.sync(false)?;
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

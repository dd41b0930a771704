//! Resilient routes' bucket tables (`algo l3-hash|l4-hash resilient [buckets N] [idle-timer
//! S]`): computed when a route is written, from the table it had and the nexthops it had
//! (matched by device and gateway, so that a nexthop keeps its buckets wherever it moves in the
//! list), with [`mpt_model::route::resilient::rebalance`]; kept in `mpt_res`, which the
//! dataplane reads between the hash and the group.

use mpt_bpf::mproute::abi::{MptResTable, MptRouteKey, MAX_BUCKETS};
use mpt_bpf::mproute::state::RouteState;
use mpt_cli::Failure;
use mpt_model::route::resilient::rebalance;
use mpt_model::Nexthop;

use crate::grammar::Resilient;

/// CLOCK_MONOTONIC_COARSE in seconds, the clock the dataplane stamps buckets with
/// (`bpf_ktime_get_coarse_ns`).
pub fn now_s() -> u32 {
    // CLOCK_MONOTONIC_COARSE cannot fail on Linux; 0 reads as "never used" if it did
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC_COARSE)
        .map_or(0, |t| t.tv_sec() as u32)
}

/// Whether bucket `b` of `t` may move now: never used, or idle for `idle_timer` seconds.
pub fn idle(t: &MptResTable, b: usize, idle_timer: u32, now: u32) -> bool {
    let used = t.used_s.get(b).copied().unwrap_or(0);
    used == 0 || now.saturating_sub(used) >= idle_timer
}

/// The table route `key` gets with `nexthops`: its current table rebalanced (the current
/// entry's group says which nexthop each old index was), or a new one.
pub fn table_for(
    raw: &RouteState,
    key: &MptRouteKey,
    nexthops: &[Nexthop],
    p: Resilient,
) -> Result<MptResTable, Failure> {
    let ctx = |e| Failure::bpf("read dataplane state", e);
    let old = raw.res_get(key).map_err(ctx)?;
    let old_group = match raw.dp_get_route(key).map_err(ctx)? {
        Some(e) if e.id == *key => crate::verify::group_of(raw, e.group)?,
        _ => None,
    };
    let weights: Vec<u16> = nexthops.iter().map(|n| n.weight).collect();
    let now = now_s();
    let mut t = MptResTable {
        n_buckets: p.buckets,
        idle_timer_s: p.idle_timer,
        ..MptResTable::default()
    };
    let n = usize::from(p.buckets).min(MAX_BUCKETS);
    let (old_map, idle_map): (Vec<Option<usize>>, Vec<bool>) = match (&old, &old_group) {
        (Some(o), Some((paths, _))) if o.n_buckets == p.buckets => (0..n)
            .map(|b| {
                let was = paths.get(usize::from(o.nh[b]));
                let now_at = was.and_then(|(ifindex, gw)| {
                    nexthops.iter().position(|nh| {
                        nh.gateway == *gw && (nh.ifindex == 0 || nh.ifindex == *ifindex)
                    })
                });
                (now_at, idle(o, b, p.idle_timer, now))
            })
            .unzip(),
        _ => (Vec::new(), Vec::new()),
    };
    let table = rebalance(&old_map, &idle_map, &weights, p.buckets);
    t.nh[..n].copy_from_slice(&table[..n]);
    if let Some(o) = &old {
        if o.n_buckets == p.buckets {
            // buckets keep their activity: a later rebalance still sees the flows on them
            t.used_s[..n].copy_from_slice(&o.used_s[..n]);
        }
    }
    Ok(t)
}

/// Whether route `key`'s table has these parameters (both absent counts as equal).
pub fn same_params(
    raw: &RouteState,
    key: &MptRouteKey,
    p: Option<Resilient>,
) -> Result<bool, Failure> {
    let t = raw
        .res_get(key)
        .map_err(|e| Failure::bpf("read dataplane state", e))?;
    Ok(match (t, p) {
        (None, None) => true,
        (Some(t), Some(p)) => t.n_buckets == p.buckets && t.idle_timer_s == p.idle_timer,
        _ => false,
    })
}

impl crate::session::Session {
    /// Move the buckets a nexthop holds beyond its share once they are idle (the table's idle
    /// timer), for every resilient route: what the kernel's resilient groups do in the
    /// background, done by `dataplane watch` on each round. Returns how many tables changed.
    pub fn settle_resilient(&mut self) -> Result<usize, Failure> {
        let Some(store) = self.store(false)? else {
            return Ok(0);
        };
        let raw = store.bpf();
        let ctx = |e| Failure::bpf("rebalance resilient tables", e);
        let now = now_s();
        let mut changed = 0;
        for (k, m) in store.all()? {
            let key = crate::store::to_key(&k);
            let Some(t) = raw.res_get(&key).map_err(ctx)? else {
                continue;
            };
            let Some((_, weights)) = crate::verify::group_of(raw, m.group)? else {
                continue;
            };
            let n = usize::from(t.n_buckets).min(MAX_BUCKETS);
            let old: Vec<Option<usize>> = t.nh[..n]
                .iter()
                .map(|i| Some(usize::from(*i)).filter(|i| *i < weights.len()))
                .collect();
            let idle: Vec<bool> = (0..n).map(|b| idle(&t, b, t.idle_timer_s, now)).collect();
            let table = rebalance(&old, &idle, &weights, t.n_buckets);
            if table[..] != t.nh[..n] {
                let mut nt = t;
                nt.nh[..n].copy_from_slice(&table);
                raw.res_put(&key, &nt).map_err(ctx)?;
                changed += 1;
            }
        }
        Ok(changed)
    }
}

//! Resilient routes' bucket tables (`algo l3-hash|l4-hash resilient [buckets N] [idle-timer
//! S]`): computed when a route is written, from the table it had and the nexthops it had, by
//! [`mpt_bpf::mproute::resilient::ResTable`]; kept in `mpt_res`, which the dataplane reads
//! between the hash and the group.

use mpt_bpf::mproute::resilient::ResTable;
use mpt_bpf::mproute::state::RouteState;
use mpt_cli::Failure;
use mpt_model::{Nexthop, RouteKey};

use crate::grammar::Resilient;

/// CLOCK_MONOTONIC_COARSE in seconds, the clock the dataplane stamps buckets with
/// (`bpf_ktime_get_coarse_ns`).
pub fn now_s() -> u32 {
    // CLOCK_MONOTONIC_COARSE cannot fail on Linux; 0 reads as "never used" if it did
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC_COARSE)
        .map_or(0, |t| t.tv_sec() as u32)
}

/// The table route `key` gets with `nexthops`: its current table rebalanced (the current
/// entry's group says which nexthop each old index was), or a new one.
pub fn table_for(
    raw: &RouteState,
    key: &RouteKey,
    nexthops: &[Nexthop],
    p: Resilient,
    seed: u32,
) -> Result<ResTable, Failure> {
    if p.consistent {
        return Ok(ResTable::consistent(&identities(nexthops), seed, p.buckets));
    }
    let ctx = |e| Failure::bpf("read dataplane state", e);
    let old = raw.res_get(key).map_err(ctx)?;
    let old_group = match raw.dp_get_route(key).map_err(ctx)? {
        Some(e) if e.id == *key => crate::verify::group_of(raw, e.group)?,
        _ => None,
    };
    Ok(ResTable::rebalanced(
        old.as_ref(),
        old_group.as_ref().map(|(paths, _)| &paths[..]),
        nexthops,
        p.buckets,
        p.idle_timer,
        now_s(),
    ))
}

/// The nexthops as a consistent table names them (gateway, else device name), with weights.
pub fn identities(nexthops: &[Nexthop]) -> Vec<(Vec<u8>, u16)> {
    nexthops
        .iter()
        .map(|n| {
            let dev = if n.gateway.is_none() {
                mpt_sys::iface::name(n.ifindex).unwrap_or_default()
            } else {
                String::new()
            };
            (
                mpt_model::route::consistent::identity(n.gateway, &dev),
                n.weight,
            )
        })
        .collect()
}

/// Whether route `key`'s table has these parameters (both absent counts as equal).
pub fn same_params(
    raw: &RouteState,
    key: &RouteKey,
    p: Option<Resilient>,
) -> Result<bool, Failure> {
    let t = raw
        .res_get(key)
        .map_err(|e| Failure::bpf("read dataplane state", e))?;
    Ok(match (t, p) {
        (None, None) => true,
        (Some(t), Some(p)) if p.consistent => t.is_consistent_of(p.buckets),
        (Some(t), Some(p)) => t.has_params(p.buckets, p.idle_timer),
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
            let Some(t) = raw.res_get(&k).map_err(ctx)? else {
                continue;
            };
            let Some((_, weights)) = crate::verify::group_of(raw, m.group)? else {
                continue;
            };
            if let Some(nt) = t.settled(&weights, now) {
                raw.res_put(&k, &nt).map_err(ctx)?;
                changed += 1;
            }
        }
        Ok(changed)
    }
}

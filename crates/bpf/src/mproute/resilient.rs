//! Resilient routes' bucket tables (`mpt_res`, which the dataplane reads between the hash and
//! the group): [`ResTable`], computed from the table a route had and the nexthops it had
//! (matched by device and gateway, so that a nexthop keeps its buckets wherever it moves in the
//! list) with [`mpt_model::route::resilient::rebalance`].

use std::net::IpAddr;

use mpt_model::route::resilient::rebalance;
use mpt_model::Nexthop;

use super::abi::{MptResTable, MAX_BUCKETS, RES_F_CONSISTENT};

/// A resilient route's bucket table (boxed: 20 KiB, and a `Result` of it by value costs a copy
/// of that size at every `?`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResTable(Box<MptResTable>);

impl ResTable {
    pub(crate) fn from_bytes(b: &[u8]) -> Option<ResTable> {
        MptResTable::from_bytes(b).map(|t| ResTable(Box::new(t)))
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    /// Number of buckets.
    pub fn buckets(&self) -> u16 {
        self.0.n_buckets
    }

    /// Seconds a bucket must be idle before a rebalance moves it.
    pub fn idle_timer(&self) -> u32 {
        self.0.idle_timer_s
    }

    /// Bucket -> index of its nexthop in the route's group, for every bucket of the table.
    pub fn assignment(&self) -> &[u8] {
        self.0.buckets()
    }

    /// The index of bucket `b`'s nexthop in the route's group (`None`: beyond the table).
    pub fn nexthop_of(&self, b: usize) -> Option<usize> {
        self.0.nh.get(b).map(|i| usize::from(*i))
    }

    /// Whether the table has these parameters (a resilient one: not consistent).
    pub fn has_params(&self, buckets: u16, idle_timer: u32) -> bool {
        self.0.n_buckets == buckets && self.0.idle_timer_s == idle_timer && !self.is_consistent()
    }

    /// Whether it is a consistent (Maglev) table of `size` slots.
    pub fn is_consistent_of(&self, size: u16) -> bool {
        self.is_consistent() && self.0.n_buckets == size
    }

    /// Whether it is a consistent (Maglev) table: computed from the route alone, never
    /// rebalanced by idle time.
    pub fn is_consistent(&self) -> bool {
        self.0.flags & RES_F_CONSISTENT != 0
    }

    /// The consistent table of `size` slots (prime) for nexthops given as (identity, weight),
    /// in the route's order ([`mpt_model::route::consistent::table`]).
    pub fn consistent(nexthops: &[(Vec<u8>, u16)], seed: u32, size: u16) -> ResTable {
        let size = size.min(MAX_BUCKETS as u16);
        let table = mpt_model::route::consistent::table(nexthops, seed, size);
        let mut t = Box::new(MptResTable {
            n_buckets: size,
            flags: RES_F_CONSISTENT,
            ..MptResTable::default()
        });
        t.nh[..table.len()].copy_from_slice(&table);
        ResTable(t)
    }

    /// Whether bucket `b` may move now (`now`: CLOCK_MONOTONIC_COARSE seconds, the dataplane's
    /// stamps): never used, or idle for `idle_timer` seconds.
    pub fn idle(&self, b: usize, idle_timer: u32, now: u32) -> bool {
        let used = self.0.used_s.get(b).copied().unwrap_or(0);
        used == 0 || now.saturating_sub(used) >= idle_timer
    }

    /// The table of a route that gets `nexthops` with `buckets` and `idle_timer`: `old`, the
    /// table it has, rebalanced (`old_paths`, (device, gateway) by index, say which nexthop each
    /// of its indexes was), or a new one.
    pub fn rebalanced(
        old: Option<&ResTable>,
        old_paths: Option<&[(u32, Option<IpAddr>)]>,
        nexthops: &[Nexthop],
        buckets: u16,
        idle_timer: u32,
        now: u32,
    ) -> ResTable {
        let weights: Vec<u16> = nexthops.iter().map(|n| n.weight).collect();
        let mut t = Box::new(MptResTable {
            n_buckets: buckets,
            idle_timer_s: idle_timer,
            ..MptResTable::default()
        });
        let n = usize::from(buckets).min(MAX_BUCKETS);
        let (old_map, idle_map): (Vec<Option<usize>>, Vec<bool>) = match (old, old_paths) {
            (Some(o), Some(paths)) if o.0.n_buckets == buckets => (0..n)
                .map(|b| {
                    let was = paths.get(usize::from(o.0.nh[b]));
                    let now_at = was.and_then(|(ifindex, gw)| {
                        nexthops.iter().position(|nh| {
                            nh.gateway == *gw && (nh.ifindex == 0 || nh.ifindex == *ifindex)
                        })
                    });
                    (now_at, o.idle(b, idle_timer, now))
                })
                .unzip(),
            _ => (Vec::new(), Vec::new()),
        };
        let table = rebalance(&old_map, &idle_map, &weights, buckets);
        t.nh[..n].copy_from_slice(&table[..n]);
        if let Some(o) = old {
            if o.0.n_buckets == buckets {
                // buckets keep their activity: a later rebalance still sees the flows on them
                t.used_s[..n].copy_from_slice(&o.0.used_s[..n]);
            }
        }
        ResTable(t)
    }

    /// The buckets a nexthop holds beyond its share (by `weights`, the route's group) moved,
    /// those idle for the table's idle timer; `None` if none moves.
    pub fn settled(&self, weights: &[u16], now: u32) -> Option<ResTable> {
        if self.is_consistent() {
            return None;
        }
        let t = &self.0;
        let n = usize::from(t.n_buckets).min(MAX_BUCKETS);
        let old: Vec<Option<usize>> = t.nh[..n]
            .iter()
            .map(|i| Some(usize::from(*i)).filter(|i| *i < weights.len()))
            .collect();
        let idle: Vec<bool> = (0..n).map(|b| self.idle(b, t.idle_timer_s, now)).collect();
        let table = rebalance(&old, &idle, weights, t.n_buckets);
        if table[..] == t.nh[..n] {
            return None;
        }
        let mut nt = self.clone();
        nt.0.nh[..n].copy_from_slice(&table);
        Some(nt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nh(ifindex: u32, weight: u16) -> Nexthop {
        Nexthop {
            gateway: None,
            ifindex,
            weight,
            flags: 0,
        }
    }

    #[test]
    fn new_table_and_rebalance_keep_buckets() {
        let t = ResTable::rebalanced(None, None, &[nh(2, 1), nh(3, 1)], 8, 30, 100);
        assert!(t.has_params(8, 30));
        assert_eq!(t.assignment().len(), 8);
        assert!(t.assignment().iter().all(|i| *i < 2));
        // the same nexthops in another order keep their buckets
        let paths = [(2, None), (3, None)];
        let u = ResTable::rebalanced(Some(&t), Some(&paths), &[nh(3, 1), nh(2, 1)], 8, 30, 100);
        for (a, b) in t.assignment().iter().zip(u.assignment()) {
            assert_eq!(paths[usize::from(*a)].0, [3, 2][usize::from(*b)]);
        }
        // nothing idle is skewed: settled moves nothing
        assert_eq!(u.settled(&[1, 1], 100), None);
        assert!(u.idle(0, 30, 100));
        assert_eq!(u.nexthop_of(MAX_BUCKETS), None);
    }
}

//! Resilient hashing: a table of buckets between the flow hash and the nexthops, as the
//! kernel's resilient nexthop groups keep it (Documentation/networking/nexthop-group-resilient
//! .rst). A flow's bucket is fixed by its hash; a bucket's nexthop changes only when the table
//! is rebalanced, and a rebalance moves as few buckets as it can: those of a nexthop that went
//! away (always), and those a nexthop holds beyond its share once they have been idle for the
//! idle timer (so that a flow in progress keeps its path). Removing one of N equal nexthops
//! moves 1/N of the buckets; adding one moves about 1/(N+1).
//!
//! The dataplane (bpf/mproute/pick.h, `mpt_pick_bucket`) and `mproute get` find a flow's bucket
//! with [`bucket_of`]; user space computes tables with [`rebalance`].

/// Buckets of a table unless `buckets N` is given (the kernel's default too).
pub const DEFAULT_BUCKETS: u16 = 128;
/// Most buckets a table may have (the dataplane's table is a fixed array).
pub const MAX_BUCKETS: u16 = 4096;
/// Seconds a bucket must be idle before a rebalance may move it (the kernel's default).
pub const DEFAULT_IDLE_TIMER: u32 = 120;

/// The bucket of a flow whose 31-bit hash is `hash31`, in a table of `n` buckets:
/// `(hash31 * n) >> 31`, a multiply instead of a modulo (the dataplane computes the same).
pub fn bucket_of(hash31: u32, n: u16) -> usize {
    ((u64::from(hash31 & 0x7fff_ffff) * u64::from(n)) >> 31) as usize
}

/// How many of `n` buckets each nexthop should hold: shares proportional to the weights,
/// the remainders going to the largest fractions (ties: the lower index).
pub fn shares(weights: &[u16], n: u16) -> Vec<usize> {
    let total: u64 = weights.iter().map(|w| u64::from(*w)).sum();
    if total == 0 {
        return vec![0; weights.len()];
    }
    let n = u64::from(n);
    let mut out: Vec<usize> = weights
        .iter()
        .map(|w| (u64::from(*w) * n / total) as usize)
        .collect();
    let mut left = n as usize - out.iter().sum::<usize>();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    // largest remainder first
    order.sort_by_key(|i| std::cmp::Reverse(u64::from(weights[*i]) * n % total));
    for i in order {
        if left == 0 {
            break;
        }
        out[i] += 1;
        left -= 1;
    }
    out
}

/// The table after a change. `old[b]`: the nexthop (an index into `weights`, the new list)
/// bucket `b` pointed at, `None` if its nexthop is gone or the table is new; `idle[b]`: whether
/// the bucket may move (unused for the idle timer). `old` and `idle` have `n` entries, or are
/// empty for a new table. Returns one nexthop index per bucket.
pub fn rebalance(old: &[Option<usize>], idle: &[bool], weights: &[u16], n: u16) -> Vec<u8> {
    let n = usize::from(n);
    let want = shares(weights, n as u16);
    let mut table: Vec<Option<usize>> = if old.len() == n {
        old.iter()
            .map(|o| o.filter(|i| *i < weights.len() && want[*i] > 0))
            .collect()
    } else {
        vec![None; n]
    };
    let mut have = vec![0usize; weights.len()];
    for i in table.iter().flatten() {
        have[*i] += 1;
    }
    // overweight nexthops give up idle buckets, from the last one back
    for b in (0..n).rev() {
        if let Some(i) = table[b] {
            let may_move = idle.get(b).copied().unwrap_or(true);
            if have[i] > want[i] && may_move {
                table[b] = None;
                have[i] -= 1;
            }
        }
    }
    // the free buckets to the nexthops furthest below their share (busy buckets left on an
    // overweight nexthop can make every one full: then the least loaded by weight)
    table
        .into_iter()
        .map(|slot| match slot {
            Some(i) => i as u8,
            None => {
                let pick = (0..weights.len())
                    .filter(|i| have[*i] < want[*i])
                    .max_by_key(|i| (want[*i] - have[*i], std::cmp::Reverse(*i)))
                    .or_else(|| {
                        (0..weights.len())
                            .filter(|i| weights[*i] > 0)
                            .min_by(|a, b| {
                                let la = have[*a] as f64 / f64::from(weights[*a]);
                                let lb = have[*b] as f64 / f64::from(weights[*b]);
                                la.total_cmp(&lb)
                            })
                    })
                    .unwrap_or(0);
                have[pick] += 1;
                pick as u8
            }
        })
        .collect()
}

/// Buckets per nexthop of a table (for `show -d`).
pub fn fill(table: &[u8], nexthops: usize) -> Vec<usize> {
    let mut out = vec![0; nexthops];
    for i in table {
        if let Some(c) = out.get_mut(usize::from(*i)) {
            *c += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moved(a: &[u8], b: &[u8]) -> usize {
        a.iter().zip(b).filter(|(x, y)| x != y).count()
    }

    #[test]
    fn buckets_cover_the_hash_space_evenly() {
        assert_eq!(bucket_of(0, 128), 0);
        assert_eq!(bucket_of(0x7fff_ffff, 128), 127);
        assert_eq!(bucket_of(0x4000_0000, 128), 64);
        assert_eq!(
            bucket_of(0xffff_ffff, 7),
            6,
            "the top bit is not part of the hash"
        );
    }

    #[test]
    fn shares_follow_weights_and_sum_to_n() {
        assert_eq!(shares(&[1; 8], 128), vec![16; 8]);
        let s = shares(&[1; 7], 128);
        assert_eq!(s.iter().sum::<usize>(), 128);
        assert!(s.iter().all(|c| *c == 18 || *c == 19));
        assert_eq!(shares(&[3, 1], 128), vec![96, 32]);
        assert_eq!(shares(&[], 128), Vec::<usize>::new());
    }

    #[test]
    fn removing_one_of_sixteen_moves_its_buckets_only() {
        let t0 = rebalance(&[], &[], &[1; 16], 128);
        assert_eq!(fill(&t0, 16), vec![8; 16]);
        // nexthop 5 goes: old indices above it shift down by one
        let old: Vec<Option<usize>> = t0
            .iter()
            .map(|i| match usize::from(*i) {
                5 => None,
                i if i > 5 => Some(i - 1),
                i => Some(i),
            })
            .collect();
        let t1 = rebalance(&old, &[false; 128], &[1; 15], 128);
        let renamed: Vec<u8> = old.iter().map(|o| o.map_or(255, |i| i as u8)).collect();
        assert_eq!(
            moved(&renamed, &t1),
            8,
            "exactly the removed nexthop's buckets"
        );
        let f = fill(&t1, 15);
        assert!(f.iter().all(|c| *c == 8 || *c == 9), "{f:?}");
    }

    #[test]
    fn adding_one_moves_about_one_in_n_plus_one_and_only_idle_buckets() {
        let t0 = rebalance(&[], &[], &[1; 15], 128);
        let old: Vec<Option<usize>> = t0.iter().map(|i| Some(usize::from(*i))).collect();
        let t1 = rebalance(&old, &[true; 128], &[1; 16], 128);
        assert_eq!(moved(&t0, &t1), 8);
        assert_eq!(fill(&t1, 16), vec![8; 16]);
        // every bucket busy: nothing moves, the new nexthop waits
        let t2 = rebalance(&old, &[false; 128], &[1; 16], 128);
        assert_eq!(t2, t0);
    }

    #[test]
    fn weights_and_a_new_table() {
        let t = rebalance(&[], &[], &[3, 1], 128);
        assert_eq!(fill(&t, 2), vec![96, 32]);
        let t = rebalance(&[], &[], &[1], 1);
        assert_eq!(t, vec![0]);
    }
}

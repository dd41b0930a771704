//! How a hashed route spreads the flow space (the 31-bit hash values) over its nexthops, and
//! the share of that space whose nexthop a change moves: computed exactly from the route's
//! tables (hash-threshold bounds, resilient buckets, consistent slots) as intervals of hash
//! values, not sampled. `mproute --check` reports it as `moved`.

/// A route's spread: nexthops named by an identity `K` the two sides share (within one router:
/// gateway, else device).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spread<K> {
    /// Hash-threshold: each nexthop with its upper bound (`-1`: unusable), in group order.
    Threshold(Vec<(K, i32)>),
    /// A bucket table (resilient or consistent): each slot's nexthop.
    Table(Vec<K>),
}

/// Size of the flow space: 2^31 hash values.
const SPACE: u64 = 1 << 31;

impl<K: Clone> Spread<K> {
    /// The spread as (first hash, one past the last, nexthop), in order, covering what it
    /// covers (a threshold route without a usable nexthop covers nothing).
    pub fn intervals(&self) -> Vec<(u64, u64, K)> {
        match self {
            Spread::Threshold(nhs) => {
                let mut out = Vec::new();
                let mut lo = 0u64;
                for (k, b) in nhs {
                    if *b < 0 {
                        continue;
                    }
                    let hi = u64::from(*b as u32) + 1;
                    if hi > lo {
                        out.push((lo, hi, k.clone()));
                        lo = hi;
                    }
                }
                out
            }
            Spread::Table(slots) => {
                let n = slots.len() as u64;
                // slot s holds the hashes h with (h * n) >> 31 == s: from ceil(s * 2^31 / n)
                let start = |s: u64| (s * SPACE).div_ceil(n);
                slots
                    .iter()
                    .enumerate()
                    .map(|(s, k)| (start(s as u64), start(s as u64 + 1), k.clone()))
                    .filter(|(a, b, _)| b > a)
                    .collect()
            }
        }
    }

    /// Each nexthop's share of the flow space.
    pub fn shares(&self) -> Vec<(K, f64)>
    where
        K: PartialEq,
    {
        let mut out: Vec<(K, f64)> = Vec::new();
        for (a, b, k) in self.intervals() {
            let s = (b - a) as f64 / SPACE as f64;
            match out.iter_mut().find(|(o, _)| *o == k) {
                Some(e) => e.1 += s,
                None => out.push((k, s)),
            }
        }
        out
    }
}

/// The share of the flow space (0.0–1.0) whose nexthop differs between `a` and `b` for the
/// same hash: what a change moves when the flow hash stays the same.
pub fn moved<K: Clone + PartialEq>(a: &Spread<K>, b: &Spread<K>) -> f64 {
    let (ia, ib) = (a.intervals(), b.intervals());
    let (mut i, mut j) = (0, 0);
    let mut pos = 0u64;
    let mut differ = 0u64;
    while pos < SPACE {
        let ca = ia.get(i).filter(|x| x.0 <= pos && pos < x.1);
        let cb = ib.get(j).filter(|x| x.0 <= pos && pos < x.1);
        // the next boundary of either side
        let next = [ia.get(i), ib.get(j)]
            .into_iter()
            .flatten()
            .flat_map(|x| [x.0, x.1])
            .filter(|p| *p > pos)
            .min()
            .unwrap_or(SPACE)
            .min(SPACE);
        if ca.map(|x| &x.2) != cb.map(|x| &x.2) {
            differ += next - pos;
        }
        pos = next;
        while ia.get(i).is_some_and(|x| x.1 <= pos) {
            i += 1;
        }
        while ib.get(j).is_some_and(|x| x.1 <= pos) {
            j += 1;
        }
    }
    differ as f64 / SPACE as f64
}

/// The share that changes nexthop when the flow hash changes too (another algorithm, fields or
/// seed): a flow lands anywhere, so it stays only where both spreads send it to the same
/// nexthop by chance: `1 - Σ share_a(k) · share_b(k)`.
pub fn moved_rehashed<K: Clone + PartialEq>(a: &Spread<K>, b: &Spread<K>) -> f64 {
    let sb = b.shares();
    let stay: f64 = a
        .shares()
        .iter()
        .map(|(k, s)| s * sb.iter().find(|(o, _)| o == k).map_or(0.0, |x| x.1))
        .sum();
    (1.0 - stay).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::resilient::bucket_of;
    use crate::route::threshold::{select, upper_bounds};

    fn threshold(ids: &[u8], w: &[u32]) -> Spread<u8> {
        let b = upper_bounds(w, &vec![true; w.len()]);
        Spread::Threshold(ids.iter().copied().zip(b).collect())
    }

    /// The exact share against a dense sample of the hash space.
    fn sampled(a: &Spread<u8>, b: &Spread<u8>) -> f64 {
        let pick = |s: &Spread<u8>, h: u32| match s {
            Spread::Threshold(v) => {
                let b: Vec<i32> = v.iter().map(|x| x.1).collect();
                select(h, &b).map(|i| v[i].0)
            }
            Spread::Table(t) => Some(t[bucket_of(h, t.len() as u16)]),
        };
        let n = 1u32 << 20;
        let d = (0..n)
            .filter(|i| {
                let h = ((u64::from(*i) << 31) / u64::from(n)) as u32 + 977;
                pick(a, h) != pick(b, h)
            })
            .count();
        d as f64 / f64::from(n)
    }

    #[test]
    fn threshold_removal_and_weights() {
        let four = threshold(&[1, 2, 3, 4], &[1, 1, 1, 1]);
        assert_eq!(moved(&four, &four), 0.0);
        // removing the last of 4 equal: its quarter, and the others' bounds shift
        let three = threshold(&[1, 2, 3], &[1, 1, 1]);
        let m = moved(&four, &three);
        assert!((m - sampled(&four, &three)).abs() < 0.001, "{m}");
        assert!((m - 0.5).abs() < 0.01, "{m}");
        let heavier = threshold(&[1, 2, 3, 4], &[2, 1, 1, 1]);
        let m = moved(&four, &heavier);
        assert!((m - sampled(&four, &heavier)).abs() < 0.001, "{m}");
    }

    #[test]
    fn tables_and_mixed() {
        let t: Vec<u8> = (0..251u32).map(|s| (s % 4) as u8 + 1).collect();
        let mut u = t.clone();
        for s in u.iter_mut() {
            if *s == 3 {
                *s = 1;
            }
        }
        let (a, b) = (Spread::Table(t), Spread::Table(u));
        let m = moved(&a, &b);
        assert!((m - 63.0 / 251.0).abs() < 0.001, "{m}");
        assert!((m - sampled(&a, &b)).abs() < 0.001);
        let th = threshold(&[1, 2, 3, 4], &[1, 1, 1, 1]);
        assert!((moved(&th, &a) - sampled(&th, &a)).abs() < 0.001);
    }

    #[test]
    fn rehashed_share() {
        let four = threshold(&[1, 2, 3, 4], &[1, 1, 1, 1]);
        assert!((moved_rehashed(&four, &four) - 0.75).abs() < 1e-6);
        let other = threshold(&[5, 6], &[1, 1]);
        assert!((moved_rehashed(&four, &other) - 1.0).abs() < 1e-9);
    }
}

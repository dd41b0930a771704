//! RFC 2992 hash-threshold selection with the kernel's bound formula.
//!
//! Each usable nexthop gets `upper_bound = round_closest((cumulative_weight << 31) / total) - 1`
//! (as `fib_rebalance()` computes it); a 31-bit hash picks the first nexthop whose bound is
//! greater than or equal to it. Unusable nexthops get no range at all.

/// Upper bounds for `weights`; `usable[i] == false` gives nexthop `i` the bound `-1` (never
/// chosen). Returns all `-1` when nothing is usable.
pub fn upper_bounds(weights: &[u32], usable: &[bool]) -> Vec<i32> {
    let total: u64 = weights
        .iter()
        .zip(usable)
        .filter(|(_, u)| **u)
        .map(|(w, _)| u64::from(*w))
        .sum();
    let mut out = Vec::with_capacity(weights.len());
    let mut w: u64 = 0;
    for (weight, ok) in weights.iter().zip(usable) {
        if !*ok || total == 0 {
            out.push(-1);
            continue;
        }
        w += u64::from(*weight);
        // DIV_ROUND_CLOSEST_ULL((u64)w << 31, total) - 1
        let bound = ((w << 31) + total / 2) / total;
        out.push((bound as i64 - 1) as i32);
    }
    out
}

/// The index of the nexthop a 31-bit `hash` selects, or `None` if no bound admits it.
pub fn select(hash31: u32, bounds: &[i32]) -> Option<usize> {
    let h = i64::from(hash31 & 0x7fff_ffff);
    bounds.iter().position(|b| *b >= 0 && h <= i64::from(*b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_weights_split_evenly() {
        let b = upper_bounds(&[1, 1], &[true, true]);
        assert_eq!(b, vec![0x3fff_ffff, 0x7fff_ffff]);
        assert_eq!(select(0, &b), Some(0));
        assert_eq!(select(0x3fff_ffff, &b), Some(0));
        assert_eq!(select(0x4000_0000, &b), Some(1));
        assert_eq!(select(0x7fff_ffff, &b), Some(1));
    }

    #[test]
    fn weights_three_to_one() {
        let b = upper_bounds(&[3, 1], &[true, true]);
        // 3/4 of 2^31 = 0x6000_0000
        assert_eq!(b, vec![0x5fff_ffff, 0x7fff_ffff]);
    }

    #[test]
    fn rounding_is_closest() {
        // 2^31 / 3 = 715827882.67 -> 715827883 - 1
        let b = upper_bounds(&[1, 1, 1], &[true, true, true]);
        assert_eq!(b[0], 715_827_882);
        assert_eq!(b[1], 1_431_655_764);
        assert_eq!(b[2], 0x7fff_ffff);
    }

    #[test]
    fn dead_nexthop_gets_no_range() {
        let b = upper_bounds(&[1, 1, 1], &[true, false, true]);
        assert_eq!(b[1], -1);
        assert_eq!(b[2], 0x7fff_ffff);
        for h in [0u32, 0x3fff_ffff, 0x4000_0000, 0x7fff_ffff] {
            assert_ne!(select(h, &b), Some(1));
        }
        assert_eq!(select(5, &upper_bounds(&[1], &[false])), None);
    }

    #[test]
    fn last_bound_is_always_max() {
        for n in 1..=32u32 {
            let w: Vec<u32> = (1..=n).collect();
            let b = upper_bounds(&w, &vec![true; n as usize]);
            assert_eq!(*b.last().expect("non-empty"), 0x7fff_ffff, "n={n}");
            assert!(b.windows(2).all(|p| p[0] < p[1]));
        }
    }
}

//! What a route write (`add`, `replace`, `append`, `change`) does, decided from the command and
//! what is there now: the one rule mproute's transaction and its dry run (`--check`) both
//! follow, so that the dry run cannot say other than the real one does.
//!
//! What is there is asked through [`Known`], lazily: the real run asks only what it needs for
//! the verb (an `add` of a batch reads no FIB), the dry run everything, with the lines before
//! it played in.

use crate::route::RTNH_F_ONLINK;
use crate::{Algo, Family, Nexthop, Route, Verb};

/// The write as the operator asked for it.
#[derive(Debug, Clone, Copy)]
pub struct Want<'a> {
    /// `add`, `replace`, `append` or `change`.
    pub verb: Verb,
    /// The route's family.
    pub family: Family,
    /// The paths asked for (a path typed without a device has ifindex 0).
    pub nexthops: &'a [Nexthop],
    /// The algorithm (l3-hash unless typed).
    pub algo: Algo,
    /// Whether `algo` was typed.
    pub algo_given: bool,
    /// The protocol the route is installed with.
    pub protocol: u8,
}

/// What is there now, as far as a decision needs it.
pub trait Known {
    /// Why a question could not be answered.
    type Error;
    /// The FIB route of the key (the first, which the kernel uses), where the caller reads it
    /// (`None` also when it does not).
    fn fib(&mut self) -> Result<Option<Route>, Self::Error>;
    /// The algorithm mproute's state records for the route, if it manages it.
    fn algo(&mut self) -> Result<Option<Algo>, Self::Error>;
    /// Whether the dataplane already holds FIB route `cur` as asked: its group has exactly the
    /// route's paths (a route changed behind mproute's back is settled by writing it again)
    /// and its bucket table the asked parameters.
    fn dataplane_agrees(&mut self, cur: &Route) -> Result<bool, Self::Error>;
}

/// The decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// The route is there as asked: nothing is written.
    Unchanged {
        /// Its algorithm.
        algo: Algo,
    },
    /// Write the route.
    Write {
        /// The algorithm it gets (`append` without one keeps the route's).
        algo: Algo,
        /// Its paths afterwards, as the kernel will have them: IPv6 merges appended paths into
        /// the route.
        nexthops: Vec<Nexthop>,
        /// IPv4 `append` to a route that exists: an alternative route of the same key is added
        /// behind the one the kernel uses, which stays as it is.
        alternative: bool,
        /// The kernel will refuse the write with this errno, from what is there already
        /// (`add` of a route that exists: EEXIST; `change` of one that does not: ENOENT). The
        /// dry run says so; the real run sends the request all the same and reports the
        /// kernel's own words.
        refused: Option<i32>,
    },
}

/// EEXIST and ENOENT (Linux's numbers, the same on every architecture).
const EEXIST: i32 = 17;
const ENOENT: i32 = 2;

/// Decide what writing `want` does.
pub fn plan<K: Known>(want: &Want<'_>, now: &mut K) -> Result<Plan, K::Error> {
    let fib = now.fib()?;
    let refused = match (want.verb, &fib) {
        (Verb::Add, Some(_)) => Some(EEXIST),
        (Verb::Change, None) => Some(ENOENT),
        _ => None,
    };
    let algo = if !want.algo_given && want.verb == Verb::Append {
        now.algo()?.unwrap_or(Algo::L3Hash)
    } else {
        want.algo
    };
    if let (Verb::Replace | Verb::Change, Some(cur)) = (want.verb, &fib) {
        if same_paths(cur, want.nexthops, want.protocol)
            && now.algo()? == Some(algo)
            && now.dataplane_agrees(cur)?
        {
            return Ok(Plan::Unchanged { algo });
        }
    }
    let mut nexthops = want.nexthops.to_vec();
    let mut alternative = false;
    if let (Verb::Append, Some(cur)) = (want.verb, &fib) {
        match want.family {
            Family::V6 => nexthops = cur.nexthops.iter().chain(want.nexthops).cloned().collect(),
            Family::V4 => alternative = true,
        }
    }
    Ok(Plan::Write {
        algo,
        nexthops,
        alternative,
        refused,
    })
}

/// Whether FIB route `cur` already has exactly the paths `want` (a path typed without a
/// device matches any device) and protocol `protocol`.
pub fn same_paths(cur: &Route, want: &[Nexthop], protocol: u8) -> bool {
    if cur.protocol != protocol || cur.nexthops.len() != want.len() {
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
    want.iter().zip(&cur.nexthops).all(|(w, c)| {
        let known = w.ifindex != 0;
        norm(w, known) == norm(c, known)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RouteKey;

    /// What is there, fixed.
    struct Now {
        fib: Option<Route>,
        algo: Option<Algo>,
        agrees: bool,
        asked_dataplane: bool,
    }

    impl Known for Now {
        type Error = ();
        fn fib(&mut self) -> Result<Option<Route>, ()> {
            Ok(self.fib.clone())
        }
        fn algo(&mut self) -> Result<Option<Algo>, ()> {
            Ok(self.algo)
        }
        fn dataplane_agrees(&mut self, _: &Route) -> Result<bool, ()> {
            self.asked_dataplane = true;
            Ok(self.agrees)
        }
    }

    fn nh(gw: &str, ifindex: u32) -> Nexthop {
        Nexthop {
            gateway: Some(gw.parse().expect("address")),
            ifindex,
            weight: 1,
            flags: 0,
        }
    }

    fn route(dst: &str, nexthops: Vec<Nexthop>) -> Route {
        Route {
            key: RouteKey {
                dst: dst.parse().expect("prefix"),
                table: 254,
                metric: 0,
            },
            protocol: 42,
            scope: 0,
            rtype: 1,
            nexthops,
            nh_id: None,
            algo: None,
        }
    }

    fn now(fib: Option<Route>, algo: Option<Algo>, agrees: bool) -> Now {
        Now {
            fib,
            algo,
            agrees,
            asked_dataplane: false,
        }
    }

    fn want(verb: Verb, family: Family, nexthops: &[Nexthop], algo: Option<Algo>) -> Want<'_> {
        Want {
            verb,
            family,
            nexthops,
            algo: algo.unwrap_or(Algo::L3Hash),
            algo_given: algo.is_some(),
            protocol: 42,
        }
    }

    #[test]
    fn the_kernels_refusals_from_what_is_there() {
        let paths = [nh("192.0.2.1", 2), nh("192.0.2.2", 3)];
        let there = route("198.18.0.0/24", paths.to_vec());
        let p = plan(
            &want(Verb::Add, Family::V4, &paths, None),
            &mut now(Some(there), None, true),
        );
        assert!(matches!(
            p,
            Ok(Plan::Write {
                refused: Some(17),
                ..
            })
        ));
        let p = plan(
            &want(Verb::Change, Family::V4, &paths, None),
            &mut now(None, None, true),
        );
        assert!(matches!(
            p,
            Ok(Plan::Write {
                refused: Some(2),
                ..
            })
        ));
        // a replace of a route that is not there adds it
        let p = plan(
            &want(Verb::Replace, Family::V4, &paths, None),
            &mut now(None, None, true),
        );
        assert!(matches!(p, Ok(Plan::Write { refused: None, .. })));
    }

    #[test]
    fn unchanged_only_when_paths_algorithm_and_dataplane_agree() {
        let paths = [nh("192.0.2.1", 2), nh("192.0.2.2", 3)];
        let there = route("198.18.0.0/24", paths.to_vec());
        let w = want(Verb::Replace, Family::V4, &paths, Some(Algo::L4Hash));
        let p = plan(&w, &mut now(Some(there.clone()), Some(Algo::L4Hash), true));
        assert_eq!(p, Ok(Plan::Unchanged { algo: Algo::L4Hash }));
        // the dataplane's group is not the kernel's route: written again
        let p = plan(&w, &mut now(Some(there.clone()), Some(Algo::L4Hash), false));
        assert!(matches!(p, Ok(Plan::Write { .. })));
        // another algorithm: written, and the dataplane is not even asked
        let mut n = now(Some(there.clone()), Some(Algo::L3Hash), true);
        assert!(matches!(plan(&w, &mut n), Ok(Plan::Write { .. })));
        assert!(!n.asked_dataplane);
        // replace without an algorithm installs the default, as ip route does
        let w = want(Verb::Replace, Family::V4, &paths, None);
        let p = plan(&w, &mut now(Some(there.clone()), Some(Algo::L4Hash), true));
        assert!(matches!(
            p,
            Ok(Plan::Write {
                algo: Algo::L3Hash,
                ..
            })
        ));
        // a path typed without a device matches any device
        let loose = [nh("192.0.2.1", 0), nh("192.0.2.2", 0)];
        let w = want(Verb::Replace, Family::V4, &loose, None);
        let p = plan(&w, &mut now(Some(there), Some(Algo::L3Hash), true));
        assert_eq!(p, Ok(Plan::Unchanged { algo: Algo::L3Hash }));
    }

    #[test]
    fn append_keeps_the_algorithm_and_merges_as_the_kernel_does() {
        let one = [nh("2001:db8::1", 2)];
        let two = [nh("2001:db8::2", 3)];
        let there = route("2001:db8:1::/64", one.to_vec());
        let w = want(Verb::Append, Family::V6, &two, None);
        let p = plan(&w, &mut now(Some(there), Some(Algo::Drr), true));
        assert_eq!(
            p,
            Ok(Plan::Write {
                algo: Algo::Drr,
                nexthops: vec![one[0].clone(), two[0].clone()],
                alternative: false,
                refused: None,
            })
        );
        let v4 = [nh("192.0.2.2", 3)];
        let there = route("198.18.0.0/24", vec![nh("192.0.2.1", 2)]);
        let w = want(Verb::Append, Family::V4, &v4, Some(Algo::L4Hash));
        let p = plan(&w, &mut now(Some(there), Some(Algo::Drr), true));
        assert_eq!(
            p,
            Ok(Plan::Write {
                algo: Algo::L4Hash,
                nexthops: v4.to_vec(),
                alternative: true,
                refused: None,
            })
        );
    }
}

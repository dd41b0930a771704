//! FIB verification: which managed IPv4 routes the kernel's FIB answers with for every address
//! the dataplane's LPM trie gives them for (so that the dataplane may skip its per-packet kernel
//! lookup for them), and which foreign routes inside managed prefixes the trie must leave to the
//! kernel ([`holes`]).
//!
//! The dataplane checks each packet of a managed route with a kernel FIB lookup (the kernel must
//! route it by that very route). For a route that passes this verification, at a FIB generation
//! the kernel has not moved from since, that lookup can be skipped. The verification is a pure
//! function of a dump of the main and local tables (merged into one trie by the kernel while the
//! namespace has no custom rules, which the caller checks):
//!
//! - the route is in the main table, unicast, for any TOS, without encapsulation or a kernel
//!   nexthop object (whose group members change without moving the generation), and every
//!   nexthop the kernel may choose is one of the dataplane's;
//! - no other entry for the same prefix wins: none in the local table, none for a TOS, none with
//!   a lower or equal metric;
//! - every entry strictly inside the prefix is itself a managed prefix (the LPM trie answers
//!   with that one there), so the longest match inside is always ours.
//!
//! Less specific entries never win over a more specific one in one trie. A probe address is
//! chosen inside the prefix and outside every more specific managed prefix: looking it up makes
//! the kernel mark the route used, so that its own later delete or replace moves the generation.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr};

use ipnet::{IpNet, Ipv4Net};

use super::drift::paths_differ;

/// `RT_TABLE_MAIN`.
pub const TABLE_MAIN: u32 = 254;
/// `RT_TABLE_LOCAL`.
pub const TABLE_LOCAL: u32 = 255;
/// `RTN_UNICAST`.
pub const RTN_UNICAST: u8 = 1;

/// One IPv4 FIB entry of the main or local table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FibEntry {
    /// Prefix.
    pub dst: Ipv4Net,
    /// Table id.
    pub table: u32,
    /// Metric.
    pub metric: u32,
    /// `rtm_tos` (0: any).
    pub tos: u8,
    /// `rtm_type`.
    pub rtype: u8,
    /// Paths: (device, gateway).
    pub nexthops: Vec<(u32, Option<IpAddr>)>,
    /// The paths' weights, in the same order (empty where unknown).
    pub weights: Vec<u16>,
    /// References a kernel nexthop object.
    pub nh_object: bool,
    /// Has a lightweight tunnel encapsulation.
    pub encap: bool,
}

/// A managed route as the dataplane's LPM trie holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Managed {
    /// Prefix.
    pub dst: Ipv4Net,
    /// Table id.
    pub table: u32,
    /// Metric.
    pub metric: u32,
    /// The dataplane group's paths: (device, gateway).
    pub nexthops: Vec<(u32, Option<IpAddr>)>,
    /// Their weights, in the same order (empty where unknown).
    pub weights: Vec<u16>,
}

/// The verdict for one managed route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The kernel answers with it for every address the LPM trie gives it for; `probe` is an
    /// address to look up so that the kernel marks it used.
    Verified {
        /// An address inside the prefix, outside every more specific managed prefix.
        probe: Ipv4Addr,
    },
    /// Why not.
    Not(String),
}

impl Verdict {
    /// Whether the route is verified.
    pub fn is_verified(&self) -> bool {
        matches!(self, Verdict::Verified { .. })
    }
}

/// Verify every managed route against the FIB entries of the main and local tables.
pub fn verify(managed: &[Managed], fib: &[FibEntry]) -> Vec<Verdict> {
    let mut why: Vec<Option<String>> = managed
        .iter()
        .map(|m| (m.table != TABLE_MAIN).then(|| "not in the main table".to_string()))
        .collect();
    let mut found = vec![false; managed.len()];
    let by_prefix: HashMap<Ipv4Net, usize> = managed
        .iter()
        .enumerate()
        .filter(|(_, m)| m.table == TABLE_MAIN)
        .map(|(i, m)| (m.dst, i))
        .collect();
    let managed_prefixes: HashSet<Ipv4Net> = by_prefix.keys().copied().collect();

    for e in fib
        .iter()
        .filter(|e| e.table == TABLE_MAIN || e.table == TABLE_LOCAL)
    {
        // The managed prefixes containing e: its own, then the nearest one around it.
        for len in (0..=e.dst.prefix_len()).rev() {
            let Ok(anc) = Ipv4Net::new(e.dst.network(), len) else {
                continue;
            };
            let anc = anc.trunc();
            let Some(&i) = by_prefix.get(&anc) else {
                continue;
            };
            if len < e.dst.prefix_len() {
                // Strictly inside: where e's prefix is managed itself, the LPM trie answers with
                // that route there (verified on its own); otherwise e's addresses are the
                // nearest managed prefix's around it, which e then takes from it.
                if !managed_prefixes.contains(&e.dst) && why[i].is_none() {
                    why[i] = Some(format!("{} (table {}) inside it", e.dst, e.table));
                }
                break;
            }
            if why[i].is_some() {
                continue;
            }
            let m = &managed[i];
            let itself = e.table == TABLE_MAIN && e.metric == m.metric && e.tos == 0;
            if itself && !found[i] {
                found[i] = true;
                why[i] = own_entry_problem(m, e);
            } else if e.table == TABLE_LOCAL {
                why[i] = Some("a local-table entry for the same prefix".into());
            } else if e.tos != 0 {
                why[i] = Some(format!("a route for TOS {:#04x} on the same prefix", e.tos));
            } else if e.metric <= m.metric {
                why[i] = Some(format!(
                    "another route for the same prefix with metric {}",
                    e.metric
                ));
            }
        }
    }
    for (i, w) in why.iter_mut().enumerate() {
        if w.is_none() && !found[i] {
            *w = Some("not in the kernel's FIB".into());
        }
    }
    managed
        .iter()
        .zip(why)
        .map(|(m, w)| match w {
            Some(w) => Verdict::Not(w),
            None => match probe(m.dst, &managed_prefixes) {
                Some(probe) => Verdict::Verified { probe },
                None => Verdict::Not("no address of its own to look up".into()),
            },
        })
        .collect()
}

/// What is wrong with the FIB entry of the managed route itself, if anything.
fn own_entry_problem(m: &Managed, e: &FibEntry) -> Option<String> {
    if e.rtype != RTN_UNICAST {
        return Some(format!("the kernel's route has type {}", e.rtype));
    }
    if e.nh_object {
        return Some("the kernel's route uses a nexthop object".into());
    }
    if e.encap {
        return Some("the kernel's route has an encapsulation".into());
    }
    if e.nexthops.is_empty() {
        return Some("the kernel's route has no nexthops".into());
    }
    paths_differ(&m.nexthops, &e.nexthops)
}

/// Most "holes" the dataplane's LPM trie takes (see [`holes`]).
pub const MAX_HOLES: usize = 1024;

/// A main-table route as [`holes_any`] sees it, of either family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// Prefix.
    pub dst: IpNet,
    /// Metric.
    pub metric: u32,
    /// `RTN_UNICAST`.
    pub unicast: bool,
    /// Paths: (device, gateway); for a managed route, its dataplane group's.
    pub nexthops: Vec<(u32, Option<IpAddr>)>,
}

/// Routes of another owner that the dataplane's per-packet kernel check cannot tell from a
/// managed route, to be entered in the LPM trie as holes (destinations left to the kernel FIB).
///
/// For a packet of a managed route the dataplane asks the kernel's FIB and accepts the answer
/// as its own route if the metric is the managed route's and the nexthop the kernel chose is one
/// of the group's. A unicast route strictly inside a managed prefix, not itself a managed
/// prefix, with that metric and a nexthop of that group (the default case: `ip route add`
/// inside a managed prefix through one of its gateways) passes that check, and the dataplane
/// would spread its packets over the whole group where the kernel sends them by that route.
/// Both inputs are one table's (main). (prefix, metric), sorted, at most [`MAX_HOLES`].
pub fn holes_any(managed: &[Span], fib: &[Span]) -> Vec<(IpNet, u32)> {
    let managed_prefixes: HashSet<IpNet> = managed.iter().map(|m| m.dst).collect();
    let in_group = |m: &Span, n: &(u32, Option<IpAddr>)| {
        m.nexthops
            .iter()
            .any(|g| g.0 == n.0 && (g.1.is_none() || g.1 == n.1))
    };
    let mut out: Vec<(IpNet, u32)> = fib
        .iter()
        .filter(|e| e.unicast && !managed_prefixes.contains(&e.dst))
        .filter(|e| {
            managed.iter().any(|m| {
                m.dst.prefix_len() < e.dst.prefix_len()
                    && m.dst.contains(&e.dst)
                    && m.metric == e.metric
                    && e.nexthops.iter().any(|n| in_group(m, n))
            })
        })
        .map(|e| (e.dst, e.metric))
        .collect();
    out.sort_unstable();
    out.dedup_by_key(|h| h.0);
    out.truncate(MAX_HOLES);
    out
}

/// [`holes_any`] for the IPv4 routes [`verify`] works on.
pub fn holes(managed: &[Managed], fib: &[FibEntry]) -> Vec<(Ipv4Net, u32)> {
    let m: Vec<Span> = managed
        .iter()
        .filter(|m| m.table == TABLE_MAIN)
        .map(|m| Span {
            dst: IpNet::V4(m.dst),
            metric: m.metric,
            unicast: true,
            nexthops: m.nexthops.clone(),
        })
        .collect();
    let f: Vec<Span> = fib
        .iter()
        .filter(|e| e.table == TABLE_MAIN)
        .map(|e| Span {
            dst: IpNet::V4(e.dst),
            metric: e.metric,
            unicast: e.rtype == RTN_UNICAST,
            nexthops: e.nexthops.clone(),
        })
        .collect();
    holes_any(&m, &f)
        .into_iter()
        .filter_map(|(n, metric)| match n {
            IpNet::V4(n) => Some((n, metric)),
            IpNet::V6(_) => None,
        })
        .collect()
}

/// An address of `net` that no more specific managed prefix covers and that an output route
/// lookup treats as an ordinary destination.
fn probe(net: Ipv4Net, managed: &HashSet<Ipv4Net>) -> Option<Ipv4Addr> {
    let first = u64::from(u32::from(net.network()));
    let last = u64::from(u32::from(net.broadcast()));
    let mid = first + (last - first) / 2;
    let candidates = [first + 1, mid, mid + 1, last.saturating_sub(1), first, last];
    candidates
        .into_iter()
        .filter(|c| (first..=last).contains(c))
        .filter_map(|c| u32::try_from(c).ok())
        .map(Ipv4Addr::from)
        .find(|a| {
            net.contains(a)
                && ordinary(*a)
                && !(net.prefix_len() + 1..=32)
                    .any(|len| Ipv4Net::new(*a, len).is_ok_and(|n| managed.contains(&n.trunc())))
        })
}

/// Not "this network", loopback, multicast, class E or limited broadcast: an output lookup for
/// those does not simply consult the FIB.
fn ordinary(a: Ipv4Addr) -> bool {
    let o = a.octets();
    !(o[0] == 0 || o[0] == 127 || o[0] >= 224)
}

#[cfg(test)]
mod tests {
    use super::*;

    const E1: u32 = 3;
    const E2: u32 = 4;

    fn net(s: &str) -> Ipv4Net {
        s.parse().expect("prefix")
    }

    fn gw(s: &str) -> Option<IpAddr> {
        Some(s.parse().expect("address"))
    }

    fn nhs() -> Vec<(u32, Option<IpAddr>)> {
        vec![(E1, gw("10.1.0.2")), (E2, gw("10.2.0.2"))]
    }

    fn managed(p: &str, metric: u32) -> Managed {
        Managed {
            dst: net(p),
            table: TABLE_MAIN,
            metric,
            nexthops: nhs(),
            weights: vec![1, 1],
        }
    }

    fn entry(p: &str, table: u32, metric: u32) -> FibEntry {
        FibEntry {
            dst: net(p),
            table,
            metric,
            tos: 0,
            rtype: RTN_UNICAST,
            nexthops: nhs(),
            weights: vec![1, 1],
            nh_object: false,
            encap: false,
        }
    }

    /// The everyday table of a router: connected routes, a default, local addresses.
    fn base() -> Vec<FibEntry> {
        vec![
            entry("0.0.0.0/0", TABLE_MAIN, 0),
            entry("10.1.0.0/24", TABLE_MAIN, 0),
            entry("10.2.0.0/24", TABLE_MAIN, 0),
            FibEntry {
                rtype: 2,
                ..entry("10.1.0.1/32", TABLE_LOCAL, 0)
            },
            FibEntry {
                rtype: 3,
                ..entry("10.1.0.255/32", TABLE_LOCAL, 0)
            },
            FibEntry {
                rtype: 2,
                ..entry("127.0.0.0/8", TABLE_LOCAL, 0)
            },
        ]
    }

    fn one(m: Managed, extra: Vec<FibEntry>) -> Verdict {
        let mut fib = base();
        fib.push(entry(&m.dst.to_string(), TABLE_MAIN, m.metric));
        fib.extend(extra);
        verify(&[m], &fib).remove(0)
    }

    fn not(v: &Verdict, what: &str) {
        match v {
            Verdict::Not(w) => assert!(w.contains(what), "{w:?} does not say {what:?}"),
            Verdict::Verified { .. } => panic!("verified, expected not ({what})"),
        }
    }

    #[test]
    fn a_plain_managed_route_is_verified_and_gets_a_probe_inside() {
        let v = one(managed("198.18.0.0/24", 0), vec![]);
        assert_eq!(
            v,
            Verdict::Verified {
                probe: "198.18.0.1".parse().expect("addr")
            }
        );
        // less specific routes (the default, a /8) never win
        let v = one(
            managed("198.18.0.0/24", 0),
            vec![entry("198.0.0.0/8", TABLE_MAIN, 0)],
        );
        assert!(v.is_verified(), "{v:?}");
        // a higher metric for the same prefix does not either
        let v = one(
            managed("198.18.0.0/24", 5),
            vec![entry("198.18.0.0/24", TABLE_MAIN, 10)],
        );
        assert!(v.is_verified(), "{v:?}");
    }

    #[test]
    fn anything_that_could_win_inside_the_prefix_refuses_it() {
        let m = || managed("198.18.0.0/24", 5);
        not(
            &one(m(), vec![entry("198.18.0.128/25", TABLE_MAIN, 0)]),
            "198.18.0.128/25 (table 254) inside it",
        );
        let local = FibEntry {
            rtype: 2,
            ..entry("198.18.0.7/32", TABLE_LOCAL, 0)
        };
        not(
            &one(m(), vec![local]),
            "198.18.0.7/32 (table 255) inside it",
        );
        not(
            &one(m(), vec![entry("198.18.0.0/24", TABLE_MAIN, 1)]),
            "metric 1",
        );
        not(
            &one(m(), vec![entry("198.18.0.0/24", TABLE_LOCAL, 9)]),
            "local-table",
        );
        let tos = FibEntry {
            tos: 0x10,
            ..entry("198.18.0.0/24", TABLE_MAIN, 9)
        };
        not(&one(m(), vec![tos]), "TOS 0x10");
        // an IPv4 alternative with the same metric (ip route append)
        not(
            &one(m(), vec![entry("198.18.0.0/24", TABLE_MAIN, 5)]),
            "metric 5",
        );
        // routes elsewhere and in other tables do not matter
        let v = one(
            m(),
            vec![
                entry("198.19.0.0/24", TABLE_MAIN, 0),
                entry("198.18.0.0/25", 100, 0),
            ],
        );
        assert!(v.is_verified(), "{v:?}");
    }

    #[test]
    fn the_kernel_route_itself_must_be_ours() {
        let m = managed("198.18.0.0/24", 0);
        not(
            &verify(std::slice::from_ref(&m), &base())[0],
            "not in the kernel's FIB",
        );
        let mut fib = base();
        fib.push(FibEntry {
            nexthops: vec![(E1, gw("10.1.0.2")), (E1, gw("10.1.0.9"))],
            ..entry("198.18.0.0/24", TABLE_MAIN, 0)
        });
        not(&verify(std::slice::from_ref(&m), &fib)[0], "via 10.1.0.9");
        for (e, what) in [
            (
                FibEntry {
                    nh_object: true,
                    ..entry("198.18.0.0/24", TABLE_MAIN, 0)
                },
                "nexthop object",
            ),
            (
                FibEntry {
                    encap: true,
                    ..entry("198.18.0.0/24", TABLE_MAIN, 0)
                },
                "encapsulation",
            ),
            (
                FibEntry {
                    rtype: 6,
                    ..entry("198.18.0.0/24", TABLE_MAIN, 0)
                },
                "type 6",
            ),
        ] {
            let mut fib = base();
            fib.push(e);
            not(&verify(std::slice::from_ref(&m), &fib)[0], what);
        }
        // a subset of our nexthops (ip route replace with fewer paths) is not ours any more
        let mut fib = base();
        fib.push(FibEntry {
            nexthops: vec![(E2, gw("10.2.0.2"))],
            ..entry("198.18.0.0/24", TABLE_MAIN, 0)
        });
        not(
            &verify(std::slice::from_ref(&m), &fib)[0],
            "lacks our nexthop",
        );
        let other_table = Managed { table: 100, ..m };
        not(&verify(&[other_table], &fib)[0], "main table");
    }

    #[test]
    fn nested_managed_prefixes_are_each_verified_and_probed_outside_the_inner_ones() {
        let outer = managed("10.8.0.0/16", 0);
        let inner = managed("10.8.0.0/24", 0);
        let mut fib = base();
        fib.push(entry("10.8.0.0/16", TABLE_MAIN, 0));
        fib.push(entry("10.8.0.0/24", TABLE_MAIN, 0));
        let v = verify(&[outer.clone(), inner.clone()], &fib);
        assert_eq!(
            v[1],
            Verdict::Verified {
                probe: "10.8.0.1".parse().expect("addr")
            }
        );
        // 10.8.0.1 is the inner route's: the outer one's probe lies outside it
        let Verdict::Verified { probe } = v[0] else {
            panic!("outer not verified: {:?}", v[0]);
        };
        assert!(
            outer.dst.contains(&probe) && !inner.dst.contains(&probe),
            "{probe}"
        );
        // an unmanaged route inside the inner one refuses the inner one only
        fib.push(entry("10.8.0.64/26", TABLE_MAIN, 0));
        let v = verify(&[outer, inner], &fib);
        assert!(v[0].is_verified(), "{:?}", v[0]);
        not(&v[1], "10.8.0.64/26");
    }

    #[test]
    fn probes_avoid_addresses_an_output_lookup_treats_specially() {
        let none = HashSet::new();
        let p = |s: &str| probe(net(s), &none);
        assert_eq!(p("0.0.0.0/0"), Some("128.0.0.0".parse().expect("a")));
        assert_eq!(p("203.0.113.9/32"), Some("203.0.113.9".parse().expect("a")));
        assert_eq!(p("203.0.113.8/31"), Some("203.0.113.9".parse().expect("a")));
        assert_eq!(p("127.0.0.0/8"), None);
        assert_eq!(p("224.0.0.0/4"), None);
        assert_eq!(p("255.255.255.255/32"), None);
        assert_eq!(
            p("223.255.255.255/32"),
            Some("223.255.255.255".parse().expect("a"))
        );
        // a /32 covered by... itself only: a managed /32 inside a managed /31
        let inner: HashSet<Ipv4Net> = [net("203.0.113.9/32")].into_iter().collect();
        assert_eq!(
            probe(net("203.0.113.8/31"), &inner),
            Some("203.0.113.8".parse().expect("a"))
        );
    }

    #[test]
    fn holes_are_foreign_routes_the_per_packet_check_would_take_for_ours() {
        let m = [managed("10.0.0.0/8", 0), managed("10.9.0.0/16", 0)];
        let mut other_gw = entry("10.2.0.0/16", TABLE_MAIN, 0);
        other_gw.nexthops = vec![(E1, gw("10.1.0.99"))];
        let mut blackhole = entry("10.3.0.0/16", TABLE_MAIN, 0);
        blackhole.rtype = 6;
        let mut one_of_ours = entry("10.4.0.0/16", TABLE_MAIN, 0);
        one_of_ours.nexthops = vec![(E2, gw("10.2.0.2"))];
        let fib = [
            entry("10.0.0.0/8", TABLE_MAIN, 0),
            entry("10.9.0.0/16", TABLE_MAIN, 0),
            entry("10.1.0.0/16", TABLE_MAIN, 0),
            other_gw,
            blackhole,
            one_of_ours,
            entry("10.5.0.0/16", TABLE_MAIN, 7),
            entry("10.6.0.0/16", TABLE_LOCAL, 0),
            entry("10.9.1.0/24", TABLE_MAIN, 0),
            entry("10.1.0.0/16", TABLE_MAIN, 0),
            entry("192.0.2.0/24", TABLE_MAIN, 0),
        ];
        assert_eq!(
            holes(&m, &fib),
            vec![
                (net("10.1.0.0/16"), 0),
                (net("10.4.0.0/16"), 0),
                (net("10.9.1.0/24"), 0)
            ],
            "same metric and a gateway of the group; not: another gateway, a blackhole, \
             another metric, the local table, the managed prefixes, outside"
        );
        // A device nexthop of the group matches any gateway on that device.
        let dev = [Managed {
            nexthops: vec![(E1, None)],
            ..managed("10.0.0.0/8", 0)
        }];
        let mut via = entry("10.7.0.0/16", TABLE_MAIN, 0);
        via.nexthops = vec![(E1, gw("10.1.0.77"))];
        assert_eq!(holes(&dev, &[via]), vec![(net("10.7.0.0/16"), 0)]);
        assert!(holes(&[], &fib).is_empty());
    }

    #[test]
    fn holes_for_ipv6_too() {
        let g = |s: &str| Some(s.parse::<IpAddr>().expect("address"));
        let span = |p: &str, metric, nexthops: Vec<(u32, Option<IpAddr>)>| Span {
            dst: p.parse().expect("prefix"),
            metric,
            unicast: true,
            nexthops,
        };
        let ours = vec![(E1, g("2001:db8:1::2")), (E2, g("2001:db8:2::2"))];
        let m = [span("2001:db8:100::/56", 1024, ours.clone())];
        let fib = [
            span("2001:db8:100::/56", 1024, ours.clone()),
            span("2001:db8:100:7::/64", 1024, vec![(E2, g("2001:db8:2::2"))]),
            span("2001:db8:100:8::/64", 1, vec![(E2, g("2001:db8:2::2"))]),
            span("2001:db8:100:9::/64", 1024, vec![(E2, g("2001:db8:2::99"))]),
        ];
        assert_eq!(
            holes_any(&m, &fib),
            vec![("2001:db8:100:7::/64".parse().expect("prefix"), 1024)]
        );
    }
}

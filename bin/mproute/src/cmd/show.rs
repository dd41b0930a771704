//! `mproute show [SELECTOR] [table T|all] [algo ALGO]`: the FIB joined with mproute's state, and
//! who enforces each managed route's algorithm. SELECTOR filters as `ip route show`'s does
//! (ip/iproute.c's `filter_nlmsg`): `[to] [root|match|exact] PREFIX`, `proto P`, `dev D`,
//! `via ADDR`, `metric M`; `-4`/`-6` pick one family.

use std::collections::HashMap;

use ipnet::IpNet;
use mpt_cli::names;
use mpt_cli::Failure;
use mpt_model::route::Route;
use mpt_model::{Family, RouteKey};

use crate::grammar::ShowSpec;
use crate::resolve;
use crate::session::{dump_msgs, Session};
use crate::store::Managed;
use crate::view::Output;
use crate::view::RouteRow;

/// List the routes.
pub fn run(s: &mut Session, f: &ShowSpec) -> Result<Output, Failure> {
    let table = match f.table.as_deref() {
        Some("all") => None,
        t => Some(resolve::table(t)?),
    };
    let fams: Vec<Family> = match (&f.dst, f.via, s.opts.family()) {
        (_, _, Some(fam)) => vec![fam],
        (Some(d), _, None) => vec![Family::of_net(d)],
        (None, Some(v), None) => vec![if v.is_ipv4() { Family::V4 } else { Family::V6 }],
        (None, None, None) => vec![Family::V4, Family::V6],
    };
    let filter = Filter::new(f, s.opts.family())?;
    let managed: HashMap<RouteKey, Managed> = match s.store(false)? {
        Some(s) => s.all()?.into_iter().collect(),
        None => HashMap::new(),
    };
    let enforced = s.enforced_by()?;
    let mut names_cache: HashMap<u32, Option<String>> = HashMap::new();
    let mut ifname = |i: u32| {
        names_cache
            .entry(i)
            .or_insert_with(|| mpt_sys::iface::name(i))
            .clone()
    };
    let mut rows = Vec::new();
    for fam in fams {
        let routes = dump_msgs(s.sock()?, Some(fam), table)?;
        for msg in routes {
            let mut r = msg.route.clone();
            if !filter.selects(&r) {
                continue;
            }
            let m = managed.get(&r.key);
            if m.is_some() {
                r.algo = m.map(|m| m.algo);
            }
            // Managed: in mproute's state. A protocol-mproute route that is not (added
            // with ip route, or left by a lost state) is not, until sync adopts it.
            let is_managed = m.is_some();
            if let Some(a) = f.algo {
                if !is_managed || r.algo.unwrap_or_default() != a {
                    continue;
                }
            }
            let by = if is_managed {
                Some(s.route_enforced_by(enforced, &r.key)?)
            } else {
                None
            };
            let mut row = RouteRow::new(&r, is_managed, by, &mut ifname);
            row.set_kernel(&msg, s.opts.details);
            if let Some(m) = m {
                row.set_recipe(&m.recipe);
            }
            if is_managed {
                if let Some(st) = s.store(false)? {
                    let t = st
                        .bpf()
                        .res_get(&r.key)
                        .map_err(|e| Failure::bpf("read the dataplane's tables", e))?;
                    if let Some(t) = t {
                        crate::view::set_resilient(&mut row, &t, s.opts.details);
                    }
                }
            }
            if s.opts.stats > 0 && m.is_some() {
                if let Some(s) = s.store(false)? {
                    let st = s
                        .bpf()
                        .dp_stats(&r.key)
                        .map_err(|e| Failure::bpf("read dataplane counters", e))?
                        .unwrap_or_default();
                    row.set_stats(&st);
                }
            }
            rows.push(row);
        }
    }
    Ok(Output::Routes(rows))
}

/// A `show` filter with its names resolved (protocol, device), in the namespace.
#[derive(Debug)]
pub(crate) struct Filter<'a> {
    spec: &'a ShowSpec,
    family: Option<Family>,
    proto: Option<u8>,
    oif: Option<u32>,
    scope: Option<u8>,
    rtype: Option<u8>,
}

/// The number of a route scope or type as iproute2 names it (or a number), by its names.
fn named(s: &str, name: fn(u8) -> String) -> Option<u8> {
    (0..=u8::MAX)
        .find(|n| name(*n) == s)
        .or_else(|| mpt_model::names::parse_num(s).and_then(|v| u8::try_from(v).ok()))
}

impl<'a> Filter<'a> {
    /// Resolve the names of `spec` (an unknown protocol is a usage error, a missing device the
    /// system's, as the other verbs say it).
    pub(crate) fn new(spec: &'a ShowSpec, family: Option<Family>) -> Result<Filter<'a>, Failure> {
        if let Some(fam) = family {
            // ip refuses an address of the other family ("inet6 prefix is expected")
            let other = spec
                .dst
                .filter(|d| Family::of_net(d) != fam && d.prefix_len() > 0)
                .map(|d| d.to_string())
                .or_else(|| {
                    spec.via
                        .filter(|v| !spec.via_family && v.is_ipv4() != (fam == Family::V4))
                        .map(|v| v.to_string())
                });
            if let Some(a) = other {
                return Err(Failure::usage(format!(
                    "\"{a}\" is not an address of the family -4/-6/-family asks for"
                )));
            }
        }
        let proto = match spec.proto.as_deref() {
            None | Some("all") => None,
            Some(p) => Some(names::proto_id(p).ok_or_else(|| {
                Failure::usage(format!("unknown protocol \"{p}\""))
                    .hint("use a number or a name from /etc/iproute2/rt_protos")
            })?),
        };
        let oif = match spec.dev.as_deref() {
            None => None,
            Some(d) => Some(mpt_sys::iface::index(d).map_err(Failure::from)?),
        };
        let scope = match spec.scope.as_deref() {
            None | Some("all") => None,
            Some(sc) => Some(
                named(sc, mpt_model::names::scope_name)
                    .ok_or_else(|| Failure::usage(format!("unknown scope \"{sc}\"")))?,
            ),
        };
        let rtype = match spec.rtype.as_deref() {
            None => None,
            // ip's other name for broadcast
            Some("brd") => Some(3),
            Some(t) => Some(
                named(t, mpt_model::names::rtype_name)
                    .ok_or_else(|| Failure::usage(format!("unknown route type \"{t}\"")))?,
            ),
        };
        Ok(Filter {
            spec,
            family,
            proto,
            oif,
            scope,
            rtype,
        })
    }

    /// Whether a route with key `k` is selected as far as its key tells (prefix, metric,
    /// family): for state entries whose route is gone.
    pub(crate) fn selects_key(&self, k: &RouteKey) -> bool {
        let f = self.spec;
        if f.proto.is_some()
            || f.dev.is_some()
            || f.via.is_some()
            || f.scope.is_some()
            || f.rtype.is_some()
        {
            return false;
        }
        self.selects_dst(k)
    }

    fn selects_dst(&self, k: &RouteKey) -> bool {
        let f = self.spec;
        if self.family.is_some_and(|fam| fam != Family::of_net(&k.dst)) {
            return false;
        }
        if let Some(p) = &f.dst {
            // "default" is /0 of the family being listed (ip reads it in -4's or -6's family)
            let default = p.prefix_len() == 0 && p.network().is_unspecified();
            let p = match (default, k.dst) {
                (true, IpNet::V6(_)) => IpNet::V6(ipnet::Ipv6Net::default()),
                _ => *p,
            };
            if !f.select.selects(&p, &k.dst) {
                return false;
            }
        }
        f.metric.is_none_or(|m| m == k.metric)
    }

    /// Whether route `r` is shown, as ip's `filter_nlmsg` decides it: `dev` and `via` compare
    /// the route's own `RTA_OIF` and `RTA_GATEWAY`, which a multipath route does not have (its
    /// nexthops do), so ip shows no multipath route for them and neither does this.
    pub(crate) fn selects(&self, r: &Route) -> bool {
        let f = self.spec;
        if !self.selects_dst(&r.key) {
            return false;
        }
        if self.proto.is_some_and(|p| p != r.protocol)
            || self.scope.is_some_and(|s| s != r.scope)
            || self.rtype.is_some_and(|t| t != r.rtype)
        {
            return false;
        }
        let single = match r.nexthops.as_slice() {
            [n] => Some(n),
            _ => None,
        };
        if let Some(oif) = self.oif {
            if single.map_or(0, |n| n.ifindex) != oif {
                return false;
            }
        }
        if let Some(via) = f.via {
            if single.and_then(|n| n.gateway) != Some(via) {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::{parse_show, Select};
    use mpt_model::route::Nexthop;

    fn route(dst: &str, nhs: &[(Option<&str>, u32)]) -> Route {
        Route {
            key: RouteKey {
                dst: dst.parse().expect("prefix"),
                table: 254,
                metric: 0,
            },
            protocol: 245,
            scope: 0,
            rtype: 1,
            nexthops: nhs
                .iter()
                .map(|(g, i)| Nexthop {
                    gateway: g.map(|g| g.parse().expect("addr")),
                    ifindex: *i,
                    weight: 1,
                    flags: 0,
                })
                .collect(),
            nh_id: None,
            algo: None,
        }
    }

    fn shows(filter: &str, r: &Route) -> bool {
        let spec = parse_show(&mpt_cli::args::words(filter)).expect(filter);
        let f = Filter {
            spec: &spec,
            family: None,
            scope: spec
                .scope
                .as_deref()
                .and_then(|s| named(s, mpt_model::names::scope_name)),
            rtype: spec
                .rtype
                .as_deref()
                .and_then(|t| named(t, mpt_model::names::rtype_name)),
            proto: spec.proto.as_deref().and_then(names::proto_id),
            oif: spec.dev.as_deref().and_then(|d| d.parse().ok()),
        };
        f.selects(r)
    }

    #[test]
    fn selectors_as_ip_reads_them() {
        let r = route("10.1.0.0/16", &[(Some("192.0.2.1"), 7)]);
        assert!(shows("", &r));
        assert!(shows("10.1.0.0/16", &r));
        assert!(!shows("10.0.0.0/8", &r));
        assert!(shows("root 10.0.0.0/8", &r));
        assert!(shows("ro 10.1.0.0/16", &r));
        assert!(!shows("root 10.1.2.0/24", &r));
        assert!(shows("match 10.1.2.0/24", &r));
        assert!(shows("ma 10.1.2.3", &r));
        assert!(!shows("match 10.0.0.0/8", &r));
        assert!(shows("exact 10.1.0.0/16", &r));
        assert!(shows("to exact 10.1.0.0/16", &r));
        assert!(!shows("exact 10.1.0.0/17", &r));
        assert!(!shows("root 2001:db8::/32", &r));
        assert!(shows("proto 245", &r));
        assert!(shows("p 245", &r));
        assert!(!shows("proto 4", &r));
        assert!(shows("proto all", &r));
        assert!(shows("dev 7 via 192.0.2.1", &r));
        assert!(!shows("dev 8", &r));
        assert!(!shows("via 192.0.2.2", &r));
        assert!(shows("metric 0", &r));
        assert!(!shows("m 1", &r));
        assert!(shows("scope global type unicast", &r));
        assert!(!shows("scope link", &r));
        assert!(!shows("type blackhole", &r));
        // ip compares the route's own RTA_OIF and RTA_GATEWAY: a multipath route has neither
        let mp = route(
            "10.2.0.0/16",
            &[(Some("192.0.2.1"), 7), (Some("192.0.2.2"), 7)],
        );
        assert!(!shows("dev 7", &mp));
        assert!(!shows("via 192.0.2.1", &mp));
        assert!(shows("root 10.0.0.0/8", &mp));
    }

    #[test]
    fn select_words() {
        let s = parse_show(&mpt_cli::args::words("match 10.0.0.1 table all")).expect("ok");
        assert_eq!(s.select, Select::Match);
        let f = parse_show(&mpt_cli::args::words("src 10.0.0.1")).expect_err("src");
        assert!(f.contains("\"src\" is a filter of ip route show"), "{f}");
        let f = parse_show(&mpt_cli::args::words("rea 1")).expect_err("realms");
        assert!(f.contains("realms"), "{f}");
        let s = parse_show(&mpt_cli::args::words("s link ty unicast")).expect("s");
        assert_eq!(s.scope.as_deref(), Some("link"));
        assert_eq!(s.rtype.as_deref(), Some("unicast"));
        assert_eq!(named("link", mpt_model::names::scope_name), Some(253));
        assert_eq!(named("17", mpt_model::names::scope_name), Some(17));
        assert_eq!(named("unreachable", mpt_model::names::rtype_name), Some(7));
        assert_eq!(named("frob", mpt_model::names::rtype_name), None);
        assert!(parse_show(&mpt_cli::args::words("via inet6 2001:db8::1")).is_ok());
        assert!(parse_show(&mpt_cli::args::words("10.0.0.0/8 10.1.0.0/16")).is_err());
    }
}

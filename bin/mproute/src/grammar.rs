//! The route grammar, parsed into a typed specification before any socket is opened. Names
//! (devices, tables, protocols) stay names here; `resolve` turns them into ids inside the target
//! namespace.
//!
//! ```text
//! PREFIX [table T] [metric M] [proto P]
//!        [algo ALGO [resilient [buckets N] [idle-timer S] | consistent [table-size M]]]
//!        [hash-fields F[,F...]] [seed N] NEXTHOPS
//! NEXTHOPS := via ADDR [dev DEV] [onlink] | nexthop NH [nexthop NH ...]
//! NH := [via ADDR] [dev DEV] [weight W] [onlink]
//! ```

use std::net::IpAddr;

use ipnet::IpNet;
use mpt_cli::abbrev::{self, Word};
use mpt_model::route::SpecError;
use mpt_model::{Algo, Family, Verb, MAX_WEIGHT};

/// A nexthop as typed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NhSpec {
    /// `via ADDR`.
    pub via: Option<IpAddr>,
    /// `dev DEV`.
    pub dev: Option<String>,
    /// `weight W` (1 when not given).
    pub weight: u16,
    /// `onlink`.
    pub onlink: bool,
}

/// A route command as typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteSpec {
    /// The verb.
    pub verb: Verb,
    /// Destination.
    pub dst: IpNet,
    /// `table T` (name or number).
    pub table: Option<String>,
    /// `metric M`.
    pub metric: Option<u32>,
    /// `proto P` (name or number).
    pub proto: Option<String>,
    /// `algo ALGO`.
    pub algo: Option<Algo>,
    /// Paths.
    pub nexthops: Vec<NhSpec>,
    /// True for the `nexthop ...` form, false for `via ADDR dev DEV`.
    pub multipath: bool,
    /// `resilient [buckets N] [idle-timer S]`: a bucket table between the hash and the
    /// nexthops.
    pub resilient: Option<Resilient>,
    /// `hash-fields F[,F...]` and `seed N`: the route's hash recipe.
    pub recipe: mpt_model::hash::HashRecipe,
}

/// A resilient route's table parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resilient {
    /// `buckets N` (default 128); of a consistent table, `table-size M` (default 4093).
    pub buckets: u16,
    /// `idle-timer S` in seconds (default 120); 0 for a consistent table.
    pub idle_timer: u32,
    /// `consistent`: a Maglev table computed from the route alone, not from its history.
    pub consistent: bool,
}

/// A `show` filter: `ip route show`'s SELECTOR (as ip/iproute.c reads it) and mproute's `algo`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShowSpec {
    /// `[to] [root|match|exact] PREFIX`: the prefix the routes are compared with.
    pub dst: Option<IpNet>,
    /// How [`ShowSpec::dst`] selects (a bare prefix is `exact`).
    pub select: Select,
    /// `table T`, or `table all` (`Some("all")`); main when absent.
    pub table: Option<String>,
    /// Only routes with this algorithm.
    pub algo: Option<Algo>,
    /// `proto P` (a name or number; `all`: any).
    pub proto: Option<String>,
    /// `dev D` (`oif D`): single-path routes out of D, as ip compares the route's `RTA_OIF`.
    pub dev: Option<String>,
    /// `via [inet|inet6] ADDR`: single-path routes through ADDR (ip compares `RTA_GATEWAY`).
    pub via: Option<IpAddr>,
    /// Whether `via` named its family (`via inet6 ADDR`): ip then takes an address of the
    /// other family than -4/-6's (and selects nothing by it) rather than refuse it.
    pub via_family: bool,
    /// `metric M` (`priority`, `preference`).
    pub metric: Option<u32>,
    /// `scope S` (a name or number; `all`: any).
    pub scope: Option<String>,
    /// `type T` (unicast, local, blackhole, unreachable, ... or a number).
    pub rtype: Option<String>,
}

/// How `show PREFIX` selects routes, as ip's `root`, `match` and `exact`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Select {
    /// `exact P` or a bare prefix: the route for P itself.
    #[default]
    Exact,
    /// `root P`: routes within P (P or longer).
    Root,
    /// `match P`: routes P falls within (P or shorter).
    Match,
}

impl Select {
    /// Whether a route for `dst` is selected by `p`.
    pub fn selects(self, p: &IpNet, dst: &IpNet) -> bool {
        let same_family = matches!(
            (p, dst),
            (IpNet::V4(_), IpNet::V4(_)) | (IpNet::V6(_), IpNet::V6(_))
        );
        same_family
            && match self {
                Select::Exact => p.prefix_len() == dst.prefix_len() && p.network() == dst.network(),
                Select::Root => p.contains(dst),
                Select::Match => dst.contains(p),
            }
    }
}

/// `ip route show`'s keywords in ip/iproute.c's order (`iproute_list_flush_or_save`), the ones
/// mproute does not filter by included, so that an abbreviation means what it means to ip
/// (`p` is `protocol`, `m` is `metric`, `s` is `scope`), then mproute's `algo`; any other word
/// is the prefix, after an optional `to`, `root`, `match` or `exact`.
const SHOW_KEYWORDS: &[Word] = &[
    Word::prefix("table"),
    Word::prefix("vrf"),
    Word::prefix("cached"),
    Word::prefix("cloned"),
    Word::exact("tos"),
    Word::prefix("dsfield"),
    Word::prefix("protocol"),
    Word::prefix("scope"),
    Word::prefix("type"),
    Word::exact("dev"),
    Word::exact("oif"),
    Word::exact("iif"),
    Word::exact("mark"),
    Word::prefix("metric"),
    Word::prefix("priority"),
    Word::exact("preference"),
    Word::exact("via"),
    Word::exact("src"),
    Word::prefix("realms"),
    Word::prefix("from"),
    Word::exact("algo"),
];

fn value<'a>(it: &mut std::slice::Iter<'a, String>, kw: &str) -> Result<&'a str, String> {
    it.next()
        .map(String::as_str)
        .ok_or_else(|| format!("\"{kw}\" needs a value"))
}

/// Parse a prefix as iproute2 does: `default`, an address (host prefix), or ADDR/LEN with no
/// host bits set.
pub fn parse_prefix(s: &str, family_hint: Option<Family>) -> Result<IpNet, String> {
    if s == "default" || s == "all" || s == "any" {
        return Ok(match family_hint {
            Some(Family::V6) => IpNet::V6(ipnet::Ipv6Net::default()),
            _ => IpNet::V4(ipnet::Ipv4Net::default()),
        });
    }
    let net: IpNet = if s.contains('/') {
        s.parse().map_err(|_| format!("invalid prefix \"{s}\""))?
    } else {
        let a: IpAddr = s.parse().map_err(|_| format!("invalid prefix \"{s}\""))?;
        IpNet::from(a)
    };
    if net.network() != net.addr() {
        return Err(format!(
            "invalid prefix \"{s}\": host bits are set (did you mean {}?)",
            net.trunc()
        ));
    }
    Ok(net)
}

fn parse_u32(s: &str, what: &str) -> Result<u32, String> {
    mpt_model::names::parse_num(s).ok_or_else(|| format!("invalid {what} \"{s}\""))
}

/// Parse the arguments of add/replace/append/change/del.
pub fn parse_route(verb: Verb, args: &[String]) -> Result<RouteSpec, String> {
    let mut dst_word: Option<&str> = None;
    let mut table = None;
    let mut metric = None;
    let mut proto = None;
    let mut algo = None;
    let mut single = NhSpec {
        weight: 1,
        ..NhSpec::default()
    };
    let mut single_used = false;
    let mut resilient = false;
    let mut buckets: Option<u16> = None;
    let mut idle_timer: Option<u32> = None;
    let mut recipe = mpt_model::hash::HashRecipe::default();
    let mut consistent = false;
    let mut table_size: Option<u16> = None;
    let mut nhs: Vec<NhSpec> = Vec::new();
    let mut it = args.iter();
    while let Some(w) = it.next() {
        let in_nh = !nhs.is_empty();
        match w.as_str() {
            "table" => table = Some(value(&mut it, "table")?.to_string()),
            "metric" | "priority" | "preference" => {
                metric = Some(parse_u32(value(&mut it, w)?, "metric")?)
            }
            "proto" | "protocol" => proto = Some(value(&mut it, "proto")?.to_string()),
            "algo" => {
                algo = Some(
                    value(&mut it, "algo")?
                        .parse::<Algo>()
                        .map_err(|e| e.to_string())?,
                )
            }
            "resilient" if !in_nh => resilient = true,
            "buckets" if !in_nh => {
                let v = value(&mut it, "buckets")?;
                let n = parse_u32(v, "buckets")?;
                let max = mpt_model::route::resilient::MAX_BUCKETS;
                if n == 0 || n > u32::from(max) {
                    return Err(format!("buckets {n}: a resilient table has 1 to {max}"));
                }
                buckets = Some(n as u16);
            }
            "idle-timer" | "idle_timer" if !in_nh => {
                idle_timer = Some(parse_u32(value(&mut it, "idle-timer")?, "idle-timer")?)
            }
            "consistent" if !in_nh => consistent = true,
            "table-size" | "table_size" if !in_nh => {
                use mpt_model::route::consistent::{is_prime, DEFAULT_TABLE_SIZE, MIN_TABLE_SIZE};
                let v = value(&mut it, "table-size")?;
                let n = parse_u32(v, "table-size")?;
                if n < u32::from(MIN_TABLE_SIZE)
                    || n > u32::from(DEFAULT_TABLE_SIZE)
                    || !is_prime(n as u16)
                {
                    return Err(format!(
                        "table-size {n}: a consistent table has a prime number of slots, \
                         {MIN_TABLE_SIZE} to {DEFAULT_TABLE_SIZE}"
                    ));
                }
                table_size = Some(n as u16);
            }
            "hash-fields" | "hash_fields" if !in_nh => {
                let v = value(&mut it, "hash-fields")?;
                recipe.fields = Some(mpt_model::hash::HashFields::parse(v)?);
            }
            "seed" if !in_nh => recipe.seed = Some(parse_u32(value(&mut it, "seed")?, "seed")?),
            "nexthop" => {
                if single_used {
                    return Err(
                        "\"nexthop\" cannot follow \"via\"/\"dev\" given outside a nexthop".into(),
                    );
                }
                nhs.push(NhSpec {
                    weight: 1,
                    ..NhSpec::default()
                });
            }
            "via" | "gw" => {
                let v = value(&mut it, "via")?;
                // iproute2 accepts "via inet6 ADDR"; the family word is redundant here.
                let v = if v == "inet" || v == "inet6" {
                    value(&mut it, "via")?
                } else {
                    v
                };
                let a: IpAddr = v
                    .parse()
                    .map_err(|_| format!("invalid gateway address \"{v}\""))?;
                let nh = nhs.last_mut().unwrap_or(&mut single);
                if nh.via.is_some() {
                    return Err("a nexthop has two \"via\"".into());
                }
                nh.via = Some(a);
                single_used |= !in_nh;
            }
            "dev" | "oif" => {
                let v = value(&mut it, "dev")?.to_string();
                let nh = nhs.last_mut().unwrap_or(&mut single);
                if nh.dev.is_some() {
                    return Err("a nexthop has two \"dev\"".into());
                }
                nh.dev = Some(v);
                single_used |= !in_nh;
            }
            "weight" => {
                let v = value(&mut it, "weight")?;
                let Some(nh) = nhs.last_mut() else {
                    return Err("\"weight\" is only valid after \"nexthop\"".into());
                };
                let n = parse_u32(v, "weight")?;
                if n == 0 || n > u32::from(MAX_WEIGHT) {
                    return Err(SpecError::Weight(n).to_string());
                }
                nh.weight = n as u16;
            }
            "onlink" => {
                let nh = nhs.last_mut().unwrap_or(&mut single);
                nh.onlink = true;
                single_used |= !in_nh;
            }
            "to" => {
                let v = value(&mut it, "to")?;
                if dst_word.replace(v).is_some() {
                    return Err("more than one destination prefix".into());
                }
            }
            other if dst_word.is_none() && !in_nh && !other.is_empty() => dst_word = Some(other),
            other => return Err(format!("unexpected word \"{other}\"")),
        }
    }
    let Some(dst_word) = dst_word else {
        return Err("missing destination prefix".into());
    };
    if single_used && !nhs.is_empty() {
        return Err("give either \"via ADDR dev DEV\" or \"nexthop ...\", not both".into());
    }
    let first_gw = nhs
        .iter()
        .chain(std::iter::once(&single))
        .find_map(|n| n.via);
    let dst = parse_prefix(dst_word, first_gw.as_ref().map(Family::of))?;
    let multipath = !nhs.is_empty();
    let nexthops = if multipath {
        nhs
    } else if single_used {
        vec![single]
    } else {
        Vec::new()
    };
    if verb != Verb::Del && nexthops.is_empty() {
        return Err(SpecError::NoNexthop.to_string());
    }
    for nh in &nexthops {
        if nh.via.is_none() && nh.dev.is_none() {
            return Err(SpecError::Empty.to_string());
        }
        if let Some(gw) = nh.via {
            if Family::of(&gw) != Family::of_net(&dst) {
                return Err(SpecError::MixedFamily {
                    gw,
                    fam: Family::of_net(&dst).name(),
                }
                .to_string());
            }
        }
    }
    if verb == Verb::Del && algo.is_some() {
        return Err("\"algo\" has no meaning for del".into());
    }
    if !resilient && (buckets.is_some() || idle_timer.is_some()) {
        return Err("\"buckets\" and \"idle-timer\" are options of \"resilient\"".into());
    }
    if resilient && verb == Verb::Del {
        return Err("\"resilient\" has no meaning for del".into());
    }
    if resilient && !matches!(algo, None | Some(Algo::L3Hash) | Some(Algo::L4Hash)) {
        return Err(format!(
            "\"resilient\" is a table for the hash algorithms (l3-hash, l4-hash), not {}",
            algo.map_or("", Algo::name)
        ));
    }
    if !recipe.is_default() {
        match (verb, algo) {
            (Verb::Del, _) => {
                return Err("\"hash-fields\" and \"seed\" have no meaning for del".into())
            }
            (_, None | Some(Algo::L3Hash) | Some(Algo::L4Hash)) => {}
            (_, Some(a)) => {
                return Err(format!(
                    "\"hash-fields\" and \"seed\" are for the hash algorithms (l3-hash, \
                     l4-hash), not {a}"
                ))
            }
        }
        if let Some(f) = recipe.fields {
            if f.is_l4() && algo != Some(Algo::L4Hash) {
                return Err(format!(
                    "hash-fields {f}: ports and protocol are hashed by \"algo l4-hash\" only"
                ));
            }
        }
    }
    if !consistent && table_size.is_some() {
        return Err("\"table-size\" is an option of \"consistent\"".into());
    }
    if consistent {
        if resilient {
            return Err("give \"resilient\" or \"consistent\", not both".into());
        }
        if verb == Verb::Del {
            return Err("\"consistent\" has no meaning for del".into());
        }
        if !matches!(algo, None | Some(Algo::L3Hash) | Some(Algo::L4Hash)) {
            return Err(format!(
                "\"consistent\" is a table for the hash algorithms (l3-hash, l4-hash), not {}",
                algo.map_or("", Algo::name)
            ));
        }
        // the same table and flow hash on every router: the route's seed, 0 unless written
        // (the namespace's seed is random)
        recipe.seed = Some(recipe.seed.unwrap_or(0));
        return Ok(RouteSpec {
            verb,
            dst,
            table,
            metric,
            proto,
            algo,
            nexthops,
            multipath,
            resilient: Some(Resilient {
                buckets: table_size.unwrap_or(mpt_model::route::consistent::DEFAULT_TABLE_SIZE),
                idle_timer: 0,
                consistent: true,
            }),
            recipe,
        });
    }
    let resilient = resilient.then(|| Resilient {
        buckets: buckets.unwrap_or(mpt_model::route::resilient::DEFAULT_BUCKETS),
        idle_timer: idle_timer.unwrap_or(mpt_model::route::resilient::DEFAULT_IDLE_TIMER),
        consistent: false,
    });
    Ok(RouteSpec {
        verb,
        dst,
        table,
        metric,
        proto,
        algo,
        nexthops,
        multipath,
        resilient,
        recipe,
    })
}

/// Parse the arguments of show.
pub fn parse_show(args: &[String]) -> Result<ShowSpec, String> {
    let mut s = ShowSpec::default();
    let mut it = args.iter();
    while let Some(w) = it.next() {
        let kw = abbrev::resolve(&[SHOW_KEYWORDS], w).map(|k| k.word);
        match kw {
            Some("table") => s.table = Some(value(&mut it, "table")?.to_string()),
            Some("algo") => {
                s.algo = Some(
                    value(&mut it, "algo")?
                        .parse::<Algo>()
                        .map_err(|e| e.to_string())?,
                )
            }
            Some("protocol") => s.proto = Some(value(&mut it, "proto")?.to_string()),
            Some("scope") => s.scope = Some(value(&mut it, "scope")?.to_string()),
            Some("type") => s.rtype = Some(value(&mut it, "type")?.to_string()),
            Some("dev" | "oif") => s.dev = Some(value(&mut it, "dev")?.to_string()),
            Some("metric" | "priority" | "preference") => {
                let v = value(&mut it, "metric")?;
                s.metric = Some(v.parse().map_err(|_| format!("invalid metric \"{v}\""))?);
            }
            Some("via") => {
                let mut v = value(&mut it, "via")?;
                // ip's "via inet6 ADDR": the family word, then the address
                if v == "inet" || v == "inet6" {
                    v = value(&mut it, "via")?;
                    s.via_family = true;
                }
                s.via = Some(
                    v.parse()
                        .map_err(|_| format!("invalid address \"{v}\" after via"))?,
                );
            }
            Some(other) => {
                return Err(format!(
                    "\"{other}\" is a filter of ip route show that mproute show does not have"
                ))
            }
            None => {
                if s.dst.is_some() {
                    return Err(format!("unexpected word \"{w}\""));
                }
                // [to] [root|match|exact] PREFIX, as ip reads it
                let mut w = w.as_str();
                if abbrev::matches(w, "to") {
                    w = value(&mut it, "to")?;
                }
                let (select, kw) = if abbrev::matches(w, "root") {
                    (Select::Root, Some("root"))
                } else if abbrev::matches(w, "match") {
                    (Select::Match, Some("match"))
                } else if abbrev::matches(w, "exact") {
                    (Select::Exact, Some("exact"))
                } else {
                    (Select::Exact, None)
                };
                if let Some(k) = kw {
                    w = value(&mut it, k)?;
                }
                s.select = select;
                s.dst = Some(parse_prefix(w, None)?);
            }
        }
    }
    Ok(s)
}

/// Parse the arguments of flush: show's selector (`[table T|all] [[root|match|exact] PREFIX]
/// [proto P] [dev D] [via ADDR] [metric M]`) without `algo`; no table is every table.
pub fn parse_flush(args: &[String]) -> Result<ShowSpec, String> {
    let s = parse_show(args)?;
    if s.algo.is_some() {
        return Err("\"algo\" selects routes for show only".to_string());
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpt_cli::args::words;

    fn ok(verb: Verb, s: &str) -> RouteSpec {
        parse_route(verb, &words(s)).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn err(verb: Verb, s: &str) -> String {
        parse_route(verb, &words(s)).expect_err(s)
    }

    #[test]
    fn multipath_form() {
        let r = ok(
            Verb::Add,
            "10.0.0.0/8 table 100 metric 5 proto bgp algo l4-hash nexthop via 192.0.2.1 dev eth0 weight 2 nexthop via 192.0.2.2 onlink",
        );
        assert_eq!(r.dst.to_string(), "10.0.0.0/8");
        assert_eq!(r.table.as_deref(), Some("100"));
        assert_eq!(r.metric, Some(5));
        assert_eq!(r.proto.as_deref(), Some("bgp"));
        assert_eq!(r.algo, Some(Algo::L4Hash));
        assert!(r.multipath);
        assert_eq!(r.nexthops.len(), 2);
        assert_eq!(r.nexthops[0].weight, 2);
        assert_eq!(r.nexthops[0].dev.as_deref(), Some("eth0"));
        assert!(r.nexthops[1].onlink);
        assert_eq!(r.nexthops[1].weight, 1);
    }

    #[test]
    fn hash_recipes() {
        use mpt_model::hash::{HashFields, HashRecipe};
        let r = ok(
            Verb::Add,
            "10.0.0.0/8 algo l4-hash hash-fields src-port,dst-port seed 7 nexthop via 1.1.1.1",
        );
        assert_eq!(
            r.recipe,
            HashRecipe {
                fields: Some(HashFields(0x30)),
                seed: Some(7)
            }
        );
        let r = ok(
            Verb::Add,
            "10.0.0.0/8 hash-fields src-ip,dst-ip nexthop via 1.1.1.1",
        );
        assert_eq!(r.recipe.fields, Some(HashFields::L3));
        let r = ok(
            Verb::Add,
            "10.0.0.0/8 algo l3-hash resilient seed 0x10 nexthop via 1.1.1.1",
        );
        assert_eq!(r.recipe.seed, Some(16));
        assert!(ok(Verb::Add, "10.0.0.0/8 nexthop via 1.1.1.1")
            .recipe
            .is_default());
        for (bad, says) in [
            (
                "10.0.0.0/8 hash-fields src-port,dst-port nexthop via 1.1.1.1",
                "l4-hash",
            ),
            (
                "10.0.0.0/8 algo drr seed 1 nexthop via 1.1.1.1",
                "hash algorithms",
            ),
            (
                "10.0.0.0/8 algo l4-hash hash-fields src-ip nexthop via 1.1.1.1",
                "go together",
            ),
            (
                "10.0.0.0/8 algo l4-hash hash-fields flowlabel nexthop via 1.1.1.1",
                "flowlabel",
            ),
            (
                "10.0.0.0/8 algo l4-hash hash-fields inner-src-ip nexthop via 1.1.1.1",
                "inner",
            ),
            (
                "10.0.0.0/8 algo l4-hash hash-fields sport nexthop via 1.1.1.1",
                "unknown hash field",
            ),
            ("10.0.0.0/8 seed x nexthop via 1.1.1.1", "invalid seed"),
            ("10.0.0.0/8 seed 1", "have no meaning for del"),
        ] {
            let verb = if bad.ends_with("seed 1") {
                Verb::Del
            } else {
                Verb::Add
            };
            let e = parse_route(verb, &words(bad)).expect_err(bad);
            assert!(e.contains(says) && !e.contains('\n'), "{bad}: {e}");
        }
    }

    #[test]
    fn consistent_tables() {
        let r = ok(
            Verb::Add,
            "10.0.0.0/8 algo l4-hash consistent table-size 251 nexthop via 1.1.1.1",
        );
        assert_eq!(
            r.resilient,
            Some(Resilient {
                buckets: 251,
                idle_timer: 0,
                consistent: true
            })
        );
        assert_eq!(
            r.recipe.seed,
            Some(0),
            "a consistent route's seed is 0 unless written"
        );
        let r = ok(
            Verb::Add,
            "10.0.0.0/8 consistent seed 9 nexthop via 1.1.1.1",
        );
        assert_eq!(r.resilient.map(|p| p.buckets), Some(4093));
        assert_eq!(r.recipe.seed, Some(9));
        for (bad, says) in [
            (
                "10.0.0.0/8 consistent table-size 256 nexthop via 1.1.1.1",
                "prime",
            ),
            (
                "10.0.0.0/8 consistent table-size 4099 nexthop via 1.1.1.1",
                "prime",
            ),
            ("10.0.0.0/8 table-size 251 nexthop via 1.1.1.1", "option of"),
            (
                "10.0.0.0/8 resilient consistent nexthop via 1.1.1.1",
                "not both",
            ),
            (
                "10.0.0.0/8 algo drr consistent nexthop via 1.1.1.1",
                "hash algorithms",
            ),
            (
                "10.0.0.0/8 consistent buckets 8 nexthop via 1.1.1.1",
                "options of",
            ),
        ] {
            let e = parse_route(Verb::Add, &words(bad)).expect_err(bad);
            assert!(e.contains(says) && !e.contains('\n'), "{bad}: {e}");
        }
    }

    #[test]
    fn resilient_tables() {
        let r = ok(
            Verb::Add,
            "10.0.0.0/8 algo l4-hash resilient buckets 256 idle-timer 30 nexthop via 1.1.1.1 nexthop via 1.1.1.2",
        );
        assert_eq!(
            r.resilient,
            Some(Resilient {
                buckets: 256,
                idle_timer: 30,
                consistent: false,
            })
        );
        let r = ok(Verb::Add, "10.0.0.0/8 resilient nexthop via 1.1.1.1");
        assert_eq!(
            r.resilient,
            Some(Resilient {
                buckets: 128,
                idle_timer: 120,
                consistent: false,
            })
        );
        assert_eq!(
            ok(Verb::Add, "10.0.0.0/8 nexthop via 1.1.1.1").resilient,
            None
        );
        assert!(err(
            Verb::Add,
            "10.0.0.0/8 algo drr resilient nexthop via 1.1.1.1"
        )
        .contains("hash algorithms"));
        assert!(err(Verb::Add, "10.0.0.0/8 buckets 8 nexthop via 1.1.1.1").contains("options"));
        assert!(err(
            Verb::Add,
            "10.0.0.0/8 resilient buckets 0 nexthop via 1.1.1.1"
        )
        .contains("1 to 4096"));
        assert!(err(
            Verb::Add,
            "10.0.0.0/8 resilient buckets 4097 nexthop via 1.1.1.1"
        )
        .contains("1 to 4096"));
    }

    #[test]
    fn single_form_and_v6() {
        let r = ok(Verb::Replace, "2001:db8::/32 via 2001:db8:1::1 dev va");
        assert!(!r.multipath);
        assert_eq!(
            r.nexthops[0].via,
            Some("2001:db8:1::1".parse().expect("addr"))
        );
        let r = ok(Verb::Add, "default via 2001:db8:1::1 dev va");
        assert_eq!(r.dst.to_string(), "::/0");
        let r = ok(Verb::Add, "192.0.2.7 via 10.0.0.1");
        assert_eq!(r.dst.to_string(), "192.0.2.7/32");
    }

    #[test]
    fn bad_input_is_rejected_with_a_reason() {
        assert!(err(Verb::Add, "10.0.0.0/33 via 1.1.1.1").contains("invalid prefix"));
        assert!(err(Verb::Add, "10.0.0.1/8 via 1.1.1.1").contains("host bits"));
        assert!(
            err(Verb::Add, "10.0.0.0/8 algo fastest nexthop via 1.1.1.1")
                .contains("unknown algorithm")
        );
        assert!(err(Verb::Add, "10.0.0.0/8 nexthop via 1.1.1.1 weight 0").contains("weight 0"));
        assert!(err(Verb::Add, "10.0.0.0/8 nexthop via 1.1.1.1 weight 257").contains("weight 257"));
        assert!(err(Verb::Add, "10.0.0.0/8 nexthop via 2001:db8::1").contains("family"));
        assert!(err(Verb::Add, "10.0.0.0/8 algo l3-hash").contains("no nexthop"));
        assert!(err(Verb::Add, "10.0.0.0/8 via 1.1.1.1 weight 2").contains("only valid after"));
        assert!(err(Verb::Add, "10.0.0.0/8 via 1.1.1.1 nexthop via 1.1.1.2").contains("not"));
        assert!(err(Verb::Add, "10.0.0.0/8 nexthop").contains("needs"));
        assert!(err(Verb::Add, "10.0.0.0/8 nexthop via 1.1.1.1 bogus").contains("bogus"));
        assert!(err(Verb::Add, "nexthop via 1.1.1.1").contains("missing destination"));
        assert!(err(Verb::Add, "10.0.0.0/8 metric x via 1.1.1.1").contains("metric"));
    }

    #[test]
    fn del_needs_no_nexthop() {
        let r = ok(Verb::Del, "10.0.0.0/8 table 7 metric 3");
        assert!(r.nexthops.is_empty());
        assert!(err(Verb::Del, "10.0.0.0/8 algo drr").contains("algo"));
    }

    #[test]
    fn show_and_flush() {
        let s = parse_show(&words("table all algo per-packet")).expect("ok");
        assert_eq!(s.table.as_deref(), Some("all"));
        assert_eq!(s.algo, Some(Algo::PerPacket));
        let s = parse_show(&words("10.0.0.0/8")).expect("ok");
        assert_eq!(s.dst.map(|d| d.to_string()).as_deref(), Some("10.0.0.0/8"));
        assert_eq!(
            parse_flush(&words("table 5")).expect("ok").table.as_deref(),
            Some("5")
        );
        assert!(parse_flush(&words("everything")).is_err());
        assert!(parse_flush(&words("algo drr")).is_err());
        let f = parse_flush(&words("root 10.0.0.0/8 dev eth0")).expect("ok");
        assert_eq!(f.select, Select::Root);
        assert_eq!(f.dev.as_deref(), Some("eth0"));
    }
}

/// `get ADDR [from SRC] [ipproto P] [sport S] [dport D] [iif DEV] [table T]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetSpec {
    /// Destination address.
    pub dst: IpAddr,
    /// Source address (unspecified when not given).
    pub src: Option<IpAddr>,
    /// IP protocol number.
    pub proto: u8,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// Ingress device.
    pub iif: Option<String>,
    /// Table.
    pub table: Option<String>,
}

/// Parse the arguments of get.
pub fn parse_get(args: &[String]) -> Result<GetSpec, String> {
    let mut dst = None;
    let mut g = GetSpec {
        dst: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        src: None,
        proto: 0,
        sport: 0,
        dport: 0,
        iif: None,
        table: None,
    };
    let port = |v: &str, w: &str| -> Result<u16, String> {
        v.parse::<u16>().map_err(|_| format!("invalid {w} \"{v}\""))
    };
    let mut it = args.iter();
    while let Some(w) = it.next() {
        match w.as_str() {
            "from" => {
                let v = value(&mut it, "from")?;
                g.src = Some(
                    v.parse()
                        .map_err(|_| format!("invalid source address \"{v}\""))?,
                );
            }
            "ipproto" => {
                let v = value(&mut it, "ipproto")?;
                g.proto = match v {
                    "tcp" => 6,
                    "udp" => 17,
                    "sctp" => 132,
                    "icmp" => 1,
                    "ipv6-icmp" | "icmpv6" => 58,
                    n => n
                        .parse::<u8>()
                        .map_err(|_| format!("invalid ipproto \"{n}\""))?,
                };
            }
            "sport" => g.sport = port(value(&mut it, "sport")?, "sport")?,
            "dport" => g.dport = port(value(&mut it, "dport")?, "dport")?,
            "iif" => g.iif = Some(value(&mut it, "iif")?.to_string()),
            "table" => g.table = Some(value(&mut it, "table")?.to_string()),
            "to" => {
                let v = value(&mut it, "to")?;
                dst = Some(v.parse().map_err(|_| format!("invalid address \"{v}\""))?);
            }
            other if dst.is_none() => {
                dst = Some(
                    other
                        .parse()
                        .map_err(|_| format!("invalid address \"{other}\""))?,
                );
            }
            other => return Err(format!("unexpected word \"{other}\"")),
        }
    }
    g.dst = dst.ok_or("missing destination address")?;
    if let Some(s) = g.src {
        if Family::of(&s) != Family::of(&g.dst) {
            return Err("source and destination are of different families".into());
        }
    }
    Ok(g)
}

/// `dataplane attach dev DEV [MODE] | detach dev DEV | show`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DpSpec {
    /// Attach.
    Attach {
        /// Devices.
        devs: Vec<String>,
        /// The hook.
        mode: AttachMode,
        /// Forward unmanaged destinations by the kernel FIB (`fastpath on|off`, default on).
        fastpath: bool,
        /// tc delivers straight into a veth peer's namespace where it may (`peer on|off`,
        /// default on): `bpf_redirect_peer`, see [`crate::hook::peer_ports`].
        peer: bool,
        /// Enable GRO on veth peers in reach (`prepare-peers`).
        prepare_peers: bool,
    },
    /// Detach.
    Detach {
        /// Devices.
        devs: Vec<String>,
    },
    /// Show.
    Show,
    /// Verify the managed routes again after every change of routes, rules, addresses or
    /// links, until interrupted.
    Watch,
}

/// Which hook `dataplane attach` puts the dataplane on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AttachMode {
    /// What is correct and fastest per device (the default): tc on veth and other virtual
    /// devices, native XDP elsewhere (tc where the driver has none).
    #[default]
    Auto,
    /// Native XDP (with tc beside it).
    Xdp,
    /// Generic XDP (with tc beside it).
    XdpGeneric,
    /// tc alone.
    Tc,
}

/// Parse the arguments of dataplane.
pub fn parse_dataplane(args: &[String]) -> Result<DpSpec, String> {
    let (verb, rest) = match args {
        [] => return Ok(DpSpec::Show),
        [v, rest @ ..] => (v.as_str(), rest),
    };
    let mut devs = Vec::new();
    let mut mode = None;
    let mut fastpath = true;
    let mut peer = true;
    let mut prepare_peers = false;
    let mut it = rest.iter();
    while let Some(w) = it.next() {
        match w.as_str() {
            "dev" => devs.push(value(&mut it, "dev")?.to_string()),
            m @ ("auto" | "xdp" | "xdp-generic" | "tc") if verb == "attach" => {
                let m = match m {
                    "xdp" => AttachMode::Xdp,
                    "xdp-generic" => AttachMode::XdpGeneric,
                    "tc" => AttachMode::Tc,
                    _ => AttachMode::Auto,
                };
                if mode.replace(m).is_some() {
                    return Err("more than one mode given".into());
                }
            }
            "fastpath" if verb == "attach" => {
                fastpath = match value(&mut it, "fastpath")? {
                    "on" => true,
                    "off" => false,
                    v => return Err(format!("fastpath takes on or off, not \"{v}\"")),
                }
            }
            "peer" if verb == "attach" => {
                peer = match value(&mut it, "peer")? {
                    "on" => true,
                    "off" => false,
                    v => return Err(format!("peer takes on or off, not \"{v}\"")),
                }
            }
            "prepare-peers" | "--prepare-peers" if verb == "attach" => prepare_peers = true,
            other => return Err(format!("unexpected word \"{other}\"")),
        }
    }
    match verb {
        "attach" | "detach" if devs.is_empty() => Err(format!("{verb} needs \"dev DEV\"")),
        "attach" => Ok(DpSpec::Attach {
            devs,
            mode: mode.unwrap_or_default(),
            fastpath,
            peer,
            prepare_peers,
        }),
        "detach" => Ok(DpSpec::Detach { devs }),
        "show" | "list" | "lst" | "ls" if rest.is_empty() => Ok(DpSpec::Show),
        "watch" if rest.is_empty() => Ok(DpSpec::Watch),
        other => Err(format!(
            "unknown dataplane command \"{other}\" (expected attach, detach, show or watch)"
        )),
    }
}

#[cfg(test)]
mod dp_tests {
    use super::*;
    use mpt_cli::args::words;

    #[test]
    fn get_and_dataplane() {
        let g = parse_get(&words(
            "198.51.100.7 from 10.0.0.2 ipproto udp sport 1000 dport 53",
        ))
        .expect("ok");
        assert_eq!(g.proto, 17);
        assert_eq!((g.sport, g.dport), (1000, 53));
        assert!(parse_get(&words("198.51.100.7 from 2001:db8::1")).is_err());
        assert!(parse_get(&words("from 10.0.0.1")).is_err());
        assert!(parse_get(&words("10.0.0.1 sport 70000")).is_err());
        assert_eq!(
            parse_dataplane(&words("attach dev v0 dev v1 xdp")).expect("ok"),
            DpSpec::Attach {
                devs: vec!["v0".into(), "v1".into()],
                mode: AttachMode::Xdp,
                fastpath: true,
                peer: true,
                prepare_peers: false
            }
        );
        assert_eq!(
            parse_dataplane(&words("attach dev v0 fastpath off peer off prepare-peers"))
                .expect("ok"),
            DpSpec::Attach {
                devs: vec!["v0".into()],
                mode: AttachMode::Auto,
                fastpath: false,
                peer: false,
                prepare_peers: true
            }
        );
        assert!(parse_dataplane(&words("attach dev v0 fastpath maybe")).is_err());
        assert!(parse_dataplane(&words("attach dev v0 peer")).is_err());
        assert_eq!(parse_dataplane(&words("show")).expect("ok"), DpSpec::Show);
        assert_eq!(parse_dataplane(&words("watch")).expect("ok"), DpSpec::Watch);
        assert!(parse_dataplane(&words("watch dev v0")).is_err());
        assert!(parse_dataplane(&words("attach xdp")).is_err());
        assert!(parse_dataplane(&words("frob")).is_err());
    }
}

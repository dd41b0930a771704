//! iproute2's habits, tested against iproute2 itself in throwaway namespaces: every
//! abbreviation of the tools' tables (mpt_cli::abbrev) is resolved by `ip` to the same word
//! (shown by what `ip` does with the abbreviation and with the word), `ip`'s option table is
//! read in ip's order, and `mproute show`'s selectors select what `ip route show` selects on the
//! same routes (`ip -j` the oracle).

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;
use mpt_cli::abbrev::{self, Match, Word};
use mpt_testkit::{require_root, run, Netns, Tool};
use serde_json::Value;

const MP: Tool = Tool::new(env!("CARGO_BIN_EXE_mproute"));

/// Every leading part of `w` (`a`, `ad`, `add`), or `w` alone when it is compared whole.
fn abbreviations(w: &Word) -> Vec<String> {
    match w.how {
        Match::Exact => vec![w.word.to_string()],
        Match::Prefix => (1..=w.word.len())
            .map(|n| w.word[..n].to_string())
            .collect(),
    }
}

/// What an `ip` invocation did: its exit code, its output (binary output by its length: `ip
/// route save` carries a time-based sequence number) and the routes left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Effect {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    routes: String,
}

fn text(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) => s.to_string(),
        Err(_) => format!("<{} bytes>", b.len()),
    }
}

/// A namespace with a veth pair on 192.0.2.0/24 and 2001:db8:1::/64.
fn lab(tag: &str) -> Netns {
    require_root();
    let ns = Netns::new(tag);
    ns.ip_ok("link add va type veth peer name vb");
    ns.ip_ok("link set lo up");
    ns.ip_ok("link set va up");
    ns.ip_ok("link set vb up");
    ns.ip_ok("addr add 192.0.2.1/24 dev va");
    ns.ip_ok("addr add 2001:db8:1::1/64 dev va nodad");
    ns
}

/// The state every verb probe starts from: 198.18.7.0/24 present, 198.18.8.0/24 absent.
fn reset(ns: &Netns) {
    let _ = ns.ip("route flush root 198.18.0.0/15");
    ns.ip_ok("route add 198.18.7.0/24 via 192.0.2.2 dev va");
}

/// `ip route VERB PREFIX via GW dev va` from the same state each time, for the present route
/// with another gateway (prepend and append add a second route for the prefix, before it or
/// after it; add refuses; replace replaces), for an absent one (change refuses), and for the
/// present route itself (show prints it, flush and delete remove it).
fn route_verb_effect(ns: &Netns, verb: &str) -> Vec<Effect> {
    [
        ("198.18.7.0/24", "192.0.2.3"),
        ("198.18.8.0/24", "192.0.2.3"),
        ("198.18.7.0/24", "192.0.2.2"),
    ]
    .iter()
    .map(|(dst, gw)| {
        reset(ns);
        let o = ns.ip(&["route", verb, dst, "via", gw, "dev", "va"][..]);
        let routes = ns.ip_ok("route show root 198.18.0.0/15");
        Effect {
            code: o.status.code(),
            stdout: text(&o.stdout),
            stderr: text(&o.stderr),
            routes,
        }
    })
    .collect()
}

#[test]
fn ip_resolves_every_route_verb_abbreviation_as_the_table_does() {
    let ns = lab("hab-verbs");
    let mut full: BTreeMap<&str, Vec<Effect>> = BTreeMap::new();
    for w in abbrev::IP_ROUTE_VERBS {
        full.insert(w.word, route_verb_effect(&ns, w.word));
    }
    // the probe tells the verbs apart (or a wrong table could pass): add, change, replace,
    // delete, show and flush each leave another trace
    for (a, b) in [
        ("add", "replace"),
        ("change", "replace"),
        ("delete", "flush"),
        ("show", "flush"),
        ("get", "show"),
        ("add", "prepend"),
        ("prepend", "append"),
    ] {
        assert_ne!(
            full[a], full[b],
            "ip route {a} and {b} look alike to the probe"
        );
    }
    let mut checked = 0;
    for w in abbrev::IP_ROUTE_VERBS {
        for abbr in abbreviations(w) {
            let resolved = abbrev::resolve(&[abbrev::IP_ROUTE_VERBS], &abbr)
                .expect("a leading part resolves")
                .word;
            let got = route_verb_effect(&ns, &abbr);
            assert_eq!(
                got, full[resolved],
                "ip route {abbr} does not do what ip route {resolved} does"
            );
            checked += 1;
        }
    }
    assert!(checked > 80, "{checked}");
    // a word none of them begins with is refused by ip, and left alone by the table
    let o = ns.ip("route frob");
    assert!(!o.status.success());
    assert!(abbrev::resolve(&[abbrev::IP_ROUTE_VERBS], "frob").is_none());
}

/// `ip -n NS OBJECT help`: each object's own usage text, and its exit code.
fn object_effect(ns: &Netns, obj: &str) -> (Option<i32>, String) {
    let o = ns.ip(&[obj, "help"][..]);
    (o.status.code(), text(&o.stderr))
}

#[test]
fn ip_resolves_every_object_abbreviation_as_the_table_does() {
    let ns = lab("hab-objs");
    let mut full: BTreeMap<&str, (Option<i32>, String)> = BTreeMap::new();
    for o in abbrev::IP_OBJECTS {
        full.insert(o, object_effect(&ns, o));
    }
    assert_ne!(full["route"], full["rule"]);
    assert_ne!(full["route"], full["address"]);
    for o in abbrev::IP_OBJECTS {
        for n in 1..=o.len() {
            let abbr = &o[..n];
            let resolved = abbrev::ip_object(abbr).expect("a leading part resolves");
            assert_eq!(
                object_effect(&ns, abbr),
                full[resolved],
                "ip {abbr} is not ip {resolved}"
            );
        }
    }
    // mproute reads ip's object word: `mproute r s` is `mproute route show`
    reset(&ns);
    let want = MP.ok(&ns, "route show");
    assert!(want.contains("198.18.7.0/24"), "{want}");
    for line in ["r s", "ro sh", "rou list", "sh", "s", "l", "ls", "lst", "r"] {
        assert_eq!(MP.ok(&ns, line), want, "mproute {line}");
    }
}

/// `ip OPTION [VALUE] -n NS link show lo`: what the option does to a listing.
fn option_effect(ns: &Netns, opt: &str, value: Option<&str>) -> (Option<i32>, String, String) {
    let mut a: Vec<&str> = vec![opt];
    a.extend(value);
    a.extend(["-n", ns.name(), "link", "show", "lo"]);
    let o = run("ip", &a);
    (o.status.code(), text(&o.stdout), text(&o.stderr))
}

#[test]
fn ip_reads_every_option_abbreviation_as_the_table_does() {
    let ns = lab("hab-opts");
    let batch = std::env::temp_dir().join(format!("hab-opts-{}.batch", std::process::id()));
    std::fs::write(&batch, "link show lo\n").expect("write the batch file");
    let batch_s = batch.to_string_lossy().into_owned();
    let value = |word: &str| match word {
        "-family" => Some("inet"),
        "-batch" => Some(batch_s.as_str()),
        "-netns" => Some(ns.name()),
        "-loops" => Some("1"),
        "-rcvbuf" => Some("65536"),
        _ => None,
    };
    let mut checked = 0;
    for (word, how, _) in abbrev::IP_OPTIONS {
        let abbrs: Vec<String> = match how {
            Match::Exact => vec![word.to_string()],
            Match::Prefix => (2..=word.len()).map(|n| word[..n].to_string()).collect(),
        };
        for abbr in abbrs {
            let (resolved, _) = abbrev::ip_option(&abbr).expect("a leading part resolves");
            // the value the option ip resolves it to takes (ip reads the next word as it)
            let v = value(resolved);
            let want = option_effect(&ns, resolved, v);
            assert_eq!(
                option_effect(&ns, &abbr, v),
                want,
                "ip {abbr} is not ip {resolved}"
            );
            // and with two dashes, as ip reads them too
            assert_eq!(
                option_effect(&ns, &format!("-{abbr}"), v),
                want,
                "ip -{abbr} is not ip {resolved}"
            );
            checked += 1;
        }
    }
    let _ = std::fs::remove_file(&batch);
    assert!(checked > 100, "{checked}");
    // the listing tells the flags apart where it can
    let plain = option_effect(&ns, "-force", None);
    for f in [
        "-stats", "-details", "-json", "-oneline", "-brief", "-Version", "-help",
    ] {
        assert_ne!(option_effect(&ns, f, None), plain, "{f}");
    }
    // what ip refuses the table does not know
    for bad in ["-e", "-x", "-jx", "-stat5"] {
        assert_ne!(option_effect(&ns, bad, None).0, Some(0), "{bad}");
        assert!(abbrev::ip_option(bad).is_none(), "{bad}");
    }
}

#[test]
fn mproute_takes_ips_options() {
    let ns = lab("hab-mpopt");
    reset(&ns);
    let j = MP.ok(&ns, "--json show");
    for line in ["-json show", "-js sh", "-j r s", "--json route show"] {
        assert_eq!(MP.ok(&ns, line), j, "mproute {line}");
    }
    // -s -s: a count; -human accepted
    for line in [
        "-s -s show",
        "-stats -statistics show",
        "-human show",
        "-h show",
    ] {
        let o = MP.at(&ns, line);
        assert!(o.status.success(), "mproute {line}: {o:?}");
        assert!(text(&o.stdout).contains("198.18.7.0/24"), "mproute {line}");
    }
    // -netns as ip spells it
    let o = MP.run(&["-netns", ns.name(), "-j", "show"][..]);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(text(&o.stdout).trim(), j.trim());
    // unknown options and ip's options mproute lacks: one line, exit 1, never help
    for (line, msg) in [
        ("-x show", "unknown option \"-x\""),
        ("-t show", "option \"-t\" is ip's -timestamp"),
        ("-brief show", "option \"-brief\" is ip's -brief"),
    ] {
        let o = MP.at(&ns, line);
        assert_eq!(o.status.code(), Some(1), "mproute {line}");
        let e = text(&o.stderr);
        assert!(e.contains(msg), "mproute {line}: {e}");
        assert!(o.stdout.is_empty(), "mproute {line} printed {:?}", o.stdout);
    }
    // -4 and -6 (and -family) as ip's
    let v4 = MP.json(&ns, "-4 show");
    let v6 = MP.json(&ns, "-6 show");
    assert!(v4.as_array().is_some_and(|a| !a.is_empty()));
    assert!(v6.as_array().is_some_and(|a| !a.is_empty()));
    assert!(v4
        .as_array()
        .into_iter()
        .flatten()
        .all(|r| !dst(r).0.is_ipv6()));
    assert!(v6
        .as_array()
        .into_iter()
        .flatten()
        .all(|r| dst(r).0.is_ipv6()));
    assert_eq!(MP.json(&ns, "-family inet6 show"), v6);
    assert_eq!(MP.json(&ns, "-f inet show"), v4);
}

#[test]
fn oneline_puts_a_multipath_route_on_one_line() {
    let ns = lab("hab-oneline");
    ns.ip_ok("route add 198.18.9.0/24 nexthop via 192.0.2.2 dev va nexthop via 192.0.2.3 dev va");
    let lines = |out: String| {
        out.lines()
            .filter(|l| l.contains("192.0.2.3") || l.contains("198.18.9.0/24"))
            .count()
    };
    assert_eq!(lines(MP.ok(&ns, "show 198.18.9.0/24")), 2);
    let o = MP.ok(&ns, "-o show 198.18.9.0/24");
    assert_eq!(lines(o.clone()), 1, "{o}");
    // and no header line: one line per object, as ip -o
    assert!(!o.contains("DST"), "{o}");
    // ip's -oneline marks the joins with a backslash too
    assert!(o.contains(" \\ "), "{o}");
    assert!(ns.ip_ok("-o route show 198.18.9.0/24").contains('\\'));
}

/// A route's destination in either tool's JSON (ip prints a host route without its length and
/// `default` for /0; it leaves out what the filter fixed, such as the metric).
fn dst(r: &Value) -> (IpAddr, u8) {
    let s = r["dst"].as_str().expect("dst");
    let v6 = s.contains(':') || r["family"] == "inet6";
    let net: IpNet = match s {
        "default" if v6 => "::/0".parse().expect("net"),
        "default" => "0.0.0.0/0".parse().expect("net"),
        s if s.contains('/') => s.parse().expect("net"),
        s => IpNet::from(s.parse::<IpAddr>().expect("addr")),
    };
    (net.network(), net.prefix_len())
}

/// The destinations of a listing, each as often as it is listed.
fn dsts(v: &Value) -> Vec<(IpAddr, u8)> {
    let mut d: Vec<_> = v.as_array().into_iter().flatten().map(dst).collect();
    d.sort();
    d
}

#[test]
fn show_selects_what_ip_route_show_selects() {
    let ns = lab("hab-show");
    for r in [
        "198.18.1.0/24 via 192.0.2.2 dev va proto static",
        "198.18.1.0/25 via 192.0.2.3 dev va",
        "198.18.1.128/25 dev va proto static metric 7",
        "198.18.0.0/16 nexthop via 192.0.2.2 dev va nexthop via 192.0.2.3 dev va",
        "198.19.0.0/16 via 192.0.2.3 dev va metric 7",
        "203.0.113.5 via 192.0.2.2 dev va",
        "default via 192.0.2.2 dev va",
        "2001:db8:5::/48 via 2001:db8:1::2 dev va proto static",
        "2001:db8:5:1::/64 nexthop via 2001:db8:1::2 dev va nexthop via 2001:db8:1::3 dev va",
        "2001:db8:6::/48 dev va metric 7",
        "unreachable 198.18.5.0/24",
        "blackhole 2001:db8:8::/48",
    ] {
        ns.ip_ok(&format!("route add {r}")[..]);
    }
    // and routes mproute owns (protocol mproute)
    MP.ok(
        &ns,
        "add 198.18.2.0/24 nexthop via 192.0.2.2 dev va nexthop via 192.0.2.3 dev va",
    );
    MP.ok(&ns, "add 198.18.3.0/24 via 192.0.2.3 dev va");
    MP.ok(&ns, "add 2001:db8:7::/48 via 2001:db8:1::3 dev va");
    let filters = [
        "",
        "proto static",
        "proto mproute",
        "proto kernel",
        "proto all",
        "dev va",
        "dev vb",
        "via 192.0.2.2",
        "via 192.0.2.3",
        "via 2001:db8:1::2",
        "via inet6 2001:db8:1::3",
        "root 198.18.0.0/15",
        "root 198.18.1.0/24",
        "ro 198.18.1.0/24",
        "match 198.18.1.200",
        "match 198.18.2.0/24",
        "ma 203.0.113.5",
        "exact 198.18.1.0/24",
        "to exact 198.18.0.0/16",
        "198.18.1.0/25",
        "203.0.113.5",
        "to 198.18.3.0/24",
        "default",
        "root 2001:db8::/32",
        "match 2001:db8:5:1::1",
        "exact 2001:db8:5::/48",
        "metric 7",
        "proto static root 198.18.0.0/15",
        "dev va via 192.0.2.3 root 198.18.0.0/15",
        "p static m 7",
        "table main proto boot",
        "scope link",
        "scope global",
        "scope all",
        "s 253",
        "type unreachable",
        "type blackhole",
        "ty unicast root 198.18.0.0/15",
    ];
    let mut nonempty = 0;
    for f in filters {
        for fam in ["-4", "-6"] {
            let ip_args = format!("-j {fam} route show {f}");
            let ours_args = format!("{fam} show {f}");
            let o = ns.ip(&ip_args[..]);
            if !o.status.success() {
                // ip refuses an address of the other family (-6 ... via 192.0.2.2): so do we
                let m = MP.at(&ns, &ours_args[..]);
                assert_eq!(m.status.code(), Some(1), "mproute {ours_args}: {m:?}");
                continue;
            }
            let ip: Value = if o.stdout.is_empty() {
                Value::Array(Vec::new())
            } else {
                serde_json::from_slice(&o.stdout).expect("ip's JSON")
            };
            let ours = MP.json(&ns, &ours_args[..]);
            assert_eq!(
                dsts(&ours),
                dsts(&ip),
                "mproute {fam} show {f} is not ip {fam} route show {f}"
            );
            if !dsts(&ip).is_empty() {
                nonempty += 1;
            }
        }
    }
    // the oracle selected something most of the time, not nothing
    assert!(nonempty > 30, "{nonempty}");
    // a filter ip has and mproute does not: one line, exit 1
    let o = MP.at(&ns, "show src 192.0.2.1");
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("\"src\""), "{o:?}");
}

/// mproute's routes for the flush test: multipath and single-path, IPv4 and IPv6, two metrics.
const OWNED: &[&str] = &[
    "198.18.2.0/24 nexthop via 192.0.2.2 dev va nexthop via 192.0.2.3 dev va",
    "198.18.3.0/24 via 192.0.2.3 dev va",
    "198.18.4.0/24 metric 7 via 192.0.2.2 dev va",
    "198.18.0.0/16 via 192.0.2.2 dev va",
    "2001:db8:7::/48 via 2001:db8:1::3 dev va",
    "2001:db8:7:1::/64 nexthop via 2001:db8:1::2 dev va nexthop via 2001:db8:1::3 dev va",
];

/// The routes of table main, as ip lists them for a family.
fn main_routes(ns: &Netns, fam: &str) -> Vec<(IpAddr, u8)> {
    dsts(&ns.ip_json(&format!("{fam} route show table main")[..]))
}

#[test]
fn flush_removes_what_ip_route_flush_removes_of_mproutes_routes() {
    let ns = lab("hab-flush");
    // a route of ip's own, which neither flush below may touch
    ns.ip_ok("route add 198.18.1.0/24 via 192.0.2.2 dev va");
    let fresh = |ns: &Netns| {
        MP.ok(ns, "flush");
        for r in OWNED {
            MP.ok(ns, &format!("add {r}")[..]);
        }
    };
    let mut removed_any = 0;
    for f in [
        "root 198.18.0.0/15",
        "match 198.18.2.5",
        "exact 198.18.2.0/24",
        "198.18.0.0/16",
        "dev va",
        "via 192.0.2.3",
        "metric 7",
        "root 2001:db8::/32",
        "via inet6 2001:db8:1::3",
    ] {
        for fam in ["-4", "-6"] {
            if !ns
                .ip(&format!("{fam} route show table main {f}")[..])
                .status
                .success()
            {
                continue;
            }
            fresh(&ns);
            let before = main_routes(&ns, fam);
            MP.ok(&ns, &format!("{fam} flush table main {f}")[..]);
            let ours = main_routes(&ns, fam);
            fresh(&ns);
            assert_eq!(main_routes(&ns, fam), before);
            ns.ip_ok(&format!("{fam} route flush table main {f} proto mproute")[..]);
            let ip = main_routes(&ns, fam);
            assert_eq!(
                ours, ip,
                "mproute {fam} flush {f} is not ip {fam} route flush {f} proto mproute"
            );
            if ours != before {
                removed_any += 1;
            }
            assert!(ours.contains(&("198.18.1.0".parse().expect("addr"), 24)) || fam == "-6");
        }
    }
    assert!(removed_any >= 8, "{removed_any}");
    // the dry run names the same routes
    fresh(&ns);
    let plan = MP.json(&ns, "--check -4 flush root 198.18.2.0/23");
    assert_eq!(plan["changed"], true, "{plan}");
    let before = main_routes(&ns, "-4");
    MP.ok(&ns, "-4 flush root 198.18.2.0/23");
    let after = main_routes(&ns, "-4");
    assert_eq!(before.len() - after.len(), 2, "{before:?} {after:?}");
}

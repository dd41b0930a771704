//! mproute's JSON against iproute2's for the same objects, in throwaway namespaces: every key
//! `ip -j route show` prints for a route has the same value in `mproute -j show`'s object for
//! it (mproute's own keys beside them), with and without `-d`; the note a write prints when no
//! dataplane enforces the algorithm; and `get` against the kernel's own `ip route get`.

use mpt_testkit::{require_root, Tool, TwoPaths};
use serde_json::Value;

const MPROUTE: &str = env!("CARGO_BIN_EXE_mproute");
const MP: Tool = Tool::new(MPROUTE);

/// The routes of one family, without the IPv6 link-local and multicast entries the kernel adds
/// whenever autoconfiguration gets to it (they could appear between the two dumps).
fn settled(v: &Value, family: Option<&str>) -> Vec<Value> {
    v.as_array()
        .expect("a JSON array of routes")
        .iter()
        .filter(|r| family.is_none_or(|f| r["family"] == f))
        .filter(|r| {
            let d = r["dst"].as_str().unwrap_or("");
            !(d.starts_with("fe80") || d.starts_with("ff00"))
        })
        .cloned()
        .collect()
}

/// Compare key by key: each of ip's keys must be in ours with the same value.
fn same_keys(ip: &[Value], ours: &[Value], what: &str) {
    assert_eq!(
        ip.len(),
        ours.len(),
        "{what}: ip lists {} routes, mproute {}:\nip: {ip:?}\nmproute: {ours:?}",
        ip.len(),
        ours.len()
    );
    for (i, o) in ip.iter().zip(ours) {
        let obj = i.as_object().expect("ip's route is an object");
        for (k, v) in obj {
            assert_eq!(
                o.get(k),
                Some(v),
                "{what}: key {k:?} of {}: ip {i}\nmproute {o}",
                i["dst"]
            );
        }
    }
}

fn install(t: &TwoPaths) {
    for r in [
        "add 203.0.113.0/24 via 10.1.0.2 dev va metric 5",
        "add default via 10.2.0.2 dev vb metric 100",
        "add 203.0.113.128/25 table 100 nexthop via 10.1.0.2 dev va weight 2 nexthop via 10.2.0.2 dev vb",
        "add 198.18.5.0/24 via 198.18.9.9 dev va onlink proto bgp",
        "add 198.18.6.0/24 table default algo l4-hash nexthop via 10.1.0.2 dev va nexthop via 10.2.0.2 dev vb",
        "add 2001:db8:9::/48 nexthop via 2001:db8:1::2 dev va nexthop via 2001:db8:2::2 dev vb weight 3",
        "add 2001:db8:8::/48 via 2001:db8:1::2 dev va table 100 metric 7",
        "add 2001:db8:7::/48 via 2001:db8:2::2 dev vb table local",
    ] {
        MP.ok(&t.r, r);
    }
    // what mproute does not write, shown all the same: a preferred source, a gateway of the
    // other family, a blackhole
    t.r.ip_ok("route add 198.18.7.0/24 via 10.1.0.2 src 10.1.0.1 table 100");
    t.r.ip_ok("route add 198.18.8.0/24 via inet6 2001:db8:1::2 dev va");
    t.r.ip_ok("route add blackhole 198.18.10.0/24");
}

#[test]
fn show_json_has_ip_route_keys_and_values() {
    require_root();
    let t = TwoPaths::new("jip");
    install(&t);
    for (fam, family) in [("-4", "inet"), ("-6", "inet6")] {
        for d in ["", "-d "] {
            let ip = t.r.ip_json(&format!("{d}{fam} route show table all"));
            let ours = MP.json(&t.r, &format!("{d}show table all"));
            same_keys(
                &settled(&ip, None),
                &settled(&ours, Some(family)),
                &format!("ip {d}{fam} route show table all"),
            );
        }
    }
    // The comparison saw what it is about: these keys in these routes.
    let ours = MP.json(&t.r, "show table all");
    let find = |dst: &str| {
        settled(&ours, None)
            .into_iter()
            .find(|r| r["dst"] == dst)
            .unwrap_or_else(|| panic!("{dst} not shown: {ours}"))
    };
    let r = find("203.0.113.0/24");
    assert_eq!(
        (&r["gateway"], &r["dev"]),
        (&"10.1.0.2".into(), &"va".into()),
        "{r}"
    );
    assert_eq!(r.get("table"), None, "main is not named, as ip: {r}");
    assert_eq!(
        (&r["table_id"], &r["managed"]),
        (&254.into(), &true.into()),
        "{r}"
    );
    let r = find("203.0.113.128/25");
    assert_eq!(r["table"], "100", "{r}");
    assert_eq!(r.get("gateway"), None, "{r}");
    assert_eq!(r["nexthops"][0]["weight"], 2, "{r}");
    assert_eq!(find("198.18.6.0/24")["table"], "default");
    assert_eq!(
        find("198.18.5.0/24")["flags"],
        serde_json::json!(["onlink"])
    );
    assert_eq!(find("198.18.5.0/24")["protocol"], "bgp");
    assert_eq!(find("198.18.7.0/24")["prefsrc"], "10.1.0.1");
    assert_eq!(find("198.18.8.0/24")["via"]["family"], "inet6");
    assert_eq!(find("2001:db8:9::/48")["pref"], "medium");
    assert_eq!(find("2001:db8:7::/48")["table"], "local");
    assert_eq!(find("default")["metric"], 100);
    // -d names main as ip -d does
    let d = MP.json(&t.r, "-d show 203.0.113.0/24");
    assert_eq!(d[0]["table"], "main", "{d}");

    // The text output keeps its columns.
    let text = MP.ok(&t.r, "show table all");
    let line = text
        .lines()
        .find(|l| l.starts_with("203.0.113.128/25"))
        .unwrap_or_else(|| panic!("no line for the route: {text}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        words,
        [
            "203.0.113.128/25",
            "100",
            "0",
            "mproute",
            "l3-hash",
            "none",
            "via",
            "10.1.0.2",
            "dev",
            "va",
            "weight",
            "2"
        ],
        "{text}"
    );
    let line = text
        .lines()
        .find(|l| l.starts_with("198.18.8.0/24"))
        .unwrap_or_else(|| panic!("no line for the route: {text}"));
    assert!(line.contains("via 2001:db8:1::2 dev va"), "{line}");
}

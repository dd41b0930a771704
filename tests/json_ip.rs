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

/// A multipath write without a dataplane says, once, that the algorithm is not enforced (on
/// standard error, and in the JSON report's `notes`); a single path, or an attached
/// dataplane, says nothing.
#[test]
fn a_write_without_a_dataplane_says_the_algorithm_is_not_enforced() {
    require_root();
    let t = TwoPaths::new("jnote");
    let o = MP.at(
        &t.r,
        "add 203.0.113.0/24 algo l4-hash nexthop via 10.1.0.2 dev va nexthop via 10.2.0.2 dev vb",
    );
    assert!(o.status.success(), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.starts_with("mproute: note: ") && err.contains("mproute dataplane attach dev DEV"),
        "{err}"
    );
    let v = MP.json(
        &t.r,
        "replace 203.0.113.0/24 algo l3-hash nexthop via 10.1.0.2 dev va nexthop via 10.2.0.2 dev vb",
    );
    let notes = v["notes"].as_array().expect("notes in the JSON report");
    assert!(
        notes[0]
            .as_str()
            .is_some_and(|n| n.contains("not enforced")),
        "{v}"
    );
    // one path leaves the algorithm nothing to choose
    let o = MP.at(&t.r, "-j add 198.18.1.0/24 via 10.1.0.2 dev va");
    assert!(o.status.success() && o.stderr.is_empty(), "{o:?}");
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains("notes"),
        "{o:?}"
    );
    // a batch says it once, after its lines
    let f = mpt_testkit::BatchFile::new(
        "jnote",
        "add 198.18.2.0/24 nexthop via 10.1.0.2 dev va nexthop via 10.2.0.2 dev vb\n\
         add 198.18.3.0/24 nexthop via 10.1.0.2 dev va nexthop via 10.2.0.2 dev vb\n",
    );
    let o = MP.at(&t.r, &format!("-b {}", f.path()));
    assert!(o.status.success(), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("not enforced").count(), 1, "once: {err}");
    // attached: nothing to say
    MP.ok(&t.r, "dataplane attach dev va dev vb");
    // its counters: an object of name -> packets, the shape of the three tools
    let c = MP.json(&t.r, "dataplane show")["counters"].clone();
    assert!(c["redirected"].is_u64(), "{c}");
    assert!(
        c.as_object()
            .is_some_and(|o| o.len() > 1 && o.values().all(serde_json::Value::is_u64)),
        "{c}"
    );
    let o = MP.at(
        &t.r,
        "-j replace 203.0.113.0/24 nexthop via 10.1.0.2 dev va nexthop via 10.2.0.2 dev vb weight 2",
    );
    assert!(o.status.success(), "{o:?}");
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("note"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains("notes"),
        "{o:?}"
    );
}

/// `get` compares its answer with the kernel's own lookup (`ip route get`, the oracle) for the
/// same flow: `kernel` has ip's gateway and dev, `same` says whether they are the dataplane's
/// nexthop, and a note says so where they are not.
#[test]
fn get_says_where_the_kernel_picks_another_nexthop() {
    require_root();
    let t = TwoPaths::new("jget");
    for r in [
        "add 203.0.113.0/24 nexthop via 10.1.0.2 dev va nexthop via 10.2.0.2 dev vb",
        "add 2001:db8:9::/48 nexthop via 2001:db8:1::2 dev va nexthop via 2001:db8:2::2 dev vb",
    ] {
        MP.ok(&t.r, r);
    }
    let (mut same, mut differ) = (0, 0);
    for i in 1..=24 {
        for addr in [format!("203.0.113.{i}"), format!("2001:db8:9::{i:x}")] {
            let ours = &MP.json(&t.r, &format!("get {addr}"))[0];
            let ip = &t.r.ip_json(&format!("route get {addr}"))[0];
            let k = &ours["kernel"];
            assert_eq!(
                (&k["gateway"], &k["dev"]),
                (&ip["gateway"], &ip["dev"]),
                "{addr}: ours {ours}\nip {ip}"
            );
            let agrees =
                ours["nexthop"]["gateway"] == ip["gateway"] && ours["nexthop"]["dev"] == ip["dev"];
            assert_eq!(k["same"], agrees, "{addr}: {ours}");
            let noted = ours["notes"].as_array().is_some_and(|n| {
                n.iter()
                    .any(|n| n.as_str().is_some_and(|n| n.contains("ip route get")))
            });
            assert_eq!(
                noted, !agrees,
                "{addr}: a note exactly where they differ: {ours}"
            );
            if agrees {
                same += 1;
            } else {
                differ += 1;
            }
        }
    }
    // two hash functions over 48 flows: both cases are seen (each half the time)
    assert!(same > 0 && differ > 0, "same {same}, differ {differ}");
    // the text output says it too
    let text = MP.ok(&t.r, "get 203.0.113.1");
    let ip = &t.r.ip_json("route get 203.0.113.1")[0];
    let ours = &MP.json(&t.r, "get 203.0.113.1")[0];
    assert_eq!(
        text.contains("note: "),
        ours["kernel"]["same"] == false,
        "{text}\n{ip}"
    );
}

//! Root integration tests of the mproute control plane, each in its own throwaway namespaces,
//! with `ip -j` as the independent oracle.

use mpt_testkit::{require_root, BatchFile, Netns, Tool, TwoPaths, Words};
use serde_json::Value;

const MPROUTE: &str = env!("CARGO_BIN_EXE_mproute");
/// mproute, run as an operator would (`-n NS`), its JSON decoded.
const MP: Tool = Tool::new(MPROUTE);

/// What `sync` did to this namespace's routes. Removing the pinned state of dead namespaces is
/// left out: the host's bpffs is shared with every other test running at the same time.
fn sync_changes(ns: &Netns) -> Vec<Value> {
    MP.json(ns, "sync")["actions"]
        .as_array()
        .expect("actions")
        .iter()
        .filter(|a| a["action"] != "removed-stale-state")
        .cloned()
        .collect()
}

/// Our JSON row for one prefix.
fn row(ns: &Netns, dst: &str, table: &str) -> Option<Value> {
    let v = MP.json(ns, &format!("show {dst} table {table}"));
    v.as_array().and_then(|a| a.first().cloned())
}

/// (gateway, dev, weight) of each nexthop, from either tool's JSON.
fn paths(v: &Value) -> Vec<(String, String, u64)> {
    let nhs = match v.get("nexthops").and_then(Value::as_array) {
        Some(a) if !a.is_empty() => a.clone(),
        _ => vec![v.clone()],
    };
    nhs.iter()
        .map(|n| {
            (
                n["gateway"].as_str().unwrap_or("").to_string(),
                n["dev"].as_str().unwrap_or("").to_string(),
                n["weight"].as_u64().unwrap_or(1),
            )
        })
        .collect()
}

fn ip_route(ns: &Netns, fam: &str, dst: &str, table: &str) -> Option<Value> {
    let v = ns.ip_json(&format!("{fam} route show table {table} exact {dst}"));
    v.as_array().and_then(|a| a.first().cloned())
}

/// Drop the IPv6 link-local and multicast entries: the kernel adds them by itself, whenever
/// address autoconfiguration gets to it, so they can appear in the middle of a test.
fn settled(v: Value) -> Value {
    match v {
        Value::Array(a) => Value::Array(
            a.into_iter()
                .filter(|r| {
                    let d = r["dst"].as_str().unwrap_or("");
                    !(d.starts_with("fe80") || d.starts_with("ff00"))
                })
                .collect(),
        ),
        other => other,
    }
}

/// Everything that must not change when a command is refused.
fn snapshot(ns: &Netns) -> (Value, Value, Value, Value) {
    (
        ns.ip_json("-4 route show table all"),
        settled(ns.ip_json("-6 route show table all")),
        ns.ip_json("nexthop show"),
        settled(MP.json(ns, "show table all")),
    )
}

#[test]
fn v4_route_agrees_with_ip_route_in_both_directions() {
    require_root();
    let t = TwoPaths::new("v4");
    let out = MP.json(
        &t.r,
        "add 198.51.100.0/24 table 100 metric 7 algo l4-hash nexthop via 10.1.0.2 dev va weight 3 nexthop via 10.2.0.2 dev vb",
    );
    assert_eq!(out["changed"], true);
    let ip = ip_route(&t.r, "-4", "198.51.100.0/24", "100").expect("ip sees the route");
    assert_eq!(ip["metric"], 7);
    assert_eq!(
        ip["protocol"], "mproute",
        "protocol is registered by name: {ip}"
    );
    assert_eq!(
        paths(&ip),
        vec![
            ("10.1.0.2".into(), "va".into(), 3),
            ("10.2.0.2".into(), "vb".into(), 1)
        ]
    );
    let ours = row(&t.r, "198.51.100.0/24", "100").expect("mproute shows it");
    assert_eq!(ours["table"], "100", "named as ip names it: {ours}");
    assert_eq!(ours["table_id"], 100);
    assert_eq!(ours["metric"], 7);
    assert_eq!(ours["algo"], "l4-hash");
    assert_eq!(ours["enforced_by"], "none");
    assert_eq!(ours["managed"], true);
    assert_eq!(paths(&ours), paths(&ip));

    // A route added with ip route: mproute shows it as ip does, unmanaged.
    t.r.ip_ok("route add 203.0.113.0/24 nexthop via 10.1.0.2 dev va weight 5 nexthop via 10.2.0.2 dev vb weight 2");
    let ours = row(&t.r, "203.0.113.0/24", "main").expect("mproute shows ip's route");
    let ip = ip_route(&t.r, "-4", "203.0.113.0/24", "main").expect("ip route");
    assert_eq!(paths(&ours), paths(&ip));
    assert_eq!(ours["managed"], false);
    assert_eq!(ours["algo"], Value::Null);
}

#[test]
fn v6_route_and_ip_netns_exec_see_the_same_state() {
    require_root();
    let t = TwoPaths::new("v6");
    // Added under ip netns exec (private mount namespace, no host bpffs) ...
    let o = t.r.exec(
        MPROUTE,
        "add 2001:db8:100::/48 algo drr nexthop via 2001:db8:1::2 dev va nexthop via 2001:db8:2::2 dev vb weight 4",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // ... seen with -n, and the other way round.
    let ours = row(&t.r, "2001:db8:100::/48", "main").expect("row");
    assert_eq!(ours["algo"], "drr");
    assert_eq!(ours["metric"], 1024);
    let ip = ip_route(&t.r, "-6", "2001:db8:100::/48", "main").expect("ip -6 route");
    assert_eq!(paths(&ours), paths(&ip));
    assert_eq!(paths(&ip)[1], ("2001:db8:2::2".into(), "vb".into(), 4));
    MP.ok(
        &t.r,
        "replace 2001:db8:100::/48 algo random nexthop via 2001:db8:1::2 dev va nexthop via 2001:db8:2::2 dev vb weight 4",
    );
    let o = t.r.exec(MPROUTE, "-j show 2001:db8:100::/48");
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v[0]["algo"], "random");
}

#[test]
fn replace_is_idempotent_and_says_so() {
    require_root();
    let t = TwoPaths::new("idem");
    let args = [
        "replace",
        "192.0.2.0/24",
        "algo",
        "per-packet",
        "nexthop",
        "via",
        "10.1.0.2",
        "dev",
        "va",
        "nexthop",
        "via",
        "10.2.0.2",
        "dev",
        "vb",
        "weight",
        "2",
    ];
    assert_eq!(MP.json(&t.r, &args)["changed"], true);
    let before = snapshot(&t.r);
    assert_eq!(MP.json(&t.r, &args)["changed"], false);
    assert_eq!(snapshot(&t.r), before);
    let mut other = args.to_vec();
    other[3] = "wrandom";
    assert_eq!(MP.json(&t.r, &other)["changed"], true);
    assert_eq!(
        row(&t.r, "192.0.2.0/24", "main").expect("row")["algo"],
        "wrandom"
    );
}

#[test]
fn bad_input_fails_cleanly_and_changes_nothing() {
    require_root();
    let t = TwoPaths::new("bad");
    MP.ok(
        &t.r,
        "add 198.51.100.0/24 algo drr nexthop via 10.1.0.2 dev va",
    );
    let cases: &[(&str, i32, &str)] = &[
        ("add 10.0.0.0/33 nexthop via 10.1.0.2", 1, "invalid prefix"),
        ("add 10.0.0.1/8 nexthop via 10.1.0.2", 1, "host bits"),
        (
            "add 10.0.0.0/8 algo fastest nexthop via 10.1.0.2",
            1,
            "unknown algorithm",
        ),
        (
            "add 10.0.0.0/8 nexthop via 10.1.0.2 weight 0",
            1,
            "weight 0",
        ),
        (
            "add 10.0.0.0/8 nexthop via 10.1.0.2 weight 257",
            1,
            "weight 257",
        ),
        ("add 10.0.0.0/8 nexthop via 2001:db8:1::2", 1, "family"),
        ("add 10.0.0.0/8 algo l4-hash", 1, "no nexthop"),
        ("add 10.0.0.0/8 via 10.1.0.2 weight 2", 1, "nexthop"),
        (
            "add 10.0.0.0/8 nexthop via 10.1.0.2 dev nosuch0",
            2,
            "cannot find device \"nosuch0\"",
        ),
        (
            "add 10.0.0.0/8 nexthop via 10.99.0.1 dev va",
            2,
            "Nexthop has invalid gateway",
        ),
        // Exists already: the kernel refuses, and the algorithm in our state stays drr.
        (
            "add 198.51.100.0/24 algo l4-hash nexthop via 10.1.0.2 dev va",
            2,
            "EEXIST",
        ),
        (
            "change 192.0.2.0/24 algo l4-hash nexthop via 10.1.0.2 dev va",
            2,
            "ENOENT",
        ),
    ];
    for (args, code, needle) in cases {
        let before = snapshot(&t.r);
        let o = MP.at(&t.r, args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(*code), "mproute {args}: {err}");
        assert!(
            err.starts_with("mproute: "),
            "one-line error with the tool's name: {err}"
        );
        assert!(
            err.contains(needle),
            "mproute {args}: expected {needle:?} in {err:?}"
        );
        assert!(o.stdout.is_empty());
        assert_eq!(snapshot(&t.r), before, "mproute {args} changed something");
    }
    assert_eq!(
        row(&t.r, "198.51.100.0/24", "main").expect("row")["algo"],
        "drr"
    );
}

#[test]
fn flush_removes_only_our_routes_and_sync_repairs_drift() {
    require_root();
    let t = TwoPaths::new("flush");
    t.r.ip_ok("route add 203.0.113.0/24 via 10.1.0.2 dev va");
    t.r.ip_ok("route add 203.0.113.128/25 via 10.1.0.2 dev va table 100");
    MP.ok(
        &t.r,
        "add 198.51.100.0/24 nexthop via 10.1.0.2 dev va nexthop via 10.2.0.2 dev vb",
    );
    MP.ok(
        &t.r,
        "add 192.0.2.0/24 table 100 proto static algo drr nexthop via 10.1.0.2 dev va",
    );
    MP.ok(
        &t.r,
        "add 2001:db8:100::/48 nexthop via 2001:db8:1::2 dev va",
    );

    // Not ours: del refuses.
    let o = MP.at(&t.r, "del 203.0.113.0/24");
    assert_eq!(o.status.code(), Some(2));
    assert!(ip_route(&t.r, "-4", "203.0.113.0/24", "main").is_some());

    // Drift: a managed route deleted behind our back.
    t.r.ip_ok("route del 198.51.100.0/24");
    let s = MP.json(&t.r, "sync");
    assert_eq!(s["changed"], true, "{s}");
    assert!(s["actions"]
        .as_array()
        .expect("actions")
        .iter()
        .any(|a| a["action"] == "forgotten" && a["dst"] == "198.51.100.0/24"));
    assert_eq!(sync_changes(&t.r), Vec::<Value>::new());

    // Flush one table: only our route in it goes (proto static, known from our state).
    let f = MP.json(&t.r, "flush table 100");
    assert_eq!(f["changed"], true);
    assert!(ip_route(&t.r, "-4", "192.0.2.0/24", "100").is_none());
    assert!(ip_route(&t.r, "-4", "203.0.113.128/25", "100").is_some());
    assert!(ip_route(&t.r, "-6", "2001:db8:100::/48", "main").is_some());
    // Flush everything: ip's routes stay.
    MP.ok(&t.r, "flush");
    assert!(ip_route(&t.r, "-6", "2001:db8:100::/48", "main").is_none());
    assert!(ip_route(&t.r, "-4", "203.0.113.0/24", "main").is_some());
    let managed: Vec<Value> = MP
        .json(&t.r, "show table all")
        .as_array()
        .expect("rows")
        .iter()
        .filter(|r| r["managed"] == true)
        .cloned()
        .collect();
    assert!(managed.is_empty(), "{managed:?}");
}

/// A managed route replaced with ip route under another protocol, same paths, is its new
/// owner's: del refuses it, flush leaves it, sync forgets it (mproute records the protocol it
/// installed a route with).
#[test]
fn a_route_taken_over_by_another_protocol_is_not_ours_any_more() {
    require_root();
    let t = TwoPaths::new("owner");
    let add = |proto: &str| {
        MP.ok(
            &t.r,
            &format!("add 198.51.100.0/24 proto {proto} nexthop via 10.1.0.2 dev va nexthop via 10.2.0.2 dev vb"),
        );
    };
    add("static");
    let take_over = || {
        t.r.ip_ok("route replace 198.51.100.0/24 proto bird nexthop via 10.1.0.2 dev va nexthop via 10.2.0.2 dev vb");
    };
    take_over();
    let o = MP.at(&t.r, "del 198.51.100.0/24");
    assert_eq!(o.status.code(), Some(2), "del of bird's route");
    MP.ok(&t.r, "flush");
    assert!(
        ip_route(&t.r, "-4", "198.51.100.0/24", "main").is_some(),
        "flush removed bird's route"
    );
    let s = sync_changes(&t.r);
    assert!(
        s.iter().any(|a| a["action"] == "forgotten"
            && a["dst"] == "198.51.100.0/24"
            && a["reason"]
                .as_str()
                .is_some_and(|r| r.contains("protocol bird"))),
        "{s:?}"
    );
    assert_eq!(
        row(&t.r, "198.51.100.0/24", "main").map(|r| r["managed"].clone()),
        Some(Value::Bool(false))
    );
    // with the protocol it was installed with, it stays ours
    t.r.ip_ok("route del 198.51.100.0/24");
    add("static");
    assert_eq!(sync_changes(&t.r), Vec::<Value>::new());
    MP.ok(&t.r, "del 198.51.100.0/24");
}

#[test]
fn two_namespaces_never_mix_state() {
    require_root();
    let one = TwoPaths::new("mixa");
    let two = TwoPaths::new("mixb");
    MP.ok(
        &one.r,
        "add 198.51.100.0/24 algo drr nexthop via 10.1.0.2 dev va",
    );
    MP.ok(
        &two.r,
        "add 198.51.100.0/24 algo random nexthop via 10.2.0.2 dev vb",
    );
    assert_eq!(
        row(&one.r, "198.51.100.0/24", "main").expect("one")["algo"],
        "drr"
    );
    assert_eq!(
        row(&two.r, "198.51.100.0/24", "main").expect("two")["algo"],
        "random"
    );
    MP.ok(&one.r, "flush");
    assert_eq!(
        row(&two.r, "198.51.100.0/24", "main").expect("two")["algo"],
        "random"
    );
}

#[test]
fn batch_stops_at_first_failure_unless_forced() {
    require_root();
    let t = TwoPaths::new("batch");
    let dir = std::env::temp_dir().join(format!("mpt-batch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let file = dir.join("routes.batch");
    std::fs::write(
        &file,
        "# three routes, the second one is refused by the kernel\n\
         add 198.51.100.0/24 algo l4-hash nexthop via 10.1.0.2 dev va \\\n  nexthop via 10.2.0.2 dev vb\n\
         add 192.0.2.0/24 nexthop via 10.99.0.1 dev va\n\
         route add 203.0.113.0/24 nexthop via 10.2.0.2 dev \"vb\"\n",
    )
    .expect("write batch");
    let f = file.to_str().expect("utf-8 path");
    let o = MP.at(&t.r, &format!("-b {f}"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("{f}:4:")), "names FILE:LINE: {err}");
    assert!(ip_route(&t.r, "-4", "198.51.100.0/24", "main").is_some());
    assert!(
        ip_route(&t.r, "-4", "203.0.113.0/24", "main").is_none(),
        "stopped at the failure"
    );

    MP.ok(&t.r, "flush");
    let o = MP.at(&t.r, &format!("-b {f} --force"));
    assert_eq!(o.status.code(), Some(2));
    assert!(
        ip_route(&t.r, "-4", "203.0.113.0/24", "main").is_some(),
        "--force goes on"
    );
    assert_eq!(
        row(&t.r, "198.51.100.0/24", "main").expect("row")["algo"],
        "l4-hash"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn usage_errors_exit_1_and_help_needs_no_root_or_socket() {
    let o = mpt_testkit::run(MPROUTE, &["--help"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("nexthop"));
    let o = mpt_testkit::run(MPROUTE, &["frobnicate"]);
    assert_eq!(o.status.code(), Some(1));
    let o = mpt_testkit::run(MPROUTE, &["-n", "mpt-t-does-not-exist", "show"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("does not exist"));
}

#[test]
fn no_namespace_leaks() {
    require_root();
    {
        let _a = Netns::new("leak");
        let r = std::panic::catch_unwind(|| {
            let _b = Netns::new("leakpanic");
            panic!("a failing test still removes its namespace");
        });
        assert!(r.is_err());
    }
    let leaked = mpt_testkit::leaked();
    assert!(
        leaked.is_empty(),
        "namespaces left behind by dead test processes: {leaked:?}"
    );
    let ours: Vec<String> = mpt_testkit::run_ok("ip", &["netns", "list"])
        .lines()
        .filter(|l| l.contains("leak"))
        .filter(|l| l.contains(&format!("-{}-", std::process::id())))
        .map(String::from)
        .collect();
    assert!(ours.is_empty(), "{ours:?}");
}

#[test]
fn pipelined_batch_rolls_back_lines_after_a_refused_one() {
    require_root();
    let t = TwoPaths::new("roll");
    let nh = "nexthop via 10.1.0.2 dev va nexthop via 10.2.0.2 dev vb weight 2";
    // Line 3 is refused by the kernel (the route exists) while lines 4..=40 are already in
    // flight in the same pipelined window.
    let mut text = format!("add 198.51.100.0/24 algo drr {nh}\nadd 198.51.101.0/24 {nh}\nadd 198.51.100.0/24 algo random {nh}\n");
    for i in 0..37 {
        text.push_str(&format!("add 10.{i}.0.0/16 algo l4-hash {nh}\n"));
    }
    let file = BatchFile::new("roll", &text);
    let f = file.path();
    let o = MP.at(&t.r, &format!("-b {f}"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("{f}:3:")) && err.contains("EEXIST"),
        "{err}"
    );
    assert!(ip_route(&t.r, "-4", "198.51.101.0/24", "main").is_some());
    assert!(
        ip_route(&t.r, "-4", "10.0.0.0/16", "main").is_none(),
        "line 4 was rolled back"
    );
    assert!(
        ip_route(&t.r, "-4", "10.36.0.0/16", "main").is_none(),
        "line 40 was rolled back"
    );
    let rows = MP.json(&t.r, "show");
    let managed: Vec<&Value> = rows
        .as_array()
        .expect("rows")
        .iter()
        .filter(|r| r["managed"] == true)
        .collect();
    assert_eq!(
        managed.len(),
        2,
        "state holds exactly the two routes in the FIB: {managed:?}"
    );
    assert_eq!(
        row(&t.r, "198.51.100.0/24", "main").expect("row")["algo"],
        "drr",
        "refused line left the algorithm alone"
    );

    // With --force every line is tried: 39 of 40 land. With --nexthop-objects they share one
    // kernel nexthop group.
    MP.ok(&t.r, "flush");
    let o = MP.at(&t.r, &format!("--nexthop-objects -b {f} --force"));
    assert_eq!(o.status.code(), Some(2));
    assert!(ip_route(&t.r, "-4", "10.36.0.0/16", "main").is_some());
    // the state and the dataplane entries agree (the state's writes are held back and the
    // group is learnt after them): sync would repair nothing
    let v = MP.json(&t.r, "--check sync");
    assert_eq!(v["actions"].as_array().map(Vec::len), Some(0), "{v}");
    let objs = t.r.ip_json("nexthop show");
    assert_eq!(
        objs.as_array().map(Vec::len),
        Some(3),
        "two nexthops and one group: {objs}"
    );
    // Flushing leaves no object behind.
    let ip = ip_route(&t.r, "-4", "10.36.0.0/16", "main").expect("route");
    assert_eq!(
        paths(&ip),
        vec![
            ("10.1.0.2".into(), "va".into(), 1),
            ("10.2.0.2".into(), "vb".into(), 2)
        ]
    );
    MP.ok(&t.r, "flush");
    let objs = t.r.ip_json("nexthop show");
    assert_eq!(
        objs.as_array().map(Vec::len),
        Some(0),
        "nexthop objects collected: {objs}"
    );
}

/// A batch longer than a pipelined window: up to two windows are with the kernel while the next
/// is planned (its state and maps written), so a refused line must undo what came after it
/// (the planned window, and the newer window in flight, whose routes the kernel took) and,
/// with --force, plan those lines again: the result is what running the lines one by one
/// gives. Lines 100 (window 1), 300 (window 2, sent before window 1 is answered) and 900
/// (window 4) add a prefix ip route already holds.
#[test]
fn batch_across_windows_ends_as_line_by_line() {
    require_root();
    let t = TwoPaths::new("winx");
    t.r.ip_ok("route add 192.0.2.0/24 via 10.1.0.2 dev va");
    let nh = "nexthop via 10.1.0.2 dev va nexthop via 10.2.0.2 dev vb";
    let mut text = String::new();
    for i in 1..=1100u32 {
        match i {
            100 => text.push_str(&format!("add 192.0.2.0/24 algo drr {nh}\n")),
            300 => text.push_str(&format!("add 192.0.2.0/24 algo random {nh}\n")),
            900 => text.push_str(&format!("add 192.0.2.0/24 algo drr {nh}\n")),
            _ => text.push_str(&format!(
                "add 198.{}.{}.{}/26 algo l4-hash {nh}\n",
                18 + i / 1024,
                i / 4 % 256,
                i % 4 * 64
            )),
        }
    }
    let file = BatchFile::new("winx", &text);
    let f = file.path();
    let ours = |t: &TwoPaths| {
        t.r.ip_json("-4 route show proto 245")
            .as_array()
            .map_or(0, Vec::len)
    };
    let managed = |t: &TwoPaths| {
        MP.json(&t.r, "show")
            .as_array()
            .expect("rows")
            .iter()
            .filter(|r| r["managed"] == true)
            .count()
    };
    let in_sync = |t: &TwoPaths, what: &str| {
        let v = MP.json(&t.r, "--check sync");
        assert_eq!(
            v["actions"].as_array().map(Vec::len),
            Some(0),
            "{what}: {v}"
        );
        let r = row(&t.r, "192.0.2.0/24", "main").expect("row");
        assert_eq!(
            r["managed"], false,
            "{what}: ip's route is not claimed: {r}"
        );
    };
    for objects in [false, true] {
        let mut args = vec!["-b", f];
        if objects {
            args.insert(0, "--nexthop-objects");
        }
        let o = MP.at(&t.r, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains(&format!("{f}:100:")) && err.contains("EEXIST"),
            "{err}"
        );
        assert!(
            !err.contains(&format!("{f}:300:")),
            "the batch stopped at line 100: {err}"
        );
        assert_eq!(
            ours(&t),
            99,
            "lines 1-99 stand, the rest rolled back or never sent"
        );
        assert_eq!(managed(&t), 99);
        in_sync(&t, "stopped");
        MP.ok(&t.r, "flush");

        args.push("--force");
        let o = MP.at(&t.r, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            [100, 300, 900]
                .iter()
                .all(|l| err.contains(&format!("{f}:{l}:"))),
            "{err}"
        );
        assert_eq!(
            err.lines().count(),
            3,
            "three refused lines, nothing else: {err}"
        );
        assert_eq!(ours(&t), 1097, "every other line stands");
        assert_eq!(managed(&t), 1097);
        in_sync(&t, "forced");
        MP.ok(&t.r, "flush");
        assert_eq!(ours(&t), 0);
    }
    let objs = t.r.ip_json("nexthop show");
    assert_eq!(
        objs.as_array().map(Vec::len),
        Some(0),
        "nexthop objects collected: {objs}"
    );
}

#[test]
fn routes_keep_their_nexthops_across_a_link_flap() {
    require_root();
    let t = TwoPaths::new("flap");
    MP.ok(
        &t.r,
        "add 198.51.100.0/24 nexthop via 10.1.0.2 dev va nexthop via 10.2.0.2 dev vb",
    );
    t.r.ip_ok("link set va down");
    t.r.ip_ok("link set va up");
    t.r.ip_ok("addr replace 10.1.0.1/24 dev va");
    let ip = ip_route(&t.r, "-4", "198.51.100.0/24", "main").expect("route survives");
    assert_eq!(
        paths(&ip).len(),
        2,
        "both paths are back after the flap: {ip}"
    );
}

#[test]
fn refused_batch_never_claims_a_route_added_with_ip_route() {
    require_root();
    let t = TwoPaths::new("claim");
    t.r.ip_ok("route add 192.0.2.0/24 via 10.1.0.2 dev va");
    let file = BatchFile::new(
        "claim",
        "add 192.0.2.0/24 algo drr nexthop via 10.1.0.2 dev va\nadd 192.0.2.0/24 algo random nexthop via 10.2.0.2 dev vb\n",
    );
    let f = file.path();
    for extra in [&[][..], &["--force"][..]] {
        let mut args = vec!["-b", f];
        args.extend_from_slice(extra);
        let o = MP.at(&t.r, &args);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let r = row(&t.r, "192.0.2.0/24", "main").expect("row");
        assert_eq!(r["managed"], false, "{extra:?}: {r}");
        assert_eq!(r["algo"], Value::Null);
    }
    MP.ok(&t.r, "flush");
    assert!(
        ip_route(&t.r, "-4", "192.0.2.0/24", "main").is_some(),
        "flush kept ip's route"
    );
}

#[test]
fn ipv6_metric_zero_is_the_kernels_1024() {
    require_root();
    let t = TwoPaths::new("m0");
    let args = [
        "replace",
        "2001:db8:70::/48",
        "metric",
        "0",
        "algo",
        "drr",
        "via",
        "2001:db8:1::2",
        "dev",
        "va",
    ];
    assert_eq!(MP.json(&t.r, &args)["changed"], true);
    let r = row(&t.r, "2001:db8:70::/48", "main").expect("row");
    assert_eq!(
        (r["metric"].as_u64(), r["algo"].as_str()),
        (Some(1024), Some("drr"))
    );
    assert_eq!(MP.json(&t.r, &args)["changed"], false);
}

#[test]
fn route_object_word_and_ipv4_append() {
    require_root();
    let t = TwoPaths::new("obj");
    MP.ok(
        &t.r,
        "route add 198.51.100.0/24 algo drr nexthop via 10.1.0.2 dev va",
    );
    // IPv4 append adds an alternative route with the same key; it shares the algorithm.
    MP.ok(
        &t.r,
        "route append 198.51.100.0/24 nexthop via 10.2.0.2 dev vb",
    );
    let routes = t.r.ip_json("-4 route show exact 198.51.100.0/24");
    assert_eq!(routes.as_array().map(Vec::len), Some(2), "{routes}");
    // two kernel routes of one key, both mproute's: no drift (the kernel uses the first)
    assert_eq!(
        sync_changes(&t.r),
        Vec::<Value>::new(),
        "sync after an IPv4 append"
    );
    MP.ok(&t.r, "del 198.51.100.0/24");
    let r = row(&t.r, "198.51.100.0/24", "main").expect("the alternative remains");
    assert_eq!(
        r["algo"], "drr",
        "state kept while a route of the key remains: {r}"
    );
    MP.ok(&t.r, "del 198.51.100.0/24");
    assert!(row(&t.r, "198.51.100.0/24", "main").is_none());
}

#[test]
fn nested_managed_prefixes_each_reach_the_dataplane() {
    require_root();
    let t = TwoPaths::new("nest");
    MP.ok(
        &t.r,
        "add 10.0.0.0/8 algo l3-hash nexthop via 10.1.0.2 dev va",
    );
    // A longer prefix with a higher metric must still get its own dataplane entry.
    MP.ok(
        &t.r,
        "add 10.77.0.0/16 metric 5 algo l4-hash nexthop via 10.2.0.2 dev vb",
    );
    let g = MP.json(
        &t.r,
        "get 10.77.1.2 from 10.1.0.1 ipproto udp sport 1 dport 2",
    );
    assert_eq!(
        (g[0]["dst"].as_str(), g[0]["algo"].as_str()),
        (Some("10.77.0.0/16"), Some("l4-hash")),
        "{g}"
    );
    assert_eq!(g[0]["nexthop"]["gateway"], "10.2.0.2");
    let g = MP.json(&t.r, "get 10.9.9.9");
    assert_eq!(g[0]["dst"], "10.0.0.0/8", "{g}");
    MP.ok(&t.r, "del 10.77.0.0/16");
    let g = MP.json(&t.r, "get 10.77.1.2");
    assert_eq!(
        g[0]["dst"], "10.0.0.0/8",
        "after del the covering route answers: {g}"
    );
}

#[test]
fn deleting_the_preferred_route_hands_the_dataplane_to_the_next_metric() {
    require_root();
    let t = TwoPaths::new("metric");
    MP.ok(
        &t.r,
        "add 198.51.100.0/24 metric 5 algo drr nexthop via 10.1.0.2 dev va",
    );
    MP.ok(
        &t.r,
        "add 198.51.100.0/24 metric 10 algo random nexthop via 10.2.0.2 dev vb",
    );
    let g = MP.json(&t.r, "get 198.51.100.1");
    assert_eq!(
        (g[0]["metric"].as_u64(), g[0]["algo"].as_str()),
        (Some(5), Some("drr")),
        "{g}"
    );
    MP.ok(&t.r, "del 198.51.100.0/24 metric 5");
    let g = MP.json(&t.r, "get 198.51.100.1");
    assert_eq!(
        (g[0]["metric"].as_u64(), g[0]["algo"].as_str()),
        (Some(10), Some("random")),
        "{g}"
    );
    assert_eq!(sync_changes(&t.r), Vec::<Value>::new(), "nothing to repair");
}

/// The id of one state map of `ns`, as `dataplane show` reports it (maps are global: by name
/// it could be another test's namespace).
fn state_map_id(ns: &Netns, map: &str) -> String {
    let v = MP.json(ns, "dataplane show");
    v["maps"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["name"] == map)
        .and_then(|m| m["id"].as_u64())
        .unwrap_or_else(|| panic!("no {map} in dataplane show: {v}"))
        .to_string()
}

/// `bpftool` on one state map of `ns`, by id.
fn bpftool_pinned(ns: &Netns, args: &(impl Words + ?Sized), map: &str) -> Value {
    let id = state_map_id(ns, map);
    let mut a = vec!["map"];
    a.extend(args.words());
    a.extend(["id", id.as_str()]);
    mpt_testkit::bpftool_json(&a)
}

/// The counter slot of every IPv4 LPM entry, by its first address byte triple.
fn lpm4_slots(ns: &Netns) -> Vec<([u64; 3], u64)> {
    let v = bpftool_pinned(ns, "dump", "mpt_lpm4");
    let mut out: Vec<([u64; 3], u64)> = v
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| {
            let val = &e["formatted"]["value"];
            let d = &val["id"]["dst_be"];
            let b = |i: usize| d[i].as_u64().expect("byte");
            (
                [b(0), b(1), b(2)],
                val["stats_slot"].as_u64().expect("slot"),
            )
        })
        .collect();
    out.sort_unstable();
    out
}

/// Counter slots are recorded in the state; when that record is lost (a state map re-created
/// from pins), the slots the LPM entries hold are read back: no slot ever serves two routes.
/// A route deleted behind mproute's back and then deleted with mproute frees its slot too.
#[test]
fn counter_slots_are_never_shared_even_when_their_record_is_lost() {
    require_root();
    let t = TwoPaths::new("slotrec");
    let add = |p: &str| MP.ok(&t.r, &format!("add {p} nexthop via 10.1.0.2 dev va"));
    for p in ["10.9.1.0/24", "10.9.2.0/24", "10.9.3.0/24"] {
        add(p);
    }
    assert_eq!(
        lpm4_slots(&t.r),
        vec![([10, 9, 1], 1), ([10, 9, 2], 2), ([10, 9, 3], 3)]
    );
    // The record (slot 0's first copy) wiped, as in a map re-created empty.
    let zero: Vec<String> = std::iter::repeat_n("0".to_string(), 528).collect();
    let mut a = vec!["map", "update", "id"];
    let id = state_map_id(&t.r, "mpt_slot_stats");
    a.push(&id);
    a.extend(["key", "0", "0", "0", "0", "value"]);
    a.extend(zero.iter().map(String::as_str));
    let out = mpt_testkit::run("bpftool", &a);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    add("10.9.4.0/24");
    assert_eq!(
        lpm4_slots(&t.r),
        vec![
            ([10, 9, 1], 1),
            ([10, 9, 2], 2),
            ([10, 9, 3], 3),
            ([10, 9, 4], 4)
        ],
        "read back from the LPM entries"
    );
    // Deleted with ip route, then with mproute: its dataplane entry and slot go.
    t.r.ip_ok("route del 10.9.2.0/24");
    MP.ok(&t.r, "del 10.9.2.0/24");
    add("10.9.5.0/24");
    assert_eq!(
        lpm4_slots(&t.r),
        vec![
            ([10, 9, 1], 1),
            ([10, 9, 3], 3),
            ([10, 9, 4], 4),
            ([10, 9, 5], 2)
        ]
    );
    let v = MP.json(&t.r, "dataplane show");
    assert_eq!(v["counter_slots"]["used"], 4, "{v}");

    // An LPM entry lost behind mproute's back: sync writes it again (with the lowest free slot)
    // and takes back the slot the lost entry held.
    let id = state_map_id(&t.r, "mpt_lpm4");
    // struct mpt_lpm4_key: prefixlen 32 + 24 (host order), table 254 (network order), 10.9.3.0
    let key = [
        "56", "0", "0", "0", "0", "0", "0", "254", "10", "9", "3", "0",
    ];
    let mut a = vec!["map", "delete", "id", id.as_str(), "key"];
    a.extend(key);
    let out = mpt_testkit::run("bpftool", &a);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let actions: Vec<(String, String)> = sync_changes(&t.r)
        .iter()
        .map(|a| {
            (
                a["action"].as_str().unwrap_or("").to_string(),
                a["dst"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        actions,
        vec![
            ("repaired-dataplane".to_string(), "10.9.3.0/24".to_string()),
            ("reclaimed-counter-slots".to_string(), "1".to_string()),
        ]
    );
    assert_eq!(
        lpm4_slots(&t.r),
        vec![
            ([10, 9, 1], 1),
            ([10, 9, 3], 5),
            ([10, 9, 4], 4),
            ([10, 9, 5], 2)
        ]
    );
    assert_eq!(
        sync_changes(&t.r),
        Vec::<Value>::new(),
        "nothing left to repair"
    );
    let v = MP.json(&t.r, "dataplane show");
    assert_eq!(v["counter_slots"]["used"], 4, "slot 3 is free again: {v}");

    // An entry of no managed route, with a lower metric, in a managed route's place: sync
    // removes it and puts the route's own back.
    MP.ok(
        &t.r,
        "add 10.9.6.0/24 metric 50 nexthop via 10.1.0.2 dev va",
    );
    let key = [
        "56", "0", "0", "0", "0", "0", "0", "254", "10", "9", "6", "0",
    ];
    // struct mpt_dp_route: family 2, /24, table 254, metric 10, 10.9.6.0, l3-hash, group 1
    let mut value: Vec<String> = [
        "2", "24", "0", "0", "254", "0", "0", "0", "10", "0", "0", "0",
    ]
    .iter()
    .map(|b| b.to_string())
    .collect();
    value.extend(["10", "9", "6", "0"].iter().map(|b| b.to_string()));
    value.extend(std::iter::repeat_n("0".to_string(), 12));
    value.extend(
        ["0", "0", "0", "0", "1", "0", "0", "0"]
            .iter()
            .map(|b| b.to_string()),
    );
    // hash_fields, reserved, seed: no recipe
    value.extend(std::iter::repeat_n("0".to_string(), 8));
    let mut a = vec!["map", "update", "id", id.as_str(), "key"];
    a.extend(key);
    a.push("value");
    a.extend(value.iter().map(String::as_str));
    let out = mpt_testkit::run("bpftool", &a);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metric_of_6 = || {
        bpftool_pinned(&t.r, "dump", "mpt_lpm4")
            .as_array()
            .expect("entries")
            .iter()
            .map(|e| e["formatted"]["value"]["id"].clone())
            .find(|id| id["dst_be"][2] == 6)
            .map(|id| id["metric"].clone())
    };
    assert_eq!(metric_of_6(), Some(Value::from(10)), "the stray entry");
    // (the stray entry took the route's slot with it: reclaimed)
    let actions: Vec<(Value, Value)> = sync_changes(&t.r)
        .iter()
        .map(|a| (a["action"].clone(), a["dst"].clone()))
        .collect();
    assert_eq!(
        actions,
        vec![
            (
                Value::from("repaired-dataplane"),
                Value::from("10.9.6.0/24")
            ),
            (Value::from("reclaimed-counter-slots"), Value::from("1")),
        ]
    );
    assert_eq!(
        metric_of_6(),
        Some(Value::from(50)),
        "the route's own entry"
    );
}

/// `mproute ARGS` as the unprivileged user nobody, in the test runner's namespace (nothing
/// there can change: the user may not).
fn as_nobody(args: &(impl Words + ?Sized)) -> std::process::Output {
    std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", MPROUTE])
        .args(args.words())
        .current_dir("/")
        .output()
        .expect("setpriv")
}

#[test]
fn defects_of_the_reliability_run_stay_fixed() {
    require_root();
    // an unprivileged write fails on its own error, with no verification warning before it
    let o = as_nobody("add 198.19.100.0/24 nexthop dev lo");
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(!e.contains("warning"), "{e}");
    assert!(e.starts_with("mproute: lock state:"), "{e}");
    // an unprivileged show works as ip route show does, and says what it could not read
    let o = as_nobody("-j show");
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{e}");
    // (where the state cannot be read, one warning says so; with classic tc an unprivileged
    // user can see that there is none)
    let classic = std::env::var("MPT_FORCE_CLASSIC_TC").is_ok_and(|v| v == "1");
    assert!(
        (classic && e.is_empty()) || (e.starts_with("mproute: warning:") && e.lines().count() == 1),
        "{e}"
    );
    let rows: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert!(rows.is_array());

    let ns = Netns::new("defects");
    ns.ip_ok("link set lo up");
    // a duplicate nexthop names it as written, after the command
    let o = MP.at(&ns, "add 198.19.100.0/24 nexthop dev lo nexthop dev lo");
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert_eq!(
        e.lines().next(),
        Some("mproute: add 198.19.100.0/24: nexthop dev lo is listed twice"),
        "{e}"
    );
    // a missing batch file: the errno's name, not Rust's (os error N)
    let o = MP.at(&ns, "-b /nonexistent/batch");
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("[ENOENT]") && !e.contains("os error"), "{e}");
    // echoed input: control bytes escaped, a 60 KB word cut (a line of more than 64 KiB is
    // no batch line: refused whole, exit 1, issue 27 item 6)
    let dir = std::env::temp_dir().join(format!("mproute-defects-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let batch = dir.join("b");
    let mut long = b"add 198.19.2.0/24 nexthop dev ".to_vec();
    long.extend(std::iter::repeat_n(b'x', 1 << 20));
    std::fs::write(&batch, &long).expect("write");
    let o = MP.at(&ns, &["-b", &batch.to_string_lossy()]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains(":1: a line longer than 65536 bytes"), "{e}");
    let mut text = b"add 198.19.1.0/24 nexthop dev \x01\x1b[2J".to_vec();
    text.extend(std::iter::repeat_n(b'x', 60_000));
    text.push(b'\n');
    std::fs::write(&batch, &text).expect("write");
    let o = MP.at(&ns, &["-b", &batch.to_string_lossy()]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{}", e.len());
    let first = e.lines().next().unwrap_or_default();
    assert!(first.len() < 400, "{} bytes", first.len());
    assert!(first.contains("\\x01\\x1b[2J"), "{first}");
    assert!(
        !e.bytes().any(|b| b < 0x20 && b != b'\n'),
        "raw control bytes echoed"
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(MP.ok(&ns, "show").trim().is_empty());
}

#[test]
fn a_deleted_namespace_leaves_nothing() {
    require_root();
    // a namespace deleted as an operator deletes one (testkit's Netns would also remove the
    // tools' files on drop, which is what is under test here)
    struct Gone(String, Option<u64>);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = mpt_testkit::run("ip", &["netns", "del", &self.0]);
            if let Some(c) = self.1 {
                mpt_testkit::remove_tool_state(c);
            }
        }
    }
    let name = format!("{}-{}-gone", mpt_testkit::NS_PREFIX, std::process::id());
    mpt_testkit::run_ok("ip", &["netns", "add", &name]);
    let mut gone = Gone(name.clone(), None);
    mpt_testkit::run_ok("ip", &["-n", &name, "link", "set", "lo", "up"]);
    let o = MP.run(&format!("-n {name} add 198.19.100.0/24 nexthop dev lo"));
    assert!(o.status.success(), "{o:?}");
    let cookie = mpt_testkit::netns_cookie(&name).expect("cookie");
    gone.1 = Some(cookie);
    let pins = std::path::PathBuf::from(format!(
        "/sys/fs/bpf/mproute/{}",
        mpt_testkit::netns::id_name(cookie)
    ));
    let lock = std::path::PathBuf::from(format!(
        "/run/mproute/{}.lock",
        mpt_testkit::netns::id_name(cookie)
    ));
    // the state is pinned nowhere and the lock file goes with its holder (issue 30): the
    // namespace's deletion alone frees the maps and leaves no names behind
    assert!(
        !pins.exists() && !lock.exists(),
        "the state has names outside its namespace"
    );
    mpt_testkit::run_ok("ip", &["netns", "del", &name]);
    assert!(!pins.exists() && !lock.exists());
    // another namespace's first state: its own lock is gone with the command too
    let next = Netns::new("next");
    next.ip_ok("link set lo up");
    MP.ok(&next, "add 198.19.101.0/24 nexthop dev lo");
    let c = next.cookie().expect("cookie");
    assert!(!std::path::Path::new(&format!(
        "/run/mproute/{}.lock",
        mpt_testkit::netns::id_name(c)
    ))
    .exists());
    assert_eq!(MP.json(&next, "show").as_array().map(Vec::len), Some(1));
    drop(gone);
}

#[test]
fn the_tc_hook_in_use_is_the_one_reported() {
    require_root();
    // forced, or a kernel of the matrix before tcx (6.6)
    let classic = std::env::var("MPT_FORCE_CLASSIC_TC").is_ok_and(|v| v == "1")
        || mpt_testkit::matrix::series_in(&["5.10", "6.1"]);
    let ns = Netns::new("tchook");
    ns.ip_ok("link set lo up");
    MP.ok(&ns, "add 198.19.100.0/24 nexthop dev lo");
    let dp = MP.json(&ns, "dataplane show");
    let filters = String::from_utf8_lossy(
        &std::process::Command::new("tc")
            .args(["-n", ns.name(), "filter", "show", "dev", "lo", "ingress"])
            .output()
            .expect("tc")
            .stdout,
    )
    .to_string();
    if classic {
        assert_eq!(dp["tc_hook"], "classic", "{dp}");
        assert!(
            filters.contains("mpt_anchor") && filters.contains("direct-action"),
            "{filters}"
        );
    } else {
        assert_eq!(dp["tc_hook"], "tcx", "{dp}");
        assert!(!filters.contains("mpt_anchor"), "{filters}");
    }
    // either way the state is found again and removed by flush
    assert_eq!(
        row(&ns, "198.19.100.0/24", "main").map(|r| r["managed"].clone()),
        Some(true.into())
    );
    MP.ok(&ns, "flush");
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// `mproute -n NS ARGS` and `mproute -n NS --check ARGS`, both refused: the dry run predicts the
/// kernel's refusal in the same words and exit code, and changes nothing.
fn refused_alike(ns: &Netns, args: &(impl Words + ?Sized)) {
    let before = snapshot(ns);
    MP.refused_alike(ns, args);
    let args = args.words();
    assert_eq!(snapshot(ns), before, "{} changed something", args.join(" "));
}

#[test]
fn check_reports_what_would_change_and_changes_nothing() {
    require_root();
    let t = TwoPaths::new("check");
    let ns = &t.r;
    let route = [
        "198.51.100.0/24",
        "algo",
        "l4-hash",
        "nexthop",
        "via",
        "10.1.0.2",
        "dev",
        "va",
        "nexthop",
        "via",
        "10.2.0.2",
        "dev",
        "vb",
    ];
    let with = |verb: &str, extra: &[&str]| -> Vec<String> {
        let mut v = vec!["--check".to_string(), verb.to_string()];
        v.extend(route.iter().map(|s| s.to_string()));
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    // a fresh namespace: the dry run creates no state (no pins) and no route
    let before = snapshot(ns);
    let args = with("add", &[]);
    let v = MP.json(ns, &strs(&args));
    assert_eq!(v["check"], true);
    assert_eq!(v["changed"], true);
    assert_eq!(v["diff"]["before"], Value::Null);
    assert_eq!(v["diff"]["after"]["algo"], "l4-hash");
    assert_eq!(
        paths(&v["diff"]["after"]),
        [
            ("10.1.0.2".to_string(), "va".to_string(), 1),
            ("10.2.0.2".to_string(), "vb".to_string(), 1)
        ]
    );
    assert_eq!(snapshot(ns), before);
    let dp = MP.json(ns, "dataplane show");
    assert!(
        dp["maps"].is_null(),
        "--check created mproute's state: {dp}"
    );
    // refusals the kernel decides from what is there, predicted in its words
    refused_alike(ns, "add 192.0.2.0/24 nexthop via 10.99.0.1 dev va");
    refused_alike(ns, "add 192.0.2.0/24 nexthop via 10.2.0.2 dev va");
    refused_alike(ns, "add 2001:db8:77::/48 nexthop via 2001:db8:5::2 dev va");
    refused_alike(ns, "add 2001:db8:77::/48 nexthop via 2001:db8:2::2 dev va");
    ns.ip_ok("link set vb down");
    refused_alike(ns, "add 192.0.2.0/24 nexthop dev vb");
    refused_alike(ns, "add 192.0.2.0/24 nexthop via 10.2.0.2 dev vb");
    refused_alike(ns, "add 2001:db8:77::/48 nexthop dev vb");
    refused_alike(ns, "add 2001:db8:77::/48 nexthop via 2001:db8:2::2 dev vb");
    refused_alike(ns, "add 2001:db8:77::/48 via 2001:db8:2::2 dev vb");
    ns.ip_ok("link set vb up");
    refused_alike(ns, "change 192.0.2.0/24 nexthop via 10.1.0.2 dev va");
    refused_alike(ns, "del 192.0.2.0/24");

    // the route in place: add is refused, replace as it is changes nothing
    let real: Vec<String> = with("add", &[]).into_iter().skip(1).collect();
    MP.ok(ns, &strs(&real));
    refused_alike(ns, &strs(&real));
    let before = snapshot(ns);
    let v = MP.json(ns, &strs(&with("replace", &[])));
    assert_eq!(
        (v["check"].clone(), v["changed"].clone()),
        (true.into(), false.into())
    );
    assert_eq!(v["diff"]["before"], v["diff"]["after"]);
    // another weight and algorithm: would change, before and after say how
    let mut other = with("replace", &["weight", "3"]);
    other[4] = "per-packet".into();
    let v = MP.json(ns, &strs(&other));
    assert_eq!(v["changed"], true);
    assert_eq!(v["diff"]["before"]["algo"], "l4-hash");
    assert_eq!(v["diff"]["after"]["algo"], "per-packet");
    assert_eq!(paths(&v["diff"]["before"])[1].2, 1);
    assert_eq!(paths(&v["diff"]["after"])[1].2, 3);
    let text = MP.ok(ns, &strs(&other));
    assert!(
        text.starts_with("replace 198.51.100.0/24: would change\n"),
        "{text}"
    );
    assert!(
        text.contains("\n  - 198.51.100.0/24 proto mproute metric 0 algo l4-hash"),
        "{text}"
    );
    assert!(
        text.contains("\n  + 198.51.100.0/24 proto mproute metric 0 algo per-packet"),
        "{text}"
    );
    // del and flush: what would go
    let v = MP.json(ns, "--check del 198.51.100.0/24");
    assert_eq!(v["changed"], true);
    assert_eq!(v["diff"]["after"], Value::Null);
    assert_eq!(v["diff"]["before"]["algo"], "l4-hash");
    let v = MP.json(ns, "--check flush");
    assert_eq!(
        (v["check"].clone(), v["changed"].clone()),
        (true.into(), true.into())
    );
    assert_eq!(v["actions"][0]["dst"], "198.51.100.0/24");
    assert_eq!(MP.json(ns, "--check sync")["changed"], false);
    assert_eq!(snapshot(ns), before, "the dry runs changed something");

    // a batch: each line sees what the lines before it would have done; exit 0
    let dir = std::env::temp_dir().join(format!("mpt-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let file = dir.join("check.batch");
    std::fs::write(
        &file,
        "add 203.0.113.0/24 nexthop via 10.1.0.2 dev va\n\
         replace 203.0.113.0/24 nexthop via 10.1.0.2 dev va\n\
         replace 198.51.100.0/24 algo l4-hash nexthop via 10.1.0.2 dev va nexthop via 10.2.0.2 dev vb\n\
         del 203.0.113.0/24\n\
         del 198.51.100.0/24\n",
    )
    .expect("write batch");
    let f = file.to_str().expect("utf-8 path");
    let lines = MP.json_lines(ns, &format!("--check -b {f}"));
    let changed: Vec<bool> = lines
        .iter()
        .map(|l| l["changed"].as_bool().expect("changed"))
        .collect();
    assert_eq!(changed, [true, false, false, true, true]);
    assert!(lines.iter().all(|l| l["check"] == true));
    // a line the real batch would fail on fails the dry run (FILE:LINE, exit 2)
    std::fs::write(
        &file,
        "del 203.0.113.0/24\nadd 198.51.100.0/24 nexthop via 10.1.0.2 dev va\n",
    )
    .expect("write batch");
    let o = MP.at(ns, &format!("--check --force -b {f}"));
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains(&format!("{f}:1: del 203.0.113.0/24: no such route")),
        "{e}"
    );
    assert!(
        e.contains(&format!("{f}:2: add 198.51.100.0/24: File exists")),
        "{e}"
    );
    assert_eq!(snapshot(ns), before, "the dry batch changed something");
    let _ = std::fs::remove_dir_all(&dir);

    // attachments: predicted, never made; every attach and detach says whether it changed
    let attached = |ns: &Netns| MP.json(ns, "dataplane show")["attachments"].clone();
    let v = MP.json(ns, "--check dataplane attach dev va");
    assert_eq!(v["changed"], true);
    assert_eq!(
        v["diff"]["after"]["devices"]["va"],
        serde_json::json!(["tc"])
    );
    assert_eq!(attached(ns), serde_json::json!([]));
    assert_eq!(MP.json(ns, "dataplane attach dev va")["changed"], true);
    assert_eq!(MP.json(ns, "dataplane attach dev va")["changed"], false);
    let v = MP.json(ns, "--check dataplane attach dev va");
    assert_eq!(v["changed"], false);
    let v = MP.json(ns, "--check dataplane detach dev va");
    assert_eq!(v["changed"], true);
    assert_eq!(attached(ns).as_array().map(Vec::len), Some(1));
    assert_eq!(MP.json(ns, "dataplane detach dev va")["changed"], true);
    assert_eq!(
        MP.json(ns, "--check dataplane detach dev va")["changed"],
        false
    );
}

/// A comment ending in a backslash continues nothing, in mproute's batch files as in
/// `ip -batch` (adversarial review, issue 27 item 2: the next command was swallowed and the
/// batch exited 0): the same file through both, word for word, installs the same routes.
#[test]
fn batch_comments_end_before_a_continuation_as_in_ip_batch() {
    require_root();
    let text = "# a comment that ends in a backslash \\\n\
                route add 198.19.100.0/24 nexthop dev lo\n\
                route add 198.19.101.0/24 nexthop dev lo # so does this one \\\n\
                route add 198.19.102.0/24 nexthop dev lo\n\
                route add 198.19.103.0/24 \\\n\
                  nexthop dev lo # a continued line's comment \\\n\
                route add 198.19.104.0/24 nexthop dev lo\n";
    let file = mpt_testkit::BatchFile::new("comment-cont", text);
    let ours = Netns::new("bcomm-m");
    let ip = Netns::new("bcomm-i");
    for ns in [&ours, &ip] {
        ns.ip_ok("link set lo up");
    }
    let o = MP.at(&ours, &["-b", file.path()]);
    assert!(o.status.success(), "{o:?}");
    ip.ip_ok(&["-batch", file.path()]);
    let dsts = |ns: &Netns| -> Vec<String> {
        ns.ip_json("route show")
            .as_array()
            .expect("routes")
            .iter()
            .filter_map(|r| r["dst"].as_str().map(str::to_string))
            .filter(|d| d.starts_with("198.19."))
            .collect()
    };
    assert_eq!(dsts(&ip).len(), 5, "ip -batch: {:?}", dsts(&ip));
    assert_eq!(dsts(&ours), dsts(&ip));
}

/// A device name the kernel accepted is printed with its control characters escaped (issue 27
/// item 5: an escape sequence in a veth's name retitled the terminal); output that does not
/// reach its file is exit 2 and, with `-j`, a failure is a JSON object too (item 11).
#[test]
fn names_cannot_drive_the_terminal_and_output_must_arrive() {
    require_root();
    let t = TwoPaths::new("esc");
    let evil = "\u{1b}]0;PWN\u{7}\u{1b}[2J";
    t.r.ip_ok(&["link", "set", "va", "name", evil]);
    MP.ok(
        &t.r,
        &[
            "add",
            "198.51.100.0/24",
            "algo",
            "l4-hash",
            "nexthop",
            "via",
            "10.1.0.2",
            "dev",
            evil,
            "nexthop",
            "via",
            "10.2.0.2",
            "dev",
            "vb",
        ],
    );
    for args in ["show", "-d show", "get 198.51.100.1"] {
        let o = MP.at(&t.r, args);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{args:?}");
        assert!(
            !out.contains('\u{1b}') && !out.contains('\u{7}'),
            "{args:?}: {out:?}"
        );
    }
    assert!(MP.ok(&t.r, "show").contains("\\x1b]0;PWN\\x07"));
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let o = std::process::Command::new(MPROUTE)
        .args(["-n", t.r.name(), "-j", "show"])
        .stdout(full)
        .output()
        .expect("mproute");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("[ENOSPC]"), "{err}");
    let o = MP.at(&t.r, "-j del 203.0.113.0/24");
    assert_eq!(o.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&o.stdout).expect("a JSON error");
    assert!(
        v["error"]
            .as_str()
            .is_some_and(|e| e.contains("203.0.113.0/24")),
        "{v}"
    );
}

/// A batch killed mid-write leaves its state ahead of the FIB (a window's state is written
/// before its routes reach the kernel): that is not drift behind mproute's back, and the next
/// command that takes the lock repairs it (issue 27 item 7: `--check sync` listed the routes
/// as deleted behind mproute's back, and a later `add` did not repair them). Here strace holds
/// the batch's netlink sends until it is killed, so that its state is well ahead of the FIB.
#[test]
fn a_batch_killed_mid_write_is_repaired_by_the_next_command() {
    require_root();
    let t = TwoPaths::new("k9");
    let text: String = (0..3000)
        .map(|i| {
            format!(
                "add 198.18.{}.{}/32 algo l4-hash nexthop via 10.1.0.2 dev va nexthop via 10.2.0.2 dev vb\n",
                i / 256,
                i % 256
            )
        })
        .collect();
    let batch = BatchFile::new("k9", text);
    let strace = std::process::Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "-e", "trace=sendto"])
        .args(["-e", "inject=sendto:delay_enter=400000", MPROUTE])
        .args(["-n", t.r.name(), "-b", batch.path()])
        .spawn()
        .expect("strace");
    // the batch has planned ahead (its state written) and waits on its sends: kill it there,
    // once a thread of it has been held in a send (each is delayed 0.4 s) for 0.15 s
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut held_since: Option<std::time::Instant> = None;
    let journal = format!(
        "/run/mproute/{}.lock",
        mpt_testkit::netns::id_name(t.r.cookie().expect("cookie"))
    );
    let pid = loop {
        assert!(
            std::time::Instant::now() < deadline,
            "the batch never waited on a send"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
        let Some(pid) =
            std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", strace.id()))
                .ok()
                .and_then(|k| k.split_whitespace().next().map(str::to_string))
        else {
            continue;
        };
        let in_sendto = std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|tasks| {
                tasks.flatten().any(|t| {
                    std::fs::read_to_string(t.path().join("syscall"))
                        .is_ok_and(|s| s.starts_with(&format!("{} ", libc::SYS_sendto)))
                })
            })
            .unwrap_or(false);
        // and its journal begun: it has the lock and writes (not a send of the set-up)
        let writing = std::fs::read_to_string(&journal).is_ok_and(|j| !j.trim().is_empty());
        let in_sendto = in_sendto && writing;
        match (in_sendto, held_since) {
            (false, _) => held_since = None,
            (true, None) => held_since = Some(std::time::Instant::now()),
            (true, Some(t)) if t.elapsed() >= std::time::Duration::from_millis(150) => break pid,
            (true, Some(_)) => {}
        }
    };
    let st = std::process::Command::new("kill")
        .args(["-KILL", &pid])
        .status()
        .expect("kill");
    assert!(st.success(), "kill -9 {pid}");
    let _ = strace.wait_with_output();
    let fib = || {
        t.r.ip_json("-4 route show")
            .as_array()
            .expect("routes")
            .iter()
            .filter(|r| r["dst"].as_str().is_some_and(|d| d.starts_with("198.18.")))
            .count()
    };
    let installed = fib();
    assert!(installed < 3000, "the batch was not stopped mid-way");
    let check = MP.ok(&t.r, "--check sync");
    assert!(
        !check.contains("behind mproute's back"),
        "false drift: {check}"
    );
    let o = MP.at(&t.r, "add 203.0.113.0/24 nexthop via 10.1.0.2 dev va");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("repaired what an invocation stopped mid-write left"),
        "{err}"
    );
    assert!(MP.ok(&t.r, "--check sync").contains("nothing would change"));
    let managed = MP
        .json(&t.r, "show")
        .as_array()
        .expect("rows")
        .iter()
        .filter(|r| r["managed"] == true)
        .count();
    assert_eq!(managed, installed + 1, "the state agrees with the FIB");
}

/// One front door (issue 28 item 3): the command's syntax is judged before the namespace is
/// entered, so a bad command is exit 1 whatever `-n` names (mproute entered the namespace
/// first and said exit 2, while ila and pfanout said 1); a namespace that is not there is 2.
#[test]
fn syntax_before_the_namespace() {
    let o = MP.run("-n mpt-no-such-ns add 198.51.100.0/24 bogus");
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("\"bogus\""), "{e}");
    let o = MP.run("-n mpt-no-such-ns show");
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("does not exist"), "{e}");
}

/// `-v` says what mproute did, one line per netlink request, map write and attachment, and
/// leaves libbpf's own log out.
#[test]
fn verbose_says_each_request_and_map_write() {
    require_root();
    let t = TwoPaths::new("verb");
    let out = MP.at(
        &t.r,
        "-v add 198.51.100.0/24 algo l4-hash nexthop via 10.1.0.2 dev va nexthop via 10.2.0.2 dev vb",
    );
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.lines()
            .any(|l| l == "mproute: netlink RTM_NEWROUTE create|excl: add 198.51.100.0/24"),
        "the route request is named: {err}"
    );
    assert!(
        err.lines()
            .any(|l| l.starts_with("mproute: map mpt_routes_in: update")),
        "the state map write is named: {err}"
    );
    assert!(!err.contains("libbpf:"), "libbpf's log is -vv's: {err}");
    let out = MP.at(&t.r, "-v dataplane attach dev va");
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.lines()
            .any(|l| l.starts_with("mproute: bpf: attach") && l.contains("ifindex")),
        "the attachment is named: {err}"
    );
    // without -v: nothing on standard error
    let out = MP.at(&t.r, "del 198.51.100.0/24");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

/// `dataplane attach` is idempotent and says when it changes something beside the hooks:
/// `fastpath` and `peer` are part of what is attached, in the real command and in `--check`.
#[test]
fn attach_says_changed_for_fastpath_and_peer_alone() {
    require_root();
    let t = TwoPaths::new("att");
    let changed = |args: &str| MP.json(&t.r, args)["changed"].clone();
    assert_eq!(changed("dataplane attach dev va"), true);
    assert_eq!(changed("dataplane attach dev va"), false);
    assert_eq!(changed("--check dataplane attach dev va"), false);
    // fastpath alone
    assert_eq!(
        changed("--check dataplane attach dev va fastpath off"),
        true
    );
    assert_eq!(changed("dataplane attach dev va fastpath off"), true);
    let show = MP.json(&t.r, "dataplane show");
    assert_eq!(show["attachments"][0]["fastpath"], false, "{show}");
    assert_eq!(changed("dataplane attach dev va fastpath off"), false);
    // peer alone: va's peer is in another namespace, so peer on delivers into it
    assert_eq!(changed("dataplane attach dev va"), true);
    let show = MP.json(&t.r, "dataplane show");
    assert_eq!(show["attachments"][0]["fastpath"], true, "{show}");
    assert!(
        !show["attachments"][0]["peer_devs"]
            .as_array()
            .is_none_or(|a| a.is_empty()),
        "peer on delivers into va's peer: {show}"
    );
    assert_eq!(changed("--check dataplane attach dev va peer off"), true);
    assert_eq!(changed("dataplane attach dev va peer off"), true);
    assert_eq!(changed("dataplane attach dev va peer off"), false);
}

/// `sync` of a large table (5,000 managed routes) that drifted every way at once, checked
/// against `ip -j route show`: routes deleted behind mproute's back (state entries left without
/// a route) are forgotten, routes of protocol mproute it does not know are adopted, routes
/// whose nexthops were replaced are taken again with their algorithm, and a shadowed route
/// whose better one was deleted gets the dataplane entry (no dataplane repair needed after,
/// nothing left for a second sync). Sync reads the state in batches and compares in memory:
/// this is the bookkeeping of that comparison at a size where an off-by-one batch shows.
#[test]
fn sync_repairs_drift_in_a_large_table() {
    require_root();
    let t = TwoPaths::new("bigsync");
    // /28s of 198.18.0.0/15: i-th is 198.(18 + i / 4096).(i / 16 % 256).(i % 16 * 16)/28
    let p = |i: u32| format!("198.{}.{}.{}/28", 18 + i / 4096, i / 16 % 256, i % 16 * 16);
    const N: u32 = 5000;
    let two = "nexthop via 10.1.0.2 dev va nexthop via 10.2.0.2 dev vb";
    let mut text = String::new();
    for i in 0..N {
        let algo = if i % 7 == 0 { "algo l4-hash " } else { "" };
        text.push_str(&format!("add {} {algo}{two}\n", p(i)));
    }
    // shadowed pairs: metric 10 and metric 20 of the same prefix, the better one to be deleted
    for i in N..N + 20 {
        text.push_str(&format!("add {} metric 10 {two}\n", p(i)));
        text.push_str(&format!("add {} metric 20 {two}\n", p(i)));
    }
    let file = BatchFile::new("bigsync", &text);
    MP.ok(&t.r, &format!("-b {}", file.path()));
    assert_eq!(sync_changes(&t.r), Vec::<Value>::new(), "nothing to repair");

    // drift, behind mproute's back, with ip -batch
    let mut ip = String::new();
    let deleted: Vec<u32> = (0..N).filter(|i| i % 10 == 3).collect(); // 500
    for i in &deleted {
        ip.push_str(&format!("route del {}\n", p(*i)));
    }
    let replaced: Vec<u32> = (0..N).filter(|i| i % 25 == 7).collect(); // 200
    for i in &replaced {
        ip.push_str(&format!(
            "route replace {} proto 245 nexthop via 10.1.0.2 dev va\n",
            p(*i)
        ));
    }
    let unknown: Vec<u32> = (N + 100..N + 400).collect(); // 300
    for i in &unknown {
        ip.push_str(&format!("route add {} proto 245 {two}\n", p(*i)));
    }
    for i in N..N + 20 {
        ip.push_str(&format!("route del {} metric 10\n", p(i)));
    }
    let ipfile = BatchFile::new("bigsyncip", &ip);
    t.r.ip_ok(&["-batch", ipfile.path()]);

    let rows = sync_changes(&t.r);
    let count = |a: &str| rows.iter().filter(|r| r["action"] == a).count();
    assert_eq!(count("forgotten"), deleted.len() + 20, "{rows:?}");
    assert_eq!(count("adopted"), unknown.len());
    assert_eq!(count("updated"), replaced.len());
    assert_eq!(
        count("repaired-dataplane"),
        0,
        "the shadowed routes were promoted"
    );
    let forgotten: std::collections::HashSet<String> = rows
        .iter()
        .filter(|r| r["action"] == "forgotten")
        .filter_map(|r| r["dst"].as_str().map(String::from))
        .collect();
    for i in &deleted {
        assert!(forgotten.contains(&p(*i)), "{} forgotten", p(*i));
    }
    // one of the replaced keeps its algorithm
    assert!(rows.iter().any(|r| r["action"] == "updated"
        && r["dst"] == p(7 * 25 + 7)
        && r["reason"].as_str().is_some_and(|s| s.contains("l4-hash"))));
    assert_eq!(
        sync_changes(&t.r),
        Vec::<Value>::new(),
        "a second sync finds nothing"
    );

    // the oracle: what mproute manages is exactly ip's protocol-mproute routes
    let ours: std::collections::BTreeSet<(String, u64)> = MP
        .json(&t.r, "show")
        .as_array()
        .expect("rows")
        .iter()
        .filter(|r| r["managed"] == true)
        .map(|r| {
            (
                r["dst"].as_str().expect("dst").to_string(),
                r["metric"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let theirs: std::collections::BTreeSet<(String, u64)> =
        t.r.ip_json("-4 route show proto 245")
            .as_array()
            .expect("ip rows")
            .iter()
            .map(|r| {
                (
                    r["dst"].as_str().expect("dst").to_string(),
                    r["metric"].as_u64().unwrap_or(0),
                )
            })
            .collect();
    assert_eq!(ours.len(), N as usize - deleted.len() + unknown.len() + 20);
    assert_eq!(ours, theirs);
    // the replaced routes have the FIB's one path now, in mproute's view too
    let r = row(&t.r, &p(7), "main").expect("row");
    assert_eq!(r["nexthops"].as_array().map(Vec::len), Some(1), "{r}");
}

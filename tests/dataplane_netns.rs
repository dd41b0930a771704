//! Root integration tests of the mproute dataplane with real traffic: a client, a router and
//! four nexthop namespaces; every nexthop namespace counts what arrives per flow (AF_PACKET),
//! and `mproute get` is the model the dataplane must agree with.

use mpt_testkit::traffic::{self, FlowCounter, FlowSpec, FourPaths};
use mpt_testkit::{require_root, Netns, Tool};
use serde_json::Value;

const MPROUTE: &str = env!("CARGO_BIN_EXE_mproute");
/// mproute, run as an operator would (`-n NS`), its JSON decoded.
const MP: Tool = Tool::new(MPROUTE);

/// The topology with a managed 4-way route and the dataplane attached to the client-facing
/// device in `mode`. The nexthop namespaces get our XDP program on their side of the links (no
/// managed routes there, so it passes everything): a veth only takes redirected frames when
/// its peer runs NAPI.
fn setup(tag: &str, algo: &str, weights: [u16; 4], mode: &str) -> FourPaths {
    let t = FourPaths::new(tag);
    let mut args: Vec<String> = vec![
        "add".into(),
        "198.51.100.0/24".into(),
        "algo".into(),
        algo.into(),
    ];
    for (i, w) in weights.iter().enumerate() {
        args.extend([
            "nexthop".into(),
            "via".into(),
            FourPaths::nexthop_v4(i),
            "dev".into(),
            FourPaths::dev(i),
            "weight".into(),
            w.to_string(),
        ]);
    }
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    MP.ok(&t.r, &a);
    let mut args6: Vec<String> = vec![
        "add".into(),
        "2001:db8:100::/64".into(),
        "algo".into(),
        algo.into(),
    ];
    for (i, w) in weights.iter().enumerate() {
        args6.extend([
            "nexthop".into(),
            "via".into(),
            FourPaths::nexthop_v6(i),
            "dev".into(),
            FourPaths::dev(i),
            "weight".into(),
            w.to_string(),
        ]);
    }
    let a6: Vec<&str> = args6.iter().map(String::as_str).collect();
    MP.ok(&t.r, &a6);
    for n in &t.n {
        MP.ok(n, "dataplane attach dev eth0 xdp");
    }
    MP.ok(&t.r, &format!("dataplane attach dev vc {mode}"));
    t
}

/// Send the flows, return for each flow the packets seen at each nexthop.
fn run_flows(t: &FourPaths, flows: &[FlowSpec], per_flow: u32, tcp: bool) -> Vec<Vec<u64>> {
    let counters: Vec<FlowCounter> = t.n.iter().map(|n| FlowCounter::start(n, "eth0")).collect();
    if tcp {
        traffic::send_tcp_syns(&t.c, flows, per_flow);
    } else {
        traffic::send_udp_flows(&t.c, flows, per_flow);
    }
    let counts = FlowCounter::stop_all(counters);
    traffic::per_flow_counts(flows, if tcp { 6 } else { 17 }, &counts)
}

/// Index of the nexthop `mproute get` predicts for a flow.
fn predicted(t: &FourPaths, f: &FlowSpec, proto: &str) -> usize {
    let v = MP.json(
        &t.r,
        &format!(
            "get {} from {} ipproto {proto} sport {} dport {}",
            f.dst, f.src, f.sport, f.dport
        ),
    );
    v[0]["index"]
        .as_u64()
        .expect("a hash algorithm predicts an index") as usize
}

/// What `mproute get` predicts for every flow, in one batch (`-b -`, one JSON line each).
fn predicted_all(t: &FourPaths, flows: &[FlowSpec], proto: &str) -> Vec<usize> {
    let lines: Vec<String> = flows
        .iter()
        .map(|f| {
            format!(
                "get {} from {} ipproto {proto} sport {} dport {}",
                f.dst, f.src, f.sport, f.dport
            )
        })
        .collect();
    let v: Vec<usize> =
        mpt_testkit::batch_json_lines(MPROUTE, &["-n", t.r.name(), "-j", "-b", "-"], &lines)
            .iter()
            .map(|j| j[0]["index"].as_u64().expect("index") as usize)
            .collect();
    assert_eq!(v.len(), flows.len());
    v
}

fn redirected(t: &FourPaths) -> u64 {
    MP.json(&t.r, "dataplane show")["counters"]["redirected"]
        .as_u64()
        .expect("counter")
}

fn dataplane_refused_here() -> bool {
    mpt_testkit::matrix::dataplane_refused_here(&MP)
}

fn check_hash_algo(mode: &str, algo: &str, proto: &str) {
    require_root();
    if dataplane_refused_here() {
        return;
    }
    let t = setup(&format!("{mode}{algo}"), algo, [1, 1, 1, 1], mode);
    let tcp = proto == "tcp";
    let mut flows = traffic::flows(if tcp { 500 } else { 2000 }, false, 20000);
    flows.extend(traffic::flows(if tcp { 100 } else { 400 }, true, 40000));
    let per_flow = if tcp { 1 } else { 2 };
    let seen = run_flows(&t, &flows, per_flow, tcp);
    let predicted = predicted_all(&t, &flows, proto);
    let mut share = [0usize; 4];
    let mut mismatches = Vec::new();
    for ((f, counts), p) in flows.iter().zip(&seen).zip(&predicted) {
        let hit: Vec<usize> = (0..4).filter(|i| counts[*i] > 0).collect();
        assert_eq!(
            hit.len(),
            1,
            "{mode} {algo}: flow {f:?} left by {hit:?} ({counts:?})"
        );
        if !tcp {
            assert_eq!(
                counts.iter().sum::<u64>(),
                u64::from(per_flow),
                "{f:?}: {counts:?}"
            );
        }
        share[hit[0]] += 1;
        if *p != hit[0] {
            mismatches.push((*f, *p, hit[0]));
        }
    }
    // Every flow, not a sample.
    assert!(
        mismatches.is_empty(),
        "{mode} {algo}: mproute get disagrees on {} of {} flows, e.g. {:?}",
        mismatches.len(),
        flows.len(),
        &mismatches[..mismatches.len().min(5)]
    );
    // ±15 % of the due share (the bound, 4.2 standard deviations at 2,400 flows);
    // a smaller flow set gets 4 standard deviations so that the test does not fail by chance.
    let total = flows.len() as f64;
    let due = total / 4.0;
    let tolerance = (0.15 * due).max(4.0 * (total * 0.25 * 0.75).sqrt());
    for (i, s) in share.iter().enumerate() {
        assert!(
            (*s as f64 - due).abs() <= tolerance,
            "{mode} {algo}: nexthop {i} got {s} of {total} flows (due {due} ± {tolerance:.0}): {share:?}"
        );
    }
    assert!(
        redirected(&t) >= flows.len() as u64,
        "{mode}: the dataplane forwarded the packets, not the kernel"
    );
    eprintln!("{mode} {algo} {proto}: flows per nexthop {share:?}");
}

#[test]
fn l4_hash_udp_tc() {
    check_hash_algo("tc", "l4-hash", "udp");
}

#[test]
fn l4_hash_udp_xdp() {
    check_hash_algo("xdp", "l4-hash", "udp");
}

#[test]
fn l4_hash_tcp_xdp_generic() {
    check_hash_algo("xdp-generic", "l4-hash", "tcp");
}

#[test]
fn l3_hash_keeps_a_host_pair_on_one_nexthop() {
    require_root();
    let t = setup("l3", "l3-hash", [1, 1, 1, 1], "tc");
    let flows = traffic::flows(200, false, 30000);
    let seen = run_flows(&t, &flows, 1, false);
    let used: std::collections::BTreeSet<usize> = seen
        .iter()
        .map(|c| (0..4).find(|i| c[*i] > 0).expect("delivered"))
        .collect();
    assert_eq!(
        used.len(),
        1,
        "one source, one destination: one nexthop, got {used:?}"
    );
    assert_eq!(
        *used.iter().next().expect("one"),
        predicted(&t, &flows[0], "udp")
    );
}

#[test]
fn weights_three_to_one_l4_hash() {
    require_root();
    let t = setup("w31", "l4-hash", [3, 1, 3, 1], "xdp");
    let flows = traffic::flows(2000, false, 10000);
    let seen = run_flows(&t, &flows, 1, false);
    let mut share = [0f64; 4];
    for c in &seen {
        let i = (0..4).find(|i| c[*i] > 0).expect("delivered");
        share[i] += 1.0;
    }
    let heavy = (share[0] + share[2]) / flows.len() as f64;
    assert!(
        (heavy - 0.75).abs() <= 0.05,
        "3:1 weights gave {heavy:.3} to the heavy pair: {share:?}"
    );
}

#[test]
fn per_packet_spreads_one_flow_evenly() {
    require_root();
    for mode in ["tc", "xdp"] {
        let t = setup(&format!("pp{mode}"), "per-packet", [1, 1, 1, 1], mode);
        let flows = traffic::flows(1, false, 50000);
        let seen = run_flows(&t, &flows, 2000, false);
        let c = &seen[0];
        // Per-CPU counters: each CPU walks the nexthops in turn, so the split is even up to
        // one round per CPU.
        for (i, n) in c.iter().enumerate() {
            assert!(
                (*n as f64 - 500.0).abs() <= 25.0,
                "{mode}: nexthop {i} got {n} of 2000 packets of one flow: {c:?}"
            );
        }
    }
}

#[test]
fn random_and_wrandom_and_drr_use_every_nexthop() {
    require_root();
    for algo in ["random", "wrandom", "drr"] {
        let t = setup(&format!("r{algo}"), algo, [1, 1, 1, 1], "tc");
        let flows = traffic::flows(1, false, 51000);
        let seen = run_flows(&t, &flows, 2000, false);
        let c = &seen[0];
        assert_eq!(c.iter().sum::<u64>(), 2000, "{algo}: {c:?}");
        for (i, n) in c.iter().enumerate() {
            assert!(
                *n >= 300,
                "{algo}: nexthop {i} got {n} of 2000 packets: {c:?}"
            );
        }
    }
}

#[test]
fn show_with_stats_counts_per_nexthop() {
    require_root();
    let t = setup("stats", "l4-hash", [1, 1, 1, 1], "tc");
    let flows = traffic::flows(400, false, 33000);
    let seen = run_flows(&t, &flows, 1, false);
    let v = MP.json(&t.r, "-s show 198.51.100.0/24");
    assert_eq!(v[0]["enforced_by"], "tc");
    let nhs = v[0]["nexthops"].as_array().expect("nexthops");
    for (i, nh) in nhs.iter().enumerate() {
        let delivered: u64 = seen.iter().map(|c| c[i]).sum();
        assert_eq!(nh["packets"].as_u64(), Some(delivered), "nexthop {i}: {nh}");
    }
    // Detached: the kernel forwards again and show says so.
    MP.ok(&t.r, "dataplane detach dev vc");
    let v = MP.json(&t.r, "show 198.51.100.0/24");
    assert_eq!(v[0]["enforced_by"], "none");
}

/// The four-way IPv4 route's arguments after `add`/`replace`, with an optional metric.
fn four_way_args(metric: Option<u32>) -> Vec<String> {
    let mut a = vec!["198.51.100.0/24".to_string()];
    if let Some(m) = metric {
        a.extend(["metric".into(), m.to_string()]);
    }
    a.extend(["algo".into(), "l4-hash".into()]);
    for i in 0..4 {
        a.extend([
            "nexthop".into(),
            "via".into(),
            FourPaths::nexthop_v4(i),
            "dev".into(),
            FourPaths::dev(i),
        ]);
    }
    a
}

fn mp_four_way(ns: &Netns, verb: &str, metric: Option<u32>) {
    let mut a = vec![verb.to_string()];
    a.extend(four_way_args(metric));
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    MP.ok(ns, &a);
}

/// Per-nexthop packets `-s show` gives for the IPv4 route of that metric.
fn shown_per_nexthop(t: &FourPaths, metric: u64) -> Vec<u64> {
    let v = MP.json(&t.r, "-s show 198.51.100.0/24");
    let row = v
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["metric"].as_u64() == Some(metric))
        .unwrap_or_else(|| panic!("no route of metric {metric} in {v}"));
    row["nexthops"]
        .as_array()
        .expect("nexthops")
        .iter()
        .map(|n| n["packets"].as_u64().unwrap_or(0))
        .collect()
}

fn sum_per_nexthop(seen: &[Vec<Vec<u64>>]) -> Vec<u64> {
    (0..4)
        .map(|i| seen.iter().flatten().map(|c| c[i]).sum())
        .collect()
}

/// `mproute --force -b`: the four-way route at metric `refused` with a gateway off its link
/// (the kernel refuses it), then at metric `applied`.
fn force_batch(t: &FourPaths, refused: u32, applied: u32) {
    let line = |m: u32| {
        let mut a = vec!["add".to_string()];
        a.extend(four_way_args(Some(m)));
        a.join(" ")
    };
    let bad = line(refused).replacen(&FourPaths::nexthop_v4(0), "192.0.2.99", 1);
    let file = std::env::temp_dir().join(format!(
        "mpt-force-{}-{refused}-{applied}.batch",
        std::process::id()
    ));
    std::fs::write(&file, format!("{bad}\n{}\n", line(applied))).expect("write the batch file");
    let out = MP.at(&t.r, &["--force", "-b", file.to_str().expect("path")]);
    let _ = std::fs::remove_file(&file);
    assert_eq!(
        out.status.code(),
        Some(2),
        "one line refused by the kernel: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Metrics of the kernel's routes for the four-way prefix, ascending.
fn kernel_metrics(t: &FourPaths) -> Vec<u64> {
    let v: Value =
        serde_json::from_str(&t.r.ip_ok("-j route show 198.51.100.0/24")).expect("ip -j");
    let mut m: Vec<u64> = v
        .as_array()
        .expect("routes")
        .iter()
        .map(|r| r["metric"].as_u64().unwrap_or(0))
        .collect();
    m.sort_unstable();
    m
}

fn counter_slots(t: &FourPaths) -> (u64, u64) {
    let v = MP.json(&t.r, "dataplane show");
    let c = &v["counter_slots"];
    (
        c["used"].as_u64().expect("counter_slots.used"),
        c["total"].as_u64().expect("counter_slots.total"),
    )
}

/// Counters stay exact (AF_PACKET at the nexthops is the oracle) wherever they live: a route's
/// per-CPU counter slot, kept when the route is written again, folded into the hash map when a
/// lower metric takes its dataplane entry, a new slot when it gets the entry back; and the hash
/// map alone once every slot is taken.
#[test]
fn counters_stay_exact_across_replace_shadowing_and_full_slots() {
    require_root();
    let t = setup("ctrslot", "l4-hash", [1, 1, 1, 1], "tc");
    let flows = traffic::flows(64, false, 34000);
    // The setup's route goes; the same prefix at metric 20 comes in its place.
    MP.ok(&t.r, "del 198.51.100.0/24");
    mp_four_way(&t.r, "add", Some(20));
    assert_eq!(counter_slots(&t).0, 2, "the IPv6 route and this one");
    let a = run_flows(&t, &flows, 1, false);
    assert_eq!(
        shown_per_nexthop(&t, 20),
        sum_per_nexthop(std::slice::from_ref(&a))
    );

    // Written again: the counters go on.
    mp_four_way(&t.r, "replace", Some(20));
    let b = run_flows(&t, &flows, 1, false);
    let mut m20 = sum_per_nexthop(&[a, b]);
    assert_eq!(shown_per_nexthop(&t, 20), m20, "after replace");

    // A lower metric takes the dataplane entry: metric 20 keeps what it counted.
    mp_four_way(&t.r, "add", Some(10));
    let c = run_flows(&t, &flows, 1, false);
    assert_eq!(shown_per_nexthop(&t, 20), m20, "metric 20 while shadowed");
    assert_eq!(shown_per_nexthop(&t, 10), sum_per_nexthop(&[c]));

    // It goes: metric 20 has the entry again, with a slot, and counts on from where it was.
    MP.ok(&t.r, "del 198.51.100.0/24 metric 10");
    let d = run_flows(&t, &flows, 1, false);
    for (m, x) in m20.iter_mut().zip(sum_per_nexthop(&[d])) {
        *m += x;
    }
    assert_eq!(shown_per_nexthop(&t, 20), m20, "metric 20 promoted again");
    assert_eq!(counter_slots(&t).0, 2);

    // A shadowed route deleted and added again starts from nothing.
    mp_four_way(&t.r, "add", Some(10));
    MP.ok(&t.r, "del 198.51.100.0/24 metric 20");
    mp_four_way(&t.r, "add", Some(20));
    MP.ok(&t.r, "del 198.51.100.0/24 metric 10");
    assert_eq!(shown_per_nexthop(&t, 20), vec![0; 4], "a new route");

    // Forced batches (--force): a refused line, then one the kernel takes. The refused line's
    // undo must leave the dataplane entry to the applied line's route: a lower metric (5), a
    // higher one than the refused line's (15), the same route (10, with its algorithm).
    force_batch(&t, 10, 5);
    assert_eq!(
        kernel_metrics(&t),
        vec![5, 20],
        "the kernel took 5, refused 10"
    );
    let f = run_flows(&t, &flows, 1, false);
    assert_eq!(
        shown_per_nexthop(&t, 5),
        sum_per_nexthop(&[f]),
        "metric 5 counts"
    );
    assert_eq!(
        shown_per_nexthop(&t, 20),
        vec![0; 4],
        "metric 20 is shadowed"
    );
    MP.ok(&t.r, "del 198.51.100.0/24 metric 5");
    assert_eq!(counter_slots(&t).0, 2);
    for (refused, applied) in [(10u32, 15u32), (10, 10)] {
        force_batch(&t, refused, applied);
        assert_eq!(
            kernel_metrics(&t),
            vec![u64::from(applied), 20],
            "batch {refused}/{applied}"
        );
        let v = MP.json(&t.r, "show 198.51.100.0/24");
        let row = v
            .as_array()
            .expect("rows")
            .iter()
            .find(|r| r["metric"].as_u64() == Some(u64::from(applied)))
            .unwrap_or_else(|| panic!("metric {applied} not managed any more: {v}"));
        assert_eq!(row["algo"], "l4-hash", "{row}");
        let f = run_flows(&t, &flows, 1, false);
        assert_eq!(
            shown_per_nexthop(&t, u64::from(applied)),
            sum_per_nexthop(&[f]),
            "batch {refused}/{applied}: metric {applied} holds the dataplane entry"
        );
        MP.ok(&t.r, &format!("del 198.51.100.0/24 metric {applied}"));
    }
    assert_eq!(counter_slots(&t).0, 2);

    // Every slot taken (one batch of /32 routes), then the route again: no slot for it, its
    // counters are in the hash map, still exact.
    let (used, total) = counter_slots(&t);
    let lines: Vec<String> = (0..total - used)
        .map(|i| {
            format!(
                "add 203.0.113.{}/32 nexthop via {} dev {}",
                i,
                FourPaths::nexthop_v4(0),
                FourPaths::dev(0)
            )
        })
        .collect();
    let file = std::env::temp_dir().join(format!("mpt-slots-{}.batch", std::process::id()));
    std::fs::write(&file, lines.join("\n") + "\n").expect("write the batch file");
    let out = MP.at(&t.r, &["-b", file.to_str().expect("path")]);
    let _ = std::fs::remove_file(&file);
    assert!(
        out.status.success(),
        "batch: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(counter_slots(&t), (total, total), "every slot taken");
    MP.ok(&t.r, "del 198.51.100.0/24 metric 20");
    assert_eq!(
        counter_slots(&t),
        (total - 1, total),
        "its slot is free again"
    );
    MP.ok(
        &t.r,
        &format!(
            "add 203.0.113.255/32 nexthop via {} dev {}",
            FourPaths::nexthop_v4(0),
            FourPaths::dev(0)
        ),
    );
    mp_four_way(&t.r, "add", Some(20));
    assert_eq!(counter_slots(&t), (total, total));
    let e = run_flows(&t, &flows, 1, false);
    let shown = shown_per_nexthop(&t, 20);
    assert_eq!(shown, sum_per_nexthop(&[e]), "counted in the hash map");
    assert!(
        shown.iter().sum::<u64>() >= 64,
        "traffic went through the route: {shown:?}"
    );
}

/// A route of another owner inside a managed prefix, through one of its gateways and with its
/// metric: the per-packet kernel check cannot tell it from the managed route, so the dataplane
/// must leave its destinations to the kernel (a hole in the LPM trie, entered when mproute
/// verifies: at the end of a command, or by `dataplane watch`). The kernel sends them all by
/// that route's one nexthop.
#[test]
fn a_foreign_route_inside_a_managed_prefix_is_left_to_the_kernel() {
    require_root();
    let t = setup("hole", "l4-hash", [1, 1, 1, 1], "tc");
    let flows = traffic::flows(64, false, 35000);
    let used = |seen: &[Vec<u64>]| -> Vec<u64> { sum_per_nexthop(&[seen.to_vec()]) };
    let spread = used(&run_flows(&t, &flows, 1, false));
    assert!(
        spread.iter().filter(|n| **n > 0).count() >= 3,
        "l4-hash spreads the flows: {spread:?}"
    );
    // 198.51.100.1 (every flow's destination) by ip route, via nexthop 0, metric 0 like ours.
    t.r.ip_ok(&format!(
        "route add 198.51.100.0/28 via {} dev {}",
        FourPaths::nexthop_v4(0),
        FourPaths::dev(0)
    ));
    MP.ok(&t.r, "sync");
    let pinned = used(&run_flows(&t, &flows, 1, false));
    assert_eq!(
        pinned,
        vec![64, 0, 0, 0],
        "the kernel's route takes every flow"
    );
    let out = MP.at(&t.r, "get 198.51.100.1");
    assert!(
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains("no route managed by mproute"),
        "get: not a managed destination any more: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // It goes: the hole goes at the next verification, and the flows spread again.
    t.r.ip_ok("route del 198.51.100.0/28");
    MP.ok(&t.r, "sync");
    assert_eq!(used(&run_flows(&t, &flows, 1, false)), spread, "as before");

    // IPv6 (never verified: every packet takes the per-packet check), metric 1024 like ours.
    let flows6 = traffic::flows(64, true, 36000);
    let spread6 = used(&run_flows(&t, &flows6, 1, false));
    assert!(
        spread6.iter().filter(|n| **n > 0).count() >= 3,
        "IPv6: l4-hash spreads the flows: {spread6:?}"
    );
    t.r.ip_ok(&format!(
        "-6 route add 2001:db8:100::/80 via {} dev {}",
        FourPaths::nexthop_v6(1),
        FourPaths::dev(1)
    ));
    MP.ok(&t.r, "sync");
    assert_eq!(
        used(&run_flows(&t, &flows6, 1, false)),
        vec![0, 64, 0, 0],
        "IPv6: the kernel's route takes every flow"
    );
    t.r.ip_ok("-6 route del 2001:db8:100::/80");
    MP.ok(&t.r, "sync");
    assert_eq!(
        used(&run_flows(&t, &flows6, 1, false)),
        spread6,
        "IPv6: as before"
    );
}

/// A managed route replaced with ip route behind mproute's back (other nexthops): from the next
/// verification (any mproute change) its packets are the kernel's, `show` says nothing enforces
/// it and `get` refuses; `sync` then takes the FIB's nexthops with the algorithm kept (protocol
/// mproute) or forgets the route (another protocol). Oracle: AF_PACKET counters at the nexthops.
#[test]
fn a_route_changed_behind_our_back_is_left_to_the_kernel_until_sync_settles_it() {
    require_root();
    let t = setup("drift", "l4-hash", [1, 1, 1, 1], "tc");
    let flows = traffic::flows(64, false, 37000);
    let used = |seen: &[Vec<u64>]| -> Vec<u64> { sum_per_nexthop(&[seen.to_vec()]) };
    let spread = used(&run_flows(&t, &flows, 1, false));
    assert!(
        spread.iter().filter(|n| **n > 0).count() >= 3,
        "l4-hash spreads the flows: {spread:?}"
    );
    let (nh0, nh1, nh3) = (
        FourPaths::nexthop_v4(0),
        FourPaths::nexthop_v4(1),
        FourPaths::nexthop_v4(3),
    );
    let (d0, d1, d3) = (FourPaths::dev(0), FourPaths::dev(1), FourPaths::dev(3));
    t.r.ip_ok(&format!("route replace 198.51.100.0/24 proto 245 nexthop via {nh0} dev {d0} nexthop via {nh1} dev {d1}"));
    // Any mproute change verifies the dataplane's routes: here an unrelated one.
    MP.ok(&t.r, &format!("add 203.0.113.0/24 via {nh3} dev {d3}"));
    let kernel = used(&run_flows(&t, &flows, 1, false));
    assert_eq!(
        (kernel[0] + kernel[1], kernel[2] + kernel[3]),
        (64, 0),
        "only the kernel's two nexthops: {kernel:?}"
    );
    let row = &MP.json(&t.r, "show 198.51.100.0/24")[0];
    assert_eq!(
        (&row["managed"], &row["enforced_by"]),
        (&Value::Bool(true), &Value::from("none")),
        "{row}"
    );
    let out = MP.at(&t.r, "get 198.51.100.1");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() == Some(2) && err.contains("no longer the one mproute installed"),
        "get: {err}"
    );
    let s = MP.json(&t.r, "sync");
    assert!(
        s["actions"].as_array().is_some_and(|a| a
            .iter()
            .any(|a| a["action"] == "updated" && a["dst"] == "198.51.100.0/24")),
        "{s}"
    );
    let row = &MP.json(&t.r, "show 198.51.100.0/24")[0];
    assert_eq!(
        (&row["algo"], &row["enforced_by"]),
        (&Value::from("l4-hash"), &Value::from("tc")),
        "{row}"
    );
    let two = used(&run_flows(&t, &flows, 1, false));
    assert!(
        two[0] > 0 && two[1] > 0 && two[2] + two[3] == 0,
        "l4-hash over the FIB's two nexthops: {two:?}"
    );
    // Only the weights changed with ip route: sync takes them too.
    let weighted = |w0: &str, w1: &str| {
        t.r.ip_ok(&format!("route replace 198.51.100.0/24 proto 245 nexthop via {nh0} dev {d0} weight {w0} nexthop via {nh1} dev {d1} weight {w1}"));
    };
    weighted("3", "1");
    let s = MP.json(&t.r, "sync");
    assert!(
        s["actions"].as_array().is_some_and(|a| a
            .iter()
            .any(|a| a["action"] == "updated" && a["dst"] == "198.51.100.0/24")),
        "weights: {s}"
    );
    let g = &MP.json(&t.r, "get 198.51.100.1")[0];
    let weights: Vec<u64> = g["nexthops"]
        .as_array()
        .map(|a| a.iter().filter_map(|n| n["weight"].as_u64()).collect())
        .unwrap_or_default();
    assert_eq!(weights, vec![3, 1], "{g}");
    // Drifted again (other weights), then written again with mproute: that settles it, and
    // says it changed something.
    weighted("1", "1");
    MP.ok(&t.r, &format!("add 203.0.113.128/25 via {nh3} dev {d3}"));
    assert_eq!(MP.at(&t.r, "get 198.51.100.1").status.code(), Some(2));
    let r = MP.json(
        &t.r,
        &format!("replace 198.51.100.0/24 algo l4-hash nexthop via {nh0} dev {d0} nexthop via {nh1} dev {d1}"),
    );
    assert_eq!(r["changed"], true, "{r}");
    assert!(MP.at(&t.r, "get 198.51.100.1").status.success());
    // Another protocol: not mproute's route any more.
    t.r.ip_ok(&format!("route replace 198.51.100.0/24 via {nh3} dev {d3}"));
    let s = MP.json(&t.r, "sync");
    assert!(
        s["actions"].as_array().is_some_and(|a| a
            .iter()
            .any(|a| a["action"] == "forgotten" && a["dst"] == "198.51.100.0/24")),
        "{s}"
    );
    let row = &MP.json(&t.r, "show 198.51.100.0/24")[0];
    assert_eq!(row["managed"], false, "{row}");
    assert_eq!(used(&run_flows(&t, &flows, 1, false)), vec![0, 0, 0, 64]);
}

/// `show` tells what the dataplane enforces route by route: a route of another table (the
/// dataplane looks up the main table) and a protocol-mproute route added with ip route (not in
/// the state until sync adopts it) are not; `replace` installs the route as given (no `algo`:
/// l3-hash) and a route with other nexthops counts from zero.
#[test]
fn show_tells_route_by_route_what_the_dataplane_enforces() {
    require_root();
    let t = setup("enf", "per-packet", [1, 1, 1, 1], "tc");
    let (nh0, nh1, nh2) = (
        FourPaths::nexthop_v4(0),
        FourPaths::nexthop_v4(1),
        FourPaths::nexthop_v4(2),
    );
    let (d0, d1, d2) = (FourPaths::dev(0), FourPaths::dev(1), FourPaths::dev(2));
    t.r.ip_ok(&format!(
        "route add 192.0.2.0/24 proto 245 via {nh0} dev {d0}"
    ));
    MP.ok(
        &t.r,
        &format!("add 198.18.5.0/24 table 100 algo per-packet nexthop via {nh0} dev {d0} nexthop via {nh1} dev {d1}"),
    );
    let show = |args: &[&str]| MP.json(&t.r, args)[0].clone();
    let orphan = show(&["show", "192.0.2.0/24"]);
    assert_eq!(
        (&orphan["managed"], &orphan["algo"], &orphan["enforced_by"]),
        (&Value::Bool(false), &Value::Null, &Value::Null),
        "{orphan}"
    );
    let other_table = show(&["show", "198.18.5.0/24", "table", "100"]);
    assert_eq!(other_table["enforced_by"], "none", "{other_table}");
    assert_eq!(show(&["show", "198.51.100.0/24"])["enforced_by"], "tc");

    let flows = traffic::flows(8, false, 38000);
    run_flows(&t, &flows, 4, false);
    let counted = show(&["-s", "show", "198.51.100.0/24"]);
    let packets = |row: &Value| -> Vec<u64> {
        row["nexthops"]
            .as_array()
            .map(|a| a.iter().filter_map(|n| n["packets"].as_u64()).collect())
            .unwrap_or_default()
    };
    assert!(packets(&counted).iter().sum::<u64>() > 0, "{counted}");
    MP.ok(
        &t.r,
        &format!("replace 198.51.100.0/24 nexthop via {nh1} dev {d1} nexthop via {nh2} dev {d2}"),
    );
    let replaced = show(&["-s", "show", "198.51.100.0/24"]);
    assert_eq!(replaced["algo"], "l3-hash", "{replaced}");
    assert_eq!(packets(&replaced), vec![0, 0], "{replaced}");
}

/// A closed standard output (`mproute dataplane show | head -1`) ends nothing badly: exit 0,
/// no panic message.
#[test]
fn a_closed_stdout_is_not_a_crash() {
    require_root();
    let t = setup("pipe", "l3-hash", [1, 1, 1, 1], "tc");
    let mut fds = [0i32; 2];
    // SAFETY: pipe(2) fills two fds we own from here on.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    // SAFETY: fresh fds from pipe(2), each wrapped once.
    let (read, write) = unsafe {
        use std::os::fd::FromRawFd;
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    };
    drop(read);
    let out = std::process::Command::new(MPROUTE)
        .args(["-n", t.r.name(), "dataplane", "show"])
        .stdout(std::process::Stdio::from(write))
        .output()
        .expect("run mproute");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !err.contains("panicked"),
        "{:?}: {err}",
        out.status
    );
}

fn csum(b: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in b.chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// From the client, an ICMP port-unreachable about a UDP flow that came from the server:
/// its embedded header is the flow in the reverse direction.
fn send_icmp_errors(t: &FourPaths, flows: &[FlowSpec]) {
    traffic::in_netns(&t.c, || {
        // SAFETY: a raw socket we own, closed below; buffers outlive each call.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP);
            assert!(fd >= 0, "raw socket");
            for f in flows {
                let (std::net::IpAddr::V4(src), std::net::IpAddr::V4(dst)) = (f.src, f.dst) else {
                    continue;
                };
                let mut inner = vec![0x45u8, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0];
                inner.extend_from_slice(&dst.octets());
                inner.extend_from_slice(&src.octets());
                let c = csum(&inner);
                inner[10..12].copy_from_slice(&c.to_be_bytes());
                inner.extend_from_slice(&f.dport.to_be_bytes());
                inner.extend_from_slice(&f.sport.to_be_bytes());
                inner.extend_from_slice(&[0, 8, 0, 0]);
                let mut icmp = vec![3u8, 3, 0, 0, 0, 0, 0, 0];
                icmp.extend_from_slice(&inner);
                let c = csum(&icmp);
                icmp[2..4].copy_from_slice(&c.to_be_bytes());
                let sa = libc::sockaddr_in {
                    sin_family: libc::AF_INET as u16,
                    sin_port: 0,
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(dst.octets()),
                    },
                    sin_zero: [0; 8],
                };
                let n = libc::sendto(
                    fd,
                    icmp.as_ptr().cast(),
                    icmp.len(),
                    0,
                    (&sa as *const libc::sockaddr_in).cast(),
                    std::mem::size_of::<libc::sockaddr_in>() as u32,
                );
                assert_eq!(n, icmp.len() as isize, "sendto");
            }
            libc::close(fd);
        }
    });
}

#[test]
fn icmp_errors_follow_their_flow() {
    require_root();
    let t = setup("icmp", "l4-hash", [1, 1, 1, 1], "xdp");
    let flows = traffic::flows(100, false, 34000);
    let seen = run_flows(&t, &flows, 1, false);
    let counters: Vec<FlowCounter> = t.n.iter().map(|n| FlowCounter::start(n, "eth0")).collect();
    send_icmp_errors(&t, &flows);
    let counts = FlowCounter::stop_all(counters);
    let mut spread = std::collections::BTreeSet::new();
    for (f, c) in flows.iter().zip(&seen) {
        let flow_nh = (0..4).find(|i| c[*i] > 0).expect("flow delivered");
        spread.insert(flow_nh);
        // The embedded packet: from the server back to the client.
        let inner = traffic::FlowTuple {
            src: f.dst,
            dst: f.src,
            proto: 17,
            sport: f.dport,
            dport: f.sport,
        };
        let err_nh: Vec<usize> = (0..4)
            .filter(|i| counts[*i].icmp_errors.get(&inner).copied().unwrap_or(0) > 0)
            .collect();
        assert_eq!(
            err_nh,
            vec![flow_nh],
            "ICMP error about {f:?} left by {err_nh:?}, its flow by {flow_nh}"
        );
    }
    assert!(
        spread.len() > 1,
        "the flows used several nexthops: {spread:?}"
    );
}

#[test]
fn a_link_going_down_moves_its_flows_and_comes_back() {
    link_down_case("down", false);
}

#[test]
fn losing_carrier_moves_flows_too() {
    link_down_case("carrier", true);
}

/// Admin down of the router's side, or loss of carrier (the peer's side goes down).
fn link_down_case(tag: &str, carrier: bool) {
    require_root();
    let t = setup(tag, "l4-hash", [1, 1, 1, 1], "tc");
    let flows = traffic::flows(120, false, 36000);
    let counters: Vec<FlowCounter> = t.n.iter().map(|n| FlowCounter::start(n, "eth0")).collect();
    const ROUNDS: u32 = 240;
    let start = std::time::Instant::now();
    let dead_flag = std::thread::scope(|s| {
        let h = s.spawn(|| {
            let mut dead_flag = None;
            for round in 0..ROUNDS {
                traffic::send_udp_flows(&t.c, &flows, 1);
                if round == 120 {
                    // get names the kernel's flags of the nexthop that is down
                    let g = MP.json(&t.r, &format!("get {}", traffic::DEST_V4));
                    dead_flag = Some(g[0]["nexthops"][1]["flags"].clone());
                }
                if round == 80 {
                    if carrier {
                        t.n[1].ip_ok("link set eth0 down");
                    } else {
                        t.r.ip_ok("link set v1 down");
                    }
                }
                if round == 160 {
                    if carrier {
                        t.n[1].ip_ok("link set eth0 up");
                    } else {
                        t.r.ip_ok("link set v1 up");
                        t.r.ip_ok("addr replace 10.2.0.1/24 dev v1");
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(8));
            }
            dead_flag
        });
        h.join().expect("sender thread")
    });
    let elapsed = start.elapsed().as_secs_f64();
    assert!(
        dead_flag
            .as_ref()
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|x| x == "dead")),
        "get while the link is down: {dead_flag:?}"
    );
    let counts = FlowCounter::stop_all(counters);
    let per_flow = traffic::per_flow_counts(&flows, 17, &counts);
    let per_round = elapsed / f64::from(ROUNDS);
    let mut moved = 0;
    let mut came_back = 0;
    for (f, c) in flows.iter().zip(&per_flow) {
        let total: u64 = c.iter().sum();
        let lost = u64::from(ROUNDS).saturating_sub(total);
        assert!(
            lost as f64 * per_round <= 1.0,
            "flow {f:?} lost {lost} packets ({:.2} s): {c:?}",
            lost as f64 * per_round
        );
        if c[1] > 0 && c.iter().enumerate().any(|(i, n)| i != 1 && *n > 0) {
            moved += 1;
            if c[1] > 90 {
                came_back += 1;
            }
        }
    }
    assert!(
        moved > 0,
        "some flows were on the link that went down and moved"
    );
    assert!(
        came_back > 0,
        "flows return to the nexthop when its link is back"
    );
}

/// The dataplane's IPv4 FIB check as `dataplane show` reports it.
fn fib_check(t: &FourPaths) -> Value {
    MP.json(&t.r, "dataplane show")["fib_check"].clone()
}

/// Every flow's packets arrived at exactly the nexthop `want` names for it.
fn all_at(seen: &[Vec<u64>], want: &[usize], per_flow: u64, what: &str) {
    for (i, (c, w)) in seen.iter().zip(want).enumerate() {
        let mut expect = vec![0u64; 4];
        expect[*w] = per_flow;
        assert_eq!(*c, expect, "{what}: flow {i} (per nexthop)");
    }
}

/// A managed IPv4 route verified at the current FIB generation is forwarded without the
/// per-packet kernel lookup; any FIB change ends that at once, so a more specific route added
/// with ip wins again, and a managed route deleted with ip is no longer forwarded; the next
/// mproute command verifies again. The nexthop namespaces' AF_PACKET counters are the oracle.
#[test]
fn verified_routes_skip_the_kernel_lookup_until_the_fib_changes() {
    require_root();
    let t = setup("verified", "l4-hash", [1, 1, 1, 1], "tc");
    let flows = traffic::flows(64, false, 37000);
    let predicted = predicted_all(&t, &flows, "udp");
    let spread: std::collections::BTreeSet<usize> = predicted.iter().copied().collect();
    assert!(spread.len() > 1, "64 flows over 4 nexthops: {spread:?}");

    let v = fib_check(&t);
    assert_eq!(v["routes"], 1, "{v}");
    assert_eq!(v["skipped"], 1, "verified at attach: {v}");
    assert_eq!(v["verified_at"], v["generation"], "{v}");
    all_at(&run_flows(&t, &flows, 2, false), &predicted, 2, "verified");

    // A more specific route for the destination, behind mproute's back: the kernel's. (With
    // another metric: the per-packet check tells routes through a group gateway apart by it.)
    let dst32 = format!("{}/32", traffic::DEST_V4);
    let (via, dev) = (FourPaths::nexthop_v4(2), FourPaths::dev(2));
    t.r.ip_ok(&format!("route add {dst32} via {via} dev {dev} metric 5"));
    let v = fib_check(&t);
    assert_eq!(v["skipped"], 0, "{v}");
    assert!(
        v["unverified"][0]["why"]
            .as_str()
            .is_some_and(|w| w.contains(&format!("{dst32} (table 254) inside it"))),
        "{v}"
    );
    all_at(
        &run_flows(&t, &flows, 2, false),
        &[2; 64],
        2,
        "a more specific kernel route",
    );

    // Gone again: checked packet by packet until verified again, and ours again.
    t.r.ip_ok(&format!("route del {dst32} metric 5"));
    assert_eq!(fib_check(&t)["skipped"], 0);
    all_at(
        &run_flows(&t, &flows, 2, false),
        &predicted,
        2,
        "checked per packet",
    );
    MP.ok(&t.r, "sync");
    assert_eq!(fib_check(&t)["skipped"], 1, "sync verifies again");

    // The managed route deleted behind mproute's back: verification marked it used in the
    // kernel, so the delete moves the generation and the dataplane stops forwarding it.
    let before = redirected(&t);
    t.r.ip_ok("route del 198.51.100.0/24");
    assert_eq!(fib_check(&t)["skipped"], 0);
    // (nothing arrives anywhere: every nexthop's count is 0)
    all_at(
        &run_flows(&t, &flows, 2, false),
        &[0; 64],
        0,
        "no route in the kernel",
    );
    assert_eq!(
        redirected(&t),
        before,
        "the dataplane forwarded none of them"
    );

    // A batch of nothing but adds verifies at its end too: the new route is, the one whose
    // kernel route is gone is not.
    let add = format!(
        "add 203.0.113.0/24 nexthop via {} dev {}",
        FourPaths::nexthop_v4(0),
        FourPaths::dev(0)
    );
    mpt_testkit::batch_json_lines(MPROUTE, &["-n", t.r.name(), "-j", "-b", "-"], &[add]);
    let v = fib_check(&t);
    assert_eq!(
        (v["routes"].as_u64(), v["skipped"].as_u64()),
        (Some(2), Some(1)),
        "{v}"
    );
    assert_eq!(v["verified_at"], v["generation"], "{v}");
    assert_eq!(v["unverified"][0]["dst"], "198.51.100.0/24", "{v}");

    // An attach followed by adds in one batch: verified at the end, after the adds too.
    let lines = [
        "dataplane attach dev vc tc".to_string(),
        format!(
            "add 203.0.114.0/24 nexthop via {} dev {}",
            FourPaths::nexthop_v4(1),
            FourPaths::dev(1)
        ),
    ];
    mpt_testkit::batch_json_lines(MPROUTE, &["-n", t.r.name(), "-j", "-b", "-"], &lines);
    let v = fib_check(&t);
    assert_eq!(
        (v["routes"].as_u64(), v["skipped"].as_u64()),
        (Some(3), Some(2)),
        "{v}"
    );
    assert_eq!(v["verified_at"], v["generation"], "{v}");
}

/// `mproute dataplane watch` in the background, killed on drop (panics included); its output
/// lines arrive on a channel.
struct Watcher {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    /// The `trigger` of the last report read.
    trigger: std::cell::RefCell<String>,
}

impl Watcher {
    fn start(ns: &Netns) -> Watcher {
        let mut cmd = std::process::Command::new(MPROUTE);
        cmd.args(["-n", ns.name(), "-j", "dataplane", "watch"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit());
        // killed with the test process too, should the harness kill that
        // SAFETY: prctl(2) only, between fork and exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd.spawn().expect("start mproute dataplane watch");
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Watcher {
            child,
            lines,
            trigger: std::cell::RefCell::default(),
        }
    }

    /// The next report (within 8 s), without its time stamp (checked: RFC 3339 UTC with
    /// milliseconds) and its trigger (kept, see [`Watcher::trigger`]).
    fn next(&self, what: &str) -> Value {
        let l = self
            .lines
            .recv_timeout(std::time::Duration::from_secs(8))
            .unwrap_or_else(|e| panic!("{what}: no report from dataplane watch: {e}"));
        let mut v: Value =
            serde_json::from_str(&l).unwrap_or_else(|e| panic!("{what}: {l:?}: {e}"));
        let m = v.as_object_mut().expect("a JSON object");
        let time = m.remove("time").unwrap_or_default();
        let time = time.as_str().unwrap_or_default();
        // 2026-12-04T19:05:00.123Z
        assert!(
            time.len() == 24 && time.ends_with('Z') && &time[10..11] == "T" && &time[19..20] == ".",
            "{what}: time stamp {time:?} in {l}"
        );
        let trigger = m.remove("trigger").unwrap_or_default();
        *self.trigger.borrow_mut() = trigger.as_str().unwrap_or_default().to_string();
        v
    }

    /// What triggered the last report read: `start`, `tick`, `retry` or the netlink kinds.
    fn trigger(&self) -> String {
        self.trigger.borrow().clone()
    }

    /// Read reports until none has come for `quiet` (late ones from earlier changes), at most
    /// for 10 s.
    fn drain(&self, quiet: std::time::Duration) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < deadline && self.lines.recv_timeout(quiet).is_ok() {}
    }

    /// The first report `ok` accepts (others, e.g. after a late link notification, are
    /// skipped), within 8 s (the watcher looks at the generation every 5 s).
    fn until(&self, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(8);
        loop {
            let v = self.next(what);
            if ok(&v) {
                return v;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: last report {v}"
            );
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Foreign FIB changes (a route added with ip, a link flap) turn the skip off; `dataplane
/// watch` verifies again after each, without any mproute command, and only what holds: a
/// more specific route inside the managed prefix keeps it checked per packet.
#[test]
fn dataplane_watch_verifies_again_after_foreign_changes() {
    require_root();
    let t = setup("watch", "l4-hash", [1, 1, 1, 1], "tc");
    let w = Watcher::start(&t.r);
    let v = w.next("start");
    assert_eq!(v["skipped"], 1, "{v}");
    assert_eq!(w.trigger(), "start");

    // an unrelated route: the generation moves, the watcher verifies again
    let before = fib_check(&t)["generation"].clone();
    t.r.ip_ok(&format!(
        "route add 192.0.2.0/24 via {}",
        FourPaths::nexthop_v4(0)
    ));
    let v = w.until("after ip route add", |v| v["generation"] != before);
    assert_eq!(v["skipped"], 1, "{v}");
    assert_eq!(v["verified_at"], v["generation"], "{v}");
    assert!(
        w.trigger().split(',').any(|k| k == "route"),
        "{}",
        w.trigger()
    );

    // a link flap: down and up are FIB changes too; in the end verified again
    t.r.ip_ok(&format!("link set {} down", FourPaths::dev(1)));
    t.r.ip_ok(&format!("link set {} up", FourPaths::dev(1)));
    let seen = std::cell::RefCell::new(Vec::new());
    w.until("after a link flap", |v| {
        seen.borrow_mut()
            .extend(w.trigger().split(',').map(String::from));
        v["skipped"] == 1 && v["verified_at"] == v["generation"] && *v == fib_check(&t)
    });
    let seen = seen.into_inner();
    assert!(seen.iter().any(|k| k == "link-down"), "{seen:?}");

    // a change the kernel announces to nobody (the route cache flush moves the generation):
    // the watcher's periodic look at the generation catches it
    let before = fib_check(&t)["generation"].clone();
    t.r.ip_ok("route flush cache");
    let v = w.until("after ip route flush cache", |v| v["generation"] != before);
    assert_eq!(v["skipped"], 1, "{v}");
    assert_eq!(v["verified_at"], v["generation"], "{v}");
    // announced to nobody: found by the periodic look (`tick`), unless a late notification of
    // the link flap came first; either way a trigger of the vocabulary
    let known = [
        "tick",
        "retry",
        "netlink",
        "route",
        "addr",
        "rule",
        "netconf",
        "nexthop",
        "link-up",
        "link-down",
        "link-del",
        "link",
        "overrun",
        "other",
    ];
    assert!(
        w.trigger().split(',').all(|k| known.contains(&k)),
        "{}",
        w.trigger()
    );

    // what does not hold is not verified: a more specific route inside the managed prefix
    let dst32 = format!("{}/32", traffic::DEST_V4);
    t.r.ip_ok(&format!(
        "route add {dst32} via {} metric 5",
        FourPaths::nexthop_v4(2)
    ));
    let v = w.until("after a more specific route", |v| v["skipped"] == 0);
    assert!(
        v["unverified"][0]["why"]
            .as_str()
            .is_some_and(|s| s.contains("inside it")),
        "{v}"
    );

    // reports still due from the link flap (DAD, link-local routes) go first
    w.drain(std::time::Duration::from_millis(2500));
    // IPv6 (the IPv4 generation does not move): a route with the managed route's metric and
    // one of its gateways (link 3: the flap took link 1's IPv6 address) inside its prefix, which the per-packet check cannot tell from it;
    // the watcher verifies again on the kernel's notification and enters the hole
    t.r.ip_ok(&format!(
        "-6 route add 2001:db8:100::/80 via {} dev {}",
        FourPaths::nexthop_v6(3),
        FourPaths::dev(3)
    ));
    w.next("after an IPv6 route");
    let flows6 = traffic::flows(64, true, 39000);
    assert_eq!(
        sum_per_nexthop(&[run_flows(&t, &flows6, 1, false)]),
        vec![0, 0, 0, 64],
        "IPv6: the kernel's route takes every flow"
    );
}

/// `mproute VERB 198.51.100.0/24 algo l4-hash resilient buckets 64 EXTRA` over the nexthops `which`
/// of the four.
fn resilient_route(t: &FourPaths, verb: &str, which: &[usize], extra: &[&str]) {
    let mut args: Vec<String> = [
        verb,
        "198.51.100.0/24",
        "algo",
        "l4-hash",
        "resilient",
        "buckets",
        "64",
    ]
    .map(String::from)
    .to_vec();
    args.extend(extra.iter().map(|w| w.to_string()));
    for i in which {
        args.extend([
            "nexthop".into(),
            "via".into(),
            FourPaths::nexthop_v4(*i),
            "dev".into(),
            FourPaths::dev(*i),
        ]);
    }
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    MP.ok(&t.r, &a);
}

/// The nexthop (of the four) each flow left by, checking that it left by exactly one.
fn left_by(seen: &[Vec<u64>], flows: &[FlowSpec]) -> Vec<usize> {
    seen.iter()
        .zip(flows)
        .map(|(c, f)| {
            let hit: Vec<usize> = (0..4).filter(|i| c[*i] > 0).collect();
            assert_eq!(hit.len(), 1, "flow {f:?} left by {hit:?} ({c:?})");
            hit[0]
        })
        .collect()
}

/// A resilient route with real traffic: `mproute get` names each flow's bucket and agrees with
/// the dataplane on every flow; replacing the route without one nexthop moves exactly the flows
/// that nexthop carried, every other flow stays where it was (hash-threshold would move about
/// half of them); `show -d` prints the table's fill.
#[test]
fn resilient_routes_move_only_the_flows_of_a_removed_nexthop() {
    if dataplane_refused_here() {
        return;
    }
    require_root();
    let t = FourPaths::new("resil");
    resilient_route(&t, "add", &[0, 1, 2, 3], &[]);
    for n in &t.n {
        MP.ok(n, "dataplane attach dev eth0 xdp");
    }
    MP.ok(&t.r, "dataplane attach dev vc");
    let flows = traffic::flows(800, false, 21000);
    let before = left_by(&run_flows(&t, &flows, 2, false), &flows);
    assert_eq!(
        predicted_all(&t, &flows, "udp"),
        before,
        "mproute get disagrees with the dataplane"
    );
    let g = &MP.json(
        &t.r,
        &format!(
            "get {} from {} ipproto udp sport {} dport {}",
            flows[0].dst, flows[0].src, flows[0].sport, flows[0].dport
        ),
    )[0];
    assert!(
        g["bucket"].as_u64().is_some_and(|b| b < 64),
        "get names the bucket: {g}"
    );
    let row = &MP.json(&t.r, "-d show 198.51.100.0/24")[0];
    assert_eq!(row["resilient"]["buckets"], 64);
    let fill: Vec<u64> = row["nexthops"]
        .as_array()
        .expect("nexthops")
        .iter()
        .map(|n| n["buckets"].as_u64().expect("fill"))
        .collect();
    assert_eq!(fill, [16, 16, 16, 16]);

    // nexthop 1 goes
    resilient_route(&t, "replace", &[0, 2, 3], &[]);
    let after = left_by(&run_flows(&t, &flows, 2, false), &flows);
    let kept = [0usize, 2, 3];
    let predicted: Vec<usize> = predicted_all(&t, &flows, "udp")
        .iter()
        .map(|i| kept[*i])
        .collect();
    assert_eq!(
        predicted, after,
        "mproute get disagrees with the dataplane after the change"
    );
    let mut carried = 0;
    for ((b, a), f) in before.iter().zip(&after).zip(&flows) {
        if *b == 1 {
            carried += 1;
            assert_ne!(*a, 1, "{f:?} still on the removed nexthop");
        } else {
            assert_eq!(
                a, b,
                "{f:?} moved from nexthop {b} to {a}, though its nexthop stayed"
            );
        }
    }
    assert!(carried > 100, "nexthop 1 carried {carried} of 800 flows");
    let row = &MP.json(&t.r, "-d show 198.51.100.0/24")[0];
    let fill: Vec<u64> = row["nexthops"]
        .as_array()
        .expect("nexthops")
        .iter()
        .map(|n| n["buckets"].as_u64().expect("fill"))
        .collect();
    assert_eq!(fill.iter().sum::<u64>(), 64);
    assert!(fill.iter().all(|f| (21..=22).contains(f)), "{fill:?}");
}

/// The fill of the resilient route's table, per nexthop (`show -d`).
fn fill(t: &FourPaths) -> Vec<u64> {
    MP.json(&t.r, "-d show 198.51.100.0/24")[0]["nexthops"]
        .as_array()
        .expect("nexthops")
        .iter()
        .map(|n| n["buckets"].as_u64().expect("fill"))
        .collect()
}

/// A nexthop added to a resilient route takes only idle buckets: while every bucket carries
/// traffic the new nexthop gets none (flows in progress keep their path); once they have been
/// idle for the idle timer, `dataplane watch` moves its share to it.
#[test]
fn an_added_nexthop_takes_buckets_only_once_they_are_idle() {
    require_root();
    let t = FourPaths::new("resadd");
    let route = |which: &[usize]| resilient_route(&t, "replace", which, &["idle-timer", "8"]);
    route(&[0, 1, 2]);
    for n in &t.n {
        MP.ok(n, "dataplane attach dev eth0 xdp");
    }
    MP.ok(&t.r, "dataplane attach dev vc");
    assert_eq!(fill(&t), [22, 21, 21]);
    // every bucket busy (2,000 flows over 64 buckets), then the fourth nexthop
    let flows = traffic::flows(2000, false, 23000);
    let _ = run_flows(&t, &flows, 1, false);
    route(&[0, 1, 2, 3]);
    let busy = fill(&t);
    assert_eq!(busy, [22, 21, 21, 0], "busy buckets moved");
    // idle for the timer: the watcher rebalances
    let w = Watcher::start(&t.r);
    let _ = w.next("first report");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while fill(&t) != [16, 16, 16, 16] {
        assert!(
            std::time::Instant::now() < deadline,
            "dataplane watch did not move the idle buckets: {:?}",
            fill(&t)
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// The gateways of `prefix`'s route in `ns` as `ip -j route` shows them (none: no route).
fn gateways(ns: &Netns, prefix: &str) -> Vec<String> {
    let j = ns.ip_json(&format!("-4 route show {prefix}"));
    let Some(r) = j.get(0) else {
        return Vec::new();
    };
    let gw = |v: &Value| v["gateway"].as_str().unwrap_or("-").to_string();
    match r["nexthops"].as_array() {
        Some(n) => n.iter().map(gw).collect(),
        None => vec![gw(r)],
    }
}

/// Poll `ok` every 100 ms for up to 10 s; panic with `state()` if it never holds.
fn eventually(what: &str, ok: impl Fn() -> bool, state: impl Fn() -> String) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within 10 s; {}",
            state()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// With --nexthop-objects, the kernel deletes a path's object when its link loses its carrier
/// or goes down, a group left empty with it, and the routes that referenced it, and brings
/// nothing back: `dataplane watch` puts back the objects (the same ids) and the routes when
/// the links are up again, and traffic flows. `ip -j route` and `ip -j nexthop` are the
/// oracle, a ping over the restored route the traffic.
#[test]
fn watch_puts_back_the_nexthop_objects_a_link_flap_deleted() {
    require_root();
    let t = mpt_testkit::TwoPaths::new("nhflap");
    for n in [&t.a, &t.b] {
        n.ip_ok("addr add 198.18.7.1/32 dev lo");
    }
    let (two, one) = ("198.18.7.0/24", "198.18.8.0/24");
    MP.ok(
        &t.r,
        &format!(
            "--nexthop-objects add {two} nexthop via 10.1.0.2 dev va nexthop via 10.2.0.2 dev vb"
        ),
    );
    MP.ok(
        &t.r,
        &format!("--nexthop-objects add {one} via 10.1.0.2 dev va"),
    );
    let both = vec!["10.1.0.2".to_string(), "10.2.0.2".to_string()];
    let state = || {
        format!(
            "routes {:?} / {:?}, objects {}",
            gateways(&t.r, two),
            gateways(&t.r, one),
            t.r.ip_json("nexthop show")
        )
    };
    let restored = || gateways(&t.r, two) == both && gateways(&t.r, one) == ["10.1.0.2"];
    assert!(restored(), "{}", state());
    // what must come back: each route's object id, and as many objects (no leftovers)
    let objects = || {
        let nhid = |p| t.r.ip_json(&format!("-4 route show {p}"))[0]["nhid"].clone();
        let n = t.r.ip_json("nexthop show").as_array().map_or(0, Vec::len);
        (nhid(two), nhid(one), n)
    };
    let before = objects();
    assert_eq!(before.2, 3, "{}", state());
    let w = Watcher::start(&t.r);
    w.next("start");

    // a's end down: va loses its carrier; the kernel deletes va's object, so the one-path
    // route goes and the group keeps vb only
    t.a.ip_ok("link set eth0 down");
    eventually(
        "the kernel's deletion on carrier loss",
        || gateways(&t.r, one).is_empty() && gateways(&t.r, two) == ["10.2.0.2"],
        state,
    );
    t.a.ip_ok("link set eth0 up");
    eventually("restored after the carrier came back", restored, state);
    // the routes name the objects they named, and nothing is left over
    assert_eq!(objects(), before, "{}", state());

    // both links down: the group goes and the two-path route with it; up again: back
    t.r.ip_ok("link set va down");
    t.r.ip_ok("link set vb down");
    eventually(
        "the kernel's deletion on admin down",
        || gateways(&t.r, one).is_empty() && gateways(&t.r, two).is_empty(),
        state,
    );
    // while the links are down, sync keeps the routes (it would forget a deleted one)
    let rows: Value = serde_json::from_str(&MP.ok(&t.r, "-j sync")).expect("sync -j");
    let waiting = rows["actions"]
        .as_array()
        .map_or(0, |a| a.iter().filter(|r| r["action"] == "waiting").count());
    assert_eq!(waiting, 2, "sync while the links are down: {rows}");
    assert_eq!(rows["changed"], false, "{rows}");
    t.r.ip_ok("link set va up");
    t.r.ip_ok("link set vb up");
    eventually("restored after both links came back", restored, state);
    assert_eq!(objects(), before, "{}", state());
    // and packets take the restored route
    let ping = t.r.exec("ping", "-c 1 -W 2 198.18.7.1");
    assert!(
        ping.status.success(),
        "ping over the restored route: {ping:?}"
    );
    drop(w);
    // without watch, sync does the same
    t.a.ip_ok("link set eth0 down");
    eventually(
        "carrier loss again",
        || gateways(&t.r, one).is_empty(),
        state,
    );
    t.a.ip_ok("link set eth0 up");
    let rows: Value = serde_json::from_str(&MP.ok(&t.r, "-j sync")).expect("sync -j");
    assert!(restored(), "after sync: {rows}; {}", state());
    assert_eq!(rows["actions"][0]["action"], "restored", "{rows}");
    assert_eq!(rows["changed"], true, "{rows}");
    assert_eq!(objects(), before, "{}", state());
}

/// A route of ours deleted on purpose (`ip route del`) stays deleted: once its object is
/// collected (an mproute command that removed routes), neither sync nor watch puts it back.
#[test]
fn a_route_deleted_behind_our_back_is_not_restored_with_its_object() {
    require_root();
    let t = mpt_testkit::TwoPaths::new("nhgone");
    let (gone, other) = ("198.18.9.0/24", "198.18.10.0/24");
    MP.ok(
        &t.r,
        &format!("--nexthop-objects add {gone} via 10.1.0.2 dev va"),
    );
    t.r.ip_ok(&format!("route del {gone}"));
    // an unrelated add and del: the del collects objects no route references
    MP.ok(
        &t.r,
        &format!("--nexthop-objects add {other} via 10.2.0.2 dev vb"),
    );
    MP.ok(&t.r, &format!("del {other}"));
    let objects = t.r.ip_json("nexthop show");
    assert_eq!(objects.as_array().map_or(0, Vec::len), 0, "{objects}");
    let rows: Value = serde_json::from_str(&MP.ok(&t.r, "-j sync")).expect("sync -j");
    assert!(
        gateways(&t.r, gone).is_empty(),
        "sync brought it back: {rows}"
    );
    let objects = t.r.ip_json("nexthop show");
    assert_eq!(objects.as_array().map_or(0, Vec::len), 0, "{objects}");
}

/// Replace the IPv4 four-way route with `words` between the prefix and the nexthops.
fn recipe_route(t: &FourPaths, words: &str) {
    let mut args: Vec<String> = ["replace", "198.51.100.0/24"].map(String::from).to_vec();
    args.extend(words.split_whitespace().map(String::from));
    for i in 0..4 {
        args.extend([
            "nexthop".into(),
            "via".into(),
            FourPaths::nexthop_v4(i),
            "dev".into(),
            FourPaths::dev(i),
        ]);
    }
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    MP.ok(&t.r, &a);
}

/// Flows to `dsts` destinations of the managed /24 (198.51.100.1..) times `ports` port pairs:
/// flow `d * ports + p` goes to destination `d` with the `p`-th port pair.
fn grid(dsts: usize, ports: usize, base_sport: u16) -> Vec<FlowSpec> {
    let mut v = Vec::new();
    for d in 0..dsts {
        let dst = std::net::IpAddr::V4(std::net::Ipv4Addr::new(198, 51, 100, 1 + d as u8));
        for p in traffic::flows(ports, false, base_sport) {
            v.push(FlowSpec { dst, ..p });
        }
    }
    v
}

/// Send `flows` (UDP) and check the dataplane against `mproute get` on every one; returns the
/// nexthop each left by.
fn recipe_flows(t: &FourPaths, flows: &[FlowSpec], what: &str) -> Vec<usize> {
    let seen = run_flows(t, flows, 1, false);
    let hit = left_by(&seen, flows);
    let predicted = predicted_all(t, flows, "udp");
    let wrong: Vec<_> = flows
        .iter()
        .zip(hit.iter().zip(&predicted))
        .filter(|(_, (h, p))| h != p)
        .collect();
    assert!(
        wrong.is_empty(),
        "{what}: mproute get disagrees with the dataplane on {} of {} flows, e.g. {:?}",
        wrong.len(),
        flows.len(),
        &wrong[..wrong.len().min(3)]
    );
    hit
}

/// A route's hash recipe with real traffic, in tc and XDP: flows that differ only in a field
/// the recipe leaves out leave by one nexthop, flows that differ in a field it keeps spread,
/// `mproute get` (seed included) agrees with the dataplane on every flow, and `show -j`
/// names the recipe.
fn hash_recipe_case(mode: &str) {
    require_root();
    if dataplane_refused_here() {
        return;
    }
    let t = setup(&format!("hf{mode}"), "l4-hash", [1, 1, 1, 1], mode);

    // Ports and protocol, not the addresses: 24 destinations x 40 port pairs.
    recipe_route(
        &t,
        "algo l4-hash hash-fields ip-proto,src-port,dst-port seed 4242",
    );
    let v = MP.json(&t.r, "show 198.51.100.0/24");
    assert_eq!(
        v[0]["hash_fields"],
        serde_json::json!(["ip-proto", "src-port", "dst-port"]),
        "{v}"
    );
    assert_eq!(v[0]["seed"], 4242, "{v}");
    let (dsts, ports) = (24, 40);
    let flows = grid(dsts, ports, 21000);
    let hit = recipe_flows(&t, &flows, "ports recipe");
    for p in 0..ports {
        let by: std::collections::BTreeSet<usize> = (0..dsts).map(|d| hit[d * ports + p]).collect();
        assert_eq!(
            by.len(),
            1,
            "port pair {p}: destinations left by {by:?} (addresses are left out)"
        );
    }
    let used: std::collections::BTreeSet<usize> = hit.iter().copied().collect();
    assert!(
        used.len() >= 3,
        "40 port pairs over 4 nexthops used only {used:?}"
    );

    // The addresses only, on l4-hash: flows differing only in ports stay together.
    recipe_route(&t, "algo l4-hash hash-fields src-ip,dst-ip");
    let v = MP.json(&t.r, "show 198.51.100.0/24");
    assert_eq!(
        v[0]["hash_fields"],
        serde_json::json!(["src-ip", "dst-ip"]),
        "{v}"
    );
    assert!(v[0].get("seed").is_none(), "no seed written: {v}");
    let (dsts, ports) = (40, 10);
    let flows = grid(dsts, ports, 22000);
    let hit = recipe_flows(&t, &flows, "address recipe");
    for d in 0..dsts {
        let by: std::collections::BTreeSet<usize> =
            (0..ports).map(|p| hit[d * ports + p]).collect();
        assert_eq!(
            by.len(),
            1,
            "destination {d}: ports left by {by:?} (ports are left out)"
        );
    }
    let used: std::collections::BTreeSet<usize> = hit.iter().copied().collect();
    assert!(
        used.len() >= 3,
        "40 destinations over 4 nexthops used only {used:?}"
    );

    // Back to no recipe: today's l4-hash, which spreads one destination's ports.
    recipe_route(&t, "algo l4-hash");
    let v = MP.json(&t.r, "show 198.51.100.0/24");
    assert!(
        v[0].get("hash_fields").is_none() && v[0].get("seed").is_none(),
        "{v}"
    );
    let flows = grid(1, 200, 23000);
    let hit = recipe_flows(&t, &flows, "no recipe");
    let used: std::collections::BTreeSet<usize> = hit.iter().copied().collect();
    assert_eq!(
        used.len(),
        4,
        "l4-hash without a recipe spreads ports: {used:?}"
    );
    assert!(
        redirected(&t) >= 1500,
        "the dataplane forwarded the 1,560 packets, not the kernel"
    );
}

#[test]
fn hash_recipe_tc() {
    hash_recipe_case("tc");
}

#[test]
fn hash_recipe_xdp() {
    hash_recipe_case("xdp");
}

/// Replace the IPv4 route with a consistent one over nexthops `which`, in that order.
fn consistent_route(t: &FourPaths, which: &[usize], extra: &str) {
    let mut args: Vec<String> = [
        "replace",
        "198.51.100.0/24",
        "algo",
        "l4-hash",
        "consistent",
    ]
    .map(String::from)
    .to_vec();
    args.extend(extra.split_whitespace().map(String::from));
    for i in which {
        args.extend([
            "nexthop".into(),
            "via".into(),
            FourPaths::nexthop_v4(*i),
            "dev".into(),
            FourPaths::dev(*i),
        ]);
    }
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    MP.ok(&t.r, &a);
}

/// The gateway `mproute get` names for every flow.
fn predicted_gateways(t: &FourPaths, flows: &[FlowSpec]) -> Vec<String> {
    let lines: Vec<String> = flows
        .iter()
        .map(|f| {
            format!(
                "get {} from {} ipproto udp sport {} dport {}",
                f.dst, f.src, f.sport, f.dport
            )
        })
        .collect();
    mpt_testkit::batch_json_lines(MPROUTE, &["-n", t.r.name(), "-j", "-b", "-"], &lines)
        .iter()
        .map(|j| {
            j[0]["nexthop"]["gateway"]
                .as_str()
                .expect("a gateway")
                .to_string()
        })
        .collect()
}

/// The gateway each flow left by, with real traffic; checked against `mproute get`.
fn consistent_flows(t: &FourPaths, flows: &[FlowSpec], what: &str) -> Vec<String> {
    let seen = run_flows(t, flows, 1, false);
    let gws: Vec<String> = left_by(&seen, flows)
        .into_iter()
        .map(FourPaths::nexthop_v4)
        .collect();
    let predicted = predicted_gateways(t, flows);
    let wrong = gws.iter().zip(&predicted).filter(|(a, b)| a != b).count();
    assert_eq!(
        wrong, 0,
        "{what}: mproute get disagrees with the dataplane on {wrong} flows"
    );
    gws
}

/// Two routers given the same consistent route, written in other orders after other
/// histories (and with other namespace seeds), send every one of 400 flows to the same
/// gateway, by `get` and by real traffic, and export the same table (`show -d -j`); removing
/// one nexthop of four moves its flows, and (Maglev) at most 2 % of the others.
#[test]
fn consistent_routes_agree_across_routers_and_move_only_a_removed_nexthops_flows() {
    require_root();
    if dataplane_refused_here() {
        return;
    }
    let a = setup("csa", "l4-hash", [1, 1, 1, 1], "tc");
    let b = setup("csb", "l4-hash", [1, 1, 1, 1], "xdp");
    consistent_route(&a, &[0, 1, 2, 3], "seed 77");
    // another history and order on b: a resilient table first, two nexthops, then the four
    resilient_route(&b, "replace", &[2, 0], &[]);
    consistent_route(&b, &[2, 0], "seed 77 table-size 251");
    consistent_route(&b, &[3, 1, 0, 2], "seed 77");
    let table = |t: &FourPaths| {
        let v = MP.json(&t.r, "-d show 198.51.100.0/24");
        assert_eq!(v[0]["consistent"]["table_size"], 4093, "{v}");
        v[0]["consistent"]["table"].clone()
    };
    let ta = table(&a);
    assert_eq!(
        ta.as_array().map(Vec::len),
        Some(4093),
        "one gateway per slot"
    );
    assert_eq!(ta, table(&b), "the two routers' tables differ");

    let flows = traffic::flows(400, false, 25000);
    let ga = consistent_flows(&a, &flows, "router a");
    let gb = consistent_flows(&b, &flows, "router b");
    let differ = ga.iter().zip(&gb).filter(|(x, y)| x != y).count();
    assert_eq!(
        differ, 0,
        "{differ} of 400 flows leave the two routers by other gateways"
    );
    let used: std::collections::BTreeSet<&String> = ga.iter().collect();
    assert_eq!(used.len(), 4, "400 flows over 4 nexthops: {used:?}");

    // remove nexthop 2 on a
    let gone = FourPaths::nexthop_v4(2);
    consistent_route(&a, &[0, 1, 3], "seed 77");
    let after = consistent_flows(&a, &flows, "router a without nexthop 2");
    let mut others = 0;
    let mut others_moved = 0;
    for (before, now) in ga.iter().zip(&after) {
        assert_ne!(*now, gone, "a flow still leaves by the removed nexthop");
        if *before != gone {
            others += 1;
            others_moved += usize::from(before != now);
        }
    }
    assert!(
        others_moved * 50 <= others,
        "{others_moved} of {others} flows of the remaining nexthops moved"
    );
    eprintln!("consistent: removing 1 of 4 moved {others_moved} of {others} other flows");
}

/// The route's words for nexthops `which` with `weights`.
fn nexthop_words(which: &[usize], weights: &[u16]) -> String {
    which
        .iter()
        .zip(weights)
        .map(|(i, w)| {
            format!(
                "nexthop via {} dev {} weight {w}",
                FourPaths::nexthop_v4(*i),
                FourPaths::dev(*i)
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The disruption plan: `--check -j` on a change of a hashed route says which share of the
/// flow space changes nexthop (`moved`), and real traffic before and after the change agrees
/// within 0.05, for hash-threshold (a nexthop removed, a weight changed), resilient and
/// consistent tables (a nexthop removed), and a new seed (everything rehashed).
#[test]
fn check_reports_the_share_of_flows_a_change_moves() {
    require_root();
    if dataplane_refused_here() {
        return;
    }
    let t = setup("plan", "l4-hash", [1, 1, 1, 1], "tc");
    let flows = traffic::flows(1200, false, 26000);
    let cases: [(&str, &str, &str); 6] = [
        (
            "algo l4-hash",
            "algo l4-hash",
            "hash-threshold, 1 of 4 removed",
        ),
        (
            "algo l4-hash",
            "algo l4-hash",
            "hash-threshold, a weight changed",
        ),
        (
            "algo l4-hash resilient buckets 128",
            "algo l4-hash resilient buckets 128",
            "resilient, 1 of 4 removed",
        ),
        (
            "algo l4-hash consistent",
            "algo l4-hash consistent",
            "consistent, 1 of 4 removed",
        ),
        (
            "algo l4-hash consistent seed 1",
            "algo l4-hash consistent seed 2",
            "consistent, another seed",
        ),
        (
            "algo l4-hash",
            "algo l4-hash hash-fields src-ip,dst-ip",
            "hash-threshold, other hash fields",
        ),
    ];
    for (k, (from, to, what)) in cases.iter().enumerate() {
        let all = nexthop_words(&[0, 1, 2, 3], &[1, 1, 1, 1]);
        let next = match k {
            1 => nexthop_words(&[0, 1, 2, 3], &[1, 3, 1, 1]),
            4 | 5 => all.clone(),
            _ => nexthop_words(&[0, 1, 3], &[1, 1, 1]),
        };
        MP.ok(&t.r, &format!("replace 198.51.100.0/24 {from} {all}"));
        let before = left_by(&run_flows(&t, &flows, 1, false), &flows);
        let v = MP.json(
            &t.r,
            &format!("--check replace 198.51.100.0/24 {to} {next}"),
        );
        let planned = v["moved"]
            .as_f64()
            .unwrap_or_else(|| panic!("{what}: no moved in {v}"));
        let text = MP.ok(
            &t.r,
            &format!("--check replace 198.51.100.0/24 {to} {next}"),
        );
        assert!(text.contains("moved: "), "{what}: {text}");
        MP.ok(&t.r, &format!("replace 198.51.100.0/24 {to} {next}"));
        let after = left_by(&run_flows(&t, &flows, 1, false), &flows);
        let measured =
            before.iter().zip(&after).filter(|(a, b)| a != b).count() as f64 / flows.len() as f64;
        eprintln!("plan: {what}: moved {planned:.4}, measured {measured:.4}");
        assert!(
            (planned - measured).abs() <= 0.05,
            "{what}: --check said {planned:.4} of the flows move, {measured:.4} did"
        );
    }
}

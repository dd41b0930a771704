//! Root smoke test of the traffic kit: a plain kernel 4-way multipath route with L4 hashing
//! (`fib_multipath_hash_policy=1`) must keep every flow on one nexthop and use all four.
//! Needs root; fails (never skips) without it.

use std::time::Instant;

use mpt_testkit::require_root;
use mpt_testkit::traffic::{
    flows, per_flow_counts, send_tcp_syns, send_udp_flows, sysctl, FlowCounter, FlowCounts,
    FlowSpec, FourPaths, DEST_PREFIX_V4, DEST_PREFIX_V6,
};

/// The topology with the kernel multipath routes (v4 and v6) and L4 hashing on the router.
fn topology(tag: &str) -> FourPaths {
    let fp = FourPaths::new(tag);
    for (fam, prefix, via) in [
        (
            "-4",
            DEST_PREFIX_V4,
            FourPaths::nexthop_v4 as fn(usize) -> String,
        ),
        ("-6", DEST_PREFIX_V6, FourPaths::nexthop_v6),
    ] {
        let mut args: Vec<String> = vec![fam.into(), "route".into(), "add".into(), prefix.into()];
        for i in 0..4 {
            args.extend([
                "nexthop".into(),
                "via".into(),
                via(i),
                "dev".into(),
                FourPaths::dev(i),
            ]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        fp.r.ip_ok(&args);
    }
    sysctl(&fp.r, "net.ipv4.fib_multipath_hash_policy", "1");
    sysctl(&fp.r, "net.ipv6.fib_multipath_hash_policy", "1");
    fp
}

fn start_counters(fp: &FourPaths) -> Vec<FlowCounter> {
    fp.n.iter().map(|n| FlowCounter::start(n, "eth0")).collect()
}

/// Check the spread of `flows` (protocol `proto`) over the nexthops; `exact`: every flow must
/// total exactly this many packets, else at least one. Returns flows per nexthop.
fn check_spread(
    what: &str,
    flows: &[FlowSpec],
    proto: u8,
    counts: &[FlowCounts],
    exact: Option<u64>,
) -> Vec<usize> {
    let drops: Vec<u64> = counts.iter().map(|c| c.drops).collect();
    let per_flow = per_flow_counts(flows, proto, counts);
    let mut per_nexthop = vec![0usize; counts.len()];
    for (f, seen) in flows.iter().zip(&per_flow) {
        let total: u64 = seen.iter().sum();
        match exact {
            Some(n) => assert_eq!(
                total, n,
                "{what}: flow {f:?} seen {total} times in total, want {n} (per nexthop {seen:?}, \
                 capture drops {drops:?})"
            ),
            None => assert!(
                total >= 1,
                "{what}: flow {f:?} never seen (capture drops {drops:?})"
            ),
        }
        let at: Vec<usize> = (0..seen.len()).filter(|&i| seen[i] > 0).collect();
        assert_eq!(
            at.len(),
            1,
            "{what}: flow {f:?} arrived at nexthops {at:?} (packets {seen:?}), want exactly one"
        );
        per_nexthop[at[0]] += 1;
    }
    println!("{what}: {} flows, per nexthop {per_nexthop:?}", flows.len());
    for (i, n) in per_nexthop.iter().enumerate() {
        assert!(
            *n > 0,
            "{what}: nexthop n[{i}] got no flow of {} (per nexthop {per_nexthop:?})",
            flows.len()
        );
    }
    per_nexthop
}

#[test]
fn udp_flows_stay_on_one_of_four_nexthops() {
    require_root();
    let t0 = Instant::now();
    let fp = topology("tu");
    let v4 = flows(400, false, 20000);
    let v6 = flows(200, true, 30000);
    // Also count on the client: the nexthops answer with port unreachable (rate-limited), which
    // exercises the ICMP-error path of the counter.
    let client = FlowCounter::start(&fp.c, "eth0");
    let counters = start_counters(&fp);
    send_udp_flows(&fp.c, &v4, 3);
    send_udp_flows(&fp.c, &v6, 3);
    let counts = FlowCounter::stop_all(counters);
    let at_client = client.stop();
    check_spread("udp v4", &v4, 17, &counts, Some(3));
    check_spread("udp v6", &v6, 17, &counts, Some(3));

    for (fam, fl) in [("v4", &v4), ("v6", &v6)] {
        let sent: Vec<_> = fl.iter().map(|f| f.tuple(17)).collect();
        let errs: Vec<_> = at_client
            .icmp_errors
            .keys()
            .filter(|t| t.src == fl[0].src)
            .collect();
        println!("udp {fam}: {} ICMP errors back at the client", errs.len());
        assert!(
            !errs.is_empty(),
            "udp {fam}: no ICMP port unreachable came back to the client"
        );
        for t in errs {
            assert!(
                sent.contains(t),
                "udp {fam}: ICMP error embeds unknown flow {t:?}"
            );
        }
    }
    println!("udp test took {:?}", t0.elapsed());
}

#[test]
fn tcp_syns_stay_on_one_of_four_nexthops() {
    require_root();
    let t0 = Instant::now();
    let fp = topology("tt");
    let v4 = flows(100, false, 40000);
    let v6 = flows(100, true, 41000);
    let counters = start_counters(&fp);
    // One round only: each socket carries its own random L4 hash, which the kernel's policy 1
    // reuses, so a second round could put the same 5-tuple on another nexthop (see
    // `send_tcp_syns`).
    send_tcp_syns(&fp.c, &v4, 1);
    send_tcp_syns(&fp.c, &v6, 1);
    let counts = FlowCounter::stop_all(counters);
    // Retransmitted SYNs may raise a flow's count: at least one, on exactly one nexthop.
    check_spread("tcp v4", &v4, 6, &counts, None);
    check_spread("tcp v6", &v6, 6, &counts, None);
    println!("tcp test took {:?}", t0.elapsed());
}

//! Root integration tests of `ila metrics` (the BPF translator): `promtool check metrics`
//! (Debian's, unpacked by `cargo xtask setup`) on real output from throwaway namespaces, an
//! empty one and two hosts that translate an echo (as `tests/ila_netns.rs`'s A and B); the
//! mapping's and the route's counters held to the echo requests ping sent.

#[path = "helpers/promtool.rs"]
mod promtool;

use mpt_testkit::topo::ila_plan::{A_ADDR, B_ADDR, ILA_B, LOC_B, SIR_B, SIR_NET};
use mpt_testkit::{require_root, veth, Netns, Tool};

const ILA: Tool = Tool::with_options(env!("CARGO_BIN_EXE_ila"), &["--backend", "bpf"]);

#[test]
fn an_empty_namespace_gives_typed_families() {
    require_root();
    let ns = Netns::new("ix-empty");
    let text = ILA.ok(&ns, "metrics");
    promtool::check(&text);
    let types = promtool::types(&text);
    assert!(types.len() >= 9, "{text}");
    for (n, k) in &types {
        assert!(n.starts_with("ila_"), "{n}");
        assert_eq!(n.ends_with("_total"), k == "counter", "{n} {k}");
    }
    let s = promtool::samples(&text);
    assert_eq!(
        promtool::one(&s, "ila_backend_info", &[("backend", "bpf")]),
        1
    );
    assert!(promtool::find(&s, "ila_mapping_info", &[]).is_empty());
    let o = ILA.at(&ns, "metrics now");
    assert_eq!(o.status.code(), Some(1), "{o:?}");
}

#[test]
fn counters_are_the_echo_requests_translated() {
    require_root();
    let a = Netns::new("ix-a");
    let b = Netns::new("ix-b");
    veth(&a, "va", &b, "vb");
    a.ip_ok(&format!("addr add {A_ADDR}/64 dev va nodad"));
    b.ip_ok(&format!("addr add {B_ADDR}/64 dev vb nodad"));
    b.ip_ok(&format!("addr add {ILA_B}/64 dev vb nodad"));
    b.ip_ok(&format!("addr add {SIR_B}/128 dev lo"));
    a.ip_ok(&format!("route add {LOC_B}::/64 via {B_ADDR}"));
    ILA.ok(&a, &format!("route replace {SIR_B} loc {LOC_B}"));
    ILA.ok(&b, &format!("xlat replace loc_match {LOC_B} loc {SIR_NET}"));
    ILA.ok(&a, "dataplane attach dev va");
    ILA.ok(&b, "dataplane attach dev vb");
    let o = a.exec("ping", &format!("-6 -c 3 -i 0.2 -W 2 {SIR_B}"));
    assert!(o.status.success(), "ping through the translator: {o:?}");

    // A: the route translated the three echo requests out
    let text = ILA.ok(&a, "metrics");
    promtool::check(&text);
    let s = promtool::samples(&text);
    assert!(s.iter().all(|x| x.label("netns") == Some(a.name())));
    let route = [("table", "main"), ("dst", SIR_B)];
    let mut info = route.to_vec();
    info.extend([("locator", LOC_B), ("hook_type", "output")]);
    assert_eq!(promtool::one(&s, "ila_route_info", &info), 1);
    assert_eq!(promtool::one(&s, "ila_route_packets_total", &route), 3);
    assert!(promtool::one(&s, "ila_route_bytes_total", &route) >= 3 * 48);
    assert!(
        promtool::one(
            &s,
            "ila_dataplane_packets_total",
            &[("reason", "translated-out")]
        ) >= 3
    );
    assert_eq!(
        promtool::one(
            &s,
            "ila_dataplane_attachment_info",
            &[("dev", "va"), ("egress", "true")]
        ),
        1
    );

    // B: the mapping translated them in
    let text = ILA.ok(&b, "metrics");
    promtool::check(&text);
    let s = promtool::samples(&text);
    let key = [("locator_match", LOC_B), ("dev", "*")];
    let mut info = key.to_vec();
    info.push(("locator", SIR_NET));
    assert_eq!(promtool::one(&s, "ila_mapping_info", &info), 1);
    assert_eq!(promtool::one(&s, "ila_mapping_packets_total", &key), 3);
    assert!(promtool::one(&s, "ila_mapping_bytes_total", &key) >= 3 * 48);
    assert!(
        promtool::one(
            &s,
            "ila_dataplane_packets_total",
            &[("reason", "translated-in")]
        ) >= 3
    );
    assert_eq!(
        promtool::find(&s, "ila_dataplane_packets_total", &[]).len(),
        7,
        "every reason, also those at 0"
    );
}

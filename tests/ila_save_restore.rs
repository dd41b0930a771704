//! `ila save` and `ila -b`: what save prints reads back into the same tables. In a throwaway
//! namespace, with the BPF translator (`--backend bpf`, also where the kernel has its own ILA):
//! mappings with and without a device and in several checksum modes and identifier types, ILA
//! routes (output and input hooks, gateways, devices, a table other than main), the translator
//! attached on two devices (both directions; ingress alone); saved, flushed and detached,
//! restored with `-b`, and `ila -j ... show` compared before and after (program ids aside:
//! a new attachment has new programs).
//!
//! Needs root. It fails, it does not skip, when run without root.

use mpt_testkit::tool::BatchFile;
use mpt_testkit::{require_root, Netns, Tool};
use serde_json::Value;

const ILA: Tool = Tool::with_options(env!("CARGO_BIN_EXE_ila"), &["--backend", "bpf"]);

const TABLES: &[&str] = &[
    "xlat add loc_match 2001:0:119:0 loc 3333:0:0:1 csum-mode neutral-map-auto",
    "xlat add loc_match 2001:0:120:0 loc 3333:0:0:2 dev v1 ident-type luid",
    "xlat add loc_match 2001:0:121:0 loc 3333:0:0:3 csum-mode adj-transport",
    "route add 3333:0:0:1:2000:0:1:87/128 loc 2001:0:87:0 csum-mode neutral-map via 2001:db8:1::2 dev v0",
    "route add 3333:0:0:1:2000:0:1:88/128 loc 2001:0:88:0 hook-type input via 2001:db8:1::3",
    "route add 3333:0:0:2::/80 loc 2001:0:89:0 ident-type luid via 2001:db8:2::2 dev v1 table 100",
];

fn topology(tag: &str) -> Netns {
    require_root();
    let ns = Netns::new(tag);
    ns.ip_ok("link add v0 type veth peer name p0");
    ns.ip_ok("link add v1 type veth peer name p1");
    for d in ["v0", "p0", "v1", "p1"] {
        ns.ip_ok(&format!("link set {d} up"));
    }
    ns.ip_ok("-6 addr add 2001:db8:1::1/64 dev v0 nodad");
    ns.ip_ok("-6 addr add 2001:db8:2::1/64 dev v1 nodad");
    ns.ip_ok("-6 route add 2001:db8:2::/64 dev v1 table 100");
    ns
}

/// Mappings, routes, attachments (without program ids).
fn state(ns: &Netns) -> (Value, Value, Value) {
    let mut dp = ILA.json(ns, "dataplane show")["attachments"].clone();
    for a in dp.as_array_mut().expect("attachments") {
        let a = a.as_object_mut().expect("an object");
        a.remove("ingress_prog_id");
        a.remove("egress_prog_id");
    }
    (ILA.json(ns, "xlat show"), ILA.json(ns, "route show"), dp)
}

#[test]
fn save_then_batch_restores_mappings_routes_and_attachments() {
    let ns = topology("ila-save");
    ILA.ok(&ns, "dataplane attach dev v0 tc");
    ILA.ok(&ns, "dataplane attach dev v1 xdp-generic ingress");
    for l in TABLES {
        ILA.ok(&ns, l);
    }
    let before = state(&ns);
    assert_eq!(before.0.as_array().map(Vec::len), Some(3), "{}", before.0);
    assert_eq!(before.1.as_array().map(Vec::len), Some(3), "{}", before.1);
    assert_eq!(before.2.as_array().map(Vec::len), Some(2), "{}", before.2);
    let saved = ILA.ok(&ns, "save");
    assert!(saved.starts_with("# ila save "), "{saved}");
    assert!(
        saved
            .lines()
            .next()
            .is_some_and(|l| l.contains("backend bpf")),
        "{saved}"
    );

    ILA.ok(&ns, "xlat flush");
    ILA.ok(&ns, "route flush");
    ILA.ok(&ns, "dataplane detach dev v0 dev v1");
    let empty = state(&ns);
    assert_eq!(
        (
            empty.0.as_array().map(Vec::len),
            empty.1.as_array().map(Vec::len),
            empty.2.as_array().map(Vec::len)
        ),
        (Some(0), Some(0), Some(0)),
        "{empty:?}"
    );

    let file = BatchFile::new("ila-save-restore", &saved);
    ILA.ok(&ns, &["-b", file.path()][..]);
    let after = state(&ns);
    assert_eq!(before.0, after.0, "xlat show");
    assert_eq!(before.1, after.1, "route show");
    assert_eq!(before.2, after.2, "dataplane show");
}

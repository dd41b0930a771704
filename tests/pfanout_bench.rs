//! Root integration test of `pfanout bench` (issue 32 item 2): per mode, besides what is
//! processed, dropped and rolled over, the flows split over workers and the packets processed
//! after a later packet of their flow, from the flow and sequence number the generator writes
//! into each payload. Hash keeps every flow on one worker and in order, whatever the load;
//! rollover under overload is measured (its figures are there, and a flow it spreads over two
//! workers is counted as split). The bench makes and removes its own namespaces.

use mpt_testkit::{require_root, Tool};
use serde_json::Value;

const PF: Tool = Tool::new(env!("CARGO_BIN_EXE_pfanout"));

#[test]
fn bench_prints_affinity_and_order_per_mode() {
    require_root();
    let o = std::process::Command::new(PF.bin)
        .args([
            "-j",
            "bench",
            "workers",
            "2",
            "per-worker",
            "2000",
            "seconds",
            "1",
            "flows",
            "8",
        ])
        .output()
        .expect("bench");
    assert!(o.status.success(), "{o:?}");
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["flows"], 8, "{v}");
    let modes = v["modes"].as_array().expect("modes");
    let names: Vec<&str> = modes.iter().filter_map(|m| m["mode"].as_str()).collect();
    assert_eq!(
        names,
        [
            "hash",
            "hash flags rollover",
            "rollover",
            "cpu",
            "cpu flags rollover"
        ]
    );
    for m in modes {
        for k in [
            "flows_seen",
            "flows_split",
            "split_share",
            "out_of_order",
            "out_of_order_share",
            "received",
        ] {
            assert!(m[k].is_number(), "{k} in {m}");
        }
        assert!(m["flows_seen"].as_u64() > Some(0), "no flow seen: {m}");
        assert!(m["flows_split"].as_u64() <= m["flows_seen"].as_u64(), "{m}");
    }
    let hash = &modes[0];
    assert_eq!(hash["flows_split"], 0, "hash split a flow: {hash}");
    assert_eq!(hash["out_of_order"], 0, "hash reordered a flow: {hash}");
    // mode rollover, offered twice what the workers take: the first worker fills and the
    // rest goes on to the second, so the flows it carries are split
    let roll = &modes[2];
    if roll["busy_workers"].as_u64() >= Some(2) {
        assert!(roll["flows_split"].as_u64() > Some(0), "{roll}");
    }
    let g = &v["generator"];
    assert!(g["offered"].as_f64() > Some(0.0), "{g}");
    assert!(g["seed_offered"].as_f64() == Some(500_000.0), "{g}");
}

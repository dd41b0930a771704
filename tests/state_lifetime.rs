//! Root tests of what one namespace's BPF state costs and how long it lives (issue 30): the
//! maps are pinned nowhere, so `ip netns del` alone frees them, with no further command, and
//! leaves no pin directory or lock file; `dataplane show` reports the maps' ids and the memory
//! the kernel charges for them. Oracles: `bpftool map show id N` (the kernel's map info, by id)
//! and the files under `/sys/fs/bpf` and `/run`.

use std::time::{Duration, Instant};

use mpt_testkit::topo::ila_plan::{LOC_B, SIR_NET};
use mpt_testkit::{require_root, Netns, Tool};
use serde_json::Value;

const MP: Tool = Tool::new(env!("CARGO_BIN_EXE_mproute"));

/// ila, built next to mproute (`cargo build -p ila`; the test runner builds every binary).
fn ila() -> Tool {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_mproute")).with_file_name("ila");
    assert!(
        bin.exists(),
        "{} missing: cargo build -p ila",
        bin.display()
    );
    Tool::new(Box::leak(
        bin.to_string_lossy().into_owned().into_boxed_str(),
    ))
}

/// A namespace with a veth pair (both ends inside), two permanent neighbours and `n` managed
/// two-path routes in 203.0.113.0/24.
fn router(tag: &str, n: usize) -> Netns {
    let ns = Netns::new(tag);
    ns.ip_ok("link set lo up");
    ns.ip_ok("link add d0 type veth peer name d1");
    ns.ip_ok("link set d0 up");
    ns.ip_ok("link set d1 up");
    ns.ip_ok("addr add 198.18.0.1/24 dev d0");
    for (ip, mac) in [
        ("198.18.0.2", "02:00:00:00:00:02"),
        ("198.18.0.3", "02:00:00:00:00:03"),
    ] {
        ns.ip_ok(&format!("neigh add {ip} lladdr {mac} dev d0 nud permanent"));
    }
    for i in 0..n {
        MP.ok(
            &ns,
            &format!(
                "add 203.0.113.{i}/32 nexthop via 198.18.0.2 dev d0 nexthop via 198.18.0.3 dev d0 algo l4-hash"
            ),
        );
    }
    ns
}

/// `mproute dataplane attach dev d0`; false on a kernel that refuses the dataplane in its one
/// line (before 5.12), where the state alone is under test.
fn attach_dp(ns: &Netns) -> bool {
    let o = MP.at(ns, "dataplane attach dev d0");
    if o.status.success() {
        return true;
    }
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("needs Linux 5.12"), "{err}");
    false
}

/// `bpftool -j map show id N`, `None` once the map is gone.
fn map_show(id: u32) -> Option<Value> {
    let out = mpt_testkit::run("bpftool", &["-j", "map", "show", "id", &id.to_string()]);
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

/// Every map the namespace's anchors on `lo` hold (mproute's and ila's), as the kernel lists
/// them, and the dataplane programs' maps.
fn state_map_ids(ns: &Netns, prog_ids: &[u64]) -> Vec<u32> {
    let mut ids: Vec<u32> = ns.run_in_thread(false, || {
        let mut ids = Vec::new();
        let progs = mpt_bpf::attach::tcx_query(1, mpt_bpf::attach::TcxDir::Ingress)
            .expect("query lo's tcx programs");
        for p in progs {
            ids.extend(mpt_bpf::prog::info(p).expect("program info").map_ids);
        }
        ids
    });
    for p in prog_ids {
        let out = mpt_testkit::run("bpftool", &["-j", "prog", "show", "id", &p.to_string()]);
        assert!(out.status.success(), "bpftool prog show id {p}");
        let v: Value = serde_json::from_slice(&out.stdout).expect("bpftool json");
        for m in v["map_ids"].as_array().into_iter().flatten() {
            ids.push(m.as_u64().expect("map id") as u32);
        }
    }
    // the maps inside the growable maps (arrays of one map)
    let inner: Vec<u32> = ids
        .iter()
        .filter_map(|id| mpt_bpf::grow::inner_id(*id))
        .collect();
    assert!(!inner.is_empty(), "no growable map among {ids:?}");
    ids.extend(inner);
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// With 10 routes and the dataplane attached, the namespace's maps (the state's, those inside
/// its growable maps, and the dataplane program's own) cost at most 4 MiB in the kernel's own
/// account (`bpftool map show`, `bytes_memlock`), and `dataplane show` says what the kernel
/// says, map by map. (They were 50 MiB: hash maps created with a million entries' buckets.)
#[test]
fn ten_routes_and_the_dataplane_cost_at_most_4_mib() {
    require_root();
    let ns = router("mem10", 10);
    let dp = attach_dp(&ns);
    let state = reported_memory(&ns);
    let progs = prog_ids(&ns);
    assert_eq!(!progs.is_empty(), dp, "dataplane attached");
    let mut total = 0;
    for id in state_map_ids(&ns, &progs) {
        let m = map_show(id).unwrap_or_else(|| panic!("map {id} unknown to bpftool"));
        total += m["bytes_memlock"].as_u64().expect("bytes_memlock");
    }
    eprintln!(
        "10 routes + dataplane: {} KiB of map memory ({} KiB the state's)",
        total / 1024,
        state / 1024
    );
    assert!(total >= state, "{total} < {state}");
    // before 6.4 the kernel's figure is an estimate from the capacity
    if mpt_testkit::matrix::memlock_is_usage() {
        assert!(
            total <= 4 << 20,
            "{total} bytes of map memory for 10 routes"
        );
    }
}

/// The attached dataplane programs' ids (`dataplane show`).
fn prog_ids(ns: &Netns) -> Vec<u64> {
    MP.json(ns, "dataplane show")["attachments"]
        .as_array()
        .expect("attachments")
        .iter()
        .map(|a| a["prog_id"].as_u64().expect("prog_id"))
        .collect()
}

/// The per-route maps start at 4,096 entries and grow with the table (issue 30 item 1). With
/// the dataplane attached and 5,000 routes written by one batch, `mpt_routes`, `mpt_stats` and
/// `mpt_pcpu` have room for them (the kernel's map info, by the ids `dataplane show` gives);
/// every route is in the state (`sync --check` has nothing to repair); and a drr route
/// written after the growth, whose counters live in `mpt_stats` (the counter slots are
/// taken) and whose round robin in `mpt_pcpu`, forwards and counts exactly what its nexthops
/// received (AF_PACKET in each nexthop namespace).
#[test]
fn the_route_maps_grow_with_the_table() {
    use mpt_testkit::topo::{FourPaths, DEST_PREFIX_V4};
    use mpt_testkit::traffic::{self, FlowCounter};
    require_root();
    let t = FourPaths::new("grow");
    // before 5.12 the dataplane refuses in one line: the state grows all the same
    let o = MP.at(&t.r, "dataplane attach dev vc tc");
    let dp = o.status.success();
    if dp {
        for n in &t.n {
            MP.ok(n, "dataplane attach dev eth0 xdp");
        }
    } else {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("needs Linux 5.12"), "{err}");
    }
    let first: u64 = MP.json(&t.r, "dataplane show")["maps"]
        .as_array()
        .expect("maps")
        .iter()
        .find(|m| m["name"] == "mpt_routes_in")
        .and_then(|m| m["max_entries"].as_u64())
        .expect("mpt_routes in dataplane show");
    let n = 5_000;
    assert!(first < n, "mpt_routes starts at {first} entries");
    let text: String = (0..n)
        .map(|i| {
            format!(
                "add 2001:db8:ffff::{i:x}/128 nexthop via {} dev {} nexthop via {} dev {}\n",
                FourPaths::nexthop_v6(0),
                FourPaths::dev(0),
                FourPaths::nexthop_v6(1),
                FourPaths::dev(1)
            )
        })
        .collect();
    let batch = mpt_testkit::BatchFile::new("grow", text);
    MP.ok(&t.r, &["-b", batch.path()]);
    let mut add = format!("add {DEST_PREFIX_V4} algo drr");
    for i in 0..4 {
        add += &format!(
            " nexthop via {} dev {}",
            FourPaths::nexthop_v4(i),
            FourPaths::dev(i)
        );
    }
    MP.ok(&t.r, &add);
    let v = MP.json(&t.r, "dataplane show");
    for name in ["mpt_routes_in", "mpt_stats_in", "mpt_pcpu_in"] {
        let m = v["maps"]
            .as_array()
            .expect("maps")
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {v}"));
        let id = m["id"].as_u64().expect("id") as u32;
        let k = map_show(id).unwrap_or_else(|| panic!("map {id} unknown to bpftool"));
        let cap = k["max_entries"].as_u64().expect("max_entries");
        assert!(cap > n, "{name}: {cap} entries for {n} routes ({k})");
        assert_eq!(k["max_entries"], m["max_entries"], "{k} / {m}");
    }
    let check = MP.ok(&t.r, "sync --check");
    assert!(check.contains("nothing would change"), "{check}");
    if !dp {
        return;
    }

    let flows = traffic::flows(200, false, 36000);
    let counters: Vec<FlowCounter> = t.n.iter().map(|n| FlowCounter::start(n, "eth0")).collect();
    traffic::send_udp_flows(&t.c, &flows, 1);
    let seen = traffic::per_flow_counts(&flows, 17, &FlowCounter::stop_all(counters));
    let delivered: Vec<u64> = (0..4).map(|i| seen.iter().map(|c| c[i]).sum()).collect();
    assert_eq!(delivered.iter().sum::<u64>(), 200, "{delivered:?}");
    assert!(
        delivered.iter().all(|d| *d > 0),
        "drr used every nexthop: {delivered:?}"
    );
    let shown = MP.json(&t.r, &["-s", "show", DEST_PREFIX_V4]);
    let counted: Vec<u64> = shown[0]["nexthops"]
        .as_array()
        .expect("nexthops")
        .iter()
        .map(|h| h["packets"].as_u64().expect("packets"))
        .collect();
    assert_eq!(counted, delivered, "{shown}");
}

/// `dataplane show` reports each state map with the id, capacity and memory the kernel gives
/// for that id (bpftool), and their sum.
fn reported_memory(ns: &Netns) -> u64 {
    let v = MP.json(ns, "dataplane show");
    let maps = v["maps"].as_array().expect("maps in dataplane show");
    assert_eq!(maps.len(), 10, "{v}");
    let mut sum = 0;
    for m in maps {
        let id = m["id"].as_u64().expect("id") as u32;
        let k = map_show(id).unwrap_or_else(|| panic!("map {id} unknown to bpftool: {m}"));
        assert_eq!(k["name"], m["name"], "{k} / {m}");
        assert_eq!(k["max_entries"], m["max_entries"], "{k} / {m}");
        assert_eq!(k["bytes_memlock"], m["memory_bytes"], "{k} / {m}");
        sum += m["memory_bytes"].as_u64().expect("bytes");
    }
    assert_eq!(v["memory_bytes"].as_u64(), Some(sum), "{v}");
    sum
}

#[test]
fn dataplane_show_reports_the_maps_as_the_kernel_does() {
    require_root();
    let ns = router("memshow", 3);
    attach_dp(&ns);
    let total = reported_memory(&ns);
    eprintln!("3 routes + dataplane: {} KiB of state maps", total / 1024);
    let text = MP.ok(&ns, "dataplane show");
    assert!(
        text.lines()
            .any(|l| l.starts_with("state memory: ") && l.contains("mpt_routes_in ")),
        "{text}"
    );
}

/// Deleting the namespace is enough: within 10 s, with no command run after `ip netns del`,
/// every map of mproute's and ila's state and of the dataplane is freed, and nothing is left
/// under `/sys/fs/bpf/{mproute,ila}/<netns-id>` or `/run/{mproute,ila}/<netns-id>.lock`.
#[test]
fn state_dies_with_its_namespace() {
    require_root();
    let ila = ila();
    let ns = router("life", 10);
    let dp = attach_dp(&ns);
    ila.ok(
        &ns,
        &format!("--backend bpf xlat add loc_match {LOC_B} loc {SIR_NET}"),
    );
    let progs: Vec<u64> = MP.json(&ns, "dataplane show")["attachments"]
        .as_array()
        .expect("attachments")
        .iter()
        .map(|a| a["prog_id"].as_u64().expect("prog_id"))
        .collect();
    assert_eq!(!progs.is_empty(), dp, "dataplane attached");
    let ids = state_map_ids(&ns, &progs);
    let names: Vec<String> = ids
        .iter()
        .map(|id| {
            map_show(*id).map_or_else(
                || format!("{id}?"),
                |m| m["name"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    for want in ["mpt_routes", "mpt_lpm4", "mpt_groups", "ila_xlat"] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} not among {names:?}"
        );
    }
    let id = mpt_testkit::netns::id_name(ns.cookie().expect("cookie"));
    let leftovers = || -> Vec<String> {
        let mut v = Vec::new();
        for suite in ["mproute", "ila"] {
            for p in [
                format!("/sys/fs/bpf/{suite}/{id}"),
                format!("/run/{suite}/{id}.lock"),
            ] {
                if std::path::Path::new(&p).exists() {
                    v.push(p);
                }
            }
        }
        v
    };
    // nothing of the state is a file, even while the namespace lives (the XDP dataplane's
    // drop counter links are: not attached here, on a veth the dataplane takes tc)
    assert_eq!(leftovers(), Vec::<String>::new());
    let name = ns.name().to_string();
    let st = std::process::Command::new("ip")
        .args(["netns", "del", &name])
        .status()
        .expect("ip");
    assert!(st.success(), "ip netns del {name}");
    let start = Instant::now();
    let mut alive: Vec<u32> = ids.clone();
    while !alive.is_empty() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
        alive.retain(|id| map_show(*id).is_some());
    }
    let took = start.elapsed();
    assert!(
        alive.is_empty(),
        "maps {alive:?} of {ids:?} alive 10 s after ip netns del"
    );
    eprintln!(
        "{} maps freed {:.2} s after ip netns del",
        ids.len(),
        took.as_secs_f64()
    );
    assert_eq!(leftovers(), Vec::<String>::new());
}

/// A batch of routes with distinct nexthop sets grows the group map past its first capacity
/// (1,024 groups; the limit was a fixed 16,384, reached with "Argument list too long" and an
/// unrelated hint before issue 30): every route is in the kernel and in the state, and the
/// group map's capacity, as the kernel has it, holds them. (What a write past the last
/// capacity says, one line naming the limit, is `crates/bpf/tests/grow.rs`'s.)
#[test]
fn distinct_nexthop_sets_grow_the_group_map() {
    require_root();
    let ns = router("groups", 0);
    let n = 3_000;
    let text: String = (0..n)
        .map(|i| {
            format!(
                "add 10.{}.{}.{}/32 nexthop via 198.18.0.2 dev d0 weight {} nexthop via 198.18.0.3 dev d0 weight {}\n",
                (i >> 16) & 255,
                (i >> 8) & 255,
                i & 255,
                1 + i % 128,
                1 + i / 128
            )
        })
        .collect();
    let batch = mpt_testkit::BatchFile::new("groups", text);
    MP.ok(&ns, &["-b", batch.path()]);
    let routes = ns.ip_json(&["-4", "route", "show", "proto", "mproute"]);
    assert_eq!(
        routes.as_array().map(Vec::len),
        Some(n),
        "routes in the kernel"
    );
    let check = MP.ok(&ns, "sync --check");
    assert!(check.contains("nothing would change"), "{check}");
    let v = MP.json(&ns, "dataplane show");
    let g = v["maps"]
        .as_array()
        .expect("maps")
        .iter()
        .find(|m| m["name"] == "mpt_groups_in")
        .cloned()
        .unwrap_or_else(|| panic!("mpt_groups_in in {v}"));
    let k = map_show(g["id"].as_u64().expect("id") as u32).expect("bpftool");
    let cap = k["max_entries"].as_u64().expect("max_entries");
    assert!(
        cap >= n as u64,
        "{cap} groups' room for {n} distinct sets: {k}"
    );
}

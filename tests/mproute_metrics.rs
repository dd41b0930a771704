//! Root integration tests of `mproute metrics`: `promtool check metrics` (Debian's, unpacked
//! by `cargo xtask setup`) on real output from throwaway namespaces, an empty one and a router
//! with a managed route, the dataplane attached and traffic sent; the nexthops' counters held
//! to what each nexthop namespace received (AF_PACKET), the route's to their sum.

#[path = "helpers/promtool.rs"]
mod promtool;

use mpt_cli::metrics::{Exposition, Kind};
use mpt_testkit::topo::FourPaths;
use mpt_testkit::traffic::{self, FlowCounter};
use mpt_testkit::{require_root, Netns, Tool};

const MP: Tool = Tool::new(env!("CARGO_BIN_EXE_mproute"));

/// The oracle can fail: promtool refuses what the format or its lint rules forbid, and takes
/// what our writer makes of hostile label values, which read back as they were.
#[test]
fn promtool_is_a_real_oracle_and_the_writer_escapes() {
    let (ok, said) =
        promtool::verdict("# HELP x_packets Packets.\n# TYPE x_packets counter\nx_packets 1\n");
    assert!(!ok, "a counter without _total passed: {said}");
    let (ok, _) =
        promtool::verdict("# TYPE x_total counter\nx_total{a=\"1\"} 1\nx_total{a=\"1\"} 2\n");
    assert!(!ok, "a repeated series passed");
    let (ok, _) = promtool::verdict("# TYPE x_total counter\nx_total{a=\"\\q\"} 1\n");
    assert!(!ok, "an unknown escape passed");

    let hostile = "we\"ird\\ na\nme \u{1b}[2J";
    let mut e = Exposition::new("mproute");
    e.common_label("netns", "blue");
    e.declare(
        "thing_total",
        Kind::Counter,
        "Help with \\ and\na line feed.",
    );
    e.declare("empty_info", Kind::Gauge, "Declared, no sample.");
    e.add("thing_total", &[("dev", hostile)], 3);
    e.add("thing_total", &[("dev", "plain")], 4);
    let text = e.render();
    promtool::check(&text);
    let s = promtool::samples(&text);
    assert_eq!(s.len(), 2, "{text}");
    // the control character comes back as the text \x1b (the format has no escape for it)
    assert_eq!(s[0].label("dev"), Some("we\"ird\\ na\nme \\x1b[2J"));
    assert_eq!(s[0].label("netns"), Some("blue"));
    assert_eq!(s[0].value, 3);
    assert_eq!(
        promtool::types(&text),
        [
            ("mproute_thing_total".to_string(), "counter".to_string()),
            ("mproute_empty_info".to_string(), "gauge".to_string())
        ]
    );
}

/// A namespace mproute never touched: every family typed, no sample, exit 0; a word after the
/// verb is a usage error.
#[test]
fn an_empty_namespace_gives_typed_families_and_no_samples() {
    require_root();
    let ns = Netns::new("mx-empty");
    let text = MP.ok(&ns, "metrics");
    promtool::check(&text);
    let types = promtool::types(&text);
    assert!(types.len() >= 9, "{text}");
    assert!(types.iter().all(|(n, _)| n.starts_with("mproute_")));
    for (n, k) in &types {
        assert_eq!(n.ends_with("_total"), k == "counter", "{n} {k}");
    }
    assert!(promtool::samples(&text).is_empty(), "{text}");
    let o = MP.at(&ns, "metrics now");
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(o.stdout.is_empty());
    // nothing was created for the namespace
    assert!(promtool::samples(&MP.ok(&ns, "metrics")).is_empty());
}

#[test]
fn counters_are_what_the_nexthops_received() {
    require_root();
    let t = FourPaths::new("mxr");
    let mut add = "add 198.51.100.0/24 algo l4-hash".to_string();
    for i in 0..4 {
        add += &format!(
            " nexthop via {} dev {} weight 1",
            FourPaths::nexthop_v4(i),
            FourPaths::dev(i)
        );
    }
    MP.ok(&t.r, &add);
    for n in &t.n {
        MP.ok(n, "dataplane attach dev eth0 xdp");
    }
    MP.ok(&t.r, "dataplane attach dev vc tc");

    let flows = traffic::flows(200, false, 36000);
    let counters: Vec<FlowCounter> = t.n.iter().map(|n| FlowCounter::start(n, "eth0")).collect();
    traffic::send_udp_flows(&t.c, &flows, 1);
    let seen = traffic::per_flow_counts(&flows, 17, &FlowCounter::stop_all(counters));
    let delivered: Vec<u64> = (0..4).map(|i| seen.iter().map(|c| c[i]).sum()).collect();
    assert!(
        delivered.iter().sum::<u64>() > 0,
        "no traffic arrived: {delivered:?}"
    );

    let text = MP.ok(&t.r, "metrics");
    promtool::check(&text);
    let s = promtool::samples(&text);
    let netns = t.r.name();
    assert!(
        s.iter().all(|x| x.label("netns") == Some(netns)),
        "every sample carries -n's namespace: {text}"
    );
    let route = [
        ("table", "main"),
        ("dst", "198.51.100.0/24"),
        ("metric", "0"),
    ];
    let mut info = route.to_vec();
    info.extend([("algo", "l4-hash"), ("enforced_by", "tc")]);
    assert_eq!(promtool::one(&s, "mproute_route_info", &info), 1);
    let mut sum = 0;
    for (i, want) in delivered.iter().enumerate() {
        let (gw, dev, index) = (FourPaths::nexthop_v4(i), FourPaths::dev(i), i.to_string());
        let mut l = route.to_vec();
        l.extend([
            ("nexthop", index.as_str()),
            ("gateway", gw.as_str()),
            ("dev", dev.as_str()),
        ]);
        let got = promtool::one(&s, "mproute_nexthop_packets_total", &l);
        assert_eq!(got, *want, "nexthop {i}");
        // UDP over IPv4: at least 28 bytes of headers a packet
        assert!(promtool::one(&s, "mproute_nexthop_bytes_total", &l) >= 28 * got);
        sum += got;
    }
    assert_eq!(
        promtool::one(&s, "mproute_route_packets_total", &route),
        sum
    );
    assert!(promtool::one(&s, "mproute_route_bytes_total", &route) >= 28 * sum);
    assert!(
        promtool::one(
            &s,
            "mproute_dataplane_packets_total",
            &[("reason", "redirected")]
        ) >= sum
    );
    assert_eq!(
        promtool::find(&s, "mproute_dataplane_packets_total", &[]).len(),
        18,
        "every reason, also those at 0"
    );
    assert_eq!(
        promtool::one(
            &s,
            "mproute_dataplane_attachment_info",
            &[("dev", "vc"), ("mode", "tc")]
        ),
        1
    );
}

/// The directory of the repository's systemd units.
fn units_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../etc/systemd")
}

/// mproute-metrics.service's script (its ExecStart's `sh -c` text, systemd's `$$` read back).
fn metrics_script() -> String {
    let unit = std::fs::read_to_string(units_dir().join("mproute-metrics.service"))
        .expect("mproute-metrics.service");
    let line = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart=/bin/sh -c '"))
        .expect("ExecStart=/bin/sh -c '...'");
    line.strip_suffix('\'')
        .expect("the script ends the line")
        .replace("$$", "$")
}

/// The unit and its timer pass `systemd-analyze verify`; the unit's script writes each tool's
/// file whole (temporary file, rename: nothing else left in the directory), and a tool that
/// fails leaves no file, old or new, and fails the unit.
#[test]
fn the_timer_unit_writes_whole_files_or_none() {
    require_root();
    let dir = units_dir();
    let o = std::process::Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(dir.join("mproute-metrics.service"))
        .arg(dir.join("mproute-metrics.timer"))
        .output()
        .expect("systemd-analyze");
    assert!(
        o.status.success() && o.stderr.is_empty(),
        "systemd-analyze verify: {}",
        String::from_utf8_lossy(&o.stderr)
    );

    let ns = Netns::new("mx-unit");
    let tmp = std::env::temp_dir().join(format!("mpt-metrics-unit-{}", std::process::id()));
    let (bin, out) = (tmp.join("bin"), tmp.join("textfile"));
    std::fs::create_dir_all(&bin).expect("bin dir");
    std::fs::create_dir_all(&out).expect("textfile dir");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_mproute"), bin.join("mproute")).expect("link");
    let stub = |name: &str, body: &str| {
        use std::os::unix::fs::PermissionsExt;
        let p = bin.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).expect("stub");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    };
    stub(
        "pfanout",
        "printf '# TYPE pfanout_up gauge\\npfanout_up 1\\n'",
    );
    stub("ila", "echo 'ila: cannot do it' >&2; exit 2");
    std::fs::write(out.join("ila.prom"), "# TYPE ila_old gauge\nila_old 1\n").expect("old file");
    let run = || {
        std::process::Command::new("/bin/sh")
            .args(["-c", &metrics_script()])
            .env("TEXTFILE_DIR", &out)
            .env("BIN", &bin)
            .env("NETNS", ns.name())
            .output()
            .expect("sh")
    };
    let listing = || {
        let mut v: Vec<String> = std::fs::read_dir(&out)
            .expect("read dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().to_string())
            .collect();
        v.sort();
        v
    };
    let o = run();
    assert_eq!(o.status.code(), Some(1), "ila failed: {o:?}");
    assert_eq!(listing(), ["mproute.prom", "pfanout.prom"], "{o:?}");
    let text = std::fs::read_to_string(out.join("mproute.prom")).expect("mproute.prom");
    promtool::check(&text);
    assert!(text.contains("# TYPE mproute_route_packets_total counter"));

    stub("ila", "printf '# TYPE ila_up gauge\\nila_up 1\\n'");
    let o = run();
    assert!(o.status.success(), "{o:?}");
    assert_eq!(listing(), ["ila.prom", "mproute.prom", "pfanout.prom"]);
    let _ = std::fs::remove_dir_all(&tmp);
}

//! One batch of ila route commands whose device the kernel chooses (`via` without `dev`),
//! run under strace, for ila_netns (BPF backend) and ila_kernel (the kernel's ILA): how many
//! IPv6 route dumps it asked for, and whether ila's view and the kernel's agree after it
//! (issue 30 item 4: each such line dumped the whole FIB again, twice with the kernel backend,
//! so that a batch cost the square of the table: 6,000 routes took 20 s).

use mpt_testkit::Netns;

/// Routes of the batch.
const ROUTES: usize = 300;

/// Run the batch in `ns` (a veth `va` with 2001:db8:5::2/64, made here) with `ila --backend
/// BACKEND`: 300 adds, a replace of the 5th to another locator and a delete of the 7th, so
/// that the view kept between lines must follow the invocation's own writes. Asserts that
/// ila sent at most two route dumps (RTM_GETROUTE with NLM_F_DUMP; one a line before) and that
/// `route show` lists what the kernel holds, each route through `va`.
pub fn run(ila: &str, backend: &str, ns: &Netns) {
    ns.ip_ok("link add va type veth peer name vb");
    ns.ip_ok("link set va up");
    ns.ip_ok("link set vb up");
    ns.ip_ok("-6 addr add 2001:db8:5::2/64 dev va nodad");
    let sir = |i: usize| format!("3333:0:0:1:2000:0:1:{i:x}/128");
    let mut batch: String = (1..=ROUTES)
        .map(|i| format!("route add {} loc 2001:0:87:0 via 2001:db8:5::1\n", sir(i)))
        .collect();
    batch += &format!(
        "route replace {} loc 2001:0:88:0 via 2001:db8:5::1\nroute del {}\n",
        sir(5),
        sir(7)
    );
    let file = mpt_testkit::BatchFile::new("ila-route-batch", batch);
    let trace = std::path::Path::new(file.path()).with_file_name("trace");
    let o = std::process::Command::new("strace")
        .args([
            "-f",
            "-qq",
            "-e",
            "trace=sendto,sendmsg",
            "-e",
            "signal=none",
        ])
        .arg("-o")
        .arg(&trace)
        .args([
            ila,
            "--backend",
            backend,
            "-n",
            ns.name(),
            "-b",
            file.path(),
        ])
        .output()
        .expect("strace");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let trace = std::fs::read_to_string(&trace).expect("trace");
    // RTM_GETROUTE (26) with NLM_F_DUMP (0x300), as strace spells it with or without names
    let dumps = trace
        .lines()
        .filter(|l| {
            (l.contains("RTM_GETROUTE") || l.contains("nlmsg_type=0x1a "))
                && (l.contains("NLM_F_DUMP") || l.contains("0x300"))
        })
        .count();
    assert!(
        (1..=2).contains(&dumps),
        "{dumps} route dumps for a batch of {ROUTES} routes"
    );
    let out = std::process::Command::new(ila)
        .args(["--backend", backend, "-n", ns.name(), "-j", "route", "show"])
        .output()
        .expect("ila");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let rows = shown.as_array().expect("rows");
    assert_eq!(rows.len(), ROUTES - 1, "routes shown");
    assert!(
        rows.iter().all(|r| r["dev"] == "va"),
        "every route through the device the kernel chose: {:?}",
        rows.iter().find(|r| r["dev"] != "va")
    );
    // the 5th replaced to another locator, the 7th gone (addresses compared as addresses)
    let loc = |i: usize| {
        let want: std::net::Ipv6Addr = format!("3333:0:0:1:2000:0:1:{i:x}").parse().expect("addr");
        rows.iter()
            .find(|r| {
                r["dst"]
                    .as_str()
                    .and_then(|d| d.trim_end_matches("/128").parse().ok())
                    == Some(want)
            })
            .map(|r| r["encap"]["locator"].clone())
    };
    assert_eq!(
        loc(5),
        Some(serde_json::json!("2001:0:88:0")),
        "the replaced route"
    );
    assert_eq!(
        loc(6),
        Some(serde_json::json!("2001:0:87:0")),
        "an added route"
    );
    assert!(loc(7).is_none(), "the deleted route");
    let fib = ns.ip_json("-6 route show via 2001:db8:5::1");
    assert_eq!(
        fib.as_array().map(Vec::len),
        Some(ROUTES - 1),
        "the kernel's routes"
    );
}

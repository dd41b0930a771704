//! `cargo xtask demo`: mproute in throwaway namespaces R (router), A, B and a client C; then
//! ila between two more, IA and IB (see [`ila_demo`]).
//!
//! ```text
//!   A: eth0 10.1.0.2/24 2001:db8:1::2/64 ── va  R  vb ── B: eth0 10.2.0.2/24 2001:db8:2::2/64
//!                    10.1.0.1/24 2001:db8:1::1/64   10.2.0.1/24 2001:db8:2::1/64
//!                                          vc 10.0.0.1/24
//!                                           │
//!                                  C: eth0 10.0.0.2/24 (sends UDP through R)
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};
use mpt_testkit::Netns;

use crate::util::{self, run};

/// Name prefix of the demo's namespaces.
const NS_PREFIX: &str = "mptdemo";

fn netns(tag: &str) -> Result<Netns> {
    Netns::try_create(NS_PREFIX, tag).map_err(|e| anyhow!(e))
}

const V4_ROUTE: &str =
    "198.51.100.0/24 algo l4-hash nexthop via 10.1.0.2 dev va weight 3 nexthop via 10.2.0.2 dev vb";
const V6_ROUTE: &str =
    "2001:db8:100::/48 algo per-packet nexthop via 2001:db8:1::2 dev va nexthop via 2001:db8:2::2 dev vb";

fn words(s: &str) -> Vec<&str> {
    s.split_whitespace().collect()
}

/// The three namespaces; dropping this deletes them.
#[derive(Debug)]
struct Topology {
    r: Netns,
    a: Netns,
    b: Netns,
    c: Netns,
}

impl Topology {
    fn build() -> Result<Self> {
        let r = netns("r")?;
        let a = netns("a")?;
        let b = netns("b")?;
        let c = netns("c")?;
        {
            let (rn, cn) = (r.name(), c.name());
            util::ip(&[
                "-n", rn, "link", "add", "vc", "type", "veth", "peer", "name", "eth0", "netns", cn,
            ])?;
            util::ip(&["-n", rn, "addr", "add", "10.0.0.1/24", "dev", "vc"])?;
            util::ip(&["-n", cn, "addr", "add", "10.0.0.2/24", "dev", "eth0"])?;
            util::ip(&["-n", rn, "link", "set", "vc", "up"])?;
            util::ip(&["-n", cn, "link", "set", "eth0", "up"])?;
            util::ip(&["-n", cn, "link", "set", "lo", "up"])?;
            util::ip(&["-n", cn, "route", "add", "default", "via", "10.0.0.1"])?;
            util::ip(&[
                "netns",
                "exec",
                rn,
                "sysctl",
                "-q",
                "-w",
                "net.ipv4.ip_forward=1",
            ])?;
        }
        for (side, dev, v4, v6) in [
            (
                &a,
                "va",
                ["10.1.0.1/24", "10.1.0.2/24"],
                ["2001:db8:1::1/64", "2001:db8:1::2/64"],
            ),
            (
                &b,
                "vb",
                ["10.2.0.1/24", "10.2.0.2/24"],
                ["2001:db8:2::1/64", "2001:db8:2::2/64"],
            ),
        ] {
            let (rn, sn) = (r.name(), side.name());
            util::ip(&[
                "-n", rn, "link", "add", dev, "type", "veth", "peer", "name", "eth0", "netns", sn,
            ])?;
            for (ns, ifc, a4, a6) in [(rn, dev, v4[0], v6[0]), (sn, "eth0", v4[1], v6[1])] {
                util::ip(&["-n", ns, "addr", "add", a4, "dev", ifc])?;
                util::ip(&["-n", ns, "-6", "addr", "add", a6, "dev", ifc, "nodad"])?;
                util::ip(&["-n", ns, "link", "set", ifc, "up"])?;
            }
        }
        Ok(Topology { r, a, b, c })
    }
}

/// Prints `+ mproute ARGS` (or `+ ip ARGS`) and runs it with stdio inherited.
fn step(program: &Path, shown: &str, args: &[&str]) -> Result<()> {
    println!("+ {shown} {}", args.join(" "));
    run(Command::new(program).args(args))
}

pub fn demo() -> Result<()> {
    crate::setup::setup()?;
    let root = util::repo_root()?;
    util::run_cargo(
        &root,
        &["build", "-p", "mproute", "-p", "ila", "-p", "pfanout"],
    )?;
    steps(&util::target_dir(&root).join("debug"))
}

/// The demo's steps with the tools built in `bin` (also what each kernel of the matrix runs,
/// see [`crate::guest`]).
pub fn steps(bin: &Path) -> Result<()> {
    let mproute: PathBuf = bin.join("mproute");
    if !mproute.is_file() {
        bail!("{} not found after the build", mproute.display());
    }
    for n in mpt_testkit::netns::sweep(NS_PREFIX) {
        println!("demo: removed stale namespace {n}");
    }

    let topo = Topology::build()?;
    let r = topo.r.name();
    println!(
        "demo: namespaces R={r} A={} B={} (removed at the end)",
        topo.a.name(),
        topo.b.name()
    );
    println!("demo: mproute = {}", mproute.display());
    let ip = Path::new("ip");
    let m = |args: &[&str]| -> Result<()> {
        let mut all = vec!["-n", r];
        all.extend_from_slice(args);
        step(&mproute, "mproute", &all)
    };

    let mut add4 = vec!["add"];
    add4.extend(words(V4_ROUTE));
    m(&add4)?;
    let mut add6 = vec!["add"];
    add6.extend(words(V6_ROUTE));
    m(&add6)?;
    m(&["show"])?;
    m(&["-j", "-p", "show", "198.51.100.0/24"])?;
    step(ip, "ip", &["-n", r, "route", "show"])?;
    step(
        ip,
        "ip",
        &["-n", r, "-6", "route", "show", "2001:db8:100::/48"],
    )?;
    let mp = mproute.to_string_lossy();
    step(
        ip,
        "ip",
        &["netns", "exec", r, &mp, "show", "algo", "l4-hash"],
    )?;

    // The same replace again: nothing to do, and mproute must say so.
    let mut replace = vec!["-n", r, "-j", "replace"];
    replace.extend(words(V4_ROUTE));
    println!("+ mproute {}", replace.join(" "));
    let out = util::output(Command::new(&mproute).args(&replace))?;
    print!("{out}");
    let report: serde_json::Value =
        serde_json::from_str(out.trim()).context("replace -j: output is not JSON")?;
    if report.get("changed") != Some(&serde_json::Value::Bool(false)) {
        bail!("replace of an identical route should report \"changed\": false");
    }

    // One route per algorithm, the dataplane on the client-facing device, real traffic.
    println!("demo: one route per algorithm, tc dataplane on vc, 60 UDP packets to each");
    for (i, algo) in [
        "l4-hash",
        "l3-hash",
        "per-packet",
        "drr",
        "random",
        "wrandom",
    ]
    .iter()
    .enumerate()
    {
        let prefix = format!("203.0.{}.0/24", 100 + i);
        m(&[
            "add", &prefix, "algo", algo, "nexthop", "via", "10.1.0.2", "dev", "va", "weight", "3",
            "nexthop", "via", "10.2.0.2", "dev", "vb",
        ])?;
    }
    // a kernel without what the dataplane needs refuses in one line: the routes stay, the
    // kernel forwards them by its own multipath hash
    let attach = ["-n", r, "dataplane", "attach", "dev", "vc", "tc"];
    println!("+ mproute {}", attach.join(" "));
    let out = Command::new(&mproute)
        .args(attach)
        .output()
        .context("run mproute")?;
    print!("{}", String::from_utf8_lossy(&out.stdout));
    let err = String::from_utf8_lossy(&out.stderr);
    print!("{err}");
    // enforced, or refused in one line naming the kernel it needs (5.10)
    let enforced = out.status.success();
    let refused = out.status.code() == Some(2) && err.contains("needs Linux");
    if !enforced && !refused {
        bail!("mproute dataplane attach failed");
    }
    let script = "for p in 100 101 102 103 104 105; do for i in $(seq 1 60); do \
                  echo x > /dev/udp/203.0.$p.$((i % 7 + 1))/$((5000 + i)); done; done";
    println!("+ ip netns exec C bash -c '<60 UDP packets per prefix>'");
    run(Command::new("ip").args(["netns", "exec", topo.c.name(), "bash", "-c", script]))?;
    m(&["-s", "show", "table", "main"])?;
    m(&[
        "get",
        "203.0.100.7",
        "from",
        "10.0.0.2",
        "ipproto",
        "udp",
        "sport",
        "1000",
        "dport",
        "53",
    ])?;
    m(&["dataplane", "show"])?;
    if enforced {
        m(&["dataplane", "detach", "dev", "vc"])?;
    }

    m(&["flush"])?;
    step(ip, "ip", &["-n", r, "route", "show"])?;
    drop(topo);
    let ila = bin.join("ila");
    if kernel_ila(&ila)? {
        // the kernel's own ILA (its module: Debian's kernels have it), then ila's translator
        ila_demo(&ila, Backend::Kernel)?;
    } else {
        // the kernel's ILA module is not there: ila says so, and auto takes the translator
        let mut k = Command::new(&ila);
        k.args(["--backend", "kernel", "xlat", "show"]);
        println!(
            "+ ila --backend kernel xlat show   (this kernel has no ILA module: expected to fail)"
        );
        let out = k.output().context("run ila")?;
        print!("{}", String::from_utf8_lossy(&out.stderr));
        if out.status.code() != Some(2) {
            bail!("--backend kernel without the ILA module should exit 2");
        }
    }
    ila_demo(&ila, Backend::Bpf)?;
    fanout_demo(&bin.join("pfanout"))?;
    println!("demo: ok");
    Ok(())
}

/// Which of ila's backends a part of the demo shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    /// The kernel's ILA module.
    Kernel,
    /// ila's BPF translator.
    Bpf,
}

/// Whether this kernel has the ILA module (ila's kernel backend answers).
fn kernel_ila(ila: &Path) -> Result<bool> {
    let out = Command::new(ila)
        .args(["--backend", "kernel", "xlat", "show"])
        .output()
        .context("run ila")?;
    Ok(out.status.success())
}

/// An AF_PACKET fanout group: `pfanout run` in the background in FB (three workers, hash with
/// rollover), `pfanout show` of it while it runs, pings from FA, then the run's summary.
fn fanout_demo(pfanout: &Path) -> Result<()> {
    if !pfanout.is_file() {
        bail!("{} not found after the build", pfanout.display());
    }
    let a = netns("fa")?;
    let b = netns("fb")?;
    println!(
        "demo: fanout: namespaces FA={} FB={} (removed at the end)",
        a.name(),
        b.name()
    );
    let (an, bn) = (a.name(), b.name());
    util::ip(&[
        "-n", an, "link", "add", "fa0", "type", "veth", "peer", "name", "fb0", "netns", bn,
    ])?;
    for (ns, dev, addr) in [(an, "fa0", "203.0.113.1/24"), (bn, "fb0", "203.0.113.2/24")] {
        util::ip(&["-n", ns, "addr", "add", addr, "dev", dev])?;
        util::ip(&["-n", ns, "link", "set", dev, "up"])?;
    }
    let args = [
        "-n", bn, "run", "dev", "fb0", "group", "7", "mode", "hash", "flags", "rollover",
        "workers", "3", "duration", "4",
    ];
    println!("+ pfanout {} &", args.join(" "));
    let child = Command::new(pfanout)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .context("start pfanout run")?;
    // wait for the group's three members
    let mut seen = false;
    for _ in 0..100 {
        let o = Command::new(pfanout)
            .args(["-n", bn, "-j", "show", "group", "7"])
            .output()
            .context("run pfanout show")?;
        if String::from_utf8_lossy(&o.stdout).contains("\"members\":3") {
            seen = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    if !seen {
        bail!("pfanout run's group 7 did not appear in pfanout show");
    }
    step(pfanout, "pfanout", &["-n", bn, "show"])?;
    step(
        pfanout,
        "pfanout",
        &["-n", bn, "-j", "-p", "show", "dev", "fb0"],
    )?;
    step(
        Path::new("ip"),
        "ip",
        &[
            "netns",
            "exec",
            an,
            "ping",
            "-q",
            "-c",
            "50",
            "-i",
            "0.01",
            "203.0.113.2",
        ],
    )?;
    let out = child.wait_with_output().context("wait for pfanout run")?;
    println!("{}", String::from_utf8_lossy(&out.stdout).trim_end());
    if !out.status.success() {
        bail!("pfanout run failed");
    }
    Ok(())
}

/// Identifier-Locator Addressing between two namespaces, with one of ila's backends: the
/// kernel's ILA module (where the kernel has it) or ila's BPF translator:
///
/// ```text
///   IA va 2001:db8:a::1/64 ------ vb 2001:db8:a::2/64 IB
///      route SIR_B loc 2001:db8:ff:1      ILA address 2001:db8:ff:1:2000::b on vb
///      (egress: SIR -> ILA)               SIR address 2001:db8:1:2:2000::b on lo
///                                         xlat loc_match 2001:db8:ff:1 loc 2001:db8:1:2
/// ```
///
/// IA pings B's SIR address; the wire between them carries B's ILA address; IB's ingress
/// program takes it back to the SIR address before the stack sees it.
fn ila_demo(ila: &Path, backend: Backend) -> Result<()> {
    if !ila.is_file() {
        bail!("{} not found after the build", ila.display());
    }
    let a = netns("ia")?;
    let b = netns("ib")?;
    let which = match backend {
        Backend::Kernel => "kernel",
        Backend::Bpf => "bpf",
    };
    println!(
        "demo: ILA with the {which} backend: namespaces IA={} IB={} (removed at the end)",
        a.name(),
        b.name()
    );
    let (an, bn) = (a.name(), b.name());
    util::ip(&[
        "-n", an, "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", bn,
    ])?;
    for (ns, dev) in [(an, "va"), (bn, "vb")] {
        util::ip(&["-n", ns, "link", "set", dev, "up"])?;
    }
    util::ip(&[
        "-n",
        an,
        "addr",
        "add",
        "2001:db8:a::1/64",
        "dev",
        "va",
        "nodad",
    ])?;
    util::ip(&[
        "-n",
        bn,
        "addr",
        "add",
        "2001:db8:a::2/64",
        "dev",
        "vb",
        "nodad",
    ])?;
    util::ip(&[
        "-n",
        bn,
        "addr",
        "add",
        "2001:db8:ff:1:2000::b/64",
        "dev",
        "vb",
        "nodad",
    ])?;
    util::ip(&[
        "-n",
        bn,
        "addr",
        "add",
        "2001:db8:1:2:2000::b/128",
        "dev",
        "lo",
    ])?;
    util::ip(&[
        "-n",
        an,
        "route",
        "add",
        "2001:db8:ff:1::/64",
        "via",
        "2001:db8:a::2",
    ])?;
    let i = |ns: &str, args: &[&str]| -> Result<()> {
        let mut all = vec!["-n", ns, "--backend", which];
        all.extend_from_slice(args);
        step(ila, "ila", &all)
    };
    i(
        bn,
        &[
            "xlat",
            "add",
            "loc_match",
            "2001:db8:ff:1",
            "loc",
            "2001:db8:1:2",
            "csum-mode",
            "neutral-map-auto",
        ],
    )?;
    if backend == Backend::Bpf {
        i(bn, &["dataplane", "attach", "dev", "vb", "ingress"])?;
    }
    i(
        an,
        &[
            "route",
            "add",
            "2001:db8:1:2:2000::b",
            "loc",
            "2001:db8:ff:1",
            "csum-mode",
            "neutral-map-auto",
            "via",
            "2001:db8:a::2",
            "dev",
            "va",
        ],
    )?;
    if backend == Backend::Bpf {
        i(an, &["dataplane", "attach", "dev", "va", "egress"])?;
    }
    i(an, &["route", "show"])?;
    step(
        Path::new("ip"),
        "ip",
        &["-n", an, "-6", "route", "show", "proto", "ila"],
    )?;
    // the wire between them carries the ILA address
    // (bounded: a capture that misses the packets ends in an error, not a hang; and the ping
    // waits until tcpdump says it listens, which takes seconds under plain emulation)
    let mut dump = Command::new("ip");
    dump.args([
        "netns",
        "exec",
        an,
        "timeout",
        "30",
        "tcpdump",
        "-l",
        "-n",
        "-i",
        "va",
        "-c",
        "2",
        "icmp6 and ip6[40] == 128",
    ]);
    dump.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut capture = dump.spawn().context("start tcpdump")?;
    if let Some(err) = capture.stderr.take() {
        use std::io::BufRead;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                if line.contains("listening on") {
                    let _ = tx.send(());
                }
            }
        });
        // at most 20 s; without the line the ping goes anyway, and the check below judges
        let _ = rx.recv_timeout(std::time::Duration::from_secs(20));
    }
    println!("+ ip netns exec IA ping -c 3 2001:db8:1:2:2000::b");
    run(Command::new("ip").args([
        "netns",
        "exec",
        an,
        "ping",
        "-6",
        "-c",
        "3",
        "-i",
        "0.3",
        "2001:db8:1:2:2000::b",
    ]))?;
    let seen = capture.wait_with_output().context("tcpdump")?;
    println!("demo: on IA's wire (tcpdump -i va):");
    let wire = String::from_utf8_lossy(&seen.stdout);
    print!("{wire}");
    if !wire.contains("2001:db8:ff:1:") {
        bail!("the echo requests did not leave IA with B's ILA address");
    }
    i(bn, &["-s", "xlat", "show"])?;
    i(bn, &["-j", "-p", "xlat", "show"])?;
    i(an, &["-s", "route", "show"])?;
    if backend == Backend::Bpf {
        i(bn, &["dataplane", "show"])?;
    }
    i(an, &["route", "flush"])?;
    i(bn, &["xlat", "flush"])?;
    Ok(())
}

//! `cargo xtask demo`: mproute in throwaway namespaces R (router), A and B.
//!
//! ```text
//!   A: eth0 10.1.0.2/24 2001:db8:1::2/64 ── va  R  vb ── B: eth0 10.2.0.2/24 2001:db8:2::2/64
//!                    10.1.0.1/24 2001:db8:1::1/64   10.2.0.1/24 2001:db8:2::1/64
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::netns::{self, Netns};
use crate::util::{self, run};

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
}

impl Topology {
    fn build() -> Result<Self> {
        let r = Netns::create(netns::unique("mptdemo", "r"))?;
        let a = Netns::create(netns::unique("mptdemo", "a"))?;
        let b = Netns::create(netns::unique("mptdemo", "b"))?;
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
            util::ip([
                "-n", rn, "link", "add", dev, "type", "veth", "peer", "name", "eth0", "netns", sn,
            ])?;
            for (ns, ifc, a4, a6) in [(rn, dev, v4[0], v6[0]), (sn, "eth0", v4[1], v6[1])] {
                util::ip(["-n", ns, "addr", "add", a4, "dev", ifc])?;
                util::ip(["-n", ns, "-6", "addr", "add", a6, "dev", ifc, "nodad"])?;
                util::ip(["-n", ns, "link", "set", ifc, "up"])?;
            }
        }
        Ok(Topology { r, a, b })
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
    util::run_cargo(&root, &["build", "-p", "mproute"])?;
    let mproute: PathBuf = util::target_dir(&root).join("debug/mproute");
    if !mproute.is_file() {
        bail!("{} not found after the build", mproute.display());
    }
    netns::sweep_stale();

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

    m(&["flush"])?;
    step(ip, "ip", &["-n", r, "route", "show"])?;
    println!("demo: ok");
    Ok(())
}

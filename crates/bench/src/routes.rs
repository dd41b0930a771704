//! `cargo xtask bench routes`: install N two-nexthop IPv4 routes into an empty table with
//! `mproute -b` and with `ip -batch`, alternating, each run in a fresh namespace.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};

use mpt_testkit::cmd::show;
use mpt_testkit::Netns;

use crate::support::{self, median};

const NEXTHOPS: &str = "nexthop via 10.1.0.2 dev va nexthop via 10.2.0.2 dev vb";

/// The i-th /24: 11.0.0.0/24, 11.0.1.0/24, ... (continuing into 12.0.0.0/8 after 65536).
fn prefix(i: u32) -> String {
    format!("{}.{}.{}.0/24", 11 + i / 65536, i / 256 % 256, i % 256)
}

/// Batch files that live in a temporary directory, removed on drop.
#[derive(Debug)]
struct BatchFiles {
    dir: PathBuf,
    mproute: PathBuf,
    ip: PathBuf,
}

impl BatchFiles {
    fn write(count: u32) -> Result<Self> {
        ensure!(
            count <= 245 * 65536,
            "--count too large (max {})",
            245 * 65536
        );
        let dir = std::env::temp_dir().join(format!("xtask-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        let files = BatchFiles {
            mproute: dir.join("mproute.batch"),
            ip: dir.join("ip.batch"),
            dir,
        };
        let mut m = String::new();
        let mut ip = String::new();
        for i in 0..count {
            let p = prefix(i);
            // writeln! into a String cannot fail.
            let _ = writeln!(m, "add {p} {NEXTHOPS}");
            // iproute2 takes everything after the first "nexthop" as nexthops, so the
            // protocol (mproute's 245, for a like-for-like comparison) goes before them.
            let _ = writeln!(ip, "route add {p} proto 245 {NEXTHOPS}");
        }
        std::fs::write(&files.mproute, m)
            .with_context(|| format!("write {}", files.mproute.display()))?;
        std::fs::write(&files.ip, ip).with_context(|| format!("write {}", files.ip.display()))?;
        Ok(files)
    }
}

impl Drop for BatchFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A fresh namespace with lo, va/va2 and vb/vb2 up, 10.1.0.1/24 on va and 10.2.0.1/24 on vb.
fn fresh_ns(run: usize) -> Result<Netns> {
    let ns = support::netns(&run.to_string())?;
    let n = ns.name();
    for (dev, peer, addr) in [("va", "va2", "10.1.0.1/24"), ("vb", "vb2", "10.2.0.1/24")] {
        support::ip([
            "-n", n, "link", "add", dev, "type", "veth", "peer", "name", peer,
        ])?;
        support::ip(["-n", n, "addr", "add", addr, "dev", dev])?;
        support::ip(["-n", n, "link", "set", dev, "up"])?;
        support::ip(["-n", n, "link", "set", peer, "up"])?;
    }
    Ok(ns)
}

/// Number of IPv4 routes in the main table of `ns`.
fn route_count(ns: &str) -> Result<usize> {
    let out = support::ip(["-n", ns, "-j", "-4", "route", "show"])?;
    let v: serde_json::Value =
        serde_json::from_str(&out).context("ip -j route show: output is not JSON")?;
    v.as_array()
        .map(Vec::len)
        .context("ip -j route show: not a JSON array")
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Tool {
    Mproute,
    MprouteNh,
    IpBatch,
}

impl Tool {
    fn label(self) -> &'static str {
        match self {
            Tool::Mproute => "mproute -b",
            Tool::MprouteNh => "mproute -b --nexthop-objects",
            Tool::IpBatch => "ip -batch",
        }
    }
}

/// One timed run in a fresh namespace; returns seconds.
fn one_run(tool: Tool, idx: usize, mproute: &Path, files: &BatchFiles, count: u32) -> Result<f64> {
    let ns = fresh_ns(idx)?;
    let n = ns.name();
    let before = route_count(n)?;
    ensure!(
        before == 2,
        "{n}: expected the 2 connected routes before the run, found {before}"
    );
    let mut cmd = match tool {
        Tool::Mproute => {
            let mut c = Command::new(mproute);
            c.args(["-n", n, "-b"]).arg(&files.mproute);
            c
        }
        Tool::MprouteNh => {
            let mut c = Command::new(mproute);
            c.args(["-n", n, "--nexthop-objects", "-b"])
                .arg(&files.mproute);
            c
        }
        Tool::IpBatch => {
            let mut c = Command::new("ip");
            c.args(["-n", n, "-batch"]).arg(&files.ip);
            c
        }
    };
    cmd.stdin(Stdio::null()).stdout(Stdio::null());
    let start = Instant::now();
    let status = cmd
        .status()
        .with_context(|| format!("cannot start `{}`", show(&cmd)))?;
    let secs = start.elapsed().as_secs_f64();
    if !status.success() {
        bail!("`{}` failed ({status})", show(&cmd));
    }
    let after = route_count(n)?;
    let want = count as usize + 2;
    ensure!(
        after == want,
        "{}: {n} has {after} IPv4 routes after the run, expected {want}",
        tool.label()
    );
    println!(
        "bench: {:<28} run {}: {secs:.3} s ({after} routes in table)",
        tool.label(),
        idx / 3 + 1
    );
    Ok(secs)
}

pub fn run(count: u32, runs: u32) -> Result<()> {
    support::require_root("bench routes")?;
    ensure!(
        count > 0 && runs > 0,
        "--count and --runs must be at least 1"
    );
    let mproute = support::tool("mproute")?;
    support::sweep_stale();

    let files = BatchFiles::write(count)?;
    println!(
        "bench: {count} two-nexthop IPv4 routes per run, {runs} runs per tool, fresh namespace per run"
    );
    let mut times: [(Tool, Vec<f64>); 3] = [
        (Tool::Mproute, Vec::new()),
        (Tool::MprouteNh, Vec::new()),
        (Tool::IpBatch, Vec::new()),
    ];
    let mut idx = 0;
    for _ in 0..runs {
        for (tool, t) in times.iter_mut() {
            t.push(one_run(*tool, idx, &mproute, &files, count)?);
            idx += 1;
        }
    }

    println!();
    println!(
        "{:<28}  {:<30}  {:>9}  {:>15}",
        "tool", "runs (s)", "median s", "median routes/s"
    );
    let mut rates = Vec::new();
    for (tool, t) in &times {
        let runs_s = t
            .iter()
            .map(|s| format!("{s:.3}"))
            .collect::<Vec<_>>()
            .join(" ");
        let med = median(t);
        let rate = f64::from(count) / med;
        rates.push(rate);
        println!(
            "{:<28}  {:<30}  {:>9.3}  {:>15.0}",
            tool.label(),
            runs_s,
            med,
            rate
        );
    }
    if let [m, nh, ip] = rates[..] {
        println!("ratio mproute/ip-batch = {:.2}× (median routes/s)", m / ip);
        println!(
            "ratio mproute --nexthop-objects/ip-batch = {:.2}× (median routes/s; goal 2×)",
            nh / ip
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::prefix;

    #[test]
    fn prefixes() {
        assert_eq!(prefix(0), "11.0.0.0/24");
        assert_eq!(prefix(257), "11.1.1.0/24");
        assert_eq!(prefix(65536), "12.0.0.0/24");
    }
}

//! `cargo xtask bench sync`: whole-table repair against the kernel's own operations on the same
//! table, in one namespace, interleaved: `mproute sync` with nothing to repair against `ip -j
//! route show` of the table; `sync` after drift (a tenth of the routes deleted behind
//! mproute's back, leaving state entries without routes, and as many routes of protocol
//! mproute it does not know, to adopt); `mproute flush` against `ip route flush proto
//! mproute`. Each table is installed (untimed) with `mproute -b`; every timed run is checked
//! (routes left, rows reported).

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};

use mpt_testkit::cmd::show;

use crate::routes::{fresh_ns, prefix, route_count, NEXTHOPS};
use crate::support::{self, median};

/// Seconds `cmd` took (standard output discarded); an error if it failed.
fn timed(cmd: &mut Command) -> Result<f64> {
    cmd.stdin(Stdio::null()).stdout(Stdio::null());
    let start = Instant::now();
    let status = cmd
        .status()
        .with_context(|| format!("cannot start `{}`", show(cmd)))?;
    let secs = start.elapsed().as_secs_f64();
    if !status.success() {
        bail!("`{}` failed ({status})", show(cmd));
    }
    Ok(secs)
}

/// What `mproute -j sync` reported: rows per action.
fn sync_rows(mproute: &Path, ns: &str) -> Result<(f64, Vec<String>)> {
    let mut cmd = Command::new(mproute);
    cmd.args(["-n", ns, "-j", "sync"]).stdin(Stdio::null());
    let start = Instant::now();
    let out = cmd
        .output()
        .with_context(|| format!("cannot start `{}`", show(&cmd)))?;
    let secs = start.elapsed().as_secs_f64();
    ensure!(
        out.status.success(),
        "`{}` failed: {}",
        show(&cmd),
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("mproute -j sync: not JSON")?;
    let rows = v["actions"]
        .as_array()
        .context("mproute -j sync: no actions")?
        .iter()
        .filter(|a| a["action"] != "removed-stale-state")
        .filter_map(|a| a["action"].as_str().map(String::from))
        .collect();
    Ok((secs, rows))
}

fn write(dir: &Path, name: &str, text: &str) -> Result<std::path::PathBuf> {
    let p = dir.join(name);
    std::fs::write(&p, text).with_context(|| format!("write {}", p.display()))?;
    Ok(p)
}

pub fn run(count: u32, runs: u32) -> Result<()> {
    support::require_root("bench sync")?;
    ensure!(
        count >= 10 && runs > 0,
        "--count must be at least 10 and --runs at least 1"
    );
    ensure!(count <= 245 * 65536, "--count too large");
    let mproute = support::tool("mproute")?;
    support::sweep_stale();
    let dir = tempfile_dir()?;
    let drift = count / 10;
    // the whole table; the tenth deleted behind mproute's back (every tenth route); as many
    // routes of protocol mproute after the table's end, added with ip, for sync to adopt
    let (mut all, mut del, mut back, mut foreign) =
        (String::new(), String::new(), String::new(), String::new());
    for i in 0..count {
        let p = prefix(i);
        let _ = writeln!(all, "add {p} {NEXTHOPS}");
        if i % 10 == 0 {
            let _ = writeln!(del, "route del {p}");
            let _ = writeln!(back, "add {p} {NEXTHOPS}");
        }
    }
    for i in count..count + drift {
        let _ = writeln!(foreign, "route add {} proto 245 {NEXTHOPS}", prefix(i));
    }
    let all_f = write(&dir.0, "all.batch", &all)?;
    let del_f = write(&dir.0, "del.ipbatch", &del)?;
    let back_f = write(&dir.0, "back.batch", &back)?;
    let foreign_f = write(&dir.0, "foreign.ipbatch", &foreign)?;

    let ns = fresh_ns(0)?;
    let n = ns.name();
    let install = |f: &Path| -> Result<()> {
        support::output(Command::new(&mproute).args(["-n", n, "-b"]).arg(f)).map(|_| ())
    };
    let expect_routes = |want: u32, what: &str| -> Result<()> {
        let have = route_count(n)?;
        ensure!(
            have == want as usize + 2,
            "{what}: {n} has {have} IPv4 routes, expected {}",
            want + 2
        );
        Ok(())
    };
    install(&all_f)?;
    expect_routes(count, "install")?;
    println!("bench: {count} managed two-nexthop IPv4 routes in one namespace, {runs} interleaved rounds (drift: {drift} deleted with ip, {drift} of protocol mproute added with ip)");

    let labels = [
        "ip -j route show",
        "mproute -j show",
        "mproute sync (nothing to repair)",
        "mproute sync (drift)",
        "ip route flush proto mproute",
        "mproute flush",
    ];
    let mut t: Vec<Vec<f64>> = vec![Vec::new(); labels.len()];
    for round in 1..=runs {
        t[0].push(timed(
            Command::new("ip").args(["-n", n, "-j", "route", "show"]),
        )?);
        t[1].push(timed(Command::new(&mproute).args(["-n", n, "-j", "show"]))?);
        let (secs, rows) = sync_rows(&mproute, n)?;
        ensure!(rows.is_empty(), "sync found something to repair: {rows:?}");
        t[2].push(secs);

        // drift, then its repair
        support::ip(["-n", n, "-batch", del_f.to_str().context("path")?])?;
        support::ip(["-n", n, "-batch", foreign_f.to_str().context("path")?])?;
        let (secs, rows) = sync_rows(&mproute, n)?;
        let forgotten = rows.iter().filter(|a| *a == "forgotten").count();
        let adopted = rows.iter().filter(|a| *a == "adopted").count();
        ensure!(
            forgotten == drift as usize && adopted == drift as usize && rows.len() == 2 * drift as usize,
            "sync after drift: {forgotten} forgotten, {adopted} adopted, {} rows (expected {drift}, {drift}, {})",
            rows.len(),
            2 * drift
        );
        t[3].push(secs);
        install(&back_f)?;
        expect_routes(count + drift, "after the drift")?;

        // the flushes, each of the whole table (count + drift routes, all managed)
        t[4].push(timed(
            Command::new("ip").args(["-n", n, "route", "flush", "proto", "245"]),
        )?);
        expect_routes(0, "ip route flush")?;
        let (_, rows) = sync_rows(&mproute, n)?; // forget them (untimed)
        ensure!(
            rows.len() == (count + drift) as usize,
            "sync after ip flush: {} rows",
            rows.len()
        );
        install(&all_f)?;
        support::ip(["-n", n, "-batch", foreign_f.to_str().context("path")?])?;
        let (_, rows) = sync_rows(&mproute, n)?; // adopt (untimed)
        ensure!(rows.len() == drift as usize, "sync: {} rows", rows.len());
        t[5].push(timed(Command::new(&mproute).args(["-n", n, "flush"]))?);
        expect_routes(0, "mproute flush")?;
        install(&all_f)?;
        expect_routes(count, "install")?;
        println!(
            "bench: round {round}: {}",
            labels
                .iter()
                .zip(&t)
                .map(|(l, v)| format!("{l} {:.3} s", v.last().copied().unwrap_or(f64::NAN)))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    println!();
    println!(
        "{:<36}  {:<26}  {:>9}  {:>12}",
        "operation", "runs (s)", "median s", "vs kernel"
    );
    let med: Vec<f64> = t.iter().map(|v| median(v)).collect();
    let against = [None, Some(0), Some(0), Some(0), None, Some(4)];
    for ((l, v), (m, a)) in labels.iter().zip(&t).zip(med.iter().zip(against)) {
        let runs_s = v
            .iter()
            .map(|s| format!("{s:.3}"))
            .collect::<Vec<_>>()
            .join(" ");
        let vs = a.map_or(String::from("-"), |i| format!("{:.2}×", m / med[i]));
        println!("{l:<36}  {runs_s:<26}  {m:>9.3}  {vs:>12}");
    }
    println!();
    println!(
        "sync, nothing to repair: {:.2}× ip -j route show (goal ≤ 3×); with {} % drift: {:.2}× (the drift's own cost {:.3} s, {:.1} µs per drifted route); flush: {:.2}× ip route flush (goal ≤ 2×)",
        med[2] / med[0],
        10,
        med[3] / med[0],
        med[3] - med[2],
        1e6 * (med[3] - med[2]) / f64::from(2 * drift),
        med[5] / med[4]
    );
    Ok(())
}

/// A temporary directory, removed on drop.
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempfile_dir() -> Result<TempDir> {
    let d = std::env::temp_dir().join(format!("xtask-bench-sync-{}", std::process::id()));
    std::fs::create_dir_all(&d).with_context(|| format!("create {}", d.display()))?;
    Ok(TempDir(d))
}

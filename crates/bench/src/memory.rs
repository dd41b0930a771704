//! `cargo xtask bench memory`: what one namespace's BPF state costs in the kernel's own account
//! (`memlock` of every map, as `dataplane show` reports it and bpftool shows it), with 10 routes
//! and the dataplane and with `--count` routes, beside what the kernel's FIB takes for the same
//! routes installed with `ip -batch` (the growth of the slab and per-CPU memory in
//! `/proc/meminfo`: host-wide, so an estimate); and how long the maps outlive `ip netns del`.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};

use crate::routes::{fresh_ns, prefix, route_count, NEXTHOPS};
use crate::support;

/// `mproute -n NS -j dataplane show`: (state bytes, the programs' own bytes, state map ids).
fn reported(mproute: &Path, ns: &str) -> Result<(u64, u64, Vec<u64>)> {
    let out = support::output(Command::new(mproute).args(["-n", ns, "-j", "dataplane", "show"]))?;
    let v: serde_json::Value = serde_json::from_str(&out).context("dataplane show: not JSON")?;
    let ids = v["maps"]
        .as_array()
        .context("dataplane show: no maps")?
        .iter()
        .filter_map(|m| m["id"].as_u64())
        .collect();
    Ok((
        v["memory_bytes"].as_u64().context("no memory_bytes")?,
        v["dataplane_memory_bytes"].as_u64().unwrap_or(0),
        ids,
    ))
}

/// Slab and per-CPU memory of the whole machine (`/proc/meminfo`), bytes.
fn kernel_bytes() -> Result<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").context("read /proc/meminfo")?;
    let kib = |key: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    Ok(1024 * (kib("Slab:") + kib("Percpu:")))
}

/// Install `count` two-path routes in `ns` with `mproute -b` (`mproute` given) or `ip -batch`.
fn install(dir: &Path, ns: &str, count: u32, mproute: Option<&Path>) -> Result<()> {
    let mut text = String::new();
    for i in 0..count {
        let verb = if mproute.is_some() {
            "add"
        } else {
            "route add"
        };
        let _ = writeln!(text, "{verb} {} {NEXTHOPS}", prefix(i));
    }
    let f = dir.join(format!("{ns}.batch"));
    std::fs::write(&f, text).with_context(|| format!("write {}", f.display()))?;
    let out = match mproute {
        Some(m) => support::output(Command::new(m).args(["-n", ns, "-b"]).arg(&f)),
        None => support::ip(
            ["-n", ns, "-batch"]
                .map(std::ffi::OsStr::new)
                .into_iter()
                .chain([f.as_os_str()]),
        ),
    };
    let _ = std::fs::remove_file(&f);
    out?;
    let have = route_count(ns)?;
    ensure!(
        have == count as usize + 2,
        "{ns}: {have} IPv4 routes, expected {}",
        count + 2
    );
    Ok(())
}

fn mib(b: u64) -> String {
    format!("{:.2} MiB", b as f64 / f64::from(1 << 20))
}

pub fn run(count: u32) -> Result<()> {
    support::require_root("bench memory")?;
    ensure!(
        (10..=245 * 65536).contains(&count),
        "--count between 10 and 16056320"
    );
    let mproute = support::tool("mproute")?;
    support::sweep_stale();
    let dir = std::env::temp_dir();

    // 10 routes and the dataplane
    let small = fresh_ns(0)?;
    install(&dir, small.name(), 10, Some(&mproute))?;
    support::output(Command::new(&mproute).args([
        "-n",
        small.name(),
        "dataplane",
        "attach",
        "dev",
        "va",
    ]))?;
    let (s10, d10, ids) = reported(&mproute, small.name())?;

    // the maps after `ip netns del`, no command after it
    small
        .delete()
        .map_err(|e| anyhow::anyhow!("ip netns del: {e}"))?;
    let start = Instant::now();
    let alive = |id: &u64| {
        Command::new("bpftool")
            .args(["map", "show", "id", &id.to_string()])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let mut left: Vec<u64> = ids.clone();
    while !left.is_empty() && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
        left.retain(alive);
    }
    let freed = start.elapsed().as_secs_f64();
    ensure!(
        left.is_empty(),
        "maps {left:?} alive 30 s after ip netns del"
    );

    // the kernel's FIB for `count` routes, then mproute's state for the same
    let k = fresh_ns(1)?;
    let before = kernel_bytes()?;
    install(&dir, k.name(), count, None)?;
    let kernel = kernel_bytes()?.saturating_sub(before);
    drop(k);
    let m = fresh_ns(2)?;
    install(&dir, m.name(), count, Some(&mproute))?;
    let (sn, _, _) = reported(&mproute, m.name())?;
    support::output(Command::new(&mproute).args([
        "-n",
        m.name(),
        "dataplane",
        "attach",
        "dev",
        "va",
    ]))?;
    let (_, dn, _) = reported(&mproute, m.name())?;
    drop(m);

    println!("bench: BPF map memory of one namespace (the kernel's memlock per map, mproute -j dataplane show)");
    println!(
        "{:<44}  {:>12}  {:>14}",
        "namespace", "state", "dataplane's"
    );
    println!(
        "{:<44}  {:>12}  {:>14}",
        "10 routes, dataplane attached",
        mib(s10),
        mib(d10)
    );
    println!(
        "{:<44}  {:>12}  {:>14}",
        format!("{count} routes, dataplane attached"),
        mib(sn),
        mib(dn)
    );
    let per_route = sn.saturating_sub(s10) as f64 / f64::from(count - 10);
    println!();
    println!(
        "memory: 10 routes + dataplane {} (goal ≤ 4 MiB); {count} routes {} of state, {per_route:.0} bytes per route; the kernel's FIB for the same routes (ip -batch, slab + per-CPU growth, host-wide): about {} ({:.0} bytes per route, {:.2}× mproute's state); maps freed {freed:.2} s after ip netns del",
        mib(s10 + d10),
        mib(sn),
        mib(kernel),
        kernel as f64 / f64::from(count),
        kernel as f64 / sn.max(1) as f64,
    );
    Ok(())
}

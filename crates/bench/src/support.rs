//! What the benchmarks share: their namespaces (the test kit's, named `mptbench-...` and swept
//! when a killed run left them), commands with errors to report, the tools built beside this
//! binary, and the figures' statistics.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{anyhow, bail, ensure, Result};
use mpt_testkit::Netns;

/// Name prefix of the benchmarks' namespaces.
pub const NS_PREFIX: &str = "mptbench";

/// A throwaway namespace `mptbench-<pid>-<n>-TAG`, deleted when dropped.
pub fn netns(tag: &str) -> Result<Netns> {
    Netns::try_create(NS_PREFIX, tag).map_err(|e| anyhow!(e))
}

/// Delete the namespaces a killed benchmark left behind.
pub fn sweep_stale() {
    for n in mpt_testkit::netns::sweep(NS_PREFIX) {
        println!("bench: removed stale namespace {n}");
    }
}

/// `ip ARGS`; its standard output.
pub fn ip<I, S>(args: I) -> Result<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    output(Command::new("ip").args(args))
}

/// Run `cmd` (standard input closed); its standard output, or an error with its standard error.
pub fn output(cmd: &mut Command) -> Result<String> {
    mpt_testkit::cmd::try_output(cmd).map_err(|e| anyhow!(e))
}

/// `ip netns exec NS sysctl -q -w KEY=VALUE`.
pub fn sysctl(ns: &str, kv: &str) -> Result<()> {
    output(Command::new("ip").args(["netns", "exec", ns, "sysctl", "-q", "-w", kv])).map(|_| ())
}

/// Error unless we are root.
pub fn require_root(what: &str) -> Result<()> {
    if !mpt_testkit::is_root() {
        bail!("{what}: run as root");
    }
    Ok(())
}

/// A tool binary built with this one (`cargo xtask bench` builds both in release mode).
pub fn tool(name: &str) -> Result<PathBuf> {
    let me = std::env::current_exe()?;
    let bin = me
        .parent()
        .map(|d| d.join(name))
        .ok_or_else(|| anyhow!("{}: no directory", me.display()))?;
    ensure!(
        bin.is_file(),
        "{} not found: run the benchmarks with `cargo xtask bench ...`, which builds it",
        bin.display()
    );
    Ok(bin)
}

/// "min–max" of `v` with `decimals` digits after the point.
pub fn spread(v: &[f64], decimals: usize) -> String {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{min:.decimals$}–{max:.decimals$}")
}

/// How a goal fares, as the reports print it.
pub fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "NOT met"
    }
}

/// The median of `v` (NaN when empty).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}

//! Paths and child processes.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};

/// The workspace root: crates/xtask → ../..
pub fn repo_root() -> Result<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    dir.canonicalize()
        .with_context(|| format!("repository root {}", dir.display()))
}

/// The cargo target directory (CARGO_TARGET_DIR if set, else ROOT/target).
pub fn target_dir(root: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) if !d.is_empty() => root.join(d),
        _ => root.join("target"),
    }
}

/// The cargo that runs us (`CARGO` is set by `cargo run`), else `cargo` from PATH.
pub fn cargo() -> std::ffi::OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// Runs `cmd` with inherited stdio; error unless it exits with status 0.
pub fn run(cmd: &mut Command) -> Result<()> {
    let shown = mpt_testkit::cmd::show(cmd);
    let status = cmd
        .status()
        .with_context(|| format!("cannot start `{shown}`"))?;
    if !status.success() {
        bail!("`{shown}` failed ({status})");
    }
    Ok(())
}

/// Runs `cmd` capturing stdout; error (with its stderr) unless it exits with status 0.
pub fn output(cmd: &mut Command) -> Result<String> {
    mpt_testkit::cmd::try_output(cmd).map_err(|e| anyhow!(e))
}

/// `cargo ARGS` in the repository root, stdio inherited.
pub fn run_cargo(root: &Path, args: &[&str]) -> Result<()> {
    run_cargo_env(root, &[], args)
}

/// `VAR=VALUE ... cargo ARGS` in the repository root, stdio inherited.
pub fn run_cargo_env(root: &Path, env: &[(&str, &str)], args: &[&str]) -> Result<()> {
    let mut cmd = Command::new(cargo());
    cmd.args(args).current_dir(root);
    let shown: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v} ")).collect();
    for (k, v) in env {
        cmd.env(k, v);
    }
    println!("+ {}cargo {}", shown.concat(), args.join(" "));
    run(&mut cmd)
}

/// `ip ARGS`, output captured.
pub fn ip(args: &[&str]) -> Result<String> {
    mpt_testkit::cmd::try_ip(args).map_err(|e| anyhow!(e))
}

/// Error "run as root" unless we are.
pub fn require_root(what: &str) -> Result<()> {
    if !mpt_testkit::is_root() {
        bail!("{what}: run as root");
    }
    Ok(())
}

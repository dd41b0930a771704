//! Paths and child processes.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

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

/// Shell-like rendering of a command line, for messages.
pub fn show(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Runs `cmd` with inherited stdio; error unless it exits with status 0.
pub fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("cannot start `{}`", show(cmd)))?;
    if !status.success() {
        bail!("`{}` failed ({status})", show(cmd));
    }
    Ok(())
}

/// Runs `cmd` capturing stdout (stderr inherited); error unless it exits with status 0.
pub fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot start `{}`", show(cmd)))?;
    if !out.status.success() {
        bail!("`{}` failed ({})", show(cmd), out.status);
    }
    String::from_utf8(out.stdout).with_context(|| format!("`{}`: output is not UTF-8", show(cmd)))
}

/// `cargo ARGS` in the repository root, stdio inherited.
pub fn run_cargo(root: &Path, args: &[&str]) -> Result<()> {
    let mut cmd = Command::new(cargo());
    cmd.args(args).current_dir(root);
    println!("+ cargo {}", args.join(" "));
    run(&mut cmd)
}

/// `ip ARGS`, output captured.
pub fn ip<I, S>(args: I) -> Result<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    output(Command::new("ip").args(args))
}

/// Whether the effective user is root (from /proc/self/status, `Uid: real effective ...`).
pub fn is_root() -> Result<bool> {
    let status = std::fs::read_to_string("/proc/self/status").context("read /proc/self/status")?;
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|rest| rest.split_whitespace().nth(1))
        .context("no Uid line in /proc/self/status")?;
    Ok(euid == "0")
}

/// Error "run as root" unless we are.
pub fn require_root(what: &str) -> Result<()> {
    if !is_root()? {
        bail!("{what}: run as root");
    }
    Ok(())
}

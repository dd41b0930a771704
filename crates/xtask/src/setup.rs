//! `cargo xtask setup`: idempotent machine preparation.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result};

use crate::util::{require_root, run};
use mpt_testkit::cmd::show;

/// Debian packages the build, the tests and the demo need.
const PACKAGES: &[&str] = &[
    "make",
    "pkg-config",
    "libelf-dev",
    "zlib1g-dev",
    "clang-19",
    "bpftool",
    "iproute2",
    "tcpdump",
    "strace",
    "iputils-ping",
    "procps",
    "ethtool",
    // the Ansible collection's test runs a playbook with Debian's ansible-core
    "ansible-core",
];

/// What the kernel matrix needs (`cargo xtask test` boots Debian's kernels under qemu with
/// virtme-ng), installed without their recommends (qemu's would bring a desktop): qemu, Debian's
/// python3 with venv for virtme-ng from PyPI, busybox for its initramfs, depmod for the
/// kernels' modules.
const MATRIX_PACKAGES: &[&str] = &[
    "qemu-system-x86",
    "python3-venv",
    "busybox-static",
    "kmod",
    "ca-certificates",
    // virtme-ng runs `file` on the kernel image and on busybox (a fresh Debian 12 has none)
    "file",
];

const BPFFS: &str = "/sys/fs/bpf";
const PROTOS_DIR: &str = "/etc/iproute2/rt_protos.d";
const PROTOS_FILE: &str = "/etc/iproute2/rt_protos.d/mproute.conf";
const PROTOS_TEXT: &str =
    "# Registered by mproute: routes it owns carry this protocol.\n245\tmproute\n";

pub fn setup() -> Result<()> {
    require_root("setup")?;
    packages()?;
    bpffs()?;
    rt_protos()?;
    Ok(())
}

/// Whether dpkg reports PKG as installed.
fn installed(pkg: &str) -> Result<bool> {
    let mut cmd = Command::new("dpkg-query");
    cmd.args(["-W", "-f=${Status}", pkg]).stderr(Stdio::null());
    let out = cmd
        .output()
        .with_context(|| format!("cannot start `{}`", show(&cmd)))?;
    // Exit status 1 with no output: the package is unknown to dpkg.
    Ok(out.status.success()
        && String::from_utf8_lossy(&out.stdout).trim() == "install ok installed")
}

fn packages() -> Result<()> {
    let mut missing = Vec::new();
    let mut matrix = Vec::new();
    for pkg in PACKAGES {
        if !installed(pkg)? {
            missing.push(*pkg);
        }
    }
    for pkg in MATRIX_PACKAGES {
        if !installed(pkg)? {
            matrix.push(*pkg);
        }
    }
    if missing.is_empty() && matrix.is_empty() {
        println!("setup: packages: ok");
        return Ok(());
    }
    run(Command::new("apt-get").arg("update"))?;
    if !missing.is_empty() {
        println!("setup: packages: installing {}", missing.join(" "));
        run(Command::new("apt-get")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(["install", "-y"])
            .args(&missing))?;
    }
    if !matrix.is_empty() {
        println!(
            "setup: packages for the kernel matrix: installing {}",
            matrix.join(" ")
        );
        run(Command::new("apt-get")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(["install", "-y", "--no-install-recommends"])
            .args(&matrix))?;
    }
    Ok(())
}

/// Whether /proc/mounts has a bpf filesystem on `dir`.
fn bpffs_mounted(dir: &str) -> Result<bool> {
    let mounts = std::fs::read_to_string("/proc/mounts").context("read /proc/mounts")?;
    Ok(mounts.lines().any(|l| {
        let mut f = l.split_whitespace();
        let _src = f.next();
        f.next() == Some(dir) && f.next() == Some("bpf")
    }))
}

fn bpffs() -> Result<()> {
    if bpffs_mounted(BPFFS)? {
        println!("setup: bpffs: ok");
        return Ok(());
    }
    std::fs::create_dir_all(BPFFS).with_context(|| format!("create {BPFFS}"))?;
    run(Command::new("mount").args(["-t", "bpf", "bpf", BPFFS]))?;
    println!("setup: bpffs: mounted at {BPFFS}");
    Ok(())
}

/// Whether `text` maps 245 to "mproute" (iproute2 syntax: NUMBER NAME, `#` comments).
fn has_mproute_proto(text: &str) -> bool {
    text.lines().any(|l| {
        let l = l.split('#').next().unwrap_or_default();
        let mut f = l.split_whitespace();
        f.next() == Some("245") && f.next() == Some("mproute")
    })
}

fn rt_protos() -> Result<()> {
    let path = Path::new(PROTOS_FILE);
    match std::fs::read_to_string(path) {
        Ok(text) if has_mproute_proto(&text) => {
            println!("setup: {PROTOS_FILE}: ok");
            return Ok(());
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("read {PROTOS_FILE}")),
    }
    std::fs::create_dir_all(PROTOS_DIR).with_context(|| format!("create {PROTOS_DIR}"))?;
    std::fs::write(path, PROTOS_TEXT).with_context(|| format!("write {PROTOS_FILE}"))?;
    println!("setup: {PROTOS_FILE}: wrote \"245\\tmproute\"");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::has_mproute_proto;

    #[test]
    fn proto_line() {
        assert!(has_mproute_proto(super::PROTOS_TEXT));
        assert!(has_mproute_proto("245 mproute # x\n"));
        assert!(!has_mproute_proto("# 245\tmproute\n"));
        assert!(!has_mproute_proto("246\tmproute\n"));
    }
}

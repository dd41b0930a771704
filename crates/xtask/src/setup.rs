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
    // the completion tests drive the generated zsh and fish scripts (8 MB together)
    "zsh",
    "fish",
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

/// What the Debian package's checks need, without recommends: systemd-analyze (`verify` of the
/// units; a fresh Debian 12 root has no systemd) and man (verify runs it for `Documentation=`).
const PACKAGE_CHECK_PACKAGES: &[&str] = &["systemd", "man-db"];

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
    promtool()?;
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
    for pkg in MATRIX_PACKAGES.iter().chain(PACKAGE_CHECK_PACKAGES) {
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
            "setup: packages for the kernel matrix and the package checks: installing {}",
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

/// Where setup puts Debian's promtool (`promtool check metrics` is the metrics tests' oracle),
/// under the target directory: `tools/prometheus` holds the package's files.
pub const PROMTOOL: &str = "tools/prometheus/usr/bin/promtool";

/// Debian's promtool, from the `prometheus` package, extracted under the target directory
/// (`PROMTOOL`). Installing the package would start and enable a Prometheus server on the
/// machine: the package is downloaded (`apt-get download`) and unpacked (`dpkg-deb -x`)
/// instead, once.
fn promtool() -> Result<()> {
    let target = crate::util::target_dir(&crate::util::repo_root()?);
    let tool = target.join(PROMTOOL);
    if Command::new(&tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
    {
        println!("setup: promtool: ok");
        return Ok(());
    }
    let work = target.join("tools/prometheus.download");
    if work.exists() {
        std::fs::remove_dir_all(&work).with_context(|| format!("remove {}", work.display()))?;
    }
    std::fs::create_dir_all(&work).with_context(|| format!("create {}", work.display()))?;
    // (as root into a directory _apt cannot write: apt would warn that it downloads unsandboxed)
    let download = || {
        let mut c = Command::new("apt-get");
        c.args(["-o", "APT::Sandbox::User=root", "download", "prometheus"])
            .current_dir(&work);
        c
    };
    // a machine whose package lists are older than the archive: update them once
    if !download().status().is_ok_and(|s| s.success()) {
        run(Command::new("apt-get").arg("update"))?;
        run(&mut download())?;
    }
    let deb = std::fs::read_dir(&work)
        .with_context(|| format!("read {}", work.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .with_context(|| {
            format!(
                "apt-get download prometheus left no .deb in {}",
                work.display()
            )
        })?;
    let files = work.join("files");
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&files))?;
    // the server is not needed (50 MB)
    let _ = std::fs::remove_file(files.join("usr/bin/prometheus"));
    let dest = target.join("tools/prometheus");
    if dest.exists() {
        std::fs::remove_dir_all(&dest).with_context(|| format!("remove {}", dest.display()))?;
    }
    std::fs::rename(&files, &dest).with_context(|| format!("move to {}", dest.display()))?;
    std::fs::remove_dir_all(&work).with_context(|| format!("remove {}", work.display()))?;
    run(Command::new(&tool).arg("--version").stdout(Stdio::null()))?;
    println!("setup: promtool: unpacked into {}", dest.display());
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

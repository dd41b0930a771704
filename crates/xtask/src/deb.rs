//! `cargo xtask deb`: one Debian package, `target/debian/mpt_VERSION_ARCH.deb`, built with
//! `dpkg-deb` (Debian's own tool, in every Debian system: nothing to install, no crate
//! added) from a staged tree:
//!
//! ```text
//! usr/bin/{mproute,ila,pfanout}                     release builds, stripped
//! usr/share/man/man8/*.8.gz                         man/ (generated, checked fresh by the suite)
//! usr/share/bash-completion/completions/TOOL        completions/ where Debian's shells look
//! usr/share/zsh/vendor-completions/_TOOL
//! usr/share/fish/vendor_completions.d/TOOL.fish
//! etc/iproute2/rt_protos.d/{mproute,ila}.conf       conffiles
//! lib/systemd/system/*                              every unit file in etc/systemd/
//! usr/lib/mproute/mproute-restore                   the save/restore script of the units
//! usr/share/ansible/collections/ansible_collections/mpt/net/   the collection (ansible/)
//! usr/share/doc/mpt/{README.md,copyright}           and LICENSE* where the repository has them
//! ```
//!
//! The units are installed, not enabled: the operator enables what the machine needs
//! (README). [`install_and_demo`] is the suite's step: `dpkg -i`, `systemd-analyze verify` of
//! the installed units (man pages included), then the demo from `/usr/bin`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::util;

/// The package's name.
const NAME: &str = "mpt";
const TOOLS: [&str; 3] = ["mproute", "ila", "pfanout"];
/// What a file name must end with to be a systemd unit (every one in etc/systemd/ is shipped).
const UNIT_SUFFIXES: [&str; 6] = [
    ".service", ".timer", ".socket", ".path", ".target", ".mount",
];
const UNIT_DIR: &str = "lib/systemd/system";
/// The protocol names the package owns (conffiles).
const PROTOS: [&str; 2] = [
    "etc/iproute2/rt_protos.d/mproute.conf",
    "etc/iproute2/rt_protos.d/ila.conf",
];

/// Build the tools in release mode and the package; its path.
pub fn build(root: &Path) -> Result<PathBuf> {
    util::run_cargo(
        root,
        &[
            "build",
            "--release",
            "-p",
            "mproute",
            "-p",
            "ila",
            "-p",
            "pfanout",
        ],
    )?;
    let target = util::target_dir(root);
    let out = target.join("debian");
    let stage = out.join("stage");
    if stage.exists() {
        std::fs::remove_dir_all(&stage).with_context(|| format!("remove {}", stage.display()))?;
    }
    std::fs::create_dir_all(&stage).with_context(|| format!("create {}", stage.display()))?;

    // the tools
    let bin = mkdir(&stage, "usr/bin")?;
    for t in TOOLS {
        let to = bin.join(t);
        copy(&target.join("release").join(t), &to)?;
        util::run(Command::new("strip").arg("--strip-unneeded").arg(&to))?;
    }
    // man pages, compressed as Debian ships them
    let man = mkdir(&stage, "usr/share/man/man8")?;
    for f in files(&root.join("man"))? {
        let name = file_name(&f)?;
        let to = man.join(format!("{name}.gz"));
        let gz = Command::new("gzip")
            .args(["-9", "-n", "-c"])
            .arg(&f)
            .output()
            .context("gzip")?;
        if !gz.status.success() {
            bail!(
                "gzip {}: {}",
                f.display(),
                String::from_utf8_lossy(&gz.stderr)
            );
        }
        std::fs::write(&to, gz.stdout).with_context(|| format!("write {}", to.display()))?;
    }
    // completions where Debian's shells look for them
    let comp = root.join("completions");
    for t in TOOLS {
        for (from, dir, to) in [
            (
                format!("{t}.bash"),
                "usr/share/bash-completion/completions",
                t.to_string(),
            ),
            (
                format!("_{t}"),
                "usr/share/zsh/vendor-completions",
                format!("_{t}"),
            ),
            (
                format!("{t}.fish"),
                "usr/share/fish/vendor_completions.d",
                format!("{t}.fish"),
            ),
        ] {
            copy(&comp.join(from), &mkdir(&stage, dir)?.join(to))?;
        }
    }
    // the protocol names, conffiles (mproute's 245, ila's 246: the tools write them at first
    // use where missing, the package owns them)
    mkdir(&stage, "etc/iproute2/rt_protos.d")?;
    for protos in PROTOS {
        copy(&root.join(protos), &stage.join(protos))?;
    }
    // the units, all of them, and the script they run
    let units = mkdir(&stage, UNIT_DIR)?;
    let mut unit_names = Vec::new();
    for f in files(&root.join("etc/systemd"))? {
        let name = file_name(&f)?;
        if UNIT_SUFFIXES.iter().any(|s| name.ends_with(s)) {
            copy(&f, &units.join(&name))?;
            unit_names.push(name);
        }
    }
    if unit_names.is_empty() {
        bail!("no unit files in etc/systemd");
    }
    copy(
        &root.join("etc/systemd/mproute-restore"),
        &mkdir(&stage, "usr/lib/mproute")?.join("mproute-restore"),
    )?;
    // the Ansible collection
    copy_tree(
        &root.join("ansible"),
        &mkdir(
            &stage,
            "usr/share/ansible/collections/ansible_collections/mpt/net",
        )?,
    )?;
    // documents
    let doc = mkdir(&stage, &format!("usr/share/doc/{NAME}"))?;
    copy(&root.join("README.md"), &doc.join("README.md"))?;
    for f in files(root)? {
        let name = file_name(&f)?;
        if name.starts_with("LICENSE") || name.starts_with("COPYING") {
            copy(&f, &doc.join(&name))?;
        }
    }
    std::fs::write(
        doc.join("copyright"),
        format!(
            "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\
             Upstream-Name: {NAME}\n\n\
             Files: *\n\
             License: {}\n",
            env!("CARGO_PKG_LICENSE")
        ),
    )?;
    control(&stage, &unit_names)?;

    // one package in target/debian, so that `dpkg -i target/debian/*.deb` installs it
    for f in files(&out)? {
        if f.extension().is_some_and(|e| e == "deb") {
            std::fs::remove_file(&f).with_context(|| format!("remove {}", f.display()))?;
        }
    }
    let arch = util::output(Command::new("dpkg").arg("--print-architecture"))?;
    let deb = out.join(format!(
        "{NAME}_{}_{}.deb",
        env!("CARGO_PKG_VERSION"),
        arch.trim()
    ));
    util::run(
        Command::new("dpkg-deb")
            .args(["--root-owner-group", "--build"])
            .arg(&stage)
            .arg(&deb),
    )?;
    println!("deb: {}", deb.display());
    Ok(deb)
}

/// DEBIAN/: control, conffiles, and the maintainer scripts (systemd told of new units; the
/// state directory of the restore unit).
fn control(stage: &Path, units: &[String]) -> Result<()> {
    let dir = mkdir(stage, "DEBIAN")?;
    let size_kb = tree_size(stage)?.div_ceil(1024);
    // at least the C library the tools were linked against here
    let libc = util::output(Command::new("dpkg-query").args(["-W", "-f=${Version}", "libc6"]))?;
    let libc = libc.split(['-', '+']).next().unwrap_or("2.36").to_string();
    let arch = util::output(Command::new("dpkg").arg("--print-architecture"))?;
    std::fs::write(
        dir.join("control"),
        format!(
            "Package: {NAME}\n\
             Version: {}\n\
             Architecture: {}\n\
             Maintainer: mpt developers <mpt@example.invalid>\n\
             Installed-Size: {size_kb}\n\
             Depends: libc6 (>= {libc}), libelf1, zlib1g, libgcc-s1\n\
             Recommends: iproute2\n\
             Suggests: ansible-core, bpftool\n\
             Section: net\n\
             Priority: optional\n\
             Description: multipath routing, ILA and packet-fanout tools\n \
             mproute: multipath routes with a per-route algorithm carried out by a tc/XDP\n \
             dataplane; ila: Identifier-Locator Addressing tables over the kernel's ILA or a\n \
             BPF translator; pfanout: AF_PACKET fanout groups. With man pages, bash, zsh and\n \
             fish completions, systemd units (mproute-watch@.service, mproute-restore.service)\n \
             and the Ansible collection mpt.net.\n",
            env!("CARGO_PKG_VERSION"),
            arch.trim()
        ),
    )?;
    let conffiles: String = PROTOS.iter().map(|p| format!("/{p}\n")).collect();
    std::fs::write(dir.join("conffiles"), conffiles)?;
    let reload =
        "if [ -d /run/systemd/system ]; then systemctl daemon-reload >/dev/null || true; fi\n";
    script(
        &dir.join("postinst"),
        &format!(
            "#!/bin/sh\nset -e\n# units: {}\nmkdir -p /var/lib/mproute\n{reload}",
            units.join(" ")
        ),
    )?;
    // on remove, the running watchers and the metrics timer stop before their binaries go
    script(
        &dir.join("prerm"),
        "#!/bin/sh\nset -e\nif [ \"$1\" = remove ] && [ -d /run/systemd/system ]; then\n  \
         systemctl stop 'mproute-watch@*.service' mproute-metrics.timer mproute-metrics.service \
         >/dev/null 2>&1 || true\nfi\n",
    )?;
    script(&dir.join("postrm"), &format!("#!/bin/sh\nset -e\n{reload}"))?;
    Ok(())
}

/// `dpkg -i` the package, verify the installed units (`systemd-analyze verify`, man pages
/// included) and run the demo from `/usr/bin`.
pub fn install_and_demo(deb: &Path) -> Result<()> {
    util::require_root("installing the package")?;
    util::run(
        Command::new("dpkg")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(["--force-confdef", "--force-confold", "-i"])
            .arg(deb),
    )?;
    // the units as dpkg installed them (every file of the package in the unit directory)
    let listed = util::output(Command::new("dpkg").args(["-L", NAME]))?;
    let mut names = Vec::new();
    for l in listed.lines() {
        let Some(name) = l.strip_prefix(&format!("/{UNIT_DIR}/")) else {
            continue;
        };
        if name.contains('/') || !UNIT_SUFFIXES.iter().any(|s| name.ends_with(s)) {
            continue;
        }
        match name.split_once("@.") {
            Some((stem, ext)) => {
                names.push(format!("{stem}@-.{ext}"));
                names.push(format!("{stem}@blue.{ext}"));
            }
            None => names.push(name.to_string()),
        }
    }
    if names.is_empty() {
        bail!("the package installed no unit");
    }
    let o = Command::new("systemd-analyze")
        .arg("verify")
        .args(&names)
        .output()
        .context("run systemd-analyze")?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    if !o.status.success() || !text.trim().is_empty() {
        bail!("systemd-analyze verify {}:\n{text}", names.join(" "));
    }
    println!("deb: installed units verified: {}", names.join(" "));
    crate::demo::steps(Path::new("/usr/bin"))
}

fn mkdir(stage: &Path, rel: &str) -> Result<PathBuf> {
    let d = stage.join(rel);
    std::fs::create_dir_all(&d).with_context(|| format!("create {}", d.display()))?;
    Ok(d)
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    std::fs::copy(from, to)
        .with_context(|| format!("copy {} to {}", from.display(), to.display()))?;
    Ok(())
}

fn script(path: &Path, text: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).with_context(|| format!("write {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("chmod {}", path.display()))
}

fn file_name(p: &Path) -> Result<String> {
    p.file_name()
        .and_then(|n| n.to_str())
        .map(String::from)
        .with_context(|| format!("a file name: {}", p.display()))
}

/// The plain files of a directory, sorted (none if it does not exist).
fn files(dir: &Path) -> Result<Vec<PathBuf>> {
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("read {}", dir.display()))? {
        let p = e?.path();
        if p.is_file() {
            v.push(p);
        }
    }
    v.sort();
    Ok(v)
}

/// Copy a directory's tree (no caches: `__pycache__`, `*.pyc`).
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    for e in std::fs::read_dir(from).with_context(|| format!("read {}", from.display()))? {
        let p = e?.path();
        let name = file_name(&p)?;
        if name == "__pycache__" || name.ends_with(".pyc") {
            continue;
        }
        if p.is_dir() {
            let d = to.join(&name);
            std::fs::create_dir_all(&d)?;
            copy_tree(&p, &d)?;
        } else {
            copy(&p, &to.join(&name))?;
        }
    }
    Ok(())
}

fn tree_size(dir: &Path) -> Result<u64> {
    let mut n = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let m = e.metadata()?;
        n += if m.is_dir() {
            tree_size(&e.path())?
        } else {
            m.len()
        };
    }
    Ok(n)
}

//! `ansible-test sanity` on the Ansible collection (`ansible/`, `mpt.net`), in the suite
//! (`cargo xtask test`) and alone (`cargo xtask ansible-sanity`).
//!
//! Debian 12's ansible-core (2.14) runs the collection's playbooks in the root tests; the
//! sanity run takes a pinned ansible-core from PyPI in a venv of Debian's python3.11
//! (`target/ansible-test/venv`, set up once, again only when the pins change), with
//! antsibull-changelog, which lints `changelogs/changelog.yaml` and regenerates CHANGELOG.rst
//! (a stale one fails, as stale man pages do). ansible-test wants the collection under
//! `.../ansible_collections/mpt/net/` in a git work tree (it lists the files with git): a
//! fresh copy in `target/ansible-test/ansible_collections/mpt/net` with a `git init` of its own.
//!
//! No docker: `--local --python 3.11`. ansible-test still makes a venv per sanity test (cached
//! under `target/ansible-test/home/.ansible/test/venv`, the requirements pinned by ansible-test
//! and fetched from PyPI) and bootstraps pip into each with a `get-pip.py` it downloads from
//! the Ansible project's CI file server, which this machine and CI cannot reach: its cache
//! slot gets a stand-in that bootstraps with the interpreter's own `ensurepip` and then
//! installs the pinned pip from PyPI.
//!
//! Cost, measured on the shared development VM: 180 s the first time (the venvs from PyPI),
//! 6 to 10 s after.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::util::{output, run, target_dir};

/// ansible-core from PyPI for ansible-test (2.19 runs its controller on Python 3.11).
const ANSIBLE_CORE: &str = "2.19.14";
/// antsibull-changelog as ansible-core 2.19.14's changelog sanity test pins it.
const ANTSIBULL_CHANGELOG: &[&str] = &[
    "antsibull-changelog==0.29.0",
    "docutils==0.18.1",
    "packaging==25.0",
    "PyYAML==6.0.2",
    "rstcheck==5.0.0",
    "semantic-version==2.10.0",
];
/// The pip ansible-test 2.19.14 bootstraps into its venvs (`get_venv_packages`).
const ANSIBLE_TEST_PIP: &str = "24.2";
/// Debian 12's Python, the controller ansible-test runs on.
const PYTHON: &str = "/usr/bin/python3.11";

/// The stand-in for ansible-test's downloaded `get-pip.py`: the interpreter's bundled pip
/// (ensurepip), then `pip install` of what ansible-test asks for (its pinned pip).
const GET_PIP: &str = r#"# Written by cargo xtask (crates/xtask/src/ansible.rs): ansible-test's get-pip.py stand-in.
import ensurepip
import subprocess
import sys

ensurepip.bootstrap(upgrade=False)
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "pip", "install"] + args)
"#;

/// `ansible-test sanity` and the changelog's checks; Err names what failed.
pub fn sanity(root: &Path) -> Result<()> {
    let start = Instant::now();
    let base = target_dir(root).join("ansible-test");
    let venv = base.join("venv");
    let home = base.join("home");
    let coll = base.join("ansible_collections/mpt/net");
    ensure_venv(&venv)?;
    pins_agree(&venv)?;
    let cache = home.join(".ansible/test/cache");
    std::fs::create_dir_all(&cache).with_context(|| format!("create {}", cache.display()))?;
    let get_pip = cache.join(format!("get_pip_{}.py", ANSIBLE_TEST_PIP.replace('.', "_")));
    std::fs::write(&get_pip, GET_PIP).with_context(|| format!("write {}", get_pip.display()))?;

    // a fresh copy (what was removed from ansible/ must not linger), in a git work tree
    if coll.exists() {
        std::fs::remove_dir_all(&coll).with_context(|| format!("remove {}", coll.display()))?;
    }
    copy_tree(&root.join("ansible"), &coll)?;
    run(Command::new("git")
        .args(["init", "-q", "."])
        .current_dir(&coll))?;

    for (copy, orig) in [
        ("ansible/LICENSE", "LICENSE"),
        (
            "ansible/LICENSES/GPL-2.0-only.txt",
            "LICENSES/GPL-2.0-only.txt",
        ),
        ("ansible/LICENSES/MIT.txt", "LICENSES/MIT.txt"),
    ] {
        let read = |p: &str| std::fs::read(root.join(p)).with_context(|| format!("read {p}"));
        if read(copy)? != read(orig)? {
            bail!("{copy} differs from {orig}: the collection carries a copy of the repository's licence");
        }
    }

    let bin = venv.join("bin");
    println!(
        "+ ansible-test sanity --local --python 3.11 (in {})",
        coll.display()
    );
    run(Command::new(bin.join("ansible-test"))
        .args(["sanity", "--local", "--python", "3.11", "--color", "no"])
        .current_dir(&coll)
        .env("HOME", &home))
    .context("ansible-test sanity failed")?;

    // ansible-test lints only changelog fragments; the changelog itself, here
    let changelog = bin.join("antsibull-changelog");
    run(Command::new(&changelog)
        .args(["lint-changelog-yaml", "changelogs/changelog.yaml"])
        .current_dir(&coll))
    .context("changelogs/changelog.yaml")?;
    let lint = output(Command::new(&changelog).arg("lint").current_dir(&coll))?;
    if !lint.trim().is_empty() {
        bail!("antsibull-changelog lint:\n{lint}");
    }
    run(Command::new(&changelog).arg("generate").current_dir(&coll))?;
    let generated = std::fs::read_to_string(coll.join("CHANGELOG.rst")).context("CHANGELOG.rst")?;
    let committed = std::fs::read_to_string(root.join("ansible/CHANGELOG.rst"))
        .context("ansible/CHANGELOG.rst")?;
    if generated != committed {
        bail!(
            "ansible/CHANGELOG.rst is stale: run `antsibull-changelog generate` in ansible/ ({} has it)",
            bin.display()
        );
    }
    println!(
        "ansible-test sanity: passed in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The venv with the pinned ansible-core and antsibull-changelog; made again when the pins
/// are not what its marker says.
fn ensure_venv(venv: &Path) -> Result<()> {
    let marker = venv.join("mpt-pins.txt");
    let pins = format!(
        "ansible-core=={ANSIBLE_CORE}\n{}\n",
        ANTSIBULL_CHANGELOG.join("\n")
    );
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(pins.as_str()) {
        return Ok(());
    }
    if venv.exists() {
        std::fs::remove_dir_all(venv).with_context(|| format!("remove {}", venv.display()))?;
    }
    println!("ansible-test: a venv with ansible-core {ANSIBLE_CORE} from PyPI");
    run(Command::new(PYTHON).args(["-m", "venv"]).arg(venv))?;
    run(Command::new(venv.join("bin/pip"))
        .args(["install", "-q", "--disable-pip-version-check"])
        .arg(format!("ansible-core=={ANSIBLE_CORE}"))
        .args(ANTSIBULL_CHANGELOG))?;
    std::fs::write(&marker, pins).with_context(|| format!("write {}", marker.display()))?;
    Ok(())
}

/// Whether the pins here are the ones the installed ansible-test has (they go together: a
/// new ansible-core bootstraps another pip and pins another antsibull-changelog).
fn pins_agree(venv: &Path) -> Result<()> {
    let at = venv.join("lib/python3.11/site-packages/ansible_test");
    let read = |p: &str| {
        std::fs::read_to_string(at.join(p)).with_context(|| format!("read ansible_test/{p}"))
    };
    if !read("_internal/python_requirements.py")?.contains(&format!("pip='{ANSIBLE_TEST_PIP}'")) {
        bail!("ansible-test {ANSIBLE_CORE} does not bootstrap pip {ANSIBLE_TEST_PIP}: update ANSIBLE_TEST_PIP in crates/xtask/src/ansible.rs");
    }
    let reqs = read("_data/requirements/sanity.changelog.txt")?;
    for pin in ANTSIBULL_CHANGELOG {
        if !reqs.lines().any(|l| l.trim() == *pin) {
            bail!("ansible-test {ANSIBLE_CORE}'s changelog test does not pin {pin}: update ANTSIBULL_CHANGELOG in crates/xtask/src/ansible.rs");
        }
    }
    Ok(())
}

/// Copies the tree `from` to `to` (files and directories; a symbolic link is an error: the
/// collection has none, and ansible-test's symlinks test would refuse most).
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("create {}", to.display()))?;
    for e in std::fs::read_dir(from).with_context(|| format!("read {}", from.display()))? {
        let e = e.with_context(|| format!("read {}", from.display()))?;
        let ty = e.file_type()?;
        let dst = to.join(e.file_name());
        if ty.is_dir() {
            if e.file_name() == "output" && from.ends_with("tests") {
                continue; // ansible-test's own output, if it ever ran in ansible/
            }
            copy_tree(&e.path(), &dst)?;
        } else if ty.is_file() {
            std::fs::copy(e.path(), &dst)
                .with_context(|| format!("copy {}", e.path().display()))?;
        } else {
            bail!("{}: not a file or a directory", e.path().display());
        }
    }
    Ok(())
}

//! `cargo xtask`: set-up of this machine, the demo, the full test run, generated docs and the
//! benchmarks.
//!
//! xtask depends on pure-Rust crates only, so that `cargo xtask demo` and `cargo xtask test`
//! build and start on a machine that has nothing but rustup and gcc. They run set-up first
//! (apt packages, bpffs) and only then build the rest of the workspace, as child `cargo`
//! processes: the tools, the BPF programs (clang-19, bpftool, libelf) and the benchmarks.

mod ansible;
mod deb;
mod demo;
mod docs;
mod guest;
mod kernels;
mod setup;
mod util;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// Developer tasks for the mpt workspace.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask")]
struct Args {
    #[command(subcommand)]
    cmd: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Prepare this machine (as root): apt packages, bpffs, the "mproute" route protocol name.
    Setup,
    /// Generate man pages (man/) and shell completions (completions/) with each tool's
    /// `--generate`.
    GenDocs {
        /// Directory that receives man/ and completions/ (default: the repository root).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Fail if man/ or completions/ differ from what gen-docs would write.
    CheckDocs,
    /// `ansible-test sanity` on the Ansible collection (ansible/), with a pinned ansible-core
    /// from PyPI in target/ansible-test/venv, and its changelog linted and fresh.
    AnsibleSanity,
    /// setup, build and test the whole workspace, then the Debian package (built, installed
    /// with dpkg -i, its units verified, the demo run from /usr/bin), then check-docs,
    /// ansible-sanity, then the kernel matrix (Debian's 5.10, 6.1 and 6.12 under qemu).
    Test {
        /// Only the tests on the running kernel (no matrix).
        #[arg(long)]
        no_kernels: bool,
    },
    /// The kernel matrix alone (after a build): boot each of Debian's kernels (or those
    /// named: 5.10, 6.1, 6.12) under qemu and run the demo's steps and the chosen root tests.
    Kernels {
        /// A kernel series to run (repeatable; default: all).
        #[arg(long = "kernel", value_name = "SERIES")]
        kernels: Vec<String>,
        /// Only the guests' tests of this test executable (repeatable, e.g. ila_kernel; default:
        /// all of them and the demo).
        #[arg(long = "test", value_name = "NAME")]
        only_tests: Vec<String>,
    },
    /// Inside a kernel of the matrix (run by `kernels`, not by hand).
    #[command(hide = true)]
    Guest {
        /// The matrix's name for the kernel.
        #[arg(long)]
        series: String,
        /// A file of NAME=PATH lines, one per prebuilt test executable.
        #[arg(long)]
        tests: PathBuf,
    },
    /// Show the tools at work in throwaway network namespaces.
    Demo,
    /// Build the Debian package target/debian/mpt_VERSION_ARCH.deb (dpkg-deb): the tools
    /// (release), man pages, completions, systemd units, the Ansible collection.
    Deb {
        /// Then install it (dpkg -i), verify its units and run the demo from /usr/bin, as
        /// `cargo xtask test` does.
        #[arg(long)]
        install: bool,
    },
    /// Benchmarks (setup, then the mpt-bench package in release mode): routes, sync, memory, select, disrupt, forward, ila;
    /// `cargo xtask bench help` lists their options.
    #[command(disable_help_flag = true)]
    Bench {
        /// What to measure and its options, passed to mpt-bench.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "ARGS"
        )]
        args: Vec<OsString>,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args.cmd) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs a task; `Ok(false)` is a failure that has already been reported.
fn run(task: Task) -> Result<bool> {
    match task {
        Task::Setup => setup::setup().map(|()| true),
        Task::GenDocs { out } => {
            let out = match out {
                Some(dir) => dir,
                None => util::repo_root()?,
            };
            docs::gen_docs(&out).map(|()| true)
        }
        Task::CheckDocs => docs::check_docs(&util::repo_root()?),
        Task::AnsibleSanity => ansible::sanity(&util::repo_root()?).map(|()| true),
        Task::Test { no_kernels } => test(!no_kernels),
        Task::Kernels {
            kernels,
            only_tests,
        } => {
            setup::setup()?;
            let root = util::repo_root()?;
            let tests = test_executables(&root)?;
            let outcomes = kernels::run_matrix(&root, &kernels, &only_tests, &tests)?;
            Ok(report_matrix(&outcomes))
        }
        Task::Guest { series, tests } => guest::guest(&series, &tests),
        Task::Demo => demo::demo().map(|()| true),
        Task::Deb { install } => {
            setup::setup()?;
            let deb = deb::build(&util::repo_root()?)?;
            if install {
                deb::install_and_demo(&deb)?;
            }
            Ok(true)
        }
        Task::Bench { args } => bench(&args),
    }
}

/// Each kernel's line, and whether all passed.
fn report_matrix(outcomes: &[kernels::Outcome]) -> bool {
    println!("kernel matrix:");
    for o in outcomes {
        println!(
            "  {:<24} {} in {:.0} s",
            o.release,
            if o.ok { "passed" } else { "FAILED" },
            o.secs
        );
        for l in &o.summary {
            println!("    {}", l.trim_start_matches("guest: "));
        }
    }
    outcomes.iter().all(|o| o.ok)
}

/// The test executables of the workspace by target name, built if need be
/// (`cargo test --no-run`).
fn test_executables(root: &std::path::Path) -> Result<Vec<(String, PathBuf)>> {
    let out = util::output(
        std::process::Command::new(util::cargo())
            .args(["test", "--workspace", "--no-run", "--message-format=json"])
            .current_dir(root),
    )?;
    let mut v = Vec::new();
    for line in out.lines() {
        let Ok(m) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if m["reason"] != "compiler-artifact" || !m["profile"]["test"].as_bool().unwrap_or(false) {
            continue;
        }
        if let (Some(name), Some(exe)) = (m["target"]["name"].as_str(), m["executable"].as_str()) {
            v.push((name.to_string(), PathBuf::from(exe)));
        }
    }
    Ok(v)
}

/// `cargo xtask test`: setup, build, test, check-docs, ansible-test sanity, the kernel matrix;
/// one summary line at the end.
fn test(matrix: bool) -> Result<bool> {
    let root = util::repo_root()?;
    let start = Instant::now();
    let mut done: Vec<&str> = Vec::new();
    let result = (|| -> Result<bool> {
        setup::setup()?;
        done.push("setup");
        util::run_cargo(&root, &["build", "--workspace", "--all-targets"])?;
        done.push("build");
        util::run_cargo(
            &root,
            &[
                "test",
                "--workspace",
                "--all-targets",
                "--",
                "--test-threads=2",
            ],
        )?;
        done.push("tests");
        // the root tests of the tools that attach tc programs, again with classic tc (clsact
        // and direct-action filters), the fallback for kernels without tcx
        util::run_cargo_env(
            &root,
            &[("MPT_FORCE_CLASSIC_TC", "1")],
            &[
                "test",
                "-p",
                "mproute",
                "--test",
                "mproute_netns",
                "--test",
                "dataplane_netns",
                "--test",
                "fastpath_netns",
                "--test",
                "save_restore",
                "-p",
                "ila",
                "--test",
                "ila_netns",
                "--test",
                "ila_save_restore",
                "--",
                "--test-threads=2",
            ],
        )?;
        done.push("classic tc");
        // the package: built, installed with dpkg -i, its units verified, the demo run from
        // /usr/bin
        let deb = deb::build(&root)?;
        deb::install_and_demo(&deb)?;
        done.push("package");
        if !docs::check_docs(&root)? {
            return Ok(false);
        }
        done.push("docs fresh");
        ansible::sanity(&root)?;
        done.push("ansible-test sanity");
        if matrix {
            let tests = test_executables(&root)?;
            let outcomes = kernels::run_matrix(&root, &[], &[], &tests)?;
            if !report_matrix(&outcomes) {
                anyhow::bail!("the kernel matrix failed");
            }
            done.push("kernel matrix");
        }
        Ok(true)
    })();
    let secs = start.elapsed().as_secs_f64();
    let passed = if done.is_empty() {
        "nothing".to_string()
    } else {
        done.join(", ")
    };
    match &result {
        Ok(true) => println!("xtask test: PASSED ({passed}) in {secs:.1} s"),
        Ok(false) => println!("xtask test: FAILED at check-docs (passed: {passed}) in {secs:.1} s"),
        Err(e) => println!("xtask test: FAILED: {e:#} (passed: {passed}) in {secs:.1} s"),
    }
    result
}

/// `cargo xtask bench ARGS`: setup, build the tools and the benchmarks in release mode, run
/// `mpt-bench ARGS`.
fn bench(args: &[OsString]) -> Result<bool> {
    let root = util::repo_root()?;
    setup::setup()?;
    util::run_cargo(
        &root,
        &[
            "build",
            "--release",
            "-p",
            "mproute",
            "-p",
            "ila",
            "-p",
            "mpt-bench",
        ],
    )?;
    let bin = util::target_dir(&root).join("release/mpt-bench");
    let status = std::process::Command::new(&bin)
        .args(args)
        .status()
        .map_err(|e| anyhow::anyhow!("cannot start {}: {e}", bin.display()))?;
    Ok(status.success())
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    /// What `cargo ARGS` prints (offline: everything was fetched by the build).
    fn cargo(args: &[&str]) -> String {
        let root = crate::util::repo_root().expect("repository root");
        let out = Command::new(crate::util::cargo())
            .args(args)
            .arg("--offline")
            .current_dir(root)
            .output()
            .expect("run cargo");
        assert!(
            out.status.success(),
            "cargo {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// xtask must build on a machine with nothing but rustup and gcc, before `setup` installs
    /// make, pkg-config and libelf: no crate in its build (normal and build dependencies, as
    /// `cargo run -p xtask` resolves them) may be a `-sys` crate or link a native library.
    #[test]
    fn no_native_dependencies() {
        let tree = cargo(&[
            "tree",
            "-p",
            "xtask",
            "-e",
            "normal,build",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ]);
        let names: std::collections::BTreeSet<(String, String)> = tree
            .lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                Some((
                    f.next()?.to_string(),
                    f.next()?.trim_start_matches('v').to_string(),
                ))
            })
            .collect();
        assert!(names.iter().any(|(n, _)| n == "clap"), "{tree}");
        let host = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
        let meta: serde_json::Value = serde_json::from_str(&cargo(&[
            "metadata",
            "--format-version",
            "1",
            "--filter-platform",
            &host,
        ]))
        .expect("cargo metadata is JSON");
        let links: Vec<(String, String)> = meta["packages"]
            .as_array()
            .expect("packages")
            .iter()
            .filter(|p| !p["links"].is_null())
            .map(|p| {
                (
                    p["name"].as_str().unwrap_or_default().to_string(),
                    p["version"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        // the check can fail: the workspace has such crates (libbpf-sys links libbpf)
        assert!(links.iter().any(|(n, _)| n == "libbpf-sys"), "{links:?}");
        let bad: Vec<String> = names
            .iter()
            .filter(|(n, v)| n.ends_with("-sys") || links.contains(&(n.clone(), v.clone())))
            .map(|(n, v)| format!("{n} {v}"))
            .collect();
        assert!(
            bad.is_empty(),
            "xtask's build would need native libraries before setup can install them: {bad:?}"
        );
    }
}

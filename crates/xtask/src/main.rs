//! `cargo xtask`: machine setup, generated docs (man pages, shell completions), the full test
//! run, a namespace demo of mproute, a route-installation benchmark against `ip -batch`, a
//! dataplane nexthop-selection benchmark and a packet-rate benchmark of forwarding over veth.

mod bench;
mod demo;
mod docs;
mod netns;
mod setup;
mod util;

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
    /// Generate man pages (man/) and shell completions (completions/).
    GenDocs {
        /// Directory that receives man/ and completions/ (default: the repository root).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Fail if man/ or completions/ differ from what gen-docs would write.
    CheckDocs,
    /// setup, build and test the whole workspace, then check-docs.
    Test,
    /// Show mproute at work in throwaway network namespaces.
    Demo,
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        what: BenchWhat,
    },
}

#[derive(Debug, Subcommand)]
enum BenchWhat {
    /// Install N two-nexthop IPv4 routes with `mproute -b` and with `ip -batch`.
    Routes {
        /// Number of routes per run.
        #[arg(long, default_value_t = 100_000)]
        count: u32,
        /// Runs per tool.
        #[arg(long, default_value_t = 3)]
        runs: u32,
    },
    /// Per-packet cost of each dataplane algorithm against a plain bpf_fib_lookup forward
    /// (BPF_PROG_TEST_RUN), and the hash balance of 65,536 flows over 8 nexthops.
    Select {
        /// Packets per run and program.
        #[arg(long, default_value_t = 1_000_000)]
        repeat: u64,
        /// Runs per program.
        #[arg(long, default_value_t = 5)]
        runs: u32,
    },
    /// Packet rate through a router namespace over veth (H1 - R - H2): the kernel's forwarding
    /// against mproute's XDP and tc dataplane, with an XDP live-frames generator in H1 and an
    /// XDP drop counter in H2, interleaved in one run.
    Forward {
        /// Seconds of generation per run and case.
        #[arg(long, default_value_t = 3)]
        seconds: u32,
        /// Runs per case.
        #[arg(long, default_value_t = 3)]
        runs: u32,
        /// Generator threads (thread i on CPU i mod CPUs).
        #[arg(long, default_value_t = 1)]
        threads: u32,
        /// Send UDP without checksum (0) instead of with a valid one.
        #[arg(long)]
        zero_udp_checksum: bool,
        /// Leave out the TCP throughput part.
        #[arg(long, conflicts_with = "tcp_only")]
        no_tcp: bool,
        /// Only the TCP throughput part.
        #[arg(long)]
        tcp_only: bool,
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
        Task::Test => test(),
        Task::Demo => demo::demo().map(|()| true),
        Task::Bench {
            what: BenchWhat::Routes { count, runs },
        } => bench::routes(count, runs).map(|()| true),
        Task::Bench {
            what: BenchWhat::Select { repeat, runs },
        } => bench::select::run(repeat, runs),
        Task::Bench {
            what:
                BenchWhat::Forward {
                    seconds,
                    runs,
                    threads,
                    zero_udp_checksum,
                    no_tcp,
                    tcp_only,
                },
        } => bench::forward::run(&bench::forward::Opts {
            seconds,
            runs,
            threads,
            udp_csum: !zero_udp_checksum,
            tcp: !no_tcp,
            rate: !tcp_only,
        }),
    }
}

/// `cargo xtask test`: setup, build, test, check-docs; one summary line at the end.
fn test() -> Result<bool> {
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
        if !docs::check_docs(&root)? {
            return Ok(false);
        }
        done.push("docs fresh");
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

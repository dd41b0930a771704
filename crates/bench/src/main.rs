//! `mpt-bench`: the benchmarks `cargo xtask bench ...` runs (xtask builds this package and the
//! tools in release mode, then runs it). Every figure is printed beside the alternative it is
//! judged against, measured in the same run, and as a ratio:
//!
//! - `routes`: installing N two-nexthop routes with `mproute -b` against `ip -batch`;
//! - `sync`: `mproute sync` and `flush` of a whole table against `ip -j route show` and `ip
//!   route flush` of it;
//! - `select`: the per-packet cost of each dataplane algorithm against a plain `bpf_fib_lookup`
//!   forwarder (`BPF_PROG_TEST_RUN`), and the hash balance of 65,536 flows;
//! - `forward`: packets per second and TCP throughput through a router namespace over veth, the
//!   kernel's forwarding against mproute's XDP and tc dataplane.

mod disrupt;
mod forward;
mod ila;
mod memory;
mod routes;
mod select;
mod support;
mod sync;

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// Benchmarks of the mpt tools (run them with `cargo xtask bench ...`).
#[derive(Debug, Parser)]
#[command(name = "cargo xtask bench", bin_name = "cargo xtask bench")]
struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(Debug, Subcommand)]
enum What {
    /// Install N two-nexthop IPv4 routes with `mproute -b` and with `ip -batch`.
    Routes {
        /// Number of routes per run.
        #[arg(long, default_value_t = 100_000)]
        count: u32,
        /// Runs per tool.
        #[arg(long, default_value_t = 3)]
        runs: u32,
        /// Every route with its own nexthop set (weights), no two sharing a group (at most
        /// 1,000,000), beside ip -batch installing the same.
        #[arg(long)]
        distinct: bool,
        /// Leave ip -batch out (the kernel alone takes minutes a run for 100,000 distinct
        /// multipath routes): mproute's own figures and its linearity only.
        #[arg(long)]
        no_ip: bool,
    },
    /// `mproute sync` (nothing to repair, and after drift) and `mproute flush` of N managed
    /// routes, against `ip -j route show` and `ip route flush proto mproute` of the same table.
    Sync {
        /// Managed routes in the table.
        #[arg(long, default_value_t = 100_000)]
        count: u32,
        /// Rounds.
        #[arg(long, default_value_t = 3)]
        runs: u32,
    },
    /// What one namespace's BPF state costs (10 routes + dataplane, --count routes) beside
    /// the kernel's FIB for the same routes, and how long its maps outlive `ip netns del`.
    Memory {
        /// Routes in the large namespace.
        #[arg(long, default_value_t = 100_000)]
        count: u32,
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
    /// Flows moved when a route's nexthops change (one of 16 removed, one added, one unusable)
    /// and the balance over 8, hash-threshold against a resilient table, on the dataplane
    /// (BPF_PROG_TEST_RUN) beside the model's prediction.
    Disrupt {
        /// Random UDP flows.
        #[arg(long, default_value_t = 65_536)]
        flows: usize,
    },
    /// Request/response transactions between two namespaces through ila's BPF translator,
    /// against the same topology addressed directly and with no programs, interleaved.
    Ila {
        /// Seconds per run and case.
        #[arg(long, default_value_t = 5)]
        seconds: u32,
        /// Runs per case.
        #[arg(long, default_value_t = 3)]
        runs: u32,
        /// Concurrent connections.
        #[arg(long, default_value_t = 16)]
        streams: u32,
        /// Checksum mode of both tables.
        #[arg(long, default_value = "adj-transport")]
        csum_mode: String,
        /// B's ingress hook: auto, xdp, xdp-generic or tc.
        #[arg(long, default_value = "auto")]
        hook: String,
        /// Both programs on both devices (default: A's egress and B's ingress, where the
        /// translation is).
        #[arg(long)]
        both_sides: bool,
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
        /// Also measure another XDP router, as a case of its own: the path of xdp-forward
        /// (xdp-tools), run as `PATH load vin vout` and `PATH unload vin vout` in R.
        #[arg(long, value_name = "PATH")]
        xdp_forward: Option<std::path::PathBuf>,
        /// Only the cases whose label contains one of these words (the kernel and the ceiling
        /// always run: every figure is against them), e.g. `--only unmanaged`.
        #[arg(long, value_name = "WORD")]
        only: Vec<String>,
        /// Flows of the generator (UDP port pairs), a power of two up to 262144: more flows
        /// than the fast path's flow cache holds show what its misses cost.
        #[arg(long, default_value_t = forward::FLOWS)]
        flows: u32,
        /// UDP/IPv6 frames (routes and addresses of both families are always set up).
        #[arg(long, conflicts_with = "zero_udp_checksum")]
        ipv6: bool,
        /// R's multipath hash policy, IPv4 and IPv6 (`fib_multipath_hash_policy`; default:
        /// the kernel's, 0). 1 makes the kernel's lookups read the ports, so that every flow is
        /// a key of its own to the flow cache, as flows between distinct hosts are.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(0..=3))]
        hash_policy: Option<u8>,
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
    match run(args.what) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("bench: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs a benchmark; `Ok(false)` is a failure that has already been reported.
fn run(what: What) -> Result<bool> {
    match what {
        What::Routes {
            count,
            runs,
            distinct,
            no_ip,
        } => routes::run(count, runs, distinct, no_ip).map(|()| true),
        What::Sync { count, runs } => sync::run(count, runs).map(|()| true),
        What::Memory { count } => memory::run(count).map(|()| true),
        What::Select { repeat, runs } => select::run(repeat, runs),
        What::Disrupt { flows } => disrupt::run(flows),
        What::Ila {
            seconds,
            runs,
            streams,
            csum_mode,
            hook,
            both_sides,
        } => ila::run(&ila::Opts {
            seconds,
            runs,
            streams,
            csum_mode,
            hook,
            both_sides,
        }),
        What::Forward {
            seconds,
            runs,
            threads,
            zero_udp_checksum,
            xdp_forward,
            only,
            flows,
            ipv6,
            hash_policy,
            no_tcp,
            tcp_only,
        } => forward::run(&forward::Opts {
            flows,
            ipv6,
            hash_policy,
            xdp_forward,
            only,
            seconds,
            runs,
            threads,
            udp_csum: !zero_udp_checksum,
            tcp: !no_tcp,
            rate: !tcp_only,
        }),
    }
}

//! `cargo xtask bench forward`: packets per second through a router namespace over veth, for
//! the kernel's forwarding and for mproute's dataplane, measured in one run, interleaved.
//!
//! ```text
//!   H1: eth0 10.10.0.2/24 ── vin  R  vout ── H2: eth0 10.20.0.2/24
//!                     10.10.0.1/24   10.20.0.1/24   198.18.0.0/24 via 10.20.0.2 (managed)
//!   2001:db8:10::2/64        2001:db8:10::1/64  2001:db8:20::1/64        2001:db8:20::2/64
//!                     2001:db8:ff::/64 via 2001:db8:20::2 (managed, with --ipv6)
//! ```
//!
//! `--ipv6`: the same cases with UDP/IPv6 frames (64 bytes, to 2001:db8:20::2 and, managed,
//! 2001:db8:ff::1), but for the minimal forwarders (IPv4 only) and the managed case with a
//! lookup forced per packet (an IPv6 managed packet is always looked up).
//!
//! - Generator: `mpt_bench_gen` (`bpf/bench/gen.bpf.c`) run with `BPF_PROG_TEST_RUN` and
//!   `BPF_F_TEST_XDP_LIVE_FRAMES` by `--threads` threads that have entered H1, with H1's `eth0`
//!   as the ingress device: every frame it returns `XDP_TX` for leaves H1's `eth0` into R's
//!   `vin`. One call per thread with a huge repeat count, ended by `SIGUSR1` (the call returns
//!   EINTR): many short calls ran at half speed (each attaches the program to the XDP
//!   dispatcher and waits for RCU). Thread `i` is pinned to CPU `i mod CPUs`. 64-byte UDP/IPv4
//!   frames from 10.10.0.2 over [`FLOWS`] flows (`--flows`, up to [`MAX_FLOWS`]: source ports,
//!   then destination ports too beyond 32768), with a valid UDP checksum (the
//!   dataplane verifies one in XDP and skips a 0) unless `--zero-udp-checksum`. Before the runs
//!   the generator's output is checked once without live frames.
//! - Every veth has one queue per CPU: a veth queues what it is sent on the peer's queue of
//!   the sending CPU, so generator threads on different CPUs do not contend for one ring.
//! - Sink: `mpt_bench_sink` (`bpf/bench/sink.bpf.c`) on H2's `eth0` counts and drops: the rate is
//!   what arrives there, over the time the generator ran.
//! - A veth only takes frames redirected into its peer (as `XDP_TX` and XDP redirects are) when
//!   it has NAPI on, which takes an XDP program or GRO (no ethtool here): the sink gives H2's
//!   `eth0` one, and when R has no XDP program of its own (kernel forwarding, tc) `vin` gets
//!   `mpt_bench_pass`, which counts and passes; its count is the rate offered to R.
//! - Cases: ceiling (`mpt_bench_drop` on `vin`: generator + veth + drop, no forwarding), kernel
//!   forwarding, the minimal XDP forwarder (`mpt_bench_fwd`, bpf/bench/bench_fwd.bpf.c: one FIB
//!   lookup and a devmap redirect, what the reference measurements call the calibration
//!   forwarder), its tc twin (`mpt_bench_fwd_tc`: the same lookup on tcx ingress, then
//!   `bpf_redirect_peer`: the floor of a tc forwarder here), mproute's XDP and tc dataplane on `vin` for a managed route (destination
//!   198.18.0.1), and mproute's XDP for an unmanaged destination (10.20.0.2, the connected
//!   network on `vout`), which a dataplane without a fast path hands to the kernel (counted as
//!   `no-route`). `--runs` rounds of all six in turn, medians: the kernel's own rate moves
//!   by ±20 % between sittings on this kind of machine, so only figures from one run compare.
//! - Profile: then one more run of each XDP case with `BPF_ENABLE_STATS` on, which gives the
//!   run time per packet of the program on `vin` (the statistics cost two clock reads per run,
//!   about 60 ns here, included; that is why the rates are taken without them).
//! - CPU: `/proc/stat` deltas over each case's runs (all CPUs): on veth the whole receive
//!   chain, R and H2 included, runs on the sending CPU.
//! - TCP (unless `--no-tcp`; `--tcp-only` runs only this part): one stream from H1 to H2,
//!   default offloads, kernel forwarding against mproute auto, tc peer off, xdp-generic and
//!   xdp, sender and receiver pinned to one CPU so that every run has the same split; and the
//!   limit of any router here, the same stream received in R itself (one veth, no forwarding):
//!   the two TCP stacks on one CPU take most of the time, a router's share is small.
//! - `auto` on these veths is tc delivering straight into H2's namespace (`bpf_redirect_peer`):
//!   such packets skip H2's XDP sink, so H2's `eth0` also counts on tcx ingress
//!   (`mpt_bench_sink_tc`, the same slot). `tc peer off` is the same program redirecting
//!   through `vout` (`bpf_redirect_neigh`). `--xdp-forward PATH` adds xdp-forward (xdp-tools),
//!   loaded on `vin` and `vout`, for an unmanaged destination (it has no managed routes).

mod cases;
mod generator;
mod report;
mod stats;
mod tcp;
mod topology;

use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{ensure, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, OpenObject};
use mpt_bpf::skel::bench::bench_fwd::BenchFwdSkelBuilder;
use mpt_bpf::skel::bench::sink::SinkSkelBuilder;

use crate::support;
use cases::{Bench, Case, Figures};
use generator::{check_gen, frame, install_sigusr1};
use report::print_results;
use stats::enable_bpf_stats;
use tcp::tcp_figures;
use topology::{attach_xdp, on_this_thread_in, Topology};

/// Flows (UDP port pairs) of the generator by default (`--flows`); a power of two.
pub const FLOWS: u32 = 1024;
/// The most `--flows` takes: 2^15 source ports from [`SPORT_BASE`] (below 65536) times 8
/// destination ports from [`DPORT`].
pub const MAX_FLOWS: u32 = 262_144;
const SPORT_BASE: u16 = 10_000;
const DPORT: u16 = 9;
/// Frame length: 14 Ethernet + 20 IPv4 + 8 UDP + 22 payload (64 bytes without FCS).
const FRAME: usize = 64;
const XDP_TX: u32 = 3;
const TTL: u8 = 64;
const H1_ADDR: Ipv4Addr = Ipv4Addr::new(10, 10, 0, 2);
const H2_ADDR: Ipv4Addr = Ipv4Addr::new(10, 20, 0, 2);
const H1_ADDR6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x10, 0, 0, 0, 0, 2);
const H2_ADDR6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x20, 0, 0, 0, 0, 2);
/// The managed prefix (RFC 2544 benchmarking space) and the destination sent into it.
const MANAGED: &str = "198.18.0.0/24";
const MANAGED_DST: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The same for `--ipv6` (documentation space).
const MANAGED6: &str = "2001:db8:ff::/64";
const MANAGED_DST6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xff, 0, 0, 0, 0, 1);
/// `BPF_F_TEST_XDP_LIVE_FRAMES` (include/uapi/linux/bpf.h).
const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;
/// Repeat count of the generator's one call (ended by a signal long before).
const REPEAT: u32 = u32::MAX;
/// Slots of `bench_cnt` (bpf/bench/sink.bpf.c).
const SLOT_SINK: u32 = 0;
const SLOT_DROP: u32 = 1;
const SLOT_PASS: u32 = 2;
/// Goal printed next to the XDP cases: × kernel forwarding.
const GOAL: f64 = 3.0;
/// Goal printed next to `auto`'s TCP throughput: × kernel forwarding.
const TCP_GOAL: f64 = 1.2;
/// Goal printed next to `auto` (tc on these veths): × kernel forwarding.
const AUTO_GOAL: f64 = 1.5;
/// User time (% of all CPUs) above which a case's runs are flagged as shared with other work.
const USER_NOISE_PCT: f64 = 2.0;

/// mproute in R.
#[derive(Debug, Clone, Copy)]
struct Mproute<'a> {
    bin: &'a Path,
    ns: &'a str,
}

impl Mproute<'_> {
    fn run(&self, args: &[&str]) -> Result<String> {
        support::output(Command::new(self.bin).args(["-n", self.ns]).args(args))
    }

    /// `dataplane show`'s packets by verdict.
    fn counters(&self) -> Result<BTreeMap<String, u64>> {
        let out = self.run(&["-j", "dataplane", "show"])?;
        let v: serde_json::Value =
            serde_json::from_str(&out).context("mproute -j dataplane show: not JSON")?;
        let c = v
            .get("counters")
            .and_then(serde_json::Value::as_object)
            .context("mproute -j dataplane show: no counters")?;
        Ok(c.iter()
            .filter_map(|(k, n)| Some((k.clone(), n.as_u64()?)))
            .collect())
    }
}

/// Options of `cargo xtask bench forward`.
#[derive(Debug, Clone)]
pub struct Opts {
    /// xdp-forward's binary, for a case of its own.
    pub xdp_forward: Option<PathBuf>,
    /// Only the cases whose label contains one of these (`--only`); empty: all.
    pub only: Vec<String>,
    pub seconds: u32,
    pub runs: u32,
    pub threads: u32,
    pub udp_csum: bool,
    /// Also measure TCP throughput.
    pub tcp: bool,
    /// Measure the packet rate (`false`: TCP only).
    pub rate: bool,
    /// The generator's flows (UDP port pairs), a power of two up to [`MAX_FLOWS`].
    pub flows: u32,
    /// UDP/IPv6 instead of UDP/IPv4.
    pub ipv6: bool,
    /// R's `fib_multipath_hash_policy` (both families); `None`: the kernel's default.
    pub hash_policy: Option<u8>,
}

/// `cargo xtask bench forward [--seconds S] [--runs K] [--threads T] [--zero-udp-checksum]
/// [--xdp-forward PATH] [--no-tcp | --tcp-only]`; `Ok(false)`: some run delivered nothing.
pub fn run(o: &Opts) -> Result<bool> {
    let &Opts {
        seconds,
        runs,
        threads,
        tcp,
        rate,
        ..
    } = o;
    support::require_root("bench forward")?;
    ensure!(
        seconds > 0 && runs > 0 && threads > 0,
        "--seconds, --runs and --threads must be at least 1"
    );
    ensure!(threads <= 64, "--threads: at most 64");
    ensure!(
        o.flows.is_power_of_two() && o.flows <= MAX_FLOWS,
        "--flows: a power of two up to {MAX_FLOWS}"
    );
    ensure!(
        !o.ipv6 || o.udp_csum,
        "--zero-udp-checksum: IPv6 UDP has no checksum-less form"
    );
    let bin: PathBuf = support::tool("mproute")?;
    support::sweep_stale();
    let ok = if rate { packet_rate(&bin, o)? } else { true };
    if tcp {
        tcp_figures(&bin, seconds, runs)?;
    }
    Ok(ok)
}

/// The packet-rate part of `run`; `Ok(false)`: some run delivered nothing.
fn packet_rate(bin: &Path, o: &Opts) -> Result<bool> {
    let &Opts {
        seconds,
        runs,
        threads,
        udp_csum,
        ..
    } = o;
    install_sigusr1()?;
    let topo = Topology::build()?;
    if let Some(h) = o.hash_policy {
        for f in ["ipv4", "ipv6"] {
            support::sysctl(
                topo.r.name(),
                &format!("net.{f}.fib_multipath_hash_policy={h}"),
            )?;
        }
    }
    let managed_dst = if o.ipv6 {
        IpAddr::V6(MANAGED_DST6)
    } else {
        IpAddr::V4(MANAGED_DST)
    };
    check_gen(
        &frame(topo.h1_eth0.mac, topo.vin.mac, managed_dst, udp_csum),
        udp_csum,
        o.flows,
    )?;
    let mut sink_obj = MaybeUninit::<OpenObject>::uninit();
    let sink = SinkSkelBuilder::default()
        .open(&mut sink_obj)
        .context("open sink.bpf.o")?
        .load()
        .context("load sink.bpf.o (verifier)")?;
    let _sink_link = attach_xdp(topo.h2.name(), &sink.progs.mpt_bench_sink, topo.h2_eth0)?;
    // What R's tc program delivers straight into H2 (bpf_redirect_peer) skips H2's XDP sink:
    // the same counter on tcx ingress (it goes with H2's namespace).
    on_this_thread_in(topo.h2.name(), || {
        use std::os::fd::AsFd;
        mpt_bpf::attach::tcx_attach(
            topo.h2_eth0.ifindex,
            sink.progs.mpt_bench_sink_tc.as_fd(),
            mpt_bpf::attach::TcxDir::Ingress,
            "attach the tc sink in H2",
        )
        .map_err(anyhow::Error::from)
    })?;
    let mut minimal_obj = MaybeUninit::<OpenObject>::uninit();
    let minimal = BenchFwdSkelBuilder::default()
        .open(&mut minimal_obj)
        .context("open bench_fwd.bpf.o")?
        .load()
        .context("load bench_fwd.bpf.o (verifier)")?;
    // A devmap resolves its ifindexes in the namespace of the thread that writes them.
    on_this_thread_in(topo.r.name(), || {
        let k = topo.vout.ifindex.to_ne_bytes();
        minimal
            .maps
            .fwd_ports
            .update(&k, &k, MapFlags::ANY)
            .context("put R's vout into the minimal forwarder's devmap")
    })?;
    let mproute = Mproute {
        bin,
        ns: topo.r.name(),
    };
    let (managed, via) = if o.ipv6 {
        (MANAGED6, IpAddr::V6(H2_ADDR6))
    } else {
        (MANAGED, IpAddr::V4(H2_ADDR))
    };
    let via_s = via.to_string();
    mproute
        .run(&["add", managed, "nexthop", "via", &via_s, "dev", "vout"])
        .context("add the managed route")?;
    println!(
        "bench: H1 {} ─ R {} ─ H2 {}; {threads} generator thread(s) in H1, {runs} runs × \
         {seconds} s per case; managed route {managed} via {via} dev vout; R's multipath hash \
         policy {}",
        topo.h1.name(),
        topo.r.name(),
        topo.h2.name(),
        o.hash_policy
            .map_or_else(|| "the kernel's default".to_string(), |h| h.to_string())
    );
    let bench = Bench {
        topo: &topo,
        sink: &sink,
        minimal: &minimal,
        mproute,
        udp_csum,
        flows: o.flows,
        ipv6: o.ipv6,
        seconds,
        threads,
        xdp_forward: o.xdp_forward.as_deref(),
        profile: false,
    };
    let mut figs: Vec<(Case, Figures)> = Case::ALL
        .iter()
        .filter(|c| **c != Case::XdpForward || o.xdp_forward.is_some())
        .filter(|c| !o.ipv6 || c.has_ipv6())
        .filter(|c| {
            matches!(c, Case::Ceiling | Case::Kernel)
                || o.only.is_empty()
                || o.only.iter().any(|w| c.label().contains(w.as_str()))
        })
        .map(|c| (*c, Figures::default()))
        .collect();
    for _ in 0..runs {
        for (case, f) in figs.iter_mut() {
            bench.one(*case, f)?;
        }
    }
    // Then one run of each XDP case with the kernel's BPF run-time statistics on (they cost
    // two clock reads per program run, so the rates above are taken without them).
    {
        let _stats = enable_bpf_stats()?;
        let profile = Bench {
            profile: true,
            ..bench
        };
        for (case, f) in figs.iter_mut() {
            if case.profiled() {
                profile.one(*case, f)?;
            }
        }
    }
    let ok = print_results(&figs, seconds, runs, threads, udp_csum, o.flows, o.ipv6);
    if !ok {
        eprintln!("bench forward: some runs delivered no packet at all");
    }
    // The packet-rate topology (its sink on H2 drops everything) goes before the TCP one.
    let _ = bench;
    drop(topo);
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_is_a_power_of_two() {
        assert!(FLOWS.is_power_of_two() && MAX_FLOWS.is_power_of_two());
        let low = 1u32 << generator::PORT_LOW_BITS;
        assert!(u32::from(SPORT_BASE) + low <= 65_536);
        assert!(u32::from(DPORT) + MAX_FLOWS / low <= 65_536);
    }
}

//! `cargo xtask bench forward`: packets per second through a router namespace over veth, for
//! the kernel's forwarding and for mproute's dataplane, measured in one run, interleaved.
//!
//! ```text
//!   H1: eth0 10.10.0.2/24 ── vin  R  vout ── H2: eth0 10.20.0.2/24
//!                     10.10.0.1/24   10.20.0.1/24   198.18.0.0/24 via 10.20.0.2 (managed)
//! ```
//!
//! - Generator: `mpt_bench_gen` (`bpf/bench/gen.bpf.c`) run with `BPF_PROG_TEST_RUN` and
//!   `BPF_F_TEST_XDP_LIVE_FRAMES` by `--threads` threads that have entered H1, with H1's `eth0`
//!   as the ingress device: every frame it returns `XDP_TX` for leaves H1's `eth0` into R's
//!   `vin`. One call per thread with a huge repeat count, ended by `SIGUSR1` (the call returns
//!   EINTR): many short calls ran at half speed (each attaches the program to the XDP
//!   dispatcher and waits for RCU). Thread `i` is pinned to CPU `i mod CPUs`. 64-byte UDP/IPv4
//!   frames from 10.10.0.2 over [`FLOWS`] source ports (`--flows`), with a valid UDP checksum (the
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

use std::collections::BTreeMap;
use std::fs::File;
use std::mem::MaybeUninit;
use std::net::Ipv4Addr;
use std::os::unix::thread::JoinHandleExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{anyhow, ensure, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{ErrorKind, Link, MapCore, MapFlags, OpenObject, ProgramInput, ProgramMut};
use mpt_bpf::skel::bench::bench_fwd::{BenchFwdSkel, BenchFwdSkelBuilder};
use mpt_bpf::skel::bench::gen::{GenSkel, GenSkelBuilder};
use mpt_bpf::skel::bench::sink::SinkSkelBuilder;
use nix::sched::{sched_setaffinity, setns, CloneFlags, CpuSet};
use nix::sys::pthread::pthread_kill;
use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::unistd::Pid;

use mpt_testkit::Netns;

use crate::select::ip_checksum;
use crate::support::{self, median, met, spread, sysctl};

/// Flows (UDP source ports) of the generator by default (`--flows`); a power of two.
pub const FLOWS: u32 = 1024;
/// The most `--flows` takes: source ports from [`SPORT_BASE`] stay below 65536.
pub const MAX_FLOWS: u32 = 32_768;
const SPORT_BASE: u16 = 10_000;
const DPORT: u16 = 9;
/// Frame length: 14 Ethernet + 20 IPv4 + 8 UDP + 22 payload (64 bytes without FCS).
const FRAME: usize = 64;
const IPPROTO_UDP: u8 = 17;
const XDP_TX: u32 = 3;
const TTL: u8 = 64;
const H1_ADDR: Ipv4Addr = Ipv4Addr::new(10, 10, 0, 2);
const H2_ADDR: Ipv4Addr = Ipv4Addr::new(10, 20, 0, 2);
/// The managed prefix (RFC 2544 benchmarking space) and the destination sent into it.
const MANAGED: &str = "198.18.0.0/24";
const MANAGED_DST: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
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

/// What runs on R's `vin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Ceiling,
    Kernel,
    /// `mpt_bench_fwd` (bpf/bench/bench_fwd.bpf.c) on `vin`: the calibration forwarder of the
    /// reference measurements, one FIB lookup and a devmap redirect, nothing else.
    Minimal,
    /// `mpt_bench_fwd_tc` on `vin`'s tcx ingress: the same one lookup, `bpf_redirect_peer`.
    MinimalTc,
    XdpManaged,
    /// The managed case with the FIB generation moved after the attach: the kernel-view FIB
    /// lookup runs for every packet, as before verification existed.
    XdpManagedChecked,
    /// `auto` (what a user gets): tc on these veths, delivering straight into H2's namespace
    /// (`bpf_redirect_peer`).
    AutoManaged,
    /// Explicit tc with `peer off`: through `vout` and H2's queue (`bpf_redirect_neigh`).
    TcNeighManaged,
    XdpUnmanaged,
    AutoUnmanaged,
    /// xdp-forward (xdp-tools) on `vin` and `vout`, with `--xdp-forward PATH`.
    XdpForward,
}

impl Case {
    const ALL: [Case; 11] = [
        Case::Ceiling,
        Case::Kernel,
        Case::Minimal,
        Case::MinimalTc,
        Case::AutoManaged,
        Case::TcNeighManaged,
        Case::XdpManaged,
        Case::XdpManagedChecked,
        Case::AutoUnmanaged,
        Case::XdpUnmanaged,
        Case::XdpForward,
    ];

    fn label(self) -> &'static str {
        match self {
            Case::Ceiling => "ceiling (R drops in XDP)",
            Case::Kernel => "kernel forwarding",
            Case::Minimal => "minimal xdp forwarder",
            Case::MinimalTc => "minimal tc forwarder (peer)",
            Case::XdpManaged => "mproute xdp, managed",
            Case::XdpManagedChecked => "mproute xdp, managed, lookup per packet",
            Case::AutoManaged => "mproute auto, managed",
            Case::TcNeighManaged => "mproute tc peer off, managed",
            Case::XdpUnmanaged => "mproute xdp, unmanaged",
            Case::AutoUnmanaged => "mproute auto, unmanaged",
            Case::XdpForward => "xdp-forward, unmanaged",
        }
    }

    fn dst(self) -> Ipv4Addr {
        match self {
            Case::XdpManaged
            | Case::XdpManagedChecked
            | Case::AutoManaged
            | Case::TcNeighManaged => MANAGED_DST,
            _ => H2_ADDR,
        }
    }

    /// `mproute dataplane attach dev vin` words after the device: the mode and options.
    fn mproute(self) -> Option<&'static [&'static str]> {
        match self {
            Case::XdpManaged | Case::XdpManagedChecked | Case::XdpUnmanaged => Some(&["xdp"]),
            Case::AutoManaged | Case::AutoUnmanaged => Some(&[]),
            Case::TcNeighManaged => Some(&["tc", "peer", "off"]),
            _ => None,
        }
    }

    /// A tc program alone on `vin` (mproute auto on a veth, tc, or the minimal one).
    fn is_tc(self) -> bool {
        matches!(
            self,
            Case::AutoManaged | Case::AutoUnmanaged | Case::TcNeighManaged | Case::MinimalTc
        )
    }

    /// Our own program on `vin`: the ceiling's drop, or the pass that gives `vin` NAPI.
    fn vin_prog(self) -> Option<u32> {
        match self {
            Case::Ceiling => Some(SLOT_DROP),
            Case::Kernel => Some(SLOT_PASS),
            c if c.is_tc() => Some(SLOT_PASS),
            _ => None,
        }
    }

    /// Profiled: the run time of the program on `vin` (XDP, or mproute's tc program).
    fn profiled(self) -> bool {
        self.is_xdp()
            || self.is_tc()
            || matches!(self, Case::Ceiling | Case::Minimal | Case::XdpForward)
    }

    fn is_xdp(self) -> bool {
        self.mproute() == Some(&["xdp"])
    }
}

/// A device: ifindex and MAC.
#[derive(Debug, Clone, Copy)]
struct Dev {
    ifindex: u32,
    mac: [u8; 6],
}

fn link(ns: &str, dev: &str) -> Result<Dev> {
    let out = support::ip(["-n", ns, "-j", "link", "show", "dev", dev])?;
    let v: serde_json::Value = serde_json::from_str(&out).context("ip -j link: not JSON")?;
    let l = v.get(0).with_context(|| format!("{ns}: no device {dev}"))?;
    let ifindex = l
        .get("ifindex")
        .and_then(serde_json::Value::as_u64)
        .with_context(|| format!("{ns}/{dev}: no ifindex"))?;
    let addr = l
        .get("address")
        .and_then(serde_json::Value::as_str)
        .with_context(|| format!("{ns}/{dev}: no address"))?;
    let mut mac = [0u8; 6];
    let parts: Vec<&str> = addr.split(':').collect();
    ensure!(parts.len() == 6, "{ns}/{dev}: bad MAC {addr}");
    for (m, p) in mac.iter_mut().zip(parts) {
        *m = u8::from_str_radix(p, 16).with_context(|| format!("{ns}/{dev}: bad MAC {addr}"))?;
    }
    Ok(Dev {
        ifindex: u32::try_from(ifindex)?,
        mac,
    })
}

fn mac_str(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The three namespaces (deleted, with everything in them, when this is dropped) and the
/// devices the benchmark needs.
#[derive(Debug)]
struct Topology {
    h1: Netns,
    r: Netns,
    h2: Netns,
    h1_eth0: Dev,
    vin: Dev,
    vout: Dev,
    h2_eth0: Dev,
}

impl Topology {
    fn build() -> Result<Self> {
        let h1 = support::netns("fwd-h1")?;
        let r = support::netns("fwd-r")?;
        let h2 = support::netns("fwd-h2")?;
        let (h1n, rn, h2n) = (h1.name(), r.name(), h2.name());
        // One queue per CPU: a veth puts what it is sent on the peer's queue of the sending
        // CPU, so each CPU has its own ring and NAPI instead of contending for one.
        let q = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .to_string();
        for (rdev, raddr, host, haddr) in [
            ("vin", "10.10.0.1/24", h1n, "10.10.0.2/24"),
            ("vout", "10.20.0.1/24", h2n, "10.20.0.2/24"),
        ] {
            support::ip([
                "-n",
                rn,
                "link",
                "add",
                rdev,
                "numtxqueues",
                &q,
                "numrxqueues",
                &q,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "numtxqueues",
                &q,
                "numrxqueues",
                &q,
                "netns",
                host,
            ])?;
            support::ip(["-n", rn, "addr", "add", raddr, "dev", rdev])?;
            support::ip(["-n", host, "addr", "add", haddr, "dev", "eth0"])?;
            support::ip(["-n", rn, "link", "set", rdev, "up"])?;
            support::ip(["-n", host, "link", "set", "eth0", "up"])?;
        }
        sysctl(rn, "net.ipv4.ip_forward=1")?;
        support::ip(["-n", h1n, "route", "add", "default", "via", "10.10.0.1"])?;
        support::ip(["-n", h2n, "route", "add", "default", "via", "10.20.0.1"])?;
        let h1_eth0 = link(h1n, "eth0")?;
        let vin = link(rn, "vin")?;
        let vout = link(rn, "vout")?;
        let h2_eth0 = link(h2n, "eth0")?;
        for (ns, addr, mac, dev) in [
            (h1n, "10.10.0.1", vin.mac, "eth0"),
            (rn, "10.10.0.2", h1_eth0.mac, "vin"),
            (rn, "10.20.0.2", h2_eth0.mac, "vout"),
            (h2n, "10.20.0.1", vout.mac, "eth0"),
        ] {
            support::ip([
                "-n",
                ns,
                "neigh",
                "replace",
                addr,
                "lladdr",
                &mac_str(&mac),
                "dev",
                dev,
                "nud",
                "permanent",
            ])?;
        }
        Ok(Topology {
            h1,
            r,
            h2,
            h1_eth0,
            vin,
            vout,
            h2_eth0,
        })
    }
}

/// Runs `f` on this thread inside namespace `ns`, then puts the thread back where it was
/// (program attachments name their device by ifindex in the caller's namespace).
fn on_this_thread_in<T>(ns: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let home = File::open("/proc/thread-self/ns/net").context("open /proc/thread-self/ns/net")?;
    let path = format!("/run/netns/{ns}");
    let target = File::open(&path).with_context(|| format!("open {path}"))?;
    setns(&target, CloneFlags::CLONE_NEWNET).with_context(|| format!("setns {path}"))?;
    let r = f();
    setns(&home, CloneFlags::CLONE_NEWNET).context("setns back to xtask's own namespace")?;
    r
}

fn attach_xdp(ns: &str, prog: &ProgramMut<'_>, dev: Dev) -> Result<Link> {
    on_this_thread_in(ns, || {
        prog.attach_xdp(i32::try_from(dev.ifindex)?)
            .with_context(|| format!("attach {} in {ns}", prog.name().to_string_lossy()))
    })
}

/// The generator's template frame (the UDP source port is the program's): UDP/IPv4 from H1
/// to `dst`, with a valid UDP checksum or none (0).
fn frame(src_mac: [u8; 6], dst_mac: [u8; 6], dst: Ipv4Addr, udp_csum: bool) -> [u8; FRAME] {
    let mut p = [0u8; FRAME];
    p[0..6].copy_from_slice(&dst_mac);
    p[6..12].copy_from_slice(&src_mac);
    p[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = (FRAME - 14) as u16;
    {
        let ip = &mut p[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
        ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes()); // DF
        ip[8] = TTL;
        ip[9] = IPPROTO_UDP;
        ip[12..16].copy_from_slice(&H1_ADDR.octets());
        ip[16..20].copy_from_slice(&dst.octets());
        let c = ip_checksum(ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
    }
    p[34..36].copy_from_slice(&SPORT_BASE.to_be_bytes());
    p[36..38].copy_from_slice(&DPORT.to_be_bytes());
    p[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    if udp_csum {
        let c = match ip_checksum(&udp_pseudo(&p)) {
            0 => 0xffff,
            c => c,
        };
        p[40..42].copy_from_slice(&c.to_be_bytes());
    }
    p
}

/// The IPv4 pseudo header followed by the UDP datagram of `frame`: what the UDP checksum
/// covers.
fn udp_pseudo(frame: &[u8; FRAME]) -> Vec<u8> {
    let mut v = Vec::with_capacity(12 + FRAME - 34);
    v.extend_from_slice(&frame[26..34]); // source, destination
    v.extend_from_slice(&[0, IPPROTO_UDP]);
    v.extend_from_slice(&frame[38..40]); // UDP length
    v.extend_from_slice(&frame[34..]);
    v
}

/// Runs the generator three times without live frames and checks what it wrote: the
/// template, source ports from the counter, both checksums valid.
fn check_gen(tmpl: &[u8; FRAME], udp_csum: bool, flows: u32) -> Result<()> {
    let mut obj = MaybeUninit::<OpenObject>::uninit();
    let skel = open_gen(&mut obj, tmpl, udp_csum, flows)?;
    let prog = &skel.progs.mpt_bench_gen;
    let zeros = [0u8; FRAME];
    for i in 0..3u16 {
        let mut out = [0u8; FRAME];
        let rv = prog
            .test_run(ProgramInput {
                data_in: Some(&zeros),
                data_out: Some(&mut out),
                ..Default::default()
            })
            .context("BPF_PROG_TEST_RUN of the generator")?
            .return_value;
        let sport = u16::from_be_bytes([out[34], out[35]]);
        let csum_ok = if udp_csum {
            ip_checksum(&udp_pseudo(&out)) == 0
        } else {
            out[40..42] == [0, 0]
        };
        ensure!(
            rv == XDP_TX
                && out[..34] == tmpl[..34]
                && out[36..40] == tmpl[36..40]
                && out[42..] == tmpl[42..]
                && sport == SPORT_BASE + i
                && ip_checksum(&out[14..34]) == 0
                && csum_ok,
            "the generator's frame {i} is wrong (returned {rv}, XDP_TX is {XDP_TX}): {out:02x?}"
        );
    }
    Ok(())
}

extern "C" fn on_sigusr1(_: std::ffi::c_int) {}

/// SIGUSR1 with a handler that does nothing and no SA_RESTART, so that a generator thread's
/// `BPF_PROG_TEST_RUN` returns EINTR when the signal is sent to it.
fn install_sigusr1() -> Result<()> {
    let sa = SigAction::new(
        SigHandler::Handler(on_sigusr1),
        SaFlags::empty(),
        SigSet::empty(),
    );
    // SAFETY: the handler does nothing, so it is async-signal-safe.
    unsafe { sigaction(Signal::SIGUSR1, &sa) }.context("sigaction SIGUSR1")?;
    Ok(())
}

/// What one generator thread needs (owned: the thread is not scoped, for its pthread_t).
#[derive(Debug, Clone)]
struct GenSpec {
    ns_path: String,
    ingress: u32,
    frame: [u8; FRAME],
    udp_csum: bool,
    flows: u32,
    cpu: usize,
}

/// Opens the generator with its template and loads it.
fn open_gen<'o>(
    obj: &'o mut MaybeUninit<OpenObject>,
    tmpl: &[u8; FRAME],
    udp_csum: bool,
    flows: u32,
) -> Result<GenSkel<'o>> {
    let mut open = GenSkelBuilder::default()
        .open(obj)
        .context("open gen.bpf.o")?;
    let bss = open
        .maps
        .bss_data
        .as_deref_mut()
        .context("gen.bpf.o has no .bss")?;
    bss.gen_cfg.frame = *tmpl;
    bss.gen_cfg.sport_base = SPORT_BASE;
    bss.gen_cfg.udp_csum = if udp_csum {
        u16::from_be_bytes([tmpl[40], tmpl[41]])
    } else {
        0
    };
    bss.gen_cfg.flows_mask = flows - 1;
    open.load().context("load gen.bpf.o (verifier)")
}

/// Enters H1, pins this thread to its CPU and loads the generator.
fn load_gen<'o>(obj: &'o mut MaybeUninit<OpenObject>, spec: &GenSpec) -> Result<GenSkel<'o>> {
    let file = File::open(&spec.ns_path).with_context(|| format!("open {}", spec.ns_path))?;
    setns(&file, CloneFlags::CLONE_NEWNET).with_context(|| format!("setns {}", spec.ns_path))?;
    pin_this_thread(spec.cpu, "the generator thread")?;
    open_gen(obj, &spec.frame, spec.udp_csum, spec.flows)
}

/// Pins the calling thread to CPU `cpu`.
fn pin_this_thread(cpu: usize, what: &str) -> Result<()> {
    let mut cpus = CpuSet::new();
    cpus.set(cpu).with_context(|| format!("CPU {cpu}"))?;
    sched_setaffinity(Pid::from_raw(0), &cpus).with_context(|| format!("pin {what} to CPU {cpu}"))
}

/// One generator thread: enter H1, load, wait for the others, then send until `stop`.
fn gen_thread(spec: GenSpec, ready: Arc<Barrier>, stop: Arc<AtomicBool>) -> Result<()> {
    let mut obj = MaybeUninit::<OpenObject>::uninit();
    let loaded = load_gen(&mut obj, &spec);
    // Always meet the others, so that a failure here cannot hang the main thread.
    ready.wait();
    let skel = loaded?;
    let prog = &skel.progs.mpt_bench_gen;
    // struct xdp_md: data, data_end, data_meta, ingress_ifindex, rx_queue_index, egress_ifindex
    let mut ctx = [0u8; 24];
    ctx[4..8].copy_from_slice(&(FRAME as u32).to_ne_bytes());
    ctx[12..16].copy_from_slice(&spec.ingress.to_ne_bytes());
    let frame = spec.frame;
    // The signal may come before the call starts; the main thread sends it again until this
    // thread has returned.
    while !stop.load(Ordering::Acquire) {
        let r = prog.test_run(ProgramInput {
            context_in: Some(&mut ctx),
            data_in: Some(&frame),
            flags: BPF_F_TEST_XDP_LIVE_FRAMES,
            repeat: REPEAT,
            ..Default::default()
        });
        match r {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e).context("BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES"),
        }
    }
    Ok(())
}

/// Runs the generator on `threads` threads for `seconds`; returns how long it ran.
fn generate(
    topo: &Topology,
    dst: Ipv4Addr,
    udp_csum: bool,
    flows: u32,
    seconds: u32,
    threads: u32,
) -> Result<Duration> {
    let ncpu = std::thread::available_parallelism().map_or(1, usize::from);
    let frame = frame(topo.h1_eth0.mac, topo.vin.mac, dst, udp_csum);
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(Barrier::new(threads as usize + 1));
    let mut handles = Vec::new();
    for i in 0..threads as usize {
        let spec = GenSpec {
            ns_path: format!("/run/netns/{}", topo.h1.name()),
            ingress: topo.h1_eth0.ifindex,
            frame,
            udp_csum,
            flows,
            cpu: i % ncpu,
        };
        let (ready, stop) = (Arc::clone(&ready), Arc::clone(&stop));
        let h = std::thread::Builder::new()
            .name(format!("gen{i}"))
            .spawn(move || gen_thread(spec, ready, stop))
            .context("spawn a generator thread")?;
        handles.push(h);
    }
    ready.wait();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(u64::from(seconds)));
    stop.store(true, Ordering::Release);
    for h in &handles {
        while !h.is_finished() {
            // The thread is joined below, so its pthread_t is valid here.
            let _ = pthread_kill(h.as_pthread_t(), Signal::SIGUSR1);
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let elapsed = t0.elapsed();
    for h in handles {
        h.join()
            .map_err(|_| anyhow!("a generator thread panicked"))??;
    }
    Ok(elapsed)
}

/// `/proc/stat`'s `cpu` line: user, nice, system, idle, iowait, irq, softirq, steal (ticks).
fn cpu_ticks() -> Result<[u64; 8]> {
    let s = std::fs::read_to_string("/proc/stat").context("read /proc/stat")?;
    let line = s
        .lines()
        .find(|l| l.starts_with("cpu "))
        .context("/proc/stat: no cpu line")?;
    let mut t = [0u64; 8];
    for (v, w) in t.iter_mut().zip(line.split_whitespace().skip(1)) {
        *v = w.parse().context("/proc/stat: bad number")?;
    }
    Ok(t)
}

/// Packets counted in `bench_cnt` slot `slot`, summed over CPUs.
fn count(map: &impl MapCore, slot: u32) -> Result<u64> {
    let v = map
        .lookup_percpu(&slot.to_ne_bytes(), MapFlags::ANY)
        .context("read bench_cnt")?
        .context("bench_cnt: no such slot")?;
    let mut sum = 0u64;
    for cpu in v {
        let b: [u8; 8] = cpu
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .context("bench_cnt: short value")?;
        sum += u64::from_ne_bytes(b);
    }
    Ok(sum)
}

/// Run time and run count (`BPF_ENABLE_STATS`) of the program on `ifindex` in `ns`: its XDP
/// program, or (`tc`) the last on its tcx ingress.
fn prog_stats(ns: &str, ifindex: u32, tc: bool) -> Result<(u64, u64)> {
    on_this_thread_in(ns, || {
        let id = if tc {
            mpt_bpf::attach::tcx_query(ifindex, mpt_bpf::attach::TcxDir::Ingress)?
                .last()
                .copied()
        } else {
            mpt_bpf::mproute::dataplane::xdp_prog(ifindex)?
        }
        .with_context(|| format!("no program on ifindex {ifindex} in {ns}"))?;
        let info = mpt_bpf::prog::info(id)?;
        Ok((info.run_time_ns, info.run_cnt))
    })
}

/// Turns the kernel's BPF run-time statistics on until the returned fd is closed.
fn enable_bpf_stats() -> Result<std::os::fd::OwnedFd> {
    Ok(mpt_bpf::prog::enable_run_time_stats()?)
}

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

fn delta(after: &BTreeMap<String, u64>, before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(k, a)| {
            let b = before.get(k).copied().unwrap_or(0);
            (k.clone(), a.saturating_sub(b))
        })
        .collect()
}

/// Figures of one case over all its runs.
#[derive(Debug, Default)]
struct Figures {
    /// Delivered Mpps per run.
    mpps: Vec<f64>,
    /// Offered (arriving at R) Mpps per run, where known.
    offered: Vec<f64>,
    /// /proc/stat deltas over the runs.
    cpu: [u64; 8],
    /// mproute's verdict counters over the runs.
    verdicts: BTreeMap<String, u64>,
    /// Profile pass: ns per run of the XDP program on R's `vin`, per run.
    prog_ns: Vec<f64>,
}

/// Everything that stays loaded for the whole benchmark.
struct Bench<'a, 'o> {
    topo: &'a Topology,
    sink: &'a mpt_bpf::skel::bench::sink::SinkSkel<'o>,
    minimal: &'a BenchFwdSkel<'o>,
    mproute: Mproute<'a>,
    udp_csum: bool,
    /// The generator's flows (`--flows`).
    flows: u32,
    seconds: u32,
    threads: u32,
    /// xdp-forward's binary (`--xdp-forward`).
    xdp_forward: Option<&'a Path>,
    /// Profile pass (BPF run-time statistics on): read the run time of `vin`'s program.
    profile: bool,
}

impl Bench<'_, '_> {
    /// One run of one case: set R up, generate, take R back to nothing.
    fn one(&self, case: Case, f: &mut Figures) -> Result<()> {
        let rn = self.topo.r.name();
        let cnt = &self.sink.maps.bench_cnt;
        let vin_link = match case.vin_prog() {
            Some(SLOT_DROP) => Some(attach_xdp(
                rn,
                &self.sink.progs.mpt_bench_drop,
                self.topo.vin,
            )?),
            Some(_) => Some(attach_xdp(
                rn,
                &self.sink.progs.mpt_bench_pass,
                self.topo.vin,
            )?),
            None if case == Case::Minimal => Some(attach_xdp(
                rn,
                &self.minimal.progs.mpt_bench_fwd,
                self.topo.vin,
            )?),
            None => None,
        };
        // the minimal tc forwarder on vin's tcx ingress, for this case's runs
        let tc_min = |on: bool| -> Result<()> {
            use std::os::fd::AsFd;
            let prog = self.minimal.progs.mpt_bench_fwd_tc.as_fd();
            let id = libbpf_rs::Program::id_from_fd(prog)?;
            on_this_thread_in(rn, || {
                let ifx = self.topo.vin.ifindex;
                let dir = mpt_bpf::attach::TcxDir::Ingress;
                if on {
                    mpt_bpf::attach::tcx_attach(ifx, prog, dir, "attach the minimal tc forwarder")
                } else {
                    mpt_bpf::attach::tcx_detach(ifx, id, dir)
                }
                .map_err(anyhow::Error::from)
            })
        };
        if case == Case::MinimalTc {
            tc_min(true)?;
        }
        let peer_fwd = |verb: &str| -> Result<()> {
            let bin = self.xdp_forward.context("xdp-forward: no binary")?;
            support::output(
                Command::new("ip")
                    .args(["netns", "exec", rn])
                    .arg(bin)
                    .args([verb, "vin", "vout"]),
            )
            .map(drop)
            .with_context(|| format!("{} {verb} vin vout in {rn}", bin.display()))
        };
        if case == Case::XdpForward {
            peer_fwd("load")?;
        }
        if let Some(words) = case.mproute() {
            let mut args = vec!["dataplane", "attach", "dev", "vin"];
            args.extend_from_slice(words);
            self.mproute
                .run(&args)
                .with_context(|| format!("{}: attach", case.label()))?;
        }
        if case == Case::XdpManagedChecked {
            // A route added and removed again: the FIB is as it was, its generation is not, so
            // the dataplane looks every managed packet up in the kernel's FIB again.
            for verb in ["add", "del"] {
                support::ip(["-n", rn, "route", verb, "192.0.2.0/24", "via", "10.20.0.2"])?;
            }
        }
        if matches!(
            case,
            Case::XdpManaged | Case::XdpManagedChecked | Case::AutoManaged
        ) {
            let v: serde_json::Value =
                serde_json::from_str(&self.mproute.run(&["-j", "dataplane", "show"])?)
                    .context("mproute -j dataplane show: not JSON")?;
            let fc = &v["fib_check"];
            let skipped =
                fc["skipped"].as_u64().unwrap_or(0) > 0 && fc["verified_at"] == fc["generation"];
            ensure!(
                skipped == (case != Case::XdpManagedChecked),
                "{}: the dataplane's FIB check is {} (dataplane show: {fc})",
                case.label(),
                if skipped { "skipped" } else { "per packet" }
            );
        }
        let slot = if case == Case::Ceiling {
            SLOT_DROP
        } else {
            SLOT_SINK
        };
        let dp0 = match case.mproute() {
            Some(_) => Some(self.mproute.counters()?),
            None => None,
        };
        let prof = |on: bool| -> Result<Option<(u64, u64)>> {
            if on && case.profiled() {
                prog_stats(rn, self.topo.vin.ifindex, case.is_tc()).map(Some)
            } else {
                Ok(None)
            }
        };
        let s0 = prof(self.profile)?;
        let (d0, p0, c0) = (count(cnt, slot)?, count(cnt, SLOT_PASS)?, cpu_ticks()?);
        let elapsed = generate(
            self.topo,
            case.dst(),
            self.udp_csum,
            self.flows,
            self.seconds,
            self.threads,
        )?;
        // What is still in the veth rings is processed at once; give it a moment.
        std::thread::sleep(Duration::from_millis(20));
        let (d1, p1, c1) = (count(cnt, slot)?, count(cnt, SLOT_PASS)?, cpu_ticks()?);
        if let (Some((t0, n0)), Some((t1, n1))) = (s0, prof(self.profile)?) {
            let n = n1.saturating_sub(n0).max(1);
            let ns = t1.saturating_sub(t0) as f64 / n as f64;
            f.prog_ns.push(ns);
            println!(
                "bench: profile: {:<24} {ns:.0} ns per run of vin's program ({n} runs)",
                case.label()
            );
        }
        if case == Case::XdpForward {
            peer_fwd("unload")?;
        }
        if case == Case::MinimalTc {
            tc_min(false)?;
        }
        if self.profile {
            if case.mproute().is_some() {
                self.mproute
                    .run(&["dataplane", "detach", "dev", "vin"])
                    .with_context(|| format!("{}: detach", case.label()))?;
            }
            drop(vin_link);
            return Ok(());
        }
        let secs = elapsed.as_secs_f64();
        let mpps = d1.saturating_sub(d0) as f64 / secs / 1e6;
        f.mpps.push(mpps);
        let mut offered = None;
        match case {
            Case::Ceiling => offered = Some(mpps),
            c if c == Case::Kernel || c.is_tc() => {
                offered = Some(p1.saturating_sub(p0) as f64 / secs / 1e6)
            }
            _ => {}
        }
        if let Some(dp0) = dp0 {
            let d = delta(&self.mproute.counters()?, &dp0);
            if !case.is_tc() {
                offered = Some(d.values().sum::<u64>() as f64 / secs / 1e6);
            }
            for (k, n) in d {
                *f.verdicts.entry(k).or_default() += n;
            }
            self.mproute
                .run(&["dataplane", "detach", "dev", "vin"])
                .with_context(|| format!("{}: detach", case.label()))?;
        }
        drop(vin_link);
        for (a, (x, y)) in f.cpu.iter_mut().zip(c1.iter().zip(c0)) {
            *a += x.saturating_sub(y);
        }
        let off = offered.map_or(String::new(), |o| format!(" (offered to R {o:.3})"));
        if let Some(o) = offered {
            f.offered.push(o);
        }
        println!(
            "bench: run {}: {:<24} {mpps:.3} Mpps delivered{off}, {secs:.2} s",
            f.mpps.len(),
            case.label()
        );
        Ok(())
    }
}

/// Share of R's dataplane verdicts that went to the kernel as `no-route`, in percent.
fn no_route_pct(v: &BTreeMap<String, u64>) -> Option<f64> {
    let total: u64 = v.values().sum();
    (total > 0).then(|| v.get("no-route").copied().unwrap_or(0) as f64 * 100.0 / total as f64)
}

/// Verdicts other than `redirected` and `no-route`, for a note.
fn other_verdicts(v: &BTreeMap<String, u64>) -> String {
    v.iter()
        .filter(|(k, n)| **n > 0 && k.as_str() != "redirected" && k.as_str() != "no-route")
        .map(|(k, n)| format!("{k} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn print_results(
    figs: &[(Case, Figures)],
    seconds: u32,
    runs: u32,
    threads: u32,
    udp_csum: bool,
    flows: u32,
) -> bool {
    let med = |c: Case| {
        figs.iter()
            .find(|(k, _)| *k == c)
            .map_or(f64::NAN, |(_, f)| median(&f.mpps))
    };
    let (kernel, ceiling) = (med(Case::Kernel), med(Case::Ceiling));
    println!();
    println!(
        "Packet rate delivered at H2 (Mpps; {runs} runs × {seconds} s per case, interleaved; \
         {threads} generator thread(s); 64-byte UDP {}, {} flows)",
        if udp_csum {
            "with checksum"
        } else {
            "without checksum"
        },
        flows
    );
    println!(
        "{:<24}  {:<22}  {:>6}  {:>11}  {:>8}  {:>9}  {:>9}  {:>8}  goal",
        "case", "runs", "median", "min–max", "× kernel", "% ceiling", "offered", "no-route"
    );
    let mut all_flowed = true;
    for (case, f) in figs {
        let m = median(&f.mpps);
        all_flowed &= f.mpps.iter().all(|x| *x > 0.0);
        let ratio = m / kernel;
        let goal = if case.is_xdp() {
            format!("≥{GOAL:.1}× {}", met(ratio >= GOAL))
        } else {
            String::new()
        };
        let offered = if f.offered.is_empty() {
            "-".to_string()
        } else {
            format!("{:.3}", median(&f.offered))
        };
        let nr = no_route_pct(&f.verdicts).map_or("-".to_string(), |p| format!("{p:.1}%"));
        println!(
            "{:<24}  {:<22}  {:>6.3}  {:>11}  {:>7.2}×  {:>8.1}%  {:>9}  {:>8}  {goal}",
            case.label(),
            f.mpps
                .iter()
                .map(|x| format!("{x:.3}"))
                .collect::<Vec<_>>()
                .join(" "),
            m,
            spread(&f.mpps, 2),
            ratio,
            m * 100.0 / ceiling,
            offered,
            nr
        );
    }
    println!(
        "(offered: packets arriving at R's vin, from mpt_bench_drop/mpt_bench_pass or mproute's \
         own verdict counters; no-route: share of them mproute's dataplane passed to the kernel \
         for want of a managed route)"
    );
    for (case, f) in figs {
        let o = other_verdicts(&f.verdicts);
        if !o.is_empty() {
            println!("note: {}: other dataplane verdicts: {o}", case.label());
        }
    }

    println!();
    println!(
        "Run time of the program on R's vin, XDP or mproute's tc (one more run per case with the kernel's BPF \
         statistics on, ns per packet; the rest of a packet's time is the generator, the veths \
         and the sink)"
    );
    for (case, f) in figs {
        if let Some(ns) = f.prog_ns.first() {
            println!("  {:<24} {ns:>6.0} ns", case.label());
        }
    }

    let ncpu = std::thread::available_parallelism().map_or(1, usize::from);
    println!();
    println!("CPU split during each case's runs (/proc/stat, all {ncpu} CPUs, % of CPU time)");
    println!(
        "{:<24}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}",
        "case", "user", "system", "softirq", "idle", "other"
    );
    for (case, f) in figs {
        let [user, nice, system, idle, iowait, irq, softirq, steal] = f.cpu;
        let total = f.cpu.iter().sum::<u64>().max(1) as f64;
        let pct = |x: u64| x as f64 * 100.0 / total;
        println!(
            "{:<24}  {:>5.1}%  {:>5.1}%  {:>6.1}%  {:>5.1}%  {:>5.1}%",
            case.label(),
            pct(user + nice),
            pct(system),
            pct(softirq),
            pct(idle + iowait),
            pct(irq + steal)
        );
    }
    // The benchmark itself runs in the kernel (system, softirq); xtask sleeps meanwhile.
    for (case, f) in figs {
        let total = f.cpu.iter().sum::<u64>().max(1) as f64;
        let user = (f.cpu[0] + f.cpu[1]) as f64 * 100.0 / total;
        if user > USER_NOISE_PCT {
            println!(
                "note: {}: {user:.1}% user time: other processes shared the CPUs, its figures \
                 are disturbed",
                case.label()
            );
        }
    }

    println!();
    for (case, f) in figs {
        let m = median(&f.mpps);
        let mut line = format!("forward: {}: {m:.3} Mpps", case.label());
        match case {
            Case::Ceiling => {}
            Case::Kernel => {
                line.push_str(&format!(" ({:.1}% of the ceiling)", m * 100.0 / ceiling))
            }
            _ => {
                line.push_str(&format!(
                    " = {:.2}× kernel forwarding, {:.1}% of the ceiling",
                    m / kernel,
                    m * 100.0 / ceiling
                ));
                if (case.is_xdp() || *case == Case::XdpForward) && med(Case::Minimal).is_finite() {
                    line.push_str(&format!(
                        ", {:.0}% of the minimal forwarder",
                        m * 100.0 / med(Case::Minimal)
                    ));
                }
                if case.is_tc() && *case != Case::MinimalTc && med(Case::MinimalTc).is_finite() {
                    line.push_str(&format!(
                        ", {:.0}% of the minimal tc forwarder",
                        m * 100.0 / med(Case::MinimalTc)
                    ));
                }
                if matches!(case, Case::AutoManaged | Case::AutoUnmanaged) {
                    line.push_str(&format!(
                        " (goal ≥ {AUTO_GOAL:.1}×: {})",
                        met(m / kernel >= AUTO_GOAL)
                    ));
                }
                let peer = med(Case::XdpForward);
                if case.is_xdp() && peer.is_finite() {
                    line.push_str(&format!(
                        ", {:.2}× xdp-forward (goal ≥ 1.0×: {})",
                        m / peer,
                        met(m / peer >= 1.0)
                    ));
                }
                if case.is_xdp() {
                    line.push_str(&format!(
                        " (goal ≥ {GOAL:.1}×: {})",
                        met(m / kernel >= GOAL)
                    ));
                }
                if let Some(p) = no_route_pct(&f.verdicts) {
                    if p > 0.0 {
                        line.push_str(&format!(
                            "; {p:.1}% of its packets went to the kernel as no-route"
                        ));
                    }
                }
            }
        }
        println!("{line}");
    }
    all_flowed
}

/// CPU of the TCP sender and receiver. Left to the scheduler, they were sometimes apart and
/// sometimes together, and runs ranged over 2× (11.6–24.5 Gbit/s); pinned apart they moved
/// ~9 Gbit/s, pinned together ~14. Together, the whole path runs on one CPU, as in the packet
/// rate figures, so the figure is the CPU time per byte of each router.
const TCP_CPU: usize = 0;

/// One TCP stream H1 → H2 through R for `seconds`, from hosts with default offloads; returns
/// Gbit/s received by H2.
fn tcp_stream(topo: &Topology, seconds: u32, to_r: bool) -> Result<f64> {
    use std::io::{Read, Write};
    let (h1, h2) = (
        topo.h1.name().to_string(),
        if to_r { topo.r.name() } else { topo.h2.name() }.to_string(),
    );
    let addr: &'static str = if to_r {
        "10.10.0.1:5201"
    } else {
        "10.20.0.2:5201"
    };
    let listener = on_this_thread_in(&h2, || {
        std::net::TcpListener::bind(addr).with_context(|| format!("bind {addr} in {h2}"))
    })?;
    let dur = std::time::Duration::from_secs(u64::from(seconds));
    let server = std::thread::spawn(move || -> Result<u64> {
        pin_this_thread(TCP_CPU, "the TCP receiver")?;
        let (mut c, _) = listener.accept().context("accept in H2")?;
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0u64;
        loop {
            match c.read(&mut buf) {
                Ok(0) => return Ok(total),
                Ok(n) => total += n as u64,
                Err(e) => return Err(e).context("read in H2"),
            }
        }
    });
    let start = std::time::Instant::now();
    let sent = std::thread::spawn(move || -> Result<()> {
        pin_this_thread(TCP_CPU, "the TCP sender")?;
        let mut s = on_this_thread_in(&h1, || {
            std::net::TcpStream::connect_timeout(
                &addr.parse().context("address")?,
                std::time::Duration::from_secs(3),
            )
            .context("connect from H1 through R")
        })?;
        let buf = vec![0x5au8; 1 << 16];
        while start.elapsed() < dur {
            s.write_all(&buf).context("write from H1")?;
        }
        Ok(())
    });
    sent.join()
        .map_err(|_| anyhow::anyhow!("TCP client thread panicked"))??;
    let bytes = server
        .join()
        .map_err(|_| anyhow::anyhow!("TCP server thread panicked"))??;
    Ok(bytes as f64 * 8.0 / start.elapsed().as_secs_f64() / 1e9)
}

/// TCP throughput from hosts with default offloads: kernel forwarding, then mproute in each
/// mode (auto is tc on these veths), in a fresh topology with no program but ours.
fn tcp_figures(bin: &Path, seconds: u32, runs: u32) -> Result<()> {
    let topo = Topology::build()?;
    let m = Mproute {
        bin,
        ns: topo.r.name(),
    };
    // Both router ports, as a router is set up: the ACKs from H2 come in on vout. The words
    // after `dataplane attach dev vin dev vout`; None: no dataplane.
    let modes: [(&str, Option<&[&str]>); 6] = [
        ("no forwarding (to R)", None),
        ("kernel forwarding", None),
        ("mproute auto", Some(&[])),
        ("mproute tc peer off", Some(&["tc", "peer", "off"])),
        ("mproute xdp-generic", Some(&["xdp-generic"])),
        ("mproute xdp", Some(&["xdp", "prepare-peers"])),
    ];
    let mut results: Vec<(&str, Vec<f64>)> = modes.iter().map(|(n, _)| (*n, Vec::new())).collect();
    for _ in 0..runs {
        for (i, (_, attach)) in modes.iter().enumerate() {
            if let Some(words) = attach {
                let mut a = vec!["dataplane", "attach", "dev", "vin", "dev", "vout"];
                a.extend_from_slice(words);
                m.run(&a).context("attach for the TCP run")?;
            }
            let g = tcp_stream(&topo, seconds, i == 0)?;
            results[i].1.push(g);
            m.run(&["dataplane", "detach", "dev", "vin", "dev", "vout"])
                .ok();
        }
    }
    println!();
    println!(
        "TCP, one stream H1 → H2, hosts with default offloads, {runs} runs × {seconds} s, \
         sender and receiver on CPU {TCP_CPU}:"
    );
    let kernel = median(&results[1].1);
    for (name, v) in &results {
        let med = median(v);
        let runs_s = v
            .iter()
            .map(|g| format!("{g:.2}"))
            .collect::<Vec<_>>()
            .join(" ");
        let mut line = format!(
            "  {name:<22} {runs_s:<24} median {med:.2} Gbit/s = {:.2}× kernel",
            med / kernel
        );
        if *name == "mproute auto" {
            line.push_str(&format!(
                " (goal ≥ {TCP_GOAL:.1}×: {}; the limit, no forwarding: {:.2}×)",
                met(med / kernel >= TCP_GOAL),
                median(&results[0].1) / kernel
            ));
        }
        println!("{line}");
    }
    Ok(())
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
    /// The generator's flows (UDP source ports), a power of two up to [`MAX_FLOWS`].
    pub flows: u32,
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
    check_gen(
        &frame(topo.h1_eth0.mac, topo.vin.mac, MANAGED_DST, udp_csum),
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
    mproute
        .run(&["add", MANAGED, "nexthop", "via", "10.20.0.2", "dev", "vout"])
        .context("add the managed route")?;
    println!(
        "bench: H1 {} ─ R {} ─ H2 {}; {threads} generator thread(s) in H1, {runs} runs × \
         {seconds} s per case; managed route {MANAGED} via {H2_ADDR} dev vout",
        topo.h1.name(),
        topo.r.name(),
        topo.h2.name()
    );
    let bench = Bench {
        topo: &topo,
        sink: &sink,
        minimal: &minimal,
        mproute,
        udp_csum,
        flows: o.flows,
        seconds,
        threads,
        xdp_forward: o.xdp_forward.as_deref(),
        profile: false,
    };
    let mut figs: Vec<(Case, Figures)> = Case::ALL
        .iter()
        .filter(|c| **c != Case::XdpForward || o.xdp_forward.is_some())
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
    let ok = print_results(&figs, seconds, runs, threads, udp_csum, o.flows);
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
    fn template_frames_are_valid() {
        for udp_csum in [true, false] {
            let f = frame(
                [2, 0, 0, 0, 0, 1],
                [2, 0, 0, 0, 0, 2],
                MANAGED_DST,
                udp_csum,
            );
            assert_eq!(ip_checksum(&f[14..34]), 0);
            assert_eq!(u16::from_be_bytes([f[16], f[17]]), 50);
            assert_eq!(u16::from_be_bytes([f[38], f[39]]), 30);
            assert_eq!(&f[30..34], &[198, 18, 0, 1]);
            assert_eq!(u16::from_be_bytes([f[34], f[35]]), SPORT_BASE);
            if udp_csum {
                assert_eq!(ip_checksum(&udp_pseudo(&f)), 0);
            } else {
                assert_eq!(&f[40..42], &[0, 0]);
            }
        }
    }

    #[test]
    fn flows_is_a_power_of_two() {
        assert!(FLOWS.is_power_of_two() && MAX_FLOWS.is_power_of_two());
        assert!(u32::from(SPORT_BASE) + MAX_FLOWS <= 65_536);
    }
}

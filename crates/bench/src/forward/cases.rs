//! The cases (what runs on R's `vin`) and one run of one case: set R up, generate, read the
//! counters, take R back to nothing.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use mpt_bpf::skel::bench::bench_fwd::BenchFwdSkel;

use super::generator::generate;
use super::stats::{count, cpu_ticks, prog_stats};
use super::topology::{attach_xdp, on_this_thread_in, Topology};
use super::{
    Mproute, H2_ADDR, H2_ADDR6, MANAGED_DST, MANAGED_DST6, SLOT_DROP, SLOT_PASS, SLOT_SINK,
};
use crate::support;

/// What runs on R's `vin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Case {
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
    pub(super) const ALL: [Case; 11] = [
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

    pub(super) fn label(self) -> &'static str {
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

    /// The destination of the generator's frames, IPv6 with `v6`.
    pub(super) fn dst(self, v6: bool) -> IpAddr {
        let managed = matches!(
            self,
            Case::XdpManaged | Case::XdpManagedChecked | Case::AutoManaged | Case::TcNeighManaged
        );
        match (managed, v6) {
            (true, false) => MANAGED_DST.into(),
            (true, true) => MANAGED_DST6.into(),
            (false, false) => H2_ADDR.into(),
            (false, true) => H2_ADDR6.into(),
        }
    }

    /// Measured with `--ipv6`: not the minimal forwarders (IPv4 only), nor the managed case
    /// with the FIB check forced per packet (IPv6 has it per packet always).
    pub(super) fn has_ipv6(self) -> bool {
        !matches!(
            self,
            Case::Minimal | Case::MinimalTc | Case::XdpManagedChecked
        )
    }

    /// `mproute dataplane attach dev vin` words after the device: the mode and options.
    pub(super) fn mproute(self) -> Option<&'static [&'static str]> {
        match self {
            Case::XdpManaged | Case::XdpManagedChecked | Case::XdpUnmanaged => Some(&["xdp"]),
            Case::AutoManaged | Case::AutoUnmanaged => Some(&[]),
            Case::TcNeighManaged => Some(&["tc", "peer", "off"]),
            _ => None,
        }
    }

    /// A tc program alone on `vin` (mproute auto on a veth, tc, or the minimal one).
    pub(super) fn is_tc(self) -> bool {
        matches!(
            self,
            Case::AutoManaged | Case::AutoUnmanaged | Case::TcNeighManaged | Case::MinimalTc
        )
    }

    /// Our own program on `vin`: the ceiling's drop, or the pass that gives `vin` NAPI.
    pub(super) fn vin_prog(self) -> Option<u32> {
        match self {
            Case::Ceiling => Some(SLOT_DROP),
            Case::Kernel => Some(SLOT_PASS),
            c if c.is_tc() => Some(SLOT_PASS),
            _ => None,
        }
    }

    /// Profiled: the run time of the program on `vin` (XDP, or mproute's tc program).
    pub(super) fn profiled(self) -> bool {
        self.is_xdp()
            || self.is_tc()
            || matches!(self, Case::Ceiling | Case::Minimal | Case::XdpForward)
    }

    pub(super) fn is_xdp(self) -> bool {
        self.mproute() == Some(&["xdp"])
    }
}

pub(super) fn delta(
    after: &BTreeMap<String, u64>,
    before: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
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
pub(super) struct Figures {
    /// Delivered Mpps per run.
    pub(super) mpps: Vec<f64>,
    /// Offered (arriving at R) Mpps per run, where known.
    pub(super) offered: Vec<f64>,
    /// /proc/stat deltas over the runs.
    pub(super) cpu: [u64; 8],
    /// mproute's verdict counters over the runs.
    pub(super) verdicts: BTreeMap<String, u64>,
    /// Profile pass: ns per run of the XDP program on R's `vin`, per run.
    pub(super) prog_ns: Vec<f64>,
}

/// Everything that stays loaded for the whole benchmark.
pub(super) struct Bench<'a, 'o> {
    pub(super) topo: &'a Topology,
    pub(super) sink: &'a mpt_bpf::skel::bench::sink::SinkSkel<'o>,
    pub(super) minimal: &'a BenchFwdSkel<'o>,
    pub(super) mproute: Mproute<'a>,
    pub(super) udp_csum: bool,
    /// The generator's flows (`--flows`).
    pub(super) flows: u32,
    /// UDP/IPv6 (`--ipv6`).
    pub(super) ipv6: bool,
    pub(super) seconds: u32,
    pub(super) threads: u32,
    /// xdp-forward's binary (`--xdp-forward`).
    pub(super) xdp_forward: Option<&'a Path>,
    /// Profile pass (BPF run-time statistics on): read the run time of `vin`'s program.
    pub(super) profile: bool,
}

impl Bench<'_, '_> {
    /// One run of one case: set R up, generate, take R back to nothing.
    pub(super) fn one(&self, case: Case, f: &mut Figures) -> Result<()> {
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
        // IPv4 only: an IPv6 managed packet is always checked against the kernel's FIB
        if !self.ipv6
            && matches!(
                case,
                Case::XdpManaged | Case::XdpManagedChecked | Case::AutoManaged
            )
        {
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
            case.dst(self.ipv6),
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

//! What is measured besides the sink's count: CPU ticks (`/proc/stat`), the per-CPU counters
//! of `bench_cnt`, and the run time of the program on a device (`BPF_ENABLE_STATS`).

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags};

use super::topology::on_this_thread_in;

/// `/proc/stat`'s `cpu` line: user, nice, system, idle, iowait, irq, softirq, steal (ticks).
pub(super) fn cpu_ticks() -> Result<[u64; 8]> {
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
pub(super) fn count(map: &impl MapCore, slot: u32) -> Result<u64> {
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
pub(super) fn prog_stats(ns: &str, ifindex: u32, tc: bool) -> Result<(u64, u64)> {
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
pub(super) fn enable_bpf_stats() -> Result<std::os::fd::OwnedFd> {
    Ok(mpt_bpf::prog::enable_run_time_stats()?)
}

//! The packet generator: `mpt_bench_gen` run by `BPF_PROG_TEST_RUN` with live frames on
//! threads inside H1, its template frame (testkit's [`Udp4Frame`]), the check of what it
//! writes, and the signal that ends each thread's one long call.

use std::fs::File;
use std::mem::MaybeUninit;
use std::net::Ipv4Addr;
use std::os::unix::thread::JoinHandleExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{anyhow, ensure, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{ErrorKind, OpenObject, ProgramInput};
use mpt_bpf::skel::bench::gen::{GenSkel, GenSkelBuilder};
use mpt_testkit::packet::{csum_ok, l4_csum_verdict, Udp4Frame};
use nix::sched::{sched_setaffinity, setns, CloneFlags, CpuSet};
use nix::sys::pthread::pthread_kill;
use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::unistd::Pid;

use super::topology::Topology;
use super::{BPF_F_TEST_XDP_LIVE_FRAMES, DPORT, FRAME, H1_ADDR, REPEAT, SPORT_BASE, TTL, XDP_TX};

/// The generator's template frame (the UDP source port is the program's): UDP/IPv4 from H1
/// to `dst`, with a valid UDP checksum or none (0).
pub(super) fn frame(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    dst: Ipv4Addr,
    udp_csum: bool,
) -> [u8; FRAME] {
    Udp4Frame {
        dst_mac,
        src_mac,
        src: H1_ADDR,
        dst,
        sport: SPORT_BASE,
        dport: DPORT,
        ttl: TTL,
        udp_csum,
    }
    .bytes()
}

/// Runs the generator three times without live frames and checks what it wrote: the
/// template, source ports from the counter, both checksums valid.
pub(super) fn check_gen(tmpl: &[u8; FRAME], udp_csum: bool, flows: u32) -> Result<()> {
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
        let udp_ok = if udp_csum {
            l4_csum_verdict(&out, false) == Some(true)
        } else {
            out[40..42] == [0, 0]
        };
        ensure!(
            rv == XDP_TX
                && out[..34] == tmpl[..34]
                && out[36..40] == tmpl[36..40]
                && out[42..] == tmpl[42..]
                && sport == SPORT_BASE + i
                && csum_ok(&out[14..34])
                && udp_ok,
            "the generator's frame {i} is wrong (returned {rv}, XDP_TX is {XDP_TX}): {out:02x?}"
        );
    }
    Ok(())
}

extern "C" fn on_sigusr1(_: std::ffi::c_int) {}

/// SIGUSR1 with a handler that does nothing and no SA_RESTART, so that a generator thread's
/// `BPF_PROG_TEST_RUN` returns EINTR when the signal is sent to it.
pub(super) fn install_sigusr1() -> Result<()> {
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
pub(super) struct GenSpec {
    ns_path: String,
    ingress: u32,
    frame: [u8; FRAME],
    udp_csum: bool,
    flows: u32,
    cpu: usize,
}

/// Opens the generator with its template and loads it.
pub(super) fn open_gen<'o>(
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
pub(super) fn load_gen<'o>(
    obj: &'o mut MaybeUninit<OpenObject>,
    spec: &GenSpec,
) -> Result<GenSkel<'o>> {
    let file = File::open(&spec.ns_path).with_context(|| format!("open {}", spec.ns_path))?;
    setns(&file, CloneFlags::CLONE_NEWNET).with_context(|| format!("setns {}", spec.ns_path))?;
    pin_this_thread(spec.cpu, "the generator thread")?;
    open_gen(obj, &spec.frame, spec.udp_csum, spec.flows)
}

/// Pins the calling thread to CPU `cpu`.
pub(super) fn pin_this_thread(cpu: usize, what: &str) -> Result<()> {
    let mut cpus = CpuSet::new();
    cpus.set(cpu).with_context(|| format!("CPU {cpu}"))?;
    sched_setaffinity(Pid::from_raw(0), &cpus).with_context(|| format!("pin {what} to CPU {cpu}"))
}

/// One generator thread: enter H1, load, wait for the others, then send until `stop`.
pub(super) fn gen_thread(spec: GenSpec, ready: Arc<Barrier>, stop: Arc<AtomicBool>) -> Result<()> {
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
pub(super) fn generate(
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

#[cfg(test)]
mod tests {
    use super::*;
    use mpt_testkit::packet::inet_csum;

    #[test]
    fn template_frames_are_valid() {
        for udp_csum in [true, false] {
            let f = frame(
                [2, 0, 0, 0, 0, 1],
                [2, 0, 0, 0, 0, 2],
                super::super::MANAGED_DST,
                udp_csum,
            );
            assert_eq!(inet_csum(&f[14..34]), 0);
            assert_eq!(u16::from_be_bytes([f[16], f[17]]), 50);
            assert_eq!(u16::from_be_bytes([f[38], f[39]]), 30);
            assert_eq!(&f[30..34], &[198, 18, 0, 1]);
            assert_eq!(u16::from_be_bytes([f[34], f[35]]), SPORT_BASE);
            if udp_csum {
                assert_eq!(l4_csum_verdict(&f, false), Some(true));
            } else {
                assert_eq!(&f[40..42], &[0, 0]);
            }
        }
    }
}

//! The packet generator: `mpt_bench_gen` run by `BPF_PROG_TEST_RUN` with live frames on
//! threads inside H1, its template frame (testkit's [`Udp4Frame`], or a UDP/IPv6 frame of the
//! same length), the check of what it writes, and the signal that ends each thread's one long
//! call.

use std::fs::File;
use std::mem::MaybeUninit;
use std::net::IpAddr;
use std::os::unix::thread::JoinHandleExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{anyhow, ensure, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{ErrorKind, MapCore, MapFlags, OpenObject, ProgramInput};
use mpt_bpf::skel::bench::gen::{GenSkel, GenSkelBuilder};
use mpt_testkit::packet::{
    csum_ok, eth, l4_csum_verdict, parse_ethernet, udp, Ip6, Udp4Frame, ETH_P_IPV6, IPPROTO_UDP,
};
use nix::sched::{sched_setaffinity, setns, CloneFlags, CpuSet};
use nix::sys::pthread::pthread_kill;
use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::unistd::Pid;

use super::topology::Topology;
use super::{
    BPF_F_TEST_XDP_LIVE_FRAMES, DPORT, FRAME, H1_ADDR, H1_ADDR6, REPEAT, SPORT_BASE, TTL, XDP_TX,
};

/// Flow bits in the UDP source port; the ones above go to the destination port (`GEN_PORT_LOW_BITS`
/// in gen.bpf.c).
pub(super) const PORT_LOW_BITS: u32 = 15;

/// The generator's template frame (the UDP ports are the program's): UDP/IPv4 or UDP/IPv6
/// (by `dst`) from H1 to `dst`, with a valid UDP checksum or, IPv4 only, none (0).
pub(super) fn frame(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    dst: IpAddr,
    udp_csum: bool,
) -> [u8; FRAME] {
    match dst {
        IpAddr::V4(dst) => Udp4Frame {
            dst_mac,
            src_mac,
            src: H1_ADDR,
            dst,
            sport: SPORT_BASE,
            dport: DPORT,
            ttl: TTL,
            udp_csum,
        }
        .bytes(),
        IpAddr::V6(dst) => {
            // 14 Ethernet + 40 IPv6 + 8 UDP + 2 payload; Ip6 fills the UDP checksum in
            let ip = Ip6 {
                src: H1_ADDR6.octets(),
                dst: dst.octets(),
                nh: IPPROTO_UDP,
                hop: TTL,
                payload: udp(SPORT_BASE, DPORT, FRAME - 14 - 40 - 8),
            };
            let mut f = [0u8; FRAME];
            f.copy_from_slice(&eth(dst_mac, src_mac, ETH_P_IPV6, &ip.bytes()));
            f
        }
    }
}

/// Whether a template frame is UDP/IPv6.
fn is_v6(tmpl: &[u8; FRAME]) -> bool {
    u16::from_be_bytes([tmpl[12], tmpl[13]]) == ETH_P_IPV6
}

/// Offset of the template's UDP header.
pub(super) fn udp_off(tmpl: &[u8; FRAME]) -> usize {
    if is_v6(tmpl) {
        14 + 40
    } else {
        14 + 20
    }
}

/// The ports of flow `n` (the generator's counter masked by flows - 1).
pub(super) fn flow_ports(n: u32) -> (u16, u16) {
    let low = n & ((1 << PORT_LOW_BITS) - 1);
    // flows stay below 2^18: both fit (see MAX_FLOWS)
    (SPORT_BASE + low as u16, DPORT + (n >> PORT_LOW_BITS) as u16)
}

/// Runs the generator without live frames and checks what it wrote: three frames, then
/// (with the per-CPU counter set to it) the last flow's: the template, ports from the counter,
/// the checksums valid, and an independent parser's reading of the addresses and ports.
pub(super) fn check_gen(tmpl: &[u8; FRAME], udp_csum: bool, flows: u32) -> Result<()> {
    let mut obj = MaybeUninit::<OpenObject>::uninit();
    let skel = open_gen(&mut obj, tmpl, udp_csum, flows)?;
    let prog = &skel.progs.mpt_bench_gen;
    let zeros = [0u8; FRAME];
    let u = udp_off(tmpl);
    let (tmpl_flow, _) = parse_ethernet(tmpl).context("the template does not parse")?;
    let run = |n: u32| -> Result<()> {
        let mut out = [0u8; FRAME];
        let rv = prog
            .test_run(ProgramInput {
                data_in: Some(&zeros),
                data_out: Some(&mut out),
                ..Default::default()
            })
            .context("BPF_PROG_TEST_RUN of the generator")?
            .return_value;
        let (sport, dport) = flow_ports(n);
        let got = (
            u16::from_be_bytes([out[u], out[u + 1]]),
            u16::from_be_bytes([out[u + 2], out[u + 3]]),
        );
        let udp_ok = if udp_csum {
            l4_csum_verdict(&out, false) == Some(true)
        } else {
            out[u + 6..u + 8] == [0, 0]
        };
        let l3_ok = is_v6(tmpl) || csum_ok(&out[14..34]);
        let parsed = parse_ethernet(&out).map(|(f, _)| f);
        let parsed_ok = parsed.as_ref().is_some_and(|f| {
            f.src == tmpl_flow.src
                && f.dst == tmpl_flow.dst
                && f.proto == IPPROTO_UDP
                && f.sport == sport
                && f.dport == dport
        });
        ensure!(
            rv == XDP_TX
                && out[..u] == tmpl[..u]
                && out[u + 4..u + 6] == tmpl[u + 4..u + 6]
                && out[u + 8..] == tmpl[u + 8..]
                && got == (sport, dport)
                && l3_ok
                && udp_ok
                && parsed_ok,
            "the generator's frame of flow {n} is wrong (returned {rv}, XDP_TX is {XDP_TX}; \
             ports {got:?}, expected {:?}; parsed {parsed:?}): {out:02x?}",
            (sport, dport)
        );
        Ok(())
    };
    for n in 0..3u32.min(flows) {
        run(n)?;
    }
    // the last flow: its ports (the destination port's too beyond 2^15 flows)
    let last = u64::from(flows - 1);
    let ncpu = libbpf_rs::num_possible_cpus().context("possible CPUs")?;
    let vals: Vec<Vec<u8>> = (0..ncpu).map(|_| last.to_ne_bytes().to_vec()).collect();
    skel.maps
        .gen_seq
        .update_percpu(&0u32.to_ne_bytes(), &vals, MapFlags::ANY)
        .context("set the generator's counter")?;
    run(flows - 1)
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
    let u = udp_off(tmpl);
    bss.gen_cfg.frame = *tmpl;
    bss.gen_cfg.sport_base = SPORT_BASE;
    bss.gen_cfg.dport_base = DPORT;
    bss.gen_cfg.ipv6 = u16::from(is_v6(tmpl));
    bss.gen_cfg.udp_csum = if udp_csum {
        u16::from_be_bytes([tmpl[u + 6], tmpl[u + 7]])
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
    dst: IpAddr,
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
                IpAddr::V4(super::super::MANAGED_DST),
                udp_csum,
            );
            assert_eq!(inet_csum(&f[14..34]), 0);
            assert_eq!(u16::from_be_bytes([f[16], f[17]]), 50);
            assert_eq!(u16::from_be_bytes([f[38], f[39]]), 30);
            assert_eq!(&f[30..34], &[198, 18, 0, 1]);
            assert_eq!(u16::from_be_bytes([f[34], f[35]]), SPORT_BASE);
            assert_eq!(udp_off(&f), 34);
            if udp_csum {
                assert_eq!(l4_csum_verdict(&f, false), Some(true));
            } else {
                assert_eq!(&f[40..42], &[0, 0]);
            }
        }
    }

    #[test]
    fn template_frame_v6_is_valid() {
        let dst = super::super::MANAGED_DST6;
        let f = frame(
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 2],
            IpAddr::V6(dst),
            true,
        );
        assert_eq!(udp_off(&f), 54);
        // payload length: UDP header and 2 bytes
        assert_eq!(u16::from_be_bytes([f[18], f[19]]), 10);
        assert_eq!(f[20], IPPROTO_UDP);
        assert_eq!(f[21], TTL);
        assert_eq!(&f[38..54], &dst.octets());
        assert_eq!(u16::from_be_bytes([f[58], f[59]]), 10);
        assert_eq!(l4_csum_verdict(&f, false), Some(true));
        let (flow, _) = parse_ethernet(&f).expect("parses");
        assert_eq!((flow.sport, flow.dport), (SPORT_BASE, DPORT));
    }

    #[test]
    fn flow_ports_cover_the_flows() {
        assert_eq!(flow_ports(0), (SPORT_BASE, DPORT));
        assert_eq!(flow_ports(32_767), (SPORT_BASE + 32_767, DPORT));
        assert_eq!(flow_ports(32_768), (SPORT_BASE, DPORT + 1));
        let (s, d) = flow_ports(super::super::MAX_FLOWS - 1);
        assert_eq!((s, d), (SPORT_BASE + 32_767, DPORT + 7));
    }
}

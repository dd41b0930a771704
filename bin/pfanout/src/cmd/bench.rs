//! `pfanout bench`: the 2013 rollover experiment between two throwaway namespaces. A generator
//! in one sends UDP (one flow, as in 2013, or `flows N`) over a veth pair; in the other N
//! workers, each limited to a fixed packet rate by a token bucket that sleeps (so that N
//! workers need no N CPUs), read a fanout group bound to the veth. For each mode the
//! processed, dropped and rolled-over packets per second are measured, and what rollover
//! costs: the share of flows whose packets reached more than one worker, and the packets
//! processed after a later packet of their flow (from the flow and sequence number the
//! generator writes into each payload); then the ratio of rollover to no rollover.
//!
//! The generator is an `AF_PACKET` socket that writes whole frames with `sendmmsg`, 64 a
//! call, past the qdisc (`PACKET_QDISC_BYPASS`), pinned to CPU 0: the frames go to a foreign
//! MAC address, so the capture side's IP stack drops them at once and only the packet
//! sockets see them. What it could offer, and the resource that held it back, is reported
//! against the 2013 experiment's absolute rates (9 workers of 32 kpps, 500 kpps offered,
//! 270 kpps processed).

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpt_cli::Failure;
use mpt_model::fanout::{Flags, Mode};
use mpt_sys::packet::PacketSocket;
use mpt_testkit::Netns;

use crate::cmd::run::{Observer, Running};
use crate::grammar::{BenchCmd, RunCmd};
use crate::view::{sum, BenchReport, BenchRow, GeneratorReport, GeneratorRun, Ratio};

/// Seconds each mode runs before it is measured.
const WARMUP: Duration = Duration::from_millis(1000);
const GEN_DEV: &str = "pfb0";
const CAP_DEV: &str = "pfb1";
const GEN_ADDR: &str = "198.18.0.1";
const CAP_ADDR: &str = "198.18.0.2";
/// An address of the link that resolves (a permanent neighbour entry) to the foreign MAC:
/// the UDP generator of the side-by-side comparison sends to it.
const FOREIGN_ADDR: &str = "198.18.0.5";
/// How long each generator of the side-by-side comparison sends at full speed.
const COMPARE: Duration = Duration::from_secs(1);
/// The generator's frames: to a MAC address no one has, from one of ours.
const FOREIGN_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x99];
const GEN_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
/// The payload's first bytes: a frame of the bench's generator.
const MAGIC: [u8; 4] = *b"PFB1";
/// UDP payload bytes (magic, flow, sequence number, padding).
const PAYLOAD: usize = 64;
/// Frames per `sendmmsg`.
const BATCH: usize = 64;
/// The first source port (flow f is port BASE_PORT + f).
const BASE_PORT: u16 = 1024;
/// The 2013 experiment's absolute rates.
const SEED_WORKERS: u32 = 9;
const SEED_PER_WORKER: u32 = 32_000;
const SEED_OFFERED: f64 = 500_000.0;
const SEED_PROCESSED: f64 = 270_000.0;

fn ip(args: &[&str]) -> Result<(), Failure> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| Failure::system(format!("run ip: {e}")))?;
    if !out.status.success() {
        return Err(Failure::system(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

fn setup(g: &str, c: &str) -> Result<(), Failure> {
    ip(&[
        "link", "add", GEN_DEV, "netns", g, "type", "veth", "peer", "name", CAP_DEV, "netns", c,
    ])?;
    for (ns, dev, addr) in [(g, GEN_DEV, GEN_ADDR), (c, CAP_DEV, CAP_ADDR)] {
        let key = format!("net/ipv6/conf/{dev}/disable_ipv6");
        mpt_sys::netns::run_in(ns, move || -> Result<(), Failure> {
            mpt_sys::sysctl::write(&key, "1").map_err(|e| Failure::system(e.to_string()))
        })?;
        ip(&["-n", ns, "addr", "add", &format!("{addr}/29"), "dev", dev])?;
        ip(&["-n", ns, "link", "set", dev, "up"])?;
    }
    ip(&[
        "-n",
        g,
        "neigh",
        "add",
        FOREIGN_ADDR,
        "lladdr",
        "02:00:00:00:00:99",
        "dev",
        GEN_DEV,
        "nud",
        "permanent",
    ])?;
    Ok(())
}

/// The two generators: an AF_PACKET socket (`sendmmsg`, qdisc bypass) and, as the bench had
/// before, a UDP socket with one `send` a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GenKind {
    Packet,
    Udp,
}

/// Send at full speed from `ns`, pinned to CPU 0, for `COMPARE`, with no group bound on the
/// other side (the frames go to the foreign MAC either way, and are dropped at once there):
/// packets per second and the share of a core used.
fn full_speed(ns: &str, kind: GenKind) -> Result<(f64, f64), Failure> {
    let ns = ns.to_string();
    std::thread::spawn(move || -> Result<(f64, f64), String> {
        mpt_sys::netns::enter(&ns).map_err(|e| e.to_string())?;
        let mut set = nix::sched::CpuSet::new();
        let _ = set.set(0);
        let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
        let cpu0 = thread_cpu_us();
        let start = Instant::now();
        let mut n: u64 = 0;
        match kind {
            GenKind::Packet => {
                let idx = mpt_sys::iface::index(GEN_DEV).map_err(|e| e.to_string())?;
                let s = PacketSocket::open(idx, 0).map_err(|e| e.to_string())?;
                s.set_qdisc_bypass().map_err(|e| e.to_string())?;
                let mut batch: Vec<Vec<u8>> = vec![template(0); BATCH];
                while start.elapsed() < COMPARE {
                    for f in batch.iter_mut() {
                        f[SEQ_AT..SEQ_AT + 8].copy_from_slice(&n.to_be_bytes());
                        n += 1;
                    }
                    let frames: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
                    let sent = s.send_many(&frames).unwrap_or(0);
                    n -= (BATCH - sent) as u64;
                }
            }
            GenKind::Udp => {
                let s = std::net::UdpSocket::bind((GEN_ADDR, 40001)).map_err(|e| e.to_string())?;
                s.connect((FOREIGN_ADDR, 9)).map_err(|e| e.to_string())?;
                let mut payload = [0x5au8; PAYLOAD];
                payload[..4].copy_from_slice(&MAGIC);
                while start.elapsed() < COMPARE {
                    for _ in 0..BATCH {
                        payload[8..16].copy_from_slice(&n.to_be_bytes());
                        if s.send(&payload).is_ok() {
                            n += 1;
                        }
                    }
                }
            }
        }
        let secs = start.elapsed().as_secs_f64();
        let cpu = thread_cpu_us().saturating_sub(cpu0) as f64 / 1e6 / secs;
        Ok((n as f64 / secs, cpu))
    })
    .join()
    .map_err(|_| Failure::system("the generator comparison failed"))?
    .map_err(|e| Failure::system(format!("generator comparison: {e}")))
}

/// One frame of flow `flow` (a template: the sequence number is written per packet).
fn template(flow: u32) -> Vec<u8> {
    let src: std::net::Ipv4Addr = GEN_ADDR.parse().unwrap_or(std::net::Ipv4Addr::UNSPECIFIED);
    let dst: std::net::Ipv4Addr = CAP_ADDR.parse().unwrap_or(std::net::Ipv4Addr::UNSPECIFIED);
    let udp_len = 8 + PAYLOAD;
    let ip_len = 20 + udp_len;
    let mut f = Vec::with_capacity(14 + ip_len);
    f.extend_from_slice(&FOREIGN_MAC);
    f.extend_from_slice(&GEN_MAC);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let ip_at = f.len();
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&(ip_len as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    let mut sum: u32 = f[ip_at..ip_at + 20]
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let csum = !(sum as u16);
    f[ip_at + 10..ip_at + 12].copy_from_slice(&csum.to_be_bytes());
    f.extend_from_slice(&(BASE_PORT + flow as u16).to_be_bytes());
    f.extend_from_slice(&9u16.to_be_bytes());
    f.extend_from_slice(&(udp_len as u16).to_be_bytes());
    // no UDP checksum (0: none, allowed on IPv4): no one checks it, the sequence number
    // changes per packet
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&MAGIC);
    f.extend_from_slice(&flow.to_be_bytes());
    f.extend_from_slice(&0u64.to_be_bytes());
    f.resize(14 + ip_len, 0x5a);
    f
}

/// Where the sequence number sits in a frame.
const SEQ_AT: usize = 14 + 20 + 8 + 8;

/// A frame's (flow, sequence number), if the bench's generator sent it.
fn flow_and_seq(d: &[u8]) -> Option<(u32, u64)> {
    if d.get(12..14)? != [0x08, 0x00] || d.get(23)? != &17 {
        return None;
    }
    let ihl = usize::from(d.get(14)? & 0x0f) * 4;
    let p = 14 + ihl + 8;
    if d.get(p..p + 4)? != MAGIC {
        return None;
    }
    let flow = u32::from_be_bytes(d.get(p + 4..p + 8)?.try_into().ok()?);
    let seq = u64::from_be_bytes(d.get(p + 8..p + 16)?.try_into().ok()?);
    Some((flow, seq))
}

/// What the generator did.
#[derive(Debug, Default)]
struct GenStats {
    sent: AtomicU64,
    /// Calls the kernel refused (its queue full).
    refused: AtomicU64,
    /// CPU time the generator's thread used, µs.
    cpu_us: AtomicU64,
}

/// CPU time of the calling thread (user + system), µs.
fn thread_cpu_us() -> u64 {
    // SAFETY: rusage is plain old data; getrusage fills it.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a live rusage for the kernel to fill.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut r) } != 0 {
        return 0;
    }
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    us(r.ru_utime) + us(r.ru_stime)
}

/// The generator: `flows` UDP flows round robin at `rate` packets a second, pinned to CPU 0,
/// until `stop`.
fn generator(
    ns: &str,
    rate: u32,
    flows: u32,
    stop: Arc<AtomicBool>,
    stats: Arc<GenStats>,
) -> Result<std::thread::JoinHandle<()>, Failure> {
    let ns = ns.to_string();
    let (tx, rx) = std::sync::mpsc::channel::<Result<(), String>>();
    let h = std::thread::spawn(move || {
        let ready = (|| -> Result<PacketSocket, String> {
            mpt_sys::netns::enter(&ns).map_err(|e| e.to_string())?;
            let mut set = nix::sched::CpuSet::new();
            let _ = set.set(0);
            let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
            let idx = mpt_sys::iface::index(GEN_DEV).map_err(|e| e.to_string())?;
            // protocol 0: it receives nothing
            let s = PacketSocket::open(idx, 0).map_err(|e| format!("generator socket: {e}"))?;
            s.set_qdisc_bypass()
                .map_err(|e| format!("generator socket: {e}"))?;
            Ok(s)
        })();
        let s = match ready {
            Ok(s) => {
                let _ = tx.send(Ok(()));
                s
            }
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        };
        let templates: Vec<Vec<u8>> = (0..flows).map(template).collect();
        let mut seqs = vec![0u64; flows as usize];
        let mut batch: Vec<Vec<u8>> = vec![Vec::new(); BATCH];
        let cpu0 = thread_cpu_us();
        let start = Instant::now();
        let mut n: u64 = 0;
        let mut flow = 0usize;
        while !stop.load(Ordering::Relaxed) {
            let due = (start.elapsed().as_secs_f64() * f64::from(rate)) as u64;
            if n >= due {
                std::thread::sleep(Duration::from_micros(100));
                continue;
            }
            let k = ((due - n) as usize).min(BATCH);
            // the frames of this call, each the next packet of the next flow
            let mut marks = Vec::with_capacity(k);
            for slot in batch.iter_mut().take(k) {
                slot.clear();
                slot.extend_from_slice(&templates[flow]);
                slot[SEQ_AT..SEQ_AT + 8].copy_from_slice(&seqs[flow].to_be_bytes());
                marks.push(flow);
                flow = (flow + 1) % templates.len();
            }
            let frames: Vec<&[u8]> = batch.iter().take(k).map(Vec::as_slice).collect();
            let sent = match s.send_many(&frames) {
                Ok(m) => m,
                Err(_) => {
                    stats.refused.fetch_add(1, Ordering::Relaxed);
                    0
                }
            };
            // only what was sent takes a sequence number; the rest go again
            for f in marks.iter().take(sent) {
                seqs[*f] += 1;
            }
            if sent < k {
                flow = marks.get(sent).copied().unwrap_or(flow);
                std::thread::yield_now();
            }
            n += sent as u64;
            stats.sent.store(n, Ordering::Relaxed);
            stats
                .cpu_us
                .store(thread_cpu_us().saturating_sub(cpu0), Ordering::Relaxed);
        }
    });
    match rx.recv() {
        Ok(Ok(())) => Ok(h),
        Ok(Err(e)) => Err(Failure::system(e)),
        Err(_) => Err(Failure::system("the generator did not start")),
    }
}

/// Each flow's workers and highest sequence number processed, while armed.
#[derive(Debug)]
struct FlowBook {
    armed: AtomicBool,
    /// Per flow: bit w set when worker w processed one of its packets.
    workers: Vec<AtomicU64>,
    /// Per flow: 1 + the highest sequence number processed.
    top: Vec<AtomicU64>,
    /// Packets processed after a later packet of their flow.
    late: AtomicU64,
    /// Packets of the generator's processed while armed.
    seen: AtomicU64,
}

impl FlowBook {
    fn new(flows: u32) -> FlowBook {
        FlowBook {
            armed: AtomicBool::new(false),
            workers: (0..flows).map(|_| AtomicU64::new(0)).collect(),
            top: (0..flows).map(|_| AtomicU64::new(0)).collect(),
            late: AtomicU64::new(0),
            seen: AtomicU64::new(0),
        }
    }

    /// (flows seen, flows split over workers, packets out of order, packets seen).
    fn result(&self) -> (u64, u64, u64, u64) {
        let mut seen = 0;
        let mut split = 0;
        for w in &self.workers {
            let m = w.load(Ordering::Relaxed);
            seen += u64::from(m != 0);
            split += u64::from(m.count_ones() > 1);
        }
        (
            seen,
            split,
            self.late.load(Ordering::Relaxed),
            self.seen.load(Ordering::Relaxed),
        )
    }
}

impl Observer for FlowBook {
    fn packet(&self, worker: u32, data: &[u8]) {
        let Some((flow, seq)) = flow_and_seq(data) else {
            return;
        };
        let (Some(w), Some(top)) = (self.workers.get(flow as usize), self.top.get(flow as usize))
        else {
            return;
        };
        let before = top.fetch_max(seq + 1, Ordering::Relaxed);
        if !self.armed.load(Ordering::Relaxed) {
            return;
        }
        self.seen.fetch_add(1, Ordering::Relaxed);
        w.fetch_or(1u64 << (worker % 64), Ordering::Relaxed);
        if before > seq + 1 {
            self.late.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The modes measured.
fn configs() -> Vec<(Mode, Flags, &'static str)> {
    vec![
        (Mode::Hash, Flags::empty(), "hash"),
        (Mode::Hash, Flags::ROLLOVER, "hash flags rollover"),
        (Mode::Rollover, Flags::empty(), "rollover"),
        (Mode::Cpu, Flags::empty(), "cpu"),
        (Mode::Cpu, Flags::ROLLOVER, "cpu flags rollover"),
    ]
}

fn measure(
    cmd: &BenchCmd,
    abort: &Arc<AtomicBool>,
    gen: &GenStats,
) -> Result<Vec<BenchRow>, Failure> {
    let mut rows = Vec::new();
    for (mode, flags, label) in configs() {
        if abort.load(Ordering::Relaxed) {
            return Err(Failure::system("interrupted"));
        }
        let run = RunCmd {
            dev: CAP_DEV.to_string(),
            group: None,
            mode,
            flags,
            workers: cmd.workers,
            ring: false,
            write: None,
            exec: None,
            duration: None,
            count: None,
            per_worker: Some(cmd.per_worker),
            max_members: 0,
            protocol: mpt_model::fanout::ETH_P_IP,
            rcvbuf: None,
        };
        let book = Arc::new(FlowBook::new(cmd.flows));
        let r = Running::start_with(
            &run,
            Arc::new(AtomicBool::new(false)),
            false,
            Some(Arc::clone(&book) as Arc<dyn Observer>),
        )?;
        std::thread::sleep(WARMUP);
        book.armed.store(true, Ordering::Relaxed);
        let (sent0, cpu0) = (
            gen.sent.load(Ordering::Relaxed),
            gen.cpu_us.load(Ordering::Relaxed),
        );
        let a = r.snapshot();
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_secs(u64::from(cmd.seconds)));
        let b = r.snapshot();
        book.armed.store(false, Ordering::Relaxed);
        let secs = t0.elapsed().as_secs_f64();
        let offered = gen.sent.load(Ordering::Relaxed).saturating_sub(sent0) as f64 / secs;
        let gen_cpu = gen.cpu_us.load(Ordering::Relaxed).saturating_sub(cpu0) as f64 / 1e6 / secs;
        r.finish()?;
        let (flows_seen, flows_split, late, seen) = book.result();
        let (sa, sb) = (sum(&a), sum(&b));
        let busy = a
            .iter()
            .zip(&b)
            .filter(|(x, y)| y.packets > x.packets)
            .count() as u32;
        // rollover counters count moves away from each socket
        rows.push(BenchRow {
            mode: label.to_string(),
            processed: (sb.packets - sa.packets) as f64 / secs,
            dropped: (sb.drops.saturating_sub(sa.drops)) as f64 / secs,
            rolled_over: (sb.rollover_all.saturating_sub(sa.rollover_all)) as f64 / secs,
            received: (sb.kernel_packets.saturating_sub(sa.kernel_packets)) as f64 / secs,
            offered,
            generator_cpu: gen_cpu,
            busy_workers: busy,
            flows_seen,
            flows_split,
            split_share: if flows_seen > 0 {
                flows_split as f64 / flows_seen as f64
            } else {
                0.0
            },
            out_of_order: late,
            out_of_order_share: if seen > 0 {
                late as f64 / seen as f64
            } else {
                0.0
            },
        });
    }
    Ok(rows)
}

/// Run the bench.
pub fn run(cmd: &BenchCmd) -> Result<BenchReport, Failure> {
    // it makes two namespaces of its own: root's work, said as such before ip says
    // "mount --make-shared /run/netns failed"
    if !nix::unistd::geteuid().is_root() {
        return Err(Failure::system(
            "bench: needs root (it creates two network namespaces and a veth pair) [EPERM]",
        )
        .hint("run it as root"));
    }
    let base = format!("pfanout-bench-{}", std::process::id());
    let (g, c) = (format!("{base}-gen"), format!("{base}-cap"));
    let abort = Arc::new(AtomicBool::new(false));
    let _signals = crate::cmd::run::stop_on_signals(&abort)?;
    // the two namespaces (with `lo` up), removed when dropped: on every return, and after a
    // signal, which only stops the measurements
    let mut ns = Vec::new();
    for n in [&g, &c] {
        ns.push(Netns::try_named(n).map_err(Failure::system)?);
    }
    setup(&g, &c)?;
    // the generators side by side, before any group listens
    let (packet_pps, packet_cpu) = full_speed(&g, GenKind::Packet)?;
    let (udp_pps, udp_cpu) = full_speed(&g, GenKind::Udp)?;
    let rate = cmd.effective_rate();
    let stop = Arc::new(AtomicBool::new(false));
    let gstats = Arc::new(GenStats::default());
    let started = Instant::now();
    let gen = generator(&g, rate, cmd.flows, Arc::clone(&stop), Arc::clone(&gstats))?;
    let c2 = c.clone();
    let cmd2 = cmd.clone();
    let abort2 = Arc::clone(&abort);
    let g2 = Arc::clone(&gstats);
    let rows = mpt_sys::netns::run_in(&c2, move || measure(&cmd2, &abort2, &g2));
    stop.store(true, Ordering::Relaxed);
    let _ = gen.join();
    let wall = started.elapsed().as_secs_f64();
    let offered = gstats.sent.load(Ordering::Relaxed) as f64 / wall;
    let gen_cpu = gstats.cpu_us.load(Ordering::Relaxed) as f64 / 1e6 / wall;
    let refused = gstats.refused.load(Ordering::Relaxed);
    drop(ns);
    let modes = rows?;
    let goal = 0.9 * f64::from(cmd.workers);
    let by = |l: &str| {
        modes
            .iter()
            .find(|r| r.mode == l)
            .map_or(0.0, |r| r.processed)
    };
    let ratio = |a: &str, b: &str| {
        let r = if by(b) > 0.0 { by(a) / by(b) } else { 0.0 };
        Ratio {
            what: format!("{a} / {b}"),
            ratio: r,
            goal,
            met: r >= goal,
            // with more than one flow, hash alone spreads them: the N× is one flow's
            applies: cmd.flows == 1 || a.starts_with("cpu"),
        }
    };
    let ratios = vec![
        ratio("hash flags rollover", "hash"),
        ratio("rollover", "hash"),
        ratio("cpu flags rollover", "cpu"),
    ];
    let mut generator = generator_report(
        cmd,
        rate,
        offered,
        gen_cpu,
        refused,
        &modes,
        (packet_pps, packet_cpu),
    );
    generator.side_by_side = vec![
        GeneratorRun {
            generator: "AF_PACKET sendmmsg",
            pps: packet_pps,
            cpu_share: packet_cpu,
        },
        GeneratorRun {
            generator: "UDP socket send",
            pps: udp_pps,
            cpu_share: udp_cpu,
        },
    ];
    generator.ratio = if udp_pps > 0.0 {
        packet_pps / udp_pps
    } else {
        0.0
    };
    Ok(BenchReport {
        workers: cmd.workers,
        per_worker: cmd.per_worker,
        rate,
        offered,
        seconds: cmd.seconds,
        flows: cmd.flows,
        modes,
        ratios,
        generator,
    })
}

/// The 1-minute load average (`/proc/loadavg`), as text.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".to_string())
}

/// What the generator offered against what was asked and against 2013, and what held it
/// back.
fn generator_report(
    cmd: &BenchCmd,
    rate: u32,
    offered: f64,
    cpu: f64,
    refused: u64,
    modes: &[BenchRow],
    full_speed: (f64, f64),
) -> GeneratorReport {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let best_processed = modes.iter().map(|r| r.processed).fold(0.0, f64::max);
    let best_offered = modes.iter().map(|r| r.offered).fold(offered, f64::max);
    // what one core of this machine sends: the full-speed run's rate over its CPU share
    let per_core = if full_speed.1 > 0.05 {
        full_speed.0 / full_speed.1
    } else {
        0.0
    };
    let capacity = f64::from(cmd.workers) * f64::from(cmd.per_worker);
    let mut limits = Vec::new();
    if best_offered < 0.95 * f64::from(rate) {
        if cpu >= 0.85 {
            limits.push(format!(
                "the generator's CPU: its one core was {:.0}% busy (it sends, and the receive \
                 path of the veth, the fanout and the sockets' queues run in its softirq)",
                100.0 * cpu
            ));
        } else if refused > 0 {
            limits.push(format!(
                "the device's queue: the kernel refused {refused} sendmmsg calls (ENOBUFS)"
            ));
        } else {
            limits.push(format!(
                "CPU time: the generator got {:.0}% of a core on a machine of {cpus} CPUs \
                 shared with the workers and other work (load average {}); at a whole core it \
                 sends about {per_core:.0} packets/s",
                100.0 * cpu,
                load_average()
            ));
        }
    }
    for m in modes
        .iter()
        .filter(|m| m.offered < 0.95 * f64::from(rate) && best_offered >= 0.95 * f64::from(rate))
    {
        limits.push(format!(
            "CPU time in mode {}: {:.0} packets/s offered ({:.0}% of the rate asked), the \
             generator at {:.0}% of a core while the workers processed {:.0} packets/s, on \
             {cpus} CPUs (load average {})",
            m.mode,
            m.offered,
            100.0 * m.offered / f64::from(rate),
            100.0 * m.generator_cpu,
            m.processed,
            load_average()
        ));
    }
    if best_processed < 0.9 * capacity.min(offered) {
        limits.push(format!(
            "the workers' CPU: {best_processed:.0} packets/s processed at most of {:.0} they \
             may take ({cpus} CPUs for {} workers and the generator)",
            capacity.min(offered),
            cmd.workers
        ));
    }
    GeneratorReport {
        method: "AF_PACKET sendmmsg, 64 frames a call, PACKET_QDISC_BYPASS, one thread on CPU 0",
        asked: rate,
        offered,
        cpu_share: cpu,
        refused_calls: refused,
        seed_workers: SEED_WORKERS,
        seed_per_worker: SEED_PER_WORKER,
        seed_offered: SEED_OFFERED,
        seed_processed: SEED_PROCESSED,
        best_offered,
        per_core,
        offered_vs_seed: best_offered / SEED_OFFERED,
        processed_vs_seed: best_processed / SEED_PROCESSED,
        limits,
        side_by_side: Vec::new(),
        ratio: 0.0,
    }
}

//! `pfanout bench`: the 2013 rollover experiment between two throwaway namespaces. A generator
//! in one sends a single UDP flow over a veth pair; in the other N workers, each limited to a
//! fixed packet rate by a token bucket that sleeps (so that N workers need no N CPUs), read a
//! fanout group bound to the veth. For each mode the processed, dropped and rolled-over
//! packets per second are measured; then the ratio of rollover to no rollover.

use std::net::UdpSocket;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpt_cli::Failure;
use mpt_model::fanout::{Flags, Mode};
use mpt_testkit::Netns;

use crate::cmd::run::Running;
use crate::grammar::{BenchCmd, RunCmd};
use crate::view::{sum, BenchReport, BenchRow, Ratio};

/// Seconds each mode runs before it is measured.
const WARMUP: Duration = Duration::from_millis(1000);
const GEN_DEV: &str = "pfb0";
const CAP_DEV: &str = "pfb1";
const GEN_ADDR: &str = "198.18.0.1";
const CAP_ADDR: &str = "198.18.0.2";

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
        ip(&["-n", ns, "addr", "add", &format!("{addr}/30"), "dev", dev])?;
        ip(&["-n", ns, "link", "set", dev, "up"])?;
    }
    Ok(())
}

/// The generator: one UDP flow at `rate` packets a second, pinned to CPU 0, until `stop`.
fn generator(
    ns: &str,
    rate: u32,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
) -> Result<std::thread::JoinHandle<()>, Failure> {
    let ns = ns.to_string();
    let (tx, rx) = std::sync::mpsc::channel::<Result<(), String>>();
    let h = std::thread::spawn(move || {
        let ready = (|| -> Result<UdpSocket, String> {
            mpt_sys::netns::enter(&ns).map_err(|e| e.to_string())?;
            let mut set = nix::sched::CpuSet::new();
            let _ = set.set(0);
            let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
            let s =
                UdpSocket::bind((GEN_ADDR, 40000)).map_err(|e| format!("generator socket: {e}"))?;
            s.connect((CAP_ADDR, 9))
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
        let payload = [0x5au8; 64];
        let start = Instant::now();
        let mut n: u64 = 0;
        while !stop.load(Ordering::Relaxed) {
            let due = (start.elapsed().as_secs_f64() * f64::from(rate)) as u64;
            if n >= due {
                std::thread::sleep(Duration::from_micros(200));
                continue;
            }
            for _ in 0..(due - n).min(256) {
                // a refused send (ICMP port unreachable coming back) is part of the load
                let _ = s.send(&payload);
                n += 1;
            }
            sent.store(n, Ordering::Relaxed);
        }
    });
    match rx.recv() {
        Ok(Ok(())) => Ok(h),
        Ok(Err(e)) => Err(Failure::system(e)),
        Err(_) => Err(Failure::system("the generator did not start")),
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

fn measure(cmd: &BenchCmd, abort: &Arc<AtomicBool>) -> Result<Vec<BenchRow>, Failure> {
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
        let r = Running::start(&run, Arc::new(AtomicBool::new(false)))?;
        std::thread::sleep(WARMUP);
        let a = r.snapshot();
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_secs(u64::from(cmd.seconds)));
        let b = r.snapshot();
        let secs = t0.elapsed().as_secs_f64();
        r.finish()?;
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
            busy_workers: busy,
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
    let rate = cmd.effective_rate();
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let gen = generator(&g, rate, Arc::clone(&stop), Arc::clone(&sent))?;
    let c2 = c.clone();
    let cmd2 = cmd.clone();
    let abort2 = Arc::clone(&abort);
    let rows = mpt_sys::netns::run_in(&c2, move || measure(&cmd2, &abort2));
    stop.store(true, Ordering::Relaxed);
    let _ = gen.join();
    let offered = sent.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
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
        }
    };
    let ratios = vec![
        ratio("hash flags rollover", "hash"),
        ratio("rollover", "hash"),
        ratio("cpu flags rollover", "cpu"),
    ];
    Ok(BenchReport {
        workers: cmd.workers,
        per_worker: cmd.per_worker,
        rate,
        offered,
        seconds: cmd.seconds,
        modes,
        ratios,
    })
}

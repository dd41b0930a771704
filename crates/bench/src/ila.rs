//! `cargo xtask bench ila`: request/response transactions between two namespaces, translated
//! through ila's BPF translator against the same topology addressed directly, interleaved
//! run by run.
//!
//! ```text
//!   A  va 2001:db8:a::1 ------- vb 2001:db8:a::2   B
//!      ila route SIR_B loc LOC_B  ILA_B on vb, SIR_B on lo, ila xlat LOC_B -> SIR
//! ```
//!
//! Cases, every run of each in turn:
//! - `translated`: connections to SIR_B (A's egress program rewrites to ILA_B, B's ingress
//!   program back to SIR_B before the stack, so early demux finds the socket);
//! - `direct`: connections to B's own address 2001:db8:a::2, the programs attached and
//!   matching nothing (their lookups still run);
//! - `empty tc programs`: the calibration: the same with programs that return at once in
//!   the translator's places (what any tc program there costs: the tcx hooks);
//! - `no programs`: the same with nothing attached (the kernel alone; the reference of the
//!   goal).
//!
//! The translator is where a sender and a receiver of ILA need it: A's egress program (the
//! output route) and B's ingress program (the mapping); `--both-sides` attaches both programs
//! on both devices (what `ila dataplane attach dev DEV` does without `ingress` or `egress`).
//!
//! Each run: `streams` TCP connections, each a client thread on A and a server thread on B
//! exchanging a 64-byte request and a 64-byte response back to back for `seconds`; a
//! transaction's latency is the client's send-to-receive time. Reported: transactions per
//! second (all streams), p50 and p99 latency, and the ratio translated / no programs (goal
//! >= 0.98).

use std::io::{Read, Write};
use std::net::{Ipv6Addr, SocketAddrV6, TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use mpt_testkit::Netns;

use crate::support::{self, median, met};

const A_ADDR: &str = "2001:db8:a::1";
const B_ADDR: &str = "2001:db8:a::2";
const LOC_B: &str = "2001:db8:ff:1";
const SIR_NET: &str = "2001:db8:1:2";
const ILA_B: &str = "2001:db8:ff:1:2000::b";
const SIR_B: &str = "2001:db8:1:2:2000::b";
/// Request and response size.
const MSG: usize = 64;
/// The goal: translated / no programs.
const GOAL: f64 = 0.98;

/// Options of `bench ila`.
#[derive(Debug, Clone)]
pub struct Opts {
    /// Seconds per run and case.
    pub seconds: u32,
    /// Runs per case.
    pub runs: u32,
    /// Concurrent connections.
    pub streams: u32,
    /// The checksum mode of both tables.
    pub csum_mode: String,
    /// B's ingress hook (`auto`, `xdp`, `xdp-generic`, `tc`).
    pub hook: String,
    /// Attach both programs on both devices.
    pub both_sides: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Translated,
    Direct,
    Empty,
    NoPrograms,
}

impl Case {
    const ALL: [Case; 4] = [
        Case::Translated,
        Case::Direct,
        Case::Empty,
        Case::NoPrograms,
    ];
    fn name(self) -> &'static str {
        match self {
            Case::Translated => "translated (SIR, through ILA)",
            Case::Direct => "direct (programs attached)",
            Case::Empty => "empty tc programs (calibration)",
            Case::NoPrograms => "no programs",
        }
    }
}

/// The calibration programs on a device of a namespace (`on`), or none of them.
fn empty_programs(
    ns: &Netns,
    dev: &'static str,
    ingress: bool,
    egress: bool,
    on: bool,
) -> Result<()> {
    use mpt_bpf::attach::{self, TcxDir};
    use mpt_bpf::skel::bench::tc_pass::TcPassSkelBuilder;
    ns.spawn_in(move || -> Result<()> {
        use libbpf_rs::skel::{OpenSkel, SkelBuilder};
        use std::os::fd::AsFd;
        let i = mpt_sys::iface::index(dev)?;
        for (name, dir) in [
            ("mpt_bench_tc_in", TcxDir::Ingress),
            ("mpt_bench_tc_out", TcxDir::Egress),
        ] {
            for id in attach::named(&attach::tcx_query(i, dir)?, name) {
                attach::tcx_detach(i, id, dir)?;
            }
        }
        if !on {
            return Ok(());
        }
        let mut obj = std::mem::MaybeUninit::uninit();
        let skel = TcPassSkelBuilder::default().open(&mut obj)?.load()?;
        if ingress {
            attach::tcx_attach(
                i,
                skel.progs.mpt_bench_tc_in.as_fd(),
                TcxDir::Ingress,
                "attach the calibration (ingress)",
            )?;
        }
        if egress {
            attach::tcx_attach(
                i,
                skel.progs.mpt_bench_tc_out.as_fd(),
                TcxDir::Egress,
                "attach the calibration (egress)",
            )?;
        }
        Ok(())
    })
    .join()
    .map_err(|_| anyhow!("panicked"))?
}

/// One run's figures.
#[derive(Debug, Clone, Copy)]
struct Figures {
    tps: f64,
    p50_us: f64,
    p99_us: f64,
}

fn ip(ns: &Netns, args: &str) -> Result<()> {
    let a: Vec<&str> = args.split_whitespace().collect();
    ns.try_ip(&a).map(|_| ()).map_err(|e| anyhow!(e))
}

fn ila(bin: &std::path::Path, ns: &Netns, args: &[&str]) -> Result<()> {
    let mut a = vec!["-n", ns.name()];
    a.extend_from_slice(args);
    support::output(Command::new(bin).args(&a))
        .map(|_| ())
        .with_context(|| format!("ila {}", args.join(" ")))
}

/// Latency histogram: 1 µs buckets up to 100 ms.
struct Histogram(Vec<u64>);

impl Histogram {
    fn new() -> Histogram {
        Histogram(vec![0; 100_001])
    }
    fn add(&mut self, d: Duration) {
        let us = usize::try_from(d.as_micros())
            .unwrap_or(usize::MAX)
            .min(100_000);
        self.0[us] += 1;
    }
    fn merge(&mut self, o: &Histogram) {
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            *a += b;
        }
    }
    fn total(&self) -> u64 {
        self.0.iter().sum()
    }
    /// The `q` quantile in µs (the bucket's middle).
    fn quantile(&self, q: f64) -> f64 {
        let n = self.total();
        let want = ((n as f64) * q).ceil() as u64;
        let mut seen = 0;
        for (us, c) in self.0.iter().enumerate() {
            seen += c;
            if seen >= want.max(1) {
                return us as f64 + 0.5;
            }
        }
        f64::NAN
    }
}

/// Keep the calling thread on one CPU (a stream's client and server share one, so that a
/// transaction is one CPU's work: less noise from where the scheduler puts them).
fn pin(cpu: usize) {
    let mut set = nix::sched::CpuSet::new();
    if set.set(cpu).is_ok() {
        let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
    }
}

/// One run: `streams` connections to `to`, for `seconds`.
fn run_once(
    a: &Netns,
    b: &Netns,
    to: Ipv6Addr,
    bind: Ipv6Addr,
    port: u16,
    o: &Opts,
) -> Result<Figures> {
    let addr = SocketAddrV6::new(bind, port, 0, 0);
    let listener = b
        .spawn_in(move || TcpListener::bind(addr))
        .join()
        .map_err(|_| anyhow!("bind panicked"))??;
    let streams = o.streams as usize;
    let server = std::thread::spawn(move || -> Result<()> {
        let mut handles = Vec::new();
        for _ in 0..streams {
            let (mut c, _) = listener.accept()?;
            c.set_nodelay(true)?;
            handles.push(std::thread::spawn(move || {
                let mut buf = [0u8; MSG];
                // the first request names the client's CPU: serve it from the same one
                if c.read_exact(&mut buf).is_err() {
                    return;
                }
                pin(usize::from(buf[0]));
                if c.write_all(&buf).is_err() {
                    return;
                }
                while c.read_exact(&mut buf).is_ok() {
                    if c.write_all(&buf).is_err() {
                        break;
                    }
                }
            }));
        }
        for h in handles {
            let _ = h.join();
        }
        Ok(())
    });
    let stop = Arc::new(AtomicBool::new(false));
    let go = Arc::new(std::sync::Barrier::new(streams + 1));
    let mut clients = Vec::new();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    for k in 0..streams {
        let (stop, go) = (Arc::clone(&stop), Arc::clone(&go));
        let cpu = k % cpus;
        clients.push(a.spawn_in(move || -> Result<Histogram> {
            pin(cpu);
            let mut s = TcpStream::connect_timeout(
                &SocketAddrV6::new(to, port, 0, 0).into(),
                Duration::from_secs(5),
            )
            .with_context(|| format!("connect to [{to}]:{port}"))?;
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(Duration::from_secs(5)))?;
            let mut h = Histogram::new();
            let mut req = [0x5au8; MSG];
            let mut resp = [0u8; MSG];
            req[0] = u8::try_from(cpu).unwrap_or(0);
            s.write_all(&req)?;
            s.read_exact(&mut resp)?;
            go.wait();
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                s.write_all(&req)?;
                s.read_exact(&mut resp)?;
                h.add(t.elapsed());
            }
            Ok(h)
        }));
    }
    go.wait();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(u64::from(o.seconds)));
    stop.store(true, Ordering::Relaxed);
    let mut all = Histogram::new();
    for c in clients {
        let h = c.join().map_err(|_| anyhow!("client panicked"))??;
        all.merge(&h);
    }
    let secs = t0.elapsed().as_secs_f64();
    server.join().map_err(|_| anyhow!("server panicked"))??;
    Ok(Figures {
        tps: all.total() as f64 / secs,
        p50_us: all.quantile(0.5),
        p99_us: all.quantile(0.99),
    })
}

/// Run the benchmark; `Ok(false)` when the goal is missed.
pub fn run(o: &Opts) -> Result<bool> {
    support::require_root("bench ila")?;
    support::sweep_stale();
    let bin = support::tool("ila")?;
    let a = support::netns("ila-a")?;
    let b = support::netns("ila-b")?;
    mpt_testkit::veth(&a, "va", &b, "vb");
    ip(&a, &format!("addr add {A_ADDR}/64 dev va nodad"))?;
    ip(&b, &format!("addr add {B_ADDR}/64 dev vb nodad"))?;
    ip(&b, &format!("addr add {ILA_B}/64 dev vb nodad"))?;
    ip(&b, &format!("addr add {SIR_B}/128 dev lo"))?;
    ip(&a, &format!("route add {LOC_B}::/64 via {B_ADDR}"))?;
    ila(
        &bin,
        &a,
        &[
            "route",
            "add",
            SIR_B,
            "loc",
            LOC_B,
            "csum-mode",
            &o.csum_mode,
        ],
    )?;
    ila(
        &bin,
        &b,
        &[
            "xlat",
            "add",
            "loc_match",
            LOC_B,
            "loc",
            SIR_NET,
            "csum-mode",
            &o.csum_mode,
        ],
    )?;
    // where the programs go: A sends (egress), B receives (ingress), or both everywhere
    let (a_side, b_side): (&[&str], &[&str]) = if o.both_sides {
        (&[], &[])
    } else {
        (&["egress"], &["ingress"])
    };
    let attach = |on: bool| -> Result<()> {
        if on {
            let mut args = vec!["dataplane", "attach", "dev", "va"];
            args.extend_from_slice(a_side);
            ila(&bin, &a, &args)?;
            let mut args = vec!["dataplane", "attach", "dev", "vb"];
            if b_side.is_empty() || b_side[0] == "ingress" {
                args.push(&o.hook);
            }
            args.extend_from_slice(b_side);
            ila(&bin, &b, &args)
        } else {
            ila(&bin, &a, &["dataplane", "detach", "dev", "va"])?;
            ila(&bin, &b, &["dataplane", "detach", "dev", "vb"])
        }
    };
    let calibration = |on: bool| -> Result<()> {
        empty_programs(&a, "va", o.both_sides, true, on)?;
        empty_programs(&b, "vb", true, o.both_sides, on)
    };
    println!(
        "bench: ila, {} streams of {MSG}-byte requests and responses, {} s per run, {} runs per case, csum-mode {}, B ingress {}",
        o.streams, o.seconds, o.runs, o.csum_mode, o.hook
    );
    let sir: Ipv6Addr = SIR_B.parse()?;
    let direct: Ipv6Addr = B_ADDR.parse()?;
    // warm the neighbours and the connection paths
    attach(true)?;
    run_once(
        &a,
        &b,
        sir,
        sir,
        6999,
        &Opts {
            seconds: 1,
            ..o.clone()
        },
    )?;
    let mut figures: Vec<(Case, Vec<Figures>)> =
        Case::ALL.iter().map(|c| (*c, Vec::new())).collect();
    let mut port = 7000;
    for run in 1..=o.runs {
        // each round starts one case later: no case always follows the same one
        let n = figures.len();
        for k in 0..n {
            let (case, v) = &mut figures[(k + run as usize) % n];
            attach(matches!(case, Case::Translated | Case::Direct))?;
            calibration(*case == Case::Empty)?;
            let (to, bind) = match case {
                Case::Translated => (sir, sir),
                Case::Direct | Case::Empty | Case::NoPrograms => (direct, direct),
            };
            port += 1;
            let f = run_once(&a, &b, to, bind, port, o)?;
            println!(
                "bench: {:<32} run {run}: {:>9.0} transactions/s, p50 {:>6.1} µs, p99 {:>6.1} µs",
                case.name(),
                f.tps,
                f.p50_us,
                f.p99_us
            );
            v.push(f);
        }
    }
    // the translation must have happened: B's mapping counted the translated runs' packets
    let out =
        support::output(Command::new(&bin).args(["-n", b.name(), "-j", "-s", "xlat", "show"]))?;
    let v: serde_json::Value = serde_json::from_str(&out)?;
    let translated = v[0]["packets"].as_u64().unwrap_or(0);
    if translated == 0 {
        bail!("B's mapping translated nothing: the benchmark measured no translation");
    }
    println!();
    println!(
        "{:<32} {:>14} {:>10} {:>10}",
        "case", "median tps", "p50 µs", "p99 µs"
    );
    let med = |v: &[Figures], f: fn(&Figures) -> f64| median(&v.iter().map(f).collect::<Vec<_>>());
    for (case, v) in &figures {
        println!(
            "{:<32} {:>14.0} {:>10.1} {:>10.1}   (tps {})",
            case.name(),
            med(v, |f| f.tps),
            med(v, |f| f.p50_us),
            med(v, |f| f.p99_us),
            support::spread(&v.iter().map(|f| f.tps).collect::<Vec<_>>(), 0)
        );
    }
    let tps = |c: Case| {
        figures
            .iter()
            .find(|(k, _)| *k == c)
            .map_or(f64::NAN, |(_, v)| med(v, |f| f.tps))
    };
    // Ratios round by round (the runs of one round are next to each other in time, so a
    // slow stretch of the machine hits both sides of a ratio), then their median and
    // quartiles: the figure the goal is judged on.
    let paired = |x: Case, y: Case| -> Vec<f64> {
        let (fx, fy) = (&figures[x as usize].1, &figures[y as usize].1);
        fx.iter().zip(fy).map(|(a, b)| a.tps / b.tps).collect()
    };
    let quart = |v: &[f64]| -> String {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        let q = |p: f64| s[((s.len() - 1) as f64 * p).round() as usize];
        format!("quartiles {:.3}–{:.3}", q(0.25), q(0.75))
    };
    let r_none = paired(Case::Translated, Case::NoPrograms);
    let ratio = median(&r_none);
    println!(
        "ratio translated / no programs = {ratio:.3} (median of {} rounds, {}; medians of the rates {:.3}; goal >= {GOAL}: {})",
        r_none.len(),
        quart(&r_none),
        tps(Case::Translated) / tps(Case::NoPrograms),
        met(ratio >= GOAL)
    );
    let r_direct = paired(Case::Translated, Case::Direct);
    println!(
        "ratio translated / direct with the programs attached = {:.3} ({})",
        median(&r_direct),
        quart(&r_direct)
    );
    let r_calib = paired(Case::Empty, Case::NoPrograms);
    let r_over = paired(Case::Translated, Case::Empty);
    println!(
        "calibration: empty tc programs / no programs = {:.3} ({}); translated / empty tc programs = {:.3} ({})",
        median(&r_calib),
        quart(&r_calib),
        median(&r_over),
        quart(&r_over)
    );
    println!("(B's mapping translated {translated} packets)");
    attach(true)?;
    let tx_ns = profile(&a, &b, sir, port + 1, o)?;
    test_run_costs(&b, tx_ns)?;
    Ok(ratio >= GOAL)
}

/// What each program costs a packet, by BPF_PROG_TEST_RUN (no statistics' clock reads):
/// the translator's programs on a packet they translate and one they do not, beside the
/// calibration program that returns at once; and the share of a transaction's CPU time the
/// translation's two runs (one egress, one ingress) take beyond the calibration's.
fn test_run_costs(b: &Netns, tx_ns: f64) -> Result<()> {
    let rows = b
        .spawn_in(|| -> Result<Vec<(&'static str, f64)>> {
            use libbpf_rs::skel::{OpenSkel, SkelBuilder};
            use libbpf_rs::{MapCore, MapFlags, ProgramInput};
            use mpt_bpf::ila::abi::{
                self as abi, IlaRouteKey, IlaRouteVal, IlaXlatKey, IlaXlatVal,
            };
            use mpt_model::ila::{CsumMode, HookType, IdentType, Mapping, RouteSpec};
            use mpt_testkit::packet::{tcp, Ip6};
            use mpt_testkit::progrun::skb_ctx;
            let ifindex = mpt_sys::iface::index("vb")?;
            let mut obj = std::mem::MaybeUninit::uninit();
            let skel = mpt_bpf::skel::ila::ila::IlaSkelBuilder::default()
                .open(&mut obj)?
                .load()?;
            let mut cobj = std::mem::MaybeUninit::uninit();
            let cal = mpt_bpf::skel::bench::tc_pass::TcPassSkelBuilder::default()
                .open(&mut cobj)?
                .load()?;
            // a locator translated to itself, so that every repeat of a run translates again
            let l = |s: &str| -> Result<mpt_model::ila::Locator> {
                s.parse().map_err(|e| anyhow!("{e}"))
            };
            let m = Mapping {
                locator_match: l(LOC_B)?,
                locator: l(LOC_B)?,
                ifindex: 0,
                csum_mode: CsumMode::AdjustTransport,
                ident_type: IdentType::UseFormat,
            };
            let r = RouteSpec {
                dst: format!("{SIR_B}/128").parse()?,
                locator: l(SIR_NET)?,
                csum_mode: CsumMode::AdjustTransport,
                ident_type: IdentType::UseFormat,
                hook_type: HookType::Output,
            };
            let maps = &skel.maps;
            let meta = abi::IlaMeta {
                abi_version: abi::ABI_VERSION,
                flags: abi::META_F_OUTPUT_ROUTES,
                netns_cookie: 0,
            };
            maps.ila_meta
                .update(&0u32.to_ne_bytes(), meta.as_bytes(), MapFlags::ANY)?;
            // counting in slots 1 and 2, as the tool's first entries do
            let mut mv = IlaXlatVal::of(&m);
            mv.stats_slot = 1;
            let mut rv = IlaRouteVal::of(&r);
            rv.stats_slot = 2;
            maps.ila_xlat_in
                .update(IlaXlatKey::of(&m).as_bytes(), mv.as_bytes(), MapFlags::ANY)?;
            maps.ila_routes.update(
                IlaRouteKey::of(r.dst).as_bytes(),
                rv.as_bytes(),
                MapFlags::ANY,
            )?;
            let frame = |dst: &str| {
                Ip6::new(
                    A_ADDR,
                    dst,
                    mpt_testkit::packet::IPPROTO_TCP,
                    tcp(40000, 7000),
                )
                .frame()
            };
            let (to_ila, to_sir, other) = (frame(ILA_B), frame(SIR_B), frame("2001:db8:99::1"));
            let progs = &skel.progs;
            let cases: [(&'static str, &libbpf_rs::ProgramMut<'_>, &[u8]); 5] = [
                ("ila_out_tc, translated", &progs.ila_out_tc, &to_sir),
                ("ila_out_tc, not", &progs.ila_out_tc, &other),
                ("ila_in_tc, translated", &progs.ila_in_tc, &to_ila),
                ("ila_in_tc, not", &progs.ila_in_tc, &other),
                (
                    "calibration (returns at once)",
                    &cal.progs.mpt_bench_tc_in,
                    &other,
                ),
            ];
            let mut out = Vec::new();
            for (what, prog, f) in cases {
                let mut best = f64::INFINITY;
                for _ in 0..5 {
                    let mut c = skb_ctx(ifindex, None);
                    let mut buf = vec![0u8; 2048];
                    let res = prog.test_run(ProgramInput {
                        context_in: Some(&mut c),
                        data_in: Some(f),
                        data_out: Some(&mut buf),
                        repeat: 1_000_000,
                        ..Default::default()
                    })?;
                    best = best.min(res.duration.as_nanos() as f64);
                }
                out.push((what, best));
            }
            Ok(out)
        })
        .join()
        .map_err(|_| anyhow!("panicked"))??;
    println!();
    println!("program cost per packet (BPF_PROG_TEST_RUN, 1,000,000 repeats, best of 5):");
    for (what, ns) in &rows {
        println!("  {what:<32} {ns:>6.0} ns");
    }
    let get = |w: &str| {
        rows.iter()
            .find(|(k, _)| *k == w)
            .map_or(f64::NAN, |(_, v)| *v)
    };
    let cal = get("calibration (returns at once)");
    let work = get("ila_out_tc, translated") + get("ila_in_tc, translated") - 2.0 * cal;
    println!(
        "  the translation's work beyond the calibration: {work:.0} ns per transaction = {:.2} % of a transaction's {tx_ns:.0} ns CPU",
        100.0 * work / tx_ns
    );
    Ok(())
}

/// The programs' own time per transaction (one more translated run with the kernel's BPF
/// run-time statistics on, which cost two clock reads per run), against the CPU time a
/// transaction takes: the limit the translation's cost is measured against.
fn profile(a: &Netns, b: &Netns, sir: Ipv6Addr, port: u16, o: &Opts) -> Result<f64> {
    let progs = |ns: &Netns, dev: &'static str| -> Result<Vec<u32>> {
        ns.spawn_in(move || -> Result<Vec<u32>> {
            let i = mpt_sys::iface::index(dev)?;
            let at = mpt_bpf::attach::ours_on(i, &mpt_bpf::ila::dataplane::PROGRAMS)?;
            Ok(at.iter().map(|f| f.prog_id).collect())
        })
        .join()
        .map_err(|_| anyhow!("panicked"))?
    };
    let mut hosts: Vec<&str> = Vec::new();
    let mut ids = progs(a, "va")?;
    hosts.extend(ids.iter().map(|_| "A va"));
    let more = progs(b, "vb")?;
    hosts.extend(more.iter().map(|_| "B vb"));
    ids.extend(more);
    let read = |ids: &[u32]| -> Result<Vec<(String, u64, u64)>> {
        ids.iter()
            .map(|id| {
                let i = mpt_bpf::prog::info(*id)?;
                Ok((i.name, i.run_time_ns, i.run_cnt))
            })
            .collect()
    };
    let stats = mpt_bpf::prog::enable_run_time_stats()?;
    let before = read(&ids)?;
    let f = run_once(a, b, sir, sir, port, o)?;
    let after = read(&ids)?;
    drop(stats);
    let tx = f.tps * f64::from(o.seconds);
    let mut total_ns = 0u64;
    println!();
    println!(
        "profile (one translated run, BPF statistics on: {:.0} transactions/s):",
        f.tps
    );
    for (i, ((name, ns0, n0), (_, ns1, n1))) in before.iter().zip(&after).enumerate() {
        let (ns, n) = (ns1 - ns0, n1 - n0);
        total_ns += ns;
        let host = hosts.get(i).copied().unwrap_or("?");
        println!(
            "  {host} {name:<12} {:>10} runs {:>7.1} ns/run {:>7.1} runs/transaction",
            n,
            ns as f64 / n.max(1) as f64,
            n as f64 / tx
        );
    }
    let per_tx = total_ns as f64 / tx;
    // the CPU time of a transaction: two CPUs kept busy by the streams
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let budget_ns = cpus * 1e9 / f.tps;
    println!(
        "  programs: {per_tx:.0} ns per transaction of at most {budget_ns:.0} ns CPU ({cpus} CPUs / transactions/s): {:.2} %",
        100.0 * per_tx / budget_ns
    );
    Ok(budget_ns)
}

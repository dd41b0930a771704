//! `cargo xtask bench routes`: install N two-nexthop IPv4 routes into an empty table with
//! `ip -batch`, `mproute -b` and `mproute --nexthop-objects -b`, interleaved, two ways:
//!
//! - in one namespace, the table emptied (untimed) after every run, so the first use of the
//!   namespace's state is counted once, as an operator's first batch pays it; beside them two
//!   calibration runs: the same RTM_NEWROUTE requests (RTA_MULTIPATH, then RTA_NH_ID) sent
//!   pipelined by this program with nothing else done: the kernel's own share of an install,
//!   the limit a tool that also keeps a dataplane can approach;
//! - each run in a fresh namespace (state created, anchor loaded, inside the timing).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};

use mpt_model::{Nexthop, RouteKey, Verb};
use mpt_netlink::msg::rtnl::route::{self as rmsg, PathForm, RouteRequest};
use mpt_netlink::sock::Socket;
use mpt_testkit::cmd::show;
use mpt_testkit::Netns;

use crate::support::{self, median};

pub(crate) const NEXTHOPS: &str = "nexthop via 10.1.0.2 dev va nexthop via 10.2.0.2 dev vb";

/// The i-th /24: 11.0.0.0/24, 11.0.1.0/24, ... (continuing into 12.0.0.0/8 after 65536).
pub(crate) fn prefix(i: u32) -> String {
    format!("{}.{}.{}.0/24", 11 + i / 65536, i / 256 % 256, i % 256)
}

/// Route `i`'s own nexthop set (`--distinct`): the two paths with weights no other route of
/// the first 65,536 has, so that no two routes share a group.
fn distinct_nexthops(i: u32) -> String {
    let mut nh = format!(
        "nexthop via 10.1.0.2 dev va weight {} nexthop via 10.2.0.2 dev vb weight {}",
        1 + i % 256,
        1 + i / 256 % 256
    );
    // past the 65,536 weight pairs, a third nexthop with its own weight
    if i >= 65_536 {
        let _ = write!(nh, " nexthop via 10.2.0.3 dev vb weight {}", i / 65_536);
    }
    nh
}

/// The kernel nexthop objects the nhid calibration run uses (untimed set-up).
const FLOOR_NH: [&str; 3] = [
    "nexthop add id 901 via 10.1.0.2 dev va",
    "nexthop add id 902 via 10.2.0.2 dev vb",
    "nexthop add id 903 group 901/902",
];
const FLOOR_GROUP: u32 = 903;

/// Batch files that live in a temporary directory, removed on drop.
#[derive(Debug)]
struct BatchFiles {
    dir: PathBuf,
    /// How many nexthops the last route has (`--distinct` past 65,536 routes: three).
    last_paths: usize,
    mproute: PathBuf,
    ip: PathBuf,
}

impl BatchFiles {
    fn write(count: u32, distinct: bool) -> Result<Self> {
        ensure!(
            count <= 245 * 65536,
            "--count too large (max {})",
            245 * 65536
        );
        let dir = std::env::temp_dir().join(format!("xtask-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        let files = BatchFiles {
            last_paths: if distinct && count > 65_536 { 3 } else { 2 },
            mproute: dir.join("mproute.batch"),
            ip: dir.join("ip.batch"),
            dir,
        };
        let mut m = String::new();
        let mut ip = String::new();
        for i in 0..count {
            let p = prefix(i);
            let nh = if distinct {
                distinct_nexthops(i)
            } else {
                NEXTHOPS.to_string()
            };
            // writeln! into a String cannot fail.
            let _ = writeln!(m, "add {p} {nh}");
            // iproute2 takes everything after the first "nexthop" as nexthops, so the
            // protocol (mproute's 245, for a like-for-like comparison) goes before them.
            let _ = writeln!(ip, "route add {p} proto 245 {nh}");
        }
        std::fs::write(&files.mproute, m)
            .with_context(|| format!("write {}", files.mproute.display()))?;
        std::fs::write(&files.ip, ip).with_context(|| format!("write {}", files.ip.display()))?;
        Ok(files)
    }
}

impl Drop for BatchFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A fresh namespace with lo, va/va2 and vb/vb2 up, 10.1.0.1/24 on va and 10.2.0.1/24 on vb.
pub(crate) fn fresh_ns(run: usize) -> Result<Netns> {
    let ns = support::netns(&run.to_string())?;
    let n = ns.name();
    for (dev, peer, addr) in [("va", "va2", "10.1.0.1/24"), ("vb", "vb2", "10.2.0.1/24")] {
        support::ip([
            "-n", n, "link", "add", dev, "type", "veth", "peer", "name", peer,
        ])?;
        support::ip(["-n", n, "addr", "add", addr, "dev", dev])?;
        support::ip(["-n", n, "link", "set", dev, "up"])?;
        support::ip(["-n", n, "link", "set", peer, "up"])?;
    }
    Ok(ns)
}

/// Number of IPv4 routes in the main table of `ns`.
pub(crate) fn route_count(ns: &str) -> Result<usize> {
    let out = support::ip(["-n", ns, "-j", "-4", "route", "show"])?;
    let v: serde_json::Value =
        serde_json::from_str(&out).context("ip -j route show: output is not JSON")?;
    v.as_array()
        .map(Vec::len)
        .context("ip -j route show: not a JSON array")
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Tool {
    IpBatch,
    Mproute,
    MprouteNh,
    /// Calibration: RTA_MULTIPATH requests pipelined by this program, nothing else.
    FloorMultipath,
    /// Calibration: RTA_NH_ID requests (one group object) pipelined by this program.
    FloorObject,
    /// Calibration: as `FloorObject`, each window's routes also written, before it is sent,
    /// into a hash map and an LPM trie shaped as mproute's state and dataplane tries, with
    /// one BPF_MAP_UPDATE_BATCH per map and window: the least a tool that keeps a dataplane
    /// entry per route can add to the kernel's share.
    FloorObjectMaps,
}

impl Tool {
    fn label(self) -> &'static str {
        match self {
            Tool::IpBatch => "ip -batch",
            Tool::Mproute => "mproute -b",
            Tool::MprouteNh => "mproute -b --nexthop-objects",
            Tool::FloorMultipath => "kernel floor, multipath",
            Tool::FloorObject => "kernel floor, nhid",
            Tool::FloorObjectMaps => "kernel floor, nhid + 2 map writes",
        }
    }
}

/// Number of kernel nexthop objects in `ns`.
fn nexthop_count(ns: &str) -> Result<usize> {
    let out = support::ip(["-n", ns, "-j", "nexthop", "show"])?;
    let v: serde_json::Value =
        serde_json::from_str(&out).context("ip -j nexthop show: output is not JSON")?;
    v.as_array()
        .map(Vec::len)
        .context("ip -j nexthop show: not a JSON array")
}

/// Standalone maps of the sizes and types of mproute's `mpt_routes` (hash) and `mpt_lpm4`
/// (LPM trie), and their keys and values for route `i` (distinct, well formed).
struct FloorMaps {
    state: libbpf_rs::MapHandle,
    lpm: libbpf_rs::MapHandle,
}

impl FloorMaps {
    fn create() -> Result<FloorMaps> {
        use mpt_bpf::mproute::abi::{MptDpRoute, MptLpm4Key, MptRouteKey, MptRouteVal};
        let opts = libbpf_rs::libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_create_opts>() as _,
            map_flags: libbpf_rs::libbpf_sys::BPF_F_NO_PREALLOC,
            ..Default::default()
        };
        let make = |ty, name: &str, k: usize, v: usize, max: u32| {
            libbpf_rs::MapHandle::create(ty, Some(name), k as u32, v as u32, max, &opts)
                .with_context(|| format!("create the calibration map {name}"))
        };
        Ok(FloorMaps {
            state: make(
                libbpf_rs::MapType::Hash,
                "bench_state",
                MptRouteKey::SIZE,
                MptRouteVal::SIZE,
                mpt_bpf::mproute::abi::MAX_ROUTES,
            )?,
            lpm: make(
                libbpf_rs::MapType::LpmTrie,
                "bench_lpm4",
                MptLpm4Key::SIZE,
                MptDpRoute::SIZE,
                mpt_bpf::mproute::abi::MAX_DP_ROUTES,
            )?,
        })
    }

    /// Write routes `range` (one batch per map).
    fn write(&self, range: std::ops::Range<u32>) -> Result<()> {
        use libbpf_rs::{MapCore, MapFlags};
        use mpt_bpf::mproute::abi::{MptDpRoute, MptLpm4Key, MptRouteKey, MptRouteVal};
        let n = range.len() as u32;
        let (mut sk, mut sv, mut lk, mut lv) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for i in range {
            // route i's key, as mproute writes it for prefix(i)
            let addr = [
                11 + (i / 65536) as u8,
                (i / 256 % 256) as u8,
                (i % 256) as u8,
                0,
            ];
            let mut dst_be = [0u8; 16];
            dst_be[..4].copy_from_slice(&addr);
            let id = MptRouteKey {
                family: 2, // AF_INET
                dst_len: 24,
                reserved: 0,
                table: 254,
                metric: 0,
                dst_be,
            };
            sk.extend_from_slice(id.as_bytes());
            sv.extend_from_slice(MptRouteVal::default().as_bytes());
            let k = MptLpm4Key {
                prefixlen: 32 + 24,
                table_be: 254u32.to_be_bytes(),
                addr,
            };
            lk.extend_from_slice(k.as_bytes());
            let v = MptDpRoute {
                id,
                ..MptDpRoute::default()
            };
            lv.extend_from_slice(v.as_bytes());
        }
        self.state
            .update_batch(&sk, &sv, n, MapFlags::ANY, MapFlags::ANY)
            .context("calibration: state batch")?;
        self.lpm
            .update_batch(&lk, &lv, n, MapFlags::ANY, MapFlags::ANY)
            .context("calibration: LPM batch")?;
        Ok(())
    }
}

/// The calibration: `count` route adds encoded before the clock starts, then sent with
/// mpt-netlink's pipeline in windows of 256, as mproute sends them, from a thread inside `ns`; with
/// `maps`, each window of 256 written to standalone maps first (see [`Tool::FloorObjectMaps`]).
fn floor_run(ns: &str, count: u32, object: bool, maps: bool) -> Result<f64> {
    let ns_name = ns.to_string();
    mpt_sys::netns::run_in(&ns_name, move || -> Result<f64> {
        let idx = |d: &str| mpt_sys::iface::index(d);
        let nexthops = [
            Nexthop {
                gateway: Some("10.1.0.2".parse()?),
                ifindex: idx("va")?,
                weight: 1,
                flags: 0,
            },
            Nexthop {
                gateway: Some("10.2.0.2".parse()?),
                ifindex: idx("vb")?,
                weight: 1,
                flags: 0,
            },
        ];
        let form = if object {
            PathForm::Object(FLOOR_GROUP)
        } else {
            PathForm::Multipath
        };
        let mut reqs = Vec::with_capacity(count as usize);
        for i in 0..count {
            let key = RouteKey {
                dst: prefix(i).parse()?,
                table: mpt_model::names::RT_TABLE_MAIN,
                metric: 0,
            };
            let req = rmsg::encode(&RouteRequest {
                verb: Verb::Add,
                key,
                metric_given: false,
                protocol: Some(mpt_model::MPROUTE_PROTO),
                nexthops: &nexthops,
                form,
                algo: mpt_model::Algo::L3Hash,
                encap: None,
            });
            reqs.push((req, String::new()));
        }
        let mut sock = Socket::route().map_err(|e| anyhow::anyhow!(e))?;
        let floor_maps = if maps {
            Some(FloorMaps::create()?)
        } else {
            None
        };
        // windows of 256, each sent and acknowledged before the next, as mproute's batch
        // driver does (it writes a window's maps before sending it)
        let start = Instant::now();
        let mut results = Vec::with_capacity(reqs.len());
        let mut at = 0u32;
        for chunk in reqs.chunks(256) {
            let n = chunk.len() as u32;
            if let Some(m) = &floor_maps {
                m.write(at..at + n)?;
            }
            at += n;
            let r = sock
                .pipeline(chunk.iter().map(|(r, o)| (r, o)), 256)
                .map_err(|e| anyhow::anyhow!(e))?;
            results.extend(r);
        }
        let secs = start.elapsed().as_secs_f64();
        if let Some(Err(e)) = results.into_iter().find(|r| r.is_err()) {
            bail!("calibration: the kernel refused a route: {e}");
        }
        Ok(secs)
    })
}

/// Remove what a run installed (untimed) and check the namespace is back where it started.
fn empty_table(tool: Tool, ns: &str, mproute: &Path) -> Result<()> {
    match tool {
        Tool::Mproute | Tool::MprouteNh => {
            support::output(Command::new(mproute).args(["-n", ns, "flush"]))?;
        }
        Tool::IpBatch | Tool::FloorMultipath => {
            support::ip(["-n", ns, "route", "flush", "proto", "245"])?;
        }
        // deleting the object deletes its routes (ip route flush cannot: it sends the dumped
        // RTA_NH_ID back and the kernel answers EINVAL)
        Tool::FloorObject | Tool::FloorObjectMaps => {
            support::ip(["-n", ns, "nexthop", "flush"])?;
        }
    }
    let (routes, nhs) = (route_count(ns)?, nexthop_count(ns)?);
    ensure!(
        routes == 2 && nhs == 0,
        "{}: emptying {ns} left {routes} IPv4 routes and {nhs} nexthop objects (expected 2 and 0)",
        tool.label()
    );
    Ok(())
}

/// One timed run in `ns` (which holds only its connected routes); returns seconds.
fn timed_run(tool: Tool, ns: &str, mproute: &Path, files: &BatchFiles, count: u32) -> Result<f64> {
    let n = ns;
    let before = route_count(n)?;
    ensure!(
        before == 2,
        "{n}: expected the 2 connected routes before the run, found {before}"
    );
    let mut cmd = match tool {
        Tool::FloorMultipath | Tool::FloorObject | Tool::FloorObjectMaps => {
            let object = tool != Tool::FloorMultipath;
            if object {
                for line in FLOOR_NH {
                    let mut args = vec!["-n", n];
                    args.extend(line.split(' '));
                    support::ip(args)?;
                }
            }
            let secs = floor_run(n, count, object, tool == Tool::FloorObjectMaps)?;
            check_installed(tool, n, count, files.last_paths)?;
            return Ok(secs);
        }
        Tool::Mproute => {
            let mut c = Command::new(mproute);
            c.args(["-n", n, "-b"]).arg(&files.mproute);
            c
        }
        Tool::MprouteNh => {
            let mut c = Command::new(mproute);
            c.args(["-n", n, "--nexthop-objects", "-b"])
                .arg(&files.mproute);
            c
        }
        Tool::IpBatch => {
            let mut c = Command::new("ip");
            c.args(["-n", n, "-batch"]).arg(&files.ip);
            c
        }
    };
    cmd.stdin(Stdio::null()).stdout(Stdio::null());
    let start = Instant::now();
    let status = cmd
        .status()
        .with_context(|| format!("cannot start `{}`", show(&cmd)))?;
    let secs = start.elapsed().as_secs_f64();
    if !status.success() {
        bail!("`{}` failed ({status})", show(&cmd));
    }
    check_installed(tool, n, count, files.last_paths)?;
    Ok(secs)
}

fn check_installed(tool: Tool, n: &str, count: u32, paths: usize) -> Result<()> {
    let after = route_count(n)?;
    let want = count as usize + 2;
    ensure!(
        after == want,
        "{}: {n} has {after} IPv4 routes after the run, expected {want}",
        tool.label()
    );
    // the form each run is meant to install: a reference to an object, or its paths
    let out = support::ip(["-n", n, "-j", "-4", "route", "show", &prefix(count - 1)])?;
    let v: serde_json::Value = serde_json::from_str(&out).context("ip -j route show")?;
    let r = &v[0];
    let object = matches!(
        tool,
        Tool::MprouteNh | Tool::FloorObject | Tool::FloorObjectMaps
    );
    ensure!(
        r["nhid"].is_u64() == object && r["nexthops"].as_array().map(Vec::len) == Some(paths),
        "{}: {n}: the last route is not as the run installs it: {r}",
        tool.label()
    );
    Ok(())
}

/// Medians of each tool's runs, printed as a table with each tool against `ip -batch`.
fn report(title: &str, count: u32, times: &[(Tool, Vec<f64>)]) -> Vec<(Tool, f64)> {
    println!();
    println!("{title}");
    println!(
        "{:<30}  {:<30}  {:>9}  {:>15}  {:>8}",
        "tool", "runs (s)", "median s", "median routes/s", "vs ip"
    );
    let ip = times
        .iter()
        .find(|(t, _)| *t == Tool::IpBatch)
        .map(|(_, v)| f64::from(count) / median(v));
    let mut rates = Vec::new();
    for (tool, t) in times {
        let runs_s = t
            .iter()
            .map(|s| format!("{s:.3}"))
            .collect::<Vec<_>>()
            .join(" ");
        let med = median(t);
        let rate = f64::from(count) / med;
        rates.push((*tool, rate));
        let vs = ip.map_or(String::from("-"), |ip| format!("{:.2}×", rate / ip));
        println!(
            "{:<30}  {:<30}  {:>9.3}  {:>15.0}  {:>8}",
            tool.label(),
            runs_s,
            med,
            rate,
            vs
        );
    }
    rates
}

fn rate(rates: &[(Tool, f64)], tool: Tool) -> f64 {
    rates
        .iter()
        .find(|(t, _)| *t == tool)
        .map_or(f64::NAN, |(_, r)| *r)
}

pub fn run(count: u32, runs: u32, distinct: bool, no_ip: bool) -> Result<()> {
    support::require_root("bench routes")?;
    ensure!(
        count > 0 && runs > 0,
        "--count and --runs must be at least 1"
    );
    // each route a group of its own: the state's group map bounds them
    ensure!(
        !distinct || count <= 1_000_000,
        "--distinct: at most 1,000,000 routes (one dataplane group each)"
    );
    let mproute = support::tool("mproute")?;
    support::sweep_stale();
    let files = BatchFiles::write(count, distinct)?;
    let tools: &[Tool] = if no_ip {
        &[Tool::Mproute, Tool::MprouteNh]
    } else {
        &[Tool::IpBatch, Tool::Mproute, Tool::MprouteNh]
    };
    // the calibrations install one shared nexthop set
    let floors: &[Tool] = if distinct {
        &[]
    } else {
        &[
            Tool::FloorMultipath,
            Tool::FloorObject,
            Tool::FloorObjectMaps,
        ]
    };

    // 1. One namespace, interleaved rounds, the table emptied after every run.
    let what = if distinct {
        "two-nexthop IPv4 routes, each with its own nexthop set (weights),"
    } else {
        "two-nexthop IPv4 routes"
    };
    println!("bench: {count} {what} per run, {runs} interleaved rounds in one namespace");
    let ns = fresh_ns(0)?;
    let mut same: Vec<(Tool, Vec<f64>)> = tools
        .iter()
        .chain(floors)
        .map(|t| (*t, Vec::new()))
        .collect();
    for round in 1..=runs {
        // each round starts one tool later, so that no tool always follows the same other
        let n = same.len();
        for i in 0..n {
            let (tool, t) = &mut same[(i + round as usize - 1) % n];
            let secs = timed_run(*tool, ns.name(), &mproute, &files, count)?;
            println!(
                "bench: same namespace  {:<30} round {round}: {secs:.3} s",
                tool.label()
            );
            t.push(secs);
            empty_table(*tool, ns.name(), &mproute)?;
        }
    }
    drop(ns);

    // 2. A fresh namespace per run.
    let mut fresh: Vec<(Tool, Vec<f64>)> = tools.iter().map(|t| (*t, Vec::new())).collect();
    let mut idx = 1;
    for round in 1..=runs {
        for (tool, t) in fresh.iter_mut() {
            let ns = fresh_ns(idx)?;
            idx += 1;
            let secs = timed_run(*tool, ns.name(), &mproute, &files, count)?;
            println!(
                "bench: fresh namespace {:<30} round {round}: {secs:.3} s",
                tool.label()
            );
            t.push(secs);
        }
    }

    let s = report(
        &format!("same namespace, {runs} interleaved rounds, table emptied between runs (the state's first use counted):"),
        count,
        &same,
    );
    let f = report(
        &format!(
            "fresh namespace per run ({runs} rounds; state created and anchor loaded in the run):"
        ),
        count,
        &fresh,
    );
    println!();
    let ip = rate(&s, Tool::IpBatch);
    if distinct {
        if no_ip {
            println!(
                "distinct nexthop sets: same namespace --nexthop-objects {:.2}× mproute -b's rate; fresh namespace {:.2}× (the kernel's fib_info hash ignores gateways and weights: routes over the same devices share one bucket, which every insert of a multipath route searches)",
                rate(&s, Tool::MprouteNh) / rate(&s, Tool::Mproute),
                rate(&f, Tool::MprouteNh) / rate(&f, Tool::Mproute)
            );
        } else {
            println!(
                "distinct nexthop sets: same namespace mproute -b/ip-batch = {:.2}×, --nexthop-objects/ip-batch = {:.2}×; fresh namespace {:.2}× and {:.2}×",
                rate(&s, Tool::Mproute) / ip,
                rate(&s, Tool::MprouteNh) / ip,
                rate(&f, Tool::Mproute) / rate(&f, Tool::IpBatch),
                rate(&f, Tool::MprouteNh) / rate(&f, Tool::IpBatch)
            );
        }
        linearity(count, &mproute, &fresh, no_ip)?;
        return Ok(());
    }
    println!(
        "same namespace:  mproute -b/ip-batch = {:.2}× (goal 1.0×), --nexthop-objects/ip-batch = {:.2}× (goal 2.0×)",
        rate(&s, Tool::Mproute) / ip,
        rate(&s, Tool::MprouteNh) / ip
    );
    println!(
        "                 the kernel alone (calibration): multipath {:.2}×, nhid {:.2}× ip-batch; mproute at {:.0} % and {:.0} % of those",
        rate(&s, Tool::FloorMultipath) / ip,
        rate(&s, Tool::FloorObject) / ip,
        100.0 * rate(&s, Tool::Mproute) / rate(&s, Tool::FloorMultipath),
        100.0 * rate(&s, Tool::MprouteNh) / rate(&s, Tool::FloorObject)
    );
    println!(
        "                 with a dataplane entry per route written in batches, the kernel's share is {:.2}× ip-batch, from one thread (mproute at {:.0} %; it plans a window and writes its state while a second thread writes the LPM entries of the one before and has the kernel take its routes, so it can pass the single-threaded figures)",
        rate(&s, Tool::FloorObjectMaps) / ip,
        100.0 * rate(&s, Tool::MprouteNh) / rate(&s, Tool::FloorObjectMaps)
    );
    let ip = rate(&f, Tool::IpBatch);
    println!(
        "fresh namespace: mproute -b/ip-batch = {:.2}×, --nexthop-objects/ip-batch = {:.2}×",
        rate(&f, Tool::Mproute) / ip,
        rate(&f, Tool::MprouteNh) / ip
    );
    Ok(())
}

/// Whether a batch costs in proportion to its length (issue 30: no quadratic path): the same
/// `count` distinct routes as ten batches of `count / 10` lines, one after another into a
/// fresh namespace, for mproute and ip -batch, beside `fresh`'s one batch of `count` lines
/// (the fresh-namespace runs above). Both tables end the same; a batch quadratic in its
/// length takes far longer as one batch than as ten.
fn linearity(count: u32, mproute: &Path, fresh: &[(Tool, Vec<f64>)], no_ip: bool) -> Result<()> {
    if count < 10 {
        return Ok(());
    }
    let tenth = count / 10;
    let dir = std::env::temp_dir().join(format!("xtask-bench-lin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    let mut parts = Vec::new();
    for k in 0..10 {
        let (mut m, mut ip) = (String::new(), String::new());
        for i in k * tenth..(k + 1) * tenth {
            let (p, nh) = (prefix(i), distinct_nexthops(i));
            let _ = writeln!(m, "add {p} {nh}");
            let _ = writeln!(ip, "route add {p} proto 245 {nh}");
        }
        let (mf, ipf) = (dir.join(format!("m{k}")), dir.join(format!("ip{k}")));
        std::fs::write(&mf, m).with_context(|| format!("write {}", mf.display()))?;
        std::fs::write(&ipf, ip).with_context(|| format!("write {}", ipf.display()))?;
        parts.push((mf, ipf));
    }
    let mut tens = [f64::NAN; 2];
    for (i, tool) in [Tool::IpBatch, Tool::Mproute].into_iter().enumerate() {
        if no_ip && tool == Tool::IpBatch {
            continue;
        }
        let ns = fresh_ns(1000 + i)?;
        let start = std::time::Instant::now();
        for (mf, ipf) in &parts {
            let mut c = if tool == Tool::IpBatch {
                let mut c = Command::new("ip");
                c.args(["-n", ns.name(), "-batch"]).arg(ipf);
                c
            } else {
                let mut c = Command::new(mproute);
                c.args(["-n", ns.name(), "-b"]).arg(mf);
                c
            };
            support::output(&mut c)?;
        }
        tens[i] = start.elapsed().as_secs_f64();
        let have = route_count(ns.name())?;
        ensure!(
            have == 10 * tenth as usize + 2,
            "{}: {have} routes after ten batches",
            tool.label()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    let one = |t: Tool| {
        fresh
            .iter()
            .find(|(x, _)| *x == t)
            .map_or(f64::NAN, |(_, v)| support::median(v))
    };
    let (ip1, m1) = (one(Tool::IpBatch), one(Tool::Mproute));
    let ip = if no_ip {
        "ip -batch not run (--no-ip)".to_string()
    } else {
        format!(
            "ip -batch {ip1:.2} s vs {:.2} s = {:.2}×",
            tens[0],
            ip1 / tens[0]
        )
    };
    println!(
        "linearity: one batch of {count} lines against ten of {tenth} (fresh namespace each): mproute {m1:.2} s vs {:.2} s = {:.2}× (goal ≤ 2×), {ip}",
        tens[1],
        m1 / tens[1],
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::prefix;

    #[test]
    fn prefixes() {
        assert_eq!(prefix(0), "11.0.0.0/24");
        assert_eq!(prefix(257), "11.1.1.0/24");
        assert_eq!(prefix(65536), "12.0.0.0/24");
    }
}

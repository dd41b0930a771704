//! Root integration tests of pfanout, each in throwaway namespaces: the cases of the kernel's
//! own selftest `tools/testing/selftests/net/psock_fanout.c` through pfanout's code paths (the
//! control cases: joining with other flags or modes, uniqueid, the member limit; the datapath
//! cases: hash, hash+rollover, lb, rollover, cbpf, ebpf, cpu, uniqueid), `pfanout show` against
//! groups an independent C program makes, and bad input.
//!
//! ```text
//!   TX  pt ------------------ pr  RX      (IPv6 off on both: no neighbour discovery noise)
//!       crafted frames                    pfanout run dev pr ...
//!       (to a foreign MAC: RX's stack drops them silently, its packet sockets see them)
//! ```
//!
//! Where a packet went is judged by tcpdump reading the workers' pcap files (`write DIR`), and
//! counts by the run's JSON summary. Needs root; it fails, it does not skip, without it.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mpt_model::hash::{flow_hash, FlowKey};
use mpt_model::route::Family;
use mpt_sys::packet::PacketSocket;
use mpt_testkit::packet::{eth, udp, Ip4};
use mpt_testkit::traffic::in_netns;
use mpt_testkit::Netns;
use serde_json::Value;

#[path = "helpers/fanout_link.rs"]
mod fanout_link;
use fanout_link::{link, run_group, Link, FOREIGN_MAC, PF, TX_MAC};

/// A UDP frame of flow (src:sport -> dst:dport), `n` payload bytes.
fn frame(src: &str, dst: &str, sport: u16, dport: u16) -> Vec<u8> {
    let ip = Ip4::new(src, dst, 17, udp(sport, dport, 64)).bytes();
    eth(FOREIGN_MAC, TX_MAC, 0x0800, &ip)
}

impl Link {
    /// Send `frames` from TX's end, from CPU `cpu` if given.
    fn send(&self, frames: &[Vec<u8>], cpu: Option<usize>) {
        let frames = frames.to_vec();
        in_netns(&self.tx, move || {
            if let Some(c) = cpu {
                let mut set = nix::sched::CpuSet::new();
                set.set(c).expect("cpu");
                nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).expect("pin");
            }
            let idx = mpt_sys::iface::index("pt").expect("pt");
            let s = PacketSocket::open(idx, mpt_sys::packet::ETH_P_ALL).expect("socket");
            // in chunks: a burst beyond netdev_max_backlog (1000) would be dropped before
            // any packet socket sees it
            for chunk in frames.chunks(200) {
                for f in chunk {
                    s.send(f).expect("send");
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        std::thread::sleep(Duration::from_millis(200));
    }

    /// Start `pfanout -n RX -j run dev pr ARGS` in the background and wait until its group
    /// `group` has `members` members in `pfanout show`.
    // the child is the caller's to wait for (stop() does)
    #[allow(clippy::zombie_processes)]
    fn run(&self, args: &str, group: u16, members: usize) -> Child {
        self.run_at(&self.rx, "pr", args, group, members)
    }

    /// `pfanout -n NS -j run dev DEV ARGS` in the background, as [`Link::run`].
    fn run_at(&self, ns: &Netns, dev: &str, args: &str, group: u16, members: usize) -> Child {
        let words: Vec<&str> = args.split_whitespace().collect();
        run_group(ns, dev, &words, group, members)
    }

    fn groups(&self) -> Vec<Value> {
        PF.json(&self.rx, &["-d", "show"])
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    fn no_sockets_left(&self) {
        let g = self.groups();
        assert!(g.is_empty(), "sockets left behind: {g:?}");
    }
}

/// Wait (at most 15 s) for a run with `count` to end by itself; its JSON summary.
fn done(mut child: Child) -> Value {
    let t = Instant::now();
    while child.try_wait().expect("try_wait").is_none() {
        if t.elapsed() > Duration::from_secs(15) {
            // short of its count: end it and show what it had
            let v = stop(child);
            panic!("the run never reached its count: {v}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("wait");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "pfanout run failed: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(text.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(v["type"], "summary", "{v}");
    assert_eq!(v["ended"], "count", "{v}");
    v
}

/// End a run with SIGTERM; its JSON summary.
fn stop(child: Child) -> Value {
    stop_with(child, "TERM")
}

/// End a run with signal `sig` (`TERM`, `INT`); its JSON summary.
fn stop_with(child: Child, sig: &str) -> Value {
    let o = Command::new("kill")
        .args([format!("-{sig}"), child.id().to_string()])
        .output()
        .expect("kill");
    assert!(o.status.success(), "kill: {o:?}");
    let out = child.wait_with_output().expect("wait");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "pfanout run failed: {} {}",
        text,
        String::from_utf8_lossy(&out.stderr)
    );
    let last = text.lines().last().unwrap_or_default();
    let v: Value = serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(v["type"], "summary", "{v}");
    assert_eq!(v["ended"], "signal", "{v}");
    v
}

fn per_worker(v: &Value, key: &str) -> Vec<u64> {
    v["per_worker"]
        .as_array()
        .expect("per_worker")
        .iter()
        .map(|w| w[key].as_u64().expect("number"))
        .collect()
}

/// Per worker pcap file: the UDP flows tcpdump reads in it, `src.port>dst.port` -> packets.
fn flows_in(dir: &std::path::Path, workers: usize) -> Vec<BTreeMap<String, u64>> {
    (0..workers)
        .map(|i| {
            let f = dir.join(format!("worker-{i}.pcap"));
            let out = Command::new("tcpdump")
                .args(["-nn", "-r"])
                .arg(&f)
                .output()
                .expect("tcpdump");
            assert!(
                out.status.success(),
                "tcpdump -r {}: {:?}",
                f.display(),
                out
            );
            let mut m = BTreeMap::new();
            for l in String::from_utf8_lossy(&out.stdout).lines() {
                // 01:02:03.000 IP 192.0.2.1.4000 > 192.0.2.2.53: UDP, length 64
                let w: Vec<&str> = l.split_whitespace().collect();
                if w.len() > 4 && w[1] == "IP" {
                    *m.entry(format!("{}>{}", w[2], w[4].trim_end_matches(':')))
                        .or_insert(0) += 1;
                }
            }
            m
        })
        .collect()
}

fn tmpdir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("pfanout-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn flow_frames(n_flows: u16, per_flow: usize, both_ways: bool) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for f in 0..n_flows {
        for _ in 0..per_flow {
            v.push(frame("192.0.2.1", "192.0.2.2", 4000 + f, 53));
            if both_ways {
                v.push(frame("192.0.2.2", "192.0.2.1", 53, 4000 + f));
            }
        }
    }
    v
}

/// The worker each flow reached; each flow (both of its directions) must be in one worker.
fn worker_of_flows(flows: &[BTreeMap<String, u64>]) -> BTreeMap<u16, usize> {
    let mut out = BTreeMap::new();
    for (w, m) in flows.iter().enumerate() {
        for k in m.keys() {
            // the flow's client port: 4000 + f on either side
            let port = k
                .split(['>', '.'])
                .filter_map(|p| p.parse::<u16>().ok())
                .find(|p| *p >= 4000)
                .expect("client port");
            if let Some(prev) = out.insert(port, w) {
                assert_eq!(
                    prev, w,
                    "flow {port} reached workers {prev} and {w}: {flows:?}"
                );
            }
        }
    }
    out
}

#[test]
fn datapath_hash_keeps_flows_and_both_directions_together() {
    let l = link("pfh");
    let dir = tmpdir("hash");
    let c = l.run(
        &format!(
            "group 11 mode hash workers 2 count 96 write {}",
            dir.display()
        ),
        11,
        2,
    );
    l.send(&flow_frames(16, 3, true), None);
    let v = done(c);
    assert_eq!(per_worker(&v, "packets").iter().sum::<u64>(), 96);
    let flows = flows_in(&dir, 2);
    let at = worker_of_flows(&flows);
    assert_eq!(at.len(), 16);
    let used: BTreeSet<usize> = at.values().copied().collect();
    assert_eq!(used.len(), 2, "16 flows all hashed to one worker: {at:?}");
    assert_eq!(
        flows
            .iter()
            .map(|m| m.values().sum::<u64>())
            .collect::<Vec<_>>(),
        per_worker(&v, "packets"),
        "the pcap files hold what the summary counts"
    );
    let _ = std::fs::remove_dir_all(&dir);
    l.no_sockets_left();
}

#[test]
fn datapath_lb_alternates() {
    let l = link("pfl");
    let c = l.run("group 12 mode lb workers 2 count 20", 12, 2);
    l.send(&flow_frames(1, 20, false), None);
    let v = done(c);
    assert_eq!(per_worker(&v, "packets"), [10, 10]);
    l.no_sockets_left();
}

#[test]
fn datapath_cbpf_is_the_xor_of_the_flow() {
    let l = link("pfc");
    let dir = tmpdir("cbpf");
    let c = l.run(
        &format!(
            "group 13 mode cbpf workers 2 count 32 write {}",
            dir.display()
        ),
        13,
        2,
    );
    l.send(&flow_frames(8, 2, true), None);
    done(c);
    let at = worker_of_flows(&flows_in(&dir, 2));
    for (port, w) in &at {
        // saddr ^ daddr ^ sport ^ dport, modulo the members
        let x = 0xc000_0201u32 ^ 0xc000_0202 ^ u32::from(*port) ^ 53;
        assert_eq!((x % 2) as usize, *w, "flow {port}");
    }
    assert_eq!(at.len(), 8);
    let _ = std::fs::remove_dir_all(&dir);
    // the copies of outgoing packets (skb->data at the link header) steer alike: a group on
    // the sender's own device
    let c = l.run_at(
        &l.tx,
        "pt",
        &format!(
            "group 13 mode cbpf workers 2 count 32 write {}",
            dir.display()
        ),
        13,
        2,
    );
    l.send(&flow_frames(8, 2, true), None);
    done(c);
    let out = worker_of_flows(&flows_in(&dir, 2));
    assert_eq!(out, at, "outgoing copies steer as received packets do");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn datapath_ebpf_is_mproutes_flow_hash() {
    let l = link("pfe");
    let dir = tmpdir("ebpf");
    let c = l.run(
        &format!(
            "group 14 mode ebpf workers 3 ring count 48 write {}",
            dir.display()
        ),
        14,
        3,
    );
    l.send(&flow_frames(12, 2, true), None);
    let v = done(c);
    assert_eq!(per_worker(&v, "packets").iter().sum::<u64>(), 48);
    let at = worker_of_flows(&flows_in(&dir, 3));
    assert_eq!(at.len(), 12);
    for (port, w) in &at {
        let mut k = FlowKey {
            family: Family::V4,
            src: [0; 16],
            dst: [0; 16],
            proto: 17,
            sport: *port,
            dport: 53,
        };
        k.src[..4].copy_from_slice(&[192, 0, 2, 1]);
        k.dst[..4].copy_from_slice(&[192, 0, 2, 2]);
        assert_eq!((flow_hash(&k, true, 0) % 3) as usize, *w, "flow {port}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn datapath_cpu_follows_the_receiving_cpu() {
    let l = link("pfu");
    let c = l.run("group 15 mode cpu workers 2 count 20", 15, 2);
    l.send(&flow_frames(1, 20, false), Some(0));
    let v = done(c);
    assert_eq!(per_worker(&v, "packets"), [20, 0]);
    if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
        let c = l.run("group 15 mode cpu workers 2 count 20", 15, 2);
        l.send(&flow_frames(1, 20, false), Some(1));
        let v = done(c);
        assert_eq!(per_worker(&v, "packets"), [0, 20]);
    }
}

#[test]
fn datapath_uniqueid_groups_each_see_everything() {
    let l = link("pfq");
    let a = l.run_unique("count 20");
    let b = l.run_unique("count 20");
    l.send(&flow_frames(2, 10, false), None);
    for c in [a, b] {
        let v = done(c);
        assert_eq!(per_worker(&v, "packets"), [20]);
        assert!(v["group"].as_u64().is_some(), "{v}");
    }
}

impl Link {
    /// A run with `flags uniqueid` (the kernel chooses the id); waits for one more group.
    #[allow(clippy::zombie_processes)]
    fn run_unique(&self, extra: &str) -> Child {
        let ids = |l: &Link| -> BTreeSet<u64> {
            PF.json(&l.rx, &["show"])
                .as_array()
                .map(|a| a.iter().filter_map(|g| g["group"].as_u64()).collect())
                .unwrap_or_default()
        };
        let before = ids(self);
        let mut child = Command::new(PF.bin)
            .args([
                "-n",
                self.rx.name(),
                "-j",
                "run",
                "dev",
                "pr",
                "mode",
                "hash",
            ])
            .args(["flags", "uniqueid", "workers", "1"])
            .args(extra.split_whitespace())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let t = Instant::now();
        while ids(self).is_subset(&before) {
            if t.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("no unique group appeared");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        child
    }
}

/// Slow workers (10 packets a second) and a burst of 1500 frames of one flow: the hashed
/// worker's socket fills.
fn overload(l: &Link, args: &str, group: u16) -> Value {
    let c = l.run(
        &format!("group {group} {args} workers 2 per-worker 10 rcvbuf 65536"),
        group,
        2,
    );
    l.send(&flow_frames(1, 1500, false), None);
    std::thread::sleep(Duration::from_millis(400));
    stop(c)
}

#[test]
fn datapath_rollover_moves_what_a_full_socket_cannot_take() {
    let l = link("pfr");
    // without rollover one worker gets the flow and drops
    let v = overload(&l, "mode hash", 16);
    let k = per_worker(&v, "kernel_packets");
    assert!(k.contains(&0) && k.contains(&1500), "{v}");
    // named as iproute2's -s -j names it
    assert!(v["total"]["dropped"].as_u64() > Some(0), "{v}");
    assert_eq!(v["total"].get("drops"), None, "{v}");
    // hash+rollover: the other worker takes the overflow
    let v = overload(&l, "mode hash flags rollover", 17);
    let k = per_worker(&v, "kernel_packets");
    assert!(k.iter().all(|n| *n > 0), "both workers receive: {v}");
    assert!(v["total"]["rollover_all"].as_u64() > Some(0), "{v}");
    assert!(
        v["flags"]
            .as_array()
            .is_some_and(|f| f.contains(&"rollover".into())),
        "{v}"
    );
    // rollover mode
    let v = overload(&l, "mode rollover", 18);
    let k = per_worker(&v, "kernel_packets");
    assert!(k.iter().all(|n| *n > 0), "both workers receive: {v}");
    assert_eq!(k.iter().sum::<u64>(), 1500, "{v}");
    l.no_sockets_left();
}

#[test]
fn control_joins_need_the_same_mode_and_flags() {
    let l = link("pfj");
    // rollover mode refuses the rollover flag (test_control_single)
    let o = PF.at(
        &l.rx,
        &["run", "dev", "pr", "mode", "rollover", "flags", "rollover"],
    );
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        e.lines().next().map(|l| l.contains("rollover flag")),
        Some(true),
        "{e}"
    );
    l.no_sockets_left();
    // test_control_group: group 0 is a group too
    let first = l.run("group 0 mode hash workers 1", 0, 1);
    for bad in [
        "mode hash flags defrag",
        "mode hash flags rollover",
        "mode cpu",
    ] {
        let args: Vec<&str> = ["run", "dev", "pr", "group", "0"]
            .into_iter()
            .chain(bad.split_whitespace())
            .collect();
        let o = PF.at(&l.rx, &args);
        assert_eq!(o.status.code(), Some(2), "{bad}: {o:?}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.starts_with("pfanout: join fanout group 0:"), "{bad}: {e}");
        assert!(e.contains("[EINVAL]"), "{e}");
    }
    // with the link down, a plain join still works
    l.rx.ip_ok(&["link", "set", "pr", "down"]);
    let second = l.run("group 0 mode hash workers 2", 0, 3);
    l.rx.ip_ok(&["link", "set", "pr", "up"]);
    let g = l.groups();
    let g0 = g.iter().find(|g| g["group"] == 0).expect("group 0");
    assert_eq!(g0["mode"], "hash");
    assert_eq!(
        g0["flags"],
        serde_json::json!([]),
        "our sockets: flags known"
    );
    stop(first);
    stop(second);
    l.no_sockets_left();
}

#[test]
fn control_member_limit_and_uniqueid() {
    let l = link("pfm");
    let code = |args: &str| {
        let a: Vec<&str> = ["run", "dev", "pr"]
            .into_iter()
            .chain(args.split_whitespace())
            .collect();
        let o = PF.at(&l.rx, &a);
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).to_string(),
        )
    };
    let (c, e) = code("group 21 mode hash max-members 65537");
    assert_eq!(c, Some(2), "{e}");
    assert!(e.contains("at most 65536"), "{e}");
    let first = l.run("group 21 mode hash max-members 256 workers 1", 21, 1);
    let (c, e) = code("group 21 mode hash max-members 257");
    assert_eq!(c, Some(2), "{e}");
    let more = l.run("group 21 mode hash max-members 256 workers 1", 21, 2);
    let legacy = l.run("group 21 mode hash workers 1", 21, 3);
    for ch in [first, more, legacy] {
        stop(ch);
    }
    // a full group
    let (c, e) = code("group 22 mode lb max-members 2 workers 3");
    assert_eq!(c, Some(2), "{e}");
    assert!(e.contains("[ENOSPC]") && e.contains("full"), "{e}");
    l.no_sockets_left();
    // uniqueid: the kernel's id, uniqueid not kept; an id with uniqueid is refused
    let (c, e) = code("group 9 mode hash flags uniqueid");
    assert_eq!(c, Some(2), "{e}");
    assert!(e.contains("uniqueid"), "{e}");
    let u = l.run_unique("");
    let g = l.groups();
    assert_eq!(g.len(), 1, "{g:?}");
    let id = g[0]["group"].as_u64().expect("id") as u16;
    assert_eq!(
        g[0]["flags"],
        serde_json::json!([]),
        "uniqueid is not kept: {g:?}"
    );
    let (c, e) = code(&format!("group {id} mode cpu"));
    assert_eq!(c, Some(2), "{e}");
    let join = l.run(&format!("group {id} mode hash workers 1"), id, 2);
    let u2 = l.run_unique("");
    assert_eq!(l.groups().len(), 2);
    for ch in [u, join, u2] {
        stop(ch);
    }
    l.no_sockets_left();
}

/// The independent C program of `tests/helpers/fanout_member.c`, built once per test.
fn helper() -> std::path::PathBuf {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/helpers/fanout_member.c");
    let out = std::env::temp_dir().join(format!("fanout_member-{}", std::process::id()));
    if !out.exists() {
        let o = Command::new("cc")
            .arg("-O1")
            .arg("-o")
            .arg(&out)
            .arg(&src)
            .output()
            .expect("cc");
        assert!(
            o.status.success(),
            "cc: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    out
}

struct Member {
    child: Child,
    inodes: Vec<u64>,
}

impl Member {
    fn start(ns: &Netns, args: &[&str]) -> Member {
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns.name()])
            .arg(helper())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("helper");
        let mut line = String::new();
        let out = child.stdout.take().expect("stdout");
        BufReader::new(out).read_line(&mut line).expect("read");
        let inodes = line
            .split_whitespace()
            .skip(1)
            .map(|s| s.parse().expect("inode"))
            .collect();
        assert!(line.starts_with("ready"), "helper said {line:?}");
        Member { child, inodes }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        if let Some(mut i) = self.child.stdin.take() {
            let _ = i.flush();
        }
        let _ = self.child.wait();
    }
}

#[test]
fn show_sees_another_programs_groups_and_only_this_namespaces() {
    let l = link("pfs");
    // group 31: hash with rollover, 3 members with rings; group 32: lb, 1 member
    let a = Member::start(&l.rx, &["pr", "31", "0x1000", "3", "ring"]);
    let b = Member::start(&l.rx, &["pr", "32", "1", "1"]);
    // the same id in another namespace, another mode: ids are per namespace
    let other = Member::start(&l.tx, &["pt", "31", "1", "2"]);
    let loose = Member::start(&l.rx, &["pr", "-", "0", "1"]);
    let g = l.groups();
    let find = |id: u64| g.iter().find(|x| x["group"] == id).cloned();
    let g31 = find(31).expect("group 31");
    assert_eq!(g31["mode"], "hash");
    assert_eq!(g31["members"], 3);
    assert_eq!(g31["dev"], "pr");
    assert_eq!(g31["protocol"], "all");
    assert_eq!(
        g31["flags"],
        Value::Null,
        "another program's flags are unknown"
    );
    let pid = a.child.id();
    let socks = g31["sockets"].as_array().expect("sockets");
    let inos: BTreeSet<u64> = socks
        .iter()
        .map(|s| s["inode"].as_u64().expect("ino"))
        .collect();
    assert_eq!(inos, a.inodes.iter().copied().collect());
    for s in socks {
        let owners = s["owners"].as_array().expect("owners");
        assert_eq!(owners.len(), 1, "{s}");
        assert_eq!(owners[0]["pid"].as_u64(), Some(u64::from(pid)));
        assert!(
            owners[0]["process"]
                .as_str()
                .is_some_and(|p| p.starts_with("fanout_member")),
            "{s}"
        );
        assert_eq!(s["ring"]["version"], 3, "{s}");
        assert_eq!(s["ring"]["block_nr"], 8, "{s}");
        assert_eq!(s["ring"]["block_size"], 65536, "{s}");
        assert!(s["rcvbuf"].as_u64() > Some(0));
    }
    let g32 = find(32).expect("group 32");
    assert_eq!(
        (g32["mode"].clone(), g32["members"].clone()),
        ("lb".into(), 1.into())
    );
    let theirs: BTreeSet<u64> = other.inodes.iter().copied().collect();
    assert!(
        g.iter()
            .flat_map(|x| x["sockets"].as_array().cloned().unwrap_or_default())
            .all(|s| s["inode"].as_u64().is_some_and(|i| !theirs.contains(&i))),
        "the other namespace's sockets appear: {g:?}"
    );
    // -d (as groups() asks) lists the socket in no group, with its own device
    let none = g
        .iter()
        .find(|x| x["group"].is_null())
        .expect("no-group entry with -d");
    assert_eq!(
        none["sockets"][0]["inode"].as_u64(),
        loose.inodes.first().copied()
    );
    assert_eq!(none["sockets"][0]["dev"], "pr");
    let plain = PF.json(&l.rx, &["show"]);
    assert!(
        plain
            .as_array()
            .is_some_and(|a| a.iter().all(|x| x["group"].is_u64())),
        "only groups without -d: {plain}"
    );
    // filters
    let only = PF.json(&l.rx, &["show", "group", "32"]);
    assert_eq!(only.as_array().map(Vec::len), Some(1));
    // -n and ip netns exec give the same answer
    let by_n = PF.ok(&l.rx, &["-j", "show"]);
    let o = Command::new("ip")
        .args(["netns", "exec", l.rx.name(), PF.bin, "-j", "show"])
        .output()
        .expect("ip netns exec");
    assert_eq!(String::from_utf8_lossy(&o.stdout), by_n);
    // the table names what it knows
    let t = PF.ok(&l.rx, &["show"]);
    assert!(
        t.contains("group 31 mode hash flags unknown members 3 dev pr proto all"),
        "{t}"
    );
    drop((a, b, other, loose));
    l.no_sockets_left();
}

#[test]
fn bad_input_one_line_and_nothing_left_behind() {
    let l = link("pfb");
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["run", "dev", "pr", "mode", "fastest"],
            1,
            "unknown mode \"fastest\"",
        ),
        (&["run", "mode", "hash"], 1, "\"dev DEV\" is required"),
        (
            &["run", "dev", "pr", "mode", "hash", "flags", "rollover,warp"],
            1,
            "warp",
        ),
        (
            &["run", "dev", "pt", "mode", "hash"],
            2,
            "cannot find device \"pt\"",
        ),
        (
            &["run", "dev", "pr", "mode", "lb", "proto", "0"],
            1,
            "proto 0",
        ),
        (&["frobnicate"], 1, "unknown command"),
        (&["show", "dev", "nosuch"], 2, "nosuch"),
    ];
    for (args, code, words) in cases {
        let o = PF.at(&l.rx, args);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(*code), "{args:?}: {e}");
        let first = e.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("pfanout: ") && first.contains(words),
            "{args:?}: {e}"
        );
        assert!(e.lines().count() <= 2, "{args:?}: {e}");
        l.no_sockets_left();
    }
    // a refused run writes no files
    let dir = tmpdir("bad");
    let o = PF.at(
        &l.rx,
        &[
            "run",
            "dev",
            "pr",
            "mode",
            "rollover",
            "flags",
            "rollover",
            "write",
            &dir.to_string_lossy(),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(!dir.exists(), "{} was left behind", dir.display());
    // SIGINT ends a run with its summary, like SIGTERM
    let c = l.run("group 41 mode lb workers 1", 41, 1);
    let v = stop_with(c, "INT");
    assert_eq!(v["group"], 41);
    l.no_sockets_left();
}

#[test]
fn datapath_rnd_and_qm_account_for_every_packet() {
    let l = link("pfn");
    for (mode, id) in [("rnd", 51u16), ("qm", 52)] {
        let c = l.run(&format!("group {id} mode {mode} workers 2 count 40"), id, 2);
        l.send(&flow_frames(4, 10, false), None);
        let v = done(c);
        assert_eq!(v["mode"], mode);
        assert_eq!(per_worker(&v, "packets").iter().sum::<u64>(), 40, "{v}");
        if mode == "qm" {
            // a veth receives on queue 0: every packet to worker 0
            assert_eq!(per_worker(&v, "packets"), [40, 0], "{v}");
        }
    }
    l.no_sockets_left();
}

#[test]
fn ignore_outgoing_hides_what_the_host_sends() {
    let l = link("pfo");
    // groups on TX's own device: its outgoing frames are seen unless ignore-outgoing
    let run_tx = |args: &str, id: u16| {
        let mut child = Command::new(PF.bin)
            .args([
                "-n",
                l.tx.name(),
                "-j",
                "run",
                "dev",
                "pt",
                "group",
                &id.to_string(),
            ])
            .args(args.split_whitespace())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let t = Instant::now();
        while PF
            .json(&l.tx, &["show", "group", &id.to_string()])
            .as_array()
            .is_none_or(|a| a.is_empty())
        {
            if t.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("group {id} never appeared");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        child
    };
    let seen = run_tx("mode lb workers 1 count 20", 61);
    let blind = run_tx("mode lb flags ignore-outgoing workers 1", 62);
    l.send(&flow_frames(1, 20, false), None);
    let v = done(seen);
    assert_eq!(per_worker(&v, "packets"), [20], "{v}");
    let v = stop(blind);
    assert_eq!(per_worker(&v, "packets"), [0], "{v}");
    assert_eq!(v["flags"], serde_json::json!(["ignore-outgoing"]), "{v}");
}

#[test]
fn live_view_each_second_on_a_terminal_and_as_json_lines() {
    let l = link("pfv");
    // JSON: an interval line each second, then the summary
    let o = PF.at(
        &l.rx,
        &[
            "-j", "run", "dev", "pr", "mode", "lb", "workers", "2", "duration", "2.5",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    let lines: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|s| serde_json::from_str(s).expect("json line"))
        .collect();
    let intervals = lines.iter().filter(|v| v["type"] == "interval").count();
    assert!(intervals >= 2, "{lines:?}");
    assert_eq!(
        lines.last().map(|v| v["type"].clone()),
        Some("summary".into())
    );
    assert!(lines[0]["per_worker"]
        .as_array()
        .is_some_and(|w| w.len() == 2));
    // issue 32: each interval line is stamped with the wall-clock time (RFC 3339, UTC, ms)
    // and carries each worker's rates
    let time = lines[0]["time"].as_str().unwrap_or_default();
    assert!(
        time.len() == 24 && time.ends_with('Z') && time.as_bytes()[10] == b'T',
        "{time}"
    );
    assert!(
        lines[0]["per_worker"][0]["packets_per_second"].is_number()
            && lines[0]["per_worker"][0]["dropped_per_second"].is_number(),
        "{:?}",
        lines[0]
    );
    // not a terminal, not JSON: the live table appended each second, then the summary
    let o = PF.at(
        &l.rx,
        &[
            "run", "dev", "pr", "mode", "lb", "workers", "2", "duration", "2.5",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.matches("PKTS/S").count() >= 2, "{t}");
    assert!(
        !t.contains("\x1b["),
        "no terminal controls in a pipe: {t:?}"
    );
    assert!(t.contains("ended by duration"), "{t}");
    // on a terminal (script(1) gives it one): the table, redrawn in place
    let cmd = format!(
        "{} -n {} run dev pr mode lb workers 2 duration 2.5",
        PF.bin,
        l.rx.name()
    );
    let o = Command::new("script")
        .args(["-q", "-e", "-c", &cmd, "/dev/null"])
        .output()
        .expect("script");
    assert!(o.status.success(), "{o:?}");
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(
        t.matches("WORKER").count() >= 3,
        "live tables and the summary: {t}"
    );
    assert!(
        t.contains("\x1b[") && t.contains("\x1b[J"),
        "redrawn in place: {t:?}"
    );
    assert!(t.contains("ended by duration"), "{t}");
}

/// A 72-byte UDP datagram of one flow as two IPv4 fragments (40 + 32 bytes).
fn fragments(id_port: u16) -> Vec<Vec<u8>> {
    let dgram = udp(id_port, 53, 64);
    let (a, b) = dgram.split_at(40);
    [(0x2000u16, a), (40 / 8, b)]
        .iter()
        .map(|(frag, part)| {
            let ip = Ip4::new("192.0.2.1", "192.0.2.2", 17, part.to_vec())
                .frag(*frag)
                .bytes();
            eth(FOREIGN_MAC, TX_MAC, 0x0800, &ip)
        })
        .collect()
}

#[test]
fn defrag_reassembles_before_the_group_sees_the_packet() {
    let l = link("pfd");
    // without defrag: both fragments
    let c = l.run("group 71 mode hash workers 2 count 2", 71, 2);
    l.send(&fragments(4000), None);
    let v = done(c);
    assert_eq!(v["total"]["packets"], 2, "{v}");
    assert_eq!(
        v["total"]["bytes"].as_u64(),
        Some(2 * 14 + 20 + 40 + 20 + 32),
        "{v}"
    );
    // with defrag: one reassembled datagram, its whole length
    let c = l.run("group 72 mode hash flags defrag workers 2 count 1", 72, 2);
    l.send(&fragments(4001), None);
    let v = done(c);
    assert_eq!(v["total"]["packets"], 1, "{v}");
    assert_eq!(v["total"]["bytes"].as_u64(), Some(14 + 20 + 72), "{v}");
    assert_eq!(v["flags"], serde_json::json!(["defrag"]), "{v}");
}

/// `pfanout -n RX run dev pr ARGS` refused, and `--check` predicting it in the same words.
fn refused_alike(l: &Link, args: &str) {
    let mut a: Vec<&str> = vec!["run", "dev", "pr"];
    a.extend(args.split_whitespace());
    a.extend(["duration", "1"]);
    PF.refused_alike(&l.rx, &a);
}

/// `--check run`: what the run would join or create, judged against the kernel's refusals;
/// nothing joins.
#[test]
fn check_predicts_joins_and_joins_nothing() {
    let l = link("pf-chk");
    let v = PF.json(
        &l.rx,
        &[
            "--check", "run", "dev", "pr", "group", "9", "mode", "hash", "workers", "2",
        ],
    );
    assert_eq!(
        (v["check"].clone(), v["changed"].clone()),
        (true.into(), true.into())
    );
    assert_eq!(v["diff"]["before"], Value::Null);
    assert_eq!(v["diff"]["after"]["group"], 9);
    assert_eq!(v["diff"]["after"]["members"], 2);
    l.no_sockets_left();
    refused_alike(&l, "group 9 mode rollover flags rollover");
    refused_alike(&l, "group 9 mode hash workers 257");
    let o = PF.at(&l.rx, &["--check", "run", "dev", "nosuch", "mode", "hash"]);
    assert_eq!(o.status.code(), Some(2));

    // a group of another run: joins that break its rules are refused alike, a right one fits
    let child = l.run("group 9 mode hash flags defrag workers 2", 9, 2);
    refused_alike(&l, "group 9 mode lb workers 2");
    refused_alike(&l, "group 9 mode hash workers 2");
    let v = PF.json(
        &l.rx,
        &[
            "--check", "run", "dev", "pr", "group", "9", "mode", "hash", "flags", "defrag",
            "workers", "3",
        ],
    );
    assert_eq!(v["diff"]["before"]["members"], 2);
    assert_eq!(v["diff"]["after"]["members"], 5);
    let text = PF.ok(
        &l.rx,
        &[
            "--check", "run", "dev", "pr", "group", "9", "mode", "hash", "flags", "defrag",
        ],
    );
    assert!(
        text.starts_with("run: would join group 9 on dev pr"),
        "{text}"
    );
    let g = l.groups();
    assert_eq!(
        g.iter()
            .filter(|g| g["group"] == 9)
            .map(|g| g["members"].clone())
            .collect::<Vec<_>>(),
        [Value::from(2)]
    );
    stop(child);
    l.no_sockets_left();
}

/// `write DIR` as root where another user laid a trap (adversarial review, issue 27 item 1): a
/// directory another user owns, with `worker-0.pcap` a symbolic link to a file of root's, is
/// refused in one line and the file keeps its bytes; in a directory of root's a link is not
/// followed either; the pcap files are made mode 0600 (captured traffic is not for everyone).
#[test]
fn write_refuses_others_directories_and_never_follows_links() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let l = link("pfw");
    let victim_dir = tmpdir("victim");
    std::fs::create_dir(&victim_dir).expect("victim dir");
    let victim = victim_dir.join("victim");
    std::fs::write(&victim, b"root's own bytes").expect("victim");
    let run = |dir: &std::path::Path| {
        PF.at(
            &l.rx,
            &[
                "run",
                "dev",
                "pr",
                "mode",
                "hash",
                "workers",
                "1",
                "duration",
                "1",
                "write",
                dir.to_str().expect("utf-8"),
            ],
        )
    };
    // nobody's directory (uid 65534), with the link nobody planted
    let trap = tmpdir("trap");
    std::fs::create_dir(&trap).expect("trap dir");
    std::os::unix::fs::symlink(&victim, trap.join("worker-0.pcap")).expect("symlink");
    std::os::unix::fs::lchown(trap.join("worker-0.pcap"), Some(65534), Some(65534))
        .expect("lchown");
    std::os::unix::fs::chown(&trap, Some(65534), Some(65534)).expect("chown");
    let o = run(&trap);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.lines().next().is_some_and(
            |l| l.contains("refuse the pcap directory") && l.contains("belongs to uid 65534")
        ),
        "{err}"
    );
    assert_eq!(std::fs::read(&victim).expect("victim"), b"root's own bytes");
    // a directory of root's that others can write: refused too
    let open = tmpdir("open");
    std::fs::create_dir(&open).expect("open dir");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let o = run(&open);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("writable by others"),
        "{o:?}"
    );
    // root's own directory, with a link in it: not followed
    let own = tmpdir("own");
    std::fs::create_dir(&own).expect("own dir");
    std::os::unix::fs::symlink(&victim, own.join("worker-0.pcap")).expect("symlink");
    let o = run(&own);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert_eq!(std::fs::read(&victim).expect("victim"), b"root's own bytes");
    // and without it: a pcap file of root's, mode 0600
    std::fs::remove_file(own.join("worker-0.pcap")).expect("unlink");
    let o = run(&own);
    assert!(o.status.success(), "{o:?}");
    let md = std::fs::symlink_metadata(own.join("worker-0.pcap")).expect("pcap file");
    assert!(md.is_file());
    assert_eq!((md.uid(), md.mode() & 0o7777), (0, 0o600));
    for d in [&victim_dir, &trap, &open, &own] {
        let _ = std::fs::remove_dir_all(d);
    }
    l.no_sockets_left();
}

/// A run on a device that is deleted ends at once with one line and exit 2 (issue 27 item 8:
/// it ran on silently to the end of its duration, exit 0, and `show` printed `dev
/// if4294967295`); SIGHUP ends a `write` run as SIGTERM does: its summary, whole pcap files.
#[test]
fn a_deleted_device_ends_the_run_and_sighup_is_a_stop() {
    let l = link("pfd");
    let dir = tmpdir("hup");
    let c = l.run(
        &format!("group 61 mode hash workers 2 write {}", dir.display()),
        61,
        2,
    );
    l.send(&flow_frames(8, 4, false), None);
    let v = stop_with(c, "HUP");
    assert_eq!(v["group"], 61);
    let got: u64 = per_worker(&v, "packets").iter().sum();
    assert!(got >= 32, "{v}");
    let flows = flows_in(&dir, 2);
    let in_files: u64 = flows.iter().flat_map(|f| f.values()).sum();
    assert_eq!(in_files, got, "every packet counted is in the pcap files");
    let _ = std::fs::remove_dir_all(&dir);

    let c = l.run("group 62 mode hash workers 1 duration 30", 62, 1);
    let t = Instant::now();
    l.rx.ip_ok(&["link", "del", "pr"]);
    let out = c.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "ran on for {:?}",
        t.elapsed()
    );
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("device pr (ifindex") && err.contains("is gone"),
        "{err}"
    );
    l.no_sockets_left();
}

/// Smaller items of the adversarial review (issue 27 item 12), as an operator meets them:
/// a keyword given twice is refused (exit 1); `bench` as another user says it needs root;
/// `show` borrows sockets (to read their flags) only from processes that run pfanout as root
/// or as the caller, not from any process of another user that calls itself "pfanout".
#[test]
fn repeated_words_non_root_bench_and_impostors() {
    let l = link("pfi");
    for twice in ["mode hash mode lb", "mode lb workers 1 workers 3"] {
        let mut a = vec!["run", "dev", "pr"];
        a.extend(twice.split_whitespace());
        let o = PF.at(&l.rx, &a);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{twice}: {err}");
        assert!(err.contains("given twice"), "{err}");
    }
    let o = Command::new("setpriv")
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            PF.bin,
            "bench",
        ])
        .output()
        .expect("setpriv");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("needs root") && !err.contains("make-shared"),
        "{err}"
    );

    // the independent helper, as an executable named pfanout run by the user nobody (with
    // CAP_NET_RAW as an ambient capability, so that it can open packet sockets)
    let dir = tmpdir("impostor");
    std::fs::create_dir(&dir).expect("dir");
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let fake = dir.join("pfanout");
    std::fs::copy(helper(), &fake).expect("copy");
    let mut child = Command::new("ip")
        .args(["netns", "exec", l.rx.name(), "setpriv"])
        .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
        .args(["--inh-caps", "+net_raw", "--ambient-caps", "+net_raw"])
        .arg(&fake)
        .args(["pr", "33", "0x1000", "1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("impostor");
    let mut line = String::new();
    let out = child.stdout.take().expect("stdout");
    BufReader::new(out).read_line(&mut line).expect("read");
    assert!(line.starts_with("ready"), "the impostor said {line:?}");
    let g = l.groups();
    let g33 = g
        .iter()
        .find(|x| x["group"] == 33)
        .cloned()
        .expect("group 33");
    let owner = &g33["sockets"][0]["owners"][0];
    assert_eq!(owner["process"], "pfanout", "{g33}");
    assert_eq!(
        g33["flags"],
        Value::Null,
        "an impostor's socket was borrowed: {g33}"
    );
    drop(child.stdin.take());
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Another process's name is printed with its control characters escaped (issue 27 item 5);
/// `-j -p run` is JSON Lines to its summary, and output that does not reach its file is exit 2
/// (item 11).
#[test]
fn text_is_escaped_and_json_is_lines() {
    let l = link("pfj");
    let dir = tmpdir("escname");
    std::fs::create_dir(&dir).expect("dir");
    let evil = dir.join("m\u{1b}]0;PWN\u{7}");
    std::fs::copy(helper(), &evil).expect("copy");
    let mut child = Command::new("ip")
        .args(["netns", "exec", l.rx.name()])
        .arg(&evil)
        .args(["pr", "34", "0", "1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("helper");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read");
    assert!(line.starts_with("ready"), "{line:?}");
    let o = PF.at(&l.rx, &["-d", "show"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out:?}");
    assert!(out.contains("m\\x1b]0;PWN\\x07"), "{out}");
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let o = Command::new(PF.bin)
        .args(["-n", l.rx.name(), "-j", "show"])
        .stdout(full)
        .output()
        .expect("pfanout");
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    drop(child.stdin.take());
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);

    let o = PF.at(
        &l.rx,
        &[
            "-j", "-p", "run", "dev", "pr", "mode", "hash", "workers", "1", "duration", "1.5",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines.len() >= 2, "an interval line and the summary: {out}");
    for l in &lines {
        serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("not JSON Lines: {e}: {out}"));
    }
}

//! Root integration tests of `pfanout run ... exec CMD` (issue 32): each worker's packets as a
//! pcap stream into its own reader process, here tcpdump writing a file per worker, read back
//! with tcpdump; a reader killed mid-run is reported and costs the others nothing; a reader
//! that does not read fills its pipe and its worker drops for it, counted, while the other
//! worker's reader gets everything.
//!
//! ```text
//!   TX  pt ------------------ pr  RX      (IPv6 off on both)
//!       crafted frames                    pfanout run dev pr ... exec 'tcpdump -r - -w DIR/w%i.pcap'
//!       (to a foreign MAC: RX's stack drops them, its packet sockets see them)
//! ```

use std::collections::BTreeMap;
use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mpt_sys::packet::PacketSocket;
use mpt_testkit::packet::{eth, udp, Ip4};
use mpt_testkit::traffic::in_netns;

use serde_json::Value;

#[path = "helpers/fanout_link.rs"]
mod fanout_link;
use fanout_link::{link, run_group, Link, FOREIGN_MAC, PF, TX_MAC};

/// A UDP frame of flow 192.0.2.1:sport -> 192.0.2.2:53 with `n` payload bytes.
fn frame(sport: u16, n: usize) -> Vec<u8> {
    let ip = Ip4::new("192.0.2.1", "192.0.2.2", 17, udp(sport, 53, n)).bytes();
    eth(FOREIGN_MAC, TX_MAC, 0x0800, &ip)
}

impl Link {
    /// Send `frames` from TX's end, in chunks below netdev_max_backlog.
    fn send(&self, frames: &[Vec<u8>]) {
        let frames = frames.to_vec();
        in_netns(&self.tx, move || {
            let idx = mpt_sys::iface::index("pt").expect("pt");
            let s = PacketSocket::open(idx, mpt_sys::packet::ETH_P_ALL).expect("socket");
            for chunk in frames.chunks(200) {
                for f in chunk {
                    s.send(f).expect("send");
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        std::thread::sleep(Duration::from_millis(200));
    }

    /// `pfanout -n RX -j run dev pr ARGS...` in the background, once its group `group` has
    /// `members` members.
    fn run(&self, args: &[&str], group: u16, members: usize) -> Child {
        run_group(&self.rx, "pr", args, group, members)
    }
}

/// End a run with SIGTERM: its JSON summary and its standard error.
fn stop(mut child: Child) -> (Value, String) {
    let o = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .output()
        .expect("kill");
    assert!(o.status.success(), "kill: {o:?}");
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let out = child.wait_with_output().expect("wait");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "pfanout run failed: {text} {err}");
    let last = text.lines().last().unwrap_or_default();
    let v: Value = serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(v["type"], "summary", "{v}");
    assert_eq!(v["ended"], "signal", "{v}");
    (v, err)
}

fn worker(v: &Value, i: usize) -> &Value {
    &v["per_worker"][i]
}

fn num(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("{key} in {v}"))
}

/// The UDP source ports tcpdump reads in `file`, with their packet counts.
fn flows_in(file: &std::path::Path) -> BTreeMap<u16, u64> {
    let out = Command::new("tcpdump")
        .args(["-nn", "-r"])
        .arg(file)
        .output()
        .expect("tcpdump");
    assert!(
        out.status.success(),
        "tcpdump -r {}: {out:?}",
        file.display()
    );
    let mut m = BTreeMap::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        // 01:02:03.000000 IP 192.0.2.1.4000 > 192.0.2.2.53: UDP, length 64
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.len() > 4 && w[1] == "IP" {
            let port = w[2]
                .rsplit('.')
                .next()
                .and_then(|p| p.parse().ok())
                .expect("port");
            *m.entry(port).or_insert(0) += 1;
        }
    }
    m
}

/// Processes whose command line contains `needle` (the readers pfanout started).
fn pids_with(needle: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(needle) && pid != std::process::id() as i32 {
            out.push(pid);
        }
    }
    out
}

fn tmpdir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("pfanout-tap-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("mkdir");
    d
}

/// The issue's test: a 4-worker hash group through `exec 'tcpdump -r - -w DIR/w%i.pcap'`;
/// every packet sent is read back from the files (per worker as many as the summary counts,
/// the counts adding up to the kernel's), every flow in one file; worker 1's reader killed
/// mid-run is reported (at once on standard error, and in the summary), the others are not
/// touched.
#[test]
fn exec_tcpdump_per_worker_and_a_killed_reader() {
    let l = link("pfx");
    let dir = tmpdir("exec");
    let cmd = format!("tcpdump -n -r - -w {}/w%i.pcap", dir.display());
    let child = l.run(
        // queues of 4 MiB: a worker descheduled for a while on a busy machine drops nothing
        &[
            "group", "81", "mode", "hash", "workers", "4", "rcvbuf", "4194304", "exec", &cmd,
        ],
        81,
        4,
    );
    let flows: Vec<u16> = (0..64).map(|f| 4000 + f).collect();
    let batch: Vec<Vec<u8>> = flows
        .iter()
        .flat_map(|&p| (0..10).map(move |_| frame(p, 64)))
        .collect();
    l.send(&batch);
    // worker 1's reader (sh, or tcpdump it became) killed mid-run
    let needle = format!("{}/w1.pcap", dir.display());
    let victims = pids_with(&needle);
    assert!(!victims.is_empty(), "no reader of worker 1");
    for p in &victims {
        let _ = Command::new("kill")
            .args(["-KILL", &p.to_string()])
            .output();
    }
    std::thread::sleep(Duration::from_millis(300));
    l.send(&batch);
    let (v, err) = stop(child);
    let total = v["total"].clone();
    let sent = 2 * batch.len() as u64;
    assert_eq!(num(&total, "packets"), sent, "{v}");
    assert_eq!(num(&total, "kernel_packets"), sent, "{v}");
    assert_eq!(num(&total, "dropped"), 0, "{v}");
    // the killed reader: reported at once and in the summary; what its worker read after
    // is counted as lost to it
    assert!(
        err.contains("worker 1's reader") && err.contains("ended mid-run"),
        "{err}"
    );
    let w1 = worker(&v, 1);
    assert_eq!(w1["reader"]["exit"], 137, "{w1}");
    assert!(num(w1, "packets") > 0, "{w1}");
    assert!(num(w1, "reader_gone") > 0, "{w1}");
    assert_eq!(
        num(w1, "streamed") + num(w1, "reader_gone"),
        num(w1, "packets"),
        "{w1}"
    );
    // the others: every packet in their files, exit 0
    let mut seen: BTreeMap<u16, usize> = BTreeMap::new();
    let mut in_files = 0;
    for i in [0usize, 2, 3] {
        let w = worker(&v, i);
        assert_eq!(w["reader"]["exit"], 0, "{w}");
        assert_eq!(num(w, "pipe_dropped") + num(w, "reader_gone"), 0, "{w}");
        assert_eq!(num(w, "streamed"), num(w, "packets"), "{w}");
        let f = flows_in(&dir.join(format!("w{i}.pcap")));
        let n: u64 = f.values().sum();
        assert_eq!(
            n,
            num(w, "packets"),
            "worker {i}'s file against the summary: {f:?}"
        );
        in_files += n;
        for (port, k) in f {
            assert_eq!(k, 20, "flow {port}: all of its packets in one file");
            assert!(seen.insert(port, i).is_none(), "flow {port} in two files");
        }
    }
    // the flows not in those files are worker 1's: 20 packets each
    assert_eq!(
        in_files + num(w1, "packets"),
        sent,
        "the counts per worker add up to the kernel's"
    );
    assert_eq!(
        (64 - seen.len()) as u64 * 20,
        num(w1, "packets"),
        "worker 1 had the other flows, whole"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A reader that never reads: its pipe fills, its worker drops whole records for it and goes
/// on reading its socket (no kernel drops for it); the other worker's reader gets every
/// packet; at the end the silent reader, which does not exit at its end of file, is ended
/// by pfanout, and the summary says so.
#[test]
fn a_reader_that_does_not_read_costs_only_its_own_packets() {
    let l = link("pfy");
    let dir = tmpdir("slow");
    let out0 = dir.join("w0.pcap");
    let cmd = format!(
        "if [ %i = 0 ]; then cat > {}; else exec sleep 600; fi",
        out0.display()
    );
    let child = l.run(
        &["group", "82", "mode", "lb", "workers", "2", "exec", &cmd],
        82,
        2,
    );
    // 12000 frames of 1400 bytes, alternating: 8.4 MB each, beyond a pipe and pfanout's
    // buffer for the reader that does not read
    let batch: Vec<Vec<u8>> = (0..12000).map(|i| frame(5000 + (i % 7), 1400)).collect();
    l.send(&batch);
    let (v, _) = stop(child);
    let (w0, w1) = (worker(&v, 0), worker(&v, 1));
    // (a burst may overflow a socket's queue: the kernel's drops are not the point here)
    assert_eq!(
        num(&v["total"], "packets") + num(&v["total"], "dropped"),
        12000,
        "{v}"
    );
    // worker 0: everything, in its file
    assert_eq!(num(w0, "pipe_dropped"), 0, "{w0}");
    assert_eq!(num(w0, "streamed"), num(w0, "packets"), "{w0}");
    assert_eq!(w0["reader"]["exit"], 0, "{w0}");
    let n: u64 = flows_in(&out0).values().sum();
    assert_eq!(n, num(w0, "packets"));
    // worker 1: dropped for its reader, counted; the reader ended by pfanout
    assert!(num(w1, "pipe_dropped") > 0, "{w1}");
    assert_eq!(
        num(w1, "streamed") + num(w1, "pipe_dropped"),
        num(w1, "packets"),
        "{w1}"
    );
    assert_eq!(w1["reader"]["killed_by_pfanout"], true, "{w1}");
    assert_eq!(w1["stream_cut"], true, "{w1}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `write -` with one worker: the pcap stream on standard output (tcpdump reads it), the
/// summary on standard error; with two workers it is refused as usage.
#[test]
fn write_dash_streams_one_worker_to_standard_output() {
    let l = link("pfz");
    let o = PF.at(
        &l.rx,
        &[
            "run", "dev", "pr", "mode", "hash", "workers", "2", "write", "-",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let dir = tmpdir("dash");
    let file = dir.join("out.pcap");
    let f = std::fs::File::create(&file).expect("file");
    let child = Command::new(PF.bin)
        .args([
            "-n",
            l.rx.name(),
            "-j",
            "run",
            "dev",
            "pr",
            "group",
            "83",
            "mode",
            "hash",
            "workers",
            "1",
            "write",
            "-",
        ])
        .stdout(f)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let t = Instant::now();
    while !PF
        .json(&l.rx, &["show"])
        .as_array()
        .is_some_and(|g| g.iter().any(|g| g["group"] == 83))
    {
        assert!(t.elapsed() < Duration::from_secs(10), "no group 83");
        std::thread::sleep(Duration::from_millis(50));
    }
    let batch: Vec<Vec<u8>> = (0..50).map(|i| frame(6000 + i, 100)).collect();
    l.send(&batch);
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .output();
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    let summary: Value = serde_json::from_str(err.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {err}"));
    assert_eq!(summary["type"], "summary", "{err}");
    assert_eq!(num(&summary["total"], "packets"), 50, "{summary}");
    let n: u64 = flows_in(&file).values().sum();
    assert_eq!(n, 50, "the stream holds every packet");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `show -s`: the rollover counters of every member whose counters can be read, another
/// program's (this test's own sockets, borrowed with pidfd_getfd) included, equal to what the
/// owner reads itself; a caller who cannot borrow them (the user nobody, who cannot see root's
/// descriptors) is told why, per socket.
#[test]
fn show_s_reads_rollover_counters_of_other_programs_or_says_why_not() {
    let l = link("pfw");
    // two members of group 84, hash with rollover, that never read: one flow fills the
    // first, the rest rolls over to the second
    let socks = in_netns(&l.rx, || {
        let idx = mpt_sys::iface::index("pr").expect("pr");
        (0..2)
            .map(|_| {
                let s = PacketSocket::open(idx, mpt_sys::packet::ETH_P_ALL).expect("socket");
                s.join_fanout(84, 0x1000, 0).expect("join");
                s
            })
            .collect::<Vec<_>>()
    });
    let batch: Vec<Vec<u8>> = (0..600).map(|_| frame(7000, 1000)).collect();
    l.send(&batch);
    let own: Vec<(u64, u64, u64)> = socks
        .iter()
        .map(|s| {
            let r = s.rollover_stats().expect("stats").expect("rollover state");
            (r.all, r.huge, r.failed)
        })
        .collect();
    assert!(
        own.iter().map(|r| r.0).sum::<u64>() > 0,
        "nothing rolled over: {own:?}"
    );
    let g = PF.json(&l.rx, &["-s", "show", "group", "84"]);
    let members = g[0]["sockets"].as_array().expect("sockets").clone();
    assert_eq!(members.len(), 2, "{g}");
    let mut theirs: Vec<(u64, u64, u64)> = members
        .iter()
        .map(|m| {
            let r = &m["rollover"];
            assert!(r.is_object(), "not read: {m}");
            (num(r, "all"), num(r, "huge"), num(r, "failed"))
        })
        .collect();
    let mut mine = own.clone();
    theirs.sort();
    mine.sort();
    assert_eq!(theirs, mine, "{g}");
    // the user nobody sees the sockets (sock_diag) but not root's descriptors
    let dir = tmpdir("nobody");
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let bin = dir.join("pfanout");
    std::fs::copy(PF.bin, &bin).expect("copy");
    let o = Command::new("ip")
        .args(["netns", "exec", l.rx.name(), "setpriv"])
        .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
        .arg(&bin)
        .args(["-s", "-j", "show", "group", "84"])
        .output()
        .expect("setpriv");
    assert!(o.status.success(), "{o:?}");
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    for m in v[0]["sockets"].as_array().expect("sockets") {
        assert!(m["rollover"].is_null(), "{m}");
        let why = m["rollover_unread"].as_str().unwrap_or_default();
        assert!(why.contains("no process holding it"), "{m}");
    }
    let o = Command::new("ip")
        .args(["netns", "exec", l.rx.name(), "setpriv"])
        .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
        .arg(&bin)
        .args(["-s", "show", "group", "84"])
        .output()
        .expect("setpriv");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("rollover counters not read: no process holding it"),
        "{text}"
    );
    drop(socks);
    let _ = std::fs::remove_dir_all(&dir);
}

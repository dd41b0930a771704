//! Root integration tests of `pfanout metrics`: `promtool check metrics` (Debian's, unpacked
//! by `cargo xtask setup`) on real output from throwaway namespaces, an empty one and one
//! where a `pfanout run` group of slow workers is flooded until a member drops; the drops held
//! to what iproute2's `ss -0 -m -e` says of the same sockets.

#[path = "helpers/promtool.rs"]
mod promtool;

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mpt_testkit::{require_root, Netns, Tool};

const PF: Tool = Tool::new(env!("CARGO_BIN_EXE_pfanout"));

#[test]
fn an_empty_namespace_gives_typed_families() {
    require_root();
    let ns = Netns::new("px-empty");
    let text = PF.ok(&ns, "metrics");
    promtool::check(&text);
    let types = promtool::types(&text);
    assert!(types.len() >= 7, "{text}");
    for (n, k) in &types {
        assert!(n.starts_with("pfanout_"), "{n}");
        assert_eq!(n.ends_with("_total"), k == "counter", "{n} {k}");
    }
    assert!(promtool::samples(&text).is_empty(), "{text}");
    let o = PF.at(&ns, "metrics now");
    assert_eq!(o.status.code(), Some(1), "{o:?}");
}

/// `pfanout run` in the background, ended (SIGTERM) and reaped on drop.
struct Run(Child);

impl Drop for Run {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .output();
        let _ = self.0.wait();
    }
}

/// Drops by socket inode, as `ss -0 -m -e` (packet sockets, their memory) prints them.
fn ss_drops(ns: &Netns) -> BTreeMap<String, u64> {
    let o = ns.exec("ss", "-0 -m -e -n");
    assert!(o.status.success(), "ss: {o:?}");
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    let mut out = BTreeMap::new();
    let mut ino = None;
    for line in text.lines() {
        for w in line.split_whitespace() {
            if let Some(i) = w.strip_prefix("ino:") {
                ino = Some(i.to_string());
            }
            if let Some(m) = w.strip_prefix("skmem:(") {
                let d = m
                    .trim_end_matches(')')
                    .split(',')
                    .find_map(|f| f.strip_prefix('d'))
                    .and_then(|d| d.parse().ok())
                    .unwrap_or_else(|| panic!("no drops in {line}"));
                out.insert(ino.clone().expect("ino before skmem"), d);
            }
        }
    }
    out
}

#[test]
fn member_drops_are_what_ss_says() {
    require_root();
    let ns = Netns::new("px");
    ns.try_sysctl(&[
        ("net.ipv6.conf.all.disable_ipv6", "1"),
        ("net.ipv6.conf.default.disable_ipv6", "1"),
    ])
    .expect("sysctl");
    ns.ip_ok("link add v0 type veth peer name v1");
    ns.ip_ok("link set v0 up");
    ns.ip_ok("link set v1 up");
    ns.ip_ok("addr add 192.0.2.1/24 dev v1");
    // a neighbour that is never asked for: frames to a foreign MAC, which v0's stack drops and
    // its packet sockets see
    ns.ip_ok("neigh add 192.0.2.9 lladdr 02:00:00:00:00:99 dev v1 nud permanent");
    let child = Command::new(PF.bin)
        .args(["-n", ns.name(), "-j", "run", "dev", "v0", "group", "31"])
        .args(["mode", "hash", "workers", "2", "per-worker", "1"])
        .args(["rcvbuf", "65536", "duration", "60"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn pfanout run");
    let _run = Run(child);
    let t = Instant::now();
    while !PF.ok(&ns, "metrics").contains("pfanout_group_members{") {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the group never appeared"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // one flow: one worker, taking a packet a second, its buffer full soon
    let o = ns.exec("ping", "-c 400 -i 0.002 -s 1400 -w 2 -q 192.0.2.9");
    assert!(!o.stderr.starts_with(b"ping: "), "ping: {o:?}");
    std::thread::sleep(Duration::from_millis(200));

    let text = PF.ok(&ns, "metrics");
    promtool::check(&text);
    let ss = ss_drops(&ns);
    let s = promtool::samples(&text);
    assert!(s.iter().all(|x| x.label("netns") == Some(ns.name())));
    let group = [("group", "31")];
    assert_eq!(promtool::one(&s, "pfanout_group_members", &group), 2);
    assert_eq!(
        promtool::one(
            &s,
            "pfanout_group_info",
            &[
                ("group", "31"),
                ("mode", "hash"),
                ("dev", "v0"),
                ("flags", "none")
            ]
        ),
        1
    );
    let members = promtool::find(&s, "pfanout_member_drops_total", &group);
    assert_eq!(members.len(), 2, "{text}");
    let mut sum = 0;
    for m in &members {
        let ino = m.label("socket").expect("socket label");
        assert_eq!(Some(&m.value), ss.get(ino), "socket {ino}: ss says {ss:?}");
        assert_eq!(
            promtool::one(
                &s,
                "pfanout_member_info",
                &[("socket", ino), ("process", "pfanout")]
            ),
            1
        );
        sum += m.value;
    }
    assert!(sum > 0, "the flood made no drops: {text}");
    assert_eq!(promtool::one(&s, "pfanout_group_drops_total", &group), sum);
}

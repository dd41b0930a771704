//! The two-namespace link the pfanout root tests share (`#[path]`-included by
//! `pfanout_netns.rs` and `pfanout_tap.rs`): a sender `tx` and a receiver `rx` joined by a
//! veth pair (`pt` in tx, `pr` in rx), IPv6 off on both so that nothing but the test's frames
//! crosses it.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mpt_testkit::{require_root, veth, Netns, Tool};

pub const PF: Tool = Tool::new(env!("CARGO_BIN_EXE_pfanout"));
/// A destination MAC nobody has: the receiver's stack drops such frames at once.
pub const FOREIGN_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x99];
pub const TX_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];

pub struct Link {
    pub tx: Netns,
    pub rx: Netns,
}

pub fn link(tag: &str) -> Link {
    require_root();
    let tx = Netns::new(&format!("{tag}t"));
    let rx = Netns::new(&format!("{tag}r"));
    for ns in [&tx, &rx] {
        ns.try_sysctl(&[
            ("net.ipv6.conf.all.disable_ipv6", "1"),
            ("net.ipv6.conf.default.disable_ipv6", "1"),
        ])
        .expect("sysctl");
    }
    veth(&tx, "pt", &rx, "pr");
    Link { tx, rx }
}

/// `pfanout -n NS -j run dev DEV ARGS...` in the background, once its group `group` has
/// `members` members in `pfanout show` (the child is the caller's to wait for).
#[allow(clippy::zombie_processes)]
pub fn run_group(ns: &Netns, dev: &str, args: &[&str], group: u16, members: usize) -> Child {
    let mut a: Vec<String> = vec!["-n".into(), ns.name().into(), "-j".into()];
    a.extend(["run", "dev", dev].map(String::from));
    a.extend(args.iter().map(|s| s.to_string()));
    let mut child = Command::new(PF.bin)
        .args(&a)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn pfanout");
    let t = Instant::now();
    loop {
        let g = PF
            .json(ns, &["show"])
            .as_array()
            .cloned()
            .unwrap_or_default();
        if g.iter()
            .any(|g| g["group"] == group && g["members"].as_u64() == Some(members as u64))
        {
            return child;
        }
        if t.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let out = child.wait_with_output().expect("wait");
            panic!(
                "group {group} with {members} members never appeared: {g:?}; pfanout said {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

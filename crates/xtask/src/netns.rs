//! Throwaway network namespaces that are always removed: [`Netns`] deletes its namespace on
//! drop (also when unwinding from a panic), with the state mproute pinned for it in the host's
//! bpffs and its lock file. Namespaces left behind by an xtask that was killed are swept by
//! [`sweep_stale`] on the next run.

use std::process::{Command, Stdio};

use anyhow::Result;

use crate::util::run;

/// Name prefixes of namespaces xtask creates; the name goes on with `-<pid>-`.
pub const PREFIXES: [&str; 2] = ["mptdemo", "mptbench"];

/// A named network namespace (`ip netns add`), deleted when dropped.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// `ip netns add NAME` and bring `lo` up.
    pub fn create(name: String) -> Result<Self> {
        run(Command::new("ip").args(["netns", "add", &name]))?;
        let ns = Netns { name };
        run(Command::new("ip").args(["-n", &ns.name, "link", "set", "lo", "up"]))?;
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // mproute pins a namespace's state in the host's bpffs and keeps a lock file in /run;
        // neither goes away with the namespace.
        if let Some(c) = mpt_testkit::netns_cookie(&self.name) {
            mpt_testkit::remove_mproute_state(c);
        }
        let status = Command::new("ip")
            .args(["netns", "del", &self.name])
            .stdin(Stdio::null())
            .status();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => eprintln!("xtask: warning: ip netns del {} failed ({s})", self.name),
            Err(e) => eprintln!("xtask: warning: ip netns del {}: {e}", self.name),
        }
    }
}

/// A unique namespace name: `PREFIX-<pid>-TAG`.
pub fn unique(prefix: &str, tag: &str) -> String {
    format!("{prefix}-{}-{tag}", std::process::id())
}

/// Deletes `/run/netns/{mptdemo,mptbench}-<pid>-*` whose xtask process is gone.
pub fn sweep_stale() {
    let Ok(entries) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = PREFIXES.iter().find_map(|p| {
            let rest = name.strip_prefix(p)?.strip_prefix('-')?;
            rest.split('-').next()?.parse::<u32>().ok()
        }) else {
            continue;
        };
        if std::path::Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let ok = Command::new("ip")
            .args(["netns", "del", &name])
            .stdin(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            println!("xtask: removed stale namespace {name}");
        }
    }
}

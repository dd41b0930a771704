//! Throwaway network namespaces: unique names, removed on drop (also when a test panics), with
//! what our tools keep for a namespace outside it (pinned BPF state, lock files), and a check
//! that nothing was left behind by a process that died.
//!
//! A name is `PREFIX-<pid>-<n>-<tag>`: tests use [`TEST_PREFIX`], the demo and the benchmarks
//! their own, so that each can find and sweep what a killed run of its own left behind.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use crate::cmd::{run, run_ok, try_ip, Words};

/// Prefix of every namespace the tests create: `mpt-t-<pid>-<n>-<tag>`.
pub const TEST_PREFIX: &str = "mpt-t";
/// The same with its dash, as it starts a name.
pub const NS_PREFIX: &str = "mpt-t-";
/// Tools that keep state for a namespace under `/sys/fs/bpf/<suite>/<cookie>` and
/// `/run/<suite>/<cookie>.lock`.
pub const SUITES: &[&str] = &["mproute", "ila", "pfanout"];

/// A network namespace that exists for the life of this value.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Create `mpt-t-<pid>-<n>-<tag>` with `lo` up; panics if it cannot.
    pub fn new(tag: &str) -> Netns {
        Self::try_create(TEST_PREFIX, tag).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Create `PREFIX-<pid>-<n>-<tag>` with `lo` up.
    pub fn try_create(prefix: &str, tag: &str) -> Result<Netns, String> {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let mut name = format!("{prefix}-{}-{n}-{tag}", std::process::id());
        name.truncate(60);
        Self::try_named(&name)
    }

    /// Create the namespace `name`, exactly so named (a caller with a naming scheme of its own,
    /// such as `pfanout bench`), with `lo` up; it is removed when the value is dropped.
    pub fn try_named(name: &str) -> Result<Netns, String> {
        // The first `ip netns add` makes /run/netns a shared mount: not concurrently.
        static CREATE: Mutex<()> = Mutex::new(());
        {
            let _one = CREATE.lock().unwrap_or_else(|e| e.into_inner());
            try_ip(&["netns", "add", name])?;
        }
        let ns = Netns {
            name: name.to_string(),
        };
        try_ip(&["-n", ns.name.as_str(), "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Start `f` on a thread of its own inside the namespace (a server, a capture) and return
    /// its handle; joining it returns what `f` returns.
    pub fn spawn_in<T, F>(&self, f: F) -> std::thread::JoinHandle<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let path = format!("/run/netns/{}", self.name);
        std::thread::Builder::new()
            .name(format!("in {}", self.name))
            .spawn(move || {
                let fd = std::fs::File::open(&path).unwrap_or_else(|e| panic!("open {path}: {e}"));
                nix::sched::setns(&fd, nix::sched::CloneFlags::CLONE_NEWNET)
                    .unwrap_or_else(|e| panic!("setns {path}: {e}"));
                f()
            })
            .expect("spawn a thread for the namespace")
    }

    /// Run `f` on a thread of its own inside the namespace (and, with `pin_cpu`, on the CPU
    /// it starts on: per-CPU BPF state stays on one CPU), and return what it returns; a panic
    /// in `f` is the caller's.
    pub fn run_in_thread<T, F>(&self, pin_cpu: bool, f: F) -> T
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let path = format!("/run/netns/{}", self.name);
        let worker = std::thread::Builder::new()
            .name(format!("in {}", self.name))
            .spawn(move || {
                let fd = std::fs::File::open(&path).unwrap_or_else(|e| panic!("open {path}: {e}"));
                nix::sched::setns(&fd, nix::sched::CloneFlags::CLONE_NEWNET)
                    .unwrap_or_else(|e| panic!("setns {path}: {e}"));
                if pin_cpu {
                    let cpu = nix::sched::sched_getcpu().expect("sched_getcpu");
                    let mut set = nix::sched::CpuSet::new();
                    set.set(cpu).expect("cpu set");
                    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
                        .expect("pin the thread to its CPU");
                }
                f()
            })
            .expect("spawn a thread for the namespace");
        match worker.join() {
            Ok(v) => v,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `ip -n NAME ARGS` ([`Words`]: one string or an array).
    pub fn ip(&self, args: &(impl Words + ?Sized)) -> std::process::Output {
        let mut a = vec!["-n", self.name.as_str()];
        a.extend(args.words());
        run("ip", &a)
    }

    /// `ip -n NAME ARGS`, which must succeed.
    pub fn ip_ok(&self, args: &(impl Words + ?Sized)) -> String {
        self.try_ip(args).unwrap_or_else(|e| panic!("{e}"))
    }

    /// `ip -n NAME ARGS`, its output or the failure.
    pub fn try_ip(&self, args: &(impl Words + ?Sized)) -> Result<String, String> {
        let mut a = vec!["-n", self.name.as_str()];
        a.extend(args.words());
        try_ip(&a)
    }

    /// `ip -j -n NAME ARGS` parsed (the oracle).
    pub fn ip_json(&self, args: &(impl Words + ?Sized)) -> serde_json::Value {
        let mut a = vec!["-j", "-n", self.name.as_str()];
        a.extend(args.words());
        let out = run_ok("ip", &a);
        if out.trim().is_empty() {
            return serde_json::Value::Array(Vec::new());
        }
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("ip {}: bad JSON {e}: {out}", a.join(" ")))
    }

    /// `ip netns exec NAME CMD ARGS`.
    pub fn exec(&self, cmd: &str, args: &(impl Words + ?Sized)) -> std::process::Output {
        let mut a = vec!["netns", "exec", self.name.as_str(), cmd];
        a.extend(args.words());
        run("ip", &a)
    }

    /// `ip netns exec NAME sysctl -q -w KEY=VALUE ...`, which must succeed.
    pub fn try_sysctl(&self, settings: &[(&str, &str)]) -> Result<(), String> {
        let kv: Vec<String> = settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut a = vec!["netns", "exec", self.name.as_str(), "sysctl", "-q", "-w"];
        a.extend(kv.iter().map(String::as_str));
        try_ip(&a).map(|_| ())
    }

    /// The namespace's cookie (`SO_NETNS_COOKIE`).
    pub fn cookie(&self) -> Option<u64> {
        netns_cookie(&self.name)
    }

    /// Delete the namespace now with `ip netns del` and nothing else (what a test of what the
    /// deletion alone does needs; dropping also removes what the tools left).
    pub fn delete(self) -> Result<(), String> {
        let me = std::mem::ManuallyDrop::new(self);
        let o = run("ip", &["netns", "del", &me.name]);
        if o.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&o.stderr).trim_end().to_string())
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Our tools pin a namespace's state in the host's bpffs and keep a lock file in /run;
        // neither goes away with the namespace, so remove them with it.
        let cookie = self.cookie();
        let o = run("ip", &["netns", "del", &self.name]);
        if !o.status.success() {
            eprintln!(
                "warning: ip netns del {}: {}",
                self.name,
                String::from_utf8_lossy(&o.stderr).trim_end()
            );
        }
        if let Some(c) = cookie {
            remove_tool_state(c);
        }
    }
}

/// The identity our tools give the named namespace, read on a thread inside it: its cookie
/// (`SO_NETNS_COOKIE`), or before 5.14 its inode number with the top bit set; the name of
/// their pin directories and lock files for it.
pub fn netns_cookie(name: &str) -> Option<u64> {
    let f = std::fs::File::open(format!("/run/netns/{name}")).ok()?;
    std::thread::spawn(move || {
        use std::os::fd::AsFd;
        nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).ok()?;
        let s = nix::sys::socket::socket(
            nix::sys::socket::AddressFamily::Unix,
            nix::sys::socket::SockType::Datagram,
            nix::sys::socket::SockFlag::SOCK_CLOEXEC,
            None,
        )
        .ok()?;
        let mut v: u64 = 0;
        let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
        use std::os::fd::AsRawFd;
        // SAFETY: getsockopt writes at most `len` bytes into `v`, a live u64.
        let rc = unsafe {
            libc::getsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_NETNS_COOKIE,
                (&mut v as *mut u64).cast(),
                &mut len,
            )
        };
        if rc == 0 {
            return Some(v);
        }
        // kernels without SO_NETNS_COOKIE (before 5.14): the tools' identity is the inode
        // number with the top bit set (mpt_sys::netns::cookie)
        use std::os::unix::fs::MetadataExt;
        let md = std::fs::metadata("/proc/thread-self/ns/net").ok()?;
        Some(md.ino() | (1 << 63))
    })
    .join()
    .ok()
    .flatten()
}

/// Remove what our tools keep for a namespace outside it (pins in the host's bpffs, lock files
/// in /run): neither goes away with the namespace.
pub fn remove_tool_state(cookie: u64) {
    let name = id_name(cookie);
    for suite in SUITES {
        let _ = std::fs::remove_dir_all(format!("/sys/fs/bpf/{suite}/{name}"));
        let _ = std::fs::remove_file(format!("/run/{suite}/{name}.lock"));
    }
}

/// The tools' name for a namespace identity in paths (`mpt_sys::netns::id_name`): the cookie,
/// or `ino-N` for an inode number (kernels before 5.14).
pub fn id_name(cookie: u64) -> String {
    if cookie >> 63 == 1 {
        format!("ino-{}", cookie & !(1 << 63))
    } else {
        cookie.to_string()
    }
}

/// Namespaces named `PREFIX-<pid>-...` whose creating process is gone.
pub fn dead_with(prefix: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/run/netns") else {
        return Vec::new();
    };
    let mut v: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| {
            let Some(rest) = n.strip_prefix(prefix).and_then(|r| r.strip_prefix('-')) else {
                return false;
            };
            let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
                return false;
            };
            !std::path::Path::new(&format!("/proc/{pid}")).exists()
        })
        .collect();
    v.sort();
    v
}

/// Namespaces created by the tests whose creating process is gone: a leak.
pub fn leaked() -> Vec<String> {
    dead_with(TEST_PREFIX)
}

/// Delete the namespaces of [`dead_with`] `prefix` (left by a run that was killed), with their
/// tool state; returns their names.
pub fn sweep(prefix: &str) -> Vec<String> {
    dead_with(prefix)
        .into_iter()
        .filter(|n| {
            if let Some(c) = netns_cookie(n) {
                remove_tool_state(c);
            }
            run("ip", &["netns", "del", n]).status.success()
        })
        .collect()
}

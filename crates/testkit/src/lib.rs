//! Test kit for root integration tests: throwaway network namespaces (unique names, removed on
//! drop, panics included), veth topologies, and the `ip -j` oracle.
//!
//! Nothing here touches the host's interfaces or routes: every device and address lives in a
//! namespace the test created.

pub mod traffic;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

/// Prefix of every namespace this kit creates: `mpt-t-<pid>-<n>-<tag>`.
pub const NS_PREFIX: &str = "mpt-t-";

/// Fail loudly (never skip) when not root: CI runs the suite as root.
pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    assert_eq!(
        uid, 0,
        "this test needs root (CI runs it as root); it is not skipped on purpose"
    );
}

/// Run a command and return its output; panics only if it cannot be started.
pub fn run(cmd: &str, args: &[&str]) -> Output {
    Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd}: {e}"))
}

/// Run a command that must succeed; returns its stdout.
pub fn run_ok(cmd: &str, args: &[&str]) -> String {
    let o = run(cmd, args);
    assert!(
        o.status.success(),
        "{cmd} {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A network namespace that exists for the life of this value.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Create `mpt-t-<pid>-<n>-<tag>` with `lo` up.
    pub fn new(tag: &str) -> Netns {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let mut name = format!("{NS_PREFIX}{}-{n}-{tag}", std::process::id());
        name.truncate(60);
        run_ok("ip", &["netns", "add", &name]);
        let ns = Netns { name };
        ns.ip_ok(&["link", "set", "lo", "up"]);
        ns
    }
    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// `ip -n NAME ARGS`.
    pub fn ip(&self, args: &[&str]) -> Output {
        let mut a = vec!["-n", self.name.as_str()];
        a.extend_from_slice(args);
        run("ip", &a)
    }
    /// `ip -n NAME ARGS`, which must succeed.
    pub fn ip_ok(&self, args: &[&str]) -> String {
        let mut a = vec!["-n", self.name.as_str()];
        a.extend_from_slice(args);
        run_ok("ip", &a)
    }
    /// `ip -j -n NAME ARGS` parsed (the oracle).
    pub fn ip_json(&self, args: &[&str]) -> serde_json::Value {
        let mut a = vec!["-j", "-n", self.name.as_str()];
        a.extend_from_slice(args);
        let out = run_ok("ip", &a);
        if out.trim().is_empty() {
            return serde_json::Value::Array(Vec::new());
        }
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("ip {}: bad JSON {e}: {out}", a.join(" ")))
    }
    /// `ip netns exec NAME CMD ARGS`.
    pub fn exec(&self, cmd: &str, args: &[&str]) -> Output {
        let mut a = vec!["netns", "exec", self.name.as_str(), cmd];
        a.extend_from_slice(args);
        run("ip", &a)
    }
}

/// The cookie (`SO_NETNS_COOKIE`) of the named namespace, read on a thread inside it: the
/// name of mproute's pin directory and lock file for it.
pub fn netns_cookie(name: &str) -> Option<u64> {
    let f = std::fs::File::open(format!("/run/netns/{name}")).ok()?;
    std::thread::spawn(move || {
        use std::os::fd::AsFd;
        nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).ok()?;
        // SAFETY: plain socket/getsockopt/close on a descriptor we own.
        unsafe {
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM, 0);
            if fd < 0 {
                return None;
            }
            let mut v: u64 = 0;
            let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
            let rc = libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_NETNS_COOKIE,
                (&mut v as *mut u64).cast(),
                &mut len,
            );
            libc::close(fd);
            (rc == 0).then_some(v)
        }
    })
    .join()
    .ok()
    .flatten()
}

/// Remove what mproute keeps for a namespace outside it (pins in the host's bpffs, the lock
/// file in /run): neither goes away with the namespace.
pub fn remove_mproute_state(cookie: u64) {
    let _ = std::fs::remove_dir_all(format!("/sys/fs/bpf/mproute/{cookie}"));
    let _ = std::fs::remove_file(format!("/run/mproute/{cookie}.lock"));
}

/// Run `program ARGS`, feed it `lines` on standard input and parse every non-empty line it
/// prints as JSON (`mproute -j -b -`, `ip -j -batch -`: one answer per command).
pub fn batch_json_lines(program: &str, args: &[&str], lines: &[String]) -> Vec<serde_json::Value> {
    use std::io::Write;
    let mut child = Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    {
        let mut stdin = child.stdin.take().expect("stdin of the batch");
        for l in lines {
            writeln!(stdin, "{l}").expect("write to the batch");
        }
    }
    let out = child.wait_with_output().expect("batch output");
    assert!(
        out.status.success(),
        "{program} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{program}: bad JSON {e}: {l}")))
        .collect()
}

impl Netns {
    /// The namespace's cookie (`SO_NETNS_COOKIE`).
    pub fn cookie(&self) -> Option<u64> {
        netns_cookie(&self.name)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // mproute pins a namespace's state in the host's bpffs and keeps a lock file in /run;
        // neither goes away with the namespace, so remove them with it.
        let cookie = self.cookie();
        let _ = run("ip", &["netns", "del", &self.name]);
        if let Some(c) = cookie {
            remove_mproute_state(c);
        }
    }
}

/// A veth pair from `a:an` to `b:bn`, both ends up.
pub fn veth(a: &Netns, an: &str, b: &Netns, bn: &str) {
    let tmp = format!("t{}", std::process::id() % 100_000);
    run_ok(
        "ip",
        &[
            "-n",
            a.name(),
            "link",
            "add",
            an,
            "type",
            "veth",
            "peer",
            "name",
            &tmp,
            "netns",
            b.name(),
        ],
    );
    b.ip_ok(&["link", "set", &tmp, "name", bn]);
    a.ip_ok(&["link", "set", an, "up"]);
    b.ip_ok(&["link", "set", bn, "up"]);
}

/// A router namespace `r` with two links: `va` to `a` (10.1.0.0/24, 2001:db8:1::/64) and `vb` to
/// `b` (10.2.0.0/24, 2001:db8:2::/64). The router has .1 / ::1, the neighbours .2 / ::2.
#[derive(Debug)]
pub struct TwoPaths {
    /// The router.
    pub r: Netns,
    /// Neighbour on va.
    pub a: Netns,
    /// Neighbour on vb.
    pub b: Netns,
}

impl TwoPaths {
    /// Build it.
    pub fn new(tag: &str) -> TwoPaths {
        let r = Netns::new(&format!("{tag}r"));
        let a = Netns::new(&format!("{tag}a"));
        let b = Netns::new(&format!("{tag}b"));
        veth(&r, "va", &a, "eth0");
        veth(&r, "vb", &b, "eth0");
        for (ns, v4, v6, dev) in [
            (&r, "10.1.0.1/24", "2001:db8:1::1/64", "va"),
            (&r, "10.2.0.1/24", "2001:db8:2::1/64", "vb"),
            (&a, "10.1.0.2/24", "2001:db8:1::2/64", "eth0"),
            (&b, "10.2.0.2/24", "2001:db8:2::2/64", "eth0"),
        ] {
            ns.ip_ok(&["addr", "add", v4, "dev", dev]);
            ns.ip_ok(&["addr", "add", v6, "dev", dev, "nodad"]);
        }
        TwoPaths { r, a, b }
    }
}

/// Namespaces created by this kit whose creating process is gone: a leak.
pub fn leaked() -> Vec<String> {
    let out = run_ok("ip", &["netns", "list"]);
    out.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|n| {
            let rest = n.strip_prefix(NS_PREFIX)?;
            let pid: u32 = rest.split('-').next()?.parse().ok()?;
            let alive = std::path::Path::new(&format!("/proc/{pid}")).exists();
            (!alive).then(|| n.to_string())
        })
        .collect()
}

//! What the Debian package carries beside the tools: its systemd units and mproute's side of
//! them. Every unit file in `etc/systemd/` passes `systemd-analyze verify` (templates as
//! `@-` and `@blue`), in a throwaway root that holds the system's own units, the tools at
//! their installed paths (`/usr/bin`) and the restore script (`/usr/lib/mproute`), so that the
//! check of each `ExecStart` binary is a real one; `dataplane watch` tells a service manager
//! `READY=1` after its first round and `STOPPING=1` when stopped. (`cargo xtask test` also
//! installs the package with `dpkg -i` and verifies the installed units, man pages included.)
//!
//! Needs root (the watcher runs in a throwaway namespace).

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mpt_testkit::{require_root, Netns};

const MPROUTE: &str = env!("CARGO_BIN_EXE_mproute");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The unit files of `etc/systemd/` (every one goes into the package).
fn unit_files() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(repo().join("etc/systemd"))
        .expect("etc/systemd")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.extension().and_then(|e| e.to_str()).is_some_and(|e| {
                ["service", "timer", "socket", "path", "target", "mount"].contains(&e)
            })
        })
        .collect();
    v.sort();
    v
}

/// The names to verify for a unit file: a template once for the host (`@-`) and once for a
/// namespace (`@blue`).
fn instances(file: &Path) -> Vec<String> {
    let name = file.file_name().and_then(|n| n.to_str()).expect("a name");
    match name.split_once("@.") {
        Some((stem, ext)) => vec![format!("{stem}@-.{ext}"), format!("{stem}@blue.{ext}")],
        None => vec![name.to_string()],
    }
}

/// A throwaway root: the system's units, ours, the tools and the script at their installed
/// paths, a shell; removed on drop.
struct Root(PathBuf);

impl Root {
    fn new(tag: &str) -> Root {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("units-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let units = dir.join("usr/lib/systemd/system");
        std::fs::create_dir_all(dir.join("usr/lib/systemd")).expect("root");
        let ok = Command::new("cp")
            .args(["-a", "/usr/lib/systemd/system"])
            .arg(&units)
            .status()
            .expect("cp");
        assert!(ok.success(), "copy the system's units");
        for f in unit_files() {
            std::fs::copy(&f, units.join(f.file_name().expect("name"))).expect("copy a unit");
        }
        let bin = dir.join("usr/bin");
        std::fs::create_dir_all(&bin).expect("usr/bin");
        std::os::unix::fs::symlink("usr/bin", dir.join("bin")).expect("bin");
        let built = Path::new(MPROUTE)
            .parent()
            .expect("the binaries' directory");
        for tool in ["mproute", "ila", "pfanout"] {
            let from = built.join(tool);
            if std::fs::hard_link(&from, bin.join(tool)).is_err() {
                std::fs::copy(&from, bin.join(tool)).expect("copy a tool");
            }
        }
        std::fs::copy("/usr/bin/dash", bin.join("sh")).expect("a shell");
        let lib = dir.join("usr/lib/mproute");
        std::fs::create_dir_all(&lib).expect("usr/lib/mproute");
        std::fs::copy(
            repo().join("etc/systemd/mproute-restore"),
            lib.join("mproute-restore"),
        )
        .expect("the restore script");
        Root(dir)
    }

    /// `systemd-analyze verify --root=ROOT --man=no UNITS`: exit status and what it printed.
    /// (The man pages are checked where the package is installed: man looks at the host.)
    fn verify(&self, units: &[String]) -> (bool, String) {
        let o = Command::new("systemd-analyze")
            .arg("verify")
            .arg(format!("--root={}", self.0.display()))
            .arg("--man=no")
            .args(units)
            .output()
            .expect("run systemd-analyze (Debian's systemd package)");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        (o.status.success() && text.trim().is_empty(), text)
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn every_unit_passes_systemd_analyze_verify() {
    let files = unit_files();
    let names: Vec<String> = files.iter().flat_map(|f| instances(f)).collect();
    for must in ["mproute-watch@-.service", "mproute-restore.service"] {
        assert!(names.iter().any(|n| n == must), "{must} in {names:?}");
    }
    let root = Root::new("verify");
    let (ok, text) = root.verify(&names);
    assert!(ok, "systemd-analyze verify {names:?}:\n{text}");

    // the check can fail: without the script at its installed path the restore unit does not
    // pass
    std::fs::remove_file(root.0.join("usr/lib/mproute/mproute-restore")).expect("remove");
    let (ok, text) = root.verify(&["mproute-restore.service".to_string()]);
    assert!(!ok && text.contains("mproute-restore"), "{text}");
}

/// What verify cannot see (the watch unit runs mproute through `sh -c`, for `-`, the host's
/// namespace): every installed path an `Exec` line names is one the package installs.
#[test]
fn exec_lines_name_installed_paths() {
    let installed = [
        "/usr/bin/mproute",
        "/usr/bin/ila",
        "/usr/bin/pfanout",
        "/usr/lib/mproute/mproute-restore",
        "/bin/sh",
    ];
    let mut seen = 0;
    for f in unit_files() {
        let text = std::fs::read_to_string(&f).expect("a unit");
        for l in text.lines().filter(|l| l.starts_with("Exec")) {
            for w in l.split(|c: char| c.is_whitespace() || c == '=' || c == '\'' || c == ';') {
                if w.starts_with('/') {
                    assert!(
                        installed.contains(&w),
                        "{}: {w} is not installed",
                        f.display()
                    );
                    seen += 1;
                }
            }
        }
    }
    assert!(seen >= 3, "{seen} paths");
}

/// `mproute dataplane watch` under a service manager's `$NOTIFY_SOCKET`: `READY=1` once the
/// first round is out, `STOPPING=1` and exit 0 on SIGTERM (systemctl stop).
#[test]
fn watch_notifies_ready_and_stopping() {
    require_root();
    let ns = Netns::new("notify");
    ns.ip_ok("link add v0 type veth peer name p0");
    ns.ip_ok("link set v0 up");
    ns.ip_ok("link set p0 up");
    ns.ip_ok("addr add 192.0.2.1/24 dev v0");
    let ok = Command::new(MPROUTE)
        .args([
            "-n",
            ns.name(),
            "add",
            "198.18.0.0/24",
            "via",
            "192.0.2.2",
            "dev",
            "v0",
        ])
        .status()
        .expect("mproute add");
    assert!(ok.success());
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("notify-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let sock_path = dir.join("notify");
    let sock = UnixDatagram::bind(&sock_path).expect("bind the notify socket");
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut child = Killed(
        Command::new(MPROUTE)
            .args(["-n", ns.name(), "dataplane", "watch"])
            .env("NOTIFY_SOCKET", &sock_path)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start mproute dataplane watch"),
    );
    let out = child.0.stdout.take().expect("stdout");
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let mut buf = [0u8; 256];
    let n = sock
        .recv(&mut buf)
        .unwrap_or_else(|e| panic!("no READY=1 from dataplane watch: {e}"));
    let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(msg.lines().any(|l| l == "READY=1"), "{msg:?}");
    // the first round was printed before: a time stamp, the trigger, the check
    let line = lines
        .recv_timeout(Duration::from_secs(5))
        .expect("the first round's line");
    let mut w = line.split_whitespace();
    let (time, trigger) = (w.next().unwrap_or_default(), w.next().unwrap_or_default());
    assert!(time.len() == 24 && time.ends_with('Z'), "{line:?}");
    assert_eq!(trigger, "start", "{line:?}");
    // SAFETY: kill(2) of our own child.
    let pid = i32::try_from(child.0.id()).expect("pid");
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let n = sock.recv(&mut buf).expect("STOPPING=1 after SIGTERM");
    assert_eq!(&buf[..n], b"STOPPING=1");
    let status = child.0.wait().expect("wait");
    assert_eq!(status.code(), Some(0), "a stop is not a failure");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A child process killed when dropped (a failed test's included).
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

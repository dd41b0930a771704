//! The kernel matrix: Debian's own kernels (bullseye 5.10, bookworm 6.1, trixie 6.12) booted
//! under qemu by virtme-ng over this machine's root file system, each running the demo's steps
//! and a chosen part of the root test suite ([`guest`] is what runs inside).
//!
//! Everything comes from where the rest of set-up comes from: the kernels from Debian's archive
//! by package name (`linux-image-amd64` of each suite names the image; `apt-get download` with
//! a sources list of our own, so the host's apt state stays as it is; `dpkg -x`; `depmod -b`),
//! virtme-ng from PyPI in a venv of our own, qemu from Debian. All of it lives under
//! `target/kernels/` (the guest sees `/tmp` as its own), is made once and reused.
//!
//! KVM is used when it works: `/dev/kvm` exists on machines where guests hang under it, so
//! a short boot with KVM decides ([`accel`]); otherwise plain emulation (TCG), about ten times
//! slower, which is why the tests per kernel are chosen ([`GUEST_TESTS`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::util;

/// virtme-ng's version: the runner the kernel developers use (PyPI), pinned.
const VIRTME_NG: &str = "virtme-ng==1.42";

/// The kernels of the matrix: (series, Debian suite).
pub const SERIES: &[(&str, &str)] = &[
    ("5.10", "bullseye"),
    ("6.1", "bookworm"),
    ("6.12", "trixie"),
];

/// One kernel of the matrix, unpacked.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// `5.10`.
    pub series: &'static str,
    /// `5.10.0-32-amd64` (its modules directory).
    pub release: String,
    /// The Debian package it came from.
    pub package: String,
    /// Its vmlinuz.
    pub image: PathBuf,
}

/// `target/kernels`.
fn top(root: &Path) -> PathBuf {
    util::target_dir(root).join("kernels")
}

/// The Debian mirror the host uses (its deb822 or one-line sources), else deb.debian.org.
fn mirror() -> String {
    let mut texts = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/etc/apt/sources.list.d") {
        for e in rd.flatten() {
            if e.path()
                .extension()
                .is_some_and(|x| x == "sources" || x == "list")
            {
                texts.push(std::fs::read_to_string(e.path()).unwrap_or_default());
            }
        }
    }
    texts.push(std::fs::read_to_string("/etc/apt/sources.list").unwrap_or_default());
    for t in &texts {
        for l in t.lines().map(str::trim) {
            let uri = l.strip_prefix("URIs:").map(str::trim).or_else(|| {
                l.strip_prefix("deb ")
                    .and_then(|r| r.split_whitespace().find(|w| w.starts_with("http")))
            });
            if let Some(u) = uri.and_then(|u| u.split_whitespace().next()) {
                if u.trim_end_matches('/').ends_with("/debian") {
                    return u.trim_end_matches('/').to_string();
                }
            }
        }
    }
    "http://deb.debian.org/debian".to_string()
}

/// `apt-get`/`apt-cache` with our own sources list, lists and cache under `dir`.
fn apt(tool: &str, dir: &Path) -> Command {
    let mut c = Command::new(tool);
    for (k, v) in [
        ("Dir::Etc::SourceList", dir.join("sources.list")),
        ("Dir::Etc::SourceParts", PathBuf::from("/dev/null")),
        ("Dir::State::Lists", dir.join("lists")),
        ("Dir::Cache", dir.join("cache")),
        ("Dir::Cache::Archives", dir.join("debs")),
        ("APT::Architecture", PathBuf::from("amd64")),
        // root may download without the _apt user's sandbox: our directories are root's
        ("APT::Sandbox::User", PathBuf::from("root")),
    ] {
        c.arg("-o").arg(format!("{k}={}", v.display()));
    }
    c
}

/// The kernels, downloaded and unpacked once (idempotent: an unpacked kernel is reused).
pub fn provision(root: &Path) -> Result<Vec<Kernel>> {
    let top = top(root);
    let aptdir = top.join("apt");
    if let Some(found) = unpacked(&top)? {
        println!(
            "kernels: ok ({})",
            found
                .iter()
                .map(|k| k.release.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return Ok(found);
    }
    for d in ["lists/partial", "cache", "debs/partial"] {
        std::fs::create_dir_all(aptdir.join(d))
            .with_context(|| format!("create {}", aptdir.join(d).display()))?;
    }
    let m = mirror();
    let list: String = SERIES
        .iter()
        .map(|(_, suite)| {
            format!(
                "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] {m} {suite} main\n"
            )
        })
        .collect();
    std::fs::write(aptdir.join("sources.list"), list).context("write the kernels' sources list")?;
    println!(
        "kernels: apt-get update ({m}: {})",
        SERIES.iter().map(|s| s.1).collect::<Vec<_>>().join(" ")
    );
    util::run(
        apt("apt-get", &aptdir)
            .args(["-q", "update"])
            .stdout(Stdio::null()),
    )?;
    // linux-image-amd64 of each suite depends on that suite's current kernel image
    let shown = util::output(apt("apt-cache", &aptdir).args(["show", "linux-image-amd64"]))?;
    let mut packages = Vec::new();
    for (series, suite) in SERIES {
        let pkg = shown
            .lines()
            .filter_map(|l| l.strip_prefix("Depends:"))
            .flat_map(|d| d.split(','))
            .map(|d| d.split_whitespace().next().unwrap_or_default().to_string())
            .find(|p| {
                p.strip_prefix("linux-image-").is_some_and(|v| {
                    v.starts_with(&format!("{series}."))
                        && v.ends_with("-amd64")
                        && !v.contains("cloud")
                        && !v.contains("rt-")
                })
            })
            .with_context(|| {
                format!("no linux-image-{series}.*-amd64 in {suite}'s linux-image-amd64")
            })?;
        packages.push(pkg);
    }
    println!("kernels: apt-get download {}", packages.join(" "));
    util::run(
        apt("apt-get", &aptdir)
            .args(["-q", "download"])
            .args(&packages)
            .current_dir(aptdir.join("debs")),
    )?;
    for pkg in &packages {
        let deb = std::fs::read_dir(aptdir.join("debs"))?
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&format!("{pkg}_")) && n.ends_with(".deb"))
            })
            .with_context(|| format!("{pkg}: no .deb after apt-get download"))?;
        let dir = top.join(pkg);
        let partial = top.join(format!("{pkg}.partial"));
        let _ = std::fs::remove_dir_all(&partial);
        std::fs::create_dir_all(&partial)?;
        util::run(Command::new("dpkg").arg("-x").arg(&deb).arg(&partial))?;
        // trixie keeps modules in usr/lib/modules only
        if !partial.join("lib/modules").exists() && partial.join("usr/lib/modules").exists() {
            std::os::unix::fs::symlink("usr/lib", partial.join("lib"))
                .context("link lib -> usr/lib")?;
        }
        let release = pkg.trim_start_matches("linux-image-").to_string();
        util::run(Command::new("depmod").arg("-b").arg(&partial).arg(&release))?;
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::rename(&partial, &dir)
            .with_context(|| format!("move {} into place", dir.display()))?;
    }
    match unpacked(&top)? {
        Some(k) => Ok(k),
        None => bail!(
            "kernels: unpacked, but not found again under {}",
            top.display()
        ),
    }
}

/// The kernels already unpacked under `top`, one per series; `None` unless all are.
fn unpacked(top: &Path) -> Result<Option<Vec<Kernel>>> {
    let Ok(rd) = std::fs::read_dir(top) else {
        return Ok(None);
    };
    let dirs: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
    let mut v = Vec::new();
    for (series, _) in SERIES {
        let found = dirs.iter().find_map(|d| {
            let name = d.file_name()?.to_str()?;
            let release = name.strip_prefix("linux-image-")?;
            if !release.starts_with(&format!("{series}.")) || name.ends_with(".partial") {
                return None;
            }
            let image = d.join("boot").join(format!("vmlinuz-{release}"));
            image.is_file().then(|| Kernel {
                series,
                release: release.to_string(),
                package: name.to_string(),
                image,
            })
        });
        match found {
            Some(k) => v.push(k),
            None => return Ok(None),
        }
    }
    Ok(Some(v))
}

/// virtme-ng's `vng`, installed in `target/kernels/venv` once.
pub fn vng(root: &Path) -> Result<PathBuf> {
    let venv = top(root).join("venv");
    let bin = venv.join("bin/vng");
    if bin.is_file() {
        println!("kernels: virtme-ng: ok");
        return Ok(bin);
    }
    std::fs::create_dir_all(top(root))?;
    // Debian's python3 (python3-venv), not whichever python is first on PATH
    util::run(
        Command::new("/usr/bin/python3")
            .args(["-m", "venv"])
            .arg(&venv),
    )?;
    util::run(Command::new(venv.join("bin/pip")).args(["install", "-q", VIRTME_NG]))?;
    if !bin.is_file() {
        bail!("{} missing after pip install {VIRTME_NG}", bin.display());
    }
    Ok(bin)
}

/// How guests are run: with KVM where a guest boots under it, else plain emulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// Hardware virtualisation.
    Kvm,
    /// qemu's TCG (no KVM, or KVM that hangs).
    Tcg,
}

/// A boot of `kernel` running `cmd` (`sh -c`), its output streamed with `prefix`; returns the
/// guest's exit code (from the marker line the guest prints last) and the output.
fn boot(
    vng: &Path,
    root: &Path,
    kernel: &Kernel,
    accel: Accel,
    cmd: &str,
    limit: Duration,
    echo: bool,
) -> Result<(Option<i32>, String)> {
    let mut c = Command::new(vng);
    c.arg("--run")
        .arg(&kernel.image)
        .args(["--verbose", "--force-9p", "--cpus", "2", "--memory", "2G"])
        .arg("--exec")
        .arg(format!("{cmd}; echo MPT-GUEST-RC=$?"))
        .current_dir(root)
        .env("PATH", path_with(vng))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if accel == Accel::Tcg {
        c.arg("--disable-kvm");
    }
    let mut child = c.spawn().context("start vng")?;
    // the guest's output comes on both of vng's streams (its console on one, the script's on
    // the other, depending on the version): one channel of lines
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let readers = [
        child
            .stdout
            .take()
            .map(|o| Box::new(o) as Box<dyn std::io::Read + Send>),
        child
            .stderr
            .take()
            .map(|e| Box::new(e) as Box<dyn std::io::Read + Send>),
    ]
    .into_iter()
    .flatten()
    .map(|r| {
        let tx = tx.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(r).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        })
    })
    .collect::<Vec<_>>();
    drop(tx);
    let start = Instant::now();
    let mut out = String::new();
    let mut rc = None;
    loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => {
                // the kernel's console messages ([    1.234567] ...) are not ours
                if line.starts_with('[') && line.get(1..13).is_some_and(|t| t.contains('.')) {
                    continue;
                }
                if let Some(v) = line.trim().strip_prefix("MPT-GUEST-RC=") {
                    rc = v.parse().ok();
                    continue;
                }
                if echo {
                    println!("[{}] {line}", kernel.series);
                }
                out.push_str(&line);
                out.push('\n');
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            for r in readers {
                let _ = r.join();
            }
            out.push_str(&format!("(stopped after {} s)\n", limit.as_secs()));
            return Ok((None, out));
        }
    }
    let _ = child.wait();
    for r in readers {
        let _ = r.join();
    }
    Ok((rc, out))
}

/// PATH with the venv's bin first (vng runs its own helpers).
fn path_with(vng: &Path) -> std::ffi::OsString {
    let mut p = std::ffi::OsString::new();
    if let Some(d) = vng.parent() {
        p.push(d);
        p.push(":");
    }
    p.push(std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into()));
    p
}

/// KVM if a guest boots under it within half a minute (`/dev/kvm` can exist where guests
/// hang, as on this project's machines), else TCG. Asked once per run.
pub fn accel(vng: &Path, root: &Path, k: &Kernel) -> Accel {
    if !Path::new("/dev/kvm").exists() {
        println!("kernels: no /dev/kvm: plain emulation (TCG)");
        return Accel::Tcg;
    }
    match boot(
        vng,
        root,
        k,
        Accel::Kvm,
        "true",
        Duration::from_secs(30),
        false,
    ) {
        Ok((Some(0), _)) => {
            println!("kernels: KVM works: guests run under KVM");
            Accel::Kvm
        }
        _ => {
            println!("kernels: /dev/kvm is there but a guest did not boot under it in 30 s: plain emulation (TCG)");
            Accel::Tcg
        }
    }
}

/// What one kernel did.
#[derive(Debug)]
pub struct Outcome {
    /// The kernel.
    pub release: String,
    /// Passed.
    pub ok: bool,
    /// Wall time of the boot and the suite.
    pub secs: f64,
    /// The guest's summary lines (`guest: ...`).
    pub summary: Vec<String>,
}

/// Run the matrix: for each kernel (all, or those whose series is in `only`), boot it and run
/// `xtask guest` inside. `xtask` is this very binary, the test executables are prebuilt
/// (`tests`: name and path, see `test_executables`; the guest gets those it runs in a file:
/// all, or those named in `only_tests`, then without the demo).
pub fn run_matrix(
    root: &Path,
    only: &[String],
    only_tests: &[String],
    tests: &[(String, PathBuf)],
) -> Result<Vec<Outcome>> {
    let kernels = provision(root)?;
    let vng = vng(root)?;
    let kernels: Vec<Kernel> = kernels
        .into_iter()
        .filter(|k| only.is_empty() || only.iter().any(|o| o == k.series))
        .collect();
    let Some(first) = kernels.first() else {
        bail!("no kernel of the matrix matches {only:?} (series: 5.10, 6.1, 6.12)");
    };
    let accel = accel(&vng, root, first);
    // this very binary; `cargo test --workspace` may have built it again meanwhile (a fresh
    // clone's first run: the kernel then says "PATH (deleted)"), and the new one is at PATH
    let me = std::env::current_exe().context("xtask's own path")?;
    let me = match me.to_str().and_then(|p| p.strip_suffix(" (deleted)")) {
        Some(p) => PathBuf::from(p),
        None => me,
    };
    // the guest reads the test executables from a file: a kernel command line is short
    let list_file = top(root).join("guest-tests");
    let mut list = String::new();
    let mut names: Vec<&str> = crate::guest::GUEST_TESTS
        .iter()
        .map(|g| g.name)
        .filter(|n| only_tests.is_empty() || only_tests.iter().any(|o| o == n))
        .collect();
    names.dedup();
    if names.is_empty() {
        bail!("no test executable of the guests is named {only_tests:?}");
    }
    for name in names {
        let Some((_, p)) = tests.iter().find(|(n, _)| n == name) else {
            bail!("the guests' test {name} was not built");
        };
        list.push_str(&format!("{name}={}\n", p.display()));
    }
    std::fs::write(&list_file, list).with_context(|| format!("write {}", list_file.display()))?;
    let mut outcomes = Vec::new();
    for k in &kernels {
        println!(
            "kernels: {} ({}, {}): booting ({accel:?})",
            k.series, k.release, k.package
        );
        let cmd = format!(
            "{}{} guest --series {} --tests {}",
            if only_tests.is_empty() {
                ""
            } else {
                "MPT_GUEST_NO_DEMO=1 "
            },
            shell_quote(&me.to_string_lossy()),
            k.series,
            shell_quote(&list_file.to_string_lossy())
        );
        let start = Instant::now();
        let (rc, out) = boot(
            &vng,
            root,
            k,
            accel,
            &cmd,
            Duration::from_secs(40 * 60),
            true,
        )?;
        let secs = start.elapsed().as_secs_f64();
        let summary: Vec<String> = out
            .lines()
            .filter(|l| l.starts_with("guest: "))
            .map(str::to_string)
            .collect();
        let ok = rc == Some(0);
        if rc.is_none() {
            println!(
                "kernels: {}: the guest did not finish:\n{}",
                k.series,
                tail(&out, 40)
            );
        }
        println!(
            "kernels: {} ({}): {} in {secs:.0} s",
            k.series,
            k.release,
            if ok { "PASSED" } else { "FAILED" }
        );
        outcomes.push(Outcome {
            release: k.release.clone(),
            ok,
            secs,
            summary,
        });
    }
    Ok(outcomes)
}

fn tail(s: &str, n: usize) -> String {
    let v: Vec<&str> = s.lines().collect();
    v[v.len().saturating_sub(n)..].join("\n")
}

/// `s` quoted for `sh -c`.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-=+:,".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

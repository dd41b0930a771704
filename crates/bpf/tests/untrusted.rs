//! A suite's state and lock directories are trusted only when nobody but root can change
//! them (issue: an unprivileged user who made `/sys/fs/bpf/<suite>` first owned the directory
//! root's pins went into). Root test with a suite of its own, so that no tool's real state is
//! touched: its directories are made by the user nobody, the suite refuses them, and accepts
//! them once they are root's with mode 0700.

use std::os::unix::fs::{chown, PermissionsExt};
use std::path::Path;

use mpt_bpf::pinned::{NsLock, Pinned, Suite};
use mpt_bpf::ErrorKind;
use mpt_testkit::{require_root, Netns};

static SUITE: Suite = Suite {
    name: "mpttest-untrusted",
    anchor: "mpttest_none",
    maps: &[],
    meta_map: "mpttest_meta",
    abi_version: 1,
};

/// The tests share the suite's directories: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Cleanup;
impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(SUITE.pin_root());
        let _ = std::fs::remove_dir_all(SUITE.lock_dir());
    }
}

fn make(dir: &Path, uid: u32, mode: u32) {
    std::fs::create_dir_all(dir).expect("mkdir");
    chown(dir, Some(uid), Some(uid)).expect("chown");
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[test]
fn directories_others_could_change_are_refused() {
    require_root();
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _c = Cleanup;
    let ns = Netns::new("untrusted");
    let cookie = ns.cookie().expect("cookie");
    // the lock directory made by nobody
    make(&SUITE.lock_dir(), 65534, 0o755);
    let e = NsLock::take(&SUITE, cookie).expect_err("nobody's lock directory");
    assert!(matches!(e.kind, ErrorKind::Untrusted(_)), "{e}");
    assert!(e.to_string().contains("uid 65534"), "{e}");
    // root's but writable by the group
    make(&SUITE.lock_dir(), 0, 0o770);
    let e = NsLock::take(&SUITE, cookie).expect_err("group-writable");
    assert!(e.to_string().contains("writable by others"), "{e}");
    make(&SUITE.lock_dir(), 0, 0o700);
    drop(NsLock::take(&SUITE, cookie).expect("root's 0700 directory"));

    // the pin root made by nobody (anyone can, bpffs is 1777): the state goes on without
    // pins, which are a convenience, rather than refuse every first command (issue 27 item 4);
    // nothing in it is adopted
    make(&SUITE.pin_root().join(mpttest_id(cookie)), 65534, 0o755);
    // (bpffs holds no regular files: a directory in the meta map's place is what is planted)
    std::fs::create_dir(
        SUITE
            .pin_root()
            .join(mpttest_id(cookie))
            .join("mpttest_meta"),
    )
    .expect("a planted entry");
    make(&SUITE.pin_root(), 65534, 0o755);
    let pins_given = open_and_see_pins(&ns, cookie);
    assert_eq!(pins_given, Some(None), "nobody's pins are not reused");
    // a symbolic link in its place: the same
    let _ = std::fs::remove_dir_all(SUITE.pin_root());
    std::os::unix::fs::symlink("/tmp", SUITE.pin_root()).expect("symlink");
    assert_eq!(
        open_and_see_pins(&ns, cookie),
        Some(None),
        "a symlink's pins"
    );
    let _ = std::fs::remove_file(SUITE.pin_root());
}

fn mpttest_id(cookie: u64) -> String {
    mpt_testkit::netns::id_name(cookie)
}

/// Open the suite's state with `create`; the pins directory the loader was given (`None`:
/// the loader was not called).
fn open_and_see_pins(ns: &Netns, cookie: u64) -> Option<Option<std::path::PathBuf>> {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
    let s2 = std::sync::Arc::clone(&seen);
    let r = mpt_testkit::traffic::in_netns(ns, move || {
        Pinned::open(
            &SUITE,
            cookie,
            true,
            Box::new(move |pins, _| {
                *s2.lock().expect("lock") = Some(pins.map(Path::to_path_buf));
                Err(mpt_bpf::Error::io(
                    "the test stops here",
                    std::io::Error::from_raw_os_error(libc::ECANCELED),
                ))
            }),
        )
    });
    assert!(r.is_err(), "the loader's error comes back");
    let v = seen.lock().expect("lock").clone();
    v
}

/// The lock file is trusted as its directory is (issue 27 item 4): a FIFO there must not block
/// the tool, a symbolic link must not be followed, another user's file must not be a lock they
/// hold; root's own file with a wide mode is narrowed. A held lock is waited for as long as the
/// tool says, and then named.
#[test]
fn lock_files_are_checked_and_a_held_lock_is_named() {
    require_root();
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _c = Cleanup;
    mpt_bpf::pinned::set_lock_wait(mpt_bpf::pinned::LockWait {
        limit: std::time::Duration::from_secs(2),
        tool: "untrusted-test",
    });
    let ns = Netns::new("lockfile");
    let cookie = ns.cookie().expect("cookie");
    make(&SUITE.lock_dir(), 0, 0o700);
    let lock = SUITE
        .lock_dir()
        .join(format!("{}.lock", mpttest_id(cookie)));

    nix::unistd::mkfifo(&lock, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("fifo");
    let t = std::time::Instant::now();
    let e = NsLock::take(&SUITE, cookie).expect_err("a FIFO");
    assert!(
        t.elapsed() < std::time::Duration::from_secs(2),
        "a FIFO blocked"
    );
    assert!(e.to_string().contains("not a regular file"), "{e}");
    std::fs::remove_file(&lock).expect("rm");

    let victim = SUITE.lock_dir().join("victim");
    std::fs::write(&victim, b"keep").expect("victim");
    std::os::unix::fs::symlink(&victim, &lock).expect("symlink");
    let e = NsLock::take(&SUITE, cookie).expect_err("a symlink");
    assert!(matches!(e.kind, ErrorKind::Untrusted(_)), "{e}");
    std::fs::remove_file(&lock).expect("rm");

    std::fs::write(&lock, b"").expect("file");
    chown(&lock, Some(65534), Some(65534)).expect("chown");
    let e = NsLock::take(&SUITE, cookie).expect_err("nobody's lock file");
    assert!(e.to_string().contains("uid 65534"), "{e}");
    chown(&lock, Some(0), Some(0)).expect("chown");
    std::fs::set_permissions(&lock, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let held = NsLock::take(&SUITE, cookie).expect("root's lock file");
    let mode = std::fs::metadata(&lock).expect("md").permissions().mode() & 0o7777;
    assert_eq!(mode, 0o600, "a lock file others could open is narrowed");

    // held (by this process, through another open file): waited for, then named
    let t = std::time::Instant::now();
    let e = NsLock::take(&SUITE, cookie).expect_err("held");
    let waited = t.elapsed();
    assert!(waited >= std::time::Duration::from_secs(2), "{waited:?}");
    let me = format!("held by pid {}", std::process::id());
    assert!(e.to_string().contains(&me), "{e}");
    drop(held);
    drop(NsLock::take(&SUITE, cookie).expect("free again"));
}

/// A pin root another user replaced with a symbolic link is not swept through (review of issue
/// 27: the sweep of dead namespaces' pins followed `/sys/fs/bpf/<suite>` wherever it pointed
/// and removed what it found there).
#[test]
fn a_symlinked_pin_root_is_not_swept_through() {
    require_root();
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _c = Cleanup;
    let target = std::env::temp_dir().join(format!("mpt-sweep-target-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&target);
    std::fs::create_dir_all(target.join("12345")).expect("a dead-looking entry");
    std::fs::create_dir_all(SUITE.lock_dir()).expect("lock dir");
    let _ = std::fs::remove_dir_all(SUITE.pin_root());
    std::os::unix::fs::symlink(&target, SUITE.pin_root()).expect("symlink");
    let gone = mpt_bpf::pinned::sweep_stale(&SUITE, &[]);
    assert!(gone.is_empty(), "{gone:?}");
    assert!(target.join("12345").is_dir(), "removed through the link");
    let _ = std::fs::remove_file(SUITE.pin_root());
    let _ = std::fs::remove_dir_all(&target);
}

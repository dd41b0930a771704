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

    // the pin directory made by nobody: no state is re-created from what sits there
    make(&SUITE.pin_root().join(cookie.to_string()), 65534, 0o755);
    make(&SUITE.pin_root(), 65534, 0o755);
    let r = mpt_testkit::traffic::in_netns(&ns, || {
        Pinned::open(
            &SUITE,
            cookie,
            true,
            Box::new(|_, _| panic!("must refuse before loading anything")),
        )
    });
    let e = r.expect_err("nobody's pin directory");
    assert!(matches!(e.kind, ErrorKind::Untrusted(_)), "{e}");
    assert!(
        e.to_string().contains("/sys/fs/bpf/mpttest-untrusted"),
        "{e}"
    );
    // a symbolic link in its place
    let _ = std::fs::remove_dir_all(SUITE.pin_root());
    std::os::unix::fs::symlink("/tmp", SUITE.pin_root()).expect("symlink");
    let r = mpt_testkit::traffic::in_netns(&ns, || {
        Pinned::open(
            &SUITE,
            cookie,
            true,
            Box::new(|_, _| panic!("refuse first")),
        )
    });
    assert!(
        r.expect_err("symlink")
            .to_string()
            .contains("symbolic link"),
        "a symlink is refused"
    );
    let _ = std::fs::remove_file(SUITE.pin_root());
}

//! Network namespaces: entering one by name (for the process or for one thread), the identity
//! that tells namespaces apart, and the identities of every namespace in reach.
//!
//! The identity is the namespace's cookie (`SO_NETNS_COOKIE`, Linux 5.14+), which the kernel
//! never reuses. Older kernels (Debian 11's 5.10) have no such option and may not even have set
//! the cookie; there the identity is the namespace's inode number with the top bit set
//! ([`INODE_ID`]; cookies count up from 1 and never get there). An inode number is unique
//! among the namespaces alive, but the kernel hands a dead namespace's number to the next new
//! one: what outlives a namespace under its identity (pins, lock files) must not be taken as
//! the new one's ([`is_reusable`]).

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};

use nix::sched::{setns, CloneFlags};

use crate::Error;

/// Where `ip netns` keeps named namespaces.
pub const NETNS_RUN_DIR: &str = "/run/netns";

/// Path of a named namespace.
pub fn path(name: &str) -> PathBuf {
    PathBuf::from(NETNS_RUN_DIR).join(name)
}

fn open(name: &str) -> Result<File, Error> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(Error::NotFound(format!(
            "invalid network namespace name \"{name}\""
        )));
    }
    File::open(path(name)).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            Error::NotFound(format!("network namespace \"{name}\" does not exist"))
        } else {
            Error::io(format!("open network namespace \"{name}\""), e)
        }
    })
}

/// Move the calling thread (and threads it creates later) into the named namespace, for the
/// network namespace only: the mount namespace, and so the host's bpffs, stay as they are.
/// Call it before any socket is created.
pub fn enter(name: &str) -> Result<(), Error> {
    let f = open(name)?;
    setns(f.as_fd(), CloneFlags::CLONE_NEWNET)
        .map_err(|e| Error::io(format!("enter network namespace \"{name}\""), e.into()))
}

/// Run `f` on a thread inside the named namespace and return its result; the caller's thread
/// is untouched. A socket created by `f` stays in that namespace for its whole life.
pub fn run_in<T: Send + 'static, E: From<Error> + Send + 'static>(
    name: &str,
    f: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, E> {
    let file = open(name)?;
    let name = name.to_string();
    std::thread::spawn(move || {
        setns(file.as_fd(), CloneFlags::CLONE_NEWNET)
            .map_err(|e| Error::io(format!("enter network namespace \"{name}\""), e.into()))?;
        f()
    })
    .join()
    .map_err(|_| Error::io("namespace worker", io::Error::other("thread panicked")))?
}

/// Names of every namespace in [`NETNS_RUN_DIR`].
pub fn list_named() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(NETNS_RUN_DIR)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The top bit of an identity that is an inode number, not a cookie (see the module's docs).
pub const INODE_ID: u64 = 1 << 63;

/// Whether identity `id` may come back for another namespace after its own is gone (an inode
/// number: the kernel reuses them).
pub const fn is_reusable(id: u64) -> bool {
    id & INODE_ID != 0
}

/// The name of identity `id` in paths (pin directories, lock files): the cookie in decimal, or
/// `ino-N` for an inode number.
pub fn id_name(id: u64) -> String {
    if is_reusable(id) {
        format!("ino-{}", id & !INODE_ID)
    } else {
        id.to_string()
    }
}

/// The identity an [`id_name`] names.
pub fn parse_id_name(s: &str) -> Option<u64> {
    match s.strip_prefix("ino-") {
        Some(n) => n
            .parse::<u64>()
            .ok()
            .filter(|n| *n & INODE_ID == 0)
            .map(|n| n | INODE_ID),
        None => s.parse::<u64>().ok().filter(|n| *n & INODE_ID == 0),
    }
}

/// Whether the kernel has `SO_NETNS_COOKIE` (5.14+), asked once.
pub fn has_cookie() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(
        || !matches!(so_netns_cookie(), Err(e) if e.errno() == Some(libc::ENOPROTOOPT)),
    )
}

/// The identity of the calling thread's network namespace: its cookie, or where the kernel has
/// no `SO_NETNS_COOKIE` its inode number with [`INODE_ID`] set.
pub fn cookie() -> Result<u64, Error> {
    if has_cookie() {
        return so_netns_cookie();
    }
    use std::os::unix::fs::MetadataExt;
    // the thread's own (setns moves a thread, /proc/self names the main one)
    let p = "/proc/thread-self/ns/net";
    let md = std::fs::metadata(p).map_err(|e| Error::io(format!("stat {p}"), e))?;
    Ok(md.ino() | INODE_ID)
}

fn so_netns_cookie() -> Result<u64, Error> {
    let sock = nix::sys::socket::socket(
        nix::sys::socket::AddressFamily::Unix,
        nix::sys::socket::SockType::Datagram,
        nix::sys::socket::SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(|e| Error::io("socket", e.into()))?;
    let mut v: u64 = 0;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `v`, a live u64.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_NETNS_COOKIE,
            (&mut v as *mut u64).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(Error::last("getsockopt SO_NETNS_COOKIE"));
    }
    Ok(v)
}

/// The identity ([`cookie`]) of the namespace behind a `/run/netns/NAME` or `/proc/PID/ns/net`
/// file, read on a thread that enters it.
pub fn cookie_of(path: &Path) -> Result<u64, Error> {
    let f = File::open(path).map_err(|e| Error::io(format!("open {}", path.display()), e))?;
    let what = format!("enter {}", path.display());
    std::thread::spawn(move || {
        setns(f.as_fd(), CloneFlags::CLONE_NEWNET).map_err(|e| Error::io(what, e.into()))?;
        cookie()
    })
    .join()
    .map_err(|_| Error::io("namespace worker", io::Error::other("thread panicked")))?
}

/// Identities ([`cookie`]) of every namespace in reach: the caller's own, the named ones, and
/// those of every process (one visit per namespace).
pub fn reachable_cookies() -> Vec<u64> {
    let mut v = Vec::new();
    if let Ok(c) = cookie() {
        v.push(c);
    }
    let mut paths: Vec<PathBuf> = list_named().into_iter().map(|n| path(&n)).collect();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.filter_map(|e| e.ok()) {
            if e.file_name()
                .to_str()
                .is_some_and(|s| s.bytes().all(|b| b.is_ascii_digit()))
            {
                paths.push(e.path().join("ns/net"));
            }
        }
    }
    let mut seen_ino = std::collections::HashSet::new();
    for p in paths {
        use std::os::unix::fs::MetadataExt;
        let Ok(md) = std::fs::metadata(&p) else {
            continue;
        };
        if !seen_ino.insert(md.ino()) {
            continue;
        }
        if let Ok(c) = cookie_of(&p) {
            v.push(c);
        }
    }
    v
}

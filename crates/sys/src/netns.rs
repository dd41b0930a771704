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
    let f = open_netns_file(path)?;
    let what = format!("enter {}", path.display());
    std::thread::spawn(move || {
        setns(f.as_fd(), CloneFlags::CLONE_NEWNET).map_err(|e| Error::io(what, e.into()))?;
        cookie()
    })
    .join()
    .map_err(|_| Error::io("namespace worker", io::Error::other("thread panicked")))?
}

/// `path` opened only if it is a namespace file (nsfs), never anything else another user may
/// have put where a namespace was (a FIFO would block, a device would be opened with root's
/// rights): located with `O_PATH` (which opens nothing), its file system checked, then opened
/// again through that very descriptor.
fn open_netns_file(path: &Path) -> Result<File, Error> {
    use std::os::fd::{AsRawFd, FromRawFd};
    const NSFS_MAGIC: i64 = 0x6e73_6673;
    let what = || format!("open {}", path.display());
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| Error::io(what(), io::Error::from_raw_os_error(libc::EINVAL)))?;
    // SAFETY: c is a NUL-terminated path; the result is a new descriptor or -1.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(Error::io(what(), io::Error::last_os_error()));
    }
    // SAFETY: fd was just opened and is owned by nobody else.
    let located = unsafe { File::from_raw_fd(fd) };
    let fs = nix::sys::statfs::fstatfs(&located).map_err(|e| Error::io(what(), e.into()))?;
    if fs.filesystem_type().0 as i64 != NSFS_MAGIC {
        return Err(Error::io(
            format!("{}: not a namespace", what()),
            io::Error::from_raw_os_error(libc::EINVAL),
        ));
    }
    File::open(format!("/proc/self/fd/{}", located.as_raw_fd())).map_err(|e| Error::io(what(), e))
}

/// A mount point as `/proc/PID/mountinfo` writes it (space, tab, newline and backslash as
/// `\NNN` octal).
fn unescape_mount_path(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c));
        if b[i] == b'\\' && octal {
            let v = b[i + 1..i + 4]
                .iter()
                .fold(0u32, |v, c| v * 8 + u32::from(c - b'0'));
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Identities ([`cookie`]) of every namespace in reach: the caller's own, the named ones,
/// those of every process, of every descriptor a process holds on a namespace, and of every
/// bind mount of one anywhere in a process's mount table (one visit per namespace): whatever
/// keeps a namespace alive keeps it here, not only a name in `/run/netns`.
pub fn reachable_cookies() -> Vec<u64> {
    let mut v = Vec::new();
    if let Ok(c) = cookie() {
        v.push(c);
    }
    let mut paths: Vec<PathBuf> = list_named().into_iter().map(|n| path(&n)).collect();
    let mut mount_tables = std::collections::HashSet::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.filter_map(|e| e.ok()) {
            if !e
                .file_name()
                .to_str()
                .is_some_and(|s| s.bytes().all(|b| b.is_ascii_digit()))
            {
                continue;
            }
            let pid = e.path();
            paths.push(pid.join("ns/net"));
            // descriptors on a namespace (`net:[INODE]`)
            if let Ok(fds) = std::fs::read_dir(pid.join("fd")) {
                for fd in fds.filter_map(|f| f.ok()) {
                    if std::fs::read_link(fd.path())
                        .is_ok_and(|t| t.as_os_str().as_encoded_bytes().starts_with(b"net:["))
                    {
                        paths.push(fd.path());
                    }
                }
            }
            // bind mounts of a namespace (nsfs, root `net:[INODE]`), once per mount table,
            // reached through the process's root
            let Ok(mnt) = std::fs::read_link(pid.join("ns/mnt")) else {
                continue;
            };
            if !mount_tables.insert(mnt) {
                continue;
            }
            let Ok(table) = std::fs::read_to_string(pid.join("mountinfo")) else {
                continue;
            };
            for line in table.lines() {
                let w: Vec<&str> = line.split(' ').collect();
                let Some(dash) = w.iter().position(|x| *x == "-") else {
                    continue;
                };
                if w.get(dash + 1) == Some(&"nsfs")
                    && w.get(3).is_some_and(|r| r.starts_with("net:["))
                {
                    if let Some(at) = w.get(4) {
                        let at = unescape_mount_path(at);
                        paths.push(pid.join("root").join(at.trim_start_matches('/')));
                    }
                }
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

#[cfg(test)]
mod tests {
    /// Only a namespace file is opened: a FIFO where one was expected is refused at once, not
    /// waited on (review of issue 27: the sweep's scan opened what another user's descriptor
    /// pointed to, with root's rights).
    #[test]
    fn only_namespace_files_are_opened() {
        let d = std::env::temp_dir().join(format!("mpt-nsfile-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir(&d).expect("dir");
        let fifo = d.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("fifo");
        let e = super::open_netns_file(&fifo).expect_err("a FIFO");
        assert!(e.to_string().contains("not a namespace"), "{e}");
        assert!(super::open_netns_file(std::path::Path::new("/proc/self/ns/net")).is_ok());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn mount_points_are_unescaped() {
        assert_eq!(super::unescape_mount_path("/tmp/a\\040b"), "/tmp/a b");
        assert_eq!(super::unescape_mount_path("/x\\134y\\"), "/x\\y\\");
        assert_eq!(super::unescape_mount_path("/x\\9"), "/x\\9");
    }
}

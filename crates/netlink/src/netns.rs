//! Network namespaces: entering one by name, its cookie, and name resolution inside it.

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::path::PathBuf;

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
pub fn run_in<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
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

/// ifindex of a device in the calling thread's namespace.
pub fn ifindex(dev: &str) -> Result<u32, Error> {
    nix::net::if_::if_nametoindex(dev)
        .map_err(|_| Error::NotFound(format!("cannot find device \"{dev}\"")))
}

/// Name of an ifindex in the calling thread's namespace.
pub fn ifname(ifindex: u32) -> Option<String> {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: buf has IF_NAMESIZE bytes as if_indextoname requires.
    let p = unsafe { libc::if_indextoname(ifindex, buf.as_mut_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: on success if_indextoname wrote a NUL-terminated string into buf.
    let s = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
    Some(s.to_string_lossy().into_owned())
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

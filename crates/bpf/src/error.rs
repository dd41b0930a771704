//! Errors of the BPF layer: what was attempted, and a kind that callers choose their hint from
//! (never from the message text).

use std::fmt;
use std::io;

/// A failed BPF operation.
#[derive(Debug)]
pub struct Error {
    /// What was attempted (`attach xdp to ifindex 5`).
    pub what: String,
    /// Why it failed.
    pub kind: ErrorKind,
}

/// Why a BPF operation failed.
#[derive(Debug)]
pub enum ErrorKind {
    /// A system call refused; the errno says why.
    Sys(io::Error),
    /// libbpf refused: opening or loading an object (the verifier), attaching a link.
    Libbpf(libbpf_rs::Error),
    /// The namespace's state was written by another ABI version of the suite, or lacks maps
    /// this version needs.
    Abi {
        /// The suite (`mproute`).
        suite: &'static str,
        /// The version found (0: unreadable, or maps missing).
        found: u32,
        /// Ours.
        ours: u32,
    },
    /// Native (driver) XDP asked for on a device whose driver has none (`EOPNOTSUPP`).
    NoNativeXdp(io::Error),
    /// The device's XDP hook holds a program that is not ours (`EBUSY`).
    ForeignXdp(io::Error),
    /// The system layer failed (namespace cookie, interface names).
    System(mpt_sys::Error),
    /// A directory the state or its lock lives in could be changed by someone other than
    /// root: refused rather than trusted (the message says which and why).
    Untrusted(String),
}

impl Error {
    /// A failed system call (`rc` a negative errno, as libbpf's low-level calls return).
    pub fn sys(what: impl Into<String>, rc: i32) -> Self {
        Error {
            what: what.into(),
            kind: ErrorKind::Sys(io::Error::from_raw_os_error(rc.saturating_abs())),
        }
    }
    /// A failed system call with its `io::Error`.
    pub fn io(what: impl Into<String>, e: io::Error) -> Self {
        Error {
            what: what.into(),
            kind: ErrorKind::Sys(e),
        }
    }
    /// A wrapper for libbpf errors: `.map_err(Error::libbpf("load ..."))`.
    pub fn libbpf(what: impl Into<String>) -> impl FnOnce(libbpf_rs::Error) -> Self {
        let what = what.into();
        move |e| Error {
            what,
            kind: ErrorKind::Libbpf(e),
        }
    }
    /// The errno of a refused system call, if that is what failed.
    pub fn errno(&self) -> Option<i32> {
        match &self.kind {
            ErrorKind::Sys(e) | ErrorKind::NoNativeXdp(e) | ErrorKind::ForeignXdp(e) => {
                e.raw_os_error()
            }
            ErrorKind::System(e) => e.errno(),
            ErrorKind::Libbpf(_) | ErrorKind::Abi { .. } | ErrorKind::Untrusted(_) => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = &self.what;
        match &self.kind {
            ErrorKind::Sys(e) | ErrorKind::NoNativeXdp(e) | ErrorKind::ForeignXdp(e) => {
                write!(f, "{what}: {}", mpt_sys::error::words(e))
            }
            ErrorKind::Libbpf(e) => write!(f, "{what}: {e}"),
            ErrorKind::Abi { suite, found, ours } => {
                if !what.is_empty() {
                    write!(f, "{what}: ")?;
                }
                if found == ours {
                    write!(
                        f,
                        "the namespace's {suite} state (ABI version {found}) lacks maps this {suite} needs: another build of this version made it"
                    )
                } else {
                    write!(
                        f,
                        "the namespace's {suite} state has ABI version {found}, this {suite} has {ours}"
                    )
                }
            }
            ErrorKind::Untrusted(why) => write!(f, "{what}: {why}"),
            ErrorKind::System(e) if what.is_empty() => write!(f, "{e}"),
            ErrorKind::System(e) => write!(f, "{what}: {e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<mpt_sys::Error> for Error {
    fn from(e: mpt_sys::Error) -> Self {
        Error {
            what: String::new(),
            kind: ErrorKind::System(e),
        }
    }
}

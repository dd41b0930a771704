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
    /// The kernel refused to load a program, and said why: the verifier's last meaningful line,
    /// or libbpf's reason where no program reached the verifier (a kfunc or helper the kernel
    /// lacks). [`crate::log`] keeps the whole log for `-v`.
    Refused {
        /// The reason, one line.
        reason: String,
        /// What libbpf returned.
        source: libbpf_rs::Error,
    },
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
    /// The running kernel lacks what this needs (found by probing it).
    Unsupported(crate::features::Feature),
    /// A map of the state is full (`E2BIG`): the state holds at most `limit` `things`.
    Full {
        /// What the map holds, plural (`groups`).
        things: &'static str,
        /// Its capacity.
        limit: u32,
    },
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
    /// Load an opened object (`loading("load ...", || open.load())`), so that a refusal
    /// carries the kernel's reason ([`ErrorKind::Refused`]).
    pub fn loading<T>(
        what: impl Into<String>,
        load: impl FnOnce() -> Result<T, libbpf_rs::Error>,
    ) -> Result<T, Self> {
        let _ = crate::log::take();
        load().map_err(|source| {
            let what = what.into();
            match crate::log::refusal(&crate::log::take()) {
                Some(reason) => Error {
                    what,
                    kind: ErrorKind::Refused { reason, source },
                },
                None => Error {
                    what,
                    kind: ErrorKind::Libbpf(source),
                },
            }
        })
    }
    /// A wrapper for a map write: `E2BIG` (the map is full) becomes [`ErrorKind::Full`], the
    /// state's limit named, anything else [`ErrorKind::Libbpf`].
    pub fn full_or_libbpf(
        what: impl Into<String>,
        things: &'static str,
        limit: u32,
    ) -> impl FnOnce(libbpf_rs::Error) -> Self {
        let what = what.into();
        move |e| {
            let kind = if refused_errno(&e) == Some(libc::E2BIG) {
                ErrorKind::Full { things, limit }
            } else {
                ErrorKind::Libbpf(e)
            };
            Error { what, kind }
        }
    }
    /// An error that says the running kernel lacks `f`, which `what` needs.
    pub fn lacking(what: &str, f: crate::features::Feature) -> Error {
        Error {
            what: what.to_string(),
            kind: ErrorKind::Unsupported(f),
        }
    }
    /// The hint for the operator that the kind of failure calls for, where one helps and it
    /// is the same for every tool (`None`: the tool says what it needs).
    pub fn hint(&self) -> Option<&'static str> {
        match &self.kind {
            ErrorKind::NoNativeXdp(_) => Some(
                "the device's driver has no native XDP: use auto (tc where there is none), xdp-generic or tc",
            ),
            ErrorKind::ForeignXdp(_) => {
                Some("detach the other XDP program first (ip link set DEV xdp off)")
            }
            ErrorKind::Untrusted(_) => Some(
                "someone else may have made it: check it, then remove it, or give it to root with mode 0700",
            ),
            ErrorKind::Refused { .. } => Some(
                "this kernel cannot run the program; -v prints the verifier's whole log (please report it with `uname -r`)",
            ),
            _ if self.denied() => Some("run as root: BPF needs CAP_BPF, CAP_NET_ADMIN and CAP_SYS_ADMIN"),
            _ => None,
        }
    }
    /// Whether the kernel refused for lack of privilege.
    pub fn denied(&self) -> bool {
        let e = match &self.kind {
            ErrorKind::Libbpf(e) | ErrorKind::Refused { source: e, .. } => {
                return e.kind() == libbpf_rs::ErrorKind::PermissionDenied
                    && !nix::unistd::geteuid().is_root();
            }
            ErrorKind::Sys(e) => e.raw_os_error(),
            ErrorKind::System(e) => e.errno(),
            _ => None,
        };
        matches!(e, Some(libc::EPERM) | Some(libc::EACCES))
    }
    /// The errno of a refused system call, if that is what failed.
    pub fn errno(&self) -> Option<i32> {
        match &self.kind {
            ErrorKind::Sys(e) | ErrorKind::NoNativeXdp(e) | ErrorKind::ForeignXdp(e) => {
                e.raw_os_error()
            }
            ErrorKind::System(e) => e.errno(),
            ErrorKind::Refused { source, .. } => refused_errno(source),
            ErrorKind::Libbpf(_)
            | ErrorKind::Abi { .. }
            | ErrorKind::Untrusted(_)
            | ErrorKind::Unsupported(_) => None,
            ErrorKind::Full { .. } => Some(libc::E2BIG),
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
            ErrorKind::Refused { reason, source } => match refused_errno(source) {
                Some(n) => write!(f, "{what}: {reason} [{}]", mpt_sys::error::errno_name(n)),
                None => write!(f, "{what}: {reason}"),
            },
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
            ErrorKind::Full { things, limit } => {
                write!(f, "{what}: the state holds at most {limit} {things}")
            }
            ErrorKind::Unsupported(feat) => write!(
                f,
                "{what}: needs Linux {} or later ({}), which this kernel lacks",
                feat.since(),
                feat.name()
            ),
            ErrorKind::System(e) if what.is_empty() => write!(f, "{e}"),
            ErrorKind::System(e) => write!(f, "{what}: {e}"),
        }
    }
}

/// The errno libbpf's error carries, if any.
pub(crate) fn refused_errno(e: &libbpf_rs::Error) -> Option<i32> {
    let io: Option<&io::Error> = std::error::Error::source(e).and_then(|s| s.downcast_ref());
    io.and_then(io::Error::raw_os_error).or_else(|| {
        // libbpf-rs keeps the errno in its message: "... (os error 22)"
        let s = e.to_string();
        let n = s.rsplit("(os error ").next()?.trim_end_matches(')');
        n.parse().ok()
    })
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

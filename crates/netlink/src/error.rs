//! Typed errors of the netlink layer.

use std::fmt;
use std::io;

use crate::msg::DecodeError;

/// The kernel refused a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelError {
    /// What was attempted, in the operator's words (`add 10.0.0.0/8 table 100`).
    pub op: String,
    /// Positive errno.
    pub errno: i32,
    /// The extended-ack message (`NLMSGERR_ATTR_MSG`), if the kernel gave one.
    pub msg: Option<String>,
    /// The offending attribute of our request (from `NLMSGERR_ATTR_OFFS`), named.
    pub attr: Option<String>,
}

/// Symbolic name of an errno (`ENETUNREACH`).
pub fn errno_name(errno: i32) -> String {
    format!("{:?}", nix::errno::Errno::from_raw(errno))
}

impl KernelError {
    /// The kernel's words: the extended-ack text, or the errno's description.
    pub fn words(&self) -> String {
        match &self.msg {
            Some(m) if !m.is_empty() => m.clone(),
            _ => nix::errno::Errno::from_raw(self.errno).desc().to_string(),
        }
    }
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.op, self.words())?;
        if let Some(a) = &self.attr {
            write!(f, " (in {a})")?;
        }
        write!(f, " [{}]", errno_name(self.errno))
    }
}

impl std::error::Error for KernelError {}

/// Errors of the netlink layer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kernel refused.
    #[error("{0}")]
    Kernel(#[from] KernelError),
    /// A socket or system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was attempted.
        what: String,
        /// The cause.
        source: io::Error,
    },
    /// The kernel's answer could not be decoded.
    #[error("{0}")]
    Decode(#[from] DecodeError),
    /// A name could not be resolved.
    #[error("{0}")]
    NotFound(String),
}

impl Error {
    /// An I/O error with context.
    pub fn io(what: impl Into<String>, source: io::Error) -> Self {
        Error::Io {
            what: what.into(),
            source,
        }
    }
    /// The kernel errno, if the kernel refused.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Kernel(k) => Some(k.errno),
            _ => None,
        }
    }
}

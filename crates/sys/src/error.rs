//! Errors of the system layer: what was attempted and the kernel's answer.

use std::io;

/// A failed system call, or a name that does not exist.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A system call failed.
    #[error("{what}: {}", words(source))]
    Io {
        /// What was attempted.
        what: String,
        /// The cause.
        source: io::Error,
    },
    /// A namespace or device that does not exist (the message says which).
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
    /// The last OS error with context.
    pub fn last(what: impl Into<String>) -> Self {
        Self::io(what, io::Error::last_os_error())
    }
    /// The errno, where a system call failed.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Io { source, .. } => source.raw_os_error(),
            Error::NotFound(_) => None,
        }
    }
}

/// `strerror`'s words and the errno's name (`No such device [ENODEV]`), without Rust's
/// `(os error N)`.
pub fn words(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => {
            // strerror's words (io::Error's own), not nix's table, which differs for some
            // errnos ("Operation not supported on transport endpoint" for EOPNOTSUPP)
            let s = e.to_string();
            let words = s.split(" (os error").next().unwrap_or(&s);
            format!("{words} [{}]", errno_name(n))
        }
        None => e.to_string(),
    }
}

/// Push `c` onto `out`, a control character as its bytes `\xNN` (text from the kernel or
/// another process that must not drive a terminal; the tools' error lines and text output).
pub fn push_escaped(out: &mut String, c: char, escape: bool) {
    if escape {
        let mut b = [0u8; 4];
        for byte in c.encode_utf8(&mut b).bytes() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    } else {
        out.push(c);
    }
}

/// Symbolic name of an errno (`ENETUNREACH`).
pub fn errno_name(errno: i32) -> String {
    format!("{:?}", nix::errno::Errno::from_raw(errno))
}

#[cfg(test)]
mod tests {
    #[test]
    fn strerror_words_and_the_errno_name() {
        let e = std::io::Error::from_raw_os_error(libc::EOPNOTSUPP);
        assert_eq!(super::words(&e), "Operation not supported [EOPNOTSUPP]");
        let e = std::io::Error::other("plain");
        assert_eq!(super::words(&e), "plain");
    }
}

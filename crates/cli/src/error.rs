//! Failures as the operator sees them: one line, a documented exit code, an optional hint.

use std::fmt;

/// Success.
pub const EXIT_OK: i32 = 0;
/// Usage or syntax error: nothing was attempted.
pub const EXIT_USAGE: i32 = 1;
/// The kernel or the system refused.
pub const EXIT_SYSTEM: i32 = 2;

/// A failed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Exit code: [`EXIT_USAGE`] or [`EXIT_SYSTEM`].
    pub code: i32,
    /// `what was attempted: the kernel's words [ERRNO]`, or the syntax problem.
    pub message: String,
    /// What the operator can do about it.
    pub hint: Option<String>,
}

impl Failure {
    /// A syntax or usage problem (exit 1).
    pub fn usage(message: impl Into<String>) -> Self {
        Failure {
            code: EXIT_USAGE,
            message: message.into(),
            hint: None,
        }
    }
    /// A refusal by the kernel or the system (exit 2).
    pub fn system(message: impl Into<String>) -> Self {
        Failure {
            code: EXIT_SYSTEM,
            message: message.into(),
            hint: None,
        }
    }
    /// Attach a hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
    /// Prefix the message with a batch location.
    pub fn at(mut self, file: &str, line: usize) -> Self {
        self.message = format!("{file}:{line}: {}", self.message);
        self
    }
    /// Print as `TOOL: message` and `hint: ...` to standard error, each one line: what the
    /// operator typed is echoed with control bytes escaped and long words cut ([`sanitize`]).
    pub fn eprint(&self, tool: &str) {
        eprintln!("{tool}: {}", sanitize(&self.message));
        if let Some(h) = &self.hint {
            eprintln!("hint: {}", sanitize(h));
        }
    }
}

/// Longest word of a message printed whole; a longer one keeps its start and says its length.
pub const MAX_WORD: usize = 120;

/// A message as it may reach a terminal or a log: control bytes (newlines included) as `\xNN`,
/// and any word longer than [`MAX_WORD`] characters cut to its start and `...(N bytes)`.
pub fn sanitize(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(4096));
    for (i, word) in s.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let n = word.chars().count();
        let kept: String = if n > MAX_WORD {
            word.chars().take(MAX_WORD / 2).collect()
        } else {
            word.to_string()
        };
        for c in kept.chars() {
            if c.is_control() {
                let mut b = [0u8; 4];
                for byte in c.encode_utf8(&mut b).bytes() {
                    out.push_str(&format!("\\x{byte:02x}"));
                }
            } else {
                out.push(c);
            }
        }
        if n > MAX_WORD {
            out.push_str(&format!("...({} bytes)", word.len()));
        }
    }
    out
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

impl From<mpt_netlink::Error> for Failure {
    fn from(e: mpt_netlink::Error) -> Self {
        let hint = match e.errno() {
            Some(1) => Some("run as root (CAP_NET_ADMIN is needed)".to_string()),
            Some(101) => Some(
                "the gateway must be reachable through the device: add an address on its subnet, or say \"onlink\""
                    .to_string(),
            ),
            Some(19) => Some("check the device name with \"ip link\"".to_string()),
            _ => None,
        };
        Failure {
            code: match e {
                mpt_netlink::Error::NotFound(_) => EXIT_SYSTEM,
                _ => EXIT_SYSTEM,
            },
            message: e.to_string(),
            hint,
        }
    }
}

impl From<mpt_sys::Error> for Failure {
    fn from(e: mpt_sys::Error) -> Self {
        let hint = match e.errno() {
            Some(1) | Some(13) => Some("run as root (CAP_NET_ADMIN or CAP_NET_RAW is needed)"),
            _ => None,
        };
        let f = Failure::system(e.to_string());
        match hint {
            Some(h) => f.hint(h),
            None => f,
        }
    }
}

/// Exit the process with the code of `r`, printing the failure first.
pub fn exit(tool: &str, r: Result<(), Failure>) -> ! {
    match r {
        Ok(()) => std::process::exit(EXIT_OK),
        Err(f) => {
            f.eprint(tool);
            std::process::exit(f.code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoed_input_is_bounded_and_escaped() {
        assert_eq!(
            sanitize("cannot find device \"eth0\""),
            "cannot find device \"eth0\""
        );
        assert_eq!(
            sanitize("dev \"a\u{1}\u{1b}[2Jb\nc\""),
            "dev \"a\\x01\\x1b[2Jb\\x0ac\""
        );
        assert_eq!(sanitize("nul \u{0} here"), "nul \\x00 here");
        let long = format!("device \"{}\" missing", "x".repeat(1_000_000));
        let s = sanitize(&long);
        assert!(s.len() < 200, "{}", s.len());
        assert!(
            s.starts_with("device \"xxx") && s.contains("...(1000002 bytes)"),
            "{s}"
        );
        assert!(s.ends_with(" missing"));
        // non-ASCII text stays as it is
        assert_eq!(sanitize("flux \u{e9}t\u{e9}"), "flux \u{e9}t\u{e9}");
    }
}

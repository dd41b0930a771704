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
    /// Print as `TOOL: message` and `hint: ...` to standard error.
    pub fn eprint(&self, tool: &str) {
        eprintln!("{tool}: {}", self.message);
        if let Some(h) = &self.hint {
            eprintln!("hint: {h}");
        }
    }
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

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
    /// Both lines go out in one write, so that concurrent processes' errors do not
    /// interleave.
    /// With `-j` ([`crate::render::Style::install`]) the failure is also one JSON line on
    /// standard output: `{"error": MESSAGE, "errno": "EEXIST" or null, "hint": ... or null}`.
    pub fn eprint(&self, tool: &str) {
        let message = errno_style(&self.message);
        let mut text = format!("{tool}: {}\n", sanitize(&message));
        if let Some(h) = &self.hint {
            text.push_str(&format!("hint: {}\n", sanitize(h)));
        }
        write_stderr(&text);
        if crate::render::json_errors() {
            let errno = message
                .rsplit_once(" [E")
                .and_then(|(_, r)| r.strip_suffix(']'))
                .filter(|n| {
                    n.bytes()
                        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
                })
                .map(|n| format!("E{n}"));
            crate::render::print_json(
                &serde_json::json!({
                    "error": message,
                    "errno": errno,
                    "hint": self.hint,
                    "exit": self.code,
                }),
                false,
            );
        }
    }
}

/// One style for the kernel's errno in every line: Rust's `... (os error 17)` (an
/// `io::Error` shown as it is) becomes `... [EEXIST]`, as the rest of the messages say it.
pub fn errno_style(message: &str) -> std::borrow::Cow<'_, str> {
    const MARK: &str = " (os error ";
    if !message.contains(MARK) {
        return std::borrow::Cow::Borrowed(message);
    }
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find(MARK) {
        let after = &rest[at + MARK.len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        match (
            after[..digits].parse::<i32>(),
            after[digits..].starts_with(')'),
        ) {
            (Ok(n), true) => {
                out.push_str(&rest[..at]);
                out.push_str(&format!(" [{}]", mpt_sys::error::errno_name(n)));
                rest = &after[digits + 1..];
            }
            _ => {
                out.push_str(&rest[..at + MARK.len()]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// Write `text` to standard error in one `write(2)` (the standard library writes a formatted
/// line piece by piece, and lines of concurrent processes would interleave).
pub fn write_stderr(text: &str) {
    use std::io::Write;
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// `TOOL: KIND: text` on standard error, one line in one write, control bytes escaped; the same
/// text only once per process (a note repeated on each line of a 20,000-line batch says no
/// more than the first).
pub fn eprint_once(tool: &str, kind: &str, text: &str) {
    use std::collections::HashSet;
    use std::sync::Mutex;
    static SAID: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    if let Ok(mut said) = SAID.lock() {
        if !said
            .get_or_insert_with(HashSet::new)
            .insert(text.to_string())
        {
            return;
        }
    }
    write_stderr(&format!("{tool}: {kind}: {}\n", sanitize(text)));
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
            mpt_sys::error::push_escaped(&mut out, c, c.is_control());
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

/// The hints of BPF-layer failures that differ by tool (the rest are the same for every tool:
/// [`mpt_bpf::Error::hint`]): one table for the three.
fn bpf_hint(tool: Option<&str>, kind: &mpt_bpf::ErrorKind) -> Option<&'static str> {
    use mpt_bpf::ErrorKind as K;
    match (tool, kind) {
        (Some("mproute"), K::Abi { .. }) => Some(
            "use the mproute version that wrote it to flush, or remove the state with \"mproute sync --reset\"",
        ),
        (Some("mproute"), K::Unsupported(_)) => Some(
            "routes still work here: the kernel forwards them by its own multipath hash, without the routes' algorithms",
        ),
        (Some("ila"), K::Abi { .. }) => Some(
            "use the ila version that wrote it, or remove the tables with \"ila xlat flush\" and \"ila route flush\" in that version",
        ),
        _ => None,
    }
}

impl From<mpt_bpf::Error> for Failure {
    /// A BPF-layer failure (exit 2) with the hint its kind calls for, in the words of the
    /// tool that configured the BPF layer ([`mpt_bpf::configure`]).
    fn from(e: mpt_bpf::Error) -> Self {
        let hint = bpf_hint(mpt_bpf::pinned::tool(), &e.kind).or_else(|| e.hint());
        let f = Failure::system(e.to_string());
        match hint {
            Some(h) => f.hint(h),
            None => f,
        }
    }
}

impl Failure {
    /// `what: the BPF layer's error`, with its hint ([`From<mpt_bpf::Error>`]).
    pub fn bpf(what: &str, e: mpt_bpf::Error) -> Failure {
        let mut f = Failure::from(e);
        f.message = format!("{what}: {}", f.message);
        f
    }
}

/// Exit the process with the code of `r`, printing the failure first.
pub fn exit(tool: &str, r: Result<(), Failure>) -> ! {
    match r {
        // output that did not reach its file is not success (`-j >/dev/full` said exit 0)
        Ok(()) => match crate::render::output_failure() {
            None => std::process::exit(EXIT_OK),
            Some(f) => {
                f.eprint(tool);
                std::process::exit(f.code)
            }
        },
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

    /// One errno style (issue 27 item 12: "(os error 17)" in some lines, "[EEXIST]" in others).
    #[test]
    fn errno_in_one_style() {
        assert_eq!(
            super::errno_style("create /x: File exists (os error 17)"),
            "create /x: File exists [EEXIST]"
        );
        assert_eq!(super::errno_style("a (os error x) b"), "a (os error x) b");
        assert_eq!(super::errno_style("plain [ENOENT]"), "plain [ENOENT]");
    }
}

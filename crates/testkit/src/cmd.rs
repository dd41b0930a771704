//! Child processes for tests, benchmarks and the demo: run a command and keep its output, or
//! insist that it succeeds. The test-style helpers panic with the command line and its standard
//! error; the `try_` forms return that text as an error instead, for callers that report.

use std::ffi::OsStr;
use std::io::Write;
use std::process::{Command, Output, Stdio};

/// `cmd ARGS` as one line, for messages.
pub fn show(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Run a command and return its output; panics only if it cannot be started.
pub fn run<S: AsRef<OsStr>>(cmd: &str, args: &[S]) -> Output {
    Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd}: {e}"))
}

/// Run a command that must succeed; returns its stdout.
pub fn run_ok<S: AsRef<OsStr>>(cmd: &str, args: &[S]) -> String {
    let mut c = Command::new(cmd);
    c.args(args);
    try_output(&mut c).unwrap_or_else(|e| panic!("{e}"))
}

/// Run `cmd` (standard input closed) and return its standard output; an error names the command
/// and carries its exit status and standard error.
pub fn try_output(cmd: &mut Command) -> Result<String, String> {
    let what = show(cmd);
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot start `{what}`: {e}"))?;
    finish(&what, out)
}

/// Run `cmd` with `input` on its standard input; as [`try_output`].
pub fn try_output_with_input(cmd: &mut Command, input: &str) -> Result<String, String> {
    let what = show(cmd);
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start `{what}`: {e}"))?;
    if let Some(mut pipe) = child.stdin.take() {
        pipe.write_all(input.as_bytes())
            .map_err(|e| format!("`{what}`: write its input: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("`{what}`: {e}"))?;
    finish(&what, out)
}

fn finish(what: &str, out: Output) -> Result<String, String> {
    if !out.status.success() {
        return Err(format!(
            "`{what}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim_end()
        ));
    }
    String::from_utf8(out.stdout).map_err(|_| format!("`{what}`: output is not UTF-8"))
}

/// `ip ARGS`, which must succeed; its standard output.
pub fn try_ip<S: AsRef<OsStr>>(args: &[S]) -> Result<String, String> {
    try_output(Command::new("ip").args(args))
}

/// Fail loudly (never skip) when not root: CI runs the suite as root.
pub fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root (CI runs it as root); it is not skipped on purpose"
    );
}

/// Whether the effective user is root.
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// The words of a command line: one string split on whitespace (`"add 10.0.0.0/8 nexthop via
/// 10.1.0.2"`), or an array, slice or vector of words (`&["set", "description", "a b"]`: the
/// form for a word with a space in it, or an empty one).
pub trait Words {
    /// The words, in order.
    fn words(&self) -> Vec<&str>;
}

impl Words for str {
    fn words(&self) -> Vec<&str> {
        self.split_whitespace().collect()
    }
}

impl Words for String {
    fn words(&self) -> Vec<&str> {
        self.as_str().words()
    }
}

impl<S: AsRef<str>> Words for [S] {
    fn words(&self) -> Vec<&str> {
        self.iter().map(AsRef::as_ref).collect()
    }
}

impl<S: AsRef<str>, const N: usize> Words for [S; N] {
    fn words(&self) -> Vec<&str> {
        self.as_slice().words()
    }
}

impl<S: AsRef<str>> Words for Vec<S> {
    fn words(&self) -> Vec<&str> {
        self.as_slice().words()
    }
}

impl<T: Words + ?Sized> Words for &T {
    fn words(&self) -> Vec<&str> {
        (**self).words()
    }
}

/// `bpftool -j ARGS`, which must succeed: its JSON.
pub fn bpftool_json(args: &[&str]) -> serde_json::Value {
    let mut a = vec!["-j"];
    a.extend_from_slice(args);
    let out = run("bpftool", &a);
    assert!(
        out.status.success(),
        "bpftool {}: {}",
        a.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("bpftool JSON")
}

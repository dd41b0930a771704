//! What `-v` prints: one line per thing a tool did to the kernel (a netlink request, a BPF map
//! write), to standard error, `TOOL: ` first. `-vv` adds libbpf's own log (the BPF layer's
//! business). Off unless a tool's front door turned it on; the check is one relaxed load, so a
//! 100,000-route batch pays nothing for it.

use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

static LEVEL: AtomicU8 = AtomicU8::new(0);
static TOOL: OnceLock<&'static str> = OnceLock::new();

/// Turn the trace on at `level` (the number of `-v`s) for `tool`.
pub fn set_level(tool: &'static str, level: u8) {
    let _ = TOOL.set(tool);
    LEVEL.store(level, Ordering::Relaxed);
}

/// The number of `-v`s given.
pub fn level() -> u8 {
    LEVEL.load(Ordering::Relaxed)
}

/// Whether what `-v` prints is wanted.
pub fn on() -> bool {
    level() >= 1
}

/// Print one line of the trace (callers check [`on`] first when making the line costs).
pub fn line(args: std::fmt::Arguments<'_>) {
    if !on() {
        return;
    }
    let tool = TOOL.get().copied().unwrap_or("mpt");
    // one write per line, so that lines of concurrent invocations do not interleave
    let text = format!("{tool}: {args}\n");
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// A byte string as hexadecimal, for keys in the trace.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn hex_is_two_digits_a_byte() {
        assert_eq!(super::hex(&[0x0a, 0, 0xff]), "0a00ff");
        assert_eq!(super::hex(&[]), "");
    }
}

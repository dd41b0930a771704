//! What the BPF layer says about itself: each map write in `-v`'s trace ([`Traced`]), and
//! libbpf's own messages: to standard error with `-vv` (verifier logs included), nowhere
//! otherwise. Operators get one sentence from our error instead; when the kernel refuses a
//! program, that sentence carries the verifier's reason ([`refusal`]), taken from what libbpf
//! reported.

use std::collections::VecDeque;
use std::sync::Mutex;

/// libbpf's warnings since the last [`take`], newest last (bounded: a verifier log can be
/// long, its end is what matters).
static WARNINGS: Mutex<VecDeque<String>> = Mutex::new(VecDeque::new());
const KEEP_LINES: usize = 400;

fn keep(msg: &str) {
    if let Ok(mut w) = WARNINGS.lock() {
        for line in msg.lines() {
            if w.len() == KEEP_LINES {
                w.pop_front();
            }
            w.push_back(line.to_string());
        }
    }
}

static VERBOSE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether `-vv` was given: loaders then ask the verifier for its statistics too.
pub fn verbose() -> bool {
    VERBOSE.load(std::sync::atomic::Ordering::Relaxed)
}

/// Route libbpf's messages (see the module doc): all of them with `verbose` (`-vv`). Warnings are kept for [`refusal`] either way.
pub fn set_verbose(verbose: bool) {
    VERBOSE.store(verbose, std::sync::atomic::Ordering::Relaxed);
    fn quiet(level: libbpf_rs::PrintLevel, msg: String) {
        if level == libbpf_rs::PrintLevel::Warn {
            keep(&msg);
        }
    }
    fn loud(level: libbpf_rs::PrintLevel, msg: String) {
        if level == libbpf_rs::PrintLevel::Warn {
            keep(&msg);
        }
        eprint!("{msg}");
    }
    if verbose {
        libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Debug, loud)));
    } else {
        libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Warn, quiet)));
    }
}

/// A map write that `-v` reports, one line each: the map, the operation and the key. Every
/// write of the BPF layer goes through these (the plain `update`/`delete` are not called).
pub(crate) trait Traced: libbpf_rs::MapCore {
    /// `update`, traced.
    fn put(&self, key: &[u8], val: &[u8], flags: libbpf_rs::MapFlags) -> libbpf_rs::Result<()> {
        trace_write(self.name(), "update", key, flags);
        self.update(key, val, flags)
    }
    /// `delete`, traced.
    fn remove(&self, key: &[u8]) -> libbpf_rs::Result<()> {
        trace_write(self.name(), "delete", key, libbpf_rs::MapFlags::ANY);
        self.delete(key)
    }
    /// `update_batch`, traced (one line for the batch).
    fn put_batch(
        &self,
        keys: &[u8],
        vals: &[u8],
        count: u32,
        elem: libbpf_rs::MapFlags,
        flags: libbpf_rs::MapFlags,
    ) -> libbpf_rs::Result<()> {
        if mpt_sys::trace::on() {
            mpt_sys::trace::line(format_args!(
                "map {}: update {count} entries in one batch",
                self.name().to_string_lossy()
            ));
        }
        self.update_batch(keys, vals, count, elem, flags)
    }
}

impl<T: libbpf_rs::MapCore + ?Sized> Traced for T {}

fn trace_write(map: &std::ffi::OsStr, op: &str, key: &[u8], flags: libbpf_rs::MapFlags) {
    if !mpt_sys::trace::on() {
        return;
    }
    let how = if flags.contains(libbpf_rs::MapFlags::NO_EXIST) {
        " (new)"
    } else if flags.contains(libbpf_rs::MapFlags::EXIST) {
        " (existing)"
    } else {
        ""
    };
    mpt_sys::trace::line(format_args!(
        "map {}: {op} key {}{how}",
        map.to_string_lossy(),
        mpt_sys::trace::hex(key)
    ));
}

/// `-v`: growable map `name` was replaced by one of `to` entries (it had `from`, `n` held).
pub(crate) fn note_grow(name: &str, from: u32, to: u32, n: usize) {
    if mpt_sys::trace::on() {
        mpt_sys::trace::line(format_args!(
            "map {name}: grown from {from} to {to} entries ({n} copied)"
        ));
    }
}

/// Take (and forget) the warnings libbpf gave since the last call.
pub fn take() -> Vec<String> {
    WARNINGS
        .lock()
        .map(|mut w| w.drain(..).collect())
        .unwrap_or_default()
}

/// Why the kernel refused to load a program, in one line, from libbpf's warnings `lines`: the
/// verifier's last meaningful line (prefixed with the program's name), or libbpf's own reason
/// where no program got as far as the verifier (an extern the kernel lacks, a map it cannot
/// create). `None` when the warnings say nothing of the kind.
pub fn refusal(lines: &[String]) -> Option<String> {
    // the last verifier log: "libbpf: prog 'NAME': -- BEGIN PROG LOAD LOG --" ... "-- END ..."
    let begin = lines
        .iter()
        .rposition(|l| l.contains("-- BEGIN PROG LOAD LOG --"));
    if let Some(b) = begin {
        let prog = lines[b]
            .split('\'')
            .nth(1)
            .map(str::to_string)
            .unwrap_or_default();
        let end = lines[b..]
            .iter()
            .position(|l| l.contains("-- END PROG LOAD LOG --"))
            .map_or(lines.len(), |e| b + e);
        let log = &lines[b + 1..end];
        if let Some(reason) = verifier_reason(log) {
            return Some(if prog.is_empty() {
                format!("the verifier refused the program: {reason}")
            } else {
                format!("the verifier refused {prog}: {reason}")
            });
        }
    }
    // libbpf's own words, the last that says what failed
    lines
        .iter()
        .rev()
        .map(|l| l.trim().trim_start_matches("libbpf: ").trim())
        .find(|l| {
            !l.is_empty()
                && !l.starts_with("failed to load object")
                && !l.starts_with("failed to load BPF skeleton")
                && !l.contains("BPF program load failed")
                && !l.contains("failed to load program")
                && !l.starts_with("Kernel error message")
        })
        .map(str::to_string)
}

/// The verifier's reason in its log: the last line that is not a statistic, an instruction, a
/// register state or a source line.
fn verifier_reason(log: &[String]) -> Option<String> {
    log.iter()
        .rev()
        .map(|l| l.trim())
        .find(|l| {
            !l.is_empty()
                && !l.starts_with("processed ")
                && !l.starts_with("verification time")
                && !l.starts_with("stack depth")
                && !l.starts_with("; ")
                && !l.starts_with("mark_precise")
                && !is_insn_or_state(l)
        })
        .map(|l| {
            // an error that names the instruction: "123: (85) call unknown#181" is the error
            l.to_string()
        })
}

/// `123: (85) call ...` (an instruction) or `123: R1=...` (a state), `R1 ...` states after a
/// branch: lines the log repeats for every step.
fn is_insn_or_state(l: &str) -> bool {
    let digits = l.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && l[digits..].starts_with(": ") {
        let rest = &l[digits + 2..];
        return rest.starts_with('(') || rest.starts_with('R') || rest.starts_with("frame");
    }
    false
}

#[cfg(test)]
mod tests {
    use super::refusal;

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(str::to_string).collect()
    }

    #[test]
    fn the_verifier_names_its_reason_before_its_statistics() {
        let l = lines(
            "libbpf: prog 'mpt_dp_tc': BPF program load failed: Permission denied\n\
             libbpf: prog 'mpt_dp_tc': -- BEGIN PROG LOAD LOG --\n\
             0: R1=ctx() R10=fp0\n\
             ; int mpt_dp_tc(struct __sk_buff *skb) @ dp.bpf.c:973\n\
             0: (bf) r6 = r1                       ; R1=ctx() R6_w=ctx()\n\
             12: (61) r2 = *(u32 *)(r3 +0)\n\
             R3 invalid mem access 'scalar'\n\
             processed 13 insns (limit 1000000) max_states_per_insn 0 total_states 1 peak_states 1 mark_read 1\n\
             -- END PROG LOAD LOG --\n\
             libbpf: prog 'mpt_dp_tc': failed to load: -13\n\
             libbpf: failed to load object 'dp_bpf'\n\
             libbpf: failed to load BPF skeleton 'dp_bpf': -13",
        );
        assert_eq!(
            refusal(&l).as_deref(),
            Some("the verifier refused mpt_dp_tc: R3 invalid mem access 'scalar'")
        );
    }

    #[test]
    fn without_a_log_libbpf_says_why() {
        let l = lines(
            "libbpf: extern (func ksym) 'bpf_cast_to_kern_ctx': not found in kernel or module BTFs\n\
             libbpf: failed to load object 'dp_bpf'\n\
             libbpf: failed to load BPF skeleton 'dp_bpf': -EINVAL",
        );
        assert_eq!(
            refusal(&l).as_deref(),
            Some("extern (func ksym) 'bpf_cast_to_kern_ctx': not found in kernel or module BTFs")
        );
        assert_eq!(refusal(&[]), None);
    }
}

//! The words of pfanout's commands, iproute2's way (`KEYWORD VALUE` pairs in any order, bare
//! keywords for switches), into typed commands. Syntax only: devices and groups are resolved
//! when the command runs.

use std::path::PathBuf;
use std::time::Duration;

use mpt_model::fanout::{Flags, Mode};

/// A syntax error, one line.
pub type SyntaxError = String;

/// `pfanout show [dev DEV] [group ID]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShowCmd {
    /// Only groups (and sockets) bound to this device.
    pub dev: Option<String>,
    /// Only this group.
    pub group: Option<u16>,
}

/// `pfanout run ...`: a group of worker sockets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunCmd {
    /// The device the workers are bound to.
    pub dev: String,
    /// The group id (none: a free one, or the kernel's with `uniqueid`).
    pub group: Option<u16>,
    /// The mode.
    pub mode: Mode,
    /// The flags.
    pub flags: Flags,
    /// Workers (sockets, one thread each).
    pub workers: u32,
    /// A TPACKET_V3 ring per worker instead of copies.
    pub ring: bool,
    /// One pcap file per worker in this directory; `-`: the one worker's pcap stream on
    /// standard output.
    pub write: Option<PathBuf>,
    /// Each worker's pcap stream into the standard input of its own instance of this shell
    /// command (`%i`: the worker's index).
    pub exec: Option<String>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop after this many packets (all workers together).
    pub count: Option<u64>,
    /// Each worker processes at most this many packets per second (a slow consumer).
    pub per_worker: Option<u32>,
    /// The group's member limit, given when the group is created (0: the kernel's default).
    pub max_members: u32,
    /// The protocol the sockets are bound to (`ETH_P_*`, host order).
    pub protocol: u16,
    /// Receive buffer of each socket in bytes.
    pub rcvbuf: Option<u32>,
}

impl RunCmd {
    /// Whether the pcap stream goes to standard output (`write -`).
    pub fn stdout_stream(&self) -> bool {
        self.write.as_deref() == Some(std::path::Path::new("-"))
    }

    /// The command of worker `i`'s reader: `exec`'s, `%i` replaced by the index (`%%`: `%`).
    pub fn exec_for(&self, i: u32) -> Option<String> {
        let cmd = self.exec.as_ref()?;
        let mut out = String::with_capacity(cmd.len() + 4);
        let mut it = cmd.chars().peekable();
        while let Some(c) = it.next() {
            match (c, it.peek()) {
                ('%', Some('i')) => {
                    it.next();
                    out.push_str(&i.to_string());
                }
                ('%', Some('%')) => {
                    it.next();
                    out.push('%');
                }
                _ => out.push(c),
            }
        }
        Some(out)
    }
}

/// `pfanout bench ...`: the rollover experiment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchCmd {
    /// Workers.
    pub workers: u32,
    /// The generator's packet rate.
    pub rate: u32,
    /// Packets each worker processes per second.
    pub per_worker: u32,
    /// Measured seconds per mode.
    pub seconds: u32,
    /// UDP flows the generator sends, round robin (1: the 2013 experiment's one flow).
    pub flows: u32,
}

/// Most flows the bench's generator sends (one source port each).
pub const MAX_BENCH_FLOWS: u32 = 60000;

impl Default for BenchCmd {
    fn default() -> Self {
        BenchCmd {
            workers: 4,
            rate: 0,
            per_worker: 5000,
            seconds: 3,
            flows: 1,
        }
    }
}

impl BenchCmd {
    /// The generator's rate: as given, else twice what the workers can take together.
    pub fn effective_rate(&self) -> u32 {
        if self.rate > 0 {
            self.rate
        } else {
            self.per_worker
                .saturating_mul(self.workers)
                .saturating_mul(2)
        }
    }
}

struct Words<'a> {
    w: &'a [String],
    i: usize,
}

impl<'a> Words<'a> {
    fn next(&mut self) -> Option<&'a str> {
        let w = self.w.get(self.i)?;
        self.i += 1;
        Some(w.as_str())
    }
    /// The next keyword, refused if it was given before (`workers 1 workers 3` says nothing
    /// an operator can trust: which one counts?), as ila and mproute refuse it.
    fn key(&mut self, seen: &mut Vec<&'a str>) -> Result<Option<&'a str>, SyntaxError> {
        let Some(k) = self.next() else {
            return Ok(None);
        };
        let canon = if k == "protocol" { "proto" } else { k };
        if seen.contains(&canon) {
            return Err(format!("\"{k}\" given twice"));
        }
        seen.push(canon);
        Ok(Some(k))
    }
    fn value(&mut self, key: &str) -> Result<&'a str, SyntaxError> {
        self.next()
            .ok_or_else(|| format!("\"{key}\" needs a value"))
    }
}

fn number<T: std::str::FromStr>(key: &str, v: &str, what: &str) -> Result<T, SyntaxError> {
    v.parse()
        .map_err(|_| format!("{key} \"{v}\" is not {what}"))
}

fn group_id(v: &str) -> Result<u16, SyntaxError> {
    number("group", v, "a group id (0-65535)")
}

fn seconds(key: &str, v: &str) -> Result<Duration, SyntaxError> {
    let s: f64 = number(key, v, "a number of seconds")?;
    if !(s > 0.0 && s < 1e9) {
        return Err(format!("{key} \"{v}\" is not a positive number of seconds"));
    }
    Ok(Duration::from_secs_f64(s))
}

fn positive(key: &str, v: &str) -> Result<u32, SyntaxError> {
    let n: u32 = number(key, v, "a positive number")?;
    if n == 0 {
        return Err(format!("{key} must be at least 1"));
    }
    Ok(n)
}

/// `show` words.
pub fn parse_show(words: &[String]) -> Result<ShowCmd, SyntaxError> {
    let mut w = Words { w: words, i: 0 };
    let mut c = ShowCmd::default();
    let mut seen = Vec::new();
    while let Some(k) = w.key(&mut seen)? {
        match k {
            "dev" => c.dev = Some(w.value(k)?.to_string()),
            "group" => c.group = Some(group_id(w.value(k)?)?),
            other => {
                return Err(format!(
                    "unknown word \"{other}\" (show takes dev DEV, group ID)"
                ))
            }
        }
    }
    Ok(c)
}

/// Most workers `run` starts (the kernel's own limit per group is 65536).
pub const MAX_WORKERS: u32 = 1024;

/// `run` words.
pub fn parse_run(words: &[String]) -> Result<RunCmd, SyntaxError> {
    let mut w = Words { w: words, i: 0 };
    let (mut dev, mut mode) = (None, None);
    let mut c = RunCmd {
        dev: String::new(),
        group: None,
        mode: Mode::Hash,
        flags: Flags::empty(),
        workers: 2,
        ring: false,
        write: None,
        exec: None,
        duration: None,
        count: None,
        per_worker: None,
        max_members: 0,
        protocol: mpt_model::fanout::ETH_P_ALL,
        rcvbuf: None,
    };
    let mut seen = Vec::new();
    while let Some(k) = w.key(&mut seen)? {
        match k {
            "dev" => dev = Some(w.value(k)?.to_string()),
            "group" => c.group = Some(group_id(w.value(k)?)?),
            "mode" => {
                let v = w.value(k)?;
                mode = Some(Mode::parse(v).ok_or_else(|| {
                    format!("unknown mode \"{v}\" (the modes are {})", Mode::names())
                })?);
            }
            "flags" => c.flags = Flags::parse(w.value(k)?)?,
            "workers" => {
                let n = positive(k, w.value(k)?)?;
                if n > MAX_WORKERS {
                    return Err(format!("workers {n}: at most {MAX_WORKERS}"));
                }
                c.workers = n;
            }
            "ring" => c.ring = true,
            "write" => {
                let v = w.value(k)?;
                if v.is_empty() {
                    return Err("write needs a directory (or - for standard output)".into());
                }
                c.write = Some(PathBuf::from(v));
            }
            "exec" => {
                let v = w.value(k)?;
                if v.trim().is_empty() {
                    return Err("exec needs a command (one word: quote it)".into());
                }
                c.exec = Some(v.to_string());
            }
            "duration" => c.duration = Some(seconds(k, w.value(k)?)?),
            "count" => {
                let v = w.value(k)?;
                let n: u64 = number(k, v, "a number of packets")?;
                if n == 0 {
                    return Err("count must be at least 1".into());
                }
                c.count = Some(n);
            }
            "per-worker" => c.per_worker = Some(positive(k, w.value(k)?)?),
            "max-members" => {
                let v = w.value(k)?;
                c.max_members = number(k, v, "a number of members")?;
            }
            "proto" | "protocol" => {
                let v = w.value(k)?;
                c.protocol = mpt_model::fanout::parse_protocol(v).ok_or_else(|| {
                    format!("proto \"{v}\" is not a protocol (all, ip, ipv6, arp or a number)")
                })?;
                if c.protocol == 0 {
                    return Err("proto 0 cannot join a fanout group".into());
                }
            }
            "rcvbuf" => c.rcvbuf = Some(positive(k, w.value(k)?)?),
            other => {
                return Err(format!(
                    "unknown word \"{other}\" (run takes dev, group, mode, flags, workers, ring, write, exec, duration, count, per-worker, max-members, proto, rcvbuf)"
                ))
            }
        }
    }
    c.dev = dev.ok_or("\"dev DEV\" is required")?;
    c.mode = mode.ok_or_else(|| format!("\"mode MODE\" is required ({})", Mode::names()))?;
    if c.write.is_some() && c.exec.is_some() {
        return Err(
            "write and exec cannot go together (each takes the workers' pcap streams)".into(),
        );
    }
    if c.stdout_stream() && c.workers != 1 {
        return Err(format!(
            "write - takes one worker (workers {}): standard output holds one pcap stream",
            c.workers
        ));
    }
    Ok(c)
}

/// `bench` words.
pub fn parse_bench(words: &[String]) -> Result<BenchCmd, SyntaxError> {
    let mut w = Words { w: words, i: 0 };
    let mut c = BenchCmd::default();
    let mut seen = Vec::new();
    while let Some(k) = w.key(&mut seen)? {
        match k {
            "workers" => {
                let n = positive(k, w.value(k)?)?;
                if n > 64 {
                    return Err(format!("workers {n}: the bench takes at most 64"));
                }
                c.workers = n;
            }
            "rate" => c.rate = positive(k, w.value(k)?)?,
            "per-worker" => c.per_worker = positive(k, w.value(k)?)?,
            "seconds" => c.seconds = positive(k, w.value(k)?)?,
            "flows" => {
                let n = positive(k, w.value(k)?)?;
                if n > MAX_BENCH_FLOWS {
                    return Err(format!("flows {n}: the bench sends at most {MAX_BENCH_FLOWS}"));
                }
                c.flows = n;
            }
            other => {
                return Err(format!(
                    "unknown word \"{other}\" (bench takes workers N, rate PPS, per-worker PPS, seconds S, flows N)"
                ))
            }
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpt_cli::args::words as w;

    #[test]
    fn run_words() {
        let c = parse_run(&w(
            "dev eth0 mode hash flags rollover,defrag workers 4 ring",
        ))
        .expect("ok");
        assert_eq!(c.dev, "eth0");
        assert_eq!(c.mode, Mode::Hash);
        assert_eq!(c.flags, Flags::ROLLOVER.union(Flags::DEFRAG));
        assert_eq!((c.workers, c.ring, c.group), (4, true, None));
        let c = parse_run(&w("mode cbpf dev x group 42 duration 1.5 count 10")).expect("ok");
        assert_eq!(c.group, Some(42));
        assert_eq!(c.duration, Some(Duration::from_millis(1500)));
        assert_eq!(c.count, Some(10));
    }

    #[test]
    fn exec_and_write_words() {
        let c = parse_run(&[
            "dev".into(),
            "x".into(),
            "mode".into(),
            "hash".into(),
            "workers".into(),
            "3".into(),
            "exec".into(),
            "tcpdump -r - -w /d/w%i.pcap # 100%% %x".into(),
        ])
        .expect("ok");
        assert_eq!(
            c.exec_for(2).as_deref(),
            Some("tcpdump -r - -w /d/w2.pcap # 100% %x")
        );
        assert!(parse_run(&w("dev x mode hash workers 2 write -"))
            .expect_err("two workers on stdout")
            .contains("one worker"));
        let c = parse_run(&w("dev x mode hash workers 1 write -")).expect("ok");
        assert!(c.stdout_stream());
        assert!(parse_run(&w("dev x mode hash write /d exec cat"))
            .expect_err("both")
            .contains("cannot go together"));
        assert!(
            parse_run(&["dev", "x", "mode", "hash", "exec", " "].map(String::from))
                .expect_err("empty")
                .contains("needs a command")
        );
    }

    #[test]
    fn run_errors_name_the_word() {
        let e = parse_run(&w("dev eth0 mode fast")).expect_err("mode");
        assert!(e.contains("\"fast\"") && e.contains("hash, lb"), "{e}");
        assert!(parse_run(&w("mode hash")).expect_err("dev").contains("dev"));
        assert!(parse_run(&w("dev x")).expect_err("mode").contains("mode"));
        assert!(parse_run(&w("dev x mode lb flags warp"))
            .expect_err("flag")
            .contains("warp"));
        assert!(parse_run(&w("dev x mode lb group 70000"))
            .expect_err("id")
            .contains("70000"));
        assert!(parse_run(&w("dev x mode lb workers 0"))
            .expect_err("0")
            .contains("workers"));
        assert!(parse_run(&w("mode lb dev"))
            .expect_err("value")
            .contains("needs a value"));
        assert!(parse_run(&w("dev x mode lb frob"))
            .expect_err("word")
            .contains("frob"));
        // a keyword given twice (issue 27 item 12: the last one counted, silently)
        for twice in [
            "dev x mode hash mode lb",
            "dev x mode lb workers 1 workers 3",
            "dev x dev y mode lb",
            "dev x mode lb proto ip protocol ipv6",
        ] {
            let e = parse_run(&w(twice)).expect_err(twice);
            assert!(e.contains("given twice"), "{twice}: {e}");
        }
        assert!(parse_show(&w("dev x dev y")).is_err());
        assert!(parse_bench(&w("workers 1 workers 2")).is_err());
    }

    #[test]
    fn show_and_bench_words() {
        assert_eq!(
            parse_show(&w("dev v0 group 3")).expect("ok"),
            ShowCmd {
                dev: Some("v0".into()),
                group: Some(3)
            }
        );
        assert!(parse_show(&w("mode hash")).is_err());
        let b = parse_bench(&w("workers 3 per-worker 1000")).expect("ok");
        assert_eq!(
            (b.workers, b.per_worker, b.effective_rate()),
            (3, 1000, 6000)
        );
        assert!(parse_bench(&w("rate 0")).is_err());
    }
}

//! What pfanout prints: groups (`show`), the live view and summary of `run`, the table of
//! `bench`; each as a table or as JSON from the same rows.

use mpt_cli::render::{self, Style, TableRow};
use serde::Serialize;

use crate::cmd::run::Rate;
use crate::show::{flags_words, GroupView, SocketView};

/// A command's output.
#[derive(Debug)]
pub enum Output {
    /// `show`.
    Groups(Vec<GroupView>, bool),
    /// `run`'s summary.
    Run(RunSummary),
    /// `bench`.
    Bench(BenchReport),
    /// What `run` or `bench` would do (`--check`).
    Check(crate::cmd::check::CheckReport),
    /// `metrics`: the Prometheus text exposition.
    Metrics(String),
}

/// Print an output.
pub fn print(out: &Output, style: Style) {
    match out {
        Output::Metrics(text) => mpt_cli::metrics::print(text),
        Output::Groups(g, stats) => print_groups(g, *stats, style),
        Output::Run(s) => print_summary(s, style),
        Output::Bench(b) => print_bench(b, style),
        Output::Check(c) => {
            if style.json {
                render::print_json(c, style.pretty);
            } else {
                render::print_line(&c.summary);
                for n in &c.notes {
                    render::print_line(&format!("note: {n}"));
                }
            }
        }
    }
}

fn fill(s: &SocketView, bytes: bool) -> String {
    match (s.rmem_alloc, s.rcvbuf) {
        (Some(a), Some(b)) if bytes => format!("{a}/{b}"),
        (Some(a), Some(b)) if b > 0 => format!("{:.0}%", 100.0 * f64::from(a) / f64::from(b)),
        _ => "-".to_string(),
    }
}

/// A member's row.
#[derive(Debug, Serialize)]
struct MemberRow<'a> {
    #[serde(flatten)]
    s: &'a SocketView,
    #[serde(skip)]
    bytes: bool,
}

/// A member's row with `-s`: its rollover counters too.
#[derive(Debug, Serialize)]
struct StatsRow<'a>(MemberRow<'a>);

impl TableRow for StatsRow<'_> {
    fn headers() -> Vec<&'static str> {
        let mut h = MemberRow::headers();
        h.push("ROLLOVER ALL/HUGE/FAILED");
        h
    }
    fn cells(&self) -> Vec<String> {
        let mut c = self.0.cells();
        c.push(match (&self.0.s.rollover, &self.0.s.rollover_unread) {
            (Some(r), _) => format!("{}/{}/{}", r.all, r.huge, r.failed),
            (None, Some(_)) => "?".into(),
            (None, None) => "-".into(),
        });
        c
    }
}

impl TableRow for MemberRow<'_> {
    fn headers() -> Vec<&'static str> {
        vec!["INODE", "PID", "PROCESS", "RING", "FILL", "DROPS"]
    }
    fn cells(&self) -> Vec<String> {
        let s = self.s;
        let pids: Vec<String> = s.owners.iter().map(|o| o.pid.to_string()).collect();
        let names: Vec<String> = s.owners.iter().map(|o| o.process.clone()).collect();
        vec![
            s.inode.to_string(),
            if pids.is_empty() {
                "-".into()
            } else {
                pids.join(",")
            },
            if names.is_empty() {
                "-".into()
            } else {
                names.join(",")
            },
            match &s.ring {
                Some(r) => format!(
                    "v{} {}x{}B frames {}x{}B",
                    r.version, r.block_nr, r.block_size, r.frame_nr, r.frame_size
                ),
                None => "-".into(),
            },
            fill(s, self.bytes),
            s.drops.map_or("-".into(), |d| d.to_string()),
        ]
    }
}

fn print_groups(groups: &[GroupView], stats: bool, style: Style) {
    if style.json {
        render::print_json(&groups, style.pretty);
        return;
    }
    let mut out = Vec::new();
    for g in groups {
        let head = match g.id {
            Some(id) => format!(
                "group {id} mode {} flags {} members {} dev {} proto {}",
                g.mode,
                flags_words(&g.flags),
                g.members,
                g.dev.as_deref().unwrap_or("-"),
                g.protocol
            ),
            None => format!("no group: {} sockets", g.members),
        };
        let rows: Vec<MemberRow<'_>> = g
            .sockets
            .iter()
            .map(|s| MemberRow { s, bytes: stats })
            .collect();
        let table = if stats && g.id.is_some() {
            let rows: Vec<StatsRow<'_>> = rows.into_iter().map(StatsRow).collect();
            render::rows_to_string(&rows, Style::default())
        } else {
            render::rows_to_string(&rows, Style::default())
        };
        let mut body: Vec<String> = table.lines().map(|l| format!("    {l}")).collect();
        if stats {
            for s in &g.sockets {
                if let Some(why) = &s.rollover_unread {
                    body.push(format!(
                        "    socket {}: rollover counters not read: {why}",
                        s.inode
                    ));
                }
            }
        }
        out.push(format!("{head}\n{}", body.join("\n")));
    }
    if !out.is_empty() {
        render::print_line(&out.join("\n"));
    }
}

/// The summary of a run.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    /// `summary`.
    pub r#type: &'static str,
    /// The group.
    #[serde(flatten)]
    pub info: GroupInfo,
    /// Seconds the workers ran.
    pub seconds: f64,
    /// Why it ended.
    pub ended: Ended,
    /// Per worker.
    pub per_worker: Vec<WorkerStats>,
    /// All workers together.
    pub total: WorkerStats,
}

impl RunSummary {
    /// The summary of `workers`' figures.
    pub fn new(info: GroupInfo, workers: Vec<WorkerStats>, seconds: f64, ended: Ended) -> Self {
        let total = sum(&workers);
        RunSummary {
            r#type: "summary",
            info,
            seconds,
            ended,
            per_worker: workers,
            total,
        }
    }
}

/// The sum of the workers' figures.
pub fn sum(w: &[WorkerStats]) -> WorkerStats {
    let mut t = WorkerStats {
        worker: None,
        ..WorkerStats::default()
    };
    for s in w {
        t.packets += s.packets;
        t.bytes += s.bytes;
        t.kernel_packets += s.kernel_packets;
        t.drops += s.drops;
        t.rollover_all += s.rollover_all;
        t.rollover_huge += s.rollover_huge;
        t.rollover_failed += s.rollover_failed;
        t.streamed += s.streamed;
        t.pipe_dropped += s.pipe_dropped;
        t.reader_gone += s.reader_gone;
        t.stream_cut |= s.stream_cut;
    }
    t
}

/// A worker's row (or the total's).
#[derive(Debug, Serialize)]
struct WorkerRow {
    label: String,
    s: WorkerStats,
    rate: Option<Rate>,
}

impl TableRow for WorkerRow {
    fn headers() -> Vec<&'static str> {
        vec![
            "WORKER", "PACKETS", "BYTES", "DROPS", "ROLLOVER", "HUGE", "FAILED",
        ]
    }
    fn cells(&self) -> Vec<String> {
        let s = &self.s;
        vec![
            self.label.clone(),
            s.packets.to_string(),
            s.bytes.to_string(),
            s.drops.to_string(),
            s.rollover_all.to_string(),
            s.rollover_huge.to_string(),
            s.rollover_failed.to_string(),
        ]
    }
}

/// The live table's row: rates first.
struct LiveRow<'a>(&'a WorkerRow);

impl TableRow for LiveRow<'_> {
    fn headers() -> Vec<&'static str> {
        vec![
            "WORKER", "PKTS/S", "DROPS/S", "PACKETS", "DROPS", "ROLLOVER", "HUGE", "FAILED",
        ]
    }
    fn cells(&self) -> Vec<String> {
        let (s, r) = (&self.0.s, self.0.rate.unwrap_or_default());
        let mut drops = format!("{:.0}", r.drops);
        if r.pipe_drops > 0.0 {
            drops = format!("{drops} (+{:.0} pipe)", r.pipe_drops);
        }
        vec![
            self.0.label.clone(),
            format!("{:.0}", r.packets),
            drops,
            s.packets.to_string(),
            s.drops.to_string(),
            s.rollover_all.to_string(),
            s.rollover_huge.to_string(),
            s.rollover_failed.to_string(),
        ]
    }
}

impl Serialize for LiveRow<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

fn worker_rows(w: &[WorkerStats], rates: Option<&[Rate]>) -> Vec<WorkerRow> {
    let mut rows: Vec<WorkerRow> = w
        .iter()
        .enumerate()
        .map(|(i, s)| WorkerRow {
            label: s.worker.map_or_else(|| "-".to_string(), |w| w.to_string()),
            s: s.clone(),
            rate: rates.and_then(|r| r.get(i).copied()),
        })
        .collect();
    let total = rates.map(|r| {
        r.iter().fold(Rate::default(), |a, b| Rate {
            packets: a.packets + b.packets,
            drops: a.drops + b.drops,
            pipe_drops: a.pipe_drops + b.pipe_drops,
        })
    });
    rows.push(WorkerRow {
        label: "total".into(),
        s: sum(w),
        rate: total,
    });
    rows
}

/// The worker table, with a total line.
pub fn worker_table(w: &[WorkerStats]) -> String {
    render::rows_to_string(&worker_rows(w, None), Style::default())
}

/// The live table: per second rates, then the counts so far.
pub fn live_table(w: &[WorkerStats], rates: &[Rate]) -> String {
    let rows = worker_rows(w, Some(rates));
    let live: Vec<LiveRow<'_>> = rows.iter().map(LiveRow).collect();
    render::rows_to_string(&live, Style::default())
}

/// The readers of `exec`, one line each: how it ended, what it did not get.
fn reader_lines(w: &[WorkerStats]) -> Vec<String> {
    w.iter()
        .filter_map(|s| {
            let r = s.reader.as_ref()?;
            let how = r.ended.clone().unwrap_or_else(|| "running".into());
            let mut line = format!(
                "worker {} reader pid {} \"{}\": {how}{}; {} packets streamed",
                s.worker.unwrap_or(0),
                r.pid,
                r.command,
                if r.killed_by_pfanout {
                    " (ended by pfanout: it did not exit after its stream closed)"
                } else {
                    ""
                },
                s.streamed
            );
            if s.pipe_dropped > 0 {
                line.push_str(&format!(", {} dropped (pipe full)", s.pipe_dropped));
            }
            if s.reader_gone > 0 {
                line.push_str(&format!(", {} lost (reader gone)", s.reader_gone));
            }
            if s.stream_cut {
                line.push_str(", the stream's end was cut (the reader did not take it)");
            }
            Some(line)
        })
        .collect()
}

fn head(i: &GroupInfo) -> String {
    format!(
        "group {} mode {} flags {} dev {} workers {}{}",
        i.group,
        i.mode,
        if i.flags.is_empty() {
            "none".to_string()
        } else {
            i.flags.join(",")
        },
        i.dev,
        i.workers,
        if i.ring { " ring" } else { "" }
    )
}

fn print_summary(s: &RunSummary, style: Style) {
    if style.json {
        // JSON Lines, as the interval lines before it (never a pretty document after them)
        render::print_json(s, false);
        return;
    }
    render::print_line(&format!(
        "{}: {} packets in {:.1} s (ended by {})",
        head(&s.info),
        s.total.packets,
        s.seconds,
        match s.ended {
            Ended::Duration => "duration",
            Ended::Count => "count",
            Ended::Signal => "signal",
            Ended::Error => "error",
        }
    ));
    render::print_line(&worker_table(&s.per_worker));
    for l in reader_lines(&s.per_worker) {
        render::print_line(&l);
    }
    let t = &s.total;
    if s.per_worker.iter().all(|w| w.reader.is_none()) && (t.pipe_dropped > 0 || t.stream_cut) {
        render::print_line(&format!(
            "stream: {} packets dropped (its reader was slow){}",
            t.pipe_dropped,
            if t.stream_cut {
                ", its end was cut"
            } else {
                ""
            }
        ));
    }
}

/// One live line of `-j run`.
#[derive(Debug, Serialize)]
struct Interval<'a> {
    r#type: &'static str,
    /// Wall-clock time of the line (RFC 3339, UTC, milliseconds).
    time: String,
    group: u16,
    seconds: f64,
    per_worker: Vec<IntervalWorker<'a>>,
    total: IntervalWorker<'a>,
}

/// A worker's counts so far and rates over the last interval.
#[derive(Debug, Serialize)]
struct IntervalWorker<'a> {
    #[serde(flatten)]
    s: std::borrow::Cow<'a, WorkerStats>,
    packets_per_second: f64,
    dropped_per_second: f64,
    pipe_dropped_per_second: f64,
}

/// Print the live view: a JSON line, a table redrawn in place on a terminal, or (not a
/// terminal) the table appended.
pub fn live(
    info: &GroupInfo,
    elapsed: f64,
    w: &[WorkerStats],
    rates: &[Rate],
    mode: LiveMode,
    drawn: &mut usize,
) {
    if mode == LiveMode::Json {
        fn iw(s: std::borrow::Cow<'_, WorkerStats>, r: Rate) -> IntervalWorker<'_> {
            IntervalWorker {
                s,
                packets_per_second: r.packets,
                dropped_per_second: r.drops,
                pipe_dropped_per_second: r.pipe_drops,
            }
        }
        let total = rates.iter().fold(Rate::default(), |a, b| Rate {
            packets: a.packets + b.packets,
            drops: a.drops + b.drops,
            pipe_drops: a.pipe_drops + b.pipe_drops,
        });
        render::print_json(
            &Interval {
                r#type: "interval",
                time: mpt_sys::time::rfc3339_now(),
                group: info.group,
                seconds: elapsed,
                per_worker: w
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        iw(
                            std::borrow::Cow::Borrowed(s),
                            rates.get(i).copied().unwrap_or_default(),
                        )
                    })
                    .collect(),
                total: iw(std::borrow::Cow::Owned(sum(w)), total),
            },
            false,
        );
        return;
    }
    let text = format!("{} ({elapsed:.0} s)\n{}", head(info), live_table(w, rates));
    if mode == LiveMode::Appended {
        render::print_line(&text);
        return;
    }
    let mut controls = String::new();
    if *drawn > 0 {
        controls = format!("\x1b[{}A\x1b[J", *drawn);
    }
    *drawn = text.lines().count();
    render::print_redrawn(&controls, &text);
}

/// How the live view is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveMode {
    /// A JSON line each second.
    Json,
    /// A table redrawn in place (a terminal).
    InPlace,
    /// A table appended each second (not a terminal).
    Appended,
}

/// A worker's reader (`exec`): its process and how it ended.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct ReaderEnd {
    /// Its process id (the shell's).
    pub pid: u32,
    /// The command (`%i` replaced).
    pub command: String,
    /// Its exit code, or 128 + the signal that killed it, as a shell says; none while it
    /// runs.
    pub exit: Option<i32>,
    /// How it ended in words (`exit 0`, `killed by signal 9`).
    pub ended: Option<String>,
    /// pfanout ended it: it had not exited 5 s after its stream was closed.
    pub killed_by_pfanout: bool,
}

/// One worker's figures.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct WorkerStats {
    /// Worker number (none in a total).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker: Option<u32>,
    /// Packets the worker read.
    pub packets: u64,
    /// Their bytes (on the wire).
    pub bytes: u64,
    /// Packets the kernel queued to the socket, drops included (PACKET_STATISTICS).
    pub kernel_packets: u64,
    /// Packets the kernel dropped for lack of room (`dropped`, as iproute2's `-s -j`).
    #[serde(rename = "dropped")]
    pub drops: u64,
    /// Rollovers away from this socket (tp_all); in mode rollover the kernel counts every
    /// packet it places this way, the first member's own included.
    pub rollover_all: u64,
    /// Of those, of a huge flow while the socket was low on room (tp_huge).
    pub rollover_huge: u64,
    /// Packets that found no member with room (tp_failed).
    pub rollover_failed: u64,
    /// Packets handed to its pcap stream (`write`, `exec`).
    pub streamed: u64,
    /// Packets its stream dropped because the reader's pipe was full (the reader was slow).
    pub pipe_dropped: u64,
    /// Packets its reader did not get because it was gone.
    pub reader_gone: u64,
    /// Whether the end of its stream was cut: the reader did not take it in time.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stream_cut: bool,
    /// Its reader (`exec`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reader: Option<ReaderEnd>,
}

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Ended {
    /// `duration` passed.
    Duration,
    /// `count` packets were read.
    Count,
    /// SIGINT, SIGTERM or SIGHUP.
    Signal,
    /// A worker failed.
    Error,
}

/// What the output says about the group.
#[derive(Debug, Clone, Serialize)]
pub struct GroupInfo {
    /// Group id.
    pub group: u16,
    /// Mode.
    pub mode: String,
    /// Flags kept by the kernel.
    pub flags: Vec<&'static str>,
    /// Device.
    pub dev: String,
    /// Workers.
    pub workers: u32,
    /// Ring or copies.
    pub ring: bool,
}

/// One mode's figures, per second.
#[derive(Debug, Clone, Serialize)]
pub struct BenchRow {
    /// `hash`, `hash flags rollover`, ...
    pub mode: String,
    /// Packets the workers processed.
    pub processed: f64,
    /// Packets the kernel dropped.
    pub dropped: f64,
    /// Packets rolled over to another worker.
    pub rolled_over: f64,
    /// Packets the generator sent while the mode was measured.
    pub offered: f64,
    /// Share of a core the generator's thread used meanwhile.
    pub generator_cpu: f64,
    /// Packets the kernel queued to the group's sockets, drops included.
    pub received: f64,
    /// Workers that processed packets.
    pub busy_workers: u32,
    /// Flows of which packets were processed (while measured).
    pub flows_seen: u64,
    /// Of those, flows whose packets reached more than one worker.
    pub flows_split: u64,
    /// flows_split / flows_seen: rollover's price in flow affinity.
    pub split_share: f64,
    /// Packets processed after a later packet of their flow had been (by any worker).
    pub out_of_order: u64,
    /// out_of_order / packets processed (while measured).
    pub out_of_order_share: f64,
}

/// The generator against the one of 2013.
#[derive(Debug, Clone, Serialize)]
pub struct GeneratorReport {
    /// How it sends.
    pub method: &'static str,
    /// The rate asked for.
    pub asked: u32,
    /// What it sent, per second.
    pub offered: f64,
    /// Share of one core its thread used (user + system time against wall time).
    pub cpu_share: f64,
    /// sendmmsg calls the kernel refused.
    pub refused_calls: u64,
    /// 2013: workers.
    pub seed_workers: u32,
    /// 2013: packets each worker processed per second.
    pub seed_per_worker: u32,
    /// 2013: packets offered per second.
    pub seed_offered: f64,
    /// 2013: packets processed per second (with rollover).
    pub seed_processed: f64,
    /// The most it sent while a mode was measured, per second.
    pub best_offered: f64,
    /// What it sends per second of one core's time (the full-speed run's rate over its CPU
    /// share).
    pub per_core: f64,
    /// best_offered / 2013's.
    pub offered_vs_seed: f64,
    /// The best mode's processed / 2013's.
    pub processed_vs_seed: f64,
    /// What held the rates below what was asked (empty: nothing did).
    pub limits: Vec<String>,
    /// The AF_PACKET generator and the UDP socket one, each at full speed for a second on
    /// CPU 0 before the modes are measured.
    pub side_by_side: Vec<GeneratorRun>,
    /// AF_PACKET's packets per second over the UDP socket's.
    pub ratio: f64,
}

/// One generator at full speed.
#[derive(Debug, Clone, Serialize)]
pub struct GeneratorRun {
    /// Which.
    pub generator: &'static str,
    /// Packets per second.
    pub pps: f64,
    /// Share of a core its thread used.
    pub cpu_share: f64,
}

/// A ratio of two modes.
#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    /// `hash flags rollover / hash`.
    pub what: String,
    /// The ratio of processed packets.
    pub ratio: f64,
    /// The goal: 0.9 times the workers.
    pub goal: f64,
    /// Whether the goal is met.
    pub met: bool,
    /// Whether the goal applies (hash's is one flow's: more flows spread by hash alone).
    pub applies: bool,
}

/// The bench's report.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// Workers.
    pub workers: u32,
    /// Packets each worker may process per second.
    pub per_worker: u32,
    /// The generator's target rate.
    pub rate: u32,
    /// What the generator sent, per second, over the whole bench.
    pub offered: f64,
    /// Measured seconds per mode.
    pub seconds: u32,
    /// UDP flows offered.
    pub flows: u32,
    /// One row per mode.
    pub modes: Vec<BenchRow>,
    /// Rollover against none.
    pub ratios: Vec<Ratio>,
    /// The generator, against 2013's.
    pub generator: GeneratorReport,
}

impl TableRow for BenchRow {
    fn headers() -> Vec<&'static str> {
        vec![
            "MODE",
            "OFFERED/S",
            "RECEIVED/S",
            "PROCESSED/S",
            "DROPPED/S",
            "ROLLED/S",
            "BUSY WORKERS",
            "FLOWS SPLIT",
            "OUT OF ORDER",
        ]
    }
    fn cells(&self) -> Vec<String> {
        vec![
            self.mode.clone(),
            format!("{:.0}", self.offered),
            format!("{:.0}", self.received),
            format!("{:.0}", self.processed),
            format!("{:.0}", self.dropped),
            format!("{:.0}", self.rolled_over),
            self.busy_workers.to_string(),
            format!(
                "{}/{} ({:.0}%)",
                self.flows_split,
                self.flows_seen,
                100.0 * self.split_share
            ),
            format!(
                "{} ({:.2}%)",
                self.out_of_order,
                100.0 * self.out_of_order_share
            ),
        ]
    }
}

/// Print the report.
fn print_bench(r: &BenchReport, style: Style) {
    if style.json {
        render::print_json(r, style.pretty);
        return;
    }
    render::print_line(&format!(
        "{} workers of {} packets/s each, {} offered at {:.0} packets/s (asked {}), {} s per mode",
        r.workers,
        r.per_worker,
        if r.flows == 1 {
            "one UDP flow".to_string()
        } else {
            format!("{} UDP flows", r.flows)
        },
        r.offered,
        r.rate,
        r.seconds
    ));
    render::print_line(&render::rows_to_string(&r.modes, Style::default()));
    render::print_line(
        "FLOWS SPLIT: flows whose packets reached more than one worker; OUT OF ORDER: packets \
         processed after a later packet of their flow",
    );
    for x in &r.ratios {
        if !x.applies {
            render::print_line(&format!(
                "{}: {:.2} (no goal: hash spreads {} flows by itself)",
                x.what, x.ratio, r.flows
            ));
            continue;
        }
        render::print_line(&format!(
            "{}: {:.2} (goal >= {:.2}: {})",
            x.what,
            x.ratio,
            x.goal,
            if x.met { "met" } else { "missed" }
        ));
    }
    let g = &r.generator;
    render::print_line(&format!(
        "generator: {}: {:.0} packets/s offered of {} asked over the bench ({:.0} at most in a \
         mode), {:.0}% of a core; at full speed about {:.0} packets/s per core of its time",
        g.method,
        g.offered,
        g.asked,
        g.best_offered,
        100.0 * g.cpu_share,
        g.per_core
    ));
    render::print_line(&format!(
        "2013: {} workers of {} packets/s, {:.0} offered, {:.0} processed; here {:.2}x its \
         offered rate (the best mode's), {:.2}x its processed rate",
        g.seed_workers,
        g.seed_per_worker,
        g.seed_offered,
        g.seed_processed,
        g.offered_vs_seed,
        g.processed_vs_seed
    ));
    for l in &g.limits {
        render::print_line(&format!("held back by {l}"));
    }
    let runs: Vec<String> = g
        .side_by_side
        .iter()
        .map(|r| {
            format!(
                "{} {:.0}/s ({:.0}% of a core)",
                r.generator,
                r.pps,
                100.0 * r.cpu_share
            )
        })
        .collect();
    if !runs.is_empty() {
        render::print_line(&format!(
            "generators side by side at full speed, 1 s each on CPU 0: {}: {:.2}x",
            runs.join(", "),
            g.ratio
        ));
    }
}

//! What pfanout prints: groups (`show`), the live view and summary of `run`, the table of
//! `bench`; each as a table or as JSON from the same rows.

use mpt_cli::render::{self, Style, TableRow};
use serde::Serialize;

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
        let table = render::rows_to_string(&rows, Style::default());
        let body: Vec<String> = table.lines().map(|l| format!("    {l}")).collect();
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
    }
    t
}

/// A worker's row (or the total's).
#[derive(Debug, Serialize)]
struct WorkerRow {
    label: String,
    s: WorkerStats,
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

/// The worker table, with a total line.
pub fn worker_table(w: &[WorkerStats]) -> String {
    let mut rows: Vec<WorkerRow> = w
        .iter()
        .map(|s| WorkerRow {
            label: s.worker.map_or_else(|| "-".to_string(), |w| w.to_string()),
            s: *s,
        })
        .collect();
    rows.push(WorkerRow {
        label: "total".into(),
        s: sum(w),
    });
    render::rows_to_string(&rows, Style::default())
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
}

/// One live line of `-j run`.
#[derive(Debug, Serialize)]
struct Interval<'a> {
    r#type: &'static str,
    group: u16,
    seconds: f64,
    per_worker: &'a [WorkerStats],
    total: WorkerStats,
}

/// Print the live view: a JSON line, or a table redrawn in place on a terminal.
pub fn live(info: &GroupInfo, elapsed: f64, w: &[WorkerStats], table: bool, drawn: &mut usize) {
    if !table {
        render::print_json(
            &Interval {
                r#type: "interval",
                group: info.group,
                seconds: elapsed,
                per_worker: w,
                total: sum(w),
            },
            false,
        );
        return;
    }
    let text = format!("{} ({elapsed:.0} s)\n{}", head(info), worker_table(w));
    let mut controls = String::new();
    if *drawn > 0 {
        controls = format!("\x1b[{}A\x1b[J", *drawn);
    }
    *drawn = text.lines().count();
    render::print_redrawn(&controls, &text);
}

/// One worker's figures.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
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
    /// Workers that processed packets.
    pub busy_workers: u32,
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
    /// One row per mode.
    pub modes: Vec<BenchRow>,
    /// Rollover against none.
    pub ratios: Vec<Ratio>,
}

impl TableRow for BenchRow {
    fn headers() -> Vec<&'static str> {
        vec![
            "MODE",
            "PROCESSED/S",
            "DROPPED/S",
            "ROLLED/S",
            "BUSY WORKERS",
        ]
    }
    fn cells(&self) -> Vec<String> {
        vec![
            self.mode.clone(),
            format!("{:.0}", self.processed),
            format!("{:.0}", self.dropped),
            format!("{:.0}", self.rolled_over),
            self.busy_workers.to_string(),
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
        "{} workers of {} packets/s each, one UDP flow offered at {:.0} packets/s, {} s per mode",
        r.workers, r.per_worker, r.offered, r.seconds
    ));
    render::print_line(&render::rows_to_string(&r.modes, Style::default()));
    for x in &r.ratios {
        render::print_line(&format!(
            "{}: {:.2} (goal >= {:.2}: {})",
            x.what,
            x.ratio,
            x.goal,
            if x.met { "met" } else { "missed" }
        ));
    }
}

//! One renderer: the same row type is printed as a table (comfy-table) or as JSON (serde).
//!
//! Text output carries strings the kernel and other users chose (a device named
//! `$'\e]0;PWN\a'`, another process's name): every control character in it but the line
//! breaks is printed escaped (`\x1b`), as error lines are, so that nothing written to a
//! terminal can drive it ([`text_safe`]). JSON escapes them by itself.

use std::borrow::Cow;
use std::io::Write;

use comfy_table::presets::NOTHING;
use comfy_table::{ContentArrangement, Table};
use serde::Serialize;

/// A row type that can be shown as a table; its JSON form is its `Serialize` implementation.
pub trait TableRow: Serialize {
    /// Column titles.
    fn headers() -> Vec<&'static str>;
    /// Cells, in the order of [`TableRow::headers`]. A cell may hold several lines.
    fn cells(&self) -> Vec<String>;
    /// How many of the last columns are counters that only `-s` fills: a table leaves them out
    /// where no row has a value there (`-`).
    fn stats_columns() -> usize {
        0
    }
}

/// How to print.
#[derive(Debug, Clone, Copy, Default)]
pub struct Style {
    /// JSON instead of a table.
    pub json: bool,
    /// Pretty JSON.
    pub pretty: bool,
    /// One line per object (`-o`, ip's -oneline): a cell's lines (a multipath route's
    /// nexthops) joined on one line by [`ONELINE_JOIN`].
    pub oneline: bool,
}

/// What joins a cell's lines with `-o`: ip's -oneline marks its line breaks with a backslash.
pub const ONELINE_JOIN: &str = " \\ ";

/// JSON text of any value, compact or pretty.
pub fn to_json<T: Serialize + ?Sized>(v: &T, pretty: bool) -> String {
    let r = if pretty {
        serde_json::to_string_pretty(v)
    } else {
        serde_json::to_string(v)
    };
    // Serializing plain data structures cannot fail; fall back to null rather than panic.
    r.unwrap_or_else(|_| "null".to_string())
}

/// Render rows as a table or a JSON array.
pub fn rows_to_string<R: TableRow>(rows: &[R], style: Style) -> String {
    if style.json {
        return to_json(rows, style.pretty);
    }
    if rows.is_empty() {
        return String::new();
    }
    let mut headers = R::headers();
    let mut cells: Vec<Vec<String>> = rows.iter().map(TableRow::cells).collect();
    let stats = R::stats_columns().min(headers.len());
    let first = headers.len() - stats;
    if cells.iter().all(|c| c.iter().skip(first).all(|v| v == "-")) {
        headers.truncate(first);
        for c in &mut cells {
            c.truncate(first);
        }
    }
    for row in &mut cells {
        for c in row.iter_mut() {
            if let Cow::Owned(safe) = text_safe(c) {
                *c = safe;
            }
            if style.oneline && c.contains('\n') {
                *c = c.lines().collect::<Vec<_>>().join(ONELINE_JOIN);
            }
        }
    }
    if let Some(s) = plain_table(&headers, &cells, style.oneline) {
        return s;
    }
    let mut t = Table::new();
    t.load_preset(NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(headers);
    for c in cells {
        t.add_row(c);
    }
    let s = t.to_string();
    // comfy-table pads every line; operators grep and diff this output, so trim the ends.
    // -o: objects only, one a line, as ip -oneline prints them (no header to skip in a loop)
    s.lines()
        .skip(usize::from(style.oneline))
        .map(|l| l.trim_end().strip_prefix(' ').unwrap_or(l.trim_end()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The table comfy-table's `NOTHING` preset draws, written directly where every cell is one
/// line of printable ASCII (its display width is its length): each cell padded to its
/// column's width, columns two spaces apart, line ends trimmed. A flush of 100,000 routes
/// prints 100,000 rows; comfy-table took 0.19 s of a 1.3 s command for them. `None`: some
/// cell needs comfy-table (several lines, other characters).
fn plain_table(headers: &[&str], cells: &[Vec<String>], oneline: bool) -> Option<String> {
    let plain = |c: &str| c.bytes().all(|b| (0x20..0x7f).contains(&b));
    if !headers.iter().all(|h| plain(h)) || !cells.iter().flatten().all(|c| plain(c)) {
        return None;
    }
    let mut width: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in cells {
        if row.len() != width.len() {
            return None;
        }
        for (w, c) in width.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let line_len = width.iter().sum::<usize>() + 2 * width.len() + 1;
    let mut out = String::with_capacity(line_len * (cells.len() + 1));
    let line = |out: &mut String, row: &mut dyn Iterator<Item = &str>| {
        let start = out.len();
        for (i, (c, w)) in row.zip(&width).enumerate() {
            if i > 0 {
                out.push_str("  ");
            }
            out.push_str(c);
            out.extend(std::iter::repeat_n(' ', w - c.len()));
        }
        out.truncate(start + out[start..].trim_end().len());
        out.push('\n');
    };
    if !oneline {
        line(&mut out, &mut headers.iter().copied());
    }
    for row in cells {
        line(&mut out, &mut row.iter().map(String::as_str));
    }
    out.pop();
    Some(out)
}

/// Counters as every tool prints them: in JSON an object of name -> number, in the order
/// given (never a list of pairs), named as iproute2's `-s -j` names its `stats64` where one
/// applies (`packets`, `bytes`, `dropped`); in text one `counters:` line of the non-zero ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters(pub Vec<(String, u64)>);

impl Serialize for Counters {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl FromIterator<(String, u64)> for Counters {
    fn from_iter<I: IntoIterator<Item = (String, u64)>>(it: I) -> Self {
        Counters(it.into_iter().collect())
    }
}

impl From<Vec<(String, u64)>> for Counters {
    fn from(v: Vec<(String, u64)>) -> Self {
        Counters(v)
    }
}

impl Counters {
    /// A counter's value (0 if there is none of that name).
    pub fn get(&self, name: &str) -> u64 {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map_or(0, |(_, v)| *v)
    }

    /// The text line (`counters: redirected 5, no-route 2`), `None` when all are zero.
    pub fn line(&self) -> Option<String> {
        let c: Vec<String> = self
            .0
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        (!c.is_empty()).then(|| format!("counters: {}", c.join(", ")))
    }
}

/// With `-j`, a failure is also a JSON object on standard output (set once by [`install`]).
static JSON_ERRORS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// The first failed write to standard output other than a closed pipe.
static OUTPUT_ERROR: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

impl Style {
    /// Make this the process's style: with JSON, failures are reported on standard output too
    /// (`{"error": ..., "errno": ..., "hint": ...}`, one line), so that a script reading JSON
    /// gets JSON either way.
    pub fn install(self) -> Style {
        JSON_ERRORS.store(self.json, std::sync::atomic::Ordering::Relaxed);
        self
    }
}

/// Whether failures are reported as JSON on standard output too (see [`Style::install`]).
pub fn json_errors() -> bool {
    JSON_ERRORS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Note how a write to standard output went: a closed pipe (`| head -1`) ends nothing (the
/// command's work is done either way, and a batch goes on), any other failure (`>/dev/full`)
/// is kept for [`output_failure`], so that the exit code tells a script its output is not whole.
fn wrote(r: std::io::Result<()>) {
    if let Err(e) = r {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            if let Ok(mut g) = OUTPUT_ERROR.lock() {
                g.get_or_insert_with(|| mpt_sys::error::words(&e));
            }
        }
    }
}

/// The failure to write standard output, if a write failed (other than a closed pipe), after
/// flushing what is buffered.
pub fn output_failure() -> Option<crate::Failure> {
    wrote(std::io::stdout().lock().flush());
    let e = OUTPUT_ERROR.lock().ok()?.clone()?;
    Some(crate::Failure::system(format!(
        "write standard output: {e}"
    )))
}

/// Standard output held back in memory (see [`hold_output`]).
static HELD: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Hold what is printed back in memory until [`release_output`]: a batch that holds the
/// namespace's lock must not hold it while its reader is slow (`ila -j -b big | sleep 12`
/// kept every other invocation waiting on a full pipe).
pub fn hold_output() {
    if let Ok(mut g) = HELD.lock() {
        g.get_or_insert_with(String::new);
    }
}

/// Write what [`hold_output`] held back, and print directly from now on.
pub fn release_output() {
    let held = HELD.lock().ok().and_then(|mut g| g.take());
    if let Some(text) = held {
        wrote(std::io::stdout().lock().write_all(text.as_bytes()));
    }
}

/// Write `text` (whole lines) to standard output, or hold it back.
fn emit(text: &str) {
    if let Ok(mut g) = HELD.lock() {
        if let Some(buf) = g.as_mut() {
            buf.push_str(text);
            return;
        }
    }
    wrote(std::io::stdout().lock().write_all(text.as_bytes()));
}

/// Print rows to standard output ([`wrote`] says what a failed write does).
pub fn print_rows<R: TableRow>(rows: &[R], style: Style) {
    let s = rows_to_string(rows, style);
    if s.is_empty() {
        return;
    }
    emit(&format!("{s}\n"));
}

/// Text as it may reach a terminal: each control character but `\n` and `\t` (an escape
/// sequence's ESC, BEL, a carriage return, C1 codes) as `\xNN`; borrowed when there is none.
pub fn text_safe(s: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        mpt_sys::error::push_escaped(&mut out, c, unsafe_char(c));
    }
    Cow::Owned(out)
}

/// Print one line of text, control characters escaped ([`text_safe`]). A closed standard
/// output (`| head`) is not an error: the command's work is done either way, and a batch
/// goes on.
pub fn print_line(line: &str) {
    emit(&format!("{}\n", text_safe(line)));
}

/// Print text made safe by the caller and terminal controls of its own (a live view redrawn
/// in place): `controls` verbatim, then `text` escaped as [`print_line`] does.
pub fn print_redrawn(controls: &str, text: &str) {
    emit(&format!("{controls}{}\n", text_safe(text)));
}

/// Print one JSON value (change reports).
pub fn print_json<T: Serialize>(v: &T, pretty: bool) {
    emit(&format!("{}\n", to_json(v, pretty)));
}

/// What a tool's BPF state costs in `dataplane show` (`-j` keys `memory_bytes`, `maps`,
/// `dataplane_memory_bytes`): the state's maps, each as the kernel describes it, and the
/// attached programs' own maps (caches, device maps), by the kernel's account (`memlock`).
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct StateMemory {
    /// Bytes the kernel charges for the state's maps, summed.
    pub memory_bytes: u64,
    /// The state's maps.
    pub maps: Vec<MapRow>,
    /// Bytes of the attached programs' own maps (absent: nothing attached).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dataplane_memory_bytes: Option<u64>,
}

/// One map of a tool's state.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct MapRow {
    /// Its name, as the kernel has it (a growable map's inner map is `NAME_in`).
    pub name: String,
    /// Its id (`bpftool map show id N`).
    pub id: u32,
    /// Its capacity now.
    pub max_entries: u32,
    /// Bytes the kernel charges for it.
    pub memory_bytes: u64,
}

impl StateMemory {
    /// What the kernel says of the state `pinned` and of the maps of the attached programs
    /// `progs` that are not the state's.
    pub fn of(pinned: &mpt_bpf::pinned::Pinned, progs: &[u32]) -> StateMemory {
        let maps = pinned.map_info();
        StateMemory {
            memory_bytes: maps.iter().map(|m| m.memory_bytes).sum(),
            maps: maps
                .into_iter()
                .map(|m| MapRow {
                    name: m.name,
                    id: m.id,
                    max_entries: m.max_entries,
                    memory_bytes: m.memory_bytes,
                })
                .collect(),
            dataplane_memory_bytes: (!progs.is_empty())
                .then(|| pinned.programs_memory_bytes(progs)),
        }
    }

    /// `state memory: N KiB; map ids: NAME ID, ...` and, with programs attached,
    /// `; dataplane programs' maps: N KiB`.
    pub fn line(&self) -> String {
        let ids: Vec<String> = self
            .maps
            .iter()
            .map(|m| format!("{} {}", m.name, m.id))
            .collect();
        let mut l = format!(
            "state memory: {} KiB; map ids: {}",
            self.memory_bytes.div_ceil(1024),
            ids.join(", ")
        );
        if let Some(d) = self.dataplane_memory_bytes {
            l += &format!("; dataplane programs' maps: {} KiB", d.div_ceil(1024));
        }
        l
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct R {
        dst: String,
        metric: u32,
        algo: Option<String>,
    }
    impl TableRow for R {
        fn headers() -> Vec<&'static str> {
            vec!["DST", "METRIC", "ALGO"]
        }
        fn cells(&self) -> Vec<String> {
            vec![
                self.dst.clone(),
                self.metric.to_string(),
                self.algo.clone().unwrap_or_else(|| "-".into()),
            ]
        }
    }

    /// The direct table is exactly what comfy-table draws (widths, spacing, trimmed ends,
    /// empty cells, `-o` without the header).
    #[test]
    fn plain_table_is_comfy_tables_table() {
        let comfy = |headers: &[&str], cells: &[Vec<String>], oneline: bool| {
            let mut t = Table::new();
            t.load_preset(NOTHING)
                .set_content_arrangement(ContentArrangement::Disabled)
                .set_header(headers.to_vec());
            for c in cells {
                t.add_row(c.clone());
            }
            t.to_string()
                .lines()
                .skip(usize::from(oneline))
                .map(|l| l.trim_end().strip_prefix(' ').unwrap_or(l.trim_end()))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let cases: Vec<(Vec<&str>, Vec<Vec<String>>)> = vec![
            (
                vec!["ACTION", "DST", "TABLE", "METRIC", "REASON"],
                [
                    [
                        "deleted",
                        "198.18.0.0/24",
                        "main",
                        "1024",
                        "owned by mproute",
                    ],
                    ["forgotten", "2001:db8::/64", "100", "-", "route was gone"],
                    ["x", "", "local", "0", ""],
                ]
                .iter()
                .map(|r| r.iter().map(|c| c.to_string()).collect())
                .collect(),
            ),
            (
                vec!["A", "LONGER HEADER", "Z"],
                vec![
                    vec!["a much longer cell".into(), "b".into(), String::new()],
                    vec![String::new(), "c".into(), "d".into()],
                ],
            ),
        ];
        for (h, c) in &cases {
            for oneline in [false, true] {
                assert_eq!(
                    plain_table(h, c, oneline).as_deref(),
                    Some(comfy(h, c, oneline).as_str()),
                    "{h:?} oneline {oneline}"
                );
            }
        }
        // what it leaves to comfy-table
        assert!(plain_table(&["A"], &[vec!["two\nlines".into()]], false).is_none());
        assert!(plain_table(&["A"], &[vec!["é".into()]], false).is_none());
    }

    #[test]
    fn same_rows_two_forms() {
        let rows = [R {
            dst: "10.0.0.0/8".into(),
            metric: 5,
            algo: None,
        }];
        let j = rows_to_string(
            &rows,
            Style {
                json: true,
                ..Style::default()
            },
        );
        assert_eq!(j, r#"[{"dst":"10.0.0.0/8","metric":5,"algo":null}]"#);
        let t = rows_to_string(&rows, Style::default());
        assert!(t.contains("DST") && t.contains("10.0.0.0/8") && t.contains('-'));
        assert!(t.lines().all(|l| l == l.trim_end()));
        let c: Counters = vec![("b".to_string(), 2), ("a".to_string(), 0)].into();
        assert_eq!(
            to_json(&c, false),
            r#"{"b":2,"a":0}"#,
            "an object, in order"
        );
        assert_eq!(c.line().as_deref(), Some("counters: b 2"));
        // -o: a cell of several lines on one
        let rows = [R {
            dst: "10.0.0.0/8\nsecond".into(),
            metric: 5,
            algo: None,
        }];
        assert_eq!(rows_to_string(&rows, Style::default()).lines().count(), 3);
        let one = Style {
            oneline: true,
            ..Style::default()
        };
        let t = rows_to_string(&rows, one);
        assert_eq!(t.lines().count(), 1, "no header, one line: {t}");
        assert!(t.contains("10.0.0.0/8 \\ second"), "{t}");
        assert_eq!(
            rows_to_string::<R>(
                &[],
                Style {
                    json: true,
                    ..Style::default()
                }
            ),
            "[]"
        );
    }
}

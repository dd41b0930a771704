//! One renderer: the same row type is printed as a table (comfy-table) or as JSON (serde).

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
}

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
    let mut t = Table::new();
    t.load_preset(NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(headers);
    for c in cells {
        t.add_row(c);
    }
    let s = t.to_string();
    // comfy-table pads every line; operators grep and diff this output, so trim the ends.
    s.lines()
        .map(|l| l.trim_end().strip_prefix(' ').unwrap_or(l.trim_end()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Print rows to standard output. A closed pipe (`| head`) is not an error.
pub fn print_rows<R: TableRow>(rows: &[R], style: Style) {
    let s = rows_to_string(rows, style);
    if s.is_empty() {
        return;
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{s}");
}

/// Print one line of text. A closed standard output (`| head`) is not an error: the
/// command's work is done either way, and a batch goes on.
pub fn print_line(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
}

/// Print one JSON value (change reports).
pub fn print_json<T: Serialize>(v: &T, pretty: bool) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", to_json(v, pretty));
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
                pretty: false,
            },
        );
        assert_eq!(j, r#"[{"dst":"10.0.0.0/8","metric":5,"algo":null}]"#);
        let t = rows_to_string(&rows, Style::default());
        assert!(t.contains("DST") && t.contains("10.0.0.0/8") && t.contains('-'));
        assert!(t.lines().all(|l| l == l.trim_end()));
        assert_eq!(
            rows_to_string::<R>(
                &[],
                Style {
                    json: true,
                    pretty: false
                }
            ),
            "[]"
        );
    }
}

//! The Prometheus text exposition format (version 0.0.4), as node_exporter's textfile collector
//! and `promtool check metrics` read it: every family its `# HELP` and `# TYPE` lines, then its
//! samples; label values and help text escaped as the format says. The three tools' `metrics`
//! verbs collect into an [`Exposition`] and print [`Exposition::render`].
//!
//! A family declared and given no sample still prints its HELP and TYPE lines (an empty state
//! is valid, typed output). Two samples of one family with the same labels are summed: the
//! textfile collector drops a whole file that repeats a series.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// A family's type (`# TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (its name ends `_total`).
    Counter,
    /// Goes up and down; also info metrics (`..._info`, value 1, what they say in labels).
    Gauge,
}

impl Kind {
    /// The word of its `# TYPE` line.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        }
    }
}

#[derive(Debug)]
struct Family {
    name: String,
    kind: Kind,
    help: String,
    /// Samples by label set (label order as given), in the order first added.
    order: Vec<Vec<(String, String)>>,
    values: BTreeMap<Vec<(String, String)>, u64>,
}

/// A set of metric families, each name prefixed with the tool's (`mproute_`), in the order
/// declared.
#[derive(Debug)]
pub struct Exposition {
    prefix: String,
    /// Labels every sample carries first (`netns` under `-n`).
    common: Vec<(String, String)>,
    families: Vec<Family>,
}

/// Whether `s` is a metric or label name (`[a-zA-Z_][a-zA-Z0-9_]*`; the colons metric names
/// may hold are for recording rules, not exporters).
pub fn valid_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// A label value escaped: backslash, double quote and line feed as the format says; any other
/// control character (a process may name itself anything) as the text `\xNN`, as the tools
/// show such names elsewhere (the format has no escape for them, and they must not reach a
/// terminal).
pub fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c if c.is_control() => {
                let _ = write!(s, "\\\\x{:02x}", u32::from(c));
            }
            c => s.push(c),
        }
    }
    s
}

/// Help text escaped: backslash and line feed.
pub fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

impl Exposition {
    /// An empty set for the tool `tool` (its names begin `tool_`).
    pub fn new(tool: &str) -> Exposition {
        Exposition {
            prefix: format!("{}_", tool.replace('-', "_")),
            common: Vec::new(),
            families: Vec::new(),
        }
    }

    /// Every sample carries `name="value"` first (`netns` of `-n`, so that the files of
    /// several namespaces do not repeat each other's series).
    pub fn common_label(&mut self, name: &str, value: &str) {
        debug_assert!(valid_name(name), "label name {name}");
        self.common.push((name.to_string(), value.to_string()));
    }

    /// Declare the family `name` (without the tool's prefix). A counter's name must end
    /// `_total`. Declaring it again does nothing.
    pub fn declare(&mut self, name: &str, kind: Kind, help: &str) {
        let full = format!("{}{name}", self.prefix);
        // names are the tools' constants: a unit test of each tool holds them to the rules
        assert!(valid_name(&full), "metric name {full}");
        assert!(
            kind != Kind::Counter || full.ends_with("_total"),
            "counter {full} must end _total"
        );
        if self.families.iter().any(|f| f.name == full) {
            return;
        }
        self.families.push(Family {
            name: full,
            kind,
            help: help.to_string(),
            order: Vec::new(),
            values: BTreeMap::new(),
        });
    }

    /// Add a sample to the family `name` (declared before: a sample of an undeclared family is
    /// a programming error).
    pub fn add(&mut self, name: &str, labels: &[(&str, &str)], value: u64) {
        let full = format!("{}{name}", self.prefix);
        let Some(f) = self.families.iter_mut().find(|f| f.name == full) else {
            panic!("metric {full} not declared");
        };
        let mut key: Vec<(String, String)> = self.common.clone();
        for (k, v) in labels {
            debug_assert!(valid_name(k), "label name {k}");
            key.push(((*k).to_string(), (*v).to_string()));
        }
        match f.values.get_mut(&key) {
            Some(v) => *v = v.saturating_add(value),
            None => {
                f.values.insert(key.clone(), value);
                f.order.push(key);
            }
        }
    }

    /// The exposition text: one block per family, a line feed at the end of every line.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for f in &self.families {
            let _ = writeln!(out, "# HELP {} {}", f.name, escape_help(&f.help));
            let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind.name());
            for labels in &f.order {
                let v = f.values.get(labels).copied().unwrap_or(0);
                out.push_str(&f.name);
                if !labels.is_empty() {
                    out.push('{');
                    for (i, (k, val)) in labels.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        let _ = write!(out, "{k}=\"{}\"", escape_label(val));
                    }
                    out.push('}');
                }
                let _ = writeln!(out, " {v}");
            }
        }
        out
    }
}

/// Print an exposition's text (through the renderer: a batch holding its lock holds it back
/// with the rest of its output; a closed pipe ends nothing).
pub fn print(text: &str) {
    if !text.is_empty() {
        // no control character is left in it but the line feeds (escape_label)
        crate::render::print_line(text.trim_end_matches('\n'));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_typed_and_prefixed_and_empty_ones_still_declared() {
        let mut e = Exposition::new("mproute");
        e.declare("route_packets_total", Kind::Counter, "Packets forwarded.");
        e.declare("attachment_info", Kind::Gauge, "Attachments.");
        e.add("route_packets_total", &[("dst", "10.0.0.0/8")], 7);
        assert_eq!(
            e.render(),
            "# HELP mproute_route_packets_total Packets forwarded.\n\
             # TYPE mproute_route_packets_total counter\n\
             mproute_route_packets_total{dst=\"10.0.0.0/8\"} 7\n\
             # HELP mproute_attachment_info Attachments.\n\
             # TYPE mproute_attachment_info gauge\n"
        );
        assert_eq!(Exposition::new("ila").render(), "");
    }

    #[test]
    fn label_values_and_help_are_escaped() {
        assert_eq!(escape_label(r#"a\b"c"#), r#"a\\b\"c"#);
        assert_eq!(escape_label("x\ny"), "x\\ny");
        // read back by a Prometheus parser as the four characters \x1b
        assert_eq!(escape_label("a\u{1b}[2J"), "a\\\\x1b[2J");
        assert_eq!(
            escape_help("back\\slash\nand \"quotes\""),
            "back\\\\slash\\nand \"quotes\""
        );
        let mut e = Exposition::new("pfanout");
        e.declare("member_drops_total", Kind::Counter, "a\nb");
        e.add("member_drops_total", &[("process", "we\"ird\\\n")], 1);
        let text = e.render();
        assert!(
            text.contains("# HELP pfanout_member_drops_total a\\nb\n"),
            "{text}"
        );
        assert!(
            text.contains("pfanout_member_drops_total{process=\"we\\\"ird\\\\\\n\"} 1\n"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 3, "{text}");
    }

    #[test]
    fn common_labels_come_first_and_repeated_series_are_summed() {
        let mut e = Exposition::new("ila");
        e.common_label("netns", "blue");
        e.declare("drops_total", Kind::Counter, "Drops.");
        e.add("drops_total", &[("reason", "malformed")], 2);
        e.add("drops_total", &[("reason", "no-match")], 1);
        e.add("drops_total", &[("reason", "malformed")], 3);
        e.declare("drops_total", Kind::Counter, "Drops.");
        let text = e.render();
        assert_eq!(
            text.lines().skip(2).collect::<Vec<_>>(),
            [
                "ila_drops_total{netns=\"blue\",reason=\"malformed\"} 5",
                "ila_drops_total{netns=\"blue\",reason=\"no-match\"} 1",
            ]
        );
        assert_eq!(text.matches("# TYPE").count(), 1);
    }

    #[test]
    fn names_follow_the_rules() {
        assert!(valid_name("mproute_route_bytes_total"));
        assert!(valid_name("_x1"));
        assert!(!valid_name("1x"));
        assert!(!valid_name("a-b"));
        assert!(!valid_name(""));
        assert!(!valid_name("a:b"));
    }

    #[test]
    #[should_panic(expected = "must end _total")]
    fn a_counter_without_total_is_refused() {
        Exposition::new("mproute").declare("route_packets", Kind::Counter, "x");
    }

    #[test]
    fn a_dash_in_the_tool_name_becomes_an_underscore() {
        let mut e = Exposition::new("a-b");
        e.declare("up", Kind::Gauge, "Up.");
        e.add("up", &[], 1);
        assert!(e.render().ends_with("a_b_up 1\n"));
    }
}

//! Shared by the metrics tests (each includes it with `#[path]`): Debian's `promtool check
//! metrics` as the oracle of the exposition format, and the samples of an exposition, read
//! back for the counters' values.

#![allow(dead_code)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Debian's promtool, as `cargo xtask setup` unpacks it under the target directory.
pub fn promtool() -> PathBuf {
    // the test executable is TARGET/debug/deps/NAME-HASH
    let exe = std::env::current_exe().expect("the test's executable");
    let target = exe.ancestors().nth(3).expect("the target directory");
    let p = target.join("tools/prometheus/usr/bin/promtool");
    assert!(
        p.is_file(),
        "{} is missing: run `cargo xtask setup` (it unpacks Debian's promtool there)",
        p.display()
    );
    p
}

/// What `promtool check metrics` says of `text`: whether it passed (exit 0, nothing said:
/// lint problems are printed with exit 3), and what it said.
pub fn verdict(text: &str) -> (bool, String) {
    let mut child = Command::new(promtool())
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start promtool");
    child
        .stdin
        .take()
        .expect("promtool's stdin")
        .write_all(text.as_bytes())
        .expect("write to promtool");
    let o = child.wait_with_output().expect("promtool");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success() && said.trim().is_empty(), said)
}

/// `text` must pass `promtool check metrics`.
pub fn check(text: &str) {
    let (ok, said) = verdict(text);
    assert!(ok, "promtool check metrics: {said}\n--- on:\n{text}");
}

/// One sample line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// Metric name.
    pub name: String,
    /// Labels, unescaped, in order.
    pub labels: Vec<(String, String)>,
    /// Value (the tools print integers).
    pub value: u64,
}

impl Sample {
    /// The value of label `k`.
    pub fn label(&self, k: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    }
}

/// Every sample of an exposition (comments skipped), label values unescaped.
pub fn samples(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (name, rest) = match line.find('{') {
            Some(i) => (&line[..i], &line[i + 1..]),
            None => {
                let (n, v) = line.split_once(' ').expect("NAME VALUE");
                out.push(Sample {
                    name: n.into(),
                    labels: Vec::new(),
                    value: v.parse().expect("value"),
                });
                continue;
            }
        };
        let mut labels = Vec::new();
        let mut chars = rest.chars();
        let mut key = String::new();
        loop {
            match chars.next().expect("label or }") {
                '}' => break,
                ',' => {}
                '=' => {
                    assert_eq!(chars.next(), Some('"'), "{line}");
                    let mut v = String::new();
                    loop {
                        match chars.next().expect("end of value") {
                            '"' => break,
                            '\\' => match chars.next().expect("escape") {
                                'n' => v.push('\n'),
                                c => v.push(c),
                            },
                            c => v.push(c),
                        }
                    }
                    labels.push((std::mem::take(&mut key), v));
                }
                c => key.push(c),
            }
        }
        let value = chars.as_str().trim().parse().expect("value");
        out.push(Sample {
            name: name.into(),
            labels,
            value,
        });
    }
    out
}

/// The samples of `name` whose labels include every one of `labels`.
pub fn find<'a>(all: &'a [Sample], name: &str, labels: &[(&str, &str)]) -> Vec<&'a Sample> {
    all.iter()
        .filter(|s| s.name == name && labels.iter().all(|(k, v)| s.label(k) == Some(*v)))
        .collect()
}

/// The one sample of `name` with `labels` (a test failure if there is not exactly one).
pub fn one(all: &[Sample], name: &str, labels: &[(&str, &str)]) -> u64 {
    let f = find(all, name, labels);
    assert_eq!(f.len(), 1, "{name} {labels:?}: {f:?}");
    f[0].value
}

/// Families the text declares (`# TYPE NAME KIND`), in order.
pub fn types(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(n, k)| (n.to_string(), k.to_string()))
        .collect()
}

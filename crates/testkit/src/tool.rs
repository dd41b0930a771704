//! Running one of our tools inside a test namespace, as an operator would: `TOOL -n NS ARGS`,
//! its exit code, its one-line errors and its JSON (a contract, decoded here once for every
//! test).
//!
//! A command's words ([`Words`]) are given as one string split on whitespace, as they would be
//! typed (`MP.ok(&ns, "add 198.18.0.0/24 nexthop via 10.1.0.2 dev va")`), or as an array or
//! vector of words where one of them has a space in it or is empty.

use std::process::Output;

use serde_json::Value;

use crate::cmd::Words;
use crate::netns::Netns;

/// A built tool binary (`env!("CARGO_BIN_EXE_mproute")`).
#[derive(Debug, Clone, Copy)]
pub struct Tool {
    /// Path of the binary.
    pub bin: &'static str,
    /// Options given before every command (`--backend bpf`).
    pub pre: &'static [&'static str],
}

impl Tool {
    /// The tool at `bin`.
    pub const fn new(bin: &'static str) -> Tool {
        Tool { bin, pre: &[] }
    }

    /// The tool at `bin`, with `pre` before every command's words (`ila --backend bpf`, so
    /// that the translator's tests test it also where the kernel has its own ILA).
    pub const fn with_options(bin: &'static str, pre: &'static [&'static str]) -> Tool {
        Tool { bin, pre }
    }

    /// `TOOL ARGS` (no namespace).
    pub fn run(&self, args: &(impl Words + ?Sized)) -> Output {
        let mut a = self.pre.to_vec();
        a.extend(args.words());
        crate::cmd::run(self.bin, &a)
    }

    /// `TOOL -n NS ARGS`.
    pub fn at(&self, ns: &Netns, args: &(impl Words + ?Sized)) -> Output {
        let mut a = self.pre.to_vec();
        a.extend_from_slice(&["-n", ns.name()]);
        a.extend(args.words());
        crate::cmd::run(self.bin, &a)
    }

    /// `TOOL -n NS ARGS`, which must succeed; its standard output.
    pub fn ok(&self, ns: &Netns, args: &(impl Words + ?Sized)) -> String {
        let args = args.words();
        let o = self.at(ns, &args);
        assert!(
            o.status.success(),
            "{} {} failed ({:?}): {}",
            self.name(),
            args.join(" "),
            o.status.code(),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// `TOOL -n NS -j ARGS`, which must succeed, decoded.
    pub fn json(&self, ns: &Netns, args: &(impl Words + ?Sized)) -> Value {
        let mut a = vec!["-j"];
        a.extend(args.words());
        let out = self.ok(ns, &a);
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("bad JSON from {} {}: {e}: {out}", self.name(), a.join(" ")))
    }

    /// `TOOL -n NS -j ARGS` printing one JSON value per line (batches, monitors), decoded.
    pub fn json_lines(&self, ns: &Netns, args: &(impl Words + ?Sized)) -> Vec<Value> {
        let mut a = vec!["-j"];
        a.extend(args.words());
        json_lines(&self.ok(ns, &a), self.name())
    }

    /// `TOOL -n NS ARGS` refused with exit 2, and `TOOL -n NS --check ARGS` predicting it: the
    /// same exit code and the same words (the dry run foresees the kernel's refusal).
    pub fn refused_alike(&self, ns: &Netns, args: &(impl Words + ?Sized)) {
        let args = args.words();
        let mut dry = vec!["--check"];
        dry.extend_from_slice(&args);
        let c = self.at(ns, &dry);
        let r = self.at(ns, &args);
        let (ce, re) = (
            String::from_utf8_lossy(&c.stderr),
            String::from_utf8_lossy(&r.stderr),
        );
        assert_eq!(
            r.status.code(),
            Some(2),
            "{} {}: {re}",
            self.name(),
            args.join(" ")
        );
        assert_eq!(
            (c.status.code(), ce.as_ref()),
            (Some(2), re.as_ref()),
            "{} --check {}: predicts the refusal in the same words",
            self.name(),
            args.join(" ")
        );
    }

    /// The binary's file name.
    pub fn name(&self) -> &str {
        self.bin.rsplit('/').next().unwrap_or(self.bin)
    }
}

/// Every non-empty line of `out` as JSON.
pub fn json_lines(out: &str, what: &str) -> Vec<Value> {
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{what}: bad JSON {e}: {l}")))
        .collect()
}

/// Run `program ARGS`, feed it `lines` on standard input and parse every non-empty line it
/// prints as JSON (`mproute -j -b -`, `ip -j -batch -`: one answer per command).
pub fn batch_json_lines(program: &str, args: &[&str], lines: &[String]) -> Vec<Value> {
    let mut input = String::new();
    for l in lines {
        input.push_str(l);
        input.push('\n');
    }
    let mut cmd = std::process::Command::new(program);
    cmd.args(args);
    let out = crate::cmd::try_output_with_input(&mut cmd, &input).unwrap_or_else(|e| panic!("{e}"));
    json_lines(&out, program)
}

/// A batch file in a directory of its own under the temporary directory (named by `tag` and
/// the test process), removed with its directory when dropped, a failed test's included.
#[derive(Debug)]
pub struct BatchFile {
    dir: std::path::PathBuf,
    path: String,
}

impl BatchFile {
    /// Write `text` as the batch file.
    pub fn new(tag: &str, text: impl AsRef<[u8]>) -> BatchFile {
        let dir = std::env::temp_dir().join(format!("mpt-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the batch file's directory");
        let path = dir.join("b");
        std::fs::write(&path, text).expect("write the batch file");
        let path = path.to_str().expect("a UTF-8 temporary path").to_string();
        BatchFile { dir, path }
    }

    /// Its path, as `-b` takes it and errors name it.
    pub fn path(&self) -> &str {
        &self.path
    }
}

impl Drop for BatchFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::Words;

    #[test]
    fn a_line_splits_on_whitespace_and_an_array_is_kept_as_it_is() {
        assert_eq!(
            "add  198.18.0.0/24\tnexthop via 10.1.0.2 ".words(),
            ["add", "198.18.0.0/24", "nexthop", "via", "10.1.0.2"]
        );
        assert_eq!(["set", "a b", ""].words(), ["set", "a b", ""]);
        let v = vec![String::from("show"), String::from("table")];
        assert_eq!(v.words(), ["show", "table"]);
        assert_eq!((&&v[..]).words(), ["show", "table"]);
    }
}

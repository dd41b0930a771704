//! Driving the generated completion scripts (`completions/`) in the real shells, as a user's
//! TAB would: bash with COMP_WORDS/COMP_CWORD set and the function called (COMPREPLY read back),
//! zsh with `words`/`CURRENT` set and `compadd` recording what it is given, fish with its own
//! `complete -C LINE`. Each script calls the binary given as the command's first word (bash,
//! zsh) or found in PATH (fish). Shared by the completion tests of each tool (`#[path]`).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's `completions/FILE`.
pub fn script(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../completions")
        .join(file)
}

fn lines(out: std::process::Output, what: &str) -> Vec<String> {
    assert!(
        out.status.success(),
        "{what}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// What bash's completion offers for the command line `words` (the tool's name first, run as
/// the binary `bin`; the last word is the one being completed, "" after a space).
pub fn bash(tool: &str, bin: &str, words: &[&str]) -> Vec<String> {
    let prog = r#"
source "$1"; fun=$2; shift 2
COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 ))
COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
"$fun" || exit 3
printf '%s\n' "${COMPREPLY[@]}"
"#;
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", prog, "bash"])
        .arg(script(&format!("{tool}.bash")))
        .arg(format!("_{tool}"))
        .arg(bin)
        .args(&words[1..])
        .output()
        .expect("run bash");
    lines(out, &format!("bash completion of {words:?}"))
}

/// What zsh's completion function hands `compadd` for the command line `words` (as for
/// [`bash`]).
pub fn zsh(tool: &str, bin: &str, words: &[&str]) -> Vec<String> {
    let prog = r#"
compdef() { :; }
compadd() { while [[ $1 != -- ]]; do shift; done; shift; print -rl -- "$@"; }
source "$1"; fun=$2; shift 2
words=("$@"); CURRENT=$#
"$fun"
true
"#;
    let out = Command::new("zsh")
        .args(["-f", "-c", prog, "zsh"])
        .arg(script(&format!("_{tool}")))
        .arg(format!("_{tool}"))
        .arg(bin)
        .args(&words[1..])
        .output()
        .expect("run zsh (apt-get install zsh; cargo xtask setup does)");
    lines(out, &format!("zsh completion of {words:?}"))
}

/// What fish offers for the command line `line` (`mproute dataplane `), with the binary's
/// directory first in PATH.
pub fn fish(tool: &str, bin: &str, line: &str) -> Vec<String> {
    let dir = Path::new(bin).parent().expect("binary's directory");
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("fish")
        .args(["--no-config", "-c", "source $argv[1]; complete -C $argv[2]"])
        .arg(script(&format!("{tool}.fish")))
        .arg(line)
        .env("PATH", path)
        .output()
        .expect("run fish (apt-get install fish; cargo xtask setup does)");
    // (fish prints CANDIDATE<TAB>DESCRIPTION; ours have none)
    lines(out, &format!("fish completion of {line:?}"))
        .into_iter()
        .map(|l| l.split('\t').next().unwrap_or_default().to_string())
        .collect()
}

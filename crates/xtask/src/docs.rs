//! Man pages and shell completions, as each tool prints them with its hidden
//! `--generate man|bash|zsh|fish` (see `mpt_cli::docs`): `gen-docs` writes them into `man/` and
//! `completions/`, `check-docs` fails when those differ. The tools are built first (debug).
//!
//! `--generate man` prints every page of a tool one after the other; each page starts with its
//! `.TH TITLE SECTION` line, which names its file (`TITLE.SECTION`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::util;

/// The tools, by binary name.
const TOOLS: [&str; 3] = ["mproute", "ila", "pfanout"];
const MAN_DIR: &str = "man";
const COMPLETIONS_DIR: &str = "completions";

/// Relative path → contents of every generated file.
type Files = BTreeMap<PathBuf, Vec<u8>>;

/// Split the output of `--generate man` into pages: (file name, page). Every page starts with
/// the same preamble (what precedes the first `.TH` line), then its `.TH TITLE SECTION` line.
fn split_man(stream: &[u8]) -> Result<Vec<(String, Vec<u8>)>> {
    let text = std::str::from_utf8(stream).context("man pages: not UTF-8")?;
    let first = text
        .find("\n.TH ")
        .map(|i| i + 1)
        .or_else(|| text.starts_with(".TH ").then_some(0))
        .context("man pages: no .TH line")?;
    let start = format!("{}.TH ", &text[..first]);
    let mut bounds: Vec<usize> = text.match_indices(&start).map(|(i, _)| i).collect();
    bounds.push(text.len());
    let mut pages = Vec::new();
    for w in bounds.windows(2) {
        let page = &text[w[0]..w[1]];
        let th = &page[start.len() - 4..];
        let mut f = th[4..].split_whitespace();
        let (Some(title), Some(section)) = (f.next(), f.next()) else {
            bail!("man pages: a .TH line without title and section");
        };
        pages.push((format!("{title}.{section}"), page.as_bytes().to_vec()));
    }
    Ok(pages)
}

/// Conventional completion file names.
fn completion_file(tool: &str, shell: &str) -> String {
    match shell {
        "bash" => format!("{tool}.bash"),
        "zsh" => format!("_{tool}"),
        _ => format!("{tool}.{shell}"),
    }
}

/// `TOOL --generate KIND`.
fn generate(bin: &Path, kind: &str) -> Result<Vec<u8>> {
    let out = Command::new(bin)
        .args(["--generate", kind])
        .output()
        .with_context(|| format!("cannot run {}", bin.display()))?;
    if !out.status.success() {
        bail!(
            "{} --generate {kind} failed ({}): {}",
            bin.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(out.stdout)
}

/// Build the tools and render every man page and completion.
fn render(root: &Path) -> Result<Files> {
    let mut args = vec!["build", "--quiet"];
    for t in TOOLS {
        args.extend(["-p", t]);
    }
    util::run_cargo(root, &args)?;
    let mut files = Files::new();
    for tool in TOOLS {
        let bin = util::target_dir(root).join("debug").join(tool);
        for (name, page) in split_man(&generate(&bin, "man")?)? {
            files.insert(Path::new(MAN_DIR).join(name), page);
        }
        for shell in ["bash", "zsh", "fish"] {
            files.insert(
                Path::new(COMPLETIONS_DIR).join(completion_file(tool, shell)),
                generate(&bin, shell)?,
            );
        }
    }
    Ok(files)
}

/// Files under `root`/man and `root`/completions that belong to our tools (by name), relative
/// to `root`. Other files in those directories are not ours and are left alone.
fn existing(root: &Path) -> Result<Vec<PathBuf>> {
    let ours = |file: &str| {
        TOOLS.iter().any(|n| {
            let f = file.strip_prefix('_').unwrap_or(file);
            f == *n
                || f.strip_prefix(n)
                    .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('-'))
        })
    };
    let mut found = Vec::new();
    for dir in [MAN_DIR, COMPLETIONS_DIR] {
        let path = root.join(dir);
        let entries = match std::fs::read_dir(&path) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).with_context(|| format!("read {}", path.display())),
        };
        for entry in entries {
            let entry = entry.with_context(|| format!("read {}", path.display()))?;
            let file = entry.file_name();
            let file = file.to_string_lossy();
            if entry.file_type().is_ok_and(|t| t.is_file()) && ours(&file) {
                found.push(Path::new(dir).join(file.as_ref()));
            }
        }
    }
    found.sort();
    Ok(found)
}

/// `cargo xtask gen-docs [--out DIR]`.
pub fn gen_docs(out: &Path) -> Result<()> {
    let files = render(&util::repo_root()?)?;
    let mut changed = 0;
    for (rel, bytes) in &files {
        let path = out.join(rel);
        if std::fs::read(&path).ok().as_deref() == Some(bytes.as_slice()) {
            continue;
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
        }
        std::fs::write(&path, bytes).with_context(|| format!("write {}", path.display()))?;
        println!("gen-docs: wrote {}", rel.display());
        changed += 1;
    }
    let mut removed = 0;
    for rel in existing(out)? {
        if !files.contains_key(&rel) {
            let path = out.join(&rel);
            std::fs::remove_file(&path).with_context(|| format!("remove {}", path.display()))?;
            println!("gen-docs: removed {} (no longer generated)", rel.display());
            removed += 1;
        }
    }
    println!(
        "gen-docs: {} files in {} ({changed} written, {removed} removed, {} unchanged)",
        files.len(),
        out.display(),
        files.len() - changed
    );
    Ok(())
}

/// `cargo xtask check-docs`: `Ok(false)` (after listing the stale files) if the repository's
/// man/ and completions/ differ from what gen-docs would write.
pub fn check_docs(root: &Path) -> Result<bool> {
    let files = render(root)?;
    let mut stale = Vec::new();
    for (rel, bytes) in &files {
        let path = root.join(rel);
        match std::fs::read(&path) {
            Ok(have) if have == *bytes => {}
            Ok(_) => stale.push(format!("{} (differs)", rel.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                stale.push(format!("{} (missing)", rel.display()));
            }
            Err(e) => return Err(e).with_context(|| format!("read {}", path.display())),
        }
    }
    for rel in existing(root)? {
        if !files.contains_key(&rel) {
            stale.push(format!("{} (no longer generated)", rel.display()));
        }
    }
    if stale.is_empty() {
        println!("check-docs: {} files up to date", files.len());
        return Ok(true);
    }
    println!("check-docs: {} stale files:", stale.len());
    for s in &stale {
        println!("  {s}");
    }
    println!("run cargo xtask gen-docs");
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::split_man;

    #[test]
    fn pages_split_at_their_th_lines_with_their_leading_comments() {
        let stream = b".ie \\n(.g .ds Aq \\(aq\n.el .ds Aq '\n.TH tool 8 \"tool 1\"\n.SH NAME\ntool\n.ie \\n(.g .ds Aq \\(aq\n.el .ds Aq '\n.TH tool-add 8 \"tool-add 1\"\n.SH NAME\nadd\n";
        let pages = split_man(stream).expect("splits");
        let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["tool.8", "tool-add.8"]);
        let first = String::from_utf8_lossy(&pages[0].1).into_owned();
        assert!(first.starts_with(".ie"), "{first}");
        assert!(first.ends_with("tool\n"), "{first}");
        let second = String::from_utf8_lossy(&pages[1].1).into_owned();
        assert!(
            second.starts_with(".ie") && second.contains(".TH tool-add 8"),
            "{second}"
        );
    }
}

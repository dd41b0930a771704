//! Man pages (clap_mangen, section 8) and shell completions (clap_complete) for the tools.
//!
//! Everything is rendered into memory first, so gen-docs and check-docs see the same bytes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::{Generator, Shell};

/// Directories (relative to the output root) that hold generated files.
const MAN_DIR: &str = "man";
const COMPLETIONS_DIR: &str = "completions";
const SHELLS: [Shell; 3] = [Shell::Bash, Shell::Zsh, Shell::Fish];

/// Relative path → contents of every generated file.
type Files = BTreeMap<PathBuf, Vec<u8>>;

fn tools() -> [clap::Command; 3] {
    [
        mproute::Cli::command(),
        ila::Cli::command(),
        pfanout::Cli::command(),
    ]
}

fn tool_names() -> Vec<String> {
    tools().iter().map(|c| c.get_name().to_string()).collect()
}

/// Renders all man pages and completions.
fn render() -> Result<Files> {
    let mut files = Files::new();
    for cmd in tools() {
        let name = cmd.get_name().to_string();
        let source = format!("{name} {}", cmd.get_version().unwrap_or_default());
        let mut built = cmd.clone().disable_help_subcommand(true);
        built.build();
        man_pages(&built, &source, &mut files)?;

        for shell in SHELLS {
            let mut buf = Vec::new();
            let mut c = cmd.clone();
            clap_complete::generate(shell, &mut c, &name, &mut buf);
            files.insert(Path::new(COMPLETIONS_DIR).join(shell.file_name(&name)), buf);
        }
    }
    Ok(files)
}

/// One page for `cmd` (`man/NAME.8`) and, recursively, one per visible subcommand
/// (`man/NAME-SUB.8`). `cmd` must be built, so subcommands carry their display names.
fn man_pages(cmd: &clap::Command, source: &str, files: &mut Files) -> Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        man_pages(sub, source, files)?;
    }
    let man = clap_mangen::Man::new(cmd.clone())
        .section("8")
        .source(source.to_string());
    let mut buf = Vec::new();
    man.render(&mut buf)
        .with_context(|| format!("render man page for {}", cmd.get_name()))?;
    files.insert(Path::new(MAN_DIR).join(man.get_filename()), buf);
    Ok(())
}

/// Files under `root`/man and `root`/completions that belong to our tools (by name), relative
/// to `root`. Other files in those directories are not ours and are left alone.
fn existing(root: &Path) -> Result<Vec<PathBuf>> {
    let names = tool_names();
    let ours = |file: &str| {
        names.iter().any(|n| {
            let f = file.strip_prefix('_').unwrap_or(file);
            f == n.as_str()
                || f.strip_prefix(n.as_str())
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
    let files = render()?;
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
    let files = render()?;
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

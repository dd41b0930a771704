//! Man pages and shell completions, rendered from a tool's clap definition: what its hidden
//! `--generate man|bash|zsh|fish` prints (ripgrep's way), so that the pages and completions a
//! package ships come from the binary itself. `cargo xtask gen-docs` runs it and commits the
//! result in `man/` and `completions/`.
//!
//! `--generate man` prints every page of the tool: the tool's own (`mproute.8`) and one per
//! visible subcommand (`mproute-add.8`), each a complete roff document starting with its `.TH`
//! line, one after the other. The title and section on each `.TH` line name the page's file.

use std::io::{self, Write};

use clap_complete::Shell;

/// What `--generate` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generate {
    /// Every man page (section 8), one roff document after the other.
    Man,
    /// bash completion.
    Bash,
    /// zsh completion.
    Zsh,
    /// fish completion.
    Fish,
}

impl Generate {
    /// The kind named on the command line.
    pub fn from_word(w: &str) -> Option<Generate> {
        match w {
            "man" => Some(Generate::Man),
            "bash" => Some(Generate::Bash),
            "zsh" => Some(Generate::Zsh),
            "fish" => Some(Generate::Fish),
            _ => None,
        }
    }
}

/// Handle `TOOL --generate KIND` before the command line is parsed: print and exit. The option
/// is read here rather than declared to clap so that it stays out of the very completions and
/// pages it generates (clap's completions list hidden options too). Does nothing when the first
/// argument is not `--generate`.
pub fn handle(cmd: impl FnOnce() -> clap::Command) {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(std::ffi::OsStr::new("--generate")) {
        return;
    }
    let word = args.next();
    let kind = word
        .as_deref()
        .and_then(|w| w.to_str())
        .and_then(Generate::from_word);
    let cmd = cmd();
    match (kind, args.next()) {
        (Some(kind), None) => print_and_exit(&cmd, kind),
        _ => {
            eprintln!(
                "{}: --generate takes one of man, bash, zsh, fish",
                cmd.get_name()
            );
            std::process::exit(crate::EXIT_USAGE)
        }
    }
}

/// Man page section of our tools (system administration).
pub const MAN_SECTION: &str = "8";

/// Every man page of `cmd`: (file name, roff text), the tool's first, then one per visible
/// subcommand, recursively.
pub fn man_pages(cmd: &clap::Command) -> io::Result<Vec<(String, Vec<u8>)>> {
    let source = format!(
        "{} {}",
        cmd.get_name(),
        cmd.get_version().unwrap_or_default()
    );
    let mut built = cmd.clone().disable_help_subcommand(true);
    built.build();
    let mut pages = Vec::new();
    pages_of(&built, &source, &mut pages)?;
    Ok(pages)
}

fn pages_of(
    cmd: &clap::Command,
    source: &str,
    pages: &mut Vec<(String, Vec<u8>)>,
) -> io::Result<()> {
    let man = clap_mangen::Man::new(cmd.clone())
        .section(MAN_SECTION)
        .source(source.to_string());
    let mut buf = Vec::new();
    man.render(&mut buf)?;
    pages.push((man.get_filename(), buf));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        pages_of(sub, source, pages)?;
    }
    Ok(())
}

/// The completion script of `cmd` for `shell`, and its conventional file name.
pub fn completion(cmd: &clap::Command, shell: Shell) -> (String, Vec<u8>) {
    let name = cmd.get_name().to_string();
    let mut buf = Vec::new();
    let mut c = cmd.clone();
    clap_complete::generate(shell, &mut c, &name, &mut buf);
    (clap_complete::Generator::file_name(&shell, &name), buf)
}

/// What `--generate KIND` prints.
pub fn render(cmd: &clap::Command, kind: Generate) -> io::Result<Vec<u8>> {
    let shell = match kind {
        Generate::Man => {
            return Ok(man_pages(cmd)?.into_iter().flat_map(|(_, b)| b).collect());
        }
        Generate::Bash => Shell::Bash,
        Generate::Zsh => Shell::Zsh,
        Generate::Fish => Shell::Fish,
    };
    Ok(completion(cmd, shell).1)
}

/// Every generated file of `cmd`, with its path under the repository (`man/NAME.8`,
/// `completions/NAME.bash`, ...): what `man/` and `completions/` must hold.
pub fn files(cmd: &clap::Command) -> io::Result<Vec<(String, Vec<u8>)>> {
    let mut v: Vec<(String, Vec<u8>)> = man_pages(cmd)?
        .into_iter()
        .map(|(n, b)| (format!("man/{n}"), b))
        .collect();
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let (n, b) = completion(cmd, shell);
        v.push((format!("completions/{n}"), b));
    }
    Ok(v)
}

/// `--generate KIND`: print it to standard output and exit (0, or 2 when it cannot be written).
pub fn print_and_exit(cmd: &clap::Command, kind: Generate) -> ! {
    let r = render(cmd, kind).and_then(|b| {
        let mut out = io::stdout().lock();
        out.write_all(&b)?;
        out.flush()
    });
    match r {
        Ok(()) => std::process::exit(crate::EXIT_OK),
        Err(e) => {
            eprintln!("{}: generate: {e}", cmd.get_name());
            std::process::exit(crate::EXIT_SYSTEM)
        }
    }
}

/// Compare the files `cmd` generates with those under `root` (the repository): the paths that
/// differ or are missing, and the tool's files there that are no longer generated.
pub fn stale(cmd: &clap::Command, root: &std::path::Path) -> io::Result<Vec<String>> {
    let want = files(cmd)?;
    let mut stale = Vec::new();
    for (rel, bytes) in &want {
        match std::fs::read(root.join(rel)) {
            Ok(have) if have == *bytes => {}
            Ok(_) => stale.push(format!("{rel} (differs)")),
            Err(e) if e.kind() == io::ErrorKind::NotFound => stale.push(format!("{rel} (missing)")),
            Err(e) => return Err(e),
        }
    }
    let name = cmd.get_name();
    for dir in ["man", "completions"] {
        let Ok(rd) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for e in rd.flatten() {
            let file = e.file_name().to_string_lossy().into_owned();
            let rel = format!("{dir}/{file}");
            if owned_by(&file, name) && !want.iter().any(|(r, _)| *r == rel) {
                stale.push(format!("{rel} (no longer generated)"));
            }
        }
    }
    stale.sort();
    Ok(stale)
}

/// Whether a file of `man/` or `completions/` belongs to tool `name` (`name.8`, `name-sub.8`,
/// `name.bash`, `_name`).
pub fn owned_by(file: &str, name: &str) -> bool {
    let f = file.strip_prefix('_').unwrap_or(file);
    f == name
        || f.strip_prefix(name)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('-'))
}

/// A tool's test that `man/` and `completions/` hold what `TOOL --generate` prints (run
/// `cargo xtask gen-docs` after changing a command or an option): `mpt_cli::docs_are_fresh!(Cli);`
/// in the tool's library, with its clap command line type.
#[macro_export]
macro_rules! docs_are_fresh {
    ($cli:ty) => {
        #[cfg(test)]
        mod docs_tests {
            #[test]
            fn man_pages_and_completions_are_fresh() {
                let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
                let cmd = <$cli as clap::CommandFactory>::command();
                let stale = $crate::docs::stale(&cmd, &root).expect("read man/ and completions/");
                assert!(
                    stale.is_empty(),
                    "stale generated docs (run cargo xtask gen-docs): {stale:?}"
                );
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd() -> clap::Command {
        clap::Command::new("tool")
            .version("1.0")
            .about("A tool")
            .subcommand(clap::Command::new("add").about("Add"))
            .subcommand(clap::Command::new("secret").hide(true))
    }

    #[test]
    fn one_page_per_visible_command_each_with_its_th_line() {
        let pages = man_pages(&cmd()).expect("renders");
        let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["tool.8", "tool-add.8"]);
        let stream = render(&cmd(), Generate::Man).expect("renders");
        let text = String::from_utf8_lossy(&stream);
        assert_eq!(text.matches(".TH ").count(), 2);
        assert!(text.contains(".TH tool-add 8"));
    }

    #[test]
    fn owned_files() {
        assert!(owned_by("tool.8", "tool"));
        assert!(owned_by("tool-add.8", "tool"));
        assert!(owned_by("_tool", "tool"));
        assert!(!owned_by("toolbox.8", "tool"));
    }
}

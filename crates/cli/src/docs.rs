//! Man pages and shell completions, rendered from a tool's clap definition: what its hidden
//! `--generate man|bash|zsh|fish` prints (ripgrep's way), so that the pages and completions a
//! package ships come from the binary itself. `cargo xtask gen-docs` runs it and commits the
//! result in `man/` and `completions/`.
//!
//! `--generate man` prints every page of the tool: the tool's own (`mproute.8`) and one per
//! visible subcommand (`mproute-add.8`), each a complete roff document starting with its `.TH`
//! line, one after the other. The title and section on each `.TH` line name the page's file.
//!
//! clap gives each page its NAME, SYNOPSIS, OPTIONS and list of commands, and its help text
//! (as NOTES); the tool adds what a system administrator looks for ([`Manual`], in
//! `bin/<tool>/src/docs.rs`): the DESCRIPTION of each object and what its output shows, EXIT
//! STATUS, FILES, EXAMPLES, and SEE ALSO, which names the tool's other pages by itself (a verb
//! added later gets its page and its place there without a word here). The completion scripts
//! call the tool ([`crate::complete`]).

use std::io::{self, Write};

use clap_complete::Shell;

use crate::complete::Grammar;

/// A tool's own text for its pages and its completion's keyword tables.
///
/// The text of a section is plain text with a few conventions: paragraphs are separated by
/// blank lines; lines indented by two spaces are shown as they are (commands, output); a line
/// `= TERM` starts a tagged paragraph (TERM in bold, the lines after it indented below it, up
/// to the next blank line or tag); a line `# TITLE` is a subsection's title. `` `word` `` is set
/// in bold.
#[derive(Debug, Clone, Copy)]
pub struct Manual {
    /// Sections by page: `""` the tool's own page, else the command's name (`"add"`,
    /// `"dataplane"`).
    pub pages: &'static [Page],
    /// EXIT STATUS, on every page.
    pub exit_status: &'static str,
    /// Pages of other programs for SEE ALSO (`"ip-route(8)"`), after the tool's own pages.
    pub see_also: &'static [&'static str],
    /// The keyword tables of [`crate::complete`].
    pub grammar: &'static Grammar,
}

/// The sections a tool adds to one page: (title, text). `DESCRIPTION` continues clap's
/// description; `EXAMPLES` goes after NOTES, as man-pages(7) orders them; the others come after
/// the options and commands, in the order given.
#[derive(Debug, Clone, Copy)]
pub struct Page {
    /// `""` for the tool's own page, else the command's name.
    pub name: &'static str,
    /// (title, text).
    pub sections: &'static [(&'static str, &'static str)],
}

impl Manual {
    /// No text of the tool's own: clap's pages, an EXIT STATUS, and SEE ALSO.
    pub const PLAIN: Manual = Manual {
        pages: &[],
        exit_status: "0 success, 1 usage or syntax error, 2 the kernel or the system refused.",
        see_also: &[],
        grammar: &Grammar { commands: &[] },
    };

    fn page(&self, name: &str) -> &'static [(&'static str, &'static str)] {
        self.pages
            .iter()
            .find(|p| p.name == name)
            .map_or(&[], |p| p.sections)
    }
}

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

/// Handle the documentation switches of a tool before its command line is parsed:
/// `--generate KIND` (print and exit) and `--complete -- WORDS...` ([`crate::complete`]). They
/// are read here rather than declared to clap so that they stay out of the very completions
/// and pages they generate. Does nothing when the first argument is neither.
pub fn handle_tool<C: clap::CommandFactory + crate::abbrev::Abbrev>(manual: &Manual) {
    crate::complete::handle(C::command, manual.grammar, Some(C::WORDS));
    handle_with(C::command, manual);
}

/// Handle `TOOL --generate KIND` before the command line is parsed, with clap's pages alone
/// ([`Manual::PLAIN`]); see [`handle_tool`].
pub fn handle(cmd: impl FnOnce() -> clap::Command) {
    handle_with(cmd, &Manual::PLAIN);
}

fn handle_with(cmd: impl FnOnce() -> clap::Command, manual: &Manual) {
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
        (Some(kind), None) => print_and_exit(&cmd, manual, kind),
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
pub fn man_pages(cmd: &clap::Command, manual: &Manual) -> io::Result<Vec<(String, Vec<u8>)>> {
    let source = format!(
        "{} {}",
        cmd.get_name(),
        cmd.get_version().unwrap_or_default()
    );
    let mut built = cmd.clone().disable_help_subcommand(true);
    built.build();
    // every page's name, for SEE ALSO
    let mut names = Vec::new();
    page_names(&built, "", &mut names);
    let ctx = Ctx {
        source,
        manual,
        names,
    };
    let mut pages = Vec::new();
    pages_of(&built, "", &ctx, &mut pages)?;
    Ok(pages)
}

/// What every page of a tool shares.
struct Ctx<'a> {
    source: String,
    manual: &'a Manual,
    /// (page name as the manual keys it, page title).
    names: Vec<(String, String)>,
}

fn page_names(cmd: &clap::Command, path: &str, out: &mut Vec<(String, String)>) {
    let title = clap_mangen::Man::new(cmd.clone())
        .section(MAN_SECTION)
        .get_filename();
    let title = title
        .strip_suffix(&format!(".{MAN_SECTION}"))
        .unwrap_or(&title)
        .to_string();
    out.push((path.to_string(), title));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let p = if path.is_empty() {
            sub.get_name().to_string()
        } else {
            format!("{path} {}", sub.get_name())
        };
        page_names(sub, &p, out);
    }
}

fn pages_of(
    cmd: &clap::Command,
    path: &str,
    ctx: &Ctx,
    pages: &mut Vec<(String, Vec<u8>)>,
) -> io::Result<()> {
    let man = clap_mangen::Man::new(cmd.clone())
        .section(MAN_SECTION)
        .source(ctx.source.clone());
    let mut buf = Vec::new();
    man.render(&mut buf)?;
    let clap_page = String::from_utf8(buf).map_err(io::Error::other)?;
    let page = compose(&clap_page, path, ctx);
    pages.push((man.get_filename(), page.into_bytes()));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let p = if path.is_empty() {
            sub.get_name().to_string()
        } else {
            format!("{path} {}", sub.get_name())
        };
        pages_of(sub, &p, ctx, pages)?;
    }
    Ok(())
}

/// clap's page cut at its `.SH` lines: (preamble and `.TH`, [(title, body)]).
fn sections(page: &str) -> (String, Vec<(String, String)>) {
    let mut head = String::new();
    let mut secs: Vec<(String, String)> = Vec::new();
    for line in page.split_inclusive('\n') {
        if let Some(title) = line.strip_prefix(".SH ") {
            secs.push((title.trim().trim_matches('"').to_string(), String::new()));
        } else if let Some((_, body)) = secs.last_mut() {
            body.push_str(line);
        } else {
            head.push_str(line);
        }
    }
    (head, secs)
}

/// clap's help text without the paragraphs the page has sections for (`Examples:`,
/// `Exit status:`): the short help repeats them for the terminal. A paragraph with indented
/// lines (a table of terms, a list) is kept as it is laid out; the others are filled.
fn notes(body: &str, has_examples: bool) -> String {
    let mut out = String::new();
    for para in body.split("\n\n") {
        let first = para.trim_start_matches('\n');
        if first.starts_with("Exit status:") || (has_examples && first.starts_with("Examples:")) {
            continue;
        }
        if para.trim().is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        let para = para.trim_matches('\n');
        let laid_out = para.lines().any(|l| l.starts_with(' '));
        if laid_out {
            out.push_str(".nf\n");
        }
        out.push_str(para);
        out.push('\n');
        if laid_out {
            out.push_str(".fi\n");
        }
    }
    out
}

fn compose(clap_page: &str, path: &str, ctx: &Ctx) -> String {
    let (head, secs) = sections(clap_page);
    let ours = ctx.manual.page(path);
    let own = |t: &str| ours.iter().find(|(title, _)| *title == t).map(|(_, x)| *x);
    let mut out = head;
    let section = |out: &mut String, title: &str, body: &str| {
        out.push_str(&format!(".SH \"{title}\"\n"));
        out.push_str(body);
        if !body.ends_with('\n') {
            out.push('\n');
        }
    };
    let mut extra = None;
    let mut version = None;
    for (title, body) in &secs {
        match title.as_str() {
            "EXTRA" => extra = Some(body.clone()),
            "VERSION" => version = Some(body.clone()),
            "DESCRIPTION" => {
                let mut b = body.clone();
                if let Some(text) = own("DESCRIPTION") {
                    b.push_str(".PP\n");
                    b.push_str(&roff(text));
                }
                section(&mut out, title, &b);
            }
            _ => section(&mut out, title, body),
        }
    }
    // OPTIONS and the commands are out: the tool's sections, then the fixed ones
    for (title, text) in ours {
        if !matches!(*title, "DESCRIPTION" | "EXAMPLES" | "SEE ALSO") {
            section(&mut out, title, &roff(text));
        }
    }
    section(&mut out, "EXIT STATUS", &roff(ctx.manual.exit_status));
    if let Some(body) = extra {
        let n = notes(&body, own("EXAMPLES").is_some());
        if !n.is_empty() {
            section(&mut out, "NOTES", &n);
        }
    }
    if let Some(text) = own("EXAMPLES") {
        section(&mut out, "EXAMPLES", &roff(text));
    }
    section(&mut out, "SEE ALSO", &see_also(path, ctx, own("SEE ALSO")));
    if let Some(body) = version {
        section(&mut out, "VERSION", &body);
    }
    out
}

/// The tool's own pages (all but this one: the tool's first, then its commands'), the
/// manual's, then a page's own additions.
fn see_also(path: &str, ctx: &Ctx, more: Option<&str>) -> String {
    let mut refs: Vec<String> = ctx
        .names
        .iter()
        .filter(|(p, _)| p != path)
        .map(|(_, t)| format!("{t}({MAN_SECTION})"))
        .collect();
    refs.extend(ctx.manual.see_also.iter().map(|s| s.to_string()));
    if let Some(m) = more {
        refs.extend(m.split(',').map(|s| s.trim().to_string()));
    }
    let mut seen = std::collections::HashSet::new();
    refs.retain(|r| !r.is_empty() && seen.insert(r.clone()));
    let n = refs.len();
    let mut out = String::new();
    for (i, r) in refs.iter().enumerate() {
        let (name, sect) = r.split_once('(').unwrap_or((r.as_str(), ""));
        let sep = if i + 1 < n { "," } else { "" };
        out.push_str(&format!(".BR {} ({}{}\n", escape(name), sect, sep));
    }
    out
}

/// Escape text for roff: backslashes, hyphens (as minus signs, which is what a command line
/// has), and a control character at the start of a line.
fn escape(s: &str) -> String {
    let mut out = s.replace('\\', "\\e").replace('-', "\\-");
    if out.starts_with('.') || out.starts_with('\'') {
        out.insert_str(0, "\\&");
    }
    out
}

/// `` `word` `` in bold, the rest escaped.
fn inline(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in s.split('`').enumerate() {
        if i % 2 == 1 {
            out.push_str(&format!(
                "\\fB{}\\fR",
                escape(part).trim_start_matches("\\&")
            ));
        } else {
            out.push_str(&escape(part));
        }
    }
    if out.starts_with('.') || out.starts_with('\'') {
        out.insert_str(0, "\\&");
    }
    out
}

/// A section's text (see [`Manual`]'s conventions) as roff.
pub fn roff(text: &str) -> String {
    let mut out = String::new();
    // after a blank line: the next line of text starts a paragraph
    let mut para = false;
    let mut literal = false;
    for l in text.trim_matches('\n').lines() {
        let lit = l.starts_with("  ");
        if literal && !lit {
            out.push_str(".fi\n.RE\n");
            literal = false;
        }
        if l.trim().is_empty() {
            para = true;
            continue;
        }
        if lit {
            if !literal {
                if para {
                    out.push_str(".PP\n");
                }
                out.push_str(".RS 4\n.nf\n");
                literal = true;
            }
            out.push_str(&escape(&l[2..]));
        } else if let Some(title) = l.strip_prefix("# ") {
            out.push_str(&format!(".SS \"{}\"", escape(title)));
        } else if let Some(term) = l.strip_prefix("= ") {
            out.push_str(&format!(".TP\n\\fB{}\\fR", escape(term)));
        } else {
            if para {
                out.push_str(".PP\n");
            }
            out.push_str(&inline(l));
        }
        para = false;
        out.push('\n');
    }
    if literal {
        out.push_str(".fi\n.RE\n");
    }
    out
}

/// The completion script of `cmd` for `shell`, and its conventional file name.
pub fn completion(cmd: &clap::Command, shell: Shell) -> (String, Vec<u8>) {
    let name = cmd.get_name().to_string();
    let script = crate::complete::script(&name, &shell.to_string()).unwrap_or_default();
    (
        clap_complete::Generator::file_name(&shell, &name),
        script.into_bytes(),
    )
}

/// What `--generate KIND` prints.
pub fn render(cmd: &clap::Command, manual: &Manual, kind: Generate) -> io::Result<Vec<u8>> {
    let shell = match kind {
        Generate::Man => {
            return Ok(man_pages(cmd, manual)?
                .into_iter()
                .flat_map(|(_, b)| b)
                .collect());
        }
        Generate::Bash => Shell::Bash,
        Generate::Zsh => Shell::Zsh,
        Generate::Fish => Shell::Fish,
    };
    Ok(completion(cmd, shell).1)
}

/// Every generated file of `cmd`, with its path under the repository (`man/NAME.8`,
/// `completions/NAME.bash`, ...): what `man/` and `completions/` must hold.
pub fn files(cmd: &clap::Command, manual: &Manual) -> io::Result<Vec<(String, Vec<u8>)>> {
    let mut v: Vec<(String, Vec<u8>)> = man_pages(cmd, manual)?
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
pub fn print_and_exit(cmd: &clap::Command, manual: &Manual, kind: Generate) -> ! {
    let r = render(cmd, manual, kind).and_then(|b| {
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
pub fn stale(
    cmd: &clap::Command,
    manual: &Manual,
    root: &std::path::Path,
) -> io::Result<Vec<String>> {
    let want = files(cmd, manual)?;
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

/// A tool's tests of its documentation: that `man/` and `completions/` hold what
/// `TOOL --generate` prints (run `cargo xtask gen-docs` after changing a command or an option),
/// and that its [`Manual`] speaks of pages and commands that exist:
/// `mpt_cli::docs_are_fresh!(Cli, crate::docs::MANUAL);` in the tool's library, with its clap
/// command line type and its manual.
#[macro_export]
macro_rules! docs_are_fresh {
    ($cli:ty, $manual:expr) => {
        #[cfg(test)]
        mod docs_tests {
            #[test]
            fn man_pages_and_completions_are_fresh() {
                let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
                let cmd = <$cli as clap::CommandFactory>::command();
                let stale =
                    $crate::docs::stale(&cmd, &$manual, &root).expect("read man/ and completions/");
                assert!(
                    stale.is_empty(),
                    "stale generated docs (run cargo xtask gen-docs): {stale:?}"
                );
            }

            #[test]
            fn the_manual_names_pages_and_commands_that_exist() {
                let cmd = <$cli as clap::CommandFactory>::command();
                let unknown = $crate::docs::unknown_names(&cmd, &$manual);
                assert!(unknown.is_empty(), "{unknown:?}");
            }
        }
    };
}

/// Pages of `manual` that `cmd` has not, and verbs of its completion grammar that are not
/// commands of `cmd` (hidden ones count): what a renamed command leaves behind.
pub fn unknown_names(cmd: &clap::Command, manual: &Manual) -> Vec<String> {
    let mut bad = Vec::new();
    for p in manual.pages {
        let mut c = cmd;
        for w in p.name.split_whitespace() {
            match c.find_subcommand(w) {
                Some(s) => c = s,
                None => {
                    bad.push(format!("page \"{}\"", p.name));
                    break;
                }
            }
        }
    }
    for n in manual.grammar.commands {
        for name in n.names {
            if cmd.find_subcommand(name).is_none() {
                bad.push(format!("completion command \"{name}\""));
            }
        }
    }
    bad
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
        let pages = man_pages(&cmd(), &Manual::PLAIN).expect("renders");
        let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["tool.8", "tool-add.8"]);
        let stream = render(&cmd(), &Manual::PLAIN, Generate::Man).expect("renders");
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

//! Batch files as iproute2 reads them (one command per line, single and double quotes, `#`
//! comments, `\` at the end of a line continues it), and the driver every tool runs them with:
//! each line parsed into the tool's typed command, run in order, its outcome printed or its
//! failure reported as `FILE:LINE: ...`; the first failure stops the batch unless `--force`;
//! the exit code is the worst of the lines'; a progress line on a terminal for long batches.

use std::io::{IsTerminal, Read};
use std::os::fd::AsFd;
use std::path::Path;

use crate::render::Style;
use crate::{Failure, EXIT_OK, EXIT_USAGE};

/// One command of a batch file, with the line it started on (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchLine {
    /// First line of the command.
    pub line: usize,
    /// Its words.
    pub words: Vec<String>,
}

/// Split a batch file into commands. Blank and comment-only lines are skipped. An unterminated
/// quote is an error naming its line.
pub fn parse(text: &str) -> Result<Vec<BatchLine>, (usize, String)> {
    in_halves(text, parse_from)
}

/// A command typed by the tool, with the line it starts on.
type Typed<C> = (usize, Result<C, Failure>);

/// The commands of a batch file typed by the tool, in order, or (before any is run) the first
/// unterminated quote's line, as [`parse`] and then [`BatchTool::parse_line`] on each would
/// give them. Each command is typed as soon as it is split, so that its words are dropped at
/// once instead of all held (60 MB of a 100,000-route batch, faulted in before the first
/// route went out).
fn read_typed<T: BatchTool>(text: &str) -> Result<Vec<Typed<T::Cmd>>, (usize, String)> {
    in_halves(text, |part, skipped| {
        let mut out = Vec::new();
        each_command(part, skipped, |line, words| {
            out.push((line, T::parse_line(words)))
        })?;
        Ok(out)
    })
}

/// `read(part, lines before it)` of the whole of `text`, in order. A long file is split in two
/// at a line boundary (not inside a `\\` continuation) and its halves are read on two
/// threads: reading a 100,000-route batch took a tenth of the install's time, all of it
/// before the first route went out. The first error wins, whichever half has it.
fn in_halves<X: Send>(
    text: &str,
    read: impl Fn(&str, usize) -> Result<Vec<X>, (usize, String)> + Sync,
) -> Result<Vec<X>, (usize, String)> {
    const PARALLEL_BYTES: usize = 1 << 20;
    let Some(cut) = (text.len() >= PARALLEL_BYTES)
        .then(|| split_point(text))
        .flatten()
    else {
        return read(text, 0);
    };
    let (head, tail) = text.split_at(cut);
    let head_lines = head.bytes().filter(|&b| b == b'\n').count();
    let (a, b) = std::thread::scope(|sc| {
        let t = sc.spawn(|| read(tail, head_lines));
        let a = read(head, 0);
        (a, t.join())
    });
    let mut out = a?;
    match b {
        Ok(b) => out.extend(b?),
        // a panic reading a line: a bug, shown as it would be on one thread
        Err(p) => std::panic::resume_unwind(p),
    }
    Ok(out)
}

/// Where to split `text` for [`in_halves`]: just after a newline near the middle whose line
/// does not continue onto the next one; `None` if there is none.
fn split_point(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut from = text.len() / 2;
    while let Some(off) = bytes[from..].iter().position(|&b| b == b'\n') {
        let nl = from + off;
        let line = &bytes[..nl];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if !line.ends_with(b"\\") {
            return (nl + 1 < text.len()).then_some(nl + 1);
        }
        from = nl + 1;
    }
    None
}

/// The commands of a part of a file whose first line is line `skipped + 1`: `f` gets the line
/// each starts on and its words (blank and comment-only ones are skipped).
fn each_command(
    text: &str,
    skipped: usize,
    mut f: impl FnMut(usize, Vec<String>),
) -> Result<(), (usize, String)> {
    let mut pending = String::new();
    let mut start = 0;
    let mut one = |start: usize, cmd: &str| -> Result<(), (usize, String)> {
        let words = split_words(cmd).map_err(|e| (start, e))?;
        if !words.is_empty() {
            f(start, words);
        }
        Ok(())
    };
    for (i, raw) in text.lines().enumerate() {
        let i = i + skipped;
        if pending.is_empty() {
            start = i + 1;
        }
        // the comment goes before a continuation is looked for, as ip -batch does: a comment
        // that ends in a backslash joins nothing
        let raw = strip_comment(raw);
        if let Some(body) = raw.strip_suffix('\\') {
            pending.push_str(body);
            pending.push(' ');
            continue;
        }
        if pending.is_empty() {
            one(start, raw)?;
            continue;
        }
        pending.push_str(raw);
        one(start, &pending)?;
        pending.clear();
    }
    if !pending.is_empty() {
        one(start, &pending)?;
    }
    Ok(())
}

/// [`parse`] of a part of a file whose first line is line `skipped + 1`.
fn parse_from(text: &str, skipped: usize) -> Result<Vec<BatchLine>, (usize, String)> {
    let mut out = Vec::new();
    each_command(text, skipped, |line, words| {
        out.push(BatchLine { line, words })
    })?;
    Ok(out)
}

/// The line without its comment (a `#` that starts a word outside quotes, as
/// [`split_words`] reads it). A line with an unterminated quote is left whole for
/// [`split_words`] to refuse.
fn strip_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut word_start = true;
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                word_start = false;
            }
            None if c == '#' && word_start => return &line[..i],
            None => word_start = c.is_whitespace(),
        }
    }
    line
}

/// Split one line into words: whitespace separates, quotes group, `#` at the start of a word
/// begins a comment.
pub fn split_words(line: &str) -> Result<Vec<String>, String> {
    // Unquoted runs are copied as slices of the line: one allocation per word (a batch of
    // 100,000 routes splits over a million words).
    let mut words = Vec::with_capacity(16);
    let mut cur: Option<String> = None; // the word so far, once it has a quoted part
    let mut run: Option<usize> = None; // start of the current unquoted run
    let mut rest = line.char_indices();
    while let Some((i, c)) = rest.next() {
        match c {
            '#' if run.is_none() && cur.is_none() => break,
            '"' | '\'' => {
                let w = cur.get_or_insert_with(String::new);
                if let Some(s) = run.take() {
                    w.push_str(&line[s..i]);
                }
                let body = i + 1;
                match line[body..].find(c) {
                    Some(len) => {
                        w.push_str(&line[body..body + len]);
                        // skip the quoted part and its closing quote (both ASCII-delimited)
                        let close = body + len;
                        for (j, _) in rest.by_ref() {
                            if j == close {
                                break;
                            }
                        }
                    }
                    None => return Err(format!("unterminated {c} quote")),
                }
            }
            c if c.is_whitespace() => {
                let end_run = run.take().map(|s| &line[s..i]);
                match (cur.take(), end_run) {
                    (Some(mut w), r) => {
                        w.push_str(r.unwrap_or(""));
                        words.push(w);
                    }
                    (None, Some(r)) => words.push(r.to_string()),
                    (None, None) => {}
                }
            }
            _ => {
                run.get_or_insert(i);
            }
        }
    }
    let end_run = run.map(|s| &line[s..]);
    match (cur, end_run) {
        (Some(mut w), r) => {
            w.push_str(r.unwrap_or(""));
            words.push(w);
        }
        (None, Some(r)) => words.push(r.to_string()),
        (None, None) => {}
    }
    words.shrink_to_fit();
    Ok(words)
}

/// What a tool gives the batch driver.
pub trait BatchTool {
    /// A command, typed (syntax checked, nothing resolved). Long batches are read and typed
    /// on two threads.
    type Cmd: Send;
    /// What a command produced.
    type Out;
    /// Parse one line's words. A syntax error is reported when the batch reaches the line.
    fn parse_line(words: Vec<String>) -> Result<Self::Cmd, Failure>;
    /// Run the lines in order, calling `emit` with each line's outcome as it is known (a line
    /// whose parse failed fails there). Stop after a failure unless `force`. A tool may keep
    /// several lines in flight (mproute pipelines its `add`s) as long as the outcomes it emits
    /// are those of running the lines one by one.
    fn run_lines(
        &mut self,
        lines: Vec<(usize, Result<Self::Cmd, Failure>)>,
        force: bool,
        emit: &mut dyn FnMut(usize, Result<Self::Out, Failure>),
    ) {
        run_each(lines, force, emit, |c| self.run(&c));
    }
    /// Run one command (of the command line or a batch line).
    fn run(&mut self, c: &Self::Cmd) -> Result<Self::Out, Failure>;
    /// Print one outcome.
    fn print(out: &Self::Out, style: Style);
    /// The work left at the end of the invocation.
    fn finish(&mut self) -> Result<(), Failure> {
        Ok(())
    }
    /// Whether the tool holds a lock others wait for while it runs a batch: its output is
    /// then held back until [`BatchTool::release`] (a slow reader must not hold the lock).
    fn holds_lock(&self) -> bool {
        false
    }
    /// After [`BatchTool::finish`]: let go of the lock, before the held output is written.
    fn release(&mut self) {}
}

/// Run lines one by one with `exec`, for tools that keep nothing in flight.
pub fn run_each<C, O>(
    lines: Vec<(usize, Result<C, Failure>)>,
    force: bool,
    emit: &mut dyn FnMut(usize, Result<O, Failure>),
    mut exec: impl FnMut(C) -> Result<O, Failure>,
) {
    for (line, cmd) in lines {
        let r = cmd.and_then(&mut exec);
        let failed = r.is_err();
        emit(line, r);
        if failed && !force {
            return;
        }
    }
}

/// The longest line a batch file may have: a command of ours is at most a few hundred bytes, and
/// a file that is one endless line (`-b /dev/zero` through a pipe) must end in an error, not in
/// the OOM killer.
pub const MAX_LINE: usize = 64 * 1024;

/// The batch's name and text: a regular file, a pipe or socket, or a terminal (`-`: standard
/// input); anything else (`/dev/zero`, `/dev/urandom`: endless) is refused before it is read,
/// and a line longer than [`MAX_LINE`] ends the reading.
fn read_source(path: &Path) -> Result<(String, String), Failure> {
    use std::os::unix::fs::FileTypeExt;
    let stdin = path.as_os_str() == "-";
    let name = if stdin {
        "-".to_string()
    } else {
        path.display().to_string()
    };
    let what = if stdin {
        "standard input".to_string()
    } else {
        format!("batch file {name}")
    };
    // the type is asked of what was opened (not of the path, which may change meanwhile), and
    // opening waits for nothing: a FIFO without a writer or a device is judged first
    let opened = if stdin {
        None
    } else {
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)
            .map_err(|e| Failure::system(format!("read {what}: {}", mpt_sys::error::words(&e))))?;
        Some(f)
    };
    let meta = match &opened {
        Some(f) => f.metadata(),
        None => std::fs::File::from(
            std::io::stdin()
                .as_fd()
                .try_clone_to_owned()
                .map_err(|e| Failure::system(format!("read {what}: {e}")))?,
        )
        .metadata(),
    };
    if let Ok(m) = meta {
        let t = m.file_type();
        let terminal = stdin && std::io::stdin().is_terminal();
        if !(t.is_file() || t.is_fifo() || t.is_socket() || terminal) {
            let kind = if t.is_dir() {
                "a directory"
            } else if t.is_char_device() {
                "a character device"
            } else if t.is_block_device() {
                "a block device"
            } else {
                "not a regular file"
            };
            return Err(Failure::usage(format!(
                "{what} is {kind}: a batch is a regular file, a pipe or a terminal"
            )));
        }
    }
    let mut file: Box<dyn Read> = match opened {
        Some(f) => {
            // reads block again, as a batch read from a pipe should
            use std::os::fd::AsRawFd;
            let _ = nix::fcntl::fcntl(
                f.as_raw_fd(),
                nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()),
            );
            Box::new(f)
        }
        None => Box::new(std::io::stdin().lock()),
    };
    let mut bytes = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let (mut line, mut run) = (1usize, 0usize);
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(Failure::system(format!(
                    "read {what}: {}",
                    mpt_sys::error::words(&e)
                )))
            }
        };
        for &b in &buf[..n] {
            if b == b'\n' {
                line += 1;
                run = 0;
            } else {
                run += 1;
                if run > MAX_LINE {
                    return Err(Failure::usage(format!(
                        "{name}:{line}: a line longer than {MAX_LINE} bytes: not a batch file"
                    )));
                }
            }
        }
        bytes.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| Failure::usage(format!("{what} is not UTF-8 text")))?;
    Ok((name, text))
}

/// Read the batch at `path` (`-`: standard input) and run it with `tool`; returns the exit code.
pub fn run_file<T: BatchTool>(
    tool_name: &str,
    tool: &mut T,
    path: &Path,
    style: Style,
    force: bool,
) -> i32 {
    // a batch's JSON is JSON Lines: one value per command, one line each, whatever -p says
    let style = Style {
        pretty: false,
        ..style
    };
    let (name, text) = match read_source(path) {
        Ok(t) => t,
        Err(f) => {
            let code = f.code;
            f.eprint(tool_name);
            return code;
        }
    };
    let cmds = match read_typed::<T>(&text) {
        Ok(c) => c,
        Err((line, e)) => {
            Failure::usage(e).at(&name, line).eprint(tool_name);
            return EXIT_USAGE;
        }
    };
    let progress = std::io::stderr().is_terminal() && cmds.len() >= 1000;
    let total = cmds.len();
    let mut worst = EXIT_OK;
    let mut done = 0usize;
    let mut emit = |line: usize, r: Result<T::Out, Failure>| {
        done += 1;
        match r {
            Ok(out) => T::print(&out, style),
            Err(f) => {
                if progress {
                    eprint!("\r\x1b[K");
                }
                worst = worst.max(f.code);
                f.at(&name, line).eprint(tool_name);
            }
        }
        if progress && done % 1000 == 0 {
            eprint!("\r{tool_name}: {done}/{total} commands");
        }
    };
    let held = tool.holds_lock();
    if held {
        crate::render::hold_output();
    }
    tool.run_lines(cmds, force, &mut emit);
    if progress {
        eprintln!("\r\x1b[K{tool_name}: {done} of {total} commands run");
    }
    if let Err(f) = tool.finish() {
        f.eprint(tool_name);
        worst = worst.max(f.code);
    }
    if held {
        tool.release();
        crate::render::release_output();
    }
    if let Some(f) = crate::render::output_failure() {
        f.eprint(tool_name);
        worst = worst.max(f.code);
    }
    worst
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_quotes_comments() {
        assert_eq!(split_words("add  a b # c").expect("ok"), ["add", "a", "b"]);
        assert_eq!(
            split_words("dev \"my dev\" x").expect("ok"),
            ["dev", "my dev", "x"]
        );
        assert_eq!(split_words("a'b c'd").expect("ok"), ["ab cd"]);
        assert_eq!(
            split_words("# all comment").expect("ok"),
            Vec::<String>::new()
        );
        assert_eq!(split_words("a#b").expect("ok"), ["a#b"]);
        assert!(split_words("a \"b").is_err());
        assert_eq!(split_words("x \"\" y").expect("ok"), ["x", "", "y"]);
        assert_eq!(split_words("é\u{a0}ü'ß'").expect("ok"), ["é", "üß"]);
    }

    /// A file long enough to be split on two threads gives what one pass gives: line numbers,
    /// continuations across the middle (the cut moves past them), comments, blank lines, CRLF,
    /// and the first error's line when both halves have one.
    #[test]
    fn long_files_split_in_two_as_one_pass() {
        let mut text = String::new();
        let mut n = 0;
        while text.len() < (3 << 20) / 2 {
            n += 1;
            match n % 7 {
                0 => text.push_str("# comment\n\n"),
                1 => text.push_str("add 198.18.0.0/24 \\\n   nexthop via 192.0.2.1\r\n"),
                _ => text.push_str(&format!("add 198.19.{}.0/24 dev \"v {n}\"\n", n % 256)),
            }
        }
        // a run of continued lines across the middle, so that the cut must move past them
        let mid = text.len() / 2;
        let at = text[mid..]
            .find('\n')
            .map(|o| mid + o + 1)
            .expect("a newline");
        text.insert_str(at, &"x \\\n".repeat(50));
        let whole = parse_from(&text, 0).expect("one pass");
        assert!(text.len() >= 1 << 20 && split_point(&text).is_some());
        assert_eq!(parse(&text).expect("two halves"), whole);
        // errors: the first one's line, whichever half has it
        let bad_tail = format!("{text}add \"unterminated\n");
        let line = bad_tail.lines().count();
        assert_eq!(
            parse(&bad_tail).map(|_| ()),
            Err((line, "unterminated \" quote".into()))
        );
        let bad_both = format!("a 'b\n{bad_tail}");
        assert_eq!(parse(&bad_both).map(|_| ()).map_err(|e| e.0), Err(1));
    }

    /// A batch long enough to be read on two threads is typed in order: every command keeps
    /// its line number, its syntax error included, and an unterminated quote anywhere is the
    /// error (its line) before anything is typed into a run.
    #[test]
    fn long_batches_are_typed_in_order() {
        struct Numbers;
        impl BatchTool for Numbers {
            type Cmd = u32;
            type Out = ();
            fn parse_line(words: Vec<String>) -> Result<u32, Failure> {
                words[0]
                    .parse()
                    .map_err(|_| Failure::usage(format!("not a number: {}", words[0])))
            }
            fn run(&mut self, _: &u32) -> Result<(), Failure> {
                Ok(())
            }
            fn print(_: &(), _: Style) {}
        }
        let n = 20_001usize;
        let pad = "p".repeat(60);
        let mut text = String::new();
        for i in 0..n {
            let w = if i % 1000 == 999 {
                "x".to_string()
            } else {
                i.to_string()
            };
            text.push_str(&format!("{w} # {pad}\n\n\n"));
        }
        assert!(text.len() >= 1 << 20 && split_point(&text).is_some());
        let typed = read_typed::<Numbers>(&text).expect("no quote errors");
        assert_eq!(typed.len(), n);
        for (i, (line, cmd)) in typed.iter().enumerate() {
            assert_eq!(*line, 3 * i + 1);
            match cmd {
                Ok(v) => assert_eq!(*v as usize, i),
                Err(f) => assert!(i % 1000 == 999 && f.message == "not a number: x", "{i}"),
            }
        }
        let bad = format!("{text}7 'open\n");
        assert_eq!(
            read_typed::<Numbers>(&bad).map(|_| ()),
            Err((3 * n + 1, "unterminated ' quote".into()))
        );
    }

    /// The splitting rules stated plainly, char by char: the oracle for the sliced version.
    fn split_by_chars(line: &str) -> Result<Vec<String>, String> {
        let (mut words, mut cur, mut in_word) = (Vec::new(), String::new(), false);
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match c {
                '#' if !in_word => break,
                '"' | '\'' => {
                    in_word = true;
                    let mut closed = false;
                    for q in chars.by_ref() {
                        if q == c {
                            closed = true;
                            break;
                        }
                        cur.push(q);
                    }
                    if !closed {
                        return Err(format!("unterminated {c} quote"));
                    }
                }
                c if c.is_whitespace() => {
                    if in_word {
                        words.push(std::mem::take(&mut cur));
                        in_word = false;
                    }
                }
                c => {
                    in_word = true;
                    cur.push(c);
                }
            }
        }
        if in_word {
            words.push(cur);
        }
        Ok(words)
    }

    #[test]
    fn sliced_split_agrees_with_the_plain_rules() {
        let alphabet = ['a', 'b', ' ', '\t', '"', '\'', '#', 'é', '\u{3000}', '/'];
        let mut rng = mpt_testkit::XorShift64(0x9e37_79b9_7f4a_7c15);
        for _ in 0..20_000 {
            let mut s = String::new();
            let x = rng.next();
            for k in 0..(x % 12) {
                s.push(alphabet[((x >> (4 * k)) % alphabet.len() as u64) as usize]);
            }
            assert_eq!(split_words(&s), split_by_chars(&s), "{s:?}");
        }
    }

    /// A comment that ends in a backslash continues nothing (adversarial review, issue 27
    /// item 2: the next command was swallowed, exit 0); as ip -batch reads it.
    #[test]
    fn a_comment_ending_in_a_backslash_continues_nothing() {
        let t = "# comment \\\nadd a\nadd b # tail \\\nadd c\nadd d \\\n  e # f \\\nadd g\n";
        let got: Vec<(usize, Vec<String>)> = parse(t)
            .expect("parses")
            .into_iter()
            .map(|l| (l.line, l.words))
            .collect();
        let w = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            got,
            [
                (2, w(&["add", "a"])),
                (3, w(&["add", "b"])),
                (4, w(&["add", "c"])),
                (5, w(&["add", "d", "e"])),
                (7, w(&["add", "g"])),
            ]
        );
        assert_eq!(super::strip_comment("a '#b' #c"), "a '#b' ");
        assert_eq!(super::strip_comment("a#b \\"), "a#b \\");
    }

    #[test]
    fn continuation_and_line_numbers() {
        let t = "# head\n\nadd 10.0.0.0/8 \\\n  nexthop via 1.2.3.4\ndel 10.0.0.0/8\n";
        let v = parse(t).expect("ok");
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].line, 3);
        assert_eq!(
            v[0].words,
            ["add", "10.0.0.0/8", "nexthop", "via", "1.2.3.4"]
        );
        assert_eq!(v[1].line, 5);
        assert_eq!(parse("a\nb 'c\n").expect_err("bad quote").0, 2);
    }
}

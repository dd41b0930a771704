//! iproute2's habits, before clap sees the command line: its single-dash long options and their
//! abbreviations (`-json`, `-s -s`, `-netns X`, `-force`), and the abbreviations `ip` accepts for
//! objects and verbs (`ro sh`, `r s`, `a`, `d`, `flu`, `g`, `lst`, `chg`).
//!
//! Not prefix inference: fixed tables, in the order iproute2 tries its words. iproute2 resolves
//! a word with `matches(arg, word)` (the argument is a leading part of the word) against each
//! of its words in turn, in source order, so `ip route s` is `show`, `ip route sa` is `save`,
//! `ip r` is `route` (it comes before `rule`) and `ip -f` is `-family` (before `-force`). The
//! tables below are iproute2 6.1's (ip/ip.c `cmds[]` and its option loop, ip/iproute.c
//! `do_iproute`, ip/ipila.c `do_ipila`), followed by each tool's own words, which never shadow
//! one of ip's. A word ip resolves to a verb a tool lacks (`prepend`, `test`) resolves to it all
//! the same, and the tool then says it has no such command: an abbreviation never means
//! something else here than in ip. The tables are tested word for word against `ip` itself
//! (tests/iproute2_habits.rs).

use std::ffi::OsString;

use crate::Failure;

/// How iproute2 compares an argument with one of its words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    /// `matches()`: any non-empty leading part of the word.
    Prefix,
    /// `strcmp()`: the word itself.
    Exact,
}

/// One word of a table, and the table for the word after it.
#[derive(Debug)]
pub struct Word {
    /// The word as the tool's command line spells it.
    pub word: &'static str,
    /// How an argument is compared with it.
    pub how: Match,
    /// The table of the next word, if the word after this one is resolved too.
    pub then: Option<&'static Level>,
}

impl Word {
    /// A word any leading part of which resolves to it.
    pub const fn prefix(word: &'static str) -> Word {
        Word {
            word,
            how: Match::Prefix,
            then: None,
        }
    }
    /// A word only resolved when written out.
    pub const fn exact(word: &'static str) -> Word {
        Word {
            word,
            how: Match::Exact,
            then: None,
        }
    }
    /// A word any leading part of which resolves to it, followed by a word of `then`.
    pub const fn then(word: &'static str, then: &'static Level) -> Word {
        Word {
            word,
            how: Match::Prefix,
            then: Some(then),
        }
    }
    fn takes(&self, arg: &str) -> bool {
        match self.how {
            Match::Prefix => matches(arg, self.word),
            Match::Exact => arg == self.word,
        }
    }
}

/// The words one position of a command line accepts.
#[derive(Debug)]
pub enum Level {
    /// Tables tried one after the other (iproute2's words, then the tool's own).
    Words(&'static [&'static [Word]]),
    /// iproute2's object table: a word `ip` would resolve to the object `name` is that object
    /// (and the next word is read by `then`); any other word is read by `otherwise` (mproute's
    /// first word is `route` or a verb of `ip route`).
    Object {
        /// The object's name (`route`).
        name: &'static str,
        /// The table of the word after the object.
        then: &'static Level,
        /// The table of a word that is not the object.
        otherwise: &'static Level,
    },
}

/// A tool's command line: the words it accepts abbreviated (its command line and its batch
/// lines alike).
pub trait Abbrev {
    /// The table of its first command word.
    const WORDS: &'static Level;
}

/// iproute2's `matches(arg, word) == 0`: `arg` is a leading part of `word`. (iproute2 also takes
/// the empty argument, which no one types; it is not taken here.)
pub fn matches(arg: &str, word: &str) -> bool {
    !arg.is_empty() && word.starts_with(arg)
}

/// `ip`'s objects in ip/ip.c's order (`cmds[]`).
pub const IP_OBJECTS: &[&str] = &[
    "address",
    "addrlabel",
    "maddress",
    "route",
    "rule",
    "neighbor",
    "neighbour",
    "ntable",
    "ntbl",
    "link",
    "l2tp",
    "fou",
    "ila",
    "macsec",
    "tunnel",
    "tunl",
    "tuntap",
    "tap",
    "token",
    "tcpmetrics",
    "tcp_metrics",
    "monitor",
    "xfrm",
    "mroute",
    "mrule",
    "netns",
    "netconf",
    "vrf",
    "sr",
    "nexthop",
    "mptcp",
    "ioam",
    "help",
    "stats",
];

/// `ip route`'s verbs in ip/iproute.c's order (`do_iproute`; `chg` is compared whole).
pub const IP_ROUTE_VERBS: &[Word] = &[
    Word::prefix("add"),
    Word::prefix("change"),
    Word::exact("chg"),
    Word::prefix("replace"),
    Word::prefix("prepend"),
    Word::prefix("append"),
    Word::prefix("test"),
    Word::prefix("delete"),
    Word::prefix("list"),
    Word::prefix("show"),
    Word::prefix("lst"),
    Word::prefix("get"),
    Word::prefix("flush"),
    Word::prefix("save"),
    Word::prefix("restore"),
    Word::prefix("showdump"),
    Word::prefix("help"),
];

/// `ip ila`'s verbs in ip/ipila.c's order (`help` first, then `add`, `delete`, `list`).
pub const IP_ILA_VERBS: &[Word] = &[
    Word::prefix("help"),
    Word::prefix("add"),
    Word::prefix("delete"),
    Word::prefix("list"),
];

/// The word of `level`'s tables `arg` resolves to, as iproute2 would resolve it.
pub fn resolve(tables: &[&'static [Word]], arg: &str) -> Option<&'static Word> {
    tables.iter().flat_map(|t| t.iter()).find(|w| w.takes(arg))
}

/// `ip`'s object for `arg` (`r` is `route`, `a` is `address`).
pub fn ip_object(arg: &str) -> Option<&'static str> {
    IP_OBJECTS.iter().copied().find(|o| matches(arg, o))
}

/// Write the command words (after the options) out in full, as `level` resolves them; words no
/// table knows are left as they are, for the tool to refuse.
pub fn expand(words: &mut [String], level: &'static Level) {
    let mut level = Some(level);
    for w in words.iter_mut() {
        let Some(l) = level else { return };
        level = None;
        let mut l = l;
        loop {
            match l {
                Level::Object {
                    name,
                    then,
                    otherwise,
                } => {
                    if ip_object(w) == Some(*name) {
                        if w != name {
                            *w = name.to_string();
                        }
                        level = Some(*then);
                        break;
                    }
                    l = otherwise;
                }
                Level::Words(tables) => {
                    if let Some(word) = resolve(tables, w) {
                        if w != word.word {
                            *w = word.word.to_string();
                        }
                        level = word.then;
                    }
                    break;
                }
            }
        }
    }
}

/// What one of `ip`'s options is to the tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opt {
    /// The tools' option of that name (`--json`).
    Flag(&'static str),
    /// The tools' option of that name, with the next argument its value (`--netns X`).
    Value(&'static str),
    /// `-human`: accepted, no effect (the tools' numbers are already read as they are).
    Human,
    /// One of ip's options the tools do not have (an error naming it, exit 1).
    NotOurs,
}

/// `ip`'s options in ip/ip.c's order (the option loop of `main`), and what each is here.
pub const IP_OPTIONS: &[(&str, Match, Opt)] = &[
    ("-loops", Match::Prefix, Opt::NotOurs),
    ("-family", Match::Prefix, Opt::Value("--family")),
    ("-4", Match::Exact, Opt::Flag("-4")),
    ("-6", Match::Exact, Opt::Flag("-6")),
    ("-0", Match::Exact, Opt::NotOurs),
    ("-M", Match::Exact, Opt::NotOurs),
    ("-B", Match::Exact, Opt::NotOurs),
    ("-human", Match::Prefix, Opt::Human),
    ("-human-readable", Match::Prefix, Opt::Human),
    ("-iec", Match::Prefix, Opt::NotOurs),
    ("-stats", Match::Prefix, Opt::Flag("--stats")),
    ("-statistics", Match::Prefix, Opt::Flag("--stats")),
    ("-details", Match::Prefix, Opt::Flag("--details")),
    ("-resolve", Match::Prefix, Opt::NotOurs),
    ("-oneline", Match::Prefix, Opt::Flag("--oneline")),
    ("-timestamp", Match::Prefix, Opt::NotOurs),
    ("-tshort", Match::Prefix, Opt::NotOurs),
    ("-Version", Match::Prefix, Opt::Flag("--version")),
    ("-force", Match::Prefix, Opt::Flag("--force")),
    ("-batch", Match::Prefix, Opt::Value("--batch")),
    ("-brief", Match::Prefix, Opt::NotOurs),
    ("-json", Match::Prefix, Opt::Flag("--json")),
    ("-pretty", Match::Prefix, Opt::Flag("--pretty")),
    ("-rcvbuf", Match::Prefix, Opt::NotOurs),
    // matches_color(): a leading part of -color, with =always|auto|never or nothing
    ("-color", Match::Prefix, Opt::NotOurs),
    ("-help", Match::Prefix, Opt::Flag("--help")),
    ("-netns", Match::Prefix, Opt::Value("--netns")),
    ("-Numeric", Match::Prefix, Opt::NotOurs),
    ("-all", Match::Prefix, Opt::NotOurs),
    ("-echo", Match::Exact, Opt::NotOurs),
];

/// `ip`'s option for `arg` (one leading dash: `-s`, `-json`): its full name and what it is here.
pub fn ip_option(arg: &str) -> Option<(&'static str, Opt)> {
    let name = match arg.split_once('=') {
        // only -color takes its value after '='
        Some((n, _)) if matches(n, "-color") => n,
        _ => arg,
    };
    IP_OPTIONS
        .iter()
        .find(|(word, how, _)| match how {
            Match::Prefix => name.len() > 1 && matches(name, word),
            Match::Exact => name == *word,
        })
        .map(|(word, _, opt)| (*word, *opt))
}

/// The options `cmd` (the tool's clap command) has: long names with whether each takes a value,
/// and the short letters of the flags that take none.
struct Known {
    long: Vec<(String, bool)>,
    short_flags: Vec<(char, bool)>,
}

fn known(cmd: &clap::Command) -> Known {
    let mut long = vec![("help".to_string(), false), ("version".to_string(), false)];
    let mut short_flags = vec![('h', false), ('V', false)];
    for a in cmd.get_arguments() {
        let takes = a.get_action().takes_values();
        if let Some(l) = a.get_long() {
            long.push((l.to_string(), takes));
        }
        if let Some(s) = a.get_short() {
            short_flags.push((s, takes));
        }
    }
    Known { long, short_flags }
}

/// Rewrite a tool's command line (without its name) as clap reads it: the options before the
/// first command word as `ip` reads them (one dash or two, ip's abbreviations, in ip's order),
/// the tool's own long options (`--check`, `-check`) and clusters of its one-letter flags
/// (`-vv`, `-jp`) as they are, and the command words written out by `level`. An option neither
/// `ip` nor the tool has is a usage error; so is one of ip's the tool lacks.
pub fn rewrite(
    tool: &str,
    args: Vec<OsString>,
    cmd: &clap::Command,
    level: &'static Level,
) -> Result<Vec<OsString>, Failure> {
    let known = known(cmd);
    let long_takes = |name: &str| {
        known
            .long
            .iter()
            .find(|(l, _)| l == name)
            .map(|(_, takes)| *takes)
    };
    let mut out: Vec<OsString> = Vec::with_capacity(args.len());
    let mut it = args.into_iter().peekable();
    while let Some(a) = it.next() {
        let Some(s) = a.to_str().map(str::to_string) else {
            out.push(a);
            break;
        };
        if s == "--" || !s.starts_with('-') || s == "-" {
            out.push(a);
            break;
        }
        // the tools' own long options, as clap knows them (--check, --netns=X)
        if let Some(long) = s.strip_prefix("--") {
            let name = long.split_once('=').map_or(long, |(n, _)| n);
            if let Some(takes) = long_takes(name) {
                out.push(a);
                if takes && !long.contains('=') {
                    out.extend(it.next());
                }
                continue;
            }
        }
        // ip reads --x as -x
        let single = s
            .strip_prefix('-')
            .filter(|r| r.starts_with('-'))
            .unwrap_or(&s);
        if let Some((word, opt)) = ip_option(single) {
            match opt {
                Opt::Flag(f) => out.push(f.into()),
                Opt::Value(f) => {
                    out.push(f.into());
                    match it.next() {
                        Some(v) => out.push(v),
                        None => {
                            let what = if s.trim_start_matches('-') == word.trim_start_matches('-')
                            {
                                format!("option \"{s}\"")
                            } else {
                                format!("option \"{s}\" ({word})")
                            };
                            return Err(Failure::usage(format!("{what} needs a value"))
                                .hint(format!("see {tool} --help")));
                        }
                    }
                }
                // ip prints its usage for "ip -h" alone
                Opt::Human if it.peek().is_none() => out.push("--help".into()),
                Opt::Human => {}
                Opt::NotOurs => {
                    return Err(Failure::usage(format!(
                        "option \"{s}\" is ip's {word}, which {tool} does not have"
                    ))
                    .hint(format!("see {tool} --help")))
                }
            }
            continue;
        }
        // the tools' own long options with one dash (-check, -wait 5)
        if let Some(takes) = long_takes(&single[1..]) {
            out.push(format!("-{single}").into());
            if takes {
                out.extend(it.next());
            }
            continue;
        }
        // a cluster of the tool's one-letter flags (-vv, -jp)
        let letters: Vec<char> = single[1..].chars().collect();
        let all_flags = !letters.is_empty()
            && letters
                .iter()
                .all(|c| known.short_flags.iter().any(|(k, t)| k == c && !t));
        if all_flags {
            out.push(a);
            continue;
        }
        return Err(Failure::usage(format!("unknown option \"{s}\"")).hint(format!(
            "{tool} reads ip's options (-json, -stats, -netns NAME, ...) and its own; see {tool} --help"
        )));
    }
    // the command words
    let mut rest: Vec<OsString> = it.collect();
    let first = out.len().saturating_sub(1);
    let is_word = out
        .last()
        .and_then(|a| a.to_str())
        .is_some_and(|s| !s.starts_with('-') || s == "-");
    if is_word {
        let mut words: Vec<OsString> = out.split_off(first);
        words.append(&mut rest);
        let n = words.iter().take_while(|w| w.to_str().is_some()).count();
        let mut strs: Vec<String> = words[..n]
            .iter()
            .filter_map(|w| w.to_str().map(String::from))
            .collect();
        expand(&mut strs, level);
        out.extend(strs.into_iter().map(OsString::from));
        out.extend(words.into_iter().skip(n));
    } else {
        out.append(&mut rest);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    static VERBS: Level = Level::Words(&[IP_ROUTE_VERBS, &[Word::prefix("sync")]]);
    static TOP: Level = Level::Object {
        name: "route",
        then: &VERBS,
        otherwise: &VERBS,
    };

    fn ex(line: &str) -> String {
        let mut w = crate::args::words(line);
        expand(&mut w, &TOP);
        w.join(" ")
    }

    #[test]
    fn iproute2s_order() {
        let r = |a: &str| resolve(&[IP_ROUTE_VERBS], a).map(|w| w.word);
        assert_eq!(r("a"), Some("add"));
        assert_eq!(r("ap"), Some("append"));
        assert_eq!(r("c"), Some("change"));
        assert_eq!(r("chg"), Some("chg"));
        assert_eq!(r("ch"), Some("change"));
        assert_eq!(r("r"), Some("replace"));
        assert_eq!(r("res"), Some("restore"));
        assert_eq!(r("p"), Some("prepend"));
        assert_eq!(r("t"), Some("test"));
        assert_eq!(r("d"), Some("delete"));
        assert_eq!(r("del"), Some("delete"));
        assert_eq!(r("l"), Some("list"));
        assert_eq!(r("ls"), Some("lst"));
        assert_eq!(r("s"), Some("show"));
        assert_eq!(r("sh"), Some("show"));
        assert_eq!(r("sa"), Some("save"));
        assert_eq!(r("showd"), Some("showdump"));
        assert_eq!(r("g"), Some("get"));
        assert_eq!(r("f"), Some("flush"));
        assert_eq!(r("flu"), Some("flush"));
        assert_eq!(r("h"), Some("help"));
        assert_eq!(r("x"), None);
        assert_eq!(r("adds"), None);
        assert_eq!(r(""), None);
        assert_eq!(ip_object("r"), Some("route"));
        assert_eq!(ip_object("ro"), Some("route"));
        assert_eq!(ip_object("ru"), Some("rule"));
        assert_eq!(ip_object("a"), Some("address"));
        assert_eq!(ip_object("n"), Some("neighbor"));
    }

    #[test]
    fn words_are_written_out() {
        assert_eq!(ex("sh"), "show");
        assert_eq!(ex("ro sh table all"), "route show table all");
        assert_eq!(ex("r s"), "route show");
        assert_eq!(
            ex("a 10.0.0.0/8 via 192.0.2.1"),
            "add 10.0.0.0/8 via 192.0.2.1"
        );
        assert_eq!(ex("d 10.0.0.0/8"), "delete 10.0.0.0/8");
        assert_eq!(ex("flu"), "flush");
        // the words after the verb are the grammar's
        assert_eq!(ex("s s"), "show s");
        assert_eq!(ex("sy"), "sync");
        assert_eq!(ex("frob a"), "frob a");
        assert_eq!(ex("route"), "route");
    }

    #[test]
    fn options_as_ip_reads_them() {
        let o = |a: &str| ip_option(a).map(|(w, _)| w);
        assert_eq!(o("-s"), Some("-stats"));
        assert_eq!(o("-statistics"), Some("-statistics"));
        assert_eq!(o("-d"), Some("-details"));
        assert_eq!(o("-j"), Some("-json"));
        assert_eq!(o("-p"), Some("-pretty"));
        assert_eq!(o("-n"), Some("-netns"));
        assert_eq!(o("-b"), Some("-batch"));
        assert_eq!(o("-br"), Some("-brief"));
        assert_eq!(o("-f"), Some("-family"));
        assert_eq!(o("-fo"), Some("-force"));
        assert_eq!(o("-h"), Some("-human"));
        assert_eq!(o("-he"), Some("-help"));
        assert_eq!(o("-o"), Some("-oneline"));
        assert_eq!(o("-c=never"), Some("-color"));
        assert_eq!(o("-4"), Some("-4"));
        assert_eq!(o("-e"), None);
        // a leading part of -json, not -j -s
        assert_eq!(o("-js"), Some("-json"));
        assert_eq!(o("-jp"), None);
        assert_eq!(o("-"), None);
    }

    fn cmd() -> clap::Command {
        use clap::{Arg, ArgAction};
        clap::Command::new("t")
            .arg(
                Arg::new("json")
                    .short('j')
                    .long("json")
                    .action(ArgAction::SetTrue),
            )
            .arg(
                Arg::new("pretty")
                    .short('p')
                    .long("pretty")
                    .action(ArgAction::SetTrue),
            )
            .arg(
                Arg::new("stats")
                    .short('s')
                    .long("stats")
                    .action(ArgAction::Count),
            )
            .arg(
                Arg::new("verbose")
                    .short('v')
                    .long("verbose")
                    .action(ArgAction::Count),
            )
            .arg(Arg::new("netns").short('n').long("netns"))
            .arg(Arg::new("force").long("force").action(ArgAction::SetTrue))
            .arg(Arg::new("check").long("check").action(ArgAction::SetTrue))
            .arg(Arg::new("wait").long("wait"))
    }

    fn rw(line: &str) -> Result<String, Failure> {
        let args = crate::args::words(line)
            .into_iter()
            .map(OsString::from)
            .collect();
        rewrite("t", args, &cmd(), &TOP).map(|v| {
            v.iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
    }

    #[test]
    fn the_command_line_is_rewritten() {
        assert_eq!(
            rw("-json -s -s sh").expect("-json -s -s sh"),
            "--json --stats --stats show"
        );
        assert_eq!(
            rw("-netns x r s").expect("-netns x r s"),
            "--netns x route show"
        );
        assert_eq!(
            rw("--netns x -fo sh").expect("--netns x -fo sh"),
            "--netns x --force show"
        );
        assert_eq!(
            rw("--netns=x --stat sh").expect("--netns=x --stat sh"),
            "--netns=x --stats show"
        );
        assert_eq!(rw("-human sh").expect("-human sh"), "show");
        assert_eq!(rw("-h").expect("-h"), "--help");
        assert_eq!(
            rw("-check -wait 3 a x").expect("-check -wait 3 a x"),
            "--check --wait 3 add x"
        );
        assert_eq!(rw("-vv -jp").expect("-vv -jp"), "-vv -jp");
        assert_eq!(rw("-4 -6").expect("-4 -6"), "-4 -6");
        // the grammar's words after the verb are not options
        assert_eq!(rw("sh -j").expect("sh -j"), "show -j");
        assert_eq!(rw("-- sh").expect("-- sh"), "-- sh");
        let f = rw("-x sh").expect_err("-x sh");
        assert_eq!(f.code, crate::EXIT_USAGE);
        assert_eq!(f.message, "unknown option \"-x\"");
        let f = rw("-t sh").expect_err("-t sh");
        assert_eq!(
            f.message,
            "option \"-t\" is ip's -timestamp, which t does not have"
        );
        assert_eq!(rw("-js sh").expect("-js sh"), "--json show");
        assert_eq!(rw("-sj sh").expect("-sj sh"), "-sj show");
        let f = rw("-jx sh").expect_err("-jx sh");
        assert_eq!(f.message, "unknown option \"-jx\"");
        let f = rw("-n").expect_err("-n");
        assert_eq!(f.message, "option \"-n\" (-netns) needs a value");
        let f = rw("-netns").expect_err("-netns");
        assert_eq!(f.message, "option \"-netns\" needs a value");
    }
}

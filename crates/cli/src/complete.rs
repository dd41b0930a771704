//! Completion that knows the next word: what the hidden `TOOL --complete -- WORDS...` prints,
//! one candidate a line, for the completion scripts `--generate bash|zsh|fish` prints (each a
//! few lines that call the tool). `WORDS` are the words after the tool's name up to the cursor,
//! the last one the word being completed (empty after a space).
//!
//! The tool knows its grammar: its options and verbs come from its clap definition (a verb
//! another change adds is offered at once), the keywords after each verb from a keyword table
//! the tool keeps next to its grammar ([`Grammar`], `bin/<tool>/src/complete.rs`), and the
//! values from the running system: devices (of the namespace `-n` names, when it can be
//! entered), namespaces (`/run/netns`), tables and protocols (iproute2's names), files.
//! iproute2's grammars are keyword lists, which clap's own dynamic completion cannot describe
//! (it completes clap arguments, and every verb here takes its words as one trailing list).

use std::path::Path;

/// What a keyword's value (or an option's) can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// A number, an address, a prefix: nothing to offer.
    Any,
    /// One of these words.
    Words(&'static [&'static str]),
    /// A device of the namespace (`-n`'s, else the caller's).
    Device,
    /// A named network namespace (`/run/netns`).
    Netns,
    /// A routing table name (iproute2's and `rt_tables`).
    Table,
    /// A routing table name or `all`.
    TableOrAll,
    /// A route protocol name (iproute2's and `rt_protos`).
    Proto,
    /// A file or directory.
    File,
}

/// A keyword of a verb's grammar.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    /// The word.
    pub word: &'static str,
    /// What follows it (`None`: nothing, the keyword is a word of its own).
    pub value: Option<Value>,
    /// Whether it may be given more than once (`dev DEV dev DEV`, a nexthop's `via`).
    pub repeat: bool,
}

impl Key {
    /// A keyword given once, taking a value.
    pub const fn once(word: &'static str, value: Value) -> Key {
        Key {
            word,
            value: Some(value),
            repeat: false,
        }
    }
    /// A keyword that may come again, taking a value.
    pub const fn many(word: &'static str, value: Value) -> Key {
        Key {
            word,
            value: Some(value),
            repeat: true,
        }
    }
    /// A word of its own, given once.
    pub const fn flag(word: &'static str) -> Key {
        Key {
            word,
            value: None,
            repeat: false,
        }
    }
    /// A word of its own that may come again (a nexthop's `onlink`).
    pub const fn flags(word: &'static str) -> Key {
        Key {
            word,
            value: None,
            repeat: true,
        }
    }
}

/// A verb or an object: its names (the first is offered, the others are only recognised), the
/// keywords after it, and the verbs below it (`ila xlat add`, `mproute dataplane attach`).
#[derive(Debug, Clone, Copy)]
pub struct Node {
    /// Its names; the first is the one offered.
    pub names: &'static [&'static str],
    /// The keywords of its grammar.
    pub keys: &'static [Key],
    /// The verbs that may follow it.
    pub subs: &'static [Node],
}

impl Node {
    /// A verb with keywords.
    pub const fn verb(names: &'static [&'static str], keys: &'static [Key]) -> Node {
        Node {
            names,
            keys,
            subs: &[],
        }
    }
    /// An object with verbs below it.
    pub const fn object(names: &'static [&'static str], subs: &'static [Node]) -> Node {
        Node {
            names,
            keys: &[],
            subs,
        }
    }
    fn is(&self, w: &str) -> bool {
        self.names.contains(&w)
    }
}

/// A tool's keyword tables: one [`Node`] per verb or object of its command line. Verbs clap
/// knows and the table does not are offered too, with no keywords after them.
#[derive(Debug, Clone, Copy)]
pub struct Grammar {
    /// The verbs and objects.
    pub commands: &'static [Node],
}

/// The system the candidates are taken from (devices, namespaces, names): the running one, or
/// a fixed one in tests.
pub trait System {
    /// Device names of namespace `netns` (`None`: the caller's).
    fn devices(&self, netns: Option<&str>) -> Vec<String>;
    /// Named network namespaces.
    fn namespaces(&self) -> Vec<String>;
    /// Routing table names.
    fn tables(&self) -> Vec<String>;
    /// Route protocol names.
    fn protos(&self) -> Vec<String>;
    /// Files and directories (with a trailing `/`) whose path starts with `prefix`.
    fn files(&self, prefix: &str) -> Vec<String>;
}

/// The running system.
#[derive(Debug, Clone, Copy, Default)]
pub struct Live;

impl System for Live {
    fn devices(&self, netns: Option<&str>) -> Vec<String> {
        let mut v: Vec<String> = match netns {
            // (entering another namespace needs CAP_SYS_ADMIN: without it, nothing to offer)
            Some(ns) => {
                mpt_sys::netns::run_in(ns, || Ok::<_, mpt_sys::Error>(mpt_sys::iface::all()))
                    .unwrap_or_default()
            }
            None => mpt_sys::iface::all(),
        }
        .into_iter()
        .map(|(_, n)| n)
        .collect();
        v.sort();
        v
    }
    fn namespaces(&self) -> Vec<String> {
        mpt_sys::netns::list_named()
    }
    fn tables(&self) -> Vec<String> {
        crate::names::table_names()
    }
    fn protos(&self) -> Vec<String> {
        crate::names::proto_names()
    }
    fn files(&self, prefix: &str) -> Vec<String> {
        let (dir, shown) = match prefix.rfind('/') {
            Some(i) => (&prefix[..=i], &prefix[..=i]),
            None => (".", ""),
        };
        let Ok(rd) = std::fs::read_dir(Path::new(dir)) else {
            return Vec::new();
        };
        let mut v: Vec<String> = rd
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let slash = if e.path().is_dir() { "/" } else { "" };
                Some(format!("{shown}{name}{slash}"))
            })
            .filter(|p| p.starts_with(prefix))
            .collect();
        v.sort();
        v
    }
}

/// An option of the command line, from clap.
struct Opt {
    long: Option<String>,
    short: Option<char>,
    /// What its value is, and the words clap lists for it (`--backend`'s).
    value: Option<(Value, Vec<String>)>,
}

fn options(cmd: &clap::Command) -> Vec<Opt> {
    cmd.get_arguments()
        .filter(|a| !a.is_positional() && !a.is_hide_set())
        .map(|a| {
            let takes = a.get_action().takes_values();
            let value = takes.then(|| match a.get_id().as_str() {
                "netns" => (Value::Netns, Vec::new()),
                "batch" => (Value::File, Vec::new()),
                _ => (
                    Value::Any,
                    a.get_possible_values()
                        .iter()
                        .filter(|p| !p.is_hide_set())
                        .map(|p| p.get_name().to_string())
                        .collect(),
                ),
            });
            Opt {
                long: a.get_long().map(str::to_string),
                short: a.get_short(),
                value,
            }
        })
        .collect()
}

/// The option a word names (`--netns`, `-n`, iproute2's `-netns`), and a value given in the
/// same word (`--netns=x`).
fn find_opt<'a>(opts: &'a [Opt], w: &str) -> Option<(&'a Opt, Option<String>)> {
    if let Some(long) = w.strip_prefix("--") {
        let (name, val) = match long.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (long, None),
        };
        return opts
            .iter()
            .find(|o| o.long.as_deref() == Some(name))
            .map(|o| (o, val));
    }
    let rest = w.strip_prefix('-')?;
    let mut chars = rest.chars();
    let first = chars.next()?;
    if rest.len() > 1 {
        if let Some(o) = opts.iter().find(|o| o.long.as_deref() == Some(rest)) {
            return Some((o, None));
        }
    }
    let o = opts.iter().find(|o| o.short == Some(first))?;
    let tail = chars.as_str();
    // -nNAME gives the value in the word; -js is two flags (the last one decides)
    match (&o.value, tail.is_empty()) {
        (Some(_), false) => Some((o, Some(tail.to_string()))),
        (None, false) => find_opt(opts, &format!("-{tail}")),
        _ => Some((o, None)),
    }
}

fn value_candidates(sys: &dyn System, v: Value, netns: Option<&str>, cur: &str) -> Vec<String> {
    match v {
        Value::Any => Vec::new(),
        Value::Words(w) => w.iter().map(|s| s.to_string()).collect(),
        Value::Device => sys.devices(netns),
        Value::Netns => sys.namespaces(),
        Value::Table => sys.tables(),
        Value::TableOrAll => {
            let mut t = sys.tables();
            t.push("all".into());
            t
        }
        Value::Proto => sys.protos(),
        Value::File => sys.files(cur),
    }
}

/// The candidates for the last of `words` (the words after the tool's name, the last one the
/// word being completed), those that start with it, in the order the grammar gives them.
pub fn candidates(
    cmd: &clap::Command,
    grammar: &Grammar,
    sys: &dyn System,
    words: &[String],
) -> Vec<String> {
    let Some((cur, before)) = words.split_last() else {
        return Vec::new();
    };
    let cur = cur.as_str();
    let mut all = raw_candidates(cmd, grammar, sys, before, cur);
    all.retain(|c| c.starts_with(cur));
    let mut seen = std::collections::HashSet::new();
    all.retain(|c| seen.insert(c.clone()));
    all
}

fn raw_candidates(
    cmd: &clap::Command,
    grammar: &Grammar,
    sys: &dyn System,
    before: &[String],
    cur: &str,
) -> Vec<String> {
    let opts = options(cmd);
    let mut netns: Option<String> = None;
    let mut i = 0;
    // the options before the verb
    while let Some(w) = before.get(i) {
        if !w.starts_with('-') || w == "-" {
            break;
        }
        i += 1;
        let Some((o, inline)) = find_opt(&opts, w) else {
            continue;
        };
        let Some((v, words)) = &o.value else {
            continue;
        };
        let v = *v;
        let val = match inline {
            Some(val) => val,
            None => match before.get(i) {
                Some(val) => {
                    i += 1;
                    val.clone()
                }
                // the word being completed is this option's value
                None => {
                    let mut c = value_candidates(sys, v, netns.as_deref(), cur);
                    c.extend(words.iter().cloned());
                    return c;
                }
            },
        };
        if v == Value::Netns {
            netns = Some(val);
        }
    }
    let netns = netns.as_deref();
    let Some(verb) = before.get(i) else {
        // the verb's place: an option, or a verb
        if cur.starts_with('-') {
            let mut v = Vec::new();
            for o in &opts {
                if let Some(l) = &o.long {
                    v.push(format!("--{l}"));
                }
            }
            for o in &opts {
                if let Some(s) = o.short {
                    v.push(format!("-{s}"));
                }
            }
            return v;
        }
        let mut v: Vec<String> = cmd
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(|s| s.get_name().to_string())
            .collect();
        v.extend(grammar.commands.iter().map(|n| n.names[0].to_string()));
        return v;
    };
    i += 1;
    let Some(mut node) = grammar.commands.iter().find(|n| n.is(verb)) else {
        // a verb clap knows and the table does not (yet): no keywords to offer
        return Vec::new();
    };
    // the verbs below an object
    while !node.subs.is_empty() {
        match before.get(i) {
            None => {
                let mut v: Vec<String> = node.subs.iter().map(|n| n.names[0].to_string()).collect();
                v.extend(node.keys.iter().map(|k| k.word.to_string()));
                return v;
            }
            Some(w) => match node.subs.iter().find(|n| n.is(w)) {
                Some(sub) => {
                    node = sub;
                    i += 1;
                }
                None => break,
            },
        }
    }
    // the keywords, and the value after one
    let mut used: Vec<&str> = Vec::new();
    while let Some(w) = before.get(i) {
        i += 1;
        let Some(k) = node.keys.iter().find(|k| k.word == w) else {
            continue;
        };
        used.push(k.word);
        if let Some(v) = k.value {
            if before.get(i).is_none() {
                return value_candidates(sys, v, netns, cur);
            }
            i += 1;
        }
    }
    node.keys
        .iter()
        .filter(|k| k.repeat || !used.contains(&k.word))
        .map(|k| k.word.to_string())
        .collect()
}

/// The completion script for `shell` (`bash`, `zsh`, `fish`) of tool `name`: a few lines
/// that call `NAME --complete -- WORDS...`. `None` for another shell.
pub fn script(name: &str, shell: &str) -> Option<String> {
    let fun = format!("_{}", name.replace('-', "_"));
    let head = format!(
        "{name} completion for {shell}, generated by \"{name} --generate {shell}\": the candidates \
         come from {name} itself (\"{name} --complete -- WORDS...\", one a line), which knows \
         its grammar, and the devices, namespaces, tables and protocols of the running system."
    );
    let s = match shell {
        "bash" => format!(
            r#"# {head}

{fun}() {{
    local cur words cword
    if declare -F _get_comp_words_by_ref >/dev/null 2>&1; then
        # (bash-completion: keep IPv6 addresses and KEY=VALUE words whole)
        _get_comp_words_by_ref -n =: cur words cword
    else
        words=("${{COMP_WORDS[@]}}")
        cword=$COMP_CWORD
    fi
    local cmd=${{words[0]}}
    [[ $cmd == */* && -x $cmd ]] || cmd={name}
    local IFS=$'\n'
    COMPREPLY=($("$cmd" --complete -- "${{words[@]:1:cword}}" 2>/dev/null))
    if [[ ${{#COMPREPLY[@]}} -eq 1 && ${{COMPREPLY[0]}} == */ ]]; then
        compopt -o nospace 2>/dev/null
    fi
    return 0
}}
complete -F {fun} {name}
"#
        ),
        "zsh" => format!(
            r#"#compdef {name}
# {head}

{fun}() {{
    local cmd=${{words[1]}}
    [[ $cmd == */* && -x $cmd ]] || cmd={name}
    local -a cands
    cands=("${{(@f)$("$cmd" --complete -- "${{(@)words[2,CURRENT]}}" 2>/dev/null)}}")
    cands=(${{cands:#}})
    (( ${{#cands}} )) || return 1
    compadd -Q -U -S '' -- ${{cands:#*[^/]}}
    compadd -Q -U -- ${{cands:#*/}}
}}

if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
    {fun} "$@"
else
    compdef {fun} {name}
fi
"#
        ),
        "fish" => format!(
            r#"# {head}

function __{fun}_complete
    set -l words (commandline -opc)
    set -l cur (commandline -ct)
    set -l cmd $words[1]
    set -e words[1]
    if not string match -q -- '*/*' $cmd; or not test -x $cmd
        set cmd {name}
    end
    $cmd --complete -- $words "$cur" 2>/dev/null
end

complete -c {name} -f -a '(__{fun}_complete)'
"#
        ),
        _ => return None,
    };
    Some(s)
}

/// Handle `TOOL --complete -- WORDS...` before the command line is parsed: print the
/// candidates and exit 0. Does nothing when the first argument is not `--complete`. `words`:
/// the tool's abbreviations, so that the words before the one being completed are read as the
/// tool reads them (`mproute ro sh <TAB>` completes as `mproute route show <TAB>`).
pub fn handle(
    cmd: impl FnOnce() -> clap::Command,
    grammar: &Grammar,
    words_table: Option<&'static crate::abbrev::Level>,
) {
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() != Some("--complete") {
        return;
    }
    let mut words: Vec<String> = args.collect();
    if words.first().is_some_and(|w| w == "--") {
        words.remove(0);
    }
    if words.is_empty() {
        words.push(String::new());
    }
    let cmd = cmd();
    if let Some(level) = words_table {
        words = expanded(&cmd, level, words);
    }
    let out: String = candidates(&cmd, grammar, &Live, &words)
        .into_iter()
        .map(|c| c + "\n")
        .collect();
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    std::process::exit(crate::EXIT_OK)
}

/// The words before the last written out as the tool reads them (options as ip spells them,
/// abbreviated command words); the last, being completed, as it is. Words the tool would refuse
/// stay as written.
fn expanded(
    cmd: &clap::Command,
    level: &'static crate::abbrev::Level,
    words: Vec<String>,
) -> Vec<String> {
    let Some((last, done)) = words.split_last() else {
        return words;
    };
    let os: Vec<std::ffi::OsString> = done.iter().map(std::ffi::OsString::from).collect();
    match crate::abbrev::rewrite(cmd.get_name(), os, cmd, level) {
        Ok(rw) => {
            let mut v: Vec<String> = rw
                .into_iter()
                .map(|o| o.to_string_lossy().into_owned())
                .collect();
            v.push(last.clone());
            v
        }
        Err(_) => words,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed;
    impl System for Fixed {
        fn devices(&self, netns: Option<&str>) -> Vec<String> {
            match netns {
                Some("blue") => vec!["lo".into(), "veth0".into()],
                _ => vec!["eth0".into(), "lo".into()],
            }
        }
        fn namespaces(&self) -> Vec<String> {
            vec!["blue".into(), "red".into()]
        }
        fn tables(&self) -> Vec<String> {
            vec!["default".into(), "main".into(), "local".into()]
        }
        fn protos(&self) -> Vec<String> {
            vec!["kernel".into(), "mproute".into()]
        }
        fn files(&self, prefix: &str) -> Vec<String> {
            vec![format!("{prefix}x.batch")]
        }
    }

    const ADD: Node = Node::verb(
        &["add"],
        &[
            Key::once("table", Value::Table),
            Key::once("algo", Value::Words(&["l3-hash", "l4-hash"])),
            Key::many("dev", Value::Device),
            Key::flags("onlink"),
        ],
    );
    const DP: Node = Node::object(
        &["dataplane", "dp"],
        &[
            Node::verb(&["attach"], &[Key::many("dev", Value::Device)]),
            Node::verb(&["show"], &[]),
        ],
    );
    const G: Grammar = Grammar {
        commands: &[ADD, DP, Node::object(&["route"], &[ADD])],
    };

    fn cmd() -> clap::Command {
        clap::Command::new("tool")
            .arg(
                clap::Arg::new("json")
                    .short('j')
                    .long("json")
                    .action(clap::ArgAction::SetTrue),
            )
            .arg(clap::Arg::new("netns").short('n').long("netns"))
            .arg(clap::Arg::new("batch").short('b').long("batch"))
            .arg(
                clap::Arg::new("backend")
                    .long("backend")
                    .value_parser(["auto", "kernel"]),
            )
            .subcommand(clap::Command::new("add"))
            .subcommand(clap::Command::new("dataplane").alias("dp"))
            .subcommand(clap::Command::new("save"))
            .subcommand(clap::Command::new("route").hide(true))
    }

    fn c(line: &str) -> Vec<String> {
        let mut w: Vec<String> = line.split(' ').map(str::to_string).collect();
        if line.is_empty() {
            w = vec![String::new()];
        }
        candidates(&cmd(), &G, &Fixed, &w)
    }

    #[test]
    fn verbs_from_clap_and_the_table() {
        // save: clap's only (a verb the table has not caught up with); route: the table's
        assert_eq!(c(""), ["add", "dataplane", "save", "route"]);
        assert_eq!(c("-j d"), ["dataplane"]);
        assert_eq!(c("save "), Vec::<String>::new());
    }

    #[test]
    fn options_and_their_values() {
        assert_eq!(c("--j"), ["--json"]);
        assert_eq!(c("-n "), ["blue", "red"]);
        assert_eq!(c("--netns r"), ["red"]);
        assert_eq!(c("-netns "), ["blue", "red"]);
        assert_eq!(c("--backend "), ["auto", "kernel"]);
        assert_eq!(c("-b /tmp/"), ["/tmp/x.batch"]);
        assert_eq!(c("-jn "), ["blue", "red"]);
    }

    #[test]
    fn keywords_and_values() {
        assert_eq!(c("add "), ["table", "algo", "dev", "onlink"]);
        assert_eq!(c("add 10.0.0.0/8 algo "), ["l3-hash", "l4-hash"]);
        assert_eq!(c("add 10.0.0.0/8 algo l4"), ["l4-hash"]);
        // once-only keywords are not offered again, repeatable ones are
        assert_eq!(
            c("add 10.0.0.0/8 algo l3-hash table main dev eth0 onlink "),
            ["dev", "onlink"]
        );
        assert_eq!(c("add 10.0.0.0/8 table "), ["default", "main", "local"]);
        assert_eq!(c("route add 10/8 al"), ["algo"]);
    }

    #[test]
    fn devices_of_the_namespace_named() {
        assert_eq!(c("add 10/8 dev "), ["eth0", "lo"]);
        assert_eq!(c("-n blue add 10/8 dev "), ["lo", "veth0"]);
        assert_eq!(c("-n blue dp attach dev v"), ["veth0"]);
    }

    #[test]
    fn verbs_below_an_object() {
        assert_eq!(c("dataplane "), ["attach", "show"]);
        assert_eq!(c("dp a"), ["attach"]);
        assert_eq!(c("dataplane show "), Vec::<String>::new());
    }

    #[test]
    fn scripts_call_the_tool() {
        for sh in ["bash", "zsh", "fish"] {
            let s = script("tool", sh).expect(sh);
            assert!(s.contains("--complete --"), "{sh}: {s}");
        }
        assert!(script("tool", "tcsh").is_none());
    }
}

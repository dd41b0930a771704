//! The command line of mproute, first stage (syntax only: `--help` needs neither root nor a
//! socket): clap parses the global options and the verb, the route grammar after the verb
//! ([`crate::grammar`], iproute2-style keyword lists) turns its words into a typed
//! [`Command`]. Batch lines are parsed the same way ([`parse_line`]). Names (devices, tables,
//! protocols) are resolved later, inside the target namespace ([`crate::resolve`]).

use clap::{Parser, Subcommand};
use mpt_cli::abbrev::{self, Level, Word};
use mpt_cli::{Failure, GlobalOpts};
use mpt_model::Verb;

use crate::grammar::{self, DpSpec, GetSpec, RouteSpec, ShowSpec};

const ROUTE_GRAMMAR: &str = "\
PREFIX [table T] [metric M] [proto P] [algo ALGO [resilient [buckets N] [idle-timer S]]] NEXTHOPS
  NEXTHOPS := via ADDR [dev DEV] [onlink]
            | nexthop NH [nexthop NH ...]
  NH       := [via ADDR] [dev DEV] [weight W] [onlink]
  ALGO     := l3-hash (default) | l4-hash | per-packet | drr | random | wrandom
  W        := 1..256

resilient (l3-hash, l4-hash): a table of N buckets (default 128, at most 4096) between the
hash and the nexthops, as the kernel's resilient nexthop groups keep it. A flow's bucket is
fixed by its hash; replacing the route with a nexthop less moves only that nexthop's buckets,
with one more only buckets idle for S seconds (default 120; 0: at once), so that flows in
progress keep their path. Idle buckets held beyond a nexthop's share move at the next write of
the route or the next \"mproute dataplane watch\" tick.";

const SHOW_HELP: &str = "\
The selector is ip route show's: a bare PREFIX (or exact PREFIX) is that route, root PREFIX the
routes within it, match PREFIX the routes it falls within; dev and via select routes with one
path out of DEV or through ADDR (as ip, which compares the route's own device and gateway, not
a multipath route's nexthops); -4 and -6 pick one family. Keywords abbreviate as in ip (ro, ma,
p, m). show lists table main by default, flush every table, and flush removes only routes
mproute owns.";

const AFTER_HELP: &str = "\
Multipath routes with a per-route algorithm. The route goes into the kernel FIB over rtnetlink
(with RTA_MP_ALGO, which current kernels ignore); the algorithm is kept in mproute's BPF state
for the namespace and carried out by its tc/XDP dataplane.

Examples:
  mproute add 10.0.0.0/8 algo l4-hash nexthop via 192.0.2.1 dev eth0 weight 2 nexthop via 192.0.2.9 dev eth1
  mproute -j show table all
  mproute -n blue replace 2001:db8::/32 nexthop via fe80::1 dev eth0 nexthop via fe80::2 dev eth1
  mproute -b routes.batch --force
  mproute flush table 100
  mproute --check -j replace 10.0.0.0/8 nexthop via 192.0.2.1 dev eth0

Dry run: with --check every command (every line of a batch, each seeing what the lines before
it would have done) is resolved and compared with the kernel and answers with what it would
change (-j: \"changed\" and \"diff\" with the route before and after, as show -j prints it);
nothing is written and no state is created. Refusals the kernel decides from what is there
(gateway not connected, device down, add of an existing route, change or del of a missing one)
are reported as the real command would report them, exit 2. Every mutating verb's -j output
carries \"changed\".

Routes mproute owns carry protocol \"mproute\" (245) unless \"proto P\" is given.

Exit status: 0 success (also when nothing had to change), 1 usage or syntax error (nothing was
changed), 2 the kernel or the system refused (the FIB and mproute's state are as before the
command).";

/// mproute: multipath routes with a per-route algorithm.
#[derive(Debug, Parser)]
#[command(
    name = "mproute",
    version,
    about = "Multipath routes with a per-route algorithm (l3-hash, l4-hash, per-packet, drr, random, wrandom)",
    after_help = AFTER_HELP,
    subcommand_required = false,
    arg_required_else_help = false
)]
pub struct Cli {
    /// Options shared by mproute, ila and pfanout.
    #[command(flatten)]
    pub global: GlobalOpts,
    /// Install routes as references to kernel nexthop objects (Linux 5.3+): faster in bulk. The
    /// kernel deletes an object when its device goes down or loses its carrier (a group left
    /// empty, and its routes, with it) and never brings it back: run `mproute dataplane watch`
    /// (or `mproute sync` after a flap) to put the objects and routes back when the link is up.
    #[arg(long = "nexthop-objects", global = true)]
    pub nexthop_objects: bool,
    /// The command.
    #[command(subcommand)]
    pub cmd: Option<Cmd>,
}

/// Verbs. `mproute route VERB ...` is accepted as well as `mproute VERB ...`.
#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Add a route; fails if it exists.
    #[command(override_usage = concat!("mproute add ", "PREFIX [table T] [metric M] [proto P] [algo ALGO] NEXTHOPS"), after_help = ROUTE_GRAMMAR)]
    Add(RouteArgs),
    /// Add or replace a route (idempotent).
    #[command(override_usage = "mproute replace PREFIX [table T] [metric M] [proto P] [algo ALGO] NEXTHOPS", after_help = ROUTE_GRAMMAR)]
    Replace(RouteArgs),
    /// Add an alternative route (IPv4) or more nexthops to a route (IPv6).
    #[command(override_usage = "mproute append PREFIX [table T] [metric M] [proto P] [algo ALGO] NEXTHOPS", after_help = ROUTE_GRAMMAR)]
    Append(RouteArgs),
    /// Change an existing route; fails if there is none.
    #[command(alias = "chg", override_usage = "mproute change PREFIX [table T] [metric M] [proto P] [algo ALGO] NEXTHOPS", after_help = ROUTE_GRAMMAR)]
    Change(RouteArgs),
    /// Delete a route mproute owns.
    #[command(
        visible_alias = "delete",
        override_usage = "mproute del PREFIX [table T] [metric M]"
    )]
    Del(RouteArgs),
    /// List routes with their algorithm and who enforces it.
    #[command(visible_aliases = ["list", "ls"], alias = "lst", override_usage = "mproute show [[to] [root|match|exact] PREFIX] [table T|all] [proto P] [dev DEV] [via ADDR] [metric M] [scope S] [type T] [algo ALGO]", after_help = SHOW_HELP)]
    Show(RouteArgs),
    /// Remove every route mproute owns (in one table, or those a selector names).
    #[command(override_usage = "mproute flush [table T|all] [[to] [root|match|exact] PREFIX] [proto P] [dev DEV] [via ADDR] [metric M] [scope S] [type T]", after_help = SHOW_HELP)]
    Flush(RouteArgs),
    /// Report and repair drift between the FIB and mproute's state; first put back nexthop
    /// objects the kernel deleted with a link that is up again.
    #[command(override_usage = "mproute sync [--reset]")]
    Sync(RouteArgs),
    /// Show the nexthop the dataplane picks for a packet, and the hash.
    #[command(
        override_usage = "mproute get ADDR [from SRC] [ipproto tcp|udp|sctp|icmp|N] [sport S] [dport D] [iif DEV] [table T]"
    )]
    Get(RouteArgs),
    /// Print the managed routes and the dataplane's attachments as batch lines that
    /// `mproute -b FILE` restores (what mproute-restore.service reads at boot).
    #[command(override_usage = "mproute save")]
    Save(RouteArgs),
    /// `mproute route VERB ARGS`: the object word of iproute2, accepted and ignored.
    #[command(hide = true)]
    Route(RouteArgs),
    /// Attach, detach and show the tc/XDP dataplane that carries out the algorithms; watch keeps its FIB check verified and puts back nexthop objects a link flap deleted.
    #[command(
        alias = "dp",
        after_long_help = "Modes: auto (tc on veth and virtual devices, native XDP elsewhere), xdp, xdp-generic, tc. fastpath on|off: forward unmanaged destinations by the kernel FIB (default on); IPv4 answers are cached per CPU and flow while the namespace's routing generation is unchanged, for at most two ticks (a neighbour's new MAC or a learnt path MTU is seen that late). peer on|off (default on): tc delivers packets for a veth whose peer is in another namespace straight into the peer (bpf_redirect_peer), skipping that veth's transmit: its qdisc, egress tc, captures and tx counters do not see them; a veth with a qdisc other than noqueue or an egress tc program keeps its transmit path. prepare-peers: enable GRO on the veth peers native XDP redirects into.",
        override_usage = "mproute dataplane attach dev DEV [dev DEV ...] [auto|xdp|xdp-generic|tc] [fastpath on|off] [peer on|off] [prepare-peers]\n       mproute dataplane detach dev DEV\n       mproute dataplane show\n       mproute dataplane watch"
    )]
    Dataplane(RouteArgs),
    /// Print the dataplane's counters (routes, nexthops, verdicts) and attachments in the
    /// Prometheus text format, for node_exporter's textfile collector.
    #[command(override_usage = "mproute metrics")]
    Metrics(RouteArgs),
}

impl From<Vec<String>> for RouteArgs {
    fn from(args: Vec<String>) -> Self {
        RouteArgs { args }
    }
}

/// The words after the verb, parsed by the route grammar.
#[derive(Debug, Clone, clap::Args)]
pub struct RouteArgs {
    /// Route arguments (see the grammar below).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    pub args: Vec<String>,
}

/// A command, typed: what `Cmd` and its words say, before any name is resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `add`, `replace`, `append`, `change` (the spec's verb says which).
    Write(RouteSpec),
    /// `del`.
    Del(RouteSpec),
    /// `show`.
    Show(ShowSpec),
    /// `flush [table T|all] [SELECTOR]` (the spec's table `None`: every table).
    Flush(ShowSpec),
    /// `sync [--reset]`.
    Sync {
        /// Drop the namespace's state instead.
        reset: bool,
    },
    /// `get`.
    Get(GetSpec),
    /// `dataplane attach|detach|show|watch`.
    Dataplane(DpSpec),
    /// `metrics`.
    Metrics,
    /// `save`.
    Save,
}

impl Command {
    /// Whether the command may change routes, mproute's maps or attachments (and so the
    /// dataplane's FIB check must be disarmed first and verified again at the end).
    pub fn changes_routes(&self) -> bool {
        // (sync --reset drops the state without reading it: it must work on a state this
        // version cannot open, which is what the ABI refusal's hint tells the operator to do)
        matches!(
            self,
            Command::Write(_)
                | Command::Del(_)
                | Command::Flush(_)
                | Command::Sync { reset: false }
                | Command::Dataplane(DpSpec::Attach { .. })
        )
    }
}

fn route(verb: Verb, args: &[String]) -> Result<RouteSpec, Failure> {
    grammar::parse_route(verb, args).map_err(|e| Failure::usage(format!("{}: {e}", verb.name())))
}

impl Cmd {
    /// The typed command.
    pub fn command(&self) -> Result<Command, Failure> {
        Ok(match self {
            Cmd::Add(a) => Command::Write(route(Verb::Add, &a.args)?),
            Cmd::Replace(a) => Command::Write(route(Verb::Replace, &a.args)?),
            Cmd::Append(a) => Command::Write(route(Verb::Append, &a.args)?),
            Cmd::Change(a) => Command::Write(route(Verb::Change, &a.args)?),
            Cmd::Del(a) => Command::Del(route(Verb::Del, &a.args)?),
            Cmd::Show(a) => Command::Show(
                grammar::parse_show(&a.args).map_err(|e| Failure::usage(format!("show: {e}")))?,
            ),
            Cmd::Flush(a) => Command::Flush(
                grammar::parse_flush(&a.args).map_err(|e| Failure::usage(format!("flush: {e}")))?,
            ),
            Cmd::Sync(a) => Command::Sync {
                reset: match &a.args[..] {
                    [] => false,
                    [w] if w == "--reset" || w == "reset" => true,
                    [w, ..] => {
                        return Err(Failure::usage(format!("sync: unexpected word \"{w}\"")))
                    }
                },
            },
            Cmd::Get(a) => Command::Get(
                grammar::parse_get(&a.args).map_err(|e| Failure::usage(format!("get: {e}")))?,
            ),
            Cmd::Dataplane(a) => Command::Dataplane(
                grammar::parse_dataplane(&a.args)
                    .map_err(|e| Failure::usage(format!("dataplane: {e}")))?,
            ),
            Cmd::Metrics(a) => match a.args.first() {
                None => Command::Metrics,
                Some(w) => return Err(Failure::usage(format!("metrics: unexpected word \"{w}\""))),
            },
            Cmd::Save(a) => match a.args.first() {
                None => Command::Save,
                Some(w) => return Err(Failure::usage(format!("save: unexpected word \"{w}\""))),
            },
            // `mproute route VERB ARGS`: iproute2's object word
            Cmd::Route(a) if a.args.is_empty() => Command::Show(ShowSpec::default()),
            Cmd::Route(a) => parse_line(a.args.clone())?,
        })
    }
}

/// Every verb of [`Cmd`] and its aliases, and how to make it from the words after it: what clap
/// would make of a line (every verb takes the rest of the line as its words), without building
/// clap's command for each of a batch's lines (that alone cost 6.5 µs a line, half again the
/// time of a 100 000-route batch). A test holds it to [`Cmd`]'s definition.
const VERBS: &[mpt_cli::args::Entry<RouteArgs, Cmd>] = &[
    ("add", Cmd::Add),
    ("replace", Cmd::Replace),
    ("append", Cmd::Append),
    ("change", Cmd::Change),
    ("chg", Cmd::Change),
    ("del", Cmd::Del),
    ("delete", Cmd::Del),
    ("show", Cmd::Show),
    ("list", Cmd::Show),
    ("ls", Cmd::Show),
    ("lst", Cmd::Show),
    ("flush", Cmd::Flush),
    ("sync", Cmd::Sync),
    ("get", Cmd::Get),
    ("save", Cmd::Save),
    ("route", Cmd::Route),
    ("dataplane", Cmd::Dataplane),
    ("dp", Cmd::Dataplane),
    ("metrics", Cmd::Metrics),
];

/// `mproute dataplane`'s verbs (no `ip` object has them: the same style, in this order).
static DP_WORDS: Level = Level::Words(&[&[
    Word::prefix("attach"),
    Word::prefix("detach"),
    Word::prefix("show"),
    Word::prefix("list"),
    Word::prefix("lst"),
    Word::prefix("watch"),
]]);

/// mproute's verbs: `ip route`'s in iproute2's order, then mproute's own (`save` and `help`
/// are among ip's).
static VERB_WORDS: Level = Level::Words(&[
    abbrev::IP_ROUTE_VERBS,
    &[
        Word::prefix("sync"),
        Word::then("dataplane", &DP_WORDS),
        Word {
            word: "dp",
            how: abbrev::Match::Exact,
            then: Some(&DP_WORDS),
        },
        Word::prefix("metrics"),
    ],
]);

/// mproute's first word: what `ip` reads as its object `route` (`r`, `ro`, ...), then a verb;
/// else a verb (`mproute sh` is `ip route sh`).
pub static WORDS: Level = Level::Object {
    name: "route",
    then: &VERB_WORDS,
    otherwise: &VERB_WORDS,
};

impl abbrev::Abbrev for Cli {
    const WORDS: &'static Level = &WORDS;
}

/// Parse the words of one batch line (`add ...`, `route add ...`, `r s`).
pub fn parse_line(mut words: Vec<String>) -> Result<Command, Failure> {
    abbrev::expand(&mut words, &WORDS);
    mpt_cli::args::parse_line::<Cli, _, _, _>("mproute", words, VERBS, Cmd::command)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpt_cli::args::words;

    #[test]
    fn lines_parse_into_typed_commands() {
        let c = parse_line(words("add 10.0.0.0/8 via 192.0.2.1 dev eth0")).expect("add");
        assert!(matches!(&c, Command::Write(s) if s.verb == Verb::Add));
        assert!(c.changes_routes());
        let c = parse_line(words("route chg 10.0.0.0/8 via 192.0.2.1")).expect("route chg");
        assert!(matches!(&c, Command::Write(s) if s.verb == Verb::Change));
        let c = parse_line(words("lst table all")).expect("lst");
        assert!(matches!(&c, Command::Show(s) if s.table.as_deref() == Some("all")));
        assert!(!c.changes_routes());
        assert_eq!(
            parse_line(words("dp show")).expect("dp"),
            Command::Dataplane(DpSpec::Show)
        );
        assert!(parse_line(words("dataplane attach dev v0"))
            .expect("attach")
            .changes_routes());
        assert_eq!(
            parse_line(words("sync --reset")).expect("sync"),
            Command::Sync { reset: true }
        );
    }

    #[test]
    fn the_verb_table_is_the_clap_definition() {
        let (ours, clap_names) = mpt_cli::args::table_and_clap_names(
            VERBS,
            &mpt_cli::args::line_command::<Cmd>("mproute"),
        );
        assert_eq!(clap_names, ours);
        // and each name makes the variant clap would
        for (name, make) in VERBS {
            let by_clap: Cmd =
                mpt_cli::args::parse_subcommand("mproute", &words(&format!("{name} x")))
                    .expect(name);
            let by_table = make(RouteArgs {
                args: vec!["x".into()],
            });
            assert_eq!(format!("{by_clap:?}"), format!("{by_table:?}"), "{name}");
        }
    }

    #[test]
    fn ips_abbreviations_in_batch_lines() {
        for (line, want) in [
            ("sh", Command::Show(ShowSpec::default())),
            ("r s", Command::Show(ShowSpec::default())),
            ("ro sh", Command::Show(ShowSpec::default())),
            ("route l", Command::Show(ShowSpec::default())),
            ("ls", Command::Show(ShowSpec::default())),
            ("flu", Command::Flush(ShowSpec::default())),
            ("dp sh", Command::Dataplane(DpSpec::Show)),
            ("da ls", Command::Dataplane(DpSpec::Show)),
            ("sy", Command::Sync { reset: false }),
        ] {
            assert_eq!(parse_line(words(line)).expect(line), want, "{line}");
        }
        let c = parse_line(words("a 10.0.0.0/8 via 192.0.2.1")).expect("a");
        assert!(matches!(&c, Command::Write(s) if s.verb == Verb::Add));
        let c = parse_line(words("r c 10.0.0.0/8 via 192.0.2.1")).expect("r c");
        assert!(matches!(&c, Command::Write(s) if s.verb == Verb::Change));
        let c = parse_line(words("rep 10.0.0.0/8 via 192.0.2.1")).expect("rep");
        assert!(matches!(&c, Command::Write(s) if s.verb == Verb::Replace));
        let c = parse_line(words("ap 10.0.0.0/8 via 192.0.2.1")).expect("ap");
        assert!(matches!(&c, Command::Write(s) if s.verb == Verb::Append));
        assert!(matches!(
            parse_line(words("d 10.0.0.0/8")).expect("d"),
            Command::Del(_)
        ));
        assert!(matches!(
            parse_line(words("g 10.0.0.1")).expect("g"),
            Command::Get(_)
        ));
        // ip's verbs mproute lacks resolve to them, and are refused by name
        let f = parse_line(words("p 10.0.0.0/8 via 192.0.2.1")).expect_err("prepend");
        assert_eq!(f.message, "unknown command \"prepend\"");
        // `r` alone is ip's object word, not replace
        assert_eq!(
            parse_line(words("r")).expect("r"),
            Command::Show(ShowSpec::default())
        );
    }

    #[test]
    fn help_is_not_a_batch_command() {
        for line in ["help", "route help"] {
            let f = parse_line(words(line)).expect_err(line);
            assert_eq!(f.message, "unknown command \"help\"", "{line}");
        }
    }

    #[test]
    fn bad_lines_are_one_line_usage_errors() {
        let f = parse_line(words("frobnicate 10.0.0.0/8")).expect_err("unknown");
        assert_eq!(f.code, mpt_cli::EXIT_USAGE);
        assert!(f.message.contains("frobnicate"), "{f:?}");
        assert!(!f.message.contains('\n'));
        let f = parse_line(words("add 10.0.0.0/8 algo fastest via 1.1.1.1")).expect_err("algo");
        assert!(f.message.starts_with("add: "), "{f:?}");
        let f = parse_line(words("sync now")).expect_err("sync");
        assert!(f.message.contains("unexpected word"), "{f:?}");
    }
}

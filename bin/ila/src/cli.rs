//! The command line of ila, first stage (syntax only): clap parses the global options and the
//! object (`xlat`, `route`, `dataplane`), the grammar ([`crate::grammar`]) its verb and words,
//! into a typed [`Command`]. Batch lines are parsed the same way ([`parse_line`]).

use clap::{Parser, Subcommand, ValueEnum};
use mpt_cli::abbrev::{self, Level, Word};
use mpt_cli::args::{Entry, Words};
use mpt_cli::{Failure, GlobalOpts};

use crate::grammar::{self, DpCmd, RouteCmd, XlatCmd};

/// Examples and exit codes, in -h and --help.
macro_rules! short_help {
    () => {
        "\
Examples:
  ila xlat add loc_match 2001:0:119:0 loc 3333:0:0:1 csum-mode neutral-map-auto
  ila route add 3333:0:0:1:2000:0:1:87/128 loc 2001:0:87:0 csum-mode neutral-map via 2001:db8::1
  ila dataplane attach dev eth0
  ila -j -s xlat show

Exit status: 0 success (also when nothing had to change), 1 usage or syntax error (nothing was
changed), 2 the kernel or the system refused (the tables are as before the command)."
    };
}

const AFTER_HELP: &str = short_help!();

const AFTER_LONG_HELP: &str = concat!(
    "\
Identifier-Locator Addressing: an IPv6 address is a 64-bit locator and a 64-bit identifier.
Applications see SIR addresses (a SIR prefix and the identifier), the network carries ILA
addresses (a locator and the same identifier). The receive side translates ILA to SIR by a
table of mappings keyed by the destination's locator (ila xlat, as ip ila: the receiving
device's mapping first, then the one for any device); the send side translates SIR to ILA by
routes (ila route, as ip route ... encap ila).

BACKENDS
  kernel  The kernel's ILA module (CONFIG_IPV6_ILA): mappings over the generic netlink
          family \"ila\", routes as LWT encap ila (type 3) routes of protocol ila.
  bpf     ila's BPF translator, for kernels without it (the mappings and routes live in
          BPF maps of the namespace, found again by any invocation, under -n and
          ip netns exec alike, and freed with it). An ingress program (XDP, or tc on
          virtual devices as auto chooses) translates ILA to SIR before the stack sees
          the packet, so early demux still finds the socket bound to the SIR address,
          and applies hook-type input routes to what is forwarded; a tc egress program
          applies hook-type output routes. Attach both with \"ila dataplane attach dev
          DEV\". Each route is also a FIB route of protocol ila for its SIR prefix: via
          and dev as given, else where
          the kernel routes the route's ILA address (a /128 whose ILA address is on-link
          goes to it as the gateway; a shorter on-link prefix needs via). The translator's
          table is one per namespace: a SIR prefix is in one table only.
  auto    (default) kernel where the family exists, else bpf.

CHECKSUM MODES
  adj-transport     the TCP, UDP or ICMPv6 checksum takes the locator's difference (a UDP
                    checksum of 0 stays 0; a checksum left to offload, the pseudo-header
                    part only). Packets whose transport header does not follow the IPv6
                    header directly keep their checksum (counted no-transport-checksum).
  neutral-map       the C-bit marks the identifier and its last 16 bits take the difference,
                    so that the address sums the same (SIR to ILA sets it, ILA to SIR clears
                    it).
  neutral-map-auto  the identifier's last 16 bits take the difference, without the C-bit.
  no-action         (default) the locator alone changes: checksums are wrong on the wire
                    unless the addresses are checksum-neutral already.
With generic XDP the ingress program cannot see whether a checksum is left to offload: it
translates the address and leaves the checksum's difference to a tc program attached next
to it, in the packet's metadata.

OUTPUT
  -j prints iproute2's keys: mappings locator_match, locator, interface (* for any),
  csum_mode, ident_type; routes dst, gateway, dev, table, protocol and an encap object
  (encap_type, locator, csum_mode, ident_type, hook_type); each with backend, and with -s
  packets and bytes (bpf backend). Writes print nothing, or with -j a report with changed.

",
    short_help!()
);

/// Which implementation keeps the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum BackendChoice {
    /// The kernel's where it has the generic netlink family "ila", else bpf.
    #[default]
    Auto,
    /// The kernel's ILA module (generic netlink and LWT encap).
    Kernel,
    /// ila's BPF translator (XDP/tc programs and pinned maps).
    Bpf,
}

/// ila: Identifier-Locator Addressing translation tables (ip ila grammar).
#[derive(Debug, Parser)]
#[command(
    name = "ila",
    version,
    about = "Identifier-Locator Addressing translation tables (ip ila grammar), over the kernel's ILA module or a BPF translator",
    after_help = AFTER_HELP,
    after_long_help = AFTER_LONG_HELP,
    subcommand_required = false
)]
pub struct Cli {
    /// Options shared by mproute, ila and pfanout.
    #[command(flatten)]
    pub global: GlobalOpts,
    /// The implementation: kernel, bpf or auto.
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto, global = true)]
    pub backend: BackendChoice,
    /// The object.
    #[command(subcommand)]
    pub cmd: Option<Obj>,
}

/// Objects. `ila` alone is `ila xlat show`.
#[derive(Debug, Subcommand)]
pub enum Obj {
    /// The receive side: mappings from a locator to another (ILA to SIR), as ip ila.
    #[command(
        override_usage = "ila xlat add|replace loc_match LOCATOR loc LOCATOR [dev DEV] [csum-mode MODE] [ident-type TYPE]\n       ila xlat del loc_match LOCATOR [loc LOCATOR] [dev DEV]\n       ila xlat get loc_match LOCATOR [dev DEV]\n       ila xlat show\n       ila xlat flush",
        after_help = "LOCATOR := four hex groups (2001:0:119:0); :: forms are accepted\nMODE     := adj-transport | neutral-map | neutral-map-auto | no-action (default)\nTYPE     := luid | use-format (default)"
    )]
    Xlat(Words),
    /// The send side: routes that give SIR destinations their locator (SIR to ILA).
    #[command(
        override_usage = "ila route add|replace SIR-PREFIX loc LOCATOR [csum-mode MODE] [ident-type TYPE] [hook-type output|input] [via ADDR] [dev DEV] [table T]\n       ila route del SIR-PREFIX [table T]\n       ila route show [SIR-PREFIX] [table T]\n       ila route flush [table T]",
        after_help = "SIR-PREFIX := IPv6 prefix (an address alone is a /128)\nhook-type output (default) translates what the route sends; input, what is forwarded to it"
    )]
    Route(Words),
    /// The BPF translator on devices (bpf backend).
    #[command(
        alias = "dp",
        override_usage = "ila dataplane attach dev DEV [dev DEV ...] [auto|xdp|xdp-generic|tc] [ingress|egress]\n       ila dataplane detach dev DEV [dev DEV ...] [ingress|egress]\n       ila dataplane show",
        after_help = "ingress: the program that applies mappings and input routes (where ILA packets arrive); egress: the one that applies output routes (where SIR destinations leave). Neither word: both."
    )]
    Dataplane(Words),
    /// Print the mappings and routes, their counters and the translator's in the Prometheus
    /// text format, for node_exporter's textfile collector.
    #[command(override_usage = "ila metrics")]
    Metrics(Words),
    /// Print the attachments, mappings and routes as batch lines that `ila -b FILE` restores
    /// (what mproute-restore.service reads at boot).
    #[command(override_usage = "ila save")]
    Save(Words),
}

/// A command, typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `ila xlat ...`.
    Xlat(XlatCmd),
    /// `ila route ...`.
    Route(RouteCmd),
    /// `ila dataplane ...`.
    Dataplane(DpCmd),
    /// `ila metrics`.
    Metrics,
    /// `ila save`.
    Save,
}

impl Command {
    /// `ila` alone.
    pub fn default_show() -> Command {
        Command::Xlat(XlatCmd::Show)
    }
}

impl Obj {
    /// The typed command.
    pub fn command(&self) -> Result<Command, Failure> {
        fn usage(what: &'static str) -> impl Fn(grammar::SyntaxError) -> Failure {
            move |e| Failure::usage(format!("{what}: {e}"))
        }
        Ok(match self {
            Obj::Xlat(w) => Command::Xlat(grammar::parse_xlat(&w.args).map_err(usage("xlat"))?),
            Obj::Route(w) => Command::Route(grammar::parse_route(&w.args).map_err(usage("route"))?),
            Obj::Dataplane(w) => {
                Command::Dataplane(grammar::parse_dataplane(&w.args).map_err(usage("dataplane"))?)
            }
            Obj::Metrics(w) => match w.args.first() {
                None => Command::Metrics,
                Some(x) => return Err(Failure::usage(format!("metrics: unexpected word \"{x}\""))),
            },
            Obj::Save(w) => match w.args.first() {
                None => Command::Save,
                Some(x) => return Err(Failure::usage(format!("save: unexpected word \"{x}\""))),
            },
        })
    }
}

/// Every object of [`Obj`] and its aliases (a test holds it to the clap definition).
const OBJECTS: &[Entry<Words, Obj>] = &[
    ("xlat", Obj::Xlat),
    ("route", Obj::Route),
    ("dataplane", Obj::Dataplane),
    ("dp", Obj::Dataplane),
    ("metrics", Obj::Metrics),
    ("save", Obj::Save),
];

/// `ila dataplane`'s verbs (no `ip` object has them: the same style, in this order).
static DP_WORDS: Level = Level::Words(&[&[
    Word::prefix("attach"),
    Word::prefix("detach"),
    Word::prefix("show"),
    Word::prefix("list"),
    Word::prefix("lst"),
]]);

/// `ila xlat`'s verbs: `ip ila`'s in iproute2's order, then ila's own.
static XLAT_WORDS: Level = Level::Words(&[
    abbrev::IP_ILA_VERBS,
    &[
        Word::prefix("replace"),
        Word::prefix("get"),
        Word::prefix("show"),
        Word::prefix("lst"),
        Word::prefix("flush"),
    ],
]);

/// `ila route`'s verbs: `ip route`'s, in iproute2's order.
static ROUTE_WORDS: Level = Level::Words(&[abbrev::IP_ROUTE_VERBS]);

/// ila's objects, in this order (`route` as `ip` abbreviates it), each followed by its verbs.
pub static WORDS: Level = Level::Words(&[&[
    Word::then("xlat", &XLAT_WORDS),
    Word::then("route", &ROUTE_WORDS),
    Word::then("dataplane", &DP_WORDS),
    Word {
        word: "dp",
        how: abbrev::Match::Exact,
        then: Some(&DP_WORDS),
    },
]]);

impl abbrev::Abbrev for Cli {
    const WORDS: &'static Level = &WORDS;
}

/// Parse the words of one batch line (`xlat add ...`, `x a ...`).
pub fn parse_line(mut words: Vec<String>) -> Result<Command, Failure> {
    abbrev::expand(&mut words, &WORDS);
    mpt_cli::args::parse_line::<Cli, _, _, _>("ila", words, OBJECTS, Obj::command)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::words;

    #[test]
    fn the_object_table_is_the_clap_definition() {
        let (ours, clap_names) = mpt_cli::args::table_and_clap_names(
            OBJECTS,
            &mpt_cli::args::line_command::<Obj>("ila"),
        );
        assert_eq!(clap_names, ours);
    }

    #[test]
    fn batch_lines() {
        assert!(matches!(
            parse_line(words("xlat add loc_match 1:2:3:4 loc 5:6:7:8")),
            Ok(Command::Xlat(_))
        ));
        assert!(matches!(
            parse_line(words("dp show")),
            Ok(Command::Dataplane(DpCmd::Show))
        ));
        // the objects in their order, ip ila's verbs (xlat), ip route's (route)
        assert!(matches!(
            parse_line(words("x a loc_match 1:2:3:4 loc 5:6:7:8")),
            Ok(Command::Xlat(_))
        ));
        assert_eq!(
            parse_line(words("x l")).expect("x l"),
            parse_line(words("xlat show")).expect("xlat show")
        );
        assert_eq!(
            parse_line(words("x d loc_match 1:2:3:4")).expect("x d"),
            parse_line(words("xlat del loc_match 1:2:3:4")).expect("xlat del")
        );
        assert_eq!(
            parse_line(words("r s")).expect("r s"),
            parse_line(words("route show")).expect("route show")
        );
        assert_eq!(
            parse_line(words("ro flu")).expect("ro flu"),
            parse_line(words("route flush")).expect("route flush")
        );
        assert_eq!(
            parse_line(words("d sh")).expect("d sh"),
            Command::Dataplane(DpCmd::Show)
        );
        let f = parse_line(words("help")).expect_err("help");
        assert_eq!(f.message, "unknown command \"help\"");
        let f = parse_line(words("xlat add loc 1:2:3:4")).expect_err("missing");
        assert_eq!(f.code, mpt_cli::EXIT_USAGE);
        assert!(f.message.starts_with("xlat: "), "{f:?}");
    }
}

//! Command-line definition of mproute. clap handles the global options and the verb; the route
//! grammar after the verb is parsed by `parse` (iproute2-style keyword lists).

use clap::{Parser, Subcommand};
use mpt_cli::GlobalOpts;

const ROUTE_GRAMMAR: &str = "\
PREFIX [table T] [metric M] [proto P] [algo ALGO] NEXTHOPS
  NEXTHOPS := via ADDR [dev DEV] [onlink]
            | nexthop NH [nexthop NH ...]
  NH       := [via ADDR] [dev DEV] [weight W] [onlink]
  ALGO     := l3-hash (default) | l4-hash | per-packet | drr | random | wrandom
  W        := 1..256";

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
    /// Install routes as references to kernel nexthop objects (Linux 5.3+): much faster in bulk,
    /// but the kernel deletes a nexthop object when its device goes administratively down and
    /// does not bring it back, so a route loses that path for good after a link flap.
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
    #[command(override_usage = "mproute change PREFIX [table T] [metric M] [proto P] [algo ALGO] NEXTHOPS", after_help = ROUTE_GRAMMAR)]
    Change(RouteArgs),
    /// Delete a route mproute owns.
    #[command(
        visible_alias = "delete",
        override_usage = "mproute del PREFIX [table T] [metric M]"
    )]
    Del(RouteArgs),
    /// List routes with their algorithm and who enforces it.
    #[command(visible_aliases = ["list", "ls"], override_usage = "mproute show [PREFIX] [table T|all] [algo ALGO]")]
    Show(RouteArgs),
    /// Remove every route mproute owns (in one table).
    #[command(override_usage = "mproute flush [table T]")]
    Flush(RouteArgs),
    /// Report and repair drift between the FIB and mproute's state.
    #[command(override_usage = "mproute sync [--reset]")]
    Sync(RouteArgs),
    /// Show the nexthop the dataplane picks for a packet, and the hash.
    #[command(
        override_usage = "mproute get ADDR [from SRC] [ipproto tcp|udp|sctp|icmp|N] [sport S] [dport D] [iif DEV] [table T]"
    )]
    Get(RouteArgs),
    /// `mproute route VERB ARGS`: the object word of iproute2, accepted and ignored.
    #[command(hide = true)]
    Route(RouteArgs),
    /// Attach, detach and show the tc/XDP dataplane that carries out the algorithms; watch keeps its FIB check verified.
    #[command(
        override_usage = "mproute dataplane attach dev DEV [dev DEV ...] [auto|xdp|xdp-generic|tc] [fastpath on|off] [prepare-peers]\n       mproute dataplane detach dev DEV\n       mproute dataplane show\n       mproute dataplane watch"
    )]
    Dataplane(RouteArgs),
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

impl Cmd {
    /// The verb word and its arguments.
    pub fn parts(&self) -> (&'static str, &[String]) {
        match self {
            Cmd::Add(a) => ("add", &a.args),
            Cmd::Replace(a) => ("replace", &a.args),
            Cmd::Append(a) => ("append", &a.args),
            Cmd::Change(a) => ("change", &a.args),
            Cmd::Del(a) => ("del", &a.args),
            Cmd::Show(a) => ("show", &a.args),
            Cmd::Flush(a) => ("flush", &a.args),
            Cmd::Sync(a) => ("sync", &a.args),
            Cmd::Get(a) => ("get", &a.args),
            Cmd::Route(a) => match a.args.split_first() {
                Some((verb, rest)) => (verb_word(verb), rest),
                None => ("show", &[][..]),
            },
            Cmd::Dataplane(a) => ("dataplane", &a.args),
        }
    }
}

/// The static spelling of a verb typed after `route` (unknown words pass through as "?").
fn verb_word(w: &str) -> &'static str {
    match w {
        "add" => "add",
        "replace" => "replace",
        "append" => "append",
        "change" | "chg" => "change",
        "del" | "delete" => "del",
        "show" | "list" | "ls" | "lst" => "show",
        "flush" => "flush",
        "get" => "get",
        _ => "?",
    }
}

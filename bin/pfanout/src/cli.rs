//! The command line of pfanout, first stage (syntax only): clap parses the global options and
//! the command (`show`, `run`, `bench`), the grammar ([`crate::grammar`]) its words, into a typed
//! [`Command`]. Batch lines are parsed the same way ([`parse_line`]).

use clap::{Parser, Subcommand};
use mpt_cli::abbrev::{self, Level, Word};
use mpt_cli::args::{Entry, Words};
use mpt_cli::{Failure, GlobalOpts};

use crate::grammar::{self, BenchCmd, RunCmd, ShowCmd};

/// Examples and exit codes, in -h and --help.
macro_rules! short_help {
    () => {
        "\
Examples:
  pfanout show
  pfanout -n capture -j show dev eth0
  pfanout run dev eth0 mode hash flags rollover workers 4 duration 10
  pfanout run dev eth0 group 7 mode ebpf workers 2 write /tmp/cap
  pfanout bench workers 4 per-worker 5000

Exit status: 0 success, 1 usage or syntax error (nothing was done), 2 the kernel or the
system refused (no socket of ours is left in a group)."
    };
}

const AFTER_HELP: &str = short_help!();

const AFTER_LONG_HELP: &str = concat!(
    "\
AF_PACKET fanout groups spread the packets a device sees over several packet sockets (members)
by a mode; capture and IDS daemons run them. A group is known by its id within a network
namespace; every member must join with the same mode, flags, device and protocol.

MODES
  hash      the symmetric flow hash (both directions of a flow reach one member)
  lb        round robin
  cpu       the CPU the packet arrived on
  rollover  the first member with room
  rnd       a random member
  qm        the packet's receive queue
  cbpf      pfanout's classic program: XOR of addresses and ports (symmetric)
  ebpf      pfanout's eBPF program: mproute's symmetric flow hash

FLAGS
  rollover         a member without room passes the packet on to one with room
  defrag           IPv4 fragments are reassembled before the mode chooses
  uniqueid         the kernel chooses an unused group id (no group ID may be given)
  ignore-outgoing  the group sees no packets the host sends

SHOW
  Every AF_PACKET socket of the namespace comes from the kernel's sock_diag (packet_diag),
  which reports a socket's group id and mode but not its flags. pfanout reads the flags of
  sockets that a pfanout process holds from the socket itself (a duplicate of its descriptor,
  pidfd_getfd); other programs' flags are shown as unknown. The owning processes are found
  through /proc/PID/fd. FILL is the receive queue (rmem_alloc) against its limit (rcvbuf);
  DROPS is the socket's drop counter. -d also lists sockets in no group; -s prints bytes.

RUN
  Workers, one socket and thread each, join one group bound to DEV. Once a second a table
  (redrawn in place on a terminal, appended otherwise): packets/s and drops/s per worker, the
  packets the workers read, the kernel's drops (PACKET_STATISTICS) and rollovers
  (PACKET_ROLLOVER_STATS: all, huge, failed); with -j a JSON line each second stamped with
  the wall-clock time. Ctrl-C, SIGTERM, SIGHUP, duration or count end the run with a summary.
  exec CMD gives each worker's packets, as a pcap stream, to its own reader (tcpdump, zeek,
  tshark: libpcap cannot join a fanout group itself); a slow reader costs its worker dropped
  packets (counted), never the others; the streams are closed at the end and the readers'
  exit codes are in the summary.

",
    short_help!()
);

/// pfanout: AF_PACKET fanout groups: inspect, run and measure them.
#[derive(Debug, Parser)]
#[command(
    name = "pfanout",
    version,
    about = "AF_PACKET fanout groups: inspect, run and measure them",
    after_help = AFTER_HELP,
    after_long_help = AFTER_LONG_HELP,
    subcommand_required = false
)]
pub struct Cli {
    /// Options shared by mproute, ila and pfanout.
    #[command(flatten)]
    pub global: GlobalOpts,
    /// The command.
    #[command(subcommand)]
    pub cmd: Option<Obj>,
}

/// Commands. `pfanout` alone is `pfanout show`.
#[derive(Debug, Subcommand)]
pub enum Obj {
    /// The fanout groups of the namespace, their members and owners.
    #[command(alias = "list", override_usage = "pfanout show [dev DEV] [group ID]")]
    Show(Words),
    /// Run a fanout group of worker sockets and count what each receives.
    #[command(
        override_usage = "pfanout run dev DEV [group ID] mode MODE [flags FLAG[,FLAG...]] [workers N] [ring]\n                   [write DIR|- | exec CMD] [duration S] [count N] [per-worker PPS] [max-members N]\n                   [proto PROTO] [rcvbuf BYTES]",
        after_help = "MODE  := hash | lb | cpu | rollover | rnd | qm | cbpf | ebpf\nFLAG  := rollover | defrag | uniqueid | ignore-outgoing\nPROTO := all (default) | ip | ipv6 | arp | NUMBER\nworkers defaults to 2; per-worker limits each worker to PPS packets a second (a slow consumer);\nwrite DIR writes DIR/worker-N.pcap for each worker; write - the one worker's pcap stream to\nstandard output (pfanout's own output goes to standard error); exec CMD pipes each worker's\npcap stream into its own `sh -c CMD`, %i replaced by the worker's index, e.g.\nexec 'tcpdump -n -r - -w /data/w%i.pcap'."
    )]
    Run(Words),
    /// The rollover experiment between two throwaway namespaces.
    #[command(
        override_usage = "pfanout bench [workers N] [rate PPS] [per-worker PPS] [seconds S] [flows N]",
        after_help = "N workers (default 4) each process at most per-worker packets a second (default 5000, by a\ntoken bucket that sleeps); UDP (one flow, or flows N round robin) at rate PPS (default twice\nwhat the workers take together) comes from an AF_PACKET generator (sendmmsg, qdisc bypass)\nin the peer namespace. For hash, hash+rollover, rollover, cpu and cpu+rollover: packets\nreceived, processed, dropped and rolled over per second, flows split over workers and\npackets processed out of their flow's order; then the ratios with and without rollover, and\nthe generator's rate against the 2013 experiment's (9 x 32000/s, 500000/s offered)."
    )]
    Bench(Words),
    /// Print the fanout groups, their members and drops in the Prometheus text format, for
    /// node_exporter's textfile collector.
    #[command(override_usage = "pfanout metrics")]
    Metrics(Words),
}

/// A command, typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `pfanout show ...`.
    Show(ShowCmd),
    /// `pfanout run ...`.
    Run(RunCmd),
    /// `pfanout bench ...`.
    Bench(BenchCmd),
    /// `pfanout metrics`.
    Metrics,
}

impl Obj {
    /// The typed command.
    pub fn command(&self) -> Result<Command, Failure> {
        fn usage(what: &'static str) -> impl Fn(grammar::SyntaxError) -> Failure {
            move |e| Failure::usage(format!("{what}: {e}"))
        }
        Ok(match self {
            Obj::Show(w) => Command::Show(grammar::parse_show(&w.args).map_err(usage("show"))?),
            Obj::Run(w) => Command::Run(grammar::parse_run(&w.args).map_err(usage("run"))?),
            Obj::Bench(w) => Command::Bench(grammar::parse_bench(&w.args).map_err(usage("bench"))?),
            Obj::Metrics(w) => match w.args.first() {
                None => Command::Metrics,
                Some(x) => return Err(Failure::usage(format!("metrics: unexpected word \"{x}\""))),
            },
        })
    }
}

/// Every command of [`Obj`] and its aliases (a test holds it to the clap definition).
const OBJECTS: &[Entry<Words, Obj>] = &[
    ("show", Obj::Show),
    ("list", Obj::Show),
    ("run", Obj::Run),
    ("bench", Obj::Bench),
    ("metrics", Obj::Metrics),
];

/// pfanout's commands (no `ip` object has them: iproute2's style, in this order).
pub static WORDS: Level = Level::Words(&[&[
    Word::prefix("show"),
    Word::prefix("list"),
    Word::prefix("run"),
    Word::prefix("bench"),
]]);

impl abbrev::Abbrev for Cli {
    const WORDS: &'static Level = &WORDS;
}

/// Parse the words of one batch line (`show dev eth0`, `s dev eth0`).
pub fn parse_line(mut words: Vec<String>) -> Result<Command, Failure> {
    abbrev::expand(&mut words, &WORDS);
    mpt_cli::args::parse_line::<Cli, _, _, _>("pfanout", words, OBJECTS, Obj::command)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpt_cli::args::words;

    #[test]
    fn the_command_table_is_the_clap_definition() {
        let (ours, clap_names) = mpt_cli::args::table_and_clap_names(
            OBJECTS,
            &mpt_cli::args::line_command::<Obj>("pfanout"),
        );
        assert_eq!(clap_names, ours);
    }

    #[test]
    fn batch_lines() {
        assert!(matches!(
            parse_line(words("show dev x")),
            Ok(Command::Show(_))
        ));
        assert_eq!(
            parse_line(words("s dev x")).expect("s"),
            parse_line(words("show dev x")).expect("show")
        );
        assert_eq!(
            parse_line(words("l")).expect("l"),
            parse_line(words("show")).expect("show")
        );
        assert!(matches!(
            parse_line(words("b workers 2")),
            Ok(Command::Bench(_))
        ));
        let f = parse_line(words("frob")).expect_err("unknown");
        assert_eq!(f.message, "unknown command \"frob\"");
        let f = parse_line(words("run dev x")).expect_err("no mode");
        assert!(f.message.starts_with("run: "), "{f:?}");
        assert_eq!(f.code, mpt_cli::EXIT_USAGE);
    }
}

//! pfanout's own text in its man pages (`pfanout --generate man`, see `mpt_cli::docs`): what
//! clap cannot know. Each page's NAME, SYNOPSIS, OPTIONS and its help text (the modes, the
//! flags, what show and run print) come from the clap definition in [`crate::cli`]; SEE ALSO
//! lists every page of pfanout by itself.

use mpt_cli::docs::{Manual, Page};

const DESCRIPTION: &str = "\
pfanout shows, runs and measures AF_PACKET fanout groups (see packet(7), PACKET_FANOUT): the
groups capture and IDS daemons use to spread the packets a device sees over several packet
sockets. Three commands:

= show
Every group of the namespace with its members and the processes that hold them, from the
kernel's sock_diag (pfanout-show(8)).
= run
A group of worker sockets of its own, in any mode and with any flags, counting what each worker
receives, optionally writing a pcap file per worker or piping each worker's pcap stream into a
reader of its own, such as tcpdump(8) (pfanout-run(8)).
= bench
The rollover experiment: what rollover buys when workers are slow, between two throwaway
namespaces (pfanout-bench(8)).

`pfanout` alone is `pfanout show`. `-n NAME` runs in a named namespace, as in mproute(8).
pfanout keeps no state: it pins nothing and writes no lock.";

const FILES: &str = "\
= /proc/PID/fd/, /proc/PID/comm, /proc/PID/exe
Read by `show` to find the processes holding each packet socket and their names (and whether
one is a pfanout, whose sockets' flags it reads with pidfd_getfd(2)).
= DIR/worker-N.pcap
Written by `run ... write DIR`, one file per worker, mode 0600 (DIR is made, mode 0700, if
missing; one another user owns or can write is refused).
= sh -c CMD
Started by `run ... exec CMD`, one per worker (`%i` in CMD replaced by the worker's index),
each in a process group of its own, its standard input the worker's pcap stream.
= /run/netns/pfanout-bench-PID-gen, /run/netns/pfanout-bench-PID-cap
The two namespaces `bench` creates with ip-netns(8) and removes when it ends.
= /run/netns/NAME
The namespace `-n NAME` enters.";

const EXAMPLES: &str = "\
Every fanout group of the namespace, as JSON:

  pfanout -j show

Four workers in hash mode with rollover on eth0 for ten seconds:

  pfanout run dev eth0 mode hash flags rollover workers 4 duration 10

Two workers steered by mproute's flow hash, each writing its packets to a pcap file:

  pfanout run dev eth0 group 7 mode ebpf workers 2 write /var/tmp/cap

Four tcpdumps, each writing the packets of one worker of a hash group (libpcap cannot join
a fanout group itself):

  pfanout run dev eth0 mode hash workers 4 exec 'tcpdump -n -r - -w /data/w%i.pcap'

What rollover buys with four slow workers, and what it costs in flow affinity and order:

  pfanout bench workers 4 per-worker 5000 flows 64

The 2013 experiment at its own scale, where the machine allows:

  pfanout bench workers 9 per-worker 32000";

const EXIT_STATUS: &str = "\
= 0
Success.
= 1
Usage or syntax error: nothing was done.
= 2
The kernel or the system refused (a group joined with other settings, no such device, not
root): no socket of pfanout's is left in a group.";

const SHOW_DESCRIPTION: &str = "\
One block per group: `group ID mode MODE flags FLAGS members N dev DEV proto PROTO`, then one
row per member: INODE, PID and PROCESS (the holders), RING, FILL (receive queue against its
limit; bytes with `-s`) and DROPS. Flags are read from sockets a pfanout holds; other programs'
show as unknown. `-d` lists sockets in no group too. `-j`: a list of groups (id, mode,
mode_number, flags, members, dev, ifindex, protocol, protocol_number, sockets), each socket with
inode, dev, protocol, owners (pid, process), ring, rmem_alloc, rcvbuf, drops, flags. `-s`
adds each member's rollover counters (ROLLOVER ALL/HUGE/FAILED, PACKET_ROLLOVER_STATS; `-j`:
rollover {all, huge, failed}), read through a duplicate of its owner's descriptor
(pidfd_getfd(2): root, or the owner's user with ptrace rights), and for a member whose counters
cannot be read a line saying why (`-j`: rollover_unread): no process holding it is visible, not
permitted, a kernel before 5.6.";

const RUN_DESCRIPTION: &str = "\
Workers, one socket and thread each, join one group bound to DEV. On a terminal a table is
printed once a second (WORKER, PACKETS, BYTES, DROPS, ROLLOVER, HUGE, FAILED: what the workers
read, the kernel's drops and rollovers, and PKTS/S and DROPS/S over the last second), redrawn
in place, or appended when standard output is not a terminal; with `-j` one JSON line a second
(type interval, time: the wall-clock time, RFC 3339 UTC with milliseconds, per_worker with
packets_per_second, dropped_per_second, pipe_dropped_per_second). Ctrl-C, SIGTERM,
SIGHUP, `duration` or `count` end the run with a summary (`-j`: type, group, mode, flags,
dev, workers, ring, seconds, ended, per_worker, total).

`write DIR`, `write -` (one worker) and `exec CMD` give each worker's packets as pcap (link
type of the device, nanosecond time stamps) to a file, to standard output, or to the standard
input of its own `sh -c CMD`. A pipe is written without blocking: a reader that is slow fills
its pipe and then its worker drops whole records for it (pipe_dropped), a reader that exits
costs its worker only a count (reader_gone, and a line on standard error at once); neither
holds the other workers back. At the end each stream is closed (what is buffered is given 5 s
to be read) and each reader waited for (5 s, then SIGTERM); the summary lists each reader's
pid, command and exit (128 + the signal for one killed).";

const BENCH_DESCRIPTION: &str = "\
Needs root: creates two namespaces joined by a veth pair, sends UDP from one (one flow, or
`flows N` round robin, each payload carrying its flow and sequence number; an AF_PACKET socket
with sendmmsg(2) and PACKET_QDISC_BYPASS, pinned to CPU 0) and measures, in the other, per
second the packets the group received, processed, dropped and rolled over for hash,
hash+rollover, rollover, cpu and cpu+rollover; and what rollover costs: FLOWS SPLIT, the flows
whose packets reached more than one worker, and OUT OF ORDER, the packets processed after a
later packet of their flow. Then the ratios with and without rollover (the goal, 0.9 times the
workers, is one flow's), and the generator's rate and CPU share against the 2013 experiment's
absolute rates (9 workers of 32000 packets/s, 500000 offered, 270000 processed), naming what
held it back where it fell short.";

/// pfanout's manual.
pub const MANUAL: Manual = Manual {
    pages: &[
        Page {
            name: "",
            sections: &[
                ("DESCRIPTION", DESCRIPTION),
                ("FILES", FILES),
                ("EXAMPLES", EXAMPLES),
            ],
        },
        Page {
            name: "show",
            sections: &[("DESCRIPTION", SHOW_DESCRIPTION)],
        },
        Page {
            name: "run",
            sections: &[("DESCRIPTION", RUN_DESCRIPTION)],
        },
        Page {
            name: "bench",
            sections: &[("DESCRIPTION", BENCH_DESCRIPTION)],
        },
    ],
    exit_status: EXIT_STATUS,
    see_also: &[
        "packet(7)",
        "mproute(8)",
        "ila(8)",
        "ip-netns(8)",
        "tcpdump(8)",
    ],
    grammar: &crate::complete::GRAMMAR,
};

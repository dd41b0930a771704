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
receives, optionally writing a pcap file per worker (pfanout-run(8)).
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

What rollover buys with four slow workers:

  pfanout bench workers 4 per-worker 5000";

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
inode, dev, protocol, owners (pid, process), ring, rmem_alloc, rcvbuf, drops, flags.";

const RUN_DESCRIPTION: &str = "\
Workers, one socket and thread each, join one group bound to DEV. On a terminal a table is
printed once a second (WORKER, PACKETS, BYTES, DROPS, ROLLOVER, HUGE, FAILED: what the workers
read, the kernel's drops and rollovers); with `-j` one JSON line a second. Ctrl-C, SIGTERM,
SIGHUP, `duration` or `count` end the run with a summary (`-j`: type, group, mode, flags,
dev, workers, ring, seconds, ended, per_worker, total).";

const BENCH_DESCRIPTION: &str = "\
Needs root: creates two namespaces joined by a veth pair, sends one UDP flow from one and
measures, in the other, packets processed, dropped and rolled over per second for hash,
hash+rollover, rollover, cpu and cpu+rollover, then the ratios with and without rollover.";

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

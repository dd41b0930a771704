//! mproute's own text in its man pages (`mproute --generate man`, see `mpt_cli::docs`): what
//! clap cannot know. Each page's NAME, SYNOPSIS, OPTIONS and its help text come from the clap
//! definition in [`crate::cli`]; SEE ALSO lists every page of mproute by itself, so a verb
//! added there gets its page and its place without a word here.

use mpt_cli::docs::{Manual, Page};

const DESCRIPTION: &str = "\
mproute keeps multipath routes whose nexthop is chosen by an algorithm of the route's own:
`l3-hash`, `l4-hash`, `per-packet`, `drr`, `random` or `wrandom`. The route goes into the
kernel FIB over rtnetlink, as `ip route` would put it there; the algorithm, which current
kernels no longer accept per route (RTA_MP_ALGO is ignored), is kept in mproute's BPF state
for the network namespace and carried out by mproute's tc/XDP dataplane on the devices packets
arrive on (see mproute-dataplane(8)). Without an attached dataplane the kernel forwards the
route by its own hash, and `show` says so (ENFORCED `none`).

# Routes
Commands as `ip route`'s: `add`, `replace`, `append`, `change`, `del`, `show`, `flush`, `get`,
with `route` accepted before the verb as iproute2's object word. The verbs map to netlink flags
exactly as in iproute2 (add CREATE|EXCL, replace CREATE|REPLACE, append CREATE|APPEND, change
REPLACE).

# Ownership
Routes mproute writes carry protocol `mproute` (245) unless `proto P` is given; `del` and
`flush` touch only routes mproute owns, never one added with `ip route`. A route replaced with
`ip route` under another protocol becomes its new owner's. `sync` reports and repairs drift
between the FIB and mproute's record (see mproute-sync(8)).

# State
mproute's record of the routes, their algorithms, LPM tries and counters lives in BPF maps of
the namespace, held by a small program attached to the ingress of the namespace's `lo` (the
anchor), pinned nowhere. It needs no daemon and is freed with the namespace, with no command
after `ip netns del`; every invocation finds it again, with `-n NAME` and under `ip netns exec
NAME` alike. Its hash maps start small (4096 routes) and are replaced by copies of twice the
size as the table grows, up to 1048576 routes (65536 resilient ones, 1048576 distinct nexthop
sets); a write past a limit fails in one line naming it, exit 2. `dataplane show` prints each
map's id (for `bpftool map show id N`), the memory the kernel charges for the state and for the
dataplane programs' own maps (`-j`: `maps`, `memory_bytes`, `dataplane_memory_bytes`).

# Batches
`-b FILE` (`-b -` for standard input) reads commands as `ip -batch` does: one a line, quotes,
`#` comments, `\\` at the end of a line to continue it. The first failure stops the batch
with FILE:LINE, unless `--force`.

# Dry run
With `--check` every command (every line of a batch, each seeing what the lines before it would
have done) is resolved and compared with the kernel, and answers with what it would change;
nothing is written. Refusals the kernel decides from what is there are reported as the real
command would report them, exit 2. A change of a hashed route (l3-hash, l4-hash, resilient,
consistent) also says which share of the flow space would change nexthop (`moved`, 0.0 to
1.0; text: `moved: P %`), computed from the route's bounds, buckets or slots before and after,
not sampled; a change of algorithm, hash fields or seed rehashes every flow, and the share is
what stays on the same nexthop by chance.";

const OUTPUT: &str = "\
Commands print rows as a table (one column a field) or, with `-j`, as JSON: one document per
command, every field present, numbers as numbers; `-p` indents it. Changes print nothing, or
with `-j` an object with `changed` (false when nothing had to change) and what was done. Errors
are one line on standard error, `mproute: what was attempted: the kernel's words [ERRNO]`,
then a `hint:` line where one helps.

`show` prints one row per route: DST, TABLE, METRIC, PROTO, ALGO, ENFORCED (who carries the
algorithm out: `kernel`, `xdp`, `tc` or `none`; `-` for routes mproute does not manage) and
NEXTHOPS (`via ADDR dev DEV weight W` and flags, one a line). See mproute-show(8) for the JSON
keys.";

const FILES: &str = "\
= /sys/fs/bpf/mproute/ID/
The links drops-IFINDEX-err and drops-IFINDEX-xmit of the XDP dataplane's drop counters (mode
0700; ID is the namespace's cookie, or ino-N on kernels before 5.14), which hold mpt_reasons
only; removed by `dataplane detach`, and by `sync` once their namespace is gone. The state's
maps (mpt_meta, mpt_routes, mpt_lpm4, mpt_lpm6, mpt_groups, mpt_res, mpt_stats,
mpt_slot_stats, mpt_pcpu, mpt_reasons) are not pinned: older versions pinned them here, and
the first invocation that sees such pins removes them.
= /run/mproute/ID.lock
The lock (flock) that serializes invocations for one namespace; `--wait` says how long to wait
for it. /proc/locks is read to name the holder while waiting. Removed by its holder when it is
done; one left by an invocation killed mid-write names it until the next repairs.
= /etc/iproute2/rt_protos.d/mproute.conf
Written at the first change if missing (`245 mproute`), so that `ip route` prints the protocol's
name.
= /etc/iproute2/rt_tables, /etc/iproute2/rt_protos
Table and protocol names, with their .d/*.conf drop-ins, and the same under /usr/share/iproute2
and /usr/lib/iproute2: read for `table T`, `proto P` and in output.
= /run/netns/NAME
The namespace `-n NAME` enters (network namespace only, as `ip -n`).
= /proc/sys/net/ipv4/conf/all/ignore_routes_with_linkdown
Set to 1, with its /proc/sys/net/ipv6 twin, by `dataplane attach` (see mproute-dataplane(8)).
= /var/lib/mproute/NETNS.mproute.batch, /var/lib/mproute/NETNS.ila.batch
What `/usr/lib/mproute/mproute-restore save [NETNS]` writes (`mproute save`, `ila save`; NETNS
`-` for the host's) and mproute-restore.service reads back with `-b` at boot.
= /var/lib/prometheus/node-exporter/{mproute,ila,pfanout}.prom
What mproute-metrics.service (run by mproute-metrics.timer) writes from `TOOL metrics` for
node_exporter's textfile collector, each through a temporary file renamed over the old one.
= /lib/systemd/system/mproute-watch@.service, mproute-restore.service, mproute-metrics.{service,timer}
The package's units: `dataplane watch` per namespace (instance `-`: the host's), the restore at
boot, the metrics every 15 s. None is enabled by the package.";

const EXAMPLES: &str = "\
A route of two paths, spread by flow (addresses and ports), twice as many flows to the first:

  mproute add 198.18.0.0/15 algo l4-hash nexthop via 192.0.2.1 dev eth0 weight 2 nexthop via 192.0.2.9 dev eth1

Carry the algorithms out on the devices packets arrive on, and keep the FIB check verified:

  mproute dataplane attach dev eth2 dev eth3
  mproute dataplane watch

Every route of every table with its algorithm, as JSON:

  mproute -j -p show table all

Which path a flow takes:

  mproute get 198.18.4.5 from 203.0.113.7 ipproto tcp sport 40000 dport 443

What a batch would change, then the batch itself, in namespace blue:

  mproute -n blue --check -b routes.batch
  mproute -n blue -b routes.batch

Repair drift after routes were changed with ip route:

  mproute sync";

const EXIT_STATUS: &str = "\
= 0
Success, also when nothing had to change (a `replace` of an identical route).
= 1
Usage or syntax error (bad prefix, unknown algorithm, weight 0 or over 256, mixed families,
missing nexthops): nothing was attempted.
= 2
The kernel or the system refused (unknown device, gateway not connected, route exists, not
root, state of another ABI version): the FIB and mproute's state are as before the command.

With `-b` the status is the worst of the lines'.";

const WRITE_DESCRIPTION: &str = "\
Writes the route into the FIB and the algorithm into mproute's state, in one transaction: when
the kernel refuses, what was written is undone. `replace` and `change` install the route as
given, as `ip route` does: without `algo` it is `l3-hash`; `append` keeps the route's
algorithm. A route written again with other nexthops counts from zero.

= algo ALGO
`l3-hash` (default) and `l4-hash` hash the flow's addresses (and ports) in canonical order,
so both directions of a flow hash alike, and choose by hash-threshold (RFC 2992, the kernel's
bounds); ICMP errors follow the flow they are about, fragments and protocols without ports use
l3. `per-packet` is weighted round robin, `drr` deficit round robin by bytes (quantum 1514
bytes times the weight), `random` uniform (weights ignored), `wrandom` weighted random.
= resilient [buckets N] [idle-timer S]
For l3-hash and l4-hash: a table of N buckets (default 128, at most 4096) between the hash and
the nexthops, as the kernel's resilient nexthop groups keep it. Removing a nexthop moves only
its buckets; a nexthop added takes only buckets idle for S seconds (default 120; 0: at once).
The table depends on the route's history: two routers given the same route may differ.
= consistent [table-size M]
For l3-hash and l4-hash: a Maglev table of M slots (a prime, default and most 4093) computed
from the route alone: its nexthops (named by gateway, else device name), weights and seed,
not the order they were written in nor their history, so that routers given the same route
send every flow alike. Removing a nexthop moves its flows and about 1 % of the others'
(bench disrupt: 1 of 16 moves 7.6 % of the flows). The seed is 0 unless `seed` is given.
= hash-fields F[,F...]
For l3-hash and l4-hash (resilient and consistent too): what the hash reads, with the names
of the kernel's fib_multipath_hash_fields: src-ip,dst-ip (together), ip-proto and
src-port,dst-port (together; l4-hash only, for TCP, UDP and SCTP). Pairs, so that both
directions of a flow hash alike; flowlabel (one label per direction) and the inner fields
(not parsed) are refused. Without it, l3-hash reads the addresses and l4-hash all five.
= seed N
The route's hash seed (0 to 4294967295) instead of the namespace's (random at its creation).
= weight W
1 to 256, as ip route's.

Without an attached dataplane the algorithm is recorded but not carried out: the kernel
forwards the route by its own hash (`show`: ENFORCED none).";

const WRITE_EXAMPLES: &str = "
  mproute add 198.18.0.0/15 algo l4-hash nexthop via 192.0.2.1 dev eth0 nexthop via 192.0.2.9 dev eth1
  mproute replace 2001:db8:1::/48 algo l3-hash resilient buckets 256 nexthop via 2001:db8::1 dev eth0 nexthop via 2001:db8::2 dev eth1
  mproute replace 203.0.113.0/24 algo l4-hash consistent seed 7 nexthop via 192.0.2.1 dev eth0 nexthop via 192.0.2.9 dev eth1
  mproute add 198.18.0.0/15 algo l4-hash hash-fields ip-proto,src-port,dst-port nexthop via 192.0.2.1 dev eth0 nexthop via 192.0.2.9 dev eth1
  mproute -j replace 198.18.0.0/15 table 100 metric 10 via 192.0.2.1 dev eth0";

const SHOW_DESCRIPTION: &str = "\
Lists the FIB (table main unless `table T` or `table all`) joined with mproute's state: every
route, those mproute does not manage too.

= ENFORCED, enforced_by
`tc` or `xdp`: the dataplane carries the algorithm out; `kernel`: the kernel does (none does
today); `none`: nobody does: no dataplane is attached, or the route is one the dataplane does
not carry out (a table other than main, shadowed by a lower metric, changed behind mproute's
back); `-` (null): not a route mproute manages.";

const SHOW_OUTPUT: &str = "\
With `-j`, a list of routes with the keys `ip -j route show` prints for the same route (dst,
gateway and dev, type, protocol, scope, metric, table, nexthops with gateway, dev, weight and
flags) and mproute's own: family, managed, algo and enforced_by (null for routes it does not
manage), nhid (the kernel nexthop object, null without one), resilient (buckets and
idle_timer, only for resilient routes), consistent (table_size; with `-d` also table, each
slot's nexthop by gateway, to compare routers), hash_fields and seed (only where written).
`-s` adds each nexthop's packets and bytes as the dataplane counted them, `-d` a resilient or
consistent route's buckets per nexthop.";

const SHOW_EXAMPLES: &str = "
  mproute show
  mproute -s show 198.18.0.0/15
  mproute -j show table all algo drr";

const DEL_DESCRIPTION: &str = "\
Deletes a route mproute owns, from the FIB and from mproute's state. A route of another
protocol (added with `ip route`, or replaced with it since) is refused: delete it with
`ip route del`.";

const FLUSH_DESCRIPTION: &str = "\
Deletes every route mproute owns, in table T or in every table; routes of other protocols stay.
Prints what it deleted (ACTION, DST, TABLE, METRIC, REASON; `-j`: changed and actions).";

const SYNC_DESCRIPTION: &str = "\
Compares the FIB with mproute's state and repairs the state; prints one row per repair
(ACTION, DST, TABLE, METRIC, REASON; `-j`: changed and actions):

= forgotten
A managed route deleted with `ip route del`, or replaced with `ip route` under another
protocol: no longer mproute's.
= updated
A managed route replaced with `ip route` by other nexthops with protocol mproute: mproute
takes the FIB's nexthops and keeps its algorithm.
= adopted
A route of protocol mproute missing from the state (written by a batch that stopped, or by
`ip route ... proto mproute`): managed from now on, with l3-hash.
= restored
Kernel nexthop objects (`--nexthop-objects`) the kernel deleted with a link that is up again,
put back with their routes first.
= waiting
A route whose nexthop object the kernel deleted with its links, all still down: kept, put back
when a link is up.
= repaired-dataplane
A managed route whose dataplane entry was missing (an invocation stopped between two writes).
= reclaimed-counter-slots
Counter slots recorded as taken that no route holds.
= removed-stale-state
What a namespace that no longer exists left: a lock file, drop counter links, pins of an older
version.

# sync --reset
Drops mproute's state for the namespace instead: the anchor program on `lo` is detached and
its maps go, with every algorithm, resilient table and counter. The routes
stay in the FIB, as plain multipath routes the kernel forwards by its own hash; a later `sync`
adopts those of protocol mproute again, with l3-hash. Use it when the state was written by
another version of mproute (commands then refuse with exit 2 and say so) or is beyond repair.
It does not read the state, so it works on one this version cannot open.";

const SYNC_EXAMPLES: &str = "
  mproute sync
  mproute --check -j sync
  mproute -n blue sync --reset";

const GET_DESCRIPTION: &str = "\
Shows the nexthop the dataplane picks for a packet to ADDR: the managed route that covers it,
its algorithm, the flow hash (computed in user space by the same definition the dataplane uses,
with the namespace's seed) and the nexthop it selects; for per-packet algorithms, that the
choice is made per packet. The kernel's own answer (`ip route get`) may differ: it hashes
differently. Columns ADDR, ROUTE, ALGO, HASH (and a resilient route's bucket), NEXTHOP,
ENFORCED; `-j`: addr, dst, table, metric, algo, hash, index, bucket, nexthop, nexthops,
enforced_by.";

const DATAPLANE_DESCRIPTION: &str = "\
The tc/XDP programs that carry the algorithms out. Attach them to the devices packets arrive
on: for a packet to a managed prefix the program picks the nexthop with the route's algorithm,
resolves its MAC addresses with bpf_fib_lookup, decrements the TTL or hop limit and redirects.
Everything else goes to the stack untouched and is counted by reason (not-host, not IP,
malformed, no managed route, TTL, IPv4 options, IPv6 extension headers, local, what the
kernel's FIB would not forward, larger than the egress MTU, unresolved neighbour in XDP).

= attach dev DEV ... [MODE]
MODE `auto` (default) picks per device: tc on veth and other virtual devices, native XDP on
physical NICs (tc where the driver has none); `xdp` and `xdp-generic` come with the tc program
next to them for packets XDP cannot finish. Attaching again in another mode replaces the
earlier one. Sets net.ipv4.conf.all.ignore_routes_with_linkdown (and the IPv6 twin) in the
namespace, so that the kernel too stops using a nexthop whose link lost its carrier.
Attachments are legacy (non-link) ones: they outlive mproute and are found again by the next
invocation.
= detach dev DEV
Removes the programs from DEV.
= show
Each attachment (DEV, MODE, PROG ID, WHY this mode), the packets by verdict (`redirected`, one
counter per reason a packet went to the stack, and `dropped`: XDP-redirected frames the kernel
failed to deliver), the linkdown setting, the FIB check, and notes. `-j`: attachments (dev,
ifindex, mode, prog_id, why, peer_devs), counters, ignore_routes_with_linkdown, fib_check,
notes, tc_hook.
= watch
Runs until stopped: verifies the managed routes again after each change of routes, rules,
addresses or links the kernel announces (so the dataplane may skip its per-packet FIB check),
and puts back kernel nexthop objects a link flap deleted. One line per round (`-j`: one JSON
object per line). Run it under a service manager on a router whose FIB changes.

Debian 12's `bpftool net` and `tc filter show` do not list tcx attachments: `mproute dataplane
show` does, and `bpftool prog` lists the programs.";

const DATAPLANE_EXAMPLES: &str = "
  mproute dataplane attach dev eth0 dev eth1
  mproute dataplane attach dev veth0 tc fastpath off
  mproute -j dataplane show
  mproute dataplane detach dev eth1";

/// mproute's manual.
pub const MANUAL: Manual = Manual {
    pages: &[
        Page {
            name: "",
            sections: &[
                ("DESCRIPTION", DESCRIPTION),
                ("OUTPUT", OUTPUT),
                ("FILES", FILES),
                ("EXAMPLES", EXAMPLES),
            ],
        },
        Page {
            name: "add",
            sections: &[
                ("DESCRIPTION", WRITE_DESCRIPTION),
                ("EXAMPLES", WRITE_EXAMPLES),
            ],
        },
        Page {
            name: "replace",
            sections: &[
                ("DESCRIPTION", WRITE_DESCRIPTION),
                ("EXAMPLES", WRITE_EXAMPLES),
            ],
        },
        Page {
            name: "append",
            sections: &[("DESCRIPTION", WRITE_DESCRIPTION)],
        },
        Page {
            name: "change",
            sections: &[("DESCRIPTION", WRITE_DESCRIPTION)],
        },
        Page {
            name: "del",
            sections: &[("DESCRIPTION", DEL_DESCRIPTION)],
        },
        Page {
            name: "show",
            sections: &[
                ("DESCRIPTION", SHOW_DESCRIPTION),
                ("OUTPUT", SHOW_OUTPUT),
                ("EXAMPLES", SHOW_EXAMPLES),
            ],
        },
        Page {
            name: "flush",
            sections: &[("DESCRIPTION", FLUSH_DESCRIPTION)],
        },
        Page {
            name: "sync",
            sections: &[
                ("DESCRIPTION", SYNC_DESCRIPTION),
                ("EXAMPLES", SYNC_EXAMPLES),
            ],
        },
        Page {
            name: "get",
            sections: &[("DESCRIPTION", GET_DESCRIPTION)],
        },
        Page {
            name: "dataplane",
            sections: &[
                ("DESCRIPTION", DATAPLANE_DESCRIPTION),
                ("EXAMPLES", DATAPLANE_EXAMPLES),
                ("SEE ALSO", "bpftool(8), tc(8)"),
            ],
        },
    ],
    exit_status: EXIT_STATUS,
    see_also: &[
        "ila(8)",
        "pfanout(8)",
        "ip(8)",
        "ip-route(8)",
        "ip-nexthop(8)",
        "ip-netns(8)",
    ],
    grammar: &crate::complete::GRAMMAR,
};

//! ila's own text in its man pages (`ila --generate man`, see `mpt_cli::docs`): what clap
//! cannot know. Each page's NAME, SYNOPSIS, OPTIONS and its help text (the backends, the
//! checksum modes) come from the clap definition in [`crate::cli`]; SEE ALSO lists every page
//! of ila by itself.

use mpt_cli::docs::{Manual, Page};

const DESCRIPTION: &str = "\
ila keeps Identifier-Locator Addressing (RFC 8929's ILA) translation tables in the grammar of
`ip ila` and `ip route ... encap ila`, over the kernel's ILA module where it exists and over
ila's own BPF translator where it does not (`--backend`, see NOTES). Three objects:

= xlat
The receive side (ila-xlat(8)): mappings from the locator a packet arrives with to the one the
host's applications see (ILA to SIR), by destination locator and receiving device.
= route
The send side (ila-route(8)): routes that give SIR destinations their locator (SIR to ILA),
with their checksum mode and hook type.
= dataplane
The BPF translator's programs on devices (ila-dataplane(8)); the bpf backend translates only
where they are attached.

`ila` alone is `ila xlat show`. Batches (`-b FILE`), `--check` (a dry run that reports what
would change) and `-n NAME` work as in mproute(8).";

const FILES: &str = "\
= /run/ila/ID.lock
The lock (flock) that serializes invocations for one namespace (`--wait`; ID is the namespace's
cookie, or ino-N before Linux 5.14); /proc/locks is read to name the holder while waiting.
Removed by its holder when it is done. The bpf backend's tables (ila_meta, ila_xlat,
ila_routes, ila_xlat_stats, ila_route_stats, ila_slot_stats, ila_reasons) are held by an anchor
program on the namespace's `lo`, pinned nowhere: found again under `-n` and `ip netns exec`
alike, freed with the namespace.
= /etc/iproute2/rt_protos.d/ila.conf
Written at the first route if missing (`246 ila`), so that `ip route` prints the protocol of
ila's FIB routes by name.
= /etc/iproute2/rt_tables
Table names, with rt_tables.d/*.conf and the same under /usr/share/iproute2 and
/usr/lib/iproute2.
= /proc/modules
Read to see whether the kernel's ILA module is loaded; `--backend kernel` loads it with
modprobe(8) when not.
= /run/netns/NAME
The namespace `-n NAME` enters.";

const EXAMPLES: &str = "\
Receive side: packets to locator 2001:0:119:0 reach the applications as 3333:0:0:1:

  ila xlat add loc_match 2001:0:119:0 loc 3333:0:0:1 csum-mode neutral-map-auto

Send side: a SIR destination gets its locator:

  ila route add 3333:0:0:1:2000:0:1:87/128 loc 2001:0:87:0 csum-mode neutral-map via 2001:db8::1

The BPF translator where the kernel has no ILA module, and its counters:

  ila --backend bpf dataplane attach dev eth0
  ila -j -s xlat show";

const EXIT_STATUS: &str = "\
= 0
Success, also when nothing had to change.
= 1
Usage or syntax error: nothing was changed.
= 2
The kernel or the system refused: the tables are as before the command.

With `-b` the status is the worst of the lines'.";

const XLAT_DESCRIPTION: &str = "\
Mappings of the receive side, as `ip ila`: a packet whose destination's locator is LOCATOR
(loc_match) arriving on DEV (or any device) leaves with locator `loc`, its checksum adjusted
by the mapping's csum-mode. The receiving device's mapping is tried first, then the one for
any device. `add` refuses an existing mapping, `replace` overwrites it; `del` removes one,
`get` shows one, `flush` removes all.

`show` prints LOCATOR_MATCH, LOCATOR, INTERFACE (`*` for any), CSUM_MODE, IDENT_TYPE and with
`-s` the packets and bytes translated (bpf backend). `-j` prints ip's keys: locator_match, locator,
interface, csum_mode, ident_type, and backend, with `-s` packets and bytes.";

const XLAT_EXAMPLES: &str = "
  ila xlat add loc_match 2001:0:119:0 loc 3333:0:0:1 dev eth0 csum-mode adj-transport
  ila xlat get loc_match 2001:0:119:0 dev eth0
  ila -j xlat show";

const ROUTE_DESCRIPTION: &str = "\
Routes of the send side: packets to SIR-PREFIX leave with locator `loc`. With the kernel
backend they are LWT `encap ila` routes of protocol ila; with the bpf backend an entry of the
translator's table and a FIB route of protocol ila for the SIR prefix (via and dev as given,
else where the kernel routes the ILA address). `hook-type output` (default) translates what
the host sends, `input` what it forwards.

`show` prints each route's DST, LOCATOR, CSUM_MODE, IDENT_TYPE, HOOK, VIA, DEV and TABLE;
`-j` prints ip's keys: dst, gateway, dev, table, protocol and an encap object (encap_type,
locator, csum_mode, ident_type, hook_type), and backend, with `-s` packets and bytes.";

const ROUTE_EXAMPLES: &str = "
  ila route add 3333:0:0:1:2000:0:1:87/128 loc 2001:0:87:0 via 2001:db8::1
  ila route add 3333:0:0:1::/64 loc 2001:0:87:0 hook-type input dev eth1
  ila route del 3333:0:0:1:2000:0:1:87/128";

const DATAPLANE_DESCRIPTION: &str = "\
The BPF translator's programs (bpf backend): on ingress (XDP, or tc on virtual devices as
`auto` chooses) the mappings and input routes, before the stack sees the packet, so that early
demux still finds the socket bound to the SIR address; on egress (tc) the output routes.
`ingress` or `egress` attaches or detaches one side only. Attachments outlive ila and are found
again by the next invocation.

`show` prints DEV, INGRESS (the mode), EGRESS and PROG_IDS, the packets by verdict, and what
the tables cost: each state map's id (for `bpftool map show id N`) and the memory the kernel
charges for the state and for the translator's own maps; `-j`: attachments (dev, ingress,
ingress_prog_id, egress, egress_prog_id), counters, maps, memory_bytes, dataplane_memory_bytes.
The tables' hash maps start at 4096 entries and are replaced by copies of twice the size as
they fill, up to 1048576 mappings (65536 routes); a write past that fails in one line
naming the limit, exit 2.

Debian 12's `bpftool net` and `tc filter show` do not list tcx attachments: `ila dataplane
show` does, and `bpftool prog` lists the programs.";

const DATAPLANE_EXAMPLES: &str = "
  ila dataplane attach dev eth0
  ila dataplane attach dev eth1 egress
  ila -j dataplane show";

/// ila's manual.
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
            name: "xlat",
            sections: &[
                ("DESCRIPTION", XLAT_DESCRIPTION),
                ("EXAMPLES", XLAT_EXAMPLES),
            ],
        },
        Page {
            name: "route",
            sections: &[
                ("DESCRIPTION", ROUTE_DESCRIPTION),
                ("EXAMPLES", ROUTE_EXAMPLES),
                ("SEE ALSO", "ip-route(8)"),
            ],
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
        "mproute(8)",
        "pfanout(8)",
        "ip(8)",
        "ip-route(8)",
        "ip-netns(8)",
    ],
    grammar: &crate::complete::GRAMMAR,
};

// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * ila_state.bpf.c - the ILA state maps of one namespace and their anchor,
 * ila_anchor: a no-op tcx program attached to the namespace's lo that keeps
 * every map alive (a loaded program holds the maps it references) and by which
 * user space finds them again (its map ids), as mproute's mpt_anchor does.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "maps.bpf.h"

/* skb->mark that makes the anchor touch the maps (ASCII "ila1"): practically never. */
#define ILA_ANCHOR_MARK 0x696c6131

/*
 * Returns TCX_NEXT. The lookups exist so that every map is referenced by the
 * program's instructions and so appears in its map ids. Do not remove them.
 */
SEC("tcx/ingress")
int ila_anchor(struct __sk_buff *skb)
{
	if (skb->mark == ILA_ANCHOR_MARK) {
		__u32 k = 0;
		struct ila_route_key rk = {};

		if (bpf_map_lookup_elem(&ila_meta, &k) && bpf_map_lookup_elem(&ila_xlat, &k) &&
		    bpf_map_lookup_elem(&ila_routes, &rk) &&
		    bpf_map_lookup_elem(&ila_xlat_stats, &k) &&
		    bpf_map_lookup_elem(&ila_route_stats, &k) &&
		    bpf_map_lookup_elem(&ila_slot_stats, &k) &&
		    bpf_map_lookup_elem(&ila_reasons, &k))
			return TCX_NEXT;
	}
	return TCX_NEXT;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";

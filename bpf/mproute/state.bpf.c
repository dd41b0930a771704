// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * state.bpf.c - mproute per-namespace state maps and their anchor program.
 *
 * The maps hold mproute's state for one network namespace. They are kept
 * alive by mpt_anchor, a no-op tcx program attached to the namespace's `lo`:
 * the kernel keeps every map a loaded program references (its map_ids) for as
 * long as the program lives, and user space finds the maps again through
 * the anchor's map ids. Struct layouts come from mpt/state_abi.h (an ABI).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>


/* skb->mark value that makes the anchor touch the maps (ASCII "mpt1"). */
#define MPT_ANCHOR_MARK 0x6d707431

#include "maps.bpf.h"

/*
 * Always returns TCX_NEXT. The lookups below exist so that both maps are
 * referenced by the program's instructions (every map of maps.bpf.h) (ld_imm64 map relocations) and
 * therefore appear in its map_ids; they only run for packets carrying
 * MPT_ANCHOR_MARK, i.e. practically never. Do not remove them.
 */
SEC("tcx/ingress")
int mpt_anchor(struct __sk_buff *skb)
{
	if (skb->mark == MPT_ANCHOR_MARK) {
		__u32 k = 0;
		struct mpt_meta *m = bpf_map_lookup_elem(&mpt_meta, &k);
		struct mpt_lpm4_key k4 = {};
		struct mpt_lpm6_key k6 = {};

		if (m && bpf_map_lookup_elem(&mpt_routes, &k) &&
		    bpf_map_lookup_elem(&mpt_lpm4, &k4) &&
		    bpf_map_lookup_elem(&mpt_lpm6, &k6) &&
		    bpf_map_lookup_elem(&mpt_groups, &k) &&
		    bpf_map_lookup_elem(&mpt_stats, &k) &&
		    bpf_map_lookup_elem(&mpt_res, &k) &&
		    bpf_map_lookup_elem(&mpt_slot_stats, &k) &&
		    bpf_map_lookup_elem(&mpt_pcpu, &k) &&
		    bpf_map_lookup_elem(&mpt_reasons, &k))
			return TCX_NEXT;
	}
	return TCX_NEXT;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";

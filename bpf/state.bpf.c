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

#include "mpt/state_abi.h"

/* skb->mark value that makes the anchor touch the maps (ASCII "mpt1"). */
#define MPT_ANCHOR_MARK 0x6d707431

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mpt_meta);
} mpt_meta SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MPT_MAX_ROUTES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct mpt_route_key);
	__type(value, struct mpt_route_val);
} mpt_routes SEC(".maps");

/*
 * Always returns TCX_NEXT. The lookups below exist so that both maps are
 * referenced by the program's instructions (ld_imm64 map relocations) and
 * therefore appear in its map_ids; they only run for packets carrying
 * MPT_ANCHOR_MARK, i.e. practically never. Do not remove them.
 */
SEC("tcx/ingress")
int mpt_anchor(struct __sk_buff *skb)
{
	if (skb->mark == MPT_ANCHOR_MARK) {
		__u32 k = 0;
		struct mpt_meta *m = bpf_map_lookup_elem(&mpt_meta, &k);
		struct mpt_route_key rk = {};

		if (m && bpf_map_lookup_elem(&mpt_routes, &rk))
			return TCX_NEXT;
	}
	return TCX_NEXT;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * mpt/ila_abi.h - the ILA translator: BPF <-> user space ABI.
 *
 * THIS FILE IS AN ABI. It is the one definition of every struct shared by the
 * ILA programs (bpf/ila/NAME.bpf.c) and user space (crates/bpf/src/ila/abi.rs
 * takes the structs from the skeleton, which libbpf-cargo generates from this
 * header's BTF; the constants are written there by hand). The maps outlive the
 * process that wrote them (held by the anchor ila_anchor on the namespace's lo),
 * so ANY layout or meaning change bumps ILA_ABI_VERSION, and abi.rs's constants
 * and methods change with it.
 * The static asserts here, the const asserts in abi.rs and the BTF test
 * (crates/bpf/tests/abi_btf.rs) catch a change made on one side only.
 *
 * Rules as in mpt/state_abi.h: fixed-width types, explicit padding, natural
 * alignment. Locators and addresses are byte arrays in network byte order;
 * every other field is host byte order.
 */
#ifndef MPT_ILA_ABI_H
#define MPT_ILA_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Bump on ANY layout or semantic change of the structs below. */
#define ILA_ABI_VERSION 4

/*
 * The most mappings and routes a namespace holds (ILA_MAX_ROUTES: max_entries of the
 * route trie, which before 6.4 the kernel charges by capacity; ila_xlat and the counter
 * hashes are growable maps, mpt/lib/grow.h, created with ILA_TABLE_START entries and grown
 * up to these).
 */
#define ILA_MAX_MAPPINGS (1 << 20)
#define ILA_MAX_ROUTES (1 << 16)
#define ILA_TABLE_START (1 << 12)
/*
 * Slots of ila_slot_stats, the per-CPU array the first mappings and routes count
 * in (slot 0 is none: such an entry counts in ila_xlat_stats or ila_route_stats, a
 * per-CPU hash, a lookup more per packet). Shared by mappings and routes.
 */
#define ILA_STATS_SLOTS 8192

/* ILA_CSUM_* (include/uapi/linux/ila.h) */
#define ILA_CSUM_ADJUST_TRANSPORT 0
#define ILA_CSUM_NEUTRAL_MAP 1
#define ILA_CSUM_NO_ACTION 2
#define ILA_CSUM_NEUTRAL_MAP_AUTO 3

/* ILA_HOOK_* */
#define ILA_HOOK_ROUTE_OUTPUT 0
#define ILA_HOOK_ROUTE_INPUT 1

/*
 * ila_meta.flags: which kinds of entries the tables may hold, so that the programs
 * skip the lookups that cannot match. User space sets a bit before it writes an
 * entry of its kind and clears it only when no such entry is left (a bit set with
 * no entry costs a lookup, a bit clear with an entry would lose it).
 */
#define ILA_META_F_DEV_MAPPINGS 1  /* mappings for one receiving device */
#define ILA_META_F_INPUT_ROUTES 2  /* routes of hook type input */
#define ILA_META_F_OUTPUT_ROUTES 4 /* routes of hook type output */

/* The single entry (key 0) of ila_meta. abi_version stays the first field forever. */
struct ila_meta {
	__u32 abi_version;
	__u32 flags;        /* ILA_META_F_* */
	__u64 netns_cookie; /* the owning namespace */
};

/*
 * Key of ila_xlat (the receive side, ila xlat): the locator a destination must
 * have, and the receiving device (0: any). The program looks up the receiving
 * device's entry first, then the one for any device.
 */
struct ila_xlat_key {
	__u8 locator_match[8];
	__u32 ifindex;
	__u32 pad; /* 0 */
};

/* Value of ila_xlat. */
struct ila_xlat_val {
	__u8 locator[8];  /* what the destination's upper 64 bits become */
	__u8 csum_mode;   /* ILA_CSUM_* */
	__u8 ident_type;  /* ILA_ATYPE_* (kept, not acted on: the kernel's table does not either) */
	__u8 pad[2];
	__u32 stats_slot; /* its counter in ila_slot_stats, 0: in ila_xlat_stats */
};

/*
 * Key of ila_routes (the send side, ila route): an LPM trie over SIR
 * prefixes. prefixlen is the prefix length (0..128).
 */
struct ila_route_key {
	__u32 prefixlen;
	__u8 addr[16];
};

/*
 * Value of ila_routes. The route's own key is repeated (prefix and length) so
 * that the program can count for it in ila_route_stats without masking the
 * destination.
 */
struct ila_route_val {
	__u8 locator[8];  /* what the destination's upper 64 bits become */
	__u8 csum_mode;   /* ILA_CSUM_* */
	__u8 ident_type;  /* ILA_ATYPE_* */
	__u8 hook_type;   /* ILA_HOOK_*: output translates on egress, input on ingress */
	__u8 pad;
	__u32 prefix_len; /* the route's key: its length, */
	__u8 prefix[16];  /* and its prefix (host bits zero) */
	__u32 stats_slot; /* its counter in ila_slot_stats, 0: in ila_route_stats */
};

/* Per-CPU counters of one mapping or route (ila_slot_stats, ila_xlat_stats, ila_route_stats). */
struct ila_counter {
	__u64 packets;
	__u64 bytes;
};

/* Index of ila_reasons: what the programs did with each IPv6 packet they saw. */
enum ila_reason {
	ILA_R_XLAT_IN = 0,     /* ILA -> SIR by a mapping */
	ILA_R_ROUTE_OUT = 1,   /* SIR -> ILA by an output route */
	ILA_R_ROUTE_IN = 2,    /* SIR -> ILA by an input route */
	ILA_R_NO_MATCH = 3,    /* IPv6, nothing to translate */
	ILA_R_NOT_IPV6 = 4,    /* passed untouched */
	ILA_R_MALFORMED = 5,   /* too short for its headers: passed untouched */
	ILA_R_NO_L4_CSUM = 6,  /* adj-transport and the transport header is not there (a
				* fragment, an extension header): translated, checksum as it was */
	ILA_R_MAX = 7,
};

#define ILA__ABI_ASSERT(cond, msg) _Static_assert(cond, "ila ABI: " msg)
#define ILA__OFF(type, field) __builtin_offsetof(struct type, field)

ILA__ABI_ASSERT(sizeof(struct ila_meta) == 16, "sizeof(struct ila_meta)");
ILA__ABI_ASSERT(ILA__OFF(ila_meta, abi_version) == 0, "ila_meta.abi_version must stay at 0");
ILA__ABI_ASSERT(ILA__OFF(ila_meta, netns_cookie) == 8, "ila_meta.netns_cookie offset");
ILA__ABI_ASSERT(sizeof(struct ila_xlat_key) == 16, "sizeof(struct ila_xlat_key)");
ILA__ABI_ASSERT(ILA__OFF(ila_xlat_key, ifindex) == 8, "ila_xlat_key.ifindex offset");
ILA__ABI_ASSERT(sizeof(struct ila_xlat_val) == 16, "sizeof(struct ila_xlat_val)");
ILA__ABI_ASSERT(ILA__OFF(ila_xlat_val, csum_mode) == 8, "ila_xlat_val.csum_mode offset");
ILA__ABI_ASSERT(ILA__OFF(ila_xlat_val, ident_type) == 9, "ila_xlat_val.ident_type offset");
ILA__ABI_ASSERT(ILA__OFF(ila_xlat_val, stats_slot) == 12, "ila_xlat_val.stats_slot offset");
ILA__ABI_ASSERT(sizeof(struct ila_route_key) == 20, "sizeof(struct ila_route_key)");
ILA__ABI_ASSERT(ILA__OFF(ila_route_key, addr) == 4, "ila_route_key.addr offset");
ILA__ABI_ASSERT(sizeof(struct ila_route_val) == 36, "sizeof(struct ila_route_val)");
ILA__ABI_ASSERT(ILA__OFF(ila_route_val, stats_slot) == 32, "ila_route_val.stats_slot offset");
ILA__ABI_ASSERT(ILA__OFF(ila_route_val, csum_mode) == 8, "ila_route_val.csum_mode offset");
ILA__ABI_ASSERT(ILA__OFF(ila_route_val, hook_type) == 10, "ila_route_val.hook_type offset");
ILA__ABI_ASSERT(ILA__OFF(ila_route_val, prefix_len) == 12, "ila_route_val.prefix_len offset");
ILA__ABI_ASSERT(ILA__OFF(ila_route_val, prefix) == 16, "ila_route_val.prefix offset");
ILA__ABI_ASSERT(sizeof(struct ila_counter) == 16, "sizeof(struct ila_counter)");

#undef ILA__OFF
#undef ILA__ABI_ASSERT

#endif /* MPT_ILA_ABI_H */

/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * mpt/state_abi.h - mproute per-namespace state: the BPF <-> user space ABI.
 *
 * THIS FILE IS AN ABI. It is the one and only definition of every struct
 * shared between the BPF programs (bpf/mproute/NAME.bpf.c) and user space
 * (crates/bpf/src/mproute/abi.rs takes the structs from the skeleton, generated
 * from this header's BTF; only the LPM keys, whose big-endian table the BTF
 * does not say, and the constants are written there by hand). Maps built from these structs outlive
 * the process that created them (they stay pinned / anchored in a network
 * namespace), so a newer binary may find maps written by an older one.
 *
 * ANY layout change (field added, removed, renamed into a different type,
 * reordered, resized, or a changed meaning of an existing field) MUST bump
 * MPT_ABI_VERSION, and abi.rs (its hand-written keys and constants) must be
 * updated in the same change.
 * The static asserts below, the const asserts in abi.rs and the BTF test
 * (crates/bpf/tests/abi_btf.rs) exist to catch a change made on one side only.
 *
 * Rules: fixed-width __uN types only, explicit reserved/padding fields (no
 * implicit padding), natural alignment, no bitfields, no pointers.
 *
 * The header compiles both for BPF (clang -target bpf with vmlinux.h) and for
 * a plain host C compiler (with <linux/types.h>).
 */
#ifndef MPT_STATE_ABI_H
#define MPT_STATE_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Bump on ANY layout or semantic change of the structs below. */
#define MPT_ABI_VERSION 11

/*
 * Capacity of the per-route hash maps (mpt_routes, mpt_stats, mpt_pcpu: growable
 * maps, mpt/lib/grow.h) when the state is created, and the most they grow to.
 */
#define MPT_ROUTES_START (1 << 12)
#define MPT_MAX_ROUTES (1 << 20)

/* Multipath selection algorithms (struct mpt_route_val.algo). */
#define MPT_ALGO_L3_HASH    0
#define MPT_ALGO_PER_PACKET 1
#define MPT_ALGO_DRR        2
#define MPT_ALGO_RANDOM     3
#define MPT_ALGO_WRANDOM    4
#define MPT_ALGO_L4_HASH    5

/*
 * Value of the single entry (key 0) of the mpt_meta array map.
 * abi_version MUST stay the first field forever: it is how a reader of an
 * existing map learns which layout the rest of the maps use.
 */
struct mpt_meta {
	__u32 abi_version;  /* MPT_ABI_VERSION of the writer */
	__u32 hash_seed;    /* seed for the hash based algorithms */
	__u64 netns_cookie; /* cookie of the owning network namespace */
	__u32 flags;        /* MPT_META_F_* */
	__u32 fib4_gen;     /* with MPT_META_F_FIB4_GEN: see below */
};

/*
 * mpt_meta.flags. NATIVE_CHECKED / NATIVE: user space only (whether the
 * kernel kept RTA_MP_ALGO). FIB4_GEN: fib4_gen holds the IPv4 FIB generation
 * (the kernel's net->ipv4.rt_genid) at which user space verified the managed
 * routes flagged MPT_DPR_F_VERIFIED (dp_abi.h). While the namespace's generation
 * still equals it, the dataplane may skip its per-packet check that the
 * kernel's FIB answers with the managed route.
 */
#define MPT_META_F_NATIVE_CHECKED 0x1
#define MPT_META_F_NATIVE         0x2
#define MPT_META_F_FIB4_GEN       0x4

/*
 * Key of the mpt_routes hash map.
 * family:  AF_INET (2) or AF_INET6 (10).
 * dst_be:  prefix address in network byte order; IPv4 uses the first 4 bytes
 *          and the remaining 12 bytes are zero. Host bits beyond dst_len are 0.
 * table, metric: host byte order.
 */
struct mpt_route_key {
	__u8  family;
	__u8  dst_len;
	__u16 reserved;  /* must be 0 (part of the hash key!) */
	__u32 table;
	__u32 metric;
	__u8  dst_be[16];
};

/* Value of the mpt_routes hash map. */
struct mpt_route_val {
	__u8  algo;      /* MPT_ALGO_* */
	__u8  flags;     /* MPT_ROUTE_F_* */
	__u8  nh_count;  /* number of nexthops in the group */
	__u8  protocol;  /* rtm_protocol the route was installed with (0: not recorded) */
	__u32 nh_group;  /* kernel nexthop group id */
	__u16 hash_fields; /* hash recipe, MPT_HF_* (mpt/flowhash.h); 0: the algorithm's own */
	__u16 reserved;    /* 0 */
	__u32 seed;        /* with MPT_ROUTE_F_SEED: the route's hash seed */
};

/* mpt_route_val.flags: the route has its own seed (else mpt_meta.hash_seed). */
#define MPT_ROUTE_F_SEED 0x1

#define MPT__ABI_ASSERT(cond, msg) _Static_assert(cond, "mpt ABI: " msg)
#define MPT__OFF(type, field) __builtin_offsetof(struct type, field)

MPT__ABI_ASSERT(sizeof(struct mpt_meta) == 24, "sizeof(struct mpt_meta) != 24");
MPT__ABI_ASSERT(MPT__OFF(mpt_meta, abi_version) == 0, "mpt_meta.abi_version must be at offset 0 forever");
MPT__ABI_ASSERT(MPT__OFF(mpt_meta, hash_seed) == 4, "mpt_meta.hash_seed offset");
MPT__ABI_ASSERT(MPT__OFF(mpt_meta, netns_cookie) == 8, "mpt_meta.netns_cookie offset");
MPT__ABI_ASSERT(MPT__OFF(mpt_meta, flags) == 16, "mpt_meta.flags offset");
MPT__ABI_ASSERT(MPT__OFF(mpt_meta, fib4_gen) == 20, "mpt_meta.fib4_gen offset");

MPT__ABI_ASSERT(sizeof(struct mpt_route_key) == 28, "sizeof(struct mpt_route_key) != 28");
MPT__ABI_ASSERT(MPT__OFF(mpt_route_key, family) == 0, "mpt_route_key.family offset");
MPT__ABI_ASSERT(MPT__OFF(mpt_route_key, dst_len) == 1, "mpt_route_key.dst_len offset");
MPT__ABI_ASSERT(MPT__OFF(mpt_route_key, reserved) == 2, "mpt_route_key.reserved offset");
MPT__ABI_ASSERT(MPT__OFF(mpt_route_key, table) == 4, "mpt_route_key.table offset");
MPT__ABI_ASSERT(MPT__OFF(mpt_route_key, metric) == 8, "mpt_route_key.metric offset");
MPT__ABI_ASSERT(MPT__OFF(mpt_route_key, dst_be) == 12, "mpt_route_key.dst_be offset");

MPT__ABI_ASSERT(sizeof(struct mpt_route_val) == 16, "sizeof(struct mpt_route_val) != 16");
MPT__ABI_ASSERT(MPT__OFF(mpt_route_val, algo) == 0, "mpt_route_val.algo offset");
MPT__ABI_ASSERT(MPT__OFF(mpt_route_val, flags) == 1, "mpt_route_val.flags offset");
MPT__ABI_ASSERT(MPT__OFF(mpt_route_val, nh_count) == 2, "mpt_route_val.nh_count offset");
MPT__ABI_ASSERT(MPT__OFF(mpt_route_val, protocol) == 3, "mpt_route_val.protocol offset");
MPT__ABI_ASSERT(MPT__OFF(mpt_route_val, nh_group) == 4, "mpt_route_val.nh_group offset");
MPT__ABI_ASSERT(MPT__OFF(mpt_route_val, hash_fields) == 8, "mpt_route_val.hash_fields offset");
MPT__ABI_ASSERT(MPT__OFF(mpt_route_val, seed) == 12, "mpt_route_val.seed offset");

#undef MPT__OFF
#undef MPT__ABI_ASSERT

#endif /* MPT_STATE_ABI_H */

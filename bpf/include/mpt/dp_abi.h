/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * mpt/dp_abi.h - the mproute dataplane: BPF <-> user space ABI.
 *
 * THIS FILE IS AN ABI, like mpt/state_abi.h (whose rules apply): every struct
 * shared by the dataplane program (bpf/mproute/dp.bpf.c) and user space
 * (crates/bpf/src/mproute/abi.rs) is defined here and only here. Any layout change
 * bumps MPT_ABI_VERSION in mpt/state_abi.h.
 *
 * Byte order is in the names: *_be fields are network byte order, the rest
 * host byte order. Addresses are byte arrays in network order.
 */
#ifndef MPT_DP_ABI_H
#define MPT_DP_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif
#include "mpt/state_abi.h"

/* Most nexthops of one route (mpt_model::MAX_NEXTHOPS). */
#define MPT_MAX_NH 32
/* max_entries of the LPM tries and of the per-route maps. */
#define MPT_MAX_DP_ROUTES (1 << 20)
/* Capacity of the nexthop group map (growable) at first, and at most. */
#define MPT_GROUPS_START (1 << 10)
#define MPT_MAX_GROUPS (1 << 20)
/*
 * max_entries of mpt_slot_stats: per-CPU counters in an array, for the first
 * routes (slot 0 is never used: 0 means "no slot"). An array element is found
 * by its index, where a hash map has to hash the key and walk a bucket: on
 * this path the difference was 11 % of the packet rate of a managed route.
 * Preallocated (256 x 528 bytes per CPU), so bounded; routes beyond it count
 * in the mpt_stats hash map. Slot 0 is no route's: user space keeps there, in
 * CPU 0's copy, which slots are taken (bit i % 8 of byte i / 8 for slot i),
 * then 0x5a in the byte after the bitmap (without it the LPM tries are read).
 */
#define MPT_STATS_SLOTS 256

/*
 * mpt_dp_route.algo of a resilient route: the hash's bucket in the route's
 * mpt_res table names the nexthop (mpt_route_val.algo stays MPT_ALGO_L3_HASH
 * or MPT_ALGO_L4_HASH: these two values are the dataplane's only).
 */
#define MPT_DP_ALGO_L3_RES 6
#define MPT_DP_ALGO_L4_RES 7

/*
 * mpt_res_table.flags: CONSISTENT: a consistent (Maglev) table, computed from
 * the route alone (its nexthops, weights, seed); user space never moves its
 * buckets by idle time. The dataplane reads both kinds alike.
 */
#define MPT_RES_F_CONSISTENT 0x1

/* Most buckets of a resilient table (mpt_model::route::resilient::MAX_BUCKETS). */
#define MPT_MAX_BUCKETS 4096
/* Capacity of mpt_res (one table per resilient route, growable) at first, and at most. */
#define MPT_RES_START (1 << 8)
#define MPT_MAX_RES_ROUTES (1 << 16)

/* mpt_nh.flags */
#define MPT_NH_F_ONLINK 0x04 /* RTNH_F_ONLINK */

/*
 * LPM trie keys. prefixlen counts the 32 bits of table_be plus the prefix
 * length, so a lookup with prefixlen = 32 + 32 (or 32 + 128) matches only
 * routes of that table.
 */
struct mpt_lpm4_key {
	__u32 prefixlen;
	__be32 table_be;
	__u8 addr[4];
};

struct mpt_lpm6_key {
	__u32 prefixlen;
	__be32 table_be;
	__u8 addr[16];
};

/* Value of both LPM tries: a managed route as the dataplane sees it. */
struct mpt_dp_route {
	struct mpt_route_key id; /* identity, key of the per-route maps */
	__u8 algo;               /* MPT_ALGO_* */
	__u8 flags;              /* MPT_DPR_F_* */
	__u16 stats_slot;        /* index of mpt_slot_stats; 0: none, counted in mpt_stats */
	__u32 group;             /* key of mpt_groups */
	__u16 hash_fields;       /* hash recipe, MPT_HF_* (mpt/flowhash.h); 0: the algorithm's own */
	__u16 reserved;          /* 0 */
	__u32 seed;              /* with MPT_DPR_F_SEED: the route's hash seed */
};

/*
 * mpt_dp_route.flags. SOLE: user space verified, at the IPv4 FIB generation
 * in mpt_meta.fib4_gen, that the kernel's FIB answers with this route for
 * every address the LPM trie gives this entry for (no custom rules, no other
 * route overlapping the prefix but managed ones, lowest metric, no TOS).
 */
#define MPT_DPR_F_VERIFIED 0x1
/*
 * FOREIGN: not a managed route but a hole in one: a kernel route of another
 * owner inside a managed prefix that the per-packet check would take for the
 * managed route (same metric, a gateway of its group). The dataplane treats
 * the destination as unmanaged (the kernel FIB decides). group and
 * stats_slot are 0.
 */
#define MPT_DPR_F_FOREIGN 0x2
/*
 * DRIFT: a managed route whose kernel route is no longer what mproute
 * installed (deleted, or its nexthops changed with ip route): the dataplane
 * treats its destinations as unmanaged (the kernel FIB decides) until the
 * route is written again or mproute sync settles it. Set and cleared by the
 * verification at the end of every mproute change, attach and watch tick.
 */
#define MPT_DPR_F_DRIFT 0x4
/* SEED: the hash algorithms use seed, not mpt_meta.hash_seed. */
#define MPT_DPR_F_SEED 0x8

/* One nexthop of a group. */
struct mpt_nh {
	__u32 ifindex;     /* egress device */
	__s32 upper_bound; /* hash-threshold bound over the usable nexthops, -1 = unusable */
	__u32 cum_weight;  /* sum of the weights of nexthops 0..=this one */
	__u16 weight;      /* 1..256 */
	__u8 flags;        /* MPT_NH_F_* */
	__u8 family;       /* AF_INET / AF_INET6 of gw; 0 = device route (no gateway) */
	__u8 gw[16];       /* gateway, network order; IPv4 in the first 4 bytes */
};

/* Value of mpt_groups: the nexthops of one or more routes. */
struct mpt_group {
	__u32 nh_count;
	__u32 total_weight;
	struct mpt_nh nh[MPT_MAX_NH];
};

/*
 * Value of mpt_res (key: struct mpt_route_key): a resilient route's bucket
 * table. A flow's bucket is (hash31 * n_buckets) >> 31; nh[bucket] is an
 * index into the route's mpt_group. The dataplane writes used_s[bucket], the
 * coarse monotonic clock in seconds (CLOCK_MONOTONIC_COARSE) of the bucket's
 * last packet (0: never), which user space reads to move only buckets idle
 * for idle_timer_s when it rebalances.
 */
struct mpt_res_table {
	__u16 n_buckets;                /* 1..MPT_MAX_BUCKETS */
	__u16 flags;                    /* MPT_RES_F_* (user space only) */
	__u32 idle_timer_s;             /* seconds */
	__u8 nh[MPT_MAX_BUCKETS];       /* bucket -> nexthop index */
	__u32 used_s[MPT_MAX_BUCKETS];  /* bucket -> last use, seconds */
};

struct mpt_counter {
	__u64 packets;
	__u64 bytes;
};

/*
 * Per-CPU value of mpt_stats (key: struct mpt_route_key) and of
 * mpt_slot_stats (key: mpt_dp_route.stats_slot). A route's counters are the
 * sum of both: its mpt_stats entry (routes without a slot; what a route
 * counted under another slot's owner is folded in there) and its slot while
 * its LPM entry holds the slot.
 */
struct mpt_route_stats {
	struct mpt_counter route;
	struct mpt_counter nh[MPT_MAX_NH];
};

/* Per-CPU value of mpt_pcpu (key: struct mpt_route_key): round robin and DRR state. */
struct mpt_pcpu_state {
	__u32 rr;                      /* per-packet: packets seen on this CPU */
	__u32 drr_idx;                 /* drr: nexthop being served */
	__s32 drr_deficit[MPT_MAX_NH]; /* drr: bytes each nexthop may still send */
};

/* Why a packet went to the stack (index of mpt_reasons; 0 counts redirects). */
enum mpt_reason {
	MPT_R_REDIRECTED = 0,
	MPT_R_NOT_IP = 1,       /* not IPv4/IPv6 */
	MPT_R_MALFORMED = 2,    /* truncated or inconsistent headers */
	MPT_R_NO_ROUTE = 3,     /* no managed route */
	MPT_R_TTL = 4,          /* TTL / hop limit <= 1 */
	MPT_R_IP_OPTIONS = 5,   /* IPv4 options */
	MPT_R_IPV6_EXT = 6,     /* IPv6 extension headers */
	MPT_R_LOCAL = 7,        /* for this host, or not forwarded by the FIB */
	MPT_R_FRAG_NEEDED = 8,  /* larger than the egress MTU */
	MPT_R_NO_NEIGH = 9,     /* neighbour unresolved (XDP) */
	MPT_R_FWD_DISABLED = 10,/* forwarding disabled on the ingress device */
	MPT_R_FIB_OTHER = 11,   /* blackhole, unreachable, prohibit, other FIB answers */
	MPT_R_NO_NEXTHOP = 12,  /* no usable nexthop */
	MPT_R_VLAN = 13,        /* VLAN tag could not be removed */
	MPT_R_L4_CSUM = 14,     /* XDP: TCP/UDP checksum not complete (CHECKSUM_PARTIAL from a local stack) */
	MPT_R_NOT_HOST = 15,    /* Ethernet destination not the device's own address (other host, broadcast, multicast) */
	MPT_R_DROPPED = 16,     /* XDP: redirected, then dropped by the kernel (counted by drops.bpf.c) */
	MPT_R_NEIGH_CHECK = 17, /* XDP: handed to the kernel's neighbour output, once a second per neighbour */
	MPT_R_MAX = 18,
};

#define MPT__ABI_ASSERT(cond, msg) _Static_assert(cond, "mpt ABI: " msg)
#define MPT__OFF(type, field) __builtin_offsetof(struct type, field)

MPT__ABI_ASSERT(sizeof(struct mpt_lpm4_key) == 12, "sizeof(struct mpt_lpm4_key)");
MPT__ABI_ASSERT(MPT__OFF(mpt_lpm4_key, table_be) == 4, "mpt_lpm4_key.table_be");
MPT__ABI_ASSERT(MPT__OFF(mpt_lpm4_key, addr) == 8, "mpt_lpm4_key.addr");
MPT__ABI_ASSERT(sizeof(struct mpt_lpm6_key) == 24, "sizeof(struct mpt_lpm6_key)");
MPT__ABI_ASSERT(MPT__OFF(mpt_lpm6_key, addr) == 8, "mpt_lpm6_key.addr");
MPT__ABI_ASSERT(sizeof(struct mpt_dp_route) == 44, "sizeof(struct mpt_dp_route)");
MPT__ABI_ASSERT(MPT__OFF(mpt_dp_route, algo) == 28, "mpt_dp_route.algo");
MPT__ABI_ASSERT(MPT__OFF(mpt_dp_route, flags) == 29, "mpt_dp_route.flags");
MPT__ABI_ASSERT(MPT__OFF(mpt_dp_route, stats_slot) == 30, "mpt_dp_route.stats_slot");
MPT__ABI_ASSERT(MPT__OFF(mpt_dp_route, group) == 32, "mpt_dp_route.group");
MPT__ABI_ASSERT(MPT__OFF(mpt_dp_route, hash_fields) == 36, "mpt_dp_route.hash_fields");
MPT__ABI_ASSERT(MPT__OFF(mpt_dp_route, seed) == 40, "mpt_dp_route.seed");
MPT__ABI_ASSERT(sizeof(struct mpt_nh) == 32, "sizeof(struct mpt_nh)");
MPT__ABI_ASSERT(MPT__OFF(mpt_nh, upper_bound) == 4, "mpt_nh.upper_bound");
MPT__ABI_ASSERT(MPT__OFF(mpt_nh, cum_weight) == 8, "mpt_nh.cum_weight");
MPT__ABI_ASSERT(MPT__OFF(mpt_nh, weight) == 12, "mpt_nh.weight");
MPT__ABI_ASSERT(MPT__OFF(mpt_nh, flags) == 14, "mpt_nh.flags");
MPT__ABI_ASSERT(MPT__OFF(mpt_nh, family) == 15, "mpt_nh.family");
MPT__ABI_ASSERT(MPT__OFF(mpt_nh, gw) == 16, "mpt_nh.gw");
MPT__ABI_ASSERT(sizeof(struct mpt_group) == 8 + 32 * MPT_MAX_NH, "sizeof(struct mpt_group)");
MPT__ABI_ASSERT(MPT__OFF(mpt_group, nh) == 8, "mpt_group.nh");
MPT__ABI_ASSERT(sizeof(struct mpt_res_table) == 8 + 5 * MPT_MAX_BUCKETS, "sizeof(struct mpt_res_table)");
MPT__ABI_ASSERT(MPT__OFF(mpt_res_table, idle_timer_s) == 4, "mpt_res_table.idle_timer_s");
MPT__ABI_ASSERT(MPT__OFF(mpt_res_table, nh) == 8, "mpt_res_table.nh");
MPT__ABI_ASSERT(MPT__OFF(mpt_res_table, used_s) == 8 + MPT_MAX_BUCKETS, "mpt_res_table.used_s");
MPT__ABI_ASSERT(sizeof(struct mpt_counter) == 16, "sizeof(struct mpt_counter)");
MPT__ABI_ASSERT(sizeof(struct mpt_route_stats) == 16 * (1 + MPT_MAX_NH), "sizeof(struct mpt_route_stats)");
MPT__ABI_ASSERT(sizeof(struct mpt_pcpu_state) == 8 + 4 * MPT_MAX_NH, "sizeof(struct mpt_pcpu_state)");
MPT__ABI_ASSERT(MPT__OFF(mpt_pcpu_state, drr_deficit) == 8, "mpt_pcpu_state.drr_deficit");

#undef MPT__OFF
#undef MPT__ABI_ASSERT

#endif /* MPT_DP_ABI_H */

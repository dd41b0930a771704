/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * gw_cache.h - the dataplane's per-CPU cache of gateway lookups (MACs and MTU
 * fit of a managed nexthop's gateway), so that a managed packet takes one FIB
 * lookup instead of two. Included by dp.bpf.c only.
 */
#ifndef MPT_GW_CACHE_H
#define MPT_GW_CACHE_H

/*
 * Per-CPU cache of the gateway lookups of managed nexthops: the MACs
 * bpf_fib_lookup gave for (device, gateway) and the longest packet known to fit
 * the device's MTU, trusted for the jiffy it was taken in and the next one
 * (at most 2 ticks: 8 ms at HZ=250). It saves the second FIB lookup of the
 * managed path; a changed neighbour, MTU or link shows within that time.
 * Direct-mapped: slot = a hash of (device, gateway), the key kept in the slot
 * to tell collisions (a collision is a miss, and the newer lookup takes the
 * slot). An array slot costs a multiplication where a hash map costs a hash,
 * a bucket walk and LRU bookkeeping (about 50 ns live on this path).
 * Private to this loaded object, not state.
 */
struct nh_cache_key {
	__u32 ifindex;
	__u32 family;
	__u8 gw[16];
};

struct nh_cache_val {
	__u64 jiffies;
	__u8 dmac[ETH_ALEN];
	__u8 smac[ETH_ALEN];
	__u16 ok_len; /* longest L3 length that passed the MTU check (0: GSO only) */
	__u16 pad;
};

struct nh_cache_slot {
	struct nh_cache_key key;
	struct nh_cache_val val;
};

#define MPT_NH_CACHE_TICKS 1
#define MPT_NH_SLOTS_LOG2 10

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1 << MPT_NH_SLOTS_LOG2);
	__type(key, __u32);
	__type(value, struct nh_cache_slot);
} mpt_nh_cache SEC(".maps");

/* This CPU's cache slot for nexthop n's (device, gateway). */
static __always_inline struct nh_cache_slot *nh_slot(const struct mpt_nh *n)
{
	const __u32 *w = (const __u32 *)n->gw;
	__u32 h = (w[0] ^ w[1] ^ w[2] ^ w[3]) ^ (n->ifindex * 0x9E3779B1u);
	__u32 i = (h * 0x85EBCA6Bu) >> (32 - MPT_NH_SLOTS_LOG2);

	return bpf_map_lookup_elem(&mpt_nh_cache, &i);
}

static __always_inline int nh_slot_is(const struct nh_cache_slot *s, const struct mpt_nh *n)
{
	const __u32 *a = (const __u32 *)s->key.gw, *b = (const __u32 *)n->gw;

	return s->key.ifindex == n->ifindex && s->key.family == n->family &&
	       a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3];
}

/*
 * A fresh cached gateway lookup for nexthop n and a packet of L3 length need
 * (0: a GSO skb): fills fib's MACs and returns 1.
 */
__noinline int mpt_nh_cached(const struct mpt_nh *n, __u32 need, struct bpf_fib_lookup *fib)
{
	struct nh_cache_slot *s;
	__u64 stamp;

	if (!n || !fib)
		return 0;
	s = nh_slot(n);
	if (!s)
		return 0;
	stamp = MPT_READ_ONCE(s->val.jiffies);
	barrier();
	if (!nh_slot_is(s, n) || bpf_jiffies64() - stamp > MPT_NH_CACHE_TICKS ||
	    need > s->val.ok_len)
		return 0;
	__builtin_memcpy(fib->dmac, s->val.dmac, ETH_ALEN);
	__builtin_memcpy(fib->smac, s->val.smac, ETH_ALEN);
	/*
	 * Where BPF runs preemptibly on its CPU (PREEMPT_RT), a remember of
	 * another gateway in this slot may have run meanwhile: it zeroes the stamp
	 * first and sets it last, so an unchanged stamp and key mean the copy is whole.
	 */
	barrier();
	if (MPT_READ_ONCE(s->val.jiffies) != stamp || !nh_slot_is(s, n))
		return 0;
	fib->ifindex = n->ifindex;
	return 1;
}

/* Remember a successful gateway lookup (fib) of nexthop n for a packet of L3 length need. */
__noinline int mpt_nh_remember(const struct mpt_nh *n, __u32 need, const struct bpf_fib_lookup *fib)
{
	struct nh_cache_slot *s;

	if (!n || !fib)
		return 0;
	s = nh_slot(n);
	if (!s)
		return 0;
	/* this CPU's own slot: stamp off, key and MACs, stamp on (see mpt_nh_cached) */
	MPT_WRITE_ONCE(s->val.jiffies, 0);
	barrier();
	s->key.ifindex = n->ifindex;
	s->key.family = n->family;
	__builtin_memcpy(s->key.gw, n->gw, 16);
	s->val.ok_len = need;
	__builtin_memcpy(s->val.dmac, fib->dmac, ETH_ALEN);
	__builtin_memcpy(s->val.smac, fib->smac, ETH_ALEN);
	barrier();
	MPT_WRITE_ONCE(s->val.jiffies, bpf_jiffies64());
	return 0;
}

#endif /* MPT_GW_CACHE_H */

/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * flow_cache.h - the router fast path's per-CPU cache of the kernel FIB's
 * answers for IPv4 flows (destinations that are not managed routes), so that a
 * packet of a flow seen a moment ago takes no bpf_fib_lookup. Included by
 * dp.bpf.c only; private to the loaded object, not state.
 *
 * An answer is kept with what it was asked (ingress device, addresses, TOS,
 * protocol and ports: everything the lookup, rules and the kernel's multipath
 * hash may read) and is trusted while
 *  - the namespace's IPv4 routing generation (net->ipv4.rt_genid), read before
 *    the lookup that filled it, is unchanged: the kernel increments it on every
 *    change that can alter a lookup's answer (a route added, a route a lookup
 *    matched replaced or deleted, rules, addresses, a link going up or down or
 *    changing its MTU, nexthop objects);
 *  - the jiffy it was taken in or the next one has not passed (at most 2
 *    ticks, 8 ms at HZ=250), which bounds what the generation does not cover,
 *    as the gateway cache does: a neighbour's new MAC, a learnt path MTU, a
 *    change of the multipath hash policy;
 *  - the packet is no longer than the longest one that passed the MTU check
 *    with it.
 * Forwarding on the ingress device is read per packet, as bpf_fib_lookup reads
 * it. IPv6 has no such generation (fib6_sernum ignores deletions): looked up
 * every time.
 *
 * A managed route's choice is kept the same way (its nexthop, that nexthop's
 * gateway lookup, its counters' slot) where it is a function of the flow alone:
 * l3-hash and l4-hash (not resilient: user space moves idle buckets; not the
 * per-packet algorithms), IPv4 not ICMP (an error follows its inner flow), on a
 * route whose FIB check is skipped (verified, see fib4_verified) and has a
 * counters slot. Such an answer is trusted only while mpt_meta holds the
 * generation as verified, so that every mproute command (which clears it
 * before it writes the maps) ends it; what user space writes without a
 * command is seen within the two ticks.
 *
 * Two-way set associative by a hash of the flow; a miss costs the two
 * compares and the store of the new answer over the older one (about 30 ns,
 * cold slots). Many more active flows per CPU than slots make most packets
 * miss: with bench forward --flows 32768 (16 times the slots) the router
 * forwarded 0.76x xdp-forward's rate (an earlier sitting: 0.84x, and 0.86x in
 * a build without the cache), against 1.1x at 1024 flows. A governor
 * that stopped using the cache after a window of misses gained no more than
 * noise there and lost a tenth at 1024 flows (answers stored together expire
 * together: a burst of misses), so there is none.
 */
#ifndef MPT_FLOW_CACHE_H
#define MPT_FLOW_CACHE_H

struct fc_slot {
	__u64 jiffies;    /* when the answer was taken (0: empty or being written) */
	__be32 saddr;
	__be32 daddr;
	__be16 sport_be;
	__be16 dport_be;
	__u8 proto;
	__u8 tos;
	__u16 ok_len;     /* longest L3 length that passed the MTU check (0: GSO only) */
	__u32 iif;
	__u32 net_lo;     /* low bits of the namespace's cookie (generations start alike) */
	__u32 genid;      /* net->ipv4.rt_genid before the lookup */
	__u32 oif;        /* the answer: egress device, */
	__be32 nh;        /* neighbour (gateway or destination), */
	__u8 dmac[ETH_ALEN];
	__u8 smac[ETH_ALEN];
	__u16 stats_slot; /* a managed route's answer: its counters' slot (0: the FIB's answer), */
	__u8 nh_idx;      /* and the nexthop it chose */
	__u8 pad;
};

/* What a hit was: the FIB's answer (stats_slot 0) or a managed route's choice. */
struct fc_hit {
	__u16 stats_slot;
	__u8 nh_idx;
};

#define MPT_FC_TICKS 1
#define MPT_FC_SETS_LOG2 10

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2 << MPT_FC_SETS_LOG2);
	__type(key, __u32);
	__type(value, struct fc_slot);
} mpt_flow_cache SEC(".maps");

/* What a lookup is asked, and the generation it is answered in. */
struct fc_query {
	__be32 saddr;
	__be32 daddr;
	__be16 sport_be;
	__be16 dport_be;
	__u8 proto;
	__u8 tos;
	__u16 need;       /* L3 length to fit the MTU (0: GSO) */
	__u32 iif;
	__u32 net_lo;
	__u32 genid;
};

/*
 * The flow's set: the addresses (and protocol, TOS, ingress device) mixed
 * fully (murmur3's finaliser), plus the ports times odd constants, whose low
 * bits are the index: a host's connections from consecutive source ports take
 * distinct sets, as many as there are, whatever the addresses (a multiply of
 * everything at once crowded 1024 such flows into a few hundred sets for some
 * destinations, twice the misses).
 */
static __always_inline __u32 fc_set(const struct fc_query *q)
{
	__u32 h = q->saddr ^ (q->daddr * 0x9E3779B1u) ^ ((__u32)q->proto << 8 | q->tos) ^
		  (q->iif * 0xC2B2AE35u);

	h ^= h >> 16;
	h *= 0x85EBCA6Bu;
	h ^= h >> 13;
	h *= 0xC2B2AE35u;
	h ^= h >> 16;
	h += (__u32)bpf_ntohs(q->sport_be) * 0x9E3779B1u + (__u32)bpf_ntohs(q->dport_be) * 0x27D4EB2Fu;
	return (h & ((1u << MPT_FC_SETS_LOG2) - 1)) << 1;
}

/* The slot holds an answer for q's flow (of any generation). */
static __always_inline int fc_flow_is(const struct fc_slot *s, const struct fc_query *q)
{
	return s->daddr == q->daddr && s->saddr == q->saddr && s->sport_be == q->sport_be &&
	       s->dport_be == q->dport_be && s->proto == q->proto && s->tos == q->tos &&
	       s->iif == q->iif && s->net_lo == q->net_lo;
}

static __always_inline int fc_is(const struct fc_slot *s, const struct fc_query *q)
{
	return fc_flow_is(s, q) && s->genid == q->genid;
}

/* One slot of the set: a fresh answer to q fills fib and returns 1. */
static __always_inline int fc_try(__u32 i, const struct fc_query *q, struct bpf_fib_lookup *fib,
				  struct fc_hit *hit)
{
	struct fc_slot *s = bpf_map_lookup_elem(&mpt_flow_cache, &i);
	__u64 stamp;

	if (!s)
		return 0;
	stamp = MPT_READ_ONCE(s->jiffies);
	barrier();
	if (!stamp || !fc_is(s, q) || q->need > s->ok_len || bpf_jiffies64() - stamp > MPT_FC_TICKS)
		return 0;
	fib->family = AF_INET;
	fib->ifindex = s->oif;
	fib->ipv4_dst = s->nh;
	__builtin_memcpy(fib->dmac, s->dmac, ETH_ALEN);
	__builtin_memcpy(fib->smac, s->smac, ETH_ALEN);
	hit->stats_slot = s->stats_slot;
	hit->nh_idx = s->nh_idx;
	/* a writer of this CPU's slot in between (PREEMPT_RT) zeroes the stamp first */
	barrier();
	return MPT_READ_ONCE(s->jiffies) == stamp && fc_is(s, q);
}

/* A fresh cached answer to q: fills fib (egress ifindex, neighbour, MACs) and returns 1. */
static __always_inline int fc_lookup(const struct fc_query *q, struct bpf_fib_lookup *fib,
				     struct fc_hit *hit)
{
	__u32 i = fc_set(q);

	return fc_try(i, q, fib, hit) || fc_try(i + 1, q, fib, hit);
}

/*
 * Keep the answer (fib after a successful lookup) to q: over the flow's older
 * answer if the set has one, else over the set's older slot.
 */
static __always_inline void fc_store(const struct fc_query *q, const struct bpf_fib_lookup *fib,
				     __u16 stats_slot, __u8 nh_idx)
{
	__u32 i = fc_set(q), j = i + 1;
	struct fc_slot *a = bpf_map_lookup_elem(&mpt_flow_cache, &i);
	struct fc_slot *b = bpf_map_lookup_elem(&mpt_flow_cache, &j);
	struct fc_slot *s;

	if (!a || !b)
		return;
	if (fc_flow_is(b, q))
		s = b;
	else if (fc_flow_is(a, q))
		s = a;
	else
		s = MPT_READ_ONCE(b->jiffies) < MPT_READ_ONCE(a->jiffies) ? b : a;
	MPT_WRITE_ONCE(s->jiffies, 0);
	barrier();
	s->saddr = q->saddr;
	s->daddr = q->daddr;
	s->sport_be = q->sport_be;
	s->dport_be = q->dport_be;
	s->proto = q->proto;
	s->tos = q->tos;
	s->ok_len = q->need;
	s->iif = q->iif;
	s->net_lo = q->net_lo;
	s->genid = q->genid;
	s->oif = fib->ifindex;
	s->nh = fib->ipv4_dst;
	__builtin_memcpy(s->dmac, fib->dmac, ETH_ALEN);
	__builtin_memcpy(s->smac, fib->smac, ETH_ALEN);
	s->stats_slot = stats_slot;
	s->nh_idx = nh_idx;
	barrier();
	MPT_WRITE_ONCE(s->jiffies, bpf_jiffies64());
}

#endif /* MPT_FLOW_CACHE_H */

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
 * Two-way set associative by a hash of the flow, 2048 slots of 56 bytes per
 * CPU (112 KiB); a miss costs the two compares and the store of the new
 * answer over the older one (about 20 ns, cold slots). Many more active flows
 * per CPU than slots, or flows that come back less often than every two
 * ticks, make nearly every packet miss (bench forward --flows 32768: 32768
 * flows at 2-3 Mpps come back every 11-16 ms): a larger cache would not hit
 * either, the answers' two ticks end them first. So a governor (fc_gov below)
 * leaves the cache to probe sets while their hit rate is low: at 32768 flows
 * the program's run time went from 221 to 202 ns a packet, at 1024 flows it
 * stayed (1.11x xdp-forward's rate either way, before the neighbour check
 * below was spared on hits).
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
	__u32 set;        /* the flow's set (fc_set), */
	__u8 use;         /* and whether the cache is used for it (fc_admit): looked up, stored */
	__u8 probe;       /* a probe set: its lookups are counted by the governor */
	__u16 pad;
};

/*
 * The governor: whether the cache is worth its misses on this CPU. A miss
 * costs its compares and the store of the answer (about 20 ns of a 220 ns
 * packet at bench forward --flows 32768, where nearly every packet misses:
 * answers live two ticks, and 32768 flows at 2 Mpps come back every 16 ms).
 * One set in MPT_FC_PROBE_SETS always uses the cache and counts its lookups
 * and hits; after MPT_FC_WINDOW such lookups, the other sets use the cache
 * for the next window only if the probes hit at least MPT_FC_MIN_HIT_PCT
 * percent (a hit saves a FIB lookup, about 80 ns; the break-even is near a
 * fifth). The probe sets see the same mix of flows as the others (the set is
 * a hash of the flow), so their hit rate is the cache's. A window spans about
 * MPT_FC_WINDOW * MPT_FC_PROBE_SETS packets (16384: 8 ms at 2 Mpps), longer
 * than the two ticks after which answers stored together expire together, so
 * the burst of misses that follows does not switch the cache off (a
 * governor deciding after a run of misses did, and lost a tenth at 1024
 * flows). While the cache is off, every MPT_FC_PROBE_SETS-th packet probes
 * too, whatever its set: a few busy flows none of whose sets is a probe set
 * would otherwise never turn it on again.
 */
struct fc_gov {
	__u32 probes;     /* probe lookups in this window */
	__u32 hits;       /* of them, hits */
	__u32 off;        /* 1: only the probes use the cache */
	__u32 pkts;       /* packets asked about while off (every 16th probes) */
};

#define MPT_FC_PROBE_SETS_LOG2 4
#define MPT_FC_WINDOW 1024
#define MPT_FC_MIN_HIT_PCT 25

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fc_gov);
} mpt_fc_gov SEC(".maps");

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

/*
 * Whether q's flow uses the cache (q->use: looked up, its answer stored),
 * as the governor says; fills q->set and q->probe. q's key fields first.
 */
static __always_inline int fc_admit(struct fc_query *q)
{
	__u32 zero = 0;
	struct fc_gov *g = bpf_map_lookup_elem(&mpt_fc_gov, &zero);

	q->set = fc_set(q);
	q->probe = ((q->set >> 1) & ((1u << MPT_FC_PROBE_SETS_LOG2) - 1)) == 0;
	if (g && g->off && (++g->pkts & ((1u << MPT_FC_PROBE_SETS_LOG2) - 1)) == 0)
		q->probe = 1;
	q->use = q->probe || (g && !g->off);
	return q->use;
}

/* Count a probe set's lookup (hit: it was answered) and decide at the window's end. */
static __always_inline void fc_govern(const struct fc_query *q, int hit)
{
	__u32 zero = 0;
	struct fc_gov *g;

	if (!q->probe)
		return;
	g = bpf_map_lookup_elem(&mpt_fc_gov, &zero);
	if (!g)
		return;
	g->hits += hit ? 1 : 0;
	if (++g->probes < MPT_FC_WINDOW)
		return;
	g->off = g->hits * 100 < g->probes * MPT_FC_MIN_HIT_PCT;
	g->probes = 0;
	g->hits = 0;
}

/* A fresh cached answer to q: fills fib (egress ifindex, neighbour, MACs) and returns 1. */
static __always_inline int fc_lookup(const struct fc_query *q, struct bpf_fib_lookup *fib,
				     struct fc_hit *hit)
{
	__u32 i = q->set & ((2u << MPT_FC_SETS_LOG2) - 2);
	int r = fc_try(i, q, fib, hit) || fc_try(i + 1, q, fib, hit);

	fc_govern(q, r);
	return r;
}

/*
 * Keep the answer (fib after a successful lookup) to q, where it uses the
 * cache: over the flow's older answer if the set has one, else over the set's
 * older slot.
 */
static __always_inline void fc_store(const struct fc_query *q, const struct bpf_fib_lookup *fib,
				     __u16 stats_slot, __u8 nh_idx)
{
	__u32 i = q->set & ((2u << MPT_FC_SETS_LOG2) - 2), j = i + 1;
	struct fc_slot *a, *b, *s;

	if (!q->use)
		return; /* the governor has it off for this flow */
	a = bpf_map_lookup_elem(&mpt_flow_cache, &i);
	b = bpf_map_lookup_elem(&mpt_flow_cache, &j);
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

/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * flow_cache.h - the router fast path's per-CPU cache of the kernel FIB's
 * answers (destinations that are not managed routes, IPv4 and IPv6), so that
 * a packet of a flow seen a moment ago takes no bpf_fib_lookup. Included by
 * dp.bpf.c only; private to the loaded object, not state.
 *
 * An answer is kept with what it was asked (ingress device, addresses, TOS or
 * IPv6 flow info, protocol and ports: everything the lookup, rules and the
 * kernel's multipath hash may read) and is trusted while
 *  - the namespace's routing generation, read before the lookup that filled
 *    it, is unchanged: for IPv4 net->ipv4.rt_genid, which the kernel
 *    increments on every change that can alter a lookup's answer (a route
 *    added, a route a lookup matched replaced or deleted, rules, addresses, a
 *    link going up or down or changing its MTU, nexthop objects); for IPv6,
 *    which has no such counter, two words together (fib6_gen in dp.bpf.c):
 *    net->ipv6.fib6_sernum, renewed on route inserts and replaces, rule and
 *    address changes, links going up, nexthop replaces, but not on a route's
 *    delete, and rt6_stats->fib_discarded_routes, which every delete moves;
 *  - the jiffy it was taken in or the next one has not passed (at most 2
 *    ticks, 8 ms at HZ=250), which bounds what the generation does not cover,
 *    as the gateway cache does: a neighbour's new MAC, a learnt path MTU, a
 *    change between multipath hash policies 1 and 3 (a change to or from 0
 *    or 2 changes the key, below); for IPv6 also a carrier loss, a
 *    nexthop group losing a member and a device's MTU change (fib6_gen);
 *  - the packet is no longer than the longest one that passed the MTU check
 *    with it.
 * Forwarding on the ingress device is read per packet, as bpf_fib_lookup reads
 * it. IPv4 and IPv6 answers have slots, and governors, of their own.
 *
 * The ports are part of the key only where the lookup reads them: the
 * namespace has rules of its own (a rule may select by ipproto, sport, dport)
 * or a multipath hash policy that may hash them (1, 3). With neither (the
 * default: no rules but the three built in, policy 0) the FIB's answer is one
 * for all the flows between two addresses (with one TOS or flow label, one
 * protocol and ingress device), and is kept once for them, port-less
 * (fc_query.portless; fib4_ports_unread in dp.bpf.c reads both, per packet,
 * before the lookup): a host pair's thousands of connections take one slot and
 * hit it, where each flow would have missed its own. A rule added moves the
 * generation; a policy changed makes the next packet ask with the other key.
 * A managed l3-hash choice is port-less too (it hashes addresses); a choice
 * that reads the L4 header (l4-hash, a recipe with ports or protocol:
 * choice_reads_ports in dp.bpf.c) is kept and asked for under the flow's ports.
 *
 * A managed route's choice is kept the same way (its nexthop, that nexthop's
 * gateway lookup, its counters' slot) where it is a function of the flow alone:
 * l3-hash and l4-hash (not resilient: user space moves idle buckets; not the
 * per-packet algorithms), IPv4 only (a managed IPv6 route is checked against
 * the kernel packet by packet: its verification is IPv4's), not ICMP (an error follows its inner flow), on a
 * route whose FIB check is skipped (verified, see fib4_verified) and has a
 * counters slot. Such an answer is trusted only while mpt_meta holds the
 * generation as verified, so that every mproute command (which clears it
 * before it writes the maps) ends it; what user space writes without a
 * command is seen within the two ticks.
 *
 * Two-way set associative by a hash of the flow, 2048 slots of 64 bytes per
 * CPU (128 KiB) for IPv4, 2048 of 104 bytes (208 KiB) for IPv6; a miss
 * costs the two compares and the store of the new answer over the older one
 * (about 20 ns, cold slots). Many more active keys
 * per CPU than slots, or keys that come back less often than every two
 * ticks, make nearly every packet miss (bench forward --flows 32768 with the
 * ports in the key, policy 1: 32768 flows at 2-3 Mpps come back every 11-16
 * ms; many host pairs do the same whatever the policy): a larger cache would not hit
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
	__u8 portless;    /* kept for every port of the flow's addresses (ports 0: fc_query) */
	__u8 l4;          /* the packet's ports were read (not a fragment): a managed choice hashes them */
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

/*
 * An IPv6 answer (the FIB's, for a destination that is not a managed route:
 * managed IPv6 routes keep their per-packet kernel-view check). Slots of their
 * own (104 bytes), so that IPv4's stay 56. Kept with what bpf_fib_lookup reads
 * of an IPv6 packet (ingress device, addresses, flow info: traffic class and
 * flow label, next header, ports) and trusted while both IPv6 generation words
 * read before its lookup are unchanged (fib6_gen in dp.bpf.c): fib6_sernum and
 * the count of routes the FIB discarded.
 */
struct fc6_slot {
	__u64 jiffies;    /* when the answer was taken (0: empty or being written) */
	__be32 saddr[4];
	__be32 daddr[4];
	__be32 flowinfo;
	__be16 sport_be;
	__be16 dport_be;
	__u8 proto;
	__u8 portless;    /* kept for every port (ports 0: fc_query) */
	__u16 ok_len;     /* longest L3 length that passed the MTU check (0: GSO only) */
	__u32 iif;
	__u32 net_lo;
	__u32 sernum;     /* net->ipv6.fib6_sernum before the lookup */
	__u32 discarded;  /* net->ipv6.rt6_stats->fib_discarded_routes before the lookup */
	__u32 oif;        /* the answer: egress device, */
	__be32 nh[4];     /* neighbour (gateway or destination), */
	__u8 dmac[ETH_ALEN];
	__u8 smac[ETH_ALEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2 << MPT_FC_SETS_LOG2);
	__type(key, __u32);
	__type(value, struct fc6_slot);
} mpt_flow_cache6 SEC(".maps");

/*
 * What a lookup is asked, and the generation it is answered in. An IPv6
 * packet's addresses are not copied here (the stack is tight): the IPv6
 * functions read them from the packet's header.
 */
struct fc_query {
	union {
		struct { /* IPv4 */
			__be32 saddr;
			__be32 daddr;
		};
		struct { /* IPv6 */
			__u32 discarded; /* rt6_stats->fib_discarded_routes before the lookup */
			__be32 flowinfo;
		};
	};
	__be16 sport_be;
	__be16 dport_be;
	__u8 proto;
	__u8 tos;
	__u16 need;       /* L3 length to fit the MTU (0: GSO) */
	__u32 iif;
	__u32 net_lo;
	__u32 genid;      /* IPv4: net->ipv4.rt_genid; IPv6: net->ipv6.fib6_sernum */
	__u32 set;        /* the flow's set (fc_set), */
	__u8 use;         /* and whether the cache is used for it (fc_admit): looked up, stored */
	__u8 probe;       /* a probe set: its lookups are counted by the governor */
	__u8 gov;         /* the family's governor: MPT_FC_GOV_V4 or _V6 */
	/*
	 * 1: the lookup reads no ports (the namespace has no rules of its own
	 * and its multipath hash policy hashes addresses only: 0, or 2 without
	 * an skb), so the answer is kept once for all the flows between two
	 * addresses: sport_be and dport_be are 0 and the slot says so. A
	 * managed choice that reads the L4 header is kept under its ports all
	 * the same (choice_reads_ports, decide).
	 */
	__u8 portless;
	/*
	 * IPv4: the packet's ports were read (p->l4: not a fragment, an L4
	 * protocol): a hash route's choice differs for a fragment of the same
	 * flow (no ports, no protocol word), so they never share a slot.
	 */
	__u8 l4;
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

/* One governor per family: their slots, flows and hit rates are apart. */
#define MPT_FC_GOV_V4 0
#define MPT_FC_GOV_V6 1

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
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
static __always_inline __u32 fc_hash(__u32 saddr, __u32 daddr, __u32 x, const struct fc_query *q)
{
	__u32 h = saddr ^ (daddr * 0x9E3779B1u) ^ x ^ (q->iif * 0xC2B2AE35u);

	h ^= h >> 16;
	h *= 0x85EBCA6Bu;
	h ^= h >> 13;
	h *= 0xC2B2AE35u;
	h ^= h >> 16;
	h += (__u32)bpf_ntohs(q->sport_be) * 0x9E3779B1u + (__u32)bpf_ntohs(q->dport_be) * 0x27D4EB2Fu;
	return (h & ((1u << MPT_FC_SETS_LOG2) - 1)) << 1;
}

static __always_inline __u32 fc_set(const struct fc_query *q)
{
	return fc_hash(q->saddr, q->daddr, (__u32)q->proto << 8 | q->tos, q);
}

/* IPv6 (ip6: the packet's header): each address folded to a word, the flow info with the protocol */
static __always_inline __u32 fc6_set(const struct fc_query *q, const struct ipv6hdr *ip6)
{
	const __be32 *a = (const __be32 *)&ip6->saddr, *b = (const __be32 *)&ip6->daddr;

	return fc_hash(a[0] ^ a[1] ^ a[2] ^ a[3], b[0] ^ b[1] ^ b[2] ^ b[3],
		       ((__u32)q->proto << 8) ^ q->flowinfo, q);
}

/* The slot holds an answer for q's flow (of any generation). */
static __always_inline int fc_flow_is(const struct fc_slot *s, const struct fc_query *q)
{
	return s->daddr == q->daddr && s->saddr == q->saddr && s->sport_be == q->sport_be &&
	       s->dport_be == q->dport_be && s->proto == q->proto && s->tos == q->tos &&
	       s->portless == q->portless && s->l4 == q->l4 && s->iif == q->iif &&
	       s->net_lo == q->net_lo;
}

static __always_inline int fc_is(const struct fc_slot *s, const struct fc_query *q)
{
	return fc_flow_is(s, q) && s->genid == q->genid;
}

/* An answer stamped at stamp (not 0), that fitted ok_len, answers a packet of L3 length need now. */
static __always_inline int fc_fresh(__u64 stamp, __u16 ok_len, __u16 need)
{
	return need <= ok_len && bpf_jiffies64() - stamp <= MPT_FC_TICKS;
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
	if (!stamp || !fc_is(s, q) || !fc_fresh(stamp, s->ok_len, q->need))
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
 * as the family's governor (q->gov) says; set: the flow's set (fc_set,
 * fc6_set). Fills q->set and q->probe. q's key fields first.
 */
static __always_inline int fc_admit(struct fc_query *q, __u32 set)
{
	__u32 key = q->gov;
	struct fc_gov *g = bpf_map_lookup_elem(&mpt_fc_gov, &key);

	q->set = set;
	q->probe = ((q->set >> 1) & ((1u << MPT_FC_PROBE_SETS_LOG2) - 1)) == 0;
	if (g && g->off && (++g->pkts & ((1u << MPT_FC_PROBE_SETS_LOG2) - 1)) == 0)
		q->probe = 1;
	q->use = q->probe || (g && !g->off);
	return q->use;
}

/* Count a probe set's lookup (hit: it was answered) and decide at the window's end. */
static __always_inline void fc_govern(const struct fc_query *q, int hit)
{
	__u32 key = q->gov;
	struct fc_gov *g;

	if (!q->probe)
		return;
	g = bpf_map_lookup_elem(&mpt_fc_gov, &key);
	if (!g)
		return;
	g->hits += hit ? 1 : 0;
	if (++g->probes < MPT_FC_WINDOW)
		return;
	g->off = g->hits * 100 < g->probes * MPT_FC_MIN_HIT_PCT;
	g->probes = 0;
	g->hits = 0;
}

/*
 * Take back a probe's miss (q asked port-less for a managed route whose choice
 * is kept under the ports, and is asked again with them): one lookup, counted
 * once. A window that ended on that miss keeps its decision.
 */
static __always_inline void fc_ungovern(const struct fc_query *q)
{
	__u32 key = q->gov;
	struct fc_gov *g;

	if (!q->probe)
		return;
	g = bpf_map_lookup_elem(&mpt_fc_gov, &key);
	if (g && g->probes)
		g->probes--;
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
	s = fc_flow_is(b, q) ? b : fc_flow_is(a, q) ? a :
	    MPT_READ_ONCE(b->jiffies) < MPT_READ_ONCE(a->jiffies) ? b : a;
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
	s->portless = q->portless;
	s->l4 = q->l4;
	barrier();
	MPT_WRITE_ONCE(s->jiffies, bpf_jiffies64());
}

/*
 * IPv6 (fc6_slot): the same, the FIB's answers only; ip6 is the packet's
 * header (bounds checked by the caller), whose addresses are the key's.
 */
static __always_inline int fc6_flow_is(const struct fc6_slot *s, const struct fc_query *q,
				       const struct ipv6hdr *ip6)
{
	const __be32 *a = (const __be32 *)&ip6->saddr, *b = (const __be32 *)&ip6->daddr;

	return !((s->daddr[0] ^ b[0]) | (s->daddr[1] ^ b[1]) | (s->daddr[2] ^ b[2]) |
		 (s->daddr[3] ^ b[3]) | (s->saddr[0] ^ a[0]) | (s->saddr[1] ^ a[1]) |
		 (s->saddr[2] ^ a[2]) | (s->saddr[3] ^ a[3]) | (s->flowinfo ^ q->flowinfo)) &&
	       s->sport_be == q->sport_be && s->dport_be == q->dport_be && s->proto == q->proto &&
	       s->portless == q->portless && s->iif == q->iif && s->net_lo == q->net_lo;
}

static __always_inline int fc6_is(const struct fc6_slot *s, const struct fc_query *q,
				  const struct ipv6hdr *ip6)
{
	return fc6_flow_is(s, q, ip6) && s->sernum == q->genid && s->discarded == q->discarded;
}

static __always_inline int fc6_try(__u32 i, const struct fc_query *q, const struct ipv6hdr *ip6,
				   struct bpf_fib_lookup *fib)
{
	struct fc6_slot *s = bpf_map_lookup_elem(&mpt_flow_cache6, &i);
	__u64 stamp;

	if (!s)
		return 0;
	stamp = MPT_READ_ONCE(s->jiffies);
	barrier();
	if (!stamp || !fc6_is(s, q, ip6) || !fc_fresh(stamp, s->ok_len, q->need))
		return 0;
	fib->family = AF_INET6;
	fib->ifindex = s->oif;
	__builtin_memcpy(fib->ipv6_dst, s->nh, 16);
	__builtin_memcpy(fib->dmac, s->dmac, ETH_ALEN);
	__builtin_memcpy(fib->smac, s->smac, ETH_ALEN);
	barrier();
	return MPT_READ_ONCE(s->jiffies) == stamp && fc6_is(s, q, ip6);
}

static __always_inline int fc6_lookup(const struct fc_query *q, const struct ipv6hdr *ip6,
				      struct bpf_fib_lookup *fib)
{
	__u32 i = q->set & ((2u << MPT_FC_SETS_LOG2) - 2);
	int r = fc6_try(i, q, ip6, fib) || fc6_try(i + 1, q, ip6, fib);

	fc_govern(q, r);
	return r;
}

static __always_inline void fc6_store(const struct fc_query *q, const struct ipv6hdr *ip6,
				      const struct bpf_fib_lookup *fib)
{
	__u32 i = q->set & ((2u << MPT_FC_SETS_LOG2) - 2), j = i + 1;
	struct fc6_slot *a, *b, *s;

	if (!q->use)
		return;
	a = bpf_map_lookup_elem(&mpt_flow_cache6, &i);
	b = bpf_map_lookup_elem(&mpt_flow_cache6, &j);
	if (!a || !b)
		return;
	s = fc6_flow_is(b, q, ip6) ? b :
	    fc6_flow_is(a, q, ip6) ? a :
	    MPT_READ_ONCE(b->jiffies) < MPT_READ_ONCE(a->jiffies) ? b : a;
	MPT_WRITE_ONCE(s->jiffies, 0);
	barrier();
	__builtin_memcpy(s->saddr, &ip6->saddr, 16);
	__builtin_memcpy(s->daddr, &ip6->daddr, 16);
	s->flowinfo = q->flowinfo;
	s->sport_be = q->sport_be;
	s->dport_be = q->dport_be;
	s->proto = q->proto;
	s->portless = q->portless;
	s->ok_len = q->need;
	s->iif = q->iif;
	s->net_lo = q->net_lo;
	s->sernum = q->genid;
	s->discarded = q->discarded;
	s->oif = fib->ifindex;
	__builtin_memcpy(s->nh, fib->ipv6_dst, 16);
	__builtin_memcpy(s->dmac, fib->dmac, ETH_ALEN);
	__builtin_memcpy(s->smac, fib->smac, ETH_ALEN);
	barrier();
	MPT_WRITE_ONCE(s->jiffies, bpf_jiffies64());
}

#endif /* MPT_FLOW_CACHE_H */

// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * dp.bpf.c - the mproute dataplane: per-route multipath algorithms.
 *
 * One source, two hooks: mpt_dp_xdp (XDP, native or generic) and mpt_dp_tc
 * (tcx ingress). For a packet whose destination falls in a managed route
 * (LPM tries keyed by table and prefix, written by mproute), the program
 * picks the nexthop with the route's algorithm, resolves the nexthop's MAC
 * addresses with bpf_fib_lookup, decrements TTL / hop limit and redirects.
 * Everything it should not handle goes to the stack untouched, counted by
 * reason in mpt_reasons.
 *
 * The maps are the namespace's state maps (maps.bpf.h); user space loads this
 * object with the anchor's map fds reused.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>

#include "mpt/lib/defs.h"
#include "mpt/lib/kern.h"
#include "mpt/lib/parse.h"
#include "mpt/lib/csum.h"
#include "mpt/lib/csum_verify.h"
#include "mpt/lib/veth.h"
#include "mpt/flowhash.h"
#include "maps.bpf.h"
#include "pick.h"
#include "gw_cache.h"
#include "flow_cache.h"

#define MPT_RT_TABLE_MAIN 254

/* Set by user space before load. */
const volatile __u32 mpt_table = MPT_RT_TABLE_MAIN;
/* Generic (skb) XDP: the skb keeps its checksum state through a redirect, no check needed. */
const volatile __u32 mpt_xdp_generic = 0;
/*
 * Native XDP on a device that carries local stacks' packets (veth, tun): their
 * checksums may be left to "offload" (CHECKSUM_PARTIAL), which an XDP redirect
 * loses. Then TCP/UDP checksums are verified, and what cannot be verified goes
 * up (l4-csum): IPv4 UDP without a checksum and tunnels (IPIP, SIT, GRE), whose
 * inner checksum may be partial, and SCTP (CRC32c left to offload). 0 on other
 * devices (NICs): frames from a wire are complete, and the kernel does not
 * verify L4 checksums when it forwards either.
 */
const volatile __u32 mpt_local_stacks = 1;
/*
 * With mpt_local_stacks, on a veth: instead of verifying checksums, ask the
 * skb the frame came from. The veth driver runs its XDP program on a struct
 * veth_xdp_buff { struct xdp_buff xdp; struct sk_buff *skb; }: skb is the one
 * the peer sent (its ip_summed kept through the driver's copy), or NULL for a
 * frame redirected into the veth by XDP (complete as far as anyone can know,
 * as from a wire). Only CHECKSUM_PARTIAL means a checksum is not final: such a
 * packet goes up (l4-csum), every other one is forwarded, tunnels and SCTP
 * included (their partial checksums are CHECKSUM_PARTIAL too). Exact, and
 * cheaper than verifying. Never set for a test run (its xdp_buff is not a
 * veth's) nor for generic XDP.
 */
const volatile __u32 mpt_veth_skb = 0;
/*
 * Flags of the kernel-view FIB lookup: BPF_FIB_LOOKUP_SKIP_NEIGH where the kernel
 * has it (6.3+; older ones refuse unknown flags), which spares the neighbour
 * lookup. Without it an unresolved neighbour answers NO_NEIGH with the route
 * filled in, which the view takes as the answer it is.
 */
const volatile __u32 mpt_view_flags = BPF_FIB_LOOKUP_SKIP_NEIGH;
/* Forward destinations that are not managed routes by the kernel FIB (router fast path). */
const volatile __u32 mpt_fastpath = 1;
/*
 * XDP: the device this object is attached to and its MAC. Like the kernel
 * (ip_rcv drops PACKET_OTHERHOST, ip_forward anything but PACKET_HOST), the
 * dataplane forwards only frames sent to that address (on a bond's slaves too,
 * which receive with the bond's address). 0: not set (a device without an
 * Ethernet address), no check. tc reads the skb's pkt_type instead.
 */
const volatile __u32 mpt_if_index = 0;
const volatile __u8 mpt_if_mac[6] __attribute__((aligned(4))) = {};
/*
 * XDP: the tc program runs on the same device (attach always adds it), so a
 * packet XDP passes up is counted by tc's own verdict on it; XDP counts what
 * it redirects and its hand-overs, the packets tc can still forward that XDP
 * cannot (l4-csum, no-neigh), not the verdicts tc reaches again (ttl, local,
 * not-host, ...). 0 (test runs): XDP counts every reason itself.
 */
const volatile __u32 mpt_tc_follows = 0;
/*
 * XDP: once a second per neighbour (and CPU) hand one packet over to the
 * stack instead of redirecting it (neigh-check), so that the kernel's own
 * neighbour output sees the neighbour in use: bpf_fib_lookup answers with a
 * STALE entry's old address and never moves it on, and without this a
 * neighbour that changed its MAC would stay unreachable for good. (tc always
 * redirects through the neighbour output, bpf_redirect_neigh.) 0 for test
 * runs: every packet is redirected.
 */
const volatile __u32 mpt_neigh_check = 0;
/* All zero: the first value of a route's counters (too large for the stack). */
const volatile struct mpt_route_stats mpt_zero_stats = {};
/* All zero: the first value of a route's round-robin and DRR state (kept off the stack). */
const volatile struct mpt_pcpu_state mpt_zero_pcpu = {};

/*
 * XDP egress devices by ifindex, private to this loaded object (not state):
 * user space fills it with the namespace's devices at attach time. A devmap
 * redirect is resolved by the helper and queued in bulk; a device that is not
 * in it (added after the attach) is reached with bpf_redirect() instead. The
 * kernel removes a device from it when the device goes away.
 */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} mpt_tx_ports SEC(".maps");

/*
 * tc: egress devices whose packets are delivered straight into their peer's
 * namespace (bpf_redirect_peer), private to this loaded object: user space
 * puts there, at attach time, the veths whose peer is in another namespace
 * (the helper drops a packet whose peer is in ours) and that have no qdisc or
 * egress program of their own to bypass. Such a packet skips the egress
 * device's transmit (its qdisc, egress tc, captures on it, its tx counters)
 * and the peer's backlog queue: it enters the peer's ingress at once, as the
 * kernel's veth transmit would have put it there, GSO size and checksum state
 * kept. Devices not in the map (or added later) get bpf_redirect_neigh.
 * Direct-mapped (an array lookup is inlined, a hash lookup is a call and a
 * hash): slot = ifindex mod MPT_PEER_SLOTS holds the ifindex, 0 for none; a
 * device whose slot is taken is left out.
 */
#define MPT_PEER_SLOTS 256

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MPT_PEER_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} mpt_peer_ports SEC(".maps");

static __always_inline int peer_port(int ifindex)
{
	__u32 slot = (__u32)ifindex & (MPT_PEER_SLOTS - 1);
	__u32 *v = bpf_map_lookup_elem(&mpt_peer_ports, &slot);

	return v && *v == (__u32)ifindex;
}

/* When XDP last handed a packet for a neighbour to the kernel (see mpt_neigh_check). */
struct neigh_seen {
	__u64 ns;
};

#define MPT_NEIGH_SLOTS_LOG2 12
#define MPT_NEIGH_CHECK_NS 1000000000ull

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1 << MPT_NEIGH_SLOTS_LOG2);
	__type(key, __u32);
	__type(value, struct neigh_seen);
} mpt_neigh_seen SEC(".maps");

struct pkt {
	struct net_device *dev; /* the ingress device (kernel struct; 0: unknown) */
	void *data;
	void *data_end;
	__u32 ingress_ifindex;
	__u32 len;        /* bytes on the wire, for counters and DRR */
	void *l3;         /* the IP header (kept as a pointer: the verifier tracks it) */
	__u8 family;
	__u8 vlan;        /* carries one VLAN tag */
	__u16 tot_len;    /* L3 length, for the MTU check (0: skip) */
	__u8 gso;         /* a GSO skb: its segments, not its length, meet the MTU */
	__u8 not_host;    /* not sent to the ingress device's own address (reported before what parse finds in an IP packet) */
	struct mpt_flow_key key;
	int l4;           /* hash ports too */
	__u32 hit_slot;   /* a managed choice from the flow cache: its counters' slot */
	__be16 sport_be;  /* the packet's own ports (the key may hold an ICMP error's inner ones) */
	__be16 dport_be;
	__u16 csum_off;   /* XDP checksum check: offset of the TCP/UDP header, 0 = nothing to check */
	__u8 unverifiable; /* a checksum or an inner one XDP cannot verify (see mpt_local_stacks) */
	__u16 csum_len;   /* its length with payload */
	__u8 cached;      /* decided by a flow cache hit */
};

static __always_inline void count_reason(__u32 r)
{
	__u64 *c = bpf_map_lookup_elem(&mpt_reasons, &r);

	if (c)
		*c += 1;
}

/*
 * Parse the inner IPv4 header of an ICMP error into the flow key, so the error
 * hashes like the flow it is about (the hash is symmetric, so the inner
 * direction does not matter).
 */
static __always_inline int parse_inner4(struct pkt *p, void *inner)
{
	struct iphdr *ip = inner;

	if ((void *)(ip + 1) > p->data_end || ip->version != 4 || ip->ihl < 5)
		return -1;
	__builtin_memset(p->key.src, 0, 16);
	__builtin_memset(p->key.dst, 0, 16);
	__builtin_memcpy(p->key.src, &ip->saddr, 4);
	__builtin_memcpy(p->key.dst, &ip->daddr, 4);
	p->key.proto = ip->protocol;
	p->key.sport_be = 0;
	p->key.dport_be = 0;
	p->l4 = 0;
	if (!(ip->frag_off & bpf_htons(IP_OFFSET)) && mpt_flow_is_l4_proto(ip->protocol)) {
		void *l4 = inner + ip->ihl * 4;

		if (mpt_read_ports(l4, p->data_end, &p->key.sport_be, &p->key.dport_be) == 0)
			p->l4 = 1;
	}
	return 0;
}

static __always_inline int parse_inner6(struct pkt *p, void *inner)
{
	struct ipv6hdr *ip6 = inner;

	if ((void *)(ip6 + 1) > p->data_end || ip6->version != 6)
		return -1;
	__builtin_memcpy(p->key.src, &ip6->saddr, 16);
	__builtin_memcpy(p->key.dst, &ip6->daddr, 16);
	p->key.proto = ip6->nexthdr;
	p->key.sport_be = 0;
	p->key.dport_be = 0;
	p->l4 = 0;
	if (mpt_flow_is_l4_proto(ip6->nexthdr) &&
	    mpt_read_ports(ip6 + 1, p->data_end, &p->key.sport_be, &p->key.dport_be) == 0)
		p->l4 = 1;
	return 0;
}

/* Returns MPT_R_REDIRECTED (0) when the packet is ours to forward, else a reason. */
static __always_inline __u32 parse(struct pkt *p)
{
	__u16 proto;
	int l3 = mpt_eth_l3(p->data, p->data_end, &proto, &p->vlan);
	__u16 off = l3;

	if (l3 < 0)
		return MPT_R_MALFORMED;
	__builtin_memset(&p->key, 0, sizeof(p->key));
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = p->data + off;

		p->l3 = ip;

		if ((void *)(ip + 1) > p->data_end || ip->version != 4)
			return MPT_R_MALFORMED;
		if (ip->ihl != 5)
			return ip->ihl < 5 ? MPT_R_MALFORMED : MPT_R_IP_OPTIONS;
		/* the packet must hold what its header says (trailing padding is fine) */
		if (bpf_ntohs(ip->tot_len) < sizeof(*ip) ||
		    off + (__u32)bpf_ntohs(ip->tot_len) > p->len)
			return MPT_R_MALFORMED;
		if (ip->ttl <= 1)
			return MPT_R_TTL;
		p->family = AF_INET;
		/* what goes on the wire: the whole frame after the Ethernet header */
		p->tot_len = p->len - off;
		p->key.family = AF_INET;
		p->key.proto = ip->protocol;
		__builtin_memcpy(p->key.src, &ip->saddr, 4);
		__builtin_memcpy(p->key.dst, &ip->daddr, 4);
		/*
		 * Any fragment, the first too: l3 only, no ports. The kernel's flow
		 * dissection (multipath hash, rules by port) does not read the first
		 * fragment's ports either, and a datagram's fragments stay together.
		 */
		if (ip->frag_off & bpf_htons(IP_MF | IP_OFFSET))
			return 0;
		if (mpt_flow_is_l4_proto(ip->protocol)) {
			if (mpt_read_ports(ip + 1, p->data_end, &p->key.sport_be, &p->key.dport_be) == 0) {
				p->l4 = 1;
				p->sport_be = p->key.sport_be;
				p->dport_be = p->key.dport_be;
			}
			struct udphdr *uh = (void *)(ip + 1);

			/* an IPv4 UDP checksum of 0 means none: maybe a tunnel's outer header */
			if (ip->protocol == IPPROTO_UDP && (void *)(uh + 1) <= p->data_end &&
			    uh->check == 0) {
				p->unverifiable = 1;
			} else if ((ip->protocol == IPPROTO_TCP || ip->protocol == IPPROTO_UDP) &&
				   !(ip->frag_off & bpf_htons(IP_MF))) {
				__u32 l4len = bpf_ntohs(ip->tot_len) - sizeof(*ip);

				p->csum_off = off + sizeof(*ip);
				p->csum_len = l4len;
			}
		} else if (ip->protocol == 4 || ip->protocol == 41 || ip->protocol == 47) {
			p->unverifiable = 1; /* IPIP, SIT, GRE */
		} else if (ip->protocol == IPPROTO_ICMP) {
			struct icmphdr *ic = (void *)(ip + 1);

			if ((void *)(ic + 1) <= p->data_end && mpt_icmp4_is_err(ic->type))
				parse_inner4(p, ic + 1);
			/* keep the family: an IPv4 error embeds IPv4 */
			p->key.family = AF_INET;
		}
		return 0;
	}
	if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = p->data + off;
		__u8 nh;

		p->l3 = ip6;

		if ((void *)(ip6 + 1) > p->data_end || ip6->version != 6)
			return MPT_R_MALFORMED;
		if (off + sizeof(*ip6) + (__u32)bpf_ntohs(ip6->payload_len) > p->len)
			return MPT_R_MALFORMED;
		if (ip6->payload_len == 0)
			return MPT_R_IPV6_EXT; /* jumbogram (hop-by-hop option) or nothing to route */
		if (ip6->hop_limit <= 1)
			return MPT_R_TTL;
		nh = ip6->nexthdr;
		if (mpt_ipv6_is_ext(nh))
			return MPT_R_IPV6_EXT;
		p->family = AF_INET6;
		p->tot_len = p->len - off;
		p->key.family = AF_INET6;
		p->key.proto = nh;
		__builtin_memcpy(p->key.src, &ip6->saddr, 16);
		__builtin_memcpy(p->key.dst, &ip6->daddr, 16);
		if (mpt_flow_is_l4_proto(nh)) {
			if (mpt_read_ports(ip6 + 1, p->data_end, &p->key.sport_be, &p->key.dport_be) == 0) {
				p->l4 = 1;
				p->sport_be = p->key.sport_be;
				p->dport_be = p->key.dport_be;
			}
			if (nh == IPPROTO_TCP || nh == IPPROTO_UDP) {
				__u32 l4len = bpf_ntohs(ip6->payload_len);

				p->csum_off = off + sizeof(*ip6);
				p->csum_len = l4len;
			}
		} else if (nh == 4 || nh == 41 || nh == 47) {
			p->unverifiable = 1; /* IPv4/IPv6 in IPv6, GRE */
		} else if (nh == IPPROTO_ICMPV6) {
			struct icmp6hdr *ic = (void *)(ip6 + 1);

			if ((void *)(ic + 1) <= p->data_end && mpt_icmp6_is_err(ic->icmp6_type))
				parse_inner6(p, ic + 1);
			p->key.family = AF_INET6;
		}
		return 0;
	}
	return MPT_R_NOT_IP;
}

/*
 * The pseudo-header sum (host order, unfolded) of the TCP/UDP header parse()
 * found (csum_off), taken only when a checksum is verified in software: on a
 * veth the skb says whether it is complete, and tc never verifies.
 */
static __always_inline __u32 pseudo_sum(struct pkt *p)
{
	if (p->family == AF_INET) {
		struct iphdr *ip = p->l3;

		if ((void *)(ip + 1) > p->data_end)
			return 0;
		return mpt_csum_words(&ip->saddr, 8) + ip->protocol + p->csum_len;
	} else {
		struct ipv6hdr *ip6 = p->l3;

		if ((void *)(ip6 + 1) > p->data_end)
			return 0;
		return mpt_csum_words(&ip6->saddr, 32) + ip6->nexthdr + p->csum_len;
	}
}

static __always_inline struct mpt_dp_route *lookup_route(struct pkt *p)
{
	if (p->family == AF_INET) {
		/* for an ICMP error the key holds the inner header: use the outer destination */
		struct mpt_lpm4_key k = { .prefixlen = 64, .table_be = bpf_htonl(mpt_table) };
		struct iphdr *ip = p->l3;

		if ((void *)(ip + 1) > p->data_end)
			return 0;
		__builtin_memcpy(k.addr, &ip->daddr, 4);
		return bpf_map_lookup_elem(&mpt_lpm4, &k);
	} else {
		struct mpt_lpm6_key k = { .prefixlen = 160, .table_be = bpf_htonl(mpt_table) };
		struct ipv6hdr *ip6 = p->l3;

		if ((void *)(ip6 + 1) > p->data_end)
			return 0;
		__builtin_memcpy(k.addr, &ip6->daddr, 16);
		return bpf_map_lookup_elem(&mpt_lpm6, &k);
	}
}

static __always_inline int select_nh(struct pkt *p, struct mpt_dp_route *rt, struct mpt_group *g)
{
	__u32 total = g->total_weight;
	struct mpt_pcpu_state *st;
	void *pcpu;
	__u32 zero = 0;

	if (g->nh_count == 0 || total == 0)
		return -1;
	switch (rt->algo) {
	case MPT_ALGO_L3_HASH:
	case MPT_ALGO_L4_HASH:
	case MPT_DP_ALGO_L3_RES:
	case MPT_DP_ALGO_L4_RES: {
		/*
		 * The route's recipe (hash_fields 0: the algorithm's own fields),
		 * its seed or the namespace's.
		 */
		int l4algo = rt->algo == MPT_ALGO_L4_HASH || rt->algo == MPT_DP_ALGO_L4_RES;
		__u32 fields = rt->hash_fields ? rt->hash_fields : (l4algo ? MPT_HF_L4 : MPT_HF_L3);
		__u32 seed = rt->seed;
		__u32 h;

		if (!(rt->flags & MPT_DPR_F_SEED)) {
			struct mpt_meta *m = bpf_map_lookup_elem(&mpt_meta, &zero);

			seed = m ? m->hash_seed : 0;
		}
		h = mpt_hash(&p->key, p->l4, seed, fields);
		if (rt->algo == MPT_DP_ALGO_L3_RES || rt->algo == MPT_DP_ALGO_L4_RES)
			return mpt_pick_bucket(&rt->id, g, h);
		return mpt_pick_hash(g, h);
	}
	case MPT_ALGO_RANDOM:
		return mpt_pick_random(g, bpf_get_prandom_u32());
	case MPT_ALGO_WRANDOM:
		return mpt_pick_weight(g, bpf_get_prandom_u32() % total);
	case MPT_ALGO_PER_PACKET:
	case MPT_ALGO_DRR:
		break;
	default:
		return -1;
	}
	pcpu = MPT_INNER(mpt_pcpu);
	if (!pcpu)
		return -1;
	st = bpf_map_lookup_elem(pcpu, &rt->id);
	if (!st) {
		bpf_map_update_elem(pcpu, &rt->id, (void *)&mpt_zero_pcpu, BPF_NOEXIST);
		st = bpf_map_lookup_elem(pcpu, &rt->id);
		if (!st)
			return -1;
	}
	if (rt->algo == MPT_ALGO_PER_PACKET) {
		/* weighted round robin: this CPU's packet counter walks the cumulative weights */
		__u32 pos = st->rr++ % total;

		return mpt_pick_weight(g, pos);
	}
	return mpt_pick_drr(g, st, p->len);
}

/* Count a forwarded packet for its managed route: rt, or the slot a flow cache hit named. */
static __always_inline void count_route(struct mpt_dp_route *rt, __u32 hit_slot, int nh, __u32 len)
{
	struct mpt_route_stats *s;
	void *stats;

	if (!rt && !hit_slot)
		return; /* fast path: no managed route to count for */
	if (!rt || rt->stats_slot) {
		/* the route's slot: an indexed per-CPU array element, no hashing */
		__u32 slot = rt ? rt->stats_slot : hit_slot;

		s = bpf_map_lookup_elem(&mpt_slot_stats, &slot);
		if (!s)
			return;
	} else {
		stats = MPT_INNER(mpt_stats);
		if (!stats)
			return;
		s = bpf_map_lookup_elem(stats, &rt->id);
		if (!s) {
			bpf_map_update_elem(stats, &rt->id, (void *)&mpt_zero_stats, BPF_NOEXIST);
			s = bpf_map_lookup_elem(stats, &rt->id);
			if (!s)
				return;
		}
	}
	s->route.packets++;
	s->route.bytes += len;
	if (nh >= 0 && nh < MPT_MAX_NH) {
		__u32 i = (__u32)nh;

		barrier_var(i);
		i &= MPT_MAX_NH - 1;
		s->nh[i].packets++;
		s->nh[i].bytes += len;
	}
}

static __always_inline __u32 fib_reason(long rc)
{
	switch (rc) {
	case BPF_FIB_LKUP_RET_NOT_FWDED:
		return MPT_R_LOCAL;
	case BPF_FIB_LKUP_RET_FWD_DISABLED:
		return MPT_R_FWD_DISABLED;
	case BPF_FIB_LKUP_RET_FRAG_NEEDED:
		return MPT_R_FRAG_NEEDED;
	case BPF_FIB_LKUP_RET_NO_NEIGH:
		return MPT_R_NO_NEIGH;
	default:
		return MPT_R_FIB_OTHER;
	}
}

/* Decrement TTL / hop limit (checksum fixed incrementally) and rewrite the MACs. */
static __always_inline int rewrite(struct pkt *p, struct bpf_fib_lookup *f)
{
	struct ethhdr *eth = p->data;

	if ((void *)(eth + 1) > p->data_end)
		return -1;
	if (p->family == AF_INET) {
		struct iphdr *ip = p->l3;

		if ((void *)(ip + 1) > p->data_end)
			return -1;
		mpt_ipv4_ttl_dec(ip);
	} else {
		struct ipv6hdr *ip6 = p->l3;

		if ((void *)(ip6 + 1) > p->data_end)
			return -1;
		ip6->hop_limit--;
	}
	__builtin_memcpy(eth->h_dest, f->dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, f->smac, ETH_ALEN);
	return 0;
}

/*
 * Whether the namespace's IPv4 FIB lookups read no L4 ports (the flow cache's
 * port-less key, fc_query.portless): it has no rules of its own (a rule may
 * select by ipproto, sport and dport; without custom rules fib_lookup goes
 * straight to the main table) and its multipath hash policy hashes addresses
 * only: 0, or 2, which hashes as 0 a lookup without an skb, as
 * bpf_fib_lookup's (fib_multipath_hash). Policies 1 (L4) and 3 (custom fields)
 * may hash ports. Read with the generation, before the lookup: a rule added
 * since moves rt_genid; a policy change moves nothing, but a packet that reads
 * the new policy asks with the other key, so it is not answered from the old.
 */
static __always_inline __u8 fib4_ports_unread(struct net *net)
{
	__u8 policy = 0;

	if (bpf_core_field_exists(net->ipv4.fib_has_custom_rules) &&
	    net->ipv4.fib_has_custom_rules)
		return 0;
	if (bpf_core_field_exists(net->ipv4.sysctl_fib_multipath_hash_policy))
		policy = net->ipv4.sysctl_fib_multipath_hash_policy;
	return policy == 0 || policy == 2;
}

/*
 * IPv6: the same (fib6_lookup, rt6_multipath_hash: policy 0 hashes addresses,
 * flow label and next header).
 */
static __always_inline __u8 fib6_ports_unread(struct net *net)
{
	__u8 policy = 0;

	if (bpf_core_field_exists(net->ipv6.fib6_has_custom_rules) &&
	    net->ipv6.fib6_has_custom_rules)
		return 0;
	if (bpf_core_field_exists(net->ipv6.sysctl.multipath_hash_policy))
		policy = net->ipv6.sysctl.multipath_hash_policy;
	return policy == 0 || policy == 2;
}

/*
 * The kernel's IPv4 routing generation (net->ipv4.rt_genid) and namespace
 * cookie for this packet's lookups, if they can be trusted by generation:
 * returns 0 where the ingress device is unknown or has forwarding off (the
 * one input of bpf_fib_lookup the generation does not cover, read here as the
 * helper reads it). *portless: fib4_ports_unread.
 */
static __always_inline int fib4_gen(const struct pkt *p, __u32 *gen, __u64 *cookie,
				    __u8 *portless)
{
	struct net_device *dev = p->dev;
	struct in_device *in;
	struct net *net;

	if (!dev)
		return 0;
	net = dev->nd_net.net;
	if (!net)
		return 0;
	in = dev->ip_ptr;
	if (!in || !in->cnf.data[IPV4_DEVCONF_FORWARDING - 1])
		return 0;
	*gen = (__u32)net->ipv4.rt_genid.counter;
	*cookie = net->net_cookie;
	*portless = fib4_ports_unread(net);
	return 1;
}

/*
 * The IPv6 twin of fib4_gen: the namespace's two IPv6 FIB generation words and
 * its cookie, if the packet's lookups can be trusted by them (the ingress
 * device has IPv6 forwarding on, which bpf_fib_lookup reads per packet).
 * IPv6 has no rt_genid: fib6_sernum takes a new value after every route
 * insert or replace (fib6_add), when the trees are flushed (rules added or
 * deleted, address events: rt_genid_bump_ipv6), when a link goes up, when a
 * multipath route loses a member to a link going down, and when a nexthop
 * object is replaced; but not when a route is deleted, which only increments
 * rt6_stats->fib_discarded_routes (fib6_del_route, after the route is
 * unlinked; deletes by link events too). Together they change on every FIB
 * change that can alter a bpf_fib_lookup answer but these, left to the flow
 * cache's two ticks: a carrier loss (NETDEV_CHANGE marks the routes linkdown,
 * which matters with ignore_routes_with_linkdown), a nexthop group losing a
 * member, a device's MTU change (routes' PMTU), a change between multipath
 * hash policies 1 and 3 (fib6_ports_unread). Both words are read before the
 * lookup. Needs the fields (IPv6 built in).
 */
static __always_inline int fib6_gen(const struct pkt *p, __u32 *sernum, __u32 *discarded,
				    __u64 *cookie)
{
	struct net_device *dev = p->dev;
	struct rt6_statistics *st;
	struct inet6_dev *in6;
	struct net *net;

	if (!dev)
		return 0;
	net = dev->nd_net.net;
	if (!net || !bpf_core_field_exists(net->ipv6.rt6_stats))
		return 0;
	in6 = dev->ip6_ptr;
	if (!in6 || !in6->cnf.forwarding)
		return 0;
	st = net->ipv6.rt6_stats;
	if (!st)
		return 0;
	*sernum = (__u32)net->ipv6.fib6_sernum.counter;
	*discarded = st->fib_discarded_routes;
	*cookie = net->net_cookie;
	return 1;
}

/*
 * Router fast path for a destination that is not a managed route: the kernel
 * FIB decides, with the L4 ports filled in so the kernel's own multipath
 * spreads flows (hash policy 1), and with the neighbour resolved. Any answer
 * but success (and, in tc, an unresolved neighbour) leaves the packet to the
 * stack, which then does ARP/ND, ICMP errors and PMTU as usual.
 */
static __always_inline int fast_path(void *ctx, struct pkt *p, struct bpf_fib_lookup *fib, int *neigh,
				     const struct fc_query *q, int cache)
{
	struct ipv6hdr *ip6 = p->l3;
	long rc;

	__builtin_memset(fib, 0, sizeof(*fib));
	fib->family = p->family;
	fib->ifindex = p->ingress_ifindex;
	fib->l4_protocol = p->key.proto;
	fib->sport = p->sport_be;
	fib->dport = p->dport_be;
	fib->tot_len = p->gso ? 0 : p->tot_len;
	if (p->family == AF_INET) {
		struct iphdr *ip = p->l3;

		if ((void *)(ip + 1) > p->data_end)
			return -MPT_R_MALFORMED;
		fib->l4_protocol = ip->protocol;
		fib->tos = ip->tos;
		fib->ipv4_src = ip->saddr;
		fib->ipv4_dst = ip->daddr;
	} else {
		if ((void *)(ip6 + 1) > p->data_end)
			return -MPT_R_MALFORMED;
		fib->l4_protocol = ip6->nexthdr;
		fib->flowinfo = *(__be32 *)ip6 & bpf_htonl(0x0FFFFFFF);
		__builtin_memcpy(fib->ipv6_src, &ip6->saddr, 16);
		__builtin_memcpy(fib->ipv6_dst, &ip6->daddr, 16);
	}
	rc = bpf_fib_lookup(ctx, fib, sizeof(*fib), 0);
	if (rc == BPF_FIB_LKUP_RET_SUCCESS) {
		if (cache) {
			if (p->family == AF_INET)
				fc_store(q, fib, 0, 0);
			else if ((void *)(ip6 + 1) <= p->data_end) /* for the verifier */
				fc6_store(q, ip6, fib);
		}
		return fib->ifindex;
	}
	if (rc == BPF_FIB_LKUP_RET_NO_NEIGH) {
		*neigh = 1;
		return fib->ifindex;
	}
	return -(int)fib_reason(rc);
}

/*
 * Whether the kernel's FIB is known to answer this IPv4 packet with the managed
 * route rt, so that the per-packet kernel-view lookup can be skipped: user
 * space verified the route (MPT_DPR_F_VERIFIED: no custom rules, no other route
 * overlapping the prefix but managed ones, lowest metric, no TOS, no encap, its
 * nexthops ours) at the generation in mpt_meta.fib4_gen, and the kernel's
 * net->ipv4.rt_genid still equals it: every change that could alter the answer
 * increments it (route insert; replace or delete of a route a lookup matched,
 * which user space makes sure of for rt; rules; addresses; link events). The
 * one input of bpf_fib_lookup it does not cover, the ingress device's
 * forwarding switch, is read as the helper reads it (fib4_gen). A managed IPv6
 * route is looked up every time: user space verifies IPv4 routes only (the
 * IPv6 generation words, fib6_gen, serve the flow cache's unmanaged answers).
 *
 * fib4_armed: mpt_meta holds generation gen of the namespace with this cookie
 * (the state's own: a device moved elsewhere keeps its program) as verified;
 * fib4_verified: that, for the generation and cookie flow_cache_answer() read
 * for the packet (fib4_gen, read once, as the flow cache uses them too), and
 * rt is flagged verified.
 */
static __always_inline int fib4_armed(__u64 cookie, __u32 gen)
{
	__u32 zero = 0;
	struct mpt_meta *m = bpf_map_lookup_elem(&mpt_meta, &zero);

	return m && (m->flags & MPT_META_F_FIB4_GEN) && m->fib4_gen == gen &&
	       m->netns_cookie == cookie;
}

static __always_inline int fib4_verified(int have_gen, __u64 cookie, __u32 gen,
					 const struct mpt_dp_route *rt)
{
	return have_gen && (rt->flags & MPT_DPR_F_VERIFIED) && fib4_armed(cookie, gen);
}

/*
 * The checksum gate, native XDP on a device that carries local stacks'
 * packets (mpt_local_stacks): whether this packet's TCP/UDP checksum is final,
 * since a redirect loses the skb's CHECKSUM_PARTIAL. Returns 0 to go on, or
 * MPT_R_L4_CSUM to send it up as an skb before anything is chosen for it (the
 * per-CPU round robin and DRR state must count it once, in the tc program
 * that forwards it). Always 0 for tc (xdp 0) and generic XDP.
 */
static __always_inline __u32 csum_gate(struct xdp_md *xdp, struct pkt *p)
{
	int partial;

	if (!xdp || mpt_xdp_generic || !mpt_local_stacks)
		return 0;
	/* on a veth the skb it came from says so (mpt_veth_skb); -1: no skb to ask */
	partial = mpt_veth_skb ? mpt_veth_skb_partial(xdp, mpt_veth_skb) : -1;
	if (partial > 0)
		return MPT_R_L4_CSUM;
	if (partial == 0)
		return 0;
	/* else verified here, and what cannot be verified goes up */
	if (p->unverifiable || p->key.proto == IPPROTO_SCTP)
		return MPT_R_L4_CSUM;
	if (p->csum_off && !mpt_l4_csum_ok(xdp, p->csum_off, p->csum_len, pseudo_sum(p)))
		return MPT_R_L4_CSUM;
	return 0;
}

/*
 * IPv6: the FIB's answers only (a managed IPv6 route's check stays per packet:
 * its verification is IPv4's). As flow_cache_answer.
 */
static __always_inline int flow_cache_answer6(struct pkt *p, struct bpf_fib_lookup *fib,
					      struct fc_query *q, __u64 *cookie, int *cache, int *ret)
{
	struct ipv6hdr *ip6 = p->l3;

	if ((void *)(ip6 + 1) > p->data_end) {
		*ret = -MPT_R_MALFORMED;
		return 1;
	}
	if (!p->dev || !p->dev->nd_net.net)
		return 0; /* no generation to read (before 6.2) */
	q->portless = fib6_ports_unread(p->dev->nd_net.net);
	q->flowinfo = *(__be32 *)ip6 & bpf_htonl(0x0FFFFFFF);
	q->sport_be = q->portless ? 0 : p->sport_be;
	q->dport_be = q->portless ? 0 : p->dport_be;
	q->proto = ip6->nexthdr;
	q->gov = MPT_FC_GOV_V6;
	q->need = p->gso ? 0 : p->tot_len;
	q->iif = p->ingress_ifindex;
	/*
	 * The governor first (the set needs no generation): while it has the
	 * cache off for this flow, nothing is looked up or stored, and the
	 * generation (three dependent loads) is not read.
	 */
	if (!fc_admit(q, fc6_set(q, ip6)))
		return 0;
	/* the generation before any lookup */
	*cache = fib6_gen(p, &q->genid, &q->discarded, cookie);
	if (*cache) {
		q->net_lo = (__u32)*cookie;
		if (fc6_lookup(q, ip6, fib)) {
			p->cached = 1;
			*ret = fib->ifindex;
			return 1;
		}
	}
	barrier();
	return 0;
}

/*
 * IPv4: the cached answer to q (filled), if the governor lets the flow use the
 * cache: the FIB's, or a managed route's kept choice while the generation it
 * was verified at holds. As flow_cache_answer.
 */
static __always_inline int fc4_answer(struct pkt *p, struct bpf_fib_lookup *fib, int *nh_out,
				      struct fc_query *q, __u64 cookie, int *ret)
{
	struct fc_hit hit;

	if (!fc_admit(q, fc_set(q)) || !fc_lookup(q, fib, &hit))
		return 0;
	if (!hit.stats_slot) {
		p->cached = 1;
		*ret = fib->ifindex;
		return 1;
	}
	if (fib4_armed(cookie, q->genid)) {
		p->cached = 1;
		*nh_out = hit.nh_idx;
		p->hit_slot = hit.stats_slot;
		fib->family = AF_INET;
		*ret = fib->ifindex;
		return 1;
	}
	return 0;
}

/*
 * The flow cache's answer (flow_cache.h), for the FIB's answer or (IPv4) a
 * managed route's kept choice. Reads the generation before any lookup and fills
 * q, *cookie and *cache (1: the packet has a cache key, q, for fast_path and
 * the managed path to store their answers under). Returns 1 when the packet is
 * decided, *ret being decide()'s answer (an egress ifindex, *fib filled and,
 * for a managed choice, *nh_out and p->hit_slot set; or -(reason)), 0 on a
 * miss.
 */
static __always_inline int flow_cache_answer(struct pkt *p, struct bpf_fib_lookup *fib, int *nh_out,
					     struct fc_query *q, __u64 *cookie, int *cache, int *ret)
{
	struct iphdr *ip = p->l3;

	if (p->family != AF_INET)
		return flow_cache_answer6(p, fib, q, cookie, cache, ret);
	if ((void *)(ip + 1) > p->data_end) {
		*ret = -MPT_R_MALFORMED;
		return 1;
	}
	/* the generation before any lookup */
	*cache = fib4_gen(p, &q->genid, cookie, &q->portless);
	if (*cache) {
		q->saddr = ip->saddr;
		q->daddr = ip->daddr;
		q->sport_be = q->portless ? 0 : p->sport_be;
		q->dport_be = q->portless ? 0 : p->dport_be;
		q->proto = ip->protocol;
		q->tos = ip->tos;
		q->l4 = p->l4 ? 1 : 0;
		q->gov = MPT_FC_GOV_V4;
		q->need = p->gso ? 0 : p->tot_len;
		q->iif = p->ingress_ifindex;
		q->net_lo = (__u32)*cookie;
		if (fc4_answer(p, fib, nh_out, q, *cookie, ret))
			return 1;
	}
	barrier();
	return 0;
}

/*
 * The managed route for this packet's destination, or 0 where the kernel
 * decides: no managed prefix, a hole in one (another owner's route there,
 * MPT_DPR_F_FOREIGN), or a managed route the kernel no longer has as installed
 * (MPT_DPR_F_DRIFT).
 */
static __always_inline struct mpt_dp_route *managed_route(struct pkt *p)
{
	struct mpt_dp_route *rt = lookup_route(p);

	if (rt && (rt->flags & (MPT_DPR_F_FOREIGN | MPT_DPR_F_DRIFT)))
		rt = 0;
	return rt;
}

/*
 * The managed path's check against the kernel's own view: whether the kernel's
 * FIB answers this packet with the managed route rt (group g). Local
 * destinations, forwarding disabled on the ingress device,
 * blackhole/unreachable/prohibit go to the stack (-(reason)), and so does a
 * packet the kernel matches with another route: a more specific one added with
 * ip route inside a managed prefix (or a rule sending the packet to another
 * table) wins in the kernel, and then the kernel forwards it. 0: ours.
 * Clobbers *fib.
 */
static __always_inline int kernel_view(void *ctx, struct pkt *p, const struct mpt_dp_route *rt,
				       struct mpt_group *g, struct bpf_fib_lookup *fib)
{
	long rc;

	__builtin_memset(fib, 0, sizeof(*fib));
	fib->family = p->family;
	fib->ifindex = p->ingress_ifindex;
	/* the packet's own ports: rules may select by them (ipproto, sport, dport) */
	fib->sport = p->sport_be;
	fib->dport = p->dport_be;
	if (p->family == AF_INET) {
		struct iphdr *ip = p->l3;

		if ((void *)(ip + 1) > p->data_end)
			return -MPT_R_MALFORMED;
		fib->ipv4_src = ip->saddr;
		fib->ipv4_dst = ip->daddr;
		fib->tos = ip->tos;
		fib->l4_protocol = ip->protocol;
	} else {
		struct ipv6hdr *ip6 = p->l3;

		if ((void *)(ip6 + 1) > p->data_end)
			return -MPT_R_MALFORMED;
		__builtin_memcpy(fib->ipv6_src, &ip6->saddr, 16);
		__builtin_memcpy(fib->ipv6_dst, &ip6->daddr, 16);
		fib->l4_protocol = ip6->nexthdr;
		fib->flowinfo = *(__be32 *)ip6 & bpf_htonl(0x0FFFFFFF);
	}
	rc = bpf_fib_lookup(ctx, fib, sizeof(*fib), mpt_view_flags);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS && rc != BPF_FIB_LKUP_RET_NO_NEIGH)
		return -(int)fib_reason(rc);
	if (fib->rt_metric != rt->id.metric || !mpt_group_has(g, fib))
		return -MPT_R_NO_ROUTE;
	return 0;
}

/*
 * The managed path's last step: nexthop nh of group g, chosen for this packet,
 * resolved to its MACs and checked against its device's MTU, from the gateway
 * cache (gw_cache.h) or with a direct lookup on its device. Returns as
 * decide(). keep: store the choice in the flow cache under q (for rt's
 * counters slot).
 */
static __always_inline int resolve_nh(void *ctx, struct pkt *p, const struct mpt_dp_route *rt,
				      struct mpt_group *g, int nh, struct bpf_fib_lookup *fib,
				      int *neigh, const struct fc_query *q, int keep)
{
	__u32 idx = (__u32)nh;
	struct mpt_nh *n;
	long rc;

	barrier_var(idx);
	idx &= MPT_MAX_NH - 1;
	n = &g->nh[idx];

	if (n->family && mpt_nh_cached(n, p->gso ? 0 : p->tot_len, fib)) {
		/* the neighbour, for bpf_redirect_neigh and the neighbour check */
		fib->family = n->family;
		if (n->family == AF_INET)
			__builtin_memcpy(&fib->ipv4_dst, n->gw, 4);
		else
			__builtin_memcpy(fib->ipv6_dst, n->gw, 16);
		if (keep && n->family == AF_INET) {
			fib->ifindex = n->ifindex;
			fc_store(q, fib, rt->stats_slot, (__u8)idx);
		}
		return n->ifindex;
	}
	__builtin_memset(fib, 0, sizeof(*fib));
	fib->ifindex = n->ifindex;
	fib->tot_len = p->gso ? 0 : p->tot_len;
	if (n->family == AF_INET6) {
		fib->family = AF_INET6;
		__builtin_memcpy(fib->ipv6_dst, n->gw, 16);
	} else if (n->family == AF_INET) {
		fib->family = AF_INET;
		__builtin_memcpy(&fib->ipv4_dst, n->gw, 4);
	} else {
		/* device route: the destination itself is on the link */
		struct iphdr *ip = p->l3;
		struct ipv6hdr *ip6 = p->l3;

		fib->family = p->family;
		if (p->family == AF_INET) {
			if ((void *)(ip + 1) > p->data_end)
				return -MPT_R_MALFORMED;
			fib->ipv4_dst = ip->daddr;
		} else {
			if ((void *)(ip6 + 1) > p->data_end)
				return -MPT_R_MALFORMED;
			__builtin_memcpy(fib->ipv6_dst, &ip6->daddr, 16);
		}
	}
	rc = bpf_fib_lookup(ctx, fib, sizeof(*fib), BPF_FIB_LOOKUP_DIRECT | BPF_FIB_LOOKUP_OUTPUT);
	if (rc == BPF_FIB_LKUP_RET_NO_NEIGH) {
		*neigh = 1;
		return n->ifindex;
	}
	if (rc == BPF_FIB_LKUP_RET_FRAG_NEEDED)
		return -MPT_R_FRAG_NEEDED;
	/* its link is down, or the gateway is not on its device */
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return -MPT_R_NO_NEXTHOP;
	if (fib->ifindex != n->ifindex)
		return -MPT_R_NO_NEXTHOP; /* gateway not reachable through its device */
	if (n->family)
		mpt_nh_remember(n, p->gso ? 0 : p->tot_len, fib);
	if (keep && fib->family == AF_INET)
		fc_store(q, fib, rt->stats_slot, (__u8)idx);
	return n->ifindex;
}

/*
 * The managed path: the packet's destination is the managed route rt. The
 * kernel's view first (kernel_view), skipped for an IPv4 route verified at the
 * current generation (fib4_verified); then the route's algorithm picks the
 * nexthop (*nh_out) and resolve_nh resolves it. cache, q, cookie: the flow
 * cache's key (flow_cache_answer). Returns as decide().
 */
static __always_inline int managed_path(void *ctx, struct pkt *p, struct mpt_dp_route *rt,
					struct bpf_fib_lookup *fib, int *nh_out, int *neigh,
					const struct fc_query *q, __u64 cookie, int cache)
{
	struct mpt_group *g;
	int keep = 0, nh, r;
	void *groups = MPT_INNER(mpt_groups);

	if (!groups)
		return -MPT_R_NO_NEXTHOP;
	g = bpf_map_lookup_elem(groups, &rt->group);
	if (!g)
		return -MPT_R_NO_NEXTHOP;
	/* cache: the generation read; verified routes and kept choices are IPv4's only */
	cache = cache && p->family == AF_INET;
	if (fib4_verified(cache, cookie, q->genid, rt)) {
		/* a choice the flow alone makes, on a route with a counters slot: kept */
		keep = cache && rt->stats_slot && q->proto != IPPROTO_ICMP &&
		       (rt->algo == MPT_ALGO_L3_HASH || (rt->algo == MPT_ALGO_L4_HASH && p->l4));
	} else {
		r = kernel_view(ctx, p, rt, g, fib);
		if (r)
			return r;
	}
	nh = select_nh(p, rt, g);
	if (nh < 0 || nh >= MPT_MAX_NH)
		return -MPT_R_NO_NEXTHOP;
	*nh_out = nh;
	return resolve_nh(ctx, p, rt, g, nh, fib, neigh, q, keep);
}

/*
 * Whether a hash route's choice reads the packet's L4 header: its recipe
 * hashes the ports or the protocol (both hashed only where the ports were
 * read: mpt_flow_hash_fields), or it has none and is l4-hash (whose own recipe
 * does). Such a choice is kept in the flow cache under the flow's ports,
 * others port-less where the FIB's answers are (fc_query.portless).
 */
static __always_inline int choice_reads_ports(const struct mpt_dp_route *rt)
{
	__u16 f = rt->hash_fields;

	if (!f)
		f = rt->algo == MPT_ALGO_L4_HASH ? MPT_HF_L4 : MPT_HF_L3;
	return (f & (MPT_HF_PORTS | MPT_HF_IP_PROTO)) != 0;
}

/*
 * The decision, common to both hooks. Returns the egress ifindex (> 0) with
 * *fib filled for a redirect, or -(reason) to hand the packet to the stack.
 * *neigh is set when the gateway's neighbour is unresolved (tc can still
 * redirect with bpf_redirect_neigh). In order: the packet (parse, not-host),
 * the checksum gate, the flow cache, then the managed path for a managed
 * route's destination, else the fast path (the kernel FIB's answer).
 */
static __always_inline int decide(void *ctx, struct xdp_md *xdp, struct pkt *p,
				  struct bpf_fib_lookup *fib, int *nh_out,
				  struct mpt_dp_route **rt_out, int *neigh)
{
	struct mpt_dp_route *rt;
	/*
	 * Zeroed though only read where cache is set: clang may load a field
	 * of q it spilled ahead of the test that guards it, and before 6.3 the
	 * verifier refuses a read of stack never written.
	 */
	struct fc_query q = {};
	int cache = 0, ret;
	__u64 cookie = 0;
	__u32 r;

	r = parse(p);
	/*
	 * An IP frame not sent to this host (another host's, broadcast,
	 * multicast) is not-host whatever else it has (a multicast with hop
	 * limit 1, say): the kernel would not forward it anyway.
	 */
	if (p->not_host && r != MPT_R_NOT_IP)
		return -MPT_R_NOT_HOST;
	if (!r)
		r = csum_gate(xdp, p);
	if (r)
		return -(int)r;
	if (flow_cache_answer(p, fib, nh_out, &q, &cookie, &cache, &ret))
		return ret;
	rt = managed_route(p);
	if (!rt)
		return mpt_fastpath ? fast_path(ctx, p, fib, neigh, &q, cache) : -MPT_R_NO_ROUTE;
	*rt_out = rt;
	if (cache && q.portless && p->family == AF_INET && choice_reads_ports(rt)) {
		/* a choice that hashes the ports is kept under them: ask with them */
		fc_ungovern(&q);
		q.portless = 0;
		q.sport_be = p->sport_be;
		q.dport_be = p->dport_be;
		if (fc4_answer(p, fib, nh_out, &q, cookie, &ret))
			return ret;
	}
	return managed_path(ctx, p, rt, fib, nh_out, neigh, &q, cookie, cache);
}

/* XDP hands a packet up to the stack (and to tc there) for reason r: see mpt_tc_follows. */
static __always_inline void xdp_pass_reason(__u32 r)
{
	if (!mpt_tc_follows || r == MPT_R_L4_CSUM || r == MPT_R_NO_NEIGH ||
	    r == MPT_R_NEIGH_CHECK)
		count_reason(r);
}

/*
 * This CPU's clock for the neighbour check, read once per jiffy: the coarse
 * clock moves only with the tick anyway, and bpf_jiffies64() is inlined by
 * the verifier where the clock is a helper call (about 10 ns of a forwarded
 * packet at many flows). Without the coarse clock (before 5.11) the exact one
 * is kept for the jiffy, a tick off at most: nothing for a one-second check.
 */
struct tick_clock {
	__u64 jiffies;
	__u64 ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tick_clock);
} mpt_tick_clock SEC(".maps");

static __always_inline __u64 tick_clock_ns(void)
{
	__u32 zero = 0;
	struct tick_clock *c = bpf_map_lookup_elem(&mpt_tick_clock, &zero);
	__u64 j = bpf_jiffies64();

	if (!c)
		return mpt_clock_ns();
	if (c->jiffies != j || !c->ns) {
		c->ns = mpt_clock_ns();
		c->jiffies = j;
	}
	return c->ns;
}

/*
 * Whether this packet, for the neighbour f names (family and address after a
 * successful lookup) on ifindex, is the one a second that goes through the
 * kernel's neighbour output (mpt_neigh_check). Slots are direct-mapped and the
 * second is the slot's, not the neighbour's: neighbours that share a slot
 * share its one check a second (whichever packet comes when it is due), so
 * none of them starves.
 */
static __always_inline int neigh_due(__u32 ifindex, const struct bpf_fib_lookup *f)
{
	__u32 a0 = f->ipv4_dst, a1 = 0, a2 = 0, a3 = 0, h, i;
	struct neigh_seen *s;
	__u64 now;

	if (f->family != AF_INET) {
		a0 = f->ipv6_dst[0];
		a1 = f->ipv6_dst[1];
		a2 = f->ipv6_dst[2];
		a3 = f->ipv6_dst[3];
	}
	h = (a0 ^ a1 ^ a2 ^ a3) ^ (ifindex * 0x9E3779B1u);
	i = (h * 0x85EBCA6Bu) >> (32 - MPT_NEIGH_SLOTS_LOG2);
	s = bpf_map_lookup_elem(&mpt_neigh_seen, &i);
	if (!s)
		return 0;
	now = tick_clock_ns();
	/* an unused slot starts its second now: a fresh neighbour was just resolved */
	if (s->ns == 0) {
		s->ns = now;
		return 0;
	}
	if (now - s->ns < MPT_NEIGH_CHECK_NS)
		return 0;
	s->ns = now;
	return 1;
}

SEC("xdp")
int mpt_dp_xdp(struct xdp_md *ctx)
{
	struct pkt p = {
		.data = (void *)(long)ctx->data,
		.data_end = (void *)(long)ctx->data_end,
		.ingress_ifindex = ctx->ingress_ifindex,
	};
	struct bpf_fib_lookup fib;
	struct mpt_dp_route *rt = 0;
	int nh = -1, neigh = 0, ifindex;

	/* the ingress device, for the FIB generation (before 6.2 out of reach: no skipping) */
	if (mpt_have_kctx()) {
		struct xdp_buff *kctx = bpf_cast_to_kern_ctx(ctx);

		p.dev = kctx->rxq->dev;
	}
	p.len = p.data_end - p.data;
	if (mpt_if_index) {
		struct ethhdr *eth = p.data;

		if ((void *)(eth + 1) > p.data_end) {
			xdp_pass_reason(MPT_R_MALFORMED);
			return XDP_PASS;
		}
		p.not_host = *(__u32 *)eth->h_dest != *(const volatile __u32 *)mpt_if_mac ||
			     *(__u16 *)&eth->h_dest[4] != *(const volatile __u16 *)&mpt_if_mac[4];
	}
	ifindex = decide(ctx, ctx, &p, &fib, &nh, &rt, &neigh);
	if (ifindex <= 0 || neigh) {
		xdp_pass_reason(ifindex <= 0 ? (__u32)-ifindex : MPT_R_NO_NEIGH);
		return XDP_PASS;
	}
	/*
	 * Not for a flow cache hit: the answer was taken at most two ticks ago
	 * by a lookup whose packet came here, so a neighbour in use is checked
	 * by the packet that refreshes its flows' answers (within 8 ms of its
	 * second at HZ=250), and a hit saves the clock and the slot.
	 */
	if (mpt_neigh_check && !p.cached && neigh_due((__u32)ifindex, &fib)) {
		xdp_pass_reason(MPT_R_NEIGH_CHECK);
		return XDP_PASS;
	}
	if (p.vlan) {
		/* drop the tag: move the MACs 4 bytes up, then shrink the head */
		struct ethhdr *eth = p.data;
		__u8 macs[12];

		if ((void *)(eth + 1) + 4 > p.data_end) {
			xdp_pass_reason(MPT_R_VLAN);
			return XDP_PASS;
		}
		__builtin_memcpy(macs, eth, 12);
		__builtin_memcpy((void *)eth + 4, macs, 12);
		if (bpf_xdp_adjust_head(ctx, 4)) {
			xdp_pass_reason(MPT_R_VLAN);
			return XDP_PASS;
		}
		p.data = (void *)(long)ctx->data;
		p.data_end = (void *)(long)ctx->data_end;
		p.l3 = p.data + ETH_HLEN;
		p.vlan = 0;
	}
	if (rewrite(&p, &fib)) {
		xdp_pass_reason(MPT_R_MALFORMED);
		return XDP_PASS;
	}
	count_route(rt, p.hit_slot, nh, p.len);
	count_reason(MPT_R_REDIRECTED);
	{
		long act = bpf_redirect_map(&mpt_tx_ports, (__u32)ifindex, XDP_PASS);

		return act == XDP_PASS ? bpf_redirect(ifindex, 0) : act;
	}
}

/*
 * Whether a packet delivered straight into a veth peer fits the egress MTU.
 * The veth's transmit checks it (and drops what does not fit); here no one
 * would. A plain packet was checked by the lookup (its length given); a GSO
 * skb's segments are checked here, and one that does not fit takes the
 * transmit path, as without peer delivery.
 */
static __always_inline int peer_fits(struct __sk_buff *skb, const struct pkt *p, int ifindex)
{
	__u32 mtu = 0;

	if (!p->gso)
		return 1;
	/* before 5.12 no helper checks a GSO skb's segments: the transmit path does */
	if (!mpt_have_helper(BPF_FUNC_check_mtu))
		return 0;
	return bpf_check_mtu(skb, (__u32)ifindex, &mtu, 0, BPF_MTU_CHK_SEGS) == 0;
}

SEC("tcx/ingress")
int mpt_dp_tc(struct __sk_buff *skb)
{
	struct pkt p = {
		.data = (void *)(long)skb->data,
		.data_end = (void *)(long)skb->data_end,
		.ingress_ifindex = skb->ingress_ifindex,
		.len = skb->len,
		.gso = skb->gso_segs > 1,
	};
	/* the stack has moved an ingress VLAN tag out of the data already */
	int hw_vlan = skb->vlan_present;
	struct bpf_fib_lookup fib;
	struct mpt_dp_route *rt = 0;
	int nh = -1, neigh = 0, ifindex;

	/* the ingress device, for the FIB generation (before 6.2 out of reach: no skipping) */
	if (mpt_have_kctx()) {
		struct sk_buff *kskb = bpf_cast_to_kern_ctx(skb);

		p.dev = kskb->dev;
	}
	/* PACKET_HOST (0) only, as ip_forward */
	p.not_host = skb->pkt_type != 0;
	ifindex = decide(skb, 0, &p, &fib, &nh, &rt, &neigh);
	if (ifindex <= 0) {
		count_reason((__u32)-ifindex);
		return TCX_NEXT;
	}
	if (p.vlan || hw_vlan) {
		if (bpf_skb_vlan_pop(skb)) {
			count_reason(MPT_R_VLAN);
			return TCX_NEXT;
		}
		p.data = (void *)(long)skb->data;
		p.data_end = (void *)(long)skb->data_end;
		p.l3 = p.data + ETH_HLEN;
		p.vlan = 0;
	}
	if (neigh) {
		/* TTL first, then let the kernel resolve the neighbour and send */
		struct bpf_redir_neigh nb = {};
		struct ethhdr *eth = p.data;

		if ((void *)(eth + 1) > p.data_end) {
			count_reason(MPT_R_MALFORMED);
			return TCX_NEXT;
		}
		if (p.family == AF_INET) {
			struct iphdr *ip = p.l3;

			if ((void *)(ip + 1) > p.data_end) {
				count_reason(MPT_R_MALFORMED);
				return TCX_NEXT;
			}
			mpt_ipv4_ttl_dec(ip);
		} else {
			struct ipv6hdr *ip6 = p.l3;

			if ((void *)(ip6 + 1) > p.data_end) {
				count_reason(MPT_R_MALFORMED);
				return TCX_NEXT;
			}
			ip6->hop_limit--;
		}
		nb.nh_family = fib.family;
		if (fib.family == AF_INET)
			nb.ipv4_nh = fib.ipv4_dst;
		else
			__builtin_memcpy(nb.ipv6_nh, fib.ipv6_dst, 16);
		count_route(rt, p.hit_slot, nh, p.len);
		count_reason(MPT_R_REDIRECTED);
		return bpf_redirect_neigh(ifindex, &nb, sizeof(nb), 0);
	}
	if (rewrite(&p, &fib)) {
		count_reason(MPT_R_MALFORMED);
		return TCX_NEXT;
	}
	count_route(rt, p.hit_slot, nh, p.len);
	count_reason(MPT_R_REDIRECTED);
	/*
	 * Straight into a veth peer's namespace, but once a second per neighbour
	 * through the neighbour output, which keeps the entry confirmed and learns
	 * a changed address (see mpt_neigh_check).
	 */
	if (peer_port(ifindex) && peer_fits(skb, &p, ifindex) &&
	    !neigh_due((__u32)ifindex, &fib))
		return bpf_redirect_peer(ifindex, 0);
	/*
	 * Through the kernel's neighbour output, as its own forwarding: a STALE
	 * neighbour is probed and a changed address learnt (the MACs written above
	 * are the lookup's, which the output writes again).
	 */
	{
		struct bpf_redir_neigh nb = { .nh_family = fib.family };

		if (fib.family == AF_INET)
			nb.ipv4_nh = fib.ipv4_dst;
		else
			__builtin_memcpy(nb.ipv6_nh, fib.ipv6_dst, 16);
		return bpf_redirect_neigh(ifindex, &nb, sizeof(nb), 0);
	}
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";

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

#include "maps.bpf.h"
#include "mpt/flowhash.h"

#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define ETH_P_8021Q 0x8100
#define ETH_P_8021AD 0x88A8
#define ETH_ALEN 6
#define ETH_HLEN 14
#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_ICMP 1
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define IPPROTO_ICMPV6 58
#define IPPROTO_SCTP 132
#define IP_MF 0x2000
#define IP_OFFSET 0x1FFF
#define TC_ACT_REDIRECT 7
#define MPT_RT_TABLE_MAIN 254
/* DRR quantum per unit of weight, in bytes. */
#define MPT_DRR_QUANTUM 1514

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
#define MPT_READ_ONCE(x) (*(const volatile __typeof__(x) *)&(x))
#define MPT_WRITE_ONCE(x, v) (*(volatile __typeof__(x) *)&(x) = (v))
#define MPT_NH_SLOTS_LOG2 10

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1 << MPT_NH_SLOTS_LOG2);
	__type(key, __u32);
	__type(value, struct nh_cache_slot);
} mpt_nh_cache SEC(".maps");

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
	__be16 sport_be;  /* the packet's own ports (the key may hold an ICMP error's inner ones) */
	__be16 dport_be;
	__u16 csum_off;   /* XDP checksum check: offset of the TCP/UDP header, 0 = nothing to check */
	__u8 unverifiable; /* a checksum or an inner one XDP cannot verify (see mpt_local_stacks) */
	__u16 csum_len;   /* its length with payload */
};

static __always_inline void count_reason(__u32 r)
{
	__u64 *c = bpf_map_lookup_elem(&mpt_reasons, &r);

	if (c)
		*c += 1;
}

static __always_inline int is_icmp4_err(__u8 type)
{
	/* icmp_is_err(): DEST_UNREACH, SOURCE_QUENCH, REDIRECT, TIME_EXCEEDED, PARAMETERPROB */
	return type == 3 || type == 4 || type == 5 || type == 11 || type == 12;
}

static __always_inline int is_icmp6_err(__u8 type)
{
	/* DST_UNREACH, PACKET_TOO_BIG, TIME_EXCEED, PARAMPROB */
	return type >= 1 && type <= 4;
}

/* Sum of the big-endian 16-bit words of an address pair (host order, unfolded). */
static __always_inline __u32 csum_words(const void *a, int len)
{
	const __be16 *w = a;
	__u32 s = 0;
	int i;

	for (i = 0; i < len / 2; i++)
		s += bpf_ntohs(w[i]);
	return s;
}

#define MPT_CSUM_CHUNK 64
/* Longest TCP/UDP segment the XDP path checks (a 9000-byte jumbo frame and then some). */
#define MPT_CSUM_MAX_CHUNKS 144

/*
 * Whether the TCP/UDP checksum of the segment at off (len bytes) is complete.
 * A local stack behind a veth hands over CHECKSUM_PARTIAL packets whose checksum
 * field holds only the pseudo-header sum; an XDP redirect turns them into frames
 * and sends them out like that, and the receiver drops them. Such packets fail
 * this check and go to the stack (or to tc), which completes them.
 */
struct csum_ctx {
	struct xdp_md *xdp;
	__u32 off;
	__u32 len;
	__u32 failed;
	__u32 pad;
	__u64 sum;
	__u8 buf[MPT_CSUM_CHUNK];
};

/*
 * Chunk i of the checksum walk, as a bpf_loop() callback. Its control flow depends
 * only on i and the (unchanging) length, so the verifier checks it once.
 */
static long csum_step(__u64 i, void *data)
{
	struct csum_ctx *c = data;
	__u32 start = (__u32)i * MPT_CSUM_CHUNK;
	__u32 n, words;
	long r;

	if (start >= c->len)
		return 1;
	n = c->len - start;
	if (n > MPT_CSUM_CHUNK)
		n = MPT_CSUM_CHUNK;
	/* 1..MPT_CSUM_CHUNK, in a form the verifier can see */
	barrier_var(n);
	n = ((n - 1) & (MPT_CSUM_CHUNK - 1)) + 1;
	__builtin_memset(c->buf, 0, sizeof(c->buf));
	if (bpf_xdp_load_bytes(c->xdp, c->off + start, c->buf, n)) {
		c->failed = 1;
		return 1;
	}
	/* zero padding to a multiple of 4 leaves the one's complement sum unchanged */
	words = (n + 3) & ~3U;
	if (words > MPT_CSUM_CHUNK)
		words = MPT_CSUM_CHUNK;
	r = bpf_csum_diff(0, 0, (__be32 *)c->buf, words, 0);
	if (r < 0) {
		c->failed = 1;
		return 1;
	}
	c->sum += (__u32)r;
	return 0;
}

/* A block of 2^k bytes at q (k >= 5) by bpf_csum_diff, if the segment has it. */
#define CSUM_BLOCK(n)                                                          \
	if (rem & (n)) {                                                       \
		long r_;                                                       \
		if (q + (n) > end)                                             \
			return -1;                                             \
		r_ = bpf_csum_diff(0, 0, (__be32 *)q, (n), 0);                 \
		if (r_ < 0)                                                    \
			return -1;                                             \
		sum += (__u32)r_;                                              \
		q += (n);                                                      \
	}

/*
 * The sum (in memory order, as bpf_csum_diff gives it) of a segment that lies
 * wholly in the frame's linear data, read in place: 512-byte blocks, then one
 * block of each power of two the rest has, the last words and bytes added
 * inline. -1 when the segment is not linear or longer than this handles.
 */
static __always_inline __s64 csum_linear(struct xdp_md *ctx, __u32 off, __u32 len)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u64 sum = 0;
	__u32 rem = len;
	void *q;
	int i;

	if (off > 127 || len > 512 * 8)
		return -1;
	/* bounds the verifier can see (the compiler must not drop the masks) */
	barrier_var(off);
	off &= 127;
	barrier_var(len);
	len &= 8191;
	rem = len;
	q = data + off;
	if (q + len > end || q + len < q)
		return -1;
	for (i = 0; i < 8; i++) {
		long r;

		if (rem < 512)
			break;
		if (q + 512 > end)
			return -1;
		r = bpf_csum_diff(0, 0, (__be32 *)q, 512, 0);
		if (r < 0)
			return -1;
		sum += (__u32)r;
		q += 512;
		rem -= 512;
	}
	if (rem >= 512)
		return -1;
	CSUM_BLOCK(256)
	CSUM_BLOCK(128)
	CSUM_BLOCK(64)
	CSUM_BLOCK(32)
	/* then up to 7 whole words */
	for (i = 0; i < 7; i++) {
		if ((__u32)i >= ((rem & 31) >> 2))
			break;
		if (q + 4 > end)
			return -1;
		sum += *(__u32 *)q;
		q += 4;
	}
	/* 1 to 3 last bytes, as the zero-padded word they start */
	if (rem & 3) {
		__u8 *b = q;
		__u32 w = 0;

		if ((void *)(b + 1) > end)
			return -1;
		w = b[0];
		if ((rem & 3) > 1) {
			if ((void *)(b + 2) > end)
				return -1;
			w |= (__u32)b[1] << 8;
		}
		if ((rem & 3) > 2) {
			if ((void *)(b + 3) > end)
				return -1;
			w |= (__u32)b[2] << 16;
		}
		sum += w;
	}
	return sum;
}

__noinline int mpt_l4_csum_ok(struct xdp_md *ctx, __u32 off, __u32 len, __u32 pseudo)
{
	struct csum_ctx c = { .xdp = ctx, .off = off, .len = len };
	__s64 lin;
	__u64 sum;

	if (!ctx || len == 0 || len > MPT_CSUM_CHUNK * MPT_CSUM_MAX_CHUNKS)
		return 0;
	lin = csum_linear(ctx, off, len);
	if (lin >= 0) {
		sum = lin;
	} else {
		bpf_loop(MPT_CSUM_MAX_CHUNKS, csum_step, &c, 0);
		if (c.failed)
			return 0;
		sum = c.sum;
	}
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	/* bpf_csum_diff sums in memory order (little-endian here): swap to host order */
	sum = ((sum & 0xff) << 8) | (sum >> 8);
	sum += pseudo;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return sum == 0xffff;
}

/* Ports of a TCP/UDP/SCTP header at l4 (all three start with sport, dport). */
static __always_inline int read_ports(void *l4, void *end, __be16 *sport, __be16 *dport)
{
	__be16 *p = l4;

	if ((void *)(p + 2) > end)
		return -1;
	*sport = p[0];
	*dport = p[1];
	return 0;
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

		if (read_ports(l4, p->data_end, &p->key.sport_be, &p->key.dport_be) == 0)
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
	    read_ports(ip6 + 1, p->data_end, &p->key.sport_be, &p->key.dport_be) == 0)
		p->l4 = 1;
	return 0;
}

/* Returns MPT_R_REDIRECTED (0) when the packet is ours to forward, else a reason. */
static __always_inline __u32 parse(struct pkt *p)
{
	struct ethhdr *eth = p->data;
	__u16 proto;
	__u16 off = ETH_HLEN;

	if ((void *)(eth + 1) > p->data_end)
		return MPT_R_MALFORMED;
	proto = eth->h_proto;
	if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD)) {
		__be16 *inner = (void *)(eth + 1) + 2;

		if ((void *)(inner + 1) > p->data_end)
			return MPT_R_MALFORMED;
		proto = *inner;
		off += 4;
		p->vlan = 1;
	}
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
			if (read_ports(ip + 1, p->data_end, &p->key.sport_be, &p->key.dport_be) == 0) {
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

			if ((void *)(ic + 1) <= p->data_end && is_icmp4_err(ic->type))
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
		/* hop-by-hop, routing, fragment, destination options, AH, mobility, HIP, shim6, experimental */
		if (nh == 0 || nh == 43 || nh == 44 || nh == 60 || nh == 51 || nh == 135 ||
		    nh == 139 || nh == 140 || nh == 253 || nh == 254)
			return MPT_R_IPV6_EXT;
		p->family = AF_INET6;
		p->tot_len = p->len - off;
		p->key.family = AF_INET6;
		p->key.proto = nh;
		__builtin_memcpy(p->key.src, &ip6->saddr, 16);
		__builtin_memcpy(p->key.dst, &ip6->daddr, 16);
		if (mpt_flow_is_l4_proto(nh)) {
			if (read_ports(ip6 + 1, p->data_end, &p->key.sport_be, &p->key.dport_be) == 0) {
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

			if ((void *)(ic + 1) <= p->data_end && is_icmp6_err(ic->icmp6_type))
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
		return csum_words(&ip->saddr, 8) + ip->protocol + p->csum_len;
	} else {
		struct ipv6hdr *ip6 = p->l3;

		if ((void *)(ip6 + 1) > p->data_end)
			return 0;
		return csum_words(&ip6->saddr, 32) + ip6->nexthdr + p->csum_len;
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

/*
 * The pickers and the hash are global functions: the verifier checks each once
 * instead of once per call site and path, which keeps the programs far below
 * its complexity limit.
 */
__noinline __u32 mpt_hash(const struct mpt_flow_key *k, int l4, __u32 seed)
{
	if (!k)
		return 0;
	return mpt_flow_hash(k, l4, seed);
}

/* Weighted pick of a position in [0, total) over cum_weight. */
__noinline int mpt_pick_weight(const struct mpt_group *g, __u32 pos)
{
	int i;

	if (!g)
		return -1;
	for (i = 0; i < MPT_MAX_NH; i++) {
		if (i >= g->nh_count)
			break;
		if (g->nh[i].upper_bound >= 0 && pos < g->nh[i].cum_weight)
			return i;
	}
	return -1;
}

__noinline int mpt_pick_hash(const struct mpt_group *g, __u32 h)
{
	int i;

	if (!g)
		return -1;
	for (i = 0; i < MPT_MAX_NH; i++) {
		if (i >= g->nh_count)
			break;
		if (g->nh[i].upper_bound >= 0 && h <= (__u32)g->nh[i].upper_bound)
			return i;
	}
	return -1;
}

/* Whether the group has the nexthop a FIB lookup answered (family 0: device route). */
__noinline int mpt_group_has(const struct mpt_group *g, const struct bpf_fib_lookup *f)
{
	__u32 ifindex;
	__u8 family;
	int i;

	if (!g || !f)
		return 0;
	ifindex = f->ifindex;
	family = f->family;
	for (i = 0; i < MPT_MAX_NH; i++) {
		const struct mpt_nh *n = &g->nh[i];

		if (i >= g->nh_count)
			break;
		if (n->ifindex != ifindex)
			continue;
		if (n->family == 0)
			return 1;
		if (n->family != family)
			continue;
		if (family == AF_INET && __builtin_memcmp(n->gw, &f->ipv4_dst, 4) == 0)
			return 1;
		if (family == AF_INET6 && __builtin_memcmp(n->gw, f->ipv6_dst, 16) == 0)
			return 1;
	}
	return 0;
}

/*
 * Uniform over the nexthops, weights ignored. If the one drawn is unusable,
 * fall back to a weighted draw over the usable ones.
 */
__noinline int mpt_pick_random(const struct mpt_group *g, __u32 r)
{
	__u32 n, j;

	if (!g)
		return -1;
	n = g->nh_count;
	if (n == 0 || n > MPT_MAX_NH)
		return -1;
	j = r % n;
	/* the verifier does not follow '%': bound j by a mask the compiler must keep */
	barrier_var(j);
	j &= MPT_MAX_NH - 1;
	if (g->nh[j].upper_bound >= 0)
		return j;
	return mpt_pick_hash(g, r >> 1);
}

/*
 * DRR by bytes, per CPU: nexthop drr_idx is served while its deficit covers the
 * packet; then the turn passes and the next usable nexthop's deficit grows by
 * weight x MPT_DRR_QUANTUM. Deficits persist, so shares follow the weights. A
 * packet no deficit covers after a full round (a GSO skb, a quantum smaller
 * than the frame) goes to the nexthop whose turn it is, which runs into debt
 * it repays in later turns.
 */
struct drr_ctx {
	const struct mpt_group *g;
	struct mpt_pcpu_state *st;
	__u32 len;
	__u32 n;
	int chosen;
};

/* One step of the DRR rotation, as a bpf_loop() callback (verified once). */
static long drr_step(__u64 i, void *data)
{
	struct drr_ctx *c = data;
	const struct mpt_group *g = c->g;
	struct mpt_pcpu_state *st = c->st;
	__u32 idx = st->drr_idx;

	if (idx >= c->n)
		idx = 0;
	idx &= MPT_MAX_NH - 1;
	if (g->nh[idx].upper_bound >= 0) {
		if (st->drr_deficit[idx] >= (__s32)c->len || i >= 2 * (__u64)c->n) {
			st->drr_deficit[idx] -= c->len;
			st->drr_idx = idx;
			c->chosen = idx;
			return 1;
		}
	} else {
		st->drr_deficit[idx] = 0;
	}
	idx++;
	if (idx >= c->n)
		idx = 0;
	idx &= MPT_MAX_NH - 1;
	if (g->nh[idx].upper_bound >= 0 && st->drr_deficit[idx] < 64 * 1024)
		st->drr_deficit[idx] += g->nh[idx].weight * MPT_DRR_QUANTUM;
	st->drr_idx = idx;
	return 0;
}

__noinline int mpt_pick_drr(const struct mpt_group *g, struct mpt_pcpu_state *st, __u32 len)
{
	struct drr_ctx c = { .g = g, .st = st, .len = len, .chosen = -1 };

	if (!g || !st)
		return -1;
	c.n = g->nh_count;
	if (c.n == 0 || c.n > MPT_MAX_NH)
		return -1;
	bpf_loop(2 * MPT_MAX_NH + 1, drr_step, &c, 0);
	return c.chosen;
}

static __always_inline int select_nh(struct pkt *p, struct mpt_dp_route *rt, struct mpt_group *g)
{
	__u32 total = g->total_weight;
	struct mpt_pcpu_state *st;
	__u32 zero = 0;

	if (g->nh_count == 0 || total == 0)
		return -1;
	switch (rt->algo) {
	case MPT_ALGO_L3_HASH:
	case MPT_ALGO_L4_HASH: {
		struct mpt_meta *m = bpf_map_lookup_elem(&mpt_meta, &zero);
		__u32 seed = m ? m->hash_seed : 0;
		__u32 h = mpt_hash(&p->key, rt->algo == MPT_ALGO_L4_HASH && p->l4, seed);

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
	st = bpf_map_lookup_elem(&mpt_pcpu, &rt->id);
	if (!st) {
		bpf_map_update_elem(&mpt_pcpu, &rt->id, (void *)&mpt_zero_pcpu, BPF_NOEXIST);
		st = bpf_map_lookup_elem(&mpt_pcpu, &rt->id);
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

static __always_inline void count_route(struct mpt_dp_route *rt, int nh, __u32 len)
{
	struct mpt_route_stats *s;

	if (!rt)
		return; /* fast path: no managed route to count for */
	if (rt->stats_slot) {
		/* the route's slot: an indexed per-CPU array element, no hashing */
		__u32 slot = rt->stats_slot;

		s = bpf_map_lookup_elem(&mpt_slot_stats, &slot);
	} else {
		s = bpf_map_lookup_elem(&mpt_stats, &rt->id);
	}
	if (!s) {
		bpf_map_update_elem(&mpt_stats, &rt->id, (void *)&mpt_zero_stats, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&mpt_stats, &rt->id);
		if (!s)
			return;
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
		__u32 c;

		if ((void *)(ip + 1) > p->data_end)
			return -1;
		/* RFC 1624: HC' = ~(~HC + ~m + m'); TTL is the high byte of its 16-bit word */
		c = (__u32)ip->check + bpf_htons(0x0100);
		ip->check = (__sum16)(c + (c >= 0xFFFF));
		ip->ttl--;
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
 * Router fast path for a destination that is not a managed route: the kernel
 * FIB decides, with the L4 ports filled in so the kernel's own multipath
 * spreads flows (hash policy 1), and with the neighbour resolved. Any answer
 * but success (and, in tc, an unresolved neighbour) leaves the packet to the
 * stack, which then does ARP/ND, ICMP errors and PMTU as usual.
 */
static __always_inline int fast_path(void *ctx, struct pkt *p, struct bpf_fib_lookup *fib, int *neigh)
{
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
		struct ipv6hdr *ip6 = p->l3;

		if ((void *)(ip6 + 1) > p->data_end)
			return -MPT_R_MALFORMED;
		fib->l4_protocol = ip6->nexthdr;
		fib->flowinfo = *(__be32 *)ip6 & bpf_htonl(0x0FFFFFFF);
		__builtin_memcpy(fib->ipv6_src, &ip6->saddr, 16);
		__builtin_memcpy(fib->ipv6_dst, &ip6->daddr, 16);
	}
	rc = bpf_fib_lookup(ctx, fib, sizeof(*fib), 0);
	if (rc == BPF_FIB_LKUP_RET_SUCCESS)
		return fib->ifindex;
	if (rc == BPF_FIB_LKUP_RET_NO_NEIGH) {
		*neigh = 1;
		return fib->ifindex;
	}
	return -(int)fib_reason(rc);
}

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

extern void *bpf_cast_to_kern_ctx(void *) __ksym;

#define MPT_CHECKSUM_PARTIAL 3

/* The veth driver's XDP buffer (drivers/net/veth.c), matched by name in the kernel's BTF. */
struct veth_xdp_buff___mpt {
	struct xdp_buff xdp;
	struct sk_buff *skb;
} __attribute__((preserve_access_index));

/*
 * On a veth (see mpt_veth_skb): 1 if the frame's skb has CHECKSUM_PARTIAL, 0 if
 * not or if there is no skb (an XDP frame), -1 if it cannot be told.
 * mpt_veth_skb 2: the kernel's BTF has the veth's buffer type (veth built in),
 * a direct read; 1: veth is a module, whose types a cast cannot name: a probe
 * read at the offset after the xdp_buff (user space loads with 2 and falls
 * back to 1 if the verifier refuses).
 */
static __always_inline int veth_skb_partial(struct xdp_md *ctx)
{
	struct xdp_buff *x = bpf_cast_to_kern_ctx(ctx);
	struct sk_buff *skb = 0, *s;

	if (mpt_veth_skb == 2) {
		skb = bpf_core_cast(x, struct veth_xdp_buff___mpt)->skb;
	} else if (bpf_probe_read_kernel(&skb, sizeof(skb),
					 (void *)((__u64)x + bpf_core_type_size(struct xdp_buff)))) {
		return -1;
	}
	if (!skb)
		return 0;
	s = bpf_core_cast(skb, struct sk_buff);
	return BPF_CORE_READ_BITFIELD(s, ip_summed) == MPT_CHECKSUM_PARTIAL;
}

/*
 * Whether the kernel's FIB is known to answer this IPv4 packet with the managed
 * route rt, so that the per-packet kernel-view lookup can be skipped: user
 * space verified the route (MPT_DPR_F_SOLE: no custom rules, no other route
 * overlapping the prefix but managed ones, lowest metric, no TOS, no encap, its
 * nexthops ours) at the generation in mpt_meta.fib4_gen, and the kernel's
 * net->ipv4.rt_genid still equals it: every change that could alter the answer
 * increments it (route insert; replace or delete of a route a lookup matched,
 * which user space makes sure of for rt; rules; addresses; link events). The
 * one input of bpf_fib_lookup it does not cover, the ingress device's
 * forwarding switch, is read here as the helper reads it. IPv6 has no such
 * counter (fib6_sernum ignores deletions): always looked up.
 */
static __always_inline int fib4_sole(struct pkt *p, struct mpt_dp_route *rt)
{
	struct net_device *dev = p->dev;
	struct in_device *in;
	struct mpt_meta *m;
	struct net *net;
	__u32 zero = 0;

	if (p->family != AF_INET || !(rt->flags & MPT_DPR_F_SOLE) || !dev)
		return 0;
	m = bpf_map_lookup_elem(&mpt_meta, &zero);
	if (!m || !(m->flags & MPT_META_F_FIB4_GEN))
		return 0;
	net = dev->nd_net.net;
	/* the state's own namespace (a device moved elsewhere keeps its program) */
	if (!net || net->net_cookie != m->netns_cookie)
		return 0;
	if ((__u32)net->ipv4.rt_genid.counter != m->fib4_gen)
		return 0;
	in = dev->ip_ptr;
	if (!in || !in->cnf.data[IPV4_DEVCONF_FORWARDING - 1])
		return 0;
	return 1;
}

/*
 * The decision, common to both hooks. Returns the egress ifindex (> 0) with
 * *fib filled for a redirect, or -(reason) to hand the packet to the stack.
 * *neigh is set when the gateway's neighbour is unresolved (tc can still
 * redirect with bpf_redirect_neigh).
 */
static __always_inline int decide(void *ctx, struct xdp_md *xdp, struct pkt *p,
				  struct bpf_fib_lookup *fib, int *nh_out,
				  struct mpt_dp_route **rt_out, int *neigh)
{
	struct mpt_dp_route *rt;
	struct mpt_group *g;
	__u32 r;
	long rc;
	int nh;

	r = parse(p);
	/*
	 * An IP frame not sent to this host (another host's, broadcast,
	 * multicast) is not-host whatever else it has (a multicast with hop
	 * limit 1, say): the kernel would not forward it anyway.
	 */
	if (p->not_host && r != MPT_R_NOT_IP)
		return -MPT_R_NOT_HOST;
	if (r)
		return -(int)r;
	/*
	 * XDP: a packet whose TCP/UDP checksum is not complete goes up as an skb before
	 * anything is chosen for it (the per-CPU round robin and DRR state must count it
	 * once, in the tc program that forwards it).
	 */
	if (xdp && !mpt_xdp_generic && mpt_local_stacks) {
		int partial = mpt_veth_skb ? veth_skb_partial(xdp) : -1;

		if (partial > 0)
			return -MPT_R_L4_CSUM;
		if (partial == 0)
			goto csum_done;
		if (p->unverifiable || p->key.proto == IPPROTO_SCTP)
			return -MPT_R_L4_CSUM;
		if (p->csum_off &&
		    !mpt_l4_csum_ok(xdp, p->csum_off, p->csum_len, pseudo_sum(p)))
			return -MPT_R_L4_CSUM;
	}
csum_done:
	rt = lookup_route(p);
	/*
	 * a hole in a managed prefix (another owner's route there), or a managed
	 * route the kernel no longer has as installed: the kernel decides
	 */
	if (rt && (rt->flags & (MPT_DPR_F_FOREIGN | MPT_DPR_F_DRIFT)))
		rt = 0;
	if (!rt)
		return mpt_fastpath ? fast_path(ctx, p, fib, neigh) : -MPT_R_NO_ROUTE;
	*rt_out = rt;
	g = bpf_map_lookup_elem(&mpt_groups, &rt->group);
	if (!g)
		return -MPT_R_NO_NEXTHOP;

	/*
	 * The kernel's own view first: local destinations, forwarding disabled on
	 * the ingress device, blackhole/unreachable/prohibit all go to the stack.
	 */
	if (fib4_sole(p, rt))
		goto ours;
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
	rc = bpf_fib_lookup(ctx, fib, sizeof(*fib), BPF_FIB_LOOKUP_SKIP_NEIGH);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return -(int)fib_reason(rc);
	/*
	 * The route the kernel matched must be ours: a more specific route added
	 * with ip route inside a managed prefix (or a rule sending the packet to
	 * another table) wins in the kernel, and then the kernel forwards it.
	 */
	if (fib->rt_metric != rt->id.metric || !mpt_group_has(g, fib))
		return -MPT_R_NO_ROUTE;

ours:
	nh = select_nh(p, rt, g);
	if (nh < 0 || nh >= MPT_MAX_NH)
		return -MPT_R_NO_NEXTHOP;
	*nh_out = nh;

	/* Our nexthop: its MACs, its device's MTU. */
	{
		__u32 idx = (__u32)nh;
		struct mpt_nh *n;

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
		rc = bpf_fib_lookup(ctx, fib, sizeof(*fib),
				    BPF_FIB_LOOKUP_DIRECT | BPF_FIB_LOOKUP_OUTPUT);
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
		return n->ifindex;
	}
}

/* XDP hands a packet up to the stack (and to tc there) for reason r: see mpt_tc_follows. */
static __always_inline void xdp_pass_reason(__u32 r)
{
	if (!mpt_tc_follows || r == MPT_R_L4_CSUM || r == MPT_R_NO_NEIGH ||
	    r == MPT_R_NEIGH_CHECK)
		count_reason(r);
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
	now = bpf_ktime_get_coarse_ns();
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
	struct xdp_buff *kctx = bpf_cast_to_kern_ctx(ctx);
	struct pkt p = {
		.dev = kctx->rxq->dev,
		.data = (void *)(long)ctx->data,
		.data_end = (void *)(long)ctx->data_end,
		.ingress_ifindex = ctx->ingress_ifindex,
	};
	struct bpf_fib_lookup fib;
	struct mpt_dp_route *rt = 0;
	int nh = -1, neigh = 0, ifindex;

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
	if (mpt_neigh_check && neigh_due((__u32)ifindex, &fib)) {
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
	count_route(rt, nh, p.len);
	count_reason(MPT_R_REDIRECTED);
	{
		long act = bpf_redirect_map(&mpt_tx_ports, (__u32)ifindex, XDP_PASS);

		return act == XDP_PASS ? bpf_redirect(ifindex, 0) : act;
	}
}

SEC("tcx/ingress")
int mpt_dp_tc(struct __sk_buff *skb)
{
	struct sk_buff *kskb = bpf_cast_to_kern_ctx(skb);
	struct pkt p = {
		.dev = kskb->dev,
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
			__u32 c;

			if ((void *)(ip + 1) > p.data_end) {
				count_reason(MPT_R_MALFORMED);
				return TCX_NEXT;
			}
			c = (__u32)ip->check + bpf_htons(0x0100);
			ip->check = (__sum16)(c + (c >= 0xFFFF));
			ip->ttl--;
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
		count_route(rt, nh, p.len);
		count_reason(MPT_R_REDIRECTED);
		return bpf_redirect_neigh(ifindex, &nb, sizeof(nb), 0);
	}
	if (rewrite(&p, &fib)) {
		count_reason(MPT_R_MALFORMED);
		return TCX_NEXT;
	}
	count_route(rt, nh, p.len);
	count_reason(MPT_R_REDIRECTED);
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

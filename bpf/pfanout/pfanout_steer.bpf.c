// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * pfanout_steer.bpf.c - pfanout's steering program for AF_PACKET fanout mode
 * `ebpf` (PACKET_FANOUT_EBPF).
 *
 * pfanout installs pfanout_steer on a fanout group with PACKET_FANOUT_DATA.
 * For every packet the group receives, the kernel (fanout_demux_bpf) runs it
 * and takes `return value % members` as the index of the member socket that
 * gets the packet. The value returned is mproute's symmetric flow hash
 * (mpt/flowhash.h, the BPF copy of mpt_model::hash::flow_hash) of the packet,
 * with ports (l4) and pfanout_seed:
 *
 *   - both directions of a flow go to the same member (the hash is symmetric),
 *     which the kernel's own `hash` mode does not promise;
 *   - an ICMP/ICMPv6 error goes where the flow it is about goes: it is hashed
 *     by the packet it quotes (as bpf/mproute/dp.bpf.c does), whose reversed
 *     tuple hashes like the original;
 *   - every fragment of a datagram (the first one too) goes to one member: a
 *     fragment is hashed by its addresses only (l3), since only the first one
 *     carries ports;
 *   - user space can compute the same value (mpt_model::hash::flow_hash with
 *     l4 = true and the same seed) to know which member a flow lands on.
 *
 * What is hashed, by skb->protocol (anything but IPv4 and IPv6 returns 0):
 *   IPv4   version 4 and ihl >= 5, else 0. A fragment (MF set or a fragment
 *          offset) hashes l3. TCP, UDP and SCTP hash l4 with the ports at
 *          ihl * 4. An ICMP error (types 3, 4, 5, 11, 12) hashes its quoted
 *          packet. Anything else hashes l3.
 *   IPv6   version 6, else 0. Up to PFANOUT_V6_EXT_MAX extension headers are
 *          skipped: hop-by-hop (0), routing (43) and destination options (60)
 *          of (hdrlen + 1) * 8 bytes; a fragment header (44) makes the packet
 *          a fragment (l3). Then as for IPv4, with ICMPv6 errors (types 1-4).
 *          Other extension headers (AH, ESP, ...), or more than
 *          PFANOUT_V6_EXT_MAX of them, hash l3.
 * A header of the packet itself that cannot be read (the packet is shorter
 * than it says) returns 0. The quoted packet of an ICMP error is parsed the
 * same way (version, extension headers, fragments), one level deep: without a
 * readable IP header the error hashes l3 by its own addresses; without the
 * quoted ports, l3 by the quoted addresses.
 *
 * The value is at most 31 bits (mpt_flow_hash() returns jhash2 >> 1), so it is
 * never negative as the int a socket filter returns.
 *
 * Reads: BPF_PROG_TYPE_SOCKET_FILTER programs have no direct packet access,
 * and fanout runs them with skb->data at the network header for received
 * packets but at the MAC header for outgoing ones (dev_queue_xmit_nit), so
 * every read is bpf_skb_load_bytes_relative(..., BPF_HDR_START_NET): offsets
 * from the network header in both directions. That helper reads the linear
 * part of the skb only; drivers and GRO keep the headers there, and a header
 * beyond it counts as unreadable. VLAN tags are taken off received packets
 * before fanout sees them (skb->protocol is the inner one); an outgoing
 * packet tagged in software (skb->protocol 802.1Q) returns 0.
 *
 * pfanout_seed is set by user space before load (rodata).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "mpt/lib/defs.h"
#include "mpt/lib/parse.h"
#include "mpt/flowhash.h"

/* Set by user space before load: the seed of every hash. */
const volatile __u32 pfanout_seed = 0;

/* IPv6 extension headers skipped before the upper-layer header. */
#define PFANOUT_V6_EXT_MAX 4

#define PFANOUT_NH_HOPOPTS  0
#define PFANOUT_NH_ROUTING  43
#define PFANOUT_NH_FRAGMENT 44
#define PFANOUT_NH_DSTOPTS  60

/* Where the upper-layer header of a parsed IP header is. */
struct pfanout_l3 {
	__u32 l4_off; /* its offset from the network header */
	int frag;     /* the packet is a fragment: no ports */
};

/* len bytes at off from the network header into buf; 0, or < 0 when beyond the linear data. */
static __always_inline long load(struct __sk_buff *skb, __u32 off, void *buf, __u32 len)
{
	return bpf_skb_load_bytes_relative(skb, off, buf, len, BPF_HDR_START_NET);
}

/*
 * The IP header (IPv4, or IPv6 with its extension headers) at off into k:
 * family, addresses, protocol (the upper-layer one). 0, or -1 when a header
 * cannot be read or is not what the family says.
 */
static __always_inline int parse_ip(struct __sk_buff *skb, __u32 off, int v6,
				    struct mpt_flow_key *k, struct pfanout_l3 *l3)
{
	if (!v6) {
		struct iphdr ip;

		if (load(skb, off, &ip, sizeof(ip)) < 0 || ip.version != 4 || ip.ihl < 5)
			return -1;
		k->family = MPT_FAMILY_V4;
		k->proto = ip.protocol;
		__builtin_memcpy(k->src, &ip.saddr, 4);
		__builtin_memcpy(k->dst, &ip.daddr, 4);
		l3->l4_off = off + ip.ihl * 4;
		/* any fragment, the first too: its datagram's fragments stay together */
		l3->frag = (ip.frag_off & bpf_htons(IP_MF | IP_OFFSET)) != 0;
		return 0;
	}

	struct ipv6hdr ip6;
	__u32 at = off + sizeof(ip6);
	__u8 nh;
	int i;

	if (load(skb, off, &ip6, sizeof(ip6)) < 0 || ip6.version != 6)
		return -1;
	k->family = MPT_FAMILY_V6;
	__builtin_memcpy(k->src, &ip6.saddr, 16);
	__builtin_memcpy(k->dst, &ip6.daddr, 16);
	l3->frag = 0;
	nh = ip6.nexthdr;
MPT_UNROLL
	for (i = 0; i < PFANOUT_V6_EXT_MAX; i++) {
		__u8 eh[2]; /* next header, length */

		if (nh != PFANOUT_NH_HOPOPTS && nh != PFANOUT_NH_ROUTING &&
		    nh != PFANOUT_NH_DSTOPTS && nh != PFANOUT_NH_FRAGMENT)
			break;
		if (load(skb, at, eh, sizeof(eh)) < 0)
			return -1;
		if (nh == PFANOUT_NH_FRAGMENT) {
			/* the first fragment too, as for IPv4: l3 */
			l3->frag = 1;
			at += 8;
			nh = eh[0];
			break;
		}
		at += ((__u32)eh[1] + 1) * 8;
		nh = eh[0];
	}
	k->proto = nh;
	l3->l4_off = at;
	return 0;
}

/* The ports of the TCP/UDP/SCTP header at off into k: 0, or -1 when they cannot be read. */
static __always_inline int read_ports(struct __sk_buff *skb, __u32 off, struct mpt_flow_key *k)
{
	__be16 p[2];

	if (load(skb, off, p, sizeof(p)) < 0)
		return -1;
	k->sport_be = p[0];
	k->dport_be = p[1];
	return 0;
}

SEC("socket")
int pfanout_steer(struct __sk_buff *skb)
{
	struct mpt_flow_key key = {};
	struct pfanout_l3 l3 = {};
	__u16 proto = bpf_ntohs((__u16)skb->protocol);
	int v6, l4 = 0;

	if (proto == ETH_P_IP)
		v6 = 0;
	else if (proto == ETH_P_IPV6)
		v6 = 1;
	else
		return 0;

	if (parse_ip(skb, 0, v6, &key, &l3) < 0)
		return 0;
	if (l3.frag)
		goto hash;
	if (mpt_flow_is_l4_proto(key.proto)) {
		if (read_ports(skb, l3.l4_off, &key) < 0)
			return 0;
		l4 = 1;
		goto hash;
	}
	if (key.proto == (v6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP)) {
		struct mpt_flow_key inner = {};
		struct pfanout_l3 il3 = {};
		__u8 type;

		if (load(skb, l3.l4_off, &type, sizeof(type)) < 0)
			return 0;
		if (!(v6 ? mpt_icmp6_is_err(type) : mpt_icmp4_is_err(type)))
			goto hash;
		/*
		 * An error: the flow it is about is quoted after the 8-byte
		 * ICMP header, in the error's own family.
		 */
		if (parse_ip(skb, l3.l4_off + 8, v6, &inner, &il3) < 0)
			goto hash; /* nothing quoted: the error's own addresses */
		if (!il3.frag && mpt_flow_is_l4_proto(inner.proto) &&
		    read_ports(skb, il3.l4_off, &inner) == 0)
			l4 = 1;
		__builtin_memcpy(&key, &inner, sizeof(key));
	}
hash:
	return (int)mpt_flow_hash(&key, l4, pfanout_seed);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";

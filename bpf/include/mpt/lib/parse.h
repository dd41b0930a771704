/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * mpt/lib/parse.h - header parsing every program shares: the Ethernet header
 * with one VLAN tag, the ports of TCP/UDP/SCTP, which ICMP and ICMPv6 types are
 * errors (they quote the packet they are about), and which IPv6 next headers
 * are extension headers. Bounds are checked against data_end on every access,
 * in forms the verifier follows.
 */
#ifndef MPT_LIB_PARSE_H
#define MPT_LIB_PARSE_H

#include "mpt/lib/defs.h"

/*
 * The Ethernet header at data (one 802.1Q or 802.1ad tag allowed): returns the
 * offset of the L3 header, with the EtherType after the tag (network order) in
 * *proto and *vlan set to 1 when a tag was skipped; -1 when the frame is too
 * short for what it says.
 */
static __always_inline int mpt_eth_l3(void *data, void *data_end, __u16 *proto, __u8 *vlan)
{
	struct ethhdr *eth = data;
	__u16 p;

	if ((void *)(eth + 1) > data_end)
		return -1;
	p = eth->h_proto;
	if (p == bpf_htons(ETH_P_8021Q) || p == bpf_htons(ETH_P_8021AD)) {
		__be16 *inner = (void *)(eth + 1) + 2;

		if ((void *)(inner + 1) > data_end)
			return -1;
		*proto = *inner;
		*vlan = 1;
		return ETH_HLEN + 4;
	}
	*proto = p;
	return ETH_HLEN;
}

/* Ports of a TCP/UDP/SCTP header at l4 (all three start with sport, dport). */
static __always_inline int mpt_read_ports(void *l4, void *end, __be16 *sport, __be16 *dport)
{
	__be16 *p = l4;

	if ((void *)(p + 2) > end)
		return -1;
	*sport = p[0];
	*dport = p[1];
	return 0;
}

/* icmp_is_err(): DEST_UNREACH, SOURCE_QUENCH, REDIRECT, TIME_EXCEEDED, PARAMETERPROB */
static __always_inline int mpt_icmp4_is_err(__u8 type)
{
	return type == 3 || type == 4 || type == 5 || type == 11 || type == 12;
}

/* ICMPv6 errors: DST_UNREACH, PACKET_TOO_BIG, TIME_EXCEED, PARAMPROB */
static __always_inline int mpt_icmp6_is_err(__u8 type)
{
	return type >= 1 && type <= 4;
}

/*
 * IPv6 extension headers: hop-by-hop, routing, fragment, destination options,
 * AH, mobility, HIP, shim6 and the two experimental numbers.
 */
static __always_inline int mpt_ipv6_is_ext(__u8 nh)
{
	return nh == 0 || nh == 43 || nh == 44 || nh == 60 || nh == 51 || nh == 135 ||
	       nh == 139 || nh == 140 || nh == 253 || nh == 254;
}

#endif /* MPT_LIB_PARSE_H */

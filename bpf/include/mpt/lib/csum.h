/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * mpt/lib/csum.h - Internet checksum arithmetic every program shares: the sum
 * of a run of 16-bit words, and the TTL decrement with its incremental header
 * checksum fix (RFC 1624).
 */
#ifndef MPT_LIB_CSUM_H
#define MPT_LIB_CSUM_H

/* Sum of the big-endian 16-bit words at a (host order, unfolded); len even. */
static __always_inline __u32 mpt_csum_words(const void *a, int len)
{
	const __be16 *w = a;
	__u32 s = 0;
	int i;

	for (i = 0; i < len / 2; i++)
		s += bpf_ntohs(w[i]);
	return s;
}

/*
 * Decrement the TTL of a (bounds-checked) IPv4 header and fix its checksum:
 * RFC 1624, HC' = ~(~HC + ~m + m'), the TTL being the high byte of its 16-bit
 * word, as the kernel's ip_decrease_ttl().
 */
static __always_inline void mpt_ipv4_ttl_dec(struct iphdr *ip)
{
	__u32 c = (__u32)ip->check + bpf_htons(0x0100);

	ip->check = (__sum16)(c + (c >= 0xFFFF));
	ip->ttl--;
}

#endif /* MPT_LIB_CSUM_H */

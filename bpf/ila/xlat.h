/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * xlat.h - ILA translation of an address and its checksum arithmetic, the C
 * twin of mpt_model::ila::csum (crates/model/src/ila/csum.rs, where the
 * reasoning is written down); a BPF_PROG_TEST_RUN test holds the two together.
 * All 16-bit values here are host order; the address bytes are network order.
 */
#ifndef ILA_XLAT_H
#define ILA_XLAT_H

#include "mpt/ila_abi.h"

/* The C-bit, in the identifier's first 16-bit word (0x10 of address byte 8). */
#define ILA_C_BIT 0x1000

/* One's complement sum of two 16-bit values (end-around carry). */
static __always_inline __u16 ila_add(__u16 a, __u16 b)
{
	__u32 s = (__u32)a + b;

	return (__u16)((s & 0xffff) + (s >> 16));
}

static __always_inline __u16 ila_word(const __u8 *p)
{
	return (__u16)p[0] << 8 | p[1];
}

static __always_inline void ila_put_word(__u8 *p, __u16 w)
{
	p[0] = w >> 8;
	p[1] = w & 0xff;
}

/* One's complement sum of a locator's four words. */
static __always_inline __u16 ila_sum_locator(const __u8 *l)
{
	__u16 s = 0;

	s = ila_add(s, ila_word(l));
	s = ila_add(s, ila_word(l + 2));
	s = ila_add(s, ila_word(l + 4));
	s = ila_add(s, ila_word(l + 6));
	return s;
}

/*
 * Translate the 16-byte address a (in place) to locator to in mode; sir_to_ila
 * says which way. Returns 1 with *diff set when the transport checksum must take
 * diff (adj-transport), 0 when it must be left alone.
 */
static __always_inline int ila_translate(__u8 *a, const __u8 *to, __u8 mode, int sir_to_ila,
					 __u16 *diff)
{
	__u16 d = ila_add(ila_sum_locator(to), (__u16)~ila_sum_locator(a));
	__u16 w4, w7;

	__builtin_memcpy(a, to, 8);
	switch (mode) {
	case ILA_CSUM_ADJUST_TRANSPORT:
		*diff = d;
		return 1;
	case ILA_CSUM_NEUTRAL_MAP_AUTO:
		ila_put_word(a + 14, ila_add(ila_word(a + 14), (__u16)~d));
		return 0;
	case ILA_CSUM_NEUTRAL_MAP:
		w4 = ila_word(a + 8);
		w7 = ila_word(a + 14);
		if (sir_to_ila && !(w4 & ILA_C_BIT)) {
			w4 |= ILA_C_BIT;
			w7 = ila_add(w7, (__u16)~ila_add(d, ILA_C_BIT));
		} else if (!sir_to_ila && (w4 & ILA_C_BIT)) {
			w4 &= (__u16)~ILA_C_BIT;
			w7 = ila_add(w7, (__u16)~ila_add(d, (__u16)~ILA_C_BIT));
		}
		ila_put_word(a + 8, w4);
		ila_put_word(a + 14, w7);
		return 0;
	default:
		/* no-action (and any number user space never writes): the locator alone */
		return 0;
	}
}

/* A complete transport checksum after the sum it covers grew by diff (RFC 1624, eqn. 3). */
static __always_inline __u16 ila_adjust_checksum(__u16 check, __u16 diff)
{
	return (__u16)~ila_add((__u16)~check, diff);
}

/*
 * Offset of the transport checksum from the end of the fixed IPv6 header, for
 * the next header directly after it (no extension header walk, as the kernel's
 * ILA): TCP, UDP (*udp set) and ICMPv6. -1 for anything else.
 */
static __always_inline int ila_l4_csum_at(__u8 nexthdr, int *udp)
{
	switch (nexthdr) {
	case IPPROTO_TCP:
		return 16;
	case IPPROTO_UDP:
		*udp = 1;
		return 6;
	case IPPROTO_ICMPV6:
		return 2;
	default:
		return -1;
	}
}

#endif /* ILA_XLAT_H */

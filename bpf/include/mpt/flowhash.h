/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * mpt/flowhash.h - the mproute flow hash, BPF side.
 *
 * THE DEFINITION IS crates/model/src/hash.rs (mpt_model::hash::flow_hash);
 * this is a bit-for-bit copy of it for the dataplane. Both are held together
 * by crates/bpf/tests/hash_parity.rs (BPF_PROG_TEST_RUN of bpf/test/hash_test.bpf.c
 * against the Rust function). Change both or neither.
 *
 * Primitive: mpt_jhash2() == the kernel's jhash2(k, len, initval)
 * (include/linux/jhash.h, lookup3 over 32-bit words), for len <= 11.
 *
 * Canonical order: (src, sport) and (dst, dport) are compared - addresses as
 * byte strings (memcmp order over 4 bytes for IPv4, 16 for IPv6), then ports
 * as numbers - and the lower pair comes first (lo), the other second (hi); a
 * port always moves with its address. Both directions of a flow hash alike.
 *
 * Word layout. A(addr, i) = the i-th 4-byte group of an address read
 * big-endian: (p[0] << 24) | (p[1] << 16) | (p[2] << 8) | p[3]
 * (= bpf_ntohl of the __be32; = u32::from_be_bytes in Rust).
 *
 *   IPv4 l3:  A(lo,0), A(hi,0)                                    2 words
 *   IPv6 l3:  A(lo,0..3), A(hi,0..3)                              8 words
 *   l4:       l3 words, (lo_port << 16) | hi_port, proto       +2 words
 *
 * The l4 words are appended only if l4 != 0 AND proto is TCP (6), UDP (17)
 * or SCTP (132); any other protocol hashes as l3 (ports and protocol
 * ignored). Ports are taken as host-order values (converted from the *_be
 * fields). Result: mpt_jhash2(words, n, seed) >> 1, a 31-bit value as the
 * kernel's fib_multipath_hash() returns, compared against the hash-threshold
 * upper bounds.
 *
 * The parser fills the key: for fragments (the first one too) it zeroes the
 * ports and passes l4 = 0; for ICMP/ICMPv6 errors it uses the embedded header.
 *
 * The header compiles both for BPF (clang -target bpf with vmlinux.h) and for
 * a plain host C compiler (with <linux/types.h>).
 */
#ifndef MPT_FLOWHASH_H
#define MPT_FLOWHASH_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#ifndef __always_inline
#define __always_inline inline __attribute__((__always_inline__))
#endif

/* Values of struct mpt_flow_key.family (AF_INET / AF_INET6). */
#define MPT_FAMILY_V4 2
#define MPT_FAMILY_V6 10

/* Protocols whose ports take part in the l4 hash. */
#define MPT_IPPROTO_TCP  6
#define MPT_IPPROTO_UDP  17
#define MPT_IPPROTO_SCTP 132

/* Most words mpt_jhash2() accepts; mpt_flow_hash() uses at most 10. */
#define MPT_JHASH_MAX_WORDS 11
#define MPT_FLOW_MAX_WORDS  10

#define MPT_JHASH_INITVAL 0xdeadbeef

/* Full unrolling (clang for BPF; also accepted by a host gcc). */
#ifdef __clang__
#define MPT_UNROLL _Pragma("unroll")
#else
#define MPT_UNROLL _Pragma("GCC unroll 16")
#endif

/*
 * What the parser extracts from a packet. family is MPT_FAMILY_V4 or
 * MPT_FAMILY_V6 (anything other than V6 hashes as IPv4). Addresses are in
 * network order; IPv4 uses bytes 0..3 of src/dst (the rest is ignored).
 * Ports are in network byte order here (the Rust FlowKey holds host-order
 * values). reserved must be 0.
 */
struct mpt_flow_key {
	__u8 family;
	__u8 proto;
	__be16 sport_be;
	__be16 dport_be;
	__u16 reserved;
	__u8 src[16];
	__u8 dst[16];
};

_Static_assert(sizeof(struct mpt_flow_key) == 40, "mpt_flow_key size");
_Static_assert(__builtin_offsetof(struct mpt_flow_key, family) == 0, "family");
_Static_assert(__builtin_offsetof(struct mpt_flow_key, proto) == 1, "proto");
_Static_assert(__builtin_offsetof(struct mpt_flow_key, sport_be) == 2, "sport_be");
_Static_assert(__builtin_offsetof(struct mpt_flow_key, dport_be) == 4, "dport_be");
_Static_assert(__builtin_offsetof(struct mpt_flow_key, reserved) == 6, "reserved");
_Static_assert(__builtin_offsetof(struct mpt_flow_key, src) == 8, "src");
_Static_assert(__builtin_offsetof(struct mpt_flow_key, dst) == 24, "dst");

static __always_inline __u32 mpt_rol32(__u32 w, unsigned int s)
{
	return (w << s) | (w >> ((-s) & 31));
}

/* The kernel's __jhash_mix. */
#define MPT_JHASH_MIX(a, b, c)                                  \
	do {                                                    \
		a -= c; a ^= mpt_rol32(c, 4);  c += b;          \
		b -= a; b ^= mpt_rol32(a, 6);  a += c;          \
		c -= b; c ^= mpt_rol32(b, 8);  b += a;          \
		a -= c; a ^= mpt_rol32(c, 16); c += b;          \
		b -= a; b ^= mpt_rol32(a, 19); a += c;          \
		c -= b; c ^= mpt_rol32(b, 4);  b += a;          \
	} while (0)

/* The kernel's __jhash_final. */
#define MPT_JHASH_FINAL(a, b, c)                                \
	do {                                                    \
		c ^= b; c -= mpt_rol32(b, 14);                  \
		a ^= c; a -= mpt_rol32(c, 11);                  \
		b ^= a; b -= mpt_rol32(a, 25);                  \
		c ^= b; c -= mpt_rol32(b, 16);                  \
		a ^= c; a -= mpt_rol32(c, 4);                   \
		b ^= a; b -= mpt_rol32(a, 14);                  \
		c ^= b; c -= mpt_rol32(b, 24);                  \
	} while (0)

/*
 * The kernel's jhash2(k, len, initval) for len <= MPT_JHASH_MAX_WORDS
 * (larger len is clamped; k must hold len words). Verifier-friendly: the loop
 * has no early exit and is fully unrolled, so every k[] index is a
 * compile-time constant; only the branches depend on len (len == 0 runs
 * neither branch: c = initial value, as in the kernel).
 */
static __always_inline __u32 mpt_jhash2(const __u32 *k, __u32 len, __u32 initval)
{
	__u32 a, b, c;
	int i;

	if (len > MPT_JHASH_MAX_WORDS)
		len = MPT_JHASH_MAX_WORDS;
	a = b = c = MPT_JHASH_INITVAL + (len << 2) + initval;

MPT_UNROLL
	for (i = 0; i < MPT_JHASH_MAX_WORDS; i += 3) {
		/* Whole block: the kernel's `while (length > 3)`. */
		if (i + 2 < MPT_JHASH_MAX_WORDS && len > (__u32)i + 3) {
			a += k[i];
			b += k[i + 1];
			c += k[i + 2];
			MPT_JHASH_MIX(a, b, c);
		}
		/* Tail of 1..3 words: the kernel's switch (length). */
		if (len > (__u32)i && len <= (__u32)i + 3) {
			if (i + 2 < MPT_JHASH_MAX_WORDS && len == (__u32)i + 3)
				c += k[i + 2];
			if (i + 1 < MPT_JHASH_MAX_WORDS && len >= (__u32)i + 2)
				b += k[i + 1];
			a += k[i];
			MPT_JHASH_FINAL(a, b, c);
		}
	}
	return c;
}

/* A(p, 0): four bytes read big-endian. */
static __always_inline __u32 mpt_be32_at(const __u8 *p)
{
	return ((__u32)p[0] << 24) | ((__u32)p[1] << 16) | ((__u32)p[2] << 8) | (__u32)p[3];
}

/* Host-order value of a __be16 field, independent of the host's endianness. */
static __always_inline __u16 mpt_be16_val(const __be16 *v)
{
	const __u8 *p = (const __u8 *)v;

	return (__u16)(((__u16)p[0] << 8) | p[1]);
}

static __always_inline int mpt_flow_is_l4_proto(__u8 proto)
{
	return proto == MPT_IPPROTO_TCP || proto == MPT_IPPROTO_UDP || proto == MPT_IPPROTO_SCTP;
}

/*
 * Hash recipe fields (mpt_dp_route.hash_fields): bits of the kernel's
 * fib_multipath_hash_fields, as mpt_model::hash::HashFields. Addresses and
 * ports come in pairs (symmetry). MPT_HF_L3 / MPT_HF_L4 are what l3-hash and
 * l4-hash hash without a recipe.
 */
#define MPT_HF_SRC_IP   0x0001
#define MPT_HF_DST_IP   0x0002
#define MPT_HF_IP_PROTO 0x0004
#define MPT_HF_SRC_PORT 0x0010
#define MPT_HF_DST_PORT 0x0020
#define MPT_HF_IPS      (MPT_HF_SRC_IP | MPT_HF_DST_IP)
#define MPT_HF_PORTS    (MPT_HF_SRC_PORT | MPT_HF_DST_PORT)
#define MPT_HF_L3       MPT_HF_IPS
#define MPT_HF_L4       (MPT_HF_IPS | MPT_HF_IP_PROTO | MPT_HF_PORTS)

/*
 * The 31-bit flow hash of k over a recipe's fields (mpt_model::hash::
 * flow_words_fields): the address words only if the recipe has the addresses
 * (and only they then decide the canonical order with the ports; without them
 * the ports alone do); the two l4 words if l4, the protocol is TCP/UDP/SCTP
 * and the recipe has ports or protocol, a field left out being a 0 word.
 * fields == MPT_HF_L4 is the layout at the top of this file.
 */
static __always_inline __u32 mpt_flow_hash_fields(const struct mpt_flow_key *k, int l4, __u32 seed,
						  __u32 fields)
{
	__u32 w[MPT_JHASH_MAX_WORDS] = { 0 };
	const __u8 *lo = k->src, *hi = k->dst;
	__u16 sport = mpt_be16_val(&k->sport_be);
	__u16 dport = mpt_be16_val(&k->dport_be);
	__u16 lo_port = sport, hi_port = dport;
	int v6 = k->family == MPT_FAMILY_V6;
	int use_ip = (fields & MPT_HF_IPS) == MPT_HF_IPS;
	int cmp = 0, i;
	__u32 n = 0;

	/* Sign of memcmp(src, dst, v6 ? 16 : 4); no early exit (unrollable). */
MPT_UNROLL
	for (i = 0; i < 16; i++) {
		if (use_ip && cmp == 0 && (i < 4 || v6) && k->src[i] != k->dst[i])
			cmp = k->src[i] < k->dst[i] ? -1 : 1;
	}
	if (cmp > 0 || (cmp == 0 && sport > dport)) {
		lo = k->dst;
		hi = k->src;
		lo_port = dport;
		hi_port = sport;
	}

	if (use_ip && v6) {
		w[0] = mpt_be32_at(lo);
		w[1] = mpt_be32_at(lo + 4);
		w[2] = mpt_be32_at(lo + 8);
		w[3] = mpt_be32_at(lo + 12);
		w[4] = mpt_be32_at(hi);
		w[5] = mpt_be32_at(hi + 4);
		w[6] = mpt_be32_at(hi + 8);
		w[7] = mpt_be32_at(hi + 12);
		n = 8;
	} else if (use_ip) {
		w[0] = mpt_be32_at(lo);
		w[1] = mpt_be32_at(hi);
		n = 2;
	}
	if (l4 && (fields & (MPT_HF_PORTS | MPT_HF_IP_PROTO)) && mpt_flow_is_l4_proto(k->proto)) {
		__u32 pw = (fields & MPT_HF_PORTS) == MPT_HF_PORTS ? ((__u32)lo_port << 16) | hi_port : 0;
		__u32 tw = (fields & MPT_HF_IP_PROTO) ? k->proto : 0;

		if (n == 8) {
			w[8] = pw;
			w[9] = tw;
		} else if (n == 2) {
			w[2] = pw;
			w[3] = tw;
		} else {
			w[0] = pw;
			w[1] = tw;
		}
		n += 2;
	}
	return mpt_jhash2(w, n, seed) >> 1;
}

/* The 31-bit flow hash of k: see the word layout at the top of this file. */
static __always_inline __u32 mpt_flow_hash(const struct mpt_flow_key *k, int l4, __u32 seed)
{
	return mpt_flow_hash_fields(k, l4, seed, MPT_HF_L4);
}

#endif /* MPT_FLOWHASH_H */

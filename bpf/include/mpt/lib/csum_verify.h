/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * mpt/lib/csum_verify.h - XDP: whether the TCP/UDP checksum of a segment is
 * complete, for a program that must not redirect a frame whose checksum a local
 * stack left to offload (mpt_l4_csum_ok). Linear data is summed in place with
 * bpf_csum_diff; anything else (a multi-buffer frame) in 64-byte chunks read with
 * bpf_xdp_load_bytes, where the kernel has it (5.18+; before, such a segment
 * counts as not verified and goes up).
 */
#ifndef MPT_LIB_CSUM_VERIFY_H
#define MPT_LIB_CSUM_VERIFY_H

#include "mpt/lib/kern.h"

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
	__u32 off;
	__u32 len;
	__u32 failed;
	__u32 pad;
	__u64 sum;
	__u8 buf[MPT_CSUM_CHUNK];
};

/* Chunk i of the checksum walk: 1 when the walk ends (done, or failed). */
static __always_inline int csum_step(struct xdp_md *xdp, __u32 i, struct csum_ctx *c)
{
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
	if (bpf_xdp_load_bytes(xdp, c->off + start, c->buf, n)) {
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
	/* the frame apart (not in c): with the caller's, this frame must fit 512 bytes (6.1) */
	struct csum_ctx c = { .off = off, .len = len };
	__s64 lin;
	__u64 sum;

	if (!ctx || len == 0 || len > MPT_CSUM_CHUNK * MPT_CSUM_MAX_CHUNKS)
		return 0;
	lin = csum_linear(ctx, off, len);
	if (lin >= 0) {
		sum = lin;
	} else {
		__u32 i;

		if (!mpt_have_helper(BPF_FUNC_xdp_load_bytes))
			return 0;
		/* a bounded loop, not bpf_loop(): see mpt/lib/kern.h */
		for (i = 0; i < MPT_CSUM_MAX_CHUNKS; i++) {
			if (csum_step(ctx, i, &c))
				break;
		}
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

#endif /* MPT_LIB_CSUM_VERIFY_H */

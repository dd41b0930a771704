/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * mpt/lib/veth.h - XDP on a veth: whether the skb a frame came from has its
 * transport checksum left to offload (CHECKSUM_PARTIAL). A veth hands its peer
 * the skbs of local stacks with that state intact, and runs its XDP program on
 * a struct veth_xdp_buff { struct xdp_buff xdp; struct sk_buff *skb; }: skb is
 * the one the peer sent, or NULL for a frame redirected into the veth by XDP
 * (complete as far as anyone can know, as from a wire).
 */
#ifndef MPT_LIB_VETH_H
#define MPT_LIB_VETH_H

#include <bpf/bpf_core_read.h>

#include "mpt/lib/kern.h"

#define MPT_CHECKSUM_PARTIAL 3

/* The veth driver's XDP buffer (drivers/net/veth.c), matched by name in the kernel's BTF. */
struct veth_xdp_buff___mpt {
	struct xdp_buff xdp;
	struct sk_buff *skb;
} __attribute__((preserve_access_index));

/*
 * 1 if the frame's skb has CHECKSUM_PARTIAL, 0 if not or if there is no skb (an
 * XDP frame), -1 if it cannot be told. how (a load-time constant, so that the
 * verifier sees one way only): 2, the kernel's BTF has the veth's buffer type
 * (veth built in), a direct read; 1, veth is a module, whose types a cast
 * cannot name: a probe read at the offset after the xdp_buff. User space sets
 * how only where the veth driver has that buffer (Linux 6.4+); a kernel
 * without bpf_cast_to_kern_ctx (before 6.2) cannot tell: -1.
 */
static __always_inline int mpt_veth_skb_partial(struct xdp_md *ctx, __u32 how)
{
	struct xdp_buff *x;
	struct sk_buff *skb = 0, *s;

	if (!mpt_have_kctx())
		return -1;
	x = bpf_cast_to_kern_ctx(ctx);
	if (how == 2) {
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

#endif /* MPT_LIB_VETH_H */

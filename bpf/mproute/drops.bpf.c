// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * drops.bpf.c - the "dropped" verdict of the XDP dataplane.
 *
 * mpt_dp_xdp counts a packet as redirected when it hands it to the kernel's
 * redirect; the kernel may still fail to deliver it (the target gone or down,
 * a veth peer without NAPI, a full ring), and then drops it silently. These
 * two programs on the kernel's XDP tracepoints count those frames into the
 * namespace's mpt_reasons[MPT_R_DROPPED]:
 *
 *   xdp_redirect_err  a redirect the kernel refused at once (one frame);
 *   xdp_devmap_xmit   a bulk transmit of redirected frames, with the number
 *                     the target device did not take.
 *
 * Tracepoints are global, so each loaded copy is for one device of one
 * namespace (load-time constants) and counts only the frames received there,
 * which only our XDP program redirects. User space pins the two links in
 * /sys/fs/bpf/mproute/<netns-id>/; detaching the dataplane removes them. They
 * hold mpt_reasons only (reasons.bpf.h), so a deleted namespace's other maps
 * do not wait for the next sweep of its pins.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "reasons.bpf.h"

const volatile __u32 mpt_if_index = 0;
const volatile __u64 mpt_netns_cookie = 0;

/*
 * The namespace's identity as user space has it (mpt_sys::netns::id): its cookie,
 * or, with the top bit set, its inode number, on kernels without SO_NETNS_COOKIE
 * (before 5.14), whose net_cookie may never have been set.
 */
static __always_inline int ours(const struct net_device *dev)
{
	struct net *net;

	if (!dev || dev->ifindex != (int)mpt_if_index)
		return 0;
	net = dev->nd_net.net;
	if (mpt_netns_cookie >> 63)
		return net->ns.inum == (__u32)mpt_netns_cookie;
	return net->net_cookie == mpt_netns_cookie;
}

static __always_inline void count_dropped(__u64 n)
{
	__u32 k = MPT_R_DROPPED;
	__u64 *c = bpf_map_lookup_elem(&mpt_reasons, &k);

	if (c)
		*c += n;
}

SEC("tp_btf/xdp_redirect_err")
int BPF_PROG(mpt_drops_redirect_err, const struct net_device *dev, const struct bpf_prog *xdp,
	     const void *tgt, int err, enum bpf_map_type map_type, __u32 map_id, __u32 index)
{
	if (ours(dev))
		count_dropped(1);
	return 0;
}

SEC("tp_btf/xdp_devmap_xmit")
int BPF_PROG(mpt_drops_devmap_xmit, const struct net_device *from_dev,
	     const struct net_device *to_dev, int sent, int drops, int err)
{
	if (drops > 0 && ours(from_dev))
		count_dropped((__u64)drops);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";

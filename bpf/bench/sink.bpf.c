// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * sink.bpf.c - BENCHMARK ONLY: the packet counters of `cargo xtask bench forward`.
 *
 * Three XDP programs that count every frame in a per-CPU array, each in its
 * own slot, and then decide:
 *
 *   mpt_bench_sink  (slot 0) XDP_DROP: on the receiving host, the delivered rate.
 *   mpt_bench_drop  (slot 1) XDP_DROP: on the router's ingress, the ceiling
 *                            (generator + veth + drop, no forwarding).
 *   mpt_bench_pass  (slot 2) XDP_PASS: on the router's ingress when the kernel
 *                            (or a tc program) forwards, the offered rate.
 *
 * An XDP program on a veth also turns on the NAPI ring that frames redirected
 * into its peer need (veth_xdp_xmit drops them without it, and the peer does
 * not even advertise ndo_xdp_xmit), so the pass program is what lets the
 * generator's XDP_TX frames reach a router that has no XDP program of its own.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#define SLOT_SINK 0
#define SLOT_DROP 1
#define SLOT_PASS 2

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u64);
} bench_cnt SEC(".maps");

static __always_inline int count(__u32 slot, int verdict)
{
	__u64 *c = bpf_map_lookup_elem(&bench_cnt, &slot);

	if (c)
		*c += 1;
	return verdict;
}

SEC("xdp")
int mpt_bench_sink(struct xdp_md *ctx)
{
	return count(SLOT_SINK, XDP_DROP);
}

/*
 * mpt_bench_sink_tc (slot 0) drop, on the receiving host's tcx ingress: what
 * a router delivers straight into that veth's namespace (bpf_redirect_peer)
 * enters the stack there without passing the veth's XDP program.
 */
SEC("tcx/ingress")
int mpt_bench_sink_tc(struct __sk_buff *skb)
{
	return count(SLOT_SINK, 2 /* TCX_DROP */);
}

SEC("xdp")
int mpt_bench_drop(struct xdp_md *ctx)
{
	return count(SLOT_DROP, XDP_DROP);
}

SEC("xdp")
int mpt_bench_pass(struct xdp_md *ctx)
{
	return count(SLOT_PASS, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";

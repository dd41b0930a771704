// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * bench_fwd.bpf.c - BENCHMARK ONLY: the baseline of `cargo xtask bench select`.
 *
 * A minimal XDP IPv4 forwarder in the manner of the kernel's samples/bpf/xdp_fwd:
 * parse Ethernet + IPv4 (+ the UDP/TCP ports), one bpf_fib_lookup() with the
 * ports filled in (so an L4 multipath hash policy can use them), rewrite the
 * MACs, decrement the TTL with an incremental checksum fix and
 * redirect to the egress device through the devmap fwd_ports (bpf_redirect()
 * when the device is not in it). Anything else goes to the stack.
 *
 * Two uses: with BPF_PROG_TEST_RUN, next to mpt_dp_xdp, it prices the
 * dataplane's per-route algorithms against a plain FIB forward of the same
 * packet (`cargo xtask bench select`); attached to the router's ingress by
 * `cargo xtask bench forward`, it is the calibration forwarder the packet-rate
 * figures of ../shared/reference/veth-xdp-measurements.md were taken with.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define ETH_P_IP 0x0800
#define ETH_ALEN 6
#define AF_INET 2
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define IP_OFFSET 0x1FFF

/* Egress devices by ifindex (filled by the benchmark; empty under BPF_PROG_TEST_RUN). */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} fwd_ports SEC(".maps");

/*
 * Ethernet + IPv4 without options, TTL above 1: fills the lookup's input
 * (ports too) and *ipp, returns 0; -1 leaves the packet to the stack.
 */
static __always_inline int fwd_prepare(void *data, void *data_end, __u32 ifindex,
				       struct bpf_fib_lookup *fib, struct iphdr **ipp)
{
	struct ethhdr *eth = data;
	struct iphdr *ip;

	if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return -1;
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end || ip->version != 4 || ip->ihl != 5)
		return -1;
	if (ip->ttl <= 1)
		return -1;

	__builtin_memset(fib, 0, sizeof(*fib));
	fib->family = AF_INET;
	fib->tos = ip->tos;
	fib->l4_protocol = ip->protocol;
	fib->tot_len = bpf_ntohs(ip->tot_len);
	fib->ipv4_src = ip->saddr;
	fib->ipv4_dst = ip->daddr;
	fib->ifindex = ifindex;
	if ((ip->protocol == IPPROTO_UDP || ip->protocol == IPPROTO_TCP) &&
	    !(ip->frag_off & bpf_htons(IP_OFFSET))) {
		__be16 *ports = (void *)(ip + 1);

		if ((void *)(ports + 2) > data_end)
			return -1;
		fib->sport = ports[0];
		fib->dport = ports[1];
	}
	*ipp = ip;
	return 0;
}

/* ip_decrease_ttl() (TTL is the high byte of its 16-bit word, RFC 1624) and the lookup's MACs. */
static __always_inline void fwd_rewrite(void *data, struct iphdr *ip, const struct bpf_fib_lookup *fib)
{
	struct ethhdr *eth = data;
	__u32 csum = (__u32)ip->check + bpf_htons(0x0100);

	ip->check = (__sum16)(csum + (csum >= 0xFFFF));
	ip->ttl--;
	__builtin_memcpy(eth->h_dest, fib->dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, fib->smac, ETH_ALEN);
}

SEC("xdp")
int mpt_bench_fwd(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct bpf_fib_lookup fib;
	struct iphdr *ip;
	long rc;

	if (fwd_prepare(data, data_end, ctx->ingress_ifindex, &fib, &ip))
		return XDP_PASS;
	if (bpf_fib_lookup(ctx, &fib, sizeof(fib), 0) != BPF_FIB_LKUP_RET_SUCCESS)
		return XDP_PASS;
	fwd_rewrite(data, ip, &fib);
	rc = bpf_redirect_map(&fwd_ports, fib.ifindex, XDP_PASS);
	if (rc == XDP_PASS)
		rc = bpf_redirect(fib.ifindex, 0);
	return rc;
}

/*
 * The same forwarder on tcx ingress, delivering straight into the egress
 * veth's peer (bpf_redirect_peer; the benchmark's egress veth has its peer in
 * another namespace): the floor of a one-lookup tc forwarder on veth, beside
 * which `cargo xtask bench forward` prices mproute's tc program.
 */
SEC("tcx/ingress")
int mpt_bench_fwd_tc(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct bpf_fib_lookup fib;
	struct iphdr *ip;

	if (fwd_prepare(data, data_end, skb->ingress_ifindex, &fib, &ip))
		return TCX_NEXT;
	if (bpf_fib_lookup(skb, &fib, sizeof(fib), 0) != BPF_FIB_LKUP_RET_SUCCESS)
		return TCX_NEXT;
	fwd_rewrite(data, ip, &fib);
	return bpf_redirect_peer(fib.ifindex, 0);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";

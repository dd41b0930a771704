// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * gen.bpf.c - BENCHMARK ONLY: the packet generator of `cargo xtask bench forward`.
 *
 * Never attached. User space runs mpt_bench_gen with BPF_PROG_TEST_RUN and
 * BPF_F_TEST_XDP_LIVE_FRAMES, ctx_in.ingress_ifindex naming the sending veth
 * and a huge repeat count (the call is ended by a signal). Every frame the
 * program returns XDP_TX for is really sent out of that device, into the veth
 * peer's receive ring.
 *
 * The kernel recycles the frames' pages together with whatever the receivers
 * wrote into them (a forwarder rewrites MACs and TTL in place), so the whole
 * frame is written again for every packet from the template user space made;
 * only the UDP ports change, from a per-CPU counter n, to spread the packets
 * over flows_mask + 1 flows: the source port is sport_base + the low 15 bits of
 * n, the destination port dport_base + the bits above (up to 2^18 flows). The
 * frame is UDP/IPv4 (ports at 34) or, with ipv6, UDP/IPv6 (ports at 54), 64
 * bytes either way. The IPv4 checksum does not cover the ports; the UDP
 * checksum does and is updated incrementally (RFC 1624), unless the template
 * has none (0, allowed for IPv4 only).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define GEN_FRAME_LEN 64	/* 14 Ethernet + 20 IPv4 + 8 UDP + 22 payload, or 40 IPv6 + 8 UDP + 2 */
#define GEN_UDP4_OFF 34		/* the UDP header after IPv4 */
#define GEN_UDP6_OFF 54		/* the UDP header after IPv6 */
#define GEN_PORT_LOW_BITS 15	/* flow bits in the source port; the rest in the destination port */

/* Set by user space before load (in .bss, so the compiler cannot fold it). */
struct gen_cfg {
	__u8 frame[GEN_FRAME_LEN];	/* the template, with sport_base */
	__u16 sport_base;		/* host order */
	__u16 dport_base;		/* host order */
	__u16 udp_csum;			/* the template's UDP checksum, host order; 0: none */
	__u16 ipv6;			/* 1: the template is UDP/IPv6 */
	__u32 flows_mask;		/* flows - 1, flows a power of two */
};

struct gen_cfg gen_cfg;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} gen_seq SEC(".maps");

/* Write the ports and the updated UDP checksum into the UDP header at data + off. */
static __always_inline void gen_ports(void *data, __u32 off, __u16 sport, __u16 dport)
{
	__u32 sum;
	__u16 csum;

	*(__be16 *)(data + off) = bpf_htons(sport);
	*(__be16 *)(data + off + 2) = bpf_htons(dport);
	if (!gen_cfg.udp_csum)
		return;
	/* RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'), for both ports */
	sum = (__u16)~gen_cfg.udp_csum + (__u16)~gen_cfg.sport_base + (__u32)sport +
	      (__u16)~gen_cfg.dport_base + (__u32)dport;
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	csum = (__u16)~sum;
	/* a computed 0 is sent as 0xffff (0 means none) */
	*(__be16 *)(data + off + 6) = bpf_htons(csum ? csum : 0xffff);
}

SEC("xdp")
int mpt_bench_gen(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 zero = 0, n;
	__u16 sport, dport;
	__u64 *seq;

	if (data + GEN_FRAME_LEN > data_end)
		return XDP_ABORTED;
	seq = bpf_map_lookup_elem(&gen_seq, &zero);
	if (!seq)
		return XDP_ABORTED;
	n = (__u32)*seq & gen_cfg.flows_mask;
	*seq += 1;
	sport = gen_cfg.sport_base + (__u16)(n & ((1u << GEN_PORT_LOW_BITS) - 1));
	dport = gen_cfg.dport_base + (__u16)(n >> GEN_PORT_LOW_BITS);
	__builtin_memcpy(data, gen_cfg.frame, GEN_FRAME_LEN);
	if (gen_cfg.ipv6)
		gen_ports(data, GEN_UDP6_OFF, sport, dport);
	else
		gen_ports(data, GEN_UDP4_OFF, sport, dport);
	return XDP_TX;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";

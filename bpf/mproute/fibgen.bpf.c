// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * fibgen.bpf.c - the namespace's FIB generations, for user space.
 *
 * mpt_fib_gen (sched_cls) is never attached: user space runs it once with
 * BPF_PROG_TEST_RUN inside the namespace, whose loopback device the kernel
 * gives the test packet, and reads the kernel's own counters from .bss:
 * net->ipv4.rt_genid, which every change that can alter an IPv4 FIB answer
 * increments (route insert, replace or delete of a route that was looked
 * up, rule add/del, address and link events), the IPv6 counter fib6_sernum
 * (not bumped by route deletes: alone it cannot say an answer still holds;
 * the dataplane's IPv6 flow cache pairs it with the count of discarded
 * routes, see fib6_gen in dp.bpf.c; user space verifies IPv4 routes only),
 * and whether the namespace has custom IPv4 rules. The dataplane compares rt_genid with the
 * generation user space verified its routes at (mpt_meta.fib4_gen).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "mpt/lib/kern.h"

__u32 mpt_fib4_gen = 0;
__u32 mpt_fib6_gen = 0;
__u32 mpt_fib4_custom_rules = 0;
/* 1 once the program ran and found its namespace */
__u32 mpt_fib_seen = 0;

SEC("tc")
int mpt_fib_gen(struct __sk_buff *ctx)
{
	struct sk_buff *skb;
	struct net_device *dev;
	struct net *net;

	/* before Linux 6.2 the kernel's skb is out of reach: mpt_fib_seen stays 0 */
	if (!mpt_have_kctx())
		return 0;
	skb = bpf_cast_to_kern_ctx(ctx);
	dev = skb->dev;
	if (!dev)
		return 0;
	net = dev->nd_net.net;
	if (!net)
		return 0;
	mpt_fib4_gen = net->ipv4.rt_genid.counter;
	/* kernels without IPv6 or policy routing lack these fields: no IPv6, no rules */
	if (bpf_core_field_exists(net->ipv6))
		mpt_fib6_gen = net->ipv6.fib6_sernum.counter;
	if (bpf_core_field_exists(net->ipv4.fib_has_custom_rules))
		mpt_fib4_custom_rules = net->ipv4.fib_has_custom_rules;
	mpt_fib_seen = 1;
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";

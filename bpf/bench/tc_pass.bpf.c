// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * tc_pass.bpf.c - BENCHMARK ONLY: the calibration of `cargo xtask bench ila`.
 *
 * Two tcx programs that return TCX_NEXT at once, attached where the ILA
 * translator's programs would be: what any tc program there costs (the tcx
 * hooks, their dispatch), against which the translator's own cost is measured.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

SEC("tcx/ingress")
int mpt_bench_tc_in(struct __sk_buff *skb)
{
	return TCX_NEXT;
}

SEC("tcx/egress")
int mpt_bench_tc_out(struct __sk_buff *skb)
{
	return TCX_NEXT;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";

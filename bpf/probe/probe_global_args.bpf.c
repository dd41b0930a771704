// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * probe_global_args.bpf.c - does the kernel's verifier take a global (non-static)
 * function with a pointer argument? (Linux 5.12+: "bpf: Support pointers in global
 * func args".) mproute's dataplane is built of such functions, each verified once;
 * before 5.12 the verifier refuses them ("Arg#0 type PTR in ... is not supported
 * yet"). User space loads this object once to ask (mpt_bpf::features), never
 * attaches it.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

struct mpt_probe_arg {
	__u32 v;
};

__noinline int mpt_probe_read(const struct mpt_probe_arg *a)
{
	return a ? (int)a->v : 0;
}

SEC("tc")
int mpt_probe_global_args(struct __sk_buff *skb)
{
	struct mpt_probe_arg a = { .v = skb->len };

	/* (the result is returned: a call whose result went unused could be dropped) */
	return mpt_probe_read(&a);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";

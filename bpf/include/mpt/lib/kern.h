/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * mpt/lib/kern.h - what a program may use only where the running kernel has
 * it, decided when libbpf loads the object, never by a kernel version: each
 * test below is a constant by then (a weak kfunc resolves to 0 when the
 * kernel lacks it; a CO-RE enum relocation asks the kernel's BTF whether it
 * knows a helper), so the verifier drops the branch a kernel cannot take and
 * never sees a call it does not know. One object runs from Linux 5.10 up.
 *
 * What each kernel lacks (Debian 11's 5.10, Debian 12's 6.1):
 *   bpf_cast_to_kern_ctx   6.2   the kernel's skb / xdp_buff behind a context
 *   bpf_ktime_get_coarse_ns 5.11 the coarse clock (bpf_ktime_get_ns instead)
 *   bpf_check_mtu          5.12  a GSO skb's segments against an MTU
 *   bpf_xdp_load_bytes     5.18  bytes of a multi-buffer XDP frame
 * Callbacks (bpf_loop, 5.17) are not used at all: a program that holds one
 * does not load before 5.13 even where the call is never reached (the
 * verifier refuses the callback's address), so loops are bounded loops.
 */
#ifndef MPT_LIB_KERN_H
#define MPT_LIB_KERN_H

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

extern void *bpf_cast_to_kern_ctx(void *) __ksym __weak;

/* The kernel has bpf_cast_to_kern_ctx (and bpf_rdonly_cast, bpf_core_cast's kfunc: same release). */
#define mpt_have_kctx() (bpf_ksym_exists(bpf_cast_to_kern_ctx) && bpf_ksym_exists(bpf_rdonly_cast))

/* The kernel knows helper id (a BPF_FUNC_* name). */
#define mpt_have_helper(id) bpf_core_enum_value_exists(enum bpf_func_id, id)

/* CLOCK_MONOTONIC in ns: the coarse clock where the kernel has it (cheaper, a tick's precision). */
static __always_inline __u64 mpt_clock_ns(void)
{
	if (mpt_have_helper(BPF_FUNC_ktime_get_coarse_ns))
		return bpf_ktime_get_coarse_ns();
	return bpf_ktime_get_ns();
}

#endif /* MPT_LIB_KERN_H */

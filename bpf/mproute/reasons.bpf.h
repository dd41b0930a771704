/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * reasons.bpf.h - mpt_reasons, the dataplane's verdict counters, apart from
 * the rest of the state (maps.bpf.h) for drops.bpf.c: its tracepoint links
 * are pinned (tracepoints are global, nothing else would hold them) and must
 * not keep the namespace's other maps alive once the namespace is deleted.
 */
#ifndef MPT_REASONS_BPF_H
#define MPT_REASONS_BPF_H

#include "mpt/dp_abi.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MPT_R_MAX);
	__type(key, __u32);
	__type(value, __u64);
} mpt_reasons SEC(".maps");

#endif /* MPT_REASONS_BPF_H */

/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * maps.bpf.h - the maps of one namespace's ILA state, declared once for every
 * object that uses them: ila_state.bpf.c (the anchor that keeps them alive) and
 * ila.bpf.c (the translator, loaded with the anchor's map fds reused). Layouts:
 * mpt/ila_abi.h.
 */
#ifndef ILA_MAPS_BPF_H
#define ILA_MAPS_BPF_H

#include "mpt/ila_abi.h"
#include "mpt/lib/grow.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ila_meta);
} ila_meta SEC(".maps");

MPT_GROWABLE(ila_xlat, BPF_MAP_TYPE_HASH, ILA_TABLE_START, struct ila_xlat_key, struct ila_xlat_val);

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, ILA_MAX_ROUTES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct ila_route_key);
	__type(value, struct ila_route_val);
} ila_routes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ILA_STATS_SLOTS);
	__type(key, __u32);
	__type(value, struct ila_counter);
} ila_slot_stats SEC(".maps");

MPT_GROWABLE(ila_xlat_stats, BPF_MAP_TYPE_PERCPU_HASH, ILA_TABLE_START, struct ila_xlat_key, struct ila_counter);

MPT_GROWABLE(ila_route_stats, BPF_MAP_TYPE_PERCPU_HASH, ILA_TABLE_START, struct ila_route_key, struct ila_counter);

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ILA_R_MAX);
	__type(key, __u32);
	__type(value, __u64);
} ila_reasons SEC(".maps");

#endif /* ILA_MAPS_BPF_H */

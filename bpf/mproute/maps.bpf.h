/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * maps.bpf.h - the maps of one namespace's mproute state, declared once for
 * every BPF object that uses them: state.bpf.c (the anchor that keeps them
 * alive) and dp.bpf.c (the dataplane, loaded later with the anchor's map fds
 * reused, so both see the same maps). Layouts: mpt/state_abi.h, mpt/dp_abi.h.
 */
#ifndef MPT_MAPS_BPF_H
#define MPT_MAPS_BPF_H

#include "mpt/state_abi.h"
#include "mpt/dp_abi.h"
#include "mpt/lib/grow.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mpt_meta);
} mpt_meta SEC(".maps");

MPT_GROWABLE(mpt_routes, BPF_MAP_TYPE_HASH, MPT_ROUTES_START, struct mpt_route_key, struct mpt_route_val);

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, MPT_MAX_DP_ROUTES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct mpt_lpm4_key);
	__type(value, struct mpt_dp_route);
} mpt_lpm4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, MPT_MAX_DP_ROUTES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct mpt_lpm6_key);
	__type(value, struct mpt_dp_route);
} mpt_lpm6 SEC(".maps");

MPT_GROWABLE(mpt_groups, BPF_MAP_TYPE_HASH, MPT_GROUPS_START, __u32, struct mpt_group);

MPT_GROWABLE(mpt_stats, BPF_MAP_TYPE_PERCPU_HASH, MPT_ROUTES_START, struct mpt_route_key, struct mpt_route_stats);

MPT_GROWABLE(mpt_res, BPF_MAP_TYPE_HASH, MPT_RES_START, struct mpt_route_key, struct mpt_res_table);

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MPT_STATS_SLOTS);
	__type(key, __u32);
	__type(value, struct mpt_route_stats);
} mpt_slot_stats SEC(".maps");

MPT_GROWABLE(mpt_pcpu, BPF_MAP_TYPE_PERCPU_HASH, MPT_ROUTES_START, struct mpt_route_key, struct mpt_pcpu_state);

#include "reasons.bpf.h"

#endif /* MPT_MAPS_BPF_H */

/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * pick.h - the dataplane's nexthop pickers, one per algorithm: the flow hash
 * with hash-threshold (RFC 2992), weighted and uniform random, and deficit round
 * robin by bytes; per-packet round robin is a weighted pick of a per-CPU
 * counter. Included by dp.bpf.c only.
 */
#ifndef MPT_PICK_H
#define MPT_PICK_H

/* DRR quantum per unit of weight, in bytes. */
#define MPT_DRR_QUANTUM 1514

/*
 * The pickers and the hash are global functions: the verifier checks each once
 * instead of once per call site and path, which keeps the programs far below
 * its complexity limit.
 */
__noinline __u32 mpt_hash(const struct mpt_flow_key *k, int l4, __u32 seed, __u32 fields)
{
	if (!k)
		return 0;
	return mpt_flow_hash_fields(k, l4, seed, fields);
}

/* Weighted pick of a position in [0, total) over cum_weight. */
__noinline int mpt_pick_weight(const struct mpt_group *g, __u32 pos)
{
	int i;

	if (!g)
		return -1;
	for (i = 0; i < MPT_MAX_NH; i++) {
		if (i >= g->nh_count)
			break;
		if (g->nh[i].upper_bound >= 0 && pos < g->nh[i].cum_weight)
			return i;
	}
	return -1;
}

__noinline int mpt_pick_hash(const struct mpt_group *g, __u32 h)
{
	int i;

	if (!g)
		return -1;
	for (i = 0; i < MPT_MAX_NH; i++) {
		if (i >= g->nh_count)
			break;
		if (g->nh[i].upper_bound >= 0 && h <= (__u32)g->nh[i].upper_bound)
			return i;
	}
	return -1;
}

/*
 * Resilient hashing: the flow's bucket in the route's mpt_res table names the
 * nexthop, and the bucket's last use is recorded (at most one write a second),
 * so that user space moves only idle buckets when it rebalances. A route
 * without a table, or a bucket whose nexthop is unusable, falls back to
 * hash-threshold over the usable nexthops: only the flows of that nexthop move.
 */
__noinline int mpt_pick_bucket(const struct mpt_route_key *id, const struct mpt_group *g, __u32 h)
{
	struct mpt_res_table *t;
	struct mpt_route_key key;
	__u32 n, b, idx, now;
	void *res;

	if (!id || !g)
		return -1;
	/* a key on the stack: before 6.3 (or so) a global function's pointer argument cannot be one */
	__builtin_memcpy(&key, id, sizeof(key));
	res = MPT_INNER(mpt_res);
	if (!res)
		return mpt_pick_hash(g, h);
	t = bpf_map_lookup_elem(res, &key);
	if (!t)
		return mpt_pick_hash(g, h);
	n = t->n_buckets;
	if (n == 0 || n > MPT_MAX_BUCKETS)
		return mpt_pick_hash(g, h);
	/* mpt_model::route::resilient::bucket_of */
	b = ((__u64)(h & 0x7fffffff) * n) >> 31;
	/* the compiler knows b < n; older verifiers do not follow the product: keep the mask */
	barrier_var(b);
	b &= MPT_MAX_BUCKETS - 1;
	idx = t->nh[b];
	if (idx >= g->nh_count || idx >= MPT_MAX_NH)
		return mpt_pick_hash(g, h);
	idx &= MPT_MAX_NH - 1;
	if (g->nh[idx].upper_bound < 0)
		return mpt_pick_hash(g, h);
	now = mpt_clock_ns() / 1000000000ULL;
	if (t->used_s[b] != now)
		t->used_s[b] = now;
	return idx;
}

/* Whether the group has the nexthop a FIB lookup answered (family 0: device route). */
__noinline int mpt_group_has(const struct mpt_group *g, const struct bpf_fib_lookup *f)
{
	__u32 ifindex;
	__u8 family;
	int i;

	if (!g || !f)
		return 0;
	ifindex = f->ifindex;
	family = f->family;
	for (i = 0; i < MPT_MAX_NH; i++) {
		const struct mpt_nh *n = &g->nh[i];

		if (i >= g->nh_count)
			break;
		if (n->ifindex != ifindex)
			continue;
		if (n->family == 0)
			return 1;
		if (n->family != family)
			continue;
		if (family == AF_INET && __builtin_memcmp(n->gw, &f->ipv4_dst, 4) == 0)
			return 1;
		if (family == AF_INET6 && __builtin_memcmp(n->gw, f->ipv6_dst, 16) == 0)
			return 1;
	}
	return 0;
}

/*
 * Uniform over the nexthops, weights ignored. If the one drawn is unusable,
 * fall back to a weighted draw over the usable ones.
 */
__noinline int mpt_pick_random(const struct mpt_group *g, __u32 r)
{
	__u32 n, j;

	if (!g)
		return -1;
	n = g->nh_count;
	if (n == 0 || n > MPT_MAX_NH)
		return -1;
	j = r % n;
	/* the verifier does not follow '%': bound j by a mask the compiler must keep */
	barrier_var(j);
	j &= MPT_MAX_NH - 1;
	if (g->nh[j].upper_bound >= 0)
		return j;
	return mpt_pick_hash(g, r >> 1);
}

/*
 * DRR by bytes, per CPU: nexthop drr_idx is served while its deficit covers the
 * packet; then the turn passes and the next usable nexthop's deficit grows by
 * weight x MPT_DRR_QUANTUM. Deficits persist, so shares follow the weights. A
 * packet no deficit covers after a full round (a GSO skb, a quantum smaller
 * than the frame) goes to the nexthop whose turn it is, which runs into debt
 * it repays in later turns.
 *
 * Step i of the rotation over n nexthops: the chosen nexthop, or -1 to go on. A
 * function of its own, verified once: the loop that calls it then costs the
 * verifier a handful of instructions a step (a bounded loop, not bpf_loop(): a
 * callback keeps the whole object from loading before 5.13, see mpt/lib/kern.h).
 */
__noinline int mpt_drr_step(const struct mpt_group *g, struct mpt_pcpu_state *st, __u32 len,
			    __u32 n, __u32 i)
{
	__u32 idx;

	if (!g || !st || n == 0 || n > MPT_MAX_NH)
		return 0;
	idx = st->drr_idx;
	if (idx >= n)
		idx = 0;
	idx &= MPT_MAX_NH - 1;
	if (g->nh[idx].upper_bound >= 0) {
		if (st->drr_deficit[idx] >= (__s32)len || i >= 2 * n) {
			st->drr_deficit[idx] -= len;
			st->drr_idx = idx;
			return idx;
		}
	} else {
		st->drr_deficit[idx] = 0;
	}
	idx++;
	if (idx >= n)
		idx = 0;
	idx &= MPT_MAX_NH - 1;
	if (g->nh[idx].upper_bound >= 0 && st->drr_deficit[idx] < 64 * 1024)
		st->drr_deficit[idx] += g->nh[idx].weight * MPT_DRR_QUANTUM;
	st->drr_idx = idx;
	return -1;
}

/* Step 2n always chooses, so the loop ends there. */
__noinline int mpt_pick_drr(const struct mpt_group *g, struct mpt_pcpu_state *st, __u32 len)
{
	__u32 i, n;
	int chosen;

	if (!g || !st)
		return -1;
	n = g->nh_count;
	if (n == 0 || n > MPT_MAX_NH)
		return -1;
	for (i = 0; i < 2 * MPT_MAX_NH + 1; i++) {
		chosen = mpt_drr_step(g, st, len, n, i);
		if (chosen >= 0)
			return chosen;
	}
	return -1;
}

#endif /* MPT_PICK_H */

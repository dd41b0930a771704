// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * ila.bpf.c - the ILA translator, for kernels without the ILA module.
 *
 * Receive side (ila_in_xdp or ila_in_tc, on the devices packets arrive on): an
 * IPv6 packet whose destination's upper 64 bits are a mapping's locator match
 * (for the receiving device, else for any device) has them replaced by the
 * mapping's locator, ILA to SIR, before the stack sees the packet, so that the
 * stack's early demux finds the socket bound to the SIR address. Then a route
 * of hook type input for the destination translates it SIR to ILA (a router
 * translating what it forwards).
 *
 * Send side (ila_out_tc, tcx egress of the devices packets leave through): a
 * packet whose destination falls in a route of hook type output has its
 * locator replaced, SIR to ILA.
 *
 * Transport checksums as the mapping's or route's mode says (xlat.h). In tc the
 * kernel's helpers keep skb->csum and a checksum left to offload right; in XDP
 * the checksum field is fixed by hand, as a complete checksum unless the frame
 * came from a local stack's skb with CHECKSUM_PARTIAL (veth, see ila_veth_skb).
 * Generic XDP cannot tell: there the field is left to ila_in_tc_gx, loaded next to
 * it, which the XDP program tells what to add through the packet's metadata
 * (struct ila_l4_fix, see ila_xdp_generic).
 *
 * Anything that is not IPv6, too short for its headers, or matches nothing
 * passes untouched; every program returns "go on" (XDP_PASS, TCX_NEXT).
 * The maps are the namespace's ILA state (maps.bpf.h), reused from the anchor.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "mpt/lib/defs.h"
#include "mpt/lib/parse.h"
#include "mpt/lib/veth.h"
#include "maps.bpf.h"
#include "xlat.h"

/*
 * XDP on a veth, set by user space at load: how to ask the frame's skb whether
 * its checksum is left to offload (2 a direct read, 1 a probe read; see
 * mpt/lib/veth.h). 0: frames are complete (a NIC), or a test run.
 */
const volatile __u32 ila_veth_skb = 0;

/*
 * Generic XDP, and native XDP on a veth whose kernel cannot show the sender's
 * skb (before 6.3; set by user space at load, for both ingress programs): the
 * frame is an skb whose checksum may be left to offload, which the XDP program
 * cannot see. So ila_in_xdp translates the address, and the transport checksum's
 * difference goes in the metadata before the frame; ila_in_tc_gx, attached next
 * to it on tcx ingress, applies it with the kernel's helper (which knows the skb's
 * checksum state) and translates nothing itself.
 */
const volatile __u32 ila_xdp_generic = 0;

/* What ila_in_xdp leaves in the metadata for ila_in_tc_gx (generic XDP). */
struct ila_l4_fix {
	__u32 magic; /* ila_fix_cookie */
	__u16 diff;  /* what the transport checksum's sum grew by */
	__u16 pad;
};

/*
 * Random, set by user space at load (never 0): marks the metadata records of this
 * load's XDP program, which its tc program trusts. An skb keeps its metadata
 * across a veth into the next namespace, whose translator must not take it.
 */
const volatile __u32 ila_fix_cookie = 0;

static __always_inline void count_reason(__u32 r)
{
	__u64 *c = bpf_map_lookup_elem(&ila_reasons, &r);

	if (c)
		*c += 1;
}

static __always_inline void count(struct ila_counter *c, __u32 len)
{
	if (c) {
		c->packets++;
		c->bytes += len;
	}
}

/* A mapping's or route's counter slot, if it has one. */
static __always_inline struct ila_counter *slot_counter(__u32 slot)
{
	return slot ? bpf_map_lookup_elem(&ila_slot_stats, &slot) : 0;
}

static __always_inline void count_xlat(const struct ila_xlat_key *k,
				       const struct ila_xlat_val *v, __u32 len)
{
	struct ila_counter zero = {}, *c = slot_counter(v->stats_slot);
	void *stats;

	if (c) {
		count(c, len);
		return;
	}
	stats = MPT_INNER(ila_xlat_stats);
	if (!stats)
		return;
	c = bpf_map_lookup_elem(stats, k);
	if (!c) {
		bpf_map_update_elem(stats, k, &zero, BPF_NOEXIST);
		c = bpf_map_lookup_elem(stats, k);
	}
	count(c, len);
}

static __always_inline void count_route(const struct ila_route_val *v, __u32 len)
{
	struct ila_route_key k = { .prefixlen = v->prefix_len };
	struct ila_counter zero = {}, *c = slot_counter(v->stats_slot);
	void *stats;

	if (c) {
		count(c, len);
		return;
	}

	__builtin_memcpy(k.addr, v->prefix, 16);
	stats = MPT_INNER(ila_route_stats);
	if (!stats)
		return;
	c = bpf_map_lookup_elem(stats, &k);
	if (!c) {
		bpf_map_update_elem(stats, &k, &zero, BPF_NOEXIST);
		c = bpf_map_lookup_elem(stats, &k);
	}
	count(c, len);
}

/* ILA_META_F_*: which kinds of entries the tables may hold (all, if unreadable). */
static __always_inline __u32 meta_flags(void)
{
	__u32 k = 0;
	struct ila_meta *m = bpf_map_lookup_elem(&ila_meta, &k);

	return m ? m->flags : ~0U;
}

/*
 * The mapping for a destination's locator arriving on ifindex: that device's (if
 * the table may have any for one device), else any's.
 */
static __always_inline struct ila_xlat_val *find_mapping(const __u8 *daddr, __u32 ifindex,
							 struct ila_xlat_key *k, __u32 flags)
{
	struct ila_xlat_val *v;
	void *xlat = MPT_INNER(ila_xlat);

	if (!xlat)
		return 0;
	__builtin_memset(k, 0, sizeof(*k));
	__builtin_memcpy(k->locator_match, daddr, 8);
	if (flags & ILA_META_F_DEV_MAPPINGS) {
		k->ifindex = ifindex;
		v = bpf_map_lookup_elem(xlat, k);
		if (v)
			return v;
		k->ifindex = 0;
	}
	return bpf_map_lookup_elem(xlat, k);
}

/* The route a destination falls in, if it is of hook type hook (and there may be any). */
static __always_inline struct ila_route_val *find_route(const __u8 *daddr, __u8 hook,
							__u32 flags)
{
	struct ila_route_key k = { .prefixlen = 128 };
	struct ila_route_val *v;

	if (!(flags & (hook == ILA_HOOK_ROUTE_OUTPUT ? ILA_META_F_OUTPUT_ROUTES
						     : ILA_META_F_INPUT_ROUTES)))
		return 0;
	__builtin_memcpy(k.addr, daddr, 16);
	v = bpf_map_lookup_elem(&ila_routes, &k);
	return v && v->hook_type == hook ? v : 0;
}

/* ---- XDP ------------------------------------------------------------------------------- */

/*
 * Translate the destination of the IPv6 header at ip6 in place, the checksum by
 * hand, or (generic XDP) its difference added to *pending for ila_in_tc.
 */
static __always_inline void xdp_translate(struct xdp_md *ctx, struct ipv6hdr *ip6, void *end,
					  const __u8 *to, __u8 mode, int sir_to_ila, __u32 *pending)
{
	__u8 a[16];
	__u16 diff = 0, c;
	int udp = 0, at, partial;
	__u8 *f;

	__builtin_memcpy(a, &ip6->daddr, 16);
	if (!ila_translate(a, to, mode, sir_to_ila, &diff)) {
		__builtin_memcpy(&ip6->daddr, a, 16);
		return;
	}
	__builtin_memcpy(&ip6->daddr, a, 16);
	if (ila_xdp_generic) {
		/* (one's complement: 0x10000 marks "pending", the low half is the sum) */
		*pending = 0x10000 | ila_add((__u16)*pending, diff);
		return;
	}
	at = ila_l4_csum_at(ip6->nexthdr, &udp);
	if (at < 0) {
		count_reason(ILA_R_NO_L4_CSUM);
		return;
	}
	f = (__u8 *)(ip6 + 1) + (at & 31);
	if ((void *)(f + 2) > end) {
		count_reason(ILA_R_NO_L4_CSUM);
		return;
	}
	c = ila_word(f);
	partial = ila_veth_skb ? mpt_veth_skb_partial(ctx, ila_veth_skb) : 0;
	if (partial > 0) {
		/* the field holds the folded pseudo-header sum, which takes the difference */
		c = ila_add(c, diff);
	} else {
		/* a UDP checksum of 0 means none and stays so; a computed 0 is sent as 0xffff */
		if (udp && c == 0)
			return;
		c = ila_adjust_checksum(c, diff);
		if (udp && c == 0)
			c = 0xffff;
	}
	ila_put_word(f, c);
}

/* Generic XDP: leave the transport checksum's difference to ila_in_tc. */
static __always_inline void hand_l4_fix(struct xdp_md *ctx, __u16 diff)
{
	struct ila_l4_fix *fix;
	void *data;

	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(*fix))) {
		count_reason(ILA_R_NO_L4_CSUM);
		return;
	}
	fix = (void *)(long)ctx->data_meta;
	data = (void *)(long)ctx->data;
	if ((void *)(fix + 1) > data) {
		count_reason(ILA_R_NO_L4_CSUM);
		return;
	}
	fix->magic = ila_fix_cookie;
	fix->diff = diff;
	fix->pad = 0;
}

SEC("xdp")
int ila_in_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ila_xlat_key k;
	struct ila_xlat_val *m;
	struct ila_route_val *r;
	struct ipv6hdr *ip6;
	__u32 len = end - data, pending = 0, flags;
	__u8 vlan = 0;
	__u16 proto;
	int off;

	off = mpt_eth_l3(data, end, &proto, &vlan);
	if (off < 0) {
		count_reason(ILA_R_MALFORMED);
		return XDP_PASS;
	}
	if (proto != bpf_htons(ETH_P_IPV6)) {
		count_reason(ILA_R_NOT_IPV6);
		return XDP_PASS;
	}
	ip6 = data + (off & 31);
	if ((void *)(ip6 + 1) > end || ip6->version != 6) {
		count_reason(ILA_R_MALFORMED);
		return XDP_PASS;
	}
	flags = meta_flags();
	m = find_mapping((const __u8 *)&ip6->daddr, ctx->ingress_ifindex, &k, flags);
	if (m) {
		xdp_translate(ctx, ip6, end, m->locator, m->csum_mode, 0, &pending);
		count_xlat(&k, m, len);
		count_reason(ILA_R_XLAT_IN);
	}
	r = find_route((const __u8 *)&ip6->daddr, ILA_HOOK_ROUTE_INPUT, flags);
	if (r) {
		xdp_translate(ctx, ip6, end, r->locator, r->csum_mode, 1, &pending);
		count_route(r, len);
		count_reason(ILA_R_ROUTE_IN);
	} else if (!m) {
		count_reason(ILA_R_NO_MATCH);
	}
	if (pending)
		hand_l4_fix(ctx, (__u16)pending);
	return XDP_PASS;
}

/* ---- tc -------------------------------------------------------------------------------- */

#define MPT_CHECKSUM_COMPLETE 2

/*
 * skb->ip_summed (CHECKSUM_*), from the kernel's skb behind the context; -1 where
 * the kernel cannot say (before 6.2): then only the helpers write, which are
 * right for every checksum state.
 */
static __always_inline int skb_summed(struct __sk_buff *skb)
{
	struct sk_buff *k;

	if (!mpt_have_kctx())
		return -1;
	k = bpf_cast_to_kern_ctx(skb);
	return BPF_CORE_READ_BITFIELD(k, ip_summed);
}

/* The one's complement sum of a 16-byte address. */
static __always_inline __u16 ila_sum_addr(const __u8 *a)
{
	return ila_add(ila_sum_locator(a), ila_sum_locator(a + 8));
}

/*
 * Translate the destination of the IPv6 header at off through the kernel's helpers,
 * each writing only the bytes it changes (so that the header area of a TCP clone
 * stays its own, uncopied): the address, then the transport checksum by the
 * difference as a pseudo-header change (which covers CHECKSUM_PARTIAL). skb->csum
 * is kept where it is one (CHECKSUM_COMPLETE).
 */
static __always_inline void tc_translate(struct __sk_buff *skb, __u32 off, const __u8 *to,
					 __u8 mode, int sir_to_ila, int summed)
{
	__u8 a[16] __attribute__((aligned(4)));
	__u16 diff = 0;
	__u8 nexthdr;
	int udp = 0, at;
	/* (the helper adjusts skb->csum only where it is one: an unknown state asks it too) */
	__u64 recompute = summed == MPT_CHECKSUM_COMPLETE || summed < 0 ? BPF_F_RECOMPUTE_CSUM : 0;

	if (bpf_skb_load_bytes(skb, off + 24, a, 16) || bpf_skb_load_bytes(skb, off + 6, &nexthdr, 1))
		return;
	if (!ila_translate(a, to, mode, sir_to_ila, &diff)) {
		bpf_skb_store_bytes(skb, off + 24, a, 16, recompute);
		return;
	}
	/* adj-transport: the locator alone changes */
	if (bpf_skb_store_bytes(skb, off + 24, a, 8, recompute))
		return;
	at = ila_l4_csum_at(nexthdr, &udp);
	if (at < 0) {
		count_reason(ILA_R_NO_L4_CSUM);
		return;
	}
	/* the kernel's sums are of 16-bit words as they lie in memory: network order */
	if (bpf_l4_csum_replace(skb, off + 40 + at, 0, bpf_htons(diff),
				BPF_F_PSEUDO_HDR | (udp ? BPF_F_MARK_MANGLED_0 : 0)))
		count_reason(ILA_R_NO_L4_CSUM);
}

/*
 * The same by direct packet access (the verifier makes the linear data writable
 * first, which costs no copy for an skb from a device, nor for a TCP clone on
 * egress, whose headers were pushed in its own headroom): the address and the transport checksum written in
 * place, the checksum as its state needs (CHECKSUM_PARTIAL: the pseudo-header sum
 * it holds takes the difference), skb->csum (CHECKSUM_COMPLETE) by the sum the two
 * writes changed. Returns -1, having changed nothing, when the checksum is beyond
 * the linear data (then tc_translate).
 */
static __always_inline int tc_translate_direct(struct ipv6hdr *ip6, void *end, const __u8 *to,
					       __u8 mode, int sir_to_ila, int summed,
					       __u16 *changed)
{
	__u8 a[16];
	__u16 diff = 0, before, c, c2, delta;
	int udp = 0, at = -1, fix;
	__u8 *f = 0;

	__builtin_memcpy(a, &ip6->daddr, 16);
	before = ila_sum_addr(a);
	fix = ila_translate(a, to, mode, sir_to_ila, &diff);
	if (fix) {
		at = ila_l4_csum_at(ip6->nexthdr, &udp);
		if (at >= 0) {
			f = (__u8 *)(ip6 + 1) + (at & 31);
			if ((void *)(f + 2) > end)
				return -1;
		}
	}
	__builtin_memcpy(&ip6->daddr, a, 16);
	delta = ila_add(ila_sum_addr(a), (__u16)~before);
	if (fix) {
		if (!f) {
			count_reason(ILA_R_NO_L4_CSUM);
		} else {
			c = ila_word(f);
			if (summed == MPT_CHECKSUM_PARTIAL) {
				c2 = ila_add(c, diff);
			} else if (udp && c == 0) {
				c2 = 0; /* no checksum, and none after */
			} else {
				c2 = ila_adjust_checksum(c, diff);
				if (udp && c2 == 0)
					c2 = 0xffff;
			}
			ila_put_word(f, c2);
			delta = ila_add(delta, ila_add(c2, (__u16)~c));
		}
	}
	*changed = delta;
	return 0;
}

/* The IPv6 header of an skb without counting (the XDP program counted it). */
static __always_inline int tc_ipv6_quiet(struct __sk_buff *skb, struct ipv6hdr **ip6)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	__u8 vlan = 0;
	__u16 proto;
	int off;

	off = mpt_eth_l3(data, end, &proto, &vlan);
	if (off < 0 || proto != bpf_htons(ETH_P_IPV6))
		return -1;
	*ip6 = data + (off & 31);
	if ((void *)(*ip6 + 1) > end)
		return -1;
	return off & 31;
}

/* The IPv6 header of an skb: its offset (Ethernet, one VLAN tag in the data), or -1. */
static __always_inline int tc_ipv6(struct __sk_buff *skb, struct ipv6hdr **ip6)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	__u8 vlan = 0;
	__u16 proto;
	int off;

	off = mpt_eth_l3(data, end, &proto, &vlan);
	if (off < 0) {
		count_reason(ILA_R_MALFORMED);
		return -1;
	}
	if (proto != bpf_htons(ETH_P_IPV6)) {
		count_reason(ILA_R_NOT_IPV6);
		return -1;
	}
	*ip6 = data + (off & 31);
	if ((void *)(*ip6 + 1) > end || (*ip6)->version != 6) {
		count_reason(ILA_R_MALFORMED);
		return -1;
	}
	return off & 31;
}

/*
 * Next to generic XDP (tcx ingress, in place of ila_in_tc): apply the transport
 * checksum difference ila_in_xdp left in the metadata, as a pseudo-header change
 * (right for every checksum state). A program of its own: ila_in_tc writes the
 * packet directly, for which the verifier unclones the skb first, and that clears
 * the metadata (pskb_expand_head) of an skb a packet socket holds a clone of.
 */
SEC("tcx/ingress")
int ila_in_tc_gx(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	struct ila_l4_fix *fix = (void *)(long)skb->data_meta;
	struct ipv6hdr *ip6;
	__u8 nexthdr;
	int off, udp = 0, at;
	__u16 diff;

	/*
	 * Read only: a direct write would make the verifier pull (unclone) the skb
	 * first, which clears the metadata (pskb_expand_head) of an skb a packet
	 * socket holds a clone of. The record stays; it names this load (a record
	 * an earlier hop's translator left is not ours).
	 */
	if ((void *)(fix + 1) > data || fix->magic != ila_fix_cookie)
		return TCX_NEXT;
	diff = fix->diff;
	off = tc_ipv6_quiet(skb, &ip6);
	if (off < 0 || bpf_skb_load_bytes(skb, off + 6, &nexthdr, 1))
		return TCX_NEXT;
	at = ila_l4_csum_at(nexthdr, &udp);
	/* the kernel's sums are of 16-bit words as they lie in memory: network order */
	if (at < 0 || bpf_l4_csum_replace(skb, off + 40 + at, 0, bpf_htons(diff),
					  BPF_F_PSEUDO_HDR | (udp ? BPF_F_MARK_MANGLED_0 : 0)))
		count_reason(ILA_R_NO_L4_CSUM);
	return TCX_NEXT;
}

/*
 * Translation of the IPv6 packet at off: in place where the checksum is in the
 * linear data, else through the helpers. Returns the IPv6 header again (the
 * helpers move the packet pointers), or 0.
 */
static __always_inline struct ipv6hdr *tc_in_translate(struct __sk_buff *skb, int off,
						       struct ipv6hdr *ip6, const __u8 *to,
						       __u8 mode, int sir_to_ila, int summed)
{
	void *end = (void *)(long)skb->data_end;
	__u16 changed = 0;

	if (summed >= 0 &&
	    tc_translate_direct(ip6, end, to, mode, sir_to_ila, summed, &changed) == 0) {
		if (summed == MPT_CHECKSUM_COMPLETE && changed && changed != 0xffff)
			bpf_csum_update(skb, bpf_htons(changed));
		return ip6;
	}
	tc_translate(skb, off, to, mode, sir_to_ila, summed);
	return tc_ipv6_quiet(skb, &ip6) == off ? ip6 : 0;
}

SEC("tcx/ingress")
int ila_in_tc(struct __sk_buff *skb)
{
	struct ila_xlat_key k;
	struct ila_xlat_val *m;
	struct ila_route_val *r;
	struct ipv6hdr *ip6;
	__u32 flags;
	int off, summed;

	off = tc_ipv6(skb, &ip6);
	if (off < 0)
		return TCX_NEXT;
	flags = meta_flags();
	m = find_mapping((const __u8 *)&ip6->daddr, skb->ingress_ifindex, &k, flags);
	if (m || (flags & ILA_META_F_INPUT_ROUTES))
		summed = skb_summed(skb);
	if (m) {
		ip6 = tc_in_translate(skb, off, ip6, m->locator, m->csum_mode, 0, summed);
		count_xlat(&k, m, skb->len);
		count_reason(ILA_R_XLAT_IN);
		if (!ip6)
			return TCX_NEXT;
	}
	r = find_route((const __u8 *)&ip6->daddr, ILA_HOOK_ROUTE_INPUT, flags);
	if (r) {
		tc_in_translate(skb, off, ip6, r->locator, r->csum_mode, 1, summed);
		count_route(r, skb->len);
		count_reason(ILA_R_ROUTE_IN);
	} else if (!m) {
		count_reason(ILA_R_NO_MATCH);
	}
	return TCX_NEXT;
}

SEC("tcx/egress")
int ila_out_tc(struct __sk_buff *skb)
{
	struct ila_route_val *r;
	struct ipv6hdr *ip6;
	__u8 daddr[16];
	int off;

	off = tc_ipv6(skb, &ip6);
	if (off < 0)
		return TCX_NEXT;
	__builtin_memcpy(daddr, &ip6->daddr, 16);
	r = find_route(daddr, ILA_HOOK_ROUTE_OUTPUT, meta_flags());
	if (!r) {
		count_reason(ILA_R_NO_MATCH);
		return TCX_NEXT;
	}
	tc_in_translate(skb, off, ip6, r->locator, r->csum_mode, 1, skb_summed(skb));
	count_route(r, skb->len);
	count_reason(ILA_R_ROUTE_OUT);
	return TCX_NEXT;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";

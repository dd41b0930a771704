// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * hash_test.bpf.c - TEST ONLY: exposes mpt_flow_hash() (mpt/flowhash.h) to
 * BPF_PROG_TEST_RUN so crates/bpf/tests/hash_parity.rs can compare it with
 * mpt_model::hash::flow_hash. Never attached to anything.
 *
 * data_in (at least sizeof(struct mpt_hash_test_in) = 48 bytes, starting at
 * the "Ethernet header" of the test skb):
 *   0..40  struct mpt_flow_key (ports in network byte order)
 *   40..44 seed, __u32 in host byte order
 *   44     l4 flag (0 or 1)
 *   45     padding
 *   46..48 hash recipe fields, __u16 host order (0: MPT_HF_L4, mpt_flow_hash)
 * Return value (test_run retval): the 31-bit hash, or MPT_HASH_TEST_SHORT
 * (bit 31 set, never a hash) if data_in is too short.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "mpt/flowhash.h"

#define MPT_HASH_TEST_SHORT 0xffffffffu

struct mpt_hash_test_in {
	struct mpt_flow_key key;
	__u32 seed;
	__u8 l4;
	__u8 pad;
	__u16 fields;
};

_Static_assert(sizeof(struct mpt_hash_test_in) == 48, "mpt_hash_test_in size");

SEC("tc")
int mpt_hash_test(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct mpt_hash_test_in in;

	if (data + sizeof(in) > data_end)
		return (int)MPT_HASH_TEST_SHORT;
	/* Hash a stack copy, as the dataplane will hash the key it built. */
	__builtin_memcpy(&in, data, sizeof(in));
	if (in.fields)
		return (int)mpt_flow_hash_fields(&in.key, in.l4, in.seed, in.fields);
	return (int)mpt_flow_hash(&in.key, in.l4, in.seed);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * grow.h - maps whose memory follows what they hold.
 *
 * A hash map allocates its bucket array for max_entries at creation (16 bytes
 * a bucket, whatever it holds: a million-entry map is 16 MiB while empty). A
 * growable map is therefore an array of one map (BPF_MAP_TYPE_ARRAY_OF_MAPS)
 * whose only element, the inner map, starts small (the declared capacity) and
 * is replaced by user space with a larger copy when it is full (see
 * crates/bpf/src/grow.rs): programs look the inner map up on every use, which
 * the verifier inlines into a few instructions, so the replacement is atomic
 * for them. Since Linux 5.10 the kernel accepts inner hash maps whose
 * max_entries differ from the declared one (bpf_map_meta_equal compares type,
 * key and value sizes and flags).
 *
 * MPT_GROWABLE(name, type, capacity, key, value) declares `name` (the outer
 * array, the name user space and the skeleton know) and `name_in` (its first
 * inner map, created and put in place by libbpf when the object creates the
 * outer map itself; an object that reuses the outer map leaves it alone).
 * MPT_INNER(name) is the inner map, or NULL.
 */
#ifndef MPT_LIB_GROW_H
#define MPT_LIB_GROW_H

#define MPT_GROWABLE(name, map_type, capacity, key_t, val_t)	\
	struct name##_def {					\
		__uint(type, map_type);				\
		__uint(max_entries, capacity);			\
		__uint(map_flags, BPF_F_NO_PREALLOC);		\
		__type(key, key_t);				\
		__type(value, val_t);				\
	};							\
	struct name##_def name##_in SEC(".maps");		\
	struct {						\
		__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);	\
		__uint(max_entries, 1);				\
		__type(key, __u32);				\
		__array(values, struct name##_def);		\
	} name SEC(".maps") = { .values = { &name##_in } }

#define MPT_INNER(name)							\
	({								\
		__u32 __mpt_zero = 0;					\
		(void *)bpf_map_lookup_elem(&name, &__mpt_zero);	\
	})

#endif /* MPT_LIB_GROW_H */

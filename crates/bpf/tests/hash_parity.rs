//! Root test: the BPF flow hash (`bpf/include/mpt/flowhash.h`, run through
//! `bpf/test/hash_test.bpf.c` with BPF_PROG_TEST_RUN) equals
//! `mpt_model::hash::flow_hash` bit for bit, on many pseudo-random keys of both
//! families, l4 and l3, with random protocols, ports and seeds.
//!
//! Needs root (CAP_BPF + CAP_NET_ADMIN to load and test-run a sched_cls
//! program). It fails, it does not skip, when run without root.

use std::mem::MaybeUninit;
use std::time::Duration;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{OpenObject, ProgramInput, ProgramType};
use mpt_bpf::skel::test::hash_test::HashTestSkelBuilder;
use mpt_model::hash::{flow_hash, flow_hash_fields, FlowKey, HashFields};
use mpt_model::route::threshold::{select, upper_bounds};
use mpt_model::Family;
use mpt_testkit::{require_root, XorShift64};

/// Keys checked one test run each.
const KEYS: usize = 12_000;
/// Hash recipes checked (bits of `HashFields`).
const RECIPES: [HashFields; 6] = [
    HashFields(0x03),
    HashFields(0x04),
    HashFields(0x07),
    HashFields(0x30),
    HashFields(0x34),
    HashFields(0x33),
];

/// `struct mpt_hash_test_in` of hash_test.bpf.c.
const IN_LEN: usize = 48;
/// Returned by the program when data_in is too short (never a 31-bit hash).
const SHORT: u32 = 0xffff_ffff;
/// Protocols drawn: TCP, UDP, SCTP (l4) and ICMP, GRE (l3 only).
const PROTOS: [u8; 5] = [6, 17, 132, 1, 47];

/// A random key; some share address prefixes or whole addresses so that the
/// canonical ordering's later bytes and its port tie-break are exercised.
fn random_key(rng: &mut XorShift64) -> FlowKey {
    let family = if rng.below(2) == 0 {
        Family::V4
    } else {
        Family::V6
    };
    let mut src = [0u8; 16];
    let mut dst = [0u8; 16];
    rng.fill(&mut src);
    rng.fill(&mut dst);
    let alen = if family == Family::V4 { 4 } else { 16 };
    match rng.below(8) {
        // Same address: ports decide the order.
        0 => dst[..alen].copy_from_slice(&src[..alen]),
        // Common prefix, differing only in the last byte.
        1 => {
            dst[..alen - 1].copy_from_slice(&src[..alen - 1]);
        }
        _ => {}
    }
    if family == Family::V4 && rng.below(2) == 0 {
        // Bytes beyond the IPv4 address must be ignored by both sides.
        src[4..].fill(0);
        dst[4..].fill(0);
    }
    let proto = PROTOS[rng.below(PROTOS.len() as u64) as usize];
    let sport = rng.next() as u16;
    let dport = match rng.below(4) {
        0 => sport,
        _ => rng.next() as u16,
    };
    FlowKey {
        family,
        src,
        dst,
        proto,
        sport,
        dport,
    }
}

/// data_in for hash_test.bpf.c: `struct mpt_flow_key` (ports in network
/// order), then the seed (host order) and the l4 flag.
fn encode(key: &FlowKey, l4: bool, seed: u32) -> [u8; IN_LEN] {
    let mut b = [0u8; IN_LEN];
    b[0] = key.family.af();
    b[1] = key.proto;
    b[2..4].copy_from_slice(&key.sport.to_be_bytes());
    b[4..6].copy_from_slice(&key.dport.to_be_bytes());
    // 6..8 reserved = 0
    b[8..24].copy_from_slice(&key.src);
    b[24..40].copy_from_slice(&key.dst);
    b[40..44].copy_from_slice(&seed.to_ne_bytes());
    b[44] = u8::from(l4);
    b
}

/// [`encode`] with a hash recipe's fields (bytes 46..48).
fn encode_fields(key: &FlowKey, l4: bool, seed: u32, fields: HashFields) -> [u8; IN_LEN] {
    let mut b = encode(key, l4, seed);
    b[46..48].copy_from_slice(&fields.0.to_ne_bytes());
    b
}

#[test]
fn bpf_flow_hash_matches_model() {
    require_root();

    let mut storage = MaybeUninit::<OpenObject>::uninit();
    let open = HashTestSkelBuilder::default()
        .open(&mut storage)
        .expect("open hash_test skeleton");
    let skel = open
        .load()
        .expect("load hash_test skeleton (verifier log above)");
    let prog = &skel.progs.mpt_hash_test;
    assert_eq!(prog.prog_type(), ProgramType::SchedCls);

    let run = |buf: &[u8], repeat: u32| {
        let out = prog
            .test_run(ProgramInput {
                data_in: Some(buf),
                repeat,
                ..Default::default()
            })
            .expect("BPF_PROG_TEST_RUN");
        (out.return_value, out.duration)
    };

    // A too-short input is rejected by the program, not mis-hashed.
    let (rv, _) = run(&[0u8; IN_LEN - 1], 1);
    assert_eq!(rv, SHORT);

    let bounds = [
        upper_bounds(&[1, 1, 1, 1], &[true; 4]),
        upper_bounds(&[3, 1, 2], &[true; 3]),
        upper_bounds(&[1, 5, 1, 1, 7], &[true, false, true, true, true]),
    ];

    let mut rng = XorShift64(0x6d70_7431_6861_7368);
    let mut checked = 0usize;
    let mut by = [[0usize; 2]; 2]; // [v4, v6] x [l3, l4]
    for i in 0..KEYS {
        let key = random_key(&mut rng);
        let l4 = rng.below(2) == 1;
        let seed = match i % 16 {
            0 => 0,
            1 => u32::MAX,
            _ => rng.next() as u32,
        };
        let want = flow_hash(&key, l4, seed);
        let (got, _) = run(&encode(&key, l4, seed), 1);
        assert_eq!(
            got, want,
            "BPF and Rust flow hash differ for {key:?} l4={l4} seed={seed:#x} (key #{i})"
        );
        for b in &bounds {
            assert_eq!(select(got, b), select(want, b));
            assert!(select(got, b).is_some());
        }
        // Both directions agree in BPF too.
        let rev = FlowKey {
            src: key.dst,
            dst: key.src,
            sport: key.dport,
            dport: key.sport,
            ..key
        };
        if i % 8 == 0 {
            let (got_rev, _) = run(&encode(&rev, l4, seed), 1);
            assert_eq!(got_rev, want, "reverse direction of {key:?}");
        }
        // Every recipe hashes alike in BPF and Rust, both directions too.
        let f = RECIPES[i % RECIPES.len()];
        let want_f = flow_hash_fields(&key, l4, seed, f);
        let (got_f, _) = run(&encode_fields(&key, l4, seed, f), 1);
        assert_eq!(
            got_f, want_f,
            "recipe {f}: BPF and Rust differ for {key:?} l4={l4}"
        );
        if i % 8 == 1 {
            let (got_rev, _) = run(&encode_fields(&rev, l4, seed, f), 1);
            assert_eq!(got_rev, want_f, "recipe {f}: reverse direction of {key:?}");
        }
        by[usize::from(key.family == Family::V6)][usize::from(l4)] += 1;
        checked += 1;
    }

    // Per-call cost: the kernel's average over many repetitions of one key.
    let mut per_call = Vec::new();
    for (family, l4) in [(Family::V4, false), (Family::V4, true), (Family::V6, true)] {
        let mut key = random_key(&mut rng);
        key.family = family;
        key.proto = 6;
        let (_, d): (u32, Duration) = run(&encode(&key, l4, 7), 100_000);
        per_call.push(format!(
            "{}{}: {} ns",
            if family == Family::V4 { "v4" } else { "v6" },
            if l4 { "/l4" } else { "/l3" },
            d.as_nanos()
        ));
    }

    println!(
        "hash parity: {checked} keys checked (v4 l3 {}, v4 l4 {}, v6 l3 {}, v6 l4 {}); \
         BPF test_run per call (incl. test_run overhead): {}",
        by[0][0],
        by[0][1],
        by[1][0],
        by[1][1],
        per_call.join(", ")
    );
    assert!(checked >= 10_000);
}

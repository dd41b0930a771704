//! Growable maps (`crates/bpf/src/grow.rs`) on the running kernel, root: an array of one hash
//! map whose inner map is replaced by a larger copy when full. The copy holds every entry, the
//! outer array names the new map (the kernel's own answer, by id), the handle the tool holds
//! names it too, per-CPU values survive whole, and a map at its limit says so in one line with
//! `E2BIG` (what `mproute` and `ila` report when a table reaches its limit, exit 2).

use std::os::fd::{AsFd, AsRawFd};

use libbpf_rs::{libbpf_sys, MapCore, MapFlags, MapHandle, MapType};
use mpt_bpf::grow::{self, Limit};
use mpt_testkit::require_root;

/// A growable map made by hand: (outer array, inner map of `cap` entries).
fn growable(ty: MapType, value_size: u32, cap: u32) -> (MapHandle, MapHandle) {
    let opts = libbpf_sys::bpf_map_create_opts {
        sz: size_of::<libbpf_sys::bpf_map_create_opts>() as _,
        map_flags: libbpf_sys::BPF_F_NO_PREALLOC,
        ..Default::default()
    };
    let inner = MapHandle::create(ty, Some("t_in"), 4, value_size, cap, &opts).expect("inner map");
    let outer_opts = libbpf_sys::bpf_map_create_opts {
        sz: size_of::<libbpf_sys::bpf_map_create_opts>() as _,
        inner_map_fd: inner.as_fd().as_raw_fd() as u32,
        ..Default::default()
    };
    let outer = MapHandle::create(MapType::ArrayOfMaps, Some("t"), 4, 4, 1, &outer_opts)
        .expect("outer array");
    let fd = inner.as_fd().as_raw_fd() as u32;
    outer
        .update(&0u32.to_ne_bytes(), &fd.to_ne_bytes(), MapFlags::ANY)
        .expect("put the inner map in place");
    (outer, inner)
}

fn id_of(m: &MapHandle) -> u32 {
    libbpf_rs::MapInfo::new(m.as_fd())
        .expect("map info")
        .info
        .id
}

#[test]
fn a_full_map_grows_keeps_its_entries_and_names_its_limit() {
    require_root();
    let (outer, inner) = growable(MapType::Hash, 8, 4);
    for k in 0u32..4 {
        inner
            .update(
                &k.to_ne_bytes(),
                &u64::from(k * 10).to_ne_bytes(),
                MapFlags::ANY,
            )
            .expect("fill");
    }
    let e = inner
        .update(&4u32.to_ne_bytes(), &0u64.to_ne_bytes(), MapFlags::ANY)
        .expect_err("a fifth entry in a map of four");
    assert!(grow::is_full(&e), "{e}");
    let limit = Limit {
        things: "things",
        most: 8,
    };
    let before = id_of(&inner);
    assert_eq!(
        grow::grow(&outer, &inner, "t", 0, limit, false).expect("grow"),
        8
    );
    let after = id_of(&inner);
    assert_ne!(before, after, "the handle names the new map");
    assert_eq!(
        grow::inner_id(id_of(&outer)),
        Some(after),
        "the outer array names it"
    );
    assert_eq!(grow::capacity(&inner, "t").expect("capacity"), 8);
    for k in 0u32..4 {
        let v = inner
            .lookup(&k.to_ne_bytes(), MapFlags::ANY)
            .expect("lookup")
            .expect("copied");
        assert_eq!(v, u64::from(k * 10).to_ne_bytes());
    }
    for k in 4u32..8 {
        inner
            .update(&k.to_ne_bytes(), &0u64.to_ne_bytes(), MapFlags::ANY)
            .expect("room after growing");
    }
    let err = grow::grow(&outer, &inner, "t", 0, limit, false).expect_err("at its limit");
    assert_eq!(err.to_string(), "grow t: the state holds at most 8 things");
    assert_eq!(err.errno(), Some(libc::E2BIG));
}

#[test]
fn per_cpu_counters_are_copied_for_every_cpu() {
    require_root();
    let cpus = libbpf_rs::num_possible_cpus().expect("cpus");
    let (outer, inner) = growable(MapType::PercpuHash, 16, 2);
    let vals: Vec<Vec<u8>> = (0..cpus)
        .map(|c| {
            let mut v = (c as u64 + 1).to_ne_bytes().to_vec();
            v.extend_from_slice(&(100 * (c as u64 + 1)).to_ne_bytes());
            v
        })
        .collect();
    inner
        .update_percpu(&7u32.to_ne_bytes(), &vals, MapFlags::ANY)
        .expect("fill");
    let limit = Limit {
        things: "counters",
        most: 64,
    };
    assert_eq!(
        grow::grow(&outer, &inner, "t", 40, limit, true).expect("grow"),
        64
    );
    let got = inner
        .lookup_percpu(&7u32.to_ne_bytes(), MapFlags::ANY)
        .expect("lookup")
        .expect("copied");
    assert_eq!(got, vals);
}

/// The state skeleton's own growable map (its first inner map created by libbpf, with BTF):
/// the copy is accepted by the kernel as the array's element (5.15 to 6.1 compare the value
/// layout BTF gives, which a copy without BTF would fail), holds every entry, and the
/// skeleton's outer array names it.
#[test]
fn the_state_skeletons_map_grows() {
    use libbpf_rs::skel::{OpenSkel, SkelBuilder};
    require_root();
    let mut obj = std::mem::MaybeUninit::uninit();
    let open = mpt_bpf::skel::mproute::state::StateSkelBuilder::default()
        .open(&mut obj)
        .expect("open the state object");
    let skel = open.load().expect("load the state object");
    let outer = MapHandle::try_from(&skel.maps.mpt_groups).expect("outer");
    let inner = MapHandle::try_from(&skel.maps.mpt_groups_in).expect("inner");
    let cap = grow::capacity(&inner, "mpt_groups").expect("capacity");
    let value = vec![0u8; inner.value_size() as usize];
    for k in 0..cap {
        inner
            .update(&k.to_ne_bytes(), &value, MapFlags::ANY)
            .expect("fill");
    }
    let limit = Limit {
        things: "groups",
        most: 1 << 20,
    };
    let grown = grow::grow(&outer, &inner, "mpt_groups", 0, limit, false).expect("grow");
    assert_eq!(grown, 2 * cap);
    assert_eq!(grow::inner_id(id_of(&outer)), Some(id_of(&inner)));
    assert_eq!(inner.keys().count() as u32, cap);
    inner
        .update(&cap.to_ne_bytes(), &value, MapFlags::ANY)
        .expect("room after growing");
}

/// A map the programs fill is copied without the entries of keys its table no longer has
/// (`grow_keeping`): what a packet in flight made again after a route's deletion is dropped.
#[test]
fn entries_left_behind_are_not_copied() {
    require_root();
    let (outer, inner) = growable(MapType::Hash, 8, 4);
    for k in 0u32..4 {
        inner
            .update(&k.to_ne_bytes(), &1u64.to_ne_bytes(), MapFlags::ANY)
            .expect("fill");
    }
    let limit = Limit {
        things: "counters",
        most: 64,
    };
    let keep = |k: &[u8]| k != 2u32.to_ne_bytes();
    grow::grow_keeping(&outer, &inner, "t", 0, limit, true, &keep).expect("grow");
    let mut keys: Vec<Vec<u8>> = inner.keys().collect();
    keys.sort();
    let want: Vec<Vec<u8>> = [0u32, 1, 3]
        .iter()
        .map(|k| k.to_ne_bytes().to_vec())
        .collect();
    assert_eq!(keys, want);
}

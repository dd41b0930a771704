//! Root test: the state skeleton opens and loads, and the kernel records all
//! eight state maps (`bpf/mproute/maps.bpf.h`) in the anchor program's `map_ids`
//! (that is what keeps the maps alive while the anchor is attached, and how
//! user space finds them again).
//!
//! Needs root (CAP_BPF + CAP_NET_ADMIN to load a tcx program). It fails, it
//! does not skip, when run without root: CI runs it as root.

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use libbpf_rs::query::{ProgInfoIter, ProgInfoQueryOptions};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{libbpf_sys, Map, MapCore, MapHandle, OpenObject, Program, ProgramType};
use mpt_bpf::mproute::abi::{
    MptDpRoute, MptGroup, MptLpm4Key, MptMeta, MptRouteKey, MptRouteStats, MptRouteVal, ABI_VERSION,
};
use mpt_bpf::skel::mproute::state::StateSkelBuilder;

fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "tests/load.rs loads BPF programs and must run as root \
         (e.g. `sudo -E cargo test -p mpt-bpf --test load`); it is not skipped on purpose"
    );
}

/// `bpf_prog_info.map_ids` of a loaded program, through the raw libbpf API
/// (libbpf-rs 0.27 has no public per-fd `ProgramInfo` constructor).
fn prog_map_ids(prog_fd: BorrowedFd<'_>) -> Vec<u32> {
    let mut info = libbpf_sys::bpf_prog_info::default();
    let mut len = size_of::<libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: `info` is a valid, writable bpf_prog_info of `len` bytes.
    let ret =
        unsafe { libbpf_sys::bpf_prog_get_info_by_fd(prog_fd.as_raw_fd(), &mut info, &mut len) };
    assert_eq!(
        ret,
        0,
        "bpf_prog_get_info_by_fd: {}",
        std::io::Error::last_os_error()
    );

    let mut ids = vec![0u32; info.nr_map_ids as usize];
    let mut info2 = libbpf_sys::bpf_prog_info {
        nr_map_ids: info.nr_map_ids,
        map_ids: ids.as_mut_ptr() as u64,
        ..Default::default()
    };
    let mut len = size_of::<libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: `map_ids` points to `nr_map_ids` writable u32s that outlive the call.
    let ret =
        unsafe { libbpf_sys::bpf_prog_get_info_by_fd(prog_fd.as_raw_fd(), &mut info2, &mut len) };
    assert_eq!(
        ret,
        0,
        "bpf_prog_get_info_by_fd: {}",
        std::io::Error::last_os_error()
    );
    ids.truncate(info2.nr_map_ids.min(info.nr_map_ids) as usize);
    ids
}

/// The kernel id of a loaded map.
fn map_id(map: &Map<'_>) -> u32 {
    map.info()
        .unwrap_or_else(|e| panic!("{:?} info: {e}", map.name()))
        .info
        .id
}

#[test]
fn state_skeleton_loads_and_anchor_references_all_maps() {
    require_root();

    let mut storage = MaybeUninit::<OpenObject>::uninit();
    let open = StateSkelBuilder::default()
        .open(&mut storage)
        .expect("open state skeleton");
    let skel = open
        .load()
        .expect("load state skeleton (verifier log above)");

    let prog = &skel.progs.mpt_anchor;
    assert_eq!(prog.prog_type(), ProgramType::SchedCls);
    let prog_id = Program::id_from_fd(prog.as_fd()).expect("program id");

    let maps = &skel.maps;
    let meta_id = map_id(&maps.mpt_meta);
    let routes_id = map_id(&maps.mpt_routes);
    let lpm4_id = map_id(&maps.mpt_lpm4);
    let groups_id = map_id(&maps.mpt_groups);
    let stats_id = map_id(&maps.mpt_stats);
    let mut want = vec![
        meta_id,
        routes_id,
        lpm4_id,
        map_id(&maps.mpt_lpm6),
        groups_id,
        stats_id,
        map_id(&maps.mpt_res),
        map_id(&maps.mpt_slot_stats),
        map_id(&maps.mpt_pcpu),
        map_id(&maps.mpt_reasons),
    ];
    want.sort_unstable();
    let mut distinct = want.clone();
    distinct.dedup();
    assert_eq!(distinct.len(), 10, "map ids must be distinct: {want:?}");

    let mut ids = prog_map_ids(prog.as_fd());
    ids.sort_unstable();
    assert_eq!(
        ids, want,
        "anchor program map_ids must be exactly the ten state maps"
    );

    // Same answer through libbpf-rs's system-wide iterator.
    let via_iter =
        ProgInfoIter::with_query_opts(ProgInfoQueryOptions::default().include_map_ids(true))
            .find(|p| p.id == prog_id)
            .expect("anchor program not found by ProgInfoIter");
    let mut iter_ids = via_iter.map_ids.clone();
    iter_ids.sort_unstable();
    assert_eq!(iter_ids, want);

    // The maps can be reopened by id (how the state layer will find them)
    // and carry the ABI sizes.
    let meta = MapHandle::from_map_id(meta_id).expect("open mpt_meta by id");
    assert_eq!(meta.value_size() as usize, MptMeta::SIZE);
    // a growable map (mpt/lib/grow.h): the anchor holds the outer array, whose one element
    // is the first inner map libbpf created from `NAME_in`
    for (outer, inner) in [
        (groups_id, map_id(&maps.mpt_groups_in)),
        (routes_id, map_id(&maps.mpt_routes_in)),
        (stats_id, map_id(&maps.mpt_stats_in)),
        (map_id(&maps.mpt_res), map_id(&maps.mpt_res_in)),
        (map_id(&maps.mpt_pcpu), map_id(&maps.mpt_pcpu_in)),
    ] {
        assert_eq!(mpt_bpf::grow::inner_id(outer), Some(inner));
    }
    let (routes_id, stats_id, groups_id) = (
        map_id(&maps.mpt_routes_in),
        map_id(&maps.mpt_stats_in),
        map_id(&maps.mpt_groups_in),
    );
    let routes = MapHandle::from_map_id(routes_id).expect("open mpt_routes by id");
    assert_eq!(routes.key_size() as usize, MptRouteKey::SIZE);
    assert_eq!(routes.value_size() as usize, MptRouteVal::SIZE);
    let lpm4 = MapHandle::from_map_id(lpm4_id).expect("open mpt_lpm4 by id");
    assert_eq!(lpm4.key_size() as usize, MptLpm4Key::SIZE);
    assert_eq!(lpm4.value_size() as usize, MptDpRoute::SIZE);
    let groups = MapHandle::from_map_id(groups_id).expect("open mpt_groups by id");
    assert_eq!(groups.value_size() as usize, MptGroup::SIZE);
    let stats = MapHandle::from_map_id(stats_id).expect("open mpt_stats by id");
    assert_eq!(stats.key_size() as usize, MptRouteKey::SIZE);
    assert_eq!(stats.value_size() as usize, MptRouteStats::SIZE);

    // A write through one handle is visible through the other.
    let m = MptMeta::new(0x1234, 42);
    skel.maps
        .mpt_meta
        .update(&0u32.to_ne_bytes(), m.as_bytes(), libbpf_rs::MapFlags::ANY)
        .expect("write mpt_meta");
    let back = meta
        .lookup(&0u32.to_ne_bytes(), libbpf_rs::MapFlags::ANY)
        .expect("read mpt_meta")
        .expect("mpt_meta[0] present");
    assert_eq!(MptMeta::from_bytes(&back), Some(m));
    assert_eq!(m.abi_version, ABI_VERSION);

    // The kernel accepts the ABI structs as they are: an LPM trie entry
    // (prefixlen counts the table bits) is found by a longer lookup key ...
    let route = MptDpRoute {
        id: MptRouteKey {
            family: mpt_bpf::mproute::abi::AF_INET,
            dst_len: 24,
            table: 254,
            ..MptRouteKey::default()
        },
        algo: mpt_bpf::mproute::abi::ALGO_L3_HASH,
        flags: 0,
        stats_slot: 0,
        group: 7,
        ..MptDpRoute::default()
    };
    let flags = libbpf_rs::MapFlags::ANY;
    skel.maps
        .mpt_lpm4
        .update(
            MptLpm4Key::new(254, 24, [192, 0, 2, 0]).as_bytes(),
            route.as_bytes(),
            flags,
        )
        .expect("write mpt_lpm4");
    let hit = lpm4
        .lookup(MptLpm4Key::new(254, 32, [192, 0, 2, 77]).as_bytes(), flags)
        .expect("look up mpt_lpm4")
        .expect("192.0.2.77 in table 254 matches 192.0.2.0/24");
    assert_eq!(MptDpRoute::from_bytes(&hit), Some(route));
    let miss = lpm4
        .lookup(MptLpm4Key::new(255, 32, [192, 0, 2, 77]).as_bytes(), flags)
        .expect("look up mpt_lpm4");
    assert_eq!(miss, None, "another table must not match");

    // ... a group round-trips, and per-CPU stats read back one value per CPU.
    let mut group = MptGroup::zeroed();
    group.nh_count = 1;
    group.total_weight = 1;
    group.nh[0].ifindex = 1;
    group.nh[0].weight = 1;
    groups
        .update(&7u32.to_ne_bytes(), group.as_bytes(), flags)
        .expect("write mpt_groups");
    let back = groups
        .lookup(&7u32.to_ne_bytes(), flags)
        .expect("read mpt_groups")
        .expect("mpt_groups[7] present");
    assert_eq!(MptGroup::from_bytes(&back), Some(group));

    let ncpu = libbpf_rs::num_possible_cpus().expect("possible CPUs");
    let mut one = MptRouteStats::zeroed();
    one.route.packets = 1;
    one.route.bytes = 100;
    one.nh[0] = one.route;
    let per_cpu = vec![one.as_bytes().to_vec(); ncpu];
    stats
        .update_percpu(route.id.as_bytes(), &per_cpu, flags)
        .expect("write mpt_stats");
    let back = stats
        .lookup_percpu(route.id.as_bytes(), flags)
        .expect("read mpt_stats")
        .expect("mpt_stats entry present");
    assert_eq!(back.len(), ncpu);
    let sum = MptRouteStats::sum_percpu(&back).expect("per-CPU values of the ABI size");
    let n = u64::try_from(ncpu).expect("CPU count fits u64");
    assert_eq!((sum.route.packets, sum.route.bytes), (n, 100 * n));
    assert_eq!(sum.nh[0], sum.route);
    assert_eq!(sum.nh[1].packets, 0);

    drop(meta);
    drop(routes);
    drop(lpm4);
    drop(groups);
    drop(stats);
    drop(skel);

    // Once everything is dropped (nothing attached, nothing pinned) the
    // program and its maps go away (allow the kernel a moment: frees may be
    // deferred).
    let gone = (0..100).any(|_| {
        let gone = Program::fd_from_id(prog_id).is_err()
            && want.iter().all(|&id| MapHandle::from_map_id(id).is_err());
        if !gone {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        gone
    });
    assert!(
        gone,
        "anchor program {prog_id} or its maps still exist after drop"
    );
}

/// Every variant of the dataplane's veth checksum question that this kernel can run passes the
/// verifier: the software check (0, tun), the probe read (1, veth a module) and, where vmlinux
/// BTF has the veth's buffer type (veth built in, as on the CI machines), the direct read (2).
#[test]
fn dataplane_loads_with_each_veth_checksum_variant() {
    require_root();
    if !mpt_bpf::features::global_func_args() {
        // before 5.12: the verifier refuses the dataplane's global functions, and attach says so
        let mut obj = std::mem::MaybeUninit::uninit();
        let open = mpt_bpf::skel::mproute::dp::DpSkelBuilder::default()
            .open(&mut obj)
            .expect("open the dataplane skeleton");
        assert!(
            open.load().is_err(),
            "the probe said no, the verifier said yes"
        );
        return;
    }
    let mut variants = vec![0u32, 1];
    if mpt_bpf::mproute::dataplane::veth_skb_read() == 2 {
        variants.push(2);
    }
    for veth_skb in variants {
        let mut obj = std::mem::MaybeUninit::uninit();
        let mut open = mpt_bpf::skel::mproute::dp::DpSkelBuilder::default()
            .open(&mut obj)
            .expect("open the dataplane skeleton");
        let ro = open
            .maps
            .rodata_data
            .as_deref_mut()
            .expect("the dataplane's .rodata");
        ro.mpt_local_stacks = 1;
        ro.mpt_veth_skb = veth_skb;
        open.progs.mpt_dp_tc.set_autoload(false);
        open.load()
            .unwrap_or_else(|e| panic!("mpt_veth_skb {veth_skb}: the verifier refused: {e}"));
    }
}

//! Root test: the state skeleton opens and loads, and the kernel records both
//! state maps in the anchor program's `map_ids` (that is what keeps the maps
//! alive while the anchor is attached, and how user space finds them again).
//!
//! Needs root (CAP_BPF + CAP_NET_ADMIN to load a tcx program). It fails, it
//! does not skip, when run without root: CI runs it as root.

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use libbpf_rs::query::{ProgInfoIter, ProgInfoQueryOptions};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{libbpf_sys, MapCore, MapHandle, OpenObject, Program, ProgramType};
use mpt_bpf::abi::{MptMeta, MptRouteKey, MptRouteVal, ABI_VERSION};
use mpt_bpf::skel::state::StateSkelBuilder;

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

#[test]
fn state_skeleton_loads_and_anchor_references_both_maps() {
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

    let meta_id = skel.maps.mpt_meta.info().expect("mpt_meta info").info.id;
    let routes_id = skel
        .maps
        .mpt_routes
        .info()
        .expect("mpt_routes info")
        .info
        .id;
    assert_ne!(meta_id, routes_id);

    let mut ids = prog_map_ids(prog.as_fd());
    ids.sort_unstable();
    let mut want = vec![meta_id, routes_id];
    want.sort_unstable();
    assert_eq!(
        ids, want,
        "anchor program map_ids must be exactly the two state maps"
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
    let routes = MapHandle::from_map_id(routes_id).expect("open mpt_routes by id");
    assert_eq!(routes.key_size() as usize, MptRouteKey::SIZE);
    assert_eq!(routes.value_size() as usize, MptRouteVal::SIZE);

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

    drop(meta);
    drop(routes);
    drop(skel);

    // Once everything is dropped (nothing attached, nothing pinned) the
    // program and its maps go away (allow the kernel a moment: frees may be
    // deferred).
    let gone = (0..100).any(|_| {
        let gone = Program::fd_from_id(prog_id).is_err()
            && MapHandle::from_map_id(meta_id).is_err()
            && MapHandle::from_map_id(routes_id).is_err();
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

//! Growable maps (`bpf/include/mpt/lib/grow.h`): a state's hash maps start small and are
//! replaced by larger copies when full, so that a namespace's BPF memory follows what its
//! tables hold instead of what they could hold.
//!
//! A hash map's bucket array is allocated for its capacity when it is created, 16 bytes a
//! bucket whatever it holds (`BPF_F_NO_PREALLOC` spares the elements, not the buckets): the
//! million-route maps of earlier versions were 16 MiB each while empty. A growable map is an
//! array of one map (`BPF_MAP_TYPE_ARRAY_OF_MAPS`, the name the state and the skeletons
//! know) whose element, the inner map, holds the entries; programs look the inner map up
//! on every use (a few instructions the verifier inlines). Growing it ([`grow`]) creates a
//! map of twice the capacity, copies every entry with batch operations, puts it in the
//! array (atomically for the programs: a packet sees the old map or the new one, both
//! whole) and makes the handle the tool holds name the new map (`dup3` over its
//! descriptor), so every borrower of the handle writes into the new map from then on. The
//! old map is freed by the kernel when its last reader is done.
//!
//! Counters the programs add to while the copy is made are carried over afterwards: after a
//! grace period (no program still runs on the old map), the difference between the old map's
//! final values and the copied ones is added to the new map, so a packet counted during a
//! growth is counted once (an increment that races the read-modify-write of its own key in
//! that pass, a few microseconds, can be lost). The copy is made in the tool's memory (the
//! whole map, twice for counters): a growth of a map of N entries costs that once.
//!
//! Writers hold the namespace's lock ([`crate::pinned::NsLock`]), so no other invocation
//! writes the map while it is copied.

use std::os::fd::{AsFd, AsRawFd};

use libbpf_rs::{libbpf_sys, MapCore, MapFlags, MapHandle};

use crate::batch::{self, Entries};
use crate::error::{Error, ErrorKind};

/// The errno a full hash map answers a write of a new key with.
pub const FULL: i32 = libc::E2BIG;

/// Whether a map write failed because the map is full ([`FULL`]).
pub fn is_full(e: &libbpf_rs::Error) -> bool {
    crate::error::refused_errno(e) == Some(FULL)
}

/// The inner map of growable map `outer` (named `name` in errors), opened by its id.
pub fn inner(outer: &MapHandle, name: &str) -> Result<MapHandle, Error> {
    // a map replaced between the lookup and the open is gone: look again (once)
    let id = inner_id_of(outer, name)?;
    match MapHandle::from_map_id(id) {
        Ok(m) => Ok(m),
        Err(_) => {
            let id = inner_id_of(outer, name)?;
            MapHandle::from_map_id(id).map_err(Error::libbpf(format!("open {name} (map {id})")))
        }
    }
}

/// The id of the map inside map `id`, if that is a growable map's outer array.
pub fn inner_id(id: u32) -> Option<u32> {
    let m = MapHandle::from_map_id(id).ok()?;
    if m.map_type() != libbpf_rs::MapType::ArrayOfMaps {
        return None;
    }
    let inner = inner(&m, "a growable map").ok()?;
    libbpf_rs::MapInfo::new(inner.as_fd())
        .ok()
        .map(|i| i.info.id)
}

/// The capacity (`max_entries`) the kernel gives `map` now.
pub fn capacity(map: &MapHandle, name: &str) -> Result<u32, Error> {
    libbpf_rs::MapInfo::new(map.as_fd())
        .map(|i| i.info.max_entries)
        .map_err(Error::libbpf(format!("read {name}'s capacity")))
}

/// What a growable map holds, for the error when it can grow no more.
#[derive(Debug, Clone, Copy)]
pub struct Limit {
    /// What its entries are, plural (`routes`).
    pub things: &'static str,
    /// The most entries it grows to.
    pub most: u32,
}

/// Replace `inner`, the map inside the growable map `outer` (`name`), by a copy with room for
/// at least `at_least` entries (at least twice its capacity, a power of two, at most
/// `limit.most`). `counters`: the map holds counters (`u64`s only) that programs add to, so
/// what they added during the copy is carried over. Afterwards `inner` names the new map.
/// Returns the new capacity; [`ErrorKind::Full`] when the map is at its limit already.
pub fn grow(
    outer: &MapHandle,
    inner: &MapHandle,
    name: &str,
    at_least: u32,
    limit: Limit,
    counters: bool,
) -> Result<u32, Error> {
    grow_keeping(outer, inner, name, at_least, limit, counters, &|_| true)
}

/// [`grow`], copying only the entries whose key `keep` accepts (a map the programs fill, whose
/// entries of deleted keys a packet in flight may have made again after their deletion).
pub fn grow_keeping(
    outer: &MapHandle,
    inner: &MapHandle,
    name: &str,
    at_least: u32,
    limit: Limit,
    counters: bool,
    keep: &dyn Fn(&[u8]) -> bool,
) -> Result<u32, Error> {
    let info = libbpf_rs::MapInfo::new(inner.as_fd())
        .map_err(Error::libbpf(format!("read {name}'s capacity")))?
        .info;
    // the handle must name the map the array holds now: a handle opened before another
    // invocation grew the map would copy stale entries over its writes
    let current = inner_id_of(outer, name)?;
    if current != info.id {
        return Err(Error::io(
            format!(
                "grow {name}: another invocation replaced it (map {current}, not {}); run the command again",
                info.id
            ),
            std::io::Error::from_raw_os_error(libc::ESTALE),
        ));
    }
    let cap = info.max_entries;
    if cap >= limit.most {
        return Err(Error {
            what: format!("grow {name}"),
            kind: ErrorKind::Full {
                things: limit.things,
                limit: limit.most,
            },
        });
    }
    let want = cap.saturating_mul(2).max(at_least);
    let new_cap = want
        .checked_next_power_of_two()
        .unwrap_or(limit.most)
        .min(limit.most);
    // the map's BTF too: from 5.15 to 6.1 the kernel refuses an inner map whose value layout
    // (`timer_off`, known from BTF) differs from the first one's, which libbpf created with BTF
    let btf = if info.btf_id != 0 {
        // SAFETY: a plain system call; the descriptor it returns is ours.
        let fd = unsafe { libbpf_sys::bpf_btf_get_fd_by_id(info.btf_id) };
        if fd < 0 {
            return Err(Error::io(
                format!("read {name}'s BTF (id {})", info.btf_id),
                std::io::Error::from_raw_os_error(-fd),
            ));
        }
        // SAFETY: `fd` was just opened for us.
        Some(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
    } else {
        None
    };
    let opts = libbpf_sys::bpf_map_create_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_map_create_opts>() as _,
        map_flags: info.map_flags,
        btf_fd: btf
            .as_ref()
            .map_or(0, |f| u32::try_from(f.as_raw_fd()).unwrap_or(0)),
        btf_key_type_id: if btf.is_some() {
            info.btf_key_type_id
        } else {
            0
        },
        btf_value_type_id: if btf.is_some() {
            info.btf_value_type_id
        } else {
            0
        },
        ..Default::default()
    };
    // the kernel's name of the map it replaces (`NAME_in`, as libbpf named the first)
    let kname = libbpf_rs::MapInfo::new(inner.as_fd())
        .ok()
        .and_then(|i| i.name().ok().map(str::to_string))
        .unwrap_or_else(|| name.to_string());
    let fresh = MapHandle::create(
        inner.map_type(),
        Some(&kname),
        info.key_size,
        info.value_size,
        new_cap,
        &opts,
    )
    .map_err(Error::libbpf(format!(
        "create a larger {name} ({new_cap} entries)"
    )))?;
    let mut copied = batch::read_all(inner, name)?;
    copied.retain(keep);
    batch::write_all(&fresh, &copied, name)?;
    // the old map, for what the programs count while it is replaced
    let old = counters
        .then(|| MapHandle::try_from(inner))
        .transpose()
        .map_err(Error::libbpf(format!("keep the old {name}")))?;
    let fd = u32::try_from(fresh.as_fd().as_raw_fd()).unwrap_or(u32::MAX);
    outer
        .update(&0u32.to_ne_bytes(), &fd.to_ne_bytes(), MapFlags::ANY)
        .map_err(Error::libbpf(format!("put the larger {name} in place")))?;
    crate::log::note_grow(name, cap, new_cap, copied.len());
    redirect(inner, &fresh, name)?;
    if let Some(old) = old {
        // after a grace period no program still adds to the old map (tc and XDP programs run
        // in RCU read-side sections; membarrier's global command waits for one)
        // SAFETY: a plain system call without pointers.
        let r = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) };
        if r < 0 {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        // best effort: the map has grown whatever happens to a late count
        let _ = carry_counts(&old, inner, &copied, name, keep);
    }
    Ok(new_cap)
}

/// `MEMBARRIER_CMD_GLOBAL` (`synchronize_rcu()` in the kernel).
const MEMBARRIER_CMD_GLOBAL: libc::c_long = 1;

/// The id of the map the outer array `outer` holds now.
fn inner_id_of(outer: &MapHandle, name: &str) -> Result<u32, Error> {
    outer
        .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
        .map_err(Error::libbpf(format!("read {name}")))?
        .and_then(|v| {
            v.get(..4)
                .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        })
        .ok_or_else(|| {
            Error::io(
                format!("find the map inside {name}"),
                std::io::Error::from_raw_os_error(libc::ENOENT),
            )
        })
}

/// Make the descriptor of `handle` name the map `to` names (`dup3`): every borrower of
/// `handle` reads and writes `to`'s map from then on.
pub fn redirect(handle: &MapHandle, to: &MapHandle, name: &str) -> Result<(), Error> {
    let (from, dst) = (to.as_fd().as_raw_fd(), handle.as_fd().as_raw_fd());
    if from == dst {
        return Ok(());
    }
    // SAFETY: both descriptors are open and owned by live handles; `dst` keeps its number and
    // names `from`'s map (dup3 closes what it named first, one reference of the old map).
    if unsafe { libc::dup3(from, dst, libc::O_CLOEXEC) } < 0 {
        return Err(Error::io(
            format!("reopen {name}"),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Add to `new` what the programs added to `old` after `copied` was read from it.
fn carry_counts(
    old: &MapHandle,
    new: &MapHandle,
    copied: &Entries,
    name: &str,
    keep: &dyn Fn(&[u8]) -> bool,
) -> Result<(), Error> {
    let late = batch::read_all(old, name)?;
    let before: rustc_hash::FxHashMap<&[u8], &[u8]> = copied.iter().collect();
    let fd = new.as_fd().as_raw_fd();
    for (k, v) in late.iter().filter(|(k, _)| keep(k)) {
        let was = before.get(k).copied();
        if was == Some(v) {
            continue;
        }
        let mut cur = vec![0u8; v.len()];
        // SAFETY: `k` is a whole key, `cur` holds a whole value (every CPU's).
        let ret = unsafe {
            libbpf_sys::bpf_map_lookup_elem(fd, k.as_ptr().cast(), cur.as_mut_ptr().cast())
        };
        if ret < 0 {
            cur.fill(0);
        }
        for (i, c) in cur.chunks_exact_mut(8).enumerate() {
            let at = i * 8..i * 8 + 8;
            let word = |b: Option<&[u8]>| {
                b.and_then(|b| b.get(at.clone()))
                    .and_then(|b| <[u8; 8]>::try_from(b).ok())
                    .map_or(0, u64::from_ne_bytes)
            };
            let add = word(Some(v)).wrapping_sub(word(was));
            let sum = word(Some(c)).wrapping_add(add);
            c.copy_from_slice(&sum.to_ne_bytes());
        }
        // SAFETY: as above.
        let ret = unsafe {
            libbpf_sys::bpf_map_update_elem(fd, k.as_ptr().cast(), cur.as_ptr().cast(), 0)
        };
        if ret < 0 {
            return Err(Error::io(
                format!("carry {name}'s counters over"),
                std::io::Error::last_os_error(),
            ));
        }
    }
    Ok(())
}

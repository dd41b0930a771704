//! Per-namespace state: where it lives and how any invocation finds it.
//!
//! The state is a set of BPF maps (`mpt_meta`, `mpt_routes`, defined in
//! `bpf/include/mpt/state_abi.h`). They are kept alive by an *anchor*: the tiny program
//! `mpt_anchor` attached with a legacy (non-link) tcx attachment to the namespace's `lo` ingress.
//! Such an attachment needs no pin and no open file descriptor, and disappears with the
//! namespace, so a deleted namespace leaves nothing to collect. Every invocation finds the maps
//! through the kernel, not through a path: query the programs attached to `lo`, take the anchor's
//! map ids, open them with `BPF_MAP_GET_FD_BY_ID`. That works the same with `-n NAME` (setns in
//! process, host bpffs visible) and under `ip netns exec NAME` (private mount namespace with no
//! host bpffs).
//!
//! When the host's bpffs is reachable the maps are also pinned under
//! `/sys/fs/bpf/mproute/<netns-cookie>/` (directory mode 0700) for operators and bpftool, and a
//! lost anchor is re-created from those pins. The cost of the anchor is one tcx dispatch of a
//! program that returns `TCX_NEXT` at once, on loopback ingress only.
//!
//! Concurrent invocations for one namespace serialize on an flock of
//! `/run/mproute/<netns-cookie>.lock` (`/run` is shared by `ip netns exec`).

use std::fs::{File, OpenOptions};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle};

use crate::abi::{MptMeta, MptRouteKey, MptRouteVal, ABI_VERSION};
use crate::skel::state::StateSkelBuilder;

/// Name of the anchor program (as the kernel truncates it: at most 15 characters).
pub const ANCHOR_PROG: &str = "mpt_anchor";
/// Where state is pinned in the host's bpffs.
pub const PIN_ROOT: &str = "/sys/fs/bpf/mproute";
/// Where the per-namespace locks live.
pub const LOCK_DIR: &str = "/run/mproute";
const LO_IFINDEX: i32 = 1;
/// Every map the anchor holds (bpf/maps.bpf.h).
pub const STATE_MAPS: &[&str] = &[
    "mpt_meta",
    "mpt_routes",
    "mpt_lpm4",
    "mpt_lpm6",
    "mpt_groups",
    "mpt_stats",
    "mpt_slot_stats",
    "mpt_pcpu",
    "mpt_reasons",
];
const BPF_FS_MAGIC: i64 = 0xcafe_4a11;
/// `mpt_meta.flags`: the kernel was checked for native `RTA_MP_ALGO` support.
pub const META_F_NATIVE_CHECKED: u32 = 1;
/// `mpt_meta.flags`: the kernel keeps `RTA_MP_ALGO` (no current kernel does).
pub const META_F_NATIVE: u32 = 2;

/// Errors of the state layer.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// A system call failed.
    #[error("{what}: {source}")]
    Sys {
        /// What was attempted.
        what: String,
        /// Cause.
        source: io::Error,
    },
    /// libbpf refused.
    #[error("{what}: {source}")]
    Bpf {
        /// What was attempted.
        what: String,
        /// Cause.
        source: libbpf_rs::Error,
    },
    /// The state was written by another ABI version.
    #[error("the BPF state of this namespace has ABI version {found}, this mproute uses {ours}")]
    Abi {
        /// Version found.
        found: u32,
        /// Our version.
        ours: u32,
    },
}

fn sys(what: impl Into<String>) -> impl FnOnce(io::Error) -> StateError {
    let what = what.into();
    move |source| StateError::Sys { what, source }
}

fn bpf(what: impl Into<String>) -> impl FnOnce(libbpf_rs::Error) -> StateError {
    let what = what.into();
    move |source| StateError::Bpf { what, source }
}

/// An exclusive lock on one namespace's state, released on drop.
#[derive(Debug)]
pub struct NsLock {
    _guard: nix::fcntl::Flock<File>,
}

impl NsLock {
    /// Take the lock for `cookie`, waiting for other invocations.
    pub fn take(cookie: u64) -> Result<NsLock, StateError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(LOCK_DIR)
            .map_err(sys(format!("create {LOCK_DIR}")))?;
        let path = Path::new(LOCK_DIR).join(format!("{cookie}.lock"));
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(sys(format!("open {}", path.display())))?;
        let guard =
            nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive).map_err(|(_, e)| {
                StateError::Sys {
                    what: format!("lock {}", path.display()),
                    source: e.into(),
                }
            })?;
        Ok(NsLock { _guard: guard })
    }
}

/// The open state of the current namespace.
#[derive(Debug)]
pub struct RouteState {
    meta: MapHandle,
    routes: MapHandle,
    /// Every map of the state, by name (see `bpf/maps.bpf.h`).
    pub maps: std::collections::BTreeMap<String, MapHandle>,
    /// The namespace's cookie.
    pub cookie: u64,
    /// Id of the anchor program.
    pub anchor_id: u32,
    /// Which `mpt_slot_stats` slots are taken, as recorded in slot 0 (see `dpmaps.rs`): read on
    /// first use, written through (commands hold the namespace lock while they write).
    pub(crate) slots: std::sync::Mutex<Option<Vec<bool>>>,
}

/// The netns cookie of the calling thread (`SO_NETNS_COOKIE`).
pub fn netns_cookie() -> Result<u64, StateError> {
    // SAFETY: plain socket(2) call; the fd is owned below.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(StateError::Sys {
            what: "socket".into(),
            source: io::Error::last_os_error(),
        });
    }
    // SAFETY: fd is a fresh descriptor we own.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut v: u64 = 0;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: writes at most len bytes into v.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_NETNS_COOKIE,
            (&mut v as *mut u64).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(StateError::Sys {
            what: "getsockopt SO_NETNS_COOKIE".into(),
            source: io::Error::last_os_error(),
        });
    }
    Ok(v)
}

/// Ids of the programs attached (legacy or link) to `lo` tcx ingress.
fn tcx_ingress_progs(ifindex: i32) -> Result<Vec<u32>, StateError> {
    let mut ids = [0u32; 64];
    let mut opts = libbpf_sys::bpf_prog_query_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_prog_query_opts>() as _,
        prog_ids: ids.as_mut_ptr(),
        __bindgen_anon_1: libbpf_sys::bpf_prog_query_opts__bindgen_ty_1 {
            count: ids.len() as u32,
        },
        ..Default::default()
    };
    // SAFETY: opts points at a correctly sized struct and ids outlives the call.
    let rc =
        unsafe { libbpf_sys::bpf_prog_query_opts(ifindex, libbpf_sys::BPF_TCX_INGRESS, &mut opts) };
    if rc < 0 {
        let e = io::Error::from_raw_os_error(-rc);
        // No tcx entry on the device yet.
        if e.raw_os_error() == Some(libc::ENOENT) {
            return Ok(Vec::new());
        }
        return Err(StateError::Sys {
            what: "query tcx programs on lo".into(),
            source: e,
        });
    }
    // SAFETY: both union members are the same u32.
    let n = unsafe { opts.__bindgen_anon_1.count } as usize;
    Ok(ids[..n.min(ids.len())].to_vec())
}

/// Name and map ids of a program.
pub(crate) fn prog_name_maps(id: u32) -> Result<(String, Vec<u32>), StateError> {
    crate::prog::info(id).map(|i| (i.name, i.map_ids))
}

fn find_anchor() -> Result<Option<(u32, Vec<u32>)>, StateError> {
    for id in tcx_ingress_progs(LO_IFINDEX)? {
        let (name, maps) = prog_name_maps(id)?;
        if name == ANCHOR_PROG {
            return Ok(Some((id, maps)));
        }
    }
    Ok(None)
}

fn bpffs_at(p: &Path) -> bool {
    nix::sys::statfs::statfs(p).is_ok_and(|s| s.filesystem_type().0 == BPF_FS_MAGIC)
}

/// Directory of the pins of `cookie`, if the host's bpffs is reachable from here (it is not
/// under `ip netns exec`). Mounts bpffs at /sys/fs/bpf when nothing is mounted there and we are
/// in the initial mount namespace's view (a /sys that has /sys/fs/bpf).
pub fn pin_dir(cookie: u64) -> Option<PathBuf> {
    let root = Path::new("/sys/fs/bpf");
    if !bpffs_at(root) {
        return None;
    }
    Some(Path::new(PIN_ROOT).join(cookie.to_string()))
}

impl RouteState {
    /// Open the namespace's state; create it when `create` and it does not exist yet. Returns
    /// `None` when there is no state and `create` is false.
    pub fn open(create: bool) -> Result<Option<RouteState>, StateError> {
        let cookie = netns_cookie()?;
        if let Some((id, maps)) = find_anchor()? {
            return Self::from_maps(cookie, id, &maps).map(Some);
        }
        // No anchor: re-create it from pins if they exist (someone detached it), else create
        // fresh state if asked to.
        let pins = pin_dir(cookie).filter(|d| d.join("mpt_meta").exists());
        if pins.is_none() && !create {
            return Ok(None);
        }
        Self::create_anchor(cookie, pins.as_deref())?;
        match find_anchor()? {
            Some((id, maps)) => Self::from_maps(cookie, id, &maps).map(Some),
            None => Err(StateError::Sys {
                what: "find the state anchor just attached to lo".into(),
                source: io::Error::from_raw_os_error(libc::ENOENT),
            }),
        }
    }

    fn from_maps(cookie: u64, anchor_id: u32, ids: &[u32]) -> Result<RouteState, StateError> {
        let mut maps = std::collections::BTreeMap::new();
        for id in ids {
            let m = MapHandle::from_map_id(*id).map_err(bpf(format!("open map {id}")))?;
            if let Some(name) = m.name().to_str() {
                maps.insert(name.to_string(), m);
            }
        }
        let dup = |name: &str| -> Result<MapHandle, StateError> {
            let m = maps.get(name).ok_or(StateError::Abi {
                found: 0,
                ours: ABI_VERSION,
            })?;
            MapHandle::try_from(m).map_err(bpf(format!("duplicate {name}")))
        };
        let meta = dup("mpt_meta")?;
        // The ABI version comes first: an older anchor may lack maps this version needs.
        let v = meta
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(bpf("read mpt_meta"))?
            .and_then(|b| {
                b.get(..4)
                    .map(|x| u32::from_ne_bytes([x[0], x[1], x[2], x[3]]))
            })
            .unwrap_or(0);
        if v != ABI_VERSION {
            return Err(StateError::Abi {
                found: v,
                ours: ABI_VERSION,
            });
        }
        for name in STATE_MAPS {
            if !maps.contains_key(*name) {
                return Err(StateError::Abi {
                    found: v,
                    ours: ABI_VERSION,
                });
            }
        }
        let routes = dup("mpt_routes")?;
        Ok(RouteState {
            meta,
            routes,
            maps,
            cookie,
            anchor_id,
            slots: std::sync::Mutex::new(None),
        })
    }

    fn create_anchor(cookie: u64, pins: Option<&Path>) -> Result<(), StateError> {
        let mut obj = MaybeUninit::uninit();
        let mut open = StateSkelBuilder::default()
            .open(&mut obj)
            .map_err(bpf("open the state BPF object"))?;
        if let Some(dir) = pins {
            for mut m in open.open_object_mut().maps_mut() {
                let name = m.name().to_string_lossy().into_owned();
                let path = dir.join(&name);
                if path.exists() {
                    let h = MapHandle::from_pinned_path(&path)
                        .map_err(bpf(format!("open pinned {}", path.display())))?;
                    m.reuse_fd(h.as_fd())
                        .map_err(bpf(format!("reuse pinned {name}")))?;
                }
            }
        }
        let skel = open.load().map_err(bpf("load the state BPF object"))?;
        if pins.is_none() {
            let meta = MptMeta {
                abi_version: ABI_VERSION,
                hash_seed: random_u32(),
                netns_cookie: cookie,
                flags: 0,
                fib4_gen: 0,
            };
            skel.maps
                .mpt_meta
                .update(&0u32.to_ne_bytes(), meta.as_bytes(), MapFlags::ANY)
                .map_err(bpf("initialise mpt_meta"))?;
        }
        let prog_fd = skel.progs.mpt_anchor.as_fd();
        let opts = libbpf_sys::bpf_prog_attach_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_prog_attach_opts>() as _,
            ..Default::default()
        };
        // SAFETY: prog_fd is a loaded program; opts is correctly sized.
        let rc = unsafe {
            libbpf_sys::bpf_prog_attach_opts(
                prog_fd.as_raw_fd(),
                LO_IFINDEX,
                libbpf_sys::BPF_TCX_INGRESS,
                &opts,
            )
        };
        if rc < 0 {
            return Err(StateError::Sys {
                what: "attach the state anchor to lo (tcx ingress, Linux 6.6+)".into(),
                source: io::Error::from_raw_os_error(-rc),
            });
        }
        // Pins are made by ensure_pinned(), called by every opener: a convenience for
        // operators, since the anchor alone keeps the state.
        Ok(())
    }

    /// Pin the maps under `/sys/fs/bpf/mproute/<cookie>/` if bpffs is reachable and they are
    /// not pinned yet (a namespace created under `ip netns exec` gets its pins on the first
    /// invocation that can see the host's bpffs).
    pub fn ensure_pinned(&self) {
        if let Some(dir) = pin_dir(self.cookie) {
            if !dir.join("mpt_meta").exists() {
                let _ = pin_maps(&dir, self.maps.iter().map(|(n, m)| (n.as_str(), m.as_fd())));
            }
        }
    }

    /// The meta record.
    pub fn meta(&self) -> Result<MptMeta, StateError> {
        let v = self
            .meta
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(bpf("read mpt_meta"))?
            .unwrap_or_default();
        MptMeta::from_bytes(&v).ok_or(StateError::Abi {
            found: 0,
            ours: ABI_VERSION,
        })
    }

    /// Set bits in `mpt_meta.flags`.
    pub fn set_meta_flags(&self, bits: u32) -> Result<(), StateError> {
        let mut m = self.meta()?;
        m.flags |= bits;
        self.meta
            .update(&0u32.to_ne_bytes(), m.as_bytes(), MapFlags::ANY)
            .map_err(bpf("write mpt_meta"))
    }

    /// Record the IPv4 FIB generation at which the `DPR_F_SOLE` flags were verified, or
    /// (`None`) that none is: the dataplane then checks every managed packet with the kernel.
    pub fn set_fib4_gen(&self, generation: Option<u32>) -> Result<(), StateError> {
        let mut m = self.meta()?;
        match generation {
            Some(g) => {
                m.flags |= crate::abi::META_F_FIB4_GEN;
                m.fib4_gen = g;
            }
            None => {
                m.flags &= !crate::abi::META_F_FIB4_GEN;
                m.fib4_gen = 0;
            }
        }
        self.meta
            .update(&0u32.to_ne_bytes(), m.as_bytes(), MapFlags::ANY)
            .map_err(bpf("write mpt_meta"))
    }

    /// The IPv4 FIB generation recorded by [`RouteState::set_fib4_gen`].
    pub fn fib4_gen(&self) -> Result<Option<u32>, StateError> {
        let m = self.meta()?;
        Ok((m.flags & crate::abi::META_F_FIB4_GEN != 0).then_some(m.fib4_gen))
    }

    /// Look a route up.
    pub fn get(&self, key: &MptRouteKey) -> Result<Option<MptRouteVal>, StateError> {
        Ok(self
            .routes
            .lookup(key.as_bytes(), MapFlags::ANY)
            .map_err(bpf("read mpt_routes"))?
            .and_then(|v| MptRouteVal::from_bytes(&v)))
    }

    /// Insert or overwrite a route.
    pub fn put(&self, key: &MptRouteKey, val: &MptRouteVal) -> Result<(), StateError> {
        self.routes
            .update(key.as_bytes(), val.as_bytes(), MapFlags::ANY)
            .map_err(bpf("write mpt_routes"))
    }

    /// Insert a route that must not exist yet; `false` (and nothing written) if it exists.
    pub fn insert_new(&self, key: &MptRouteKey, val: &MptRouteVal) -> Result<bool, StateError> {
        match self
            .routes
            .update(key.as_bytes(), val.as_bytes(), MapFlags::NO_EXIST)
        {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == libbpf_rs::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(StateError::Bpf {
                what: "write mpt_routes".into(),
                source: e,
            }),
        }
    }

    /// Delete a route; `false` if it was not there.
    pub fn delete(&self, key: &MptRouteKey) -> Result<bool, StateError> {
        match self.routes.delete(key.as_bytes()) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(StateError::Bpf {
                what: "delete from mpt_routes".into(),
                source: e,
            }),
        }
    }

    /// Every route in the state.
    pub fn entries(&self) -> Result<Vec<(MptRouteKey, MptRouteVal)>, StateError> {
        let mut out = Vec::new();
        for k in self.routes.keys() {
            let Some(key) = MptRouteKey::from_bytes(&k) else {
                continue;
            };
            if let Some(v) = self.get(&key)? {
                out.push((key, v));
            }
        }
        Ok(out)
    }
}

fn pin_maps<'a>(
    dir: &Path,
    maps: impl Iterator<Item = (&'a str, BorrowedFd<'a>)>,
) -> Result<(), StateError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(sys(format!("create {}", dir.display())))?;
    for (name, fd) in maps {
        let path = dir.join(name);
        let c =
            std::ffi::CString::new(path.as_os_str().as_encoded_bytes().to_vec()).map_err(|_| {
                StateError::Sys {
                    what: "pin path".into(),
                    source: io::Error::from_raw_os_error(libc::EINVAL),
                }
            })?;
        // SAFETY: c is a valid NUL-terminated path, fd a map descriptor.
        let rc = unsafe { libbpf_sys::bpf_obj_pin(fd.as_raw_fd(), c.as_ptr()) };
        if rc < 0 && -rc != libc::EEXIST {
            return Err(StateError::Sys {
                what: format!("pin {}", path.display()),
                source: io::Error::from_raw_os_error(-rc),
            });
        }
    }
    Ok(())
}

/// Pin directories whose namespace no longer exists: their cookie is not the cookie of any
/// namespace reachable through `/run/netns`, `/proc/*/ns/net` or the caller's own.
pub fn stale_pin_dirs(live: &[u64]) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(PIN_ROOT) else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(|s| s.parse::<u64>().ok())
                .is_some_and(|c| !live.contains(&c))
        })
        .map(|e| e.path())
        .collect()
}

/// Remove a pin directory and the pins in it.
pub fn remove_pin_dir(dir: &Path) -> io::Result<()> {
    std::fs::remove_dir_all(dir)
}

fn random_u32() -> u32 {
    let mut b = [0u8; 4];
    // getrandom(2) cannot fail for 4 bytes once the pool is initialised; fall back to time.
    // SAFETY: b is 4 writable bytes.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n == 4 {
        u32::from_ne_bytes(b)
    } else {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0x6d70_7431, |d| d.subsec_nanos())
    }
}

/// Remove the state of the current namespace: detach the anchor (the maps go with it once no
/// other program holds them) and unpin. Used by tests and by `mproute sync --reset`.
pub fn destroy() -> Result<(), StateError> {
    let cookie = netns_cookie()?;
    if let Some((id, _)) = find_anchor()? {
        // SAFETY: always safe; returns an fd or a negative errno.
        let fd = unsafe { libbpf_sys::bpf_prog_get_fd_by_id(id) };
        if fd >= 0 {
            // SAFETY: fresh descriptor we own.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            let opts = libbpf_sys::bpf_prog_detach_opts {
                sz: std::mem::size_of::<libbpf_sys::bpf_prog_detach_opts>() as _,
                ..Default::default()
            };
            // SAFETY: fd is the attached program.
            unsafe {
                libbpf_sys::bpf_prog_detach_opts(
                    fd.as_raw_fd(),
                    LO_IFINDEX,
                    libbpf_sys::BPF_TCX_INGRESS,
                    &opts,
                )
            };
        }
    }
    if let Some(dir) = pin_dir(cookie) {
        let _ = remove_pin_dir(&dir);
    }
    Ok(())
}

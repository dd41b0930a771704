//! Per-namespace state of a suite (one tool's BPF maps), suite-neutral: where it lives and how
//! any invocation finds it.
//!
//! A suite's state is a set of BPF maps kept alive by an *anchor*: a tiny program of the suite
//! attached with a legacy (non-link) tcx attachment to the namespace's `lo` ingress, which
//! returns at once and references every map. Such an attachment needs no pin and no open file
//! descriptor, and disappears with the namespace, so a deleted namespace leaves nothing to
//! collect. Every invocation finds the maps through the kernel, not through a path: query the
//! programs on `lo`, take the anchor's map ids (by the anchor's name, which tells suites apart),
//! open them with `BPF_MAP_GET_FD_BY_ID`. That works the same with `-n NAME` (setns in process,
//! host bpffs visible) and under `ip netns exec NAME` (a private mount namespace without the
//! host's bpffs). The cost is one tcx dispatch of a program that returns `TCX_NEXT` at once,
//! on loopback ingress only.
//!
//! The maps are pinned nowhere: a pin in the host's bpffs is a reference the namespace's
//! deletion does not drop, so pinned maps outlived their namespace until some later command
//! swept them. Unpinned, they are freed with the anchor, that is when the namespace is
//! deleted (the kernel tears down `lo` and its tcx attachments; with the dataplane attached,
//! with its devices). Operators find them by id (`mproute -d dataplane show`, `ila -d
//! dataplane show`, then `bpftool map show id N`); a detached anchor is lost state, as a
//! removed pin was before (the routes stay in the FIB; `sync` says what it finds). Pins an
//! older version left are removed by the first invocation that sees them
//! ([`Pinned::ensure_pinned`]). The first map of the suite ([`Suite::meta_map`])
//! starts with the suite's ABI version: a tool that finds another version refuses
//! ([`ErrorKind::Abi`]) rather than misread the rest.
//!
//! Concurrent invocations for one namespace serialize on an flock of
//! `/run/<suite>/<netns-cookie>.lock` (`/run` is shared by `ip netns exec`). The holder removes
//! the file when it lets go with nothing half-written ([`NsLock`]'s drop), so a namespace
//! leaves no lock file behind either; one that names an invocation killed mid-write stays
//! until the next invocation repairs it (or, its namespace gone, the next sweep).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use libbpf_rs::{MapCore, MapFlags, MapHandle};

use crate::attach::TcxDir;
use crate::error::{Error, ErrorKind};

/// `lo`'s ifindex in every namespace.
pub const LO_IFINDEX: u32 = 1;
const BPF_FS_MAGIC: i64 = 0xcafe_4a11;
/// Where the host's bpffs is mounted.
pub const BPFFS: &str = "/sys/fs/bpf";

/// A suite: one tool's per-namespace BPF state.
#[derive(Debug)]
pub struct Suite {
    /// The tool (`mproute`): `/sys/fs/bpf/<name>/`, `/run/<name>/`, and error messages.
    pub name: &'static str,
    /// Its anchor program's name, as the kernel reports it (at most 15 characters).
    pub anchor: &'static str,
    /// Every map the anchor holds.
    pub maps: &'static [&'static str],
    /// The array map whose entry 0 starts with the ABI version (a native-endian u32).
    pub meta_map: &'static str,
    /// The ABI version this build reads and writes.
    pub abi_version: u32,
}

impl Suite {
    /// `/sys/fs/bpf/<suite>`.
    pub fn pin_root(&self) -> PathBuf {
        Path::new(BPFFS).join(self.name)
    }
    /// `/run/<suite>`.
    pub fn lock_dir(&self) -> PathBuf {
        Path::new("/run").join(self.name)
    }
    /// The state of this namespace is of ABI version `found` (0: unreadable or incomplete).
    /// (No `what`: the message names the suite already.)
    fn abi(&self, found: u32) -> Error {
        Error {
            what: String::new(),
            kind: ErrorKind::Abi {
                suite: self.name,
                found,
                ours: self.abi_version,
            },
        }
    }
}

/// How an invocation waits for another's lock, and who says so meanwhile (set once by the
/// tool from `--wait`; [`DEFAULT_LOCK_WAIT`] and silence otherwise).
#[derive(Debug, Clone, Copy)]
pub struct LockWait {
    /// The longest wait; then the command fails (exit 2) naming the holder.
    pub limit: std::time::Duration,
    /// The tool, which says after a second of waiting, on standard error:
    /// `TOOL: waiting for the lock held by pid N (CMD)` (and the state layer's notes).
    pub tool: &'static str,
}

/// How long a tool waits for another invocation's lock unless told (`--wait SECONDS`): long
/// enough for a million-route batch of another invocation, short enough that a stopped or
/// stuck holder ends in an error a script sees.
pub const DEFAULT_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

static LOCK_WAIT: std::sync::OnceLock<LockWait> = std::sync::OnceLock::new();

/// Set how this process waits for locks (once; later calls are ignored).
pub fn set_lock_wait(w: LockWait) {
    let _ = LOCK_WAIT.set(w);
}

/// The tool that set [`LockWait`] (`None` before it did).
pub fn tool() -> Option<&'static str> {
    LOCK_WAIT.get().map(|w| w.tool)
}

/// `TOOL: note: text` on standard error in one write, if a tool set [`LockWait`].
fn say(text: &str) {
    use std::io::Write;
    if let Some(w) = LOCK_WAIT.get() {
        let line = format!("{}: note: {text}\n", w.tool);
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
}

/// The process holding an flock on the file `dev`:`ino` (from `/proc/locks`), and its command
/// name as `/proc` gives it: `pid N (CMD)`.
fn lock_holder(dev: u64, ino: u64) -> Option<String> {
    // /proc/locks names the file as MAJ:MIN:INODE (major and minor in hex)
    let want = format!("{:02x}:{:02x}:{ino}", libc::major(dev), libc::minor(dev));
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    for l in locks.lines() {
        // "1: FLOCK  ADVISORY  WRITE 1234 00:1a:5678 0 EOF" (a blocked waiter's line has "->")
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.get(1) != Some(&"FLOCK") || w.get(2) == Some(&"->") {
            continue;
        }
        let (Some(pid), Some(id)) = (w.get(4), w.get(5)) else {
            continue;
        };
        if *id != want {
            continue;
        }
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        let comm: String = comm
            .trim_end()
            .chars()
            .map(|c| if c.is_control() { '?' } else { c })
            .collect();
        return Some(format!("pid {pid} ({comm})"));
    }
    None
}

/// An exclusive lock on one namespace's state of a suite, released on drop.
///
/// It is also the state's journal: an invocation that is about to change the state writes
/// `pid N, CMD` into the lock file ([`NsLock::begin`]) and empties it when it is done
/// ([`NsLock::end`]). A lock taken over a file that still names someone was left by an
/// invocation that died in the middle of its writes (`kill -9`, a crash):
/// [`NsLock::interrupted`] says who, and the tool repairs what it left before it goes on.
#[derive(Debug)]
pub struct NsLock {
    guard: nix::fcntl::Flock<File>,
    interrupted: Option<String>,
    /// The lock file: removed on drop when its journal is empty.
    path: PathBuf,
}

impl Drop for NsLock {
    fn drop(&mut self) {
        // Nothing half-written (the journal is empty): the file goes while the lock is still
        // held, so nothing is left behind when the namespace is deleted. A waiter holding the
        // removed file finds it is no longer at the path and takes the one there
        // (`NsLock::take`).
        if self.guard.metadata().is_ok_and(|m| m.len() == 0) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// What the lock file of `suite` for `cookie` says about an invocation that died mid-write,
/// read without taking the lock (a dry run's view): `None` when it names nobody, or when a
/// living invocation holds the lock (its writes are under way, not interrupted).
pub fn interrupted_writer(suite: &Suite, cookie: u64) -> Option<String> {
    use std::io::Read;
    let path = suite
        .lock_dir()
        .join(format!("{}.lock", mpt_sys::netns::id_name(cookie)));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let mut f = nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockSharedNonblock).ok()?;
    let mut text = String::new();
    f.read_to_string(&mut text).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

impl NsLock {
    /// Take the lock of `suite` for namespace `cookie`, waiting for other invocations (at most
    /// as long as [`set_lock_wait`] said; a holder is named after a second). The lock file is
    /// trusted as the directories are: root's, mode 0600, a regular file reached through no
    /// symbolic link (a FIFO there would block, a file others can open is a lock they can hold).
    pub fn take(suite: &Suite, cookie: u64) -> Result<NsLock, Error> {
        use std::time::{Duration, Instant};
        let dir = suite.lock_dir();
        let what = format!("{}'s lock directory", suite.name);
        check_trusted(&dir, &dir, &what)?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
        let name = format!("{}.lock", mpt_sys::netns::id_name(cookie));
        let path = dir.join(&name);
        let dir_fd = mpt_sys::fs::open_dir(&dir)
            .map_err(|e| Error::io(format!("open {}", dir.display()), e))?;
        let open = || {
            mpt_sys::fs::open_private(&dir_fd, &name).map_err(|e| {
                // what someone else could have laid there is refused as untrusted; anything
                // else (ENOSPC, EMFILE, EROFS) is the system's word
                let trap = e.raw_os_error() == Some(libc::ELOOP)
                    || matches!(
                        e.kind(),
                        io::ErrorKind::InvalidInput | io::ErrorKind::PermissionDenied
                    ) && e.raw_os_error().is_none();
                if trap {
                    Error {
                        what: format!("refuse the lock file {}", path.display()),
                        kind: ErrorKind::Untrusted(e.to_string()),
                    }
                } else {
                    Error::io(format!("open {}", path.display()), e)
                }
            })
        };
        let mut f = open()?;
        let wait = LOCK_WAIT.get().copied();
        let limit = wait.map_or(DEFAULT_LOCK_WAIT, |w| w.limit);
        let start = Instant::now();
        let mut said = false;
        loop {
            match nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock) {
                Ok(guard) => {
                    // the sweep removes a free lock file of a namespace it thinks gone: a lock
                    // on the removed file is no lock, take the one now at the path
                    use std::os::unix::fs::MetadataExt;
                    let here = guard.metadata().map(|m| m.ino()).ok();
                    let there = std::fs::symlink_metadata(&path).map(|m| m.ino()).ok();
                    if here.is_some() && here == there {
                        let mut lock = NsLock {
                            guard,
                            interrupted: None,
                            path: path.clone(),
                        };
                        lock.interrupted = lock.journal();
                        return Ok(lock);
                    }
                    drop(guard);
                    f = open()?;
                    continue;
                }
                Err((back, nix::errno::Errno::EWOULDBLOCK | nix::errno::Errno::EINTR)) => {
                    f = back;
                }
                Err((_, e)) => {
                    return Err(Error::io(format!("lock {}", path.display()), e.into()));
                }
            }
            let waited = start.elapsed();
            let holder = || {
                use std::os::unix::fs::MetadataExt;
                f.metadata()
                    .ok()
                    .and_then(|m| lock_holder(m.dev(), m.ino()))
                    .unwrap_or_else(|| "another process".to_string())
            };
            if waited >= limit {
                return Err(Error::io(
                    format!(
                        "lock {}: held by {} for {} s (--wait)",
                        path.display(),
                        holder(),
                        limit.as_secs()
                    ),
                    io::Error::from_raw_os_error(libc::EWOULDBLOCK),
                ));
            }
            if !said && waited >= Duration::from_secs(1) {
                said = true;
                say(&format!("waiting for the lock held by {}", holder()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl NsLock {
    /// Who died in the middle of writing the state this lock guards (`pid N, CMD`), if
    /// anyone did since the last clean end.
    pub fn interrupted(&self) -> Option<&str> {
        self.interrupted.as_deref()
    }

    /// The state is about to change: the lock file names this process until [`NsLock::end`].
    pub fn begin(&mut self) -> Result<(), Error> {
        use std::io::{Seek, Write};
        let me = std::process::id();
        let comm = std::fs::read_to_string("/proc/self/comm").unwrap_or_default();
        let f: &mut File = &mut self.guard;
        f.set_len(0)
            .and_then(|()| f.seek(std::io::SeekFrom::Start(0)).map(|_| ()))
            .and_then(|()| f.write_all(format!("pid {me}, {}\n", comm.trim()).as_bytes()))
            .map_err(|e| Error::io("write the lock file's journal", e))
    }

    /// The changes are whole (or undone): nobody is named any more.
    pub fn end(&mut self) -> Result<(), Error> {
        self.interrupted = None;
        self.guard
            .set_len(0)
            .map_err(|e| Error::io("clear the lock file's journal", e))
    }

    fn journal(&mut self) -> Option<String> {
        use std::io::{Read, Seek};
        let f: &mut File = &mut self.guard;
        let mut text = String::new();
        f.seek(std::io::SeekFrom::Start(0)).ok()?;
        f.take(256).read_to_string(&mut text).ok()?;
        let text = text.trim();
        (!text.is_empty()).then(|| text.chars().filter(|c| !c.is_control()).collect())
    }
}

/// The open state of one suite in the calling thread's namespace.
#[derive(Debug)]
pub struct Pinned {
    /// The suite.
    pub suite: &'static Suite,
    /// Every map of the state, by name (of a growable map, the map inside it).
    pub maps: BTreeMap<String, MapHandle>,
    /// The outer arrays of the growable maps, by name.
    pub outers: BTreeMap<String, MapHandle>,
    /// The namespace's cookie.
    pub cookie: u64,
    /// Id of the anchor program.
    pub anchor_id: u32,
}

/// One map of a state, as the kernel describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapInfo {
    /// Its name.
    pub name: String,
    /// Its id (`bpftool map show id N`).
    pub id: u32,
    /// `BPF_MAP_TYPE_*`.
    pub map_type: u32,
    /// Its capacity.
    pub max_entries: u32,
    /// The bytes the kernel charges for it (fdinfo `memlock`: on 6.4+ what it uses, before
    /// that an estimate from its capacity).
    pub memory_bytes: u64,
}

impl MapInfo {
    /// From the kernel's `bpf_map_info` of a map descriptor (id, type, capacity) and its
    /// `/proc/self/fdinfo` (`memlock`, which `bpf_map_info` does not have).
    pub fn of(name: &str, fd: std::os::fd::BorrowedFd<'_>) -> Option<MapInfo> {
        use std::os::fd::AsRawFd;
        let full = libbpf_rs::MapInfo::new(fd).ok()?;
        // the kernel's name (a growable map's inner map is `NAME_in`), else the state's
        let name = full.name().ok().filter(|n| !n.is_empty()).unwrap_or(name);
        let info = full.info;
        let text = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).ok()?;
        let memlock = text
            .lines()
            .find_map(|l| l.strip_prefix("memlock:"))
            .and_then(|v| v.trim().parse().ok())?;
        Some(MapInfo {
            name: name.to_string(),
            id: info.id,
            map_type: info.type_,
            max_entries: info.max_entries,
            memory_bytes: memlock,
        })
    }
}

/// Refuse a directory that someone other than root could change (see
/// [`mpt_sys::fs::untrusted`]): [`ErrorKind::Untrusted`] with the reason, `what` naming it.
pub fn check_trusted(top: &Path, dir: &Path, what: &str) -> Result<(), Error> {
    match mpt_sys::fs::untrusted(top, dir) {
        None => Ok(()),
        Some(why) => Err(Error {
            what: format!("refuse {what}"),
            kind: ErrorKind::Untrusted(why),
        }),
    }
}

/// Whether `p` is on a bpffs.
fn bpffs_at(p: &Path) -> bool {
    nix::sys::statfs::statfs(p).is_ok_and(|s| s.filesystem_type().0 == BPF_FS_MAGIC)
}

/// Directory of the pins of `suite` for `cookie`, if the host's bpffs is reachable from here
/// (it is not under `ip netns exec`).
pub fn pin_dir(suite: &Suite, cookie: u64) -> Option<PathBuf> {
    if !bpffs_at(Path::new(BPFFS)) {
        return None;
    }
    Some(suite.pin_root().join(mpt_sys::netns::id_name(cookie)))
}

/// The anchor of `suite` on `lo`: its id and map ids.
fn find_anchor(suite: &Suite) -> Result<Option<(u32, Vec<u32>)>, Error> {
    for id in crate::attach::tcx_query(LO_IFINDEX, TcxDir::Ingress)? {
        let info = crate::prog::info(id)?;
        if info.name == suite.anchor {
            return Ok(Some((id, info.map_ids)));
        }
    }
    Ok(None)
}

/// How a suite loads its anchor object: reuse the maps pinned in `pins` (when given, the state
/// is re-created from them) or initialise fresh ones for namespace `cookie`, and return the
/// loaded anchor program (the object may go once the program is attached).
pub type LoadAnchor<'a> = dyn FnOnce(Option<&Path>, u64) -> Result<OwnedFd, Error> + 'a;

impl Pinned {
    /// Open the suite's state in the calling thread's namespace; create it when `create` and it
    /// does not exist yet (with `load`). `None` when there is none and `create` is false.
    pub fn open(
        suite: &'static Suite,
        cookie: u64,
        create: bool,
        load: Box<LoadAnchor<'_>>,
    ) -> Result<Option<Pinned>, Error> {
        if let Some((id, maps)) = find_anchor(suite)? {
            return Self::from_maps(suite, cookie, id, &maps).map(Some);
        }
        // No anchor: no state (the maps are pinned nowhere, so that they die with the
        // namespace; see the module's documentation). Create fresh state if asked to.
        if !create {
            return Ok(None);
        }
        // a namespace gets its state: what deleted ones left (pins of older versions, lock
        // files of invocations killed mid-write) goes now
        let _ = sweep_stale(suite, &mpt_sys::netns::reachable_cookies());
        let prog = load(None, cookie)?;
        crate::attach::tcx_attach(
            LO_IFINDEX,
            prog.as_fd(),
            TcxDir::Ingress,
            &format!("attach the {} state anchor to lo (tc ingress)", suite.name),
        )?;
        match find_anchor(suite)? {
            Some((id, maps)) => Self::from_maps(suite, cookie, id, &maps).map(Some),
            None => Err(Error::io(
                format!("find the {} state anchor just attached to lo", suite.name),
                io::Error::from_raw_os_error(libc::ENOENT),
            )),
        }
    }

    fn from_maps(
        suite: &'static Suite,
        cookie: u64,
        anchor_id: u32,
        ids: &[u32],
    ) -> Result<Pinned, Error> {
        let mut maps = BTreeMap::new();
        let mut outers = BTreeMap::new();
        for id in ids {
            let m = MapHandle::from_map_id(*id).map_err(Error::libbpf(format!("open map {id}")))?;
            if let Some(name) = m.name().to_str() {
                maps.insert(name.to_string(), m);
            }
        }
        // a growable map (`crate::grow`) is known by its outer array's name; the tool reads and
        // writes the map inside it
        for (name, m) in maps.iter_mut() {
            if m.map_type() == libbpf_rs::MapType::ArrayOfMaps {
                let inner = crate::grow::inner(m, name)?;
                outers.insert(name.clone(), std::mem::replace(m, inner));
            }
        }
        // The ABI version comes first: an older anchor may lack maps this version needs.
        let meta = maps.get(suite.meta_map).ok_or_else(|| suite.abi(0))?;
        let v = meta
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(Error::libbpf(format!("read {}", suite.meta_map)))?
            .and_then(|b| {
                b.get(..4)
                    .map(|x| u32::from_ne_bytes([x[0], x[1], x[2], x[3]]))
            })
            .unwrap_or(0);
        if v != suite.abi_version {
            return Err(suite.abi(v));
        }
        if suite.maps.iter().any(|m| !maps.contains_key(*m)) {
            return Err(suite.abi(v));
        }
        Ok(Pinned {
            suite,
            maps,
            outers,
            cookie,
            anchor_id,
        })
    }

    /// The map an object that declares the state's maps reuses for `name`: the outer array
    /// of a growable map, the map itself otherwise.
    pub fn reusable(&self, name: &str) -> Result<&MapHandle, Error> {
        match self.outers.get(name) {
            Some(o) => Ok(o),
            None => self.map(name),
        }
    }

    /// Grow the growable map `name` to room for at least `at_least` entries (see
    /// [`crate::grow::grow`]); the handle [`Pinned::map`] gives names the new map afterwards.
    pub fn grow(
        &self,
        name: &str,
        at_least: u32,
        limit: crate::grow::Limit,
        counters: bool,
    ) -> Result<u32, Error> {
        self.grow_keeping(name, at_least, limit, counters, &|_| true)
    }

    /// [`Pinned::grow`], copying only the entries whose key `keep` accepts (see
    /// [`crate::grow::grow_keeping`]).
    pub fn grow_keeping(
        &self,
        name: &str,
        at_least: u32,
        limit: crate::grow::Limit,
        counters: bool,
        keep: &dyn Fn(&[u8]) -> bool,
    ) -> Result<u32, Error> {
        let outer = self.outers.get(name).ok_or_else(|| self.suite.abi(0))?;
        crate::grow::grow_keeping(
            outer,
            self.map(name)?,
            name,
            at_least,
            limit,
            counters,
            keep,
        )
    }

    /// One map of the state.
    pub fn map(&self, name: &str) -> Result<&MapHandle, Error> {
        self.maps.get(name).ok_or_else(|| self.suite.abi(0))
    }

    /// A map of the state as a new handle of its own.
    pub fn dup(&self, name: &str) -> Result<MapHandle, Error> {
        MapHandle::try_from(self.map(name)?).map_err(Error::libbpf(format!("duplicate {name}")))
    }

    /// Remove the pins an older version made of this state's maps under
    /// `/sys/fs/bpf/<suite>/<cookie>/` (they would keep the maps alive after the namespace is
    /// deleted), and the directory once it is empty. Best effort: where bpffs is not in reach
    /// (under `ip netns exec`) the next invocation that sees it does it.
    pub fn ensure_pinned(&self) {
        let Some(dir) = pin_dir(self.suite, self.cookie) else {
            return;
        };
        if !dir.exists() || mpt_sys::fs::untrusted(&self.suite.pin_root(), &dir).is_some() {
            return;
        }
        for name in self.suite.maps {
            let _ = std::fs::remove_file(dir.join(name));
        }
        // fails while other pins (a dataplane's drop counter links) are there
        let _ = std::fs::remove_dir(&dir);
    }

    /// Every map of the state as the kernel describes it (`/proc/self/fdinfo` of its
    /// descriptor: the id `bpftool map show id N` takes, the capacity, and `memlock`, the
    /// bytes the kernel charges for it), by name.
    pub fn map_info(&self) -> Vec<MapInfo> {
        self.maps
            .iter()
            .filter_map(|(name, m)| MapInfo::of(name, m.as_fd()))
            .collect()
    }

    /// The bytes the kernel charges for the maps of programs `prog_ids` that are not the
    /// state's (a dataplane's caches and device maps), each map once.
    pub fn programs_memory_bytes(&self, prog_ids: &[u32]) -> u64 {
        let mut seen: std::collections::BTreeSet<u32> = crate::prog::info(self.anchor_id)
            .map(|i| i.map_ids)
            .unwrap_or_default()
            .into_iter()
            .chain(self.map_info().iter().map(|m| m.id))
            .collect();
        let mut sum = 0;
        for p in prog_ids {
            let Ok(info) = crate::prog::info(*p) else {
                continue;
            };
            for id in info.map_ids {
                if !seen.insert(id) {
                    continue;
                }
                if let Some(m) = MapHandle::from_map_id(id)
                    .ok()
                    .and_then(|h| MapInfo::of("", h.as_fd()))
                {
                    sum += m.memory_bytes;
                }
            }
        }
        sum
    }

    /// The bytes of memory the kernel charges for the state's maps (`memlock`, summed).
    pub fn memory_bytes(&self) -> u64 {
        self.map_info().iter().map(|m| m.memory_bytes).sum()
    }

    /// Where the state's pins are, if the host's bpffs is reachable.
    pub fn pin_dir(&self) -> Option<PathBuf> {
        pin_dir(self.suite, self.cookie)
    }
}

/// Reuse the pinned maps of `dir` in an object being opened: every map of `maps` that has a pin
/// there.
pub fn reuse_pins<'o>(
    dir: &Path,
    maps: impl IntoIterator<Item = libbpf_rs::OpenMapMut<'o>>,
) -> Result<(), Error> {
    for mut m in maps {
        let name = m.name().to_string_lossy().into_owned();
        let path = dir.join(&name);
        if path.exists() {
            let h = MapHandle::from_pinned_path(&path)
                .map_err(Error::libbpf(format!("open pinned {}", path.display())))?;
            m.reuse_fd(h.as_fd())
                .map_err(Error::libbpf(format!("reuse pinned {name}")))?;
        }
    }
    Ok(())
}

/// Pin directories of `suite` whose namespace no longer exists: their cookie is not in `live`
/// (see `mpt_sys::netns::reachable_cookies`: every namespace a name, a process, an open
/// descriptor or a bind mount anywhere still keeps).
pub fn stale_pin_dirs(suite: &Suite, live: &[u64]) -> Vec<PathBuf> {
    // a pin root another user made (or a symbolic link in its place) is not ours to clean:
    // removing "stale" entries through it would remove what it points to
    if mpt_sys::fs::untrusted(&suite.pin_root(), &suite.pin_root()).is_some() {
        return Vec::new();
    }
    let Ok(rd) = std::fs::read_dir(suite.pin_root()) else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(mpt_sys::netns::parse_id_name)
                .is_some_and(|c| !live.contains(&c))
        })
        .map(|e| e.path())
        .collect()
}

/// Remove what namespaces that no longer exist left of `suite`: their pin directories and
/// lock files (a lock file only if nobody holds it). Returns what was removed. Called when a
/// namespace's state is created and by the tools' `sync`, so that the leftovers of deleted
/// namespaces last until the next namespace gets its state at most.
pub fn sweep_stale(suite: &Suite, live: &[u64]) -> Vec<PathBuf> {
    let mut gone = Vec::new();
    for dir in stale_pin_dirs(suite, live) {
        if remove_pin_dir(&dir).is_ok() {
            gone.push(dir);
        }
    }
    if mpt_sys::fs::untrusted(&suite.lock_dir(), &suite.lock_dir()).is_some() {
        return gone;
    }
    let Ok(rd) = std::fs::read_dir(suite.lock_dir()) else {
        return gone;
    };
    for e in rd.filter_map(|e| e.ok()) {
        let name = e.file_name();
        let Some(cookie) = name
            .to_str()
            .and_then(|s| s.strip_suffix(".lock"))
            .and_then(mpt_sys::netns::parse_id_name)
        else {
            continue;
        };
        if live.contains(&cookie) {
            continue;
        }
        let path = e.path();
        // a cookie is never reused: nobody can want this lock again once it is free
        let Ok(f) = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
        else {
            continue;
        };
        if let Ok(held) = nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock) {
            if std::fs::remove_file(&path).is_ok() {
                gone.push(path);
            }
            drop(held);
        }
    }
    gone
}

/// Remove a pin directory and the pins in it.
pub fn remove_pin_dir(dir: &Path) -> io::Result<()> {
    std::fs::remove_dir_all(dir)
}

/// Remove the state of `suite` in the calling thread's namespace: detach the anchor (the maps
/// go with it once no other program holds them) and unpin.
pub fn destroy(suite: &Suite, cookie: u64) -> Result<(), Error> {
    if let Some((id, _)) = find_anchor(suite)? {
        // gone meanwhile: nothing to detach
        let _ = crate::attach::tcx_detach(LO_IFINDEX, id, TcxDir::Ingress);
    }
    if let Some(dir) = pin_dir(suite, cookie) {
        if mpt_sys::fs::untrusted(&suite.pin_root(), &dir).is_none() {
            let _ = remove_pin_dir(&dir);
        }
    }
    Ok(())
}

/// A random u32 (a hash seed), from getrandom(2), the clock if that fails.
pub fn random_u32() -> u32 {
    let mut b = [0u8; 4];
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

//! Whole-map reads and many-key deletes at a few system calls per thousand entries: what
//! `mproute sync`, `flush` and ila's `flush` and `show` need to cost about what the kernel's own
//! dump of the same table costs.
//!
//! `BPF_MAP_LOOKUP_BATCH` and `BPF_MAP_DELETE_BATCH` exist for hash maps since Linux 5.6 and
//! for arrays since 5.7, so on every kernel of the matrix (5.10, 6.1, 6.12) for those. LPM tries
//! have no batch operations on any of them (`lpm_trie.c` sets no `map_*_batch`, and the syscall
//! answers `ENOTSUPP`): for a trie, and for any map whose kernel refuses the batch call, the
//! same result comes from `BPF_MAP_GET_NEXT_KEY` and a lookup per key, or a delete per key.
//!
//! libbpf-rs's batch iterator is not used: it ends quietly on any error (a bucket larger than
//! the batch, `ENOSPC`, would look like the end of the map).

use std::os::fd::{AsFd, AsRawFd};

use libbpf_rs::{libbpf_sys, MapCore, MapFlags, MapHandle};

use crate::error::Error;
use crate::log::Traced;

/// Entries per `BPF_MAP_LOOKUP_BATCH` call (grown when a hash bucket holds more).
const BATCH: u32 = 4096;

/// `ENOTSUPP` (524), the kernel-internal errno a map type without batch operations answers.
const ENOTSUPP: i32 = 524;

/// Every entry of a map, keys and values each in one buffer.
#[derive(Debug, Default, Clone)]
pub struct Entries {
    key_size: usize,
    value_size: usize,
    keys: Vec<u8>,
    vals: Vec<u8>,
}

impl Entries {
    /// Keep only the entries whose key `keep` accepts.
    pub fn retain(&mut self, keep: impl Fn(&[u8]) -> bool) {
        let (ks, vs) = (self.key_size.max(1), self.value_size.max(1));
        let (mut keys, mut vals) = (Vec::new(), Vec::new());
        for (k, v) in self.keys.chunks_exact(ks).zip(self.vals.chunks_exact(vs)) {
            if keep(k) {
                keys.extend_from_slice(k);
                vals.extend_from_slice(v);
            }
        }
        self.keys = keys;
        self.vals = vals;
    }

    /// How many entries.
    pub fn len(&self) -> usize {
        self.keys.len().checked_div(self.key_size).unwrap_or(0)
    }

    /// Whether the map was empty.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The entries as (key, value).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.keys
            .chunks_exact(self.key_size.max(1))
            .zip(self.vals.chunks_exact(self.value_size.max(1)))
    }
}

fn errno(ret: i32) -> i32 {
    // libbpf returns -errno (and sets errno)
    if ret < 0 {
        -ret
    } else {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    }
}

/// Whether `e` says the map type has no such batch operation.
fn unsupported(e: i32) -> bool {
    e == ENOTSUPP || e == libc::EOPNOTSUPP || e == libc::EINVAL
}

/// Every entry of `map`, `what` naming it in errors. A per-CPU map's value is every CPU's,
/// each rounded up to 8 bytes, one after another (as the kernel copies them).
pub fn read_all(map: &MapHandle, what: &str) -> Result<Entries, Error> {
    let ks = map.key_size() as usize;
    let mut vs = map.value_size() as usize;
    if map.map_type().is_percpu() {
        let cpus =
            libbpf_rs::num_possible_cpus().map_err(Error::libbpf("count the possible CPUs"))?;
        vs = vs.div_ceil(8) * 8 * cpus;
    }
    let mut out = Entries {
        key_size: ks,
        value_size: vs,
        ..Entries::default()
    };
    match read_batched(map, &mut out) {
        Ok(()) => Ok(out),
        Err(e) if unsupported(e) && out.is_empty() => {
            read_by_key(map, &mut out, what)?;
            Ok(out)
        }
        Err(e) => Err(Error::io(
            format!("read {what}"),
            std::io::Error::from_raw_os_error(e),
        )),
    }
}

fn read_batched(map: &MapHandle, out: &mut Entries) -> Result<(), i32> {
    let (ks, vs) = (out.key_size, out.value_size);
    let fd = map.as_fd().as_raw_fd();
    let opts = libbpf_sys::bpf_map_batch_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_map_batch_opts>() as _,
        ..Default::default()
    };
    // the position token: a bucket index (u32) for hash maps, a key for the generic ones
    let tok = ks.max(8);
    let (mut in_tok, mut out_tok) = (vec![0u8; tok], vec![0u8; tok]);
    let mut first = true;
    let mut want = BATCH;
    loop {
        let at = out.keys.len();
        out.keys.resize(at + want as usize * ks, 0);
        let vat = out.vals.len();
        out.vals.resize(vat + want as usize * vs, 0);
        let mut count = want;
        // SAFETY: the buffers hold `count` keys and values and a token of at least the key
        // size (and of a u32) each; libbpf writes no more.
        let ret = unsafe {
            libbpf_sys::bpf_map_lookup_batch(
                fd,
                if first {
                    std::ptr::null_mut()
                } else {
                    in_tok.as_mut_ptr().cast()
                },
                out_tok.as_mut_ptr().cast(),
                out.keys[at..].as_mut_ptr().cast(),
                out.vals[vat..].as_mut_ptr().cast(),
                &mut count,
                &opts,
            )
        };
        let e = if ret < 0 { errno(ret) } else { 0 };
        let got = if e == 0 || e == libc::ENOENT {
            count.min(want) as usize
        } else {
            0
        };
        out.keys.truncate(at + got * ks);
        out.vals.truncate(vat + got * vs);
        match e {
            0 => {}
            libc::ENOENT => return Ok(()),
            // a bucket holds more than `want` entries: the same position, a larger batch
            libc::ENOSPC if want < (1 << 20) => {
                want *= 4;
                continue;
            }
            libc::EINTR => continue,
            e => return Err(e),
        }
        first = false;
        std::mem::swap(&mut in_tok, &mut out_tok);
    }
}

fn read_by_key(map: &MapHandle, out: &mut Entries, what: &str) -> Result<(), Error> {
    if map.map_type().is_percpu() {
        for k in map.keys() {
            if let Some(v) = map
                .lookup_percpu(&k, MapFlags::ANY)
                .map_err(Error::libbpf(format!("read {what}")))?
            {
                out.keys.extend_from_slice(&k);
                for c in v {
                    let at = out.vals.len();
                    out.vals.extend_from_slice(&c);
                    out.vals.resize(at + c.len().div_ceil(8) * 8, 0);
                }
            }
        }
        return Ok(());
    }
    for k in map.keys() {
        if let Some(v) = map
            .lookup(&k, MapFlags::ANY)
            .map_err(Error::libbpf(format!("read {what}")))?
        {
            out.keys.extend_from_slice(&k);
            out.vals.extend_from_slice(&v);
        }
    }
    Ok(())
}

/// Delete `keys` (whole keys of `map`, one after another), of which many may be absent: the
/// map is read first and only the keys it holds are deleted (a batch delete stops at the
/// first absent key, so deleting many absent keys, the counters of routes that never counted,
/// would cost a system call each). Returns how many were deleted.
pub fn delete_some_keys(map: &MapHandle, keys: &[u8], what: &str) -> Result<usize, Error> {
    let ks = map.key_size() as usize;
    if ks == 0 || keys.is_empty() {
        return Ok(0);
    }
    let held: rustc_hash::FxHashSet<&[u8]> = {
        let all = read_all(map, what)?;
        let set = all.iter().map(|(k, _)| k.to_vec()).collect::<Vec<_>>();
        // keys of `keys` present in the map (borrowed from `keys`, not from the read)
        let present: rustc_hash::FxHashSet<Vec<u8>> = set.into_iter().collect();
        keys.chunks_exact(ks)
            .filter(|k| present.contains(*k))
            .collect()
    };
    if held.is_empty() {
        return Ok(0);
    }
    let keys: Vec<u8> = keys
        .chunks_exact(ks)
        .filter(|k| held.contains(*k))
        .flatten()
        .copied()
        .collect();
    delete_keys(map, &keys, what)
}

/// Delete `keys` (whole keys of `map`, one after another), which are there but for a few:
/// an absent one costs one more system call. Returns how many were deleted.
pub fn delete_keys(map: &MapHandle, keys: &[u8], what: &str) -> Result<usize, Error> {
    let ks = map.key_size() as usize;
    if ks == 0 || keys.is_empty() {
        return Ok(0);
    }
    let n = keys.len() / ks;
    let fd = map.as_fd().as_raw_fd();
    let opts = libbpf_sys::bpf_map_batch_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_map_batch_opts>() as _,
        ..Default::default()
    };
    let mut at = 0usize;
    let mut deleted = 0usize;
    let mut batched = true;
    if mpt_sys::trace::on() {
        mpt_sys::trace::line(format_args!(
            "map {}: delete {n} keys in batches",
            map.name().to_string_lossy()
        ));
    }
    while at < n {
        if batched {
            let mut count = (n - at).min(BATCH as usize) as u32;
            // SAFETY: `keys[at * ks..]` holds at least `count` keys of the map's key size.
            let ret = unsafe {
                libbpf_sys::bpf_map_delete_batch(
                    fd,
                    keys[at * ks..].as_ptr().cast(),
                    &mut count,
                    &opts,
                )
            };
            let e = if ret < 0 { errno(ret) } else { 0 };
            match e {
                0 => {
                    at += count as usize;
                    deleted += count as usize;
                }
                // the key at `at + count` is not there: skipped
                libc::ENOENT => {
                    at += count as usize + 1;
                    deleted += count as usize;
                }
                // a map type without batch operations (an LPM trie before 6.x) is refused
                // before anything is done, `count` left as asked: key by key from here
                e if e == ENOTSUPP || e == libc::EOPNOTSUPP => batched = false,
                e if unsupported(e) && count == 0 => batched = false,
                e => {
                    return Err(Error::io(
                        format!("delete from {what}"),
                        std::io::Error::from_raw_os_error(e),
                    ))
                }
            }
            continue;
        }
        match map.remove(&keys[at * ks..(at + 1) * ks]) {
            Ok(()) => deleted += 1,
            Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::libbpf(format!("delete from {what}"))(e)),
        }
        at += 1;
    }
    Ok(deleted)
}

/// Write every entry of `entries` (as [`read_all`] read them, per-CPU values included) into
/// `map`: one `BPF_MAP_UPDATE_BATCH` per [`BATCH`] entries, or an update per entry where the
/// kernel has no batch update for the map type.
pub fn write_all(map: &MapHandle, entries: &Entries, what: &str) -> Result<(), Error> {
    let (ks, vs) = (entries.key_size, entries.value_size);
    if entries.is_empty() || ks == 0 || vs == 0 {
        return Ok(());
    }
    let fd = map.as_fd().as_raw_fd();
    let opts = libbpf_sys::bpf_map_batch_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_map_batch_opts>() as _,
        ..Default::default()
    };
    let fail = |e: i32| {
        Error::io(
            format!("write {what}"),
            std::io::Error::from_raw_os_error(e),
        )
    };
    let n = entries.len();
    let mut at = 0;
    let mut batched = true;
    while at < n {
        let take = (n - at).min(BATCH as usize);
        if batched {
            let mut count = take as u32;
            // SAFETY: the buffers hold `take` whole keys and values from `at` on.
            let ret = unsafe {
                libbpf_sys::bpf_map_update_batch(
                    fd,
                    entries.keys[at * ks..].as_ptr().cast(),
                    entries.vals[at * vs..].as_ptr().cast(),
                    &mut count,
                    &opts,
                )
            };
            if ret == 0 {
                at += take;
                continue;
            }
            let e = errno(ret);
            if !(unsupported(e) && count == 0) {
                return Err(fail(e));
            }
            batched = false;
        }
        for i in at..at + take {
            // SAFETY: one whole key and value (all CPUs' for a per-CPU map) at entry `i`.
            let ret = unsafe {
                libbpf_sys::bpf_map_update_elem(
                    fd,
                    entries.keys[i * ks..].as_ptr().cast(),
                    entries.vals[i * vs..].as_ptr().cast(),
                    0,
                )
            };
            if ret < 0 {
                return Err(fail(errno(ret)));
            }
        }
        at += take;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(ty: libbpf_rs::MapType, k: u32, v: u32, flags: u32) -> Option<MapHandle> {
        let opts = libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_map_create_opts>() as _,
            map_flags: flags,
            ..Default::default()
        };
        // needs root and BPF: skipped without
        MapHandle::create(ty, Some("batch_test"), k, v, 100_000, &opts).ok()
    }

    fn keys_of(r: std::ops::Range<u64>) -> Vec<u8> {
        r.flat_map(u64::to_ne_bytes).collect()
    }

    /// Reads and deletes of a hash map (batched) and an LPM trie (key by key) return what was
    /// written, absent keys skipped.
    #[test]
    fn read_and_delete_hash_and_trie() {
        let Some(h) = map(
            libbpf_rs::MapType::Hash,
            8,
            4,
            libbpf_sys::BPF_F_NO_PREALLOC,
        ) else {
            eprintln!("skipped: cannot create BPF maps (root and BPF needed)");
            return;
        };
        let n = 20_000u64;
        for i in 0..n {
            h.update(&i.to_ne_bytes(), &(i as u32).to_ne_bytes(), MapFlags::ANY)
                .expect("update");
        }
        let all = read_all(&h, "test hash").expect("read");
        assert_eq!(all.len(), n as usize);
        let mut seen: Vec<u64> = all
            .iter()
            .map(|(k, v)| {
                let k = u64::from_ne_bytes(k.try_into().expect("key"));
                assert_eq!(u32::from_ne_bytes(v.try_into().expect("val")), k as u32);
                k
            })
            .collect();
        seen.sort_unstable();
        assert!(seen.iter().copied().eq(0..n));
        // every other key, plus keys that are not there
        let mut keys = Vec::new();
        for i in (0..n + 100).step_by(2) {
            keys.extend_from_slice(&i.to_ne_bytes());
        }
        assert_eq!(
            delete_some_keys(&h, &keys, "test hash").expect("delete"),
            n as usize / 2
        );
        let left = read_all(&h, "test hash").expect("read");
        assert_eq!(left.len(), n as usize / 2);
        assert!(left
            .iter()
            .all(|(k, _)| u64::from_ne_bytes(k.try_into().expect("key")) % 2 == 1));

        let t = map(
            libbpf_rs::MapType::LpmTrie,
            8,
            4,
            libbpf_sys::BPF_F_NO_PREALLOC,
        )
        .expect("LPM trie");
        let key = |i: u32| {
            let mut k = 24u32.to_ne_bytes().to_vec();
            k.extend_from_slice(&(i << 8).to_be_bytes());
            k
        };
        for i in 0..1000 {
            t.update(&key(i), &i.to_ne_bytes(), MapFlags::ANY)
                .expect("update");
        }
        assert_eq!(read_all(&t, "test trie").expect("read").len(), 1000);
        let keys: Vec<u8> = (0..1100).flat_map(key).collect();
        assert_eq!(delete_keys(&t, &keys, "test trie").expect("delete"), 1000);
        // the even keys are absent: each stops a batch, and is skipped
        assert_eq!(
            delete_keys(&h, &keys_of(0..10), "test hash").expect("delete"),
            5
        );
        assert_eq!(
            read_all(&h, "test hash").expect("read").len(),
            n as usize / 2 - 5
        );
        assert!(read_all(&t, "test trie").expect("read").is_empty());
    }
}

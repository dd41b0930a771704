//! mproute's record of the routes it manages (algorithm, dataplane group, the protocol it
//! installed them with), kept in the namespace's BPF state (`mpt_bpf::mproute`) and held under
//! the namespace's lock for the invocation.

use mpt_bpf::mproute::route_table::DpSnapshot;
use mpt_bpf::mproute::state::{RouteState, META_F_NATIVE, META_F_NATIVE_CHECKED};
use mpt_bpf::pinned::NsLock;
use mpt_cli::Failure;
use mpt_model::RouteKey;

/// What the state says of one route: algorithm, nexthop count, dataplane group, protocol.
pub use mpt_bpf::mproute::state::RouteRecord as Managed;

/// The open, locked state of the namespace.
#[derive(Debug)]
pub struct Store {
    inner: RouteState,
    /// None for a read-only invocation (show), which reads without waiting for writers.
    lock: Option<NsLock>,
    /// A repair of what an interrupted invocation left failed: the journal keeps naming it,
    /// so that the next invocation tries again (see [`Store::keep_journal`]).
    keep_journal: bool,
}

/// Closed in the normal course (the end of a command, of a batch, of a `watch` round): its
/// writes are whole or were undone, the journal names nobody. A kill runs no destructor, and
/// a panic leaves it as it is: the next invocation repairs.
impl Drop for Store {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = self.end();
        }
    }
}

impl Store {
    /// Remove a route from our state and from the dataplane maps; with `promote`, hand its LPM
    /// entry to the next managed route of the same prefix and table.
    pub fn forget(&self, k: &RouteKey, promote: bool) -> Result<(), Failure> {
        self.delete(k)?;
        let ctx = |e| Failure::bpf("write dataplane state", e);
        let removed = self.bpf().dp_delete_route(k).map_err(ctx)?;
        self.bpf().res_delete(k).map_err(ctx)?;
        // Its group may be shared: finish() removes it once no route uses it.
        if promote && removed {
            // A managed route of the same prefix and table with a higher metric was shadowed in
            // the LPM trie; it is the FIB's choice now.
            let next = self
                .all()?
                .into_iter()
                .filter(|(o, _)| o.dst == k.dst && o.table == k.table)
                .min_by_key(|(o, _)| o.metric);
            if let Some((o, m)) = next {
                self.bpf()
                    .dp_put_route(&o, m.algo, m.group, m.recipe)
                    .map_err(ctx)?;
            }
        }
        Ok(())
    }

    /// Forget many routes at once, without promoting shadowed ones (`flush`: every route of
    /// the prefix goes), a part at a time as their routes leave the FIB: state and LPM entries
    /// in batches, `snap` (the tries as read since their last write, carried from part to
    /// part) saying which LPM entries are theirs. [`Store::forget_counters`] ends it.
    pub fn forget_part(&self, keys: &[RouteKey], snap: &mut DpSnapshot) -> Result<(), Failure> {
        if keys.is_empty() {
            return Ok(());
        }
        self.inner
            .delete_many(keys)
            .map_err(|e| Failure::bpf("write state", e))?;
        self.inner
            .dp_unroute(keys, snap)
            .map_err(|e| Failure::bpf("write dataplane state", e))?;
        Ok(())
    }

    /// The counters of every route [`Store::forget_part`] forgot, at once.
    pub fn forget_counters(&self, keys: &[RouteKey]) -> Result<(), Failure> {
        if keys.is_empty() {
            return Ok(());
        }
        self.inner
            .dp_drop_counters(keys)
            .map_err(|e| Failure::bpf("write dataplane state", e))
    }

    /// Open (and with `create`, create) the state of the current namespace, holding its lock.
    pub fn open(create: bool) -> Result<Option<Store>, Failure> {
        Store::open_with(create, true)
    }

    /// Open the state to read it, without the lock (`show`, as `ip route show` takes none).
    pub fn open_unlocked() -> Result<Option<Store>, Failure> {
        Store::open_with(false, false)
    }

    fn open_with(create: bool, locked: bool) -> Result<Option<Store>, Failure> {
        let cookie = mpt_sys::netns::cookie().map_err(|e| Failure::bpf("open state", e.into()))?;
        let lock = if locked {
            Some(
                NsLock::take(&mpt_bpf::mproute::state::SUITE, cookie)
                    .map_err(|e| Failure::bpf("lock state", e))?,
            )
        } else {
            None
        };
        let Some(inner) =
            RouteState::open(cookie, create).map_err(|e| Failure::bpf("open state", e))?
        else {
            return Ok(None);
        };
        inner.ensure_pinned();
        Ok(Some(Store {
            inner,
            lock,
            keep_journal: false,
        }))
    }

    /// Whether this invocation holds the namespace's lock (not a read-only or dry one).
    pub fn locked(&self) -> bool {
        self.lock.is_some()
    }

    /// Who died in the middle of writing this state (`pid N, CMD`), found when the lock
    /// was taken (see `mpt_bpf::pinned::NsLock`).
    pub fn interrupted(&self) -> Option<&str> {
        self.lock.as_ref().and_then(NsLock::interrupted)
    }

    /// About to write: the lock file names this process until [`Store::end`].
    pub fn begin(&mut self) -> Result<(), Failure> {
        match &mut self.lock {
            Some(l) => l.begin().map_err(|e| Failure::bpf("lock state", e)),
            None => Ok(()),
        }
    }

    /// The repair of an interrupted invocation failed: [`Store::end`] leaves the journal as it
    /// is from now on.
    pub fn keep_journal(&mut self) {
        self.keep_journal = true;
    }

    /// The writes are whole: the lock file names nobody.
    pub fn end(&mut self) -> Result<(), Failure> {
        if self.keep_journal {
            return Ok(());
        }
        match &mut self.lock {
            Some(l) => l.end().map_err(|e| Failure::bpf("lock state", e)),
            None => Ok(()),
        }
    }

    /// The state of one route.
    pub fn get(&self, k: &RouteKey) -> Result<Option<Managed>, Failure> {
        self.inner.get(k).map_err(|e| Failure::bpf("read state", e))
    }

    /// Record a route.
    pub fn put(&self, k: &RouteKey, m: Managed) -> Result<(), Failure> {
        self.inner
            .put(k, &m)
            .map_err(|e| Failure::bpf("write state", e))
    }

    /// Record a new route; `false` (nothing written) if the state already has one.
    pub fn put_new(&self, k: &RouteKey, m: Managed) -> Result<bool, Failure> {
        self.inner
            .insert_new(k, &m)
            .map_err(|e| Failure::bpf("write state", e))
    }

    /// Put back what [`Store::get`] returned before a change (undo).
    pub fn restore(&self, k: &RouteKey, old: Option<Managed>) -> Result<(), Failure> {
        match old {
            Some(m) => self.put(k, m),
            None => self.delete(k).map(|_| ()),
        }
    }

    /// Forget a route.
    pub fn delete(&self, k: &RouteKey) -> Result<bool, Failure> {
        self.inner
            .delete(k)
            .map_err(|e| Failure::bpf("write state", e))
    }

    /// Every route in the state.
    pub fn all(&self) -> Result<Vec<(RouteKey, Managed)>, Failure> {
        self.inner
            .entries()
            .map_err(|e| Failure::bpf("read state", e))
    }

    /// The BPF state itself, for the dataplane maps.
    pub fn bpf(&self) -> &RouteState {
        &self.inner
    }

    /// Whether the kernel keeps `RTA_MP_ALGO`: `None` until checked.
    pub fn native(&self) -> Option<bool> {
        let f = self.inner.meta_flags().ok()?;
        (f & META_F_NATIVE_CHECKED != 0).then_some(f & META_F_NATIVE != 0)
    }

    /// Record the result of the native check.
    pub fn set_native(&self, native: bool) -> Result<(), Failure> {
        let bits = META_F_NATIVE_CHECKED | if native { META_F_NATIVE } else { 0 };
        self.inner
            .set_meta_flags(bits)
            .map_err(|e| Failure::bpf("write state", e))
    }
}

//! Kernel nexthop objects (Linux 5.3+) for the routes mproute installs.
//!
//! Every route whose nexthops all name a device references one object: a single nexthop for a
//! one-path route, else a hash-threshold group shared by every route with the same nexthops and
//! weights. The kernel then validates gateways once per object instead of once per route, which
//! is what makes bulk installs fast, and `ip route` still lists each route's nexthops.
//!
//! Objects mproute creates carry protocol `mproute`. They are collected when no route references
//! them any more: at the end of an invocation that removed or replaced routes, one dump of the
//! routes tells which objects are still in use. No reference count is kept anywhere, so there is
//! nothing to drift when someone runs `ip route del` behind our back.

use std::collections::HashSet;

use rustc_hash::FxHashMap;
use std::net::IpAddr;

use mpt_cli::Failure;
use mpt_model::route::RTNH_F_ONLINK;
use mpt_model::{Family, Nexthop, MPROUTE_PROTO};
use mpt_netlink::msg::rtnl::nexthop::{self, NexthopMsg, NexthopObject};
use mpt_netlink::sock::Socket;

type SingleKey = (u8, Option<IpAddr>, u32, u8);

/// What exists in the kernel, as far as mproute's objects go.
#[derive(Debug, Default)]
pub struct NhIndex {
    singles: FxHashMap<SingleKey, u32>,
    groups: FxHashMap<Vec<(u32, u16)>, u32>,
    used_ids: HashSet<u32>,
    next_id: u32,
}

/// An object to put back ([`NhIndex::restore`]).
#[derive(Debug, Clone, Copy)]
pub struct Restore<'a> {
    /// Its id (the one its routes and the dataplane name).
    pub id: u32,
    /// The family of its routes (for device-only paths).
    pub family: Family,
    /// The paths it gets.
    pub paths: &'a [Nexthop],
    /// A group (a route given several paths), not a single.
    pub as_group: bool,
    /// Whether the kernel kept it (a group with some of its members): replaced, not created.
    pub exists: bool,
}

/// Result of [`NhIndex::ensure`].
#[derive(Debug, Clone)]
pub struct Ensured {
    /// The id the route should reference.
    pub id: u32,
    /// Objects created by this call (to delete again if the route is refused).
    pub created: Vec<u32>,
}

impl NhIndex {
    /// Load the index from a nexthop dump. `Ok(None)` when the kernel has no nexthop objects.
    pub fn load(sock: &mut Socket) -> Result<Option<NhIndex>, Failure> {
        let payloads = match sock.dump(&nexthop::dump_request(), "list nexthop objects") {
            Ok(p) => p,
            Err(e) if matches!(e.errno(), Some(libc::EOPNOTSUPP) | Some(libc::EINVAL)) => {
                return Ok(None)
            }
            Err(e) => return Err(Failure::from(e)),
        };
        let mut idx = NhIndex {
            next_id: 1,
            ..NhIndex::default()
        };
        for p in payloads {
            let m = nexthop::decode(&p)
                .map_err(|e| Failure::system(format!("list nexthop objects: {e}")))?;
            idx.used_ids.insert(m.id);
            idx.next_id = idx.next_id.max(m.id.saturating_add(1));
            if m.protocol != MPROUTE_PROTO {
                continue;
            }
            match m.object {
                NexthopObject::Single {
                    gateway,
                    ifindex,
                    flags,
                } => {
                    idx.singles
                        .insert((m.family, gateway, ifindex, flags & RTNH_F_ONLINK), m.id);
                }
                NexthopObject::Group(g) => {
                    idx.groups.insert(g, m.id);
                }
            }
        }
        Ok(Some(idx))
    }

    /// Stop offering groups whose kernel members are not the paths their routes were given
    /// (`given(id)`: how many; the kernel took some out with their link): a new route with the
    /// paths left must not share a group that [`NhIndex::restore`] will widen again.
    pub fn skip_shrunk(&mut self, given: impl Fn(u32) -> Option<usize>) {
        self.groups
            .retain(|members, id| given(*id).is_none_or(|n| n == members.len()));
    }

    /// Keep `ids` from being given to new objects: the ids of objects the kernel deleted with
    /// their link, which managed routes still name and which come back under them.
    pub fn reserve(&mut self, ids: impl IntoIterator<Item = u32>) {
        self.used_ids.extend(ids);
    }

    fn alloc(&mut self) -> u32 {
        while self.used_ids.contains(&self.next_id) || self.next_id == 0 {
            self.next_id = self.next_id.wrapping_add(1);
        }
        let id = self.next_id;
        self.used_ids.insert(id);
        self.next_id = self.next_id.wrapping_add(1);
        id
    }

    /// Whether these nexthops can be expressed as objects (each names its device).
    pub fn usable(nexthops: &[Nexthop]) -> bool {
        !nexthops.is_empty() && nexthops.iter().all(|n| n.ifindex != 0)
    }

    /// The object for `nexthops`, created if missing. On error, whatever this call created has
    /// been deleted again.
    pub fn ensure(
        &mut self,
        sock: &mut Socket,
        op: &dyn std::fmt::Display,
        family: Family,
        nexthops: &[Nexthop],
    ) -> Result<Ensured, Failure> {
        let mut created = Vec::new();
        let r = self.ensure_inner(sock, op, family, nexthops, &mut created);
        if r.is_err() {
            self.remove(sock, &created);
        }
        r.map(|id| Ensured { id, created })
    }

    fn ensure_inner(
        &mut self,
        sock: &mut Socket,
        op: &dyn std::fmt::Display,
        route_family: Family,
        nexthops: &[Nexthop],
        created: &mut Vec<u32>,
    ) -> Result<u32, Failure> {
        let mut members = Vec::with_capacity(nexthops.len());
        for nh in nexthops {
            let id = self.single(sock, op, route_family, nh, None, created)?;
            members.push((id, nh.weight));
        }
        if let [(id, _)] = members[..] {
            return Ok(id);
        }
        if let Some(id) = self.groups.get(&members) {
            return Ok(*id);
        }
        let id = self.alloc();
        let msg = NexthopMsg {
            id,
            protocol: MPROUTE_PROTO,
            family: 0,
            object: NexthopObject::Group(members.clone()),
        };
        sock.request(&nexthop::encode_new(&msg, false), op)
            .map_err(Failure::from)?;
        self.groups.insert(members, id);
        created.push(id);
        Ok(id)
    }

    /// The single object for `nh`, created (with id `want` if given, else a free one) when
    /// there is none. A device nexthop takes the route's family; a gateway its own.
    fn single(
        &mut self,
        sock: &mut Socket,
        op: &dyn std::fmt::Display,
        route_family: Family,
        nh: &Nexthop,
        want: Option<u32>,
        created: &mut Vec<u32>,
    ) -> Result<u32, Failure> {
        let family = nh.gateway.map_or(route_family, |g| Family::of(&g)).af();
        let key = (family, nh.gateway, nh.ifindex, nh.flags & RTNH_F_ONLINK);
        if want.is_none() {
            if let Some(id) = self.singles.get(&key) {
                return Ok(*id);
            }
        }
        let id = match want {
            Some(id) => {
                self.used_ids.insert(id);
                id
            }
            None => self.alloc(),
        };
        let msg = NexthopMsg {
            id,
            protocol: MPROUTE_PROTO,
            family,
            object: NexthopObject::Single {
                gateway: nh.gateway,
                ifindex: nh.ifindex,
                flags: nh.flags & RTNH_F_ONLINK,
            },
        };
        sock.request(&nexthop::encode_new(&msg, false), op)
            .map_err(Failure::from)?;
        self.singles.insert(key, id);
        created.push(id);
        Ok(id)
    }

    /// Put object `r.id` back with `r.paths` (those of its paths whose link is up again): a
    /// one-path route's object as a single of that id; a group under its id, its members
    /// found or created, replacing what the kernel kept of it (`r.exists`). Whatever this call
    /// created is deleted again if the kernel refuses.
    pub fn restore(
        &mut self,
        sock: &mut Socket,
        op: &dyn std::fmt::Display,
        r: &Restore<'_>,
    ) -> Result<(), Failure> {
        let mut created = Vec::new();
        let res = self.restore_inner(sock, op, r, &mut created);
        if res.is_err() {
            self.remove(sock, &created);
        }
        res
    }

    fn restore_inner(
        &mut self,
        sock: &mut Socket,
        op: &dyn std::fmt::Display,
        r: &Restore<'_>,
        created: &mut Vec<u32>,
    ) -> Result<(), Failure> {
        let (id, family, paths) = (r.id, r.family, r.paths);
        if !r.as_group {
            return match paths {
                [p] => self
                    .single(sock, op, family, p, Some(id), created)
                    .map(|_| ()),
                _ => Err(Failure::system(format!(
                    "{op}: a one-path object restored with {} paths",
                    paths.len()
                ))),
            };
        }
        let mut members = Vec::with_capacity(paths.len());
        for p in paths {
            members.push((self.single(sock, op, family, p, None, created)?, p.weight));
        }
        let msg = NexthopMsg {
            id,
            protocol: MPROUTE_PROTO,
            family: 0,
            object: NexthopObject::Group(members.clone()),
        };
        sock.request(&nexthop::encode_new(&msg, r.exists), op)
            .map_err(Failure::from)?;
        self.groups.retain(|_, v| *v != id);
        self.groups.insert(members, id);
        self.used_ids.insert(id);
        Ok(())
    }

    /// Delete objects (groups before their members: pass them in creation order).
    pub fn remove(&mut self, sock: &mut Socket, ids: &[u32]) {
        for id in ids.iter().rev() {
            let _ = sock.request(&nexthop::encode_del(*id), "delete nexthop object");
            self.singles.retain(|_, v| v != id);
            self.groups.retain(|_, v| v != id);
            self.used_ids.remove(id);
        }
    }

    /// Delete mproute's objects that no route references: groups first, then singles that are
    /// neither referenced by a route nor a member of a remaining group.
    pub fn collect(
        &mut self,
        sock: &mut Socket,
        referenced: &HashSet<u32>,
    ) -> Result<Vec<u32>, Failure> {
        let mut n = Vec::new();
        let dead_groups: Vec<u32> = self
            .groups
            .values()
            .copied()
            .filter(|id| !referenced.contains(id))
            .collect();
        for id in dead_groups {
            self.remove(sock, &[id]);
            n.push(id);
        }
        // Singles still members of any group (ours or not) stay.
        let mut in_group = HashSet::new();
        for p in sock
            .dump(&nexthop::dump_request(), "list nexthop objects")
            .map_err(Failure::from)?
        {
            if let Ok(NexthopMsg {
                object: NexthopObject::Group(g),
                ..
            }) = nexthop::decode(&p)
            {
                in_group.extend(g.iter().map(|(id, _)| *id));
            }
        }
        let dead_singles: Vec<u32> = self
            .singles
            .values()
            .copied()
            .filter(|id| !referenced.contains(id) && !in_group.contains(id))
            .collect();
        for id in dead_singles {
            self.remove(sock, &[id]);
            n.push(id);
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shrunk_groups_are_not_offered_and_reserved_ids_not_given() {
        let mut idx = NhIndex {
            next_id: 1,
            ..NhIndex::default()
        };
        // group 7 was given three paths and the kernel kept two; group 8 is whole
        idx.groups.insert(vec![(1, 1), (2, 1)], 7);
        idx.groups.insert(vec![(4, 1), (5, 1)], 8);
        let given = |id| match id {
            7 => Some(3),
            8 => Some(2),
            _ => None,
        };
        idx.skip_shrunk(given);
        assert_eq!(idx.groups.values().copied().collect::<Vec<_>>(), [8]);
        // ids of objects the kernel deleted are kept for their return
        idx.reserve([1, 2, 3]);
        assert_eq!(idx.alloc(), 4);
    }
}

//! The dataplane's view of the managed routes, written by the control plane: LPM tries keyed by
//! table and prefix (`mpt_lpm4`, `mpt_lpm6`) pointing at nexthop groups (`mpt_groups`).
//!
//! Group ids: a route that references a kernel nexthop object uses that object's id, so routes
//! with the same nexthops share one group, collected together with the kernel object; any other
//! route gets a private group with an id of [`PRIVATE_GROUP_BASE`] or above, deleted with it.

use std::net::IpAddr;

use libbpf_rs::{MapCore, MapFlags, MapHandle};

use crate::abi::{
    MptDpRoute, MptGroup, MptLpm4Key, MptLpm6Key, MptNh, MptRouteKey, MptRouteStats, AF_INET,
    AF_INET6, DPR_F_SOLE, MAX_NH,
};
use crate::state::{RouteState, StateError};

/// First id of the private groups.
pub const PRIVATE_GROUP_BASE: u32 = 0x8000_0000;

/// A nexthop as the dataplane needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DpNexthop {
    /// Egress device.
    pub ifindex: u32,
    /// Gateway, `None` for a device route.
    pub gateway: Option<IpAddr>,
    /// 1..=256.
    pub weight: u16,
    /// `RTNH_F_*`.
    pub flags: u8,
    /// Whether the dataplane may use it (link up).
    pub usable: bool,
}

fn bpf(what: &str) -> impl FnOnce(libbpf_rs::Error) -> StateError + '_ {
    move |source| StateError::Bpf {
        what: what.to_string(),
        source,
    }
}

/// Build the group value: hash-threshold bounds and cumulative weights over the usable
/// nexthops (an unusable one gets bound -1 and a zero-width weight range).
pub fn build_group(nhs: &[DpNexthop]) -> MptGroup {
    let mut g = MptGroup::default();
    let n = nhs.len().min(MAX_NH);
    let weights: Vec<u32> = nhs[..n].iter().map(|h| u32::from(h.weight)).collect();
    let usable: Vec<bool> = nhs[..n].iter().map(|h| h.usable).collect();
    let bounds = mpt_model::threshold::upper_bounds(&weights, &usable);
    let mut cum = 0u32;
    for (i, h) in nhs[..n].iter().enumerate() {
        if h.usable {
            cum += u32::from(h.weight);
        }
        let (family, gw) = match h.gateway {
            Some(IpAddr::V4(a)) => {
                let mut b = [0u8; 16];
                b[..4].copy_from_slice(&a.octets());
                (AF_INET, b)
            }
            Some(IpAddr::V6(a)) => (AF_INET6, a.octets()),
            None => (0, [0u8; 16]),
        };
        g.nh[i] = MptNh {
            ifindex: h.ifindex,
            upper_bound: bounds[i],
            cum_weight: cum,
            weight: h.weight,
            flags: h.flags,
            family,
            gw,
        };
    }
    g.nh_count = n as u32;
    g.total_weight = cum;
    g
}

enum Lpm {
    V4(MptLpm4Key),
    V6(MptLpm6Key),
}

impl Lpm {
    fn of(key: &MptRouteKey) -> Lpm {
        let table_be = key.table.to_be_bytes();
        if key.family == AF_INET {
            let mut addr = [0u8; 4];
            addr.copy_from_slice(&key.dst_be[..4]);
            Lpm::V4(MptLpm4Key {
                prefixlen: 32 + u32::from(key.dst_len),
                table_be,
                addr,
            })
        } else {
            Lpm::V6(MptLpm6Key {
                prefixlen: 32 + u32::from(key.dst_len),
                table_be,
                addr: key.dst_be,
            })
        }
    }
    fn bytes(&self) -> &[u8] {
        match self {
            Lpm::V4(k) => k.as_bytes(),
            Lpm::V6(k) => k.as_bytes(),
        }
    }
    fn map_name(&self) -> &'static str {
        match self {
            Lpm::V4(_) => "mpt_lpm4",
            Lpm::V6(_) => "mpt_lpm6",
        }
    }
}

impl RouteState {
    fn map(&self, name: &str) -> Result<&MapHandle, StateError> {
        self.maps.get(name).ok_or(StateError::Abi {
            found: 0,
            ours: crate::abi::ABI_VERSION,
        })
    }

    /// Write a group.
    pub fn dp_put_group(&self, id: u32, nhs: &[DpNexthop]) -> Result<(), StateError> {
        let g = build_group(nhs);
        self.map("mpt_groups")?
            .update(&id.to_ne_bytes(), g.as_bytes(), MapFlags::ANY)
            .map_err(bpf("write mpt_groups"))
    }

    /// Whether a group exists.
    pub fn dp_has_group(&self, id: u32) -> Result<bool, StateError> {
        Ok(self
            .map("mpt_groups")?
            .lookup(&id.to_ne_bytes(), MapFlags::ANY)
            .map_err(bpf("read mpt_groups"))?
            .is_some())
    }

    /// Delete a group (absent is fine).
    pub fn dp_delete_group(&self, id: u32) -> Result<(), StateError> {
        match self.map("mpt_groups")?.delete(&id.to_ne_bytes()) {
            Err(e) if e.kind() != libbpf_rs::ErrorKind::NotFound => Err(StateError::Bpf {
                what: "delete from mpt_groups".into(),
                source: e,
            }),
            _ => Ok(()),
        }
    }

    /// Ids of every group.
    pub fn dp_group_ids(&self) -> Result<Vec<u32>, StateError> {
        Ok(self
            .map("mpt_groups")?
            .keys()
            .filter_map(|k| {
                k.get(..4)
                    .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            })
            .collect())
    }

    /// The group holding exactly `nhs`, written if no group has them yet: routes with the same
    /// nexthops share it. Returns (id, whether it was created here).
    pub fn dp_shared_group(&self, hint: u32, nhs: &[DpNexthop]) -> Result<(u32, bool), StateError> {
        let want = build_group(nhs);
        let map = self.map("mpt_groups")?;
        let mut id = PRIVATE_GROUP_BASE | (hint & 0x7fff_ffff);
        for _ in 0..1024 {
            match map
                .lookup(&id.to_ne_bytes(), MapFlags::ANY)
                .map_err(bpf("read mpt_groups"))?
            {
                None => {
                    map.update(&id.to_ne_bytes(), want.as_bytes(), MapFlags::NO_EXIST)
                        .map_err(bpf("write mpt_groups"))?;
                    return Ok((id, true));
                }
                Some(v) if v == want.as_bytes() => return Ok((id, false)),
                Some(_) => id = PRIVATE_GROUP_BASE | (id.wrapping_add(1) & 0x7fff_ffff),
            }
        }
        Err(StateError::Sys {
            what: "allocate a dataplane group id".into(),
            source: std::io::Error::from_raw_os_error(libc::ENOSPC),
        })
    }

    /// A free private group id, trying `hint` first.
    pub fn dp_private_group(&self, hint: u32) -> Result<u32, StateError> {
        let mut id = PRIVATE_GROUP_BASE | (hint & 0x7fff_ffff);
        for _ in 0..1024 {
            if !self.dp_has_group(id)? {
                return Ok(id);
            }
            id = PRIVATE_GROUP_BASE | (id.wrapping_add(1) & 0x7fff_ffff);
        }
        Err(StateError::Sys {
            what: "allocate a dataplane group id".into(),
            source: std::io::Error::from_raw_os_error(libc::ENOSPC),
        })
    }

    /// The dataplane entry of exactly this prefix/table (whichever metric it has); an LPM
    /// lookup alone would also answer with a shorter prefix that covers it.
    pub fn dp_get_route(&self, key: &MptRouteKey) -> Result<Option<MptDpRoute>, StateError> {
        Ok(self.dp_lpm_match(key)?.filter(|v| {
            v.id.family == key.family
                && v.id.dst_len == key.dst_len
                && v.id.table == key.table
                && v.id.dst_be == key.dst_be
        }))
    }

    /// Longest-prefix match, as the dataplane does it.
    fn dp_lpm_match(&self, key: &MptRouteKey) -> Result<Option<MptDpRoute>, StateError> {
        let l = Lpm::of(key);
        Ok(self
            .map(l.map_name())?
            .lookup(l.bytes(), MapFlags::ANY)
            .map_err(bpf("read the LPM trie"))?
            .and_then(|v| MptDpRoute::from_bytes(&v)))
    }

    /// Point the prefix/table at `group` with `algo`, unless a managed route with a lower metric
    /// already holds it (the FIB prefers that one). Returns what was there before.
    pub fn dp_put_route(
        &self,
        key: &MptRouteKey,
        algo: u8,
        group: u32,
    ) -> Result<Option<MptDpRoute>, StateError> {
        let l = Lpm::of(key);
        let v = MptDpRoute {
            id: *key,
            algo,
            flags: 0,
            reserved: [0; 2],
            group,
        };
        let map = self.map(l.map_name())?;
        // The common case, a new prefix, in one system call.
        match map.update(l.bytes(), v.as_bytes(), MapFlags::NO_EXIST) {
            Ok(()) => return Ok(None),
            Err(e) if e.kind() == libbpf_rs::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(StateError::Bpf {
                    what: "write the LPM trie".into(),
                    source: e,
                })
            }
        }
        let old = self.dp_get_route(key)?;
        if let Some(o) = &old {
            if o.id.metric < key.metric {
                return Ok(old);
            }
        }
        map.update(l.bytes(), v.as_bytes(), MapFlags::ANY)
            .map_err(bpf("write the LPM trie"))?;
        Ok(old)
    }

    /// Set or clear `DPR_F_SOLE` on the route's LPM entry, if the entry is this route's.
    /// Returns whether it was.
    pub fn dp_set_sole(&self, key: &MptRouteKey, sole: bool) -> Result<bool, StateError> {
        let l = Lpm::of(key);
        let Some(mut cur) = self.dp_get_route(key)? else {
            return Ok(false);
        };
        if cur.id != *key {
            return Ok(false);
        }
        let want = if sole {
            cur.flags | DPR_F_SOLE
        } else {
            cur.flags & !DPR_F_SOLE
        };
        if want != cur.flags {
            cur.flags = want;
            self.map(l.map_name())?
                .update(l.bytes(), cur.as_bytes(), MapFlags::EXIST)
                .map_err(bpf("write the LPM trie"))?;
        }
        Ok(true)
    }

    /// Every entry of the IPv4 LPM trie (the managed prefixes the dataplane knows).
    pub fn dp_routes4(&self) -> Result<Vec<MptDpRoute>, StateError> {
        let map = self.map("mpt_lpm4")?;
        let mut out = Vec::new();
        for k in map.keys() {
            if let Some(v) = map
                .lookup(&k, MapFlags::ANY)
                .map_err(bpf("read the LPM trie"))?
            {
                if let Some(r) = MptDpRoute::from_bytes(&v) {
                    out.push(r);
                }
            }
        }
        Ok(out)
    }

    /// Put back an entry returned by [`RouteState::dp_put_route`] (or remove it for `None`).
    pub fn dp_restore_route(
        &self,
        key: &MptRouteKey,
        old: Option<MptDpRoute>,
    ) -> Result<(), StateError> {
        let l = Lpm::of(key);
        match old {
            Some(v) => self
                .map(l.map_name())?
                .update(l.bytes(), v.as_bytes(), MapFlags::ANY)
                .map_err(bpf("write the LPM trie")),
            None => self.dp_delete_route(key).map(|_| ()),
        }
    }

    /// Remove the prefix/table entry if it is this route's; returns the entry removed.
    pub fn dp_delete_route(&self, key: &MptRouteKey) -> Result<Option<MptDpRoute>, StateError> {
        let l = Lpm::of(key);
        let Some(cur) = self.dp_get_route(key)? else {
            return Ok(None);
        };
        if cur.id != *key {
            return Ok(None);
        }
        match self.map(l.map_name())?.delete(l.bytes()) {
            Err(e) if e.kind() != libbpf_rs::ErrorKind::NotFound => {
                return Err(StateError::Bpf {
                    what: "delete from the LPM trie".into(),
                    source: e,
                })
            }
            _ => {}
        }
        let _ = self.map("mpt_stats")?.delete(key.as_bytes());
        let _ = self.map("mpt_pcpu")?.delete(key.as_bytes());
        Ok(Some(cur))
    }

    /// Longest-prefix match of an address in a table, as the dataplane looks it up.
    pub fn dp_lookup(&self, table: u32, addr: IpAddr) -> Result<Option<MptDpRoute>, StateError> {
        let mut dst_be = [0u8; 16];
        let (family, len) = match addr {
            IpAddr::V4(a) => {
                dst_be[..4].copy_from_slice(&a.octets());
                (AF_INET, 32)
            }
            IpAddr::V6(a) => {
                dst_be = a.octets();
                (AF_INET6, 128)
            }
        };
        let key = MptRouteKey {
            family,
            dst_len: len,
            reserved: 0,
            table,
            metric: 0,
            dst_be,
        };
        self.dp_lpm_match(&key)
    }

    /// Per-route and per-nexthop counters summed over CPUs.
    pub fn dp_stats(&self, key: &MptRouteKey) -> Result<Option<MptRouteStats>, StateError> {
        let v = self
            .map("mpt_stats")?
            .lookup_percpu(key.as_bytes(), MapFlags::ANY)
            .map_err(bpf("read mpt_stats"))?;
        Ok(v.and_then(|v| MptRouteStats::sum_percpu(&v)))
    }

    /// The group a route points at.
    pub fn dp_group(&self, id: u32) -> Result<Option<MptGroup>, StateError> {
        Ok(self
            .map("mpt_groups")?
            .lookup(&id.to_ne_bytes(), MapFlags::ANY)
            .map_err(bpf("read mpt_groups"))?
            .and_then(|v| MptGroup::from_bytes(&v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_bounds_and_cumulative_weights() {
        let nh = |w, usable| DpNexthop {
            ifindex: 2,
            gateway: Some("10.0.0.1".parse().expect("addr")),
            weight: w,
            flags: 0,
            usable,
        };
        let g = build_group(&[nh(3, true), nh(1, true)]);
        assert_eq!(g.nh_count, 2);
        assert_eq!(g.total_weight, 4);
        assert_eq!(g.nh[0].upper_bound, 0x5fff_ffff);
        assert_eq!(g.nh[1].upper_bound, 0x7fff_ffff);
        assert_eq!((g.nh[0].cum_weight, g.nh[1].cum_weight), (3, 4));
        let g = build_group(&[nh(3, true), nh(2, false), nh(1, true)]);
        assert_eq!(g.nh[1].upper_bound, -1);
        assert_eq!(
            (g.nh[0].cum_weight, g.nh[1].cum_weight, g.nh[2].cum_weight),
            (3, 3, 4)
        );
        assert_eq!(g.total_weight, 4);
    }
}

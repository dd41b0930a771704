//! Nexthop objects the kernel deleted with their link, put back when the link is.
//!
//! The kernel deletes a nexthop object when its device goes down or loses its carrier, takes
//! it out of every group, deletes a group left empty and, with the group, every route that
//! referenced it; nothing comes back with the link. (Routes installed as `RTA_MULTIPATH` keep
//! their paths, marked dead or linkdown, and recover by themselves.) For a route installed
//! with `--nexthop-objects` the dataplane group of the same id (a managed route's group below
//! `PRIVATE_GROUP_BASE` is its kernel object) still holds the paths the route was given, so
//! [`Session::restore_objects`] can put back each path whose link is up again: the member
//! objects, the group under its old id (replacing what the kernel kept of it), and the routes
//! the kernel deleted with it. `dataplane watch` runs it on every link change; `sync` first.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use mpt_cli::Failure;
use mpt_model::{Algo, Family, Nexthop, RouteKey, Verb, MPROUTE_PROTO};
use mpt_netlink::msg::rtnl::nexthop::{self, NexthopObject};
use mpt_netlink::msg::rtnl::route::{self as rmsg, PathForm, RouteRequest};

use crate::session::Session;
use crate::view::ActionRow;

/// What putting back the deleted objects does ([`Session::restore_plan`]).
#[derive(Debug, Default)]
pub(crate) struct RestorePlan {
    /// Objects that are not put back, and why.
    rows: Vec<ActionRow>,
    /// The objects to put back, in order.
    objects: Vec<Plan>,
    /// The routes of each (the kernel deleted them if it deleted the object).
    routes: HashMap<u32, Vec<(RouteKey, u8, Algo)>>,
}

impl RestorePlan {
    /// The objects it puts back.
    pub(crate) fn ids(&self) -> HashSet<u32> {
        self.objects.iter().map(|p| p.id).collect()
    }

    /// Its rows, as a dry run says them.
    pub(crate) fn dry_rows(&self) -> Vec<ActionRow> {
        let mut rows = self.rows.clone();
        for p in &self.objects {
            let re_add = match (p.exists, self.routes.get(&p.id)) {
                (false, Some(rs)) => rs.len(),
                _ => 0,
            };
            rows.push(row(
                p.id,
                format!("would put back {}; {} re-added", p.what(), routes_n(re_add)),
            ));
        }
        rows
    }
}

impl Plan {
    /// `N of M paths`.
    fn what(&self) -> String {
        format!("{} of {} paths", self.paths.len(), self.given)
    }
}

/// One object to put back.
#[derive(Debug)]
struct Plan {
    id: u32,
    /// The paths it will have: those the kernel kept and those whose link is up again.
    paths: Vec<Nexthop>,
    /// How many it was given.
    given: usize,
    /// Whether the kernel kept the object (a group with some of its members).
    exists: bool,
}

impl Session {
    /// Put back the nexthop objects of managed routes whose links came back (see the module
    /// documentation); one row per object.
    pub(crate) fn restore_objects(&mut self) -> Result<Vec<ActionRow>, Failure> {
        let plan = self.restore_plan()?;
        self.restore_apply(plan)
    }

    /// What [`Session::restore_objects`] would put back (the real and the dry run's one
    /// decision).
    pub(crate) fn restore_plan(&mut self) -> Result<RestorePlan, Failure> {
        let none = || Ok(RestorePlan::default());
        let Some(store) = self.store(false)? else {
            return none();
        };
        let given = store
            .bpf()
            .given_objects()
            .map_err(|e| Failure::bpf("read dataplane state", e))?;
        if given.is_empty() {
            return none();
        }
        let kernel = kernel_objects(self)?;
        let mut plans = Vec::new();
        let mut rows = Vec::new();
        for (id, paths) in given {
            if let Some((proto, _)) = kernel.get(&id).filter(|(p, _)| *p != MPROUTE_PROTO) {
                // another tool took the id while ours was gone: not ours to replace
                rows.push(row(
                    id,
                    format!("not restored: nhid {id} is now another's (protocol {proto})"),
                ));
                continue;
            }
            let have = kernel_paths(&kernel, id);
            let missing = paths.iter().filter(|p| !have.contains(&path(p))).count();
            if missing == 0 {
                continue;
            }
            let back: Vec<Nexthop> = paths
                .iter()
                .filter(|p| {
                    have.contains(&path(p))
                        || mpt_sys::iface::is_running(p.ifindex).unwrap_or(false)
                })
                .cloned()
                .collect();
            if back.len() == have.len() {
                continue; // none of the missing paths' links is up yet
            }
            plans.push(Plan {
                id,
                given: paths.len(),
                paths: back,
                exists: kernel.contains_key(&id),
            });
        }
        if plans.is_empty() {
            return Ok(RestorePlan {
                rows,
                ..RestorePlan::default()
            });
        }
        // The routes of each object (the kernel deleted them if it deleted the object).
        let mut routes: HashMap<u32, Vec<(RouteKey, u8, Algo)>> = HashMap::new();
        if let Some(s) = self.store(false)? {
            for (k, m) in s.all()? {
                if plans.iter().any(|p| p.id == m.group) {
                    let proto = if m.protocol == 0 {
                        MPROUTE_PROTO
                    } else {
                        m.protocol
                    };
                    routes.entry(m.group).or_default().push((k, proto, m.algo));
                }
            }
        }
        // One-path objects first: a group being restored may take the same path as a member.
        plans.sort_by_key(|p| p.given > 1);
        Ok(RestorePlan {
            rows,
            objects: plans,
            routes,
        })
    }

    /// Carry out a [`Session::restore_plan`]: one row per object.
    pub(crate) fn restore_apply(&mut self, plan: RestorePlan) -> Result<Vec<ActionRow>, Failure> {
        let RestorePlan {
            mut rows,
            objects,
            mut routes,
        } = plan;
        if objects.is_empty() {
            return Ok(rows);
        }
        // the index this process holds predates the kernel's deletions
        self.nh = None;
        for p in objects {
            let rs = routes.remove(&p.id).unwrap_or_default();
            let family = rs.first().map_or(Family::V4, |(k, _, _)| k.family());
            let op = format!("restore nexthop object {}", p.id);
            let what = p.what();
            let as_group = p.given > 1;
            let r = crate::kernel_nh::Restore {
                id: p.id,
                family,
                paths: &p.paths,
                as_group,
                exists: p.exists,
            };
            // a refusal (the link went down again, a gateway gone) is this object's row; the
            // others are still tried, and the next round tries this one again
            let done = self
                .with_nh(|idx, sock| idx.restore(sock, &op, &r))?
                .transpose();
            if let Err(f) = done {
                rows.push(row(p.id, format!("not restored: {}", f.message)));
                continue;
            }
            let (added, refused) = if p.exists {
                (0, None)
            } else {
                self.re_add(p.id, &rs)?
            };
            let mut reason = format!("{what} back; {} re-added", routes_n(added));
            if let Some(e) = refused {
                reason.push_str(&format!("; not re-added: {e}"));
            }
            rows.push(row(p.id, reason));
        }
        Ok(rows)
    }

    /// The objects of managed routes that the kernel deleted and that cannot come back yet:
    /// none of their paths' links is up. Their routes are kept, not forgotten.
    pub(crate) fn waiting_for_link(&mut self) -> Result<HashSet<u32>, Failure> {
        let Some(store) = self.store(false)? else {
            return Ok(HashSet::new());
        };
        let given = store
            .bpf()
            .given_objects()
            .map_err(|e| Failure::bpf("read dataplane state", e))?;
        if given.is_empty() {
            return Ok(HashSet::new());
        }
        let kernel = kernel_objects(self)?;
        Ok(given
            .into_iter()
            .filter(|(id, paths)| {
                // a device that is gone (an error) is not waited for
                !kernel.contains_key(id)
                    && paths
                        .iter()
                        .all(|n| matches!(mpt_sys::iface::is_running(n.ifindex), Ok(false)))
            })
            .map(|(id, _)| id)
            .collect())
    }

    /// Add the routes of object `id` again (each an `RTA_NH_ID` route with its protocol);
    /// one already there is fine. Returns how many were added, and the first refusal.
    fn re_add(
        &mut self,
        id: u32,
        routes: &[(RouteKey, u8, Algo)],
    ) -> Result<(usize, Option<String>), Failure> {
        let reqs = routes.iter().map(|(k, proto, algo)| {
            let req = rmsg::encode(&RouteRequest {
                verb: Verb::Add,
                key: *k,
                metric_given: true,
                protocol: Some(*proto),
                nexthops: &[],
                form: PathForm::Object(id),
                algo: *algo,
                encap: None,
            });
            (req, format!("re-add {} nhid {id}", k.dst))
        });
        let results = self
            .sock()?
            .pipeline(reqs.collect::<Vec<_>>(), 256)
            .map_err(Failure::from)?;
        let mut added = 0;
        let mut refused = None;
        for r in results {
            match r {
                Ok(()) => added += 1,
                Err(e) if e.errno == libc::EEXIST => {}
                Err(e) => {
                    refused.get_or_insert_with(|| e.to_string());
                }
            }
        }
        for (k, _, _) in routes {
            self.invalidate(k);
        }
        Ok((added, refused))
    }
}

fn routes_n(n: usize) -> String {
    if n == 1 {
        "1 route".into()
    } else {
        format!("{n} routes")
    }
}

fn row(id: u32, reason: String) -> ActionRow {
    ActionRow {
        action: "restored".into(),
        dst: format!("nhid {id}"),
        table: None,
        metric: None,
        reason,
    }
}

type Path = (Option<IpAddr>, u32);

fn path(n: &Nexthop) -> Path {
    (n.gateway, n.ifindex)
}

/// The kernel's nexthop objects by id, with their protocol.
fn kernel_objects(s: &mut Session) -> Result<HashMap<u32, (u8, NexthopObject)>, Failure> {
    let payloads = match s
        .sock()?
        .dump(&nexthop::dump_request(), "list nexthop objects")
    {
        Ok(p) => p,
        // a kernel without nexthop objects has none to restore
        Err(e) if matches!(e.errno(), Some(libc::EOPNOTSUPP) | Some(libc::EINVAL)) => {
            return Ok(HashMap::new())
        }
        Err(e) => return Err(Failure::from(e)),
    };
    let mut out = HashMap::new();
    for p in payloads {
        let m = nexthop::decode(&p)
            .map_err(|e| Failure::system(format!("list nexthop objects: {e}")))?;
        out.insert(m.id, (m.protocol, m.object));
    }
    Ok(out)
}

/// The paths object `id` has in the kernel now (none if it is gone).
fn kernel_paths(kernel: &HashMap<u32, (u8, NexthopObject)>, id: u32) -> Vec<Path> {
    match kernel.get(&id).map(|(_, o)| o) {
        Some(NexthopObject::Single {
            gateway, ifindex, ..
        }) => vec![(*gateway, *ifindex)],
        Some(NexthopObject::Group(members)) => members
            .iter()
            .filter_map(|(m, _)| match kernel.get(m).map(|(_, o)| o) {
                Some(NexthopObject::Single {
                    gateway, ifindex, ..
                }) => Some((*gateway, *ifindex)),
                _ => None,
            })
            .collect(),
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(gw: &str, ifindex: u32) -> NexthopObject {
        NexthopObject::Single {
            gateway: Some(gw.parse().expect("addr")),
            ifindex,
            flags: 0,
        }
    }

    #[test]
    fn kernel_paths_follow_group_members() {
        let mut k = HashMap::new();
        k.insert(1, (MPROUTE_PROTO, single("192.0.2.1", 5)));
        k.insert(2, (MPROUTE_PROTO, single("192.0.2.2", 6)));
        k.insert(
            3,
            (MPROUTE_PROTO, NexthopObject::Group(vec![(1, 1), (2, 3)])),
        );
        k.insert(
            4,
            (MPROUTE_PROTO, NexthopObject::Group(vec![(2, 1), (9, 1)])),
        ); // 9: gone
        let gw = |s: &str| Some(s.parse::<IpAddr>().expect("addr"));
        assert_eq!(
            kernel_paths(&k, 3),
            vec![(gw("192.0.2.1"), 5), (gw("192.0.2.2"), 6)]
        );
        assert_eq!(kernel_paths(&k, 4), vec![(gw("192.0.2.2"), 6)]);
        assert_eq!(kernel_paths(&k, 1), vec![(gw("192.0.2.1"), 5)]);
        assert!(kernel_paths(&k, 7).is_empty());
    }
}

//! The dataplane's per-packet kernel FIB check, and when it may be skipped.
//!
//! For a packet of a managed route the dataplane asks the kernel's FIB whether the kernel would
//! route it by that very route (a more specific route, a rule or a local address may say
//! otherwise). For IPv4 that lookup is skipped for the routes verified here
//! ([`mpt_model::route::verify`]) while the namespace's FIB generation (`net->ipv4.rt_genid`) stays the one
//! they were verified at. Verification runs at the end of every command that changes routes or
//! attaches the dataplane: generation, dump, verify, look each route's probe address up (so that
//! the kernel marks the route used and its own later delete or replace moves the generation),
//! generation again; only an unchanged generation is recorded.

use mpt_bpf::mproute::fib_generation::FibGenReader;
use mpt_bpf::mproute::route_table::DpEntry;
use mpt_bpf::mproute::state::RouteState;
use mpt_cli::Failure;
use mpt_model::route::drift;
use mpt_model::route::verify::{self as fibverify, FibEntry, Managed, Verdict};
use mpt_model::{Family, RouteKey};
use mpt_netlink::msg::rtnl::route as rmsg;
use mpt_netlink::sock::Socket;
use serde::Serialize;

use crate::session::Session;

/// `RTA_ENCAP`.
const RTA_ENCAP: u16 = 22;

/// The managed IPv4 routes of the LPM trie with their verdicts.
struct Verified {
    keys: Vec<RouteKey>,
    /// VERIFIED flags as found.
    flagged: Vec<bool>,
    /// DRIFT flags as found.
    drifted: Vec<bool>,
    managed: Vec<Managed>,
    verdicts: Vec<Verdict>,
    /// The dump the verdicts are based on.
    fib: Vec<FibEntry>,
    /// The holes the trie has (foreign entries), from the same reading.
    holes: Vec<RouteKey>,
}

/// The routes of one table of one family (route cache entries left out).
fn dump_table(
    sock: &mut Socket,
    family: Family,
    table: u32,
) -> Result<Vec<rmsg::RouteMsg>, Failure> {
    let fam = match family {
        Family::V4 => "IPv4",
        Family::V6 => "IPv6",
    };
    let what = format!("list the {fam} routes of table {table}");
    let payloads = match sock.dump(&rmsg::dump_request(Some(family), Some(table)), &what) {
        Ok(p) => p,
        Err(e) if e.errno() == Some(libc::ENOENT) => Vec::new(),
        Err(e) => return Err(Failure::from(e)),
    };
    let mut out = Vec::new();
    for p in payloads {
        let Some(m) = rmsg::decode(&p).map_err(|e| Failure::system(format!("{what}: {e}")))? else {
            continue;
        };
        // RTM_F_CLONED: route cache entries are not routes
        if m.rtm_flags & 0x200 != 0 || m.route.key.table != table {
            continue;
        }
        out.push(m);
    }
    Ok(out)
}

/// The main and local tables' IPv4 entries.
fn fib4(sock: &mut Socket) -> Result<Vec<FibEntry>, Failure> {
    let mut out = Vec::new();
    for table in [fibverify::TABLE_MAIN, fibverify::TABLE_LOCAL] {
        for m in dump_table(sock, Family::V4, table)? {
            let ipnet::IpNet::V4(dst) = m.route.key.dst else {
                continue;
            };
            out.push(FibEntry {
                dst,
                table,
                metric: m.route.key.metric,
                tos: m.tos,
                rtype: m.route.rtype,
                nexthops: paths(&m.route),
                weights: weights(&m.route),
                nh_object: m.route.nh_id.is_some(),
                encap: m.other.iter().any(|(t, _)| *t == RTA_ENCAP),
            });
        }
    }
    Ok(out)
}

/// Verify the LPM trie's IPv4 routes against the FIB now (no probes, nothing written).
fn verify(sock: &mut Socket, raw: &RouteState) -> Result<Verified, Failure> {
    let (routes, holes) = entries(raw, false)?;
    let mut keys = Vec::new();
    let mut flagged = Vec::new();
    let mut drifted = Vec::new();
    let mut managed = Vec::new();
    for r in routes {
        let ipnet::IpNet::V4(dst) = r.id.dst else {
            continue;
        };
        let (nexthops, weights) = group_of(raw, r.group)?.unwrap_or_default();
        keys.push(r.id);
        flagged.push(r.flags.verified);
        drifted.push(r.flags.drift);
        managed.push(Managed {
            dst,
            table: r.id.table,
            metric: r.id.metric,
            nexthops,
            weights,
        });
    }
    let fib = if managed.is_empty() {
        Vec::new()
    } else {
        fib4(sock)?
    };
    let verdicts = fibverify::verify(&managed, &fib);
    Ok(Verified {
        keys,
        flagged,
        drifted,
        managed,
        verdicts,
        fib,
        holes,
    })
}

/// One LPM trie, read once: its managed routes, and the keys of its holes.
fn entries(raw: &RouteState, v6: bool) -> Result<(Vec<DpEntry>, Vec<RouteKey>), Failure> {
    let (holes, routes): (Vec<_>, Vec<_>) = raw
        .dp_entries(v6)
        .map_err(|e| Failure::bpf("read the dataplane's routes", e))?
        .into_iter()
        .partition(|r| r.flags.foreign);
    Ok((routes, holes.into_iter().map(|r| r.id).collect()))
}

/// Look `probe` up as `ip route get PROBE fibmatch` does: whether the kernel's answer is `m`'s
/// own FIB entry with the content the dump showed (`dumped`). The lookup marks the entry used,
/// so that from now on its delete or replace moves the generation. (Between the dump and this
/// lookup an entry never used could be replaced without moving it: hence the content check.)
fn probe_answers(
    sock: &mut Socket,
    m: &Managed,
    dumped: &FibEntry,
    probe: std::net::Ipv4Addr,
) -> Result<bool, Failure> {
    let what = format!("look up {probe}");
    let payloads = match sock.dump(&rmsg::get_request(probe.into()), &what) {
        Ok(p) => p,
        // unreachable, no route: not ours
        Err(mpt_netlink::Error::Kernel(_)) => return Ok(false),
        Err(e) => return Err(Failure::from(e)),
    };
    for p in payloads {
        if let Some(a) = rmsg::decode(&p).map_err(|e| Failure::system(format!("{what}: {e}")))? {
            let k = a.route.key;
            let mut got: Vec<(u32, Option<std::net::IpAddr>)> = a
                .route
                .nexthops
                .iter()
                .map(|n| (n.ifindex, n.gateway))
                .collect();
            let mut want = dumped.nexthops.clone();
            got.sort();
            want.sort();
            return Ok(k.dst == ipnet::IpNet::V4(m.dst)
                && k.table == fibverify::TABLE_MAIN
                && k.metric == m.metric
                && a.tos == 0
                && a.route.rtype == fibverify::RTN_UNICAST
                && a.route.nh_id.is_none()
                && got == want);
        }
    }
    Ok(false)
}

/// The loaded generation reader, loaded on first use; `None` on a kernel whose programs cannot
/// read the generation (before 6.2: no `bpf_cast_to_kern_ctx`), where the dataplane looks
/// every managed packet up in the kernel's FIB.
pub fn reader(slot: &mut Option<FibGenReader>) -> Result<Option<&mut FibGenReader>, Failure> {
    if !FibGenReader::supported() {
        return Ok(None);
    }
    if slot.is_none() {
        *slot = Some(
            FibGenReader::new().map_err(|e| Failure::bpf("load the FIB generation reader", e))?,
        );
    }
    Ok(slot.as_mut())
}

/// Why the check is never skipped on this kernel, for `dataplane show`.
fn no_generation() -> String {
    let f = mpt_bpf::features::Feature::KernCtx;
    format!(
        "the kernel's FIB generation is out of the programs' reach before Linux {} ({})",
        f.since(),
        f.name()
    )
}

/// Verify the managed IPv4 routes and record the generation they hold at (or none). Returns how
/// many were verified.
pub fn arm(
    sock: &mut Socket,
    raw: &RouteState,
    reader: Option<&mut FibGenReader>,
) -> Result<usize, Failure> {
    let clear = |raw: &RouteState| {
        raw.set_fib4_gen(None)
            .map_err(|e| Failure::bpf("write the FIB generation", e))
    };
    sync_holes6(sock, raw)?;
    let Some(reader) = reader else {
        // no generation to hold the verdicts at: the holes and drift flags, which the
        // per-packet check needs, and nothing skipped
        let v = verify(sock, raw)?;
        sync_holes(raw, &v)?;
        sync_drift4(raw, &v)?;
        clear(raw)?;
        return Ok(0);
    };
    // A change between the two readings (another tool's, a link event) ends the attempt: try
    // again, a few times.
    for _ in 0..3 {
        let before = reader
            .read()
            .map_err(|e| Failure::bpf("read the FIB generation", e))?;
        let mut v = verify(sock, raw)?;
        sync_holes(raw, &v)?;
        sync_drift4(raw, &v)?;
        if v.managed.is_empty() {
            clear(raw)?;
            return Ok(0);
        }
        if before.custom_rules4 {
            for vd in v.verdicts.iter_mut() {
                *vd = Verdict::Not("the namespace has custom rules".into());
            }
        }
        for (m, vd) in v.managed.iter().zip(v.verdicts.iter_mut()) {
            if let Verdict::Verified { probe } = *vd {
                let dumped = v.fib.iter().find(|e| {
                    e.dst == m.dst
                        && e.table == fibverify::TABLE_MAIN
                        && e.metric == m.metric
                        && e.tos == 0
                });
                let ours = match dumped {
                    Some(d) => probe_answers(sock, m, d, probe)?,
                    None => false,
                };
                if !ours {
                    *vd = Verdict::Not(format!("the kernel's lookup of {probe} answers otherwise"));
                }
            }
        }
        let after = reader
            .read()
            .map_err(|e| Failure::bpf("read the FIB generation", e))?;
        if after.v4 != before.v4 {
            continue;
        }
        let mut n = 0;
        for (k, vd) in v.keys.iter().zip(&v.verdicts) {
            raw.dp_set_verified(k, vd.is_verified())
                .map_err(|e| Failure::bpf("write the dataplane's routes", e))?;
            n += usize::from(vd.is_verified());
        }
        raw.set_fib4_gen(Some(before.v4))
            .map_err(|e| Failure::bpf("write the FIB generation", e))?;
        return Ok(n);
    }
    clear(raw)?;
    Ok(0)
}

/// Enter in the LPM trie, as holes, the routes of other owners inside managed prefixes that the
/// per-packet check would take for the managed route ([`fibverify::holes`]), and drop stale ones.
fn sync_holes(raw: &RouteState, v: &Verified) -> Result<(), Failure> {
    let want: Vec<RouteKey> = fibverify::holes(&v.managed, &v.fib)
        .into_iter()
        .map(|(net, metric)| RouteKey {
            dst: ipnet::IpNet::V4(net.trunc()),
            table: fibverify::TABLE_MAIN,
            metric,
        })
        .collect();
    raw.dp_sync_holes(false, &v.holes, &want)
        .map_err(|e| Failure::bpf("write the dataplane's routes", e))?;
    Ok(())
}

/// Flag the managed IPv4 routes whose kernel route is gone or has other paths
/// ([`drift::drift`]): the dataplane leaves their packets to the kernel. Clear the others.
/// Only flags that change are written (the trie was read once, by [`verify`]).
fn sync_drift4(raw: &RouteState, v: &Verified) -> Result<(), Failure> {
    for ((k, m), was) in v.keys.iter().zip(&v.managed).zip(&v.drifted) {
        let why = if m.table == fibverify::TABLE_MAIN {
            let own = v.fib.iter().find(|e| {
                e.dst == m.dst
                    && e.table == fibverify::TABLE_MAIN
                    && e.metric == m.metric
                    && e.tos == 0
            });
            drift::drift_weighted(
                &m.nexthops,
                &m.weights,
                own.map(|e| (&e.nexthops[..], &e.weights[..], e.nh_object)),
            )
        } else {
            None
        };
        if why.is_some() != *was {
            raw.dp_set_drift(k, why.is_some())
                .map_err(|e| Failure::bpf("write the dataplane's routes", e))?;
        }
    }
    Ok(())
}

/// A group's paths, (device, gateway), and their weights in the same order.
pub(crate) type Weighted = (Vec<drift::Path>, Vec<u16>);

/// The paths of a dataplane group and their weights, from one reading; `None` if there is no
/// such group.
pub(crate) fn group_of(raw: &RouteState, group: u32) -> Result<Option<Weighted>, Failure> {
    let g = raw
        .dp_group(group)
        .map_err(|e| Failure::bpf("read a dataplane group", e))?;
    Ok(g.map(|g| g.iter().map(|n| ((n.ifindex, n.gateway), n.weight)).unzip()))
}

/// A group's nexthops as read back ([`RouteState::dp_groups`]): paths and weights.
pub(crate) fn weighted(g: &[mpt_bpf::mproute::route_table::GroupNexthop]) -> Weighted {
    g.iter().map(|n| ((n.ifindex, n.gateway), n.weight)).unzip()
}

/// A kernel route's weights, in its paths' order.
pub(crate) fn weights(r: &mpt_model::route::Route) -> Vec<u16> {
    r.nexthops.iter().map(|n| n.weight).collect()
}

/// A kernel route's paths: (device, gateway).
pub(crate) fn paths(r: &mpt_model::route::Route) -> Vec<drift::Path> {
    r.nexthops.iter().map(|n| (n.ifindex, n.gateway)).collect()
}

/// IPv6: the same holes as [`sync_holes`] (IPv6 routes are never verified, so every managed
/// IPv6 packet takes the per-packet check, and the holes matter all the more).
fn sync_holes6(sock: &mut Socket, raw: &RouteState) -> Result<(), Failure> {
    let (routes, have) = entries(raw, true)?;
    let mut managed = Vec::new();
    let mut managed_w = Vec::new();
    for r in routes
        .iter()
        .filter(|r| r.id.table == fibverify::TABLE_MAIN)
    {
        let ipnet::IpNet::V6(dst) = r.id.dst else {
            continue;
        };
        let (nexthops, w) = group_of(raw, r.group)?.unwrap_or_default();
        managed.push(fibverify::Span {
            dst: ipnet::IpNet::V6(dst),
            metric: r.id.metric,
            unicast: true,
            nexthops,
        });
        managed_w.push((r.id, w, r.flags.drift));
    }
    let dumped = if managed.is_empty() {
        Vec::new()
    } else {
        dump_table(sock, Family::V6, fibverify::TABLE_MAIN)?
    };
    // drift, as for IPv4 (sync_drift4)
    for ((id, ours_w, was), span) in managed_w.iter().zip(&managed) {
        let own = dumped
            .iter()
            .find(|m| m.route.key.dst == span.dst && m.route.key.metric == span.metric)
            .map(|m| (paths(&m.route), weights(&m.route), m.route.nh_id.is_some()));
        let why = drift::drift_weighted(
            &span.nexthops,
            ours_w,
            own.as_ref().map(|(p, w, obj)| (&p[..], &w[..], *obj)),
        );
        if why.is_some() != *was {
            raw.dp_set_drift(id, why.is_some())
                .map_err(|e| Failure::bpf("write the dataplane's routes", e))?;
        }
    }
    let fib: Vec<fibverify::Span> = dumped
        .into_iter()
        .map(|m| fibverify::Span {
            dst: m.route.key.dst,
            metric: m.route.key.metric,
            unicast: m.route.rtype == fibverify::RTN_UNICAST,
            nexthops: paths(&m.route),
        })
        .collect();
    let want: Vec<RouteKey> = fibverify::holes_any(&managed, &fib)
        .into_iter()
        .filter_map(|(net, metric)| match net {
            ipnet::IpNet::V6(n) => Some(RouteKey {
                dst: ipnet::IpNet::V6(n.trunc()),
                table: fibverify::TABLE_MAIN,
                metric,
            }),
            ipnet::IpNet::V4(_) => None,
        })
        .collect();
    raw.dp_sync_holes(true, &have, &want)
        .map_err(|e| Failure::bpf("write the dataplane's routes", e))?;
    Ok(())
}

/// One managed route the dataplane checks packet by packet, and why.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Unverified {
    /// Prefix.
    pub dst: String,
    /// Metric.
    pub metric: u32,
    /// Why its kernel lookup is not skipped.
    pub why: String,
}

/// `dataplane show`: the state of the IPv4 check.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FibCheck {
    /// The namespace's IPv4 FIB generation now.
    pub generation: u32,
    /// The generation the routes were verified at, if any.
    pub verified_at: Option<u32>,
    /// Managed IPv4 routes.
    pub routes: usize,
    /// Of them, those whose kernel lookup is skipped now.
    pub skipped: usize,
    /// The others with the reason (as the FIB is now).
    pub unverified: Vec<Unverified>,
}

impl FibCheck {
    /// One line for the operator.
    pub fn line(&self) -> String {
        if self.routes == 0 {
            return "fib check: no managed IPv4 routes".into();
        }
        match self.verified_at {
            Some(g) if g == self.generation => format!(
                "fib check: IPv4 kernel lookup skipped for {} of {} managed routes (FIB generation {g} unchanged since they were verified); IPv6 looked up per packet",
                self.skipped, self.routes
            ),
            Some(g) => format!(
                "fib check: IPv4 kernel lookup per packet: the FIB changed since the routes were verified (generation {}, verified at {g}); any mproute change or dataplane attach verifies them again",
                self.generation
            ),
            None => "fib check: IPv4 kernel lookup per packet: routes not verified; any mproute change or dataplane attach verifies them".into(),
        }
    }
}

/// The state of the check now (read only: nothing is looked up or written).
pub fn status(
    sock: &mut Socket,
    raw: &RouteState,
    reader: Option<&mut FibGenReader>,
) -> Result<FibCheck, Failure> {
    let Some(reader) = reader else {
        let v = verify(sock, raw)?;
        let why = no_generation();
        return Ok(FibCheck {
            generation: 0,
            verified_at: None,
            routes: v.managed.len(),
            skipped: 0,
            unverified: v
                .managed
                .iter()
                .map(|m| Unverified {
                    dst: m.dst.to_string(),
                    metric: m.metric,
                    why: why.clone(),
                })
                .collect(),
        });
    };
    let now = reader
        .read()
        .map_err(|e| Failure::bpf("read the FIB generation", e))?;
    let verified_at = raw
        .fib4_gen()
        .map_err(|e| Failure::bpf("read the FIB generation", e))?;
    let holds = verified_at == Some(now.v4);
    // Every route skipped: nothing to explain, no dump needed.
    if holds {
        let routes = raw
            .dp_routes4()
            .map_err(|e| Failure::bpf("read the dataplane's routes", e))?;
        if routes.iter().all(|r| r.flags.verified) {
            return Ok(FibCheck {
                generation: now.v4,
                verified_at,
                routes: routes.len(),
                skipped: routes.len(),
                unverified: Vec::new(),
            });
        }
    }
    let v = verify(sock, raw)?;
    let mut skipped = 0;
    let mut unverified = Vec::new();
    for ((m, vd), flagged) in v.managed.iter().zip(&v.verdicts).zip(&v.flagged) {
        if holds && *flagged {
            skipped += 1;
            continue;
        }
        let why = match vd {
            _ if now.custom_rules4 => "the namespace has custom rules".to_string(),
            Verdict::Not(w) => w.clone(),
            Verdict::Verified { .. } => "verifiable, not verified since the last FIB change".into(),
        };
        unverified.push(Unverified {
            dst: m.dst.to_string(),
            metric: m.metric,
            why,
        });
    }
    Ok(FibCheck {
        generation: now.v4,
        verified_at,
        routes: v.managed.len(),
        skipped,
        unverified,
    })
}

impl Session {
    /// Work left at the end of an invocation: collect nexthop objects no route uses any more,
    /// and verify the managed routes for the dataplane's FIB check.
    pub fn finish(&mut self) -> Result<(), Failure> {
        let collected = self.collect();
        if std::mem::take(&mut self.arm_needed) {
            if let Some(w) = self.arm() {
                mpt_cli::error::eprint_once("mproute", "warning", &w);
            }
        }
        // this invocation got to its end: its writes are whole or undone (a kill before this
        // point leaves the lock file naming it, and the next invocation repairs)
        let ended = match self.store.as_mut() {
            Some(s) => s.end(),
            None => Ok(()),
        };
        collected.and(ended)
    }

    /// Before a command changes routes or attachments: clear the recorded FIB generation, so
    /// that the dataplane checks every managed packet with the kernel while our maps and the
    /// FIB change (a delete of a route no lookup ever matched does not move the generation,
    /// and the LPM trie changes without it). [`Session::finish`] verifies again.
    pub(crate) fn disarm(&mut self) -> Result<(), Failure> {
        if self.arm_needed {
            return Ok(());
        }
        // armed again at the end only if this got as far as the state: a command refused
        // before it (no privilege, no lock) changed nothing and verifies nothing
        self.store(false)?;
        if let Some(store) = self.store.as_mut() {
            store
                .bpf()
                .set_fib4_gen(None)
                .map_err(|e| Failure::bpf("write the FIB generation", e))?;
            // the journal: this invocation writes from now on (a kill before its end is
            // repaired by the next; see Store::begin)
            store.begin()?;
        }
        self.arm_needed = true;
        Ok(())
    }

    /// With a dataplane attached: verify the managed IPv4 routes against the FIB and record the
    /// generation (see [`crate::fibcheck`]). Never fails the command: the routes are in place;
    /// on trouble the per-packet check stays on (the generation was cleared by
    /// [`Session::disarm`]) and the reason is returned for a warning.
    pub(crate) fn arm(&mut self) -> Option<String> {
        let r = (|| -> Result<(), Failure> {
            let attached = !mpt_bpf::mproute::dataplane::attachments()
                .map_err(|e| Failure::bpf("list dataplane attachments", e))?
                .is_empty();
            if !attached || self.store(false)?.is_none() {
                return Ok(());
            }
            self.sock()?;
            let reader = crate::verify::reader(&mut self.fibgen)?;
            let (Some(sock), Some(store)) = (self.sock.as_mut(), self.store.as_ref()) else {
                return Ok(());
            };
            crate::verify::arm(sock, store.bpf(), reader).map(|_| ())
        })();
        r.err().map(|f| {
            format!(
                "verifying the managed routes failed, the dataplane checks their packets with the kernel's FIB one by one: {}",
                f.message
            )
        })
    }

    /// Close the state and free the namespace's lock (dataplane watch, between rounds).
    pub fn release_state(&mut self) {
        self.store = None;
        self.store_checked = false;
    }

    /// `dataplane watch`, one round: verify the managed routes now and report the check. The
    /// namespace's lock is held only meanwhile (commands wait for it, and it for them).
    pub fn verify_now(&mut self) -> Result<crate::verify::FibCheck, Failure> {
        self.store = None;
        self.store_checked = false;
        let r = (|| {
            if self.store(false)?.is_none() {
                return Err(Failure::system(
                    "dataplane watch: no mproute state in this namespace (yet)",
                ));
            }
            if let Some(w) = self.arm() {
                return Err(Failure::system(w));
            }
            self.sock()?;
            let reader = crate::verify::reader(&mut self.fibgen)?;
            match (self.sock.as_mut(), self.store.as_ref()) {
                (Some(sock), Some(store)) => crate::verify::status(sock, store.bpf(), reader),
                _ => Err(Failure::system(
                    "dataplane watch: no mproute state in this namespace (yet)",
                )),
            }
        })();
        self.store = None;
        self.store_checked = false;
        r
    }

    /// The state of the FIB check now, read only (`None`: no state in the namespace).
    pub(crate) fn fib_check(&mut self) -> Result<Option<FibCheck>, Failure> {
        let reader = reader(&mut self.fibgen)?;
        match (self.sock.as_mut(), self.store.as_ref()) {
            (Some(sock), Some(store)) => status(sock, store.bpf(), reader).map(Some),
            _ => Ok(None),
        }
    }

    /// The namespace's IPv4 FIB generation now (`None`: not readable on this kernel).
    pub fn generation(&mut self) -> Result<Option<u32>, Failure> {
        match crate::verify::reader(&mut self.fibgen)? {
            Some(r) => r
                .read()
                .map(|g| Some(g.v4))
                .map_err(|e| Failure::bpf("read the FIB generation", e)),
            None => Ok(None),
        }
    }
}

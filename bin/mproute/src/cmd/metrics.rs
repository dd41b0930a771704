//! `mproute metrics`: what the dataplane counts, in the Prometheus text format
//! ([`mpt_cli::metrics`]) as node_exporter's textfile collector reads it: packets and bytes per
//! managed route and per nexthop (the counters `show -s` prints), the packets of every verdict
//! by reason (`dataplane show`'s), the devices the dataplane is attached to and how, and the
//! counter slots in use. Reads only: the state is opened without the lock, as `show` does.

use std::collections::HashMap;

use mpt_bpf::mproute::abi::Reason;
use mpt_bpf::mproute::dataplane as dp;
use mpt_cli::metrics::{Exposition, Kind};
use mpt_cli::Failure;
use mpt_model::{Family, RouteKey};

use crate::session::{dump, Session};
use crate::store::Managed;
use crate::view::Output;

/// Every family `mproute metrics` prints (without the `mproute_` prefix), its type and help.
pub const FAMILIES: &[(&str, Kind, &str)] = &[
    (
        "route_info",
        Kind::Gauge,
        "A route mproute manages (1), its algorithm and who carries it out (kernel, xdp, tc or none).",
    ),
    (
        "route_packets_total",
        Kind::Counter,
        "Packets the dataplane forwarded by a managed route.",
    ),
    (
        "route_bytes_total",
        Kind::Counter,
        "Bytes the dataplane forwarded by a managed route.",
    ),
    (
        "nexthop_packets_total",
        Kind::Counter,
        "Packets the dataplane sent to one nexthop of a managed route (nexthop: its position in the route).",
    ),
    (
        "nexthop_bytes_total",
        Kind::Counter,
        "Bytes the dataplane sent to one nexthop of a managed route (nexthop: its position in the route).",
    ),
    (
        "dataplane_packets_total",
        Kind::Counter,
        "Packets the dataplane saw, by verdict: redirected (forwarded by it), dropped (redirected, then not delivered), the others passed to the kernel's stack and why.",
    ),
    (
        "dataplane_attachment_info",
        Kind::Gauge,
        "A device the dataplane is attached to (1), and the hook (tc, xdp, xdp-generic).",
    ),
    (
        "dataplane_stats_slots_used",
        Kind::Gauge,
        "Routes counted in the dataplane's array slots (the others in its hash of counters).",
    ),
    (
        "dataplane_stats_slots",
        Kind::Gauge,
        "Counter slots the dataplane has.",
    ),
];

fn bpf(what: &'static str) -> impl FnOnce(mpt_bpf::Error) -> Failure {
    move |e| Failure::bpf(what, e)
}

/// Collect the namespace's metrics.
pub fn run(s: &mut Session) -> Result<Output, Failure> {
    if s.opts.batch.is_none() {
        // a lone metrics reads without the lock, as show does (a timer must not wait for a
        // long batch, nor hold one up); in a batch the lines around it decide
        s.read_only = true;
    }
    let mut e = Exposition::new("mproute");
    if let Some(ns) = &s.opts.netns {
        e.common_label("netns", ns);
    }
    for (name, kind, help) in FAMILIES {
        e.declare(name, *kind, help);
    }
    let managed: HashMap<RouteKey, Managed> = match s.store(false)? {
        Some(st) => st.all()?.into_iter().collect(),
        None => HashMap::new(),
    };
    if !managed.is_empty() {
        routes(s, &managed, &mut e)?;
    }
    if let Some(st) = s.store(false)? {
        let counts = dp::reasons(st.bpf()).map_err(bpf("read dataplane counters"))?;
        for (r, n) in Reason::ALL.iter().zip(counts) {
            e.add("dataplane_packets_total", &[("reason", r.name())], n);
        }
        if let Ok((used, total)) = st.bpf().dp_slots_used() {
            e.add("dataplane_stats_slots_used", &[], used as u64);
            e.add("dataplane_stats_slots", &[], total as u64);
        }
    }
    for a in dp::attachments().map_err(bpf("list dataplane attachments"))? {
        let dev = mpt_sys::iface::name(a.ifindex).unwrap_or_else(|| format!("if{}", a.ifindex));
        e.add(
            "dataplane_attachment_info",
            &[("dev", &dev), ("mode", a.mode.name())],
            1,
        );
    }
    Ok(Output::Metrics(e.render()))
}

/// The managed routes (as the FIB has them: their nexthops' gateways and devices) and their
/// counters.
fn routes(
    s: &mut Session,
    managed: &HashMap<RouteKey, Managed>,
    e: &mut Exposition,
) -> Result<(), Failure> {
    let enforced = s.enforced_by()?;
    let mut names: HashMap<u32, String> = HashMap::new();
    for fam in [Family::V4, Family::V6] {
        for r in dump(s.sock()?, Some(fam), None)? {
            let Some(m) = managed.get(&r.key) else {
                continue;
            };
            let by = s.route_enforced_by(enforced, &r.key)?;
            let Some(st) = s.store(false)? else {
                return Ok(());
            };
            let stats = st
                .bpf()
                .dp_stats(&r.key)
                .map_err(bpf("read dataplane counters"))?
                .unwrap_or_default();
            let table = mpt_cli::names::table_name(r.key.table);
            let dst = crate::view::dst_string(&r);
            let metric = r.key.metric.to_string();
            let algo = m.algo.name();
            let route = [
                ("table", table.as_str()),
                ("dst", dst.as_str()),
                ("metric", metric.as_str()),
            ];
            let mut info = route.to_vec();
            info.extend([("algo", algo), ("enforced_by", by)]);
            e.add("route_info", &info, 1);
            e.add("route_packets_total", &route, stats.route.packets);
            e.add("route_bytes_total", &route, stats.route.bytes);
            for (i, nh) in r.nexthops.iter().enumerate() {
                let c = stats.nexthops.get(i).copied().unwrap_or_default();
                let index = i.to_string();
                let gw = nh.gateway.map(|g| g.to_string()).unwrap_or_default();
                let dev = match nh.ifindex {
                    0 => String::new(),
                    i => names
                        .entry(i)
                        .or_insert_with(|| {
                            mpt_sys::iface::name(i).unwrap_or_else(|| format!("if{i}"))
                        })
                        .clone(),
                };
                let mut l = route.to_vec();
                l.extend([
                    ("nexthop", index.as_str()),
                    ("gateway", gw.as_str()),
                    ("dev", dev.as_str()),
                ]);
                e.add("nexthop_packets_total", &l, c.packets);
                e.add("nexthop_bytes_total", &l, c.bytes);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_well_named_and_typed() {
        let mut e = Exposition::new("mproute");
        for (name, kind, help) in FAMILIES {
            // declare holds names to the format's rules and counters to _total
            e.declare(name, *kind, help);
        }
        let text = e.render();
        assert_eq!(text.matches("# TYPE mproute_").count(), FAMILIES.len());
        assert!(!text.contains("\n\n"));
    }
}

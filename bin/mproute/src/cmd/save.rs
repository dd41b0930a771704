//! `mproute save`: the routes mproute manages and the dataplane's attachments as batch lines
//! (`replace ...`, `dataplane attach ...`) that `mproute -b FILE` reads back into the same
//! state: every table, metric, protocol, algorithm, resilient table size and idle timer,
//! weight and `onlink`. Numbers, not names, for tables and protocols: a restore at boot must
//! not depend on `/etc/iproute2` being the same. Routes made with `--nexthop-objects` are
//! saved as plain routes (their objects' ids are the kernel's to give).

use std::collections::BTreeMap;

use mpt_bpf::mproute::dataplane::Mode;
use mpt_cli::Failure;
use mpt_model::route::Route;
use mpt_model::Family;

use crate::session::{dump, Session};
use crate::view::Output;

/// The batch lines, routes first (by family, table, metric, prefix), then the attachments.
pub fn run(s: &mut Session) -> Result<Output, Failure> {
    let managed: BTreeMap<_, _> = match s.store(false)? {
        Some(st) => st.all()?.into_iter().collect(),
        None => BTreeMap::new(),
    };
    let mut lines = vec![format!(
        "# mproute save {}: restore with mproute [-n NETNS] -b FILE",
        mpt_sys::time::rfc3339_now()
    )];
    let mut routes = Vec::new();
    for fam in [Family::V4, Family::V6] {
        for r in dump(s.sock()?, Some(fam), None)? {
            if managed.contains_key(&r.key) {
                routes.push(r);
            }
        }
    }
    routes.sort_by_key(|r| {
        (
            r.key.family() == Family::V6,
            r.key.table,
            r.key.metric,
            r.key.dst,
        )
    });
    // IPv4 keeps alternatives (`append`): the first of a key is replaced, the others appended
    let mut seen = std::collections::HashSet::new();
    for r in &routes {
        let m = managed.get(&r.key);
        let algo = m.map(|m| m.algo).unwrap_or_default();
        let recipe = m.map(|m| m.recipe).unwrap_or_default();
        let table = match s.store(false)? {
            Some(st) => st
                .bpf()
                .res_get(&r.key)
                .map_err(|e| Failure::bpf("read the dataplane's tables", e))?
                .map(|t| {
                    if t.is_consistent() {
                        Table::Consistent(t.buckets())
                    } else {
                        Table::Resilient(t.buckets(), t.idle_timer())
                    }
                }),
            None => None,
        };
        let line = route_line(r, algo.name(), table, recipe, &mut |i| {
            mpt_sys::iface::name(i).unwrap_or_else(|| format!("if{i}"))
        });
        if seen.insert(r.key) {
            lines.push(line);
        } else {
            lines.push(line.replacen("replace ", "append ", 1));
        }
    }
    let atts = mpt_bpf::mproute::dataplane::attachments()
        .map_err(|e| Failure::bpf("list dataplane attachments", e))?;
    // XDP always comes with tc beside it: a device's mode is its XDP hook where it has one;
    // fastpath is the programs' (one setting for both), peer off where the tc program
    // delivers into no veth peer although one is eligible
    let mut modes: BTreeMap<u32, (Mode, bool, bool)> = BTreeMap::new();
    for a in atts {
        let fastpath = mpt_bpf::mproute::dataplane::fastpath(a.prog_id)
            .map_err(|e| Failure::bpf("read the dataplane's load-time constants", e))?
            .unwrap_or(true);
        let peers = if a.mode == Mode::Tc {
            !mpt_bpf::mproute::dataplane::peer_ports(a.prog_id)
                .map_err(|e| Failure::bpf("read the tc program's peer devices", e))?
                .is_empty()
        } else {
            false
        };
        let m = modes.entry(a.ifindex).or_insert((a.mode, fastpath, peers));
        if a.mode != Mode::Tc {
            m.0 = a.mode;
        }
        m.1 &= fastpath;
        m.2 |= peers;
    }
    let eligible = if modes.is_empty() {
        false
    } else {
        let links = crate::hook::links(s.sock()?)?;
        !crate::hook::peer_ports(s.sock()?, &links)?.is_empty()
    };
    for (ifindex, (mode, fastpath, peers)) in modes {
        let dev = mpt_sys::iface::name(ifindex).unwrap_or_else(|| format!("if{ifindex}"));
        let mut line = format!("dataplane attach dev {dev} {}", mode.name());
        if !fastpath {
            line.push_str(" fastpath off");
        }
        if eligible && !peers {
            line.push_str(" peer off");
        }
        lines.push(line);
    }
    Ok(Output::Lines(lines))
}

/// The table between a route's hash and its nexthops, as `save` writes it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// `resilient buckets N idle-timer S`.
    Resilient(u16, u32),
    /// `consistent table-size M`.
    Consistent(u16),
}

/// One route as a `replace` line: its table kind and hash recipe included.
pub fn route_line(
    r: &Route,
    algo: &str,
    table: Option<Table>,
    recipe: mpt_model::hash::HashRecipe,
    ifname: &mut dyn FnMut(u32) -> String,
) -> String {
    let mut w = vec![
        "replace".to_string(),
        crate::view::dst_string(r),
        format!("table {}", r.key.table),
        format!("metric {}", r.key.metric),
        format!("proto {}", r.protocol),
        format!("algo {algo}"),
    ];
    match table {
        Some(Table::Resilient(buckets, idle)) => {
            w.push(format!("resilient buckets {buckets} idle-timer {idle}"))
        }
        Some(Table::Consistent(size)) => w.push(format!("consistent table-size {size}")),
        None => {}
    }
    if let Some(f) = recipe.fields {
        w.push(format!("hash-fields {f}"));
    }
    if let Some(seed) = recipe.seed {
        w.push(format!("seed {seed}"));
    }
    let single = r.nexthops.len() == 1 && r.nexthops[0].gateway.is_some();
    for n in &r.nexthops {
        if !single {
            w.push("nexthop".into());
        }
        if let Some(g) = n.gateway {
            w.push(format!("via {g}"));
        }
        if n.ifindex != 0 {
            w.push(format!("dev {}", ifname(n.ifindex)));
        }
        if !single {
            w.push(format!("weight {}", n.weight));
        }
        if n.onlink() {
            w.push("onlink".into());
        }
    }
    w.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpt_model::route::{Nexthop, RouteKey};

    fn route(dst: &str, nhs: &[(&str, u32, u16, u8)]) -> Route {
        Route {
            key: RouteKey {
                dst: dst.parse().expect("prefix"),
                table: 100,
                metric: 7,
            },
            protocol: 245,
            scope: 0,
            rtype: 1,
            nexthops: nhs
                .iter()
                .map(|(gw, ifindex, weight, flags)| Nexthop {
                    gateway: (!gw.is_empty()).then(|| gw.parse().expect("gateway")),
                    ifindex: *ifindex,
                    weight: *weight,
                    flags: *flags,
                })
                .collect(),
            nh_id: None,
            algo: None,
        }
    }

    fn dev(i: u32) -> String {
        format!("v{i}")
    }

    #[test]
    fn lines_the_grammar_reads_back() {
        let r = route(
            "198.51.100.0/24",
            &[("192.0.2.1", 3, 2, 0), ("192.0.2.9", 4, 1, 4)],
        );
        let l = route_line(
            &r,
            "l4-hash",
            Some(Table::Resilient(64, 0)),
            Default::default(),
            &mut dev,
        );
        assert_eq!(
            l,
            "replace 198.51.100.0/24 table 100 metric 7 proto 245 algo l4-hash resilient buckets 64 idle-timer 0 nexthop via 192.0.2.1 dev v3 weight 2 nexthop via 192.0.2.9 dev v4 weight 1 onlink"
        );
        let words: Vec<String> = l.split_whitespace().map(String::from).collect();
        let c = crate::cli::parse_line(words).expect("parses");
        assert!(matches!(c, crate::cli::Command::Write(_)), "{c:?}");
        let single = route_line(
            &route("2001:db8::/64", &[("2001:db8:1::1", 2, 1, 0)]),
            "drr",
            None,
            Default::default(),
            &mut dev,
        );
        assert_eq!(
            single,
            "replace 2001:db8::/64 table 100 metric 7 proto 245 algo drr via 2001:db8:1::1 dev v2"
        );
        let words: Vec<String> = single.split_whitespace().map(String::from).collect();
        crate::cli::parse_line(words).expect("parses");
        // a consistent table and a hash recipe
        let recipe = mpt_model::hash::HashRecipe {
            fields: Some(mpt_model::hash::HashFields::parse("src-ip,dst-ip").expect("fields")),
            seed: Some(7),
        };
        let c = route_line(
            &r,
            "l3-hash",
            Some(Table::Consistent(251)),
            recipe,
            &mut dev,
        );
        assert!(
            c.contains(" algo l3-hash consistent table-size 251 hash-fields src-ip,dst-ip seed 7 "),
            "{c}"
        );
        let words: Vec<String> = c.split_whitespace().map(String::from).collect();
        let parsed = crate::cli::parse_line(words).expect("parses");
        assert!(
            matches!(parsed, crate::cli::Command::Write(_)),
            "{parsed:?}"
        );
    }
}

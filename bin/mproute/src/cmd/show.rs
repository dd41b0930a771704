//! `mproute show [PREFIX] [table T|all] [algo ALGO]`: the FIB joined with mproute's state, and
//! who enforces each managed route's algorithm.

use std::collections::HashMap;

use mpt_cli::Failure;
use mpt_model::{Family, RouteKey};

use crate::grammar::ShowSpec;
use crate::resolve;
use crate::session::{dump_msgs, Session};
use crate::store::Managed;
use crate::view::Output;
use crate::view::RouteRow;

/// List the routes.
pub fn run(s: &mut Session, f: &ShowSpec) -> Result<Output, Failure> {
    let table = match f.table.as_deref() {
        Some("all") => None,
        t => Some(resolve::table(t)?),
    };
    let fams: Vec<Family> = match &f.dst {
        Some(d) => vec![Family::of_net(d)],
        None => vec![Family::V4, Family::V6],
    };
    let managed: HashMap<RouteKey, Managed> = match s.store(false)? {
        Some(s) => s.all()?.into_iter().collect(),
        None => HashMap::new(),
    };
    let enforced = s.enforced_by()?;
    let mut names_cache: HashMap<u32, Option<String>> = HashMap::new();
    let mut ifname = |i: u32| {
        names_cache
            .entry(i)
            .or_insert_with(|| mpt_sys::iface::name(i))
            .clone()
    };
    let mut rows = Vec::new();
    for fam in fams {
        let routes = dump_msgs(s.sock()?, Some(fam), table)?;
        for msg in routes {
            let mut r = msg.route.clone();
            if f.dst.is_some_and(|d| d != r.key.dst) {
                continue;
            }
            let m = managed.get(&r.key);
            if m.is_some() {
                r.algo = m.map(|m| m.algo);
            }
            // Managed: in mproute's state. A protocol-mproute route that is not (added
            // with ip route, or left by a lost state) is not, until sync adopts it.
            let is_managed = m.is_some();
            if let Some(a) = f.algo {
                if !is_managed || r.algo.unwrap_or_default() != a {
                    continue;
                }
            }
            let by = if is_managed {
                Some(s.route_enforced_by(enforced, &r.key)?)
            } else {
                None
            };
            let mut row = RouteRow::new(&r, is_managed, by, &mut ifname);
            row.set_kernel(&msg, s.opts.details);
            if is_managed {
                if let Some(st) = s.store(false)? {
                    let t = st
                        .bpf()
                        .res_get(&r.key)
                        .map_err(|e| Failure::bpf("read the dataplane's tables", e))?;
                    if let Some(t) = t {
                        crate::view::set_resilient(&mut row, &t, s.opts.details);
                    }
                }
            }
            if s.opts.stats > 0 && m.is_some() {
                if let Some(s) = s.store(false)? {
                    let st = s
                        .bpf()
                        .dp_stats(&r.key)
                        .map_err(|e| Failure::bpf("read dataplane counters", e))?
                        .unwrap_or_default();
                    row.set_stats(&st);
                }
            }
            rows.push(row);
        }
    }
    Ok(Output::Routes(rows))
}

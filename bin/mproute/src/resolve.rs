//! Names to kernel ids, inside the target namespace (the process has already entered it).

use mpt_cli::{names, Failure};
use mpt_model::route::{validate_nexthops, RTNH_F_ONLINK};
use mpt_model::{Algo, Nexthop, RouteKey};
use mpt_netlink::msg::rtnl::route::{default_metric, PathForm};

use crate::grammar::RouteSpec;

/// A route command with every name resolved.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// Identity (metric defaulted as the kernel will).
    pub key: RouteKey,
    /// Whether the metric was typed.
    pub metric_given: bool,
    /// `proto P`, if given.
    pub proto: Option<u8>,
    /// Paths.
    pub nexthops: Vec<Nexthop>,
    /// Encoding.
    pub form: PathForm,
    /// Algorithm (default l3-hash).
    pub algo: Algo,
    /// Whether `algo` was typed.
    pub algo_given: bool,
    /// `resilient ...`: the route's bucket table.
    pub resilient: Option<crate::grammar::Resilient>,
    /// `hash-fields ...`, `seed N`.
    pub recipe: mpt_model::hash::HashRecipe,
}

/// Table name or number to id (exit 1 if unknown).
pub fn table(t: Option<&str>) -> Result<u32, Failure> {
    match t {
        None => Ok(mpt_model::names::RT_TABLE_MAIN),
        Some(s) => match names::table_id(s) {
            Some(0) => Err(Failure::usage(
                "table 0: not a routing table (use 1-4294967295 or a name)",
            )),
            Some(id) => Ok(id),
            None => Err(Failure::usage(format!("unknown table \"{s}\""))
                .hint("use a number or a name from /etc/iproute2/rt_tables")),
        },
    }
}

/// ifindex of a device, cached for the life of the process (a batch names the same few devices
/// in every line; `if_nametoindex` costs a socket, an ioctl and a close each time).
fn ifindex_cached(dev: &str) -> Result<u32, mpt_sys::Error> {
    use rustc_hash::FxHashMap;
    use std::sync::Mutex;
    static CACHE: Mutex<Option<FxHashMap<String, u32>>> = Mutex::new(None);
    if let Some(i) = CACHE
        .lock()
        .ok()
        .and_then(|c| c.as_ref().and_then(|m| m.get(dev).copied()))
    {
        return Ok(i);
    }
    let i = mpt_sys::iface::index(dev)?;
    if let Ok(mut c) = CACHE.lock() {
        c.get_or_insert_with(FxHashMap::default)
            .insert(dev.to_string(), i);
    }
    Ok(i)
}

/// Resolve a parsed route command.
pub fn resolve(spec: &RouteSpec) -> Result<Resolved, Failure> {
    let table = table(spec.table.as_deref())?;
    let proto = match spec.proto.as_deref() {
        None => None,
        Some(p) => Some(names::proto_id(p).ok_or_else(|| {
            Failure::usage(format!("unknown protocol \"{p}\""))
                .hint("use a number 0-255 or a name from /etc/iproute2/rt_protos")
        })?),
    };
    let mut nexthops = Vec::with_capacity(spec.nexthops.len());
    for nh in &spec.nexthops {
        let ifindex = match &nh.dev {
            None => 0,
            Some(d) => ifindex_cached(d).map_err(|_| {
                Failure::system(format!(
                    "{} {}: cannot find device \"{d}\"",
                    spec.verb.name(),
                    spec.dst
                ))
                .hint("check the device name with \"ip link\" in the same namespace")
            })?,
        };
        nexthops.push(Nexthop {
            gateway: nh.via,
            ifindex,
            weight: nh.weight,
            flags: if nh.onlink { RTNH_F_ONLINK } else { 0 },
        });
    }
    if !nexthops.is_empty() {
        validate_nexthops(&spec.dst, &nexthops).map_err(|e| {
            let what = match &e {
                // name the device as the operator wrote it
                mpt_model::route::SpecError::Duplicate(_, i) => {
                    let nh = &spec.nexthops[(*i).min(spec.nexthops.len() - 1)];
                    let mut w = Vec::new();
                    if let Some(v) = nh.via {
                        w.push(format!("via {v}"));
                    }
                    if let Some(d) = &nh.dev {
                        w.push(format!("dev {d}"));
                    }
                    format!("nexthop {} is listed twice", w.join(" "))
                }
                e => e.to_string(),
            };
            Failure::usage(format!("{} {}: {what}", spec.verb.name(), spec.dst))
        })?;
    }
    let family = mpt_model::Family::of_net(&spec.dst);
    Ok(Resolved {
        key: RouteKey {
            dst: spec.dst,
            table,
            // IPv6 stores metric 0 as 1024 (IP6_RT_PRIO_USER), as if none was given.
            metric: match spec.metric {
                Some(0) | None => default_metric(family),
                Some(m) => m,
            },
        },
        metric_given: spec
            .metric
            .is_some_and(|m| m != 0 || family == mpt_model::Family::V4),
        proto,
        nexthops,
        form: if spec.multipath {
            PathForm::Multipath
        } else {
            PathForm::Single
        },
        algo: spec.algo.unwrap_or_default(),
        algo_given: spec.algo.is_some(),
        resilient: spec.resilient,
        recipe: spec.recipe,
    })
}

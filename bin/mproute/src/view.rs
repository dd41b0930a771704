//! Rows for `show`, `flush` and `sync`: one type each, printed as a table or as JSON.

use serde::Serialize;

use mpt_cli::names;
use mpt_cli::render::TableRow;
use mpt_model::{Family, Route};

/// A nexthop as shown.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct NexthopRow {
    /// Gateway address, null for a device route.
    pub gateway: Option<String>,
    /// Device name, null if none.
    pub dev: Option<String>,
    /// Weight 1..256.
    pub weight: u16,
    /// iproute2 flag names.
    pub flags: Vec<String>,
}

/// A route as shown.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct RouteRow {
    /// Prefix in iproute2's spelling (`default`, bare address for host routes).
    pub dst: String,
    /// `inet` / `inet6`.
    pub family: &'static str,
    /// Table id.
    pub table: u32,
    /// Protocol name (iproute2's, from its files).
    pub protocol: String,
    /// Metric.
    pub metric: u32,
    /// Route type.
    #[serde(rename = "type")]
    pub rtype: String,
    /// Scope.
    pub scope: String,
    /// Whether mproute owns the route.
    pub managed: bool,
    /// Algorithm (null for routes mproute does not manage).
    pub algo: Option<String>,
    /// Who carries the algorithm out: kernel, xdp, tc or none (null if not managed).
    pub enforced_by: Option<String>,
    /// Kernel nexthop object id, if the route references one.
    pub nhid: Option<u32>,
    /// Paths.
    pub nexthops: Vec<NexthopRow>,
}

/// iproute2's spelling of a destination.
pub fn dst_string(r: &Route) -> String {
    let d = r.key.dst;
    if d.prefix_len() == 0 {
        "default".to_string()
    } else if d.prefix_len() == d.max_prefix_len() {
        d.addr().to_string()
    } else {
        d.to_string()
    }
}

impl RouteRow {
    /// Build a row from the FIB's route and what we know of it.
    pub fn new(
        r: &Route,
        managed: bool,
        enforced_by: Option<&str>,
        ifname: &mut dyn FnMut(u32) -> Option<String>,
    ) -> Self {
        RouteRow {
            dst: dst_string(r),
            family: Family::of_net(&r.key.dst).name(),
            table: r.key.table,
            protocol: names::proto_name(r.protocol),
            metric: r.key.metric,
            rtype: mpt_model::names::rtype_name(r.rtype),
            scope: mpt_model::names::scope_name(r.scope),
            managed,
            algo: if managed {
                Some(r.algo.unwrap_or_default().name().to_string())
            } else {
                None
            },
            enforced_by: enforced_by.map(str::to_string),
            nhid: r.nh_id,
            nexthops: r
                .nexthops
                .iter()
                .map(|n| NexthopRow {
                    gateway: n.gateway.map(|g| g.to_string()),
                    dev: if n.ifindex == 0 {
                        None
                    } else {
                        ifname(n.ifindex).or_else(|| Some(format!("if{}", n.ifindex)))
                    },
                    weight: n.weight,
                    flags: n.flag_names().into_iter().map(String::from).collect(),
                })
                .collect(),
        }
    }
}

impl TableRow for RouteRow {
    fn headers() -> Vec<&'static str> {
        vec![
            "DST", "TABLE", "METRIC", "PROTO", "ALGO", "ENFORCED", "NEXTHOPS",
        ]
    }
    fn cells(&self) -> Vec<String> {
        let nhs = if self.nexthops.is_empty() {
            self.rtype.clone()
        } else {
            self.nexthops
                .iter()
                .map(|n| {
                    let mut s = String::new();
                    if let Some(g) = &n.gateway {
                        s.push_str(&format!("via {g} "));
                    }
                    if let Some(d) = &n.dev {
                        s.push_str(&format!("dev {d} "));
                    }
                    s.push_str(&format!("weight {}", n.weight));
                    for f in &n.flags {
                        s.push(' ');
                        s.push_str(f);
                    }
                    s
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        vec![
            self.dst.clone(),
            names::table_name(self.table),
            self.metric.to_string(),
            self.protocol.clone(),
            self.algo.clone().unwrap_or_else(|| "-".into()),
            self.enforced_by.clone().unwrap_or_else(|| "-".into()),
            nhs,
        ]
    }
}

/// One repair or removal, for `flush` and `sync`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ActionRow {
    /// What was done: `deleted`, `forgotten`, `adopted`, `removed-stale-state`.
    pub action: String,
    /// Prefix (or the state directory for stale state).
    pub dst: String,
    /// Table id.
    pub table: Option<u32>,
    /// Metric.
    pub metric: Option<u32>,
    /// Why.
    pub reason: String,
}

impl TableRow for ActionRow {
    fn headers() -> Vec<&'static str> {
        vec!["ACTION", "DST", "TABLE", "METRIC", "REASON"]
    }
    fn cells(&self) -> Vec<String> {
        vec![
            self.action.clone(),
            self.dst.clone(),
            self.table.map_or_else(|| "-".into(), names::table_name),
            self.metric.map_or_else(|| "-".into(), |m| m.to_string()),
            self.reason.clone(),
        ]
    }
}

//! What commands answer with, and how it is printed: one row type per answer (`show`, `get`,
//! `flush`/`sync`, `dataplane show`, a change's report), each printed as a table or as JSON
//! from the same value (`mpt_cli::render`). Commands never print; [`print`] does.

use serde::Serialize;

use mpt_cli::names;
use mpt_cli::render::{print_json, print_line, print_rows, Counters, Style, TableRow};
use mpt_model::{Algo, Family, Route, RouteKey, Verb};

/// What a command produced.
#[derive(Debug)]
pub enum Output {
    /// Routes for `show`.
    Routes(Vec<RouteRow>),
    /// `get`.
    Get(Box<GetRow>),
    /// `dataplane show` (and attach/detach reports).
    Dataplane(DataplaneView),
    /// A mutation's report.
    Change(ChangeReport),
    /// `flush` / `sync`.
    Actions {
        /// Whether anything changed.
        changed: bool,
        /// What was done (with `check`: what would be done).
        rows: Vec<ActionRow>,
        /// A dry run (`--check`): nothing was done.
        check: bool,
    },
    /// What a command would do (`--check`).
    Check(Box<CheckReport>),
    /// `metrics`: the Prometheus text exposition.
    Metrics(String),
    /// `save`: batch lines (`-j`: a JSON array of them).
    Lines(Vec<String>),
}

/// Print what a command produced.
pub fn print(out: &Output, style: Style) {
    match out {
        Output::Metrics(text) => mpt_cli::metrics::print(text),
        Output::Routes(rows) => print_rows(rows, style),
        Output::Get(row) => {
            print_rows(std::slice::from_ref(row.as_ref()), style);
            if !style.json {
                for n in &row.notes {
                    print_line(&format!("note: {n}"));
                }
            }
        }
        Output::Lines(l) if style.json => print_json(l, style.pretty),
        Output::Lines(l) => l.iter().for_each(|l| print_line(l)),
        Output::Dataplane(v) => {
            if style.json {
                print_json(v, style.pretty);
            } else {
                print_rows(&v.attachments, style);
                if let Some(l) = v.counters.line() {
                    print_line(&l);
                }
                if let Some(c) = &v.counter_slots {
                    print_line(&c.line());
                }
                if let Some(m) = &v.memory {
                    print_line(&m.line());
                }
                print_line(&format!(
                    "tc hook: {}: {}",
                    match v.tc_hook {
                        "classic" => "classic tc, a clsact qdisc with direct-action filters",
                        other => other,
                    },
                    v.tc_hook_why
                ));
                if let Some(f) = &v.fib_check {
                    print_line(&f.line());
                    for u in &f.unverified {
                        print_line(&format!("  {} metric {}: {}", u.dst, u.metric, u.why));
                    }
                }
                for n in &v.notes {
                    print_line(&format!("note: {n}"));
                }
            }
        }
        Output::Change(rep) => {
            if style.json {
                print_json(rep, style.pretty);
            }
        }
        Output::Actions {
            changed,
            rows,
            check,
        } => {
            if style.json {
                let mut v = serde_json::json!({"changed": changed, "actions": rows});
                if *check {
                    v["check"] = serde_json::Value::Bool(true);
                }
                print_json(&v, style.pretty);
            } else {
                if *check {
                    print_line(&format!(
                        "check: {}",
                        if rows.is_empty() {
                            "nothing would change"
                        } else {
                            "would do (nothing was changed):"
                        }
                    ));
                }
                print_rows(rows, style);
            }
        }
        Output::Check(rep) => {
            if style.json {
                print_json(rep, style.pretty);
            } else {
                for l in rep.lines() {
                    print_line(&l);
                }
            }
        }
    }
}

/// What one command of a dry run (`--check`) would do.
#[derive(Debug, Serialize)]
pub struct CheckReport {
    /// Always true: nothing was changed.
    pub check: bool,
    /// Whether the command would change the FIB, mproute's state or an attachment.
    pub changed: bool,
    /// The verb.
    pub action: &'static str,
    /// Prefix (route verbs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dst: Option<String>,
    /// Table id (route verbs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<u32>,
    /// Metric (route verbs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric: Option<u32>,
    /// Devices (dataplane verbs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub devs: Option<Vec<String>>,
    /// The object before and after (`null`: absent), as `show -j` prints it.
    pub diff: Diff,
    /// A hashed route's change: the share of the flow space (0.0-1.0) whose nexthop changes,
    /// computed from the route's tables (absent where not known or not hashed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved: Option<f64>,
    /// The same, one line each, for the text output.
    #[serde(skip)]
    pub text: (Option<String>, Option<String>),
}

/// Before and after.
#[derive(Debug, Serialize)]
pub struct Diff {
    /// Before the command.
    pub before: serde_json::Value,
    /// After it.
    pub after: serde_json::Value,
}

impl CheckReport {
    /// A route verb's report.
    pub fn route(
        action: &'static str,
        k: &RouteKey,
        changed: bool,
        before: Option<&RouteRow>,
        after: Option<&RouteRow>,
    ) -> Self {
        let json = |r: Option<&RouteRow>| {
            r.and_then(|r| serde_json::to_value(r).ok())
                .unwrap_or(serde_json::Value::Null)
        };
        CheckReport {
            check: true,
            changed,
            action,
            dst: Some(k.dst.to_string()),
            table: Some(k.table),
            metric: Some(k.metric),
            devs: None,
            diff: Diff {
                before: json(before),
                after: json(after),
            },
            moved: None,
            text: (
                before.map(RouteRow::spelling),
                after.map(RouteRow::spelling),
            ),
        }
    }

    /// The text output: what would happen, then the object before (`-`) and after (`+`).
    pub fn lines(&self) -> Vec<String> {
        let what = match (&self.dst, &self.devs) {
            (Some(d), _) => {
                let mut s = format!("{} {d}", self.action);
                if let Some(t) = self.table.filter(|t| *t != mpt_model::names::RT_TABLE_MAIN) {
                    s.push_str(&format!(" table {}", names::table_name(t)));
                }
                s
            }
            (None, Some(devs)) => format!("{} dev {}", self.action, devs.join(" dev ")),
            (None, None) => self.action.to_string(),
        };
        let mut out = vec![format!(
            "{what}: {}",
            if self.changed {
                "would change"
            } else {
                "unchanged"
            }
        )];
        if self.changed {
            if let Some(b) = &self.text.0 {
                out.push(format!("  - {b}"));
            }
            if let Some(a) = &self.text.1 {
                out.push(format!("  + {a}"));
            }
            if let Some(m) = self.moved {
                out.push(format!(
                    "  moved: {:.2} % of the flow space would change nexthop",
                    m * 100.0
                ));
            }
        }
        out
    }
}

/// The JSON answer of a mutating command.
#[derive(Debug, Serialize)]
pub struct ChangeReport {
    /// Whether the FIB or the state changed.
    pub changed: bool,
    /// The verb.
    pub action: &'static str,
    /// Prefix (formatted only when printed: a batch of 100,000 adds prints none).
    #[serde(serialize_with = "display")]
    pub dst: ipnet::IpNet,
    /// Table id.
    pub table: u32,
    /// Metric.
    pub metric: u32,
    /// Algorithm after the command (null after del).
    pub algo: Option<&'static str>,
    /// What the operator should know (printed on standard error too): the algorithm is not
    /// enforced while no dataplane is attached.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

fn display<S: serde::Serializer, T: std::fmt::Display>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

pub fn action(what: &str, k: &RouteKey, reason: &str) -> ActionRow {
    ActionRow {
        action: what.into(),
        dst: k.dst.to_string(),
        table: Some(k.table),
        metric: Some(k.metric),
        reason: reason.into(),
    }
}

pub fn report(changed: bool, verb: Verb, k: &RouteKey, algo: Option<Algo>) -> ChangeReport {
    ChangeReport {
        changed,
        action: verb.name(),
        dst: k.dst,
        table: k.table,
        metric: k.metric,
        algo: algo.map(Algo::name),
        notes: Vec::new(),
    }
}

/// A gateway of another family than the route's (`RTA_VIA`), as `ip -j route` prints it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Via {
    /// `inet` / `inet6`.
    pub family: &'static str,
    /// The address.
    pub host: String,
}

/// A nexthop as shown: `ip -j route`'s keys for a path (`gateway` or `via`, `dev`, `weight`,
/// `flags`), then mproute's.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct NexthopRow {
    /// Gateway address of the route's family (absent for a device route, as in ip's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// A gateway of the other family.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<Via>,
    /// Device name (absent if none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dev: Option<String>,
    /// Weight 1..256.
    pub weight: u16,
    /// iproute2 flag names.
    pub flags: Vec<String>,
    /// Packets the dataplane sent this way (with -s; absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packets: Option<u64>,
    /// Bytes the dataplane sent this way (with -s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Buckets of a resilient route's table this nexthop holds (with -d).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buckets: Option<usize>,
}

impl NexthopRow {
    /// A path of a route of family `fam`.
    fn new(
        fam: Family,
        gateway: Option<std::net::IpAddr>,
        dev: Option<String>,
        weight: u16,
        flags: u32,
    ) -> Self {
        let (gateway, via) = match gateway {
            Some(g) if Family::of(&g) != fam => (
                None,
                Some(Via {
                    family: Family::of(&g).name(),
                    host: g.to_string(),
                }),
            ),
            g => (g.map(|g| g.to_string()), None),
        };
        NexthopRow {
            gateway,
            via,
            dev,
            weight,
            flags: rt_flag_names(flags),
            packets: None,
            bytes: None,
            buckets: None,
        }
    }

    /// The gateway, whichever family it is of.
    pub fn gateway_str(&self) -> Option<&str> {
        self.gateway
            .as_deref()
            .or(self.via.as_ref().map(|v| v.host.as_str()))
    }
}

/// `rtm_flags` / `rtnh_flags` as iproute2's `print_rt_flags` names them, in its order.
pub fn rt_flag_names(flags: u32) -> Vec<String> {
    const NAMES: [(u32, &str); 11] = [
        (1, "dead"),                        // RTNH_F_DEAD
        (4, "onlink"),                      // RTNH_F_ONLINK
        (2, "pervasive"),                   // RTNH_F_PERVASIVE
        (8, "offload"),                     // RTNH_F_OFFLOAD
        (64, "trap"),                       // RTNH_F_TRAP
        (0x100, "notify"),                  // RTM_F_NOTIFY
        (16, "linkdown"),                   // RTNH_F_LINKDOWN
        (32, "unresolved"),                 // RTNH_F_UNRESOLVED
        (0x4000, "rt_offload"),             // RTM_F_OFFLOAD
        (0x8000, "rt_trap"),                // RTM_F_TRAP
        (0x2000_0000, "rt_offload_failed"), // RTM_F_OFFLOAD_FAILED
    ];
    NAMES
        .iter()
        .filter(|(b, _)| flags & b != 0)
        .map(|(_, n)| (*n).to_string())
        .collect()
}

/// A route as shown: first every key `ip -j route show` prints for it, with ip's values
/// (`type` and `scope` always, as ip's `-d`; `table` by name, absent for main but with
/// `-d`; a single path's `gateway`/`dev` at the top level), then mproute's own keys. Unlike
/// ip's, `nexthops` is there for a single path too (one item), so that paths read alike.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct RouteRow {
    /// Route type.
    #[serde(rename = "type")]
    pub rtype: String,
    /// Prefix in iproute2's spelling (`default`, bare address for host routes).
    pub dst: String,
    /// A single path's gateway of the route's family.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// A single path's gateway of the other family.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<Via>,
    /// A single path's device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dev: Option<String>,
    /// Table name as ip prints it (its name from rt_tables, else the number): absent for
    /// main unless `-d`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// Protocol name (iproute2's, from its files).
    pub protocol: String,
    /// Scope.
    pub scope: String,
    /// Preferred source address (`src`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefsrc: Option<String>,
    /// Metric.
    pub metric: u32,
    /// The route's flags (a single path's own: `onlink`, `linkdown`, ...).
    pub flags: Vec<String>,
    /// An IPv6 route's router preference (`low`, `medium`, `high`, else the number).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pref: Option<serde_json::Value>,
    /// Kernel nexthop object id, if the route references one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nhid: Option<u32>,
    /// Paths.
    pub nexthops: Vec<NexthopRow>,
    /// `inet` / `inet6`.
    pub family: &'static str,
    /// Table id (254 for main).
    pub table_id: u32,
    /// Whether mproute owns the route.
    pub managed: bool,
    /// Algorithm (null for routes mproute does not manage).
    pub algo: Option<String>,
    /// Who carries the algorithm out: kernel, xdp, tc or none (null if not managed).
    pub enforced_by: Option<String>,
    /// A resilient route's bucket table (absent for the others).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resilient: Option<ResilientRow>,
    /// The route's `hash-fields`, in the kernel's order (absent: the algorithm's own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hash_fields: Option<Vec<String>>,
    /// The route's `seed` (absent: the namespace's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u32>,
    /// A consistent route's table (absent for the others).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consistent: Option<ConsistentRow>,
}

/// A consistent route's table, as shown.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ConsistentRow {
    /// Slots (a prime).
    pub table_size: u16,
    /// With `-d`: each slot's nexthop, by gateway (by device for a device route), so that
    /// routers can be compared slot by slot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<Vec<String>>,
}

impl RouteRow {
    /// Show a managed route's hash recipe (what was written of it).
    pub fn set_recipe(&mut self, r: &mpt_model::hash::HashRecipe) {
        self.hash_fields = r
            .fields
            .map(|f| f.names().split(',').map(str::to_string).collect());
        self.seed = r.seed;
    }

    /// The recipe in the grammar's words (empty without one), with a leading space.
    fn recipe_words(&self) -> String {
        let mut s = String::new();
        if let Some(f) = &self.hash_fields {
            s.push_str(&format!(" hash-fields {}", f.join(",")));
        }
        if let Some(n) = self.seed {
            s.push_str(&format!(" seed {n}"));
        }
        s
    }
}

/// A resilient route's table, as shown.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct ResilientRow {
    /// Buckets.
    pub buckets: u16,
    /// Seconds a bucket must be idle before a rebalance moves it.
    pub idle_timer: u32,
}

/// Fill in a resilient route's table (with `details`: the buckets each nexthop holds).
pub fn set_resilient(row: &mut RouteRow, t: &mpt_bpf::mproute::resilient::ResTable, details: bool) {
    if t.is_consistent() {
        let table = details.then(|| {
            t.assignment()
                .iter()
                .map(|i| {
                    row.nexthops
                        .get(usize::from(*i))
                        .and_then(|n| n.gateway_str().map(str::to_string).or(n.dev.clone()))
                        .unwrap_or_else(|| "-".into())
                })
                .collect()
        });
        row.consistent = Some(ConsistentRow {
            table_size: t.buckets(),
            table,
        });
        if details {
            let fill = mpt_model::route::resilient::fill(t.assignment(), row.nexthops.len());
            for (n, f) in row.nexthops.iter_mut().zip(fill) {
                n.buckets = Some(f);
            }
        }
        return;
    }
    row.resilient = Some(ResilientRow {
        buckets: t.buckets(),
        idle_timer: t.idle_timer(),
    });
    if details {
        let fill = mpt_model::route::resilient::fill(t.assignment(), row.nexthops.len());
        for (n, f) in row.nexthops.iter_mut().zip(fill) {
            n.buckets = Some(f);
        }
    }
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
        let fam = Family::of_net(&r.key.dst);
        let nexthops: Vec<NexthopRow> = r
            .nexthops
            .iter()
            .map(|n| {
                let dev = if n.ifindex == 0 {
                    None
                } else {
                    ifname(n.ifindex).or_else(|| Some(format!("if{}", n.ifindex)))
                };
                NexthopRow::new(fam, n.gateway, dev, n.weight, u32::from(n.flags))
            })
            .collect();
        // The kernel reports a single path in the route's own attributes, its flags in
        // rtm_flags: ip prints them at the top level.
        let single = match nexthops.as_slice() {
            [one] => Some(one.clone()),
            _ => None,
        };
        RouteRow {
            rtype: mpt_model::names::rtype_name(r.rtype),
            dst: dst_string(r),
            gateway: single.as_ref().and_then(|n| n.gateway.clone()),
            via: single.as_ref().and_then(|n| n.via.clone()),
            dev: single.as_ref().and_then(|n| n.dev.clone()),
            table: (r.key.table != mpt_model::names::RT_TABLE_MAIN)
                .then(|| names::table_name(r.key.table)),
            protocol: names::proto_name(r.protocol),
            scope: mpt_model::names::scope_name(r.scope),
            prefsrc: None,
            metric: r.key.metric,
            flags: single.map(|n| n.flags).unwrap_or_default(),
            pref: None,
            nhid: r.nh_id,
            nexthops,
            family: fam.name(),
            table_id: r.key.table,
            managed,
            algo: if managed {
                Some(r.algo.unwrap_or_default().name().to_string())
            } else {
                None
            },
            enforced_by: enforced_by.map(str::to_string),
            resilient: None,
            hash_fields: None,
            seed: None,
            consistent: None,
        }
    }

    /// Take what the kernel said beyond the model: the route's flags, its preferred source,
    /// an IPv6 route's preference; with `details`, name the main table too (as `ip -d`).
    pub fn set_kernel(&mut self, m: &mpt_netlink::msg::rtnl::route::RouteMsg, details: bool) {
        self.flags = rt_flag_names(m.rtm_flags);
        self.prefsrc = m.prefsrc().map(|a| a.to_string());
        self.pref = m.pref().map(|p| match p {
            // ICMPV6_ROUTER_PREF_*
            0 => "medium".into(),
            1 => "high".into(),
            3 => "low".into(),
            n => serde_json::Value::from(n),
        });
        if details && self.table.is_none() {
            self.table = Some(names::table_name(self.table_id));
        }
    }
}

impl RouteRow {
    /// The route in `ip route` order, on one line (the dry run's before and after).
    pub fn spelling(&self) -> String {
        let mut s = self.dst.clone();
        if self.table_id != mpt_model::names::RT_TABLE_MAIN {
            s.push_str(&format!(" table {}", names::table_name(self.table_id)));
        }
        s.push_str(&format!(" proto {} metric {}", self.protocol, self.metric));
        if let Some(a) = &self.algo {
            s.push_str(&format!(" algo {a}"));
        }
        if let Some(r) = &self.resilient {
            s.push_str(&format!(
                " resilient buckets {} idle-timer {}",
                r.buckets, r.idle_timer
            ));
        }
        if let Some(c) = &self.consistent {
            s.push_str(&format!(" consistent table-size {}", c.table_size));
        }
        s.push_str(&self.recipe_words());
        if let Some(id) = self.nhid {
            s.push_str(&format!(" nhid {id}"));
        }
        for n in &self.nexthops {
            s.push_str(" nexthop");
            if let Some(g) = n.gateway_str() {
                s.push_str(&format!(" via {g}"));
            }
            if let Some(d) = &n.dev {
                s.push_str(&format!(" dev {d}"));
            }
            s.push_str(&format!(" weight {}", n.weight));
            for f in &n.flags {
                s.push(' ');
                s.push_str(f);
            }
        }
        s
    }

    /// Fill in the dataplane's per-nexthop counters.
    pub fn set_stats(&mut self, st: &mpt_bpf::mproute::route_table::RouteStats) {
        for (i, n) in self.nexthops.iter_mut().enumerate() {
            let c = st.nexthops.get(i).copied().unwrap_or_default();
            n.packets = Some(c.packets);
            n.bytes = Some(c.bytes);
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
                    if let Some(g) = n.gateway_str() {
                        s.push_str(&format!("via {g} "));
                    }
                    if let Some(d) = &n.dev {
                        s.push_str(&format!("dev {d} "));
                    }
                    s.push_str(&format!("weight {}", n.weight));
                    if let (Some(p), Some(b)) = (n.packets, n.bytes) {
                        s.push_str(&format!(" ({p} pkts, {b} bytes)"));
                    }
                    if let Some(b) = n.buckets {
                        s.push_str(&format!(" buckets {b}"));
                    }
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
            names::table_name(self.table_id),
            self.metric.to_string(),
            self.protocol.clone(),
            match (&self.algo, &self.resilient) {
                (Some(a), Some(r)) => format!("{a} resilient/{}{}", r.buckets, self.recipe_words()),
                (Some(a), None) => match &self.consistent {
                    Some(c) => format!("{a} consistent/{}{}", c.table_size, self.recipe_words()),
                    None => format!("{a}{}", self.recipe_words()),
                },
                (None, _) => "-".into(),
            },
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

/// The answer of `get`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct GetRow {
    /// The address asked about.
    pub addr: String,
    /// The managed route that covers it.
    pub dst: String,
    /// Its table.
    pub table: u32,
    /// Its metric.
    pub metric: u32,
    /// Its algorithm.
    pub algo: String,
    /// The 31-bit flow hash (hash algorithms only).
    pub hash: Option<u32>,
    /// Index of the chosen nexthop (hash algorithms only; the others choose per packet).
    pub index: Option<usize>,
    /// A resilient route's bucket for the flow (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bucket: Option<usize>,
    /// The chosen nexthop (hash algorithms only).
    pub nexthop: Option<NexthopRow>,
    /// Every nexthop of the route.
    pub nexthops: Vec<NexthopRow>,
    /// Who carries the algorithm out.
    pub enforced_by: String,
    /// What the kernel's own lookup answers for the same flow (`ip route get`'s `gateway` and
    /// `dev`): the path its multipath hash picks. Absent where it has no answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelChoice>,
    /// Where the kernel's answer differs from the dataplane's, and what that means.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The kernel's answer to `ip route get` for a flow, with ip's keys.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct KernelChoice {
    /// Gateway (absent for a directly connected destination).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// Device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dev: Option<String>,
    /// Whether it is the nexthop the dataplane picks (false also where the algorithm picks
    /// per packet).
    pub same: bool,
}

impl GetRow {
    /// Take the kernel's answer for the flow; where it differs from the dataplane's, say so.
    pub fn set_kernel(
        &mut self,
        gateway: Option<std::net::IpAddr>,
        dev: Option<String>,
        same: bool,
    ) {
        let k = KernelChoice {
            gateway: gateway.map(|g| g.to_string()),
            dev,
            same,
        };
        if !same && self.nexthop.is_some() {
            let path = format!(
                "via {} dev {}",
                k.gateway.as_deref().unwrap_or("-"),
                k.dev.as_deref().unwrap_or("-")
            );
            self.notes.push(if matches!(self.enforced_by.as_str(), "xdp" | "tc") {
                format!(
                    "the kernel's own hash picks {path} (as \"ip route get\" says): packets \
                     arriving on the dataplane's devices take this answer's, the others the kernel's"
                )
            } else {
                format!(
                    "the kernel forwards this flow {path} (as \"ip route get\" says), by its own \
                     hash: this answer is the dataplane's, which enforces the route only once \
                     attached (\"mproute dataplane attach dev DEV\")"
                )
            });
        }
        self.kernel = Some(k);
    }
    /// Build the answer.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        addr: std::net::IpAddr,
        key: &mpt_model::RouteKey,
        algo: mpt_model::Algo,
        hash: Option<u32>,
        index: Option<usize>,
        nhs: &[mpt_bpf::mproute::route_table::GroupNexthop],
        enforced_by: &str,
        ifname: &mut dyn FnMut(u32) -> Option<String>,
    ) -> Self {
        let rows: Vec<NexthopRow> = nhs
            .iter()
            .map(|n| {
                NexthopRow::new(
                    Family::of_net(&key.dst),
                    n.gateway,
                    ifname(n.ifindex),
                    n.weight,
                    0,
                )
            })
            .collect();
        GetRow {
            addr: addr.to_string(),
            dst: key.dst.to_string(),
            table: key.table,
            metric: key.metric,
            algo: algo.name().to_string(),
            hash,
            index,
            bucket: None,
            nexthop: index.and_then(|i| rows.get(i).cloned()),
            nexthops: rows,
            enforced_by: enforced_by.to_string(),
            kernel: None,
            notes: Vec::new(),
        }
    }
}

impl GetRow {
    /// Take the flags of each nexthop (`nhs`, in row order) from the kernel's route `r`.
    pub fn set_flags(&mut self, nhs: &[mpt_bpf::mproute::route_table::GroupNexthop], r: &Route) {
        for (row, n) in self.nexthops.iter_mut().zip(nhs) {
            let gw = n.gateway;
            if let Some(k) = r
                .nexthops
                .iter()
                .find(|k| k.ifindex == n.ifindex && k.gateway == gw)
            {
                row.flags = rt_flag_names(u32::from(k.flags));
            }
        }
        if let Some(i) = self.index {
            self.nexthop = self.nexthops.get(i).cloned();
        }
    }
}

impl TableRow for GetRow {
    fn headers() -> Vec<&'static str> {
        vec!["ADDR", "ROUTE", "ALGO", "HASH", "NEXTHOP", "ENFORCED"]
    }
    fn cells(&self) -> Vec<String> {
        let nh = match &self.nexthop {
            Some(n) if n.flags.iter().any(|f| f == "dead") => format!(
                "via {} dev {} (dead: the kernel forwards by a live nexthop)",
                n.gateway_str().unwrap_or("-"),
                n.dev.as_deref().unwrap_or("-")
            ),
            Some(n) => format!(
                "via {} dev {}",
                n.gateway_str().unwrap_or("-"),
                n.dev.as_deref().unwrap_or("-")
            ),
            None => format!("chosen per packet among {}", self.nexthops.len()),
        };
        vec![
            self.addr.clone(),
            self.dst.clone(),
            self.algo.clone(),
            match (self.hash, self.bucket) {
                (Some(h), Some(b)) => format!("{h:#010x} bucket {b}"),
                (Some(h), None) => format!("{h:#010x}"),
                _ => "-".into(),
            },
            nh,
            self.enforced_by.clone(),
        ]
    }
}

/// One attachment, as shown.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct AttachmentRow {
    /// Device name.
    pub dev: String,
    /// ifindex.
    pub ifindex: u32,
    /// xdp, xdp-generic or tc.
    pub mode: String,
    /// Program id.
    pub prog_id: u32,
    /// Why this hook (what `auto` weighs).
    pub why: String,
    /// tc: the egress devices it delivers straight into their veth peer's namespace
    /// (`bpf_redirect_peer`): their qdisc, egress tc and captures do not see those packets.
    pub peer_devs: Vec<String>,
    /// Whether it forwards unmanaged destinations by the kernel FIB (`fastpath on|off`).
    pub fastpath: bool,
}

impl TableRow for AttachmentRow {
    fn headers() -> Vec<&'static str> {
        vec!["DEV", "MODE", "PROG ID", "WHY"]
    }
    fn cells(&self) -> Vec<String> {
        vec![
            self.dev.clone(),
            self.mode.clone(),
            self.prog_id.to_string(),
            self.why.clone(),
        ]
    }
}

/// `dataplane show`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct DataplaneView {
    /// Attachments in the namespace.
    pub attachments: Vec<AttachmentRow>,
    /// Packets by verdict (name -> packets): `redirected`, then one per pass-to-stack reason.
    pub counters: Counters,
    /// Whether routes over a link without carrier are ignored (set by attach; without it a
    /// lost carrier blackholes its nexthop's flows in the kernel and the dataplane alike).
    pub ignore_routes_with_linkdown: bool,
    /// What needs the operator's attention (veth peers not ready for XDP frames).
    pub notes: Vec<String>,
    /// Whether the per-packet kernel FIB check of managed IPv4 routes is skipped, and why not.
    pub fib_check: Option<crate::verify::FibCheck>,
    /// Managed routes whose counters are in the per-CPU array (the rest use a hash map).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counter_slots: Option<CounterSlots>,
    /// What the state's maps and the dataplane programs' own maps cost (`memory_bytes`,
    /// `maps`, `dataplane_memory_bytes`), when there is state.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub memory: Option<mpt_cli::render::StateMemory>,
    /// How tc programs (the state's anchor, mode tc) are attached: `tcx` or `classic`.
    pub tc_hook: &'static str,
    /// Why.
    pub tc_hook_why: &'static str,
    /// Whether the command (attach, detach) changed an attachment or the namespace's
    /// linkdown setting; absent for `show`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed: Option<bool>,
}

/// How many of the per-CPU counter slots managed routes hold.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct CounterSlots {
    /// Taken.
    pub used: usize,
    /// There are.
    pub total: usize,
}

impl CounterSlots {
    /// The `dataplane show` line.
    pub fn line(&self) -> String {
        let mut l = format!("counter slots: {} of {} taken", self.used, self.total);
        if self.used >= self.total {
            l.push_str(
                "; further managed routes count in a hash map, which costs about a tenth of the packet rate",
            );
        }
        l
    }
}

impl DataplaneView {
    /// Build the view.
    pub fn new(
        att: &[mpt_bpf::mproute::dataplane::Attachment],
        reasons: &[u64],
        ignore_linkdown: bool,
        links: &[mpt_netlink::msg::rtnl::link::LinkMsg],
        notes: Vec<String>,
    ) -> Self {
        let attachments = att
            .iter()
            .map(|a| AttachmentRow {
                dev: mpt_sys::iface::name(a.ifindex).unwrap_or_else(|| format!("if{}", a.ifindex)),
                ifindex: a.ifindex,
                mode: a.mode.name().to_string(),
                prog_id: a.prog_id,
                why: crate::hook::why(links.iter().find(|l| l.ifindex == a.ifindex), a.mode),
                peer_devs: Vec::new(),
                fastpath: mpt_bpf::mproute::dataplane::fastpath(a.prog_id)
                    .ok()
                    .flatten()
                    .unwrap_or(true),
            })
            .collect();
        let counters = mpt_bpf::mproute::Reason::ALL
            .iter()
            .map(|r| {
                (
                    r.name().to_string(),
                    reasons.get(r.as_u32() as usize).copied().unwrap_or(0),
                )
            })
            .collect();
        DataplaneView {
            attachments,
            counters,
            ignore_routes_with_linkdown: ignore_linkdown,
            notes,
            fib_check: None,
            counter_slots: None,
            memory: None,
            changed: None,
            tc_hook: match mpt_bpf::attach::tc_backend() {
                mpt_bpf::attach::TcBackend::Tcx => "tcx",
                mpt_bpf::attach::TcBackend::Classic(_) => "classic",
            },
            tc_hook_why: match mpt_bpf::attach::tc_backend() {
                mpt_bpf::attach::TcBackend::Tcx => "the kernel has tcx (Linux 6.6+)",
                mpt_bpf::attach::TcBackend::Classic(why) => why,
            },
        }
    }
}

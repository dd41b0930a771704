//! What ila prints: one row type per object, shown as a table or as JSON with iproute2's keys
//! (`ip -j ila list`: `locator_match`, `locator`, `interface`, `csum_mode`, `ident_type`;
//! `ip -j route`: `dst`, `gateway`, `dev`, `table`, `protocol` and an `encap` object), plus
//! `backend`, and with `-s` `packets` and `bytes`.

use mpt_cli::render::{print_json, print_line, print_rows, Counters, Style, TableRow};
use mpt_model::ila::{Mapping, RouteSpec};
use serde::Serialize;

use crate::backend::{Counter, Kind, RouteEntry};

/// A device's name for display: `*` for any (as `ip ila`), its name, or `if<N>` when it is gone.
pub fn dev_name(ifindex: u32) -> String {
    if ifindex == 0 {
        return "*".into();
    }
    mpt_sys::iface::name(ifindex).unwrap_or_else(|| format!("if{ifindex}"))
}

/// One mapping.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct MappingRow {
    /// The locator a destination must have.
    pub locator_match: String,
    /// What it becomes.
    pub locator: String,
    /// The receiving device, `*` for any.
    pub interface: String,
    /// `adj-transport`, ...
    pub csum_mode: &'static str,
    /// `luid`, `use-format`, ...
    pub ident_type: &'static str,
    /// `kernel` or `bpf`.
    pub backend: &'static str,
    /// Packets and bytes translated (with -s, bpf backend).
    #[serde(flatten)]
    pub counts: Counts,
}

impl MappingRow {
    /// The row of a mapping; counters only when asked for.
    pub fn of(m: &Mapping, c: Option<Counter>, stats: bool, backend: Kind) -> MappingRow {
        MappingRow {
            locator_match: m.locator_match.to_string(),
            locator: m.locator.to_string(),
            interface: dev_name(m.ifindex),
            csum_mode: m.csum_mode.name(),
            ident_type: m.ident_type.name(),
            backend: backend.name(),
            counts: Counts::of(c, stats),
        }
    }
}

/// Packets and bytes a mapping or route translated, in its row (`packets`, `bytes`).
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, Default)]
pub struct Counts {
    /// Packets translated (with -s, bpf backend).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packets: Option<u64>,
    /// Bytes translated (with -s, bpf backend).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
}

impl Counts {
    /// The backend's counter, only when asked for (`stats`).
    pub fn of(c: Option<Counter>, stats: bool) -> Counts {
        let c = c.filter(|_| stats);
        Counts {
            packets: c.map(|c| c.packets),
            bytes: c.map(|c| c.bytes),
        }
    }
}

/// A row's cells, then its counters (`-` where there are none).
fn counted(mut cells: Vec<String>, c: Counts) -> Vec<String> {
    let count = |v: Option<u64>| v.map_or_else(|| "-".into(), |n: u64| n.to_string());
    cells.extend([count(c.packets), count(c.bytes)]);
    cells
}

/// A row's headers (one string, a space between two), then its counters'.
fn counted_headers(own: &'static str) -> Vec<&'static str> {
    own.split(' ').chain(["PACKETS", "BYTES"]).collect()
}

impl TableRow for MappingRow {
    fn headers() -> Vec<&'static str> {
        counted_headers("LOCATOR_MATCH LOCATOR INTERFACE CSUM_MODE IDENT_TYPE")
    }
    fn cells(&self) -> Vec<String> {
        let own = [&self.locator_match, &self.locator, &self.interface];
        let mut cells: Vec<String> = own.into_iter().cloned().collect();
        cells.extend([self.csum_mode, self.ident_type].map(String::from));
        counted(cells, self.counts)
    }
    fn stats_columns() -> usize {
        2
    }
}

/// The `encap` object of a route, as `ip -j route` prints an `encap ila` route's.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct EncapRow {
    /// `ila`.
    pub encap_type: &'static str,
    /// The locator destinations get.
    pub locator: String,
    /// Checksum mode.
    pub csum_mode: &'static str,
    /// Identifier type.
    pub ident_type: &'static str,
    /// `output` or `input`.
    pub hook_type: &'static str,
}

/// One route.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct RouteRow {
    /// The SIR prefix (a /128 without its length, as ip route prints it).
    pub dst: String,
    /// Gateway.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// Device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dev: Option<String>,
    /// Table name.
    pub table: String,
    /// `ila`.
    pub protocol: String,
    /// The translation.
    pub encap: EncapRow,
    /// `kernel` or `bpf`.
    pub backend: &'static str,
    /// Packets and bytes translated (with -s, bpf backend).
    #[serde(flatten)]
    pub counts: Counts,
}

/// A prefix as `ip route` prints it: a host route without its length.
pub fn prefix(p: ipnet::Ipv6Net) -> String {
    if p.prefix_len() == 128 {
        p.addr().to_string()
    } else {
        p.to_string()
    }
}

fn encap(s: &RouteSpec) -> EncapRow {
    EncapRow {
        encap_type: "ila",
        locator: s.locator.to_string(),
        csum_mode: s.csum_mode.name(),
        ident_type: s.ident_type.name(),
        hook_type: s.hook_type.name(),
    }
}

impl RouteRow {
    /// The row of a route; counters only when asked for.
    pub fn of(r: &RouteEntry, c: Option<Counter>, stats: bool, backend: Kind) -> RouteRow {
        RouteRow {
            dst: prefix(r.spec.dst),
            gateway: r.via.map(|a| a.to_string()),
            dev: (r.ifindex != 0).then(|| dev_name(r.ifindex)),
            table: mpt_cli::names::table_name(r.table),
            protocol: mpt_cli::names::proto_name(mpt_model::ILA_PROTO),
            encap: encap(&r.spec),
            backend: backend.name(),
            counts: Counts::of(c, stats),
        }
    }
}

impl TableRow for RouteRow {
    fn headers() -> Vec<&'static str> {
        counted_headers("DST LOCATOR CSUM_MODE IDENT_TYPE HOOK VIA DEV TABLE")
    }
    fn cells(&self) -> Vec<String> {
        let e = &self.encap;
        let mut cells = vec![self.dst.clone(), e.locator.clone()];
        cells.extend([e.csum_mode, e.ident_type, e.hook_type].map(String::from));
        let or_dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        cells.extend([
            or_dash(&self.gateway),
            or_dash(&self.dev),
            self.table.clone(),
        ]);
        counted(cells, self.counts)
    }
    fn stats_columns() -> usize {
        2
    }
}

/// The translator on one device.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct AttachmentRow {
    /// Device.
    pub dev: String,
    /// Ingress hook (`xdp`, `xdp-generic`, `tc`), null if none.
    pub ingress: Option<&'static str>,
    /// Its program id.
    pub ingress_prog_id: Option<u32>,
    /// Whether the egress program (tcx) is there.
    pub egress: bool,
    /// Its program id.
    pub egress_prog_id: Option<u32>,
}

impl AttachmentRow {
    /// The row of a device's attachment.
    pub fn of(a: &mpt_bpf::ila::dataplane::Attachment) -> AttachmentRow {
        AttachmentRow {
            dev: dev_name(a.ifindex),
            ingress: a.ingress.map(|(h, _)| h.name()),
            ingress_prog_id: a.ingress.map(|(_, id)| id),
            egress: a.egress.is_some(),
            egress_prog_id: a.egress,
        }
    }
}

impl TableRow for AttachmentRow {
    fn headers() -> Vec<&'static str> {
        vec!["DEV", "INGRESS", "EGRESS", "PROG_IDS"]
    }
    fn cells(&self) -> Vec<String> {
        let ids: Vec<String> = self
            .ingress_prog_id
            .iter()
            .chain(self.egress_prog_id.iter())
            .map(u32::to_string)
            .collect();
        vec![
            self.dev.clone(),
            self.ingress.unwrap_or("-").into(),
            if self.egress { "tc" } else { "-" }.into(),
            ids.join(","),
        ]
    }
}

/// `ila dataplane show` (and the report of attach and detach).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct DataplaneView {
    /// Whether the command changed an attachment (attach, detach).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed: Option<bool>,
    /// The devices with the translator.
    pub attachments: Vec<AttachmentRow>,
    /// What the programs did with the packets they saw, by reason (name -> packets).
    pub counters: Counters,
    /// What the state's maps and the translator's own cost (`memory_bytes`, `maps`,
    /// `dataplane_memory_bytes`), when there is state (bpf backend).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub memory: Option<mpt_cli::render::StateMemory>,
    /// A dry run (`--check`): nothing was attached or detached.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub check: bool,
    /// With `--check`: each device's hooks before and after.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<Diff>,
}

/// A write's report (`-j`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ChangeReport {
    /// Whether the tables changed.
    pub changed: bool,
    /// The verb.
    pub action: &'static str,
    /// `kernel` or `bpf`.
    pub backend: &'static str,
    /// The mapping, as it is after the command (or was, for del).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mapping: Option<MappingRow>,
    /// The route, likewise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route: Option<RouteRow>,
    /// How many entries a flush removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted: Option<usize>,
    /// A dry run (`--check`): nothing was changed, this is what would be.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub check: bool,
    /// With `--check`: the object before and after (`null`: absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<Diff>,
}

impl ChangeReport {
    /// The report of a write (then [`ChangeReport::mapping`], [`ChangeReport::route`] or
    /// [`ChangeReport::deleted`]); with `check`, the diff from `before` to `after`.
    pub fn new<T: Serialize>(
        action: &'static str,
        backend: Kind,
        changed: bool,
        check: bool,
        (before, after): (Option<&T>, Option<&T>),
    ) -> ChangeReport {
        ChangeReport {
            changed,
            action,
            backend: backend.name(),
            mapping: None,
            route: None,
            deleted: None,
            check,
            diff: check.then(|| Diff::of(before, after)),
        }
    }

    /// The output, naming the mapping as it is after the command (or was, for del).
    pub fn mapping(self, row: MappingRow) -> Output {
        Output::Change(Box::new(ChangeReport {
            mapping: Some(row),
            ..self
        }))
    }

    /// The output, naming the route likewise.
    pub fn route(self, row: RouteRow) -> Output {
        Output::Change(Box::new(ChangeReport {
            route: Some(row),
            ..self
        }))
    }

    /// The output of a flush that removed `n` entries.
    pub fn deleted(self, n: usize) -> Output {
        Output::Change(Box::new(ChangeReport {
            deleted: Some(n),
            ..self
        }))
    }
}

/// Before and after, as `show -j` prints the object.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Diff {
    /// Before the command.
    pub before: serde_json::Value,
    /// After it.
    pub after: serde_json::Value,
}

impl Diff {
    /// From the rows before and after.
    pub fn of<T: Serialize>(before: Option<&T>, after: Option<&T>) -> Diff {
        let v = |r: Option<&T>| {
            r.and_then(|r| serde_json::to_value(r).ok())
                .unwrap_or(serde_json::Value::Null)
        };
        Diff {
            before: v(before),
            after: v(after),
        }
    }
}

/// A row (or rows) of a diff on one line each: `key value ...`.
fn spell(v: &serde_json::Value) -> Vec<String> {
    match v {
        serde_json::Value::Array(a) => a.iter().flat_map(spell).collect(),
        serde_json::Value::Object(o) => vec![o
            .iter()
            .filter(|(k, v)| !v.is_null() && k.as_str() != "backend")
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => format!("{k} {s}"),
                other => format!("{k} {other}"),
            })
            .collect::<Vec<_>>()
            .join(" ")],
        _ => Vec::new(),
    }
}

/// What a command produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// `xlat show`, `xlat get`.
    Mappings(Vec<MappingRow>),
    /// `route show`.
    Routes(Vec<RouteRow>),
    /// `dataplane ...`.
    Dataplane(DataplaneView),
    /// A write.
    Change(Box<ChangeReport>),
    /// `metrics`: the Prometheus text exposition.
    Metrics(String),
    /// `save`: batch lines (`-j`: a JSON array of them).
    Lines(Vec<String>),
}

/// Print an output. Writes print nothing but with `-j`, as iproute2.
pub fn print(out: &Output, style: Style) {
    match out {
        Output::Metrics(text) => mpt_cli::metrics::print(text),
        Output::Mappings(rows) => print_rows(rows, style),
        Output::Routes(rows) => print_rows(rows, style),
        Output::Lines(l) if style.json => print_json(l, style.pretty),
        Output::Lines(l) => l.iter().for_each(|l| print_line(l)),
        Output::Dataplane(v) => {
            if style.json {
                print_json(v, style.pretty);
                return;
            }
            if let (true, Some(d)) = (v.check, &v.diff) {
                let changed = v.changed == Some(true);
                print_line(if changed {
                    "dataplane: would change"
                } else {
                    "dataplane: unchanged"
                });
                if changed {
                    for (k, side) in [("-", &d.before), ("+", &d.after)] {
                        for (dev, h) in side.as_object().into_iter().flatten() {
                            print_line(&format!("  {k} dev {dev} {}", spell(h).join(" ")));
                        }
                    }
                }
                return;
            }
            print_rows(&v.attachments, style);
            if let Some(l) = v.counters.line() {
                print_line(&l);
            }
            if let Some(m) = &v.memory {
                print_line(&m.line());
            }
        }
        Output::Change(r) => {
            if style.json {
                print_json(r, style.pretty);
            } else if let (true, Some(d)) = (r.check, &r.diff) {
                print_line(&format!(
                    "{}: {}",
                    r.action,
                    if r.changed {
                        "would change"
                    } else {
                        "unchanged"
                    }
                ));
                if r.changed {
                    for l in spell(&d.before) {
                        print_line(&format!("  - {l}"));
                    }
                    for l in spell(&d.after) {
                        print_line(&format!("  + {l}"));
                    }
                }
            }
        }
    }
}

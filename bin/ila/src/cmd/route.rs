//! `ila route`: the send side's routes.

use mpt_cli::Failure;
use mpt_model::ila::plan::Mode;
use mpt_model::ila::table::validate_route;
use mpt_model::ila::HookType;

use super::{ifindex, note};
use crate::backend::{absent, Kind, RouteEntry};
use crate::grammar::RouteCmd;
use crate::session::Session;
use crate::view::{prefix, ChangeReport, Output, RouteRow};

/// The main table.
const MAIN: u32 = 254;

fn table(t: Option<&str>, what: &str) -> Result<Option<u32>, Failure> {
    match t {
        None => Ok(None),
        Some(t) => mpt_cli::names::table_id(t)
            .filter(|id| *id != 0)
            .map(Some)
            .ok_or_else(|| {
                Failure::usage(format!(
                    "{what}: table \"{t}\" is not a table name or number"
                ))
            }),
    }
}

/// Run `ila route ...`.
pub fn run(s: &mut Session, c: &RouteCmd) -> Result<Output, Failure> {
    let what = match c.dst() {
        Some(d) => format!("route {} {}", c.verb().name(), prefix(d)),
        None => format!("route {}", c.verb().name()),
    };
    let stats = s.opts.stats > 0;
    let check = s.opts.check;
    let table = table(c.table(), &what)?;
    match c {
        RouteCmd::Show { dst, .. } => {
            let b = s.backend()?;
            let kind = b.kind();
            let mut rows: Vec<(RouteEntry, RouteRow)> = b
                .routes()?
                .into_iter()
                .filter(|(r, _)| dst.is_none_or(|d| d == r.spec.dst))
                .filter(|(r, _)| table.is_none_or(|t| t == r.table))
                .map(|(r, cnt)| (r, RouteRow::of(&r, cnt, stats, kind)))
                .collect();
            rows.sort_by_key(|(r, _)| (r.table, r.spec.dst));
            Ok(Output::Routes(
                rows.into_iter().map(|(_, row)| row).collect(),
            ))
        }
        RouteCmd::Flush { .. } => {
            let b = s.backend()?;
            let kind = b.kind();
            let all: Vec<RouteEntry> = b
                .routes()?
                .into_iter()
                .map(|(r, _)| r)
                .filter(|r| table.is_none_or(|t| t == r.table))
                .collect();
            let before: Vec<RouteRow> = all
                .iter()
                .map(|r| RouteRow::of(r, None, false, kind))
                .collect();
            for r in &all {
                b.del_route(
                    r.spec.dst,
                    Some(r.table),
                    &format!("route flush: del {}", prefix(r.spec.dst)),
                )?;
            }
            let diff = (Some(&before), Some(&Vec::new()));
            Ok(ChangeReport::new("flush", kind, !all.is_empty(), check, diff).deleted(all.len()))
        }
        RouteCmd::Del { dst, .. } => {
            let b = s.backend()?;
            let kind = b.kind();
            match b.del_route(*dst, table, &what)? {
                Some(old) => {
                    let row = RouteRow::of(&old, None, false, kind);
                    let diff = (Some(&row), None);
                    Ok(ChangeReport::new("del", kind, true, check, diff).route(row))
                }
                None => Err(absent(&what)),
            }
        }
        RouteCmd::Put {
            mode,
            spec,
            via,
            dev,
            ..
        } => {
            // the kernel's rules (EINVAL there), for both backends, before anything is tried
            // (the rule's words name the prefix)
            validate_route(spec)
                .map_err(|e| Failure::usage(format!("route {}: {e}", mode.name())))?;
            let dev = match dev {
                Some(d) => ifindex(d, &what)?,
                None => 0,
            };
            let entry = RouteEntry {
                spec: *spec,
                via: *via,
                ifindex: dev,
                table: table.unwrap_or(MAIN),
            };
            put(s, *mode, &entry, &what)
        }
    }
}

/// Whether this invocation asked already whether the translator's egress program is on
/// `ifindex` (the note is said once per invocation: a batch's other routes through the device
/// need not ask the kernel again, a link dump and three program queries a line). Marks it.
fn egress_asked(ifindex: u32) -> bool {
    static NOTED: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());
    let mut noted = NOTED.lock().unwrap_or_else(|e| e.into_inner());
    if noted.contains(&ifindex) {
        return true;
    }
    noted.push(ifindex);
    false
}

/// `route add|replace` of `entry`.
fn put(s: &mut Session, mode: Mode, entry: &RouteEntry, what: &str) -> Result<Output, Failure> {
    let check = s.opts.check;
    // so that ip route shows "proto ila" (best effort: a read-only /etc is no failure)
    if !check {
        let _ = mpt_cli::names::register_proto(mpt_model::ILA_PROTO, mpt_model::ILA_PROTO_NAME);
    }
    let b = s.backend()?;
    let kind = b.kind();
    let dst = entry.spec.dst;
    let before = match check {
        true => b
            .route_of(dst, None)?
            .map(|r| RouteRow::of(&r, None, false, kind)),
        false => None,
    };
    let w = b.put_route(entry, mode, what)?;
    let shown = b.route_of(dst, None)?.unwrap_or(*entry);
    if kind == Kind::Bpf
        && !check
        && entry.spec.hook_type == HookType::Output
        && !egress_asked(shown.ifindex)
        && !crate::backend::bpf::Bpf::egress_on(shown.ifindex)
    {
        note(&format!(
            "the BPF translator's egress program is not on {}: nothing is translated until \"ila dataplane attach dev {}\"",
            crate::view::dev_name(shown.ifindex),
            crate::view::dev_name(shown.ifindex)
        ));
    }
    let row = RouteRow::of(&shown, None, false, kind);
    let diff = (before.as_ref(), Some(&row));
    Ok(ChangeReport::new(mode.name(), kind, w.is_some(), check, diff).route(row))
}

//! `ila route`: the send side's routes.

use mpt_cli::Failure;
use mpt_model::ila::table::validate_route;
use mpt_model::ila::HookType;

use super::{ifindex, note};
use crate::backend::{absent, Kind, RouteEntry, Tables};
use crate::grammar::{RouteCmd, RoutePut};
use crate::session::Session;
use crate::view::{prefix, ChangeReport, Diff, Output, RouteRow};

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
    let stats = s.opts.stats;
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
            Ok(Output::Change(Box::new(ChangeReport {
                changed: !all.is_empty(),
                action: "flush",
                backend: kind.name(),
                mapping: None,
                route: None,
                deleted: Some(all.len()),
                check,
                diff: check.then(|| Diff::of(Some(&before), Some(&Vec::new()))),
            })))
        }
        RouteCmd::Del { dst, .. } => {
            let b = s.backend()?;
            let kind = b.kind();
            match b.del_route(*dst, table, &what)? {
                Some(old) => {
                    let row = RouteRow::of(&old, None, false, kind);
                    Ok(Output::Change(Box::new(ChangeReport {
                        changed: true,
                        action: "del",
                        backend: kind.name(),
                        mapping: None,
                        diff: check.then(|| Diff::of(Some(&row), None)),
                        route: Some(row),
                        deleted: None,
                        check,
                    })))
                }
                None => Err(absent(&what)),
            }
        }
        RouteCmd::Put(p) => {
            // the kernel's rules (EINVAL there), for both backends, before anything is tried
            // (the rule's words name the prefix)
            validate_route(&p.spec)
                .map_err(|e| Failure::usage(format!("route {}: {e}", p.mode.name())))?;
            let dev = match &p.dev {
                Some(d) => ifindex(d, &what)?,
                None => 0,
            };
            let entry = RouteEntry {
                spec: p.spec,
                via: p.via,
                ifindex: dev,
                table: table.unwrap_or(MAIN),
            };
            // so that ip route shows "proto ila" (best effort: a read-only /etc is no failure)
            if !check {
                let _ =
                    mpt_cli::names::register_proto(mpt_model::ILA_PROTO, mpt_model::ILA_PROTO_NAME);
            }
            put(s.backend()?, p, &entry, check, &what)
        }
    }
}

/// `route add|replace` of `entry`.
fn put(
    b: &mut dyn Tables,
    p: &RoutePut,
    entry: &RouteEntry,
    check: bool,
    what: &str,
) -> Result<Output, Failure> {
    let kind = b.kind();
    let dst = entry.spec.dst;
    let before = match check {
        true => b
            .routes()?
            .into_iter()
            .find(|(r, _)| r.spec.dst == dst)
            .map(|(r, _)| RouteRow::of(&r, None, false, kind)),
        false => None,
    };
    let w = b.put_route(entry, p.mode, what)?;
    let shown = b
        .routes()?
        .into_iter()
        .map(|(r, _)| r)
        .find(|r| r.spec.dst == dst)
        .unwrap_or(*entry);
    if kind == Kind::Bpf
        && !check
        && entry.spec.hook_type == HookType::Output
        && !crate::backend::bpf::Bpf::egress_on(shown.ifindex)
    {
        note(&format!(
            "the BPF translator's egress program is not on {}: nothing is translated until \"ila dataplane attach dev {}\"",
            crate::view::dev_name(shown.ifindex),
            crate::view::dev_name(shown.ifindex)
        ));
    }
    let row = RouteRow::of(&shown, None, false, kind);
    Ok(Output::Change(Box::new(ChangeReport {
        changed: w.is_some(),
        action: p.mode.name(),
        backend: kind.name(),
        mapping: None,
        diff: check.then(|| Diff::of(before.as_ref(), Some(&row))),
        route: Some(row),
        deleted: None,
        check,
    })))
}

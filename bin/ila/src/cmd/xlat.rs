//! `ila xlat`: the receive side's mappings.

use mpt_cli::Failure;
use mpt_model::ila::{CsumMode, IdentType, Mapping};

use super::{ifindex, note};
use crate::backend::{absent, Backend, Kind, Written};
use crate::grammar::{XlatCmd, XlatVerb};
use crate::session::Session;
use crate::view::{ChangeReport, Diff, MappingRow, Output};

/// The words of a mapping's key, for messages: `loc_match 2001:0:119:0 dev eth0`.
fn key_words(c: &XlatCmd) -> String {
    let mut s = format!(
        "loc_match {}",
        c.locator_match.map(|l| l.to_string()).unwrap_or_default()
    );
    if let Some(d) = &c.dev {
        s += &format!(" dev {d}");
    }
    s
}

/// Run `ila xlat ...`.
pub fn run(s: &mut Session, c: &XlatCmd) -> Result<Output, Failure> {
    let what = format!("xlat {} {}", c.verb.name(), key_words(c));
    let stats = s.opts.stats;
    let check = s.opts.check;
    let dev = match &c.dev {
        // a mapping whose device is gone is shown with `ifN`, and deleted by that name
        Some(d) if matches!(c.verb, XlatVerb::Del | XlatVerb::Get) => {
            super::ifindex_or_gone(d, &what)?
        }
        Some(d) => ifindex(d, &what)?,
        None => 0,
    };
    let b = s.backend()?;
    let kind = b.kind();
    let key = c.locator_match.map(|l| (l, dev));
    match (c.verb, key) {
        (XlatVerb::Show, _) => {
            let mut rows: Vec<MappingRow> = b
                .mappings()?
                .iter()
                .map(|(m, cnt)| MappingRow::of(m, *cnt, stats, kind))
                .collect();
            rows.sort_by(|a, b| {
                (&a.locator_match, &a.interface).cmp(&(&b.locator_match, &b.interface))
            });
            Ok(Output::Mappings(rows))
        }
        (XlatVerb::Flush, _) => {
            let before: Vec<MappingRow> = if check {
                b.mappings()?
                    .iter()
                    .map(|(m, _)| MappingRow::of(m, None, false, kind))
                    .collect()
            } else {
                Vec::new()
            };
            let n = b.flush_mappings()?;
            Ok(Output::Change(Box::new(ChangeReport {
                changed: n > 0,
                action: "flush",
                backend: kind.name(),
                mapping: None,
                route: None,
                deleted: Some(n),
                check,
                diff: check.then(|| Diff::of(Some(&before), Some(&Vec::new()))),
            })))
        }
        (XlatVerb::Get, Some(key)) => match b.mapping(key)? {
            Some((m, cnt)) => Ok(Output::Mappings(vec![MappingRow::of(&m, cnt, stats, kind)])),
            None => Err(absent(&what)),
        },
        (XlatVerb::Add | XlatVerb::Replace, Some(key)) => {
            let Some(locator) = c.locator else {
                return Err(Failure::usage(format!("{what}: missing \"loc LOCATOR\"")));
            };
            let m = Mapping {
                locator_match: key.0,
                locator,
                ifindex: key.1,
                csum_mode: c.csum_mode.unwrap_or(CsumMode::NoAction),
                ident_type: c.ident_type.unwrap_or(IdentType::UseFormat),
            };
            let before = match check {
                true => b
                    .mapping(key)?
                    .map(|(o, _)| MappingRow::of(&o, None, false, kind)),
                false => None,
            };
            let w = b.put_mapping(&m, c.verb == XlatVerb::Replace, &what)?;
            if kind == Kind::Bpf
                && !check
                && w == Written::Added
                && !crate::backend::bpf::Bpf::ingress_anywhere()
            {
                note("the BPF translator is on no device yet: nothing is translated until \"ila dataplane attach dev DEV\"");
            }
            let row = MappingRow::of(&m, None, false, kind);
            Ok(Output::Change(Box::new(ChangeReport {
                changed: w != Written::Unchanged,
                action: c.verb.name(),
                backend: kind.name(),
                diff: check.then(|| Diff::of(before.as_ref(), Some(&row))),
                mapping: Some(row),
                route: None,
                deleted: None,
                check,
            })))
        }
        (XlatVerb::Del, Some(key)) => del(b, key, c, &what),
        (_, None) => Err(Failure::usage(format!(
            "{what}: missing \"loc_match LOCATOR\""
        ))),
    }
}

/// `xlat del`: the mapping with the key; with `loc`, only if it has that locator.
fn del(
    b: &mut Backend,
    key: (mpt_model::ila::Locator, u32),
    c: &XlatCmd,
    what: &str,
) -> Result<Output, Failure> {
    let kind = b.kind();
    // the locator is compared under the lock the delete takes
    b.hold()?;
    let Some((m, _)) = b.mapping(key)? else {
        return Err(absent_here(b, key, what));
    };
    if let Some(l) = c.locator {
        if l != m.locator {
            return Err(Failure::system(format!(
                "{what} loc {l}: the mapping has locator {} [ESRCH]",
                m.locator
            )));
        }
    }
    if !b.del_mapping(key)? {
        return Err(absent(what));
    }
    let row = MappingRow::of(&m, None, false, kind);
    let check = matches!(b, Backend::Dry(_));
    Ok(Output::Change(Box::new(ChangeReport {
        changed: true,
        action: "del",
        backend: kind.name(),
        diff: check.then(|| Diff::of(Some(&row), None)),
        mapping: Some(row),
        route: None,
        deleted: None,
        check,
    })))
}

/// No mapping with `key`: where `del` named no device and the locator match has mappings on
/// devices, the hint names them (a device that is gone as `ifN`, which `dev` accepts).
fn absent_here(b: &mut Backend, key: (mpt_model::ila::Locator, u32), what: &str) -> Failure {
    let f = absent(what);
    if key.1 != 0 {
        return f;
    }
    let devs: Vec<String> = b
        .mappings()
        .unwrap_or_default()
        .iter()
        .filter(|(m, _)| m.locator_match == key.0 && m.ifindex != 0)
        .map(|(m, _)| format!("dev {}", crate::view::dev_name(m.ifindex)))
        .collect();
    if devs.is_empty() {
        return f;
    }
    f.hint(format!(
        "loc_match {} has mappings on {}: name the device",
        key.0,
        devs.join(", ")
    ))
}

//! `ila xlat`: the receive side's mappings.

use mpt_cli::Failure;
use mpt_model::ila::plan::{Mode, Write};
use mpt_model::ila::{Locator, Mapping};

use super::{ifindex, note};
use crate::backend::{absent, Kind, MappingKey, Tables};
use crate::grammar::{XlatCmd, XlatKey};
use crate::session::Session;
use crate::view::{ChangeReport, MappingRow, Output};

/// The words of a mapping's key, for messages: `loc_match 2001:0:119:0 dev eth0`.
fn key_words(k: Option<&XlatKey>) -> String {
    let mut s = format!(
        "loc_match {}",
        k.map(|k| k.locator_match.to_string()).unwrap_or_default()
    );
    if let Some(d) = k.and_then(|k| k.dev.as_ref()) {
        s += &format!(" dev {d}");
    }
    s
}

/// The key of a mapping, its device resolved (a mapping whose device is gone is shown with
/// `ifN`, and deleted or got by that name: `gone`).
fn key(k: &XlatKey, gone: bool, what: &str) -> Result<MappingKey, Failure> {
    let dev = match &k.dev {
        Some(d) if gone => super::ifindex_or_gone(d, what)?,
        Some(d) => ifindex(d, what)?,
        None => 0,
    };
    Ok((k.locator_match, dev))
}

/// Run `ila xlat ...`.
pub fn run(s: &mut Session, c: &XlatCmd) -> Result<Output, Failure> {
    let given = match c {
        XlatCmd::Put { key, .. } | XlatCmd::Del { key, .. } | XlatCmd::Get(key) => Some(key),
        XlatCmd::Show | XlatCmd::Flush => None,
    };
    let what = format!("xlat {} {}", c.verb().name(), key_words(given));
    let stats = s.opts.stats > 0;
    let check = s.opts.check;
    match c {
        XlatCmd::Show => {
            let b = s.backend()?;
            let kind = b.kind();
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
        XlatCmd::Flush => {
            let b = s.backend()?;
            let kind = b.kind();
            let before: Vec<MappingRow> = if check {
                b.mappings()?
                    .iter()
                    .map(|(m, _)| MappingRow::of(m, None, false, kind))
                    .collect()
            } else {
                Vec::new()
            };
            let n = b.flush_mappings()?;
            let diff = (Some(&before), Some(&Vec::new()));
            Ok(ChangeReport::new("flush", kind, n > 0, check, diff).deleted(n))
        }
        XlatCmd::Get(k) => {
            let key = key(k, true, &what)?;
            let b = s.backend()?;
            let kind = b.kind();
            match b.mapping(key)? {
                Some((m, cnt)) => Ok(Output::Mappings(vec![MappingRow::of(&m, cnt, stats, kind)])),
                None => Err(absent(&what)),
            }
        }
        XlatCmd::Put {
            mode,
            key: k,
            locator,
            csum_mode,
            ident_type,
        } => {
            let (locator_match, ifindex) = key(k, false, &what)?;
            let m = Mapping {
                locator_match,
                locator: *locator,
                ifindex,
                csum_mode: *csum_mode,
                ident_type: *ident_type,
            };
            put(s.backend()?, *mode, &m, check, &what)
        }
        XlatCmd::Del { key: k, locator } => {
            let key = key(k, true, &what)?;
            del(s.backend()?, key, *locator, check, &what)
        }
    }
}

/// `xlat add|replace`.
fn put(
    b: &mut dyn Tables,
    mode: Mode,
    m: &Mapping,
    check: bool,
    what: &str,
) -> Result<Output, Failure> {
    let kind = b.kind();
    let before = match check {
        true => b
            .mapping(m.key())?
            .map(|(o, _)| MappingRow::of(&o, None, false, kind)),
        false => None,
    };
    let w = b.put_mapping(m, mode, what)?;
    if kind == Kind::Bpf
        && !check
        && w == Some(Write::Added)
        && !crate::backend::bpf::Bpf::ingress_anywhere()
    {
        note("the BPF translator is on no device yet: nothing is translated until \"ila dataplane attach dev DEV\"");
    }
    let row = MappingRow::of(m, None, false, kind);
    let diff = (before.as_ref(), Some(&row));
    Ok(ChangeReport::new(mode.name(), kind, w.is_some(), check, diff).mapping(row))
}

/// `xlat del`: the mapping with the key; with `loc`, only if it has that locator.
fn del(
    b: &mut dyn Tables,
    key: MappingKey,
    locator: Option<Locator>,
    check: bool,
    what: &str,
) -> Result<Output, Failure> {
    let kind = b.kind();
    // the locator is compared under the lock the delete takes
    b.hold()?;
    let Some((m, _)) = b.mapping(key)? else {
        return Err(absent_here(b, key, what));
    };
    if let Some(l) = locator {
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
    let diff = (Some(&row), None);
    Ok(ChangeReport::new("del", kind, true, check, diff).mapping(row))
}

/// No mapping with `key`: where `del` named no device and the locator match has mappings on
/// devices, the hint names them (a device that is gone as `ifN`, which `dev` accepts).
fn absent_here(b: &mut dyn Tables, key: MappingKey, what: &str) -> Failure {
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

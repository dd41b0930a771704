//! `ila save`: the translator's attachments, the mappings and the ILA routes as batch lines
//! (`dataplane attach ...`, `xlat replace ...`, `route replace ...`) that `ila -b FILE`
//! reads back into the same tables. The first line names the backend they were read from:
//! restore with the same `--backend` (mproute-restore does). Tables by number, as a restore at
//! boot must not depend on `/etc/iproute2`.

use mpt_cli::Failure;
use mpt_model::ila::table::{Mapping, RouteEntry};

use crate::session::Session;
use crate::view::{prefix, Output};

/// The batch lines: attachments first (the bpf backend's tables are the translator's maps),
/// then the mappings, then the routes.
pub fn run(s: &mut Session) -> Result<Output, Failure> {
    let b = s.backend()?;
    let kind = b.kind();
    let mut mappings: Vec<Mapping> = b.mappings()?.into_iter().map(|(m, _)| m).collect();
    mappings.sort_by_key(|m| (m.locator_match, m.ifindex));
    let mut routes: Vec<RouteEntry> = b.routes()?.into_iter().map(|(r, _)| r).collect();
    routes.sort_by_key(|r| (r.table, r.spec.dst));
    let mut lines = vec![format!(
        "# ila save {} backend {}: restore with ila --backend {} [-n NETNS] -b FILE",
        mpt_sys::time::rfc3339_now(),
        kind.name(),
        kind.name()
    )];
    let atts = mpt_bpf::ila::dataplane::attachments()
        .map_err(|e| Failure::bpf("list the translator's attachments", e))?;
    for a in atts {
        let dev = dev(a.ifindex);
        match (a.ingress, a.egress) {
            (Some((h, _)), Some(_)) => {
                lines.push(format!("dataplane attach dev {dev} {}", h.name()))
            }
            (Some((h, _)), None) => {
                lines.push(format!("dataplane attach dev {dev} {} ingress", h.name()));
            }
            (None, Some(_)) => lines.push(format!("dataplane attach dev {dev} egress")),
            (None, None) => {}
        }
    }
    lines.extend(mappings.iter().map(|m| xlat_line(m, &mut dev)));
    lines.extend(routes.iter().map(|r| route_line(r, &mut dev)));
    Ok(Output::Lines(lines))
}

fn dev(ifindex: u32) -> String {
    mpt_sys::iface::name(ifindex).unwrap_or_else(|| format!("if{ifindex}"))
}

/// A mapping as an `xlat replace` line.
pub fn xlat_line(m: &Mapping, dev: &mut dyn FnMut(u32) -> String) -> String {
    let mut w = format!(
        "xlat replace loc_match {} loc {}",
        m.locator_match, m.locator
    );
    if m.ifindex != 0 {
        w.push_str(&format!(" dev {}", dev(m.ifindex)));
    }
    w.push_str(&format!(
        " csum-mode {} ident-type {}",
        m.csum_mode.name(),
        m.ident_type.name()
    ));
    w
}

/// An ILA route as a `route replace` line.
pub fn route_line(r: &RouteEntry, dev: &mut dyn FnMut(u32) -> String) -> String {
    let s = &r.spec;
    let mut w = format!(
        "route replace {} loc {} csum-mode {} ident-type {} hook-type {}",
        prefix(s.dst),
        s.locator,
        s.csum_mode.name(),
        s.ident_type.name(),
        s.hook_type.name()
    );
    if let Some(v) = r.via {
        w.push_str(&format!(" via {v}"));
    }
    if r.ifindex != 0 {
        w.push_str(&format!(" dev {}", dev(r.ifindex)));
    }
    w.push_str(&format!(" table {}", r.table));
    w
}

//! `ila metrics`: the ILA tables and what the translator counts, in the Prometheus text format
//! ([`mpt_cli::metrics`]) as node_exporter's textfile collector reads it: every mapping and
//! route (an info metric), their packets and bytes where the backend counts them (the BPF
//! translator; the kernel's module keeps no counters), the packets the translator saw by what
//! it did with them, and the devices it is attached to.

use mpt_bpf::ila::dataplane as dp;
use mpt_cli::metrics::{Exposition, Kind};
use mpt_cli::Failure;

use crate::session::Session;
use crate::view::{AttachmentRow, MappingRow, Output, RouteRow};

/// Every family `ila metrics` prints (without the `ila_` prefix), its type and help.
pub const FAMILIES: &[(&str, Kind, &str)] = &[
    (
        "backend_info",
        Kind::Gauge,
        "The implementation that keeps the namespace's ILA tables (kernel or bpf).",
    ),
    (
        "mapping_info",
        Kind::Gauge,
        "A mapping of the receive side (1): locator_match becomes locator for packets arriving on dev (* any).",
    ),
    (
        "mapping_packets_total",
        Kind::Counter,
        "Packets a mapping translated (bpf backend).",
    ),
    (
        "mapping_bytes_total",
        Kind::Counter,
        "Bytes a mapping translated (bpf backend).",
    ),
    (
        "route_info",
        Kind::Gauge,
        "An ILA route of the send side (1): SIR destinations dst get locator.",
    ),
    (
        "route_packets_total",
        Kind::Counter,
        "Packets an ILA route translated (bpf backend).",
    ),
    (
        "route_bytes_total",
        Kind::Counter,
        "Bytes an ILA route translated (bpf backend).",
    ),
    (
        "dataplane_packets_total",
        Kind::Counter,
        "Packets the BPF translator saw, by what it did: translated-in, translated-out, translated-forwarded; the others it passed on untranslated, and why.",
    ),
    (
        "dataplane_attachment_info",
        Kind::Gauge,
        "A device the BPF translator is attached to (1): its ingress hook (xdp, xdp-generic, tc or none) and whether its egress program is there.",
    ),
];

fn bpf(what: &'static str) -> impl FnOnce(mpt_bpf::Error) -> Failure {
    move |e| Failure::bpf(what, e)
}

/// Collect the namespace's metrics.
pub fn run(s: &mut Session) -> Result<Output, Failure> {
    let mut e = Exposition::new("ila");
    if let Some(ns) = &s.opts.netns {
        e.common_label("netns", ns);
    }
    for (name, kind, help) in FAMILIES {
        e.declare(name, *kind, help);
    }
    let b = s.backend()?;
    let kind = b.kind();
    e.add("backend_info", &[("backend", kind.name())], 1);
    for (m, c) in b.mappings()? {
        let row = MappingRow::of(&m, None, false, kind);
        let key = [
            ("locator_match", row.locator_match.as_str()),
            ("dev", row.interface.as_str()),
        ];
        let mut info = key.to_vec();
        info.extend([
            ("locator", row.locator.as_str()),
            ("csum_mode", row.csum_mode),
            ("ident_type", row.ident_type),
        ]);
        e.add("mapping_info", &info, 1);
        if let Some(c) = c {
            e.add("mapping_packets_total", &key, c.packets);
            e.add("mapping_bytes_total", &key, c.bytes);
        }
    }
    for (r, c) in b.routes()? {
        let row = RouteRow::of(&r, None, false, kind);
        let key = [("table", row.table.as_str()), ("dst", row.dst.as_str())];
        let mut info = key.to_vec();
        info.extend([
            ("locator", row.encap.locator.as_str()),
            ("csum_mode", row.encap.csum_mode),
            ("ident_type", row.encap.ident_type),
            ("hook_type", row.encap.hook_type),
        ]);
        e.add("route_info", &info, 1);
        if let Some(c) = c {
            e.add("route_packets_total", &key, c.packets);
            e.add("route_bytes_total", &key, c.bytes);
        }
    }
    if let Some(b) = b.bpf() {
        if let Some(st) = b.state(false)? {
            for (r, n) in st
                .reasons()
                .map_err(bpf("read the translator's counters"))?
            {
                e.add("dataplane_packets_total", &[("reason", r.name())], n);
            }
        }
    }
    for a in dp::attachments().map_err(bpf("list the translator's attachments"))? {
        let row = AttachmentRow::of(&a);
        e.add(
            "dataplane_attachment_info",
            &[
                ("dev", row.dev.as_str()),
                ("ingress", row.ingress.unwrap_or("none")),
                ("egress", if row.egress { "true" } else { "false" }),
            ],
            1,
        );
    }
    Ok(Output::Metrics(e.render()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_well_named_and_typed() {
        let mut e = Exposition::new("ila");
        for (name, kind, help) in FAMILIES {
            // declare holds names to the format's rules and counters to _total
            e.declare(name, *kind, help);
        }
        assert_eq!(e.render().matches("# TYPE ila_").count(), FAMILIES.len());
    }
}

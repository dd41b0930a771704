//! `pfanout metrics`: the namespace's fanout groups and their members in the Prometheus text
//! format ([`mpt_cli::metrics`]) as node_exporter's textfile collector reads it: what `show -s`
//! knows. packet_diag reports no packet counts for a socket or a group, only its memory
//! (`PACKET_DIAG_MEMINFO`): the packets it dropped (`sk_drops`), the bytes queued and the
//! buffer's limit; the rest (PACKET_STATISTICS) only the socket's holder can read.

use mpt_cli::metrics::{Exposition, Kind};
use mpt_cli::{Failure, GlobalOpts};

use crate::grammar::ShowCmd;
use crate::view::Output;

/// Every family `pfanout metrics` prints (without the `pfanout_` prefix), its type and help.
pub const FAMILIES: &[(&str, Kind, &str)] = &[
    (
        "group_info",
        Kind::Gauge,
        "A fanout group (1): its mode, flags (unknown unless a pfanout process holds a member), device and protocol.",
    ),
    (
        "group_members",
        Kind::Gauge,
        "Sockets in a fanout group.",
    ),
    (
        "group_drops_total",
        Kind::Counter,
        "Packets the group's sockets dropped (their sk_drops summed; a member that leaves takes its share with it).",
    ),
    (
        "member_info",
        Kind::Gauge,
        "A socket of a fanout group (1), by inode, and the process holding it (none if no process of this namespace's view holds it).",
    ),
    (
        "member_drops_total",
        Kind::Counter,
        "Packets a fanout group's socket dropped (sk_drops: its receive buffer or ring was full).",
    ),
    (
        "member_rmem_alloc_bytes",
        Kind::Gauge,
        "Bytes queued on a fanout group's socket for receiving.",
    ),
    (
        "member_rcvbuf_bytes",
        Kind::Gauge,
        "The receive buffer limit of a fanout group's socket.",
    ),
];

/// Collect the namespace's metrics.
pub fn run(opts: &GlobalOpts) -> Result<Output, Failure> {
    let mut e = Exposition::new("pfanout");
    if let Some(ns) = &opts.netns {
        e.common_label("netns", ns);
    }
    for (name, kind, help) in FAMILIES {
        e.declare(name, *kind, help);
    }
    for g in crate::show::run(&ShowCmd::default(), false)? {
        let Some(id) = g.id else {
            continue;
        };
        let id = id.to_string();
        let group = [("group", id.as_str())];
        let dev = g.dev.clone().unwrap_or_else(|| "*".into());
        let flags = crate::show::flags_words(&g.flags);
        e.add(
            "group_info",
            &[
                ("group", id.as_str()),
                ("mode", g.mode.as_str()),
                ("flags", flags.as_str()),
                ("dev", dev.as_str()),
                ("protocol", g.protocol.as_str()),
            ],
            1,
        );
        e.add("group_members", &group, g.members as u64);
        let drops: u64 = g
            .sockets
            .iter()
            .filter_map(|s| s.drops)
            .map(u64::from)
            .sum();
        e.add("group_drops_total", &group, drops);
        for s in &g.sockets {
            let inode = s.inode.to_string();
            let member = [("group", id.as_str()), ("socket", inode.as_str())];
            let (pid, process) = match s.owners.first() {
                Some(o) => (o.pid.to_string(), o.process.clone()),
                None => (String::new(), "none".to_string()),
            };
            let mut info = member.to_vec();
            info.extend([("pid", pid.as_str()), ("process", process.as_str())]);
            e.add("member_info", &info, 1);
            if let Some(d) = s.drops {
                e.add("member_drops_total", &member, u64::from(d));
            }
            if let Some(r) = s.rmem_alloc {
                e.add("member_rmem_alloc_bytes", &member, u64::from(r));
            }
            if let Some(r) = s.rcvbuf {
                e.add("member_rcvbuf_bytes", &member, u64::from(r));
            }
        }
    }
    Ok(Output::Metrics(e.render()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_well_named_and_typed() {
        let mut e = Exposition::new("pfanout");
        for (name, kind, help) in FAMILIES {
            // declare holds names to the format's rules and counters to _total
            e.declare(name, *kind, help);
        }
        assert_eq!(
            e.render().matches("# TYPE pfanout_").count(),
            FAMILIES.len()
        );
    }
}

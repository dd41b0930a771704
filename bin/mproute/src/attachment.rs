//! The dataplane's attachments, as `dataplane attach|detach|show` change and report them:
//! attach in the mode asked for (or the one `auto` picks per device, [`crate::hook`]), always
//! with the tc program beside an XDP one (XDP hands it what it cannot forward safely); the
//! namespace's linkdown setting; and the report: attachments, packets by verdict, notes for
//! the operator (unprepared veth peers, stale MAC addresses), counter slots, the FIB check.

use mpt_bpf::mproute::dataplane::{self as dp, Mode};
use mpt_cli::Failure;

use crate::grammar::AttachMode;
use crate::hook::{ignore_linkdown, set_ignore_linkdown};
use crate::session::Session;
use crate::view::{CounterSlots, DataplaneView};

fn fail(what: String) -> impl FnOnce(mpt_bpf::Error) -> Failure {
    move |e| Failure::bpf(&what, e)
}

/// Attach to `devs`; returns the notes on veth peers (`prepare_peers`: enable GRO on them).
/// `peer`: the tc program delivers straight into veth peers' namespaces where it may
/// ([`crate::hook::peer_ports`]).
pub(crate) fn attach(
    s: &mut Session,
    devs: &[String],
    mode: AttachMode,
    fastpath: bool,
    peer: bool,
    prepare_peers: bool,
) -> Result<Vec<String>, Failure> {
    let links = crate::hook::links(s.sock()?)?;
    let peers = if peer {
        crate::hook::peer_ports(s.sock()?, &links)?
    } else {
        Vec::new()
    };
    let mut ifs = Vec::new();
    for d in devs {
        let Some(l) = links.iter().find(|l| &l.name == d) else {
            return Err(Failure::system(format!(
                "dataplane attach: cannot find device \"{d}\" [ENODEV]"
            )));
        };
        let m = match mode {
            AttachMode::Xdp => Mode::Xdp,
            AttachMode::XdpGeneric => Mode::XdpGeneric,
            AttachMode::Tc => Mode::Tc,
            AttachMode::Auto => crate::hook::auto_mode(l).0,
        };
        ifs.push((l.ifindex, d.clone(), m, crate::hook::checksums(l)));
    }
    let auto = mode == AttachMode::Auto;
    let store = s
        .store(true)?
        .ok_or_else(|| Failure::system("dataplane attach: cannot create mproute state"))?;
    for (i, d, m, local) in &ifs {
        let r = dp::attach(store.bpf(), *i, *m, fastpath, *local, &peers);
        let xdp_refused = auto && *m == Mode::Xdp && r.is_err();
        match r {
            // auto: a driver without native XDP gets tc.
            Err(_) if auto && *m == Mode::Xdp => {}
            r => {
                r.map_err(fail(format!("dataplane attach dev {d} {}", m.name())))?;
            }
        }
        // tc asked for (or picked) over an earlier XDP attachment: tc alone now (attached
        // first, so that no packet goes unhandled meanwhile).
        if *m == Mode::Tc || xdp_refused {
            if xdp_refused {
                dp::attach(store.bpf(), *i, Mode::Tc, fastpath, *local, &peers)
                    .map_err(fail(format!("dataplane attach dev {d} tc")))?;
            }
            dp::detach_xdp_only(*i).map_err(fail(format!("dataplane attach dev {d} tc")))?;
            continue;
        }
        // XDP forwards what it can forward safely; a packet whose TCP/UDP checksum a local
        // stack left to offload (CHECKSUM_PARTIAL) goes up as an skb, and the tc program next
        // to it carries out the same algorithm on it.
        dp::attach(store.bpf(), *i, Mode::Tc, fastpath, *local, &peers)
            .map_err(fail(format!("dataplane attach dev {d} tc")))?;
    }
    // A nexthop whose link lost carrier keeps its connected route (flagged linkdown); unless
    // the namespace ignores such routes, both the kernel's multipath and the dataplane's
    // gateway lookup keep sending into the dead link.
    // (the error names the setting and the value)
    set_ignore_linkdown().map_err(|e| Failure::system(format!("dataplane attach: {e}")))?;
    peer_notes(s, prepare_peers)
}

/// Remove our attachments from `devs`.
pub(crate) fn detach(devs: &[String]) -> Result<(), Failure> {
    for d in devs {
        let i = mpt_sys::iface::index(d).map_err(|_| {
            Failure::system(format!("dataplane detach: cannot find device \"{d}\""))
        })?;
        dp::detach(i).map_err(fail(format!("dataplane detach dev {d}")))?;
    }
    Ok(())
}

/// With native XDP attached somewhere: what it needs of the veth peers it redirects into
/// (`prepare`: enable GRO on them).
pub(crate) fn peer_notes(s: &mut Session, prepare: bool) -> Result<Vec<String>, Failure> {
    let att = dp::attachments().map_err(fail("list dataplane attachments".into()))?;
    if att.iter().any(|a| a.mode == Mode::Xdp) {
        crate::hook::check_peers(s.sock()?, prepare)
    } else {
        Ok(Vec::new())
    }
}

/// `dataplane show` (and what attach and detach report): with `verify`, the managed routes are
/// verified for the FIB check first (after an attach).
pub(crate) fn report(
    s: &mut Session,
    mut notes: Vec<String>,
    verify: bool,
) -> Result<DataplaneView, Failure> {
    let att = dp::attachments().map_err(fail("list dataplane attachments".into()))?;
    for a in att.iter().filter(|a| a.mode != Mode::Tc) {
        if dp::xdp_mac_stale(a.prog_id, a.ifindex)
            .map_err(fail("read the dataplane's load-time constants".into()))?
        {
            let dev =
                mpt_sys::iface::name(a.ifindex).unwrap_or_else(|| format!("ifindex {}", a.ifindex));
            notes.push(format!(
                "{dev}: its MAC address changed since the dataplane was attached; XDP forwards only frames sent to the old one (the rest goes to the stack as not-host): run dataplane attach again"
            ));
        }
    }
    let reasons = match s.store(false)? {
        Some(s) => dp::reasons(s.bpf()).map_err(fail("read dataplane counters".into()))?,
        None => Vec::new(),
    };
    let links = crate::hook::links(s.sock()?)?;
    let mut view = DataplaneView::new(&att, &reasons, ignore_linkdown(), &links, notes);
    for (row, a) in view.attachments.iter_mut().zip(&att) {
        if a.mode == Mode::Tc {
            let peers = dp::peer_ports(a.prog_id)
                .map_err(fail("read the tc program's peer devices".into()))?;
            row.peer_devs = peers
                .iter()
                .map(|i| mpt_sys::iface::name(*i).unwrap_or_else(|| format!("if{i}")))
                .collect();
            if !row.peer_devs.is_empty() {
                row.why = format!(
                    "{}; to {} straight into the peer's namespace (bpf_redirect_peer: not seen by their qdisc, egress tc or captures)",
                    row.why,
                    row.peer_devs.join(", ")
                );
            }
            // a qdisc or egress program added since: bypassed until attach runs again
            for (i, dev) in peers.iter().zip(&row.peer_devs) {
                let busy = match links.iter().find(|l| l.ifindex == *i) {
                    Some(l) => crate::hook::own_transmit(s.sock()?, l)?,
                    None => false,
                };
                if busy && !view.notes.iter().any(|n| n.starts_with(&format!("{dev}:"))) {
                    view.notes.push(format!(
                        "{dev}: has a qdisc or egress tc program now, which packets the dataplane forwards to it skip (delivered straight into its peer): run dataplane attach again"
                    ));
                }
            }
        }
        if a.mode == Mode::Xdp {
            if let Ok(Some(how)) = dp::xdp_checksum_handling(a.prog_id) {
                row.why = format!("{}; {how}", row.why);
            }
        }
    }
    if let Some(s) = s.store(false)? {
        if let Ok((used, total)) = s.bpf().dp_slots_used() {
            view.counter_slots = Some(CounterSlots { used, total });
        }
        let progs: Vec<u32> = view.attachments.iter().map(|a| a.prog_id).collect();
        view.memory = Some(mpt_cli::render::StateMemory::of(&s.bpf().pinned, &progs));
    }
    if !att.is_empty() {
        if verify {
            // verify now, for the report; in a batch the end of the invocation verifies
            // again (later lines may change routes without going through run()), a lone
            // attach is done with it
            if let Some(w) = s.arm() {
                view.notes.push(w);
            }
            if s.opts.batch.is_none() {
                s.arm_needed = false;
            }
        }
        s.sock()?;
        match s.fib_check() {
            Ok(Some(f)) => view.fib_check = Some(f),
            Ok(None) => {}
            Err(f) => view
                .notes
                .push(format!("the dataplane's FIB check: {}", f.message)),
        }
    }
    Ok(view)
}

/// What one device's attachment is, beside its program id: the hook, whether it forwards
/// unmanaged destinations (`fastpath`), and for tc the veth peers it delivers straight into.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Setting {
    /// xdp, xdp-generic or tc.
    pub hook: &'static str,
    /// `fastpath on`.
    pub fastpath: bool,
    /// tc, `peer on`: the ifindexes of the veths it delivers straight into their peer.
    pub peers: Vec<u32>,
}

/// The settings of the attachments, by device name (each device's sorted).
pub(crate) fn settings(
    att: &[dp::Attachment],
) -> Result<std::collections::BTreeMap<String, Vec<Setting>>, Failure> {
    let mut m: std::collections::BTreeMap<String, Vec<Setting>> = Default::default();
    for a in att {
        let dev = mpt_sys::iface::name(a.ifindex).unwrap_or_else(|| format!("if{}", a.ifindex));
        let fastpath = dp::fastpath(a.prog_id)
            .map_err(fail("read the dataplane's load-time constants".into()))?
            .unwrap_or(true);
        let mut peers = if a.mode == Mode::Tc {
            dp::peer_ports(a.prog_id).map_err(fail("read the tc program's peer devices".into()))?
        } else {
            Vec::new()
        };
        peers.sort_unstable();
        m.entry(dev).or_default().push(Setting {
            hook: a.mode.name(),
            fastpath,
            peers,
        });
    }
    for v in m.values_mut() {
        v.sort();
    }
    Ok(m)
}

//! Which hook the dataplane uses on a device (`auto`), and the veth peers XDP redirect needs.
//!
//! Facts behind the choice (`../shared/reference/veth-xdp-measurements.md`): a veth hands its
//! peer `CHECKSUM_PARTIAL` skbs from local stacks; an XDP redirect turns them into frames and
//! loses that state, so TCP from such hosts breaks through an XDP router, and XDP handles each
//! 1448-byte segment alone where the kernel moves 64 KB GSO packets. A tc program keeps the skb,
//! its checksum state and its GSO size. So `auto` picks tc on veth and native XDP elsewhere
//! (falling back to tc when the driver has no native XDP). Redirecting XDP frames *into* a veth
//! needs its peer to run NAPI (an XDP program or GRO on the peer), or the frames are dropped.

use std::os::fd::{AsFd, AsRawFd};

use mpt_bpf::mproute::dataplane::Mode;
use mpt_cli::Failure;
use mpt_netlink::msg::rtnl::link::{self, LinkMsg};
use mpt_netlink::sock::Socket;

/// Every device of the namespace.
pub fn links(sock: &mut Socket) -> Result<Vec<LinkMsg>, Failure> {
    link::all(sock).map_err(Failure::from)
}

/// What native XDP must do about checksums on a device: ask a veth's skbs, verify a tun's,
/// nothing on a NIC.
pub fn checksums(l: &LinkMsg) -> mpt_bpf::mproute::dataplane::Checksums {
    mpt_bpf::attach::Checksums::of_kind(l.kind.as_deref())
}

/// Whether a device is a veth.
pub fn is_veth(l: &LinkMsg) -> bool {
    l.kind.as_deref() == Some("veth")
}

/// The devices a tc program may deliver straight into their veth peer's namespace
/// (`bpf_redirect_peer`): veths whose peer is in another namespace (the kernel drops a packet
/// whose peer is in ours) and that have nothing of their own on transmit, neither a root qdisc
/// but the veth's `noqueue` nor an egress tc program or filter: those would be bypassed.
pub fn peer_ports(sock: &mut Socket, links: &[LinkMsg]) -> Result<Vec<u32>, Failure> {
    let mut v = Vec::new();
    for l in links {
        if is_veth(l) && l.link_netnsid.is_some() && !own_transmit(sock, l)? {
            v.push(l.ifindex);
        }
    }
    Ok(v)
}

/// Whether a device has something of its own on transmit that delivering straight into its
/// peer would bypass: a root qdisc but `noqueue`, an egress tcx program, a classic egress filter.
pub fn own_transmit(sock: &mut Socket, l: &LinkMsg) -> Result<bool, Failure> {
    if l.qdisc.as_deref().is_some_and(|q| q != "noqueue") {
        return Ok(true);
    }
    let tcx = mpt_bpf::attach::tcx_query(l.ifindex, mpt_bpf::attach::TcxDir::Egress)
        .map_err(|e| Failure::system(format!("query egress tc on {}: {e}", l.name)))?;
    Ok(!tcx.is_empty() || link::egress_filters(sock, l.ifindex).map_err(Failure::from)? > 0)
}

/// What `auto` picks for a device, and why ([`mpt_bpf::attach::Hook::auto`]).
pub fn auto_mode(l: &LinkMsg) -> (Mode, &'static str) {
    Mode::auto(l.kind.as_deref())
}

/// Why an attachment is in its mode, for `dataplane show`.
pub fn why(l: Option<&LinkMsg>, mode: Mode) -> String {
    let veth = l.is_some_and(is_veth);
    match (mode, veth) {
        (Mode::Tc, true) => "veth: tc keeps local stacks' TCP checksum state and GSO".into(),
        (Mode::Tc, false) => match l.and_then(|l| l.kind.as_deref()) {
            Some(kind) => format!(
                "{kind}, a virtual device: tc keeps the checksum state and GSO of the local stacks behind it (native XDP only when asked for)"
            ),
            None => "tc (skb): keeps checksum state and GSO".into(),
        },
        (Mode::Xdp, true) => {
            "native XDP on veth: packets with a checksum left to offload go up to tc".into()
        }
        (Mode::Xdp, false) => "native XDP".into(),
        (Mode::XdpGeneric, _) => "generic XDP (skb): no peer requirements".into(),
    }
}

/// The named namespace whose id in ours is `nsid`.
fn ns_by_nsid(sock: &mut Socket, nsid: i32) -> Option<String> {
    for name in mpt_sys::netns::list_named() {
        let Ok(f) = std::fs::File::open(mpt_sys::netns::path(&name)) else {
            continue;
        };
        let req = link::nsid_request(f.as_fd().as_raw_fd() as u32);
        let Ok(answers) = sock.transact(&req, "get namespace id") else {
            continue;
        };
        if answers
            .iter()
            .any(|p| link::decode_nsid(p).ok().flatten() == Some(nsid))
        {
            return Some(name);
        }
    }
    None
}

/// GRO on a device of the calling thread's namespace: read (set = None) or write.
fn gro(ifindex: u32, set: Option<bool>) -> Result<bool, mpt_sys::Error> {
    match set {
        None => mpt_sys::ethtool::gro(ifindex),
        Some(on) => mpt_sys::ethtool::set_gro(ifindex, on).map(|()| on),
    }
}

/// Whether veth peer `peer` (of the namespace this runs in) takes redirected XDP frames: it
/// has an XDP program or GRO.
fn takes_redirects(peer: u32) -> bool {
    let has_xdp = mpt_bpf::mproute::dataplane::xdp_prog(peer)
        .ok()
        .flatten()
        .is_some();
    has_xdp || gro(peer, None).unwrap_or(false)
}

/// Check (and with `prepare`, fix) the veth peers that XDP frames redirected out of this
/// namespace land on. Returns one line per peer that is not known to be ready.
pub fn check_peers(sock: &mut Socket, prepare: bool) -> Result<Vec<String>, Failure> {
    let mut notes = Vec::new();
    for l in links(sock)?.iter().filter(|l| is_veth(l)) {
        let Some(peer) = l.link else { continue };
        match l.link_netnsid {
            None => {
                // Peer in this namespace.
                if takes_redirects(peer) {
                    continue;
                }
                let pname = mpt_sys::iface::name(peer).unwrap_or_else(|| format!("ifindex {peer}"));
                if prepare && gro(peer, Some(true)).is_ok() {
                    notes.push(format!("{}: enabled GRO on its peer {pname}", l.name));
                } else {
                    notes.push(format!(
                        "{}: its peer {pname} has neither an XDP program nor GRO: redirected XDP frames are dropped (ethtool -K {pname} gro on, or --prepare-peers)",
                        l.name
                    ));
                }
            }
            Some(nsid) => {
                let ns = ns_by_nsid(sock, nsid);
                let state = match &ns {
                    Some(name) => {
                        let name = name.clone();
                        mpt_sys::netns::run_in(&name, move || -> Result<_, mpt_sys::Error> {
                            let pname = mpt_sys::iface::name(peer)
                                .unwrap_or_else(|| format!("ifindex {peer}"));
                            if takes_redirects(peer) {
                                return Ok(Some((true, pname)));
                            }
                            if prepare {
                                return Ok(Some((gro(peer, Some(true)).is_ok(), pname)));
                            }
                            Ok(Some((false, pname)))
                        })
                        .ok()
                        .flatten()
                    }
                    None => None,
                };
                match (state, ns) {
                    (Some((true, pname)), Some(name)) if prepare => notes.push(format!(
                        "{}: its peer {pname} in namespace {name} is ready (XDP program or GRO)",
                        l.name
                    )),
                    (Some((true, _)), _) => {}
                    (Some((false, pname)), Some(name)) => notes.push(format!(
                        "{}: its peer {pname} in namespace {name} has neither an XDP program nor GRO: redirected XDP frames are dropped (ip netns exec {name} ethtool -K {pname} gro on, or --prepare-peers)",
                        l.name
                    )),
                    _ => notes.push(format!(
                        "{}: its peer is in another namespace (id {nsid}) not found under /run/netns: make sure it runs an XDP program or has GRO on",
                        l.name
                    )),
                }
            }
        }
    }
    Ok(notes)
}
/// `net.ipv4.conf.all.ignore_routes_with_linkdown` and its IPv6 twin, in the calling thread's
/// namespace (/proc/sys/net follows the opener's network namespace).
pub fn set_ignore_linkdown() -> Result<(), mpt_sys::Error> {
    for fam in ["ipv4", "ipv6"] {
        mpt_sys::sysctl::write(
            &format!("net.{fam}.conf.all.ignore_routes_with_linkdown"),
            "1",
        )?;
    }
    Ok(())
}

/// Whether the namespace ignores routes whose link is down (IPv4 setting).
pub fn ignore_linkdown() -> bool {
    mpt_sys::sysctl::read("net.ipv4.conf.all.ignore_routes_with_linkdown").is_ok_and(|s| s == "1")
}

//! The ILA translator on devices: `bpf/ila/ila.bpf.c` loaded with the namespace's tables
//! ([`super::state`]) and attached with legacy attachments that outlive the process: on
//! ingress, `ila_in_xdp` (native or generic XDP) or `ila_in_tc` (tcx), before the stack sees
//! the packet; on egress, `ila_out_tc` (tcx). Found again by program name.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::AsFd;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::OpenObject;

use super::state::IlaState;
use crate::attach::{self, Checksums, Hook, Programs, TcxDir, XdpMode};
use crate::error::Error;
use crate::skel::ila::ila::{IlaSkel, IlaSkelBuilder};

/// The ingress XDP program, as the kernel names it.
pub const XDP_PROG: &str = "ila_in_xdp";
/// The ingress tcx program.
pub const TC_IN_PROG: &str = "ila_in_tc";
/// The ingress tcx program next to generic XDP (applies the checksum differences it left).
pub const TC_IN_GX_PROG: &str = "ila_in_tc_gx";
/// The egress tcx program.
pub const TC_OUT_PROG: &str = "ila_out_tc";

/// The translator's programs, for [`attach::ours_on`].
pub const PROGRAMS: Programs = Programs {
    xdp: XDP_PROG,
    tc_ingress: &[TC_IN_PROG, TC_IN_GX_PROG],
    tc_egress: Some(TC_OUT_PROG),
};

/// Which of the translator's hooks a command is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sides {
    /// The ingress program (mappings, input routes).
    pub ingress: bool,
    /// The egress program (output routes).
    pub egress: bool,
}

impl Sides {
    /// Both.
    pub const BOTH: Sides = Sides {
        ingress: true,
        egress: true,
    };
    /// The ingress program only.
    pub const INGRESS: Sides = Sides {
        ingress: true,
        egress: false,
    };
    /// The egress program only.
    pub const EGRESS: Sides = Sides {
        ingress: false,
        egress: true,
    };
}

/// The translator on one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attachment {
    /// Device.
    pub ifindex: u32,
    /// The ingress hook and its program id.
    pub ingress: Option<(Hook, u32)>,
    /// The egress program id (tcx).
    pub egress: Option<u32>,
}

impl Attachment {
    /// Whether anything of ours is on the device.
    pub fn any(&self) -> bool {
        self.ingress.is_some() || self.egress.is_some()
    }
}

/// The translator on one device (nothing: both `None`).
pub fn attachment_on(ifindex: u32) -> Result<Attachment, Error> {
    let mut a = Attachment {
        ifindex,
        ingress: None,
        egress: None,
    };
    for f in attach::ours_on(ifindex, &PROGRAMS)? {
        match f.dir {
            // XDP first: where both are (a switch killed halfway), XDP is what packets meet
            TcxDir::Ingress => {
                a.ingress.get_or_insert((f.hook, f.prog_id));
            }
            TcxDir::Egress => a.egress = Some(f.prog_id),
        }
    }
    Ok(a)
}

/// The devices of the namespace with the translator on them.
pub fn attachments() -> Result<Vec<Attachment>, Error> {
    let mut v = Vec::new();
    for (ifindex, _) in mpt_sys::iface::all() {
        let a = attachment_on(ifindex)?;
        if a.any() {
            v.push(a);
        }
    }
    Ok(v)
}

/// Whether the XDP program leaves the transport checksum's difference to its tc companion
/// (`ila_in_tc_gx`, through the frame's metadata) instead of writing the checksum itself:
/// always in generic XDP, which cannot tell a checksum left to offload; in native XDP on a veth
/// where the kernel's veth has no buffer to ask the sender's skb (before 6.3, see
/// [`attach::veth_skb_read`]), for the same reason.
fn defers_checksums(hook: Hook, csum: Checksums) -> bool {
    hook == Hook::XdpGeneric
        || (hook == Hook::Xdp && csum == Checksums::VethSkb && attach::veth_skb_read() == 0)
}

/// Open the translator, set its load-time constants, make it use the namespace's tables and
/// load the programs `hook` needs (its ingress program and the egress one).
fn load<'o>(
    obj: &'o mut MaybeUninit<OpenObject>,
    state: &IlaState,
    hook: Hook,
    csum: Checksums,
) -> Result<IlaSkel<'o>, Error> {
    let mut open = IlaSkelBuilder::default()
        .open(obj)
        .map_err(Error::libbpf("open the ILA translator BPF object"))?;
    match open.maps.rodata_data.as_deref_mut() {
        Some(ro) => {
            // native XDP on a veth asks each frame's skb whether its checksum is partial;
            // generic XDP cannot (see ila.8, CHECKSUMS)
            ro.ila_veth_skb = if hook == Hook::Xdp && csum == Checksums::VethSkb {
                attach::veth_skb_read()
            } else {
                0
            };
            // generic XDP cannot tell a checksum left to offload: ila_in_tc, next to it,
            // applies the transport checksum's difference (see ila_xdp_generic)
            ro.ila_xdp_generic = u32::from(defers_checksums(hook, csum));
            ro.ila_fix_cookie = crate::pinned::random_u32() | 1;
        }
        None => {
            return Err(Error::io(
                "set the ILA translator's load-time constants",
                io::Error::from_raw_os_error(libc::EINVAL),
            ))
        }
    }
    open.progs.ila_in_xdp.set_autoload(hook != Hook::Tc);
    open.progs.ila_in_tc.set_autoload(hook == Hook::Tc);
    open.progs
        .ila_in_tc_gx
        .set_autoload(defers_checksums(hook, csum));
    let m = &mut open.maps;
    for (name, map) in [
        ("ila_meta", &mut m.ila_meta),
        ("ila_xlat", &mut m.ila_xlat),
        ("ila_routes", &mut m.ila_routes),
        ("ila_slot_stats", &mut m.ila_slot_stats),
        ("ila_xlat_stats", &mut m.ila_xlat_stats),
        ("ila_route_stats", &mut m.ila_route_stats),
        ("ila_reasons", &mut m.ila_reasons),
    ] {
        map.reuse_fd(state.pinned.reusable(name)?.as_fd())
            .map_err(Error::libbpf(format!("reuse {name}")))?;
    }
    // the first inner maps of the growable maps: the state's are in place already
    for map in [
        &mut m.ila_xlat_in,
        &mut m.ila_xlat_stats_in,
        &mut m.ila_route_stats_in,
    ] {
        map.set_autocreate(false)
            .map_err(Error::libbpf("leave out a first inner map"))?;
    }
    Error::loading("load the ILA translator BPF object", || open.load())
}

/// Attach the translator to `ifindex`: ingress on `hook`, egress on tcx, in place of ours
/// there (a switch of ingress hook removes the other one after the new one is in). A foreign
/// XDP program is not replaced. `csum`: what the device's frames may be (a veth's: partial).
/// On failure the device keeps what it had, or (a first attach) nothing of ours.
pub fn attach(
    state: &IlaState,
    ifindex: u32,
    hook: Hook,
    csum: Checksums,
    sides: Sides,
) -> Result<Attachment, Error> {
    let mut obj = MaybeUninit::uninit();
    let skel = load(&mut obj, state, hook, csum)?;
    let before = attachment_on(ifindex)?;

    // egress first: with no ingress of ours yet, it translates only what routes say
    if sides.egress {
        attach::tcx_replace(
            ifindex,
            skel.progs.ila_out_tc.as_fd(),
            TcxDir::Egress,
            TC_OUT_PROG,
            &format!("attach the ILA egress program to ifindex {ifindex} (tcx)"),
        )?;
    }
    if !sides.ingress {
        return attachment_on(ifindex);
    }
    // a tc ingress program of ours in place of the one there (either kind): appended, then
    // the old ones go
    let tc_in = |prog: std::os::fd::BorrowedFd<'_>, what: &str| -> Result<(), Error> {
        let old = tc_ingress_ids(ifindex)?;
        attach::tcx_attach(
            ifindex,
            prog,
            TcxDir::Ingress,
            &format!("attach the ILA ingress program to ifindex {ifindex} ({what})"),
        )?;
        for id in old {
            attach::tcx_detach(ifindex, id, TcxDir::Ingress)?;
        }
        Ok(())
    };
    let ingress = match hook {
        Hook::Tc => tc_in(skel.progs.ila_in_tc.as_fd(), "tcx"),
        // the tc companion first: XDP's frames need it from their first one
        Hook::XdpGeneric => tc_in(skel.progs.ila_in_tc_gx.as_fd(), "tcx, next to generic XDP")
            .and_then(|()| {
                attach_xdp(
                    ifindex,
                    skel.progs.ila_in_xdp.as_fd(),
                    XdpMode::Generic,
                    hook,
                )
            }),
        Hook::Xdp if defers_checksums(hook, csum) => tc_in(
            skel.progs.ila_in_tc_gx.as_fd(),
            "tcx, next to XDP on a veth",
        )
        .and_then(|()| {
            attach_xdp(
                ifindex,
                skel.progs.ila_in_xdp.as_fd(),
                XdpMode::Native,
                hook,
            )
        }),
        Hook::Xdp => attach_xdp(
            ifindex,
            skel.progs.ila_in_xdp.as_fd(),
            XdpMode::Native,
            hook,
        ),
    };
    if let Err(e) = ingress {
        if before.egress.is_none() && sides.egress {
            // a first attach: leave nothing behind
            if let Some(id) = attachment_on(ifindex).ok().and_then(|a| a.egress) {
                let _ = attach::tcx_detach(ifindex, id, TcxDir::Egress);
            }
        }
        if before.ingress.is_none() {
            // (a generic XDP attach that failed after its tc companion)
            for id in tc_ingress_ids(ifindex).unwrap_or_default() {
                let _ = attach::tcx_detach(ifindex, id, TcxDir::Ingress);
            }
        }
        return Err(e);
    }
    // the other ingress hook of ours goes now that the new one is in
    match hook {
        Hook::Tc => {
            if let Some((h, _)) = before.ingress.filter(|(h, _)| *h != Hook::Tc) {
                if let Some(mode) = h.xdp_mode() {
                    attach::xdp_detach(ifindex, mode)?;
                }
            }
        }
        Hook::XdpGeneric => {}
        Hook::Xdp if defers_checksums(hook, csum) => {}
        Hook::Xdp => {
            for id in tc_ingress_ids(ifindex)? {
                attach::tcx_detach(ifindex, id, TcxDir::Ingress)?;
            }
        }
    }
    attachment_on(ifindex)
}

/// Our tc ingress programs on a device (either kind).
fn tc_ingress_ids(ifindex: u32) -> Result<Vec<u32>, Error> {
    let ids = attach::tcx_query(ifindex, TcxDir::Ingress)?;
    let mut v = attach::named(&ids, TC_IN_PROG);
    v.extend(attach::named(&ids, TC_IN_GX_PROG));
    Ok(v)
}

fn attach_xdp(
    ifindex: u32,
    prog: std::os::fd::BorrowedFd<'_>,
    mode: XdpMode,
    hook: Hook,
) -> Result<(), Error> {
    let replace = attach::xdp_prepare(ifindex, mode, XDP_PROG)?;
    attach::xdp_attach(
        ifindex,
        prog,
        mode,
        replace.as_ref().map(|f| f.as_fd()),
        &format!(
            "attach the ILA ingress program to ifindex {ifindex} ({})",
            hook.name()
        ),
    )
}

/// Remove the translator's programs of `sides` from a device; returns what was there.
pub fn detach(ifindex: u32, sides: Sides) -> Result<Attachment, Error> {
    let found = attach::ours_on(ifindex, &PROGRAMS)?;
    let before = attachment_on(ifindex)?;
    for f in found {
        let egress = f.dir == TcxDir::Egress;
        if (egress && !sides.egress) || (!egress && !sides.ingress) {
            continue;
        }
        match (f.hook.xdp_mode(), f.dir) {
            (Some(mode), _) => attach::xdp_detach(ifindex, mode)?,
            (None, dir) => attach::tcx_detach(ifindex, f.prog_id, dir)?,
        }
    }
    Ok(before)
}

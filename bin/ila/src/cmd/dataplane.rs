//! `ila dataplane`: the BPF translator on devices (bpf backend only: the kernel's module
//! translates by itself).

use mpt_bpf::attach::{Checksums, Hook};
use mpt_bpf::ila::dataplane as dp;
use mpt_cli::Failure;
use mpt_netlink::msg::rtnl::link;
use mpt_netlink::sock::Socket;

use super::ifindex;
use crate::backend::bpf::fail;
use crate::backend::Kind;
use crate::grammar::{AttachMode, DpCmd};
use crate::session::Session;
use crate::view::{AttachmentRow, DataplaneView, Output};

fn view(changed: Option<bool>, s: &mut Session) -> Result<Output, Failure> {
    let attachments = dp::attachments()
        .map_err(|e| fail("dataplane show", e))?
        .iter()
        .map(AttachmentRow::of)
        .collect();
    let mut counters = Vec::new();
    if let crate::backend::Backend::Bpf(b) = s.backend()? {
        if let Some(st) = b.state(false)? {
            counters = st
                .reasons()
                .map_err(|e| fail("dataplane show", e))?
                .into_iter()
                .map(|(r, n)| (r.name().to_string(), n))
                .collect();
        }
    }
    Ok(Output::Dataplane(DataplaneView {
        changed,
        attachments,
        counters,
    }))
}

/// Run `ila dataplane ...`.
pub fn run(s: &mut Session, c: &DpCmd) -> Result<Output, Failure> {
    if s.backend()?.kind() == Kind::Kernel && !matches!(c, DpCmd::Show) {
        return Err(Failure::usage(
            "dataplane: the backend is the kernel's ILA module, which translates by itself: nothing to attach",
        )
        .hint("use --backend bpf to run ila's BPF translator instead"));
    }
    match c {
        DpCmd::Show => view(None, s),
        DpCmd::Attach { devs, mode, sides } => {
            let sides = dp::Sides {
                ingress: sides.ingress,
                egress: sides.egress,
            };
            let mut sock = Socket::route().map_err(Failure::from)?;
            let links = link::all(&mut sock).map_err(Failure::from)?;
            let mut plan = Vec::new();
            for d in devs {
                let what = format!("dataplane attach dev {d}");
                let i = ifindex(d, &what)?;
                let kind = links
                    .iter()
                    .find(|l| l.ifindex == i)
                    .and_then(|l| l.kind.clone());
                let hook = match mode {
                    AttachMode::Auto => Hook::auto(kind.as_deref()).0,
                    AttachMode::Xdp => Hook::Xdp,
                    AttachMode::XdpGeneric => Hook::XdpGeneric,
                    AttachMode::Tc => Hook::Tc,
                };
                plan.push((d, i, hook, Checksums::of_kind(kind.as_deref())));
            }
            let crate::backend::Backend::Bpf(b) = s.backend()? else {
                return Err(Failure::system("dataplane attach: not the bpf backend"));
            };
            let Some(state) = b.state(true)? else {
                return Err(Failure::system(
                    "dataplane attach: the ILA tables could not be created",
                ));
            };
            let mut changed = false;
            for (d, i, hook, csum) in plan {
                let before = dp::attachment_on(i).map_err(|e| fail("dataplane attach", e))?;
                let r = dp::attach(state, i, hook, csum, sides);
                let r = match r {
                    // auto: a NIC whose driver has no native XDP gets tc
                    Err(e)
                        if *mode == AttachMode::Auto
                            && matches!(e.kind, mpt_bpf::ErrorKind::NoNativeXdp(_)) =>
                    {
                        dp::attach(state, i, Hook::Tc, csum, sides)
                    }
                    r => r,
                };
                let after =
                    r.map_err(|e| fail(&format!("dataplane attach dev {d} {}", hook.name()), e))?;
                changed |= before.ingress.map(|(h, _)| h) != after.ingress.map(|(h, _)| h)
                    || before.egress.is_none() != after.egress.is_none();
            }
            view(Some(changed), s)
        }
        DpCmd::Detach { devs, sides } => {
            let sides = dp::Sides {
                ingress: sides.ingress,
                egress: sides.egress,
            };
            let mut changed = false;
            for d in devs {
                let what = format!("dataplane detach dev {d}");
                let i = ifindex(d, &what)?;
                let a = dp::detach(i, sides).map_err(|e| fail(&what, e))?;
                changed |=
                    (sides.ingress && a.ingress.is_some()) || (sides.egress && a.egress.is_some());
            }
            view(Some(changed), s)
        }
    }
}

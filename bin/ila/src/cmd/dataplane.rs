//! `ila dataplane`: the BPF translator on devices (bpf backend only: the kernel's module
//! translates by itself).

use mpt_bpf::attach::{Checksums, Hook};
use mpt_bpf::ila::dataplane as dp;
use mpt_cli::Failure;
use mpt_netlink::msg::rtnl::link;
use mpt_netlink::sock::Socket;

use super::ifindex;
use crate::backend::Kind;
use crate::grammar::{AttachMode, DpCmd};
use crate::session::Session;
use crate::view::{AttachmentRow, DataplaneView, Diff, Output};

fn view(changed: Option<bool>, s: &mut Session) -> Result<Output, Failure> {
    let attachments: Vec<AttachmentRow> = dp::attachments()
        .map_err(|e| Failure::bpf("dataplane show", e))?
        .iter()
        .map(AttachmentRow::of)
        .collect();
    let mut counters = Vec::new();
    let mut memory = None;
    if let Some(b) = s.backend()?.bpf() {
        if let Some(st) = b.state(false)? {
            let progs: Vec<u32> = attachments
                .iter()
                .flat_map(|a| [a.ingress_prog_id, a.egress_prog_id])
                .flatten()
                .collect();
            memory = Some(mpt_cli::render::StateMemory::of(&st.pinned, &progs));
            counters = st
                .reasons()
                .map_err(|e| Failure::bpf("dataplane show", e))?
                .into_iter()
                .map(|(r, n)| (r.name().to_string(), n))
                .collect();
        }
    }
    Ok(Output::Dataplane(DataplaneView {
        changed,
        attachments,
        counters: counters.into(),
        memory,
        check: false,
        diff: None,
    }))
}

/// A device's hooks for a dry run's diff: `{"ingress": "tc", "egress": true}`.
fn hooks(a: &dp::Attachment) -> serde_json::Value {
    serde_json::json!({
        "ingress": a.ingress.map(|(h, _)| h.name()),
        "egress": a.egress.is_some(),
    })
}

/// `--check` of attach (`hook` per device) or detach (`None`): what would change.
fn predict(
    s: &mut Session,
    plan: &[(String, u32, Option<Hook>)],
    sides: dp::Sides,
) -> Result<Output, Failure> {
    let mut changed = false;
    let (mut before, mut after) = (serde_json::Map::new(), serde_json::Map::new());
    for (d, i, hook) in plan {
        let a = dp::attachment_on(*i).map_err(|e| Failure::bpf("dataplane", e))?;
        let mut b = a;
        match hook {
            Some(h) => {
                if sides.ingress {
                    b.ingress = Some((*h, 0));
                }
                if sides.egress {
                    b.egress = Some(0);
                }
            }
            None => {
                if sides.ingress {
                    b.ingress = None;
                }
                if sides.egress {
                    b.egress = None;
                }
            }
        }
        changed |= hooks(&a) != hooks(&b);
        before.insert(d.clone(), hooks(&a));
        after.insert(d.clone(), hooks(&b));
    }
    let Output::Dataplane(mut v) = view(Some(changed), s)? else {
        return Err(Failure::system("dataplane: no view"));
    };
    v.check = true;
    v.diff = Some(Diff {
        before: before.into(),
        after: after.into(),
    });
    Ok(Output::Dataplane(v))
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
            let sides = *sides;
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
            if s.opts.check {
                let p: Vec<_> = plan
                    .iter()
                    .map(|(d, i, h, _)| ((*d).clone(), *i, Some(*h)))
                    .collect();
                return predict(s, &p, sides);
            }
            let Some(b) = s.backend()?.bpf() else {
                return Err(Failure::system("dataplane attach: not the bpf backend"));
            };
            let Some(state) = b.state(true)? else {
                return Err(Failure::system(
                    "dataplane attach: the ILA tables could not be created",
                ));
            };
            let mut changed = false;
            for (d, i, hook, csum) in plan {
                let before =
                    dp::attachment_on(i).map_err(|e| Failure::bpf("dataplane attach", e))?;
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
                let after = r.map_err(|e| {
                    Failure::bpf(&format!("dataplane attach dev {d} {}", hook.name()), e)
                })?;
                changed |= before.ingress.map(|(h, _)| h) != after.ingress.map(|(h, _)| h)
                    || before.egress.is_none() != after.egress.is_none();
            }
            view(Some(changed), s)
        }
        DpCmd::Detach { devs, sides } => {
            let sides = *sides;
            if s.opts.check {
                let mut p = Vec::new();
                for d in devs {
                    p.push((
                        d.clone(),
                        ifindex(d, &format!("dataplane detach dev {d}"))?,
                        None,
                    ));
                }
                return predict(s, &p, sides);
            }
            let mut changed = false;
            for d in devs {
                let what = format!("dataplane detach dev {d}");
                let i = ifindex(d, &what)?;
                let a = dp::detach(i, sides).map_err(|e| Failure::bpf(&what, e))?;
                changed |=
                    (sides.ingress && a.ingress.is_some()) || (sides.egress && a.egress.is_some());
            }
            view(Some(changed), s)
        }
    }
}

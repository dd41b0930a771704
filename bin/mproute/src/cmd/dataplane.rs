//! `mproute dataplane attach|detach|show`: the tc/XDP programs that carry out the algorithms,
//! on the devices packets arrive on, their counters and the state of their FIB check
//! ([`crate::attachment`]). `watch` is [`super::watch`].

use mpt_cli::Failure;

use crate::attachment;
use crate::grammar::DpSpec;
use crate::session::Session;
use crate::view::Output;

/// Attach, detach or show; each answers with the dataplane's report.
pub fn run(s: &mut Session, spec: &DpSpec) -> Result<Output, Failure> {
    let mutates = matches!(spec, DpSpec::Attach { .. } | DpSpec::Detach { .. });
    let before = if mutates {
        Some((
            attachment::settings(
                &mpt_bpf::mproute::dataplane::attachments()
                    .map_err(|e| Failure::bpf("list dataplane attachments", e))?,
            )?,
            crate::hook::ignore_linkdown(),
        ))
    } else {
        None
    };
    let notes = match spec {
        DpSpec::Attach {
            devs,
            mode,
            fastpath,
            peer,
            prepare_peers,
        } => attachment::attach(s, devs, *mode, *fastpath, *peer, *prepare_peers)?,
        DpSpec::Detach { devs } => {
            attachment::detach(devs)?;
            Vec::new()
        }
        DpSpec::Watch => {
            return Err(Failure::usage(
                "dataplane watch: runs on its own, not in a batch",
            ))
        }
        // what attach would say about the veth peers native XDP redirects into
        DpSpec::Show => attachment::peer_notes(s, false)?,
    };
    let verify = matches!(spec, DpSpec::Attach { .. });
    let mut view = attachment::report(s, notes, verify)?;
    if let Some((att, linkdown)) = before {
        let after = mpt_bpf::mproute::dataplane::attachments()
            .map_err(|e| Failure::bpf("list dataplane attachments", e))?;
        // a hook, fastpath or the peers delivered into: what attach sets, beside program ids
        view.changed = Some(
            att != attachment::settings(&after)? || linkdown != crate::hook::ignore_linkdown(),
        );
    }
    Ok(Output::Dataplane(view))
}

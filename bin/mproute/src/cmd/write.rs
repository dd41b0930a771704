//! `mproute add|replace|append|change PREFIX ... NEXTHOPS`: one route transaction, and a note
//! when no dataplane carries out the algorithm it set.

use mpt_cli::Failure;

use crate::grammar::RouteSpec;
use crate::session::Session;
use crate::view::Output;

/// What a write of a multipath route says when no dataplane is attached in the namespace.
pub const NOT_ENFORCED: &str = "no dataplane is attached in this namespace: the kernel picks \
     the nexthops by its own hash, the algorithm is not enforced until \"mproute dataplane \
     attach dev DEV\"";

/// Install the route as the verb says.
pub fn run(s: &mut Session, spec: &RouteSpec) -> Result<Output, Failure> {
    let mut out = s.txn().modify(spec).map(super::done)?;
    // One path leaves no choice to an algorithm. Who enforces is asked after the write, which
    // succeeded: a failure to list attachments then leaves the note out, not the write.
    let choice = spec.nexthops.len() > 1 || spec.resilient.is_some();
    if choice && matches!(s.enforced_by(), Ok("none")) {
        mpt_cli::error::eprint_once("mproute", "note", NOT_ENFORCED);
        if let Output::Change(r) = &mut out {
            r.notes.push(NOT_ENFORCED.to_string());
        }
    }
    Ok(out)
}

//! `mproute sync [--reset]`: report and repair drift between the FIB and mproute's state.

use mpt_cli::Failure;

use crate::session::Session;
use crate::view::Output;

/// Repair (or, with `reset`, drop) the namespace's state.
pub fn run(s: &mut Session, reset: bool) -> Result<Output, Failure> {
    let rows = s.sync(reset)?;
    Ok(Output::Actions {
        // a route kept waiting for its link is not a change
        changed: rows.iter().any(|r| r.action != "waiting"),
        rows,
        check: s.opts.check,
    })
}

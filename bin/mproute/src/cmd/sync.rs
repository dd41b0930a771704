//! `mproute sync [--reset]`: report and repair drift between the FIB and mproute's state.

use mpt_cli::Failure;

use crate::cmd::Output;
use crate::session::Session;

/// Repair (or, with `reset`, drop) the namespace's state.
pub fn run(s: &mut Session, reset: bool) -> Result<Output, Failure> {
    let rows = s.sync(reset)?;
    Ok(Output::Actions {
        changed: !rows.is_empty(),
        rows,
        check: s.opts.check,
    })
}

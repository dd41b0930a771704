//! `mproute sync [--reset]`: report and repair drift between the FIB and mproute's state.

use mpt_cli::Failure;

use crate::repair::{DryRepair, Repair, SyncFx};
use crate::session::Session;
use crate::view::Output;

/// Repair (or, with `reset`, drop) the namespace's state.
pub fn run(s: &mut Session, reset: bool) -> Result<Output, Failure> {
    sync(s, reset, &mut Repair)
}

/// What `sync` would repair (`--check`).
pub(crate) fn dry(s: &mut Session, reset: bool) -> Result<Output, Failure> {
    sync(s, reset, &mut DryRepair)
}

fn sync(s: &mut Session, reset: bool, fx: &mut dyn SyncFx) -> Result<Output, Failure> {
    let rows = s.sync(reset, fx)?;
    Ok(Output::Actions {
        // a route kept waiting for its link is not a change
        changed: rows.iter().any(|r| r.action != "waiting"),
        rows,
        check: !fx.done(),
    })
}

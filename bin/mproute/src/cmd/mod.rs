//! The front end: one module per verb, each a thin function from a typed [`Command`] to the
//! rows it answers with, over the library modules (the route transaction, verification, repair).
//! Nothing here prints; [`crate::view`] renders what a command returns.

pub mod dataplane;
pub mod del;
pub mod flush;
pub mod get;
pub mod show;
pub mod sync;
pub mod watch;
pub mod write;

use mpt_cli::Failure;

use crate::cli::Command;
use crate::session::Session;
use crate::view::{ActionRow, ChangeReport, CheckReport, DataplaneView, GetRow, RouteRow};

/// What a command produced.
#[derive(Debug)]
pub enum Output {
    /// Routes for `show`.
    Routes(Vec<RouteRow>),
    /// `get`.
    Get(Box<GetRow>),
    /// `dataplane show` (and attach/detach reports).
    Dataplane(DataplaneView),
    /// A mutation's report.
    Change(ChangeReport),
    /// `flush` / `sync`.
    Actions {
        /// Whether anything changed.
        changed: bool,
        /// What was done (with `check`: what would be done).
        rows: Vec<ActionRow>,
        /// A dry run (`--check`): nothing was done.
        check: bool,
    },
    /// What a command would do (`--check`).
    Check(Box<CheckReport>),
}

/// Run one command.
pub fn run(s: &mut Session, c: &Command) -> Result<Output, Failure> {
    if s.opts.check {
        return crate::check::run(s, c);
    }
    if c.changes_routes() {
        s.disarm()?;
    }
    match c {
        Command::Write(spec) => write::run(s, spec),
        Command::Del(spec) => del::run(s, spec),
        Command::Show(spec) => show::run(s, spec),
        Command::Flush { table } => flush::run(s, table.as_deref()),
        Command::Sync { reset } => sync::run(s, *reset),
        Command::Get(spec) => get::run(s, spec),
        Command::Dataplane(spec) => dataplane::run(s, spec),
    }
}

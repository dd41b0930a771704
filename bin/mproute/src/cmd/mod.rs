//! The front end: one module per verb, each a thin function from a typed [`Command`] to the
//! rows it answers with, over the library modules (the route transaction, verification, repair);
//! [`check`] is every verb's dry run (`--check`), over the same decisions. Nothing here prints;
//! [`crate::view`] renders what a command returns.

pub mod check;
pub mod dataplane;
pub mod del;
pub mod flush;
pub mod get;
pub mod metrics;
pub mod save;
pub mod show;
pub mod sync;
pub mod watch;
pub mod write;

use mpt_cli::Failure;

use crate::cli::Command;
use crate::session::Session;
use crate::txn::Done;
pub use crate::view::Output;

/// Run one command.
pub fn run(s: &mut Session, c: &Command) -> Result<Output, Failure> {
    if s.opts.check {
        return check::run(s, c);
    }
    if c.changes_routes() {
        s.disarm()?;
    }
    match c {
        Command::Write(spec) => write::run(s, spec),
        Command::Del(spec) => del::run(s, spec),
        Command::Show(spec) => show::run(s, spec),
        Command::Flush(spec) => flush::run(s, spec),
        Command::Sync { reset } => sync::run(s, *reset),
        Command::Get(spec) => get::run(s, spec),
        Command::Dataplane(spec) => dataplane::run(s, spec),
        Command::Metrics => metrics::run(s),
        Command::Save => save::run(s),
    }
}

/// A route transaction's result as the operator sees it.
pub(crate) fn done(d: Done) -> Output {
    Output::Change(crate::view::report(d.changed, d.verb, &d.key, d.algo))
}

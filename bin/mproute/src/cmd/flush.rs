//! `mproute flush [table T|all]`: every route mproute owns, never one added with `ip route`.

use mpt_cli::Failure;

use crate::cmd::Output;
use crate::resolve;
use crate::session::Session;

/// Remove mproute's routes of one table (`None`, `all`: every table).
pub fn run(s: &mut Session, table: Option<&str>) -> Result<Output, Failure> {
    let table = match table {
        Some("all") | None => None,
        Some(t) => Some(resolve::table(Some(t))?),
    };
    let rows = s.flush_owned(table)?;
    Ok(Output::Actions {
        changed: !rows.is_empty(),
        rows,
        check: s.opts.check,
    })
}

//! `mproute flush [table T|all]`: every route mproute owns, never one added with `ip route`.

use mpt_cli::Failure;

use crate::resolve;
use crate::session::Session;
use crate::txn::FlushStep;
use crate::view::Output;

/// The table `flush` names (`None`: every table).
pub(crate) fn table(table: Option<&str>) -> Result<Option<u32>, Failure> {
    match table {
        Some("all") | None => Ok(None),
        Some(t) => Ok(Some(resolve::table(Some(t))?)),
    }
}

/// Remove mproute's routes of one table (`None`, `all`: every table).
pub fn run(s: &mut Session, table: Option<&str>) -> Result<Output, Failure> {
    let table = self::table(table)?;
    let steps = s.txn().flush_plan(table)?;
    s.txn().flush(&steps)?;
    Ok(report(&steps, false))
}

/// What `flush` did (`check`: would do).
pub(crate) fn report(steps: &[FlushStep], check: bool) -> Output {
    Output::Actions {
        changed: !steps.is_empty(),
        rows: steps.iter().map(FlushStep::row).collect(),
        check,
    }
}

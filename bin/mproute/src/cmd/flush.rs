//! `mproute flush [table T|all] [SELECTOR]`: every route mproute owns that the selector (show's,
//! ip's) names, never one added with `ip route`.

use mpt_cli::Failure;

use crate::cmd::show::Filter;
use crate::grammar::ShowSpec;
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

/// What flush does: the transaction's plan for the table, narrowed to what the selector
/// names (the same for the real and the dry run).
pub(crate) fn plan(s: &mut Session, spec: &ShowSpec) -> Result<Vec<FlushStep>, Failure> {
    let table = self::table(spec.table.as_deref())?;
    let filter = Filter::new(spec, s.opts.family())?;
    let mut steps = s.txn().flush_plan(table)?;
    steps.retain(|st| match st {
        FlushStep::Delete(r) => filter.selects(r),
        FlushStep::Forget(k) => filter.selects_key(k),
    });
    Ok(steps)
}

/// Remove mproute's routes of one table (`None`, `all`: every table) the selector names.
pub fn run(s: &mut Session, spec: &ShowSpec) -> Result<Output, Failure> {
    let steps = plan(s, spec)?;
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

//! `mproute add|replace|append|change PREFIX ... NEXTHOPS`: one route transaction.

use mpt_cli::Failure;

use crate::grammar::RouteSpec;
use crate::session::Session;
use crate::view::Output;

/// Install the route as the verb says.
pub fn run(s: &mut Session, spec: &RouteSpec) -> Result<Output, Failure> {
    s.txn().modify(spec).map(super::done)
}

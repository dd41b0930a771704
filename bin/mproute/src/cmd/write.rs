//! `mproute add|replace|append|change PREFIX ... NEXTHOPS`: one route transaction.

use mpt_cli::Failure;

use crate::cmd::Output;
use crate::grammar::RouteSpec;
use crate::session::Session;

/// Install the route as the verb says.
pub fn run(s: &mut Session, spec: &RouteSpec) -> Result<Output, Failure> {
    s.modify(spec)
}

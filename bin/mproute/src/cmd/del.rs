//! `mproute del PREFIX [table T] [metric M]`: a route mproute owns, FIB first, then the state.

use mpt_cli::Failure;

use crate::grammar::RouteSpec;
use crate::session::Session;
use crate::view::Output;

/// Delete the route.
pub fn run(s: &mut Session, spec: &RouteSpec) -> Result<Output, Failure> {
    let target = s.txn().del_target(spec)?;
    s.txn().delete(target).map(super::done)
}

//! `mproute del PREFIX [table T] [metric M]`: a route mproute owns, FIB first, then the state.

use mpt_cli::Failure;

use crate::cmd::Output;
use crate::grammar::RouteSpec;
use crate::session::Session;

/// Delete the route.
pub fn run(s: &mut Session, spec: &RouteSpec) -> Result<Output, Failure> {
    s.delete(spec)
}

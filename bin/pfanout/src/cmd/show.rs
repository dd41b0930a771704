//! `pfanout show [dev DEV] [group ID]`: the namespace's fanout groups, their members and
//! owners ([`crate::show`] reads them).

use mpt_cli::{Failure, GlobalOpts};

use crate::grammar::ShowCmd;
use crate::view::Output;

/// The groups, with their counters if `-s`.
pub fn run(opts: &GlobalOpts, s: &ShowCmd) -> Result<Output, Failure> {
    Ok(Output::Groups(
        crate::show::run(s, opts.details)?,
        opts.stats > 0,
    ))
}

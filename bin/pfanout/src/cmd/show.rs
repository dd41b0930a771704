//! `pfanout show [dev DEV] [group ID]`: the namespace's fanout groups, their members and
//! owners ([`crate::show`] reads them).

use mpt_cli::{Failure, GlobalOpts};

use crate::grammar::ShowCmd;
use crate::view::Output;

/// The groups, with their counters if `-s`.
pub fn run(opts: &GlobalOpts, s: &ShowCmd) -> Result<Output, Failure> {
    let mut groups = crate::show::run(s, opts.details)?;
    if opts.stats > 0 {
        crate::show::read_rollover(&mut groups);
    }
    Ok(Output::Groups(groups, opts.stats > 0))
}

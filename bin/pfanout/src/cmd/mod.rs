//! The front end: one module per verb (`show`, `run`, `bench`), each from a typed command to
//! what it answers with; [`check`] is the dry run of `run` and `bench` (`--check`). Nothing here
//! prints; [`crate::view`] renders what a command returns.

pub mod bench;
pub mod check;
pub mod metrics;
pub mod run;
pub mod show;

use mpt_cli::{Failure, GlobalOpts};

use crate::cli::Command;
use crate::view::{self, Output};

/// Run one command.
pub fn run(opts: &GlobalOpts, c: &Command) -> Result<Output, Failure> {
    match c {
        Command::Show(s) => show::run(opts, s),
        Command::Run(r) if opts.check => Ok(Output::Check(check::run(r)?)),
        Command::Bench(b) if opts.check => Ok(Output::Check(check::bench(b))),
        Command::Run(r) => {
            let mut drawn = 0usize;
            let s = run::run(r, opts.json, |running, w, rates, mode| {
                view::live(&running.info, running.elapsed(), w, rates, mode, &mut drawn)
            })?;
            Ok(Output::Run(s))
        }
        Command::Bench(b) => Ok(Output::Bench(bench::run(b)?)),
        Command::Metrics => metrics::run(opts),
    }
}

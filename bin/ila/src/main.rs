//! ila: thin binary; prints its usage until its commands exist.

use clap::{CommandFactory, Parser};
use ila::Cli;

fn main() {
    mpt_cli::docs::handle(<Cli as clap::CommandFactory>::command);
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() {
                mpt_cli::EXIT_USAGE
            } else {
                mpt_cli::EXIT_OK
            };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    let _ = Cli::command().print_help();
    let what = cli
        .words
        .first()
        .map_or_else(String::new, |w| format!(" \"{w}\""));
    mpt_cli::exit(
        "ila",
        Err(mpt_cli::Failure::usage(format!(
            "command{what} is not implemented yet"
        ))),
    );
}

//! One invocation: the global options, the commands run one by one (batch lines too).

use mpt_cli::batch::BatchTool;
use mpt_cli::render::Style;
use mpt_cli::{Failure, GlobalOpts};

use crate::cli::Command;
use crate::view::{self, Output};

/// The session.
#[derive(Debug)]
pub struct Session {
    /// Global options.
    pub opts: GlobalOpts,
}

impl BatchTool for Session {
    type Cmd = Command;
    type Out = Output;

    fn parse_line(words: Vec<String>) -> Result<Command, Failure> {
        crate::cli::parse_line(words)
    }

    fn run(&mut self, c: &Command) -> Result<Output, Failure> {
        crate::cmd::run(&self.opts, c)
    }

    fn print(out: &Output, style: Style) {
        view::print(out, style);
    }
}

impl mpt_cli::tool::Tool for Session {
    const NAME: &'static str = "pfanout";
    type Cli = crate::cli::Cli;

    fn global(cli: &Self::Cli) -> &GlobalOpts {
        &cli.global
    }

    fn command(cli: &Self::Cli) -> Option<Result<Command, Failure>> {
        cli.cmd.as_ref().map(|c| c.command())
    }

    fn default_command() -> Command {
        Command::Show(Default::default())
    }

    fn open(cli: &Self::Cli) -> Self {
        Session {
            opts: cli.global.clone(),
        }
    }
}

//! One invocation's hold on the namespace: the global options and the backend, opened on first
//! use (so that `--help` and syntax errors need neither root nor a socket). The lines of a
//! batch share one session, and so one backend and one lock.

use mpt_cli::batch::{self, BatchTool};
use mpt_cli::render::Style;
use mpt_cli::{Failure, GlobalOpts};

use crate::backend::Backend;
use crate::cli::{BackendChoice, Command};
use crate::view::Output;

/// The session.
#[derive(Debug)]
pub struct Session {
    /// Global options.
    pub opts: GlobalOpts,
    /// `--backend`.
    pub choice: BackendChoice,
    backend: Option<Backend>,
}

impl Session {
    /// A session in the calling thread's namespace.
    pub fn new(opts: GlobalOpts, choice: BackendChoice) -> Session {
        Session {
            opts,
            choice,
            backend: None,
        }
    }

    /// The backend, opened on first use.
    pub fn backend(&mut self) -> Result<&mut Backend, Failure> {
        if self.backend.is_none() {
            let b = Backend::open(self.choice)?;
            self.backend = Some(if self.opts.check {
                Backend::Dry(Box::new(crate::backend::dry::Dry::new(b)))
            } else {
                b
            });
        }
        self.backend
            .as_mut()
            .ok_or_else(|| Failure::system("no backend"))
    }
}

impl BatchTool for Session {
    type Cmd = Command;
    type Out = Output;

    fn parse_line(words: Vec<String>) -> Result<Command, Failure> {
        crate::cli::parse_line(words)
    }

    fn run_lines(
        &mut self,
        lines: Vec<(usize, Result<Command, Failure>)>,
        force: bool,
        emit: &mut dyn FnMut(usize, Result<Output, Failure>),
    ) {
        batch::run_each(lines, force, emit, |c| crate::cmd::run(self, &c));
    }

    fn run(&mut self, c: &Command) -> Result<Output, Failure> {
        crate::cmd::run(self, c)
    }

    fn print(out: &Output, style: Style) {
        crate::view::print(out, style);
    }

    fn finish(&mut self) -> Result<(), Failure> {
        match self.backend.as_mut() {
            Some(b) => b.finish(),
            None => Ok(()),
        }
    }

    fn holds_lock(&self) -> bool {
        true
    }

    fn release(&mut self) {
        // the backend holds the lock: its work is done
        self.backend = None;
    }
}

impl mpt_cli::tool::Tool for Session {
    const NAME: &'static str = "ila";
    type Cli = crate::cli::Cli;

    fn global(cli: &Self::Cli) -> &GlobalOpts {
        &cli.global
    }

    fn command(cli: &Self::Cli) -> Option<Result<Command, Failure>> {
        cli.cmd.as_ref().map(|c| c.command())
    }

    fn default_command() -> Command {
        Command::default_show()
    }

    fn configure(cli: &Self::Cli) {
        mpt_bpf::configure(Self::NAME, cli.global.verbose, cli.global.lock_wait());
    }

    fn open(cli: &Self::Cli) -> Self {
        Session::new(cli.global.clone(), cli.backend)
    }

    fn run_one(&mut self, command: Command, style: Style) -> Result<(), Failure> {
        crate::cmd::run(self, &command).map(|out| crate::view::print(&out, style))
    }
}

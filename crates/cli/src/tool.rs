//! One front door for the three tools: [`main`] orders every invocation the same way (the
//! documentation switches, the command line's syntax, the tool's set-up, the namespace, then
//! one command or a batch), prints a failure once, at the top, and picks the exit code there.
//! A tool says what differs in a [`Tool`] implementation; its `main.rs` is one call.

use crate::batch::BatchTool;
use crate::render::Style;
use crate::{exit, Failure, GlobalOpts};

/// What one of the tools is, for [`main`].
pub trait Tool: BatchTool + Sized {
    /// Its name, as errors begin (`mproute: ...`).
    const NAME: &'static str;
    /// Its command line.
    type Cli: clap::Parser + clap::CommandFactory + crate::abbrev::Abbrev;
    /// The options all three share.
    fn global(cli: &Self::Cli) -> &GlobalOpts;
    /// The command the command line names, typed (syntax only, nothing resolved); `None` when
    /// it names none.
    fn command(cli: &Self::Cli) -> Option<Result<Self::Cmd, Failure>>;
    /// The command of a bare invocation (the tool's `show`).
    fn default_command() -> Self::Cmd;
    /// What the tool sets up before the namespace is entered: its BPF layer's name, `-v`,
    /// `--wait`.
    fn configure(cli: &Self::Cli) {
        let g = Self::global(cli);
        mpt_bpf::configure(Self::NAME, g.verbose, g.lock_wait());
    }
    /// The tool's session, in the namespace `-n` named.
    fn open(cli: &Self::Cli) -> Self;
    /// Run one command of the command line and print what it gives.
    fn run_one(&mut self, cmd: Self::Cmd, style: Style) -> Result<(), Failure> {
        self.run(&cmd).map(|out| Self::print(&out, style))
    }
}

/// The whole of a tool's `main`: never returns.
pub fn main<T: Tool>() -> ! {
    use clap::{CommandFactory, Parser};
    crate::docs::handle(T::Cli::command);
    // ip's options and abbreviations first, written out as clap reads them
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_else(|| T::NAME.into());
    let args = match crate::abbrev::rewrite(
        T::NAME,
        args.collect(),
        &T::Cli::command(),
        <T::Cli as crate::abbrev::Abbrev>::WORDS,
    ) {
        Ok(a) => a,
        Err(f) => exit(T::NAME, Err(f)),
    };
    let cli = match T::Cli::try_parse_from(std::iter::once(argv0).chain(args)) {
        Ok(c) => c,
        Err(e) => crate::args::exit_on_error(T::NAME, e, &T::Cli::command()),
    };
    let g = T::global(&cli);
    let style = g.style();
    // the command's syntax before anything touches the system: a bad command is exit 1
    // whatever -n names
    let command = match T::command(&cli) {
        Some(Err(f)) => exit(T::NAME, Err(f)),
        Some(Ok(c)) => Some(c),
        None => None,
    };
    let batch = g.batch.clone();
    if batch.is_some() && command.is_some() {
        exit(
            T::NAME,
            Err(Failure::usage(
                "-b/--batch takes no command on the command line",
            )),
        );
    }
    T::configure(&cli);
    if let Err(f) = g.enter_netns() {
        exit(T::NAME, Err(f));
    }
    let force = g.force;
    let mut s = T::open(&cli);
    // the session is dropped before the exit: its state lock removes the lock file as it
    // lets go (mpt_bpf::pinned::NsLock), so that nothing outlives the namespace
    if let Some(path) = batch {
        let code = crate::batch::run_file(T::NAME, &mut s, &path, style, force);
        drop(s);
        std::process::exit(code);
    }
    let r = s.run_one(command.unwrap_or_else(T::default_command), style);
    let fin = s.finish();
    drop(s);
    exit(T::NAME, r.and(fin));
}

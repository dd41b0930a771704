//! ila: thin binary over the ila library and the shared crates. Parse (syntax only), enter the
//! namespace, then one command or a batch.

use clap::{CommandFactory, Parser};
use ila::cli::{Cli, Command};
use ila::session::Session;
use mpt_cli::Failure;

const TOOL: &str = "ila";

fn main() {
    mpt_cli::docs::handle(Cli::command);
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => mpt_cli::args::exit_on_error(TOOL, e, &Cli::command()),
    };
    let style = cli.global.style();
    // the command's syntax before anything touches the system
    let command = match &cli.cmd {
        Some(c) => c.command(),
        None => Ok(Command::default_show()),
    };
    if cli.global.batch.is_some() && cli.cmd.is_some() {
        mpt_cli::exit(
            TOOL,
            Err(Failure::usage(
                "-b/--batch takes no command on the command line",
            )),
        );
    }
    let command = match (command, &cli.global.batch) {
        (Err(f), None) => mpt_cli::exit(TOOL, Err(f)),
        (c, _) => c,
    };
    mpt_bpf::configure(TOOL, cli.global.verbose, cli.global.lock_wait());
    if let Err(f) = cli.global.enter_netns() {
        mpt_cli::exit(TOOL, Err(f));
    }
    let mut s = Session::new(cli.global.clone(), cli.backend);
    if let Some(path) = &cli.global.batch {
        let force = cli.global.force;
        std::process::exit(mpt_cli::batch::run_file(TOOL, &mut s, path, style, force));
    }
    let r = command
        .and_then(|c| ila::cmd::run(&mut s, &c))
        .map(|out| ila::view::print(&out, style));
    let fin = mpt_cli::batch::BatchTool::finish(&mut s);
    mpt_cli::exit(TOOL, r.and(fin));
}

//! mproute: thin binary over the mproute library and the shared crates. Parse (syntax only),
//! enter the namespace, then one command, a batch, or `dataplane watch`.

use clap::{CommandFactory, Parser};
use mproute::cli::{Cli, Command};
use mproute::grammar::{DpSpec, ShowSpec};
use mproute::session::Session;
use mpt_cli::Failure;

const TOOL: &str = "mproute";

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
        None => Ok(Command::Show(ShowSpec::default())),
    };
    if cli.global.batch.is_some() && cli.cmd.is_some() {
        mpt_cli::exit(
            TOOL,
            Err(Failure::usage(
                "-b/--batch takes no command on the command line",
            )),
        );
    }
    mpt_bpf::configure(TOOL, cli.global.verbose, cli.global.lock_wait());
    if let Err(f) = cli.global.enter_netns() {
        mpt_cli::exit(TOOL, Err(f));
    }
    let mut s = Session::new(cli.global.clone());
    s.use_nh_objects = cli.nexthop_objects;
    if let Some(path) = &cli.global.batch {
        let force = cli.global.force;
        std::process::exit(mpt_cli::batch::run_file(TOOL, &mut s, path, style, force));
    }
    let command = match command {
        Ok(c) => c,
        Err(f) => mpt_cli::exit(TOOL, Err(f)),
    };
    s.read_only = matches!(command, Command::Show(_));
    if command == Command::Dataplane(DpSpec::Watch) && !cli.global.check {
        mpt_cli::exit(TOOL, mproute::cmd::watch::run(&mut s, style));
    }
    let r = mproute::cmd::run(&mut s, &command).map(|out| mproute::view::print(&out, style));
    let fin = s.finish();
    mpt_cli::exit(TOOL, r.and(fin));
}

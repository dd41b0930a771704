//! mproute: thin binary over the mproute library and the shared crates.

use std::io::{IsTerminal, Read};

use clap::Parser;
use mproute::cmd::{Ctx, Output};
use mproute::Cli;
use mpt_cli::batch;
use mpt_cli::render::{print_json, print_line, print_rows, Style};
use mpt_cli::{Failure, EXIT_OK, EXIT_SYSTEM, EXIT_USAGE};

const TOOL: &str = "mproute";

fn print(out: &Output, style: Style) {
    match out {
        Output::Routes(rows) => print_rows(rows, style),
        Output::Get(row) => print_rows(std::slice::from_ref(row.as_ref()), style),
        Output::Dataplane(v) => {
            if style.json {
                print_json(v, style.pretty);
            } else {
                print_rows(&v.attachments, style);
                let c: Vec<String> = v
                    .counters
                    .iter()
                    .filter(|(_, n)| **n > 0)
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect();
                if !c.is_empty() {
                    print_line(&format!("counters: {}", c.join(", ")));
                }
                if let Some(c) = &v.counter_slots {
                    print_line(&c.line());
                }
                if let Some(f) = &v.fib_check {
                    print_line(&f.line());
                    for u in &f.unverified {
                        print_line(&format!("  {} metric {}: {}", u.dst, u.metric, u.why));
                    }
                }
                for n in &v.notes {
                    print_line(&format!("note: {n}"));
                }
            }
        }
        Output::Change(rep) => {
            if style.json {
                print_json(rep, style.pretty);
            }
        }
        Output::Actions { changed, rows } => {
            if style.json {
                print_json(
                    &serde_json::json!({"changed": changed, "actions": rows}),
                    style.pretty,
                );
            } else {
                print_rows(rows, style);
            }
        }
    }
}

/// Split `route VERB ARGS` / `VERB ARGS`.
fn verb_args(words: &[String]) -> Option<(&str, &[String])> {
    match words {
        [obj, verb, rest @ ..] if obj == "route" => Some((verb.as_str(), rest)),
        [verb, rest @ ..] => Some((verb.as_str(), rest)),
        [] => None,
    }
}

fn run_batch(ctx: &mut Ctx, path: &std::path::Path, style: Style) -> i32 {
    let (name, text) = if path.as_os_str() == "-" {
        let mut s = String::new();
        if let Err(e) = std::io::stdin().read_to_string(&mut s) {
            Failure::system(format!("read batch from standard input: {e}")).eprint(TOOL);
            return EXIT_SYSTEM;
        }
        ("-".to_string(), s)
    } else {
        match std::fs::read_to_string(path) {
            Ok(s) => (path.display().to_string(), s),
            Err(e) => {
                Failure::system(format!("read batch file {}: {e}", path.display())).eprint(TOOL);
                return EXIT_SYSTEM;
            }
        }
    };
    let lines = match batch::parse(&text) {
        Ok(l) => l,
        Err((line, e)) => {
            Failure::usage(e).at(&name, line).eprint(TOOL);
            return EXIT_USAGE;
        }
    };
    let progress = std::io::stderr().is_terminal() && lines.len() >= 1000;
    let total = lines.len();
    let items: Vec<(usize, String, Vec<String>)> = lines
        .iter()
        .filter_map(|l| verb_args(&l.words).map(|(v, a)| (l.line, v.to_string(), a.to_vec())))
        .collect();
    let mut worst = EXIT_OK;
    let mut done = 0usize;
    let mut emit = |line: usize, r: Result<Output, Failure>| {
        done += 1;
        match r {
            Ok(out) => print(&out, style),
            Err(f) => {
                if progress {
                    eprint!("\r\x1b[K");
                }
                f.clone().at(&name, line).eprint(TOOL);
                worst = worst.max(f.code);
            }
        }
        if progress && done % 1000 == 0 {
            eprint!("\r{TOOL}: {done}/{total} commands");
        }
    };
    ctx.batch(&items, &mut emit);
    if progress {
        eprintln!("\r\x1b[K{TOOL}: {done} of {total} commands run");
    }
    if let Err(f) = ctx.finish() {
        f.eprint(TOOL);
        worst = worst.max(f.code);
    }
    worst
}

/// `dataplane watch`: verify the managed routes at start and again after every change of
/// routes, rules, addresses, links or forwarding settings (a burst counts once), printing the
/// check each time. Every few seconds it also compares the FIB generation with the one last
/// reported, for the changes the kernel announces to nobody (a route cache flush). Runs until
/// interrupted or until its output is closed; returns only on failure.
fn watch(ctx: &mut Ctx, style: Style) -> Result<(), Failure> {
    use mpt_netlink::events::{self as ev, Events};
    use std::io::Write;
    use std::time::Duration;
    let mut events = Events::subscribe(&[
        ev::RTNLGRP_LINK,
        ev::RTNLGRP_IPV4_IFADDR,
        ev::RTNLGRP_IPV4_ROUTE,
        ev::RTNLGRP_IPV4_RULE,
        ev::RTNLGRP_IPV4_NETCONF,
        // IPv6: its holes and drift are verified too (the IPv4 generation does not move)
        ev::RTNLGRP_IPV6_IFADDR,
        ev::RTNLGRP_IPV6_ROUTE,
        ev::RTNLGRP_IPV6_RULE,
        ev::RTNLGRP_NEXTHOP,
    ])
    .map_err(Failure::from)?;
    // the generation the routes were last verified at (None: not verified, try again)
    let mut last: Option<u32>;
    loop {
        let line = match ctx.verify_now() {
            Ok(f) => {
                last = f.verified_at;
                if style.json {
                    serde_json::to_string(&f).unwrap_or_default()
                } else {
                    f.line()
                }
            }
            // a failed round is reported; the next change tries again
            Err(f) => {
                last = None;
                f.eprint(TOOL);
                String::new()
            }
        };
        if !line.is_empty() {
            let mut out = std::io::stdout().lock();
            if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                return Ok(()); // nobody reads any more
            }
        }
        loop {
            let changed = events
                .wait_change(
                    Some(Duration::from_secs(5)),
                    Duration::from_millis(100),
                    Duration::from_secs(2),
                )
                .map_err(Failure::from)?;
            if changed || last.is_none() || ctx.generation().ok() != last {
                break;
            }
        }
    }
}

fn main() {
    mpt_cli::docs::handle(<Cli as clap::CommandFactory>::command);
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    let style = Style {
        json: cli.global.json,
        pretty: cli.global.pretty,
    };
    mpt_bpf::set_verbose(cli.global.verbose);
    if let Some(ns) = &cli.global.netns {
        if let Err(e) = mpt_sys::netns::enter(ns) {
            mpt_cli::exit(TOOL, Err(Failure::system(e.to_string())));
        }
    }
    let mut ctx = Ctx::new(cli.global.clone());
    ctx.use_nh_objects = cli.nexthop_objects;
    if let Some(mproute::cli::Cmd::Dataplane(a)) = &cli.cmd {
        if a.args.len() == 1 && a.args[0] == "watch" && cli.global.batch.is_none() {
            mpt_cli::exit(TOOL, watch(&mut ctx, style));
        }
    }
    if let Some(path) = &cli.global.batch {
        if cli.cmd.is_some() {
            mpt_cli::exit(
                TOOL,
                Err(Failure::usage(
                    "-b/--batch takes no command on the command line",
                )),
            );
        }
        std::process::exit(run_batch(&mut ctx, path, style));
    }
    let (verb, args) = match &cli.cmd {
        Some(c) => c.parts(),
        None => ("show", &[][..]),
    };
    let r = ctx.run(verb, args).map(|out| print(&out, style));
    let fin = ctx.finish();
    mpt_cli::exit(TOOL, r.and(fin));
}

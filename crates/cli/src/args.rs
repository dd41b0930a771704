//! The command line's first stage, shared by the tools: clap's own errors (an unknown command
//! or option, a value that does not parse) turned into the tools' one-line form, `TOOL: what
//! was wrong` and a `hint:` line, exit code 1; `--help` and `--version` printed as clap prints
//! them, exit code 0.

use clap::error::{ContextKind, ContextValue, ErrorKind};

use crate::{Failure, EXIT_OK};

/// clap's error as one line, with a hint naming what `cmd` accepts where that helps.
pub fn clap_failure(e: &clap::Error, cmd: &clap::Command) -> Failure {
    let ctx = |k: ContextKind| match e.get(k) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        Some(ContextValue::Strings(v)) => v.first().cloned(),
        _ => None,
    };
    let name = cmd.get_name();
    match e.kind() {
        ErrorKind::InvalidSubcommand => {
            let what = ctx(ContextKind::InvalidSubcommand).unwrap_or_default();
            let verbs: Vec<&str> = cmd
                .get_subcommands()
                .filter(|s| !s.is_hide_set())
                .map(|s| s.get_name())
                .collect();
            Failure::usage(format!("unknown command \"{what}\"")).hint(format!(
                "the commands are {}; see {name} --help",
                verbs.join(", ")
            ))
        }
        ErrorKind::UnknownArgument => {
            let what = ctx(ContextKind::InvalidArg).unwrap_or_default();
            Failure::usage(format!("unknown option \"{what}\"")).hint(format!("see {name} --help"))
        }
        _ => {
            let text = e.render().to_string();
            let first = text
                .lines()
                .next()
                .unwrap_or_default()
                .trim_start_matches("error: ")
                .trim()
                .to_string();
            Failure::usage(first).hint(format!("see {name} --help"))
        }
    }
}

/// Handle a failed parse of the command line: print help or version as asked (exit 0), or the
/// error as one line (exit 1).
pub fn exit_on_error(tool: &str, e: clap::Error, cmd: &clap::Command) -> ! {
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            std::process::exit(EXIT_OK);
        }
        _ => crate::exit(tool, Err(clap_failure(&e, cmd))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd() -> clap::Command {
        clap::Command::new("tool")
            .arg(
                clap::Arg::new("json")
                    .short('j')
                    .action(clap::ArgAction::SetTrue),
            )
            .subcommand(clap::Command::new("add"))
            .subcommand(clap::Command::new("show"))
    }

    #[test]
    fn one_line_with_a_hint() {
        let e = cmd()
            .try_get_matches_from(["tool", "frob"])
            .expect_err("unknown");
        let f = clap_failure(&e, &cmd());
        assert_eq!(f.message, "unknown command \"frob\"");
        assert_eq!(f.code, crate::EXIT_USAGE);
        assert!(f.hint.as_deref().is_some_and(|h| h.contains("add, show")));
        let e = cmd()
            .try_get_matches_from(["tool", "--frob"])
            .expect_err("unknown");
        let f = clap_failure(&e, &cmd());
        assert_eq!(f.message, "unknown option \"--frob\"");
        assert!(!f.message.contains('\n'));
    }
}

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

/// The words after a command word, parsed by the tool's own grammar (ila's and pfanout's
/// objects; mproute has its own type for its help text).
#[derive(Debug, Clone, clap::Args)]
pub struct Words {
    /// The command's words.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    pub args: Vec<String>,
}

impl From<Vec<String>> for Words {
    fn from(args: Vec<String>) -> Self {
        Words { args }
    }
}

/// One entry of a tool's table of command words: the word (or an alias) and the subcommand
/// its remaining words make.
pub type Entry<A, O> = (&'static str, fn(A) -> O);

/// Parse one batch line of tool `tool` (command line `Cli`, subcommands `O`): a first word in
/// `table` makes its subcommand from the rest, which `command` turns into the typed command;
/// any other line is parsed by clap as one of the subcommands ([`parse_subcommand`]) so that
/// the failure has clap's wording, in one line with a hint naming what `Cli` accepts.
pub fn parse_line<Cli: clap::CommandFactory, O: clap::Subcommand, A: From<Vec<String>>, C>(
    tool: &'static str,
    words: Vec<String>,
    table: &[Entry<A, O>],
    command: impl Fn(&O) -> Result<C, Failure>,
) -> Result<C, Failure> {
    if let Some(first) = words.first() {
        if let Some((_, make)) = table.iter().find(|(n, _)| n == first) {
            // the words move on (a batch of 100,000 lines cloned a million of them here)
            let mut rest = words;
            rest.remove(0);
            return command(&make(A::from(rest)));
        }
    }
    match parse_subcommand::<O>(tool, &words) {
        Ok(o) => command(&o),
        // clap's command only for the message (building it costs more than the rest of a
        // batch line's work)
        Err(e) => Err(clap_failure(&e, &Cli::command())),
    }
}

/// A tool's subcommands as a batch line has them: parsed without a binary name, help or
/// version (what the first word of a line cannot make goes here, so that the failure has
/// clap's wording).
pub fn line_command<O: clap::Subcommand>(tool: &'static str) -> clap::Command {
    O::augment_subcommands(
        clap::Command::new(tool)
            .no_binary_name(true)
            .disable_help_flag(true)
            .disable_help_subcommand(true)
            .subcommand_required(true)
            .arg_required_else_help(true),
    )
}

/// Parse `words` as one of a tool's subcommands ([`line_command`]).
pub fn parse_subcommand<O: clap::Subcommand>(
    tool: &'static str,
    words: &[String],
) -> Result<O, clap::Error> {
    let m = line_command::<O>(tool).try_get_matches_from(words)?;
    O::from_arg_matches(&m)
}

/// The words of a line written as one string (tests).
pub fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(String::from).collect()
}

/// The words of `table` and the names and aliases clap knows for `cmd`'s subcommands, each
/// sorted: a tool's test holds the two equal, so that a batch line and the command line accept
/// the same words.
pub fn table_and_clap_names<A, O>(
    table: &[Entry<A, O>],
    cmd: &clap::Command,
) -> (Vec<String>, Vec<String>) {
    let mut ours: Vec<String> = table.iter().map(|(n, _)| n.to_string()).collect();
    let mut clap_names: Vec<String> = cmd
        .get_subcommands()
        .flat_map(|s| {
            std::iter::once(s.get_name().to_string()).chain(s.get_all_aliases().map(String::from))
        })
        .collect();
    ours.sort();
    clap_names.sort();
    (ours, clap_names)
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

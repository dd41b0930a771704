//! ila as a library: its clap definition (used by xtask for the man page and completions).
//! Only the shared skeleton exists so far; the commands come with their own issue.

use clap::Parser;
use mpt_cli::GlobalOpts;

/// ila: Identifier-Locator Addressing translation tables (ip ila grammar).
#[derive(Debug, Parser)]
#[command(
    name = "ila",
    version,
    about = "Identifier-Locator Addressing translation tables (ip ila grammar)",
    after_help = "No commands are implemented yet: this build carries only the options shared with mproute.\n\nExit status: 0 success, 1 usage or syntax error, 2 the kernel or the system refused."
)]
pub struct Cli {
    /// Options shared by mproute, ila and pfanout.
    #[command(flatten)]
    pub global: GlobalOpts,
    /// Command words (none are implemented yet).
    #[arg(trailing_var_arg = true, value_name = "COMMAND")]
    pub words: Vec<String>,
}

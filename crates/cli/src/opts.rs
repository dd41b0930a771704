//! Global options, identical in all three tools.

use std::path::PathBuf;

/// Options every tool accepts before its object and verb, with iproute2's letters.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct GlobalOpts {
    /// Output JSON.
    #[arg(short = 'j', long = "json", global = true)]
    pub json: bool,
    /// Pretty-print JSON (implies nothing without -j, as in iproute2).
    #[arg(short = 'p', long = "pretty", global = true)]
    pub pretty: bool,
    /// Run in network namespace NAME (/run/netns/NAME), network namespace only.
    #[arg(short = 'n', long = "netns", value_name = "NAME", global = true)]
    pub netns: Option<String>,
    /// Read commands from FILE, one per line ("-" for standard input).
    #[arg(short = 'b', long = "batch", value_name = "FILE", global = true)]
    pub batch: Option<PathBuf>,
    /// In batch mode, go on after a failed line (the exit code still reports it).
    #[arg(long = "force", global = true)]
    pub force: bool,
    /// Show details.
    #[arg(short = 'd', long = "details", global = true)]
    pub details: bool,
    /// Show statistics.
    #[arg(short = 's', long = "stats", global = true)]
    pub stats: bool,
    /// Dry run: parse, resolve and compare with the kernel, report what each command (each
    /// batch line) would change, and change nothing. Exit 0 when every command could be
    /// applied.
    #[arg(long = "check", global = true)]
    pub check: bool,
    /// Say more about what is done (to standard error).
    #[arg(short = 'v', long = "verbose", global = true)]
    pub verbose: bool,
}

//! Global options, identical in all three tools.

use std::path::PathBuf;

/// Options every tool accepts before its object and verb, with iproute2's letters. Before the
/// command word they are also read as `ip` reads its options, one dash or two and abbreviated
/// in ip's order (`-json`, `-js`, `-stats`, `-netns NAME`, `-fo`): [`crate::abbrev::rewrite`].
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
    /// Show statistics (-s -s: more, where a tool has more; ip's -statistics too).
    #[arg(short = 's', long = "stats", alias = "statistics", action = clap::ArgAction::Count, global = true)]
    pub stats: u8,
    /// One line per object and no header, as ip's -oneline (a cell of several lines, such as
    /// a multipath route's nexthops, joined with a backslash).
    #[arg(short = 'o', long = "oneline", global = true)]
    pub oneline: bool,
    /// IPv4 only, as ip's -4: mproute's show and flush select IPv4 routes (accepted, without
    /// effect, by commands that have no address family).
    #[arg(short = '4', global = true, overrides_with_all = ["ipv6", "family"])]
    pub ipv4: bool,
    /// IPv6 only, as ip's -6: mproute's show and flush select IPv6 routes (accepted, without
    /// effect, by commands that have no address family).
    #[arg(short = '6', global = true, overrides_with_all = ["ipv4", "family"])]
    pub ipv6: bool,
    /// Address family: inet or inet6 (ip's -family; -4 and -6 are its short forms).
    #[arg(short = 'f', long = "family", value_name = "FAMILY", value_parser = ["inet", "inet6"], global = true, overrides_with_all = ["ipv4", "ipv6"])]
    pub family: Option<String>,
    /// Accepted as ip accepts it (-human, -human-readable); the tools' numbers are unchanged.
    #[arg(long = "human", alias = "human-readable", global = true, hide = true)]
    pub human: bool,
    /// Dry run: parse, resolve and compare with the kernel, report what each command (each
    /// batch line) would change, and change nothing. Exit 0 when every command could be
    /// applied.
    #[arg(long = "check", global = true)]
    pub check: bool,
    /// Say more about what is done (to standard error); -vv: more.
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Wait at most SECONDS for another invocation that holds the namespace's state (mproute's
    /// routes, ila's tables), then fail with exit 2 naming it (default 60; 0: do not wait).
    #[arg(long = "wait", value_name = "SECONDS", global = true)]
    pub wait: Option<u64>,
}

impl GlobalOpts {
    /// How to print (`-j`, `-p`), made the process's style ([`crate::render::Style::install`]).
    pub fn style(&self) -> crate::render::Style {
        crate::render::Style {
            json: self.json,
            pretty: self.pretty,
            oneline: self.oneline,
        }
        .install()
    }

    /// The address family -4, -6 or -family ask for (`None`: both).
    pub fn family(&self) -> Option<mpt_model::Family> {
        if self.ipv4 || self.family.as_deref() == Some("inet") {
            Some(mpt_model::Family::V4)
        } else if self.ipv6 || self.family.as_deref() == Some("inet6") {
            Some(mpt_model::Family::V6)
        } else {
            None
        }
    }

    /// How long to wait for another invocation's lock (`--wait`, else the default).
    pub fn lock_wait(&self) -> Option<std::time::Duration> {
        self.wait.map(std::time::Duration::from_secs)
    }

    /// Enter the namespace `-n` names, if any: an invalid name is a usage error (exit 1), a
    /// namespace that cannot be entered the system's (exit 2).
    pub fn enter_netns(&self) -> Result<(), crate::Failure> {
        let Some(ns) = &self.netns else {
            return Ok(());
        };
        if ns.is_empty() || ns.contains('/') || ns == "." || ns == ".." {
            return Err(crate::Failure::usage(format!(
                "-n: invalid network namespace name \"{ns}\""
            ))
            .hint("a name as \"ip netns list\" shows it"));
        }
        mpt_sys::netns::enter(ns).map_err(|e| crate::Failure::system(e.to_string()))
    }
}

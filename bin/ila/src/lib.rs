//! ila: Identifier-Locator Addressing translation tables in `ip ila` grammar, over the kernel's
//! ILA module where it exists and ila's BPF translator where it does not.
//!
//! - [`cli`]: the command line (clap) and batch lines, into typed commands; [`grammar`]: the
//!   words of each object's verbs;
//! - [`session`]: one invocation (the options, and the backend opened on first use);
//! - [`cmd`]: one module per object (`xlat`, `route`, `dataplane`), typed command to output,
//!   and the tool's entry (one command, or the lines of a batch);
//! - [`backend`]: the kernel's ILA (generic netlink "ila", LWT encap ila) and the BPF
//!   translator (`mpt_bpf::ila`), behind one trait ([`backend::Tables`]) that applies one put
//!   rule (`mpt_model::ila::plan`); `--check` is [`backend::dry::Dry`] over either;
//! - [`view`]: rows, tables and JSON with iproute2's keys.

pub mod backend;
pub mod cli;
pub mod cmd;
pub mod complete;
pub mod docs;
pub mod grammar;
pub mod session;
pub mod view;

pub use cli::Cli;

mpt_cli::docs_are_fresh!(crate::Cli, crate::docs::MANUAL);

//! pfanout: AF_PACKET fanout groups: show them (sock_diag), run them (every mode and flag,
//! rollover, eBPF steering), measure them.
//!
//! Layout: [`cli`] and [`grammar`] turn the command line and batch lines into a typed
//! [`cli::Command`]; [`show`] reads the namespace's packet sockets; [`group`] makes a group of
//! worker sockets in one step and explains the kernel's refusals; [`run`] runs the workers;
//! [`bench`] is the rollover experiment; [`view`] prints; [`session`] drives batches. The
//! sockets themselves are `mpt_sys::packet`, the eBPF program `mpt_bpf::pfanout`, the modes,
//! flags and classic program `mpt_model::fanout`.

pub mod bench;
pub mod check;
pub mod cli;
pub mod grammar;
pub mod group;
pub mod run;
pub mod session;
pub mod show;
pub mod view;

pub use cli::Cli;

mpt_cli::docs_are_fresh!(crate::Cli);

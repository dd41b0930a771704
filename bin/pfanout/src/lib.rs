//! pfanout: AF_PACKET fanout groups: show them (sock_diag), run them (every mode and flag,
//! rollover, eBPF steering), measure them.
//!
//! Layout, as in the other tools: [`cli`] and [`grammar`] turn the command line and batch lines
//! into a typed [`cli::Command`]; [`cmd`] holds the verbs (`show`, `run`, `bench`, and `check`,
//! their dry run); [`view`] is what they answer with and how it is printed; [`session`] is the
//! front door's tool. Below them: [`show`] reads the namespace's packet sockets; [`group`] makes
//! a group of worker sockets in one step and explains the kernel's refusals. The sockets
//! themselves are `mpt_sys::packet`, the eBPF program `mpt_bpf::pfanout`, the modes, flags and
//! classic program `mpt_model::fanout`.

pub mod cli;
pub mod cmd;
pub mod complete;
pub mod docs;
pub mod grammar;
pub mod group;
pub mod session;
pub mod show;
pub mod tap;
pub mod view;

pub use cli::Cli;

mpt_cli::docs_are_fresh!(crate::Cli, crate::docs::MANUAL);

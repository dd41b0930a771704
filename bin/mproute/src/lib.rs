//! mproute as a library: the clap definition (used by xtask for man pages and completions),
//! the route grammar, and the commands. `main.rs` only wires them together.

pub mod cli;
pub mod cmd;
pub mod dpmode;
pub mod fibcheck;
pub mod nhobj;
pub mod parse;
pub mod resolve;
pub mod state;
pub mod view;

pub use cli::Cli;

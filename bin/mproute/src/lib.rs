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

#[cfg(test)]
mod docs_tests {
    /// `man/` and `completions/` hold what `mproute --generate` prints: run
    /// `cargo xtask gen-docs` after changing a command or an option.
    #[test]
    fn man_pages_and_completions_are_fresh() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let cmd = <crate::Cli as clap::CommandFactory>::command();
        let stale = mpt_cli::docs::stale(&cmd, &root).expect("read man/ and completions/");
        assert!(
            stale.is_empty(),
            "stale generated docs (run cargo xtask gen-docs): {stale:?}"
        );
    }
}

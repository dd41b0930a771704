//! mproute as a library: the command line (`cli`, `grammar`: syntax only), names resolved in
//! the target namespace (`resolve`), the front end (`cmd`, one module per verb) and what it
//! answers with (`view`), over the library that owns the work:
//!
//! - `session`: one invocation's socket, state, FIB cache and the work left for its end;
//! - `txn`: the route transaction (state, dataplane group and LPM entry, kernel nexthop
//!   objects, FIB; undone when the kernel refuses); `pipeline`: batches of them in flight;
//! - `store`: mproute's record of the routes it manages, over `mpt_bpf::mproute`;
//! - `verify`: when the dataplane may skip its per-packet kernel FIB lookup; `repair`: drift;
//! - `kernel_nh`: kernel nexthop objects; `hook`: which hook the dataplane uses on a device;
//!   `attachment`: attaching, detaching and reporting the dataplane.
//!
//! `main.rs` only wires them together.

pub mod attachment;
pub mod cli;
pub mod cmd;
pub mod grammar;
pub mod hook;
pub mod kernel_nh;
pub mod pipeline;
pub mod repair;
pub mod resilient;
pub mod resolve;
pub mod restore;
pub mod session;
pub mod store;
pub mod txn;
pub mod verify;
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

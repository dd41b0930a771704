//! mproute as a library. From the top down (no module imports one above it):
//!
//! - the front end: `cli`, `grammar` (syntax only), `pipeline` (the front door's `Tool` and
//!   batches, pipelined), `cmd` (one module per verb; `cmd/check.rs` is the dry run, `--check`);
//! - the library that owns the work: `txn` (the route transaction: state, dataplane group and
//!   LPM entry, kernel nexthop objects, FIB; undone when the kernel refuses; it returns what it
//!   did, the front end reports it), `repair` (`sync`: drift, written by one of two executors,
//!   real or dry), `restore` (nexthop objects deleted with their link), `verify` (when the
//!   dataplane may skip its per-packet kernel FIB lookup), `attachment`, `resilient`;
//! - `view`: what commands answer with (`Output`, rows, reports) and how it is printed;
//! - `session`: one invocation's socket, state, FIB cache and the work left for its end;
//!   `store`: mproute's record of the routes it manages, over `mpt_bpf::mproute`; `kernel_nh`:
//!   kernel nexthop objects; `hook`: which hook the dataplane uses on a device; `resolve`:
//!   names resolved in the target namespace.
//!
//! What a write does is decided once, for the real and the dry run, by
//! `mpt_model::route::plan`; `del` and `flush` by `txn`'s `del_target` and `flush_plan`.
//! `main.rs` is one call of `mpt_cli::tool::main`.

pub mod attachment;
pub mod cli;
pub mod cmd;
pub mod complete;
pub mod docs;
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

mpt_cli::docs_are_fresh!(crate::Cli, crate::docs::MANUAL);

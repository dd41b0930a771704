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

mpt_cli::docs_are_fresh!(crate::Cli);

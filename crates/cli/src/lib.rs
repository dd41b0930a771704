//! What the three binaries share: global options and the first stage of the command line
//! ([`args`]), batch files and their driver ([`batch`]), name resolution from iproute2's files,
//! the renderer (one row type feeds both the table and the JSON), errors and exit codes, and the
//! man pages and completions each tool generates ([`docs`]), and the kernel's refusals a dry
//! run can predict ([`predict`]), and the one front door all three go through ([`tool`]).
//!
//! Commands never print; they return rows or a change report, and [`render`] prints them.

pub mod abbrev;
pub mod args;
pub mod batch;
pub mod complete;
pub mod docs;
pub mod error;
pub mod metrics;
pub mod names;
pub mod opts;
pub mod predict;
pub mod render;
pub mod tool;

pub use error::{exit, Failure, EXIT_OK, EXIT_SYSTEM, EXIT_USAGE};
pub use opts::GlobalOpts;

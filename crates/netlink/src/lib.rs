//! Netlink for the three tools.
//!
//! Boundary: [`msg`] turns typed requests into bytes and bytes into typed answers; it is pure and
//! golden-tested against what iproute2 sends. [`sock`] owns the sockets (neli's low-level
//! `NlSocketHandle`, never its `NlRouter`, which drops extended-ack text), sends requests, matches
//! acknowledgements by sequence number and maps kernel refusals to [`KernelError`]. [`netns`]
//! enters network namespaces and resolves names inside them. Only this crate imports neli.

pub mod error;
pub mod events;
pub mod msg;
pub mod sock;

pub use error::{Error, KernelError};

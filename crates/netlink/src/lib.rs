//! Netlink for the three tools: rtnetlink (routes, nexthop objects, links), generic netlink
//! (family resolution through the controller, then any family's requests and dumps) and
//! sock_diag (packet sockets).
//!
//! Boundary: [`msg`] turns typed requests into bytes and bytes into typed answers; it is pure and
//! golden-tested against what iproute2 sends. [`sock`] owns the sockets (neli's low-level
//! `NlSocketHandle`, never its `NlRouter`, which drops extended-ack text), sends requests, matches
//! acknowledgements by sequence number and maps kernel refusals to [`KernelError`] (errno,
//! extended-ack text, the offending attribute named). [`events`] listens to rtnetlink
//! notifications. Sockets live in the network namespace of the thread that creates them
//! (`mpt_sys::netns`). Only this crate imports neli.

pub mod error;
pub mod events;
pub mod msg;
pub mod sock;

pub use error::{Error, KernelError};

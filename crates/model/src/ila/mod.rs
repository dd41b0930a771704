//! Identifier-Locator Addressing (draft-herbert-intarea-ila, the kernel's `ila.rst`): an IPv6
//! address is a 64-bit locator (where) and a 64-bit identifier (who). Applications see SIR
//! addresses (a SIR prefix and the identifier); the network carries ILA addresses (a locator
//! and the same identifier). Translation replaces the upper 64 bits and keeps the transport
//! checksums right in one of four ways ([`csum`]).
//!
//! - [`locator`]: 64-bit locators in the four-group notation of `ip ila`;
//! - [`csum`]: the checksum arithmetic of translation, defined here once and reproduced by the
//!   BPF translator (`bpf/ila/`);
//! - [`table`]: mappings (receive side), routes (send side) and their rules;
//! - [`plan`]: the put rule of both tables, for every implementation and the dry run.

pub mod csum;
pub mod locator;
pub mod plan;
pub mod table;

pub use csum::{CsumMode, Translated};
pub use locator::Locator;
pub use table::{HookType, IdentType, Mapping, RouteEntry, RouteSpec};

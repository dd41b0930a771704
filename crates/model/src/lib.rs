//! Pure domain model shared by `mproute`, `ila` and `pfanout`.
//!
//! Boundary: no sockets, no files, no libc. Everything here is data and arithmetic that can be
//! unit-tested without privileges: routes ([`route`]: identities and nexthops, multipath
//! algorithms, RFC 2992 hash-threshold selection, FIB verification and drift), the flow hash
//! ([`hash`], which the BPF programs reproduce bit for bit), protocol and table names, AF_PACKET fanout
//! groups ([`fanout`]).

pub mod fanout;
pub mod hash;
pub mod ila;
pub mod names;
pub mod route;

pub use route::algo::Algo;
pub use route::{Family, Nexthop, Route, RouteKey, Verb, MAX_NEXTHOPS, MAX_WEIGHT};

/// Protocol number (`rtm_protocol`) that marks a route as owned by mproute unless the user
/// chose another with `proto P`. Registered as "mproute" in `/etc/iproute2/rt_protos.d/`.
pub const MPROUTE_PROTO: u8 = 245;
/// Name under which [`MPROUTE_PROTO`] is registered.
pub const MPROUTE_PROTO_NAME: &str = "mproute";
/// Protocol number of the FIB routes `ila route` installs (both backends), registered as "ila".
pub const ILA_PROTO: u8 = 246;
/// Name under which [`ILA_PROTO`] is registered.
pub const ILA_PROTO_NAME: &str = "ila";

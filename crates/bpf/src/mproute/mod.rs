//! mproute's BPF side: the state maps and their ABI mirrors ([`abi`], [`state`]), the
//! dataplane's route table ([`route_table`]: LPM tries, nexthop groups, counters; resilient
//! routes' bucket tables in [`resilient`]), loading
//! and attaching the dataplane ([`dataplane`]), and the namespace's FIB generation
//! ([`fib_generation`]). Built on the suite-neutral [`crate::pinned`] and [`crate::attach`].

pub mod abi;
pub mod dataplane;
pub mod fib_generation;
pub mod resilient;
pub mod route_table;
pub mod state;

pub use abi::Reason;

// Above this crate the maps are read and written in the model's terms (`mpt_model::RouteKey`,
// `Algo`, `Nexthop`) and the view types of `state`, `route_table` and `resilient`: the key and
// value conversions are here, and no binary names an `abi` type.

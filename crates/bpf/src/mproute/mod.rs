//! mproute's BPF side: the state maps and their ABI mirrors ([`abi`], [`state`]), the
//! dataplane's route table ([`route_table`]: LPM tries, nexthop groups, counters), loading
//! and attaching the dataplane ([`dataplane`]), and the namespace's FIB generation
//! ([`fib_generation`]). Built on the suite-neutral [`crate::pinned`] and [`crate::attach`].

pub mod abi;
pub mod dataplane;
pub mod fib_generation;
pub mod route_table;
pub mod state;

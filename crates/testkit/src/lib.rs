//! Test kit for root integration tests, BPF fixtures, benchmarks and the demo: throwaway network
//! namespaces (unique names, removed on drop, panics included; `pfanout bench` makes its two
//! with the same type, the one namespace type of the workspace), veth topologies, the `ip -j`
//! oracle, a runner for our tools that decodes their JSON, packet builders and an independent
//! packet parser, traffic generators and AF_PACKET counters, and one PRNG.
//!
//! Nothing here touches the host's interfaces or routes: every device and address lives in a
//! namespace the caller created. The kit depends on pure-Rust crates only, so that `xtask` can
//! use it on a machine that has nothing but rustup.

pub mod ansible;
pub mod capture;
pub mod cmd;
pub mod matrix;
pub mod netns;
pub mod packet;
pub mod progrun;
pub mod rng;
pub mod tool;
pub mod topo;
pub mod traffic;

pub use cmd::Words;
pub use cmd::{bpftool_json, is_root, require_root, run, run_ok};
pub use netns::{leaked, netns_cookie, remove_tool_state, Netns, NS_PREFIX};
pub use rng::XorShift64;
pub use tool::{batch_json_lines, BatchFile, Tool};
pub use topo::{veth, IlaPath, TwoPaths};

/// Remove what mproute keeps for a namespace outside it (see [`remove_tool_state`]).
pub fn remove_mproute_state(cookie: u64) {
    remove_tool_state(cookie);
}

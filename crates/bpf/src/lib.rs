//! `mpt-bpf`: the boundary between our tools and the kernel's BPF machinery.
//!
//! Everything that loads BPF objects, pins or attaches programs and reads or writes BPF maps
//! lives in this crate; the tools' binaries never import `libbpf-rs` (or `libbpf-sys`).
//!
//! Suite-neutral layers, one per concern, for every tool:
//! - [`pinned`]: a suite's per-namespace state (its maps held by an anchor program on `lo`,
//!   pinned under `/sys/fs/bpf/<suite>/<netns-cookie>/`, an ABI version, a per-namespace lock),
//!   found the same way with `-n NAME` and under `ip netns exec NAME`;
//! - [`attach`]: XDP and tcx attachments (legacy, found again by the next invocation);
//! - [`features`]: what the running kernel has (probed, never read off its version);
//! - [`prog`]: loaded programs by id; [`log`]: libbpf's messages;
//! - [`error`]: typed errors with a kind to choose a hint from.
//!
//! Then one module per tool's programs and maps ([`mproute`], [`ila`]), whose structs are defined once in
//! `bpf/include/mpt/*_abi.h` and mirrored with size and offset checks; [`pfanout`], the
//! steering program of pfanout's fanout groups in mode `ebpf` (no maps, no pinned state); and
//! the generated skeletons ([`skel`]).

pub mod attach;
pub mod batch;
pub mod error;
pub mod features;
pub mod grow;
pub mod ila;
mod layout;
pub mod log;
pub mod mproute;
pub mod pfanout;
pub mod pinned;
pub mod prog;
pub mod skel;

pub use error::{Error, ErrorKind};
pub use log::set_verbose;

/// What a tool tells the BPF layer once, before any command: its name (for the notes the state
/// layer prints), the number of `-v`s (one: each netlink request and map write, one line each,
/// [`mpt_sys::trace`]; two: libbpf's and the verifier's whole words too) and `--wait` (how long
/// to wait for another invocation's lock; [`pinned::DEFAULT_LOCK_WAIT`] without).
pub fn configure(tool: &'static str, verbose: u8, wait: Option<std::time::Duration>) {
    mpt_sys::trace::set_level(tool, verbose);
    set_verbose(verbose >= 2);
    pinned::set_lock_wait(pinned::LockWait {
        limit: wait.unwrap_or(pinned::DEFAULT_LOCK_WAIT),
        tool,
    });
}

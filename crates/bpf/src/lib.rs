//! `mpt-bpf`: the boundary between mproute and the kernel's BPF machinery.
//!
//! Everything that loads BPF objects, pins or attaches programs and reads or
//! writes BPF maps lives in this crate, behind typed maps whose layouts are
//! defined once in `bpf/include/mpt/*.h` and mirrored in [`abi`]. Binaries
//! never import `libbpf-rs` (or `libbpf-sys`) directly.

pub mod abi;
pub mod dp;
pub mod dpmaps;
pub mod skel;
pub mod state;

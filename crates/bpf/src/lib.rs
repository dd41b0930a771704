//! `mpt-bpf`: the boundary between mproute and the kernel's BPF machinery.
//!
//! Everything that loads BPF objects, pins or attaches programs and reads or
//! writes BPF maps lives in this crate, behind typed maps whose layouts are
//! defined once in `bpf/include/mpt/*.h` and mirrored in [`abi`]. Binaries
//! never import `libbpf-rs` (or `libbpf-sys`) directly.

pub mod abi;
pub mod dp;
pub mod dpmaps;
pub mod fibgen;
pub mod prog;
pub mod skel;
pub mod state;

/// Route libbpf's own messages: to standard error with `verbose` (verifier logs included),
/// nowhere otherwise. Operators get one sentence from our error instead.
pub fn set_verbose(verbose: bool) {
    fn eprint(_: libbpf_rs::PrintLevel, msg: String) {
        eprint!("{msg}");
    }
    if verbose {
        libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Debug, eprint)));
    } else {
        libbpf_rs::set_print(None);
    }
}

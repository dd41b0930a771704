//! The ILA translator's BPF side: the per-namespace tables and their ABI mirrors ([`abi`],
//! [`state`]: a [`crate::pinned`] suite, "ila"), and loading and attaching the translator
//! ([`dataplane`]: XDP or tcx on ingress, tcx on egress, through [`crate::attach`]).
//!
//! The programs are `bpf/ila/ila.bpf.c`; the maps `bpf/ila/maps.bpf.h`; the structs
//! `bpf/include/mpt/ila_abi.h`.

pub mod abi;
pub mod dataplane;
pub mod state;

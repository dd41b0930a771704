//! The namespace's FIB generations, read from the kernel with `bpf/mproute/fibgen.bpf.c`.
//!
//! The kernel increments `net->ipv4.rt_genid` on every change that can alter the answer of an
//! IPv4 FIB lookup: a route inserted, a rule added or deleted, an address or link event, and a
//! route replaced or deleted after a lookup matched it. User space verifies the managed routes
//! against a FIB dump taken between two readings of the generation; the dataplane then skips
//! its per-packet kernel lookup for as long as the generation stays the same.

use std::io;
use std::mem::MaybeUninit;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{OpenObject, ProgramInput};

use crate::error::Error;
use crate::skel::mproute::fibgen::FibgenSkelBuilder;

/// The calling thread's namespace's FIB generations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FibGen {
    /// `net->ipv4.rt_genid`.
    pub v4: u32,
    /// `net->ipv6.fib6_sernum` (route deletions leave it alone: informational only).
    pub v6: u32,
    /// `net->ipv4.fib_has_custom_rules`: an IPv4 rule was ever added or deleted (the kernel
    /// never clears it).
    pub custom_rules4: bool,
}

/// A loaded reader: load once, read the generation as often as needed.
pub struct FibGenReader {
    skel: crate::skel::mproute::fibgen::FibgenSkel<'static>,
}

impl std::fmt::Debug for FibGenReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FibGenReader").finish_non_exhaustive()
    }
}

impl FibGenReader {
    /// Whether the reader can read anything on this kernel: it reaches the namespace through
    /// the kernel's skb (`bpf_cast_to_kern_ctx`, Linux 6.2+).
    pub fn supported() -> bool {
        crate::features::kern_ctx()
    }

    /// Load the reader (a small never-attached program).
    pub fn new() -> Result<Self, Error> {
        // The skeleton borrows its object storage for as long as it lives; one small
        // allocation per reader, kept with it.
        let storage: &'static mut MaybeUninit<OpenObject> =
            Box::leak(Box::new(MaybeUninit::uninit()));
        let open = FibgenSkelBuilder::default()
            .open(storage)
            .map_err(|source| Error::libbpf("open the FIB generation reader")(source))?;
        let skel = Error::loading("load the FIB generation reader", || open.load())?;
        Ok(FibGenReader { skel })
    }

    /// The generations of the calling thread's network namespace now.
    pub fn read(&mut self) -> Result<FibGen, Error> {
        // An Ethernet-sized zero frame: the kernel hands it to the namespace's loopback device.
        let pkt = [0u8; 64];
        self.skel
            .progs
            .mpt_fib_gen
            .test_run(ProgramInput {
                data_in: Some(&pkt),
                repeat: 1,
                ..Default::default()
            })
            .map_err(|source| Error::libbpf("run the FIB generation reader")(source))?;
        let bss = self.skel.maps.bss_data.as_deref_mut().ok_or_else(|| {
            Error::io(
                "read the FIB generation",
                io::Error::other("the reader's .bss is not mapped"),
            )
        })?;
        if bss.mpt_fib_seen == 0 {
            return Err(Error::io(
                "read the FIB generation",
                io::Error::other("the test run had no network namespace"),
            ));
        }
        bss.mpt_fib_seen = 0;
        Ok(FibGen {
            v4: bss.mpt_fib4_gen,
            v6: bss.mpt_fib6_gen,
            custom_rules4: bss.mpt_fib4_custom_rules != 0,
        })
    }
}

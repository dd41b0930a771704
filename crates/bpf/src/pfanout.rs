//! pfanout's steering program: `bpf/pfanout/pfanout_steer.bpf.c`, for AF_PACKET fanout groups in
//! mode `ebpf` (`PACKET_FANOUT_EBPF`).
//!
//! The kernel runs the program on every packet of the group and gives the packet to member
//! `return value % members`. The value is mproute's symmetric flow hash with ports,
//! [`mpt_model::hash::flow_hash`]`(key, true, seed)` of the packet's flow (ICMP errors: of the
//! flow they quote; fragments: by addresses only, as `flow_hash(key, false, seed)`; anything
//! that is not IPv4 or IPv6: 0), so both directions of a flow, and the errors about it, go to
//! the same member, and user space can tell which one.
//!
//! The program has no maps and nothing is pinned: the group holds the program once
//! `PACKET_FANOUT_DATA` installed it, and goes with its last socket.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::OpenObject;

use crate::error::Error;
use crate::skel::pfanout::pfanout_steer::PfanoutSteerSkelBuilder;

/// The program's name, as the kernel reports it.
pub const PROG_NAME: &str = "pfanout_steer";

/// The loaded steering program (kept loaded as long as this value lives; the fanout group keeps
/// its own reference once installed).
#[derive(Debug)]
pub struct Steering {
    /// The program (a descriptor of our own: the object it came from is closed).
    fd: OwnedFd,
}

impl Steering {
    /// Open and load `pfanout_steer` with `seed`.
    pub fn load(seed: u32) -> Result<Steering, Error> {
        let mut storage = MaybeUninit::<OpenObject>::uninit();
        let mut open = PfanoutSteerSkelBuilder::default()
            .open(&mut storage)
            .map_err(Error::libbpf("open the pfanout steering BPF object"))?;
        match open.maps.rodata_data.as_deref_mut() {
            Some(ro) => ro.pfanout_seed = seed,
            None => {
                return Err(Error::io(
                    "set the pfanout steering program's seed",
                    io::Error::from_raw_os_error(libc::EINVAL),
                ))
            }
        }
        let skel = Error::loading("load the pfanout steering program", || open.load())?;
        // Our own descriptor, so the skeleton (which borrows `storage`) can go: the program
        // holds its rodata map, and stays loaded while a descriptor or a fanout group holds it.
        let fd = skel
            .progs
            .pfanout_steer
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| Error::io("duplicate the pfanout steering program's descriptor", e))?;
        Ok(Steering { fd })
    }

    /// Its program fd, for PACKET_FANOUT_DATA.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

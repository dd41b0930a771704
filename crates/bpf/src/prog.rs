//! Loaded programs, found by id: their descriptors, names, maps and run-time statistics, and the
//! kernel's statistics switch (`BPF_ENABLE_STATS`).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::error::Error;

/// A descriptor of program `id`.
pub fn fd(id: u32) -> Result<OwnedFd, Error> {
    // SAFETY: always safe to call; returns an fd or a negative errno.
    let fd = unsafe { libbpf_sys::bpf_prog_get_fd_by_id(id) };
    if fd < 0 {
        return Err(Error::sys(format!("open program {id}"), -fd));
    }
    // SAFETY: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What the kernel says of a loaded program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgInfo {
    /// Its name (as the kernel truncates it: at most 15 characters).
    pub name: String,
    /// The maps it uses.
    pub map_ids: Vec<u32>,
    /// Nanoseconds spent in it since statistics were turned on.
    pub run_time_ns: u64,
    /// Runs since statistics were turned on.
    pub run_cnt: u64,
}

/// Name, maps and statistics of program `id`.
pub fn info(id: u32) -> Result<ProgInfo, Error> {
    let fd = fd(id)?;
    let mut map_ids = [0u32; 32];
    let mut info = libbpf_sys::bpf_prog_info {
        nr_map_ids: map_ids.len() as u32,
        map_ids: map_ids.as_mut_ptr() as u64,
        ..Default::default()
    };
    let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: info and map_ids outlive the call; len is info's size.
    let rc = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len) };
    if rc < 0 {
        return Err(Error::sys(format!("info of program {id}"), -rc));
    }
    let name: Vec<u8> = info
        .name
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    let n = (info.nr_map_ids as usize).min(map_ids.len());
    Ok(ProgInfo {
        name: String::from_utf8_lossy(&name).into_owned(),
        map_ids: map_ids[..n].to_vec(),
        run_time_ns: info.run_time_ns,
        run_cnt: info.run_cnt,
    })
}

/// Turn the kernel's BPF run-time statistics on until the returned descriptor is closed (they
/// cost two clock reads per program run).
pub fn enable_run_time_stats() -> Result<OwnedFd, Error> {
    // SAFETY: returns an fd or a negative errno.
    let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
    if fd < 0 {
        return Err(Error::sys(
            "turn on BPF run-time statistics (BPF_ENABLE_STATS)",
            fd,
        ));
    }
    // SAFETY: a fresh fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

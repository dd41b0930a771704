//! ethtool ioctls (`SIOCETHTOOL`): what a device's driver offers and how it is set.

use std::os::fd::AsRawFd;

use crate::Error;

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GGRO: u32 = 0x2b;
const ETHTOOL_SGRO: u32 = 0x2c;

/// `struct ethtool_value`.
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

fn value(ifindex: u32, cmd: u32, data: u32, what: &str) -> Result<u32, Error> {
    let mut ifr = crate::iface::ifreq(ifindex)?;
    let sock = crate::iface::ioctl_socket(what)?;
    let mut v = EthtoolValue { cmd, data };
    ifr.ifr_ifru.ifru_data = (&mut v as *mut EthtoolValue).cast();
    // SAFETY: SIOCETHTOOL with an ifreq naming the device and pointing at a live ethtool_value.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL, &mut ifr) };
    if rc < 0 {
        return Err(Error::last(format!("{what} of ifindex {ifindex}")));
    }
    Ok(v.data)
}

/// Whether generic receive offload is on.
pub fn gro(ifindex: u32) -> Result<bool, Error> {
    value(ifindex, ETHTOOL_GGRO, 0, "ethtool get GRO").map(|d| d != 0)
}

/// Turn generic receive offload on or off.
pub fn set_gro(ifindex: u32, on: bool) -> Result<(), Error> {
    value(ifindex, ETHTOOL_SGRO, u32::from(on), "ethtool set GRO").map(|_| ())
}

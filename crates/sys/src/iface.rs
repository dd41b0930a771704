//! Interfaces of the calling thread's namespace: name and index, the list of all, and an
//! Ethernet device's address.

use std::os::fd::AsRawFd;

use crate::Error;

/// ifindex of a device.
pub fn index(dev: &str) -> Result<u32, Error> {
    nix::net::if_::if_nametoindex(dev)
        .map_err(|_| Error::NotFound(format!("cannot find device \"{dev}\"")))
}

/// Name of an ifindex.
pub fn name(ifindex: u32) -> Option<String> {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: buf has IF_NAMESIZE bytes as if_indextoname requires.
    let p = unsafe { libc::if_indextoname(ifindex, buf.as_mut_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: on success if_indextoname wrote a NUL-terminated string into buf.
    let s = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
    Some(s.to_string_lossy().into_owned())
}

/// Every device: (ifindex, name).
pub fn all() -> Vec<(u32, String)> {
    nix::net::if_::if_nameindex()
        .map(|l| {
            l.iter()
                .map(|i| (i.index(), i.name().to_string_lossy().into_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// A datagram socket for interface ioctls.
pub(crate) fn ioctl_socket(what: &str) -> Result<std::os::fd::OwnedFd, Error> {
    nix::sys::socket::socket(
        nix::sys::socket::AddressFamily::Inet,
        nix::sys::socket::SockType::Datagram,
        nix::sys::socket::SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(|e| Error::io(format!("socket for {what}"), e.into()))
}

/// An `ifreq` naming `ifindex`'s device.
pub(crate) fn ifreq(ifindex: u32) -> Result<libc::ifreq, Error> {
    let n = name(ifindex).ok_or_else(|| {
        Error::io(
            format!("name of ifindex {ifindex}"),
            nix::errno::Errno::ENODEV.into(),
        )
    })?;
    // SAFETY: ifreq is plain old data; all zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr
        .ifr_name
        .iter_mut()
        .zip(n.bytes().take(libc::IFNAMSIZ - 1))
    {
        *d = s as libc::c_char;
    }
    Ok(ifr)
}

/// The hardware type of device `ifindex` (`ARPHRD_*`: 1 Ethernet, 772 loopback, 0xfffe none
/// as tun and WireGuard devices have, whose frames start with the IP header).
pub fn hw_type(ifindex: u32) -> Result<u16, Error> {
    let mut ifr = ifreq(ifindex)?;
    let sock = ioctl_socket("SIOCGIFHWADDR")?;
    // SAFETY: SIOCGIFHWADDR reads ifr_name and fills ifr_hwaddr of a valid ifreq.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFHWADDR, &mut ifr) };
    if rc < 0 {
        return Err(Error::last(format!("hardware type of ifindex {ifindex}")));
    }
    // SAFETY: SIOCGIFHWADDR filled the ifr_hwaddr member of the union.
    Ok(unsafe { ifr.ifr_ifru.ifru_hwaddr }.sa_family)
}

/// Whether device `ifindex` is administratively up (`IFF_UP`).
pub fn is_up(ifindex: u32) -> Result<bool, Error> {
    Ok(flags(ifindex)? & libc::IFF_UP as libc::c_short != 0)
}

/// Whether device `ifindex` is up and has its carrier (`IFF_UP` and `IFF_RUNNING`): a link
/// the kernel keeps nexthop objects on.
pub fn is_running(ifindex: u32) -> Result<bool, Error> {
    let want = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    Ok(flags(ifindex)? & want == want)
}

/// The device's `IFF_*` flags.
fn flags(ifindex: u32) -> Result<libc::c_short, Error> {
    let mut ifr = ifreq(ifindex)?;
    let sock = ioctl_socket("SIOCGIFFLAGS")?;
    // SAFETY: SIOCGIFFLAGS reads ifr_name and fills ifr_flags of a valid ifreq.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut ifr) };
    if rc < 0 {
        return Err(Error::last(format!("flags of ifindex {ifindex}")));
    }
    // SAFETY: SIOCGIFFLAGS filled the ifr_flags member of the union.
    Ok(unsafe { ifr.ifr_ifru.ifru_flags })
}

/// The Ethernet address of device `ifindex`; `None` for a device that has none (not
/// `ARPHRD_ETHER`).
pub fn ether_addr(ifindex: u32) -> Result<Option<[u8; 6]>, Error> {
    let mut ifr = ifreq(ifindex)?;
    let sock = ioctl_socket("SIOCGIFHWADDR")?;
    // SAFETY: SIOCGIFHWADDR reads ifr_name and fills ifr_hwaddr of a valid ifreq.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFHWADDR, &mut ifr) };
    if rc < 0 {
        return Err(Error::last(format!(
            "hardware address of ifindex {ifindex}"
        )));
    }
    // SAFETY: SIOCGIFHWADDR filled the ifr_hwaddr member of the union.
    let sa = unsafe { ifr.ifr_ifru.ifru_hwaddr };
    if sa.sa_family != libc::ARPHRD_ETHER {
        return Ok(None);
    }
    let mut mac = [0u8; 6];
    for (m, b) in mac.iter_mut().zip(sa.sa_data.iter()) {
        *m = *b as u8;
    }
    Ok(Some(mac))
}

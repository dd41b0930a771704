//! The kernel's refusals of a route's nexthop that can be seen before the route is sent, for
//! the tools' dry runs (`--check`): a gateway no connected route of its device reaches ("Nexthop
//! has invalid gateway"; IPv6: EHOSTUNREACH), a device that is down ("Nexthop device is not up"). Each is reported
//! as the real refusal would be, in the kernel's words, so that a script sees the same line
//! whether it asked first or not.

use std::net::IpAddr;

use mpt_netlink::msg::rtnl::route as rmsg;
use mpt_netlink::sock::Socket;
use mpt_netlink::KernelError;

use crate::Failure;

/// `RTN_LOCAL`.
const RTN_LOCAL: u8 = 2;

/// The failure the kernel's refusal of `op` would give: `op: MSG [ERRNO]`.
pub fn refusal(op: &str, errno: i32, msg: Option<&str>) -> Failure {
    Failure::from(mpt_netlink::Error::Kernel(KernelError {
        op: op.to_string(),
        errno,
        msg: msg.map(str::to_string),
        attr: None,
    }))
}

/// One nexthop of a route in family `v4` (IPv4 or IPv6) as the kernel checks it, in its order:
/// the gateway (unless `onlink` or IPv6 link-local), then the device.
pub fn nexthop(
    sock: &mut Socket,
    op: &str,
    v4: bool,
    gateway: Option<IpAddr>,
    ifindex: u32,
    onlink: bool,
) -> Result<(), Failure> {
    if let Some(gw) = gateway {
        let link_local = matches!(gw, IpAddr::V6(a) if a.is_unicast_link_local());
        if !onlink && !link_local && !gateway_connected(sock, gw, ifindex)? {
            // IPv6 says it without an extended ack
            return Err(if v4 {
                refusal(op, libc::ENETUNREACH, Some("Nexthop has invalid gateway"))
            } else {
                refusal(op, libc::EHOSTUNREACH, None)
            });
        }
    }
    if ifindex != 0 && !mpt_sys::iface::is_up(ifindex).map_err(Failure::from)? {
        // IPv4 words it differently for a device route
        let words = if gateway.is_none() && v4 {
            "Device for nexthop is not up"
        } else {
            "Nexthop device is not up"
        };
        return Err(refusal(op, libc::ENETDOWN, Some(words)));
    }
    Ok(())
}

/// Whether the FIB entry a lookup of `gw` matches is a connected (or local) route, through
/// `ifindex` if one is given.
fn gateway_connected(sock: &mut Socket, gw: IpAddr, ifindex: u32) -> Result<bool, Failure> {
    let what = format!("look up gateway {gw}");
    let payloads = match sock.dump(&rmsg::get_request(gw), &what) {
        Ok(p) => p,
        // no route at all: the kernel's lookup fails the same way
        Err(e) if e.errno().is_some() => return Ok(false),
        Err(e) => return Err(Failure::from(e)),
    };
    for p in payloads {
        let Some(m) = rmsg::decode(&p).map_err(|e| Failure::system(format!("{what}: {e}")))? else {
            continue;
        };
        let r = m.route;
        // one of our own addresses: the kernel takes it
        if r.rtype == RTN_LOCAL {
            return Ok(true);
        }
        return Ok(r.rtype == rmsg::RTN_UNICAST
            && r.nh_id.is_none()
            && r.nexthops
                .iter()
                .any(|n| n.gateway.is_none() && (ifindex == 0 || n.ifindex == ifindex)));
    }
    Ok(false)
}

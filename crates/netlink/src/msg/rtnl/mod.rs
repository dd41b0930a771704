//! rtnetlink (`NETLINK_ROUTE`): routes, nexthop objects and links, encoded as iproute2 encodes
//! the same command (golden-tested) and decoded from whatever the kernel dumps.

pub mod link;
pub mod nexthop;
pub mod route;

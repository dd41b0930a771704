//! sock_diag (`NETLINK_SOCK_DIAG`): `SOCK_DIAG_BY_FAMILY` dumps of the sockets of the
//! requester's network namespace, one family's request and answer layout per module.

pub mod packet;

/// `SOCK_DIAG_BY_FAMILY`: the request type, and the type of every answer.
pub const SOCK_DIAG_BY_FAMILY: u16 = 20;

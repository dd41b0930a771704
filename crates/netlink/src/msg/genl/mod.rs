//! Generic netlink: the `genlmsghdr` after the `nlmsghdr`, then attributes; the controller
//! family ([`ctrl`]) resolves a family's name to its id.
//!
//! ```text
//! nlmsghdr (16) | genlmsghdr: cmd u8, version u8, reserved u16 (4) | attributes
//! ```

pub mod ctrl;
pub mod ila;

use super::attr::{AttrBuf, Attrs, DecodeError};
use super::Request;

/// `GENL_HDRLEN`.
pub const GENL_HDRLEN: usize = 4;

/// A generic netlink request for family `family_id` (the `nlmsg_type`): `cmd` and `version`
/// in the `genlmsghdr`, then the attributes `attrs` wrote.
pub fn request(
    family_id: u16,
    cmd: u8,
    version: u8,
    flags: u16,
    attrs: impl FnOnce(&mut AttrBuf),
) -> Request {
    let mut a = AttrBuf::with_header(&[cmd, version, 0, 0]);
    attrs(&mut a);
    Request {
        ty: family_id,
        flags,
        payload: a.into_bytes(),
    }
}

/// A generic netlink answer: its command, version and attributes.
#[derive(Debug, Clone, Copy)]
pub struct GenlMsg<'a> {
    /// `genlmsghdr.cmd`.
    pub cmd: u8,
    /// `genlmsghdr.version`.
    pub version: u8,
    /// The attributes.
    pub attrs: Attrs<'a>,
}

/// Split a payload (after the `nlmsghdr`) into its `genlmsghdr` and attributes.
pub fn decode(payload: &[u8]) -> Result<GenlMsg<'_>, DecodeError> {
    if payload.len() < GENL_HDRLEN {
        return Err(DecodeError::new("genlmsghdr", "shorter than 4 bytes"));
    }
    Ok(GenlMsg {
        cmd: payload[0],
        version: payload[1],
        attrs: Attrs::new(&payload[GENL_HDRLEN..]),
    })
}

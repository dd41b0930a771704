//! The generic netlink controller (`nlctrl`, family id 16 on every kernel): what id, version
//! and multicast groups a family has. A family the kernel does not have (its module not built
//! or not loaded) answers `ENOENT`.

use crate::msg::attr::{get_str, get_u16, get_u32, Attrs, DecodeError};
use crate::msg::{flags, Request};

/// `GENL_ID_CTRL`: the controller's own family id.
pub const GENL_ID_CTRL: u16 = 16;
/// `CTRL_CMD_NEWFAMILY`: the controller's answer.
pub const CTRL_CMD_NEWFAMILY: u8 = 1;
/// `CTRL_CMD_GETFAMILY`.
pub const CTRL_CMD_GETFAMILY: u8 = 3;
/// The `genlmsghdr` version of our requests to the controller: 0, as iproute2's
/// `genl_resolve_family()` sends (the controller reads no version).
pub const CTRL_VERSION: u8 = 0;

/// `CTRL_ATTR_*`.
#[allow(missing_docs)]
pub mod attr {
    pub const FAMILY_ID: u16 = 1;
    pub const FAMILY_NAME: u16 = 2;
    pub const VERSION: u16 = 3;
    pub const HDRSIZE: u16 = 4;
    pub const MAXATTR: u16 = 5;
    pub const OPS: u16 = 6;
    pub const MCAST_GROUPS: u16 = 7;
}

/// `CTRL_ATTR_OP_*` (inside each `CTRL_ATTR_OPS` entry).
const CTRL_ATTR_OP_ID: u16 = 1;
/// `CTRL_ATTR_MCAST_GRP_*` (inside each `CTRL_ATTR_MCAST_GROUPS` entry).
const CTRL_ATTR_MCAST_GRP_NAME: u16 = 1;
const CTRL_ATTR_MCAST_GRP_ID: u16 = 2;

/// A family as the controller describes it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Family {
    /// Its name.
    pub name: String,
    /// The `nlmsg_type` its messages carry.
    pub id: u16,
    /// The version of its protocol.
    pub version: u32,
    /// Length of its own header after the `genlmsghdr`.
    pub hdrsize: u32,
    /// Its highest attribute number.
    pub maxattr: u32,
    /// The commands it implements.
    pub ops: Vec<u32>,
    /// Its multicast groups: (name, id).
    pub mcast_groups: Vec<(String, u32)>,
}

/// `CTRL_CMD_GETFAMILY` for `name`: what `genl_init_handle()` in iproute2 sends.
pub fn get_family_request(name: &str) -> Request {
    super::request(
        GENL_ID_CTRL,
        CTRL_CMD_GETFAMILY,
        CTRL_VERSION,
        flags::REQUEST,
        |a| {
            a.put_str(attr::FAMILY_NAME, name);
        },
    )
}

/// Decode the controller's `CTRL_CMD_NEWFAMILY` answer (payload after the `nlmsghdr`).
pub fn decode_family(payload: &[u8]) -> Result<Family, DecodeError> {
    let m = super::decode(payload)?;
    if m.cmd != CTRL_CMD_NEWFAMILY {
        return Err(DecodeError::new(
            "genlmsghdr",
            "not a CTRL_CMD_NEWFAMILY answer",
        ));
    }
    let mut f = Family::default();
    let mut have_id = false;
    for (ty, v) in m.attrs.to_vec().map_err(|e| e.within("nlctrl"))? {
        match ty {
            attr::FAMILY_ID => {
                f.id = get_u16(v, "CTRL_ATTR_FAMILY_ID")?;
                have_id = true;
            }
            attr::FAMILY_NAME => f.name = get_str(v),
            attr::VERSION => f.version = get_u32(v, "CTRL_ATTR_VERSION")?,
            attr::HDRSIZE => f.hdrsize = get_u32(v, "CTRL_ATTR_HDRSIZE")?,
            attr::MAXATTR => f.maxattr = get_u32(v, "CTRL_ATTR_MAXATTR")?,
            attr::OPS => {
                for (_, op) in Attrs::new(v)
                    .to_vec()
                    .map_err(|e| e.within("CTRL_ATTR_OPS"))?
                {
                    if let Some(id) = Attrs::new(op).get(CTRL_ATTR_OP_ID)? {
                        f.ops.push(get_u32(id, "CTRL_ATTR_OP_ID")?);
                    }
                }
            }
            attr::MCAST_GROUPS => {
                for (_, g) in Attrs::new(v)
                    .to_vec()
                    .map_err(|e| e.within("CTRL_ATTR_MCAST_GROUPS"))?
                {
                    let ga = Attrs::new(g);
                    if let (Some(n), Some(id)) = (
                        ga.get(CTRL_ATTR_MCAST_GRP_NAME)?,
                        ga.get(CTRL_ATTR_MCAST_GRP_ID)?,
                    ) {
                        f.mcast_groups
                            .push((get_str(n), get_u32(id, "CTRL_ATTR_MCAST_GRP_ID")?));
                    }
                }
            }
            _ => {}
        }
    }
    if !have_id {
        return Err(DecodeError::new("nlctrl", "no CTRL_ATTR_FAMILY_ID"));
    }
    Ok(f)
}

/// Name of a `CTRL_ATTR_*` number, for error messages.
pub fn attr_name(ty: u16) -> String {
    match ty {
        attr::FAMILY_ID => "CTRL_ATTR_FAMILY_ID".into(),
        attr::FAMILY_NAME => "CTRL_ATTR_FAMILY_NAME".into(),
        attr::VERSION => "CTRL_ATTR_VERSION".into(),
        attr::HDRSIZE => "CTRL_ATTR_HDRSIZE".into(),
        attr::MAXATTR => "CTRL_ATTR_MAXATTR".into(),
        attr::OPS => "CTRL_ATTR_OPS".into(),
        attr::MCAST_GROUPS => "CTRL_ATTR_MCAST_GROUPS".into(),
        n => format!("attribute {n}"),
    }
}

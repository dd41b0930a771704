//! The kernel's generic netlink family "ila" (`include/uapi/linux/ila.h`, `net/ipv6/ila/`):
//! the receive-side translation table, one mapping per (locator match, device). Requests are
//! encoded as `ip ila` encodes them (only the attributes the operator typed, in its order:
//! locator match, locator, device, checksum mode, identifier type); answers carry all five.
//!
//! u64 attributes hold the locator's eight bytes in wire order (the kernel reads
//! `nla_get_u64()` as a `__be64`).

use mpt_model::ila::{CsumMode, IdentType, Locator, Mapping};

use crate::msg::attr::{get_u32, DecodeError};
use crate::msg::{flags, Request};

/// `ILA_GENL_NAME`.
pub const FAMILY: &str = "ila";
/// `ILA_GENL_VERSION`.
pub const VERSION: u8 = 1;

/// `ILA_CMD_*`.
#[allow(missing_docs)]
pub mod cmd {
    pub const ADD: u8 = 1;
    pub const DEL: u8 = 2;
    pub const GET: u8 = 3;
    pub const FLUSH: u8 = 4;
}

/// `ILA_ATTR_*`.
#[allow(missing_docs)]
pub mod attr {
    pub const LOCATOR: u16 = 1;
    pub const IDENTIFIER: u16 = 2;
    pub const LOCATOR_MATCH: u16 = 3;
    pub const IFINDEX: u16 = 4;
    pub const DIR: u16 = 5;
    pub const PAD: u16 = 6;
    pub const CSUM_MODE: u16 = 7;
    pub const IDENT_TYPE: u16 = 8;
    pub const HOOK_TYPE: u16 = 9;
}

/// Name of an `ILA_ATTR_*` number, for error messages.
pub fn attr_name(ty: u16) -> String {
    const N: [&str; 10] = [
        "ILA_ATTR_UNSPEC",
        "ILA_ATTR_LOCATOR",
        "ILA_ATTR_IDENTIFIER",
        "ILA_ATTR_LOCATOR_MATCH",
        "ILA_ATTR_IFINDEX",
        "ILA_ATTR_DIR",
        "ILA_ATTR_PAD",
        "ILA_ATTR_CSUM_MODE",
        "ILA_ATTR_IDENT_TYPE",
        "ILA_ATTR_HOOK_TYPE",
    ];
    N.get(usize::from(ty))
        .map_or_else(|| format!("attribute {ty}"), |s| (*s).to_string())
}

/// The attributes of a request, each present only if given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MappingAttrs {
    /// `ILA_ATTR_LOCATOR_MATCH`.
    pub locator_match: Option<Locator>,
    /// `ILA_ATTR_LOCATOR`.
    pub locator: Option<Locator>,
    /// `ILA_ATTR_IFINDEX`.
    pub ifindex: Option<u32>,
    /// `ILA_ATTR_CSUM_MODE`.
    pub csum_mode: Option<CsumMode>,
    /// `ILA_ATTR_IDENT_TYPE`.
    pub ident_type: Option<IdentType>,
}

fn request(family_id: u16, c: u8, flags: u16, a: &MappingAttrs) -> Request {
    super::request(family_id, c, VERSION, flags, |b| {
        if let Some(l) = a.locator_match {
            b.put(attr::LOCATOR_MATCH, &l.0);
        }
        if let Some(l) = a.locator {
            b.put(attr::LOCATOR, &l.0);
        }
        if let Some(i) = a.ifindex {
            b.put_u32(attr::IFINDEX, i);
        }
        if let Some(m) = a.csum_mode {
            b.put_u8(attr::CSUM_MODE, m.as_u8());
        }
        if let Some(t) = a.ident_type {
            b.put_u8(attr::IDENT_TYPE, t.as_u8());
        }
    })
}

/// `ILA_CMD_ADD`: `ip ila add` (the kernel refuses an existing (match, device) with `EEXIST`).
pub fn add(family_id: u16, a: &MappingAttrs) -> Request {
    request(family_id, cmd::ADD, flags::REQUEST, a)
}

/// `ILA_CMD_DEL`: `ip ila del` (matched by locator match and device; the kernel answers 0
/// whether or not anything matched).
pub fn del(family_id: u16, a: &MappingAttrs) -> Request {
    request(family_id, cmd::DEL, flags::REQUEST, a)
}

/// `ILA_CMD_GET` of one mapping (`ESRCH` if none).
pub fn get(family_id: u16, a: &MappingAttrs) -> Request {
    request(family_id, cmd::GET, flags::REQUEST, a)
}

/// `ILA_CMD_GET` dump of every mapping: `ip ila list`.
pub fn dump(family_id: u16) -> Request {
    request(
        family_id,
        cmd::GET,
        flags::REQUEST | flags::DUMP,
        &MappingAttrs::default(),
    )
}

/// `ILA_CMD_FLUSH`: every mapping of the namespace.
pub fn flush(family_id: u16) -> Request {
    request(
        family_id,
        cmd::FLUSH,
        flags::REQUEST,
        &MappingAttrs::default(),
    )
}

fn loc(p: &[u8], what: &str) -> Result<Locator, DecodeError> {
    let b: [u8; 8] = p
        .get(..8)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| DecodeError::new(what, "shorter than 8 bytes"))?;
    Ok(Locator(b))
}

/// Decode one mapping of a `GET` answer or dump (payload after the `nlmsghdr`). Defaults as the
/// kernel's: any device, `no-action`, `use-format`.
pub fn decode(payload: &[u8]) -> Result<Mapping, DecodeError> {
    let m = super::decode(payload)?;
    let mut out = Mapping {
        locator_match: Locator::default(),
        locator: Locator::default(),
        ifindex: 0,
        csum_mode: CsumMode::NoAction,
        ident_type: IdentType::UseFormat,
    };
    let (mut have_match, mut have_loc) = (false, false);
    for (ty, v) in m.attrs.to_vec().map_err(|e| e.within("ila"))? {
        match ty {
            attr::LOCATOR_MATCH => {
                out.locator_match = loc(v, "ILA_ATTR_LOCATOR_MATCH")?;
                have_match = true;
            }
            attr::LOCATOR => {
                out.locator = loc(v, "ILA_ATTR_LOCATOR")?;
                have_loc = true;
            }
            attr::IFINDEX => out.ifindex = get_u32(v, "ILA_ATTR_IFINDEX")?,
            attr::CSUM_MODE => {
                let b = *v
                    .first()
                    .ok_or_else(|| DecodeError::new("ILA_ATTR_CSUM_MODE", "empty"))?;
                out.csum_mode = CsumMode::from_u8(b)
                    .ok_or_else(|| DecodeError::new("ILA_ATTR_CSUM_MODE", "unknown mode"))?;
            }
            attr::IDENT_TYPE => {
                let b = *v
                    .first()
                    .ok_or_else(|| DecodeError::new("ILA_ATTR_IDENT_TYPE", "empty"))?;
                out.ident_type = IdentType::from_u8(b);
            }
            _ => {}
        }
    }
    if !(have_match && have_loc) {
        return Err(DecodeError::new("ila", "a mapping without its locators"));
    }
    Ok(out)
}

/// Attributes nested in `RTA_ENCAP` of an `encap ila` route (LWT encap type 3).
pub mod encap {
    use mpt_model::ila::{CsumMode, HookType, IdentType, Locator};

    use super::attr;
    use crate::msg::attr::{AttrBuf, Attrs, DecodeError};

    /// `LWTUNNEL_ENCAP_ILA`: the value of `RTA_ENCAP_TYPE`.
    pub const LWTUNNEL_ENCAP_ILA: u16 = 3;

    /// What an `encap ila` route carries.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Encap {
        /// `ILA_ATTR_LOCATOR`.
        pub locator: Locator,
        /// `ILA_ATTR_CSUM_MODE` (if given).
        pub csum_mode: Option<CsumMode>,
        /// `ILA_ATTR_IDENT_TYPE` (if given).
        pub ident_type: Option<IdentType>,
        /// `ILA_ATTR_HOOK_TYPE` (if given).
        pub hook_type: Option<HookType>,
    }

    /// The payload of `RTA_ENCAP` (iproute2's order: locator, csum mode, ident type, hook).
    pub fn encode(e: &Encap) -> Vec<u8> {
        let mut b = AttrBuf::default();
        b.put(attr::LOCATOR, &e.locator.0);
        if let Some(m) = e.csum_mode {
            b.put_u8(attr::CSUM_MODE, m.as_u8());
        }
        if let Some(t) = e.ident_type {
            b.put_u8(attr::IDENT_TYPE, t.as_u8());
        }
        if let Some(h) = e.hook_type {
            b.put_u8(attr::HOOK_TYPE, h.as_u8());
        }
        b.into_bytes()
    }

    /// Decode the payload of `RTA_ENCAP`.
    pub fn decode(p: &[u8]) -> Result<Encap, DecodeError> {
        let mut e = Encap {
            locator: Locator::default(),
            csum_mode: None,
            ident_type: None,
            hook_type: None,
        };
        let mut have = false;
        for (ty, v) in Attrs::new(p).to_vec().map_err(|e| e.within("RTA_ENCAP"))? {
            let byte = || v.first().copied();
            match ty {
                attr::LOCATOR => {
                    e.locator = super::loc(v, "ILA_ATTR_LOCATOR")?;
                    have = true;
                }
                attr::CSUM_MODE => e.csum_mode = byte().and_then(CsumMode::from_u8),
                attr::IDENT_TYPE => e.ident_type = byte().map(IdentType::from_u8),
                attr::HOOK_TYPE => e.hook_type = byte().and_then(HookType::from_u8),
                _ => {}
            }
        }
        if !have {
            return Err(DecodeError::new("RTA_ENCAP", "ila without a locator"));
        }
        Ok(e)
    }
}

//! Netlink attributes (`struct nlattr` / `struct rtattr`): a builder and a decoder that never
//! fails on an attribute type it does not know.

use std::fmt;

use super::align4;

/// Why bytes could not be decoded, as a path (`rtmsg/RTA_MULTIPATH/rtnexthop[1]`) and a reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// Where in the message.
    pub path: String,
    /// What was wrong.
    pub reason: &'static str,
}

impl DecodeError {
    /// A new error at `path`.
    pub fn new(path: impl Into<String>, reason: &'static str) -> Self {
        DecodeError {
            path: path.into(),
            reason,
        }
    }
    /// Prefix the path with an outer element.
    pub fn within(mut self, outer: &str) -> Self {
        self.path = format!("{outer}/{}", self.path);
        self
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "malformed netlink message at {}: {}",
            self.path, self.reason
        )
    }
}

impl std::error::Error for DecodeError {}

/// Attribute builder. Each attribute is 4-byte aligned; `len` excludes the trailing padding.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct AttrBuf {
    buf: Vec<u8>,
}

impl AttrBuf {
    /// Start after a family header.
    pub fn with_header(header: &[u8]) -> Self {
        let mut buf = Vec::with_capacity(128);
        buf.extend_from_slice(header);
        buf.resize(align4(buf.len()), 0);
        AttrBuf { buf }
    }
    /// Append an attribute.
    pub fn put(&mut self, ty: u16, data: &[u8]) -> &mut Self {
        let len = 4 + data.len();
        self.buf.extend_from_slice(&(len as u16).to_ne_bytes());
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        self.buf.extend_from_slice(data);
        self.buf.resize(align4(self.buf.len()), 0);
        self
    }
    /// Append a native-endian u32 attribute.
    pub fn put_u32(&mut self, ty: u16, v: u32) -> &mut Self {
        self.put(ty, &v.to_ne_bytes())
    }
    /// Append a native-endian u16 attribute.
    pub fn put_u16(&mut self, ty: u16, v: u16) -> &mut Self {
        self.put(ty, &v.to_ne_bytes())
    }
    /// Append a u8 attribute.
    pub fn put_u8(&mut self, ty: u16, v: u8) -> &mut Self {
        self.put(ty, &[v])
    }
    /// Append a NUL-terminated string attribute.
    pub fn put_str(&mut self, ty: u16, s: &str) -> &mut Self {
        let mut v = s.as_bytes().to_vec();
        v.push(0);
        self.put(ty, &v)
    }
    /// Bytes so far.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
    /// Bytes so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }
}

/// Decoded attributes in wire order; unknown types are kept as raw bytes.
#[derive(Debug, Clone, Copy)]
pub struct Attrs<'a> {
    buf: &'a [u8],
}

impl<'a> Attrs<'a> {
    /// Attributes in `buf` (validated lazily by [`Attrs::iter`] / [`Attrs::to_vec`]).
    pub fn new(buf: &'a [u8]) -> Self {
        Attrs { buf }
    }
    /// Every attribute as `(type without NLA_F_* bits, payload)`; the first malformed header is
    /// an error.
    pub fn to_vec(&self) -> Result<Vec<(u16, &'a [u8])>, DecodeError> {
        let mut out = Vec::new();
        let mut b = self.buf;
        let mut i = 0;
        while b.len() >= 4 {
            let len = usize::from(u16::from_ne_bytes([b[0], b[1]]));
            let ty = u16::from_ne_bytes([b[2], b[3]]) & 0x3fff;
            if len < 4 || len > b.len() {
                return Err(DecodeError::new(
                    format!("attr[{i}] type {ty}"),
                    "length out of bounds",
                ));
            }
            out.push((ty, &b[4..len]));
            b = &b[align4(len).min(b.len())..];
            i += 1;
        }
        Ok(out)
    }
    /// The first attribute of type `ty`.
    pub fn get(&self, ty: u16) -> Result<Option<&'a [u8]>, DecodeError> {
        Ok(self
            .to_vec()?
            .into_iter()
            .find(|(t, _)| *t == ty)
            .map(|(_, p)| p))
    }
}

/// Read a native-endian u32 payload.
pub fn get_u32(p: &[u8], what: &str) -> Result<u32, DecodeError> {
    let a: [u8; 4] = p
        .get(..4)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| DecodeError::new(what, "shorter than 4 bytes"))?;
    Ok(u32::from_ne_bytes(a))
}

/// Read a native-endian u16 payload.
pub fn get_u16(p: &[u8], what: &str) -> Result<u16, DecodeError> {
    let a: [u8; 2] = p
        .get(..2)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| DecodeError::new(what, "shorter than 2 bytes"))?;
    Ok(u16::from_ne_bytes(a))
}

/// A NUL-terminated (or not) string payload.
pub fn get_str(p: &[u8]) -> String {
    let end = p.iter().position(|b| *b == 0).unwrap_or(p.len());
    String::from_utf8_lossy(&p[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_padding() {
        let mut b = AttrBuf::default();
        b.put(1, &[1, 2, 3]).put_u32(6, 10).put_u8(27, 17);
        let bytes = b.into_bytes();
        assert_eq!(bytes.len(), 8 + 8 + 8);
        assert_eq!(&bytes[..4], &[7, 0, 1, 0]);
        let v = Attrs::new(&bytes).to_vec().expect("decodes");
        assert_eq!(
            v,
            vec![
                (1, &[1u8, 2, 3][..]),
                (6, &10u32.to_ne_bytes()[..]),
                (27, &[17u8][..])
            ]
        );
    }

    #[test]
    fn truncated_is_an_error_with_a_path() {
        let bytes = [200u8, 0, 1, 0, 0, 0, 0, 0];
        let e = Attrs::new(&bytes).to_vec().expect_err("must fail");
        assert!(e.to_string().contains("attr[0] type 1"));
    }

    #[test]
    fn nested_flag_bits_are_masked() {
        let mut b = AttrBuf::default();
        b.put(0x8000 | 9, &[]);
        let v = Attrs::new(b.as_bytes()).to_vec().expect("decodes");
        assert_eq!(v[0].0, 9);
    }
}

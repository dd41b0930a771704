//! 64-bit locators, locator matches and SIR prefixes: the upper half of an IPv6 address, kept
//! in network byte order. Written as up to four hex groups of at most four digits, as `ip ila`
//! prints them (`2001:0:119:0`); `::` stands for as many zero groups as make four (`2001::1`
//! is `2001:0:0:1`), which `ip ila` itself does not accept.

use std::fmt;
use std::net::Ipv6Addr;
use std::str::FromStr;

/// A 64-bit locator in network byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Locator(pub [u8; 8]);

impl Locator {
    /// From four 16-bit groups (host order), the first the most significant.
    pub fn from_words(w: [u16; 4]) -> Locator {
        let mut b = [0u8; 8];
        for (i, g) in w.iter().enumerate() {
            b[2 * i..2 * i + 2].copy_from_slice(&g.to_be_bytes());
        }
        Locator(b)
    }
    /// The four 16-bit groups (host order).
    pub fn words(&self) -> [u16; 4] {
        let b = &self.0;
        [
            u16::from_be_bytes([b[0], b[1]]),
            u16::from_be_bytes([b[2], b[3]]),
            u16::from_be_bytes([b[4], b[5]]),
            u16::from_be_bytes([b[6], b[7]]),
        ]
    }
    /// The locator of an address (its upper 64 bits).
    pub fn of(addr: Ipv6Addr) -> Locator {
        let o = addr.octets();
        let mut b = [0u8; 8];
        b.copy_from_slice(&o[..8]);
        Locator(b)
    }
    /// `addr` with this locator in place of its own.
    pub fn put(self, addr: Ipv6Addr) -> Ipv6Addr {
        let mut o = addr.octets();
        o[..8].copy_from_slice(&self.0);
        Ipv6Addr::from(o)
    }
    /// As a u64 whose bytes in memory are the locator's wire bytes (what a netlink u64
    /// attribute carries: `nla_get_u64()` read as `__be64`).
    pub fn to_ne_u64(self) -> u64 {
        u64::from_ne_bytes(self.0)
    }
    /// See [`Locator::to_ne_u64`].
    pub fn from_ne_u64(v: u64) -> Locator {
        Locator(v.to_ne_bytes())
    }
}

/// Why a locator did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLocator(pub String);

impl fmt::Display for BadLocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid locator \"{}\" (four hex groups, as 2001:0:119:0)",
            self.0
        )
    }
}

impl std::error::Error for BadLocator {}

fn group(s: &str, all: &str) -> Result<u16, BadLocator> {
    if s.is_empty() || s.len() > 4 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(BadLocator(all.to_string()));
    }
    u16::from_str_radix(s, 16).map_err(|_| BadLocator(all.to_string()))
}

impl FromStr for Locator {
    type Err = BadLocator;

    fn from_str(s: &str) -> Result<Locator, BadLocator> {
        let bad = || BadLocator(s.to_string());
        let groups: Vec<u16> = match s.split_once("::") {
            Some((head, tail)) => {
                if tail.contains("::") {
                    return Err(bad());
                }
                let h: Vec<u16> = if head.is_empty() {
                    Vec::new()
                } else {
                    head.split(':')
                        .map(|g| group(g, s))
                        .collect::<Result<_, _>>()?
                };
                let t: Vec<u16> = if tail.is_empty() {
                    Vec::new()
                } else {
                    tail.split(':')
                        .map(|g| group(g, s))
                        .collect::<Result<_, _>>()?
                };
                if h.len() + t.len() > 3 {
                    return Err(bad());
                }
                let mut v = h;
                v.resize(4 - t.len(), 0);
                v.extend(t);
                v
            }
            None => {
                let v: Vec<u16> = s
                    .split(':')
                    .map(|g| group(g, s))
                    .collect::<Result<_, _>>()?;
                if v.len() != 4 {
                    return Err(bad());
                }
                v
            }
        };
        Ok(Locator::from_words([
            groups[0], groups[1], groups[2], groups[3],
        ]))
    }
}

impl fmt::Display for Locator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = self.words();
        write!(f, "{:x}:{:x}:{:x}:{:x}", w[0], w[1], w[2], w[3])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(s: &str) -> Locator {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn four_groups_and_compressed_forms() {
        assert_eq!(loc("2001:0:119:0").0, [0x20, 0x01, 0, 0, 0x01, 0x19, 0, 0]);
        assert_eq!(loc("2001:0:119:0").to_string(), "2001:0:119:0");
        assert_eq!(loc("2001::1"), loc("2001:0:0:1"));
        assert_eq!(loc("::1"), loc("0:0:0:1"));
        assert_eq!(loc("2001:db8::"), loc("2001:db8:0:0"));
        assert_eq!(loc("::"), Locator::default());
        assert_eq!(loc("2001:0DB8:0:00ff").to_string(), "2001:db8:0:ff");
    }

    #[test]
    fn bad_locators_are_refused() {
        for s in [
            "",
            "2001",
            "1:2:3",
            "1:2:3:4:5",
            "1::2::3",
            "12345:0:0:0",
            "g:0:0:0",
            "1:2:3:4::",
            "::1:2:3:4",
            "1:2:3:",
            ":1:2:3",
            "2001:db8::/64",
        ] {
            assert!(s.parse::<Locator>().is_err(), "{s} parsed");
        }
    }

    #[test]
    fn addresses_split_and_join() {
        let a: Ipv6Addr = "2001:db8:1:2:2000::7".parse().expect("addr");
        assert_eq!(Locator::of(a), loc("2001:db8:1:2"));
        let b = loc("2001:db8:ff:1").put(a);
        assert_eq!(b.to_string(), "2001:db8:ff:1:2000::7");
        assert_eq!(
            Locator::from_ne_u64(loc("2001:db8:ff:1").to_ne_u64()),
            loc("2001:db8:ff:1")
        );
    }
}

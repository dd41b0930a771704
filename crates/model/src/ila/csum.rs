//! The checksum arithmetic of ILA translation, from the ILA definitions (draft-herbert-intarea-
//! ila, the kernel's `Documentation/networking/ila.rst`). Defined here once; the BPF translator
//! (`bpf/ila/xlat.h`) reproduces it bit for bit, and a test holds the two together.
//!
//! Translation replaces an address's upper 64 bits (its locator). The transport checksums of
//! TCP, UDP and ICMPv6 cover the addresses through the pseudo-header, so the sum of the address
//! moves by `diff = sum(new locator) - sum(old locator)` (one's complement arithmetic, RFC
//! 1071), and each mode answers for it differently:
//!
//! - `no-action`: nothing; the checksum is right only if the addresses were chosen to be
//!   checksum-neutral;
//! - `adj-transport`: the transport checksum takes the difference (RFC 1624, eqn. 3:
//!   `HC' = ~(~HC + m' - m)`); a UDP checksum of 0 (none) stays 0, a computed 0 is sent as
//!   0xffff; where the checksum is left to offload (`CHECKSUM_PARTIAL`) its field holds the
//!   pseudo-header sum itself, which takes the difference directly;
//! - `neutral-map-auto`: the identifier's last 16 bits take the opposite of the difference,
//!   so that the address's sum, and so every checksum over it, is unchanged;
//! - `neutral-map`: the same, with the C-bit (0x10 of the identifier's first byte) marking an
//!   ILA address so mapped: SIR→ILA sets it (refusing to adjust an address that already has
//!   it: a SIR address never does), ILA→SIR adjusts only an address that has it, and clears it.
//!
//! About the direction of the difference: the one the kernel's `ila_update_ipv6_locator()`
//! feeds to `inet_proto_csum_replace_by_diff()` is suspected to be reversed (its saved diff is
//! old − new, the helper wants new − old; `../shared/reference/kernel-uapi.md` §4.4). Here the
//! direction follows from the arithmetic, and the tests check it against checksums computed
//! from scratch.

use std::net::Ipv6Addr;

use super::Locator;

/// `ILA_CSUM_*`: what translation does about transport checksums.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CsumMode {
    /// `adj-transport` (0).
    AdjustTransport,
    /// `neutral-map` (1).
    NeutralMap,
    /// `no-action` (2), the kernel's default.
    #[default]
    NoAction,
    /// `neutral-map-auto` (3).
    NeutralMapAuto,
}

impl CsumMode {
    /// Every mode.
    pub const ALL: [CsumMode; 4] = [
        CsumMode::AdjustTransport,
        CsumMode::NeutralMap,
        CsumMode::NoAction,
        CsumMode::NeutralMapAuto,
    ];
    /// Its number (`ILA_CSUM_*`).
    pub const fn as_u8(self) -> u8 {
        match self {
            CsumMode::AdjustTransport => 0,
            CsumMode::NeutralMap => 1,
            CsumMode::NoAction => 2,
            CsumMode::NeutralMapAuto => 3,
        }
    }
    /// From its number.
    pub const fn from_u8(v: u8) -> Option<CsumMode> {
        match v {
            0 => Some(CsumMode::AdjustTransport),
            1 => Some(CsumMode::NeutralMap),
            2 => Some(CsumMode::NoAction),
            3 => Some(CsumMode::NeutralMapAuto),
            _ => None,
        }
    }
    /// iproute2's word.
    pub const fn name(self) -> &'static str {
        match self {
            CsumMode::AdjustTransport => "adj-transport",
            CsumMode::NeutralMap => "neutral-map",
            CsumMode::NoAction => "no-action",
            CsumMode::NeutralMapAuto => "neutral-map-auto",
        }
    }
    /// From iproute2's word (exact).
    pub fn from_name(s: &str) -> Option<CsumMode> {
        CsumMode::ALL.into_iter().find(|m| m.name() == s)
    }
}

/// The C-bit, in the identifier's first 16-bit word (bit 0x10 of address byte 8).
pub const C_BIT: u16 = 0x1000;

/// One's complement sum of two 16-bit values (end-around carry).
pub const fn add(a: u16, b: u16) -> u16 {
    let s = a as u32 + b as u32;
    ((s & 0xffff) + (s >> 16)) as u16
}

/// One's complement sum of 16-bit words.
pub fn sum(words: &[u16]) -> u16 {
    words.iter().fold(0, |s, w| add(s, *w))
}

/// What replacing locator `from` by `to` adds to an address's sum.
pub fn locator_diff(from: Locator, to: Locator) -> u16 {
    add(sum(&to.words()), !sum(&from.words()))
}

/// A complete transport checksum after the sum it covers grew by `diff` (RFC 1624, eqn. 3).
pub const fn adjust_checksum(check: u16, diff: u16) -> u16 {
    !add(!check, diff)
}

/// A UDP checksum after the sum it covers grew by `diff`: 0 (no checksum) stays 0, a computed
/// 0 becomes 0xffff (RFC 768).
pub const fn adjust_udp_checksum(check: u16, diff: u16) -> u16 {
    if check == 0 {
        return 0;
    }
    match adjust_checksum(check, diff) {
        0 => 0xffff,
        c => c,
    }
}

/// A checksum field left to offload (`CHECKSUM_PARTIAL`: it holds the folded pseudo-header sum,
/// not its complement) after the addresses' sum grew by `diff`.
pub const fn adjust_partial(field: u16, diff: u16) -> u16 {
    add(field, diff)
}

/// An address after translation, and what its transport checksum must take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Translated {
    /// The new address.
    pub addr: Ipv6Addr,
    /// `Some(diff)`: the transport checksum takes it ([`adjust_checksum`]); `None`: leave the
    /// checksum as it is (neutral, or no action).
    pub l4_diff: Option<u16>,
}

fn words(a: Ipv6Addr) -> [u16; 8] {
    a.segments()
}

/// Translate `addr` to locator `to` in `mode`; `sir_to_ila` says which way (send side: SIR to
/// ILA; receive side: ILA to SIR), which only `neutral-map` cares about.
pub fn translate(addr: Ipv6Addr, to: Locator, mode: CsumMode, sir_to_ila: bool) -> Translated {
    let diff = locator_diff(Locator::of(addr), to);
    let mut w = words(to.put(addr));
    let l4_diff = match mode {
        CsumMode::NoAction => None,
        CsumMode::AdjustTransport => Some(diff),
        CsumMode::NeutralMapAuto => {
            w[7] = add(w[7], !diff);
            None
        }
        CsumMode::NeutralMap => {
            let c = w[4] & C_BIT != 0;
            match (sir_to_ila, c) {
                // a SIR address with the C-bit: not ours to map (the kernel warns); the
                // locator alone changes
                (true, true) | (false, false) => {}
                (true, false) => {
                    w[4] |= C_BIT;
                    w[7] = add(w[7], !add(diff, C_BIT));
                }
                (false, true) => {
                    w[4] &= !C_BIT;
                    w[7] = add(w[7], !add(diff, !C_BIT));
                }
            }
            None
        }
    };
    Translated {
        addr: Ipv6Addr::from(w),
        l4_diff,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Internet checksum from scratch over a pseudo-header and a segment (independent of the
    /// arithmetic above: 32-bit accumulation, folded at the end).
    fn checksum_of(src: Ipv6Addr, dst: Ipv6Addr, proto: u8, seg: &[u8]) -> u16 {
        let mut all = Vec::new();
        all.extend_from_slice(&src.octets());
        all.extend_from_slice(&dst.octets());
        all.extend_from_slice(&(seg.len() as u32).to_be_bytes());
        all.extend_from_slice(&[0, 0, 0, proto]);
        all.extend_from_slice(seg);
        let mut s: u64 = all
            .chunks(2)
            .map(|c| u64::from(u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)])))
            .sum();
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }

    /// A TCP segment (checksum at 16) with a complete checksum for (src, dst).
    fn tcp(src: Ipv6Addr, dst: Ipv6Addr, payload: &[u8]) -> Vec<u8> {
        let mut seg = vec![
            0x9c, 0x40, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff,
        ];
        seg.extend_from_slice(&[0, 0, 0, 0]);
        seg.extend_from_slice(payload);
        let c = checksum_of(src, dst, 6, &seg);
        seg[16..18].copy_from_slice(&c.to_be_bytes());
        seg
    }

    fn valid(src: Ipv6Addr, dst: Ipv6Addr, proto: u8, seg: &[u8]) -> bool {
        checksum_of(src, dst, proto, seg) == 0 || checksum_of(src, dst, proto, seg) == 0xffff
    }

    /// The property tests' generator, with the addresses and locators they draw.
    struct Rng(mpt_testkit::XorShift64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0.next()
        }
        fn addr(&mut self) -> Ipv6Addr {
            let a = u128::from(self.next()) << 64 | u128::from(self.next());
            // an identifier of type LUID (001) with the C-bit clear: a SIR address
            let mut o = Ipv6Addr::from(a).octets();
            o[8] = (o[8] & 0x0f) | 0x20;
            Ipv6Addr::from(o)
        }
        fn loc(&mut self) -> Locator {
            Locator(self.next().to_be_bytes())
        }
    }

    fn apply(seg: &mut [u8], t: &Translated) {
        if let Some(d) = t.l4_diff {
            let c = u16::from_be_bytes([seg[16], seg[17]]);
            seg[16..18].copy_from_slice(&adjust_checksum(c, d).to_be_bytes());
        }
    }

    #[test]
    fn every_mode_keeps_checksums_right_but_no_action() {
        let mut r = Rng(mpt_testkit::XorShift64(0x696c_615f_6373_756d));
        let mut broken = 0;
        for _ in 0..5000 {
            let (src, sir) = (r.addr(), r.addr());
            let ila = r.loc();
            let payload = r.next().to_be_bytes();
            for mode in CsumMode::ALL {
                let mut seg = tcp(src, sir, &payload);
                let t = translate(sir, ila, mode, true);
                assert_eq!(Locator::of(t.addr), ila);
                apply(&mut seg, &t);
                let ok = valid(src, t.addr, 6, &seg);
                if mode == CsumMode::NoAction {
                    broken += usize::from(!ok);
                } else {
                    assert!(ok, "{mode:?}: {sir} -> {}", t.addr);
                }
                // and back, as the receiver translates it
                let back = translate(t.addr, Locator::of(sir), mode, false);
                apply(&mut seg, &back);
                assert!(valid(src, back.addr, 6, &seg), "{mode:?} back");
                if locator_diff(Locator::of(sir), ila) != 0 {
                    assert_eq!(
                        back.addr, sir,
                        "{mode:?}: the round trip restores the address"
                    );
                }
            }
        }
        assert!(
            broken > 4900,
            "no-action breaks checksums: {broken} of 5000"
        );
    }

    #[test]
    fn neutral_maps_change_only_the_locator_and_the_last_word() {
        let sir: Ipv6Addr = "2001:db8:1:2:2000::7".parse().expect("addr");
        let ila: Locator = "2001:db8:ff:1".parse().expect("loc");
        let t = translate(sir, ila, CsumMode::NeutralMapAuto, true);
        assert_eq!(t.l4_diff, None);
        let (a, b) = (sir.segments(), t.addr.segments());
        assert_eq!(&b[..4], &ila.words());
        assert_eq!(&a[4..7], &b[4..7]);
        assert_eq!(sum(&a), sum(&b), "the address's sum is unchanged");
        let c = translate(sir, ila, CsumMode::NeutralMap, true);
        let w = c.addr.segments();
        assert_eq!(w[4], a[4] | C_BIT, "the C-bit marks the ILA address");
        assert_eq!(sum(&w), sum(&a));
        // a SIR address that has the C-bit is not adjusted
        let odd: Ipv6Addr = "2001:db8:1:2:3000::7".parse().expect("addr");
        let n = translate(odd, ila, CsumMode::NeutralMap, true);
        assert_eq!(n.addr, ila.put(odd));
        // receive side: only an address with the C-bit is adjusted, and it is cleared
        let back = translate(c.addr, Locator::of(sir), CsumMode::NeutralMap, false);
        assert_eq!(back.addr, sir);
        let plain = translate(ila.put(sir), Locator::of(sir), CsumMode::NeutralMap, false);
        assert_eq!(plain.addr, sir, "no C-bit: the locator alone");
    }

    #[test]
    fn udp_zero_stays_zero_and_a_computed_zero_is_sent_as_ffff() {
        assert_eq!(adjust_udp_checksum(0, 0x1234), 0);
        // ~(~c + d) == 0 when ~c + d == 0xffff
        let d = 0x1234;
        let c = !add(0xffff, !d);
        assert_eq!(adjust_checksum(c, d), 0);
        assert_eq!(adjust_udp_checksum(c, d), 0xffff);
    }

    #[test]
    fn a_partial_checksum_takes_the_difference_itself() {
        // the field holds the folded pseudo-header sum; the device completes it later
        let src: Ipv6Addr = "2001:db8::1".parse().expect("addr");
        let sir: Ipv6Addr = "2001:db8:1:2:2000::7".parse().expect("addr");
        let ila: Locator = "2001:db8:ff:1".parse().expect("loc");
        let pseudo = |dst: Ipv6Addr| {
            let mut w: Vec<u16> = src.segments().to_vec();
            w.extend_from_slice(&dst.segments());
            w.extend_from_slice(&[0, 24, 0, 6]);
            sum(&w)
        };
        let t = translate(sir, ila, CsumMode::AdjustTransport, true);
        let d = t.l4_diff.expect("a diff");
        assert_eq!(adjust_partial(pseudo(sir), d), pseudo(t.addr));
    }

    #[test]
    fn mode_numbers_and_names() {
        for m in CsumMode::ALL {
            assert_eq!(CsumMode::from_u8(m.as_u8()), Some(m));
            assert_eq!(CsumMode::from_name(m.name()), Some(m));
        }
        assert_eq!(CsumMode::default(), CsumMode::NoAction);
        assert_eq!(CsumMode::from_u8(4), None);
    }
}

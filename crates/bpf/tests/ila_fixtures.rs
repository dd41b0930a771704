//! Root test: BPF_PROG_TEST_RUN fixtures for the ILA translator (`bpf/ila/ila.bpf.c`), its three
//! programs: `ila_in_xdp` and `ila_in_tc` (receive side: mappings ILA -> SIR, then input routes
//! SIR -> ILA) and `ila_out_tc` (send side: output routes SIR -> ILA).
//!
//! Every output is compared byte for byte with an oracle written here from the model
//! (`mpt_model::ila`: the table lookup, the translation and the checksum arithmetic, themselves
//! property-tested against checksums computed from scratch), and every translated packet's
//! transport checksum is also checked from scratch with the packet kit's independent parser:
//! valid for the new address in adj-transport and the neutral modes, broken in no-action.
//!
//! A test run resolves its ingress device in the namespace of the thread that runs it, so each
//! test builds a throwaway namespace with two veths (`a0`, `b0`) and runs on a thread inside it,
//! with the translator's skeleton loaded standalone (its maps its own).
//!
//! Needs root. It fails, it does not skip, when run without root.

use std::mem::{offset_of, size_of, MaybeUninit};
use std::net::{IpAddr, Ipv6Addr};

use ipnet::Ipv6Net;
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, OpenObject, ProgramInput};
use mpt_bpf::ila::abi::{
    IlaCounter, IlaRouteKey, IlaRouteVal, IlaXlatKey, IlaXlatVal, Reason, R_MAX,
};
use mpt_bpf::skel::ila::ila::{types, IlaSkel, IlaSkelBuilder};
use mpt_model::ila::csum::{adjust_checksum, adjust_udp_checksum, translate};
use mpt_model::ila::table::lookup;
use mpt_model::ila::{CsumMode, HookType, IdentType, Locator, Mapping, RouteSpec};
use mpt_testkit::packet::{
    hex, l4_csum_ok, tagged, tcp, udp_segment, Ip6, ETH_P_8021AD, ETH_P_8021Q, ETH_P_IPV6,
    IPPROTO_ICMPV6, IPPROTO_TCP, IPPROTO_UDP,
};
use mpt_testkit::progrun::{
    self, skb_ctx, xdp_ctx, SKB_IFINDEX, SKB_INGRESS_IFINDEX, SKB_SIZE, TCX_NEXT,
    XDP_MD_INGRESS_IFINDEX, XDP_MD_SIZE, XDP_PASS,
};
use mpt_testkit::{require_root, Netns, XorShift64};

const _: () = {
    assert!(offset_of!(types::__sk_buff, ingress_ifindex) == SKB_INGRESS_IFINDEX);
    assert!(offset_of!(types::__sk_buff, ifindex) == SKB_IFINDEX);
    assert!(size_of::<types::__sk_buff>() == SKB_SIZE);
    assert!(size_of::<types::xdp_md>() == XDP_MD_SIZE);
    assert!(offset_of!(types::xdp_md, ingress_ifindex) == XDP_MD_INGRESS_IFINDEX);
};

/// The source of every packet (a host in front of the translator).
const SRC: &str = "2001:db8:aa::10";

// ---- the loaded translator -----------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Prog {
    /// `ila_in_xdp`.
    InXdp,
    /// `ila_in_tc`.
    InTc,
    /// `ila_out_tc`.
    OutTc,
}

const PROGS: [Prog; 3] = [Prog::InXdp, Prog::InTc, Prog::OutTc];

impl Prog {
    const fn pass(self) -> u32 {
        match self {
            Prog::InXdp => XDP_PASS,
            Prog::InTc | Prog::OutTc => TCX_NEXT,
        }
    }
    const fn tc(self) -> bool {
        !matches!(self, Prog::InXdp)
    }
}

struct Fx<'o> {
    skel: IlaSkel<'o>,
    a0: u32,
    b0: u32,
}

fn with_fixture<F>(f: F)
where
    F: FnOnce(&Fx<'_>) + Send + 'static,
{
    require_root();
    let ns = Netns::new("ilafx");
    for d in ["a0", "b0"] {
        ns.ip_ok(&[
            "link",
            "add",
            d,
            "type",
            "veth",
            "peer",
            "name",
            &format!("{d}p"),
        ]);
        ns.ip_ok(&["link", "set", d, "up"]);
        ns.ip_ok(&["link", "set", &format!("{d}p"), "up"]);
    }
    // per-CPU counters are summed, but one CPU keeps the reason deltas simple
    ns.run_in_thread(true, move || {
        let mut storage = MaybeUninit::<OpenObject>::uninit();
        let open = IlaSkelBuilder::default()
            .open(&mut storage)
            .expect("open the ILA skeleton");
        let skel = open.load().expect("load the ILA skeleton (verifier)");
        let idx = |d: &str| nix::net::if_::if_nametoindex(d).expect("ifindex");
        let fx = Fx {
            skel,
            a0: idx("a0"),
            b0: idx("b0"),
        };
        // These fixtures give each frame its ingress device through the test run's context,
        // which Debian 11's 5.10 refuses (XDP contexts are 5.15+, an skb's ingress_ifindex
        // later than 5.10): there real traffic covers the translator (tests/ila_netns.rs, the
        // byte comparison with the kernel's ILA in tests/ila_kernel.rs)
        let probe = frame(L4::Udp, addr("2001:db8:ee::1"));
        if PROGS.iter().any(|p| fx.try_run(*p, &probe, fx.a0).is_err()) {
            assert_eq!(
                std::env::var("MPT_KERNEL_SERIES").as_deref(),
                Ok("5.10"),
                "this kernel refuses a test run's context"
            );
            eprintln!("this kernel's test runs take no context (ingress device): not run here");
            return;
        }
        f(&fx);
    });
}

struct Out {
    rc: u32,
    data: Vec<u8>,
}

impl Fx<'_> {
    fn try_run(&self, p: Prog, frame: &[u8], ingress: u32) -> Result<Out, libbpf_rs::Error> {
        let mut c = if p.tc() {
            skb_ctx(ingress, None)
        } else {
            xdp_ctx(frame.len(), ingress)
        };
        let prog = match p {
            Prog::InXdp => &self.skel.progs.ila_in_xdp,
            Prog::InTc => &self.skel.progs.ila_in_tc,
            Prog::OutTc => &self.skel.progs.ila_out_tc,
        };
        let mut buf = vec![0u8; 4096];
        let out = prog.test_run(ProgramInput {
            context_in: Some(&mut c),
            data_in: Some(frame),
            data_out: Some(&mut buf),
            ..Default::default()
        })?;
        Ok(Out {
            rc: out.return_value,
            data: out.data.map(|d| d.to_vec()).unwrap_or_default(),
        })
    }

    fn run(&self, p: Prog, frame: &[u8], ingress: u32) -> Vec<u8> {
        let out = self
            .try_run(p, frame, ingress)
            .unwrap_or_else(|e| panic!("[{p:?}] test run failed: {e}; frame {}", hex(frame)));
        assert_eq!(out.rc, p.pass(), "[{p:?}] verdict on {}", hex(frame));
        out.data
    }

    /// Make the tables exactly these (their counters in the per-CPU hashes).
    fn set(&self, mappings: &[Mapping], routes: &[RouteSpec]) {
        self.set_with(mappings, routes, false);
    }

    /// Make the tables exactly these; with `slotted`, entry i counts in slot i + 1 of
    /// `ila_slot_stats` (mappings first), as the tool gives the first entries.
    fn set_with(&self, mappings: &[Mapping], routes: &[RouteSpec], slotted: bool) {
        let m = &self.skel.maps;
        for k in m.ila_xlat_in.keys().collect::<Vec<_>>() {
            m.ila_xlat_in.delete(&k).expect("clear ila_xlat");
        }
        for k in m.ila_routes.keys().collect::<Vec<_>>() {
            m.ila_routes.delete(&k).expect("clear ila_routes");
        }
        // the kinds of entries there are, as the tool keeps them (ILA_META_F_*)
        let mut flags = 0;
        if mappings.iter().any(|x| x.ifindex != 0) {
            flags |= mpt_bpf::ila::abi::META_F_DEV_MAPPINGS;
        }
        if routes.iter().any(|r| r.hook_type == HookType::Input) {
            flags |= mpt_bpf::ila::abi::META_F_INPUT_ROUTES;
        }
        if routes.iter().any(|r| r.hook_type == HookType::Output) {
            flags |= mpt_bpf::ila::abi::META_F_OUTPUT_ROUTES;
        }
        let meta = mpt_bpf::ila::abi::IlaMeta {
            abi_version: mpt_bpf::ila::abi::ABI_VERSION,
            flags,
            netns_cookie: 0,
        };
        m.ila_meta
            .update(&0u32.to_ne_bytes(), meta.as_bytes(), MapFlags::ANY)
            .expect("write ila_meta");
        let mut slot = 0u32;
        let mut next = || {
            if slotted {
                slot += 1;
            }
            slot
        };
        for x in mappings {
            let mut v = IlaXlatVal::of(x);
            v.stats_slot = next();
            m.ila_xlat_in
                .update(IlaXlatKey::of(x).as_bytes(), v.as_bytes(), MapFlags::ANY)
                .expect("write ila_xlat");
        }
        for r in routes {
            let mut v = IlaRouteVal::of(r);
            v.stats_slot = next();
            m.ila_routes
                .update(
                    IlaRouteKey::of(r.dst).as_bytes(),
                    v.as_bytes(),
                    MapFlags::ANY,
                )
                .expect("write ila_routes");
        }
    }

    /// The counter of slot `slot` of `ila_slot_stats`.
    fn slot_counter(&self, slot: u32) -> IlaCounter {
        self.skel
            .maps
            .ila_slot_stats
            .lookup_percpu(&slot.to_ne_bytes(), MapFlags::ANY)
            .expect("read ila_slot_stats")
            .map(|v| mpt_bpf::ila::abi::sum_percpu(&v))
            .unwrap_or_default()
    }

    fn reasons(&self) -> [u64; R_MAX as usize] {
        let mut out = [0u64; R_MAX as usize];
        for (i, o) in out.iter_mut().enumerate() {
            let v = self
                .skel
                .maps
                .ila_reasons
                .lookup_percpu(&(i as u32).to_ne_bytes(), MapFlags::ANY)
                .expect("read ila_reasons")
                .unwrap_or_default();
            *o = v
                .iter()
                .map(|b| u64::from_ne_bytes(b[..8].try_into().expect("u64")))
                .sum();
        }
        out
    }

    fn mapping_counter(&self, m: &Mapping) -> IlaCounter {
        self.skel
            .maps
            .ila_xlat_stats_in
            .lookup_percpu(IlaXlatKey::of(m).as_bytes(), MapFlags::ANY)
            .expect("read ila_xlat_stats")
            .map(|v| mpt_bpf::ila::abi::sum_percpu(&v))
            .unwrap_or_default()
    }

    fn route_counter(&self, r: &RouteSpec) -> IlaCounter {
        self.skel
            .maps
            .ila_route_stats_in
            .lookup_percpu(IlaRouteKey::of(r.dst).as_bytes(), MapFlags::ANY)
            .expect("read ila_route_stats")
            .map(|v| mpt_bpf::ila::abi::sum_percpu(&v))
            .unwrap_or_default()
    }
}

// ---- the oracle ----------------------------------------------------------------------------

/// The route of `routes` that `dst` falls in, longest prefix first.
fn lpm(routes: &[RouteSpec], dst: Ipv6Addr) -> Option<&RouteSpec> {
    routes
        .iter()
        .filter(|r| r.dst.contains(&dst))
        .max_by_key(|r| r.dst.prefix_len())
}

/// Where the IPv6 header of a frame starts, as the programs find it (Ethernet, at most one
/// 802.1Q/802.1ad tag), if the frame has a whole one.
fn ipv6_at(f: &[u8]) -> Option<usize> {
    let mut et = u16::from_be_bytes([*f.get(12)?, *f.get(13)?]);
    let mut off = 14;
    if et == ETH_P_8021Q || et == ETH_P_8021AD {
        et = u16::from_be_bytes([*f.get(16)?, *f.get(17)?]);
        off = 18;
    }
    (et == ETH_P_IPV6 && f.len() >= off + 40 && f[off] >> 4 == 6).then_some(off)
}

/// Translate the destination of the IPv6 header at `off` in place, its transport checksum as
/// the mode says when the checksum is in the frame.
fn oracle_translate(f: &mut [u8], off: usize, to: Locator, mode: CsumMode, sir_to_ila: bool) {
    let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&f[off + 24..off + 40]).expect("16"));
    let t = translate(dst, to, mode, sir_to_ila);
    f[off + 24..off + 40].copy_from_slice(&t.addr.octets());
    let Some(diff) = t.l4_diff else { return };
    let (at, udp) = match f[off + 6] {
        IPPROTO_TCP => (16, false),
        IPPROTO_UDP => (6, true),
        IPPROTO_ICMPV6 => (2, false),
        _ => return,
    };
    let i = off + 40 + at;
    if i + 2 > f.len() {
        return;
    }
    let c = u16::from_be_bytes([f[i], f[i + 1]]);
    let c = if udp {
        adjust_udp_checksum(c, diff)
    } else {
        adjust_checksum(c, diff)
    };
    f[i..i + 2].copy_from_slice(&c.to_be_bytes());
}

/// What a program makes of a frame, by the model.
fn oracle(p: Prog, f: &[u8], ingress: u32, mappings: &[Mapping], routes: &[RouteSpec]) -> Vec<u8> {
    let mut f = f.to_vec();
    let Some(off) = ipv6_at(&f) else { return f };
    let dst = |f: &[u8]| Ipv6Addr::from(<[u8; 16]>::try_from(&f[off + 24..off + 40]).expect("16"));
    match p {
        Prog::InXdp | Prog::InTc => {
            if let Some(m) = lookup(mappings, dst(&f), ingress) {
                oracle_translate(&mut f, off, m.locator, m.csum_mode, false);
            }
            if let Some(r) = lpm(routes, dst(&f)).filter(|r| r.hook_type == HookType::Input) {
                oracle_translate(&mut f, off, r.locator, r.csum_mode, true);
            }
        }
        Prog::OutTc => {
            if let Some(r) = lpm(routes, dst(&f)).filter(|r| r.hook_type == HookType::Output) {
                oracle_translate(&mut f, off, r.locator, r.csum_mode, true);
            }
        }
    }
    f
}

/// Whether two outputs agree, a TCP or ICMPv6 checksum of 0x0000 and 0xffff counting as the
/// same (both are one's complement zero and verify alike: the kernel's helpers and the model
/// may write either).
fn same(a: &[u8], b: &[u8]) -> bool {
    if a == b {
        return true;
    }
    let Some(off) = ipv6_at(a) else { return false };
    let at = match a[off + 6] {
        IPPROTO_TCP => 16,
        IPPROTO_ICMPV6 => 2,
        _ => return false,
    };
    let i = off + 40 + at;
    if a.len() != b.len() || i + 2 > a.len() {
        return false;
    }
    let zero = |x: &[u8]| x == [0, 0] || x == [0xff, 0xff];
    a[..i] == b[..i] && a[i + 2..] == b[i + 2..] && zero(&a[i..i + 2]) && zero(&b[i..i + 2])
}

// ---- packets -------------------------------------------------------------------------------

fn addr(s: &str) -> Ipv6Addr {
    s.parse().expect("IPv6 address")
}

fn loc(s: &str) -> Locator {
    s.parse().expect("locator")
}

/// An ICMPv6 echo request with its checksum.
fn icmp6_echo(src: Ipv6Addr, dst: Ipv6Addr, n: usize) -> Vec<u8> {
    let mut m = vec![128, 0, 0, 0, 0x12, 0x34, 0, 1];
    m.resize(8 + n, 0x5a);
    let ph = mpt_testkit::packet::pseudo_header(
        IpAddr::V6(src),
        IpAddr::V6(dst),
        IPPROTO_ICMPV6,
        m.len(),
    );
    let c = mpt_testkit::packet::inet_csum(&[ph.as_slice(), &m].concat());
    m[2..4].copy_from_slice(&c.to_be_bytes());
    m
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum L4 {
    Tcp,
    Udp,
    /// UDP without a checksum (0).
    UdpNoCsum,
    Icmp6,
}

const L4S: [L4; 4] = [L4::Tcp, L4::Udp, L4::UdpNoCsum, L4::Icmp6];

/// A frame from [`SRC`] to `dst` with a valid transport checksum (or none, `UdpNoCsum`).
fn frame(l4: L4, dst: Ipv6Addr) -> Vec<u8> {
    let (s, d) = (addr(SRC), dst);
    let (nh, payload) = match l4 {
        L4::Tcp => (IPPROTO_TCP, tcp(40000, 80)),
        L4::Udp => (
            IPPROTO_UDP,
            udp_segment(
                IpAddr::V6(s),
                IpAddr::V6(d),
                40000,
                53,
                b"ila fixture payload",
            ),
        ),
        L4::UdpNoCsum => (
            IPPROTO_UDP,
            udp_segment(IpAddr::V6(s), IpAddr::V6(d), 40000, 53, b"no checksum"),
        ),
        L4::Icmp6 => (IPPROTO_ICMPV6, icmp6_echo(s, d, 24)),
    };
    let mut f = Ip6::new(SRC, &d.to_string(), nh, payload).frame();
    if l4 == L4::UdpNoCsum {
        // (after the builder, which completes a UDP checksum left at 0)
        f[14 + 46..14 + 48].copy_from_slice(&[0, 0]);
    }
    f
}

/// The transport segment of a frame built by [`frame`] and its checksum verdict for the
/// frame's own addresses.
fn l4_ok(f: &[u8]) -> bool {
    let off = ipv6_at(f).expect("an IPv6 frame");
    let s = Ipv6Addr::from(<[u8; 16]>::try_from(&f[off + 8..off + 24]).expect("16"));
    let d = Ipv6Addr::from(<[u8; 16]>::try_from(&f[off + 24..off + 40]).expect("16"));
    l4_csum_ok(IpAddr::V6(s), IpAddr::V6(d), f[off + 6], &f[off + 40..])
}

fn dst_of(f: &[u8]) -> Ipv6Addr {
    let off = ipv6_at(f).expect("an IPv6 frame");
    Ipv6Addr::from(<[u8; 16]>::try_from(&f[off + 24..off + 40]).expect("16"))
}

/// A random locator.
fn rand_loc(rng: &mut XorShift64) -> Locator {
    let mut b = [0u8; 8];
    rng.fill(&mut b);
    Locator(b)
}

/// A random address with locator `l`, identifier type luid, the C-bit clear or set.
fn rand_addr(rng: &mut XorShift64, l: Locator, c_bit: bool) -> Ipv6Addr {
    let mut b = [0u8; 16];
    rng.fill(&mut b);
    b[..8].copy_from_slice(&l.0);
    b[8] = 0x20 | (b[8] & 0x0f) | if c_bit { 0x10 } else { 0 };
    Ipv6Addr::from(b)
}

fn mapping(m: &str, l: &str, ifindex: u32, mode: CsumMode) -> Mapping {
    Mapping {
        locator_match: loc(m),
        locator: loc(l),
        ifindex,
        csum_mode: mode,
        ident_type: IdentType::UseFormat,
    }
}

fn route(dst: &str, l: &str, mode: CsumMode, hook: HookType) -> RouteSpec {
    RouteSpec {
        dst: dst.parse::<Ipv6Net>().expect("prefix"),
        locator: loc(l),
        csum_mode: mode,
        ident_type: IdentType::UseFormat,
        hook_type: hook,
    }
}

// ---- fixtures ------------------------------------------------------------------------------

/// Every mode, every transport, both directions and all three programs, over random locators
/// and identifiers: the output is the oracle's, and the transport checksum is valid for the new
/// destination exactly when the mode keeps it so.
#[test]
fn translation_matches_the_model_in_every_mode() {
    with_fixture(|fx| {
        let mut rng = XorShift64(0x696c_615f_6669_7874);
        let mut bad = Vec::new();
        let mut broken = 0;
        for round in 0..150 {
            for mode in CsumMode::ALL {
                let (ila, sir) = (rand_loc(&mut rng), rand_loc(&mut rng));
                let c_bit = round % 3 == 0;
                let m = Mapping {
                    locator_match: ila,
                    locator: sir,
                    ifindex: 0,
                    csum_mode: mode,
                    ident_type: IdentType::UseFormat,
                };
                let sir_prefix = Ipv6Net::new(sir.put(Ipv6Addr::UNSPECIFIED), 64).expect("/64");
                let out_route = RouteSpec {
                    dst: sir_prefix,
                    locator: ila,
                    csum_mode: mode,
                    ident_type: IdentType::UseFormat,
                    hook_type: HookType::Output,
                };
                for l4 in L4S {
                    // receive side: ILA -> SIR
                    fx.set(&[m], &[]);
                    let f = frame(l4, rand_addr(&mut rng, ila, c_bit));
                    for p in [Prog::InXdp, Prog::InTc] {
                        let out = fx.run(p, &f, fx.a0);
                        let want = oracle(p, &f, fx.a0, &[m], &[]);
                        if !same(&out, &want) {
                            bad.push(format!(
                                "[{p:?}] {mode:?} {l4:?}\n  in   {}\n  got  {}\n  want {}",
                                hex(&f),
                                hex(&out),
                                hex(&want)
                            ));
                        }
                        // neutral-map acts on ILA -> SIR only where the C-bit says so
                        let acts = mode != CsumMode::NeutralMap || c_bit;
                        check_checksum(&out, &f, (mode, acts, l4, p), &mut bad, &mut broken);
                    }
                    // send side: SIR -> ILA
                    fx.set(&[], &[out_route]);
                    let f = frame(l4, rand_addr(&mut rng, sir, c_bit));
                    let out = fx.run(Prog::OutTc, &f, fx.a0);
                    let want = oracle(Prog::OutTc, &f, fx.a0, &[], &[out_route]);
                    if !same(&out, &want) {
                        bad.push(format!(
                            "[OutTc] {mode:?} {l4:?}\n  in   {}\n  got  {}\n  want {}",
                            hex(&f),
                            hex(&out),
                            hex(&want)
                        ));
                    }
                    // and on SIR -> ILA only where it is clear (a SIR address has none)
                    let acts = mode != CsumMode::NeutralMap || !c_bit;
                    check_checksum(
                        &out,
                        &f,
                        (mode, acts, l4, Prog::OutTc),
                        &mut bad,
                        &mut broken,
                    );
                    if bad.len() > 10 {
                        break;
                    }
                }
            }
        }
        assert!(bad.is_empty(), "{}", bad.join("\n"));
        // no-action (and neutral-map where it does not act) must visibly break checksums:
        // all but those of locators with equal sums
        assert!(broken > 1000, "only {broken} checksums broken");
    });
}

/// The independent verdict on a translated packet's checksum.
/// `acts`: whether the mode keeps checksums right for this address (neutral-map only with the
/// C-bit as the direction needs).
fn check_checksum(
    out: &[u8],
    input: &[u8],
    (mode, acts, l4, p): (CsumMode, bool, L4, Prog),
    bad: &mut Vec<String>,
    broken: &mut u32,
) {
    assert_ne!(
        dst_of(out),
        dst_of(input),
        "[{p:?}] {mode:?} {l4:?}: not translated"
    );
    let ok = l4_ok(out);
    match (mode, l4) {
        // no checksum: nothing to be right or wrong, and it stays 0
        (_, L4::UdpNoCsum) => {
            let off = ipv6_at(out).expect("ipv6");
            if out[off + 46..off + 48] != [0, 0] {
                bad.push(format!("[{p:?}] {mode:?}: a UDP checksum of 0 was changed"));
            }
        }
        _ if (mode == CsumMode::NoAction || !acts) && !ok => *broken += 1,
        _ if mode == CsumMode::NoAction || !acts => {}
        _ if !ok => bad.push(format!(
            "[{p:?}] {mode:?} {l4:?}: transport checksum wrong after translation: {}",
            hex(out)
        )),
        _ => {}
    }
}

/// A mapping for the receiving device wins over the one for any device; another device's
/// mapping does not apply; hook types apply where they say (input routes on ingress after the
/// mappings, output routes on egress only).
#[test]
fn table_semantics() {
    with_fixture(|fx| {
        let mode = CsumMode::NeutralMapAuto;
        let any = mapping("2001:db8:ff:1", "2001:db8:1:2", 0, mode);
        let on_b0 = mapping("2001:db8:ff:1", "2001:db8:1:3", fx.b0, mode);
        let only_b0 = mapping("2001:db8:ff:2", "2001:db8:1:4", fx.b0, mode);
        fx.set(&[any, on_b0, only_b0], &[]);
        let f = frame(L4::Tcp, addr("2001:db8:ff:1:2000::7"));
        for p in [Prog::InXdp, Prog::InTc] {
            let on_a = fx.run(p, &f, fx.a0);
            assert_eq!(
                Locator::of(dst_of(&on_a)),
                any.locator,
                "[{p:?}] a0: the any-device mapping"
            );
            let on_b = fx.run(p, &f, fx.b0);
            assert_eq!(
                Locator::of(dst_of(&on_b)),
                on_b0.locator,
                "[{p:?}] b0: its own mapping first"
            );
            let g = frame(L4::Tcp, addr("2001:db8:ff:2:2000::7"));
            assert_eq!(
                fx.run(p, &g, fx.a0),
                g,
                "[{p:?}] a0: b0's mapping does not apply"
            );
            assert_eq!(
                Locator::of(dst_of(&fx.run(p, &g, fx.b0))),
                only_b0.locator,
                "[{p:?}] b0"
            );
            // the egress program does not look at mappings
            assert_eq!(fx.run(Prog::OutTc, &f, fx.a0), f);
        }

        let out = route("2001:db8:1:2::/64", "2001:db8:ff:9", mode, HookType::Output);
        let host = route(
            "2001:db8:1:2:2000::5/128",
            "2001:db8:ff:8",
            mode,
            HookType::Output,
        );
        let inp = route("2001:db8:1:3::/64", "2001:db8:ff:7", mode, HookType::Input);
        fx.set(&[any], &[out, host, inp]);
        let to = |a: &str| frame(L4::Udp, addr(a));
        // longest prefix
        let f5 = to("2001:db8:1:2:2000::5");
        assert_eq!(
            Locator::of(dst_of(&fx.run(Prog::OutTc, &f5, fx.a0))),
            host.locator
        );
        let f6 = to("2001:db8:1:2:2000::6");
        assert_eq!(
            Locator::of(dst_of(&fx.run(Prog::OutTc, &f6, fx.a0))),
            out.locator
        );
        // output routes do not translate on ingress, input routes not on egress
        for p in [Prog::InXdp, Prog::InTc] {
            assert_eq!(
                fx.run(p, &f6, fx.a0),
                f6,
                "[{p:?}] an output route on ingress"
            );
        }
        let f7 = to("2001:db8:1:3:2000::1");
        assert_eq!(
            fx.run(Prog::OutTc, &f7, fx.a0),
            f7,
            "an input route on egress"
        );
        for p in [Prog::InXdp, Prog::InTc] {
            assert_eq!(
                Locator::of(dst_of(&fx.run(p, &f7, fx.a0))),
                inp.locator,
                "[{p:?}]"
            );
        }
        // a mapping, then an input route for the SIR address it gives (a router between
        // locators): both apply, in that order
        let chain = mapping("2001:db8:ff:1", "2001:db8:1:3", 0, mode);
        fx.set(&[chain], &[inp]);
        let f = to("2001:db8:ff:1:2000::1");
        for p in [Prog::InXdp, Prog::InTc] {
            let o = fx.run(p, &f, fx.a0);
            assert_eq!(
                Locator::of(dst_of(&o)),
                inp.locator,
                "[{p:?}] mapping then input route"
            );
            assert_eq!(o, oracle(p, &f, fx.a0, &[chain], &[inp]), "[{p:?}]");
            assert!(l4_ok(&o), "[{p:?}] neutral-map-auto keeps the checksum");
        }
    });
}

/// Counters: a mapping's and a route's packets and bytes, and one reason per packet.
#[test]
fn counters_and_reasons() {
    counters_case(false);
}

/// The same with the entries' counters in slots of the per-CPU array, as the tool gives the
/// first 8191 entries (and nothing counted in the hashes).
#[test]
fn counters_in_slots() {
    counters_case(true);
}

fn counters_case(slotted: bool) {
    with_fixture(move |fx| {
        let m = mapping(
            "2001:db8:ff:1",
            "2001:db8:1:2",
            0,
            CsumMode::AdjustTransport,
        );
        let r = route(
            "2001:db8:1:2::/64",
            "2001:db8:ff:1",
            CsumMode::AdjustTransport,
            HookType::Output,
        );
        fx.set_with(&[m], &[r], slotted);
        let before = fx.reasons();
        let f = frame(L4::Tcp, addr("2001:db8:ff:1:2000::7"));
        for _ in 0..3 {
            fx.run(Prog::InXdp, &f, fx.a0);
        }
        fx.run(Prog::InTc, &f, fx.a0);
        let g = frame(L4::Udp, addr("2001:db8:1:2:2000::7"));
        fx.run(Prog::OutTc, &g, fx.a0);
        fx.run(Prog::OutTc, &g, fx.a0);
        // not IPv6, no match, malformed, fragment (no transport checksum to fix)
        let v4 = mpt_testkit::packet::Ip4::new(
            "192.0.2.1",
            "192.0.2.2",
            IPPROTO_UDP,
            mpt_testkit::packet::udp(1, 2, 4),
        )
        .frame();
        fx.run(Prog::InXdp, &v4, fx.a0);
        fx.run(Prog::InXdp, &frame(L4::Tcp, addr("2001:db8:ee::1")), fx.a0);
        fx.run(Prog::InXdp, &f[..40], fx.a0);
        let frag = Ip6::new(
            SRC,
            "2001:db8:ff:1:2000::7",
            44,
            vec![6, 0, 0, 1, 0, 0, 0, 1, 0, 0],
        )
        .frame();
        fx.run(Prog::InXdp, &frag, fx.a0);

        let c = if slotted {
            fx.slot_counter(1)
        } else {
            fx.mapping_counter(&m)
        };
        assert_eq!(c.packets, 5, "mapping packets");
        assert_eq!(
            c.bytes,
            4 * f.len() as u64 + frag.len() as u64,
            "mapping bytes"
        );
        let c = if slotted {
            fx.slot_counter(2)
        } else {
            fx.route_counter(&r)
        };
        assert_eq!(
            (c.packets, c.bytes),
            (2, 2 * g.len() as u64),
            "route counter"
        );
        if slotted {
            assert_eq!(fx.mapping_counter(&m).packets, 0, "counted in the hash too");
            assert_eq!(fx.route_counter(&r).packets, 0, "counted in the hash too");
        }
        let after = fx.reasons();
        let delta = |r: Reason| after[r as usize] - before[r as usize];
        assert_eq!(delta(Reason::XlatIn), 5);
        assert_eq!(delta(Reason::RouteOut), 2);
        assert_eq!(delta(Reason::RouteIn), 0);
        assert_eq!(delta(Reason::NotIpv6), 1);
        assert_eq!(delta(Reason::NoMatch), 1);
        assert_eq!(delta(Reason::Malformed), 1);
        assert_eq!(delta(Reason::NoL4Csum), 1);
        let total: u64 = Reason::ALL.iter().map(|r| delta(*r)).sum();
        // ten packets, one reason each, the fragment two (translated, and no checksum to fix)
        assert_eq!(total, 11);
    });
}

// ---- robustness ----------------------------------------------------------------------------

/// Matching frames of every kind: every mode's mapping and route hit by TCP, UDP (with and
/// without a checksum) and ICMPv6, VLAN-tagged, extension headers, and no match.
fn templates(a0: u32) -> (Vec<Vec<u8>>, Vec<Mapping>, Vec<RouteSpec>) {
    let mut mappings = Vec::new();
    let mut routes = Vec::new();
    let mut frames = Vec::new();
    for (i, mode) in CsumMode::ALL.into_iter().enumerate() {
        let m = mapping(
            &format!("2001:db8:f{i}:1"),
            &format!("2001:db8:{i}:1"),
            0,
            mode,
        );
        let md = mapping(
            &format!("2001:db8:f{i}:1"),
            &format!("2001:db8:{i}:2"),
            a0,
            mode,
        );
        mappings.extend([m, md]);
        routes.push(route(
            &format!("2001:db8:{i}:1::/64"),
            &format!("2001:db8:e{i}:1"),
            mode,
            HookType::Output,
        ));
        routes.push(route(
            &format!("2001:db8:{i}:2::/64"),
            &format!("2001:db8:d{i}:1"),
            mode,
            HookType::Input,
        ));
        for l4 in L4S {
            for d in [
                format!("2001:db8:f{i}:1:2000::9"),
                format!("2001:db8:{i}:1:3000::9"),
            ] {
                let f = frame(l4, addr(&d));
                frames.push(tagged(ETH_P_8021Q, 7, &f));
                frames.push(f);
            }
        }
    }
    frames.push(frame(L4::Tcp, addr("2001:db8:99::1")));
    frames.push(
        Ip6::new(
            SRC,
            "2001:db8:f0:1:2000::9",
            0,
            vec![6, 0, 0, 0, 0, 0, 0, 0],
        )
        .frame(),
    );
    (frames, mappings, routes)
}

/// 100,000 frames (every truncation of every template, random bytes, templates with bytes
/// replaced, a third of those truncated) through all three programs: none fails, every verdict
/// is "go on", and every output is the oracle's (a frame that is not a whole IPv6 header, or
/// matches nothing, comes out unchanged).
#[test]
fn robustness_random_and_truncated_frames() {
    with_fixture(|fx| {
        const N: usize = 100_000;
        let (templates, mappings, routes) = templates(fx.a0);
        fx.set(&mappings, &routes);
        let mut rng = XorShift64(0x696c_615f_726f_6275);
        let mut corpus: Vec<Vec<u8>> = Vec::with_capacity(N);
        for t in &templates {
            for len in 0..=t.len() {
                corpus.push(t[..len].to_vec());
            }
        }
        while corpus.len() < N {
            match rng.below(4) {
                0 => {
                    let mut f = vec![0u8; rng.below(160) as usize];
                    rng.fill(&mut f);
                    if f.len() >= 14 && rng.below(2) == 0 {
                        f[12..14].copy_from_slice(&ETH_P_IPV6.to_be_bytes());
                    }
                    corpus.push(f);
                }
                _ => {
                    let mut f = templates[rng.below(templates.len() as u64) as usize].clone();
                    for _ in 0..=rng.below(4) {
                        let i = rng.below(f.len().min(80) as u64) as usize;
                        f[i] = rng.next() as u8;
                    }
                    if rng.below(3) == 0 {
                        f.truncate(rng.below(f.len() as u64 + 1) as usize);
                    }
                    corpus.push(f);
                }
            }
        }
        let mut bad = Vec::new();
        let (mut ran, mut refused, mut changed) = (0usize, 0usize, 0usize);
        for f in &corpus {
            for p in PROGS {
                let ingress = if rng.below(2) == 0 { fx.a0 } else { fx.b0 };
                match fx.try_run(p, f, ingress) {
                    Err(e)
                        if progrun::kernel_refuses(p.tc(), f)
                            && e.kind() == libbpf_rs::ErrorKind::InvalidInput =>
                    {
                        refused += 1
                    }
                    Err(e) => bad.push(format!("[{p:?}] error {e} on {}", hex(f))),
                    Ok(out) => {
                        ran += 1;
                        let want = oracle(p, f, ingress, &mappings, &routes);
                        if out.rc != p.pass() {
                            bad.push(format!("[{p:?}] rc {:#x} on {}", out.rc, hex(f)));
                        } else if !same(&out.data, &want) {
                            bad.push(format!(
                                "[{p:?}] on {}\n  in   {}\n  got  {}\n  want {}",
                                if ingress == fx.a0 { "a0" } else { "b0" },
                                hex(f),
                                hex(&out.data),
                                hex(&want)
                            ));
                        } else if out.data != *f {
                            changed += 1;
                        }
                    }
                }
            }
            if bad.len() > 10 {
                break;
            }
        }
        println!("robustness: {} frames, {ran} runs ({changed} translated), {refused} inputs refused by the kernel", corpus.len());
        assert!(bad.is_empty(), "{}", bad.join("\n"));
        assert!(changed > 10_000, "only {changed} runs translated anything");
    });
}

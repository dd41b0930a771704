//! ila against the kernel's own ILA (the `ila` module: Debian's kernels of the matrix have it,
//! `cargo xtask test` boots them; the host's kernel may not): ila's kernel backend with real
//! traffic, and ila's BPF translator compared with the kernel's translation of the same
//! packets, byte for byte.
//!
//! ```text
//!   A  va 2001:db8:a::1 --- ra R rm 2001:db8:b::1 --- mr M md 2001:db8:d::1 --- dm D
//!                             |                         |                         SIR_B on lo
//!                             route SIR_B loc LOC_B      xlat loc_match LOC_B
//!                             hook-type input            loc SIR_NET
//!                             (SIR -> ILA, forwarding)   (ILA -> SIR, receive)
//! ```
//!
//! A sends to SIR_B; R's route gives it B's locator (the send side's translation, as
//! `encap ila` does it); M's mapping takes it back to SIR_B (the receive side's); D gets it.
//! What M receives is R's translation, what D receives is M's: both are captured, once with
//! the kernel's ILA in R and M, once with ila's translator (tc, the default on a veth), from
//! the same packets: TCP, UDP and ICMPv6 from raw sockets (complete checksums, chosen bytes)
//! and UDP from a socket with A's transmit checksum offload off and on (the forwarded skb
//! keeps `CHECKSUM_PARTIAL`, the capture sees the pseudo-header sum). For each checksum mode
//! and identifier type the two translations must be identical from the IPv6 header on, or
//! differ only where the kernel is wrong (see [`KERNEL_ADJ_TRANSPORT`]).
//!
//! Where the kernel has no ILA module the kernel backend must refuse in one line (exit 2);
//! inside the matrix (`MPT_KERNEL_SERIES` set) the module must be there.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, SocketAddrV6, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

use mpt_testkit::capture::{Capture, Captured};
use mpt_testkit::packet::{inet_csum_parts, l4_csum_verdict, pseudo_header};
use mpt_testkit::topo::ila_plan::{A_ADDR, ILA_B, LOC_B, MODES, SIR_B, SIR_NET};
use mpt_testkit::traffic::in_netns;
use mpt_testkit::{require_root, Netns, Tool};
use nix::sys::socket::{
    sendto, socket, AddressFamily, MsgFlags, SockFlag, SockType, SockaddrStorage,
};

#[path = "helpers/ila_route_batch.rs"]
mod ila_route_batch;

const ILA: Tool = Tool::new(env!("CARGO_BIN_EXE_ila"));

const IDENT_TYPES: [&str; 2] = ["luid", "use-format"];

/// Whether this kernel has the ILA module (ila's kernel backend answers).
fn kernel_has_ila() -> bool {
    let ns = Netns::new("ilak-probe");
    let o = ILA.at(&ns, &["--backend", "kernel", "xlat", "show"]);
    if o.status.success() {
        return true;
    }
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("ila: backend kernel: this kernel has no ILA") && err.lines().count() == 2,
        "one line and a hint: {err}"
    );
    assert!(
        std::env::var_os("MPT_KERNEL_SERIES").is_none(),
        "the matrix's kernels have the ILA module, this one refused: {err}"
    );
    false
}

/// The four hosts, with the kernel's ILA (`kernel`) or ila's translator in R and M.
struct Chain {
    a: Netns,
    r: Netns,
    m: Netns,
    d: Netns,
    backend: &'static str,
}

impl Chain {
    fn new(tag: &str, backend: &'static str) -> Chain {
        let mpt_testkit::IlaPath { a, r, m, d } =
            mpt_testkit::IlaPath::new(tag, SIR_B, LOC_B, SIR_NET);
        let c = Chain {
            a,
            r,
            m,
            d,
            backend,
        };
        // R's translator in both chains (input routes on ra's ingress, output routes on rm's
        // egress): the kernel's xlat in M is fed ila's translation, as ila's own is
        ILA.ok(
            &c.r,
            &[
                "--backend",
                "bpf",
                "dataplane",
                "attach",
                "dev",
                "ra",
                "ingress",
            ],
        );
        ILA.ok(
            &c.r,
            &[
                "--backend",
                "bpf",
                "dataplane",
                "attach",
                "dev",
                "rm",
                "egress",
            ],
        );
        if backend == "bpf" {
            c.ila(&c.m, &["dataplane", "attach", "dev", "mr", "ingress"]);
        }
        c
    }

    fn ila(&self, ns: &Netns, args: &[&str]) -> String {
        let mut a = vec!["--backend", self.backend];
        a.extend_from_slice(args);
        ILA.ok(ns, &a)
    }

    /// R's route (hook-type input) and M's mapping in `mode` with `ident`.
    fn tables(&self, mode: &str, ident: &str) {
        self.route(mode, ident, "input");
        self.mapping(mode, ident);
    }

    /// R's route in `mode` with `ident`, on `hook` (input: as R receives the packet; output: as
    /// it sends it, `encap ila`'s default, which applies to what R forwards too).
    fn route(&self, mode: &str, ident: &str, hook: &str) {
        self.route_by(self.backend, mode, ident, hook);
    }

    /// R's route by `backend` (either can be asked for in either chain: R has ila's
    /// translator attached in both).
    fn route_by(&self, backend: &str, mode: &str, ident: &str, hook: &str) {
        ILA.ok(
            &self.r,
            &[
                "--backend",
                backend,
                "route",
                "replace",
                SIR_B,
                "loc",
                LOC_B,
                "csum-mode",
                mode,
                "ident-type",
                ident,
                "hook-type",
                hook,
                "via",
                "2001:db8:b::2",
                "dev",
                "rm",
            ],
        );
    }

    /// M's mapping in `mode` with `ident`.
    fn mapping(&self, mode: &str, ident: &str) {
        self.ila(
            &self.m,
            &[
                "xlat",
                "replace",
                "loc_match",
                LOC_B,
                "loc",
                SIR_NET,
                "csum-mode",
                mode,
                "ident-type",
                ident,
            ],
        );
    }
}

/// The packets A sends for one case, told apart by protocol and source port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    RawTcp,
    RawUdp,
    RawIcmp,
    UdpComplete,
    UdpOffload,
}

const KINDS: [Kind; 5] = [
    Kind::RawTcp,
    Kind::RawUdp,
    Kind::RawIcmp,
    Kind::UdpComplete,
    Kind::UdpOffload,
];

impl Kind {
    /// (next header, source port or ICMPv6 echo id) its packet carries.
    const fn mark(self) -> (u8, u16) {
        match self {
            Kind::RawTcp => (6, 7101),
            Kind::RawUdp => (17, 7102),
            Kind::RawIcmp => (58, 7103),
            Kind::UdpComplete => (17, 7104),
            Kind::UdpOffload => (17, 7105),
        }
    }
}

fn sir_b() -> Ipv6Addr {
    SIR_B.parse().expect("SIR_B")
}

fn a_addr() -> Ipv6Addr {
    A_ADDR.parse().expect("A_ADDR")
}

/// A TCP segment (ACK|PSH with 200 bytes) with its complete checksum.
fn tcp_segment(sport: u16, dport: u16) -> Vec<u8> {
    let mut seg = Vec::new();
    seg.extend_from_slice(&sport.to_be_bytes());
    seg.extend_from_slice(&dport.to_be_bytes());
    seg.extend_from_slice(&0x1234_5678u32.to_be_bytes());
    seg.extend_from_slice(&0x9abc_def0u32.to_be_bytes());
    seg.extend_from_slice(&[0x50, 0x18, 0x20, 0x00, 0, 0, 0, 0]);
    seg.extend((0..200u32).map(|i| (i * 13 + 5) as u8));
    let ph = pseudo_header(IpAddr::V6(a_addr()), IpAddr::V6(sir_b()), 6, seg.len());
    let c = inet_csum_parts(&[&ph, &seg]);
    seg[16..18].copy_from_slice(&c.to_be_bytes());
    seg
}

/// Send one packet of `kind` from A to SIR_B.
fn send(a: &Netns, kind: Kind) {
    let (proto, port) = kind.mark();
    let to = SocketAddr::new(IpAddr::V6(sir_b()), 0);
    match kind {
        Kind::RawTcp | Kind::RawUdp | Kind::RawIcmp => in_netns(a, || {
            let p = match kind {
                Kind::RawTcp => nix::sys::socket::SockProtocol::Tcp,
                Kind::RawUdp => nix::sys::socket::SockProtocol::Udp,
                _ => nix::sys::socket::SockProtocol::IcmpV6,
            };
            let fd = socket(
                AddressFamily::Inet6,
                SockType::Raw,
                SockFlag::SOCK_CLOEXEC,
                p,
            )
            .unwrap_or_else(|e| panic!("raw socket: {e}"));
            let seg = match kind {
                Kind::RawTcp => tcp_segment(port, 80),
                Kind::RawUdp => mpt_testkit::packet::udp_segment(
                    IpAddr::V6(a_addr()),
                    IpAddr::V6(sir_b()),
                    port,
                    9,
                    &[0x5a; 300],
                ),
                // echo request, id = port; the kernel computes the ICMPv6 checksum
                _ => {
                    let mut e = vec![128, 0, 0, 0];
                    e.extend_from_slice(&port.to_be_bytes());
                    e.extend_from_slice(&1u16.to_be_bytes());
                    e.extend_from_slice(&[0x42; 56]);
                    e
                }
            };
            let n = sendto(
                fd.as_raw_fd(),
                &seg,
                &SockaddrStorage::from(to),
                MsgFlags::empty(),
            )
            .unwrap_or_else(|e| panic!("send raw {proto}: {e}"));
            assert_eq!(n, seg.len());
        }),
        Kind::UdpComplete | Kind::UdpOffload => {
            let on = kind == Kind::UdpOffload;
            let o = a.exec(
                "ethtool",
                &["-K", "va", "tx", if on { "on" } else { "off" }],
            );
            assert!(o.status.success(), "ethtool -K va tx: {o:?}");
            in_netns(a, || {
                let s = UdpSocket::bind(SocketAddrV6::new(a_addr(), port, 0, 0))
                    .unwrap_or_else(|e| panic!("bind UDP: {e}"));
                s.send_to(&[0x3c; 700], SocketAddrV6::new(sir_b(), 9, 0, 0))
                    .unwrap_or_else(|e| panic!("send UDP: {e}"));
            });
        }
    }
}

/// The frame of `kind` from A among `frames` (received ones), from the IPv6 header on, and
/// whether its checksum was left to offload.
fn find(frames: &[Captured], kind: Kind) -> Option<(Vec<u8>, bool)> {
    let (proto, port) = kind.mark();
    frames.iter().filter(|f| !f.outgoing).find_map(|f| {
        let l3 = f.frame.get(14..)?;
        let ok = f.frame.get(12..14)? == [0x86, 0xdd]
            && l3.get(8..24)? == a_addr().octets()
            && *l3.get(6)? == proto
            && l3.get(40..42).map(|b| u16::from_be_bytes([b[0], b[1]]))
                == Some(if proto == 58 { 128u16 << 8 } else { port })
            && (proto != 58 || l3.get(44..46) == Some(&port.to_be_bytes()[..]));
        ok.then(|| (l3.to_vec(), f.csum_partial))
    })
}

/// Where a frame was captured: what M received (R's translation, SIR to ILA) or what D
/// received (M's, ILA to SIR).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Point {
    SendSide,
    ReceiveSide,
}

/// (mode, identifier type, R's hook type, packet, where) to the frame from the IPv6 header on
/// and whether its checksum was left to offload.
type Frames = BTreeMap<(&'static str, &'static str, &'static str, Kind, Point), (Vec<u8>, bool)>;

/// R's hook types, each with the identifier types it is tried with (the identifier type
/// decides how an address is read, the same for both hooks: both with input only).
const CASES: [(&str, &[&str]); 2] = [("input", &IDENT_TYPES), ("output", &["use-format"])];

/// Frames a backend's run yields.
const FRAMES: usize = (MODES.len() * IDENT_TYPES.len() * 2 + MODES.len()) * KINDS.len();

/// Every case through one backend's chain. R's translation is captured while M has no
/// mapping: the kernel's ILA writes the address of a packet whose data a packet socket still
/// shares (a clone, as a capture without a ring holds it) without unsharing it first, so with a
/// mapping in M the capture on M's device would show M's translation, not what R sent. (ila's
/// translator writes through tc's helpers, which unshare: a capture keeps what it saw.)
fn translate_all(backend: &'static str) -> Frames {
    let c = Chain::new(&format!("ilak-{backend}"), backend);
    let mut out = Frames::new();
    let mut capture =
        |point: Point, mode: &'static str, ident: &'static str, hook: &'static str| {
            let (ns, dev) = match point {
                Point::SendSide => (&c.m, "mr"),
                Point::ReceiveSide => (&c.d, "dm"),
            };
            let cap = Capture::start(ns, dev);
            for k in KINDS {
                send(&c.a, k);
            }
            std::thread::sleep(Duration::from_millis(200));
            let frames = cap.stop();
            for k in KINDS {
                let f = find(&frames, k).unwrap_or_else(|| {
                    panic!("{backend} {mode} {ident} {hook}: no {k:?} frame at {point:?}")
                });
                out.insert((mode, ident, hook, k, point), f);
            }
        };
    for (hook, idents) in CASES {
        for mode in MODES {
            for &ident in idents.iter() {
                c.ila(&c.m, &["xlat", "flush"]);
                c.route(mode, ident, hook);
                capture(Point::SendSide, mode, ident, hook);
                // M's translation is the same whichever hook R used: once, fed the same
                // frames in both chains (R's route by ila's translator)
                if hook == "input" {
                    if backend == "kernel" {
                        c.ila(&c.r, &["route", "del", SIR_B]);
                        c.route_by("bpf", mode, ident, hook);
                    }
                    c.mapping(mode, ident);
                    capture(Point::ReceiveSide, mode, ident, hook);
                    if backend == "kernel" {
                        ILA.ok(&c.r, &["--backend", "bpf", "route", "del", SIR_B]);
                    }
                }
            }
        }
    }
    drop((c.a, c.r, c.m, c.d));
    out
}

/// Where the kernel's translation is wrong, and ours right, with the reason (each checked
/// against the kernel's source, `net/ipv6/ila/`, 5.10 to 6.12 alike):
///
/// - adj-transport: the kernel adjusts the transport checksum by the address difference with
///   the wrong sign. `ila_init_saved_csum` / `get_csum_diff_iaddr` compute old minus new
///   (`compute_csum_diff8(&p->locator, &iaddr->loc)`, meant for the neutral modes), and
///   `ila_csum_adjust_transport` hands it to `inet_proto_csum_replace_by_diff`, which adds a
///   new-minus-old difference. The Linux documentation (`Documentation/networking/ila.rst`,
///   "adjust transport checksum") says the checksum is to be "adjusted to reflect the correct
///   checksum per the translated address": ours verifies, the kernel's does not. Such a frame
///   differs in the checksum field only.
/// - neutral-map with hook-type input: the kernel's route input hook (`ila_input`) translates
///   with `sir2ila = false`, as if the packet went from ILA to SIR; a SIR address has no C-bit,
///   which that direction takes as "nothing to adjust". So the identifier keeps its bits and
///   only the locator changes: the transport checksum no longer verifies on the wire. Ours
///   sets the C-bit and adjusts the identifier's last 16 bits, as neutral-map is defined (and
///   as the kernel's output hook does). Such a frame differs in the identifier only.
fn kernel_wrong(key: &Key, ours: &[u8], kernel: &[u8], partial: bool) -> Option<&'static str> {
    let eth = |l3: &[u8]| [&[0u8; 12][..], &[0x86, 0xdd], l3].concat();
    let differ: Vec<usize> = ours
        .iter()
        .zip(kernel)
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(i, _)| i)
        .collect();
    if ours.len() != kernel.len()
        || l4_csum_verdict(&eth(ours), partial) != Some(true)
        || l4_csum_verdict(&eth(kernel), partial) != Some(false)
    {
        return None;
    }
    let (mode, _, hook, _, point) = *key;
    if mode == "adj-transport"
        && differ
            .iter()
            .all(|i| matches!(i, 42..=43 | 46..=47 | 56..=57))
    {
        return Some(KERNEL_ADJ_TRANSPORT);
    }
    if mode == "neutral-map"
        && hook == "input"
        && point == Point::SendSide
        && differ.iter().all(|i| matches!(i, 32 | 38 | 39))
    {
        return Some(KERNEL_NEUTRAL_INPUT);
    }
    None
}

type Key = (&'static str, &'static str, &'static str, Kind, Point);

const KERNEL_ADJ_TRANSPORT: &str =
    "adj-transport: the kernel adjusts the checksum with the wrong sign";
const KERNEL_NEUTRAL_INPUT: &str =
    "neutral-map, hook-type input: the kernel translates as ILA to SIR (no C-bit, no adjustment)";

/// ila's translator and the kernel's, on the same packets: identical from the IPv6 header on,
/// in every checksum mode and identifier type, both sides, TCP/UDP/ICMPv6, complete and
/// offloaded checksums; or different where the kernel's checksum is wrong and ours is right.
#[test]
fn the_translator_matches_the_kernels_ila_byte_for_byte() {
    require_root();
    if !kernel_has_ila() {
        return;
    }
    let kernel = translate_all("kernel");
    let ours = translate_all("bpf");
    let mut same = 0;
    let mut explained = Vec::new();
    let mut failures = Vec::new();
    let eth = |l3: &[u8]| [&[0u8; 12][..], &[0x86, 0xdd], l3].concat();
    for (key, (k, k_partial)) in &kernel {
        let Some((o, o_partial)) = ours.get(key) else {
            failures.push(format!("{key:?}: no frame from the translator"));
            continue;
        };
        // ours must be right whatever the kernel does (on the wire between the translators in
        // no-action the checksum is for the SIR address, by that mode's definition)
        let must_verify = key.4 == Point::ReceiveSide || key.0 != "no-action";
        if must_verify && l4_csum_verdict(&eth(o), *o_partial) == Some(false) {
            failures.push(format!("{key:?}: the translator's checksum is wrong"));
        }
        if k_partial != o_partial {
            failures.push(format!(
                "{key:?}: offload state differs (kernel {k_partial}, ours {o_partial})"
            ));
        } else if k == o {
            same += 1;
        } else if let Some(why) = kernel_wrong(key, o, k, *o_partial) {
            explained.push(format!("{key:?}: {why}"));
        } else {
            let show = |b: &[u8]| mpt_testkit::packet::hex(&b[..b.len().min(64)]);
            failures.push(format!(
                "{key:?}: differ\n  kernel {}\n  ours   {}",
                show(k),
                show(o)
            ));
        }
    }
    eprintln!(
        "{same} of {} translations identical; {} differ where the kernel is wrong:\n{}",
        kernel.len(),
        explained.len(),
        explained.join("\n")
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(kernel.len(), FRAMES);
    // only the two explained cases differ: adj-transport everywhere (send and receive), and
    // neutral-map on the input hook's send side
    assert!(explained
        .iter()
        .all(|e| e.contains("\"adj-transport\"") || e.contains("\"neutral-map\"")));
}

/// ila's kernel backend against the kernel's own module: every verb of both tables, with
/// TCP through them (a real TCP stack on both ends), and `ip -j route` as the oracle for the
/// `encap ila` routes it writes.
#[test]
fn the_kernel_backend_drives_the_kernels_ila() {
    require_root();
    if !kernel_has_ila() {
        return;
    }
    let c = Chain::new("ilak-k", "kernel");
    for mode in MODES {
        c.tables(mode, "luid");
        tcp_echo(&c, 7200, 100_000).unwrap_or_else(|e| panic!("TCP in {mode}: {e}"));
    }
    // the route as the kernel holds it
    let routes = c.r.ip_json(&["-6", "route", "show", SIR_B]);
    let r = &routes[0];
    assert_eq!(r["dst"], SIR_B, "{routes}");
    assert_eq!(r["encap"], "ila", "{routes}");
    let shown = serde_json::from_str::<serde_json::Value>(&c.ila(&c.r, &["-j", "route", "show"]))
        .expect("JSON");
    assert_eq!(shown[0]["encap"]["locator"], LOC_B, "{shown}");
    assert_eq!(shown[0]["encap"]["csum_mode"], "no-action", "{shown}");
    assert_eq!(shown[0]["encap"]["hook_type"], "input", "{shown}");
    assert_eq!(shown[0]["backend"], "kernel", "{shown}");
    // xlat: get, show, a second entry, del with the wrong locator refused, del, flush
    let m = &c.m;
    let got = serde_json::from_str::<serde_json::Value>(
        &c.ila(m, &["-j", "xlat", "get", "loc_match", LOC_B]),
    )
    .expect("JSON");
    assert_eq!(got[0]["locator"], SIR_NET, "{got}");
    assert_eq!(got[0]["backend"], "kernel", "{got}");
    c.ila(
        m,
        &[
            "xlat",
            "add",
            "loc_match",
            "2001:db8:ee:1",
            "loc",
            SIR_NET,
            "dev",
            "mr",
        ],
    );
    let all = serde_json::from_str::<serde_json::Value>(&c.ila(m, &["-j", "xlat", "show"]))
        .expect("JSON");
    assert_eq!(all.as_array().map(Vec::len), Some(2), "{all}");
    let o = ILA.at(
        m,
        &[
            "--backend",
            "kernel",
            "xlat",
            "del",
            "loc_match",
            LOC_B,
            "loc",
            "2001:db8:9:9",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    c.ila(
        m,
        &["xlat", "del", "loc_match", "2001:db8:ee:1", "dev", "mr"],
    );
    // the mapping is gone from the kernel: TCP to SIR_B no longer gets through M
    c.ila(m, &["xlat", "flush"]);
    assert_eq!(c.ila(m, &["-j", "xlat", "show"]).trim(), "[]");
    assert!(
        tcp_echo(&c, 7201, 1000).is_err(),
        "without M's mapping nothing reaches SIR_B"
    );
    // del of the route leaves the FIB without it
    c.ila(&c.r, &["route", "del", SIR_B]);
    let routes = c.r.ip_json(&["-6", "route", "show", SIR_B]);
    assert_eq!(routes, serde_json::json!([]), "{routes}");
}

/// A batch of routes through the kernel's ILA reads the IPv6 FIB once, not twice per line
/// (issue 30 item 4), and its view follows its own writes (tests/helpers/ila_route_batch.rs).
#[test]
fn a_kernel_route_batch_dumps_the_fib_once() {
    require_root();
    if !kernel_has_ila() {
        return;
    }
    let ns = Netns::new("ilak-dump");
    ila_route_batch::run(ILA.bin, "kernel", &ns);
}

/// TCP: `n` bytes from A to SIR_B:port and back (a server on D bound to SIR_B).
fn tcp_echo(c: &Chain, port: u16, n: usize) -> Result<(), String> {
    let addr = SocketAddrV6::new(sir_b(), port, 0, 0).into();
    mpt_testkit::traffic::tcp_echo(&c.d, &c.a, addr, n).map(|_| ())
}

/// Whether the wire between R and M carries B's ILA address (the kernel's send side).
#[test]
fn the_wire_carries_the_ila_address() {
    require_root();
    if !kernel_has_ila() {
        return;
    }
    let c = Chain::new("ilak-w", "kernel");
    // no mapping in M, whose translation would show in the capture (see translate_all)
    c.route("neutral-map-auto", "luid", "output");
    let cap = Capture::start(&c.m, "mr");
    send(&c.a, Kind::RawUdp);
    std::thread::sleep(Duration::from_millis(200));
    let frames = cap.stop();
    let (l3, _) = find(&frames, Kind::RawUdp).expect("the datagram at M");
    let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&l3[24..40]).expect("16 bytes"));
    let ila: Ipv6Addr = ILA_B.parse().expect("ILA_B");
    assert_eq!(dst.segments()[..4], ila.segments()[..4], "locator of {dst}");
}

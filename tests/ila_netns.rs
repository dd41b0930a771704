//! Root integration tests of ila with real traffic, each in throwaway namespaces: a real TCP
//! stack, UDP and ICMPv6 echo through the translator, every checksum on the wire judged by an
//! independent parser (`mpt_testkit::packet::l4_csum_verdict`, which also knows what a
//! checksum left to offload must hold), `ip -j` as the oracle for the FIB routes.
//!
//! Hosts (ila's BPF translator, `--backend bpf`: also where the kernel has its own ILA, as
//! Debian's kernels of the matrix do; `tests/ila_kernel.rs` tests the kernel's):
//!
//! ```text
//!   A  va 2001:db8:a::1/64 ------ vb 2001:db8:a::2/64          B
//!        ila route SIR_B loc LOC_B     ILA_B = 2001:db8:ff:1:2000::b on vb
//!        (egress SIR -> ILA)           SIR_B = 2001:db8:1:2:2000::b on lo
//!                                      ila xlat loc_match LOC_B loc SIR_NET (ILA -> SIR)
//! ```
//!
//! An application on A connects to SIR_B; A's egress program rewrites the destination to
//! ILA_B; B's ingress program rewrites it back before B's stack sees it, so the server bound to
//! SIR_B accepts (early demux included) and echoes. Veth does not verify a checksum its sender
//! left to offload, so the cases run with A's transmit checksum offload off (B's stack then
//! verifies every checksum after translation) and on (the default), and a capture on A's device
//! judges every translated frame.
//!
//! Needs root. It fails, it does not skip, when run without root.

use std::io::Write;
use std::net::{Ipv6Addr, SocketAddrV6, UdpSocket};
use std::time::Duration;

use mpt_testkit::capture::{Capture, Captured};
use mpt_testkit::packet::l4_csum_verdict;
use mpt_testkit::{require_root, veth, Netns, Tool};
use serde_json::Value;

const ILA: Tool = Tool::with_options(env!("CARGO_BIN_EXE_ila"), &["--backend", "bpf"]);

const A_ADDR: &str = "2001:db8:a::1";
const B_ADDR: &str = "2001:db8:a::2";
/// B's locator.
const LOC_B: &str = "2001:db8:ff:1";
/// The SIR prefix's upper 64 bits.
const SIR_NET: &str = "2001:db8:1:2";
/// B's ILA address (LOC_B and the identifier, type luid).
const ILA_B: &str = "2001:db8:ff:1:2000::b";
/// B's SIR address.
const SIR_B: &str = "2001:db8:1:2:2000::b";

const MODES: [&str; 4] = [
    "adj-transport",
    "neutral-map",
    "neutral-map-auto",
    "no-action",
];

/// A and B as in the module doc, with the translator attached (B's ingress on `hook`).
struct Pair {
    a: Netns,
    b: Netns,
}

fn ip(ns: &Netns, args: &str) {
    let a: Vec<&str> = args.split_whitespace().collect();
    ns.ip_ok(&a);
}

impl Pair {
    fn new(tag: &str) -> Pair {
        require_root();
        let a = Netns::new(&format!("{tag}-a"));
        let b = Netns::new(&format!("{tag}-b"));
        veth(&a, "va", &b, "vb");
        ip(&a, &format!("addr add {A_ADDR}/64 dev va nodad"));
        ip(&b, &format!("addr add {B_ADDR}/64 dev vb nodad"));
        ip(&b, &format!("addr add {ILA_B}/64 dev vb nodad"));
        ip(&b, &format!("addr add {SIR_B}/128 dev lo"));
        // A reaches B's locator through B (an ILA router would be there)
        ip(&a, &format!("route add {LOC_B}::/64 via {B_ADDR}"));
        Pair { a, b }
    }

    /// Tables in `mode` on both sides.
    fn tables(&self, mode: &str) {
        ILA.ok(
            &self.a,
            &["route", "replace", SIR_B, "loc", LOC_B, "csum-mode", mode],
        );
        ILA.ok(
            &self.b,
            &[
                "xlat",
                "replace",
                "loc_match",
                LOC_B,
                "loc",
                SIR_NET,
                "csum-mode",
                mode,
            ],
        );
    }

    fn attach(&self, hook: &str) {
        ILA.ok(&self.a, &["dataplane", "attach", "dev", "va"]);
        ILA.ok(&self.b, &["dataplane", "attach", "dev", "vb", hook]);
    }

    fn offload(&self, on: bool) {
        let o = self.a.exec(
            "ethtool",
            &["-K", "va", "tx", if on { "on" } else { "off" }],
        );
        assert!(o.status.success(), "ethtool -K va tx: {o:?}");
    }
}

fn sir_b() -> Ipv6Addr {
    SIR_B.parse().expect("SIR_B")
}

/// TCP: `n` bytes to SIR_B:port and back, through a server on B bound to SIR_B.
fn tcp_echo(p: &Pair, port: u16, n: usize) -> Result<(), String> {
    let addr = SocketAddrV6::new(sir_b(), port, 0, 0).into();
    let peer = mpt_testkit::traffic::tcp_echo(&p.b, &p.a, addr, n)?;
    if !peer.starts_with(&format!("[{A_ADDR}]")) {
        return Err(format!("the server saw the connection from {peer}"));
    }
    Ok(())
}

/// UDP: a few datagrams to SIR_B:port and back.
fn udp_echo(p: &Pair, port: u16) -> Result<(), String> {
    let server = {
        let addr = SocketAddrV6::new(sir_b(), port, 0, 0);
        let s =
            p.b.spawn_in(move || UdpSocket::bind(addr).map_err(|e| e.to_string()))
                .join()
                .map_err(|_| "bind panicked".to_string())??;
        s.set_read_timeout(Some(Duration::from_secs(3)))
            .map_err(|e| e.to_string())?;
        std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            for _ in 0..5 {
                let Ok((k, from)) = s.recv_from(&mut buf) else {
                    return;
                };
                let _ = s.send_to(&buf[..k], from);
            }
        })
    };
    let r =
        p.a.spawn_in(move || -> Result<(), String> {
            let s = UdpSocket::bind("[::]:0").map_err(|e| e.to_string())?;
            s.set_read_timeout(Some(Duration::from_secs(2)))
                .map_err(|e| e.to_string())?;
            for i in 0..5u8 {
                let msg = vec![i; 100 + usize::from(i) * 300];
                s.send_to(&msg, SocketAddrV6::new(sir_b(), port, 0, 0))
                    .map_err(|e| e.to_string())?;
                let mut buf = [0u8; 2048];
                let (k, _) = s
                    .recv_from(&mut buf)
                    .map_err(|e| format!("datagram {i} not echoed: {e}"))?;
                if buf[..k] != msg[..] {
                    return Err(format!("datagram {i} echoed wrong"));
                }
            }
            Ok(())
        })
        .join()
        .map_err(|_| "client panicked".to_string())?;
    let _ = server.join();
    r
}

fn ping(p: &Pair) -> Result<(), String> {
    let o =
        p.a.exec("ping", &["-6", "-c", "3", "-i", "0.2", "-W", "2", SIR_B]);
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ping {SIR_B}: {}",
            String::from_utf8_lossy(&o.stdout)
        ))
    }
}

/// What the capture on A's device says of the frames A sent to ILA_B: (judged, valid).
fn judge(frames: &[Captured]) -> (usize, usize, Vec<String>) {
    let ila_b: Ipv6Addr = ILA_B.parse().expect("ILA_B");
    let sir: Ipv6Addr = sir_b();
    // B's locator: the neutral modes change the identifier's last 16 bits (and neutral-map its
    // C-bit) as well
    let loc_b = &ila_b.octets()[..8];
    let (mut judged, mut valid, mut leaks) = (0, 0, Vec::new());
    for c in frames.iter().filter(|c| c.outgoing) {
        let f = &c.frame;
        if f.len() < 54 || f[12..14] != [0x86, 0xdd] {
            continue;
        }
        let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&f[38..54]).expect("16"));
        // the SIR address or the SIR prefix: not translated
        if dst == sir || dst.octets()[..8] == sir.octets()[..8] {
            leaks.push(format!(
                "a frame left A for the SIR address: {}",
                mpt_testkit::packet::hex(&f[..54])
            ));
        }
        if dst.octets()[..8] != *loc_b {
            continue;
        }
        if let Some(ok) = l4_csum_verdict(f, c.csum_partial) {
            judged += 1;
            valid += usize::from(ok);
        }
    }
    (judged, valid, leaks)
}

/// TCP, UDP and ICMPv6 from A to SIR_B in every mode, with B's ingress on each hook and A's
/// transmit checksum offload off and on: the traffic gets through, nothing leaves A for the SIR
/// address, and every translated frame's checksum is right on the wire except in no-action,
/// where every one is wrong (the test shows that no-action without neutral addresses breaks
/// checksums, which B's translation back then mends).
#[test]
fn traffic_through_the_translator_in_every_mode() {
    let p = Pair::new("ila-x");
    let mut failures = Vec::new();
    let mut port = 7000;
    // (a kernel of the matrix runs native XDP only, the hook that depends most on the kernel:
    // its demo and the comparison with the kernel's ILA run tc)
    let hooks: &[&str] = if mpt_testkit::matrix::series().is_some() {
        &["xdp"]
    } else {
        &["tc", "xdp", "xdp-generic"]
    };
    for &hook in hooks {
        p.attach(hook);
        for offload in [false, true] {
            p.offload(offload);
            for mode in MODES {
                p.tables(mode);
                let case = format!(
                    "{mode}, B ingress {hook}, A tx offload {}",
                    if offload { "on" } else { "off" }
                );
                let cap = Capture::start(&p.a, "va");
                port += 1;
                // (a kernel of the matrix runs under plain emulation: less data, same cases)
                let bytes = if std::env::var_os("MPT_KERNEL_SERIES").is_some() {
                    20_000
                } else {
                    200_000
                };
                let results = [
                    ("tcp", tcp_echo(&p, port, bytes)),
                    ("udp", udp_echo(&p, port)),
                    ("icmpv6", ping(&p)),
                ];
                let frames = cap.stop();
                for (what, r) in results {
                    if let Err(e) = r {
                        failures.push(format!("{case}: {what}: {e}"));
                    }
                }
                let (judged, valid, leaks) = judge(&frames);
                failures.extend(leaks.into_iter().take(1).map(|l| format!("{case}: {l}")));
                if judged < 10 {
                    failures.push(format!("{case}: only {judged} translated frames captured"));
                } else if mode == "no-action" {
                    if valid != 0 {
                        failures.push(format!(
                            "{case}: {valid} of {judged} frames had a valid checksum on the wire, which no-action cannot give"
                        ));
                    }
                } else if valid != judged {
                    failures.push(format!(
                        "{case}: {} of {judged} translated frames had a wrong checksum on the wire",
                        judged - valid
                    ));
                }
            }
        }
    }
    // the counters saw it
    let m = ILA.json(&p.b, &["-s", "xlat", "show"]);
    assert!(m[0]["packets"].as_u64().unwrap_or(0) > 100, "{m}");
    let r = ILA.json(&p.a, &["-s", "route", "show"]);
    assert!(r[0]["packets"].as_u64().unwrap_or(0) > 100, "{r}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The FIB route a BPF-backend route installs, by `ip -j`: where the kernel routes the ILA
/// address (here through B), of protocol ila; an ILA address on-link makes a /128 go to it
/// as its gateway; a shorter on-link prefix needs `via`; the JSON has iproute2's keys.
#[test]
fn fib_routes_follow_the_ila_addresses() {
    let p = Pair::new("ila-f");
    let rows = ILA.json(
        &p.a,
        &[
            "route",
            "add",
            SIR_B,
            "loc",
            LOC_B,
            "csum-mode",
            "neutral-map",
        ],
    );
    assert_eq!(rows["changed"], true);
    assert_eq!(rows["route"]["encap"]["encap_type"], "ila");
    let fib = p.a.ip_json(&["-6", "route", "show", "exact", SIR_B]);
    assert_eq!(fib[0]["gateway"], B_ADDR, "{fib}");
    assert_eq!(fib[0]["dev"], "va");
    assert!(
        ["ila", "246"].contains(&fib[0]["protocol"].as_str().unwrap_or("")),
        "{fib}"
    );
    let show = ILA.json(&p.a, &["route", "show"]);
    assert_eq!(
        show,
        serde_json::json!([{
            "dst": SIR_B, "gateway": B_ADDR, "dev": "va", "table": "main", "protocol": "ila",
            "encap": {"encap_type": "ila", "locator": LOC_B, "csum_mode": "neutral-map",
                      "ident_type": "use-format", "hook_type": "output"},
            "backend": "bpf"
        }])
    );
    // the ILA network on-link: a /128 is sent to its ILA address
    ip(&p.a, &format!("route replace {LOC_B}::/64 dev va"));
    ILA.ok(&p.a, &["route", "replace", SIR_B, "loc", LOC_B]);
    let fib = p.a.ip_json(&["-6", "route", "show", "exact", SIR_B]);
    assert_eq!(fib[0]["gateway"], ILA_B, "{fib}");
    ILA.ok(&p.a, &["dataplane", "attach", "dev", "va"]);
    ILA.ok(&p.b, &["xlat", "add", "loc_match", LOC_B, "loc", SIR_NET]);
    ILA.ok(&p.b, &["dataplane", "attach", "dev", "vb"]);
    tcp_echo(&p, 7100, 50_000).expect("TCP to an on-link ILA address");
    // a prefix whose ILA addresses are on-link: refused, nothing installed
    let o = ILA.at(
        &p.a,
        &["route", "add", "2001:db8:1:2:2000::/67", "loc", LOC_B],
    );
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("on-link"),
        "{o:?}"
    );
    assert_eq!(
        p.a.ip_json(&["-6", "route", "show", "exact", "2001:db8:1:2:2000::/67"]),
        serde_json::json!([])
    );
    assert_eq!(
        ILA.json(&p.a, &["route", "show"]).as_array().map(Vec::len),
        Some(1)
    );
    // del removes both
    ILA.ok(&p.a, &["route", "del", SIR_B]);
    assert_eq!(
        p.a.ip_json(&["-6", "route", "show", "exact", SIR_B]),
        serde_json::json!([])
    );
    assert_eq!(ILA.json(&p.a, &["route", "show"]), serde_json::json!([]));
}

fn stderr_line(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

/// Bad input: one clear line, the documented exit code, the tables as before.
#[test]
fn bad_input_changes_nothing() {
    let p = Pair::new("ila-e");
    ILA.ok(
        &p.b,
        &[
            "xlat",
            "add",
            "loc_match",
            LOC_B,
            "loc",
            SIR_NET,
            "csum-mode",
            "adj-transport",
        ],
    );
    ILA.ok(&p.a, &["route", "add", SIR_B, "loc", LOC_B]);
    let before = (
        ILA.json(&p.b, &["xlat", "show"]),
        ILA.json(&p.a, &["route", "show"]),
    );
    let fib_before = p.a.ip_json(&["-6", "route", "show"]);
    let cases: &[(&Netns, &[&str], i32, &str)] = &[
        (
            &p.b,
            &["xlat", "add", "loc_match", "2001:db8:ff", "loc", SIR_NET],
            1,
            "invalid locator",
        ),
        (
            &p.b,
            &[
                "xlat",
                "add",
                "loc_match",
                "2001:db8:ff:1:9",
                "loc",
                SIR_NET,
            ],
            1,
            "invalid locator",
        ),
        (
            &p.b,
            &[
                "xlat",
                "add",
                "loc_match",
                "2001:db8:ff:2",
                "loc",
                SIR_NET,
                "csum-mode",
                "fast",
            ],
            1,
            "csum-mode \"fast\"",
        ),
        (
            &p.b,
            &[
                "xlat",
                "add",
                "loc_match",
                "2001:db8:ff:2",
                "loc",
                SIR_NET,
                "dev",
                "nosuch0",
            ],
            2,
            "cannot find device \"nosuch0\"",
        ),
        (
            &p.b,
            &["xlat", "add", "loc_match", LOC_B, "loc", "2001:db8:9:9"],
            2,
            "[EEXIST]",
        ),
        (
            &p.b,
            &["xlat", "del", "loc_match", "2001:db8:ff:7"],
            2,
            "[ESRCH]",
        ),
        (
            &p.b,
            &["xlat", "del", "loc_match", LOC_B, "loc", "2001:db8:9:9"],
            2,
            "[ESRCH]",
        ),
        (
            &p.b,
            &["xlat", "get", "loc_match", LOC_B, "dev", "vb"],
            2,
            "[ESRCH]",
        ),
        (&p.b, &["xlat", "frob"], 1, "unknown xlat command"),
        (&p.a, &["route", "add", SIR_B, "loc", LOC_B], 2, "[EEXIST]"),
        (
            &p.a,
            &["route", "add", "2001:db8:1:2::/64", "loc", LOC_B],
            1,
            "at least /67",
        ),
        (
            &p.a,
            &[
                "route",
                "add",
                "2001:db8:1:2:2000::c",
                "loc",
                LOC_B,
                "dev",
                "nosuch0",
            ],
            2,
            "cannot find device",
        ),
        (
            &p.a,
            &[
                "route",
                "add",
                "2001:db8:1:2:2000::c",
                "loc",
                LOC_B,
                "via",
                "2001:db8:77::1",
            ],
            2,
            "[EHOSTUNREACH]",
        ),
        (
            &p.a,
            &["route", "del", "2001:db8:1:2:2000::c"],
            2,
            "[ESRCH]",
        ),
        (
            &p.a,
            &["route", "add", "2001:db8:1:2:2000::c", "loc", "x"],
            1,
            "invalid locator",
        ),
    ];
    for (ns, args, code, text) in cases {
        let o = ILA.at(ns, args);
        let line = stderr_line(&o);
        assert_eq!(o.status.code(), Some(*code), "{args:?}: {line}");
        assert!(
            line.starts_with("ila: ") && line.contains(text),
            "{args:?}: {line}"
        );
        assert!(
            o.stdout.is_empty(),
            "{args:?} printed {:?}",
            String::from_utf8_lossy(&o.stdout)
        );
    }
    let after = (
        ILA.json(&p.b, &["xlat", "show"]),
        ILA.json(&p.a, &["route", "show"]),
    );
    assert_eq!(before, after, "the tables changed");
    assert_eq!(
        fib_before,
        p.a.ip_json(&["-6", "route", "show"]),
        "the FIB changed"
    );
}

/// Idempotent verbs: replace twice reports `changed` then not; a failed batch line stops the
/// batch (exit 2, the lines before it done), `--force` goes on.
#[test]
fn replace_and_batches() {
    let p = Pair::new("ila-b");
    let args = [
        "xlat",
        "replace",
        "loc_match",
        LOC_B,
        "loc",
        SIR_NET,
        "csum-mode",
        "neutral-map-auto",
    ];
    assert_eq!(ILA.json(&p.b, &args)["changed"], true);
    assert_eq!(ILA.json(&p.b, &args)["changed"], false);
    let batch = format!(
        "xlat add loc_match 2001:db8:ee:1 loc {SIR_NET}\n\
         xlat add loc_match {LOC_B} loc {SIR_NET}\n\
         xlat add loc_match 2001:db8:ee:2 loc {SIR_NET}\n"
    );
    let run = |force: bool| {
        let mut a = vec!["--backend", "bpf", "-n", p.b.name(), "-b", "-"];
        if force {
            a.push("--force");
        }
        mpt_testkit::cmd::try_output_with_input(
            std::process::Command::new(ILA.bin).args(&a),
            &batch,
        )
    };
    let e = run(false).expect_err("a duplicate in the batch");
    assert!(
        e.contains("-:2: xlat add loc_match 2001:db8:ff:1: it exists [EEXIST]"),
        "{e}"
    );
    let locs = |v: Value| -> Vec<String> {
        v.as_array()
            .expect("rows")
            .iter()
            .map(|r| r["locator_match"].as_str().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(
        locs(ILA.json(&p.b, &["xlat", "show"])),
        ["2001:db8:ee:1", LOC_B]
    );
    ILA.ok(&p.b, &["xlat", "del", "loc_match", "2001:db8:ee:1"]);
    assert!(run(true).is_err(), "the batch still fails with --force");
    assert_eq!(
        locs(ILA.json(&p.b, &["xlat", "show"])),
        ["2001:db8:ee:1", "2001:db8:ee:2", LOC_B]
    );
    let n = ILA.json(&p.b, &["xlat", "flush"]);
    assert_eq!(n["deleted"], 3);
    assert_eq!(ILA.json(&p.b, &["xlat", "show"]), serde_json::json!([]));
}

/// `-n NS` and `ip netns exec NS` give the same answers (the tables are found through the
/// kernel, not through the host's bpffs, which `ip netns exec` does not show).
#[test]
fn netns_option_and_ip_netns_exec_agree() {
    let p = Pair::new("ila-n");
    ILA.ok(
        &p.b,
        &[
            "xlat",
            "add",
            "loc_match",
            LOC_B,
            "loc",
            SIR_NET,
            "dev",
            "vb",
            "csum-mode",
            "neutral-map",
        ],
    );
    ILA.ok(&p.b, &["dataplane", "attach", "dev", "vb"]);
    let exec = |args: &[&str]| -> Value {
        let mut a = vec![ILA.bin, "--backend", "bpf", "-j"];
        a.extend_from_slice(args);
        let o = p.b.exec(a[0], &a[1..]);
        assert!(o.status.success(), "{o:?}");
        serde_json::from_slice(&o.stdout).expect("JSON")
    };
    for args in [&["xlat", "show"][..], &["route", "show"]] {
        let mut with_s = vec!["-s"];
        with_s.extend_from_slice(args);
        assert_eq!(ILA.json(&p.b, &with_s), exec(&with_s), "{args:?}");
    }
    // (the reason counters move with every neighbour solicitation)
    assert_eq!(
        ILA.json(&p.b, &["dataplane", "show"])["attachments"],
        exec(&["dataplane", "show"])["attachments"]
    );
    // a write under ip netns exec is seen by -n
    let o = p.b.exec(
        ILA.bin,
        &[
            "--backend",
            "bpf",
            "xlat",
            "add",
            "loc_match",
            "2001:db8:ee:1",
            "loc",
            SIR_NET,
        ],
    );
    assert!(o.status.success(), "{o:?}");
    assert_eq!(
        ILA.json(&p.b, &["xlat", "show"]).as_array().map(Vec::len),
        Some(2)
    );
    let v = ILA.json(&p.b, &["xlat", "get", "loc_match", LOC_B, "dev", "vb"]);
    assert_eq!(v[0]["interface"], "vb");
}

/// A chain of translating routers, where what they forward is judged on the next link, also
/// where A's checksums are left to offload (the forwarded skb keeps that state, and the
/// capture reads it: a wrong partial sum would leave a real NIC as a wrong checksum):
///
/// ```text
///   A --- R --- M --- D
///         |     |     SIR_B on lo
///         |     ila xlat loc_match LOC_B loc SIR_NET (ILA -> SIR, ingress of mr)
///         ila route SIR_B loc LOC_B hook-type input (SIR -> ILA, ingress of ra)
/// ```
///
/// A sends to SIR_B; R's input route gives it B's locator; M's mapping takes it back to SIR_B
/// for D. Replies go back untranslated. Captured: what M receives (R's translation) and what
/// D receives (M's).
#[test]
fn translating_routers_forward_right_checksums() {
    require_root();
    let mpt_testkit::IlaPath { a, r, m, d } =
        mpt_testkit::IlaPath::new("ila-r", SIR_B, LOC_B, SIR_NET);
    let mut failures = Vec::new();
    let mut port = 7300;
    // every frame from A (where the device's own XDP program ran first, already translated
    // by it: a capture sees what XDP passed)
    let judge_at = |frames: &[Captured]| -> (usize, usize, usize) {
        let src: Ipv6Addr = A_ADDR.parse().expect("address");
        let (mut judged, mut valid, mut partial) = (0, 0, 0);
        for f in frames.iter().filter(|f| !f.outgoing) {
            if f.frame.len() >= 54
                && f.frame[12..14] == [0x86, 0xdd]
                && f.frame[22..38] == src.octets()
            {
                if let Some(ok) = l4_csum_verdict(&f.frame, f.csum_partial) {
                    judged += 1;
                    valid += usize::from(ok);
                    partial += usize::from(f.csum_partial);
                }
            }
        }
        (judged, valid, partial)
    };
    let pair = Pair { a, b: d };
    // One router on the hook under test, the other on tc, whose captures see what the device
    // received before its own translation (an XDP program runs before a capture, tc after):
    // so each translation is judged alone, its errors not undone by the next one's.
    for (r_hook, m_hook) in [
        ("tc", "tc"),
        ("xdp", "tc"),
        ("xdp-generic", "tc"),
        ("tc", "xdp"),
        ("tc", "xdp-generic"),
    ] {
        ILA.ok(&r, &["dataplane", "attach", "dev", "ra", r_hook]);
        ILA.ok(&m, &["dataplane", "attach", "dev", "mr", m_hook]);
        for offload in [false, true] {
            pair.offload(offload);
            for mode in ["adj-transport", "neutral-map", "neutral-map-auto"] {
                ILA.ok(
                    &r,
                    &[
                        "route",
                        "replace",
                        SIR_B,
                        "loc",
                        LOC_B,
                        "csum-mode",
                        mode,
                        "hook-type",
                        "input",
                    ],
                );
                ILA.ok(
                    &m,
                    &[
                        "xlat",
                        "replace",
                        "loc_match",
                        LOC_B,
                        "loc",
                        SIR_NET,
                        "csum-mode",
                        mode,
                    ],
                );
                let case = format!(
                    "{mode}, R ingress {r_hook}, M ingress {m_hook}, A tx offload {}",
                    if offload { "on" } else { "off" }
                );
                let at_m = Capture::start(&m, "mr");
                let at_d = Capture::start(&pair.b, "dm");
                port += 1;
                let res = tcp_echo(&pair, port, 150_000);
                let (fm, fd) = (at_m.stop(), at_d.stop());
                if let Err(e) = res {
                    failures.push(format!("{case}: tcp: {e}"));
                }
                let mut judgements = vec![("M's mapping (at D)", judge_at(&fd))];
                // At M a capture sees what M's XDP program passed: with generic XDP, an
                // address translated and its checksum not yet (M's tc program applies the
                // difference next), so R is judged there only when M's XDP is not generic.
                if m_hook != "xdp-generic" {
                    judgements.push(("R's input route (at M)", judge_at(&fm)));
                }
                for (what, (judged, valid, partial)) in judgements {
                    if offload && partial == 0 {
                        failures.push(format!("{case}: {what}: no frame with a partial checksum"));
                    }
                    println!("{case}: {what}: {valid} of {judged} right, {partial} partial");
                    if judged < 10 || valid != judged {
                        failures.push(format!(
                            "{case}: {what}: {valid} of {judged} forwarded frames right"
                        ));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `attach ... ingress|egress` attaches one program and leaves the other as it is; `detach`
/// likewise; without the word, both. `dataplane show` is the oracle, and the kernel's own
/// view of the device's XDP hook (`ip -j link`).
#[test]
fn dataplane_sides_and_hooks() {
    let p = Pair::new("ila-s");
    let show = || -> Vec<(String, Value, bool)> {
        ILA.json(&p.b, &["dataplane", "show"])["attachments"]
            .as_array()
            .expect("attachments")
            .iter()
            .map(|a| {
                (
                    a["dev"].as_str().unwrap_or("").to_string(),
                    a["ingress"].clone(),
                    a["egress"].as_bool().unwrap_or(false),
                )
            })
            .collect()
    };
    ILA.ok(&p.b, &["dataplane", "attach", "dev", "vb", "egress"]);
    assert_eq!(show(), [("vb".to_string(), Value::Null, true)]);
    ILA.ok(
        &p.b,
        &["dataplane", "attach", "dev", "vb", "xdp", "ingress"],
    );
    assert_eq!(show(), [("vb".to_string(), Value::from("xdp"), true)]);
    let link = p.b.ip_json(&["link", "show", "dev", "vb"]);
    assert!(link[0]["xdp"]["prog"]["id"].as_u64().is_some(), "{link}");
    ILA.ok(&p.b, &["dataplane", "attach", "dev", "vb", "xdp-generic"]);
    assert_eq!(
        show(),
        [("vb".to_string(), Value::from("xdp-generic"), true)]
    );
    ILA.ok(&p.b, &["dataplane", "detach", "dev", "vb", "egress"]);
    assert_eq!(
        show(),
        [("vb".to_string(), Value::from("xdp-generic"), false)]
    );
    ILA.ok(&p.b, &["dataplane", "attach", "dev", "vb", "tc", "ingress"]);
    assert_eq!(show(), [("vb".to_string(), Value::from("tc"), false)]);
    let link = p.b.ip_json(&["link", "show", "dev", "vb"]);
    assert!(link[0].get("xdp").is_none(), "XDP left behind: {link}");
    ILA.ok(&p.b, &["dataplane", "detach", "dev", "vb"]);
    assert_eq!(show(), []);
    let o = ILA.at(&p.b, &["dataplane", "attach", "dev", "vb", "xdp", "egress"]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
}

/// A mapping's counters are its own: they count what it translated, survive a replace, and a
/// mapping deleted and added again (whose counter slot is reused) starts from zero.
#[test]
fn counters_belong_to_their_entry() {
    let p = Pair::new("ila-c");
    let add = ["xlat", "add", "loc_match", LOC_B, "loc", SIR_NET];
    ILA.ok(&p.b, &add);
    ILA.ok(&p.b, &["dataplane", "attach", "dev", "vb", "ingress"]);
    let packets = || ILA.json(&p.b, &["-s", "xlat", "show"])[0]["packets"].as_u64();
    assert_eq!(packets(), Some(0));
    // A sends to B's ILA address: B maps it (the echo replies come from the SIR address, which
    // ping does not take for its own; the count is the point)
    let _ =
        p.a.exec("ping", &["-6", "-c", "3", "-i", "0.2", "-W", "1", ILA_B]);
    assert_eq!(packets(), Some(3));
    ILA.ok(
        &p.b,
        &[
            "xlat",
            "replace",
            "loc_match",
            LOC_B,
            "loc",
            SIR_NET,
            "csum-mode",
            "neutral-map-auto",
        ],
    );
    assert_eq!(packets(), Some(3), "a replace keeps the counters");
    ILA.ok(&p.b, &["xlat", "del", "loc_match", LOC_B]);
    ILA.ok(&p.b, &add);
    assert_eq!(packets(), Some(0), "a new mapping counts from zero");
}

/// `--check`: what each command would change, with before and after, and nothing changed.
#[test]
fn check_predicts_and_changes_nothing() {
    require_root();
    let ns = Netns::new("ila-chk");
    let peer = Netns::new("ila-chkp");
    veth(&ns, "v0", &peer, "eth0");
    ip(&ns, "link set lo up");
    ip(&ns, "-6 addr add 2001:db8:a::1/64 dev v0 nodad");
    let pinned = || {
        let c = ns.cookie().expect("cookie");
        std::path::Path::new(&format!(
            "/sys/fs/bpf/ila/{}",
            mpt_testkit::netns::id_name(c)
        ))
        .exists()
    };
    let xlat = ["xlat", "add", "loc_match", LOC_B, "loc", SIR_NET];
    // a fresh namespace: no tables are created
    let v = ILA.json(&ns, &[&["--check"][..], &xlat[..]].concat());
    assert_eq!(
        (v["check"].clone(), v["changed"].clone()),
        (true.into(), true.into())
    );
    assert_eq!(v["diff"]["before"], Value::Null);
    assert_eq!(v["diff"]["after"]["locator"], SIR_NET);
    assert!(!pinned(), "--check created ila's tables");
    let route = [
        "route",
        "add",
        SIR_B,
        "loc",
        LOC_B,
        "ident-type",
        "luid",
        "via",
        "2001:db8:a::2",
        "dev",
        "v0",
    ];
    let v = ILA.json(&ns, &[&["--check"][..], &route[..]].concat());
    assert_eq!(v["changed"], true);
    assert_eq!(v["diff"]["after"]["gateway"], "2001:db8:a::2");
    assert!(!pinned(), "--check created ila's tables");
    assert_eq!(
        ns.ip_json(&["-6", "route", "show", "proto", "246"]),
        serde_json::json!([])
    );
    // the kernel's refusal of an unreachable gateway, predicted in its words
    let mut bad = route;
    bad[8] = "2001:db8:5::2";
    ILA.refused_alike(&ns, &bad);

    ILA.ok(&ns, &xlat);
    ILA.ok(&ns, &route);
    let before = (
        ILA.json(&ns, &["xlat", "show"]),
        ILA.json(&ns, &["route", "show"]),
        ns.ip_json(&["-6", "route", "show", "proto", "246"]),
    );
    ILA.refused_alike(&ns, &xlat);
    ILA.refused_alike(&ns, &route);
    let mut same = xlat;
    same[1] = "replace";
    let v = ILA.json(&ns, &[&["--check"][..], &same[..]].concat());
    assert_eq!(v["changed"], false);
    let mut other = same;
    other[5] = "2001:db8:1:3";
    let v = ILA.json(&ns, &[&["--check"][..], &other[..]].concat());
    assert_eq!(v["changed"], true);
    assert_eq!(
        (
            v["diff"]["before"]["locator"].clone(),
            v["diff"]["after"]["locator"].clone()
        ),
        (SIR_NET.into(), "2001:db8:1:3".into())
    );
    let text = ILA.ok(&ns, &[&["--check"][..], &other[..]].concat());
    assert!(text.starts_with("replace: would change\n  - "), "{text}");
    let mut r2 = route;
    r2[1] = "replace";
    assert_eq!(
        ILA.json(&ns, &[&["--check"][..], &r2[..]].concat())["changed"],
        false
    );
    let v = ILA.json(&ns, &["--check", "route", "del", SIR_B]);
    assert_eq!(
        (v["changed"].clone(), v["diff"]["after"].clone()),
        (true.into(), Value::Null)
    );
    let v = ILA.json(&ns, &["--check", "xlat", "flush"]);
    assert_eq!(v["deleted"], 1);
    // a batch sees its earlier lines: the second del of one mapping fails, exit 2
    let lines = [
        "xlat del loc_match 2001:db8:ff:1".to_string(),
        "xlat del loc_match 2001:db8:ff:1".to_string(),
    ];
    let dir = std::env::temp_dir().join(format!("ila-chk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let f = dir.join("b");
    std::fs::write(&f, lines.join("\n")).expect("batch");
    let o = ILA.at(&ns, &["--check", "-b", f.to_str().expect("path")]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains(":2: xlat del loc_match 2001:db8:ff:1: no such entry [ESRCH]"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    // attach: predicted, not made
    let v = ILA.json(&ns, &["--check", "dataplane", "attach", "dev", "v0"]);
    assert_eq!(v["changed"], true);
    assert_eq!(v["diff"]["after"]["v0"]["egress"], true);
    assert_eq!(
        ILA.json(&ns, &["dataplane", "show"])["attachments"],
        serde_json::json!([])
    );
    let after = (
        ILA.json(&ns, &["xlat", "show"]),
        ILA.json(&ns, &["route", "show"]),
        ns.ip_json(&["-6", "route", "show", "proto", "246"]),
    );
    assert_eq!(after, before, "the dry runs changed something");
}

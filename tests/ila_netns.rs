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
use mpt_testkit::topo::ila_plan::{A_ADDR, B_ADDR, ILA_B, LOC_B, MODES, SIR_B, SIR_NET};
use mpt_testkit::{require_root, veth, Netns, Tool};
use serde_json::Value;

#[path = "helpers/ila_route_batch.rs"]
mod ila_route_batch;

const ILA: Tool = Tool::with_options(env!("CARGO_BIN_EXE_ila"), &["--backend", "bpf"]);

/// A and B as in the module doc, with the translator attached (B's ingress on `hook`).
struct Pair {
    a: Netns,
    b: Netns,
}

impl Pair {
    fn new(tag: &str) -> Pair {
        require_root();
        let a = Netns::new(&format!("{tag}-a"));
        let b = Netns::new(&format!("{tag}-b"));
        veth(&a, "va", &b, "vb");
        a.ip_ok(&format!("addr add {A_ADDR}/64 dev va nodad"));
        b.ip_ok(&format!("addr add {B_ADDR}/64 dev vb nodad"));
        b.ip_ok(&format!("addr add {ILA_B}/64 dev vb nodad"));
        b.ip_ok(&format!("addr add {SIR_B}/128 dev lo"));
        // A reaches B's locator through B (an ILA router would be there)
        a.ip_ok(&format!("route add {LOC_B}::/64 via {B_ADDR}"));
        Pair { a, b }
    }

    /// Tables in `mode` on both sides.
    fn tables(&self, mode: &str) {
        ILA.ok(
            &self.a,
            &format!("route replace {SIR_B} loc {LOC_B} csum-mode {mode}"),
        );
        ILA.ok(
            &self.b,
            &format!("xlat replace loc_match {LOC_B} loc {SIR_NET} csum-mode {mode}"),
        );
    }

    fn attach(&self, hook: &str) {
        ILA.ok(&self.a, "dataplane attach dev va");
        ILA.ok(&self.b, &format!("dataplane attach dev vb {hook}"));
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
    let o = p.a.exec("ping", &format!("-6 -c 3 -i 0.2 -W 2 {SIR_B}"));
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
    let m = ILA.json(&p.b, "-s xlat show");
    assert!(m[0]["packets"].as_u64().unwrap_or(0) > 100, "{m}");
    let r = ILA.json(&p.a, "-s route show");
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
        &format!("route add {SIR_B} loc {LOC_B} csum-mode neutral-map"),
    );
    assert_eq!(rows["changed"], true);
    assert_eq!(rows["route"]["encap"]["encap_type"], "ila");
    let fib = p.a.ip_json(&format!("-6 route show exact {SIR_B}"));
    assert_eq!(fib[0]["gateway"], B_ADDR, "{fib}");
    assert_eq!(fib[0]["dev"], "va");
    assert!(
        ["ila", "246"].contains(&fib[0]["protocol"].as_str().unwrap_or("")),
        "{fib}"
    );
    let show = ILA.json(&p.a, "route show");
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
    p.a.ip_ok(&format!("route replace {LOC_B}::/64 dev va"));
    ILA.ok(&p.a, &format!("route replace {SIR_B} loc {LOC_B}"));
    let fib = p.a.ip_json(&format!("-6 route show exact {SIR_B}"));
    assert_eq!(fib[0]["gateway"], ILA_B, "{fib}");
    ILA.ok(&p.a, "dataplane attach dev va");
    ILA.ok(&p.b, &format!("xlat add loc_match {LOC_B} loc {SIR_NET}"));
    ILA.ok(&p.b, "dataplane attach dev vb");
    tcp_echo(&p, 7100, 50_000).expect("TCP to an on-link ILA address");
    // a prefix whose ILA addresses are on-link: refused, nothing installed
    let o = ILA.at(
        &p.a,
        &format!("route add 2001:db8:1:2:2000::/67 loc {LOC_B}"),
    );
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("on-link"),
        "{o:?}"
    );
    assert_eq!(
        p.a.ip_json("-6 route show exact 2001:db8:1:2:2000::/67"),
        serde_json::json!([])
    );
    assert_eq!(
        ILA.json(&p.a, "route show").as_array().map(Vec::len),
        Some(1)
    );
    // del removes both
    ILA.ok(&p.a, &format!("route del {SIR_B}"));
    assert_eq!(
        p.a.ip_json(&format!("-6 route show exact {SIR_B}")),
        serde_json::json!([])
    );
    assert_eq!(ILA.json(&p.a, "route show"), serde_json::json!([]));
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
        &format!("xlat add loc_match {LOC_B} loc {SIR_NET} csum-mode adj-transport"),
    );
    ILA.ok(&p.a, &format!("route add {SIR_B} loc {LOC_B}"));
    let before = (ILA.json(&p.b, "xlat show"), ILA.json(&p.a, "route show"));
    let fib_before = p.a.ip_json("-6 route show");
    let cases: &[(&Netns, &str, i32, &str)] = &[
        (
            &p.b,
            &format!("xlat add loc_match 2001:db8:ff loc {SIR_NET}"),
            1,
            "invalid locator",
        ),
        (
            &p.b,
            &format!("xlat add loc_match 2001:db8:ff:1:9 loc {SIR_NET}"),
            1,
            "invalid locator",
        ),
        (
            &p.b,
            &format!("xlat add loc_match 2001:db8:ff:2 loc {SIR_NET} csum-mode fast"),
            1,
            "csum-mode \"fast\"",
        ),
        (
            &p.b,
            &format!("xlat add loc_match 2001:db8:ff:2 loc {SIR_NET} dev nosuch0"),
            2,
            "cannot find device \"nosuch0\"",
        ),
        (
            &p.b,
            &format!("xlat add loc_match {LOC_B} loc 2001:db8:9:9"),
            2,
            "[EEXIST]",
        ),
        (&p.b, "xlat del loc_match 2001:db8:ff:7", 2, "[ESRCH]"),
        (
            &p.b,
            &format!("xlat del loc_match {LOC_B} loc 2001:db8:9:9"),
            2,
            "[ESRCH]",
        ),
        (
            &p.b,
            &format!("xlat get loc_match {LOC_B} dev vb"),
            2,
            "[ESRCH]",
        ),
        (&p.b, "xlat frob", 1, "unknown xlat command"),
        (
            &p.a,
            &format!("route add {SIR_B} loc {LOC_B}"),
            2,
            "[EEXIST]",
        ),
        (
            &p.a,
            &format!("route add 2001:db8:1:2::/64 loc {LOC_B}"),
            1,
            "at least /67",
        ),
        (
            &p.a,
            &format!("route add 2001:db8:1:2:2000::c loc {LOC_B} dev nosuch0"),
            2,
            "cannot find device",
        ),
        (
            &p.a,
            &format!("route add 2001:db8:1:2:2000::c loc {LOC_B} via 2001:db8:77::1"),
            2,
            "[EHOSTUNREACH]",
        ),
        (&p.a, "route del 2001:db8:1:2:2000::c", 2, "[ESRCH]"),
        (
            &p.a,
            "route add 2001:db8:1:2:2000::c loc x",
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
    let after = (ILA.json(&p.b, "xlat show"), ILA.json(&p.a, "route show"));
    assert_eq!(before, after, "the tables changed");
    assert_eq!(fib_before, p.a.ip_json("-6 route show"), "the FIB changed");
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
    assert_eq!(locs(ILA.json(&p.b, "xlat show")), ["2001:db8:ee:1", LOC_B]);
    ILA.ok(&p.b, "xlat del loc_match 2001:db8:ee:1");
    assert!(run(true).is_err(), "the batch still fails with --force");
    assert_eq!(
        locs(ILA.json(&p.b, "xlat show")),
        ["2001:db8:ee:1", "2001:db8:ee:2", LOC_B]
    );
    let n = ILA.json(&p.b, "xlat flush");
    assert_eq!(n["deleted"], 3);
    assert_eq!(ILA.json(&p.b, "xlat show"), serde_json::json!([]));
}

/// `-n NS` and `ip netns exec NS` give the same answers (the tables are found through the
/// kernel, not through the host's bpffs, which `ip netns exec` does not show).
#[test]
fn netns_option_and_ip_netns_exec_agree() {
    let p = Pair::new("ila-n");
    ILA.ok(
        &p.b,
        &format!("xlat add loc_match {LOC_B} loc {SIR_NET} dev vb csum-mode neutral-map"),
    );
    ILA.ok(&p.b, "dataplane attach dev vb");
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
        ILA.json(&p.b, "dataplane show")["attachments"],
        exec(&["dataplane", "show"])["attachments"]
    );
    // a write under ip netns exec is seen by -n
    let o = p.b.exec(
        ILA.bin,
        &format!("--backend bpf xlat add loc_match 2001:db8:ee:1 loc {SIR_NET}"),
    );
    assert!(o.status.success(), "{o:?}");
    assert_eq!(
        ILA.json(&p.b, "xlat show").as_array().map(Vec::len),
        Some(2)
    );
    let v = ILA.json(&p.b, &format!("xlat get loc_match {LOC_B} dev vb"));
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
        ILA.ok(&r, &format!("dataplane attach dev ra {r_hook}"));
        ILA.ok(&m, &format!("dataplane attach dev mr {m_hook}"));
        for offload in [false, true] {
            pair.offload(offload);
            for mode in ["adj-transport", "neutral-map", "neutral-map-auto"] {
                ILA.ok(
                    &r,
                    &format!("route replace {SIR_B} loc {LOC_B} csum-mode {mode} hook-type input"),
                );
                ILA.ok(
                    &m,
                    &format!("xlat replace loc_match {LOC_B} loc {SIR_NET} csum-mode {mode}"),
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
        ILA.json(&p.b, "dataplane show")["attachments"]
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
    ILA.ok(&p.b, "dataplane attach dev vb egress");
    assert_eq!(show(), [("vb".to_string(), Value::Null, true)]);
    ILA.ok(&p.b, "dataplane attach dev vb xdp ingress");
    assert_eq!(show(), [("vb".to_string(), Value::from("xdp"), true)]);
    let link = p.b.ip_json("link show dev vb");
    assert!(link[0]["xdp"]["prog"]["id"].as_u64().is_some(), "{link}");
    ILA.ok(&p.b, "dataplane attach dev vb xdp-generic");
    assert_eq!(
        show(),
        [("vb".to_string(), Value::from("xdp-generic"), true)]
    );
    ILA.ok(&p.b, "dataplane detach dev vb egress");
    assert_eq!(
        show(),
        [("vb".to_string(), Value::from("xdp-generic"), false)]
    );
    ILA.ok(&p.b, "dataplane attach dev vb tc ingress");
    assert_eq!(show(), [("vb".to_string(), Value::from("tc"), false)]);
    let link = p.b.ip_json("link show dev vb");
    assert!(link[0].get("xdp").is_none(), "XDP left behind: {link}");
    ILA.ok(&p.b, "dataplane detach dev vb");
    assert_eq!(show(), []);
    let o = ILA.at(&p.b, "dataplane attach dev vb xdp egress");
    assert_eq!(o.status.code(), Some(1), "{o:?}");
}

/// A mapping's counters are its own: they count what it translated, survive a replace, and a
/// mapping deleted and added again (whose counter slot is reused) starts from zero.
#[test]
fn counters_belong_to_their_entry() {
    let p = Pair::new("ila-c");
    let add = ["xlat", "add", "loc_match", LOC_B, "loc", SIR_NET];
    ILA.ok(&p.b, &add);
    ILA.ok(&p.b, "dataplane attach dev vb ingress");
    let packets = || ILA.json(&p.b, "-s xlat show")[0]["packets"].as_u64();
    assert_eq!(packets(), Some(0));
    // A sends to B's ILA address: B maps it (the echo replies come from the SIR address, which
    // ping does not take for its own; the count is the point)
    let _ = p.a.exec("ping", &format!("-6 -c 3 -i 0.2 -W 1 {ILA_B}"));
    assert_eq!(packets(), Some(3));
    // the reason counters: an object of name -> packets, the shape of the three tools
    let c = ILA.json(&p.b, "dataplane show")["counters"].clone();
    assert!(c["translated-in"].as_u64() >= Some(3), "{c}");
    assert!(
        c.as_object()
            .is_some_and(|o| o.len() > 1 && o.values().all(Value::is_u64)),
        "{c}"
    );
    ILA.ok(
        &p.b,
        &format!("xlat replace loc_match {LOC_B} loc {SIR_NET} csum-mode neutral-map-auto"),
    );
    assert_eq!(packets(), Some(3), "a replace keeps the counters");
    ILA.ok(&p.b, &format!("xlat del loc_match {LOC_B}"));
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
    ns.ip_ok("link set lo up");
    ns.ip_ok("-6 addr add 2001:db8:a::1/64 dev v0 nodad");
    // ila's tables exist when their anchor is on lo (they are pinned nowhere: issue 30)
    let pinned = || {
        ns.run_in_thread(false, || {
            mpt_bpf::attach::tcx_query(1, mpt_bpf::attach::TcxDir::Ingress)
                .expect("query lo")
                .into_iter()
                .any(|id| mpt_bpf::prog::info(id).is_ok_and(|i| i.name == "ila_anchor"))
        })
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
    assert_eq!(ns.ip_json("-6 route show proto 246"), serde_json::json!([]));
    // the kernel's refusal of an unreachable gateway, predicted in its words
    let mut bad = route;
    bad[8] = "2001:db8:5::2";
    ILA.refused_alike(&ns, &bad);

    ILA.ok(&ns, &xlat);
    assert!(pinned(), "the first real command creates ila's tables");
    ILA.ok(&ns, &route);
    let before = (
        ILA.json(&ns, "xlat show"),
        ILA.json(&ns, "route show"),
        ns.ip_json("-6 route show proto 246"),
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
    let v = ILA.json(&ns, &format!("--check route del {SIR_B}"));
    assert_eq!(
        (v["changed"].clone(), v["diff"]["after"].clone()),
        (true.into(), Value::Null)
    );
    let v = ILA.json(&ns, "--check xlat flush");
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
    let v = ILA.json(&ns, "--check dataplane attach dev v0");
    assert_eq!(v["changed"], true);
    assert_eq!(v["diff"]["after"]["v0"]["egress"], true);
    assert_eq!(
        ILA.json(&ns, "dataplane show")["attachments"],
        serde_json::json!([])
    );
    let after = (
        ILA.json(&ns, "xlat show"),
        ILA.json(&ns, "route show"),
        ns.ip_json("-6 route show proto 246"),
    );
    assert_eq!(after, before, "the dry runs changed something");
}

/// The process strace runs (its only child), once it is there.
fn traced_child(strace: u32) -> Option<u32> {
    let kids = std::fs::read_to_string(format!("/proc/{strace}/task/{strace}/children")).ok()?;
    kids.split_whitespace().next()?.parse().ok()
}

/// `xlat del loc_match M loc L` compares the locator under the lock its delete takes (issue 27
/// item 3: with its lock delayed, a concurrent replace to another locator came between the
/// comparison and the delete, and the new mapping was removed as if it had locator L). The
/// delete is held at its first flock by strace; whatever it read before, it has read.
#[test]
fn del_compares_the_locator_under_the_lock() {
    require_root();
    let ns = Netns::new("ila-race");
    ILA.ok(&ns, &format!("xlat add loc_match {LOC_B} loc {SIR_NET}"));
    let del = std::process::Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "-e", "trace=flock"])
        .args(["-e", "inject=flock:delay_enter=1500000", ILA.bin])
        .args(["--backend", "bpf", "-n", ns.name(), "xlat", "del"])
        .args(["loc_match", LOC_B, "loc", SIR_NET])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("strace");
    // ila's first flock: its syscall number (73 on x86-64) in /proc/PID/syscall
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let at_flock = traced_child(del.id()).is_some_and(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/syscall"))
                .is_ok_and(|s| s.starts_with(&format!("{} ", libc::SYS_flock)))
        });
        if at_flock {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "ila never reached flock"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    ILA.ok(
        &ns,
        &format!("xlat replace loc_match {LOC_B} loc 2001:db8:1:3"),
    );
    let o = del.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "the delete must fail: {err}");
    assert!(
        err.contains("the mapping has locator 2001:db8:1:3"),
        "{err}"
    );
    let rows = ILA.json(&ns, "xlat show");
    assert_eq!(
        rows[0]["locator"], "2001:db8:1:3",
        "the replaced mapping stays: {rows}"
    );
}

/// Another invocation's lock is waited for as long as `--wait` says, the holder named after a
/// second, and then the command fails with exit 2 naming it (issue 27 item 4: a stopped holder
/// made every later command wait silently and forever). The holder here is this test.
#[test]
fn a_held_lock_is_named_and_waited_for_a_bounded_time() {
    require_root();
    let ns = Netns::new("ila-wait");
    ILA.ok(&ns, &format!("xlat add loc_match {LOC_B} loc {SIR_NET}"));
    let cookie = ns.cookie().expect("cookie");
    let path = format!("/run/ila/{}.lock", mpt_testkit::netns::id_name(cookie));
    // the lock file went with the last command (issue 30): made again, as a holder makes it
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .expect("the lock file");
    let held = nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| e)
        .expect("flock");
    let t = std::time::Instant::now();
    let o = ILA.at(&ns, &format!("--wait 2 xlat del loc_match {LOC_B}"));
    let waited = t.elapsed();
    drop(held);
    let err = String::from_utf8_lossy(&o.stderr);
    let me = format!("held by pid {} (", std::process::id());
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(waited >= Duration::from_secs(2), "{waited:?}");
    assert!(
        err.lines()
            .next()
            .is_some_and(|l| l.starts_with("ila: note: waiting for the lock") && l.contains(&me)),
        "{err}"
    );
    assert!(err.lines().nth(1).is_some_and(|l| l.contains(&me)), "{err}");
    assert_eq!(ILA.json(&ns, "xlat show")[0]["locator_match"], LOC_B);
    ILA.ok(&ns, &format!("xlat del loc_match {LOC_B}"));
}

/// Names the kernel or another user chose are printed with their control characters escaped
/// (issue 27 item 5: a device named with an escape sequence retitled the operator's terminal).
#[test]
fn device_names_cannot_drive_the_terminal() {
    require_root();
    let a = Netns::new("ila-esc-a");
    let b = Netns::new("ila-esc-b");
    let evil = "\u{1b}]0;PWN\u{7}\u{1b}[2J";
    veth(&a, "va", &b, "vb");
    b.ip_ok(&["link", "set", "vb", "name", evil]);
    let o = ILA.at(
        &b,
        &[
            "xlat",
            "add",
            "loc_match",
            LOC_B,
            "loc",
            SIR_NET,
            "dev",
            evil,
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for args in ["xlat show", "dataplane show"] {
        let o = ILA.at(&b, args);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            !out.contains('\u{1b}') && !out.contains('\u{7}'),
            "{args:?}: {out:?}"
        );
    }
    let out = ILA.ok(&b, "xlat show");
    assert!(out.contains("\\x1b]0;PWN\\x07\\x1b[2J"), "{out}");
    // JSON carries the name as it is (escaped by JSON's own rules)
    assert_eq!(ILA.json(&b, "xlat show")[0]["interface"], evil);
}

/// What a batch reads is bounded, what an error writes is whole (issue 27 items 6 and 12):
/// `-b /dev/zero` is refused before it is read (it was read at 0.9 GB/s until the OOM
/// killer), an endless line through a pipe ends in one line, exit 1; `-n ""` is a usage
/// error; an error line and its hint go out in one write(2), so that concurrent processes'
/// lines do not interleave.
#[test]
fn batches_are_bounded_and_error_lines_whole() {
    require_root();
    let o = ILA.run("-b /dev/zero");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("is a character device"), "{err}");
    let o = std::process::Command::new("sh")
        .args([
            "-c",
            &format!("head -c 200000 /dev/zero | {} -b -", ILA.bin),
        ])
        .output()
        .expect("sh");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("-:1: a line longer than 65536 bytes"), "{err}");
    let o = ILA.run(&["-n", "", "xlat", "show"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    let ns = Netns::new("ila-write");
    let o = std::process::Command::new("strace")
        .args([
            "-f",
            "-qq",
            "-e",
            "trace=write",
            "-e",
            "signal=none",
            ILA.bin,
        ])
        .args(["--backend", "bpf", "-n", ns.name(), "xlat", "del"])
        .args(["loc_match", LOC_B])
        .output()
        .expect("strace");
    let trace = String::from_utf8_lossy(&o.stderr);
    let writes: Vec<&str> = trace.lines().filter(|l| l.contains("write(2,")).collect();
    assert_eq!(writes.len(), 1, "{trace}");
    assert!(writes[0].contains("ila: xlat del"), "{trace}");
}

/// Unmounts and removes a bind mount of a namespace, and what the tools keep for it.
struct Kept {
    path: std::path::PathBuf,
    cookie: u64,
}

impl Drop for Kept {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(&self.path)
            .status();
        let _ = std::fs::remove_file(&self.path);
        mpt_testkit::netns::remove_tool_state(self.cookie);
    }
}

/// A namespace kept alive by a bind mount outside `/run/netns` has no name and no process, and
/// is alive: its pins and lock outlive the sweep another namespace's new state runs (issue 27
/// item 10: they were removed, judged by names). The kernel's word decides: its anchor runs.
#[test]
fn a_namespace_kept_by_a_bind_mount_keeps_its_state() {
    require_root();
    let x = Netns::new("ila-kept");
    ILA.ok(&x, &format!("xlat add loc_match {LOC_B} loc {SIR_NET}"));
    let cookie = x.cookie().expect("cookie");
    let id = mpt_testkit::netns::id_name(cookie);
    let pins = std::path::PathBuf::from(format!("/sys/fs/bpf/ila/{id}"));
    let lock = std::path::PathBuf::from(format!("/run/ila/{id}.lock"));
    // pinned nowhere, and the lock file goes with its holder (issue 30)
    assert!(!pins.exists() && !lock.exists(), "pins or a lock file left");
    let kept = Kept {
        path: std::env::temp_dir().join(format!("mpt-kept-{}", std::process::id())),
        cookie,
    };
    std::fs::write(&kept.path, b"").expect("mount point");
    let st = std::process::Command::new("mount")
        .args(["--bind", &format!("/run/netns/{}", x.name())])
        .arg(&kept.path)
        .status()
        .expect("mount");
    assert!(st.success(), "bind mount");
    let name = x.name().to_string();
    // its name goes (not through `x`, whose drop also removes what the tools keep for it)
    let st = std::process::Command::new("ip")
        .args(["netns", "del", &name])
        .status()
        .expect("ip");
    assert!(st.success(), "ip netns del");
    assert!(!std::path::Path::new(&format!("/run/netns/{name}")).exists());
    // another namespace's first state sweeps what dead namespaces left
    let y = Netns::new("ila-sweeper");
    ILA.ok(&y, &format!("xlat add loc_match {LOC_B} loc {SIR_NET}"));
    let o = std::process::Command::new("nsenter")
        .arg(format!("--net={}", kept.path.display()))
        .args([ILA.bin, "--backend", "bpf", "-j", "xlat", "show"])
        .output()
        .expect("nsenter");
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v[0]["locator_match"], LOC_B, "{v}");
}

/// A mapping whose device was deleted can be deleted on its own (issue 27 item 9: `show`
/// listed `if3`, `del ... dev if3` said ENODEV, without `dev` ESRCH, only `flush` cleared it):
/// `dev ifN` names the gone device, and a `del` without `dev` names where the mappings are.
#[test]
fn a_mapping_on_a_deleted_device_can_be_deleted() {
    let p = Pair::new("ila-gone");
    ILA.ok(
        &p.b,
        &format!("xlat add loc_match {LOC_B} loc {SIR_NET} dev vb"),
    );
    ILA.ok(
        &p.b,
        &format!("xlat add loc_match 2001:db8:ee:1 loc {SIR_NET}"),
    );
    p.b.ip_ok("link del vb");
    let rows = ILA.json(&p.b, "xlat show");
    let gone = rows
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["locator_match"] == LOC_B)
        .map(|r| r["interface"].as_str().unwrap_or("").to_string())
        .expect("the mapping on the gone device");
    assert!(gone.starts_with("if"), "{rows}");
    let o = ILA.at(&p.b, &format!("xlat del loc_match {LOC_B}"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("has mappings on dev {gone}")),
        "{err}"
    );
    ILA.ok(&p.b, &format!("xlat del loc_match {LOC_B} dev {gone}"));
    let rows = ILA.json(&p.b, "xlat show");
    assert_eq!(rows.as_array().map(Vec::len), Some(1), "{rows}");
    assert_eq!(rows[0]["locator_match"], "2001:db8:ee:1");
    // a name that is neither a device nor a gone one's ifN stays an error
    let o = ILA.at(&p.b, &format!("xlat del loc_match {LOC_B} dev nosuch"));
    assert_eq!(o.status.code(), Some(2));
}

/// Output for scripts (issue 27 item 11): output that does not reach its file is exit 2
/// (`-j >/dev/full` said 0); with `-j` a failure is also one JSON object on standard output;
/// a `-j` batch is JSON Lines, `-p` or not.
#[test]
fn json_for_scripts_whole_or_failed() {
    let ns = Netns::new("ila-json");
    ILA.ok(&ns, &format!("xlat add loc_match {LOC_B} loc {SIR_NET}"));
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let o = std::process::Command::new(ILA.bin)
        .args(["--backend", "bpf", "-n", ns.name(), "-j", "xlat", "show"])
        .stdout(full)
        .output()
        .expect("ila");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("write standard output: No space left on device [ENOSPC]"),
        "{err}"
    );

    let o = ILA.at(&ns, "-j xlat del loc_match 2001:db8:ee:9");
    assert_eq!(o.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    assert_eq!(v["errno"], "ESRCH", "{v}");
    assert!(
        v["error"].as_str().is_some_and(|e| e.contains("xlat del")),
        "{v}"
    );

    let mut child = std::process::Command::new(ILA.bin)
        .args(["--backend", "bpf", "-n", ns.name()])
        .args(["-j", "-p", "--force", "-b", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ila");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(
            b"xlat show\nxlat del loc_match 2001:db8:ee:9\nxlat get loc_match 2001:db8:ff:1\n",
        )
        .expect("write");
    let o = child.wait_with_output().expect("wait");
    assert_eq!(o.status.code(), Some(2));
    let out = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "JSON Lines: {out}");
    for l in &lines {
        serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{e}: {l}"));
    }
    assert!(lines[1].contains("\"errno\":\"ESRCH\""), "{out}");
}

/// A note is said once per invocation, not on every line of a batch (issue 27 item 12: a
/// 20,000-line batch printed 20,000 notes).
#[test]
fn a_batch_says_its_note_once() {
    let ns = Netns::new("ila-note");
    let batch: String = (1..=50)
        .map(|i| format!("xlat add loc_match 2001:db8:ee:{i:x} loc {SIR_NET}\n"))
        .collect();
    let mut child = std::process::Command::new(ILA.bin)
        .args(["--backend", "bpf", "-n", ns.name(), "-b", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ila");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(batch.as_bytes())
        .expect("write");
    let o = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let notes = err.lines().filter(|l| l.starts_with("ila: note:")).count();
    assert_eq!(notes, 1, "{err}");
}

/// `route replace` over a FIB route that is not ila's says so, and does not tell the operator
/// to use the replace they used (issue 27 item 12); the foreign route stays as it was.
#[test]
fn replace_over_a_foreign_route_names_it() {
    let p = Pair::new("ila-fr");
    p.a.ip_ok(&format!("-6 route add {SIR_B}/128 via {B_ADDR}"));
    let before = p.a.ip_json(&format!("-6 route show exact {SIR_B}"));
    let o = ILA.at(&p.a, &format!("route replace {SIR_B} loc {LOC_B}"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("that is not ila's [EEXIST]"), "{err}");
    assert!(!err.contains("use replace"), "{err}");
    assert_eq!(p.a.ip_json(&format!("-6 route show exact {SIR_B}")), before);
    assert_eq!(ILA.json(&p.a, "route show"), serde_json::json!([]));
}

/// A batch whose reader is slow does not hold the lock while it waits to write (issue 27 item
/// 4: `ila -j -b big | sleep 12` kept every other invocation waiting): its output is held
/// back until its work is done and the lock let go.
#[test]
fn a_slow_reader_does_not_hold_the_lock() {
    use std::io::Read;
    let ns = Netns::new("ila-slow");
    ILA.ok(&ns, &format!("xlat add loc_match {LOC_B} loc {SIR_NET}"));
    // its first line takes the lock (a change), the rest fill the pipe
    let text = format!(
        "xlat replace loc_match {LOC_B} loc {SIR_NET}\n{}",
        "xlat show\n".repeat(3000)
    );
    let batch = mpt_testkit::BatchFile::new("ila-slow", text);
    let mut child = std::process::Command::new(ILA.bin)
        .args([
            "--backend",
            "bpf",
            "-n",
            ns.name(),
            "-j",
            "-b",
            batch.path(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("ila");
    // until it waits on the full pipe
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(format!("/proc/{}/wchan", child.id()))
        .map_or(true, |w| !w.contains("pipe_write"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the batch never filled its pipe"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = ILA.at(
        &ns,
        &format!("--wait 3 xlat add loc_match 2001:db8:ee:1 loc {SIR_NET}"),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read");
    assert!(child.wait().expect("wait").success());
    assert_eq!(out.lines().count(), 3001);
}

/// Anyone can make `/sys/fs/bpf/ila` first (bpffs is 1777): root's first command in a new
/// namespace still works, instead of failing with exit 2 (issue 27 item 4), and puts nothing
/// there (issue 30: the state is pinned nowhere). In a mount namespace of its own with a bpffs of its own, so that nothing of
/// the host's is touched.
#[test]
fn a_pin_root_someone_else_made_is_done_without() {
    require_root();
    let ns = Netns::new("ila-pinroot");
    let script = format!(
        "mount -t bpf bpf /sys/fs/bpf && mkdir /sys/fs/bpf/ila && chown 65534:65534 /sys/fs/bpf/ila \
         && {ila} --backend bpf -n {ns} xlat add loc_match {LOC_B} loc {SIR_NET} \
         && {ila} --backend bpf -n {ns} xlat add loc_match 2001:db8:ee:1 loc {SIR_NET} \
         && test -z \"$(ls -A /sys/fs/bpf/ila)\"",
        ila = ILA.bin,
        ns = ns.name()
    );
    let o = std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .output()
        .expect("unshare");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let notes: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("goes on without pins"))
        .collect();
    // the state pins nothing (issue 30: it dies with its namespace), so nobody's pin root
    // is neither used nor worth a note
    assert!(notes.is_empty(), "{err}");
    assert_eq!(ILA.json(&ns, "xlat show").as_array().map(Vec::len), Some(2));
}

/// `bpftool -j map show id N`.
fn bpftool_map(id: u64) -> Value {
    mpt_testkit::bpftool_json(&["map", "show", "id", &id.to_string()])
}

/// The translator's tables start small and grow with their entries (issue 30 item 1). With the
/// translator attached and 10 mappings, the state's maps and the translator's own cost at most
/// 4 MiB in the kernel's account, and `dataplane show` reports each state map as bpftool does;
/// 5,000 more mappings in one batch grow `ila_xlat` (the table the translator reads per packet)
/// past its first capacity, every mapping is there, and one added after the growth translates
/// (its counter counts the echo requests A sent).
#[test]
fn tables_grow_with_their_entries() {
    let p = Pair::new("ila-grow");
    ILA.ok(&p.b, "dataplane attach dev vb ingress");
    for i in 0..10 {
        ILA.ok(
            &p.b,
            &format!("xlat add loc_match 2001:db8:aaaa:{i:x} loc {SIR_NET}"),
        );
    }
    let v = ILA.json(&p.b, "dataplane show");
    let maps = v["maps"].as_array().expect("maps").clone();
    let mut state = 0;
    for m in &maps {
        let k = bpftool_map(m["id"].as_u64().expect("id"));
        assert_eq!(k["name"], m["name"], "{k} / {m}");
        assert_eq!(k["max_entries"], m["max_entries"], "{k} / {m}");
        assert_eq!(k["bytes_memlock"], m["memory_bytes"], "{k} / {m}");
        state += m["memory_bytes"].as_u64().expect("bytes");
    }
    assert_eq!(v["memory_bytes"].as_u64(), Some(state), "{v}");
    let programs = v["dataplane_memory_bytes"]
        .as_u64()
        .expect("translator's maps");
    eprintln!(
        "10 mappings + translator: {} KiB state, {} KiB the translator's maps",
        state / 1024,
        programs / 1024
    );
    if mpt_testkit::matrix::memlock_is_usage() {
        assert!(state + programs <= 4 << 20, "{v}");
    }
    let first = maps
        .iter()
        .find(|m| m["name"] == "ila_xlat_in")
        .and_then(|m| m["max_entries"].as_u64())
        .expect("ila_xlat_in");

    let n = 5_000;
    assert!(first < n, "ila_xlat starts at {first}");
    let text: String = (10..n)
        .map(|i| format!("xlat add loc_match 2001:db8:aaaa:{i:x} loc {SIR_NET}\n"))
        .collect();
    let batch = mpt_testkit::BatchFile::new("ila-grow", text);
    ILA.ok(&p.b, &["-b", batch.path()]);
    ILA.ok(&p.b, &format!("xlat add loc_match {LOC_B} loc {SIR_NET}"));
    let v = ILA.json(&p.b, "dataplane show");
    let xlat = v["maps"]
        .as_array()
        .expect("maps")
        .iter()
        .find(|m| m["name"] == "ila_xlat_in")
        .cloned()
        .expect("ila_xlat_in");
    let k = bpftool_map(xlat["id"].as_u64().expect("id"));
    assert!(k["max_entries"].as_u64().expect("max_entries") > n, "{k}");
    assert_eq!(
        ILA.json(&p.b, "xlat show").as_array().map(Vec::len),
        Some(n as usize + 1)
    );
    let _ = p.a.exec("ping", &format!("-6 -c 3 -i 0.2 -W 1 {ILA_B}"));
    let shown = ILA.json(&p.b, "-s xlat show");
    let it = shown
        .as_array()
        .expect("mappings")
        .iter()
        .find(|m| m["locator_match"] == LOC_B)
        .unwrap_or_else(|| panic!("{LOC_B} not shown"));
    assert_eq!(it["packets"].as_u64(), Some(3), "{it}");
}

/// A batch of routes whose device the kernel chooses reads the IPv6 FIB once, not once per
/// line (issue 30 item 4), and its view follows its own writes (tests/helpers/ila_route_batch.rs).
#[test]
fn a_route_batch_dumps_the_fib_once() {
    require_root();
    let ns = Netns::new("ila-dump");
    ila_route_batch::run(ILA.bin, "bpf", &ns);
}

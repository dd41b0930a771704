//! Topologies of throwaway namespaces joined by veth pairs: [`veth`], a router with two
//! neighbours ([`TwoPaths`]), a client, a router and four nexthops ([`FourPaths`]), and an ILA
//! path of two routers ([`IlaPath`]).

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::cmd::run_ok;
use crate::netns::Netns;

/// A veth pair from `a:an` to `b:bn`, both ends up.
pub fn veth(a: &Netns, an: &str, b: &Netns, bn: &str) {
    let tmp = format!("t{}", std::process::id() % 100_000);
    run_ok(
        "ip",
        &[
            "-n",
            a.name(),
            "link",
            "add",
            an,
            "type",
            "veth",
            "peer",
            "name",
            &tmp,
            "netns",
            b.name(),
        ],
    );
    b.ip_ok(&["link", "set", &tmp, "name", bn]);
    a.ip_ok(&["link", "set", an, "up"]);
    b.ip_ok(&["link", "set", bn, "up"]);
}

/// A router namespace `r` with two links: `va` to `a` (10.1.0.0/24, 2001:db8:1::/64) and `vb` to
/// `b` (10.2.0.0/24, 2001:db8:2::/64). The router has .1 / ::1, the neighbours .2 / ::2.
#[derive(Debug)]
pub struct TwoPaths {
    /// The router.
    pub r: Netns,
    /// Neighbour on va.
    pub a: Netns,
    /// Neighbour on vb.
    pub b: Netns,
}

impl TwoPaths {
    /// Build it.
    pub fn new(tag: &str) -> TwoPaths {
        let r = Netns::new(&format!("{tag}r"));
        let a = Netns::new(&format!("{tag}a"));
        let b = Netns::new(&format!("{tag}b"));
        veth(&r, "va", &a, "eth0");
        veth(&r, "vb", &b, "eth0");
        for (ns, v4, v6, dev) in [
            (&r, "10.1.0.1/24", "2001:db8:1::1/64", "va"),
            (&r, "10.2.0.1/24", "2001:db8:2::1/64", "vb"),
            (&a, "10.1.0.2/24", "2001:db8:1::2/64", "eth0"),
            (&b, "10.2.0.2/24", "2001:db8:2::2/64", "eth0"),
        ] {
            ns.ip_ok(&["addr", "add", v4, "dev", dev]);
            ns.ip_ok(&["addr", "add", v6, "dev", dev, "nodad"]);
        }
        TwoPaths { r, a, b }
    }
}

/// The client's IPv4 address (on `c:eth0`).
pub const CLIENT_V4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// The client's IPv6 address (on `c:eth0`).
pub const CLIENT_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
/// The managed IPv4 destination, a local address on `lo` of every nexthop namespace.
pub const DEST_V4: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);
/// The managed IPv6 destination, a local address on `lo` of every nexthop namespace.
pub const DEST_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x100, 0, 0, 0, 0, 1);
/// The IPv4 prefix the router's multipath route should cover.
pub const DEST_PREFIX_V4: &str = "198.51.100.0/24";
/// The IPv6 prefix the router's multipath route should cover.
pub const DEST_PREFIX_V6: &str = "2001:db8:100::/64";

/// `ip netns exec NS sysctl -w KEY=VALUE`, which must succeed.
pub fn sysctl(ns: &Netns, key: &str, value: &str) {
    let kv = format!("{key}={value}");
    run_ok(
        "ip",
        &["netns", "exec", ns.name(), "sysctl", "-q", "-w", &kv],
    );
}

/// The MAC address of `dev` in `ns` (from `ip -j link show dev DEV`).
pub fn mac(ns: &Netns, dev: &str) -> String {
    let j = ns.ip_json(&["link", "show", "dev", dev]);
    j.get(0)
        .and_then(|l| l.get("address"))
        .and_then(|a| a.as_str())
        .unwrap_or_else(|| panic!("no MAC for {dev} in {}: {j}", ns.name()))
        .to_string()
}

/// A permanent neighbour entry `addr lladdr mac dev dev nud permanent` in `ns`.
fn neigh_permanent(ns: &Netns, addr: &str, mac: &str, dev: &str) {
    ns.ip_ok(&[
        "neigh",
        "replace",
        addr,
        "lladdr",
        mac,
        "dev",
        dev,
        "nud",
        "permanent",
    ]);
}

/// Client `c` — router `r` — four nexthops `n[0..4]`.
///
/// * `c:eth0` 10.0.0.2/24, 2001:db8:0::2/64 ↔ `r:vc` 10.0.0.1/24, 2001:db8:0::1/64; the client's
///   default routes (v4, v6) go via the router.
/// * `r:v{i}` 10.{i+1}.0.1/24, 2001:db8:{i+1}::1/64 ↔ `n[i]:eth0` 10.{i+1}.0.2/24,
///   2001:db8:{i+1}::2/64; each `n[i]` has default routes back via the router and the managed
///   destinations [`DEST_V4`]/32 and [`DEST_V6`]/128 on its `lo`, so traffic terminates there.
/// * Forwarding on in `r`; rp_filter off in `r` and every `n[i]`; permanent neighbour entries on
///   every point-to-point link in both directions (no ARP/ND during tests).
///
/// The router's multipath route to [`DEST_PREFIX_V4`]/[`DEST_PREFIX_V6`] is the test's business.
#[derive(Debug)]
pub struct FourPaths {
    /// The client.
    pub c: Netns,
    /// The router.
    pub r: Netns,
    /// The nexthops, reached from `r` over `v0..v3`.
    pub n: [Netns; 4],
}

impl FourPaths {
    /// Build it (namespaces are named `…-{tag}c`, `…-{tag}r`, `…-{tag}n0` … `…-{tag}n3`).
    pub fn new(tag: &str) -> FourPaths {
        let c = Netns::new(&format!("{tag}c"));
        let r = Netns::new(&format!("{tag}r"));
        let n = [0, 1, 2, 3].map(|i| Netns::new(&format!("{tag}n{i}")));

        // The client's flows bind fixed source ports below 61000 (see `flows`): keep the
        // kernel's ephemeral ports out of their way, or a bind can meet EADDRINUSE.
        sysctl(&c, "net.ipv4.ip_local_port_range", "61000 65535");

        // Client link.
        veth(&r, "vc", &c, "eth0");
        c.ip_ok(&["addr", "add", "10.0.0.2/24", "dev", "eth0"]);
        c.ip_ok(&["addr", "add", "2001:db8:0::2/64", "dev", "eth0", "nodad"]);
        r.ip_ok(&["addr", "add", "10.0.0.1/24", "dev", "vc"]);
        r.ip_ok(&["addr", "add", "2001:db8:0::1/64", "dev", "vc", "nodad"]);
        c.ip_ok(&["route", "add", "default", "via", "10.0.0.1", "dev", "eth0"]);
        c.ip_ok(&[
            "-6",
            "route",
            "add",
            "default",
            "via",
            "2001:db8:0::1",
            "dev",
            "eth0",
        ]);
        let (c_mac, vc_mac) = (mac(&c, "eth0"), mac(&r, "vc"));
        neigh_permanent(&c, "10.0.0.1", &vc_mac, "eth0");
        neigh_permanent(&c, "2001:db8:0::1", &vc_mac, "eth0");
        neigh_permanent(&r, "10.0.0.2", &c_mac, "vc");
        neigh_permanent(&r, "2001:db8:0::2", &c_mac, "vc");

        // Nexthop links.
        for (i, ni) in n.iter().enumerate() {
            let k = i + 1;
            let dev = format!("v{i}");
            veth(&r, &dev, ni, "eth0");
            r.ip_ok(&["addr", "add", &format!("10.{k}.0.1/24"), "dev", &dev]);
            r.ip_ok(&[
                "addr",
                "add",
                &format!("2001:db8:{k}::1/64"),
                "dev",
                &dev,
                "nodad",
            ]);
            ni.ip_ok(&["addr", "add", &format!("10.{k}.0.2/24"), "dev", "eth0"]);
            ni.ip_ok(&[
                "addr",
                "add",
                &format!("2001:db8:{k}::2/64"),
                "dev",
                "eth0",
                "nodad",
            ]);
            ni.ip_ok(&["addr", "add", &format!("{DEST_V4}/32"), "dev", "lo"]);
            ni.ip_ok(&[
                "addr",
                "add",
                &format!("{DEST_V6}/128"),
                "dev",
                "lo",
                "nodad",
            ]);
            ni.ip_ok(&[
                "route",
                "add",
                "default",
                "via",
                &format!("10.{k}.0.1"),
                "dev",
                "eth0",
            ]);
            ni.ip_ok(&[
                "-6",
                "route",
                "add",
                "default",
                "via",
                &format!("2001:db8:{k}::1"),
                "dev",
                "eth0",
            ]);
            let (n_mac, v_mac) = (mac(ni, "eth0"), mac(&r, &dev));
            neigh_permanent(&r, &format!("10.{k}.0.2"), &n_mac, &dev);
            neigh_permanent(&r, &format!("2001:db8:{k}::2"), &n_mac, &dev);
            neigh_permanent(ni, &format!("10.{k}.0.1"), &v_mac, "eth0");
            neigh_permanent(ni, &format!("2001:db8:{k}::1"), &v_mac, "eth0");
        }

        // Forwarding and rp_filter. The effective rp_filter is max(all, dev), so the existing
        // devices are switched off too, not only `all` and `default`.
        sysctl(&r, "net.ipv4.ip_forward", "1");
        sysctl(&r, "net.ipv6.conf.all.forwarding", "1");
        let r_devs = ["vc", "v0", "v1", "v2", "v3"];
        for (ns, devs) in [(&r, &r_devs[..])]
            .into_iter()
            .chain(n.iter().map(|ni| (ni, &["eth0"][..])))
        {
            for scope in ["all", "default"].iter().chain(devs) {
                sysctl(ns, &format!("net.ipv4.conf.{scope}.rp_filter"), "0");
            }
        }
        FourPaths { c, r, n }
    }

    /// The router's device towards `n[i]`: `v{i}`.
    pub fn dev(i: usize) -> String {
        format!("v{i}")
    }
    /// `n[i]`'s IPv4 address on the link to the router: `10.{i+1}.0.2`.
    pub fn nexthop_v4(i: usize) -> String {
        format!("10.{}.0.2", i + 1)
    }
    /// `n[i]`'s IPv6 address on the link to the router: `2001:db8:{i+1}::2`.
    pub fn nexthop_v6(i: usize) -> String {
        format!("2001:db8:{}::2", i + 1)
    }
}

/// The ILA tests' address plan (`tests/ila_netns.rs`, `tests/ila_kernel.rs`): a host A, and B
/// with a SIR address, its ILA address and locator; and the checksum modes they go through.
pub mod ila_plan {
    /// A's address on its link to B.
    pub const A_ADDR: &str = "2001:db8:a::1";
    /// B's address on its link to A.
    pub const B_ADDR: &str = "2001:db8:a::2";
    /// B's locator.
    pub const LOC_B: &str = "2001:db8:ff:1";
    /// The SIR prefix's upper 64 bits.
    pub const SIR_NET: &str = "2001:db8:1:2";
    /// B's ILA address (LOC_B and the identifier, type luid).
    pub const ILA_B: &str = "2001:db8:ff:1:2000::b";
    /// B's SIR address.
    pub const SIR_B: &str = "2001:db8:1:2:2000::b";
    /// Every checksum mode (`csum-mode`).
    pub const MODES: [&str; 4] = [
        "adj-transport",
        "neutral-map",
        "neutral-map-auto",
        "no-action",
    ];
}

/// An ILA path of four namespaces, all IPv6: `a` (2001:db8:a::1 on `va`) sends through the
/// router `r` (`ra`, `rm`) and the router `m` (`mr`, `md`) to the host `d` (2001:db8:d::2 on
/// `dm`), which has the SIR address `sir_b`/128 on `lo`. `r` routes the locator `loc`::/64
/// and d's link to `m`; `m` routes the SIR prefix `sir_net`::/64 to `d`; both forward.
#[derive(Debug)]
pub struct IlaPath {
    /// The sender.
    pub a: Netns,
    /// The first router (where `ila route` translates SIR to ILA).
    pub r: Netns,
    /// The second router (where `ila xlat` translates ILA back).
    pub m: Netns,
    /// The host of the SIR address.
    pub d: Netns,
}

impl IlaPath {
    /// Build it; namespaces named with `tag`.
    pub fn new(tag: &str, sir_b: &str, loc: &str, sir_net: &str) -> IlaPath {
        let a = Netns::new(&format!("{tag}-a"));
        let r = Netns::new(&format!("{tag}-r"));
        let m = Netns::new(&format!("{tag}-m"));
        let d = Netns::new(&format!("{tag}-d"));
        veth(&a, "va", &r, "ra");
        veth(&r, "rm", &m, "mr");
        veth(&m, "md", &d, "dm");
        let ip = |ns: &Netns, args: &str| {
            ns.ip_ok(args);
        };
        ip(&a, "addr add 2001:db8:a::1/64 dev va nodad");
        ip(&r, "addr add 2001:db8:a::2/64 dev ra nodad");
        ip(&r, "addr add 2001:db8:b::1/64 dev rm nodad");
        ip(&m, "addr add 2001:db8:b::2/64 dev mr nodad");
        ip(&m, "addr add 2001:db8:d::1/64 dev md nodad");
        ip(&d, "addr add 2001:db8:d::2/64 dev dm nodad");
        ip(&d, &format!("addr add {sir_b}/128 dev lo"));
        ip(&a, "route add default via 2001:db8:a::2");
        ip(&r, &format!("route add {loc}::/64 via 2001:db8:b::2"));
        ip(&r, "route add 2001:db8:d::/64 via 2001:db8:b::2");
        ip(&m, "route add default via 2001:db8:b::1");
        ip(&m, &format!("route add {sir_net}::/64 via 2001:db8:d::2"));
        ip(&d, "route add default via 2001:db8:d::1");
        for ns in [&r, &m] {
            ns.try_sysctl(&[("net.ipv6.conf.all.forwarding", "1")])
                .expect("forwarding");
        }
        IlaPath { a, r, m, d }
    }
}

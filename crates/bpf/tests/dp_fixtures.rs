//! Root test: table-driven BPF_PROG_TEST_RUN fixtures for the dataplane (`bpf/mproute/dp.bpf.c`), both
//! hooks: `mpt_dp_xdp` and `mpt_dp_tc`.
//!
//! `bpf_fib_lookup` and the test run's ingress device resolve in the network namespace of the
//! thread that runs BPF_PROG_TEST_RUN. So each test builds a throwaway namespace
//! (`mpt-fx-<pid>-<n>`, deleted by a guard on drop, panics included) with veth devices,
//! addresses, permanent neighbours for the gateways and kernel routes for the managed prefixes
//! (the program's first FIB lookup is the kernel's own view and must succeed), then on a
//! dedicated thread that entered the namespace and is pinned to one CPU (the per-packet and DRR
//! state is per CPU) it opens and loads the dataplane skeleton standalone, so its maps are its
//! own, fills them (meta, groups, LPM tries) and runs packets through both programs.
//!
//! What a fixture checks: the return code; for a pass, the packet unchanged byte for byte and
//! exactly one `mpt_reasons` counter incremented, the expected one; for a redirect, the rewritten
//! packet (destination MAC = the chosen gateway's permanent neighbour MAC, source MAC = the
//! egress device's MAC, TTL / hop limit decremented, IPv4 header checksum valid, every other byte
//! unchanged, a VLAN tag removed) and the `redirected` counter. The egress ifindex is not
//! observable from a test run; the MAC pair identifies it.
//!
//! Topology of every namespace (veth pairs `X`/`Xp`, all in the namespace):
//!
//! | dev | MAC | MTU | addresses | gateways (permanent neighbour MAC) |
//! |---|---|---|---|---|
//! | in0 | 02:00:00:00:00:01 | 1500 | 10.0.0.1/24, 2001:db8:ff::1/64 | ingress |
//! | in1 | 02:00:00:00:10:01 | 1500 | 10.0.1.1/24, 2001:db8:fe::1/64 | ingress, forwarding=0 |
//! | e1 | 02:00:00:00:01:01 | 1280 | 10.1.0.1/24, 2001:db8:1::1/64 | 10.1.0.2, 2001:db8:1::2 (02:00:00:00:01:02) |
//! | e2 | 02:00:00:00:02:01 | 1280 | 10.2.0.1/24, 2001:db8:2::1/64 | 10.2.0.2, 2001:db8:2::2 (02:00:00:00:02:02) |
//! | e3 | 02:00:00:00:03:01 | 1500 | 10.3.0.1/24, 2001:db8:3::1/64 | 10.3.0.2, 2001:db8:3::2 (no neighbour) |
//! | e4 | 02:00:00:00:04:01 | 1500 | 10.4.0.1/24 | 10.4.0.2 (02:00:00:00:04:02) |
//! | e5 | 02:00:00:00:05:01 | 1500 | 10.5.0.1/24 | 10.5.0.2 (02:00:00:00:05:02) |
//!
//! Kernel routes ([`KERNEL_ROUTES`]): 198.51.100.0/24, 2001:db8:100::/56 and 100.65.0.0/16
//! multipath via e1 and e2; 203.0.113.0/24 and 2001:db8:300::/64 via e3; 192.0.2.0/24 multipath
//! via e4 and e5; 198.18.0.0/24 and 2001:db8:200::/64 on-link on e1 and e2 (permanent
//! neighbours for the host ::5 / .5); 198.19.0.0/24 via the IPv6 gateways of e1 and e2;
//! blackhole 198.51.100.240/28 and 2001:db8:100:fe::/64, unreachable 198.51.100.224/28; local
//! 198.51.100.200 and 2001:db8:100:ff::200 on lo. Managed routes: [`ROUTES`] over the groups
//! of [`groups`]; mpt_meta holds [`SEED`].
//!
//! Needs root. It fails, it does not skip, when run without root.

use std::collections::{BTreeMap, HashMap};
use std::mem::{offset_of, size_of, MaybeUninit};
use std::net::IpAddr;
use std::process::Command;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, OpenObject, ProgramInput};
use mpt_bpf::mproute::abi::{
    sum_percpu_u64, MptDpRoute, MptGroup, MptLpm4Key, MptLpm6Key, MptMeta, MptRouteKey,
    MptRouteStats, Reason, AF_INET, AF_INET6, ALGO_DRR, ALGO_L3_HASH, ALGO_L4_HASH,
    ALGO_PER_PACKET, ALGO_RANDOM, ALGO_WRANDOM, DP_ALGO_L3_RES, DP_ALGO_L4_RES, R_MAX,
};
use mpt_bpf::mproute::route_table::{build_group, DpNexthop};
use mpt_bpf::skel::mproute::dp::{types, DpSkel, DpSkelBuilder};
use mpt_model::hash::{flow_hash, FlowKey};
use mpt_model::route::threshold::select;
use mpt_testkit::cmd::{try_output, try_output_with_input};
use mpt_testkit::packet::{
    self, csum_ok, csum_sum, fill_l4_csum, hex, hexmac, icmp4_port_unreach, icmp6_port_unreach,
    inet_csum, tagged, tcp, udp, Ip4, Ip6, ETH_P_8021AD, ETH_P_8021Q, ETH_P_ARP, ETH_P_IP,
    ETH_P_IPV6, IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_TCP, IPPROTO_UDP, MF,
};
use mpt_testkit::progrun::{
    self, skb_ctx, xdp_ctx, SKB_GSO_SEGS, SKB_GSO_SIZE, SKB_IFINDEX, SKB_INGRESS_IFINDEX, SKB_SIZE,
    TCX_NEXT, TC_ACT_REDIRECT, XDP_MD_INGRESS_IFINDEX, XDP_MD_SIZE, XDP_PASS, XDP_REDIRECT,
};
use mpt_testkit::{require_root, Netns, XorShift64};

// ---- constants ----------------------------------------------------------------------------

/// Hash seed written to `mpt_meta` (fixed: the hash fixtures are deterministic).
const SEED: u32 = 0x6d70_7466;
/// The main table, as the dataplane's `mpt_table` defaults to.
const TABLE: u32 = 254;
/// `MPT_DRR_QUANTUM` of dp.bpf.c: bytes per unit of weight and turn.
const DRR_QUANTUM: u64 = 1514;

// The `struct __sk_buff` and `struct xdp_md` offsets of the test-run contexts (UAPI, in
// testkit::progrun), checked against the skeleton's BTF-generated types.
const _: () = {
    assert!(offset_of!(types::__sk_buff, ingress_ifindex) == SKB_INGRESS_IFINDEX);
    assert!(offset_of!(types::__sk_buff, ifindex) == SKB_IFINDEX);
    assert!(offset_of!(types::__sk_buff, gso_segs) == SKB_GSO_SEGS);
    assert!(offset_of!(types::__sk_buff, gso_size) == SKB_GSO_SIZE);
    assert!(size_of::<types::__sk_buff>() == SKB_SIZE);
    assert!(size_of::<types::xdp_md>() == XDP_MD_SIZE);
    assert!(offset_of!(types::xdp_md, ingress_ifindex) == XDP_MD_INGRESS_IFINDEX);
};

const fn mac(a: u8, b: u8) -> [u8; 6] {
    [0x02, 0, 0, 0, a, b]
}

/// MAC of in0 (destination of every test frame).
const IN0_MAC: [u8; 6] = mac(0x00, 0x01);
const IN1_MAC: [u8; 6] = IN0_MAC;
/// The sender on in0's link (source of every test frame).
const SENDER_MAC: [u8; 6] = mac(0x00, 0xaa);

/// A device of the topology.
struct DevSpec {
    name: &'static str,
    mac: [u8; 6],
    mtu: u32,
    addrs: &'static [&'static str],
    /// Gateways on its link.
    gws: &'static [&'static str],
    /// The gateways' permanent neighbour MAC; `None`: no neighbour entry.
    gw_mac: Option<[u8; 6]>,
}

const DEVS: &[DevSpec] = &[
    DevSpec {
        name: "in0",
        mac: IN0_MAC,
        mtu: 1500,
        addrs: &["10.0.0.1/24", "2001:db8:ff::1/64"],
        gws: &[],
        gw_mac: None,
    },
    DevSpec {
        name: "in1",
        // in0's address: the fixture's XDP object is loaded for in0 (mpt_if_mac), and frames
        // the tests send in through in1 must be "for us" to both hooks
        mac: IN1_MAC,
        mtu: 1500,
        addrs: &["10.0.1.1/24", "2001:db8:fe::1/64"],
        gws: &[],
        gw_mac: None,
    },
    DevSpec {
        name: "e1",
        mac: mac(0x01, 0x01),
        mtu: 1280,
        addrs: &["10.1.0.1/24", "2001:db8:1::1/64"],
        gws: &["10.1.0.2", "2001:db8:1::2"],
        gw_mac: Some(mac(0x01, 0x02)),
    },
    DevSpec {
        name: "e2",
        mac: mac(0x02, 0x01),
        mtu: 1280,
        addrs: &["10.2.0.1/24", "2001:db8:2::1/64"],
        gws: &["10.2.0.2", "2001:db8:2::2"],
        gw_mac: Some(mac(0x02, 0x02)),
    },
    DevSpec {
        name: "e3",
        mac: mac(0x03, 0x01),
        mtu: 1500,
        addrs: &["10.3.0.1/24", "2001:db8:3::1/64"],
        gws: &["10.3.0.2", "2001:db8:3::2"],
        gw_mac: None,
    },
    DevSpec {
        name: "e4",
        mac: mac(0x04, 0x01),
        mtu: 1500,
        addrs: &["10.4.0.1/24"],
        gws: &["10.4.0.2"],
        gw_mac: Some(mac(0x04, 0x02)),
    },
    DevSpec {
        name: "e5",
        mac: mac(0x05, 0x01),
        mtu: 1500,
        addrs: &["10.5.0.1/24"],
        gws: &["10.5.0.2"],
        gw_mac: Some(mac(0x05, 0x02)),
    },
];

/// `ip -batch` lines after the devices: local addresses, kernel routes.
const KERNEL_ROUTES: &[&str] = &[
    "addr add 198.51.100.200/32 dev lo",
    "addr add 2001:db8:100:ff::200/128 dev lo nodad",
    "route add 198.51.100.0/24 nexthop via 10.1.0.2 dev e1 nexthop via 10.2.0.2 dev e2",
    "route add 2001:db8:100::/56 nexthop via 2001:db8:1::2 dev e1 nexthop via 2001:db8:2::2 dev e2",
    "route add 203.0.113.0/24 via 10.3.0.2 dev e3",
    "route add 2001:db8:300::/64 via 2001:db8:3::2 dev e3",
    "route add 192.0.2.0/24 nexthop via 10.4.0.2 dev e4 nexthop via 10.5.0.2 dev e5",
    "route add blackhole 198.51.100.240/28",
    // Not managed: the router fast path forwards by these.
    "route add 100.66.0.0/16 via 10.1.0.2 dev e1",
    "route add 100.67.0.0/16 nexthop via 10.1.0.2 dev e1 nexthop via 10.2.0.2 dev e2",
    // A more specific route of the operator's inside the managed 198.51.100.0/24.
    "route add 198.51.100.160/28 via 10.3.0.2 dev e3",
    // A rule of the operator's by port: UDP to port 5353 is routed by table 100, via e3.
    "rule add ipproto udp dport 5353 table 100 priority 100",
    "route add 198.51.100.0/24 via 10.3.0.2 dev e3 table 100",
    // Another, by table 101, whose route uses one of the managed group's own gateways, but
    // with its own metric.
    "rule add ipproto udp dport 5355 table 101 priority 101",
    "route add 198.51.100.0/24 via 10.1.0.2 dev e1 metric 7 table 101",
    "route add unreachable 198.51.100.224/28",
    "route add blackhole 2001:db8:100:fe::/64",
    // Device (gateway-less) nexthops, with permanent neighbours for one on-link host.
    "route add 198.18.0.0/24 nexthop dev e1 nexthop dev e2",
    "neigh add 198.18.0.5 lladdr 02:00:00:00:01:02 dev e1 nud permanent",
    "neigh add 198.18.0.5 lladdr 02:00:00:00:02:02 dev e2 nud permanent",
    "route add 2001:db8:200::/64 dev e1",
    "route append 2001:db8:200::/64 dev e2",
    "neigh add 2001:db8:200::5 lladdr 02:00:00:00:01:02 dev e1 nud permanent",
    "neigh add 2001:db8:200::5 lladdr 02:00:00:00:02:02 dev e2 nud permanent",
    // IPv4 over IPv6 gateways (RFC 5549).
    "route add 198.19.0.0/24 nexthop via inet6 2001:db8:1::2 dev e1 nexthop via inet6 2001:db8:2::2 dev e2",
    // Groups with unusable nexthops, and with 32 nexthops.
    "route add 100.65.0.0/16 nexthop via 10.1.0.2 dev e1 nexthop via 10.2.0.2 dev e2",
];

/// Sysctls, in order (per-device values after `all`, which overwrites them).
const SYSCTLS: &[&str] = &[
    "net.ipv4.ip_forward=1",
    "net.ipv4.fib_multipath_hash_policy=1",
    "net.ipv6.conf.all.forwarding=1",
    "net.ipv4.conf.in1.forwarding=0",
    "net.ipv6.conf.in1.forwarding=0",
];

/// A nexthop group: id and (device, gateway or "" for a device route, weight, usable).
struct GroupSpec {
    id: u32,
    nhs: Vec<(&'static str, &'static str, u16, bool)>,
}

const G4_11: u32 = 1;
const G4_31: u32 = 2;
const G4_21: u32 = 3;
const G4_DEAD: u32 = 4;
const G4_E3: u32 = 5;
const G4_45: u32 = 6;
const G4_DEV: u32 = 7;
const G4_V6GW: u32 = 8;
const G4_MIX: u32 = 9;
const G4_32: u32 = 10;
const G6_11: u32 = 11;
const G6_31: u32 = 12;
const G6_DEAD: u32 = 14;
const G6_E3: u32 = 15;
const G6_DEV: u32 = 16;
/// A nexthop on e1 whose gateway (10.2.0.2) is on e2's subnet: unreachable through its device.
const G4_BADGW: u32 = 17;
/// Four nexthops on four devices (resilient tables), and the same with e2's unusable.
const G4_RES: u32 = 18;
const G4_RES_DEAD: u32 = 19;
/// Referenced by routes, never written.
const G4_MISSING: u32 = 999;
const G6_MISSING: u32 = 998;

fn groups() -> Vec<GroupSpec> {
    let g = |id, nhs: &[(&'static str, &'static str, u16, bool)]| GroupSpec {
        id,
        nhs: nhs.to_vec(),
    };
    vec![
        g(
            G4_11,
            &[("e1", "10.1.0.2", 1, true), ("e2", "10.2.0.2", 1, true)],
        ),
        g(
            G4_31,
            &[("e1", "10.1.0.2", 3, true), ("e2", "10.2.0.2", 1, true)],
        ),
        g(
            G4_21,
            &[("e1", "10.1.0.2", 2, true), ("e2", "10.2.0.2", 1, true)],
        ),
        g(
            G4_DEAD,
            &[("e1", "10.1.0.2", 1, false), ("e2", "10.2.0.2", 1, false)],
        ),
        g(G4_E3, &[("e3", "10.3.0.2", 1, true)]),
        g(
            G4_45,
            &[("e4", "10.4.0.2", 1, true), ("e5", "10.5.0.2", 1, true)],
        ),
        g(G4_DEV, &[("e1", "", 1, true), ("e2", "", 1, true)]),
        g(
            G4_V6GW,
            &[
                ("e1", "2001:db8:1::2", 1, true),
                ("e2", "2001:db8:2::2", 1, true),
            ],
        ),
        // The unusable nexthop in the middle, with the largest weight.
        g(
            G4_MIX,
            &[
                ("e1", "10.1.0.2", 1, true),
                ("e2", "10.2.0.2", 5, false),
                ("e4", "10.4.0.2", 1, true),
            ],
        ),
        GroupSpec {
            id: G4_32,
            nhs: (0..32u16)
                .map(|i| {
                    if i % 2 == 0 {
                        ("e1", "10.1.0.2", i % 5 + 1, true)
                    } else {
                        ("e2", "10.2.0.2", i % 3 + 1, true)
                    }
                })
                .collect(),
        },
        g(
            G6_11,
            &[
                ("e1", "2001:db8:1::2", 1, true),
                ("e2", "2001:db8:2::2", 1, true),
            ],
        ),
        g(
            G6_31,
            &[
                ("e1", "2001:db8:1::2", 3, true),
                ("e2", "2001:db8:2::2", 1, true),
            ],
        ),
        g(
            G6_DEAD,
            &[
                ("e1", "2001:db8:1::2", 1, false),
                ("e2", "2001:db8:2::2", 1, false),
            ],
        ),
        g(G6_E3, &[("e3", "2001:db8:3::2", 1, true)]),
        g(G6_DEV, &[("e1", "", 1, true), ("e2", "", 1, true)]),
        g(G4_BADGW, &[("e1", "10.2.0.2", 1, true)]),
        g(
            G4_RES,
            &[
                ("e1", "10.1.0.2", 1, true),
                ("e2", "10.2.0.2", 1, true),
                ("e4", "10.4.0.2", 1, true),
                ("e5", "10.5.0.2", 1, true),
            ],
        ),
        g(
            G4_RES_DEAD,
            &[
                ("e1", "10.1.0.2", 1, true),
                ("e2", "10.2.0.2", 1, false),
                ("e4", "10.4.0.2", 1, true),
                ("e5", "10.5.0.2", 1, true),
            ],
        ),
    ]
}

/// A managed route: prefix (the LPM trie key and the route's identity), algorithm, group.
struct RouteSpec {
    prefix: &'static str,
    algo: u8,
    group: u32,
}

const fn rt(prefix: &'static str, algo: u8, group: u32) -> RouteSpec {
    RouteSpec {
        prefix,
        algo,
        group,
    }
}

const ROUTES: &[RouteSpec] = &[
    // The whole /24 (local .200, blackhole .240/28, unreachable .224/28 fall in it).
    rt("198.51.100.0/24", ALGO_L4_HASH, G4_11),
    rt("198.51.100.0/28", ALGO_L3_HASH, G4_11),
    rt("198.51.100.16/28", ALGO_L4_HASH, G4_11),
    rt("198.51.100.32/28", ALGO_PER_PACKET, G4_11),
    rt("198.51.100.48/28", ALGO_DRR, G4_11),
    rt("198.51.100.64/28", ALGO_RANDOM, G4_31),
    rt("198.51.100.80/28", ALGO_WRANDOM, G4_31),
    rt("198.51.100.96/28", ALGO_L3_HASH, G4_MISSING),
    rt("198.51.100.112/28", ALGO_L3_HASH, G4_DEAD),
    rt("198.51.100.128/28", ALGO_DRR, G4_21),
    rt("203.0.113.0/24", ALGO_L3_HASH, G4_E3),
    rt("192.0.2.0/25", ALGO_DRR, G4_45),
    rt("192.0.2.128/25", ALGO_L3_HASH, G4_45),
    rt("2001:db8:100::/56", ALGO_L4_HASH, G6_11),
    rt("2001:db8:100::/64", ALGO_L3_HASH, G6_11),
    rt("2001:db8:100:1::/64", ALGO_L4_HASH, G6_11),
    rt("2001:db8:100:2::/64", ALGO_PER_PACKET, G6_31),
    rt("2001:db8:100:3::/64", ALGO_DRR, G6_11),
    rt("2001:db8:100:4::/64", ALGO_RANDOM, G6_31),
    rt("2001:db8:100:5::/64", ALGO_WRANDOM, G6_31),
    rt("2001:db8:100:6::/64", ALGO_L3_HASH, G6_MISSING),
    rt("2001:db8:100:7::/64", ALGO_L3_HASH, G6_DEAD),
    rt("2001:db8:300::/64", ALGO_L3_HASH, G6_E3),
    rt("198.18.0.0/24", ALGO_L3_HASH, G4_DEV),
    rt("2001:db8:200::/64", ALGO_L3_HASH, G6_DEV),
    rt("198.19.0.0/24", ALGO_L3_HASH, G4_V6GW),
    rt("100.65.0.0/24", ALGO_L3_HASH, G4_MIX),
    rt("100.65.1.0/24", ALGO_L4_HASH, G4_MIX),
    rt("100.65.2.0/24", ALGO_PER_PACKET, G4_MIX),
    rt("100.65.3.0/24", ALGO_DRR, G4_MIX),
    rt("100.65.4.0/24", ALGO_RANDOM, G4_MIX),
    rt("100.65.5.0/24", ALGO_WRANDOM, G4_MIX),
    rt("100.65.32.0/24", ALGO_L3_HASH, G4_32),
    rt("100.65.33.0/24", ALGO_PER_PACKET, G4_32),
    rt("100.65.40.0/24", ALGO_L3_HASH, G4_BADGW),
    rt("100.65.50.0/24", DP_ALGO_L4_RES, G4_RES),
    rt("100.65.51.0/24", DP_ALGO_L3_RES, G4_RES),
    rt("100.65.52.0/24", DP_ALGO_L4_RES, G4_RES_DEAD),
    // resilient, but no table written: hash-threshold
    rt("100.65.53.0/24", DP_ALGO_L4_RES, G4_RES),
];

// ---- namespace ----------------------------------------------------------------------------

/// Devices, addresses, neighbours, routes and sysctls of the module doc's topology in `ns`.
fn build_topology(ns: &Netns) {
    let mut b = String::from("link set lo up\n");
    for d in DEVS {
        let m = hexmac(&d.mac);
        b += &format!(
            "link add {n} address {m} mtu {mtu} type veth peer name {n}p mtu {mtu}\n\
             link set {n} up\nlink set {n}p up\n",
            n = d.name,
            mtu = d.mtu
        );
    }
    for d in DEVS {
        for a in d.addrs {
            let nodad = if a.contains(':') { " nodad" } else { "" };
            b += &format!("addr add {a} dev {}{nodad}\n", d.name);
        }
        if let Some(m) = d.gw_mac {
            for gw in d.gws {
                b += &format!(
                    "neigh add {gw} lladdr {} dev {} nud permanent\n",
                    hexmac(&m),
                    d.name
                );
            }
        }
    }
    for l in KERNEL_ROUTES {
        b += l;
        b.push('\n');
    }
    try_output_with_input(
        Command::new("ip").args(["-n", ns.name(), "-batch", "-"]),
        &b,
    )
    .unwrap_or_else(|e| panic!("{e}\ninput:\n{b}"));
    let mut sysctl = Command::new("ip");
    sysctl.args(["netns", "exec", ns.name(), "sysctl", "-q", "-w"]);
    sysctl.args(SYSCTLS);
    try_output(&mut sysctl).unwrap_or_else(|e| panic!("{e}"));
}

/// Build a namespace, then run `f` on a thread inside it with the dataplane loaded and its
/// maps filled (see the module doc). The namespace is deleted afterwards, also on panic. The
/// XDP program is loaded as for a NIC (`mpt_local_stacks` 0: no checksum checks); see
/// [`with_fixture_local_stacks`].
fn with_fixture<F>(f: F)
where
    F: FnOnce(&Fx<'_>) + Send + 'static,
{
    fixture(false, f);
}

/// Before 5.12 the verifier refuses the dataplane (its global functions take pointers):
/// `dataplane attach` refuses there, naming the release; nothing to run then. True where so,
/// after checking that the load is indeed refused.
fn refused_here() -> bool {
    static REFUSED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *REFUSED.get_or_init(|| {
        if mpt_bpf::features::global_func_args() {
            return false;
        }
        let mut storage = MaybeUninit::<OpenObject>::uninit();
        let open = DpSkelBuilder::default()
            .open(&mut storage)
            .expect("open the dp skeleton");
        assert!(
            open.load().is_err(),
            "the probe said no, the verifier said yes"
        );
        true
    })
}

/// [`with_fixture`] with the XDP program loaded as for a tun, which carries local stacks'
/// packets: TCP/UDP checksums verified, what cannot be verified handed up (l4-csum). (On a veth
/// the program asks the skb behind the frame instead, which a test run does not have: the
/// root tests' TCP through native XDP on veth covers that.)
fn with_fixture_local_stacks<F>(f: F)
where
    F: FnOnce(&Fx<'_>) + Send + 'static,
{
    fixture(true, f);
}

fn fixture<F>(local_stacks: bool, f: F)
where
    F: FnOnce(&Fx<'_>) + Send + 'static,
{
    if refused_here() {
        return;
    }
    require_root();
    let ns = Netns::new("fx");
    build_topology(&ns);
    // Per-CPU state (per-packet counter, DRR deficit) must stay on one CPU.
    ns.run_in_thread(true, move || {
        let mut storage = MaybeUninit::<OpenObject>::uninit();
        let mut open = DpSkelBuilder::default()
            .open(&mut storage)
            .expect("open the dp skeleton");
        // XDP attached to in0, as `dataplane attach` would load it: frames arriving on
        // in0 must be sent to in0's own address.
        {
            let ro = open.maps.rodata_data.as_deref_mut().expect("dp rodata");
            ro.mpt_if_index = nix::net::if_::if_nametoindex("in0").expect("ifindex of in0");
            ro.mpt_if_mac = IN0_MAC;
            ro.mpt_local_stacks = u32::from(local_stacks);
            ro.mpt_view_flags = mpt_bpf::mproute::dataplane::view_flags();
        }
        let skel = open.load().expect("load the dp skeleton (verifier)");
        let fx = Fx::new(skel);
        f(&fx);
    });
}

// ---- the loaded dataplane ------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hook {
    Xdp,
    Tc,
}

const HOOKS: [Hook; 2] = [Hook::Xdp, Hook::Tc];

impl Hook {
    const fn pass(self) -> u32 {
        match self {
            Hook::Xdp => XDP_PASS,
            Hook::Tc => TCX_NEXT,
        }
    }
    const fn redirect(self) -> u32 {
        match self {
            Hook::Xdp => XDP_REDIRECT,
            Hook::Tc => TC_ACT_REDIRECT,
        }
    }
}

/// The test run's context beyond the packet.
#[derive(Clone, Copy, Debug)]
struct Ctx {
    ingress: &'static str,
    /// tc only: `gso_segs`, `gso_size` of the skb.
    gso: Option<(u32, u32)>,
}

const IN0: Ctx = Ctx {
    ingress: "in0",
    gso: None,
};

/// What a test run gave back.
#[derive(Debug)]
struct Out {
    rc: u32,
    data: Vec<u8>,
}

/// What a fixture expects of one hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// To the stack, untouched, this reason counted.
    Pass(Reason),
    /// Redirected with the MACs rewritten by the dataplane.
    Redirect,
    /// tc: redirected with bpf_redirect_neigh (TTL decremented, MACs left to the kernel).
    RedirectNeigh,
    /// The kernel refuses the test run's input (EINVAL) before the program runs: see
    /// [`kernel_refuses`].
    Refused,
}

/// Inputs BPF_PROG_TEST_RUN itself rejects ([`progrun::kernel_refuses`]). Such frames cannot
/// reach the program through a test run; the VLAN-tagged variants (not checked by the kernel)
/// exercise the same truncations in tc.
fn kernel_refuses(hook: Hook, f: &[u8]) -> bool {
    progrun::kernel_refuses(hook == Hook::Tc, f)
}

type Reasons = [u64; R_MAX as usize];

struct Fx<'obj> {
    skel: DpSkel<'obj>,
    ifindex: BTreeMap<&'static str, u32>,
    groups: HashMap<u32, MptGroup>,
    routes: HashMap<&'static str, MptRouteKey>,
}

fn parse_prefix(p: &str) -> (IpAddr, u8) {
    let (a, l) = p.split_once('/').expect("prefix with a length");
    (
        a.parse().expect("prefix address"),
        l.parse().expect("prefix length"),
    )
}

impl<'obj> Fx<'obj> {
    /// Ifindexes (of the thread's namespace), then meta, groups and routes.
    fn new(skel: DpSkel<'obj>) -> Fx<'obj> {
        let mut ifindex = BTreeMap::new();
        for d in DEVS {
            let i = nix::net::if_::if_nametoindex(d.name)
                .unwrap_or_else(|e| panic!("ifindex of {}: {e}", d.name));
            ifindex.insert(d.name, i);
        }
        let mut fx = Fx {
            skel,
            ifindex,
            groups: HashMap::new(),
            routes: HashMap::new(),
        };
        let meta = MptMeta::new(SEED, 0);
        fx.skel
            .maps
            .mpt_meta
            .update(&0u32.to_ne_bytes(), meta.as_bytes(), MapFlags::ANY)
            .expect("write mpt_meta");
        for g in groups() {
            let nhs: Vec<DpNexthop> = g
                .nhs
                .iter()
                .map(|(dev, gw, weight, usable)| DpNexthop {
                    ifindex: fx.ifx(dev),
                    gateway: (!gw.is_empty()).then(|| gw.parse().expect("gateway")),
                    weight: *weight,
                    flags: 0,
                    usable: *usable,
                })
                .collect();
            let group = build_group(&nhs);
            fx.skel
                .maps
                .mpt_groups_in
                .update(&g.id.to_ne_bytes(), group.as_bytes(), MapFlags::ANY)
                .expect("write mpt_groups");
            fx.groups.insert(g.id, group);
        }
        for r in ROUTES {
            let (addr, len) = parse_prefix(r.prefix);
            let mut dst_be = [0u8; 16];
            let family = match addr {
                IpAddr::V4(a) => {
                    dst_be[..4].copy_from_slice(&a.octets());
                    AF_INET
                }
                IpAddr::V6(a) => {
                    dst_be = a.octets();
                    AF_INET6
                }
            };
            let id = MptRouteKey {
                family,
                dst_len: len,
                reserved: 0,
                table: TABLE,
                // the kernel's metric of the fixture's routes (none given): 0, IPv6 1024
                metric: if family == AF_INET6 { 1024 } else { 0 },
                dst_be,
            };
            let v = MptDpRoute {
                id,
                algo: r.algo,
                flags: 0,
                stats_slot: 0,
                group: r.group,
                ..MptDpRoute::default()
            };
            let res = match addr {
                IpAddr::V4(a) => fx.skel.maps.mpt_lpm4.update(
                    MptLpm4Key::new(TABLE, len, a.octets()).as_bytes(),
                    v.as_bytes(),
                    MapFlags::ANY,
                ),
                IpAddr::V6(a) => fx.skel.maps.mpt_lpm6.update(
                    MptLpm6Key::new(TABLE, len, a.octets()).as_bytes(),
                    v.as_bytes(),
                    MapFlags::ANY,
                ),
            };
            res.unwrap_or_else(|e| panic!("write the LPM entry {}: {e}", r.prefix));
            fx.routes.insert(r.prefix, id);
        }
        fx
    }

    fn ifx(&self, dev: &str) -> u32 {
        *self
            .ifindex
            .get(dev)
            .unwrap_or_else(|| panic!("no device {dev}"))
    }

    fn dev_name(&self, ifindex: u32) -> &'static str {
        self.ifindex
            .iter()
            .find(|(_, i)| **i == ifindex)
            .map(|(n, _)| *n)
            .unwrap_or_else(|| panic!("no device with ifindex {ifindex}"))
    }

    /// One test run.
    fn try_run(&self, hook: Hook, frame: &[u8], ctx: Ctx) -> Result<Out, libbpf_rs::Error> {
        let ingress = self.ifx(ctx.ingress);
        let mut c = match hook {
            Hook::Xdp => xdp_ctx(frame.len(), ingress),
            Hook::Tc => skb_ctx(ingress, ctx.gso),
        };
        let prog = match hook {
            Hook::Xdp => &self.skel.progs.mpt_dp_xdp,
            Hook::Tc => &self.skel.progs.mpt_dp_tc,
        };
        let mut buf = vec![0u8; 8192];
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

    fn run(&self, hook: Hook, frame: &[u8], ctx: Ctx, what: &str) -> Out {
        self.try_run(hook, frame, ctx).unwrap_or_else(|e| {
            panic!(
                "{what} [{hook:?}]: BPF_PROG_TEST_RUN failed: {e}; frame {}",
                hex(frame)
            )
        })
    }

    /// `mpt_reasons`, summed over CPUs.
    fn reasons(&self) -> Reasons {
        let mut out = [0u64; R_MAX as usize];
        for (i, slot) in out.iter_mut().enumerate() {
            let v = self
                .skel
                .maps
                .mpt_reasons
                .lookup_percpu(&(i as u32).to_ne_bytes(), MapFlags::ANY)
                .expect("read mpt_reasons")
                .expect("mpt_reasons entry");
            *slot = sum_percpu_u64(&v).expect("8-byte per-CPU values");
        }
        out
    }

    /// A route's counters, summed over CPUs: its `mpt_stats` entry plus its counter slot.
    fn stats(&self, prefix: &str) -> MptRouteStats {
        let slot = self.lpm_entry(prefix).stats_slot;
        let (a, b) = (self.hashed_stats(prefix), self.slot_stats(slot));
        MptRouteStats::sum_percpu(&[a.as_bytes().to_vec(), b.as_bytes().to_vec()])
            .expect("two values")
    }

    /// `mpt_stats` of a route (zero if absent), summed over CPUs.
    fn hashed_stats(&self, prefix: &str) -> MptRouteStats {
        let key = self.route_key(prefix);
        self.skel
            .maps
            .mpt_stats_in
            .lookup_percpu(key.as_bytes(), MapFlags::ANY)
            .expect("read mpt_stats")
            .map(|v| MptRouteStats::sum_percpu(&v).expect("mpt_stats value size"))
            .unwrap_or_default()
    }

    /// `mpt_slot_stats[slot]` summed over CPUs (zero for slot 0, which no route uses).
    fn slot_stats(&self, slot: u16) -> MptRouteStats {
        if slot == 0 {
            return MptRouteStats::default();
        }
        self.skel
            .maps
            .mpt_slot_stats
            .lookup_percpu(&u32::from(slot).to_ne_bytes(), MapFlags::ANY)
            .expect("read mpt_slot_stats")
            .map(|v| MptRouteStats::sum_percpu(&v).expect("mpt_slot_stats value size"))
            .unwrap_or_default()
    }

    fn route_key(&self, prefix: &str) -> MptRouteKey {
        *self
            .routes
            .get(prefix)
            .unwrap_or_else(|| panic!("no managed route {prefix}"))
    }

    fn group(&self, id: u32) -> &MptGroup {
        self.groups
            .get(&id)
            .unwrap_or_else(|| panic!("no group {id}"))
    }

    /// The device the hash algorithms must pick for `key`: mpt_model's flow hash with our seed,
    /// then hash-threshold over the group's bounds.
    fn predict(&self, group: u32, key: &FlowKey, l4: bool) -> &'static str {
        let g = self.group(group);
        let bounds: Vec<i32> = g.nexthops().iter().map(|n| n.upper_bound).collect();
        let i = select(flow_hash(key, l4, SEED), &bounds).expect("a usable nexthop");
        self.dev_name(g.nh[i].ifindex)
    }

    /// The egress device a rewritten frame's MACs name: source MAC = the device's, destination
    /// MAC = its gateways' neighbour MAC.
    fn egress_of(&self, out: &[u8], what: &str, hook: Hook) -> &'static str {
        let (dst, src) = (&out[0..6], &out[6..12]);
        let d = DEVS.iter().find(|d| d.mac == src).unwrap_or_else(|| {
            panic!(
                "{what} [{hook:?}]: source MAC {} is no device's",
                hexmac(src)
            )
        });
        assert_eq!(
            Some(dst),
            d.gw_mac.as_ref().map(|m| &m[..]),
            "{what} [{hook:?}]: destination MAC {} is not the neighbour MAC of {}'s gateways",
            hexmac(dst),
            d.name
        );
        d.name
    }

    /// Run and check against `expect`; returns the egress device for a redirect.
    fn check(
        &self,
        hook: Hook,
        frame: &[u8],
        ctx: Ctx,
        expect: Expect,
        what: &str,
    ) -> Option<&'static str> {
        let before = self.reasons();
        assert_eq!(
            expect == Expect::Refused,
            kernel_refuses(hook, frame),
            "{what} [{hook:?}]: the fixture and kernel_refuses() disagree"
        );
        if expect == Expect::Refused {
            match self.try_run(hook, frame, ctx) {
                Err(e) if e.kind() == libbpf_rs::ErrorKind::InvalidInput => {}
                other => {
                    panic!("{what} [{hook:?}]: expected EINVAL from the kernel, got {other:?}")
                }
            }
            assert_eq!(
                fmt_delta(&reason_delta(&before, &self.reasons())),
                "(none)",
                "{what} [{hook:?}]: refused input counted"
            );
            return None;
        }
        let out = self.run(hook, frame, ctx, what);
        let after = self.reasons();
        let delta = reason_delta(&before, &after);
        let want_rc = match expect {
            Expect::Pass(_) => hook.pass(),
            Expect::Redirect | Expect::RedirectNeigh | Expect::Refused => hook.redirect(),
        };
        let want_reason = match expect {
            Expect::Pass(r) => r,
            Expect::Redirect | Expect::RedirectNeigh | Expect::Refused => Reason::Redirected,
        };
        assert!(
            out.rc == want_rc && delta == [(want_reason, 1)],
            "{what} [{hook:?}]: expected {expect:?} (rc {want_rc:#x}, counter {want_reason}), \
             got rc {:#x} with counters {}; frame ({} bytes) {}",
            out.rc,
            fmt_delta(&delta),
            frame.len(),
            hex(frame)
        );
        match expect {
            Expect::Pass(_) => {
                assert!(
                    out.data == frame,
                    "{what} [{hook:?}]: passed packet changed:\n in  {}\n out {}",
                    hex(frame),
                    hex(&out.data)
                );
                None
            }
            Expect::Redirect => {
                check_forwarded(frame, &out.data, true, what, hook);
                Some(self.egress_of(&out.data, what, hook))
            }
            Expect::RedirectNeigh => {
                check_forwarded(frame, &out.data, false, what, hook);
                None
            }
            Expect::Refused => None,
        }
    }

    fn fwd(&self, hook: Hook, frame: &[u8], what: &str) -> &'static str {
        self.check(hook, frame, IN0, Expect::Redirect, what)
            .expect("a redirect names its egress")
    }
}

fn reason_delta(before: &Reasons, after: &Reasons) -> Vec<(Reason, u64)> {
    Reason::ALL
        .iter()
        .zip(before.iter().zip(after.iter()))
        .filter(|(_, (b, a))| a != b)
        .map(|(r, (b, a))| (*r, a.wrapping_sub(*b)))
        .collect()
}

fn fmt_delta(d: &[(Reason, u64)]) -> String {
    if d.is_empty() {
        return "(none)".into();
    }
    d.iter()
        .map(|(r, n)| format!("{r}+{n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A forwarded frame is the input (without its VLAN tag, if any) with TTL / hop limit one lower,
/// the IPv4 header checksum still valid and, with `macs`, new MACs; every other byte equal.
fn check_forwarded(input: &[u8], out: &[u8], macs: bool, what: &str, hook: Hook) {
    let mut plain = input.to_vec();
    let et = u16::from_be_bytes([input[12], input[13]]);
    if et == ETH_P_8021Q || et == ETH_P_8021AD {
        plain.drain(12..16);
    }
    let ctx = || format!("{what} [{hook:?}]:\n in  {}\n out {}", hex(input), hex(out));
    assert_eq!(out.len(), plain.len(), "{}: length", ctx());
    let et = u16::from_be_bytes([plain[12], plain[13]]);
    assert_eq!(
        u16::from_be_bytes([out[12], out[13]]),
        et,
        "{}: ethertype",
        ctx()
    );
    let mut same: Vec<usize> = (12..plain.len()).collect();
    if !macs {
        same.extend(0..12);
    }
    match et {
        ETH_P_IP => {
            let ttl = 14 + 8;
            assert_eq!(out[ttl], plain[ttl].wrapping_sub(1), "{}: TTL", ctx());
            let hl = usize::from(out[14] & 0x0f) * 4;
            assert!(
                csum_ok(&out[14..14 + hl]),
                "{}: IPv4 header checksum invalid",
                ctx()
            );
            same.retain(|i| ![ttl, 24, 25].contains(i));
        }
        ETH_P_IPV6 => {
            let hop = 14 + 7;
            assert_eq!(out[hop], plain[hop].wrapping_sub(1), "{}: hop limit", ctx());
            same.retain(|i| *i != hop);
        }
        other => panic!("{}: forwarded ethertype {other:#06x}", ctx()),
    }
    for i in same {
        assert_eq!(out[i], plain[i], "{}: byte {i} changed", ctx());
    }
}

// ---- packets ------------------------------------------------------------------------------

/// An Ethernet frame from the sender to in0.
fn eth(ethertype: u16, l3: &[u8]) -> Vec<u8> {
    packet::eth(IN0_MAC, SENDER_MAC, ethertype, l3)
}

/// A UDP frame of either family (by the source address's syntax), `n` payload bytes.
fn udp_frame(src: &str, dst: &str, sport: u16, dport: u16, n: usize) -> Vec<u8> {
    if src.contains(':') {
        Ip6::new(src, dst, IPPROTO_UDP, udp(sport, dport, n)).frame()
    } else {
        Ip4::new(src, dst, IPPROTO_UDP, udp(sport, dport, n)).frame()
    }
}

fn key(src: &str, dst: &str, proto: u8, sport: u16, dport: u16) -> FlowKey {
    FlowKey::from_addrs(
        src.parse().expect("src"),
        dst.parse().expect("dst"),
        proto,
        sport,
        dport,
    )
    .expect("same family")
}

fn arp_request() -> Vec<u8> {
    let mut a = vec![0, 1, 8, 0, 6, 4, 0, 1];
    a.extend_from_slice(&SENDER_MAC);
    a.extend_from_slice(&[10, 0, 0, 10]);
    a.extend_from_slice(&[0; 6]);
    a.extend_from_slice(&[10, 0, 0, 1]);
    let mut f = eth(ETH_P_ARP, &a);
    f[..6].copy_from_slice(&[0xff; 6]);
    f
}

// ---- fixtures: algorithms -----------------------------------------------------------------

/// Addresses of one family for the algorithm fixtures.
struct Fam {
    name: &'static str,
    src: fn(u32) -> String,
    l3_dst: fn(u32) -> String,
    l3: (&'static str, u32),
    l4_dst: &'static str,
    l4: (&'static str, u32),
    pp_dst: &'static str,
    pp: (&'static str, u32),
    drr_dst: &'static str,
    drr: (&'static str, u32),
    rnd_dst: &'static str,
    rnd: (&'static str, u32),
    wrnd_dst: &'static str,
    wrnd: (&'static str, u32),
}

const V4: Fam = Fam {
    name: "IPv4",
    src: |i| format!("10.0.0.{}", 10 + i % 200),
    l3_dst: |i| format!("198.51.100.{}", 1 + i % 14),
    l3: ("198.51.100.0/28", G4_11),
    l4_dst: "198.51.100.20",
    l4: ("198.51.100.16/28", G4_11),
    pp_dst: "198.51.100.40",
    pp: ("198.51.100.32/28", G4_11),
    drr_dst: "198.51.100.50",
    drr: ("198.51.100.48/28", G4_11),
    rnd_dst: "198.51.100.70",
    rnd: ("198.51.100.64/28", G4_31),
    wrnd_dst: "198.51.100.90",
    wrnd: ("198.51.100.80/28", G4_31),
};

const V6: Fam = Fam {
    name: "IPv6",
    src: |i| format!("2001:db8:ff::{:x}", 0x10 + i),
    l3_dst: |i| format!("2001:db8:100::{:x}", 1 + i * 0x111),
    l3: ("2001:db8:100::/64", G6_11),
    l4_dst: "2001:db8:100:1::20",
    l4: ("2001:db8:100:1::/64", G6_11),
    pp_dst: "2001:db8:100:2::5",
    pp: ("2001:db8:100:2::/64", G6_31),
    drr_dst: "2001:db8:100:3::5",
    drr: ("2001:db8:100:3::/64", G6_11),
    rnd_dst: "2001:db8:100:4::5",
    rnd: ("2001:db8:100:4::/64", G6_31),
    wrnd_dst: "2001:db8:100:5::5",
    wrnd: ("2001:db8:100:5::/64", G6_31),
};

/// Sends `frames` through `hook`, all must be redirected; checks the route's counters moved by
/// exactly what was sent, per nexthop. Returns the egress devices in order.
fn fwd_batch(
    fx: &Fx<'_>,
    hook: Hook,
    route: (&str, u32),
    frames: &[Vec<u8>],
    what: &str,
) -> Vec<&'static str> {
    let before = fx.stats(route.0);
    let devs: Vec<&'static str> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| fx.fwd(hook, f, &format!("{what} #{i}")))
        .collect();
    let after = fx.stats(route.0);
    let bytes: u64 = frames.iter().map(|f| f.len() as u64).sum();
    assert_eq!(
        (
            after.route.packets - before.route.packets,
            after.route.bytes - before.route.bytes
        ),
        (frames.len() as u64, bytes),
        "{what} [{hook:?}]: mpt_stats of {} (route)",
        route.0
    );
    // Per device (a device may carry several nexthops of the group): the nexthop counters of
    // its nexthops add up to what left through it.
    let mut by_dev: BTreeMap<&'static str, (u64, u64, Vec<usize>)> = BTreeMap::new();
    for (i, nh) in fx.group(route.1).nexthops().iter().enumerate() {
        let e = by_dev.entry(fx.dev_name(nh.ifindex)).or_default();
        e.0 += after.nh[i].packets - before.nh[i].packets;
        e.1 += after.nh[i].bytes - before.nh[i].bytes;
        e.2.push(i);
    }
    for (dev, (packets, bytes, idx)) in by_dev {
        let n = devs.iter().filter(|d| **d == dev).count() as u64;
        let b: u64 = frames
            .iter()
            .zip(&devs)
            .filter(|(_, d)| **d == dev)
            .map(|(f, _)| f.len() as u64)
            .sum();
        assert_eq!(
            (packets, bytes),
            (n, b),
            "{what} [{hook:?}]: mpt_stats of {} nexthops {idx:?} ({dev})",
            route.0
        );
    }
    devs
}

fn count(devs: &[&str], dev: &str) -> usize {
    devs.iter().filter(|d| **d == dev).count()
}

fn both_used(devs: &[&str], what: &str) {
    assert!(
        count(devs, "e1") > 0 && count(devs, "e2") > 0,
        "{what}: expected both nexthops among the choices, got {devs:?}"
    );
}

/// Weighted round robin: every window of total_weight consecutive choices holds each device
/// exactly as often as the weights of its usable nexthops add up to.
fn check_wrr_windows(fx: &Fx<'_>, group: u32, got: &[&'static str], what: &str) {
    let g = fx.group(group);
    let mut want: BTreeMap<&'static str, usize> = BTreeMap::new();
    for nh in g.nexthops() {
        let e = want.entry(fx.dev_name(nh.ifindex)).or_default();
        if nh.upper_bound >= 0 {
            *e += usize::from(nh.weight);
        }
    }
    let total = g.total_weight as usize;
    assert!(got.len() >= 2 * total, "{what}: too few packets");
    for w in got.windows(total) {
        for (dev, n) in &want {
            assert_eq!(
                count(w, dev),
                *n,
                "{what}: window {w:?} (weights of {dev}: {n}); all: {got:?}"
            );
        }
    }
}

fn algorithms(fx: &Fx<'_>, fam: &Fam) {
    let f = fam.name;
    for hook in HOOKS {
        // l3-hash: 48 flows over varied addresses and ports; the model predicts every choice.
        let mut frames = Vec::new();
        let mut want = Vec::new();
        for i in 0..48u32 {
            let (src, dst) = ((fam.src)(i), (fam.l3_dst)(i));
            let (sp, dp) = (1000 + i as u16 * 7, 53 + i as u16);
            frames.push(udp_frame(&src, &dst, sp, dp, 18));
            want.push(fx.predict(fam.l3.1, &key(&src, &dst, IPPROTO_UDP, sp, dp), false));
        }
        let got = fwd_batch(fx, hook, fam.l3, &frames, &format!("{f} l3-hash"));
        assert_eq!(got, want, "{f} l3-hash [{hook:?}]: choices vs the model");
        both_used(&got, &format!("{f} l3-hash [{hook:?}]"));

        // l4-hash: one address pair, 48 port pairs, UDP and TCP.
        let src = (fam.src)(0);
        let dst = fam.l4_dst;
        let mut frames = Vec::new();
        let mut want = Vec::new();
        for i in 0..48u16 {
            let (sp, dp) = (20_000 + i * 13, 443 - i % 3);
            let proto = if i % 2 == 0 { IPPROTO_UDP } else { IPPROTO_TCP };
            frames.push(match (proto, src.contains(':')) {
                (IPPROTO_UDP, _) => udp_frame(&src, dst, sp, dp, 18),
                (_, false) => Ip4::new(&src, dst, proto, tcp(sp, dp)).frame(),
                (_, true) => Ip6::new(&src, dst, proto, tcp(sp, dp)).frame(),
            });
            want.push(fx.predict(fam.l4.1, &key(&src, dst, proto, sp, dp), true));
        }
        let got = fwd_batch(fx, hook, fam.l4, &frames, &format!("{f} l4-hash"));
        assert_eq!(got, want, "{f} l4-hash [{hook:?}]: choices vs the model");
        both_used(&got, &format!("{f} l4-hash [{hook:?}]"));

        // per-packet: one flow; every window of total_weight consecutive packets holds each
        // nexthop exactly weight times (with 1:1, strict alternation).
        let total = fx.group(fam.pp.1).total_weight as usize;
        let frames: Vec<Vec<u8>> = (0..10 * total)
            .map(|_| udp_frame(&src, fam.pp_dst, 5000, 5001, 18))
            .collect();
        let got = fwd_batch(fx, hook, fam.pp, &frames, &format!("{f} per-packet"));
        check_wrr_windows(fx, fam.pp.1, &got, &format!("{f} per-packet [{hook:?}]"));

        // drr (1:1, small packets): all redirected, both used, turns of at most one quantum,
        // byte counts within one quantum plus one packet of each other.
        let frames: Vec<Vec<u8>> = (0..200)
            .map(|_| udp_frame(&src, fam.drr_dst, 5000, 5002, 100))
            .collect();
        let len = frames[0].len();
        let got = fwd_batch(fx, hook, fam.drr, &frames, &format!("{f} drr"));
        both_used(&got, &format!("{f} drr [{hook:?}]"));
        let longest = got
            .chunk_by(|a, b| a == b)
            .map(<[&str]>::len)
            .max()
            .unwrap_or(0);
        assert!(
            longest as u64 <= DRR_QUANTUM / len as u64 + 1,
            "{f} drr [{hook:?}]: a turn of {longest} packets of {len} bytes: {got:?}"
        );
        let (b1, b2) = (
            (count(&got, "e1") * len) as i64,
            (count(&got, "e2") * len) as i64,
        );
        assert!(
            (b1 - b2).unsigned_abs() <= DRR_QUANTUM + len as u64,
            "{f} drr [{hook:?}]: bytes e1 {b1} e2 {b2}"
        );

        // random (3:1 group, weights ignored): ~uniform. 400 draws, 6+ standard deviations.
        let frames: Vec<Vec<u8>> = (0..400)
            .map(|_| udp_frame(&src, fam.rnd_dst, 5000, 5003, 18))
            .collect();
        let got = fwd_batch(fx, hook, fam.rnd, &frames, &format!("{f} random"));
        let n1 = count(&got, "e1");
        assert!(
            (140..=260).contains(&n1),
            "{f} random [{hook:?}]: e1 chosen {n1} of 400 times (uniform: ~200)"
        );

        // wrandom (3:1): ~3/4 on e1.
        let frames: Vec<Vec<u8>> = (0..400)
            .map(|_| udp_frame(&src, fam.wrnd_dst, 5000, 5004, 18))
            .collect();
        let got = fwd_batch(fx, hook, fam.wrnd, &frames, &format!("{f} wrandom"));
        let n1 = count(&got, "e1");
        assert!(
            (240..=360).contains(&n1),
            "{f} wrandom [{hook:?}]: e1 chosen {n1} of 400 times (weight 3:1: ~300)"
        );
    }
}

/// Every algorithm, with a managed IPv4 and an IPv6 route, redirects through both hooks; the
/// hash algorithms choose as mpt_model predicts, per-packet cycles in weight proportion, DRR
/// shares bytes evenly, random ignores weights and wrandom follows them; mpt_stats agrees.
#[test]
fn every_algorithm_redirects() {
    with_fixture(|fx| {
        algorithms(fx, &V4);
        algorithms(fx, &V6);
    });
}

/// l4-hash details: ICMP (not an l4 protocol) hashes l3; every fragment, the first one too,
/// hashes l3 (mpt_model::hash's documented parser contract, as the kernel's flow dissection).
#[test]
fn l4_hash_fragments_and_non_l4() {
    with_fixture(|fx| {
        let (src, dst) = ("10.0.0.10", "198.51.100.20");
        for hook in HOOKS {
            for i in 0..24u16 {
                let s = format!("10.0.0.{}", 10 + i);
                let echo = Ip4::new(&s, dst, IPPROTO_ICMP, vec![8, 0, 0, 0, 0, 1, 0, 1]).frame();
                let want = fx.predict(G4_11, &key(&s, dst, IPPROTO_ICMP, 0, 0), false);
                assert_eq!(fx.fwd(hook, &echo, "ICMP echo on l4-hash"), want);

                let sp = 30_000 + i * 31;
                let first = Ip4::new(src, dst, IPPROTO_UDP, udp(sp, 53, 40))
                    .frag(MF)
                    .frame();
                // no ports for the first fragment either (as the kernel's flow dissection):
                // a datagram's fragments stay on one nexthop
                let want = fx.predict(G4_11, &key(src, dst, IPPROTO_UDP, 0, 0), false);
                assert_eq!(fx.fwd(hook, &first, "first fragment on l4-hash"), want);

                let later = Ip4::new(&s, dst, IPPROTO_UDP, vec![0xcd; 24])
                    .frag(MF | 6)
                    .frame();
                let want = fx.predict(G4_11, &key(&s, dst, IPPROTO_UDP, 0, 0), false);
                assert_eq!(fx.fwd(hook, &later, "non-first fragment on l4-hash"), want);
            }
        }
    });
}

// ---- fixtures: pass reasons ---------------------------------------------------------------

struct Case {
    what: &'static str,
    frame: Vec<u8>,
    ctx: Ctx,
    xdp: Expect,
    tc: Expect,
}

/// To the stack for reason `r` through both hooks (tc: unless the kernel refuses the input, see
/// [`kernel_refuses`]).
fn pass(what: &'static str, frame: Vec<u8>, r: Reason) -> Case {
    let tc = if kernel_refuses(Hook::Tc, &frame) {
        Expect::Refused
    } else {
        Expect::Pass(r)
    };
    Case {
        what,
        frame,
        ctx: IN0,
        xdp: Expect::Pass(r),
        tc,
    }
}

/// Redirected through both hooks.
fn fwd_case(what: &'static str, frame: Vec<u8>) -> Case {
    Case {
        what,
        frame,
        ctx: IN0,
        xdp: Expect::Redirect,
        tc: Expect::Redirect,
    }
}

/// Every reason to hand a packet to the stack, through both hooks: return code, packet
/// unchanged, the one counter.
#[test]
fn pass_reasons() {
    let s4 = "10.0.0.10";
    let s6 = "2001:db8:ff::10";
    let u4 = |dst: &str| Ip4::new(s4, dst, IPPROTO_UDP, udp(4000, 53, 18));
    let u6 = |dst: &str| Ip6::new(s6, dst, IPPROTO_UDP, udp(4000, 53, 18));
    let l3_4 = "198.51.100.5";
    let l3_6 = "2001:db8:100::5";
    let v4 = u4(l3_4).frame();
    let v6 = u6(l3_6).frame();
    let vlan = tagged(ETH_P_8021Q, 100, &v4);

    let mut bad_version = v4.clone();
    bad_version[14] = 0x65;
    let mut ihl4 = v4.clone();
    ihl4[14] = 0x44;

    let mut cases = vec![
        pass("not-ip: ARP request", arp_request(), Reason::NotIp),
        pass(
            "not-ip: 802.1Q tag around ARP",
            tagged(ETH_P_8021Q, 7, &arp_request()),
            Reason::NotIp,
        ),
        pass(
            "not-ip: two tags (QinQ) around IPv4",
            tagged(ETH_P_8021AD, 5, &tagged(ETH_P_8021Q, 100, &v4)),
            Reason::NotIp,
        ),
        Case {
            what: "truncated Ethernet header (13 bytes)",
            frame: v4[..13].to_vec(),
            ctx: IN0,
            xdp: Expect::Refused,
            tc: Expect::Refused,
        },
        pass(
            "malformed: 802.1Q tag, IPv4 ethertype, nothing after (18 bytes)",
            vlan[..18].to_vec(),
            Reason::Malformed,
        ),
        pass(
            "malformed: tagged IPv6 header cut at 39 bytes",
            tagged(ETH_P_8021Q, 100, &v6)[..18 + 39].to_vec(),
            Reason::Malformed,
        ),
        pass(
            "malformed: 802.1Q header cut (16 bytes)",
            vlan[..16].to_vec(),
            Reason::Malformed,
        ),
        pass(
            "malformed: Ethernet header only, IPv4 ethertype (14 bytes)",
            v4[..14].to_vec(),
            Reason::Malformed,
        ),
        pass(
            "malformed: IPv4 header cut at 19 bytes",
            v4[..14 + 19].to_vec(),
            Reason::Malformed,
        ),
        pass(
            "malformed: tagged IPv4 header cut at 19 bytes",
            vlan[..18 + 19].to_vec(),
            Reason::Malformed,
        ),
        pass(
            "malformed: IPv6 header cut at 39 bytes",
            v6[..14 + 39].to_vec(),
            Reason::Malformed,
        ),
        pass("malformed: IPv4 ihl 4", ihl4, Reason::Malformed),
        pass(
            "malformed: IPv4 ethertype, version 6",
            bad_version,
            Reason::Malformed,
        ),
        // Outside every managed prefix the router fast path asks the kernel FIB, which has
        // no route either: not forwarded, to the stack (ICMP unreachable is the kernel's).
        pass(
            "fast path: IPv4 outside every managed prefix and every kernel route",
            u4("100.64.0.1").frame(),
            Reason::Local,
        ),
        pass(
            "fast path: IPv6 outside every managed prefix and every kernel route",
            u6("2001:db8:dead::1").frame(),
            Reason::Local,
        ),
        pass("ttl: IPv4 TTL 1", u4(l3_4).ttl(1).frame(), Reason::Ttl),
        pass("ttl: IPv4 TTL 0", u4(l3_4).ttl(0).frame(), Reason::Ttl),
        pass(
            "ttl: IPv6 hop limit 1",
            u6(l3_6).hop(1).frame(),
            Reason::Ttl,
        ),
        pass(
            "ttl: IPv6 hop limit 0",
            u6(l3_6).hop(0).frame(),
            Reason::Ttl,
        ),
        pass(
            "ip-options: IPv4 ihl 6 (four NOPs)",
            u4(l3_4).options(&[1, 1, 1, 1]).frame(),
            Reason::IpOptions,
        ),
        pass(
            "ip-options: IPv4 ihl 15 (router alert, then NOPs)",
            u4(l3_4)
                .options(&{
                    let mut o = [1u8; 40];
                    o[..4].copy_from_slice(&[148, 4, 0, 0]);
                    o
                })
                .frame(),
            Reason::IpOptions,
        ),
        pass(
            "ipv6-ext: hop-by-hop options header",
            Ip6::new(s6, l3_6, 0, {
                let mut p = vec![IPPROTO_UDP, 0, 5, 2, 0, 0, 1, 0];
                p.extend(udp(4000, 53, 18));
                p
            })
            .frame(),
            Reason::Ipv6Ext,
        ),
        pass(
            "ipv6-ext: fragment header",
            Ip6::new(s6, l3_6, 44, {
                let mut p = vec![IPPROTO_UDP, 0, 0, 1, 0, 0, 0, 42];
                p.extend(udp(4000, 53, 18));
                p
            })
            .frame(),
            Reason::Ipv6Ext,
        ),
        pass(
            "local: 198.51.100.200 (on lo) in a managed prefix",
            u4("198.51.100.200").frame(),
            Reason::Local,
        ),
        pass(
            "local: 2001:db8:100:ff::200 (on lo) in a managed prefix",
            u6("2001:db8:100:ff::200").frame(),
            Reason::Local,
        ),
        pass(
            "frag-needed: IPv4 1400 bytes with DF, egress MTU 1280",
            Ip4::new(s4, l3_4, IPPROTO_UDP, udp(4000, 53, 1400 - 28)).frame(),
            Reason::FragNeeded,
        ),
        pass(
            "frag-needed: IPv6 1400 bytes, egress MTU 1280",
            Ip6::new(s6, l3_6, IPPROTO_UDP, udp(4000, 53, 1400 - 48)).frame(),
            Reason::FragNeeded,
        ),
        fwd_case(
            "frag-needed boundary: IPv4 of exactly the egress MTU (1280) is forwarded",
            Ip4::new(s4, l3_4, IPPROTO_UDP, udp(4000, 53, 1280 - 28)).frame(),
        ),
        pass(
            "frag-needed boundary: IPv4 of egress MTU + 1 (1281)",
            Ip4::new(s4, l3_4, IPPROTO_UDP, udp(4000, 53, 1281 - 28)).frame(),
            Reason::FragNeeded,
        ),
        fwd_case(
            "frag-needed boundary: IPv6 of exactly the egress MTU (1280) is forwarded",
            Ip6::new(s6, l3_6, IPPROTO_UDP, udp(4000, 53, 1280 - 48)).frame(),
        ),
        pass(
            "frag-needed boundary: IPv6 of egress MTU + 1 (1281)",
            Ip6::new(s6, l3_6, IPPROTO_UDP, udp(4000, 53, 1281 - 48)).frame(),
            Reason::FragNeeded,
        ),
        Case {
            what: "no-neigh: gateway 10.3.0.2 on e3 has no neighbour entry",
            frame: u4("203.0.113.5").frame(),
            ctx: IN0,
            xdp: Expect::Pass(Reason::NoNeigh),
            tc: Expect::RedirectNeigh,
        },
        Case {
            what: "no-neigh: gateway 2001:db8:3::2 on e3 has no neighbour entry",
            frame: u6("2001:db8:300::5").frame(),
            ctx: IN0,
            xdp: Expect::Pass(Reason::NoNeigh),
            tc: Expect::RedirectNeigh,
        },
        pass(
            "no-nexthop: IPv4 route whose group is missing",
            u4("198.51.100.100").frame(),
            Reason::NoNexthop,
        ),
        pass(
            "no-nexthop: IPv6 route whose group is missing",
            u6("2001:db8:100:6::1").frame(),
            Reason::NoNexthop,
        ),
        pass(
            "no-nexthop: IPv4 group with every nexthop unusable",
            u4("198.51.100.120").frame(),
            Reason::NoNexthop,
        ),
        pass(
            "no-nexthop: IPv6 group with every nexthop unusable",
            u6("2001:db8:100:7::1").frame(),
            Reason::NoNexthop,
        ),
        pass(
            "fib-other: IPv4 blackhole in a managed prefix",
            u4("198.51.100.241").frame(),
            Reason::FibOther,
        ),
        pass(
            "fib-other: IPv4 unreachable in a managed prefix",
            u4("198.51.100.225").frame(),
            Reason::FibOther,
        ),
        pass(
            "fib-other: IPv6 blackhole in a managed prefix",
            u6("2001:db8:100:fe::1").frame(),
            Reason::FibOther,
        ),
    ];
    for (what, frame) in [
        (
            "fwd-disabled: IPv4 on in1 (forwarding=0)",
            Ip4::new("10.0.1.10", l3_4, IPPROTO_UDP, udp(4000, 53, 18)).frame(),
        ),
        (
            "fwd-disabled: IPv6 on in1 (forwarding=0)",
            Ip6::new("2001:db8:fe::10", l3_6, IPPROTO_UDP, udp(4000, 53, 18)).frame(),
        ),
    ] {
        // sent to in1's own address, as a host on in1 would
        let mut frame = frame;
        frame[..6].copy_from_slice(&IN1_MAC);
        cases.push(Case {
            what,
            frame,
            ctx: Ctx {
                ingress: "in1",
                gso: None,
            },
            xdp: Expect::Pass(Reason::FwdDisabled),
            tc: Expect::Pass(Reason::FwdDisabled),
        });
    }
    // Controls: the packets the cases above derive from are forwarded (same routes, in0,
    // TTL 64, no options, small).
    let controls = [v4, v6];

    with_fixture(move |fx| {
        for c in &cases {
            fx.check(Hook::Xdp, &c.frame, c.ctx, c.xdp, c.what);
            fx.check(Hook::Tc, &c.frame, c.ctx, c.tc, c.what);
        }
        for (i, f) in controls.iter().enumerate() {
            for hook in HOOKS {
                fx.fwd(hook, f, &format!("control #{i}"));
            }
        }
    });
}

/// An 802.1Q (and an 802.1ad) tagged packet to a managed prefix is forwarded without its tag:
/// the frame is 4 bytes shorter, the inner ethertype follows the MACs; the choice is the
/// untagged packet's.
#[test]
fn vlan_tag_removed() {
    with_fixture(|fx| {
        let (s4, d4) = ("10.0.0.10", "198.51.100.5");
        let (s6, d6) = ("2001:db8:ff::10", "2001:db8:100::5");
        let cases = [
            (
                "802.1Q IPv4",
                tagged(ETH_P_8021Q, 0x0064, &udp_frame(s4, d4, 4000, 53, 18)),
                fx.predict(G4_11, &key(s4, d4, IPPROTO_UDP, 4000, 53), false),
                ETH_P_IP,
            ),
            (
                "802.1ad IPv4",
                tagged(ETH_P_8021AD, 0x2064, &udp_frame(s4, d4, 4000, 53, 18)),
                fx.predict(G4_11, &key(s4, d4, IPPROTO_UDP, 4000, 53), false),
                ETH_P_IP,
            ),
            (
                "802.1Q IPv6",
                tagged(ETH_P_8021Q, 0x0064, &udp_frame(s6, d6, 4000, 53, 18)),
                fx.predict(G6_11, &key(s6, d6, IPPROTO_UDP, 4000, 53), false),
                ETH_P_IPV6,
            ),
        ];
        for (what, frame, want, et) in &cases {
            for hook in HOOKS {
                let before = fx.reasons();
                let out = fx.run(hook, frame, IN0, what);
                let delta = reason_delta(&before, &fx.reasons());
                assert_eq!(
                    (out.rc, delta.as_slice()),
                    (hook.redirect(), &[(Reason::Redirected, 1)][..]),
                    "{what} [{hook:?}]"
                );
                assert_eq!(out.data.len(), frame.len() - 4, "{what} [{hook:?}]: length");
                assert_eq!(
                    u16::from_be_bytes([out.data[12], out.data[13]]),
                    *et,
                    "{what} [{hook:?}]: ethertype after the MACs"
                );
                check_forwarded(frame, &out.data, true, what, hook);
                assert_eq!(
                    fx.egress_of(&out.data, what, hook),
                    *want,
                    "{what} [{hook:?}]"
                );
            }
        }
    });
}

/// An ICMP error about a flow to a managed l4-hash route leaves by the nexthop of the flow's
/// packets toward the same host (the embedded header hashed, symmetrically): IPv4 type 3 code 3
/// and ICMPv6 type 1 code 4, over many flows.
#[test]
fn icmp_errors_follow_their_flow() {
    with_fixture(|fx| {
        for hook in HOOKS {
            let mut seen = Vec::new();
            // IPv4: 198.51.100.20:sport -> 100.64.1.1:53 was refused; the error goes back.
            for i in 0..32u16 {
                let (host, remote, sport) = ("198.51.100.20", "100.64.1.1", 40_000 + i * 17);
                let quoted = Ip4::new(host, remote, IPPROTO_UDP, udp(sport, 53, 0)).bytes();
                let err = Ip4::new(
                    "100.64.9.9",
                    host,
                    IPPROTO_ICMP,
                    icmp4_port_unreach(&quoted),
                )
                .frame();
                let reply = udp_frame(remote, host, 53, sport, 18);
                let want = fx.predict(G4_11, &key(host, remote, IPPROTO_UDP, sport, 53), true);
                let e = fx.fwd(hook, &err, "ICMP port unreachable");
                let r = fx.fwd(hook, &reply, "the flow's reply");
                assert_eq!(
                    (e, r),
                    (want, want),
                    "IPv4 flow {host}:{sport} -> {remote}:53 [{hook:?}]: (error, reply) vs model"
                );
                seen.push(e);
            }
            // IPv6.
            for i in 0..32u16 {
                let (host, remote, sport) = ("2001:db8:100:1::20", "2001:db8:aa::1", 40_000 + i);
                let quoted = Ip6::new(host, remote, IPPROTO_UDP, udp(sport, 53, 0)).bytes();
                let err = Ip6::new(
                    "2001:db8:aa::9",
                    host,
                    IPPROTO_ICMPV6,
                    icmp6_port_unreach(&quoted),
                )
                .frame();
                let reply = udp_frame(remote, host, 53, sport, 18);
                let want = fx.predict(G6_11, &key(host, remote, IPPROTO_UDP, sport, 53), true);
                let e = fx.fwd(hook, &err, "ICMPv6 port unreachable");
                let r = fx.fwd(hook, &reply, "the flow's reply");
                assert_eq!(
                    (e, r),
                    (want, want),
                    "IPv6 flow {host}:{sport} -> {remote}:53 [{hook:?}]: (error, reply) vs model"
                );
                seen.push(e);
            }
            both_used(&seen, &format!("ICMP errors [{hook:?}]"));
        }
    });
}

/// Decrementing the TTL keeps the IPv4 header checksum valid for every checksum value: the IP
/// id runs over all 65,536 values (so the checksum does too), through both hooks.
#[test]
fn ttl_decrement_keeps_ipv4_checksum_valid() {
    with_fixture(|fx| {
        let base = Ip4::new("10.0.0.10", "198.51.100.5", IPPROTO_UDP, udp(4000, 53, 18)).frame();
        let mut seen = vec![false; 1 << 16];
        let mut frame = base.clone();
        for id in 0..=u16::MAX {
            frame[18..20].copy_from_slice(&id.to_be_bytes());
            frame[24..26].fill(0);
            let c = inet_csum(&frame[14..34]);
            frame[24..26].copy_from_slice(&c.to_be_bytes());
            seen[usize::from(c)] = true;
            for hook in HOOKS {
                let out = fx.run(hook, &frame, IN0, "checksum sweep");
                assert_eq!(out.rc, hook.redirect(), "id {id:#06x} [{hook:?}]");
                let (ttl, sum) = (out.data[22], &out.data[24..26]);
                assert!(
                    ttl == 63 && csum_ok(&out.data[14..34]),
                    "id {id:#06x}, checksum {c:#06x} [{hook:?}]: TTL {ttl}, checksum {} \
                     invalid:\n in  {}\n out {}",
                    hex(sum),
                    hex(&frame),
                    hex(&out.data)
                );
            }
        }
        // Every checksum a sender can compute (all but 0xffff: the sum is never +0).
        assert_eq!(seen.iter().filter(|s| !**s).count(), 1);
        assert!(!seen[0xffff]);
    });
}

/// Nexthops without a gateway (the destination is on the link: its own neighbour entry gives
/// the MAC) and IPv6 gateways for an IPv4 route (RFC 5549) forward as predicted.
#[test]
fn device_nexthops_and_ipv6_gateways() {
    with_fixture(|fx| {
        for hook in HOOKS {
            for (what, group, dst, srcs) in [
                (
                    "IPv4 device nexthops",
                    G4_DEV,
                    "198.18.0.5",
                    (0..32)
                        .map(|i| format!("10.0.0.{}", 10 + i))
                        .collect::<Vec<_>>(),
                ),
                (
                    "IPv6 device nexthops",
                    G6_DEV,
                    "2001:db8:200::5",
                    (0..32)
                        .map(|i| format!("2001:db8:ff::{:x}", 0x10 + i))
                        .collect(),
                ),
                (
                    "IPv4 via IPv6 gateways",
                    G4_V6GW,
                    "198.19.0.5",
                    (0..32).map(|i| format!("10.0.0.{}", 10 + i)).collect(),
                ),
            ] {
                let mut got = Vec::new();
                for src in &srcs {
                    let f = udp_frame(src, dst, 4000, 53, 18);
                    let want = fx.predict(group, &key(src, dst, IPPROTO_UDP, 4000, 53), false);
                    let dev = fx.fwd(hook, &f, what);
                    assert_eq!(dev, want, "{what} [{hook:?}]: {src} -> {dst}");
                    got.push(dev);
                }
                both_used(&got, &format!("{what} [{hook:?}]"));
            }
        }
    });
}

/// An unusable nexthop (bound -1, however heavy) is never chosen by any algorithm, and the
/// usable ones around it all are; a group of 32 nexthops (MPT_MAX_NH) hashes as predicted up
/// to its last nexthop and cycles in weight proportion.
#[test]
fn unusable_and_many_nexthops() {
    with_fixture(|fx| {
        let algos = [
            ("l3-hash", "100.65.0.0/24"),
            ("l4-hash", "100.65.1.0/24"),
            ("per-packet", "100.65.2.0/24"),
            ("drr", "100.65.3.0/24"),
            ("random", "100.65.4.0/24"),
            ("wrandom", "100.65.5.0/24"),
        ];
        for hook in HOOKS {
            for (i, (algo, prefix)) in algos.iter().enumerate() {
                let dst = format!("100.65.{i}.9");
                let frames: Vec<Vec<u8>> = (0..120u16)
                    .map(|k| {
                        let src = format!("10.0.0.{}", 10 + k % 100);
                        udp_frame(&src, &dst, 1000 + k, 53, 18)
                    })
                    .collect();
                let what = format!("{algo} with an unusable nexthop");
                let got = fwd_batch(fx, hook, (prefix, G4_MIX), &frames, &what);
                assert_eq!(count(&got, "e2"), 0, "{what} [{hook:?}]: chose it: {got:?}");
                assert!(
                    count(&got, "e1") > 0 && count(&got, "e4") > 0,
                    "{what} [{hook:?}]: {got:?}"
                );
                if *algo == "per-packet" {
                    check_wrr_windows(fx, G4_MIX, &got, &format!("{what} [{hook:?}]"));
                }
            }

            // 32 nexthops: the hash reaches every index (checked through the model), and the
            // last one (bound 0x7fffffff) is among the choices.
            let g = fx.group(G4_32);
            let bounds: Vec<i32> = g.nexthops().iter().map(|n| n.upper_bound).collect();
            let dst = "100.65.32.7";
            let mut idx_seen = [false; 32];
            for k in 0..600u32 {
                let src = format!("10.0.{}.{}", k / 200, 1 + k % 200);
                let f = udp_frame(&src, dst, 4000, 53, 18);
                let key = key(&src, dst, IPPROTO_UDP, 4000, 53);
                let i = select(flow_hash(&key, false, SEED), &bounds).expect("usable");
                idx_seen[i] = true;
                let want = fx.dev_name(g.nh[i].ifindex);
                assert_eq!(fx.fwd(hook, &f, "32 nexthops, l3-hash"), want, "{src}");
            }
            assert!(
                idx_seen.iter().all(|s| *s),
                "32 nexthops: some index never predicted: {idx_seen:?}"
            );
            let total = g.total_weight as usize;
            let frames: Vec<Vec<u8>> = (0..3 * total)
                .map(|_| udp_frame("10.0.0.10", "100.65.33.7", 4000, 53, 18))
                .collect();
            let got = fwd_batch(fx, hook, ("100.65.33.0/24", G4_32), &frames, "32 nexthops");
            check_wrr_windows(
                fx,
                G4_32,
                &got,
                &format!("32 nexthops per-packet [{hook:?}]"),
            );
        }
    });
}

// ---- fixtures: DRR beyond small packets ---------------------------------------------------

/// DRR forwards packets larger than one quantum (1514 bytes x weight): a full-size 802.1Q frame
/// (1518 bytes, 1500-byte IPv4 packet, egress MTU 1500) through both hooks and a GSO skb
/// (tc) are forwarded, as the same packets are on an l3-hash route over the same nexthops.
#[test]
fn drr_forwards_packets_larger_than_a_quantum() {
    with_fixture(|fx| {
        let s4 = "10.0.0.10";
        let big = |dst: &str| {
            tagged(
                ETH_P_8021Q,
                100,
                &Ip4::new(s4, dst, IPPROTO_UDP, udp(4000, 53, 1500 - 28)).frame(),
            )
        };
        let gso = Ctx {
            ingress: "in0",
            gso: Some((2, 1448)),
        };
        let gso_frame = |dst: &str| udp_frame(s4, dst, 4000, 80, 2 * 1448 - 8);
        let mut failures = Vec::new();
        for hook in HOOKS {
            // Controls: l3-hash over the same nexthops forwards them.
            fx.check(hook, &big("192.0.2.130"), IN0, Expect::Redirect, "control");
            let f = big("192.0.2.10");
            let out = fx.run(hook, &f, IN0, "drr 1518-byte frame");
            if out.rc != hook.redirect() {
                failures.push(format!(
                    "[{hook:?}] 1518-byte 802.1Q frame (1500-byte IPv4) to 192.0.2.10 (drr, \
                     weights 1:1 via e4/e5, MTU 1500): rc {:#x}, expected a redirect",
                    out.rc
                ));
            }
        }
        fx.check(
            Hook::Tc,
            &gso_frame("198.51.100.5"),
            gso,
            Expect::Redirect,
            "GSO control",
        );
        let before = fx.reasons();
        let f = gso_frame("198.51.100.50");
        let out = fx.run(Hook::Tc, &f, gso, "drr GSO");
        if out.rc != TC_ACT_REDIRECT {
            failures.push(format!(
                "[Tc] GSO skb of {} bytes (gso_segs 2, gso_size 1448) to 198.51.100.50 (drr, \
                 1:1): rc {:#x} with counters {}, expected a redirect",
                f.len(),
                out.rc,
                fmt_delta(&reason_delta(&before, &fx.reasons()))
            ));
        }
        assert!(
            failures.is_empty(),
            "DRR never serves a packet longer than weight x 1514 bytes (deficit is reset to \
             weight x quantum each turn, never accumulated):\n{}",
            failures.join("\n")
        );
    });
}

/// DRR shares bytes in weight proportion: with weights 2:1 and 1000-byte frames, the bytes sent
/// per unit of weight differ by at most one quantum plus one packet.
#[test]
fn drr_shares_bytes_by_weight() {
    with_fixture(|fx| {
        let route = ("198.51.100.128/28", G4_21);
        let frames: Vec<Vec<u8>> = (0..120)
            .map(|_| udp_frame("10.0.0.10", "198.51.100.130", 5000, 5005, 1000 - 42))
            .collect();
        let len = frames[0].len() as u64;
        assert_eq!(len, 1000);
        for hook in HOOKS {
            let got = fwd_batch(fx, hook, route, &frames, "drr 2:1");
            let w1 = count(&got, "e1") as u64 * len / 2;
            let w2 = count(&got, "e2") as u64 * len;
            assert!(
                w1.abs_diff(w2) <= DRR_QUANTUM + len,
                "drr 2:1 [{hook:?}]: bytes per unit of weight e1 {w1}, e2 {w2} (e1 {} packets, \
                 e2 {} packets of {len} bytes; expected a 2:1 byte share): sequence {:?}",
                count(&got, "e1"),
                count(&got, "e2"),
                &got[..12]
            );
        }
    });
}

/// A frame longer than its IPv4 packet (bytes after total length) that exceeds the egress MTU
/// is not redirected onto that link: 14 + 46-byte IPv4/UDP packet + 1354 trailing bytes = 1414
/// bytes, egress MTU 1280. tc refuses it (frag-needed: its first FIB lookup checks the skb's
/// length); XDP checks only the IPv4 total length.
#[test]
fn mtu_check_covers_the_whole_frame() {
    with_fixture(|fx| {
        let mut f = Ip4::new("10.0.0.10", "198.51.100.5", IPPROTO_UDP, udp(4000, 53, 18)).frame();
        f.resize(1414, 0xee);
        for hook in HOOKS {
            fx.check(
                hook,
                &f,
                IN0,
                Expect::Pass(Reason::FragNeeded),
                "1414-byte frame, IPv4 total length 46, egress MTU 1280",
            );
        }
    });
}

/// A group whose nexthop (10.2.0.2 on e1, a drift the control plane can leave behind) is not
/// the route the kernel matched goes to the kernel as `no-route`, never as `local`.
#[test]
fn gateway_off_its_device_goes_to_the_kernel() {
    with_fixture(|fx| {
        let f = udp_frame("10.0.0.10", "100.65.40.5", 4000, 53, 18);
        for hook in HOOKS {
            fx.check(
                hook,
                &f,
                IN0,
                Expect::Pass(Reason::NoRoute),
                "route 100.65.40.0/24 via 10.2.0.2 dev e1 (gateway on e2's subnet)",
            );
        }
    });
}

/// A local stack behind a veth hands over CHECKSUM_PARTIAL packets: their TCP/UDP checksum
/// field holds only the pseudo-header sum. An XDP redirect would send them out like that, so
/// XDP passes them (l4-csum) for the stack or tc to complete; tc, which keeps the skb's state,
/// forwards them. With a complete checksum XDP forwards too.
#[test]
fn xdp_passes_packets_whose_checksum_is_not_complete() {
    with_fixture_local_stacks(|fx| {
        for (what, v6) in [("IPv4 TCP", false), ("IPv6 TCP", true)] {
            let (src, dst) = if v6 {
                ("2001:db8:aa::10", "2001:db8:100::5")
            } else {
                ("10.0.0.10", "198.51.100.5")
            };
            let mut seg = tcp(40000, 80);
            // Pseudo-header sum only, not inverted: what CHECKSUM_PARTIAL leaves in the field.
            let a = |s: &str| -> Vec<u8> {
                if v6 {
                    s.parse::<std::net::Ipv6Addr>()
                        .expect("v6")
                        .octets()
                        .to_vec()
                } else {
                    s.parse::<std::net::Ipv4Addr>()
                        .expect("v4")
                        .octets()
                        .to_vec()
                }
            };
            let mut pseudo = [a(src), a(dst)].concat();
            pseudo.extend_from_slice(&[0, IPPROTO_TCP]);
            pseudo.extend_from_slice(&(seg.len() as u16).to_be_bytes());
            let partial = csum_sum(&pseudo) as u16;
            seg[16..18].copy_from_slice(&partial.to_be_bytes());
            let f = if v6 {
                Ip6::new(src, dst, IPPROTO_TCP, seg).frame()
            } else {
                Ip4::new(src, dst, IPPROTO_TCP, seg).frame()
            };
            fx.check(
                Hook::Xdp,
                &f,
                IN0,
                Expect::Pass(Reason::L4Csum),
                &format!("{what}, partial checksum"),
            );
            fx.check(
                Hook::Tc,
                &f,
                IN0,
                Expect::Redirect,
                &format!("{what}, partial checksum"),
            );
            let good = if v6 {
                Ip6::new(src, dst, IPPROTO_TCP, tcp(40000, 80)).frame()
            } else {
                Ip4::new(src, dst, IPPROTO_TCP, tcp(40000, 80)).frame()
            };
            fx.check(
                Hook::Xdp,
                &good,
                IN0,
                Expect::Redirect,
                &format!("{what}, complete checksum"),
            );
        }
    });
}

/// Destinations that are not managed routes take the router fast path: the kernel FIB decides,
/// with the ports filled in so that the kernel's own L4 multipath spreads flows.
#[test]
fn fast_path_forwards_unmanaged_destinations_by_the_kernel_fib() {
    with_fixture(|fx| {
        for hook in HOOKS {
            let f = udp_frame("10.0.0.10", "100.66.1.2", 4000, 53, 18);
            assert_eq!(fx.fwd(hook, &f, "fast path: 100.66.0.0/16 via e1"), "e1");
            let mut seen = std::collections::BTreeSet::new();
            for sport in 1000..1064u16 {
                let f = udp_frame("10.0.0.10", "100.67.1.2", sport, 53, 18);
                seen.insert(fx.fwd(hook, &f, "fast path: kernel multipath, L4 hash"));
            }
            assert_eq!(
                seen.into_iter().collect::<Vec<_>>(),
                ["e1", "e2"],
                "[{hook:?}] flows differing only in their source port use both paths"
            );
        }
    });
}

/// The fast path keeps the kernel FIB's answers for IPv4 flows (bpf/mproute/flow_cache.h): a
/// route replaced or deleted, the ingress device's forwarding switched off, is seen by the very
/// next packet of a flow already answered; a neighbour's new MAC, which the routing generation
/// does not cover, within two ticks.
#[test]
fn fast_path_flow_cache_follows_the_kernel() {
    fn ip(args: &[&str]) {
        try_output(Command::new("ip").args(args)).unwrap_or_else(|e| panic!("{e}"));
    }
    fn forwarding(on: bool) {
        let v = format!("net.ipv4.conf.in0.forwarding={}", u8::from(on));
        try_output(Command::new("sysctl").args(["-q", "-w", &v])).unwrap_or_else(|e| panic!("{e}"));
    }
    with_fixture(|fx| {
        let f = udp_frame("10.0.0.10", "100.66.1.2", 4000, 53, 18);
        for hook in HOOKS {
            for _ in 0..3 {
                assert_eq!(fx.fwd(hook, &f, "100.66.0.0/16 via e1, answered"), "e1");
            }
            ip(&[
                "route",
                "replace",
                "100.66.0.0/16",
                "via",
                "10.2.0.2",
                "dev",
                "e2",
            ]);
            assert_eq!(fx.fwd(hook, &f, "the route replaced: via e2"), "e2");
            ip(&["route", "del", "100.66.0.0/16"]);
            fx.check(
                hook,
                &f,
                IN0,
                Expect::Pass(Reason::Local),
                "the route deleted",
            );
            ip(&[
                "route",
                "add",
                "100.66.0.0/16",
                "via",
                "10.1.0.2",
                "dev",
                "e1",
            ]);
            assert_eq!(fx.fwd(hook, &f, "the route back: via e1"), "e1");
            forwarding(false);
            fx.check(
                hook,
                &f,
                IN0,
                Expect::Pass(Reason::FwdDisabled),
                "forwarding off on in0",
            );
            forwarding(true);
            assert_eq!(fx.fwd(hook, &f, "forwarding on again"), "e1");

            // The gateway's MAC changes: the next packets may still carry the old one, for
            // two ticks at most (HZ >= 100: 20 ms; 50 ms waited).
            let gw = DEVS
                .iter()
                .find(|d| d.name == "e1")
                .and_then(|d| d.gw_mac)
                .expect("e1");
            let new = [0x02, 0, 0, 0, 0x01, 0x99];
            for (to, what) in [(new, "the new MAC"), (gw, "the old MAC again")] {
                ip(&[
                    "neigh",
                    "replace",
                    "10.1.0.2",
                    "lladdr",
                    &hexmac(&to),
                    "dev",
                    "e1",
                    "nud",
                    "permanent",
                ]);
                std::thread::sleep(std::time::Duration::from_millis(50));
                let out = fx.run(hook, &f, IN0, what);
                assert_eq!(out.rc, hook.redirect(), "{what} [{hook:?}]: not redirected");
                assert_eq!(
                    &out.data[..6],
                    &to[..],
                    "{what} [{hook:?}]: destination MAC"
                );
            }
        }
    });
}

/// Like the kernel (ip_rcv drops other hosts' frames, ip_forward forwards PACKET_HOST only),
/// the dataplane forwards only frames sent to the ingress device's own MAC: a frame for another
/// host, an Ethernet broadcast or multicast goes to the stack (not-host), managed route or fast
/// path alike, in both hooks.
#[test]
fn frames_not_sent_to_the_device_are_not_forwarded() {
    with_fixture(|fx| {
        for (dst, what) in [
            ("198.51.100.5", "managed route"),
            ("100.66.1.2", "fast path"),
        ] {
            let good = udp_frame("10.0.0.10", dst, 4000, 53, 18);
            for hook in HOOKS {
                fx.check(
                    hook,
                    &good,
                    IN0,
                    Expect::Redirect,
                    &format!("{what}: to in0's MAC"),
                );
            }
            for (mac, kind) in [
                ([0x02, 0, 0, 0, 0x77, 0x01], "another host's MAC"),
                ([0xff; 6], "broadcast"),
                ([0x01, 0x00, 0x5e, 0x00, 0x00, 0x01], "IPv4 multicast MAC"),
            ] {
                let mut f = good.clone();
                f[..6].copy_from_slice(&mac);
                for hook in HOOKS {
                    fx.check(
                        hook,
                        &f,
                        IN0,
                        Expect::Pass(Reason::NotHost),
                        &format!("{what}: {kind}"),
                    );
                }
            }
        }
        let good6 = udp_frame("2001:db8:aa::10", "2001:db8:100::5", 4000, 53, 18);
        let mut f = good6.clone();
        f[..6].copy_from_slice(&[0x33, 0x33, 0, 0, 0, 0x01]);
        for hook in HOOKS {
            fx.check(hook, &good6, IN0, Expect::Redirect, "IPv6: to in0's MAC");
            fx.check(
                hook,
                &f,
                IN0,
                Expect::Pass(Reason::NotHost),
                "IPv6: multicast MAC",
            );
        }
        // not for this host whatever else the packet has: an MLD-like hop limit 1 multicast,
        // a broadcast with TTL 1
        let mut hop1 = Ip6::new("2001:db8:aa::10", "2001:db8:100::5", 17, udp(4000, 53, 18))
            .hop(1)
            .frame();
        hop1[..6].copy_from_slice(&[0x33, 0x33, 0, 0, 0, 0x01]);
        let mut ttl1 = Ip4::new("10.0.0.10", "198.51.100.5", 17, udp(4000, 53, 18))
            .ttl(1)
            .frame();
        ttl1[..6].copy_from_slice(&[0xff; 6]);
        for hook in HOOKS {
            for (f, what) in [(&hop1, "IPv6 hop limit 1"), (&ttl1, "IPv4 TTL 1")] {
                fx.check(
                    hook,
                    f,
                    IN0,
                    Expect::Pass(Reason::NotHost),
                    &format!("{what} to a group address"),
                );
            }
        }
    });
}

/// A more specific route added with ip route inside a managed prefix wins in the kernel, so
/// the dataplane leaves its packets to the kernel instead of spreading them over the managed
/// route's nexthops.
#[test]
fn more_specific_kernel_route_inside_a_managed_prefix_wins() {
    with_fixture(|fx| {
        let cases = [
            (
                "198.51.100.165",
                53,
                Expect::Pass(Reason::NoRoute),
                "198.51.100.165: the kernel's 198.51.100.160/28 via e3 beats the managed /24",
            ),
            // A rule by port sends UDP to port 5353 to another table: the kernel's lookup
            // sees the packet's ports, so must ours.
            (
                "198.51.100.155",
                5353,
                Expect::Pass(Reason::NoRoute),
                "198.51.100.155 UDP port 5353: a rule routes it by table 100",
            ),
            // ... also when that table's route goes through a gateway of the managed group
            // (the kernel's answer has another metric than the managed route's).
            (
                "198.51.100.155",
                5355,
                Expect::Pass(Reason::NoRoute),
                "198.51.100.155 UDP port 5355: a rule routes it by table 101, via e1, metric 7",
            ),
            // Next to it, still in the managed /24 and no more specific kernel route: ours.
            (
                "198.51.100.155",
                53,
                Expect::Redirect,
                "198.51.100.155: the managed /24",
            ),
        ];
        for (dst, dport, expect, what) in cases {
            let f = udp_frame("10.0.0.10", dst, 4000, dport, 18);
            for hook in HOOKS {
                fx.check(hook, &f, IN0, expect, what);
            }
        }
    });
}

// ---- fixtures: robustness -----------------------------------------------------------------

/// Our own parser: is the frame a structurally valid IP packet (headers complete and consistent
/// with the frame) the dataplane may forward? `Err(why)` otherwise.
fn classify(f: &[u8]) -> Result<(), &'static str> {
    if f.len() < 14 {
        return Err("Ethernet header truncated");
    }
    let mut et = u16::from_be_bytes([f[12], f[13]]);
    let mut off = 14;
    if et == ETH_P_8021Q || et == ETH_P_8021AD {
        if f.len() < 18 {
            return Err("VLAN tag truncated");
        }
        et = u16::from_be_bytes([f[16], f[17]]);
        off = 18;
    }
    let l3 = &f[off..];
    match et {
        ETH_P_IP => {
            if l3.len() < 20 {
                return Err("IPv4 header truncated");
            }
            let (ver, hl) = (l3[0] >> 4, usize::from(l3[0] & 0x0f) * 4);
            let tot = usize::from(u16::from_be_bytes([l3[2], l3[3]]));
            if ver != 4 {
                Err("IPv4 ethertype, other version")
            } else if hl < 20 {
                Err("IPv4 ihl < 5")
            } else if hl > l3.len() {
                Err("IPv4 options truncated")
            } else if tot < hl {
                Err("IPv4 total length shorter than its header")
            } else if tot > l3.len() {
                Err("IPv4 packet truncated (total length beyond the frame)")
            } else {
                Ok(())
            }
        }
        ETH_P_IPV6 => {
            if l3.len() < 40 {
                return Err("IPv6 header truncated");
            }
            let plen = usize::from(u16::from_be_bytes([l3[4], l3[5]]));
            if l3[0] >> 4 != 6 {
                Err("IPv6 ethertype, other version")
            } else if 40 + plen > l3.len() {
                Err("IPv6 packet truncated (payload length beyond the frame)")
            } else {
                Ok(())
            }
        }
        _ => Err("not IP"),
    }
}

/// Valid frames over every parse path (UDP, TCP, ICMP errors, VLAN, both families) to managed
/// routes of most algorithms; whole, all are forwarded (tc) or all but the no-neighbour one (XDP).
fn templates() -> Vec<Vec<u8>> {
    let (s4, s6) = ("10.0.0.10", "2001:db8:ff::10");
    let q4 = Ip4::new("198.51.100.20", "100.64.1.1", IPPROTO_UDP, udp(4000, 53, 0)).bytes();
    let q6 = Ip6::new(
        "2001:db8:100:1::20",
        "2001:db8:aa::1",
        IPPROTO_UDP,
        udp(4000, 53, 0),
    )
    .bytes();
    let v4 = udp_frame(s4, "198.51.100.5", 4000, 53, 18);
    let v6 = udp_frame(s6, "2001:db8:100::5", 4000, 53, 18);
    vec![
        v4.clone(),
        udp_frame(s4, "198.51.100.20", 4000, 53, 18),
        udp_frame(s4, "198.51.100.40", 4000, 53, 18),
        udp_frame(s4, "198.51.100.50", 4000, 53, 18),
        udp_frame(s4, "198.51.100.70", 4000, 53, 18),
        udp_frame(s4, "198.51.100.90", 4000, 53, 18),
        Ip4::new(s4, "198.51.100.20", IPPROTO_TCP, tcp(4000, 443)).frame(),
        Ip4::new(
            "100.64.9.9",
            "198.51.100.20",
            IPPROTO_ICMP,
            icmp4_port_unreach(&q4),
        )
        .frame(),
        udp_frame(s4, "203.0.113.5", 4000, 53, 18),
        v6.clone(),
        udp_frame(s6, "2001:db8:100:1::5", 4000, 53, 18),
        udp_frame(s6, "2001:db8:100:2::5", 4000, 53, 18),
        Ip6::new(s6, "2001:db8:100:1::5", IPPROTO_TCP, tcp(4000, 443)).frame(),
        Ip6::new(
            "2001:db8:aa::9",
            "2001:db8:100:1::20",
            IPPROTO_ICMPV6,
            icmp6_port_unreach(&q6),
        )
        .frame(),
        tagged(ETH_P_8021Q, 100, &v4),
        tagged(ETH_P_8021AD, 100, &v6),
    ]
}

/// 100,000 frames: every truncation (0..=len) of every template, then, drawn at random: a
/// quarter random bytes of random length 0..200; a quarter the same with an IP or VLAN
/// ethertype (and inner ethertype) and a matching IP version nibble; half templates with one to
/// four of their first 80 bytes replaced (a third of those also truncated at random).
fn corpus() -> Vec<Vec<u8>> {
    const N: usize = 100_000;
    let mut rng = XorShift64(0x6470_5f66_6978_7475);
    let templates = templates();
    let mut v = Vec::with_capacity(N);
    for t in &templates {
        for len in 0..=t.len() {
            v.push(t[..len].to_vec());
        }
    }
    while v.len() < N {
        match rng.below(4) {
            0 => {
                let mut f = vec![0u8; rng.below(200) as usize];
                rng.fill(&mut f);
                v.push(f);
            }
            1 => {
                let mut f = vec![0u8; rng.below(200) as usize];
                rng.fill(&mut f);
                let et = [ETH_P_IP, ETH_P_IPV6, ETH_P_8021Q, ETH_P_8021AD][rng.below(4) as usize];
                if f.len() >= 14 {
                    f[12..14].copy_from_slice(&et.to_be_bytes());
                }
                let mut off = 14;
                let mut inner = et;
                if et == ETH_P_8021Q || et == ETH_P_8021AD {
                    inner = [ETH_P_IP, ETH_P_IPV6][rng.below(2) as usize];
                    if f.len() >= 18 {
                        f[16..18].copy_from_slice(&inner.to_be_bytes());
                    }
                    off = 18;
                }
                if f.len() > off {
                    let ver = if inner == ETH_P_IP { 0x45 } else { 0x60 };
                    f[off] = ver | (f[off] & if inner == ETH_P_IP { 0 } else { 0x0f });
                }
                v.push(f);
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
                v.push(f);
            }
        }
    }
    v
}

/// Every corpus frame runs through both programs without an error (except the inputs the
/// kernel refuses with EINVAL before the program runs, [`kernel_refuses`]), and the programs
/// only ever pass (packet unchanged) or redirect.
#[test]
fn robustness_never_fails() {
    with_fixture(|fx| {
        let corpus = corpus();
        let mut bad = Vec::new();
        let mut ran = 0usize;
        let mut refused = 0usize;
        for f in &corpus {
            for hook in HOOKS {
                match fx.try_run(hook, f, IN0) {
                    Err(e)
                        if kernel_refuses(hook, f)
                            && e.kind() == libbpf_rs::ErrorKind::InvalidInput =>
                    {
                        refused += 1;
                    }
                    Err(e) => bad.push(format!("[{hook:?}] error {e} on {}", hex(f))),
                    Ok(out) if kernel_refuses(hook, f) => bad.push(format!(
                        "[{hook:?}] a {}-byte frame ran (rc {:#x})",
                        f.len(),
                        out.rc
                    )),
                    Ok(out) => {
                        ran += 1;
                        if out.rc == hook.pass() {
                            if out.data != *f {
                                bad.push(format!(
                                    "[{hook:?}] passed but changed: {} -> {}",
                                    hex(f),
                                    hex(&out.data)
                                ));
                            }
                        } else if out.rc != hook.redirect() {
                            bad.push(format!("[{hook:?}] rc {:#x} on {}", out.rc, hex(f)));
                        }
                    }
                }
                if bad.len() > 20 {
                    break;
                }
            }
        }
        println!(
            "robustness: {} frames, {ran} runs, {refused} inputs refused by the kernel",
            corpus.len()
        );
        assert!(bad.is_empty(), "{}", bad.join("\n"));
    });
}

/// No frame that is not a structurally valid IP packet (see [`classify`]) is ever redirected:
/// truncated headers, truncated packets, inconsistent lengths, not IP.
#[test]
fn robustness_malformed_never_redirected() {
    with_fixture(|fx| {
        let corpus = corpus();
        // (hook, why) -> (count, shortest example)
        let mut bad: BTreeMap<(String, &'static str), (usize, Vec<u8>)> = BTreeMap::new();
        let mut invalid = 0usize;
        let mut valid_fwd = 0usize;
        for f in &corpus {
            let verdict = classify(f);
            for hook in HOOKS {
                if kernel_refuses(hook, f) {
                    continue;
                }
                let out = fx.run(hook, f, IN0, "robustness");
                let redirected = out.rc == hook.redirect();
                match verdict {
                    Ok(()) => valid_fwd += usize::from(redirected),
                    Err(why) => {
                        invalid += 1;
                        if redirected {
                            let e = bad
                                .entry((format!("{hook:?}"), why))
                                .or_insert((0, f.clone()));
                            e.0 += 1;
                            if f.len() < e.1.len() {
                                e.1 = f.clone();
                            }
                        }
                    }
                }
            }
        }
        println!(
            "robustness: {invalid} runs of invalid frames, {valid_fwd} redirects of valid ones"
        );
        assert!(valid_fwd > 0, "no valid frame was redirected at all");
        let report: Vec<String> = bad
            .iter()
            .map(|((hook, why), (n, ex))| {
                format!(
                    "[{hook}] {why}: {n} redirected; shortest ({} bytes): {}",
                    ex.len(),
                    hex(ex)
                )
            })
            .collect();
        assert!(
            report.is_empty(),
            "malformed frames redirected:\n{}",
            report.join("\n")
        );
    });
}

/// XDP verifies every TCP/UDP checksum before it redirects (reading the segment in place, in
/// blocks and words, with the last 1 to 3 bytes on their own): every segment length from 8 to
/// 3,008 bytes, with pseudo-random contents, is redirected when its checksum is right and passed
/// (l4-csum) when one byte is wrong; Ethernet padding after the IP packet is not summed.
/// (Past the egress MTU a packet that passed the check meets frag-needed instead.)
#[test]
fn xdp_checksum_check_over_every_length() {
    with_fixture_local_stacks(|fx| {
        let mut rng = XorShift64(0x1234_5678);
        let mut next = move || rng.next();
        for n in 0..=3000usize {
            let mut seg = udp(4000, 53, n);
            for b in &mut seg[8..] {
                *b = next() as u8;
            }
            // IPv4 fixtures send UDP without a checksum; this one needs one (the `v6` flag
            // only makes fill_l4_csum fill UDP: the pseudo header is the IPv4 addresses').
            let addrs = [[10u8, 0, 0, 10], [100, 66, 1, 2]].concat();
            fill_l4_csum(IPPROTO_UDP, &addrs, &mut seg, true);
            let good = Ip4::new("10.0.0.10", "100.66.1.2", IPPROTO_UDP, seg).frame();
            let what = format!("UDP/IPv4, {n} payload bytes");
            // e1's MTU is 1280: a longer packet that passed the check meets frag-needed
            let fits = 20 + 8 + n <= 1280;
            let ok = if fits {
                Expect::Redirect
            } else {
                Expect::Pass(Reason::FragNeeded)
            };
            fx.check(Hook::Xdp, &good, IN0, ok, &what);
            // one byte off: the segment's last byte, or one of its header when it has none
            let mut bad = good.clone();
            let i = bad.len() - 1 - (next() as usize % (n + 8));
            bad[i] ^= 0x01 << (next() % 8);
            fx.check(
                Hook::Xdp,
                &bad,
                IN0,
                Expect::Pass(Reason::L4Csum),
                &format!("{what}, byte {i} changed"),
            );
            if n % 97 == 0 {
                let mut padded = good.clone();
                padded.extend_from_slice(&[0x5a; 7]);
                fx.check(
                    Hook::Xdp,
                    &padded,
                    IN0,
                    ok,
                    &format!("{what}, 7 bytes of Ethernet padding"),
                );
            }
        }
        for n in (0..=1220usize).step_by(7) {
            let mut seg = tcp(40000, 80);
            seg.extend((0..n).map(|_| next() as u8));
            let good = Ip6::new("2001:db8:aa::10", "2001:db8:100::5", IPPROTO_TCP, seg).frame();
            let what = format!("TCP/IPv6, {n} payload bytes");
            fx.check(Hook::Xdp, &good, IN0, Expect::Redirect, &what);
            let mut bad = good.clone();
            let last = bad.len() - 1;
            bad[last] ^= 0x80;
            fx.check(
                Hook::Xdp,
                &bad,
                IN0,
                Expect::Pass(Reason::L4Csum),
                &format!("{what}, last byte changed"),
            );
        }
    });
}

/// Packets whose checksum XDP cannot verify: IPv4 UDP without one (a VXLAN/Geneve outer
/// header), tunnels (IPIP, SIT, GRE: the inner TCP may be CHECKSUM_PARTIAL) and SCTP (CRC32c
/// left to offload). On a device carrying local stacks' packets (veth, tun) native XDP hands
/// them up (l4-csum) and tc forwards them; on a NIC (frames from a wire are complete) XDP
/// forwards them itself.
fn unverifiable_frames() -> Vec<(&'static str, Vec<u8>)> {
    let (s, d) = ("10.0.0.10", "198.51.100.5");
    let (s6, d6) = ("2001:db8:aa::10", "2001:db8:100::5");
    let inner = Ip4::new("192.168.0.1", "192.168.0.2", IPPROTO_TCP, tcp(1000, 80)).bytes();
    let mut gre = vec![0, 0, 0x08, 0x00];
    gre.extend_from_slice(&inner);
    let sctp = {
        let mut v = Vec::new();
        v.extend_from_slice(&5000u16.to_be_bytes());
        v.extend_from_slice(&38412u16.to_be_bytes());
        v.extend_from_slice(&[0; 8]);
        v
    };
    vec![
        ("IPv4 UDP without checksum", udp_frame(s, d, 4789, 4789, 50)),
        ("IPIP", Ip4::new(s, d, 4, inner.clone()).frame()),
        ("GRE", Ip4::new(s, d, 47, gre.clone()).frame()),
        ("SCTP over IPv4", Ip4::new(s, d, 132, sctp.clone()).frame()),
        ("IPv4 in IPv6", Ip6::new(s6, d6, 4, inner).frame()),
        ("GRE over IPv6", Ip6::new(s6, d6, 47, gre).frame()),
        ("SCTP over IPv6", Ip6::new(s6, d6, 132, sctp).frame()),
    ]
}

#[test]
fn xdp_hands_up_what_it_cannot_verify_on_local_stack_devices() {
    with_fixture_local_stacks(|fx| {
        for (what, f) in unverifiable_frames() {
            fx.check(
                Hook::Xdp,
                &f,
                IN0,
                Expect::Pass(Reason::L4Csum),
                &format!("{what}, veth/tun"),
            );
            fx.check(Hook::Tc, &f, IN0, Expect::Redirect, &format!("{what}, tc"));
        }
    });
    with_fixture(|fx| {
        for (what, f) in unverifiable_frames() {
            fx.check(
                Hook::Xdp,
                &f,
                IN0,
                Expect::Redirect,
                &format!("{what}, NIC"),
            );
        }
    });
}

// ---- fixtures: the verified-route gate (MPT_DPR_F_VERIFIED at the FIB generation) -----------------

impl Fx<'_> {
    /// Write `mpt_meta` with the recorded FIB generation (None: the flag clear) and a netns
    /// cookie.
    fn set_fib4_gen(&self, generation: Option<u32>, cookie: u64) {
        let mut meta = MptMeta::new(SEED, cookie);
        if let Some(g) = generation {
            meta.flags |= mpt_bpf::mproute::abi::META_F_FIB4_GEN;
            meta.fib4_gen = g;
        }
        self.skel
            .maps
            .mpt_meta
            .update(&0u32.to_ne_bytes(), meta.as_bytes(), MapFlags::ANY)
            .expect("write mpt_meta");
    }

    /// Write `mpt_meta.fib4_gen` (None: clear the flag) and the verified flag of a managed IPv4 or
    /// IPv6 route's LPM entry.
    fn set_verified(&self, prefix: &str, verified: bool, generation: Option<u32>) {
        // the namespace's own cookie: the dataplane skips nothing for another namespace's state
        self.set_fib4_gen(generation, mpt_sys::netns::cookie().expect("netns cookie"));
        self.edit_lpm_entry(prefix, |v| {
            v.flags = if verified {
                mpt_bpf::mproute::abi::DPR_F_VERIFIED
            } else {
                0
            }
        });
    }

    fn lpm_slot(&self, prefix: &str) -> (&libbpf_rs::Map<'_>, Vec<u8>) {
        let (addr, len) = parse_prefix(prefix);
        match addr {
            IpAddr::V4(a) => (
                &self.skel.maps.mpt_lpm4,
                MptLpm4Key::new(TABLE, len, a.octets()).as_bytes().to_vec(),
            ),
            IpAddr::V6(a) => (
                &self.skel.maps.mpt_lpm6,
                MptLpm6Key::new(TABLE, len, a.octets()).as_bytes().to_vec(),
            ),
        }
    }

    /// The managed route's LPM entry.
    fn lpm_entry(&self, prefix: &str) -> MptDpRoute {
        let (map, key) = self.lpm_slot(prefix);
        let cur = map
            .lookup(&key, MapFlags::ANY)
            .expect("read the LPM entry")
            .expect("the managed route's LPM entry");
        MptDpRoute::from_bytes(&cur).expect("an LPM value")
    }

    fn edit_lpm_entry(&self, prefix: &str, f: impl FnOnce(&mut MptDpRoute)) {
        let mut v = self.lpm_entry(prefix);
        f(&mut v);
        let (map, key) = self.lpm_slot(prefix);
        map.update(&key, v.as_bytes(), MapFlags::EXIST)
            .expect("write the LPM entry");
    }
}

/// White box: the kernel has 198.51.100.160/28 via e3 inside the managed 198.51.100.0/24, so the
/// kernel-view lookup hands 198.51.100.165 to the stack. A verified flag (which user space would
/// never set on this route) makes the dataplane skip that lookup only while the namespace's IPv4
/// FIB generation equals the recorded one; any FIB change ends it. Forwarding disabled on the
/// ingress device and IPv6 are always looked up.
#[test]
fn verified_routes_skip_the_kernel_lookup_only_at_their_generation() {
    if !mpt_bpf::mproute::fib_generation::FibGenReader::supported() {
        // before 6.2 the programs cannot read the generation: a verified flag never skips the
        // lookup, whatever generation is recorded
        with_fixture(|fx| {
            let v4 = udp_frame("10.0.0.10", "198.51.100.165", 4000, 53, 18);
            for g in [0u32, 1, 7, u32::MAX] {
                fx.set_verified("198.51.100.0/24", true, Some(g));
                for hook in HOOKS {
                    fx.check(
                        hook,
                        &v4,
                        IN0,
                        Expect::Pass(Reason::NoRoute),
                        "no generation: looked up",
                    );
                }
            }
        });
        return;
    }
    with_fixture(|fx| {
        let mut reader = mpt_bpf::mproute::fib_generation::FibGenReader::new()
            .expect("load the generation reader");
        let now = reader.read().expect("read the FIB generation");
        let both = |frame: &[u8], ctx: Ctx, expect: Expect, what: &str| {
            for hook in HOOKS {
                fx.check(hook, frame, ctx, expect, what);
            }
        };
        let v4 = udp_frame("10.0.0.10", "198.51.100.165", 4000, 53, 18);
        let run = |verified: bool, generation: Option<u32>, expect: Expect, what: &str| {
            fx.set_verified("198.51.100.0/24", verified, generation);
            both(&v4, IN0, expect, what);
        };
        run(
            false,
            None,
            Expect::Pass(Reason::NoRoute),
            "not verified: looked up",
        );
        run(
            true,
            Some(now.v4),
            Expect::Redirect,
            "verified at the current generation: the lookup is skipped",
        );
        run(
            true,
            Some(now.v4.wrapping_add(1)),
            Expect::Pass(Reason::NoRoute),
            "verified at another generation: looked up",
        );
        run(
            true,
            None,
            Expect::Pass(Reason::NoRoute),
            "verified without a recorded generation: looked up",
        );
        run(
            false,
            Some(now.v4),
            Expect::Pass(Reason::NoRoute),
            "a route not flagged verified: looked up",
        );

        // State of another namespace (cookie): never trusted.
        fx.set_verified("198.51.100.0/24", true, Some(now.v4));
        fx.set_fib4_gen(Some(now.v4), 0x5eed);
        both(
            &v4,
            IN0,
            Expect::Pass(Reason::NoRoute),
            "verified, the generation recorded for another namespace",
        );

        // Forwarding off on the ingress device: the kernel's answer, not the shortcut.
        fx.set_verified("198.51.100.0/24", true, Some(now.v4));
        let mut f1 = udp_frame("10.0.1.10", "198.51.100.165", 4000, 53, 18);
        f1[..6].copy_from_slice(&IN1_MAC);
        let in1 = Ctx {
            ingress: "in1",
            gso: None,
        };
        both(
            &f1,
            in1,
            Expect::Pass(Reason::FwdDisabled),
            "verified, ingress in1 with forwarding=0",
        );

        // IPv6 has no generation that covers deletions: always looked up.
        fx.set_verified("2001:db8:100::/56", true, Some(now.v4));
        let b6 = Ip6::new(
            "2001:db8:ff::10",
            "2001:db8:100:fe::1",
            IPPROTO_UDP,
            udp(4000, 53, 18),
        )
        .frame();
        both(
            &b6,
            IN0,
            Expect::Pass(Reason::FibOther),
            "IPv6 verified: the blackhole inside still answers",
        );

        // Any FIB change moves the generation (this thread's namespace is the fixture's).
        try_output(Command::new("ip").args(["route", "add", "192.0.2.128/25", "dev", "e3"]))
            .unwrap_or_else(|e| panic!("{e}"));
        let later = reader.read().expect("read the FIB generation");
        assert_ne!(later.v4, now.v4, "a route add moves net->ipv4.rt_genid");
        run(
            true,
            Some(now.v4),
            Expect::Pass(Reason::NoRoute),
            "verified recorded before an unrelated route add: looked up again",
        );
    });
}

/// A verified l3/l4-hash route's choice is kept in the flow cache (bpf/mproute/flow_cache.h):
/// the flow's next packets go the same way and are counted in the route's slot on the same
/// nexthop; the choice is used only while mpt_meta holds the current generation as verified
/// (every mproute command clears it before it writes the maps, and a FIB change moves the
/// generation), and a change of the maps without either is seen within two ticks. A route
/// without a counters slot, or with a per-packet algorithm, is decided for every packet.
#[test]
fn managed_choices_are_cached_only_while_verified() {
    // before 6.2 nothing is verified at a generation, so nothing is cached: the test above holds
    // that every packet is looked up there
    if !mpt_bpf::mproute::fib_generation::FibGenReader::supported() {
        return;
    }
    with_fixture(|fx| {
        let mut reader = mpt_bpf::mproute::fib_generation::FibGenReader::new()
            .expect("load the generation reader");
        let now = reader.read().expect("read the FIB generation").v4;
        let route = "198.51.100.0/24";
        let f = udp_frame("10.0.0.10", "198.51.100.165", 4000, 53, 18);
        // what an earlier hook's packets left in the cache ages out first (two ticks)
        let age = || std::thread::sleep(std::time::Duration::from_millis(50));
        for hook in HOOKS {
            age();
            fx.edit_lpm_entry(route, |v| {
                v.group = G4_11;
                v.stats_slot = 9;
            });
            fx.set_verified(route, true, Some(now));
            let first = fx.fwd(hook, &f, "verified");
            let nh = usize::from(first != "e1");
            let before = fx.slot_stats(9);
            for _ in 0..3 {
                assert_eq!(fx.fwd(hook, &f, "the flow again"), first, "[{hook:?}]");
            }
            let after = fx.slot_stats(9);
            assert_eq!(after.route.packets, before.route.packets + 3, "[{hook:?}]");
            assert_eq!(
                after.nh[nh].packets,
                before.nh[nh].packets + 3,
                "[{hook:?}]"
            );
            // Kept: a group rewritten behind the dataplane's back (no command, no FIB change)
            // is not seen by the flow's next packet in the same tick or the next (tried a few
            // times, in case a tick ends between the two packets).
            let kept = (0..5).any(|_| {
                fx.edit_lpm_entry(route, |v| v.group = G4_11);
                age();
                let _ = fx.fwd(hook, &f, "stored");
                fx.edit_lpm_entry(route, |v| v.group = G4_45);
                fx.fwd(hook, &f, "from the cache") == first
            });
            assert!(kept, "[{hook:?}] the choice was not kept");
            fx.edit_lpm_entry(route, |v| v.group = G4_11);

            // The group rewritten to e4/e5 with the verification cleared, as a command does:
            // the kernel-view check runs (the kernel answers this packet with e3, by a rule).
            fx.edit_lpm_entry(route, |v| v.group = G4_45);
            fx.set_verified(route, true, None);
            fx.check(hook, &f, IN0, Expect::Pass(Reason::NoRoute), "disarmed");
            // armed again at the same generation (the FIB did not change): within two ticks
            // (HZ >= 100: 20 ms; 50 ms waited) the new group's choice
            fx.set_verified(route, true, Some(now));
            age();
            let again = fx.fwd(hook, &f, "armed again");
            assert!(
                again == "e4" || again == "e5",
                "[{hook:?}] armed again: {again}"
            );
            // another generation: looked up again, whatever was kept
            fx.set_verified(route, true, Some(now.wrapping_add(1)));
            fx.check(
                hook,
                &f,
                IN0,
                Expect::Pass(Reason::NoRoute),
                "another generation",
            );
        }

        // No counters slot: nothing kept (a change shows at once).
        age();
        fx.edit_lpm_entry(route, |v| {
            v.group = G4_11;
            v.stats_slot = 0;
        });
        fx.set_verified(route, true, Some(now));
        for hook in HOOKS {
            let _ = fx.fwd(hook, &f, "no slot");
            fx.edit_lpm_entry(route, |v| v.group = G4_45);
            let now_at = fx.fwd(hook, &f, "no slot, the group changed");
            assert!(
                now_at == "e4" || now_at == "e5",
                "[{hook:?}] no slot: {now_at}"
            );
            fx.edit_lpm_entry(route, |v| v.group = G4_11);
        }

        // Per-packet: every packet decided (both nexthops of one flow).
        fx.edit_lpm_entry(route, |v| {
            v.algo = ALGO_PER_PACKET;
            v.stats_slot = 9;
        });
        for hook in HOOKS {
            let got: Vec<&str> = (0..4).map(|_| fx.fwd(hook, &f, "per-packet")).collect();
            both_used(&got, "per-packet, verified");
        }
    });
}

/// A route whose LPM entry holds a counter slot counts in that element of the per-CPU array
/// `mpt_slot_stats` and leaves `mpt_stats` alone; slot 0 means the hash map. (`fwd_batch`
/// checks that the sum of both is exact per route and nexthop.)
#[test]
fn a_counter_slot_takes_the_routes_counts() {
    with_fixture(|fx| {
        let route = ("198.51.100.32/28", G4_11);
        let frames: Vec<Vec<u8>> = (0..8u16)
            .map(|i| {
                let dst = format!("198.51.100.{}", 33 + i);
                udp_frame("10.0.0.10", &dst, 4000 + i, 53, 18)
            })
            .collect();
        fx.edit_lpm_entry(route.0, |v| v.stats_slot = 7);
        for hook in HOOKS {
            let (hashed, slotted) = (fx.hashed_stats(route.0), fx.slot_stats(7));
            fwd_batch(fx, hook, route, &frames, "slot 7");
            assert_eq!(
                fx.hashed_stats(route.0),
                hashed,
                "[{hook:?}] mpt_stats untouched"
            );
            assert_eq!(
                fx.slot_stats(7).route.packets,
                slotted.route.packets + 8,
                "[{hook:?}] counted in slot 7"
            );
        }
        fx.edit_lpm_entry(route.0, |v| v.stats_slot = 0);
        for hook in HOOKS {
            let (hashed, slotted) = (fx.hashed_stats(route.0), fx.slot_stats(7));
            fwd_batch(fx, hook, route, &frames, "no slot");
            assert_eq!(fx.slot_stats(7), slotted, "[{hook:?}] slot 7 untouched");
            assert_eq!(
                fx.hashed_stats(route.0).route.packets,
                hashed.route.packets + 8,
                "[{hook:?}] counted in mpt_stats"
            );
        }
    });
}

// ---- fixtures: resilient bucket tables ------------------------------------------------------

/// A resilient route's flow goes where its bucket (`bucket_of` of the flow hash) points, for
/// any table (here one laid out against hash-threshold's order); the bucket's last use is
/// stamped with the coarse monotonic clock; a bucket whose nexthop is unusable falls back to
/// hash-threshold over the usable ones, the others keep theirs; a route without a table is
/// hash-threshold.
#[test]
fn resilient_buckets_choose_as_the_model_says() {
    use mpt_bpf::mproute::abi::MptResTable;
    use mpt_model::route::resilient::{bucket_of, rebalance};
    with_fixture(|fx| {
        const N: u16 = 64;
        // reversed: bucket b of the fresh table's nexthop 3 - i
        let fresh = rebalance(&[], &[], &[1; 4], N);
        let mut t = MptResTable {
            n_buckets: N,
            idle_timer_s: 120,
            ..MptResTable::default()
        };
        for (b, i) in fresh.iter().enumerate() {
            t.nh[b] = 3 - *i;
        }
        for prefix in ["100.65.50.0/24", "100.65.51.0/24", "100.65.52.0/24"] {
            let id = fx.routes[prefix];
            fx.skel
                .maps
                .mpt_res_in
                .update(id.as_bytes(), t.as_bytes(), MapFlags::ANY)
                .expect("write mpt_res");
        }
        let now = || {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: one timespec is written.
            unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
            ts.tv_sec as u32
        };
        let before = now();
        for hook in HOOKS {
            for (prefix, net, l4, group) in [
                ("100.65.50.0/24", "100.65.50", true, G4_RES),
                ("100.65.51.0/24", "100.65.51", false, G4_RES),
                ("100.65.52.0/24", "100.65.52", true, G4_RES_DEAD),
                ("100.65.53.0/24", "100.65.53", true, G4_RES),
            ] {
                let g = fx.group(group);
                let bounds: Vec<i32> = g.nexthops().iter().map(|n| n.upper_bound).collect();
                let has_table = prefix != "100.65.53.0/24";
                let mut differs = 0;
                let mut hit = [false; N as usize];
                for k in 0..400u32 {
                    let src = format!("10.0.{}.{}", k / 200, 1 + k % 200);
                    let dst = format!("{net}.{}", 1 + k % 7);
                    let sport = 2000 + k as u16;
                    let f = udp_frame(&src, &dst, sport, 53, 18);
                    let h = flow_hash(&key(&src, &dst, IPPROTO_UDP, sport, 53), l4, SEED);
                    let by_threshold = select(h, &bounds).expect("usable");
                    let b = bucket_of(h, N);
                    let want = match usize::from(t.nh[b]) {
                        i if has_table && bounds[i] >= 0 => {
                            hit[b] = true;
                            i
                        }
                        _ => by_threshold,
                    };
                    differs += usize::from(want != by_threshold);
                    let what = format!("{prefix} flow {src}:{sport} -> {dst} bucket {b}");
                    assert_eq!(
                        fx.fwd(hook, &f, &what),
                        fx.dev_name(g.nh[want].ifindex),
                        "{what} [{hook:?}]"
                    );
                }
                assert_eq!(differs > 0, has_table, "{prefix}: the table decided");
                if has_table {
                    let id = fx.routes[prefix];
                    let v = fx
                        .skel
                        .maps
                        .mpt_res_in
                        .lookup(id.as_bytes(), MapFlags::ANY)
                        .expect("read mpt_res")
                        .expect("the table");
                    let got = MptResTable::from_bytes(&v).expect("table");
                    assert_eq!(got.nh, t.nh, "the dataplane changed the table");
                    for (b, h) in hit.iter().enumerate() {
                        let u = got.used_s[b];
                        if *h {
                            assert!(u >= before && u <= now(), "{prefix} bucket {b}: used {u}");
                        } else if hook == HOOKS[0] {
                            assert_eq!(u, 0, "{prefix} bucket {b} was never hit");
                        }
                    }
                }
            }
        }
    });
}

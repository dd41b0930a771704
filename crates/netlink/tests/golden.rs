//! Golden netlink bytes: what we send for a command equals what `ip` (iproute2 6.1) sent for the
//! same command, captured with strace by `tests/golden/capture.sh`, modulo sequence number and
//! port id. In the capture namespace va has ifindex 3 and vb ifindex 5.

use std::net::IpAddr;

use mpt_model::{Algo, Nexthop, RouteKey, Verb};
use mpt_netlink::msg::rtnl::nexthop::{self, NexthopMsg, NexthopObject};
use mpt_netlink::msg::rtnl::route::{self, PathForm, RouteRequest};
use mpt_netlink::msg::{flags, Request};

const VA: u32 = 3;
const VB: u32 = 5;

fn golden(case: &str) -> Vec<u8> {
    let path = format!("{}/tests/golden/{case}.txt", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let line = text
        .lines()
        .find(|l| !l.starts_with('#') && !l.trim().is_empty())
        .unwrap_or_else(|| panic!("{path}: no hex line"));
    (0..line.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&line[i..i + 2], 16).expect("hex"))
        .collect()
}

fn ours(req: &Request, ack: bool) -> Vec<u8> {
    let mut r = req.clone();
    if ack {
        r.flags |= flags::ACK;
    }
    r.to_bytes(0, 0)
}

fn assert_golden(case: &str, req: &Request, ack: bool) {
    let mut want = golden(case);
    let got = ours(req, ack);
    // Sequence number and port id are not part of the comparison.
    want[8..16].fill(0);
    assert_eq!(
        hex(&got),
        hex(&want),
        "{case}: our bytes (left) differ from iproute2's (right)"
    );
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn nh(gw: &str, ifindex: u32, weight: u16) -> Nexthop {
    Nexthop {
        gateway: Some(gw.parse::<IpAddr>().expect("addr")),
        ifindex,
        weight,
        flags: 0,
    }
}

fn key(dst: &str, table: u32, metric: u32) -> RouteKey {
    RouteKey {
        dst: dst.parse().expect("prefix"),
        table,
        metric,
    }
}

#[allow(clippy::too_many_arguments)]
fn rr<'a>(
    verb: Verb,
    k: RouteKey,
    metric_given: bool,
    protocol: Option<u8>,
    nhs: &'a [Nexthop],
    form: PathForm,
) -> RouteRequest<'a> {
    RouteRequest {
        verb,
        key: k,
        metric_given,
        protocol,
        nexthops: nhs,
        form,
        algo: Algo::L3Hash,
        encap: None,
    }
}

#[test]
fn v4_single() {
    let n = [nh("10.1.0.2", VA, 1)];
    let k = key("198.51.100.0/24", 254, 0);
    let add = rr(Verb::Add, k, false, Some(250), &n, PathForm::Single);
    assert_golden("v4_single_add", &route::encode(&add), true);
    let del = rr(Verb::Del, k, false, Some(250), &n, PathForm::Single);
    assert_golden("v4_single_del", &route::encode(&del), true);
}

#[test]
fn v4_multipath_verbs() {
    let k = key("198.51.100.0/24", 100, 10);
    let a = [nh("10.1.0.2", VA, 2), nh("10.2.0.2", VB, 1)];
    let r = [nh("10.1.0.2", VA, 3), nh("10.2.0.2", VB, 1)];
    let c = [nh("10.1.0.2", VA, 1), nh("10.2.0.2", VB, 1)];
    let p = [nh("10.1.0.3", VA, 1), nh("10.2.0.3", VB, 1)];
    for (case, verb, nhs) in [
        ("v4_mp_add", Verb::Add, &a[..]),
        ("v4_mp_replace", Verb::Replace, &r[..]),
        ("v4_mp_change", Verb::Change, &c[..]),
        ("v4_mp_append", Verb::Append, &p[..]),
    ] {
        let req = rr(verb, k, true, Some(250), nhs, PathForm::Multipath);
        assert_golden(case, &route::encode(&req), true);
    }
    let del = rr(Verb::Del, k, true, None, &[], PathForm::Multipath);
    assert_golden("v4_mp_del", &route::encode(&del), true);
}

#[test]
fn v4_onlink_weight_256_and_big_table() {
    let mut first = nh("192.0.2.1", VA, 1);
    first.flags = mpt_model::route::RTNH_F_ONLINK;
    let n = [first, nh("10.2.0.2", VB, 256)];
    let req = rr(
        Verb::Add,
        key("203.0.113.0/24", 254, 0),
        false,
        Some(250),
        &n,
        PathForm::Multipath,
    );
    assert_golden("v4_onlink_add", &route::encode(&req), true);

    let n = [nh("10.1.0.2", VA, 1), nh("10.2.0.2", VB, 1)];
    let req = rr(
        Verb::Add,
        key("203.0.113.128/25", 1000, 0),
        false,
        Some(250),
        &n,
        PathForm::Multipath,
    );
    assert_golden("v4_table_big_add", &route::encode(&req), true);
}

#[test]
fn v6_multipath_and_single() {
    let k = key("2001:db8:100::/48", 254, 1024);
    let a = [nh("2001:db8:1::2", VA, 3), nh("2001:db8:2::2", VB, 1)];
    let req = rr(Verb::Add, k, true, Some(250), &a, PathForm::Multipath);
    assert_golden("v6_mp_add", &route::encode(&req), true);
    let r = [nh("2001:db8:1::2", VA, 1), nh("2001:db8:2::2", VB, 5)];
    let req = rr(Verb::Replace, k, true, Some(250), &r, PathForm::Multipath);
    assert_golden("v6_mp_replace", &route::encode(&req), true);
    let req = rr(Verb::Del, k, true, None, &[], PathForm::Multipath);
    assert_golden("v6_mp_del", &route::encode(&req), true);

    let s = [nh("2001:db8:1::2", VA, 1)];
    let req = rr(
        Verb::Add,
        key("2001:db8:200::/64", 254, 1024),
        false,
        Some(250),
        &s,
        PathForm::Single,
    );
    assert_golden("v6_single_add", &route::encode(&req), true);
}

#[test]
fn dumps() {
    use mpt_model::Family;
    assert_golden(
        "v4_dump",
        &route::dump_request(Some(Family::V4), Some(100)),
        false,
    );
    assert_golden(
        "v6_dump",
        &route::dump_request(Some(Family::V6), None),
        false,
    );
    assert_golden("nh_dump", &nexthop::dump_request(), false);
}

#[test]
fn nexthop_objects() {
    let single = |id, gw: &str, ifindex| NexthopMsg {
        id,
        protocol: 250,
        family: 2,
        object: NexthopObject::Single {
            gateway: Some(gw.parse().expect("addr")),
            ifindex,
            flags: 0,
        },
    };
    assert_golden(
        "nh_add",
        &nexthop::encode_new(&single(10, "10.1.0.2", VA), false),
        true,
    );
    assert_golden(
        "nh_add2",
        &nexthop::encode_new(&single(11, "10.2.0.2", VB), false),
        true,
    );
    let grp = NexthopMsg {
        id: 20,
        protocol: 250,
        family: 0,
        object: NexthopObject::Group(vec![(10, 2), (11, 1)]),
    };
    assert_golden("nh_grp_add", &nexthop::encode_new(&grp, false), true);
    assert_golden("nh_grp_del", &nexthop::encode_del(20), true);

    let k = key("192.0.2.128/25", 254, 0);
    let req = rr(Verb::Add, k, false, Some(250), &[], PathForm::Object(20));
    assert_golden("nh_route_add", &route::encode(&req), true);
}

#[test]
fn mp_algo_is_appended_only_when_not_default() {
    let k = key("198.51.100.0/24", 100, 10);
    let a = [nh("10.1.0.2", VA, 2), nh("10.2.0.2", VB, 1)];
    let mut req = rr(Verb::Add, k, true, Some(250), &a, PathForm::Multipath);
    req.algo = Algo::L4Hash;
    let got = ours(&route::encode(&req), true);
    let mut want = golden("v4_mp_add");
    want[8..16].fill(0);
    // RTA_MP_ALGO (14), u32 5, appended; nlmsg_len grows by 8.
    want.extend_from_slice(&[8, 0, 14, 0, 5, 0, 0, 0]);
    let len = want.len() as u32;
    want[0..4].copy_from_slice(&len.to_ne_bytes());
    assert_eq!(hex(&got), hex(&want));
}

#[test]
fn decode_what_we_encode() {
    let k = key("2001:db8:100::/48", 254, 1024);
    let a = [nh("2001:db8:1::2", VA, 3), nh("2001:db8:2::2", VB, 1)];
    let mut req = rr(Verb::Add, k, true, Some(250), &a, PathForm::Multipath);
    req.algo = Algo::PerPacket;
    let bytes = route::encode(&req).payload;
    let m = route::decode(&bytes).expect("decodes").expect("inet6");
    assert_eq!(m.route.key, k);
    assert_eq!(m.route.nexthops, a.to_vec());
    assert_eq!(m.route.algo, Some(Algo::PerPacket));
    assert_eq!(m.route.protocol, 250);
}

#[test]
fn decode_kernel_dump_reply_with_unknown_attributes() {
    // The first reply of `ip -4 route show table 100`, as the kernel sent it.
    let path = format!("{}/tests/golden/v4_dump.txt", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("fixture");
    let Some(hexline) = text.lines().find_map(|l| l.strip_prefix("# reply: ")) else {
        panic!("v4_dump.txt has no reply line");
    };
    let bytes: Vec<u8> = (0..hexline.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hexline[i..i + 2], 16).expect("hex"))
        .collect();
    let msgs = mpt_netlink::msg::messages(&bytes).expect("messages");
    let m = route::decode(msgs[0].payload)
        .expect("decodes")
        .expect("inet");
    assert_eq!(m.route.key.dst.to_string(), "198.51.100.0/24");
    assert_eq!(m.route.key.table, 100);
    assert_eq!(m.route.key.metric, 10);
    assert_eq!(m.route.nexthops.len(), 2);
    assert_eq!(
        m.route.nexthops[0].gateway,
        Some("10.1.0.3".parse().expect("addr"))
    );
    // An attribute type no decoder knows is kept raw, never an error.
    let mut payload = msgs[0].payload.to_vec();
    payload.extend_from_slice(&[8, 0, 200, 0, 1, 2, 3, 4]);
    let m2 = route::decode(&payload)
        .expect("unknown attr is fine")
        .expect("inet");
    assert!(m2
        .other
        .iter()
        .any(|(t, v)| *t == 200 && v == &[1, 2, 3, 4]));
}

#[test]
fn route_get_fibmatch() {
    // We ask for the acknowledgement the socket's request/answer loop ends on; ip does not.
    let mut req = route::get_request("198.51.100.7".parse().expect("addr"));
    assert_ne!(req.flags & flags::ACK, 0);
    req.flags &= !flags::ACK;
    assert_golden("v4_get_fibmatch", &req, false);
}

#[test]
fn route_get_of_a_flow() {
    // `mproute get`'s question to the kernel is ip route get's for the same flow
    let mut req = route::lookup_request(
        &route::Flow {
            dst: "198.51.100.7".parse().expect("addr"),
            src: Some("10.1.0.1".parse().expect("addr")),
            proto: Some(17),
            sport: Some(1000),
            dport: Some(2000),
            iif: None,
        },
        false,
    );
    assert_ne!(req.flags & flags::ACK, 0);
    req.flags &= !flags::ACK;
    assert_golden("v4_get", &req, false);
}

// ---- generic netlink and sock_diag ----------------------------------------------------------

#[test]
fn genl_family_resolution_equals_iproute2s() {
    // what `ip ila list` sends to resolve the family before anything else
    let req = mpt_netlink::msg::genl::ctrl::get_family_request("ila");
    assert_golden("genl_getfamily_ila", &req, false);
}

#[test]
fn packet_diag_dump_request_equals_ss() {
    use mpt_netlink::msg::diag::packet::{dump_request, show};
    let req =
        dump_request(show::INFO | show::RING_CFG | show::FANOUT | show::MEMINFO | show::FILTER);
    assert_golden("sockdiag_packet_dump", &req, false);
}

/// The `# reply:` line of a golden file, as bytes.
fn golden_reply(case: &str) -> Vec<u8> {
    let path = format!("{}/tests/golden/{case}.txt", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("# reply: "))
        .unwrap_or_else(|| panic!("{path}: no reply line"));
    (0..line.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&line[i..i + 2], 16).expect("hex"))
        .collect()
}

#[test]
fn packet_diag_answer_decodes_as_the_kernel_sent_it() {
    use mpt_netlink::msg::diag::packet;
    let bytes = golden_reply("sockdiag_packet_dump");
    let msgs = mpt_netlink::msg::messages(&bytes).expect("one message");
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0].ty, mpt_netlink::msg::diag::SOCK_DIAG_BY_FAMILY);
    let s = packet::decode(msgs[0].payload).expect("decodes");
    assert_eq!((s.sock_type, s.protocol, s.ino), (3, 0x0003, 0x000c_e165));
    assert_eq!(s.cookie, 0x1001);
    let info = s.info.expect("PACKET_DIAG_INFO");
    assert_eq!((info.ifindex, info.version, info.flags), (0, 0, 1));
    assert_eq!(s.uid, Some(0));
    assert_eq!(
        s.fanout,
        Some((42, 0)),
        "id 42, mode hash; no flags in diag"
    );
    let mem = s.meminfo.expect("PACKET_DIAG_MEMINFO");
    assert_eq!(mem[packet::meminfo::RCVBUF], 212_992);
    assert_eq!(mem[packet::meminfo::DROPS], 0);
    assert_eq!((s.rx_ring, s.tx_ring), (None, None));
}

#[test]
fn nlctrl_answer_decodes_field_by_field() {
    use mpt_netlink::msg::attr::AttrBuf;
    // A CTRL_CMD_NEWFAMILY answer, built by hand (the layout of genl_ctrl_event_fill):
    //   genlmsghdr: cmd 1 CTRL_CMD_NEWFAMILY, version 2, reserved 0
    //   CTRL_ATTR_FAMILY_ID (1) u16 0x1b, CTRL_ATTR_FAMILY_NAME (2) "ila\0",
    //   CTRL_ATTR_VERSION (3) u32 1, CTRL_ATTR_HDRSIZE (4) u32 0, CTRL_ATTR_MAXATTR (5) u32 9,
    //   CTRL_ATTR_OPS (6): nest of nests {CTRL_ATTR_OP_ID (1) u32, CTRL_ATTR_OP_FLAGS (2) u32}
    //   for ADD (1) and GET (3), CTRL_ATTR_MCAST_GROUPS (7): one {NAME (1) "g\0", ID (2) u32 5}.
    let mut b = AttrBuf::with_header(&[1, 2, 0, 0]);
    b.put_u16(1, 0x1b)
        .put_str(2, "ila")
        .put_u32(3, 1)
        .put_u32(4, 0)
        .put_u32(5, 9);
    let op = |id: u32| {
        let mut o = AttrBuf::default();
        o.put_u32(1, id).put_u32(2, 0x8);
        o.into_bytes()
    };
    let mut ops = AttrBuf::default();
    ops.put(0x8000 | 1, &op(1)).put(0x8000 | 2, &op(3));
    b.put(0x8000 | 6, ops.as_bytes());
    let mut g = AttrBuf::default();
    g.put_str(1, "g").put_u32(2, 5);
    let mut groups = AttrBuf::default();
    groups.put(0x8000 | 1, g.as_bytes());
    b.put(0x8000 | 7, groups.as_bytes());
    let f = mpt_netlink::msg::genl::ctrl::decode_family(b.as_bytes()).expect("decodes");
    assert_eq!(f.name, "ila");
    assert_eq!((f.id, f.version, f.hdrsize, f.maxattr), (0x1b, 1, 0, 9));
    assert_eq!(f.ops, [1, 3]);
    assert_eq!(f.mcast_groups, [("g".to_string(), 5)]);
    // an answer without the family id is an error, not a family 0
    let mut bad = AttrBuf::with_header(&[1, 2, 0, 0]);
    bad.put_str(2, "ila");
    assert!(mpt_netlink::msg::genl::ctrl::decode_family(bad.as_bytes()).is_err());
}

// ---- ILA ----------------------------------------------------------------------------------

/// Zero the padding after every attribute in `b[start..end]`, nested ones too (`NLA_F_NESTED`).
fn zero_padding(b: &mut [u8], start: usize, end: usize) {
    let mut off = start;
    while off + 4 <= end {
        let len = usize::from(u16::from_ne_bytes([b[off], b[off + 1]]));
        let ty = u16::from_ne_bytes([b[off + 2], b[off + 3]]);
        if len < 4 || off + len > end {
            return;
        }
        if ty & 0x8000 != 0 {
            zero_padding(b, off + 4, off + len);
        }
        let padded = (off + len + 3) & !3;
        for x in b.iter_mut().take(padded.min(end)).skip(off + len) {
            *x = 0;
        }
        off = padded;
    }
}

/// [`assert_golden`] for a route message whose attribute padding iproute2 left uninitialised
/// (its nested `encap` attributes are built in a stack buffer it does not clear).
fn assert_golden_unpadded(case: &str, req: &Request, ack: bool) {
    let mut want = golden(case);
    let mut got = ours(req, ack);
    want[8..16].fill(0);
    let (wl, gl) = (want.len(), got.len());
    zero_padding(&mut want, 28, wl);
    zero_padding(&mut got, 28, gl);
    assert_eq!(
        hex(&got),
        hex(&want),
        "{case}: our bytes (left) differ from iproute2's (right), padding aside"
    );
}

fn loc(s: &str) -> mpt_model::ila::Locator {
    s.parse().expect("locator")
}

#[test]
fn ila_routes_equal_iproute2s_encap_ila() {
    use mpt_model::ila::{CsumMode, HookType, IdentType};
    use mpt_netlink::msg::genl::ila::encap::{self, Encap, LWTUNNEL_ENCAP_ILA};
    use mpt_netlink::msg::rtnl::route::LwtEncap;
    // ip -6 route add 2001:db8:1:2:2000::7/128 encap ila 2001:db8:ff:1 csum-mode adj-transport
    //   ident-type use-format hook-type output via 2001:db8:1::2 dev va proto 247
    let attrs = encap::encode(&Encap {
        locator: loc("2001:db8:ff:1"),
        csum_mode: Some(CsumMode::AdjustTransport),
        ident_type: Some(IdentType::UseFormat),
        hook_type: Some(HookType::Output),
    });
    let n = [nh("2001:db8:1::2", VA, 1)];
    let mut r = rr(
        Verb::Add,
        key("2001:db8:1:2:2000::7/128", 254, 1024),
        false,
        Some(247),
        &n,
        PathForm::Single,
    );
    r.encap = Some(LwtEncap {
        kind: LWTUNNEL_ENCAP_ILA,
        attrs: &attrs,
    });
    assert_golden_unpadded("ila_route_add", &route::encode(&r), true);
    // only the locator given; a device route (proto boot, iproute2's default)
    let attrs = encap::encode(&Encap {
        locator: loc("2001:db8:ff:2"),
        csum_mode: None,
        ident_type: None,
        hook_type: None,
    });
    let n = [Nexthop {
        gateway: None,
        ifindex: VB,
        weight: 1,
        flags: 0,
    }];
    let mut r = rr(
        Verb::Add,
        key("2001:db8:1:3::/64", 254, 1024),
        false,
        Some(3),
        &n,
        PathForm::Single,
    );
    r.encap = Some(LwtEncap {
        kind: LWTUNNEL_ENCAP_ILA,
        attrs: &attrs,
    });
    assert_golden_unpadded("ila_route_add_min", &route::encode(&r), true);
    // and the nested attributes decode back
    let e = encap::decode(&attrs).expect("decodes");
    assert_eq!((e.locator, e.csum_mode), (loc("2001:db8:ff:2"), None));
}

/// The genl "ila" requests `ip ila` would send, built by hand from its source (the family
/// does not exist on this kernel, so nothing can be captured): nlmsghdr, genlmsghdr, then the
/// attributes in ipila.c's order. Family id 0x1b stands for whatever the controller answers.
#[test]
fn ila_genl_requests_field_by_field() {
    use mpt_model::ila::{CsumMode, IdentType};
    use mpt_netlink::msg::genl::ila::{self, MappingAttrs};
    let fam: u16 = 0x1b;
    // ip ila add loc_match 2001:0:119:0 loc 3333:0:0:1 dev (ifindex 5) csum-mode neutral-map-auto
    //   ident-type use-format
    let add = ila::add(
        fam,
        &MappingAttrs {
            locator_match: Some(loc("2001:0:119:0")),
            locator: Some(loc("3333:0:0:1")),
            ifindex: Some(5),
            csum_mode: Some(CsumMode::NeutralMapAuto),
            ident_type: Some(IdentType::UseFormat),
        },
    );
    let want: Vec<u8> = [
        &[0x44, 0, 0, 0][..],                      // nlmsg_len 68
        &[0x1b, 0][..],                            // nlmsg_type: the family id
        &[0x05, 0][..],     // NLM_F_REQUEST | NLM_F_ACK (the ack added when sent)
        &[0; 8][..],        // seq, pid
        &[1, 1, 0, 0][..],  // genlmsghdr: cmd ILA_CMD_ADD, version 1
        &[12, 0, 3, 0][..], // ILA_ATTR_LOCATOR_MATCH, u64
        &[0x20, 0x01, 0, 0, 0x01, 0x19, 0, 0][..], // 2001:0:119:0 in wire order
        &[12, 0, 1, 0][..], // ILA_ATTR_LOCATOR, u64
        &[0x33, 0x33, 0, 0, 0, 0, 0, 1][..], // 3333:0:0:1
        &[8, 0, 4, 0, 5, 0, 0, 0][..], // ILA_ATTR_IFINDEX 5
        &[5, 0, 7, 0, 3, 0, 0, 0][..], // ILA_ATTR_CSUM_MODE neutral-map-auto (3), padded
        &[5, 0, 8, 0, 32, 0, 0, 0][..], // ILA_ATTR_IDENT_TYPE use-format (32), padded
    ]
    .concat();
    assert_eq!(hex(&ours(&add, true)), hex(&want));
    // ip ila del loc_match 2001:0:119:0: the match alone
    let del = ila::del(
        fam,
        &MappingAttrs {
            locator_match: Some(loc("2001:0:119:0")),
            ..MappingAttrs::default()
        },
    );
    let want: Vec<u8> = [
        &[0x20, 0, 0, 0, 0x1b, 0, 0x05, 0][..],
        &[0; 8][..],
        &[2, 1, 0, 0][..], // ILA_CMD_DEL
        &[12, 0, 3, 0, 0x20, 0x01, 0, 0, 0x01, 0x19, 0, 0][..],
    ]
    .concat();
    assert_eq!(hex(&ours(&del, true)), hex(&want));
    // ip ila list: ILA_CMD_GET with NLM_F_DUMP, no attributes
    let dump = ila::dump(fam);
    let want: Vec<u8> = [
        &[0x14, 0, 0, 0, 0x1b, 0, 0x01, 0x03][..],
        &[0; 8][..],
        &[3, 1, 0, 0][..],
    ]
    .concat();
    assert_eq!(hex(&ours(&dump, false)), hex(&want));
    // one mapping: ILA_CMD_GET without NLM_F_DUMP, its key (match, device); the kernel
    // answers the mapping, or ESRCH
    let get = ila::get(
        fam,
        &MappingAttrs {
            locator_match: Some(loc("2001:0:119:0")),
            ifindex: Some(7),
            ..MappingAttrs::default()
        },
    );
    let want: Vec<u8> = [
        &[0x28, 0, 0, 0, 0x1b, 0, 0x05, 0][..], // 40 bytes, REQUEST | ACK
        &[0; 8][..],
        &[3, 1, 0, 0][..], // ILA_CMD_GET, version 1
        &[12, 0, 3, 0, 0x20, 0x01, 0, 0, 0x01, 0x19, 0, 0][..], // LOCATOR_MATCH
        &[8, 0, 4, 0, 7, 0, 0, 0][..], // IFINDEX 7
    ]
    .concat();
    assert_eq!(hex(&ours(&get, true)), hex(&want));
    // flush: ILA_CMD_FLUSH, no attributes
    let flush = ila::flush(fam);
    let want: Vec<u8> = [
        &[0x14, 0, 0, 0, 0x1b, 0, 0x05, 0][..],
        &[0; 8][..],
        &[4, 1, 0, 0][..],
    ]
    .concat();
    assert_eq!(hex(&ours(&flush, true)), hex(&want));
}

#[test]
fn ila_genl_answer_decodes_with_the_kernels_defaults() {
    use mpt_model::ila::{CsumMode, IdentType};
    use mpt_netlink::msg::genl::ila;
    // One mapping of a dump, as ila_fill_info() writes it: LOCATOR and LOCATOR_MATCH as u64
    // (each may be preceded by an ILA_ATTR_PAD for alignment), IFINDEX s32, CSUM_MODE,
    // IDENT_TYPE u8.
    let answer: Vec<u8> = [
        &[3, 1, 0, 0][..],                                // cmd ILA_CMD_GET, version 1
        &[4, 0, 6, 0][..],                                // ILA_ATTR_PAD
        &[12, 0, 1, 0, 0x33, 0x33, 0, 0, 0, 0, 0, 1][..], // LOCATOR 3333:0:0:1
        &[4, 0, 6, 0][..],                                // ILA_ATTR_PAD
        &[12, 0, 3, 0, 0x20, 0x01, 0, 0, 0x01, 0x19, 0, 0][..], // LOCATOR_MATCH 2001:0:119:0
        &[8, 0, 4, 0, 0, 0, 0, 0][..],                    // IFINDEX 0: any device
        &[5, 0, 7, 0, 0, 0, 0, 0][..],                    // CSUM_MODE adj-transport (0)
        &[5, 0, 8, 0, 1, 0, 0, 0][..],                    // IDENT_TYPE luid (1)
    ]
    .concat();
    let m = ila::decode(&answer).expect("decodes");
    assert_eq!(m.locator, loc("3333:0:0:1"));
    assert_eq!(m.locator_match, loc("2001:0:119:0"));
    assert_eq!(m.ifindex, 0);
    assert_eq!(m.csum_mode, CsumMode::AdjustTransport);
    assert_eq!(m.ident_type, IdentType::Luid);
    // without mode and type: the kernel's defaults
    let bare: Vec<u8> = [
        &[3, 1, 0, 0][..],
        &[12, 0, 1, 0, 0x33, 0x33, 0, 0, 0, 0, 0, 1][..],
        &[12, 0, 3, 0, 0x20, 0x01, 0, 0, 0x01, 0x19, 0, 0][..],
    ]
    .concat();
    let m = ila::decode(&bare).expect("decodes");
    assert_eq!(
        (m.csum_mode, m.ident_type),
        (CsumMode::NoAction, IdentType::UseFormat)
    );
    assert!(
        ila::decode(&bare[..16]).is_err(),
        "a mapping without its locator"
    );
}

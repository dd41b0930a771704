//! Golden netlink bytes: what we send for a command equals what `ip` (iproute2 6.1) sent for the
//! same command, captured with strace by `tests/golden/capture.sh`, modulo sequence number and
//! port id. In the capture namespace va has ifindex 3 and vb ifindex 5.

use std::net::IpAddr;

use mpt_model::{Algo, Nexthop, RouteKey, Verb};
use mpt_netlink::msg::nexthop::{self, NexthopMsg, NexthopObject};
use mpt_netlink::msg::route::{self, PathForm, RouteRequest};
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

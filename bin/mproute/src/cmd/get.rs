//! `mproute get ADDR [from SRC] [ipproto P] [sport S] [dport D] [table T]`: the nexthop the
//! dataplane picks for such a packet and the flow hash, computed in user space from the same
//! definition (`mpt_model::hash`) as the BPF program's.

use mpt_cli::Failure;
use mpt_model::Algo;

use crate::grammar::GetSpec;
use crate::resolve;
use crate::session::Session;
use crate::view::Output;

/// Answer for one address.
pub fn run(s: &mut Session, g: &GetSpec) -> Result<Output, Failure> {
    let table = resolve::table(g.table.as_deref())?;
    let what = format!("get {}", g.dst);
    let enforced = s.enforced_by()?;
    let store = s
        .store(false)?
        .ok_or_else(|| Failure::system(format!("{what}: no route managed by mproute covers it")))?;
    let raw = store.bpf();
    let ctx = |e| Failure::bpf(&what, e);
    let rt = raw
        .dp_lookup(table, g.dst)
        .map_err(ctx)?
        .ok_or_else(|| Failure::system(format!("{what}: no route managed by mproute covers it")))?;
    let group = raw
        .dp_group(rt.group)
        .map_err(ctx)?
        .ok_or_else(|| Failure::system(format!("{what}: the route has no nexthop group")))?;
    let seed = raw.hash_seed().map_err(ctx)?;
    let algo = rt.algo;
    let key = rt.id;
    let table = if rt.resilient {
        raw.res_get(&key).map_err(ctx)?
    } else {
        None
    };
    // (the flag is kept by verifications, which run while a dataplane is attached)
    if rt.flags.drift && matches!(enforced, "xdp" | "tc") {
        return Err(Failure::system(format!(
            "{what}: the kernel's route {} (metric {}) is no longer the one mproute installed, \
             so the kernel forwards it",
            key.dst, key.metric
        ))
        .hint("\"mproute sync\" takes its nexthops from the FIB or forgets it"));
    }
    let enforced = s.route_enforced_by(enforced, &key)?;
    let src = g.src.unwrap_or(match g.dst {
        std::net::IpAddr::V4(_) => std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        std::net::IpAddr::V6(_) => std::net::IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
    });
    let fk = mpt_model::hash::FlowKey::from_addrs(src, g.dst, g.proto, g.sport, g.dport)
        .ok_or_else(|| Failure::usage(format!("{what}: source and destination families differ")))?;
    let hash_algo = matches!(algo, Algo::L3Hash | Algo::L4Hash);
    let mut bucket = None;
    let nhs = &group[..];
    let (hash, index) = if hash_algo {
        // as the dataplane: the route's recipe (its fields, else the algorithm's; its seed,
        // else the namespace's), the ports of TCP, UDP and SCTP
        let fields = rt.recipe.fields_for(algo == Algo::L4Hash);
        let l4 = mpt_model::hash::is_l4_proto(g.proto);
        let h = mpt_model::hash::flow_hash_fields(&fk, l4, rt.recipe.seed_or(seed), fields);
        let bounds: Vec<i32> = nhs.iter().map(|n| n.upper_bound).collect();
        let by_threshold = mpt_model::route::threshold::select(h, &bounds);
        // as the dataplane's mpt_pick_bucket: the bucket's nexthop if it is usable
        let idx = match &table {
            Some(t) if t.buckets() > 0 => {
                let b = mpt_model::route::resilient::bucket_of(h, t.buckets());
                bucket = Some(b);
                t.nexthop_of(b)
                    .filter(|i| nhs.get(*i).is_some_and(|n| n.upper_bound >= 0))
                    .or(by_threshold)
            }
            _ => by_threshold,
        };
        (Some(h), idx)
    } else {
        (None, None)
    };
    let nhs = nhs.to_vec();
    let mut ifname = |i: u32| mpt_sys::iface::name(i);
    let mut row =
        crate::view::GetRow::new(g.dst, &key, algo, hash, index, &nhs, enforced, &mut ifname);
    row.bucket = bucket;
    // The kernel's flags of each path (dead, linkdown): a packet for a dead nexthop is
    // handed to the kernel, which forwards it by a live one.
    if let Some(r) = s.find(&key)? {
        row.set_flags(&nhs, &r);
    }
    if let Some(k) = kernel_choice(s, g, &key)? {
        let (gw, ifindex) = k;
        let dev = if ifindex == 0 {
            None
        } else {
            mpt_sys::iface::name(ifindex).or_else(|| Some(format!("if{ifindex}")))
        };
        row.set_kernel(gw, dev, ifindex_of(&nhs, index) == Some((gw, ifindex)));
    }
    Ok(Output::Get(Box::new(row)))
}

/// The chosen nexthop's gateway and device.
fn ifindex_of(
    nhs: &[mpt_bpf::mproute::route_table::GroupNexthop],
    index: Option<usize>,
) -> Option<(Option<std::net::IpAddr>, u32)> {
    index
        .and_then(|i| nhs.get(i))
        .map(|n| (n.gateway, n.ifindex))
}

/// What the kernel's own lookup answers for the same flow, as `ip route get` asks it
/// (RTM_GETROUTE): the path its multipath hash picks (gateway, device). `None` where the
/// kernel has no answer for the flow (a source that is not local without `iif`: EINVAL;
/// unreachable): there is nothing to compare with.
fn kernel_choice(
    s: &mut Session,
    g: &GetSpec,
    key: &mpt_model::RouteKey,
) -> Result<Option<(Option<std::net::IpAddr>, u32)>, Failure> {
    use mpt_netlink::msg::rtnl::route as rmsg;
    let iif = match g.iif.as_deref() {
        Some(d) => Some(
            mpt_sys::iface::index(d)
                .map_err(|e| Failure::usage(format!("get {}: iif {d}: {e}", g.dst)))?,
        ),
        None => None,
    };
    let flow = rmsg::Flow {
        dst: g.dst,
        src: g.src,
        proto: (g.proto != 0).then_some(g.proto),
        sport: (g.sport != 0).then_some(g.sport),
        dport: (g.dport != 0).then_some(g.dport),
        iif,
    };
    let what = format!("look up {} in the kernel", g.dst);
    let mut ask = |fib_match: bool| -> Result<Option<rmsg::RouteMsg>, Failure> {
        let payloads = match s
            .sock()?
            .dump(&rmsg::lookup_request(&flow, fib_match), &what)
        {
            Ok(p) => p,
            Err(mpt_netlink::Error::Kernel(_)) => return Ok(None),
            Err(e) => return Err(Failure::from(e)),
        };
        for p in payloads {
            if let Some(m) =
                rmsg::decode(&p).map_err(|e| Failure::system(format!("{what}: {e}")))?
            {
                return Ok(Some(m));
            }
        }
        Ok(None)
    };
    // Only an answer from the same route compares: the kernel's lookup goes by its rules
    // (main first), and a more specific route mproute does not manage may match before it.
    match ask(true)? {
        Some(m) if m.route.key == *key => {}
        _ => return Ok(None),
    }
    Ok(ask(false)?.and_then(|m| m.route.nexthops.first().map(|n| (n.gateway, n.ifindex))))
}

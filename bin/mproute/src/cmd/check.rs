//! `--check`: the dry run. Each command is parsed, resolved and compared with the kernel as it
//! would be run, and answers with what it would change ([`CheckReport`]: `changed`, the route
//! before and after); nothing is written: no FIB request, no map update, no attachment, and
//! no state is created (the state is read without its lock).
//!
//! The lines of a batch see what the lines before them would have done: a route a dry `add`
//! would install is in the session's FIB cache and its state in `check_state`, so that `add`
//! then `replace` of one prefix predicts EEXIST for neither and `del` after `add` finds it.
//! `flush` and `sync` see the namespace as it is.
//!
//! The kernel's refusals predicted beforehand are those it decides from what is already there:
//! a device missing or down ("Nexthop device is not up"), a gateway no connected route of the
//! device reaches ("Nexthop has invalid gateway"), `add` of a route that exists, `change` or
//! `del` of one that does not. They are reported in the words of the real refusal, exit 2.
//! Anything else (a full table, a resource limit) shows only when the command is run.

use std::collections::BTreeMap;

use mpt_bpf::mproute::dataplane::{self as dp, Mode};
use mpt_cli::predict::refusal;
use mpt_cli::Failure;
use mpt_model::route::plan::{self, Plan};
use mpt_model::route::RTNH_F_ONLINK;
use mpt_model::{Family, Route, MPROUTE_PROTO};
use mpt_netlink::msg::rtnl::route::{self as rmsg, PathForm};

use crate::attachment::Setting;
use crate::cli::Command;
use crate::grammar::{AttachMode, DpSpec, RouteSpec};
use crate::resolve::{self, Resolved};
use crate::session::Session;
use crate::store::Managed;
use crate::txn::{group_is_route, op_name, DelTarget};
use crate::view::Output;
use crate::view::{CheckReport, Diff, RouteRow};

/// Run one command as a dry run.
pub fn run(s: &mut Session, c: &Command) -> Result<Output, Failure> {
    match c {
        Command::Write(spec) => write(s, spec),
        Command::Del(spec) => del(s, spec),
        Command::Flush(spec) => {
            let steps = super::flush::plan(s, spec)?;
            Ok(super::flush::report(&steps, true))
        }
        Command::Sync { reset } => super::sync::dry(s, *reset),
        Command::Show(spec) => crate::cmd::show::run(s, spec),
        Command::Get(spec) => crate::cmd::get::run(s, spec),
        Command::Metrics => crate::cmd::metrics::run(s),
        Command::Save => crate::cmd::save::run(s),
        Command::Dataplane(DpSpec::Show) => crate::cmd::dataplane::run(s, &DpSpec::Show),
        Command::Dataplane(DpSpec::Attach {
            devs,
            mode,
            fastpath,
            peer,
            ..
        }) => attach(s, devs, Some((*mode, *fastpath, *peer))),
        Command::Dataplane(DpSpec::Detach { devs }) => attach(s, devs, None),
        Command::Dataplane(DpSpec::Watch) => Err(Failure::usage(
            "dataplane watch: a daemon, with nothing to check (--check runs commands that change something)",
        )),
    }
}

fn ifname(i: u32) -> Option<String> {
    mpt_sys::iface::name(i)
}

/// The row a route is shown with (who enforces it left out: a dry run does not attach).
fn row(r: &Route, m: Option<&Managed>) -> RouteRow {
    let mut r = r.clone();
    r.algo = m.map(|m| m.algo);
    let mut row = RouteRow::new(&r, m.is_some(), None, &mut ifname);
    if let Some(m) = m {
        row.set_recipe(&m.recipe);
    }
    row
}

/// `add`, `replace`, `append`, `change`, decided by the planner the real run follows
/// ([`mpt_model::route::plan`]), on what is there with the earlier lines played in.
fn write(s: &mut Session, spec: &RouteSpec) -> Result<Output, Failure> {
    let r = resolve::resolve(spec)?;
    let op = op_name(spec.verb, &r.key);
    kernel_would_take(s, &op, &r)?;
    let before = s.find(&r.key)?;
    let before_m = s.managed(&r.key)?.filter(|m| {
        before
            .as_ref()
            .is_some_and(|b| crate::txn::installed_as(m, b))
    });
    let protocol = r.proto.unwrap_or(MPROUTE_PROTO);
    let mut before_row = before.as_ref().map(|b| row(b, before_m.as_ref()));
    if let (Some(st), Some(b)) = (s.store(false)?, before_row.as_mut()) {
        if before_m.is_some() {
            if let Some(t) = st
                .bpf()
                .res_get(&r.key)
                .map_err(|e| Failure::bpf("read the dataplane's tables", e))?
            {
                crate::view::set_resilient(b, &t, false);
            }
        }
    }
    let want = crate::txn::want(spec.verb, &r, protocol);
    // as the real run: append keeps the route's recipe unless one is written
    let recipe = match (spec.verb, r.recipe.is_default(), before_m) {
        (mpt_model::Verb::Append, true, Some(o)) => o.recipe,
        _ => r.recipe,
    };
    let mut facts = Facts {
        s,
        key: r.key,
        fib: before.clone(),
        state: before_m,
        resilient: r.resilient,
        recipe,
    };
    let (algo, nexthops, alternative) = match plan::plan(&want, &mut facts)? {
        Plan::Unchanged { .. } => {
            let rep = CheckReport::route(
                spec.verb.name(),
                &r.key,
                false,
                before_row.as_ref(),
                before_row.as_ref(),
            );
            return Ok(Output::Check(Box::new(rep)));
        }
        Plan::Write {
            refused: Some(errno),
            ..
        } => return Err(refusal(&op, errno, None)),
        Plan::Write {
            algo,
            nexthops,
            alternative,
            refused: None,
        } => (algo, nexthops, alternative),
    };
    let after = Route {
        key: r.key,
        protocol,
        // a route whose paths are all devices is a link-scope route, as the kernel makes it
        scope: if nexthops.iter().all(|n| n.gateway.is_none()) {
            253
        } else {
            0
        },
        rtype: rmsg::RTN_UNICAST,
        nexthops,
        nh_id: None,
        algo: None,
    };
    let m = Managed {
        algo,
        nh_count: after.nexthops.len().min(255) as u8,
        group: 0,
        protocol,
        recipe,
    };
    let moved = moved_share(s, &r, before_m.as_ref(), &m, &after.nexthops)?;
    let mut after_row = row(&after, Some(&m));
    after_row.resilient =
        r.resilient
            .filter(|p| !p.consistent)
            .map(|p| crate::view::ResilientRow {
                buckets: p.buckets,
                idle_timer: p.idle_timer,
            });
    after_row.consistent =
        r.resilient
            .filter(|p| p.consistent)
            .map(|p| crate::view::ConsistentRow {
                table_size: p.buckets,
                table: None,
            });
    let rep = if alternative {
        CheckReport::route(spec.verb.name(), &r.key, true, None, Some(&after_row))
    } else {
        s.cache_set(&r.key, Some(after));
        s.check_state.insert(r.key, Some(m));
        CheckReport::route(
            spec.verb.name(),
            &r.key,
            true,
            before_row.as_ref(),
            Some(&after_row),
        )
    };
    let mut rep = rep;
    rep.moved = moved;
    Ok(Output::Check(Box::new(rep)))
}

/// A nexthop as the disruption plan names it within this router: gateway, else device.
type NhId = (Option<std::net::IpAddr>, u32);

fn nh_id(gateway: Option<std::net::IpAddr>, ifindex: u32) -> NhId {
    (gateway, if gateway.is_some() { 0 } else { ifindex })
}

/// The hash a managed route's flows are spread by: l4 or not, its fields, its seed.
fn hash_of(m: &Managed, ns_seed: u32) -> Option<(mpt_model::hash::HashFields, u32)> {
    use mpt_model::Algo;
    matches!(m.algo, Algo::L3Hash | Algo::L4Hash).then(|| {
        (
            m.recipe.fields_for(m.algo == Algo::L4Hash),
            m.recipe.seed_or(ns_seed),
        )
    })
}

/// The disruption plan of a change of a hashed route: the share of the flow space whose
/// nexthop changes (`mpt_model::route::spread`), from the dataplane's table or bounds before
/// and the ones the change writes. `None` where the route is not hashed on either side, or
/// what the dataplane holds for it is not known (a new route, one an earlier line of the dry
/// run wrote, no state).
fn moved_share(
    s: &mut Session,
    r: &Resolved,
    before: Option<&Managed>,
    after: &Managed,
    nexthops: &[mpt_model::Nexthop],
) -> Result<Option<f64>, Failure> {
    use mpt_model::route::spread::{self, Spread};
    let (Some(before), false) = (before, s.check_state.contains_key(&r.key)) else {
        return Ok(None);
    };
    let Some(st) = s.store(false)? else {
        return Ok(None);
    };
    let raw = st.bpf();
    let ctx = |e| Failure::bpf("read the dataplane's tables", e);
    let ns_seed = raw.hash_seed().map_err(ctx)?;
    let (Some(hb), Some(ha)) = (hash_of(before, ns_seed), hash_of(after, ns_seed)) else {
        return Ok(None);
    };
    let Some(e) = raw
        .dp_get_route(&r.key)
        .map_err(ctx)?
        .filter(|e| e.id == r.key)
    else {
        return Ok(None);
    };
    let Some(group) = raw.dp_group(e.group).map_err(ctx)? else {
        return Ok(None);
    };
    let ids: Vec<NhId> = group.iter().map(|n| nh_id(n.gateway, n.ifindex)).collect();
    let table_spread = |t: &mpt_bpf::mproute::resilient::ResTable, ids: &[NhId]| {
        Spread::Table(
            t.assignment()
                .iter()
                .map(|i| ids.get(usize::from(*i)).copied().unwrap_or((None, 0)))
                .collect(),
        )
    };
    let old = match raw.res_get(&r.key).map_err(ctx)? {
        Some(t) => table_spread(&t, &ids),
        None => Spread::Threshold(
            group
                .iter()
                .map(|n| (nh_id(n.gateway, n.ifindex), n.upper_bound))
                .collect(),
        ),
    };
    let new_ids: Vec<NhId> = nexthops
        .iter()
        .map(|n| nh_id(n.gateway, n.ifindex))
        .collect();
    let new = match r.resilient {
        Some(p) => {
            let t = crate::resilient::table_for(
                raw,
                &r.key,
                nexthops,
                p,
                after.recipe.seed.unwrap_or(0),
            )?;
            table_spread(&t, &new_ids)
        }
        None => {
            let w: Vec<u32> = nexthops.iter().map(|n| u32::from(n.weight)).collect();
            let b = mpt_model::route::threshold::upper_bounds(&w, &vec![true; w.len()]);
            Spread::Threshold(new_ids.into_iter().zip(b).collect())
        }
    };
    Ok(Some(if hb == ha {
        spread::moved(&old, &new)
    } else {
        spread::moved_rehashed(&old, &new)
    }))
}

/// What is there for the dry run's planner: the FIB and the state with the earlier lines of
/// the dry run played in (the session's cache and `check_state`).
struct Facts<'s> {
    s: &'s mut Session,
    key: mpt_model::RouteKey,
    fib: Option<Route>,
    state: Option<Managed>,
    resilient: Option<crate::grammar::Resilient>,
    recipe: mpt_model::hash::HashRecipe,
}

impl plan::Known for Facts<'_> {
    type Error = Failure;
    fn fib(&mut self) -> Result<Option<Route>, Failure> {
        Ok(self.fib.clone())
    }
    fn algo(&mut self) -> Result<Option<mpt_model::Algo>, Failure> {
        Ok(self.state.map(|m| m.algo))
    }
    fn dataplane_agrees(&mut self, cur: &Route) -> Result<bool, Failure> {
        let Some(m) = self.state else {
            return Ok(false);
        };
        if m.recipe != self.recipe {
            return Ok(false);
        }
        // a route an earlier line wrote is in sync by construction
        let written = self.s.check_state.contains_key(&self.key);
        let Some(st) = self.s.store(false)? else {
            return Ok(written && self.resilient.is_none());
        };
        let in_sync = written || group_is_route(st.bpf(), m.group, cur);
        Ok(in_sync && crate::resilient::same_params(st.bpf(), &self.key, self.resilient)?)
    }
}

/// `del`, as [`Session::del_target`] decides it; later lines see the route gone.
fn del(s: &mut Session, spec: &RouteSpec) -> Result<Output, Failure> {
    let rep = match s.txn().del_target(spec)? {
        DelTarget::Stale(k) => CheckReport::route("del", &k, true, None, None),
        DelTarget::Route(route, m) => {
            let before = row(&route, m.as_ref());
            s.cache_set(&route.key, None);
            s.check_state.insert(route.key, None);
            CheckReport::route("del", &route.key, true, Some(&before), None)
        }
    };
    Ok(Output::Check(Box::new(rep)))
}

/// What the kernel decides from what is there already, nexthop by nexthop
/// ([`mpt_cli::predict::nexthop`]).
fn kernel_would_take(s: &mut Session, op: &str, r: &Resolved) -> Result<(), Failure> {
    let v4 = r.key.family() == Family::V4;
    // rtm_to_fib6_multipath_config(), before any nexthop is looked at
    if !v4 && r.form == PathForm::Multipath && r.nexthops.iter().any(|n| n.gateway.is_none()) {
        return Err(refusal(
            op,
            libc::EINVAL,
            Some("Device only routes can not be added for IPv6 using the multipath API."),
        ));
    }
    for nh in &r.nexthops {
        let onlink = nh.flags & RTNH_F_ONLINK != 0;
        mpt_cli::predict::nexthop(s.sock()?, op, v4, nh.gateway, nh.ifindex, onlink)?;
    }
    Ok(())
}

/// `dataplane attach` (`mode`, fastpath, peer) or `detach` (`None`) as a dry run: changed
/// when a hook, fastpath or the veth peers the tc program delivers into would differ.
fn attach(
    s: &mut Session,
    devs: &[String],
    mode: Option<(AttachMode, bool, bool)>,
) -> Result<Output, Failure> {
    let verb = if mode.is_some() { "attach" } else { "detach" };
    let links = crate::hook::links(s.sock()?)?;
    let att = dp::attachments().map_err(|e| Failure::bpf("list dataplane attachments", e))?;
    let set_all = crate::attachment::settings(&att)?;
    let peers = match mode {
        Some((_, _, true)) => {
            let mut p = crate::hook::peer_ports(s.sock()?, &links)?;
            p.sort_unstable();
            p
        }
        _ => Vec::new(),
    };
    let mut set_before = BTreeMap::new();
    let mut set_after = BTreeMap::new();
    for d in devs {
        let Some(l) = links.iter().find(|l| &l.name == d) else {
            return Err(Failure::system(format!(
                "dataplane {verb}: cannot find device \"{d}\" [ENODEV]"
            )));
        };
        set_before.insert(d.clone(), set_all.get(d).cloned().unwrap_or_default());
        let want: Vec<Setting> = match mode {
            None => Vec::new(),
            Some((m, fastpath, _)) => {
                let m = match m {
                    AttachMode::Xdp => Mode::Xdp,
                    AttachMode::XdpGeneric => Mode::XdpGeneric,
                    AttachMode::Tc => Mode::Tc,
                    AttachMode::Auto => crate::hook::auto_mode(l).0,
                };
                let mut v = vec![Setting {
                    hook: Mode::Tc.name(),
                    fastpath,
                    peers: peers.clone(),
                }];
                if m != Mode::Tc {
                    v.push(Setting {
                        hook: m.name(),
                        fastpath,
                        peers: Vec::new(),
                    });
                }
                v.sort();
                v
            }
        };
        set_after.insert(d.clone(), want);
    }
    let hooks = |m: &BTreeMap<String, Vec<Setting>>| -> BTreeMap<String, Vec<&'static str>> {
        m.iter()
            .map(|(d, v)| {
                let mut h: Vec<&'static str> = v.iter().map(|x| x.hook).collect();
                h.sort_unstable();
                (d.clone(), h)
            })
            .collect()
    };
    // per device: fastpath (absent where nothing is attached) and the peers delivered into
    let extras = |m: &BTreeMap<String, Vec<Setting>>| {
        let fastpath: BTreeMap<String, bool> = m
            .iter()
            .filter_map(|(d, v)| v.first().map(|x| (d.clone(), x.fastpath)))
            .collect();
        let peer_devs: BTreeMap<String, Vec<String>> = m
            .iter()
            .filter_map(|(d, v)| {
                v.iter().find(|x| x.hook == Mode::Tc.name()).map(|x| {
                    let names = x
                        .peers
                        .iter()
                        .map(|i| mpt_sys::iface::name(*i).unwrap_or_else(|| format!("if{i}")))
                        .collect();
                    (d.clone(), names)
                })
            })
            .collect();
        (fastpath, peer_devs)
    };
    let (before, after) = (hooks(&set_before), hooks(&set_after));
    let settings_differ = set_before != set_after;
    let mut changed = settings_differ;
    let ((fp_before, peers_before), (fp_after, peers_after)) =
        (extras(&set_before), extras(&set_after));
    let mut diff = Diff {
        before: serde_json::json!({
            "devices": before, "fastpath": fp_before, "peer_devs": peers_before
        }),
        after: serde_json::json!({
            "devices": after, "fastpath": fp_after, "peer_devs": peers_after
        }),
    };
    if mode.is_some() {
        // attach also makes the namespace ignore routes over links without carrier
        let linkdown = crate::hook::ignore_linkdown();
        changed |= !linkdown;
        diff.before["ignore_routes_with_linkdown"] = linkdown.into();
        diff.after["ignore_routes_with_linkdown"] = true.into();
    }
    let spell = |m: &BTreeMap<String, Vec<Setting>>| {
        m.iter()
            .map(|(d, v)| {
                let mut h: Vec<&str> = v.iter().map(|x| x.hook).collect();
                h.sort_unstable();
                let mut t = format!(
                    "dev {d} {}",
                    if h.is_empty() {
                        "none".to_string()
                    } else {
                        h.join("+")
                    }
                );
                if v.first().is_some_and(|x| !x.fastpath) {
                    t.push_str(" fastpath off");
                }
                if let Some(x) = v
                    .iter()
                    .find(|x| x.hook == Mode::Tc.name() && !x.peers.is_empty())
                {
                    t.push_str(&format!(" peers {}", x.peers.len()));
                }
                t
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    Ok(Output::Check(Box::new(CheckReport {
        check: true,
        changed,
        action: verb,
        dst: None,
        table: None,
        metric: None,
        devs: Some(devs.to_vec()),
        text: (Some(spell(&set_before)), Some(spell(&set_after))),
        diff,
        moved: None,
    })))
}

//! The two implementations of the ILA tables behind one interface, with the same semantics
//! (the receiving device's mapping before the any-device one, the kernel's defaults, the same
//! errors):
//!
//! - [`kernel`]: the kernel's ILA module: the generic netlink family "ila" for mappings,
//!   `RTA_ENCAP` routes of LWT encap type 3 for routes;
//! - [`bpf`]: ila's BPF translator: the namespace's pinned tables (`mpt_bpf::ila`) and, for a
//!   route, a plain FIB route of protocol "ila" that carries the packets to the devices whose
//!   egress program translates them.
//!
//! Both carry out the one put rule (`mpt_model::ila::plan`), applied by [`Tables::put_mapping`]
//! and [`Tables::put_route`] to what the backend reads; [`dry`] is `--check`, a decorator over
//! either that plays the writes on a copy in memory by the same rule.
//!
//! `--backend auto` picks the kernel's where its family resolves, else bpf ([`open`]).

pub mod bpf;
pub mod dry;
pub mod kernel;

use std::net::{IpAddr, Ipv6Addr};

use ipnet::{IpNet, Ipv6Net};
use mpt_cli::Failure;
use mpt_model::ila::plan::{self, Mode, Outcome, Refusal, Write};
use mpt_model::ila::{Locator, Mapping, RouteSpec};
use mpt_model::{Algo, Nexthop, RouteKey, Verb};
use mpt_netlink::msg::rtnl::route::{self as rmsg, LwtEncap, PathForm, RouteRequest};
use mpt_netlink::sock::Socket;

pub use mpt_model::ila::RouteEntry;

use crate::cli::BackendChoice;

/// Which implementation keeps the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The kernel's ILA module.
    Kernel,
    /// The BPF translator.
    Bpf,
}

impl Kind {
    /// Its name, as `--backend` and the JSON `backend` key say it.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Kernel => "kernel",
            Kind::Bpf => "bpf",
        }
    }
}

/// Packets and bytes translated by one mapping or route (bpf backend only: the kernel keeps
/// no such counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counter {
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
}

/// A mapping's key: its locator match and receiving device (0: any).
pub type MappingKey = (Locator, u32);

/// A mapping or route and its counter, where the backend keeps one.
pub type Counted<T> = (T, Option<Counter>);

/// `what: the entry exists [EEXIST]`, with the remedy.
pub fn exists(what: &str) -> Failure {
    Failure::system(format!("{what}: it exists [EEXIST]")).hint("use replace to change it")
}

/// `what: no such entry [ESRCH]`.
pub fn absent(what: &str) -> Failure {
    Failure::system(format!("{what}: no such entry [ESRCH]"))
}

/// A put the rule refuses, in the kernel's words.
fn refused(r: Refusal, dst: Ipv6Net, what: &str) -> Failure {
    match r {
        Refusal::Exists => exists(what),
        Refusal::InTable(t) => Failure::system(format!(
            "{what}: the translator's table is one per namespace, and {dst} is in table {} [{}]",
            mpt_cli::names::table_name(t),
            r.errno_name()
        )),
    }
}

/// The namespace's ILA tables, by one implementation: what it reads, and how it carries out
/// the writes the put rule decides ([`Tables::put_mapping`], [`Tables::put_route`]).
pub trait Tables: std::fmt::Debug {
    /// Which one (a dry run's: the one it wraps).
    fn kind(&self) -> Kind;

    /// The work left at the end of the invocation.
    fn finish(&mut self) -> Result<(), Failure> {
        Ok(())
    }

    /// Hold the lock the next change takes before what it checks is read (see
    /// [`bpf::Bpf::hold`]); `--check` writes nothing and holds nothing.
    fn hold(&mut self) -> Result<(), Failure>;

    /// Every mapping, with its counter where the backend keeps one.
    fn mappings(&mut self) -> Result<Vec<Counted<Mapping>>, Failure>;

    /// The mapping with exactly this key.
    fn mapping(&mut self, key: MappingKey) -> Result<Option<Counted<Mapping>>, Failure>;

    /// Write a mapping as the put rule decided (under [`Tables::hold`]).
    fn write_mapping(&mut self, m: &Mapping, w: Write, what: &str) -> Result<(), Failure>;

    /// Delete the mapping with this key; `false` if there is none.
    fn del_mapping(&mut self, key: MappingKey) -> Result<bool, Failure>;

    /// Delete every mapping; returns how many there were.
    fn flush_mappings(&mut self) -> Result<usize, Failure>;

    /// Every ILA route, with its counter where the backend keeps one.
    fn routes(&mut self) -> Result<Vec<Counted<RouteEntry>>, Failure>;

    /// The ILA route of `dst` (in `table`, or whichever it is in), as [`Tables::routes`] has
    /// it. A backend that can find one without listing them all says so here: a batch of route
    /// commands must not list every route for each line.
    fn route_of(
        &mut self,
        dst: Ipv6Net,
        table: Option<u32>,
    ) -> Result<Option<RouteEntry>, Failure> {
        Ok(plan::find_route(
            self.routes()?.into_iter().map(|(e, _)| e),
            dst,
            table,
        ))
    }

    /// Before a route is put (`create`) or deleted: the lock, and what the backend sets up
    /// first; `false`: there can be no route (nothing created, and `create` is false).
    fn prepare_routes(&mut self, create: bool) -> Result<bool, Failure>;

    /// The route `r` as it would be written (the BPF translator: where its FIB route sends).
    fn fib_target(&mut self, r: &RouteEntry, _what: &str) -> Result<RouteEntry, Failure> {
        Ok(*r)
    }

    /// Write a route as the put rule decided (`mode`: the command's).
    fn write_route(
        &mut self,
        r: &RouteEntry,
        w: Write,
        mode: Mode,
        what: &str,
    ) -> Result<(), Failure>;

    /// Delete a route that is there (as [`Tables::routes`] has it).
    fn remove_route(&mut self, r: &RouteEntry, what: &str) -> Result<(), Failure>;

    /// The BPF translator itself, for its devices and counters (not through a dry run).
    fn bpf(&mut self) -> Option<&mut bpf::Bpf> {
        None
    }

    /// Put a mapping: `Some` write if the tables changed. An add of an existing key fails
    /// ([`exists`]).
    fn put_mapping(
        &mut self,
        m: &Mapping,
        mode: Mode,
        what: &str,
    ) -> Result<Option<Write>, Failure> {
        self.hold()?;
        let old = self.mapping(m.key())?.map(|(o, _)| o);
        match plan::put(old.as_ref(), m, mode) {
            Outcome::Unchanged => Ok(None),
            // (plan::put refuses an existing key only)
            Outcome::Refuse(_) => Err(exists(what)),
            Outcome::Write(w) => self.write_mapping(m, w, what).map(|()| Some(w)),
        }
    }

    /// Put a route: `Some` write if the tables changed. The BPF translator's table is one per
    /// namespace: its prefix is looked for in every table.
    fn put_route(
        &mut self,
        r: &RouteEntry,
        mode: Mode,
        what: &str,
    ) -> Result<Option<Write>, Failure> {
        self.prepare_routes(true)?;
        let want = self.fib_target(r, what)?;
        let table = (self.kind() == Kind::Kernel).then_some(r.table);
        let old = self.route_of(r.spec.dst, table)?;
        match plan::put_route(old.as_ref(), &want, mode) {
            Outcome::Unchanged => Ok(None),
            Outcome::Refuse(x) => Err(refused(x, r.spec.dst, what)),
            Outcome::Write(w) => self.write_route(&want, w, mode, what).map(|()| Some(w)),
        }
    }

    /// Delete the ILA route for a prefix (in `table`, or the one table it is in); returns it,
    /// `None` if there is none.
    fn del_route(
        &mut self,
        dst: Ipv6Net,
        table: Option<u32>,
        what: &str,
    ) -> Result<Option<RouteEntry>, Failure> {
        if !self.prepare_routes(false)? {
            return Ok(None);
        }
        let Some(old) = self.route_of(dst, table)? else {
            return Ok(None);
        };
        self.remove_route(&old, what)?;
        Ok(Some(old))
    }
}

/// `modprobe ila`, where the module is not loaded; whether it was loaded by this.
fn load_module() -> bool {
    let loaded = std::fs::read_to_string("/proc/modules").is_ok_and(|m| {
        m.lines()
            .any(|l| l.split_whitespace().next() == Some("ila"))
    });
    if loaded {
        return false;
    }
    std::process::Command::new("modprobe")
        .args(["-q", "ila"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `t`, or with `check` the dry run over it.
fn boxed<T: Tables + 'static>(t: T, check: bool) -> Box<dyn Tables> {
    if check {
        Box::new(dry::Dry::new(t))
    } else {
        Box::new(t)
    }
}

/// The backend `choice` asks for, in the calling thread's namespace (`check`: as a dry run).
/// `kernel` where the kernel has no ILA is a failure that says so; `auto` then takes bpf.
pub fn open(choice: BackendChoice, check: bool) -> Result<Box<dyn Tables>, Failure> {
    if choice == BackendChoice::Bpf {
        return Ok(boxed(bpf::Bpf::new(), check));
    }
    let mut genl = Socket::generic().map_err(Failure::from)?;
    let mut found = genl.resolve_family(mpt_netlink::msg::genl::ila::FAMILY);
    if choice == BackendChoice::Kernel && matches!(found, Ok(None)) && load_module() {
        // asked for by name: the module, where the kernel has it but has not loaded it (its
        // generic netlink family has no alias the kernel could load it by, as Debian ships it)
        found = genl.resolve_family(mpt_netlink::msg::genl::ila::FAMILY);
    }
    match found {
        Ok(Some(f)) => Ok(boxed(kernel::Kernel::new(genl, f.id), check)),
        Ok(None) if choice == BackendChoice::Auto => Ok(boxed(bpf::Bpf::new(), check)),
        Ok(None) => Err(Failure::system(
            "backend kernel: this kernel has no ILA (the generic netlink family \"ila\" is absent: CONFIG_IPV6_ILA, module ila) [ENOENT]",
        )
        .hint("use --backend bpf (or auto, the default), ila's BPF translator")),
        Err(e) => Err(Failure::from(e)),
    }
}

// ---- what both backends say to rtnetlink ------------------------------------------------

/// The value in `slot`, loaded on first use.
pub fn filled<V>(
    slot: &mut Option<V>,
    load: impl FnOnce() -> Result<V, Failure>,
) -> Result<&mut V, Failure> {
    let v = match slot.take() {
        Some(v) => v,
        None => load()?,
    };
    Ok(slot.insert(v))
}

/// A route socket, opened on first use.
fn rtnl(slot: &mut Option<Socket>) -> Result<&mut Socket, Failure> {
    filled(slot, || Socket::route().map_err(Failure::from))
}

/// The FIB entry for `dst` in `table`, as one lookup of its first address finds it (`ip -6
/// route get ADDR fibmatch`): how a route just written whose device the kernel chose is read
/// back without a dump. `None` where the entry found is another (a more specific route,
/// another table): then only a dump says.
fn fib_match(slot: &mut Option<Socket>, dst: Ipv6Net, table: u32) -> Option<rmsg::RouteMsg> {
    let answers = rtnl(slot)
        .ok()?
        .transact(
            &rmsg::get_request(IpAddr::V6(dst.network())),
            "find the route just written",
        )
        .ok()?;
    answers
        .first()
        .and_then(|p| rmsg::decode(p).ok().flatten())
        .filter(|m| m.route.key.dst == IpNet::V6(dst) && m.route.key.table == table)
}

/// Every IPv6 route of the namespace (every table).
fn fib_routes(sock: &mut Socket) -> Result<Vec<rmsg::RouteMsg>, Failure> {
    let answers = sock
        .dump(
            &rmsg::dump_request(Some(mpt_model::Family::V6), None),
            "list routes",
        )
        .map_err(Failure::from)?;
    let mut out = Vec::new();
    for p in answers {
        if let Some(m) =
            rmsg::decode(&p).map_err(|e| Failure::system(format!("list routes: {e}")))?
        {
            out.push(m);
        }
    }
    Ok(out)
}

/// The IPv6 gateway of a nexthop.
fn v6_gateway(nh: Option<&Nexthop>) -> Option<Ipv6Addr> {
    nh.and_then(|n| match n.gateway {
        Some(IpAddr::V6(a)) => Some(a),
        _ => None,
    })
}

/// The ILA route of `spec` as the FIB route `m` sends it.
fn entry(spec: RouteSpec, m: &rmsg::RouteMsg) -> RouteEntry {
    let nh = m.route.nexthops.first();
    RouteEntry {
        spec,
        via: v6_gateway(nh),
        ifindex: nh.map_or(0, |n| n.ifindex),
        table: m.route.key.table,
    }
}

/// The request for the FIB route of `r`, of protocol `protocol`, with `encap`. A delete
/// names no nexthop; nor does a route with neither `via` nor `dev`.
fn route_request(
    verb: Verb,
    r: &RouteEntry,
    protocol: Option<u8>,
    encap: Option<LwtEncap<'_>>,
) -> mpt_netlink::msg::Request {
    let nexthops = [Nexthop {
        gateway: r.via.map(IpAddr::V6),
        ifindex: r.ifindex,
        weight: 1,
        flags: 0,
    }];
    rmsg::encode(&RouteRequest {
        verb,
        key: RouteKey {
            dst: IpNet::V6(r.spec.dst),
            table: r.table,
            metric: rmsg::default_metric(mpt_model::Family::V6),
        },
        metric_given: false,
        protocol,
        nexthops: if verb == Verb::Del || (r.via.is_none() && r.ifindex == 0) {
            &[]
        } else {
            &nexthops
        },
        form: PathForm::Single,
        algo: Algo::L3Hash,
        encap,
    })
}

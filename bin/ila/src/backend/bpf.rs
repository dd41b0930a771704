//! ila's BPF translator as a backend: mappings and routes in the namespace's pinned tables
//! (`mpt_bpf::ila::state`), which the programs on the devices read; each route also a plain
//! FIB route of protocol "ila" (246) for its SIR prefix, so that the stack sends what the
//! application sends to a SIR address out of the device whose egress program translates it.
//!
//! Where that FIB route sends: `via` and `dev` as given; without `via`, where the kernel routes
//! the route's ILA address (its SIR prefix with the locator in place): that route's gateway,
//! or for a /128 whose ILA address is on-link the ILA address itself as the gateway (the
//! neighbour the translated packet goes to). A shorter prefix whose ILA addresses are on-link
//! needs `via`: the stack resolves the neighbour of the SIR address before the egress program
//! sees the packet. (The kernel's LWT looks the translated destination up again instead.)
//!
//! Order of writes, so that a failure or a kill leaves nothing that translates wrongly: add
//! writes the table entry, then the FIB route (the entry is removed again when the kernel
//! refuses); delete removes the FIB route, then the entry. What a kill can leave is an entry
//! without its FIB route, which every later route command removes ([`Bpf::repair`]).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};

use ipnet::{IpNet, Ipv6Net};
use mpt_bpf::ila::state::{self as ila_state, IlaState};
use mpt_bpf::pinned::NsLock;
use mpt_cli::Failure;
use mpt_model::ila::plan::{Mode, Outcome, Write};
use mpt_model::ila::{Mapping, RouteSpec};
use mpt_model::{Verb, ILA_PROTO};
use mpt_netlink::msg::rtnl::route as rmsg;
use mpt_netlink::sock::Socket;

use super::{exists, Counted, Counter, Kind, MappingKey, RouteEntry, Tables};

/// The tables, the lock and a route socket, opened on first use.
#[derive(Default)]
pub struct Bpf {
    state: Option<IlaState>,
    checked: bool,
    lock: Option<NsLock>,
    rtnl: Option<Socket>,
    repaired: bool,
    /// Entries were deleted: the tables' kind flags may be cleared at the end.
    deleted: bool,
    /// The FIB's routes of protocol ila by prefix, dumped once per invocation and kept up to
    /// date by this invocation's own writes (a batch of N route commands dumped the whole IPv6
    /// FIB N times); `None` until needed, or after a write whose result only the FIB knows.
    fib: Option<HashMap<Ipv6Net, FibRoute>>,
}

/// What ila reads of a FIB route: where it sends, its table.
#[derive(Debug, Clone, Copy)]
struct FibRoute {
    via: Option<Ipv6Addr>,
    ifindex: u32,
    table: u32,
}

impl FibRoute {
    fn of(m: &rmsg::RouteMsg) -> FibRoute {
        let nh = m.route.nexthops.first();
        FibRoute {
            via: super::v6_gateway(nh),
            ifindex: nh.map_or(0, |n| n.ifindex),
            table: m.route.key.table,
        }
    }

    fn entry(self, spec: RouteSpec) -> RouteEntry {
        RouteEntry {
            spec,
            via: self.via,
            ifindex: self.ifindex,
            table: self.table,
        }
    }
}

impl std::fmt::Debug for Bpf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bpf").finish_non_exhaustive()
    }
}

fn counter(c: ila_state::Counts) -> Counter {
    Counter {
        packets: c.packets,
        bytes: c.bytes,
    }
}

impl Bpf {
    /// Nothing opened yet.
    pub fn new() -> Bpf {
        Bpf::default()
    }

    /// The tables; with `create`, created (and locked for the rest of the invocation) if need
    /// be. `None`: there are none and `create` is false.
    pub fn state(&mut self, create: bool) -> Result<Option<&IlaState>, Failure> {
        let cookie = || {
            mpt_sys::netns::cookie()
                .map_err(|e| Failure::system(format!("open the ILA tables: {e}")))
        };
        if create && self.lock.is_none() {
            let c = cookie()?;
            self.lock = Some(
                NsLock::take(&ila_state::SUITE, c)
                    .map_err(|e| Failure::bpf("lock the ILA tables", e))?,
            );
            // opened before the lock, the tables may have grown since (another invocation
            // replaced a map by a larger copy): open them again under the lock
            self.state = None;
            self.checked = false;
        }
        if self.state.is_none() && (create || !self.checked) {
            self.checked = true;
            self.state = IlaState::open(cookie()?, create)
                .map_err(|e| Failure::bpf("open the ILA tables", e))?;
        }
        Ok(self.state.as_ref())
    }

    fn tables(&mut self) -> Result<&IlaState, Failure> {
        self.state(true)?
            .ok_or_else(|| Failure::system("open the ILA tables: not created"))
    }

    /// The FIB routes of protocol ila (IPv6, every table).
    fn fib_routes(&mut self) -> Result<&HashMap<Ipv6Net, FibRoute>, Failure> {
        let fib = match self.fib.take() {
            Some(f) => f,
            None => {
                let mut by_dst = HashMap::new();
                for m in super::fib_routes(super::rtnl(&mut self.rtnl)?)? {
                    if let (ILA_PROTO, IpNet::V6(dst)) = (m.route.protocol, m.route.key.dst) {
                        // the first of a prefix, as a search of the dump found it
                        by_dst.entry(dst).or_insert_with(|| FibRoute::of(&m));
                    }
                }
                by_dst
            }
        };
        Ok(self.fib.insert(fib))
    }

    /// Keep the FIB's routes as read in step with a write of ours (`None`: `r` deleted).
    fn fib_wrote(&mut self, dst: Ipv6Net, r: Option<&RouteEntry>) {
        let Some(fib) = self.fib.as_mut() else {
            return;
        };
        match r {
            // the kernel chose the device: the FIB's entry says which
            Some(r) if r.ifindex == 0 => match self.fib_entry(dst, r.table) {
                Some(f) => {
                    if let Some(fib) = self.fib.as_mut() {
                        fib.insert(dst, f);
                    }
                }
                None => self.fib = None,
            },
            Some(r) => {
                fib.insert(
                    dst,
                    FibRoute {
                        via: r.via,
                        ifindex: r.ifindex,
                        table: r.table,
                    },
                );
            }
            None => {
                fib.remove(&dst);
            }
        }
    }

    /// ila's FIB route for `dst` in `table` as the kernel has it ([`super::fib_match`]), not a
    /// dump of the whole IPv6 FIB per route (a batch of N routes whose device the kernel chose
    /// dumped it N times).
    fn fib_entry(&mut self, dst: Ipv6Net, table: u32) -> Option<FibRoute> {
        super::fib_match(&mut self.rtnl, dst, table)
            .filter(|m| m.route.protocol == ILA_PROTO)
            .map(|m| FibRoute::of(&m))
    }

    /// Remove table entries whose FIB route is gone (a command killed between its two
    /// writes). Once per invocation, before the first route command, under the lock.
    fn repair(&mut self) -> Result<(), Failure> {
        if self.repaired || self.state(false)?.is_none() {
            return Ok(());
        }
        self.repaired = true;
        let fib: std::collections::HashSet<Ipv6Net> = self.fib_routes()?.keys().copied().collect();
        let s = self.tables()?;
        for r in s.routes().map_err(|e| Failure::bpf("list ILA routes", e))? {
            if !fib.contains(&r.dst) {
                s.delete_route(r.dst)
                    .map_err(|e| Failure::bpf("remove an ILA route without its FIB route", e))?;
            }
        }
        Ok(())
    }

    /// Where the FIB route of `r` sends: as given, or where the kernel routes its ILA address.
    fn nexthop(&mut self, r: &RouteEntry, what: &str) -> Result<(Option<Ipv6Addr>, u32), Failure> {
        if r.via.is_some() {
            return Ok((r.via, r.ifindex));
        }
        let ila_addr = r.spec.locator.put(r.spec.dst.network());
        let answers = super::rtnl(&mut self.rtnl)?
            .transact(
                &rmsg::get_request(IpAddr::V6(ila_addr)),
                &format!("{what}: find the route to its ILA address {ila_addr}"),
            )
            .map_err(|e| {
                Failure::from(e)
                    .hint("give \"via ADDR\", or add a route to the ILA locator's network")
            })?;
        let route = answers
            .first()
            .and_then(|p| rmsg::decode(p).ok().flatten())
            .ok_or_else(|| {
                Failure::system(format!("{what}: no route to its ILA address {ila_addr}"))
            })?;
        let nh = route.route.nexthops.first();
        let gw = super::v6_gateway(nh);
        let dev = nh.map_or(0, |n| n.ifindex);
        if r.ifindex != 0 && dev != 0 && dev != r.ifindex {
            return Err(Failure::system(format!(
                "{what}: its ILA address {ila_addr} is routed through another device (ifindex {dev})"
            ))
            .hint("give \"via ADDR\" on that device"));
        }
        match gw {
            Some(g) => Ok((Some(g), dev)),
            None if r.spec.dst.prefix_len() == 128 => Ok((Some(ila_addr), dev)),
            None => Err(Failure::system(format!(
                "{what}: the ILA addresses of {} are on-link: the BPF translator needs \"via ADDR\" (the stack resolves the neighbour of the SIR address before the egress program translates it), or one /128 route per address",
                r.spec.dst
            ))),
        }
    }

    /// The FIB route of `r`, of protocol ila.
    fn fib_request(
        &mut self,
        verb: Verb,
        r: &RouteEntry,
        what: &str,
    ) -> Result<(), mpt_netlink::Error> {
        let req = super::route_request(verb, r, Some(ILA_PROTO), None);
        let sock = match &mut self.rtnl {
            Some(s) => s,
            None => self.rtnl.insert(Socket::route()?),
        };
        sock.request(&req, what)
    }

    /// Whether the route's device (or any device, for 0) has the translator's egress program:
    /// for a note when a route would translate nothing.
    pub fn egress_on(ifindex: u32) -> bool {
        let on = |i: u32| {
            mpt_bpf::ila::dataplane::attachment_on(i)
                .map(|a| a.egress.is_some())
                .unwrap_or(false)
        };
        if ifindex != 0 {
            return on(ifindex);
        }
        mpt_sys::iface::all().into_iter().any(|(i, _)| on(i))
    }

    /// Whether any device has the translator's ingress program.
    pub fn ingress_anywhere() -> bool {
        mpt_bpf::ila::dataplane::attachments()
            .map(|v| v.iter().any(|a| a.ingress.is_some()))
            .unwrap_or(false)
    }
}

impl Tables for Bpf {
    fn kind(&self) -> Kind {
        Kind::Bpf
    }

    /// The end of the invocation: after deletes, clear the flags of the kinds of entries the
    /// tables no longer hold (once, not per delete of a batch).
    fn finish(&mut self) -> Result<(), Failure> {
        if !self.deleted {
            return Ok(());
        }
        self.deleted = false;
        match self.state(false)? {
            Some(s) => s
                .settle_flags()
                .map_err(|e| Failure::bpf("update the ILA tables' flags", e)),
            None => Ok(()),
        }
    }

    /// Hold the namespace's lock from now on, where there are tables: what a change checks
    /// (`del ... loc L` compares the locator) must be read under the lock its write takes, or
    /// a concurrent `replace` between the two is undone by mistake.
    fn hold(&mut self) -> Result<(), Failure> {
        if self.lock.is_some() || self.state(false)?.is_none() {
            return Ok(());
        }
        let c = mpt_sys::netns::cookie()
            .map_err(|e| Failure::system(format!("open the ILA tables: {e}")))?;
        self.lock = Some(
            NsLock::take(&ila_state::SUITE, c)
                .map_err(|e| Failure::bpf("lock the ILA tables", e))?,
        );
        // what was opened before the lock may name maps replaced since: open again
        self.state = None;
        self.checked = false;
        self.state(false).map(|_| ())
    }

    /// Every mapping and its counter.
    fn mappings(&mut self) -> Result<Vec<Counted<Mapping>>, Failure> {
        let Some(s) = self.state(false)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for m in s
            .mappings()
            .map_err(|e| Failure::bpf("list ILA mappings", e))?
        {
            let c = s
                .mapping_counter((m.locator_match, m.ifindex))
                .map_err(|e| Failure::bpf("read ILA counters", e))?;
            out.push((m, Some(counter(c))));
        }
        Ok(out)
    }

    fn mapping(&mut self, key: MappingKey) -> Result<Option<Counted<Mapping>>, Failure> {
        let Some(s) = self.state(false)? else {
            return Ok(None);
        };
        let Some(m) = s
            .mapping(key)
            .map_err(|e| Failure::bpf("get an ILA mapping", e))?
        else {
            return Ok(None);
        };
        let c = s
            .mapping_counter(key)
            .map_err(|e| Failure::bpf("read ILA counters", e))?;
        Ok(Some((m, Some(counter(c)))))
    }

    /// One map write, the tables created first if need be; the rule is applied again under
    /// the lock that creating them takes.
    fn write_mapping(&mut self, m: &Mapping, w: Write, what: &str) -> Result<(), Failure> {
        let mode = Mode::of(w == Write::Replaced);
        match self
            .tables()?
            .put_mapping(m, mode)
            .map_err(|e| Failure::bpf(what, e))?
        {
            Outcome::Refuse(_) => Err(exists(what)),
            Outcome::Unchanged | Outcome::Write(_) => Ok(()),
        }
    }

    fn del_mapping(&mut self, key: MappingKey) -> Result<bool, Failure> {
        if self.state(false)?.is_none() {
            return Ok(false);
        }
        self.deleted = true;
        self.tables()?
            .delete_mapping(key)
            .map_err(|e| Failure::bpf("delete an ILA mapping", e))
    }

    fn flush_mappings(&mut self) -> Result<usize, Failure> {
        if self.state(false)?.is_none() {
            return Ok(0);
        }
        self.deleted = true;
        let s = self.tables()?;
        let all = s
            .mappings()
            .map_err(|e| Failure::bpf("list ILA mappings", e))?;
        for m in &all {
            s.delete_mapping((m.locator_match, m.ifindex))
                .map_err(|e| Failure::bpf("flush the ILA mappings", e))?;
        }
        Ok(all.len())
    }

    /// Every ILA route: the table's entries with where their FIB routes send.
    fn routes(&mut self) -> Result<Vec<Counted<RouteEntry>>, Failure> {
        if self.state(false)?.is_none() {
            return Ok(Vec::new());
        }
        let fib = self.fib_routes()?.clone();
        let Some(s) = self.state(false)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for spec in s.routes().map_err(|e| Failure::bpf("list ILA routes", e))? {
            // an entry without its FIB route (a command killed halfway) is not shown: the next
            // route command removes it
            let Some(f) = fib.get(&spec.dst) else {
                continue;
            };
            let c = s
                .route_counter(spec.dst)
                .map_err(|e| Failure::bpf("read ILA counters", e))?;
            out.push((f.entry(spec), Some(counter(c))));
        }
        Ok(out)
    }

    fn route_of(
        &mut self,
        dst: Ipv6Net,
        table: Option<u32>,
    ) -> Result<Option<RouteEntry>, Failure> {
        if self.state(false)?.is_none() {
            return Ok(None);
        }
        let Some(f) = self.fib_routes()?.get(&dst).copied() else {
            return Ok(None);
        };
        let Some(s) = self.state(false)? else {
            return Ok(None);
        };
        let spec = s
            .route(dst)
            .map_err(|e| Failure::bpf("read an ILA route", e))?;
        Ok(spec
            .map(|spec| f.entry(spec))
            .filter(|e| table.is_none_or(|t| t == e.table)))
    }

    /// The tables (created if need be, and so locked), repaired.
    fn prepare_routes(&mut self, create: bool) -> Result<bool, Failure> {
        if !create && self.state(false)?.is_none() {
            return Ok(false);
        }
        self.tables()?;
        self.repair().map(|()| true)
    }

    /// The route `r` as its FIB route would be written.
    fn fib_target(&mut self, r: &RouteEntry, what: &str) -> Result<RouteEntry, Failure> {
        let (via, ifindex) = self.nexthop(r, what)?;
        Ok(RouteEntry { via, ifindex, ..*r })
    }

    /// The table entry, then the FIB route (the entry as it was when the kernel refuses).
    fn write_route(
        &mut self,
        r: &RouteEntry,
        w: Write,
        _mode: Mode,
        what: &str,
    ) -> Result<(), Failure> {
        let s = self.tables()?;
        let before = s.route(r.spec.dst).map_err(|e| Failure::bpf(what, e))?;
        s.put_route(&r.spec, Mode::Replace)
            .map_err(|e| Failure::bpf(what, e))?;
        let verb = match w {
            Write::Added => Verb::Add,
            Write::Replaced => Verb::Replace,
        };
        let sent = self.fib_request(verb, r, what);
        match &sent {
            Ok(()) => self.fib_wrote(r.spec.dst, Some(r)),
            // what the FIB holds now is the dump's to say
            Err(_) => self.fib = None,
        }
        if let Err(e) = sent {
            let f = if e.errno() == Some(libc::EEXIST) {
                // not ila's (ila's own is in its table, seen above): replace would not help
                Failure::system(format!(
                    "{what}: the FIB has a route for {} that is not ila's [EEXIST]",
                    r.spec.dst
                ))
                .hint("ila does not overwrite routes it did not make: remove that one first (ip -6 route show exact PREFIX)")
            } else {
                Failure::from(e)
            };
            // the kernel refused: the table as it was
            let s = self.tables()?;
            let undo = match before {
                Some(b) => s.put_route(&b, Mode::Replace).map(|_| ()),
                None => s.delete_route(r.spec.dst).map(|_| ()),
            };
            if let Err(e) = undo {
                return Err(Failure::bpf(&format!("{what}: undo after \"{f}\""), e));
            }
            return Err(f);
        }
        Ok(())
    }

    /// The FIB route, then the table entry.
    fn remove_route(&mut self, r: &RouteEntry, what: &str) -> Result<(), Failure> {
        self.deleted = true;
        let sent = self.fib_request(Verb::Del, r, what);
        match &sent {
            Ok(()) => self.fib_wrote(r.spec.dst, None),
            Err(_) => self.fib = None,
        }
        match sent {
            Ok(()) => {}
            // gone meanwhile: the entry goes too
            Err(e) if e.errno() == Some(libc::ESRCH) => {}
            Err(e) => return Err(Failure::from(e)),
        }
        self.tables()?
            .delete_route(r.spec.dst)
            .map_err(|e| Failure::bpf(what, e))
            .map(|_| ())
    }

    fn bpf(&mut self) -> Option<&mut Bpf> {
        Some(self)
    }
}

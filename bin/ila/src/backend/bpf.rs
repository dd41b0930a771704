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

use std::net::{IpAddr, Ipv6Addr};

use ipnet::{IpNet, Ipv6Net};
use mpt_bpf::ila::state::{self as ila_state, IlaState};
use mpt_bpf::pinned::NsLock;
use mpt_cli::Failure;
use mpt_model::ila::Mapping;
use mpt_model::{Algo, Nexthop, RouteKey, Verb, ILA_PROTO};
use mpt_netlink::msg::rtnl::route::{self as rmsg, PathForm, RouteRequest};
use mpt_netlink::sock::Socket;

use super::{exists, Counter, MappingKey, RouteEntry, Written};

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
}

impl std::fmt::Debug for Bpf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bpf").finish_non_exhaustive()
    }
}

/// A BPF-layer failure as the operator sees it, with the hint its kind calls for.
pub fn fail(what: &str, e: mpt_bpf::Error) -> Failure {
    use mpt_bpf::ErrorKind;
    let hint = match &e.kind {
        ErrorKind::Abi { .. } => Some(
            "use the ila version that wrote it, or remove the tables with \"ila xlat flush\" and \"ila route flush\" in that version",
        ),
        _ => e.hint(),
    };
    let f = Failure::system(format!("{what}: {e}"));
    match hint {
        Some(h) => f.hint(h),
        None => f,
    }
}

fn counter(c: mpt_bpf::ila::abi::IlaCounter) -> Counter {
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
                NsLock::take(&ila_state::SUITE, c).map_err(|e| fail("lock the ILA tables", e))?,
            );
        }
        if self.state.is_none() && (create || !self.checked) {
            self.checked = true;
            self.state =
                IlaState::open(cookie()?, create).map_err(|e| fail("open the ILA tables", e))?;
        }
        Ok(self.state.as_ref())
    }

    /// Hold the namespace's lock from now on, where there are tables: what a change checks
    /// (`del ... loc L` compares the locator) must be read under the lock its write takes, or
    /// a concurrent `replace` between the two is undone by mistake.
    pub fn hold(&mut self) -> Result<(), Failure> {
        if self.lock.is_some() || self.state(false)?.is_none() {
            return Ok(());
        }
        let c = mpt_sys::netns::cookie()
            .map_err(|e| Failure::system(format!("open the ILA tables: {e}")))?;
        self.lock =
            Some(NsLock::take(&ila_state::SUITE, c).map_err(|e| fail("lock the ILA tables", e))?);
        Ok(())
    }

    fn tables(&mut self) -> Result<&IlaState, Failure> {
        self.state(true)?
            .ok_or_else(|| Failure::system("open the ILA tables: not created"))
    }

    fn rtnl(&mut self) -> Result<&mut Socket, Failure> {
        if self.rtnl.is_none() {
            self.rtnl = Some(Socket::route().map_err(Failure::from)?);
        }
        self.rtnl
            .as_mut()
            .ok_or_else(|| Failure::system("netlink socket unavailable"))
    }

    // ---- mappings ------------------------------------------------------------------------

    /// Every mapping and its counter.
    pub fn mappings(&mut self) -> Result<Vec<(Mapping, Option<Counter>)>, Failure> {
        let Some(s) = self.state(false)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for m in s.mappings().map_err(|e| fail("list ILA mappings", e))? {
            let c = s
                .mapping_counter(&mpt_bpf::ila::abi::IlaXlatKey::of(&m))
                .map_err(|e| fail("read ILA counters", e))?;
            out.push((m, Some(counter(c))));
        }
        Ok(out)
    }

    /// The mapping with exactly this key.
    pub fn mapping(
        &mut self,
        key: MappingKey,
    ) -> Result<Option<(Mapping, Option<Counter>)>, Failure> {
        let Some(s) = self.state(false)? else {
            return Ok(None);
        };
        let k = mpt_bpf::ila::abi::IlaXlatKey {
            locator_match: key.0 .0,
            ifindex: key.1,
            pad: 0,
        };
        let Some(m) = s.mapping(&k).map_err(|e| fail("get an ILA mapping", e))? else {
            return Ok(None);
        };
        let c = s
            .mapping_counter(&k)
            .map_err(|e| fail("read ILA counters", e))?;
        Ok(Some((m, Some(counter(c)))))
    }

    /// Write a mapping.
    pub fn put_mapping(
        &mut self,
        m: &Mapping,
        replace: bool,
        what: &str,
    ) -> Result<Written, Failure> {
        use ila_state::Written as W;
        match self
            .tables()?
            .put_mapping(m, replace)
            .map_err(|e| fail(what, e))?
        {
            W::Added => Ok(Written::Added),
            W::Replaced => Ok(Written::Replaced),
            W::Unchanged => Ok(Written::Unchanged),
            W::Exists => Err(exists(what)),
        }
    }

    /// Delete a mapping.
    pub fn del_mapping(&mut self, key: MappingKey) -> Result<bool, Failure> {
        if self.state(false)?.is_none() {
            return Ok(false);
        }
        let k = mpt_bpf::ila::abi::IlaXlatKey {
            locator_match: key.0 .0,
            ifindex: key.1,
            pad: 0,
        };
        self.deleted = true;
        self.tables()?
            .delete_mapping(&k)
            .map_err(|e| fail("delete an ILA mapping", e))
    }

    /// Delete every mapping.
    pub fn flush_mappings(&mut self) -> Result<usize, Failure> {
        if self.state(false)?.is_none() {
            return Ok(0);
        }
        self.deleted = true;
        let s = self.tables()?;
        let all = s.mappings().map_err(|e| fail("list ILA mappings", e))?;
        for m in &all {
            s.delete_mapping(&mpt_bpf::ila::abi::IlaXlatKey::of(m))
                .map_err(|e| fail("flush the ILA mappings", e))?;
        }
        Ok(all.len())
    }

    // ---- routes --------------------------------------------------------------------------

    /// The FIB routes of protocol ila (IPv6, every table).
    fn fib_routes(&mut self) -> Result<Vec<rmsg::RouteMsg>, Failure> {
        let answers = self
            .rtnl()?
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
                if m.route.protocol == ILA_PROTO {
                    out.push(m);
                }
            }
        }
        Ok(out)
    }

    /// Remove table entries whose FIB route is gone (a command killed between its two
    /// writes). Once per invocation, before the first route command, under the lock.
    fn repair(&mut self) -> Result<(), Failure> {
        if self.repaired || self.state(false)?.is_none() {
            return Ok(());
        }
        self.repaired = true;
        let fib = self.fib_routes()?;
        let s = self.tables()?;
        for r in s.routes().map_err(|e| fail("list ILA routes", e))? {
            if !fib.iter().any(|f| f.route.key.dst == IpNet::V6(r.dst)) {
                s.delete_route(r.dst)
                    .map_err(|e| fail("remove an ILA route without its FIB route", e))?;
            }
        }
        Ok(())
    }

    /// Every ILA route: the table's entries with where their FIB routes send.
    pub fn routes(&mut self) -> Result<Vec<(RouteEntry, Option<Counter>)>, Failure> {
        if self.state(false)?.is_none() {
            return Ok(Vec::new());
        }
        let fib = self.fib_routes()?;
        let Some(s) = self.state(false)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for spec in s.routes().map_err(|e| fail("list ILA routes", e))? {
            // an entry without its FIB route (a command killed halfway) is not shown: the next
            // route command removes it
            let Some(f) = fib.iter().find(|f| f.route.key.dst == IpNet::V6(spec.dst)) else {
                continue;
            };
            let nh = f.route.nexthops.first();
            let c = s
                .route_counter(spec.dst)
                .map_err(|e| fail("read ILA counters", e))?;
            out.push((
                RouteEntry {
                    spec,
                    via: nh.and_then(|n| match n.gateway {
                        Some(IpAddr::V6(a)) => Some(a),
                        _ => None,
                    }),
                    ifindex: nh.map_or(0, |n| n.ifindex),
                    table: f.route.key.table,
                },
                Some(counter(c)),
            ));
        }
        Ok(out)
    }

    /// The route `r` as its FIB route would be written (a dry run's `put_route`).
    pub fn fib_target(&mut self, r: &RouteEntry, what: &str) -> Result<RouteEntry, Failure> {
        let (via, ifindex) = self.nexthop(r, what)?;
        Ok(RouteEntry { via, ifindex, ..*r })
    }

    /// Where the FIB route of `r` sends: as given, or where the kernel routes its ILA address.
    fn nexthop(&mut self, r: &RouteEntry, what: &str) -> Result<(Option<Ipv6Addr>, u32), Failure> {
        if r.via.is_some() {
            return Ok((r.via, r.ifindex));
        }
        let ila_addr = r.spec.locator.put(r.spec.dst.network());
        let answers = self
            .rtnl()?
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
        let nh = route.route.nexthops.first().cloned();
        let gw = nh.as_ref().and_then(|n| match n.gateway {
            Some(IpAddr::V6(a)) => Some(a),
            _ => None,
        });
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

    fn fib_request(
        &mut self,
        verb: Verb,
        r: &RouteEntry,
        what: &str,
    ) -> Result<(), mpt_netlink::Error> {
        let nexthops = [Nexthop {
            gateway: r.via.map(IpAddr::V6),
            ifindex: r.ifindex,
            weight: 1,
            flags: 0,
        }];
        let req = rmsg::encode(&RouteRequest {
            verb,
            key: RouteKey {
                dst: IpNet::V6(r.spec.dst),
                table: r.table,
                metric: rmsg::default_metric(mpt_model::Family::V6),
            },
            metric_given: false,
            protocol: Some(ILA_PROTO),
            nexthops: if verb == Verb::Del { &[] } else { &nexthops },
            form: PathForm::Single,
            algo: Algo::L3Hash,
            encap: None,
        });
        if self.rtnl.is_none() {
            self.rtnl = Some(Socket::route()?);
        }
        match self.rtnl.as_mut() {
            Some(sock) => sock.request(&req, what),
            None => Err(mpt_netlink::Error::NotFound("netlink socket".into())),
        }
    }

    /// Add or replace a route: the table entry, then the FIB route.
    pub fn put_route(
        &mut self,
        r: &RouteEntry,
        replace: bool,
        what: &str,
    ) -> Result<Written, Failure> {
        self.tables()?;
        self.repair()?;
        let (via, ifindex) = self.nexthop(r, what)?;
        let want = RouteEntry { via, ifindex, ..*r };
        let old = self
            .routes()?
            .into_iter()
            .map(|(e, _)| e)
            .find(|o| o.spec.dst == r.spec.dst);
        let outcome = match &old {
            Some(o) if o.table != r.table => {
                return Err(Failure::system(format!(
                    "{what}: the translator's table is one per namespace, and {} is in table {} [EEXIST]",
                    r.spec.dst,
                    mpt_cli::names::table_name(o.table)
                )))
            }
            Some(_) if !replace => return Err(exists(what)),
            Some(o) if *o == want => return Ok(Written::Unchanged),
            Some(_) => Written::Replaced,
            None => Written::Added,
        };
        let s = self.tables()?;
        let before = s.route(r.spec.dst).map_err(|e| fail(what, e))?;
        s.put_route(&r.spec, true).map_err(|e| fail(what, e))?;
        let verb = if outcome == Written::Added {
            Verb::Add
        } else {
            Verb::Replace
        };
        if let Err(e) = self.fib_request(verb, &want, what) {
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
                Some(b) => s.put_route(&b, true).map(|_| ()),
                None => s.delete_route(r.spec.dst).map(|_| ()),
            };
            if let Err(e) = undo {
                return Err(fail(&format!("{what}: undo after \"{f}\""), e));
            }
            return Err(f);
        }
        Ok(outcome)
    }

    /// Delete a route: the FIB route, then the table entry.
    pub fn del_route(
        &mut self,
        dst: Ipv6Net,
        table: Option<u32>,
        what: &str,
    ) -> Result<Option<RouteEntry>, Failure> {
        if self.state(false)?.is_none() {
            return Ok(None);
        }
        self.tables()?;
        self.repair()?;
        let Some(old) = self
            .routes()?
            .into_iter()
            .map(|(e, _)| e)
            .find(|o| o.spec.dst == dst && table.is_none_or(|t| t == o.table))
        else {
            return Ok(None);
        };
        self.deleted = true;
        match self.fib_request(Verb::Del, &old, what) {
            Ok(()) => {}
            // gone meanwhile: the entry goes too
            Err(e) if e.errno() == Some(libc::ESRCH) => {}
            Err(e) => return Err(Failure::from(e)),
        }
        self.tables()?
            .delete_route(dst)
            .map_err(|e| fail(what, e))?;
        Ok(Some(old))
    }

    /// The end of the invocation: after deletes, clear the flags of the kinds of entries the
    /// tables no longer hold (once, not per delete of a batch).
    pub fn finish(&mut self) -> Result<(), Failure> {
        if !self.deleted {
            return Ok(());
        }
        self.deleted = false;
        match self.state(false)? {
            Some(s) => s
                .settle_flags()
                .map_err(|e| fail("update the ILA tables' flags", e)),
            None => Ok(()),
        }
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

//! The kernel's ILA module: mappings over the generic netlink family "ila" (as `ip ila`),
//! routes as `RTA_ENCAP` routes of LWT encap type 3 over rtnetlink (as `ip route ... encap
//! ila`), both in the kernel's own encoding (`mpt_netlink::msg::genl::ila`).
//!
//! The kernel's answers that differ from our semantics are made to agree: its `DEL` answers 0
//! whether or not a mapping matched (we look first, and an absent mapping is an error); it has
//! no replace (a changed mapping is deleted and added again, a moment without it); a dump may
//! end with `EAGAIN` when its table was resized meanwhile (dumped again).

use std::collections::HashMap;

use ipnet::{IpNet, Ipv6Net};
use mpt_cli::Failure;
use mpt_model::ila::plan::{Mode, Write};
use mpt_model::ila::{CsumMode, HookType, IdentType, Mapping, RouteSpec};
use mpt_model::{Verb, ILA_PROTO};
use mpt_netlink::msg::genl::ila::{self as genl_ila, encap, MappingAttrs};
use mpt_netlink::msg::rtnl::route::{rta, LwtEncap};
use mpt_netlink::sock::Socket;

use super::{exists, Counted, Kind, MappingKey, RouteEntry, Tables};

/// Sockets of the kernel backend.
pub struct Kernel {
    genl: Socket,
    family: u16,
    rtnl: Option<Socket>,
    /// The namespace's ILA lock (the translator's): ila's own check-then-act (a replace is a
    /// delete and an add here, `del ... loc L` compares first) is not interleaved with another
    /// ila's.
    lock: Option<mpt_bpf::pinned::NsLock>,
    /// The FIB's ILA routes by prefix (dump order within one), dumped once per invocation
    /// under the lock and kept in step with this invocation's own writes (a batch of N route
    /// commands dumped the whole IPv6 FIB twice a line: the square of the table); `None` until
    /// needed, or after a write whose result only the FIB knows.
    fib: Option<HashMap<Ipv6Net, Vec<RouteEntry>>>,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("family", &self.family)
            .finish_non_exhaustive()
    }
}

fn attrs(m: &Mapping) -> MappingAttrs {
    MappingAttrs {
        locator_match: Some(m.locator_match),
        locator: Some(m.locator),
        ifindex: (m.ifindex != 0).then_some(m.ifindex),
        csum_mode: Some(m.csum_mode),
        ident_type: Some(m.ident_type),
    }
}

fn key_attrs(key: MappingKey) -> MappingAttrs {
    MappingAttrs {
        locator_match: Some(key.0),
        ifindex: (key.1 != 0).then_some(key.1),
        ..MappingAttrs::default()
    }
}

/// A kernel's `EEXIST` as [`exists`].
fn or_exists(what: &str) -> impl Fn(mpt_netlink::Error) -> Failure + '_ {
    move |e| {
        if e.errno() == Some(libc::EEXIST) {
            exists(what)
        } else {
            Failure::from(e)
        }
    }
}

/// The ILA route of a FIB route, if it is one (LWT encap type ila).
fn ila_route(m: &mpt_netlink::msg::rtnl::route::RouteMsg) -> Result<Option<RouteEntry>, Failure> {
    let ty = m.other.iter().find(|(t, _)| *t == rta::ENCAP_TYPE);
    let is_ila = ty.is_some_and(|(_, v)| {
        v.get(..2).map(|b| u16::from_ne_bytes([b[0], b[1]])) == Some(encap::LWTUNNEL_ENCAP_ILA)
    });
    let Some((_, attrs)) = m.other.iter().find(|(t, _)| *t & 0x3fff == rta::ENCAP) else {
        return Ok(None);
    };
    if !is_ila {
        return Ok(None);
    }
    let e = encap::decode(attrs).map_err(|e| Failure::system(format!("list routes: {e}")))?;
    let IpNet::V6(dst) = m.route.key.dst else {
        return Ok(None);
    };
    let spec = RouteSpec {
        dst,
        locator: e.locator,
        csum_mode: e.csum_mode.unwrap_or(CsumMode::NoAction),
        ident_type: e.ident_type.unwrap_or(IdentType::UseFormat),
        hook_type: e.hook_type.unwrap_or(HookType::Output),
    };
    Ok(Some(super::entry(spec, m)))
}

impl Kernel {
    /// Over a generic netlink socket and the family's id.
    pub fn new(genl: Socket, family: u16) -> Kernel {
        Kernel {
            genl,
            family,
            lock: None,
            rtnl: None,
            fib: None,
        }
    }

    /// Every mapping (`ILA_CMD_GET` dump).
    fn dump_mappings(&mut self) -> Result<Vec<Mapping>, Failure> {
        let mut tries = 0;
        loop {
            match self
                .genl
                .dump(&genl_ila::dump(self.family), "list ILA mappings")
            {
                Ok(answers) => {
                    return answers
                        .iter()
                        .map(|p| {
                            genl_ila::decode(p)
                                .map_err(|e| Failure::system(format!("list ILA mappings: {e}")))
                        })
                        .collect()
                }
                // the kernel's table was resized during the dump: "the application needs to
                // deal with this"
                Err(e) if e.errno() == Some(libc::EAGAIN) && tries < 5 => tries += 1,
                Err(e) => return Err(Failure::from(e)),
            }
        }
    }

    /// The mapping with this key (`ILA_CMD_GET`; `ESRCH` is none).
    fn get_mapping(&mut self, key: MappingKey) -> Result<Option<Mapping>, Failure> {
        match self.genl.transact(
            &genl_ila::get(self.family, &key_attrs(key)),
            "get an ILA mapping",
        ) {
            Ok(answers) => match answers.first() {
                Some(p) => genl_ila::decode(p)
                    .map(Some)
                    .map_err(|e| Failure::system(format!("get an ILA mapping: {e}"))),
                None => Ok(None),
            },
            Err(e) if e.errno() == Some(libc::ESRCH) => Ok(None),
            Err(e) => Err(Failure::from(e)),
        }
    }

    /// Every route of LWT encap type ila, in every table (a dump, which the kept view takes).
    fn ila_routes(&mut self) -> Result<Vec<RouteEntry>, Failure> {
        let fib = super::fib_routes(super::rtnl(&mut self.rtnl)?)?;
        let mut out = Vec::new();
        for m in &fib {
            out.extend(ila_route(m)?);
        }
        let mut by_dst: HashMap<Ipv6Net, Vec<RouteEntry>> = HashMap::new();
        for e in &out {
            by_dst.entry(e.spec.dst).or_default().push(*e);
        }
        self.fib = Some(by_dst);
        Ok(out)
    }

    /// Keep the view in step with a write of ours that the kernel took (`put`: `r` added or
    /// replaced; else deleted).
    fn fib_wrote(&mut self, r: &RouteEntry, put: bool) {
        let entry = match (put, r.ifindex) {
            // the kernel chose the device: its entry says which
            (true, 0) => match self.fib_entry(r) {
                Some(e) => Some(e),
                None => {
                    self.fib = None;
                    return;
                }
            },
            (true, _) => Some(*r),
            (false, _) => None,
        };
        let Some(fib) = self.fib.as_mut() else {
            return;
        };
        let same = fib.entry(r.spec.dst).or_default();
        same.retain(|o| o.table != r.table);
        same.extend(entry);
        if same.is_empty() {
            fib.remove(&r.spec.dst);
        }
    }

    /// The kernel's ILA route for `r`'s prefix and table ([`super::fib_match`]).
    fn fib_entry(&mut self, r: &RouteEntry) -> Option<RouteEntry> {
        let m = super::fib_match(&mut self.rtnl, r.spec.dst, r.table)?;
        ila_route(&m).ok().flatten()
    }

    fn route_request(&mut self, verb: Verb, r: &RouteEntry, what: &str) -> Result<(), Failure> {
        let attrs = encap::encode(&encap::Encap {
            locator: r.spec.locator,
            csum_mode: Some(r.spec.csum_mode),
            ident_type: Some(r.spec.ident_type),
            hook_type: Some(r.spec.hook_type),
        });
        // (a delete matches any protocol: the route may come from ip route)
        let put = verb != Verb::Del;
        let req = super::route_request(
            verb,
            r,
            put.then_some(ILA_PROTO),
            put.then_some(LwtEncap {
                kind: encap::LWTUNNEL_ENCAP_ILA,
                attrs: &attrs,
            }),
        );
        let sent = super::rtnl(&mut self.rtnl)?
            .request(&req, what)
            .map_err(or_exists(what));
        match sent {
            Ok(()) => self.fib_wrote(r, put),
            // what the FIB holds now is the dump's to say
            Err(_) => self.fib = None,
        }
        sent
    }
}

impl Tables for Kernel {
    fn kind(&self) -> Kind {
        Kind::Kernel
    }

    /// Hold the namespace's ILA lock from now on (its `lock`).
    fn hold(&mut self) -> Result<(), Failure> {
        if self.lock.is_none() {
            let c = mpt_sys::netns::cookie()
                .map_err(|e| Failure::system(format!("lock the ILA tables: {e}")))?;
            let l = mpt_bpf::pinned::NsLock::take(&mpt_bpf::ila::state::SUITE, c)
                .map_err(|e| Failure::bpf("lock the ILA tables", e))?;
            self.lock = Some(l);
            // read before the lock, the routes may have changed since
            self.fib = None;
        }
        Ok(())
    }

    fn mappings(&mut self) -> Result<Vec<Counted<Mapping>>, Failure> {
        Ok(self
            .dump_mappings()?
            .into_iter()
            .map(|m| (m, None))
            .collect())
    }

    fn mapping(&mut self, key: MappingKey) -> Result<Option<Counted<Mapping>>, Failure> {
        Ok(self.get_mapping(key)?.map(|m| (m, None)))
    }

    /// `ILA_CMD_ADD`; the family has no replace: a replace deletes first.
    fn write_mapping(&mut self, m: &Mapping, w: Write, what: &str) -> Result<(), Failure> {
        if w == Write::Replaced {
            self.genl
                .request(&genl_ila::del(self.family, &key_attrs(m.key())), what)
                .map_err(Failure::from)?;
        }
        self.genl
            .request(&genl_ila::add(self.family, &attrs(m)), what)
            .map_err(or_exists(what))
    }

    /// `ILA_CMD_DEL` of a mapping that exists.
    fn del_mapping(&mut self, key: MappingKey) -> Result<bool, Failure> {
        self.hold()?;
        if self.get_mapping(key)?.is_none() {
            return Ok(false);
        }
        self.genl
            .request(
                &genl_ila::del(self.family, &key_attrs(key)),
                "delete an ILA mapping",
            )
            .map_err(Failure::from)?;
        Ok(true)
    }

    /// `ILA_CMD_FLUSH`.
    fn flush_mappings(&mut self) -> Result<usize, Failure> {
        self.hold()?;
        let n = self.dump_mappings()?.len();
        self.genl
            .request(&genl_ila::flush(self.family), "flush the ILA mappings")
            .map_err(Failure::from)?;
        Ok(n)
    }

    fn routes(&mut self) -> Result<Vec<Counted<RouteEntry>>, Failure> {
        Ok(self.ila_routes()?.into_iter().map(|r| (r, None)).collect())
    }

    /// From the kept view (one dump per invocation), as [`plan::find_route`] finds it in a
    /// dump: the first of the prefix in `table`, or in any table.
    fn route_of(
        &mut self,
        dst: Ipv6Net,
        table: Option<u32>,
    ) -> Result<Option<RouteEntry>, Failure> {
        if self.fib.is_none() {
            self.ila_routes()?;
        }
        Ok(self.fib.as_ref().and_then(|f| {
            mpt_model::ila::plan::find_route(f.get(&dst).into_iter().flatten().copied(), dst, table)
        }))
    }

    fn prepare_routes(&mut self, _create: bool) -> Result<bool, Failure> {
        self.hold().map(|()| true)
    }

    /// `RTM_NEWROUTE ... encap ila` (`NLM_F_REPLACE` for the command replace).
    fn write_route(
        &mut self,
        r: &RouteEntry,
        _w: Write,
        mode: Mode,
        what: &str,
    ) -> Result<(), Failure> {
        let verb = match mode {
            Mode::Replace => Verb::Replace,
            Mode::Add => Verb::Add,
        };
        self.route_request(verb, r, what)
    }

    /// `RTM_DELROUTE` of an ILA route.
    fn remove_route(&mut self, r: &RouteEntry, what: &str) -> Result<(), Failure> {
        self.route_request(Verb::Del, r, what)
    }
}

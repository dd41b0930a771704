//! The kernel's ILA module: mappings over the generic netlink family "ila" (as `ip ila`),
//! routes as `RTA_ENCAP` routes of LWT encap type 3 over rtnetlink (as `ip route ... encap
//! ila`), both in the kernel's own encoding (`mpt_netlink::msg::genl::ila`).
//!
//! The kernel's answers that differ from our semantics are made to agree: its `DEL` answers 0
//! whether or not a mapping matched (we look first, and an absent mapping is an error); it has
//! no replace (a changed mapping is deleted and added again, a moment without it); a dump may
//! end with `EAGAIN` when its table was resized meanwhile (dumped again).

use std::net::IpAddr;

use ipnet::{IpNet, Ipv6Net};
use mpt_cli::Failure;
use mpt_model::ila::{CsumMode, HookType, IdentType, Mapping, RouteSpec};
use mpt_model::{Algo, Nexthop, RouteKey, Verb, ILA_PROTO};
use mpt_netlink::msg::genl::ila::{self as genl_ila, encap, MappingAttrs};
use mpt_netlink::msg::rtnl::route::{self as rmsg, rta, LwtEncap, PathForm, RouteRequest};
use mpt_netlink::sock::Socket;

use super::{exists, MappingKey, RouteEntry, Written};

/// Sockets of the kernel backend.
pub struct Kernel {
    genl: Socket,
    family: u16,
    rtnl: Option<Socket>,
    /// The namespace's ILA lock (the translator's): ila's own check-then-act (a replace is a
    /// delete and an add here, `del ... loc L` compares first) is not interleaved with another
    /// ila's.
    lock: Option<mpt_bpf::pinned::NsLock>,
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

impl Kernel {
    /// Hold the namespace's ILA lock from now on (its `lock`).
    pub fn hold(&mut self) -> Result<(), Failure> {
        if self.lock.is_none() {
            let c = mpt_sys::netns::cookie()
                .map_err(|e| Failure::system(format!("lock the ILA tables: {e}")))?;
            let l = mpt_bpf::pinned::NsLock::take(&mpt_bpf::ila::state::SUITE, c)
                .map_err(|e| super::bpf::fail("lock the ILA tables", e))?;
            self.lock = Some(l);
        }
        Ok(())
    }

    /// Over a generic netlink socket and the family's id.
    pub fn new(genl: Socket, family: u16) -> Kernel {
        Kernel {
            genl,
            family,
            lock: None,
            rtnl: None,
        }
    }

    fn rtnl(&mut self) -> Result<&mut Socket, Failure> {
        if self.rtnl.is_none() {
            self.rtnl = Some(Socket::route().map_err(Failure::from)?);
        }
        self.rtnl
            .as_mut()
            .ok_or_else(|| Failure::system("netlink socket unavailable"))
    }

    /// Every mapping (`ILA_CMD_GET` dump).
    pub fn mappings(&mut self) -> Result<Vec<Mapping>, Failure> {
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
    pub fn mapping(&mut self, key: MappingKey) -> Result<Option<Mapping>, Failure> {
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

    /// `ILA_CMD_ADD`, after a look at what is there.
    pub fn put_mapping(
        &mut self,
        m: &Mapping,
        replace: bool,
        what: &str,
    ) -> Result<Written, Failure> {
        self.hold()?;
        let old = self.mapping(m.key())?;
        let outcome = match (&old, replace) {
            (Some(_), false) => return Err(exists(what)),
            (Some(o), true) if o == m => return Ok(Written::Unchanged),
            (Some(_), true) => {
                // no replace in the kernel's family
                self.genl
                    .request(&genl_ila::del(self.family, &key_attrs(m.key())), what)
                    .map_err(Failure::from)?;
                Written::Replaced
            }
            (None, _) => Written::Added,
        };
        self.genl
            .request(&genl_ila::add(self.family, &attrs(m)), what)
            .map_err(|e| {
                if e.errno() == Some(libc::EEXIST) {
                    exists(what)
                } else {
                    Failure::from(e)
                }
            })?;
        Ok(outcome)
    }

    /// `ILA_CMD_DEL` of a mapping that exists.
    pub fn del_mapping(&mut self, key: MappingKey) -> Result<bool, Failure> {
        self.hold()?;
        if self.mapping(key)?.is_none() {
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
    pub fn flush_mappings(&mut self) -> Result<usize, Failure> {
        self.hold()?;
        let n = self.mappings()?.len();
        self.genl
            .request(&genl_ila::flush(self.family), "flush the ILA mappings")
            .map_err(Failure::from)?;
        Ok(n)
    }

    /// Every route of LWT encap type ila, in every table.
    pub fn routes(&mut self) -> Result<Vec<RouteEntry>, Failure> {
        let answers = self
            .rtnl()?
            .dump(
                &rmsg::dump_request(Some(mpt_model::Family::V6), None),
                "list routes",
            )
            .map_err(Failure::from)?;
        let mut out = Vec::new();
        for p in answers {
            let Some(m) =
                rmsg::decode(&p).map_err(|e| Failure::system(format!("list routes: {e}")))?
            else {
                continue;
            };
            let ty = m.other.iter().find(|(t, _)| *t == rta::ENCAP_TYPE);
            let is_ila = ty.is_some_and(|(_, v)| {
                v.get(..2).map(|b| u16::from_ne_bytes([b[0], b[1]]))
                    == Some(encap::LWTUNNEL_ENCAP_ILA)
            });
            let Some((_, attrs)) = m.other.iter().find(|(t, _)| *t & 0x3fff == rta::ENCAP) else {
                continue;
            };
            if !is_ila {
                continue;
            }
            let e =
                encap::decode(attrs).map_err(|e| Failure::system(format!("list routes: {e}")))?;
            let IpNet::V6(dst) = m.route.key.dst else {
                continue;
            };
            let nh = m.route.nexthops.first();
            out.push(RouteEntry {
                spec: RouteSpec {
                    dst,
                    locator: e.locator,
                    csum_mode: e.csum_mode.unwrap_or(CsumMode::NoAction),
                    ident_type: e.ident_type.unwrap_or(IdentType::UseFormat),
                    hook_type: e.hook_type.unwrap_or(HookType::Output),
                },
                via: nh.and_then(|n| match n.gateway {
                    Some(IpAddr::V6(a)) => Some(a),
                    _ => None,
                }),
                ifindex: nh.map_or(0, |n| n.ifindex),
                table: m.route.key.table,
            });
        }
        Ok(out)
    }

    fn route_request(&mut self, verb: Verb, r: &RouteEntry, what: &str) -> Result<(), Failure> {
        let attrs = encap::encode(&encap::Encap {
            locator: r.spec.locator,
            csum_mode: Some(r.spec.csum_mode),
            ident_type: Some(r.spec.ident_type),
            hook_type: Some(r.spec.hook_type),
        });
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
            // (a delete matches any protocol: the route may come from ip route)
            protocol: (verb != Verb::Del).then_some(ILA_PROTO),
            nexthops: if verb == Verb::Del || (r.via.is_none() && r.ifindex == 0) {
                &[]
            } else {
                &nexthops
            },
            form: PathForm::Single,
            algo: Algo::L3Hash,
            encap: (verb != Verb::Del).then_some(LwtEncap {
                kind: encap::LWTUNNEL_ENCAP_ILA,
                attrs: &attrs,
            }),
        });
        self.rtnl()?.request(&req, what).map_err(|e| {
            if e.errno() == Some(libc::EEXIST) {
                exists(what)
            } else {
                Failure::from(e)
            }
        })
    }

    /// `RTM_NEWROUTE ... encap ila`.
    pub fn put_route(
        &mut self,
        r: &RouteEntry,
        replace: bool,
        what: &str,
    ) -> Result<Written, Failure> {
        self.hold()?;
        let old = self
            .routes()?
            .into_iter()
            .find(|o| o.spec.dst == r.spec.dst && o.table == r.table);
        let outcome = match (&old, replace) {
            (Some(_), false) => return Err(exists(what)),
            (Some(o), true) if o == r => return Ok(Written::Unchanged),
            (Some(_), true) => Written::Replaced,
            (None, _) => Written::Added,
        };
        let verb = if replace { Verb::Replace } else { Verb::Add };
        self.route_request(verb, r, what)?;
        Ok(outcome)
    }

    /// `RTM_DELROUTE` of an ILA route.
    pub fn del_route(
        &mut self,
        dst: Ipv6Net,
        table: Option<u32>,
        what: &str,
    ) -> Result<Option<RouteEntry>, Failure> {
        self.hold()?;
        let Some(old) = self
            .routes()?
            .into_iter()
            .find(|o| o.spec.dst == dst && table.is_none_or(|t| t == o.table))
        else {
            return Ok(None);
        };
        self.route_request(Verb::Del, &old, what)?;
        Ok(Some(old))
    }
}

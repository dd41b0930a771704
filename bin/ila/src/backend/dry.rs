//! `--check`: the dry run's backend. It reads the namespace's tables once from the real
//! backend and then plays every write on a copy in memory, with the real backends' rules (add of
//! an existing key: EEXIST; replace with the same values: unchanged; one table per prefix for
//! the BPF translator), so that the lines of a batch see what the lines before them would have
//! done. Nothing is written: no map, no genl request, no FIB route, no state created. The FIB
//! route a route would get is resolved as the real command resolves it, and its nexthop checked
//! as the kernel would ([`mpt_cli::predict`]).

use ipnet::Ipv6Net;
use mpt_cli::Failure;
use mpt_model::ila::Mapping;
use mpt_netlink::sock::Socket;

use super::{exists, Backend, Counter, Kind, MappingKey, RouteEntry, Written};

/// The real backend (read only) and the tables as the dry run has them.
#[derive(Debug)]
pub struct Dry {
    inner: Backend,
    mappings: Option<Vec<(Mapping, Option<Counter>)>>,
    routes: Option<Vec<(RouteEntry, Option<Counter>)>>,
    rtnl: Option<Socket>,
}

impl Dry {
    /// Over the real backend.
    pub fn new(inner: Backend) -> Dry {
        Dry {
            inner,
            mappings: None,
            routes: None,
            rtnl: None,
        }
    }

    /// The real backend's kind.
    pub fn kind(&self) -> Kind {
        self.inner.kind()
    }

    fn maps(&mut self) -> Result<&mut Vec<(Mapping, Option<Counter>)>, Failure> {
        if self.mappings.is_none() {
            self.mappings = Some(self.inner.mappings()?);
        }
        self.mappings
            .as_mut()
            .ok_or_else(|| Failure::system("ILA mappings unavailable"))
    }

    fn rts(&mut self) -> Result<&mut Vec<(RouteEntry, Option<Counter>)>, Failure> {
        if self.routes.is_none() {
            self.routes = Some(self.inner.routes()?);
        }
        self.routes
            .as_mut()
            .ok_or_else(|| Failure::system("ILA routes unavailable"))
    }

    /// Every mapping.
    pub fn mappings(&mut self) -> Result<Vec<(Mapping, Option<Counter>)>, Failure> {
        Ok(self.maps()?.clone())
    }

    /// The mapping with this key.
    pub fn mapping(
        &mut self,
        key: MappingKey,
    ) -> Result<Option<(Mapping, Option<Counter>)>, Failure> {
        Ok(self.maps()?.iter().find(|(m, _)| m.key() == key).cloned())
    }

    /// As the real backends write a mapping.
    pub fn put_mapping(
        &mut self,
        m: &Mapping,
        replace: bool,
        what: &str,
    ) -> Result<Written, Failure> {
        let maps = self.maps()?;
        match maps.iter_mut().find(|(o, _)| o.key() == m.key()) {
            Some(_) if !replace => Err(exists(what)),
            Some((o, _)) if o == m => Ok(Written::Unchanged),
            Some((o, _)) => {
                *o = *m;
                Ok(Written::Replaced)
            }
            None => {
                maps.push((*m, None));
                Ok(Written::Added)
            }
        }
    }

    /// Delete a mapping; `false` if there is none.
    pub fn del_mapping(&mut self, key: MappingKey) -> Result<bool, Failure> {
        let maps = self.maps()?;
        let n = maps.len();
        maps.retain(|(m, _)| m.key() != key);
        Ok(maps.len() != n)
    }

    /// Delete every mapping.
    pub fn flush_mappings(&mut self) -> Result<usize, Failure> {
        let maps = self.maps()?;
        let n = maps.len();
        maps.clear();
        Ok(n)
    }

    /// Every route.
    pub fn routes(&mut self) -> Result<Vec<(RouteEntry, Option<Counter>)>, Failure> {
        Ok(self.rts()?.clone())
    }

    /// As the real backend writes a route: its FIB route resolved and checked, then the rules.
    pub fn put_route(
        &mut self,
        r: &RouteEntry,
        replace: bool,
        what: &str,
    ) -> Result<Written, Failure> {
        let want = match &mut self.inner {
            Backend::Bpf(b) => b.fib_target(r, what)?,
            _ => *r,
        };
        if self.rtnl.is_none() {
            self.rtnl = Some(Socket::route().map_err(Failure::from)?);
        }
        if let Some(sock) = self.rtnl.as_mut() {
            let gw = want.via.map(std::net::IpAddr::V6);
            mpt_cli::predict::nexthop(sock, what, false, gw, want.ifindex, false)?;
        }
        let one_table = self.kind() == Kind::Bpf;
        let routes = self.rts()?;
        let old = routes
            .iter_mut()
            .find(|(o, _)| o.spec.dst == r.spec.dst && (one_table || o.table == r.table));
        match old {
            Some((o, _)) if o.table != r.table => Err(Failure::system(format!(
                "{what}: the translator's table is one per namespace, and {} is in table {} [EEXIST]",
                r.spec.dst,
                mpt_cli::names::table_name(o.table)
            ))),
            Some(_) if !replace => Err(exists(what)),
            Some((o, _)) if *o == want => Ok(Written::Unchanged),
            Some((o, _)) => {
                *o = want;
                Ok(Written::Replaced)
            }
            None => {
                routes.push((want, None));
                Ok(Written::Added)
            }
        }
    }

    /// Delete the route for a prefix; returns it.
    pub fn del_route(
        &mut self,
        dst: Ipv6Net,
        table: Option<u32>,
        _what: &str,
    ) -> Result<Option<RouteEntry>, Failure> {
        let routes = self.rts()?;
        let i = routes
            .iter()
            .position(|(o, _)| o.spec.dst == dst && table.is_none_or(|t| t == o.table));
        Ok(i.map(|i| routes.remove(i).0))
    }
}

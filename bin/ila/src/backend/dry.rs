//! `--check`: the dry run, a decorator over a real backend. It reads the namespace's tables
//! once through the backend it wraps and then plays every write on a copy in memory, by the
//! same put rule ([`Tables::put_mapping`], [`Tables::put_route`]: add of an existing key EEXIST,
//! replace with the same values unchanged, one table per prefix for the BPF translator), so that
//! the lines of a batch see what the lines before them would have done. Nothing is written: no
//! map, no genl request, no FIB route, no state created. The FIB route a route would get is
//! resolved as the real command resolves it, and its nexthop checked as the kernel would
//! ([`mpt_cli::predict`]).

use mpt_cli::Failure;
use mpt_model::ila::plan::{Mode, Write};
use mpt_model::ila::Mapping;
use mpt_netlink::sock::Socket;

use super::{filled, Counted, Kind, MappingKey, RouteEntry, Tables};

/// The real backend (read only) and the tables as the dry run has them.
#[derive(Debug)]
pub struct Dry<T> {
    inner: T,
    mappings: Option<Vec<Counted<Mapping>>>,
    routes: Option<Vec<Counted<RouteEntry>>>,
    rtnl: Option<Socket>,
}

impl<T: Tables> Dry<T> {
    /// Over the real backend.
    pub fn new(inner: T) -> Dry<T> {
        Dry {
            inner,
            mappings: None,
            routes: None,
            rtnl: None,
        }
    }

    fn maps(&mut self) -> Result<&mut Vec<Counted<Mapping>>, Failure> {
        filled(&mut self.mappings, || self.inner.mappings())
    }

    fn rts(&mut self) -> Result<&mut Vec<Counted<RouteEntry>>, Failure> {
        filled(&mut self.routes, || self.inner.routes())
    }
}

impl<T: Tables> Tables for Dry<T> {
    fn kind(&self) -> Kind {
        self.inner.kind()
    }

    fn hold(&mut self) -> Result<(), Failure> {
        Ok(())
    }

    fn mappings(&mut self) -> Result<Vec<Counted<Mapping>>, Failure> {
        Ok(self.maps()?.clone())
    }

    fn mapping(&mut self, key: MappingKey) -> Result<Option<Counted<Mapping>>, Failure> {
        Ok(self.maps()?.iter().find(|(m, _)| m.key() == key).cloned())
    }

    fn write_mapping(&mut self, m: &Mapping, _w: Write, _what: &str) -> Result<(), Failure> {
        let maps = self.maps()?;
        match maps.iter_mut().find(|(o, _)| o.key() == m.key()) {
            Some((o, _)) => *o = *m,
            None => maps.push((*m, None)),
        }
        Ok(())
    }

    fn del_mapping(&mut self, key: MappingKey) -> Result<bool, Failure> {
        let maps = self.maps()?;
        let n = maps.len();
        maps.retain(|(m, _)| m.key() != key);
        Ok(maps.len() != n)
    }

    fn flush_mappings(&mut self) -> Result<usize, Failure> {
        let maps = self.maps()?;
        let n = maps.len();
        maps.clear();
        Ok(n)
    }

    fn routes(&mut self) -> Result<Vec<Counted<RouteEntry>>, Failure> {
        Ok(self.rts()?.clone())
    }

    fn prepare_routes(&mut self, _create: bool) -> Result<bool, Failure> {
        Ok(true)
    }

    /// As the real backend would write it, and its nexthop checked as the kernel would.
    fn fib_target(&mut self, r: &RouteEntry, what: &str) -> Result<RouteEntry, Failure> {
        let want = self.inner.fib_target(r, what)?;
        let sock = filled(&mut self.rtnl, || Socket::route().map_err(Failure::from))?;
        let gw = want.via.map(std::net::IpAddr::V6);
        mpt_cli::predict::nexthop(sock, what, false, gw, want.ifindex, false)?;
        Ok(want)
    }

    fn write_route(
        &mut self,
        r: &RouteEntry,
        _w: Write,
        _mode: Mode,
        _what: &str,
    ) -> Result<(), Failure> {
        let one_table = self.kind() == Kind::Bpf;
        let routes = self.rts()?;
        match routes
            .iter_mut()
            .find(|(o, _)| o.spec.dst == r.spec.dst && (one_table || o.table == r.table))
        {
            Some((o, _)) => *o = *r,
            None => routes.push((*r, None)),
        }
        Ok(())
    }

    fn remove_route(&mut self, r: &RouteEntry, _what: &str) -> Result<(), Failure> {
        self.rts()?.retain(|(e, _)| e != r);
        Ok(())
    }
}

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
//! `--backend auto` picks the kernel's where its family resolves, else bpf ([`Backend::open`]).

pub mod bpf;
pub mod dry;
pub mod kernel;

use std::net::Ipv6Addr;

use ipnet::Ipv6Net;
use mpt_cli::Failure;
use mpt_model::ila::{Locator, Mapping, RouteSpec};
use mpt_netlink::sock::Socket;

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

/// An ILA route as the FIB holds it: the translation, and where the route sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteEntry {
    /// The translation (the SIR prefix, the locator, modes, hook).
    pub spec: RouteSpec,
    /// Gateway.
    pub via: Option<Ipv6Addr>,
    /// Device (0: none given).
    pub ifindex: u32,
    /// Table.
    pub table: u32,
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// A new entry.
    Added,
    /// An entry with other values, replaced.
    Replaced,
    /// The entry was there as asked: nothing changed.
    Unchanged,
}

/// `what: the entry exists [EEXIST]`, with the remedy.
pub fn exists(what: &str) -> Failure {
    Failure::system(format!("{what}: it exists [EEXIST]")).hint("use replace to change it")
}

/// `what: no such entry [ESRCH]`.
pub fn absent(what: &str) -> Failure {
    Failure::system(format!("{what}: no such entry [ESRCH]"))
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

/// The namespace's ILA tables, by one implementation.
#[derive(Debug)]
pub enum Backend {
    /// The kernel's.
    Kernel(Box<kernel::Kernel>),
    /// The BPF translator's.
    Bpf(Box<bpf::Bpf>),
    /// `--check`: one of the others, read only, with the writes played in memory.
    Dry(Box<dry::Dry>),
}

impl Backend {
    /// The backend `choice` asks for, in the calling thread's namespace. `kernel` where the
    /// kernel has no ILA is a failure that says so; `auto` then takes bpf.
    pub fn open(choice: BackendChoice) -> Result<Backend, Failure> {
        if choice == BackendChoice::Bpf {
            return Ok(Backend::Bpf(Box::default()));
        }
        let mut genl = Socket::generic().map_err(Failure::from)?;
        let mut found = genl.resolve_family(mpt_netlink::msg::genl::ila::FAMILY);
        if choice == BackendChoice::Kernel && matches!(found, Ok(None)) && load_module() {
            // asked for by name: the module, where the kernel has it but has not loaded it (its
            // generic netlink family has no alias the kernel could load it by, as Debian ships it)
            found = genl.resolve_family(mpt_netlink::msg::genl::ila::FAMILY);
        }
        match found {
            Ok(Some(f)) => Ok(Backend::Kernel(Box::new(kernel::Kernel::new(genl, f.id)))),
            Ok(None) if choice == BackendChoice::Auto => Ok(Backend::Bpf(Box::default())),
            Ok(None) => Err(Failure::system(
                "backend kernel: this kernel has no ILA (the generic netlink family \"ila\" is absent: CONFIG_IPV6_ILA, module ila) [ENOENT]",
            )
            .hint("use --backend bpf (or auto, the default), ila's BPF translator")),
            Err(e) => Err(Failure::from(e)),
        }
    }

    /// The work left at the end of the invocation.
    pub fn finish(&mut self) -> Result<(), Failure> {
        match self {
            Backend::Kernel(_) | Backend::Dry(_) => Ok(()),
            Backend::Bpf(b) => b.finish(),
        }
    }

    /// Which one.
    pub fn kind(&self) -> Kind {
        match self {
            Backend::Kernel(_) => Kind::Kernel,
            Backend::Bpf(_) => Kind::Bpf,
            Backend::Dry(d) => d.kind(),
        }
    }

    /// Every mapping, with its counter where the backend keeps one.
    pub fn mappings(&mut self) -> Result<Vec<(Mapping, Option<Counter>)>, Failure> {
        match self {
            Backend::Kernel(k) => Ok(k.mappings()?.into_iter().map(|m| (m, None)).collect()),
            Backend::Bpf(b) => b.mappings(),
            Backend::Dry(d) => d.mappings(),
        }
    }

    /// Hold the lock the next change takes before what it checks is read (see
    /// [`bpf::Bpf::hold`]); `--check` writes nothing and holds nothing.
    pub fn hold(&mut self) -> Result<(), Failure> {
        match self {
            Backend::Kernel(k) => k.hold(),
            Backend::Bpf(b) => b.hold(),
            Backend::Dry(_) => Ok(()),
        }
    }

    /// The mapping with exactly this key.
    pub fn mapping(
        &mut self,
        key: MappingKey,
    ) -> Result<Option<(Mapping, Option<Counter>)>, Failure> {
        match self {
            Backend::Kernel(k) => Ok(k.mapping(key)?.map(|m| (m, None))),
            Backend::Bpf(b) => b.mapping(key),
            Backend::Dry(d) => d.mapping(key),
        }
    }

    /// Add a mapping (`replace`: or overwrite the one with its key). An add of an existing key
    /// fails ([`exists`]).
    pub fn put_mapping(
        &mut self,
        m: &Mapping,
        replace: bool,
        what: &str,
    ) -> Result<Written, Failure> {
        match self {
            Backend::Kernel(k) => k.put_mapping(m, replace, what),
            Backend::Bpf(b) => b.put_mapping(m, replace, what),
            Backend::Dry(d) => d.put_mapping(m, replace, what),
        }
    }

    /// Delete the mapping with this key; `false` if there is none.
    pub fn del_mapping(&mut self, key: MappingKey) -> Result<bool, Failure> {
        match self {
            Backend::Kernel(k) => k.del_mapping(key),
            Backend::Bpf(b) => b.del_mapping(key),
            Backend::Dry(d) => d.del_mapping(key),
        }
    }

    /// Delete every mapping; returns how many there were.
    pub fn flush_mappings(&mut self) -> Result<usize, Failure> {
        match self {
            Backend::Kernel(k) => k.flush_mappings(),
            Backend::Bpf(b) => b.flush_mappings(),
            Backend::Dry(d) => d.flush_mappings(),
        }
    }

    /// Every ILA route, with its counter where the backend keeps one.
    pub fn routes(&mut self) -> Result<Vec<(RouteEntry, Option<Counter>)>, Failure> {
        match self {
            Backend::Kernel(k) => Ok(k.routes()?.into_iter().map(|r| (r, None)).collect()),
            Backend::Bpf(b) => b.routes(),
            Backend::Dry(d) => d.routes(),
        }
    }

    /// Add a route (`replace`: or overwrite the one for its prefix and table).
    pub fn put_route(
        &mut self,
        r: &RouteEntry,
        replace: bool,
        what: &str,
    ) -> Result<Written, Failure> {
        match self {
            Backend::Kernel(k) => k.put_route(r, replace, what),
            Backend::Bpf(b) => b.put_route(r, replace, what),
            Backend::Dry(d) => d.put_route(r, replace, what),
        }
    }

    /// Delete the ILA route for a prefix (in `table`, or the one table it is in); returns it,
    /// `None` if there is none.
    pub fn del_route(
        &mut self,
        dst: Ipv6Net,
        table: Option<u32>,
        what: &str,
    ) -> Result<Option<RouteEntry>, Failure> {
        match self {
            Backend::Kernel(k) => k.del_route(dst, table, what),
            Backend::Bpf(b) => b.del_route(dst, table, what),
            Backend::Dry(d) => d.del_route(dst, table, what),
        }
    }
}

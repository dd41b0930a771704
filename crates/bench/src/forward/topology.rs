//! The three namespaces H1 ─ R ─ H2 over veth (one queue per CPU), their devices, and running
//! on this thread inside one of them.

use std::fs::File;

use anyhow::{anyhow, ensure, Context, Result};
use libbpf_rs::{Link, ProgramMut};
use mpt_testkit::packet::hexmac;
use mpt_testkit::Netns;
use nix::sched::{setns, CloneFlags};

use crate::support::{self, sysctl};

/// A device: ifindex and MAC.
#[derive(Debug, Clone, Copy)]
pub(super) struct Dev {
    pub(super) ifindex: u32,
    pub(super) mac: [u8; 6],
}

pub(super) fn link(ns: &str, dev: &str) -> Result<Dev> {
    let out = support::ip(["-n", ns, "-j", "link", "show", "dev", dev])?;
    let v: serde_json::Value = serde_json::from_str(&out).context("ip -j link: not JSON")?;
    let l = v.get(0).with_context(|| format!("{ns}: no device {dev}"))?;
    let ifindex = l
        .get("ifindex")
        .and_then(serde_json::Value::as_u64)
        .with_context(|| format!("{ns}/{dev}: no ifindex"))?;
    let addr = l
        .get("address")
        .and_then(serde_json::Value::as_str)
        .with_context(|| format!("{ns}/{dev}: no address"))?;
    let mut mac = [0u8; 6];
    let parts: Vec<&str> = addr.split(':').collect();
    ensure!(parts.len() == 6, "{ns}/{dev}: bad MAC {addr}");
    for (m, p) in mac.iter_mut().zip(parts) {
        *m = u8::from_str_radix(p, 16).with_context(|| format!("{ns}/{dev}: bad MAC {addr}"))?;
    }
    Ok(Dev {
        ifindex: u32::try_from(ifindex)?,
        mac,
    })
}

/// The three namespaces (deleted, with everything in them, when this is dropped) and the
/// devices the benchmark needs.
#[derive(Debug)]
pub(super) struct Topology {
    pub(super) h1: Netns,
    pub(super) r: Netns,
    pub(super) h2: Netns,
    pub(super) h1_eth0: Dev,
    pub(super) vin: Dev,
    pub(super) vout: Dev,
    pub(super) h2_eth0: Dev,
}

impl Topology {
    pub(super) fn build() -> Result<Self> {
        let h1 = support::netns("fwd-h1")?;
        let r = support::netns("fwd-r")?;
        let h2 = support::netns("fwd-h2")?;
        // `ip -n NS LINE`, with the error as anyhow's
        let ip = |ns: &Netns, line: &str| ns.try_ip(line).map(drop).map_err(|e| anyhow!(e));
        // One queue per CPU: a veth puts what it is sent on the peer's queue of the sending
        // CPU, so each CPU has its own ring and NAPI instead of contending for one.
        let q = std::thread::available_parallelism().map_or(1, usize::from);
        for (rdev, raddr, host, haddr, raddr6, haddr6) in [
            (
                "vin",
                "10.10.0.1/24",
                &h1,
                "10.10.0.2/24",
                "2001:db8:10::1/64",
                "2001:db8:10::2/64",
            ),
            (
                "vout",
                "10.20.0.1/24",
                &h2,
                "10.20.0.2/24",
                "2001:db8:20::1/64",
                "2001:db8:20::2/64",
            ),
        ] {
            ip(
                &r,
                &format!(
                    "link add {rdev} numtxqueues {q} numrxqueues {q} type veth \
                     peer name eth0 numtxqueues {q} numrxqueues {q} netns {}",
                    host.name()
                ),
            )?;
            ip(&r, &format!("addr add {raddr} dev {rdev}"))?;
            ip(host, &format!("addr add {haddr} dev eth0"))?;
            ip(&r, &format!("addr add {raddr6} dev {rdev} nodad"))?;
            ip(host, &format!("addr add {haddr6} dev eth0 nodad"))?;
            ip(&r, &format!("link set {rdev} up"))?;
            ip(host, "link set eth0 up")?;
        }
        sysctl(r.name(), "net.ipv4.ip_forward=1")?;
        sysctl(r.name(), "net.ipv6.conf.all.forwarding=1")?;
        ip(&h1, "route add default via 10.10.0.1")?;
        ip(&h2, "route add default via 10.20.0.1")?;
        ip(&h1, "-6 route add default via 2001:db8:10::1")?;
        ip(&h2, "-6 route add default via 2001:db8:20::1")?;
        let h1_eth0 = link(h1.name(), "eth0")?;
        let vin = link(r.name(), "vin")?;
        let vout = link(r.name(), "vout")?;
        let h2_eth0 = link(h2.name(), "eth0")?;
        for (ns, addr, mac, dev) in [
            (&h1, "10.10.0.1", vin.mac, "eth0"),
            (&r, "10.10.0.2", h1_eth0.mac, "vin"),
            (&r, "10.20.0.2", h2_eth0.mac, "vout"),
            (&h2, "10.20.0.1", vout.mac, "eth0"),
            (&h1, "2001:db8:10::1", vin.mac, "eth0"),
            (&r, "2001:db8:10::2", h1_eth0.mac, "vin"),
            (&r, "2001:db8:20::2", h2_eth0.mac, "vout"),
            (&h2, "2001:db8:20::1", vout.mac, "eth0"),
        ] {
            ip(
                ns,
                &format!(
                    "neigh replace {addr} lladdr {} dev {dev} nud permanent",
                    hexmac(&mac)
                ),
            )?;
        }
        Ok(Topology {
            h1,
            r,
            h2,
            h1_eth0,
            vin,
            vout,
            h2_eth0,
        })
    }
}

/// Runs `f` on this thread inside namespace `ns`, then puts the thread back where it was
/// (program attachments name their device by ifindex in the caller's namespace).
pub(super) fn on_this_thread_in<T>(ns: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let home = File::open("/proc/thread-self/ns/net").context("open /proc/thread-self/ns/net")?;
    let path = format!("/run/netns/{ns}");
    let target = File::open(&path).with_context(|| format!("open {path}"))?;
    setns(&target, CloneFlags::CLONE_NEWNET).with_context(|| format!("setns {path}"))?;
    let r = f();
    setns(&home, CloneFlags::CLONE_NEWNET).context("setns back to xtask's own namespace")?;
    r
}

pub(super) fn attach_xdp(ns: &str, prog: &ProgramMut<'_>, dev: Dev) -> Result<Link> {
    on_this_thread_in(ns, || {
        prog.attach_xdp(i32::try_from(dev.ifindex)?)
            .with_context(|| format!("attach {} in {ns}", prog.name().to_string_lossy()))
    })
}

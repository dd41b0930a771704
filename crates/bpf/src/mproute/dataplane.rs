//! The dataplane: loading `bpf/mproute/dp.bpf.c` with the namespace's state maps, attaching it to
//! devices (XDP native, XDP generic, tcx ingress) with legacy attachments that outlive the
//! process, finding attachments again, and reading its counters.

use crate::log::Traced;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::AsFd;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, OpenObject};

use super::state::RouteState;
use crate::attach::{self, TcxDir, XdpMode};
use crate::error::Error;
use crate::skel::mproute::dp::{DpSkel, DpSkelBuilder};
use crate::skel::mproute::drops::DropsSkelBuilder;

/// Program names as the kernel reports them.
pub const XDP_PROG: &str = "mpt_dp_xdp";
/// Program names as the kernel reports them.
pub const TC_PROG: &str = "mpt_dp_tc";

/// Where the dataplane runs on a device.
pub use crate::attach::Hook as Mode;

/// One attachment found on a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// Device.
    pub ifindex: u32,
    /// Hook.
    pub mode: Mode,
    /// Program id.
    pub prog_id: u32,
}

fn bpf(what: &str) -> impl FnOnce(libbpf_rs::Error) -> Error + '_ {
    Error::libbpf(what)
}

use crate::attach::prog_name;

/// Our programs, for [`attach::ours_on`].
const PROGRAMS: attach::Programs = attach::Programs {
    xdp: XDP_PROG,
    tc_ingress: &[TC_PROG],
    tc_egress: None,
};

/// The id of whatever XDP program (ours or not) runs on a device.
pub fn xdp_prog(ifindex: u32) -> Result<Option<u32>, Error> {
    Ok(attach::xdp_query(ifindex)?.map(|(id, _)| id))
}

/// Our attachments on one device.
pub fn attachments_on(ifindex: u32) -> Result<Vec<Attachment>, Error> {
    Ok(attach::ours_on(ifindex, &PROGRAMS)?
        .into_iter()
        .map(|f| Attachment {
            ifindex,
            mode: f.hook,
            prog_id: f.prog_id,
        })
        .collect())
}

/// The state maps of a skeleton's open maps (every object that uses `bpf/mproute/maps.bpf.h` declares
/// all of them), by name, for [`reuse_state_maps`].
macro_rules! state_maps {
    ($m:expr) => {
        [
            ("mpt_meta", &mut $m.mpt_meta),
            ("mpt_routes", &mut $m.mpt_routes),
            ("mpt_lpm4", &mut $m.mpt_lpm4),
            ("mpt_lpm6", &mut $m.mpt_lpm6),
            ("mpt_groups", &mut $m.mpt_groups),
            ("mpt_stats", &mut $m.mpt_stats),
            ("mpt_res", &mut $m.mpt_res),
            ("mpt_slot_stats", &mut $m.mpt_slot_stats),
            ("mpt_pcpu", &mut $m.mpt_pcpu),
            ("mpt_reasons", &mut $m.mpt_reasons),
        ]
    };
}

/// Make an object that declares the maps of `bpf/mproute/maps.bpf.h` use the namespace's state maps
/// (by name) instead of creating its own.
fn reuse_state_maps<'a, 'o: 'a>(
    state: &RouteState,
    maps: impl IntoIterator<Item = (&'static str, &'a mut libbpf_rs::OpenMapMut<'o>)>,
) -> Result<(), Error> {
    for (name, map) in maps {
        let h = state.pinned.reusable(name)?;
        map.reuse_fd(h.as_fd()).map_err(bpf("reuse a state map"))?;
    }
    Ok(())
}

/// The load-time constants (`.rodata`) of the dataplane program `prog_id`, if it has them.
fn loaded_rodata(prog_id: u32) -> Result<Option<crate::skel::mproute::dp::types::rodata>, Error> {
    let ids = crate::prog::info(prog_id)?.map_ids;
    for id in &ids {
        let Ok(map) = libbpf_rs::MapHandle::from_map_id(*id) else {
            continue;
        };
        if !map.name().to_string_lossy().ends_with(".rodata") {
            continue;
        }
        let Some(v) = map
            .lookup(&0u32.to_ne_bytes(), libbpf_rs::MapFlags::ANY)
            .map_err(bpf("read the dataplane's .rodata"))?
        else {
            return Ok(None);
        };
        type Ro = crate::skel::mproute::dp::types::rodata;
        if v.len() < std::mem::size_of::<Ro>() {
            return Ok(None);
        }
        // SAFETY: v holds at least size_of::<Ro>() bytes of the section Ro describes (plain
        // integers and arrays, any bit pattern valid); read_unaligned copes with the alignment.
        return Ok(Some(unsafe {
            std::ptr::read_unaligned(v.as_ptr().cast::<Ro>())
        }));
    }
    Ok(None)
}

/// The egress devices the tc program `prog_id` delivers straight into their veth peer's
/// namespace (its `mpt_peer_ports`, filled at attach time), by ifindex, sorted; empty for an XDP
/// program or one loaded without the map.
pub fn peer_ports(prog_id: u32) -> Result<Vec<u32>, Error> {
    for id in crate::prog::info(prog_id)?.map_ids {
        let Ok(map) = libbpf_rs::MapHandle::from_map_id(id) else {
            continue;
        };
        if map.name().to_string_lossy() != "mpt_peer_ports" {
            continue;
        }
        let mut v = Vec::new();
        for slot in 0..map.max_entries() {
            let val = map
                .lookup(&slot.to_ne_bytes(), libbpf_rs::MapFlags::ANY)
                .map_err(bpf("read the tc program's peer map"))?;
            if let Some(ifx) = val
                .and_then(|b| Some(u32::from_ne_bytes(b.get(..4)?.try_into().ok()?)))
                .filter(|i| *i != 0)
            {
                v.push(ifx);
            }
        }
        v.sort_unstable();
        return Ok(v);
    }
    Ok(Vec::new())
}

/// Whether the XDP program `prog_id` on `ifindex` was loaded with another MAC address than the
/// device has now: it then forwards only frames sent to the old address (its `.rodata`
/// `mpt_if_mac`, see `bpf/mproute/dp.bpf.c`). `false` for a program loaded without one.
pub fn xdp_mac_stale(prog_id: u32, ifindex: u32) -> Result<bool, Error> {
    let Some(ro) = loaded_rodata(prog_id)? else {
        return Ok(false);
    };
    if ro.mpt_if_index == 0 || ro.mpt_if_index != ifindex {
        return Ok(false);
    }
    Ok(mpt_sys::iface::ether_addr(ifindex)? != Some(ro.mpt_if_mac))
}

/// Whether the dataplane program `prog_id` forwards unmanaged destinations by the kernel FIB
/// (`fastpath on`, its load-time constant `mpt_fastpath`); `None` for a program without it.
pub fn fastpath(prog_id: u32) -> Result<Option<bool>, Error> {
    Ok(loaded_rodata(prog_id)?.map(|ro| ro.mpt_fastpath != 0))
}

/// How the native XDP program `prog_id` tells a TCP/UDP checksum left to offload (its load-time
/// constants, see `mpt_local_stacks` and `mpt_veth_skb` in `bpf/mproute/dp.bpf.c`); `None` for generic
/// XDP, tc or a program without them.
pub fn xdp_checksum_handling(prog_id: u32) -> Result<Option<&'static str>, Error> {
    let Some(ro) = loaded_rodata(prog_id)? else {
        return Ok(None);
    };
    Ok(Some(
        match (ro.mpt_xdp_generic, ro.mpt_local_stacks, ro.mpt_veth_skb) {
            (0, 0, _) => "checksums taken as complete (frames from a wire)",
            (0, _, 2) => "checksum state read from the sender's skb (direct read)",
            (0, _, 1) => "checksum state read from the sender's skb (probe read)",
            (0, _, _) => "TCP/UDP checksums verified in software",
            _ => return Ok(None),
        },
    ))
}

/// Pins of the two drop-counting links of `ifindex` (`bpf/mproute/drops.bpf.c`), next to the state's
/// maps; `None` where the host's bpffs is not reachable.
fn drops_pins(cookie: u64, ifindex: u32) -> Option<[std::path::PathBuf; 2]> {
    let dir = crate::pinned::pin_dir(&super::state::SUITE, cookie)?;
    Some([
        dir.join(format!("drops-{ifindex}-err")),
        dir.join(format!("drops-{ifindex}-xmit")),
    ])
}

/// Count what the kernel drops after the XDP dataplane on `ifindex` redirected it
/// (`dropped`): load `bpf/mproute/drops.bpf.c` for this device and namespace, attach its two
/// tracepoint programs and pin their links (replacing older ones). `Ok(false)` where the
/// links cannot be pinned (no host bpffs in reach): then nothing is counted.
pub fn attach_drops(state: &RouteState, ifindex: u32) -> Result<bool, Error> {
    let Some(paths) = drops_pins(state.cookie(), ifindex) else {
        return Ok(false);
    };
    if std::env::var_os("MPT_EXP_NODROPS").is_some() {
        return Ok(false);
    }
    if let Some(dir) = paths[0].parent() {
        if !dir.exists() {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        }
    }
    let mut obj = MaybeUninit::uninit();
    let mut open = DropsSkelBuilder::default()
        .open(&mut obj)
        .map_err(bpf("open the drop counter BPF object"))?;
    match open.maps.rodata_data.as_deref_mut() {
        Some(ro) => {
            ro.mpt_if_index = ifindex;
            ro.mpt_netns_cookie = state.cookie();
        }
        None => {
            return Err(Error::io(
                "set the drop counter's load-time constants",
                io::Error::from_raw_os_error(libc::EINVAL),
            ))
        }
    }
    reuse_state_maps(state, [("mpt_reasons", &mut open.maps.mpt_reasons)])?;
    let skel = Error::loading("load the drop counter BPF object", || open.load())?;
    let links = [
        skel.progs
            .mpt_drops_redirect_err
            .attach()
            .map_err(bpf("attach to tracepoint xdp:xdp_redirect_err"))?,
        skel.progs
            .mpt_drops_devmap_xmit
            .attach()
            .map_err(bpf("attach to tracepoint xdp:xdp_devmap_xmit"))?,
    ];
    for (mut link, path) in links.into_iter().zip(paths.iter()) {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(format!("remove {}", path.display()), e)),
        }
        link.pin(path).map_err(bpf("pin a drop counter link"))?;
    }
    Ok(true)
}

/// Stop counting drops for `ifindex`: unpin its links (the programs go with them).
fn detach_drops(cookie: u64, ifindex: u32) {
    if let Some(paths) = drops_pins(cookie, ifindex) {
        for p in paths {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Every attachment of ours in the namespace.
pub fn attachments() -> Result<Vec<Attachment>, Error> {
    let mut v = Vec::new();
    for (ifindex, _) in mpt_sys::iface::all() {
        v.extend(attachments_on(ifindex)?);
    }
    Ok(v)
}

/// What native XDP must do about TCP/UDP checksums on a device before it redirects a frame
/// (`mpt_local_stacks`, `mpt_veth_skb`).
pub use crate::attach::Checksums;

/// How XDP on a veth reads the skb behind a frame (`mpt_veth_skb`): see
/// [`crate::attach::veth_skb_read`].
pub fn veth_skb_read() -> u32 {
    crate::attach::veth_skb_read()
}

/// The flags of the dataplane's kernel-view FIB lookup on this kernel (`mpt_view_flags`):
/// `BPF_FIB_LOOKUP_SKIP_NEIGH` where the kernel has it, else none (older kernels refuse a flag
/// they do not know).
pub fn view_flags() -> u32 {
    if crate::features::fib_skip_neigh() {
        libbpf_sys::BPF_FIB_LOOKUP_SKIP_NEIGH
    } else {
        0
    }
}

/// Open the dataplane object, set its load-time constants (`veth_skb`: `mpt_veth_skb` on a veth,
/// 2 direct, 1 probe read), reuse the state maps and load the hook asked for.
fn load_dp<'o>(
    obj: &'o mut MaybeUninit<OpenObject>,
    state: &RouteState,
    ifindex: u32,
    mode: Mode,
    fastpath: bool,
    csum: Checksums,
    veth_skb: u32,
) -> Result<DpSkel<'o>, Error> {
    let mut open = DpSkelBuilder::default()
        .open(obj)
        .map_err(bpf("open the dataplane BPF object"))?;
    match open.maps.rodata_data.as_deref_mut() {
        Some(ro) => {
            ro.mpt_view_flags = view_flags();
            ro.mpt_fastpath = u32::from(fastpath);
            ro.mpt_xdp_generic = u32::from(mode == Mode::XdpGeneric);
            ro.mpt_local_stacks = u32::from(csum != Checksums::Complete);
            ro.mpt_veth_skb = if csum == Checksums::VethSkb {
                veth_skb
            } else {
                0
            };
            // XDP forwards only frames sent to the device's own MAC (tc reads pkt_type), and
            // leaves counting what it passes up to the tc program attach puts next to it.
            if mode != Mode::Tc {
                ro.mpt_tc_follows = 1;
                ro.mpt_neigh_check = 1;
                if let Some(mac) = mpt_sys::iface::ether_addr(ifindex)? {
                    ro.mpt_if_index = ifindex;
                    ro.mpt_if_mac = mac;
                }
            }
        }
        None => {
            return Err(Error::io(
                "set the dataplane's load-time constants",
                io::Error::from_raw_os_error(libc::EINVAL),
            ))
        }
    }
    // Only the hook asked for is loaded; the XDP program's devmap only with it.
    if mode == Mode::Tc {
        open.progs.mpt_dp_xdp.set_autoload(false);
        open.maps
            .mpt_tx_ports
            .set_autocreate(false)
            .map_err(bpf("leave out the XDP devmap"))?;
    } else {
        open.progs.mpt_dp_tc.set_autoload(false);
        open.maps
            .mpt_peer_ports
            .set_autocreate(false)
            .map_err(bpf("leave out the tc program's peer map"))?;
    }
    reuse_state_maps(state, state_maps!(open.maps))?;
    // the first inner maps of the growable maps: the state's are in place already
    for m in [
        &mut open.maps.mpt_groups_in,
        &mut open.maps.mpt_routes_in,
        &mut open.maps.mpt_stats_in,
        &mut open.maps.mpt_res_in,
        &mut open.maps.mpt_pcpu_in,
    ] {
        m.set_autocreate(false)
            .map_err(bpf("leave out a first inner map"))?;
    }
    if crate::log::verbose() {
        // the verifier's statistics (insns processed, states) in -v's log
        open.progs.mpt_dp_tc.set_log_level(4);
        open.progs.mpt_dp_xdp.set_log_level(4);
    }
    Error::loading("load the dataplane BPF object", || open.load())
}

/// Load the dataplane with the state's maps and attach it to `ifindex` in `mode`, replacing an
/// attachment of ours in the same hook. A foreign XDP program is not replaced. `csum`: what
/// native XDP must do about checksums on this device (see `mpt_local_stacks` and
/// `mpt_veth_skb` in `bpf/mproute/dp.bpf.c`). `peers`: the egress devices the tc program
/// delivers straight into their veth peer's namespace (`bpf_redirect_peer`, `mpt_peer_ports`):
/// veths whose peer is in another namespace, with nothing of their own on transmit.
pub fn attach(
    state: &RouteState,
    ifindex: u32,
    mode: Mode,
    fastpath: bool,
    csum: Checksums,
    peers: &[u32],
) -> Result<u32, Error> {
    if !crate::features::global_func_args() {
        return Err(crate::Error::lacking(
            "load the dataplane BPF object",
            crate::features::Feature::GlobalFuncArgs,
        ));
    }
    let mut obj = MaybeUninit::uninit();
    let skel = load_dp(
        &mut obj,
        state,
        ifindex,
        mode,
        fastpath,
        csum,
        veth_skb_read(),
    )?;

    if mode == Mode::Tc {
        // direct-mapped: the first device of a slot has it, the others take the transmit path
        // (its size is the object's MPT_PEER_SLOTS)
        let slots = skel.maps.mpt_peer_ports.max_entries().max(1);
        let mut taken = std::collections::HashSet::new();
        for ifx in peers {
            let slot = ifx % slots;
            if !taken.insert(slot) {
                continue;
            }
            skel.maps
                .mpt_peer_ports
                .put(
                    &slot.to_ne_bytes(),
                    &ifx.to_ne_bytes(),
                    libbpf_rs::MapFlags::ANY,
                )
                .map_err(bpf("fill the tc program's peer map"))?;
        }
    } else {
        // XDP redirects through this object's devmap: every device there is now (a devmap
        // resolves ifindexes in the calling thread's namespace, which is the target's).
        // Devices that cannot be put there (or come later) are reached by bpf_redirect().
        for (ifx, _) in mpt_sys::iface::all() {
            let k = ifx.to_ne_bytes();
            let _ = skel.maps.mpt_tx_ports.put(&k, &k, libbpf_rs::MapFlags::ANY);
        }
    }
    match mode {
        Mode::Xdp | Mode::XdpGeneric => {
            let xmode = if mode == Mode::Xdp {
                XdpMode::Native
            } else {
                XdpMode::Generic
            };
            // a foreign program refused, ours of the other mode removed, ours of this mode
            // held open to be replaced
            let replace = attach::xdp_prepare(ifindex, xmode, XDP_PROG)?;
            // The frames the kernel drops after our redirect: counted where the links can be
            // pinned (the host's bpffs), not under `ip netns exec`. Set up first, so that a
            // failure here leaves the device as it was.
            attach_drops(state, ifindex)?;
            let prog = skel.progs.mpt_dp_xdp.as_fd();
            let what = format!("attach {} to ifindex {ifindex}", mode.name());
            if let Err(e) = attach::xdp_attach(
                ifindex,
                prog,
                xmode,
                replace.as_ref().map(|f| f.as_fd()),
                &what,
            ) {
                // no XDP program of ours left on the device: no drop counter either
                let ours = attach::xdp_query(ifindex)
                    .ok()
                    .flatten()
                    .is_some_and(|(id, _)| prog_name(id).as_deref() == Some(XDP_PROG));
                if !ours {
                    detach_drops(state.cookie(), ifindex);
                }
                return Err(e);
            }
            libbpf_rs::Program::id_from_fd(prog).map_err(bpf("program id"))
        }
        Mode::Tc => {
            let prog = skel.progs.mpt_dp_tc.as_fd();
            attach::tcx_replace(
                ifindex,
                prog,
                TcxDir::Ingress,
                TC_PROG,
                &format!("attach tc to ifindex {ifindex}"),
            )?;
            libbpf_rs::Program::id_from_fd(prog).map_err(bpf("program id"))
        }
    }
}

/// Remove our XDP program (native or generic) from a device, leaving tc: attaching in tc mode
/// over an earlier XDP attachment. Returns what was removed.
pub fn detach_xdp_only(ifindex: u32) -> Result<Vec<Attachment>, Error> {
    let found: Vec<Attachment> = attachments_on(ifindex)?
        .into_iter()
        .filter(|a| a.mode != Mode::Tc)
        .collect();
    if !found.is_empty() {
        detach_drops(mpt_sys::netns::cookie()?, ifindex);
    }
    for a in &found {
        attach::xdp_detach(ifindex, xdp_mode(a.mode))?;
    }
    Ok(found)
}

/// Remove our attachments from a device (all hooks); returns what was removed.
pub fn detach(ifindex: u32) -> Result<Vec<Attachment>, Error> {
    let found = attachments_on(ifindex)?;
    if found.iter().any(|a| a.mode != Mode::Tc) {
        detach_drops(mpt_sys::netns::cookie()?, ifindex);
    }
    for a in &found {
        match a.mode {
            Mode::Xdp | Mode::XdpGeneric => attach::xdp_detach(ifindex, xdp_mode(a.mode))?,
            Mode::Tc => attach::tcx_detach(ifindex, a.prog_id, TcxDir::Ingress)?,
        }
    }
    Ok(found)
}

fn xdp_mode(m: Mode) -> XdpMode {
    if m == Mode::XdpGeneric {
        XdpMode::Generic
    } else {
        XdpMode::Native
    }
}

/// Packets handed to the stack, by reason (index = `enum mpt_reason`), summed over CPUs.
pub fn reasons(state: &RouteState) -> Result<Vec<u64>, Error> {
    let m = state.map("mpt_reasons")?;
    let mut out = Vec::new();
    for r in 0..super::abi::R_MAX {
        let v = m
            .lookup_percpu(&r.to_ne_bytes(), libbpf_rs::MapFlags::ANY)
            .map_err(bpf("read mpt_reasons"))?
            .unwrap_or_default();
        out.push(super::abi::sum_percpu_u64(&v).unwrap_or(0));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::mem::MaybeUninit;

    use libbpf_rs::skel::SkelBuilder;

    /// Every map of the state is reused by the dataplane (a map left out would be the
    /// program's own, empty, and the state's writes to it would never reach the packets).
    #[test]
    fn the_dataplane_reuses_every_state_map() {
        let mut obj = MaybeUninit::uninit();
        let mut open = crate::skel::mproute::dp::DpSkelBuilder::default()
            .open(&mut obj)
            .expect("open the dataplane object");
        let mut names: Vec<&str> = state_maps!(open.maps).iter().map(|(n, _)| *n).collect();
        let mut want = crate::mproute::state::STATE_MAPS.to_vec();
        names.sort_unstable();
        want.sort_unstable();
        assert_eq!(names, want);
    }
}

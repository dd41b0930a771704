//! Attaching programs to devices, suite-neutral: XDP (native or generic) and tcx (ingress or
//! egress), as legacy (non-link) attachments. A legacy attachment holds its program (and so
//! its maps) without a pin or an open descriptor, outlives the process that made it, goes away
//! with its device or namespace, and is found again by the next invocation through the
//! kernel's queries, whatever mount namespace it runs in (`ip netns exec` included). Programs
//! that hook no device (tracepoints) are attached as links and pinned by their owner.
//!
//! Attachments are told apart by program name: a suite names its programs uniquely
//! (`mpt_dp_xdp`), and [`named`] finds them.

use std::os::fd::{AsRawFd, BorrowedFd};

use crate::error::{Error, ErrorKind};

const XDP_FLAGS_UPDATE_IF_NOEXIST: u32 = 1;
const XDP_FLAGS_SKB_MODE: u32 = 2;
const XDP_FLAGS_DRV_MODE: u32 = 4;
const XDP_FLAGS_REPLACE: u32 = 16;

/// The hook a tool's dataplane is attached to on a device, as the operator names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Hook {
    /// Native (driver) XDP.
    Xdp,
    /// Generic (skb) XDP.
    XdpGeneric,
    /// tcx.
    Tc,
}

impl Hook {
    /// The operator's word.
    pub const fn name(self) -> &'static str {
        match self {
            Hook::Xdp => "xdp",
            Hook::XdpGeneric => "xdp-generic",
            Hook::Tc => "tc",
        }
    }
    /// What a route's `enforced_by` says for this hook.
    pub const fn enforcer(self) -> &'static str {
        match self {
            Hook::Xdp | Hook::XdpGeneric => "xdp",
            Hook::Tc => "tc",
        }
    }
    /// The XDP mode of an XDP hook.
    pub const fn xdp_mode(self) -> Option<XdpMode> {
        match self {
            Hook::Xdp => Some(XdpMode::Native),
            Hook::XdpGeneric => Some(XdpMode::Generic),
            Hook::Tc => None,
        }
    }
}

impl Hook {
    /// What `auto` picks for a device of `kind` (`IFLA_INFO_KIND`; `None` for a NIC), and
    /// why, in the operator's words. Facts behind it (`../shared/reference/veth-xdp-measurements.md`):
    /// a veth hands its peer `CHECKSUM_PARTIAL` skbs of local stacks and 64 KB GSO packets,
    /// which tc keeps as they are; XDP turns them into frames. So tc on veth and every other
    /// virtual device, native XDP on a NIC (a caller falls back to tc where its driver has
    /// none).
    pub fn auto(kind: Option<&str>) -> (Hook, &'static str) {
        match kind {
            Some("veth") => (Hook::Tc, "veth: tc keeps the checksum state and GSO size of local stacks' TCP (XDP would hand those up to tc, one hook more)"),
            Some(_) => (Hook::Tc, "virtual device: tc"),
            None => (Hook::Xdp, "native XDP: the fastest hook where the driver has it"),
        }
    }
}

/// What native XDP must do about transport checksums on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checksums {
    /// Frames are complete (a NIC: from a wire): nothing.
    Complete,
    /// The device carries local stacks' packets (tun): verify them.
    Verify,
    /// A veth: ask the skb each frame came from whether a checksum is partial
    /// ([`veth_skb_read`], `bpf/include/mpt/lib/veth.h`).
    VethSkb,
}

impl Checksums {
    /// For a device of `kind` (`IFLA_INFO_KIND`).
    pub fn of_kind(kind: Option<&str>) -> Checksums {
        match kind {
            Some("veth") => Checksums::VethSkb,
            Some("tun") => Checksums::Verify,
            _ => Checksums::Complete,
        }
    }
}

/// How XDP on a veth reads the skb behind a frame (a program's `*_veth_skb` load-time
/// constant, `bpf/include/mpt/lib/veth.h`): directly (2) where vmlinux BTF has the veth's
/// buffer type (veth built in), by a probe read (1) where the veth module's BTF has it (a BPF
/// cast cannot name a module's types), not at all (0: verify checksums instead) on a kernel
/// whose veth has no such buffer (before 6.3) or that cannot reach it (before 6.2).
pub fn veth_skb_read() -> u32 {
    match crate::features::veth_buf() {
        crate::features::VethBuf::BuiltIn => 2,
        crate::features::VethBuf::Module => 1,
        crate::features::VethBuf::None => 0,
    }
}

/// Where an XDP program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum XdpMode {
    /// In the driver (native).
    Native,
    /// On the skb (generic).
    Generic,
}

impl XdpMode {
    const fn flags(self) -> u32 {
        match self {
            XdpMode::Native => XDP_FLAGS_DRV_MODE,
            XdpMode::Generic => XDP_FLAGS_SKB_MODE,
        }
    }
}

/// A tcx hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TcxDir {
    /// Ingress.
    Ingress,
    /// Egress.
    Egress,
}

impl TcxDir {
    const fn attach_type(self) -> libbpf_sys::bpf_attach_type {
        match self {
            TcxDir::Ingress => libbpf_sys::BPF_TCX_INGRESS,
            TcxDir::Egress => libbpf_sys::BPF_TCX_EGRESS,
        }
    }
    const fn name(self) -> &'static str {
        match self {
            TcxDir::Ingress => "tcx ingress",
            TcxDir::Egress => "tcx egress",
        }
    }
}

pub use crate::features::{tc_backend, TcBackend, FORCE_CLASSIC_TC};

/// Classic tc: a clsact qdisc, one direct-action bpf filter per program, all of handle 1,
/// each at a priority of its own (the first free one, so that programs run in the order they
/// were attached, as on tcx). Found again by querying those priorities.
mod classic {
    use std::os::fd::{AsRawFd, BorrowedFd};

    use super::{ifindex_i32, TcxDir};
    use crate::error::Error;

    /// The filters' handle.
    const HANDLE: u32 = 1;
    /// Priorities used (a hook holds at most this many of our programs).
    const PRIORITIES: std::ops::RangeInclusive<u32> = 1..=16;

    fn hook(ifindex: u32, dir: TcxDir) -> libbpf_sys::bpf_tc_hook {
        libbpf_sys::bpf_tc_hook {
            sz: std::mem::size_of::<libbpf_sys::bpf_tc_hook>() as _,
            ifindex: ifindex_i32(ifindex),
            attach_point: match dir {
                TcxDir::Ingress => libbpf_sys::BPF_TC_INGRESS,
                TcxDir::Egress => libbpf_sys::BPF_TC_EGRESS,
            },
            ..Default::default()
        }
    }

    fn opts(priority: u32) -> libbpf_sys::bpf_tc_opts {
        libbpf_sys::bpf_tc_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_tc_opts>() as _,
            handle: HANDLE,
            priority,
            ..Default::default()
        }
    }

    /// (priority, program id) of every filter of ours on the hook, by priority.
    fn filters(ifindex: u32, dir: TcxDir) -> Result<Vec<(u32, u32)>, Error> {
        let h = hook(ifindex, dir);
        let mut v = Vec::new();
        for p in PRIORITIES {
            let mut o = opts(p);
            // SAFETY: h and o are initialised and sized; the call fills o.prog_id.
            let rc = unsafe { libbpf_sys::bpf_tc_query(&h, &mut o) };
            if rc == 0 {
                v.push((p, o.prog_id));
            } else if -rc != libc::ENOENT && -rc != libc::EINVAL {
                return Err(Error::sys(
                    format!("query tc filters on ifindex {ifindex}"),
                    rc,
                ));
            }
        }
        Ok(v)
    }

    pub(super) fn query(ifindex: u32, dir: TcxDir) -> Result<Vec<u32>, Error> {
        Ok(filters(ifindex, dir)?
            .into_iter()
            .map(|(_, id)| id)
            .collect())
    }

    pub(super) fn attach(
        ifindex: u32,
        prog: BorrowedFd<'_>,
        dir: TcxDir,
        what: &str,
    ) -> Result<(), Error> {
        let mut qdisc = libbpf_sys::bpf_tc_hook {
            attach_point: libbpf_sys::BPF_TC_INGRESS | libbpf_sys::BPF_TC_EGRESS,
            ..hook(ifindex, dir)
        };
        // SAFETY: qdisc is initialised and sized.
        let rc = unsafe { libbpf_sys::bpf_tc_hook_create(&mut qdisc) };
        if rc < 0 && -rc != libc::EEXIST {
            return Err(Error::sys(format!("{what}: add the clsact qdisc"), rc));
        }
        let used: Vec<u32> = filters(ifindex, dir)?.into_iter().map(|(p, _)| p).collect();
        // after the last one: programs run in the order they were attached
        let next = used.iter().max().map_or(1, |m| m + 1);
        if !PRIORITIES.contains(&next) {
            return Err(Error::sys(
                format!("{what}: no free tc filter priority"),
                -libc::ENOSPC,
            ));
        }
        let h = hook(ifindex, dir);
        let mut o = libbpf_sys::bpf_tc_opts {
            prog_fd: prog.as_raw_fd(),
            ..opts(next)
        };
        // SAFETY: h and o are initialised; prog is a loaded sched_cls program.
        let rc = unsafe { libbpf_sys::bpf_tc_attach(&h, &mut o) };
        if rc < 0 {
            return Err(Error::sys(what, rc));
        }
        Ok(())
    }

    pub(super) fn detach(ifindex: u32, id: u32, dir: TcxDir) -> Result<(), Error> {
        let Some((p, _)) = filters(ifindex, dir)?.into_iter().find(|(_, i)| *i == id) else {
            return Ok(()); // gone meanwhile
        };
        let h = hook(ifindex, dir);
        let o = opts(p);
        // SAFETY: h and o are initialised; handle and priority name one filter.
        let rc = unsafe { libbpf_sys::bpf_tc_detach(&h, &o) };
        if rc < 0 && -rc != libc::ENOENT {
            return Err(Error::sys(
                format!("detach tc filter {p} from ifindex {ifindex}"),
                rc,
            ));
        }
        Ok(())
    }
}

/// `-v`: one line for a program attached or detached.
fn trace(args: std::fmt::Arguments<'_>) {
    if mpt_sys::trace::on() {
        mpt_sys::trace::line(format_args!("bpf: {args}"));
    }
}

/// The hook as the running kernel has it (tcx, or classic tc's clsact filter).
fn backend_hook(dir: TcxDir) -> &'static str {
    match (tc_backend(), dir) {
        (TcBackend::Tcx, d) => d.name(),
        (TcBackend::Classic(_), TcxDir::Ingress) => "tc clsact ingress",
        (TcBackend::Classic(_), TcxDir::Egress) => "tc clsact egress",
    }
}

fn ifindex_i32(ifindex: u32) -> i32 {
    i32::try_from(ifindex).unwrap_or(i32::MAX)
}

/// The XDP program on a device, if any: its id and mode.
pub fn xdp_query(ifindex: u32) -> Result<Option<(u32, XdpMode)>, Error> {
    // Sized to end before feature_flags: with them libbpf also asks the generic netlink family
    // "netdev" (6.3+), which on an older kernel makes the kernel run modprobe for it on every
    // query (on Debian 12 a process per device per command).
    let mut opts = libbpf_sys::bpf_xdp_query_opts {
        sz: std::mem::offset_of!(libbpf_sys::bpf_xdp_query_opts, feature_flags) as _,
        ..Default::default()
    };
    // SAFETY: opts is correctly sized.
    let rc = unsafe { libbpf_sys::bpf_xdp_query(ifindex_i32(ifindex), 0, &mut opts) };
    if rc < 0 {
        return Err(Error::sys(format!("query XDP on ifindex {ifindex}"), rc));
    }
    if opts.drv_prog_id != 0 {
        return Ok(Some((opts.drv_prog_id, XdpMode::Native)));
    }
    if opts.skb_prog_id != 0 {
        return Ok(Some((opts.skb_prog_id, XdpMode::Generic)));
    }
    Ok(None)
}

/// Attach `prog` to a device's XDP hook in `mode`. With `replace` (the program found there,
/// opened when it was found, of the same mode), atomically in place of it: the kernel refuses
/// if the hook holds anything else by then. Without, only if the hook is free. `what` names
/// the attempt in the error (`attach xdp to ifindex 5`); a driver without native XDP is
/// [`ErrorKind::NoNativeXdp`].
pub fn xdp_attach(
    ifindex: u32,
    prog: BorrowedFd<'_>,
    mode: XdpMode,
    replace: Option<BorrowedFd<'_>>,
    what: &str,
) -> Result<(), Error> {
    let mut flags = mode.flags();
    trace(format_args!("{what} (XDP {mode:?}, ifindex {ifindex})"));
    let mut opts = libbpf_sys::bpf_xdp_attach_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_xdp_attach_opts>() as _,
        ..Default::default()
    };
    match replace {
        Some(old) => {
            opts.old_prog_fd = old.as_raw_fd();
            flags |= XDP_FLAGS_REPLACE;
        }
        None => flags |= XDP_FLAGS_UPDATE_IF_NOEXIST,
    }
    // SAFETY: prog is a loaded XDP program; opts is correctly sized.
    let rc =
        unsafe { libbpf_sys::bpf_xdp_attach(ifindex_i32(ifindex), prog.as_raw_fd(), flags, &opts) };
    if rc < 0 {
        let e = std::io::Error::from_raw_os_error(rc.saturating_abs());
        let kind = if mode == XdpMode::Native && rc.saturating_abs() == libc::EOPNOTSUPP {
            ErrorKind::NoNativeXdp(e)
        } else {
            ErrorKind::Sys(e)
        };
        return Err(Error {
            what: what.to_string(),
            kind,
        });
    }
    Ok(())
}

/// Remove whatever XDP program runs on a device in `mode`.
pub fn xdp_detach(ifindex: u32, mode: XdpMode) -> Result<(), Error> {
    trace(format_args!("detach XDP ({mode:?}) from ifindex {ifindex}"));
    // SAFETY: plain detach; a null opts is allowed.
    let rc =
        unsafe { libbpf_sys::bpf_xdp_detach(ifindex_i32(ifindex), mode.flags(), std::ptr::null()) };
    if rc < 0 {
        return Err(Error::sys(format!("detach XDP from ifindex {ifindex}"), rc));
    }
    Ok(())
}

/// Ids of the programs on a device's tcx hook, legacy and link attachments alike, in the order
/// they run. A device that never had one has none.
pub fn tcx_query(ifindex: u32, dir: TcxDir) -> Result<Vec<u32>, Error> {
    match tc_backend() {
        TcBackend::Tcx => link_query(ifindex, dir),
        TcBackend::Classic(_) => classic::query(ifindex, dir),
    }
}

fn link_query(ifindex: u32, dir: TcxDir) -> Result<Vec<u32>, Error> {
    let mut ids = [0u32; 64];
    let mut opts = libbpf_sys::bpf_prog_query_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_prog_query_opts>() as _,
        prog_ids: ids.as_mut_ptr(),
        __bindgen_anon_1: libbpf_sys::bpf_prog_query_opts__bindgen_ty_1 {
            count: ids.len() as u32,
        },
        ..Default::default()
    };
    // SAFETY: opts and ids outlive the call.
    let rc = unsafe {
        libbpf_sys::bpf_prog_query_opts(ifindex_i32(ifindex), dir.attach_type(), &mut opts)
    };
    if rc < 0 {
        if -rc == libc::ENOENT {
            return Ok(Vec::new());
        }
        return Err(Error::sys(
            format!("query {} on ifindex {ifindex}", dir.name()),
            rc,
        ));
    }
    // SAFETY: both union members are the same u32.
    let n = unsafe { opts.__bindgen_anon_1.count } as usize;
    Ok(ids[..n.min(ids.len())].to_vec())
}

/// Attach `prog` to a device's tcx hook (appended after the programs there). `what` names the
/// attempt in the error.
pub fn tcx_attach(
    ifindex: u32,
    prog: BorrowedFd<'_>,
    dir: TcxDir,
    what: &str,
) -> Result<(), Error> {
    trace(format_args!("{what} ({})", backend_hook(dir)));
    match tc_backend() {
        TcBackend::Tcx => link_attach(ifindex, prog, dir, what),
        TcBackend::Classic(_) => classic::attach(ifindex, prog, dir, what),
    }
}

fn link_attach(ifindex: u32, prog: BorrowedFd<'_>, dir: TcxDir, what: &str) -> Result<(), Error> {
    let opts = libbpf_sys::bpf_prog_attach_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_prog_attach_opts>() as _,
        ..Default::default()
    };
    // SAFETY: prog is a loaded program of a tcx type; opts is correctly sized.
    let rc = unsafe {
        libbpf_sys::bpf_prog_attach_opts(
            prog.as_raw_fd(),
            ifindex_i32(ifindex),
            dir.attach_type(),
            &opts,
        )
    };
    if rc < 0 {
        return Err(Error::sys(what, rc));
    }
    Ok(())
}

/// Remove program `id` from a device's tcx hook.
pub fn tcx_detach(ifindex: u32, id: u32, dir: TcxDir) -> Result<(), Error> {
    trace(format_args!(
        "detach program {id} from ifindex {ifindex} ({})",
        backend_hook(dir)
    ));
    match tc_backend() {
        TcBackend::Tcx => link_detach(ifindex, id, dir),
        TcBackend::Classic(_) => classic::detach(ifindex, id, dir),
    }
}

fn link_detach(ifindex: u32, id: u32, dir: TcxDir) -> Result<(), Error> {
    let fd = crate::prog::fd(id)?;
    let opts = libbpf_sys::bpf_prog_detach_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_prog_detach_opts>() as _,
        ..Default::default()
    };
    // SAFETY: fd is the attached program.
    let rc = unsafe {
        libbpf_sys::bpf_prog_detach_opts(
            fd.as_raw_fd(),
            ifindex_i32(ifindex),
            dir.attach_type(),
            &opts,
        )
    };
    if rc < 0 {
        return Err(Error::sys(
            format!(
                "detach {} from ifindex {ifindex}",
                if dir == TcxDir::Ingress {
                    "tc"
                } else {
                    "tc egress"
                }
            ),
            rc,
        ));
    }
    Ok(())
}

/// Of `ids`, those whose program is called `name` (a program gone meanwhile is not).
pub fn named(ids: &[u32], name: &str) -> Vec<u32> {
    ids.iter()
        .copied()
        .filter(|id| crate::prog::info(*id).is_ok_and(|i| i.name == name))
        .collect()
}

/// The name the kernel reports for program `id` (`None`: gone, or unreadable).
pub fn prog_name(id: u32) -> Option<String> {
    crate::prog::info(id).ok().map(|i| i.name)
}

/// Get a device's XDP hook ready for `ours` (a program name) in `mode`: refuse a foreign
/// program ([`ErrorKind::ForeignXdp`]), remove ours of the other mode, and return ours of this
/// mode opened, for [`xdp_attach`] to replace: held from here through the attach, so that a
/// hook changed meanwhile makes the kernel refuse rather than us overwrite a stranger.
pub fn xdp_prepare(
    ifindex: u32,
    mode: XdpMode,
    ours: &str,
) -> Result<Option<std::os::fd::OwnedFd>, Error> {
    let Some((id, found)) = xdp_query(ifindex)? else {
        return Ok(None);
    };
    if prog_name(id).as_deref() != Some(ours) {
        return Err(Error {
            what: format!("ifindex {ifindex} has another XDP program (id {id})"),
            kind: ErrorKind::ForeignXdp(std::io::Error::from_raw_os_error(libc::EBUSY)),
        });
    }
    if found != mode {
        xdp_detach(ifindex, found)?;
        return Ok(None);
    }
    crate::prog::fd(id).map(Some)
}

/// Attach `prog` (called `ours`) to a device's tcx hook in place of the programs of that name
/// there: the new one is appended, then the old ones go, so that packets always meet one.
pub fn tcx_replace(
    ifindex: u32,
    prog: BorrowedFd<'_>,
    dir: TcxDir,
    ours: &str,
    what: &str,
) -> Result<(), Error> {
    let old = named(&tcx_query(ifindex, dir)?, ours);
    tcx_attach(ifindex, prog, dir, what)?;
    for id in old {
        tcx_detach(ifindex, id, dir)?;
    }
    Ok(())
}

/// A tool's dataplane programs, by the names the kernel reports, for [`ours_on`].
#[derive(Debug, Clone, Copy)]
pub struct Programs {
    /// Its XDP program.
    pub xdp: &'static str,
    /// Its tcx ingress programs (one of them on a device at a time).
    pub tc_ingress: &'static [&'static str],
    /// Its tcx egress program, if it has one.
    pub tc_egress: Option<&'static str>,
}

/// One attachment of a tool's program found on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// Device.
    pub ifindex: u32,
    /// Hook (`Tc` for both tcx directions).
    pub hook: Hook,
    /// Which way (XDP: ingress).
    pub dir: TcxDir,
    /// Program id.
    pub prog_id: u32,
}

/// The attachments of `p`'s programs on one device: XDP first, then tcx ingress, then egress.
pub fn ours_on(ifindex: u32, p: &Programs) -> Result<Vec<Found>, Error> {
    let mut v = Vec::new();
    if let Some((id, mode)) = xdp_query(ifindex)? {
        if prog_name(id).as_deref() == Some(p.xdp) {
            v.push(Found {
                ifindex,
                hook: match mode {
                    XdpMode::Native => Hook::Xdp,
                    XdpMode::Generic => Hook::XdpGeneric,
                },
                dir: TcxDir::Ingress,
                prog_id: id,
            });
        }
    }
    let tc = p
        .tc_ingress
        .iter()
        .map(|n| (*n, TcxDir::Ingress))
        .chain(p.tc_egress.map(|n| (n, TcxDir::Egress)));
    for (name, dir) in tc {
        for id in named(&tcx_query(ifindex, dir)?, name) {
            v.push(Found {
                ifindex,
                hook: Hook::Tc,
                dir,
                prog_id: id,
            });
        }
    }
    Ok(v)
}

//! A fanout group of worker sockets, made in one step: every socket is opened, bound and
//! joined, the steering program installed, before any worker starts; a refusal closes what was
//! opened (a group whose last member closes is gone), so a failed `run` leaves nothing behind.
//! The kernel's refusals are explained from what the namespace holds (the existing group's
//! mode, device and owner, read through packet_diag).

use mpt_bpf::pfanout::Steering;
use mpt_cli::Failure;
use mpt_model::fanout::{self, Flags, Joined, Mode};
use mpt_sys::packet::PacketSocket;

use crate::grammar::RunCmd;
use crate::show;

/// Ring geometry of `ring`: 64 blocks of 64 KiB, frames up to 2 KiB, blocks handed over after
/// 10 ms even when not full.
const RING_BLOCK: u32 = 1 << 16;
const RING_BLOCKS: u32 = 64;
const RING_FRAME: u32 = 2048;
const RING_RETIRE_MS: u32 = 10;

/// The group, joined.
#[derive(Debug)]
pub struct Group {
    /// Group id (the kernel's choice with `uniqueid`).
    pub id: u16,
    /// Mode.
    pub mode: Mode,
    /// Flags as the kernel keeps them (without uniqueid).
    pub flags: Flags,
    /// Device name.
    pub dev: String,
    /// Device index.
    pub ifindex: u32,
    /// The members, worker 0 first.
    pub sockets: Vec<PacketSocket>,
    /// The eBPF program of mode ebpf (the kernel holds its own reference once installed).
    _steering: Option<Steering>,
}

fn sys(e: mpt_sys::Error) -> Failure {
    let hint = match e.errno() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            Some("run as root (packet sockets need CAP_NET_RAW)")
        }
        _ => None,
    };
    let f = Failure::system(e.to_string());
    match hint {
        Some(h) => f.hint(h),
        None => f,
    }
}

impl Group {
    /// Open, bind and join `cmd.workers` sockets.
    pub fn open(cmd: &RunCmd) -> Result<Group, Failure> {
        let ifindex = precheck(cmd)?;
        // no id given: the kernel chooses an unused one (uniqueid), atomically
        let first_flags = match cmd.group {
            None => cmd.flags.union(Flags::UNIQUEID),
            Some(_) => cmd.flags,
        };
        let mut id = cmd.group.unwrap_or(0);
        // joining another program's group: its steering program stays as it is
        let existed = match cmd.group {
            Some(g) if !cmd.flags.contains(Flags::UNIQUEID) => show::dump()?
                .iter()
                .any(|s| s.fanout.is_some_and(|(i, _)| i == g)),
            _ => false,
        };
        let steering = match cmd.mode {
            Mode::Ebpf if existed => None,
            Mode::Ebpf => Some(
                Steering::load(0)
                    .map_err(|e| Failure::system(format!("load the eBPF steering program: {e}")))?,
            ),
            _ => None,
        };
        let mut sockets: Vec<PacketSocket> = Vec::with_capacity(cmd.workers as usize);
        // the kernel keeps no uniqueid: the others join the id it chose without it
        let mut kept = cmd.flags.without(Flags::UNIQUEID);
        for i in 0..cmd.workers {
            let mut s = PacketSocket::open(ifindex, cmd.protocol).map_err(sys)?;
            if let Some(b) = cmd.rcvbuf {
                s.set_rcvbuf(b).map_err(sys)?;
            }
            if cmd.ring {
                s.setup_ring_v3(RING_BLOCK, RING_BLOCKS, RING_FRAME, RING_RETIRE_MS)
                    .map_err(sys)?;
            } else {
                s.enable_timestamps().map_err(sys)?;
            }
            let flags = if i == 0 { first_flags } else { kept };
            let tf = fanout::type_flags(cmd.mode, flags);
            if let Err(e) = s.join_fanout(id, tf, cmd.max_members) {
                return Err(explain_join(e, id, cmd, i));
            }
            if i == 0 {
                // 0 is also group 0 in mode hash without flags (packet_diag would tell them
                // apart; the join just succeeded, so it is that group)
                if let Some(v) = s.fanout().map_err(sys)? {
                    let j = Joined::from_raw(v);
                    id = j.id;
                    kept = j.flags;
                }
                match (cmd.mode, &steering) {
                    (_, _) if existed => {}
                    (Mode::Cbpf, _) => {
                        let prog: Vec<libc::sock_filter> = fanout::classic_program()
                            .iter()
                            .map(|i| mpt_sys::packet::bpf_insn(i.code, i.jt, i.jf, i.k))
                            .collect();
                        s.set_fanout_cbpf(&prog).map_err(|e| {
                            sys(e).hint("another program may own this cbpf group's program")
                        })?;
                    }
                    (Mode::Ebpf, Some(p)) => s.set_fanout_ebpf(p.fd()).map_err(sys)?,
                    _ => {}
                }
            }
            sockets.push(s);
        }
        Ok(Group {
            id,
            mode: cmd.mode,
            flags: kept,
            dev: cmd.dev.clone(),
            ifindex,
            sockets,
            _steering: steering,
        })
    }
}

/// What is refused before the kernel is asked (`run` and its dry run alike): uniqueid with an
/// id, a device that does not exist. Returns the device's index.
pub(crate) fn precheck(cmd: &RunCmd) -> Result<u32, Failure> {
    if cmd.flags.contains(Flags::UNIQUEID) && cmd.group.is_some_and(|g| g != 0) {
        // the kernel answers EINVAL; say why before asking it
        return Err(Failure::system(format!(
            "join fanout group {}: flag uniqueid lets the kernel choose the id, and an id was given [EINVAL]",
            cmd.group.unwrap_or_default()
        ))
        .hint("leave out \"group ID\" with uniqueid"));
    }
    mpt_sys::iface::index(&cmd.dev).map_err(|e| {
        Failure::system(e.to_string())
            .hint("check the device name with \"ip link\" (in this namespace: pfanout -n NETNS)")
    })
}

/// The kernel refused worker `i`'s join: say which of its rules was broken.
pub(crate) fn explain_join(e: mpt_sys::Error, id: u16, cmd: &RunCmd, i: u32) -> Failure {
    let errno = e.errno();
    let words = match errno {
        Some(n) => mpt_sys::error::words(&std::io::Error::from_raw_os_error(n)),
        None => e.to_string(),
    };
    let base = if cmd.group.is_none() && i == 0 {
        format!("create a fanout group: {words}")
    } else {
        format!("join fanout group {id}: {words}")
    };
    let mut f = Failure::system(base.clone());
    match errno {
        Some(libc::EINVAL) => {
            if cmd.mode == Mode::Rollover && cmd.flags.contains(Flags::ROLLOVER) {
                return Failure::system(format!(
                    "{base}: mode rollover cannot take the rollover flag"
                ))
                .hint("use mode rollover alone, or another mode with flags rollover");
            }
            if cmd.max_members > fanout::MAX_MEMBERS {
                return Failure::system(format!(
                    "{base}: max-members is at most {}",
                    fanout::MAX_MEMBERS
                ));
            }
            // another program's group of this id?
            let existing = show::groups_now()
                .ok()
                .and_then(|g| g.into_iter().find(|g| g.id == Some(id)));
            if let Some(g) = existing.filter(|_| i == 0) {
                let owner = g.owner_words();
                if g.mode_number != Some(cmd.mode.number()) {
                    f = Failure::system(format!(
                        "{base}: group {id} exists with mode {}{owner}, and a member must join with its mode",
                        g.mode
                    ));
                } else if g.ifindex != Some(0) && g.dev.as_deref() != Some(cmd.dev.as_str()) {
                    f = Failure::system(format!(
                        "{base}: group {id} exists on dev {}{owner}, and a member must be bound to its device",
                        g.dev.as_deref().unwrap_or("?")
                    ));
                } else if g.protocol_number != Some(cmd.protocol) {
                    f = Failure::system(format!(
                        "{base}: group {id} exists with proto {}{owner}, and a member must bind its protocol",
                        g.protocol
                    ));
                } else if let Some(flags) = &g.flags {
                    f = Failure::system(format!(
                        "{base}: group {id} exists with flags {}{owner} (or another max-members), and a member must join with the same",
                        show::flags_words(&Some(flags.clone()))
                    ));
                } else {
                    f = Failure::system(format!(
                        "{base}: group {id} exists{owner} with other flags or another max-members, and a member must join with the same"
                    ));
                }
                return f.hint(format!(
                    "see \"pfanout show group {id}\", or leave out \"group\" for a group of its own"
                ));
            }
            f = f.hint("a member must join with the group's mode, flags, device and protocol");
        }
        Some(libc::ENOSPC) => {
            f = Failure::system(format!(
                "{base}: the group is full ({} members at most)",
                if cmd.max_members == 0 {
                    fanout::DEFAULT_MAX_MEMBERS
                } else {
                    cmd.max_members
                }
            ))
            .hint("fewer workers, or a group created with a larger max-members");
        }
        Some(libc::ENOMEM) if cmd.flags.contains(Flags::UNIQUEID) => {
            f = Failure::system(format!("{base}: no unused group id is left"));
        }
        Some(libc::EPERM) => f = f.hint("run as root (packet sockets need CAP_NET_RAW)"),
        _ => {}
    }
    f
}

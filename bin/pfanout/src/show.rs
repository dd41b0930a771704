//! `pfanout show`: every AF_PACKET socket of the namespace (packet_diag), grouped by fanout
//! group, with the processes that hold them (`/proc/PID/fd`). packet_diag reports a socket's
//! group id and mode, not its flags: those are read from the socket itself where a pfanout
//! process holds it (a duplicate of its descriptor), and are unknown otherwise.

use std::collections::{BTreeMap, HashSet};

use mpt_cli::Failure;
use mpt_model::fanout::{self, Flags, Joined, Mode};
use mpt_netlink::msg::diag::packet::{self as diag, meminfo, PacketSock};
use mpt_netlink::sock::Socket;
use mpt_sys::procfd::{self, Owner};
use serde::Serialize;

use crate::grammar::ShowCmd;

/// Every packet socket of the calling thread's namespace.
pub fn dump() -> Result<Vec<PacketSock>, Failure> {
    let mut s = Socket::sock_diag().map_err(Failure::from)?;
    let show = diag::show::INFO | diag::show::FANOUT | diag::show::RING_CFG | diag::show::MEMINFO;
    let answers = s
        .dump(&diag::dump_request(show), "list packet sockets")
        .map_err(Failure::from)?;
    answers
        .iter()
        .map(|p| diag::decode(p).map_err(|e| Failure::system(format!("list packet sockets: {e}"))))
        .collect()
}

/// A process holding a socket.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct OwnerView {
    /// Process id.
    pub pid: u32,
    /// Its name (`/proc/PID/comm`).
    pub process: String,
    /// The descriptor.
    pub fd: i32,
}

/// A ring's configuration.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct RingView {
    /// TPACKET version (1, 2 or 3).
    pub version: u32,
    /// Block size in bytes.
    pub block_size: u32,
    /// Blocks.
    pub block_nr: u32,
    /// Frame size in bytes.
    pub frame_size: u32,
    /// Frames.
    pub frame_nr: u32,
}

/// One socket.
#[derive(Debug, Clone, Serialize)]
pub struct SocketView {
    /// Inode (`socket:[INO]`).
    pub inode: u32,
    /// `raw` or `dgram`.
    pub r#type: &'static str,
    /// The device it is bound to (`*`: every device).
    pub dev: Option<String>,
    /// The protocol it is bound to.
    pub protocol: String,
    /// The processes holding it.
    pub owners: Vec<OwnerView>,
    /// The receive ring, if any.
    pub ring: Option<RingView>,
    /// Bytes queued for receiving.
    pub rmem_alloc: Option<u32>,
    /// The receive buffer's limit.
    pub rcvbuf: Option<u32>,
    /// Packets the socket dropped (`dropped`, as iproute2's `-s -j`).
    #[serde(rename = "dropped")]
    pub drops: Option<u32>,
    /// Its fanout flags where known (from the socket itself).
    pub flags: Option<Vec<&'static str>>,
    /// The user that opened it (packet_diag).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    /// Its rollover counters (`PACKET_ROLLOVER_STATS`), read with `-s` where they can be.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollover: Option<RolloverView>,
    /// Why its rollover counters were not read (with `-s`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollover_unread: Option<String>,
}

/// A member's rollover counters.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct RolloverView {
    /// Packets moved to another member (`tp_all`).
    pub all: u64,
    /// Of those, of a huge flow while this socket was low on room (`tp_huge`).
    pub huge: u64,
    /// Packets no member had room for (`tp_failed`).
    pub failed: u64,
}

/// Read the rollover counters of every member of `groups`, through a duplicate of a
/// descriptor of its owner (`pidfd_getfd`: ≥ 5.6, root or the owner's user, ptrace allowed),
/// or say why they could not be read: no owner visible in this pid namespace, not permitted,
/// a kernel without pidfd_getfd. A socket whose group has no rollover has none to read.
pub fn read_rollover(groups: &mut [GroupView]) {
    for g in groups.iter_mut().filter(|g| g.id.is_some()) {
        for s in &mut g.sockets {
            if s.owners.is_empty() {
                s.rollover_unread = Some(format!(
                    "no process holding it is visible here (uid {})",
                    s.uid.map_or_else(|| "?".to_string(), |u| u.to_string())
                ));
                continue;
            }
            let mut why = Vec::new();
            for o in &s.owners {
                match mpt_sys::packet::rollover_stats_of(o.pid, o.fd, u64::from(s.inode)) {
                    Ok(Some(r)) => {
                        s.rollover = Some(RolloverView {
                            all: r.all,
                            huge: r.huge,
                            failed: r.failed,
                        });
                        why.clear();
                        break;
                    }
                    // no rollover in its group's mode and flags: nothing to read ("-")
                    Ok(None) => {
                        why.clear();
                        break;
                    }
                    Err(e) => why.push(match e.errno() {
                        Some(libc::ENOSYS) => {
                            "the kernel has no pidfd_getfd (Linux 5.6 or later needed)".to_string()
                        }
                        Some(libc::EPERM) | Some(libc::EACCES) => format!(
                            "not permitted to borrow fd {} of pid {} (ptrace rights needed)",
                            o.fd, o.pid
                        ),
                        _ => e.to_string(),
                    }),
                }
            }
            if !why.is_empty() {
                s.rollover_unread = Some(why.join("; "));
            }
        }
    }
}

/// One fanout group (or, with `id` None, the sockets in no group).
#[derive(Debug, Clone, Serialize)]
pub struct GroupView {
    /// Group id; None for the sockets outside any group.
    #[serde(rename = "group")]
    pub id: Option<u16>,
    /// Mode name (or the number the kernel reported).
    pub mode: String,
    /// The mode's number.
    #[serde(skip)]
    pub mode_number: Option<u16>,
    /// Flags: known where a member's owner is a pfanout process; None otherwise.
    pub flags: Option<Vec<&'static str>>,
    /// Members (sockets).
    pub members: usize,
    /// Device of the members (`*`: every device).
    pub dev: Option<String>,
    /// Its index.
    #[serde(skip)]
    pub ifindex: Option<u32>,
    /// Protocol the members are bound to.
    pub protocol: String,
    /// Its number.
    #[serde(skip)]
    pub protocol_number: Option<u16>,
    /// The members.
    pub sockets: Vec<SocketView>,
}

impl GroupView {
    /// ` (held by NAME pid PID)` for messages.
    pub fn owner_words(&self) -> String {
        let owners: Vec<String> = self
            .sockets
            .iter()
            .flat_map(|s| s.owners.iter())
            .map(|o| format!("{} pid {}", o.process, o.pid))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        if owners.is_empty() {
            String::new()
        } else {
            format!(" (held by {})", owners.join(", "))
        }
    }
}

fn dev_name(ifindex: u32) -> String {
    if ifindex == 0 {
        "*".to_string()
    } else if ifindex == u32::MAX {
        // the kernel's -1: the socket's device was unregistered under it
        "(deleted)".to_string()
    } else {
        mpt_sys::iface::name(ifindex).unwrap_or_else(|| format!("if{ifindex}"))
    }
}

/// A pfanout process, whose sockets' flags may be read (its socket borrowed with
/// `pidfd_getfd`): not any process that calls itself "pfanout" (any user can set its `comm`),
/// but one running a `pfanout` executable as root or as this user, this very binary included.
fn is_pfanout(o: &Owner) -> bool {
    use std::os::unix::fs::MetadataExt;
    if o.comm != "pfanout" {
        return false;
    }
    let exe = format!("/proc/{}/exe", o.pid);
    let (Ok(theirs), Ok(ours)) = (std::fs::metadata(&exe), std::fs::metadata("/proc/self/exe"))
    else {
        return false;
    };
    let me = nix::unistd::geteuid().as_raw();
    // the process is root's or the caller's, whichever binary it runs
    let owner = std::fs::metadata(format!("/proc/{}", o.pid)).map(|m| m.uid());
    if !owner.is_ok_and(|u| u == 0 || u == me) {
        return false;
    }
    if (theirs.dev(), theirs.ino()) == (ours.dev(), ours.ino()) {
        return true;
    }
    let named =
        std::fs::read_link(&exe).is_ok_and(|p| p.file_name().is_some_and(|n| n == "pfanout"));
    named && (theirs.uid() == 0 || theirs.uid() == me)
}

fn socket_view(s: &PacketSock, owners: &[Owner]) -> SocketView {
    let flags = owners
        .iter()
        .filter(|o| is_pfanout(o))
        .find_map(|o| mpt_sys::packet::fanout_of(o.pid, o.fd, u64::from(s.ino)).ok())
        // getsockopt answers 0 both outside any group and for group 0, mode hash, no flags:
        // packet_diag says which
        .and_then(|v| match (v, s.fanout) {
            (Some(v), _) => Some(Joined::from_raw(v).flags.names()),
            (None, Some(_)) => Some(Vec::new()),
            (None, None) => None,
        });
    SocketView {
        inode: s.ino,
        r#type: if s.sock_type == 2 { "dgram" } else { "raw" },
        dev: s.info.map(|i| dev_name(i.ifindex)),
        protocol: fanout::protocol_name(s.protocol),
        owners: owners
            .iter()
            .map(|o| OwnerView {
                pid: o.pid,
                process: o.comm.clone(),
                fd: o.fd,
            })
            .collect(),
        ring: s.rx_ring.filter(|r| r.block_nr > 0).map(|r| RingView {
            version: s.info.map_or(0, |i| i.version + 1),
            block_size: r.block_size,
            block_nr: r.block_nr,
            frame_size: r.frame_size,
            frame_nr: r.frame_nr,
        }),
        rmem_alloc: s.meminfo.map(|m| m[meminfo::RMEM_ALLOC]),
        rcvbuf: s.meminfo.map(|m| m[meminfo::RCVBUF]),
        drops: s.meminfo.map(|m| m[meminfo::DROPS]),
        flags,
        uid: s.uid,
        rollover: None,
        rollover_unread: None,
    }
}

/// Group the sockets: groups by id, then (as id None) the sockets in no group.
pub fn group(socks: &[PacketSock]) -> Vec<GroupView> {
    let wanted: HashSet<u64> = socks.iter().map(|s| u64::from(s.ino)).collect();
    let owners = procfd::socket_owners(&wanted);
    let none = Vec::new();
    let mut by_id: BTreeMap<Option<u16>, Vec<&PacketSock>> = BTreeMap::new();
    for s in socks {
        by_id.entry(s.fanout.map(|(id, _)| id)).or_default().push(s);
    }
    let mut out = Vec::new();
    // groups first (BTreeMap puts None first: move it to the end)
    let mut ungrouped = None;
    for (id, members) in by_id {
        let first = members[0];
        let mode_number = first.fanout.map(|(_, m)| m);
        let ifindex = first.info.map(|i| i.ifindex);
        let sockets: Vec<SocketView> = members
            .iter()
            .map(|s| socket_view(s, owners.get(&u64::from(s.ino)).unwrap_or(&none)))
            .collect();
        let flags = sockets.iter().find_map(|s| s.flags.clone());
        let grouped = id.is_some();
        let g = GroupView {
            id,
            mode: match mode_number {
                Some(m) => Mode::from_number(m).map_or_else(|| m.to_string(), |m| m.to_string()),
                None => "-".to_string(),
            },
            mode_number,
            flags,
            members: members.len(),
            dev: ifindex.filter(|_| grouped).map(dev_name),
            ifindex: ifindex.filter(|_| grouped),
            protocol: if grouped {
                fanout::protocol_name(first.protocol)
            } else {
                "-".to_string()
            },
            protocol_number: Some(first.protocol).filter(|_| grouped),
            sockets,
        };
        if id.is_none() {
            ungrouped = Some(g);
        } else {
            out.push(g);
        }
    }
    if let Some(g) = ungrouped {
        out.push(g);
    }
    out
}

/// The groups of the namespace now (for explaining a refused join).
pub fn groups_now() -> Result<Vec<GroupView>, Failure> {
    Ok(group(&dump()?))
}

/// `pfanout show`: the groups that match, and with `details` the sockets in no group.
pub fn run(cmd: &ShowCmd, details: bool) -> Result<Vec<GroupView>, Failure> {
    let want_ifindex = match &cmd.dev {
        Some(d) => Some(mpt_sys::iface::index(d).map_err(|e| {
            Failure::system(e.to_string()).hint("check the device name with \"ip link\"")
        })?),
        None => None,
    };
    let socks: Vec<PacketSock> = dump()?
        .into_iter()
        .filter(|s| want_ifindex.is_none_or(|i| s.info.is_some_and(|n| n.ifindex == i)))
        .filter(|s| {
            cmd.group
                .is_none_or(|g| s.fanout.is_some_and(|(id, _)| id == g))
        })
        .collect();
    Ok(group(&socks)
        .into_iter()
        .filter(|g| g.id.is_some() || (details && cmd.group.is_none()))
        .collect())
}

/// Flags for display: the names, `none`, or `unknown`.
pub fn flags_words(f: &Option<Vec<&'static str>>) -> String {
    match f {
        None => "unknown".to_string(),
        Some(v) if v.is_empty() => Flags::empty().to_string(),
        Some(v) => v.join(","),
    }
}

//! `--check`: what `run` would do, decided from what the namespace holds, without joining
//! (a join is a change: the group gains members, or a new group exists while they live).
//!
//! The kernel's rules for a join (`fanout_add`) are checked against the group of that id as
//! packet_diag shows it: a member must come with the group's mode, device and protocol, and
//! its flags where they are known (a pfanout process holds the group); mode rollover takes no
//! rollover flag; a group holds at most its max-members. A rule broken gives the failure `run`
//! itself would give, in the same words, exit 2. What cannot be seen beforehand is said in a
//! note: the flags and the member limit of a group no pfanout process holds.

use serde::Serialize;

use mpt_cli::Failure;
use mpt_model::fanout::{self, Flags, Mode};

use crate::grammar::{BenchCmd, RunCmd};
use crate::group::{explain_join, precheck};
use crate::show::{self, GroupView};

/// What a dry run would do.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    /// Always true: nothing was done.
    pub check: bool,
    /// Whether the command would change anything (a run joins or creates a group).
    pub changed: bool,
    /// `run` or `bench`.
    pub action: &'static str,
    /// What the group is before and after (`null`: none yet / none given).
    pub diff: Diff,
    /// What could not be decided beforehand.
    pub notes: Vec<String>,
    /// The one-line summary of the text output.
    #[serde(skip)]
    pub summary: String,
}

/// Before and after.
#[derive(Debug, Clone, Serialize)]
pub struct Diff {
    /// The group before (as `pfanout show -j` prints it), `null` if it does not exist.
    pub before: Option<GroupView>,
    /// The group the run would make or join.
    pub after: Option<After>,
}

/// The group as a run would leave it while it runs.
#[derive(Debug, Clone, Serialize)]
pub struct After {
    /// Group id (`null`: the kernel chooses one).
    pub group: Option<u16>,
    /// Mode.
    pub mode: &'static str,
    /// Flags as the kernel keeps them.
    pub flags: Vec<&'static str>,
    /// Members while the run lasts.
    pub members: usize,
    /// Device.
    pub dev: String,
}

fn errno(n: i32, what: &str) -> mpt_sys::Error {
    mpt_sys::Error::io(what, std::io::Error::from_raw_os_error(n))
}

/// `run` as a dry run.
pub fn run(cmd: &RunCmd) -> Result<CheckReport, Failure> {
    precheck(cmd)?;
    let id = cmd.group.unwrap_or(0);
    let refuse = |n: i32| explain_join(errno(n, "join"), id, cmd, 0);
    if cmd.mode == Mode::Rollover && cmd.flags.contains(Flags::ROLLOVER) {
        return Err(refuse(libc::EINVAL));
    }
    if cmd.max_members > fanout::MAX_MEMBERS {
        return Err(refuse(libc::EINVAL));
    }
    let existing = match cmd.group {
        Some(g) if !cmd.flags.contains(Flags::UNIQUEID) => {
            show::groups_now()?.into_iter().find(|v| v.id == Some(g))
        }
        _ => None,
    };
    let kept = cmd.flags.without(Flags::UNIQUEID);
    let mut notes = Vec::new();
    let workers = cmd.workers as usize;
    if let Some(g) = &existing {
        let dev_ok = g.ifindex == Some(0) || g.dev.as_deref() == Some(cmd.dev.as_str());
        let flags_ok = g.flags.as_ref().is_none_or(|f| *f == kept.names());
        if g.mode_number != Some(cmd.mode.number())
            || !dev_ok
            || g.protocol_number != Some(cmd.protocol)
            || !flags_ok
        {
            return Err(refuse(libc::EINVAL));
        }
        if g.flags.is_none() {
            notes.push(format!(
                "the flags of group {id} are not known (no pfanout process holds it): the kernel refuses members with other flags"
            ));
        }
        if g.members + workers > fanout::MAX_MEMBERS as usize {
            return Err(refuse(libc::ENOSPC));
        }
        notes.push(format!(
            "group {id}'s member limit is not known from here: a full group refuses the join (ENOSPC)"
        ));
    } else {
        let max = match cmd.max_members {
            0 => fanout::DEFAULT_MAX_MEMBERS,
            m => m,
        } as usize;
        if workers > max {
            return Err(refuse(libc::ENOSPC));
        }
    }
    let after = After {
        group: if cmd.flags.contains(Flags::UNIQUEID) || cmd.group.is_none() {
            None
        } else {
            Some(id)
        },
        mode: cmd.mode.name(),
        flags: kept.names(),
        members: existing.as_ref().map_or(0, |g| g.members) + workers,
        dev: cmd.dev.clone(),
    };
    let summary = match (&existing, after.group) {
        (Some(g), _) => format!(
            "run: would join group {id} on dev {} (mode {}, {} members now, {} while it runs)",
            cmd.dev, after.mode, g.members, after.members
        ),
        (None, Some(g)) => format!(
            "run: would create group {g} on dev {} (mode {}, {} members)",
            cmd.dev, after.mode, after.members
        ),
        (None, None) => format!(
            "run: would create a group with an id the kernel chooses on dev {} (mode {}, {} members)",
            cmd.dev, after.mode, after.members
        ),
    };
    Ok(CheckReport {
        check: true,
        changed: true,
        action: "run",
        diff: Diff {
            before: existing,
            after: Some(after),
        },
        notes,
        summary,
    })
}

/// `bench` as a dry run: it works in namespaces of its own, and changes nothing here.
pub fn bench(cmd: &BenchCmd) -> CheckReport {
    CheckReport {
        check: true,
        changed: false,
        action: "bench",
        diff: Diff {
            before: None,
            after: None,
        },
        notes: Vec::new(),
        summary: format!(
            "bench: would measure {} workers in throwaway namespaces of its own ({} s per mode); nothing here changes",
            cmd.workers, cmd.seconds
        ),
    }
}

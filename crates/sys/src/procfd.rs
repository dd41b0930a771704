//! Which processes hold a socket: the `socket:[INO]` links under `/proc/PID/fd`, matched to
//! the inode numbers that `packet_diag` (and `fstat`) report.
//!
//! `/proc` is read as it is at the moment of the walk: processes come and go, and one that
//! vanishes half way, or whose fd table we may not read, is skipped without a word.

use std::collections::{HashMap, HashSet};

/// A process holding a socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// Its pid.
    pub pid: u32,
    /// The descriptor number in that process.
    pub fd: i32,
    /// Its `comm` (`/proc/PID/comm`, trimmed; empty when it could not be read).
    pub comm: String,
}

/// `s` with each control character as `\xNN` (a process sets its own name, newlines
/// included).
fn escape_controls(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        crate::error::push_escaped(&mut out, c, c.is_control());
    }
    out
}

/// The inode of a `/proc/PID/fd/N` link's target `socket:[INO]`; `None` for anything else.
fn socket_inode(target: &str) -> Option<u64> {
    target
        .strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// Every process's sockets among `wanted`: inode -> owners (sorted by pid, then fd), from the
/// `/proc/[0-9]*/fd/*` links `socket:[INO]` and `/proc/PID/comm` (trimmed). Processes that
/// vanish or cannot be read are skipped silently; inodes nobody holds are absent.
pub fn socket_owners(wanted: &HashSet<u64>) -> HashMap<u64, Vec<Owner>> {
    let mut out: HashMap<u64, Vec<Owner>> = HashMap::new();
    if wanted.is_empty() {
        return out;
    }
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.filter_map(|e| e.ok()) {
        let Some(pid) = p
            .file_name()
            .to_str()
            .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        // comm is read once per process, and only for one that holds a wanted socket.
        let mut comm: Option<String> = None;
        for e in fds.filter_map(|e| e.ok()) {
            let Some(fd) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let Ok(target) = std::fs::read_link(e.path()) else {
                continue;
            };
            let Some(ino) = target.to_str().and_then(socket_inode) else {
                continue;
            };
            if !wanted.contains(&ino) {
                continue;
            }
            let comm = comm.get_or_insert_with(|| {
                // a name the process chose: a newline or an escape in it is shown, not obeyed
                std::fs::read_to_string(p.path().join("comm"))
                    .map(|s| escape_controls(s.trim_end_matches('\n')))
                    .unwrap_or_default()
            });
            out.entry(ino).or_default().push(Owner {
                pid,
                fd,
                comm: comm.clone(),
            });
        }
    }
    for v in out.values_mut() {
        v.sort_by_key(|o| (o.pid, o.fd));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_links_parse() {
        assert_eq!(socket_inode("socket:[12345]"), Some(12345));
        assert_eq!(socket_inode("socket:[]"), None);
        assert_eq!(socket_inode("pipe:[12345]"), None);
        assert_eq!(socket_inode("/dev/null"), None);
        assert_eq!(socket_inode("anon_inode:[eventpoll]"), None);
    }

    #[test]
    fn nothing_wanted_nothing_found() {
        assert!(socket_owners(&HashSet::new()).is_empty());
    }

    #[test]
    fn finds_our_own_socket() {
        use std::os::unix::fs::MetadataExt;
        let s = std::net::UdpSocket::bind("127.0.0.1:0").expect("a UDP socket");
        let fd = std::os::fd::AsRawFd::as_raw_fd(&s);
        let ino = std::fs::metadata(format!("/proc/self/fd/{fd}"))
            .expect("stat our fd")
            .ino();
        let owners = socket_owners(&HashSet::from([ino]));
        let mine = owners.get(&ino).expect("our socket is found");
        assert!(mine
            .iter()
            .any(|o| o.pid == std::process::id() && o.fd == fd && !o.comm.is_empty()));
    }
}

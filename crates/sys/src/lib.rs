//! `mpt-sys`: the system calls our tools need that are neither netlink nor BPF: entering network
//! namespaces and telling them apart ([`netns`]), interface names and addresses ([`iface`]),
//! `/proc/sys/net` settings ([`sysctl`]), ethtool ioctls ([`ethtool`]), AF_PACKET sockets with
//! their fanout groups, counters and `TPACKET_V3` rings ([`packet`]), and which processes hold
//! a socket ([`procfd`]), files root writes where others could lay traps ([`fs`]), systemd's
//! readiness notification ([`notify`]) and RFC 3339 time stamps ([`time`]).
//!
//! Boundary: every `unsafe` call of this kind lives here, behind safe functions that return
//! typed errors naming what was attempted; the tools' binaries hold none. Everything acts in the
//! calling thread's network namespace unless it says otherwise.

pub mod error;
pub mod ethtool;
pub mod fs;
pub mod iface;
pub mod netns;
pub mod notify;
pub mod packet;
pub mod procfd;
pub mod sysctl;
pub mod time;
pub mod trace;

pub use error::Error;

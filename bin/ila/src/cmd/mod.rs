//! One module per object: each a function from a typed command to an [`Output`], over the
//! backend of the session.

pub mod dataplane;
pub mod route;
pub mod xlat;

use mpt_cli::Failure;

use crate::cli::Command;
use crate::session::Session;
use crate::view::Output;

/// Run one command.
pub fn run(s: &mut Session, c: &Command) -> Result<Output, Failure> {
    match c {
        Command::Xlat(x) => xlat::run(s, x),
        Command::Route(r) => route::run(s, r),
        Command::Dataplane(d) => dataplane::run(s, d),
    }
}

/// As [`ifindex`], and also `ifN` for a device that is gone (as `show` names it): what was
/// left on it can be found and deleted by that name.
pub fn ifindex_or_gone(dev: &str, what: &str) -> Result<u32, Failure> {
    ifindex(dev, what).or_else(|f| {
        dev.strip_prefix("if")
            .and_then(|n| n.parse::<u32>().ok())
            .filter(|&n| n != 0 && mpt_sys::iface::name(n).is_none())
            .ok_or(f)
    })
}

/// The ifindex of a device of the namespace (`what: cannot find device "DEV"` if none).
pub fn ifindex(dev: &str, what: &str) -> Result<u32, Failure> {
    mpt_sys::iface::index(dev).map_err(|_| {
        Failure::system(format!("{what}: cannot find device \"{dev}\" [ENODEV]"))
            .hint("check the device name with \"ip link\" (in the same namespace)")
    })
}

/// A note to standard error (the command did what it was asked, but it will not have the
/// effect the operator may expect); each note once per invocation, however many lines of a
/// batch earn it.
pub fn note(s: &str) {
    mpt_cli::error::eprint_once("ila", "note", s);
}

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

/// The ifindex of a device of the namespace (`what: cannot find device "DEV"` if none).
pub fn ifindex(dev: &str, what: &str) -> Result<u32, Failure> {
    mpt_sys::iface::index(dev).map_err(|_| {
        Failure::system(format!("{what}: cannot find device \"{dev}\" [ENODEV]"))
            .hint("check the device name with \"ip link\" (in the same namespace)")
    })
}

/// A note to standard error (the command did what it was asked, but it will not have the
/// effect the operator may expect).
pub fn note(s: &str) {
    eprintln!("ila: note: {s}");
}

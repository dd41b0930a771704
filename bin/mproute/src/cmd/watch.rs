//! `mproute dataplane watch`: keep the dataplane's FIB check verified while the FIB changes,
//! printing the check each time (`-j`: one JSON object per line), and put back the nexthop
//! objects the kernel deleted with a link when the link is up again. Runs until interrupted.

use mpt_cli::render::Style;
use mpt_cli::Failure;

use crate::session::Session;

/// `dataplane watch`: verify the managed routes at start and again after every change of
/// routes, rules, addresses, links or forwarding settings (a burst counts once), printing the
/// check each time. Every few seconds it also compares the FIB generation with the one last
/// reported, for the changes the kernel announces to nobody (a route cache flush). Runs until
/// interrupted or until its output is closed; returns only on failure.
pub fn run(s: &mut Session, style: Style) -> Result<(), Failure> {
    use mpt_netlink::events::{self as ev, Events};
    use std::io::Write;
    use std::time::Duration;
    let mut events = Events::subscribe(&[
        ev::RTNLGRP_LINK,
        ev::RTNLGRP_IPV4_IFADDR,
        ev::RTNLGRP_IPV4_ROUTE,
        ev::RTNLGRP_IPV4_RULE,
        ev::RTNLGRP_IPV4_NETCONF,
        // IPv6: its holes and drift are verified too (the IPv4 generation does not move)
        ev::RTNLGRP_IPV6_IFADDR,
        ev::RTNLGRP_IPV6_ROUTE,
        ev::RTNLGRP_IPV6_RULE,
        ev::RTNLGRP_NEXTHOP,
    ])
    .map_err(Failure::from)?;
    // the generation the routes were last verified at (None: not verified, try again)
    let mut last: Option<u32>;
    loop {
        settle(s, style);
        let line = match s.verify_now() {
            Ok(f) => {
                last = f.verified_at;
                if style.json {
                    serde_json::to_string(&f).unwrap_or_default()
                } else {
                    f.line()
                }
            }
            // a failed round is reported; the next change tries again
            Err(f) => {
                last = None;
                f.eprint("mproute");
                String::new()
            }
        };
        if !line.is_empty() {
            let mut out = std::io::stdout().lock();
            let line = mpt_cli::render::text_safe(&line);
            if let Err(e) = writeln!(out, "{line}").and_then(|()| out.flush()) {
                if e.kind() == std::io::ErrorKind::BrokenPipe {
                    return Ok(()); // nobody reads any more
                }
                return Err(Failure::system(format!(
                    "write standard output: {}",
                    mpt_sys::error::words(&e)
                )));
            }
        }
        loop {
            let changed = events
                .wait_change(
                    Some(Duration::from_secs(5)),
                    Duration::from_millis(100),
                    Duration::from_secs(2),
                )
                .map_err(Failure::from)?;
            if changed || last.is_none() || s.generation().ok().flatten() != last {
                break;
            }
            settle(s, style);
        }
    }
}

/// Nexthop objects the kernel deleted with a link that is back, put back with their routes
/// (each printed: `restored nhid N: ...`, `-j`: the action row); resilient tables whose idle
/// buckets can move to the nexthops below their share. A failure is reported and the next
/// round tries again.
fn settle(s: &mut Session, style: Style) {
    use std::io::Write;
    match s.restore_objects() {
        Ok(rows) => {
            let mut out = std::io::stdout().lock();
            for r in rows {
                let line = if style.json {
                    serde_json::to_string(&r).unwrap_or_default()
                } else {
                    format!("{} {}: {}", r.action, r.dst, r.reason)
                };
                let line = mpt_cli::render::text_safe(&line);
                let _ = writeln!(out, "{line}").and_then(|()| out.flush());
            }
        }
        Err(f) => f.eprint("mproute"),
    }
    if let Err(f) = s.settle_resilient() {
        f.eprint("mproute");
    }
    // between rounds the namespace's lock is free for other mproute commands
    s.release_state();
}

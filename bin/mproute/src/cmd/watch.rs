//! `mproute dataplane watch`: keep the dataplane's FIB check verified while the FIB changes,
//! printing the check each time (`-j`: one JSON object per line), and put back the nexthop
//! objects the kernel deleted with a link when the link is up again. Runs until interrupted.
//!
//! Every line starts with its time stamp (RFC 3339, UTC, milliseconds, as `ip monitor -ts`) and
//! what triggered it: `start`, the kinds of the netlink notifications (`route`, `link-up`,
//! `link-down`, `addr`, ... joined by `,`), `tick` (the FIB generation moved with no
//! notification) or `retry` (the last round failed); `-j`: the keys `time` and `trigger`.
//! Under systemd (`Type=notify`) it reports `READY=1` once the first round is printed and
//! `STOPPING=1` when it ends (SIGTERM, SIGINT, its output closed, a failure).

use mpt_cli::render::Style;
use mpt_cli::Failure;

use crate::session::Session;

/// `dataplane watch`: verify the managed routes at start and again after every change of
/// routes, rules, addresses, links or forwarding settings (a burst counts once), printing the
/// check each time. Every few seconds it also compares the FIB generation with the one last
/// reported, for the changes the kernel announces to nobody (a route cache flush). Runs until
/// interrupted or until its output is closed; returns only on failure.
pub fn run(s: &mut Session, style: Style) -> Result<(), Failure> {
    let busy = mpt_sys::notify::stop_on_signals()
        .map_err(|e| Failure::system(format!("handle signals: {}", mpt_sys::error::words(&e))))?;
    let r = watch(s, style, &busy);
    let _ = mpt_sys::notify::notify("STOPPING=1");
    r
}

/// A line as printed: the time stamp and the trigger before the text; in JSON, beside the
/// object's own keys.
fn stamped<T: serde::Serialize>(
    row: &T,
    text: impl FnOnce() -> String,
    trigger: &str,
    style: Style,
) -> String {
    let time = mpt_sys::time::rfc3339_now();
    if style.json {
        match serde_json::to_value(row) {
            Ok(serde_json::Value::Object(mut m)) => {
                m.insert("time".into(), time.into());
                m.insert("trigger".into(), trigger.into());
                serde_json::to_string(&m).unwrap_or_default()
            }
            Ok(v) => serde_json::to_string(&v).unwrap_or_default(),
            Err(_) => String::new(),
        }
    } else {
        format!("{time} {trigger} {}", text())
    }
}

/// `busy`: held during each round (a stop waits for the round's writes to finish).
fn watch(s: &mut Session, style: Style, busy: &mpt_sys::notify::Busy) -> Result<(), Failure> {
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
    // what started this round, and whether systemd has been told the first one is done
    let mut trigger = String::from("start");
    let mut ready = false;
    loop {
        let round = busy.hold();
        settle(s, style, &trigger);
        let line = match s.verify_now() {
            Ok(f) => {
                last = f.verified_at;
                stamped(&f, || f.line(), &trigger, style)
            }
            // a failed round is reported; the next change tries again
            Err(f) => {
                last = None;
                f.eprint("mproute");
                String::new()
            }
        };
        // the round's writes are done: a stop may come while the line is printed
        drop(round);
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
        if !ready {
            // the first round is out (printed, or its failure reported): the service is up
            ready = true;
            let _ = mpt_sys::notify::notify("READY=1\nSTATUS=watching the FIB");
        }
        loop {
            let changed = events
                .wait_change(
                    Some(Duration::from_secs(5)),
                    Duration::from_millis(100),
                    Duration::from_secs(2),
                )
                .map_err(Failure::from)?;
            let kinds = events.take_kinds();
            if changed {
                trigger = if kinds.is_empty() {
                    "netlink".to_string()
                } else {
                    kinds.join(",")
                };
                break;
            }
            if last.is_none() {
                trigger = "retry".into();
                break;
            }
            if s.generation().ok().flatten() != last {
                trigger = "tick".into();
                break;
            }
            let _round = busy.hold();
            settle(s, style, "tick");
        }
    }
}

/// Nexthop objects the kernel deleted with a link that is back, put back with their routes
/// (each printed: `restored nhid N: ...`, `-j`: the action row); resilient tables whose idle
/// buckets can move to the nexthops below their share. A failure is reported and the next
/// round tries again.
fn settle(s: &mut Session, style: Style, trigger: &str) {
    use std::io::Write;
    match s.restore_objects() {
        Ok(rows) => {
            let mut out = std::io::stdout().lock();
            for r in rows {
                let line = stamped(
                    &r,
                    || format!("{} {}: {}", r.action, r.dst, r.reason),
                    trigger,
                    style,
                );
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

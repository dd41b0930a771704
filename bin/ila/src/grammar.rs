//! The words after an object and its verb, as `ip ila` and `ip route ... encap ila` read them,
//! turned into typed commands. Syntax only: device names are resolved later, inside the target
//! namespace.
//!
//! Keywords match as iproute2's `matches()` does: any leading part of the keyword (`loc` is
//! tried before `loc_match`, as in `ipila.c`, so `loc` and `l` mean `loc`). Locators are four
//! hex groups (`2001:0:119:0`); `::` forms are accepted too.

use std::fmt;
use std::net::Ipv6Addr;

use ipnet::Ipv6Net;
use mpt_model::ila::plan::Mode;
use mpt_model::ila::{CsumMode, HookType, IdentType, Locator, RouteSpec};

/// A syntax error, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError(pub String);

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(s: impl Into<String>) -> Result<T, SyntaxError> {
    Err(SyntaxError(s.into()))
}

/// iproute2's `matches(word, keyword)`: `word` is a non-empty leading part of `keyword`.
pub fn matches(word: &str, keyword: &str) -> bool {
    !word.is_empty() && keyword.starts_with(word)
}

/// The verb of `ila xlat` and `ila route` (`get`: xlat only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// `add` (fails if the key exists) or `replace` (add or overwrite).
    Put(Mode),
    /// `del`.
    Del,
    /// `get`: one mapping.
    Get,
    /// `show` (`list`, `lst`).
    Show,
    /// `flush`: every entry.
    Flush,
}

impl Verb {
    /// The command-line word.
    pub const fn name(self) -> &'static str {
        match self {
            Verb::Put(m) => m.name(),
            Verb::Del => "del",
            Verb::Get => "get",
            Verb::Show => "show",
            Verb::Flush => "flush",
        }
    }
}

/// A mapping's key as the command names it: `loc_match LOC [dev DEV]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XlatKey {
    /// `loc_match LOC`: the locator a destination must have.
    pub locator_match: Locator,
    /// `dev DEV`: the receiving device (none: any).
    pub dev: Option<String>,
}

/// `ila xlat VERB ...`, one variant per verb.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XlatCmd {
    /// `add|replace loc_match LOC loc LOC [dev DEV] [csum-mode MODE] [ident-type TYPE]`.
    Put {
        /// `add` or `replace`.
        mode: Mode,
        /// The key.
        key: XlatKey,
        /// `loc LOC`: what it becomes.
        locator: Locator,
        /// `csum-mode MODE` (default no-action, as the kernel's).
        csum_mode: CsumMode,
        /// `ident-type TYPE` (default use-format).
        ident_type: IdentType,
    },
    /// `del loc_match LOC [loc LOC] [dev DEV]` (with `loc`: only if it has that locator).
    Del {
        /// The key.
        key: XlatKey,
        /// `loc LOC`.
        locator: Option<Locator>,
    },
    /// `get loc_match LOC [dev DEV]`.
    Get(XlatKey),
    /// `show`.
    Show,
    /// `flush`.
    Flush,
}

impl XlatCmd {
    /// The verb.
    pub const fn verb(&self) -> Verb {
        match self {
            XlatCmd::Put { mode, .. } => Verb::Put(*mode),
            XlatCmd::Del { .. } => Verb::Del,
            XlatCmd::Get(_) => Verb::Get,
            XlatCmd::Show => Verb::Show,
            XlatCmd::Flush => Verb::Flush,
        }
    }
}

/// `ila route VERB ...`, one variant per verb.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteCmd {
    /// `add|replace SIR-PREFIX loc LOC [csum-mode MODE] [ident-type TYPE] [hook-type HOOK]
    /// [via ADDR] [dev DEV] [table T]`.
    Put {
        /// `add` or `replace`.
        mode: Mode,
        /// The translation (defaults: no-action, use-format, output).
        spec: RouteSpec,
        /// `via ADDR`.
        via: Option<Ipv6Addr>,
        /// `dev DEV`.
        dev: Option<String>,
        /// `table T` (a name or number; default main).
        table: Option<String>,
    },
    /// `del SIR-PREFIX [table T]`.
    Del {
        /// The SIR prefix.
        dst: Ipv6Net,
        /// `table T`.
        table: Option<String>,
    },
    /// `show [SIR-PREFIX] [table T]`.
    Show {
        /// The SIR prefix.
        dst: Option<Ipv6Net>,
        /// `table T`.
        table: Option<String>,
    },
    /// `flush [table T]`.
    Flush {
        /// `table T`.
        table: Option<String>,
    },
}

impl RouteCmd {
    /// The verb.
    pub const fn verb(&self) -> Verb {
        match self {
            RouteCmd::Put { mode, .. } => Verb::Put(*mode),
            RouteCmd::Del { .. } => Verb::Del,
            RouteCmd::Show { .. } => Verb::Show,
            RouteCmd::Flush { .. } => Verb::Flush,
        }
    }

    /// The SIR prefix, where the command names one.
    pub const fn dst(&self) -> Option<Ipv6Net> {
        match self {
            RouteCmd::Put { spec, .. } => Some(spec.dst),
            RouteCmd::Del { dst, .. } => Some(*dst),
            RouteCmd::Show { dst, .. } => *dst,
            RouteCmd::Flush { .. } => None,
        }
    }

    /// `table T`, as given.
    pub fn table(&self) -> Option<&str> {
        match self {
            RouteCmd::Put { table, .. }
            | RouteCmd::Del { table, .. }
            | RouteCmd::Show { table, .. }
            | RouteCmd::Flush { table } => table.as_deref(),
        }
    }
}

/// Where `ila dataplane attach` puts the ingress program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachMode {
    /// tc on virtual devices (veth), native XDP on NICs (tc where the driver has none).
    Auto,
    /// Native XDP.
    Xdp,
    /// Generic XDP.
    XdpGeneric,
    /// tcx.
    Tc,
}

/// Which of the translator's programs (`ingress`, `egress`; neither word: both).
pub use mpt_bpf::ila::dataplane::Sides;

/// `ila dataplane ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DpCmd {
    /// `attach dev DEV [dev DEV ...] [auto|xdp|xdp-generic|tc] [ingress|egress]`.
    Attach {
        /// Devices.
        devs: Vec<String>,
        /// Ingress hook.
        mode: AttachMode,
        /// Which programs.
        sides: Sides,
    },
    /// `detach dev DEV [dev DEV ...] [ingress|egress]`.
    Detach {
        /// Devices.
        devs: Vec<String>,
        /// Which programs.
        sides: Sides,
    },
    /// `show`.
    Show,
}

fn next<'a>(it: &mut std::slice::Iter<'a, String>, what: &str) -> Result<&'a str, SyntaxError> {
    it.next()
        .map(String::as_str)
        .ok_or_else(|| SyntaxError(format!("\"{what}\" needs a value")))
}

fn locator(s: &str, what: &str) -> Result<Locator, SyntaxError> {
    s.parse::<Locator>()
        .map_err(|e| SyntaxError(format!("{what}: {e}")))
}

fn csum_mode(s: &str) -> Result<CsumMode, SyntaxError> {
    CsumMode::from_name(s).ok_or_else(|| {
        SyntaxError(format!(
            "csum-mode \"{s}\": expected adj-transport, neutral-map, neutral-map-auto or no-action"
        ))
    })
}

fn ident_type(s: &str) -> Result<IdentType, SyntaxError> {
    // as ip ila: only these two are accepted on input (the others are printed, never set)
    match s {
        "luid" => Ok(IdentType::Luid),
        "use-format" => Ok(IdentType::UseFormat),
        _ => err(format!("ident-type \"{s}\": expected luid or use-format")),
    }
}

fn hook_type(s: &str) -> Result<HookType, SyntaxError> {
    HookType::from_name(s)
        .ok_or_else(|| SyntaxError(format!("hook-type \"{s}\": expected output or input")))
}

fn once<T>(slot: &mut Option<T>, v: T, what: &str) -> Result<(), SyntaxError> {
    if slot.is_some() {
        return err(format!("\"{what}\" given twice"));
    }
    *slot = Some(v);
    Ok(())
}

/// The value after `key`, parsed, into `slot` ([`once`]).
fn take<T>(
    slot: &mut Option<T>,
    it: &mut std::slice::Iter<'_, String>,
    key: &str,
    parse: impl FnOnce(&str) -> Result<T, SyntaxError>,
) -> Result<(), SyntaxError> {
    let v = parse(next(it, key)?)?;
    once(slot, v, key)
}

/// The verb word of `ila xlat` and `ila route`.
pub fn verb(w: &str) -> Option<Verb> {
    Some(match w {
        "add" => Verb::Put(Mode::Add),
        "replace" => Verb::Put(Mode::Replace),
        "del" | "delete" => Verb::Del,
        "get" => Verb::Get,
        "show" | "list" | "lst" | "ls" => Verb::Show,
        "flush" => Verb::Flush,
        _ => return None,
    })
}

/// Parse `ila xlat [VERB ARGS]` (no verb: `show`).
pub fn parse_xlat(words: &[String]) -> Result<XlatCmd, SyntaxError> {
    let Some((first, rest)) = words.split_first() else {
        return parse_xlat_args(Verb::Show, &[]);
    };
    let Some(verb) = verb(first) else {
        return err(format!(
            "unknown xlat command \"{first}\" (expected add, replace, del, get, show, flush)"
        ));
    };
    parse_xlat_args(verb, rest)
}

/// The words of an xlat command as given, before they are checked against its verb.
#[derive(Default)]
struct XlatWords {
    locator_match: Option<Locator>,
    locator: Option<Locator>,
    dev: Option<String>,
    csum_mode: Option<CsumMode>,
    ident_type: Option<IdentType>,
}

fn parse_xlat_args(verb: Verb, words: &[String]) -> Result<XlatCmd, SyntaxError> {
    let mut c = XlatWords::default();
    let takes_words = !matches!(verb, Verb::Show | Verb::Flush);
    let put = matches!(verb, Verb::Put(_));
    let mut it = words.iter();
    while let Some(w) = it.next() {
        let w = w.as_str();
        if !takes_words {
            return err(format!(
                "unexpected word \"{w}\" ({} takes none)",
                verb.name()
            ));
        }
        // iproute2's order of tests: loc before loc_match
        if matches(w, "loc") {
            take(&mut c.locator, &mut it, "loc", |s| locator(s, "loc"))?;
        } else if matches(w, "loc_match") {
            take(&mut c.locator_match, &mut it, "loc_match", |s| {
                locator(s, "loc_match")
            })?;
        } else if matches(w, "dev") {
            take(&mut c.dev, &mut it, "dev", |s| Ok(s.to_string()))?;
        } else if put && matches(w, "csum-mode") {
            take(&mut c.csum_mode, &mut it, "csum-mode", csum_mode)?;
        } else if put && matches(w, "ident-type") {
            take(&mut c.ident_type, &mut it, "ident-type", ident_type)?;
        } else {
            return err(format!("unexpected word \"{w}\""));
        }
    }
    let key = match c.locator_match {
        Some(locator_match) => XlatKey {
            locator_match,
            dev: c.dev,
        },
        None if takes_words => return err("missing \"loc_match LOCATOR\""),
        None if verb == Verb::Flush => return Ok(XlatCmd::Flush),
        None => return Ok(XlatCmd::Show),
    };
    Ok(match (verb, c.locator) {
        (Verb::Put(mode), Some(locator)) => XlatCmd::Put {
            mode,
            key,
            locator,
            csum_mode: c.csum_mode.unwrap_or(CsumMode::NoAction),
            ident_type: c.ident_type.unwrap_or(IdentType::UseFormat),
        },
        (Verb::Put(_), None) => return err("missing \"loc LOCATOR\""),
        (Verb::Get, Some(_)) => return err("get takes loc_match and dev only"),
        (Verb::Get, None) => XlatCmd::Get(key),
        (_, locator) => XlatCmd::Del { key, locator },
    })
}

/// A SIR prefix: `ADDR/LEN` or an address alone (a /128), host bits cleared.
fn sir_prefix(s: &str) -> Result<Ipv6Net, SyntaxError> {
    let net = match s.parse::<Ipv6Net>() {
        Ok(n) => n,
        Err(_) => match s.parse::<Ipv6Addr>() {
            Ok(a) => Ipv6Net::new(a, 128).map_err(|e| SyntaxError(e.to_string()))?,
            Err(_) => return err(format!("\"{s}\" is not an IPv6 prefix (SIR-ADDRESS[/LEN])")),
        },
    };
    if net.trunc() != net {
        return err(format!(
            "{s}: host bits set (the prefix is {})",
            net.trunc()
        ));
    }
    Ok(net)
}

/// The words of a route command as given, before they are checked against its verb.
#[derive(Default)]
struct RouteWords {
    dst: Option<Ipv6Net>,
    locator: Option<Locator>,
    csum_mode: Option<CsumMode>,
    ident_type: Option<IdentType>,
    hook_type: Option<HookType>,
    via: Option<Ipv6Addr>,
    dev: Option<String>,
    table: Option<String>,
}

/// Parse `ila route [VERB ARGS]` (no verb: `show`).
pub fn parse_route(words: &[String]) -> Result<RouteCmd, SyntaxError> {
    let (verb, rest) = match words.split_first() {
        None => (Verb::Show, &[][..]),
        Some((first, rest)) => match verb(first).filter(|v| *v != Verb::Get) {
            Some(v) => (v, rest),
            None => {
                return err(format!(
                    "unknown route command \"{first}\" (expected add, replace, del, show, flush)"
                ))
            }
        },
    };
    let mut c = RouteWords::default();
    let writes = matches!(verb, Verb::Put(_));
    let mut it = rest.iter();
    while let Some(w) = it.next() {
        let w = w.as_str();
        match w {
            "loc" | "locator" if verb != Verb::Flush => {
                take(&mut c.locator, &mut it, "loc", |s| locator(s, "loc"))?;
            }
            "csum-mode" if writes => take(&mut c.csum_mode, &mut it, w, csum_mode)?,
            "ident-type" if writes => take(&mut c.ident_type, &mut it, w, ident_type)?,
            "hook-type" if writes => take(&mut c.hook_type, &mut it, w, hook_type)?,
            "via" if writes => take(&mut c.via, &mut it, w, |a| {
                a.parse::<Ipv6Addr>()
                    .map_err(|_| SyntaxError(format!("via \"{a}\": not an IPv6 address")))
            })?,
            // (oif is dev: given twice is said of dev)
            "dev" | "oif" if writes => once(&mut c.dev, next(&mut it, w)?.to_string(), "dev")?,
            "table" => take(&mut c.table, &mut it, w, |s| Ok(s.to_string()))?,
            "to" if c.dst.is_none() && verb != Verb::Flush => {
                c.dst = Some(sir_prefix(next(&mut it, w)?)?);
            }
            _ if c.dst.is_none() && verb != Verb::Flush && !w.is_empty() => {
                c.dst = Some(sir_prefix(w)?);
            }
            _ => return err(format!("unexpected word \"{w}\"")),
        }
    }
    let table = c.table;
    Ok(match (verb, c.dst) {
        (Verb::Show, dst) => RouteCmd::Show { dst, table },
        (Verb::Flush, _) => RouteCmd::Flush { table },
        (_, None) => return err("missing the SIR prefix"),
        (Verb::Put(mode), Some(dst)) => {
            let Some(locator) = c.locator else {
                return err("missing \"loc LOCATOR\"");
            };
            RouteCmd::Put {
                mode,
                spec: RouteSpec {
                    dst,
                    locator,
                    csum_mode: c.csum_mode.unwrap_or(CsumMode::NoAction),
                    ident_type: c.ident_type.unwrap_or(IdentType::UseFormat),
                    hook_type: c.hook_type.unwrap_or(HookType::Output),
                },
                via: c.via,
                dev: c.dev,
                table,
            }
        }
        // (loc is read and checked, and means nothing to del)
        (_, Some(dst)) => RouteCmd::Del { dst, table },
    })
}

/// Parse `ila dataplane [attach|detach|show ...]` (no verb: `show`).
pub fn parse_dataplane(words: &[String]) -> Result<DpCmd, SyntaxError> {
    let Some((first, rest)) = words.split_first() else {
        return Ok(DpCmd::Show);
    };
    let mut devs = Vec::new();
    let mut mode = None;
    let mut side: Option<Sides> = None;
    let mut it = rest.iter();
    let attach = match first.as_str() {
        "attach" => true,
        "detach" => false,
        "show" | "list" | "lst" | "ls" => {
            return match rest.first() {
                None => Ok(DpCmd::Show),
                Some(w) => err(format!("unexpected word \"{w}\" (show takes none)")),
            }
        }
        w => {
            return err(format!(
                "unknown dataplane command \"{w}\" (expected attach, detach, show)"
            ))
        }
    };
    while let Some(w) = it.next() {
        match w.as_str() {
            "dev" => devs.push(next(&mut it, "dev")?.to_string()),
            m @ ("auto" | "xdp" | "xdp-generic" | "tc") if attach => {
                let v = match m {
                    "auto" => AttachMode::Auto,
                    "xdp" => AttachMode::Xdp,
                    "xdp-generic" => AttachMode::XdpGeneric,
                    _ => AttachMode::Tc,
                };
                once(&mut mode, v, "the mode")?;
            }
            "ingress" => once(&mut side, Sides::INGRESS, "ingress|egress")?,
            "egress" => once(&mut side, Sides::EGRESS, "ingress|egress")?,
            w => return err(format!("unexpected word \"{w}\"")),
        }
    }
    if devs.is_empty() {
        return err("missing \"dev DEV\"");
    }
    let sides = side.unwrap_or(Sides::BOTH);
    if attach && mode.is_some() && !sides.ingress {
        return err(
            "the mode (auto, xdp, xdp-generic, tc) is the ingress program's: not with egress",
        );
    }
    Ok(if attach {
        DpCmd::Attach {
            devs,
            mode: mode.unwrap_or(AttachMode::Auto),
            sides,
        }
    } else {
        DpCmd::Detach { devs, sides }
    })
}

#[cfg(test)]
pub(crate) use mpt_cli::args::words;

#[cfg(test)]
mod tests {
    use super::words as w;
    use super::*;

    #[test]
    fn xlat_add_as_ip_ila() {
        let loc = |s: &str| s.parse::<Locator>().expect("loc");
        let c = parse_xlat(&w(
            "add loc_match 2001:0:119:0 loc 3333:0:0:1 csum-mode neutral-map-auto ident-type use-format",
        ))
        .expect("parse");
        let key = XlatKey {
            locator_match: loc("2001:0:119:0"),
            dev: None,
        };
        assert_eq!(
            c,
            XlatCmd::Put {
                mode: Mode::Add,
                key: key.clone(),
                locator: loc("3333:0:0:1"),
                csum_mode: CsumMode::NeutralMapAuto,
                ident_type: IdentType::UseFormat,
            }
        );
        // prefixes of keywords, as matches(): "loc" is loc, "loc_" is loc_match
        let c = parse_xlat(&w("replace loc_ 2001:0:119:0 l 3333:0:0:1 d eth0")).expect("short");
        assert_eq!(
            c,
            XlatCmd::Put {
                mode: Mode::Replace,
                key: XlatKey {
                    dev: Some("eth0".into()),
                    ..key.clone()
                },
                locator: loc("3333:0:0:1"),
                csum_mode: CsumMode::NoAction,
                ident_type: IdentType::UseFormat,
            }
        );
        assert_eq!(c.verb().name(), "replace");
        assert_eq!(
            parse_xlat(&w("del loc_match 2001:0:119:0 loc 1:2:3:4")).expect("del"),
            XlatCmd::Del {
                key: key.clone(),
                locator: Some(loc("1:2:3:4"))
            }
        );
        assert_eq!(
            parse_xlat(&w("get loc_match 2001:0:119:0")).expect("get"),
            XlatCmd::Get(key)
        );
        // no verb: show
        assert_eq!(parse_xlat(&[]).expect("show"), XlatCmd::Show);
        assert_eq!(parse_xlat(&w("flush")).expect("flush"), XlatCmd::Flush);
    }

    #[test]
    fn route_grammar() {
        let c = parse_route(&w(
            "add 2001:db8:1:2:2000::5 loc 2001:db8:ff:1 csum-mode adj-transport hook-type input via 2001:db8:9::1 dev eth0 table 100",
        ))
        .expect("parse");
        let RouteCmd::Put {
            mode,
            spec,
            via,
            dev,
            table,
        } = &c
        else {
            panic!("not a put: {c:?}");
        };
        assert_eq!(*mode, Mode::Add);
        assert_eq!(spec.dst, "2001:db8:1:2:2000::5/128".parse().expect("net"));
        assert_eq!(spec.hook_type, HookType::Input);
        assert_eq!(spec.ident_type, IdentType::UseFormat);
        assert_eq!(*via, Some("2001:db8:9::1".parse().expect("via")));
        assert_eq!(dev.as_deref(), Some("eth0"));
        assert_eq!(table.as_deref(), Some("100"));
        let c = parse_route(&w("del 2001:db8:1:2::/64 loc 1:2:3:4")).expect("del");
        assert_eq!(c.verb(), Verb::Del);
        assert_eq!(c.dst(), Some("2001:db8:1:2::/64".parse().expect("net")));
        assert_eq!(
            parse_route(&[]).expect("show"),
            RouteCmd::Show {
                dst: None,
                table: None
            }
        );
        assert_eq!(
            parse_route(&w("flush table 7")).expect("flush").table(),
            Some("7")
        );
    }

    /// Wrong lines and a part of what each one's error says (`LINE => WORDS`).
    const WRONG: &str = r#"
        xlat add loc 1:2:3:4 => loc_match
        xlat add loc_match 1:2:3:4 => loc LOCATOR
        xlat add loc_match 1:2:3:4:5 loc 1:2:3:4 => loc_match: invalid locator "1:2:3:4:5"
        xlat add loc_match 1:2:3:4 loc 1:2:3:4 csum-mode fast => csum-mode "fast"
        xlat add loc_match 1:2:3:4 loc 1:2:3:4 ident-type iid => ident-type
        xlat show all => unexpected word "all"
        xlat frob => unknown xlat command
        xlat del loc_match 1:2:3:4 csum-mode no-action => unexpected word
        xlat add loc_match 1:2:3:4 loc_match 1:2:3:5 loc 1:1:1:1 => twice
        xlat add loc_match => needs a value
        xlat get loc_match 1:2:3:4 loc 1:2:3:4 => get takes loc_match and dev only
        route add 2001:db8:1:2::1/64 loc 1:2:3:4 => host bits
        route add 10.0.0.0/8 loc 1:2:3:4 => not an IPv6 prefix
        route add 2001:db8::/64 => loc LOCATOR
        route add loc 1:2:3:4 => SIR prefix
        route add 2001:db8::/64 loc 1:2:3:4 hook-type sideways => hook-type
        route flush 2001:db8::/64 => unexpected word
        route get 2001:db8::/64 => unknown route command
    "#;

    #[test]
    fn errors_name_the_word() {
        for case in WRONG.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let (line, want) = case.split_once(" => ").expect("LINE => WORDS");
            let words = w(line);
            let e = match words.split_first() {
                Some((o, rest)) if o == "xlat" => parse_xlat(rest).map(|_| ()),
                Some((_, rest)) => parse_route(rest).map(|_| ()),
                None => Ok(()),
            };
            let e = e.expect_err(line).0;
            assert!(e.contains(want), "{line}: {e:?} does not say {want:?}");
        }
    }

    #[test]
    fn dataplane_grammar() {
        assert_eq!(
            parse_dataplane(&w("attach dev a dev b xdp")).expect("attach"),
            DpCmd::Attach {
                devs: vec!["a".into(), "b".into()],
                mode: AttachMode::Xdp,
                sides: Sides::BOTH
            }
        );
        assert_eq!(
            parse_dataplane(&w("attach dev a")).expect("auto"),
            DpCmd::Attach {
                devs: vec!["a".into()],
                mode: AttachMode::Auto,
                sides: Sides::BOTH
            }
        );
        assert!(matches!(
            parse_dataplane(&w("attach dev a egress")).expect("egress"),
            DpCmd::Attach {
                sides: Sides::EGRESS,
                ..
            }
        ));
        assert!(parse_dataplane(&w("attach dev a xdp egress")).is_err());
        assert!(parse_dataplane(&w("attach dev a ingress egress")).is_err());
        assert_eq!(parse_dataplane(&[]).expect("show"), DpCmd::Show);
        assert!(parse_dataplane(&w("attach")).is_err());
        assert!(parse_dataplane(&w("detach dev a tc")).is_err());
        assert_eq!(
            parse_dataplane(&w("detach dev a ingress")).expect("detach"),
            DpCmd::Detach {
                devs: vec!["a".into()],
                sides: Sides::INGRESS
            }
        );
    }
}

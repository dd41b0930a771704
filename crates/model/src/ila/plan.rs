//! The put rule of both tables, once for every implementation (the kernel's module, the BPF
//! translator's maps, the dry run's copy): from what is there now and what is asked for, what
//! a write does. Pure: the caller reads what is there, and carries the outcome out.
//!
//! - an add of a key that exists is refused (`EEXIST`), whatever its values;
//! - a replace (or an add of a new key) with the values the entry has already changes nothing;
//! - otherwise the entry is written, as new or over the old one.
//!
//! A route's key is its SIR prefix in its table; the BPF translator's table is one per
//! namespace, so there a prefix that is in another table is refused too ([`put_route`]).

use super::RouteEntry;

/// How a put treats an entry with the same key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `add`: only a new key.
    Add,
    /// `replace`: a new key, or over the old entry.
    Replace,
}

impl Mode {
    /// `replace` if `replace`, else `add`.
    pub const fn of(replace: bool) -> Mode {
        if replace {
            Mode::Replace
        } else {
            Mode::Add
        }
    }

    /// The command-line word.
    pub const fn name(self) -> &'static str {
        match self {
            Mode::Add => "add",
            Mode::Replace => "replace",
        }
    }
}

/// The write a put makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// A new entry.
    Added,
    /// Over an entry with other values.
    Replaced,
}

/// Why a put is refused. Both are the kernel's `EEXIST`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// An add of a key that exists.
    Exists,
    /// The BPF translator's one table per namespace: the prefix is in this other table.
    InTable(u32),
}

impl Refusal {
    /// The kernel's errno for it, by name.
    pub const fn errno_name(self) -> &'static str {
        "EEXIST"
    }
}

/// What a put does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The entry is there as asked: nothing to write.
    Unchanged,
    /// Nothing is written: the command fails.
    Refuse(Refusal),
    /// Write the entry.
    Write(Write),
}

/// The put rule: `existing` is the entry with `new`'s key, if any.
pub fn put<T: PartialEq>(existing: Option<&T>, new: &T, mode: Mode) -> Outcome {
    match (existing, mode) {
        (Some(_), Mode::Add) => Outcome::Refuse(Refusal::Exists),
        (Some(o), Mode::Replace) if o == new => Outcome::Unchanged,
        (Some(_), Mode::Replace) => Outcome::Write(Write::Replaced),
        (None, _) => Outcome::Write(Write::Added),
    }
}

/// The put rule of a route: `existing` is the route for `new`'s prefix (in its table; for the
/// BPF translator, in any table). One in another table is refused before the rest of the rule.
pub fn put_route(existing: Option<&RouteEntry>, new: &RouteEntry, mode: Mode) -> Outcome {
    match existing {
        Some(o) if o.table != new.table => Outcome::Refuse(Refusal::InTable(o.table)),
        _ => put(existing, new, mode),
    }
}

/// The route for `dst` among `routes`: in `table`, or (`None`) in whichever table it is (the
/// first found).
pub fn find_route(
    routes: impl IntoIterator<Item = RouteEntry>,
    dst: ipnet::Ipv6Net,
    table: Option<u32>,
) -> Option<RouteEntry> {
    routes
        .into_iter()
        .find(|o| o.spec.dst == dst && table.is_none_or(|t| t == o.table))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ila::{CsumMode, HookType, IdentType, Mapping, RouteSpec};

    fn m(l: &str) -> Mapping {
        Mapping {
            locator_match: "2001:0:119:0".parse().expect("loc"),
            locator: l.parse().expect("loc"),
            ifindex: 0,
            csum_mode: CsumMode::NoAction,
            ident_type: IdentType::UseFormat,
        }
    }

    fn r(table: u32, via: Option<&str>) -> RouteEntry {
        RouteEntry {
            spec: RouteSpec {
                dst: "2001:db8::1/128".parse().expect("net"),
                locator: "1:2:3:4".parse().expect("loc"),
                csum_mode: CsumMode::NoAction,
                ident_type: IdentType::Luid,
                hook_type: HookType::Output,
            },
            via: via.map(|v| v.parse().expect("via")),
            ifindex: 0,
            table,
        }
    }

    #[test]
    fn the_put_rule() {
        let (a, b) = (m("1:1:1:1"), m("2:2:2:2"));
        assert_eq!(put(None, &a, Mode::Add), Outcome::Write(Write::Added));
        assert_eq!(put(None, &a, Mode::Replace), Outcome::Write(Write::Added));
        // an add of an existing key is refused, with the same values or not
        assert_eq!(
            put(Some(&a), &a, Mode::Add),
            Outcome::Refuse(Refusal::Exists)
        );
        assert_eq!(
            put(Some(&a), &b, Mode::Add),
            Outcome::Refuse(Refusal::Exists)
        );
        assert_eq!(put(Some(&a), &a, Mode::Replace), Outcome::Unchanged);
        assert_eq!(
            put(Some(&a), &b, Mode::Replace),
            Outcome::Write(Write::Replaced)
        );
        assert_eq!(Refusal::Exists.errno_name(), "EEXIST");
    }

    #[test]
    fn a_route_in_another_table_is_refused_first() {
        let main = r(254, None);
        assert_eq!(
            put_route(Some(&r(100, None)), &main, Mode::Replace),
            Outcome::Refuse(Refusal::InTable(100))
        );
        assert_eq!(
            put_route(Some(&main), &main, Mode::Replace),
            Outcome::Unchanged
        );
        assert_eq!(
            put_route(Some(&main), &r(254, Some("2001:db8::9")), Mode::Replace),
            Outcome::Write(Write::Replaced)
        );
        assert_eq!(
            put_route(Some(&main), &main, Mode::Add),
            Outcome::Refuse(Refusal::Exists)
        );
        assert_eq!(
            put_route(None, &main, Mode::Add),
            Outcome::Write(Write::Added)
        );
    }

    #[test]
    fn finding_a_route() {
        let all = [r(100, None), r(254, None)];
        let dst = all[0].spec.dst;
        assert_eq!(find_route(all, dst, Some(254)).map(|o| o.table), Some(254));
        assert_eq!(find_route(all, dst, None).map(|o| o.table), Some(100));
        assert_eq!(find_route(all, dst, Some(7)), None);
    }
}

//! Names iproute2 gives to numbers: tables, protocols, scopes, route types. The built-in names
//! are fixed here; the files under `/etc/iproute2/` are read by the cli crate and parsed by
//! [`parse_id_file`].

/// `RT_TABLE_MAIN`.
pub const RT_TABLE_MAIN: u32 = 254;
/// `RT_TABLE_LOCAL`.
pub const RT_TABLE_LOCAL: u32 = 255;
/// `RT_TABLE_DEFAULT`.
pub const RT_TABLE_DEFAULT: u32 = 253;

const TABLES: &[(u32, &str)] = &[
    (RT_TABLE_DEFAULT, "default"),
    (RT_TABLE_MAIN, "main"),
    (RT_TABLE_LOCAL, "local"),
];

const PROTOS: &[(u8, &str)] = &[
    (0, "unspec"),
    (1, "redirect"),
    (2, "kernel"),
    (3, "boot"),
    (4, "static"),
    (8, "gated"),
    (9, "ra"),
    (10, "mrt"),
    (11, "zebra"),
    (12, "bird"),
    (13, "dnrouted"),
    (14, "xorp"),
    (15, "ntk"),
    (16, "dhcp"),
    (17, "mrouted"),
    (18, "keepalived"),
    (42, "babel"),
    (84, "ovn"),
    (99, "openr"),
    (186, "bgp"),
    (187, "isis"),
    (188, "ospf"),
    (189, "rip"),
    (192, "eigrp"),
    (crate::MPROUTE_PROTO, crate::MPROUTE_PROTO_NAME),
    (crate::ILA_PROTO, crate::ILA_PROTO_NAME),
];

/// Built-in name of a table, or its number.
pub fn table_name(id: u32) -> String {
    TABLES
        .iter()
        .find(|(n, _)| *n == id)
        .map_or_else(|| id.to_string(), |(_, s)| (*s).to_string())
}

/// Built-in table id for a name or number (`all` is not a table).
pub fn table_id(s: &str) -> Option<u32> {
    TABLES
        .iter()
        .find(|(_, n)| *n == s)
        .map(|(id, _)| *id)
        .or_else(|| s.parse().ok())
}

/// Built-in name of a protocol, or its number.
pub fn proto_name(id: u8) -> String {
    PROTOS
        .iter()
        .find(|(n, _)| *n == id)
        .map_or_else(|| id.to_string(), |(_, s)| (*s).to_string())
}

/// Built-in protocol number for a name or number.
pub fn proto_id(s: &str) -> Option<u8> {
    PROTOS
        .iter()
        .find(|(_, n)| *n == s)
        .map(|(id, _)| *id)
        .or_else(|| parse_num(s).and_then(|v| u8::try_from(v).ok()))
}

/// iproute2's scope names.
pub fn scope_name(s: u8) -> String {
    match s {
        0 => "global".into(),
        200 => "site".into(),
        253 => "link".into(),
        254 => "host".into(),
        255 => "nowhere".into(),
        n => n.to_string(),
    }
}

/// iproute2's route type names.
pub fn rtype_name(t: u8) -> String {
    const N: [&str; 12] = [
        "none",
        "unicast",
        "local",
        "broadcast",
        "anycast",
        "multicast",
        "blackhole",
        "unreachable",
        "prohibit",
        "throw",
        "nat",
        "xresolve",
    ];
    N.get(usize::from(t))
        .map_or_else(|| t.to_string(), |s| (*s).to_string())
}

/// Decimal or `0x` hexadecimal, as iproute2's `get_unsigned` accepts.
pub fn parse_num(s: &str) -> Option<u32> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u32::from_str_radix(h, 16).ok()
    } else if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        None
    } else {
        s.parse().ok()
    }
}

/// Parse an iproute2 id file (`rt_tables`, `rt_protos`, their `.d/*.conf`): lines of
/// `NUMBER NAME`, `#` comments, blank lines. Malformed lines are skipped as iproute2 does.
pub fn parse_id_file(content: &str) -> Vec<(u32, String)> {
    content
        .lines()
        .filter_map(|l| {
            let l = l.split('#').next().unwrap_or("").trim();
            let mut it = l.split_whitespace();
            let id = parse_num(it.next()?)?;
            let name = it.next()?;
            Some((id, name.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins() {
        assert_eq!(table_id("main"), Some(254));
        assert_eq!(table_id("100"), Some(100));
        assert_eq!(table_id("nope"), None);
        assert_eq!(table_name(254), "main");
        assert_eq!(table_name(1000), "1000");
        assert_eq!(proto_id("boot"), Some(3));
        assert_eq!(proto_id("mproute"), Some(crate::MPROUTE_PROTO));
        assert_eq!(proto_id("0x10"), Some(16));
        assert_eq!(proto_id("300"), None);
        assert_eq!(proto_name(186), "bgp");
        assert_eq!(scope_name(253), "link");
        assert_eq!(rtype_name(1), "unicast");
    }

    #[test]
    fn id_file() {
        let f = "# comment\n\n245\tmproute\n0x10 dhcp # x\nbad line\n7\n";
        assert_eq!(
            parse_id_file(f),
            vec![(245, "mproute".into()), (16, "dhcp".into())]
        );
    }
}

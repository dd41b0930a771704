//! What mproute's completion offers after each verb (`mproute --complete -- WORDS...`, see
//! `mpt_cli::complete`): the keywords of [`crate::grammar`], one table per verb, and what each
//! keyword's value can be. The verbs themselves and the options come from clap; a test holds
//! these names to the clap definition.

use mpt_cli::complete::{Grammar, Key, Node, Value};

const ALGOS: Value = Value::Words(&[
    "l3-hash",
    "l4-hash",
    "per-packet",
    "drr",
    "random",
    "wrandom",
]);
const ON_OFF: Value = Value::Words(&["on", "off"]);

/// `add`, `replace`, `append`, `change`: the route and its nexthops.
const ROUTE_KEYS: &[Key] = &[
    Key::once("table", Value::Table),
    Key::once("metric", Value::Any),
    Key::once("proto", Value::Proto),
    Key::once("algo", ALGOS),
    Key::flag("resilient"),
    Key::once("buckets", Value::Any),
    Key::once("idle-timer", Value::Any),
    Key::flag("consistent"),
    Key::once("table-size", Value::Any),
    Key::once("hash-fields", Value::Any),
    Key::once("seed", Value::Any),
    Key::flags("nexthop"),
    Key::many("via", Value::Any),
    Key::many("dev", Value::Device),
    Key::many("weight", Value::Any),
    Key::flags("onlink"),
];

const ADD: Node = Node::verb(&["add"], ROUTE_KEYS);
const REPLACE: Node = Node::verb(&["replace"], ROUTE_KEYS);
const APPEND: Node = Node::verb(&["append"], ROUTE_KEYS);
const CHANGE: Node = Node::verb(&["change", "chg"], ROUTE_KEYS);
const DEL: Node = Node::verb(
    &["del", "delete"],
    &[
        Key::once("table", Value::Table),
        Key::once("metric", Value::Any),
    ],
);
/// ip route show's SELECTOR, as `show` and `flush` take it.
macro_rules! selector {
    ($($extra:expr),*) => {
        &[
            Key::once("table", Value::TableOrAll),
            $($extra,)*
            Key::once("to", Value::Any),
            Key::once("root", Value::Any),
            Key::once("match", Value::Any),
            Key::once("exact", Value::Any),
            Key::once("proto", Value::Proto),
            Key::once("dev", Value::Device),
            Key::once("via", Value::Any),
            Key::once("metric", Value::Any),
            Key::once("scope", Value::Words(&["global", "link", "host", "nowhere", "all"])),
            Key::once(
                "type",
                Value::Words(&[
                    "unicast",
                    "local",
                    "broadcast",
                    "multicast",
                    "blackhole",
                    "unreachable",
                    "prohibit",
                    "throw",
                ]),
            ),
        ]
    };
}
const SHOW: Node = Node::verb(
    &["show", "list", "ls", "lst"],
    selector!(Key::once("algo", ALGOS)),
);
const FLUSH: Node = Node::verb(&["flush"], selector!());
const SYNC: Node = Node::verb(&["sync"], &[Key::flag("--reset")]);
const GET: Node = Node::verb(
    &["get"],
    &[
        Key::once("from", Value::Any),
        Key::once("ipproto", Value::Words(&["tcp", "udp", "sctp", "icmp"])),
        Key::once("sport", Value::Any),
        Key::once("dport", Value::Any),
        Key::once("iif", Value::Device),
        Key::once("table", Value::Table),
    ],
);
const DATAPLANE: Node = Node::object(
    &["dataplane", "dp"],
    &[
        Node::verb(
            &["attach"],
            &[
                Key::many("dev", Value::Device),
                Key::flag("auto"),
                Key::flag("xdp"),
                Key::flag("xdp-generic"),
                Key::flag("tc"),
                Key::once("fastpath", ON_OFF),
                Key::once("peer", ON_OFF),
                Key::flag("prepare-peers"),
            ],
        ),
        Node::verb(&["detach"], &[Key::many("dev", Value::Device)]),
        Node::verb(&["show", "list", "ls"], &[]),
        Node::verb(&["watch"], &[]),
    ],
);

/// The route verbs, also after iproute2's object word (`mproute route add ...`).
const ROUTE_VERBS: &[Node] = &[ADD, REPLACE, APPEND, CHANGE, DEL, SHOW, FLUSH, SYNC, GET];

/// mproute's keyword tables.
pub const GRAMMAR: Grammar = Grammar {
    commands: &[
        ADD,
        REPLACE,
        APPEND,
        CHANGE,
        DEL,
        SHOW,
        FLUSH,
        SYNC,
        GET,
        DATAPLANE,
        Node::object(&["route"], ROUTE_VERBS),
    ],
};

#[cfg(test)]
mod tests {
    use mpt_cli::complete::{candidates, System};

    /// A system with one namespace and fixed devices and names.
    struct Fixed;
    impl System for Fixed {
        fn devices(&self, netns: Option<&str>) -> Vec<String> {
            match netns {
                Some("blue") => vec!["lo".into(), "va".into(), "vb".into()],
                _ => vec!["eth0".into(), "lo".into()],
            }
        }
        fn namespaces(&self) -> Vec<String> {
            vec!["blue".into()]
        }
        fn tables(&self) -> Vec<String> {
            vec!["main".into(), "local".into(), "default".into()]
        }
        fn protos(&self) -> Vec<String> {
            vec!["kernel".into(), "static".into(), "mproute".into()]
        }
        fn files(&self, _: &str) -> Vec<String> {
            Vec::new()
        }
    }

    fn c(line: &str) -> Vec<String> {
        let cmd = <crate::Cli as clap::CommandFactory>::command();
        let words: Vec<String> = line.split(' ').map(str::to_string).collect();
        candidates(&cmd, &super::GRAMMAR, &Fixed, &words)
    }

    #[test]
    fn verbs_then_keywords_then_values() {
        let verbs = c("");
        for v in ["add", "show", "sync", "dataplane", "route"] {
            assert!(verbs.iter().any(|x| x == v), "{v} in {verbs:?}");
        }
        assert_eq!(c("dataplane "), ["attach", "detach", "show", "watch"]);
        assert_eq!(
            c("add 10.0.0.0/8 algo "),
            [
                "l3-hash",
                "l4-hash",
                "per-packet",
                "drr",
                "random",
                "wrandom"
            ]
        );
        assert_eq!(
            c("dp attach dev va "),
            [
                "dev",
                "auto",
                "xdp",
                "xdp-generic",
                "tc",
                "fastpath",
                "peer",
                "prepare-peers"
            ]
        );
        assert_eq!(c("dataplane attach dev va fastpath "), ["on", "off"]);
        assert_eq!(c("-n blue dataplane attach dev "), ["lo", "va", "vb"]);
        assert_eq!(c("-n "), ["blue"]);
        assert_eq!(c("show table "), ["main", "local", "default", "all"]);
        assert_eq!(c("add 10/8 proto m"), ["mproute"]);
        assert_eq!(c("route a"), ["add", "append"]);
        assert_eq!(c("sync "), ["--reset"]);
        assert_eq!(c("get 10.1.2.3 ipproto "), ["tcp", "udp", "sctp", "icmp"]);
    }

    #[test]
    fn a_nexthop_takes_its_keywords_again() {
        assert_eq!(
            c("add 10/8 algo drr nexthop via 192.0.2.1 dev eth0 weight 2 nexthop "),
            [
                "table",
                "metric",
                "proto",
                "resilient",
                "buckets",
                "idle-timer",
                "consistent",
                "table-size",
                "hash-fields",
                "seed",
                "nexthop",
                "via",
                "dev",
                "weight",
                "onlink"
            ]
        );
    }
}

//! What ila's completion offers after each object and verb (`ila --complete -- WORDS...`, see
//! `mpt_cli::complete`): the keywords of [`crate::grammar`], one table per verb, and what each
//! keyword's value can be. The objects and the options come from clap; a test holds these
//! names to the clap definition.

use mpt_cli::complete::{Grammar, Key, Node, Value};

const CSUM_MODES: Value = Value::Words(&[
    "adj-transport",
    "neutral-map",
    "neutral-map-auto",
    "no-action",
]);
const IDENT_TYPES: Value = Value::Words(&["luid", "use-format"]);

const XLAT_PUT: &[Key] = &[
    Key::once("loc_match", Value::Any),
    Key::once("loc", Value::Any),
    Key::once("dev", Value::Device),
    Key::once("csum-mode", CSUM_MODES),
    Key::once("ident-type", IDENT_TYPES),
];
const XLAT_MATCH: &[Key] = &[
    Key::once("loc_match", Value::Any),
    Key::once("loc", Value::Any),
    Key::once("dev", Value::Device),
];

const XLAT: Node = Node::object(
    &["xlat"],
    &[
        Node::verb(&["add"], XLAT_PUT),
        Node::verb(&["replace"], XLAT_PUT),
        Node::verb(&["del", "delete"], XLAT_MATCH),
        Node::verb(
            &["get"],
            &[
                Key::once("loc_match", Value::Any),
                Key::once("dev", Value::Device),
            ],
        ),
        Node::verb(&["show", "list", "lst", "ls"], &[]),
        Node::verb(&["flush"], &[]),
    ],
);

const ROUTE_PUT: &[Key] = &[
    Key::once("loc", Value::Any),
    Key::once("csum-mode", CSUM_MODES),
    Key::once("ident-type", IDENT_TYPES),
    Key::once("hook-type", Value::Words(&["output", "input"])),
    Key::once("via", Value::Any),
    Key::once("dev", Value::Device),
    Key::once("table", Value::Table),
];
const ROUTE_TABLE: &[Key] = &[Key::once("table", Value::Table)];

const ROUTE: Node = Node::object(
    &["route"],
    &[
        Node::verb(&["add"], ROUTE_PUT),
        Node::verb(&["replace"], ROUTE_PUT),
        Node::verb(&["del", "delete"], ROUTE_TABLE),
        Node::verb(&["show", "list", "lst", "ls"], ROUTE_TABLE),
        Node::verb(&["flush"], ROUTE_TABLE),
    ],
);

const MODES_AND_SIDES: &[Key] = &[
    Key::many("dev", Value::Device),
    Key::flag("auto"),
    Key::flag("xdp"),
    Key::flag("xdp-generic"),
    Key::flag("tc"),
    Key::flag("ingress"),
    Key::flag("egress"),
];

const DATAPLANE: Node = Node::object(
    &["dataplane", "dp"],
    &[
        Node::verb(&["attach"], MODES_AND_SIDES),
        Node::verb(
            &["detach"],
            &[
                Key::many("dev", Value::Device),
                Key::flag("ingress"),
                Key::flag("egress"),
            ],
        ),
        Node::verb(&["show", "list", "ls"], &[]),
    ],
);

/// ila's keyword tables.
pub const GRAMMAR: Grammar = Grammar {
    commands: &[XLAT, ROUTE, DATAPLANE],
};

#[cfg(test)]
mod tests {
    use mpt_cli::complete::{candidates, System};

    struct Fixed;
    impl System for Fixed {
        fn devices(&self, _: Option<&str>) -> Vec<String> {
            vec!["eth0".into(), "lo".into()]
        }
        fn namespaces(&self) -> Vec<String> {
            vec!["blue".into()]
        }
        fn tables(&self) -> Vec<String> {
            vec!["main".into()]
        }
        fn protos(&self) -> Vec<String> {
            Vec::new()
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
    fn objects_verbs_keywords_values() {
        assert_eq!(c(""), ["xlat", "route", "dataplane", "metrics", "save"]);
        assert_eq!(
            c("xlat "),
            ["add", "replace", "del", "get", "show", "flush"]
        );
        assert_eq!(
            c("xlat add loc_match 2001:0:119:0 loc 3333:0:0:1 csum-mode "),
            [
                "adj-transport",
                "neutral-map",
                "neutral-map-auto",
                "no-action"
            ]
        );
        assert_eq!(c("route add 3333::/64 hook-type "), ["output", "input"]);
        assert_eq!(c("dp attach dev "), ["eth0", "lo"]);
        assert_eq!(c("--backend "), ["auto", "kernel", "bpf"]);
    }
}

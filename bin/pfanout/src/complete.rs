//! What pfanout's completion offers after each command (`pfanout --complete -- WORDS...`, see
//! `mpt_cli::complete`): the keywords of [`crate::grammar`], one table per command, and what
//! each keyword's value can be. The commands and the options come from clap; a test holds
//! these names to the clap definition.

use mpt_cli::complete::{Grammar, Key, Node, Value};

const MODES: Value = Value::Words(&["hash", "lb", "cpu", "rollover", "rnd", "qm", "cbpf", "ebpf"]);
// (flags is a comma-separated list: the single flags are offered)
const FLAGS: Value = Value::Words(&["rollover", "defrag", "uniqueid", "ignore-outgoing"]);

const SHOW: Node = Node::verb(
    &["show", "list"],
    &[
        Key::once("dev", Value::Device),
        Key::once("group", Value::Any),
    ],
);
const RUN: Node = Node::verb(
    &["run"],
    &[
        Key::once("dev", Value::Device),
        Key::once("group", Value::Any),
        Key::once("mode", MODES),
        Key::once("flags", FLAGS),
        Key::once("workers", Value::Any),
        Key::flag("ring"),
        Key::once("write", Value::File),
        Key::once("exec", Value::Any),
        Key::once("duration", Value::Any),
        Key::once("count", Value::Any),
        Key::once("per-worker", Value::Any),
        Key::once("max-members", Value::Any),
        Key::once("proto", Value::Words(&["all", "ip", "ipv6", "arp"])),
        Key::once("rcvbuf", Value::Any),
    ],
);
const BENCH: Node = Node::verb(
    &["bench"],
    &[
        Key::once("workers", Value::Any),
        Key::once("rate", Value::Any),
        Key::once("per-worker", Value::Any),
        Key::once("seconds", Value::Any),
        Key::once("flows", Value::Any),
    ],
);

/// pfanout's keyword tables.
pub const GRAMMAR: Grammar = Grammar {
    commands: &[SHOW, RUN, BENCH],
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
            Vec::new()
        }
        fn tables(&self) -> Vec<String> {
            Vec::new()
        }
        fn protos(&self) -> Vec<String> {
            Vec::new()
        }
        fn files(&self, prefix: &str) -> Vec<String> {
            vec![format!("{prefix}cap/")]
        }
    }

    fn c(line: &str) -> Vec<String> {
        let cmd = <crate::Cli as clap::CommandFactory>::command();
        let words: Vec<String> = line.split(' ').map(str::to_string).collect();
        candidates(&cmd, &super::GRAMMAR, &Fixed, &words)
    }

    #[test]
    fn commands_keywords_values() {
        assert_eq!(c(""), ["show", "run", "bench", "metrics"]);
        assert_eq!(c("run dev eth0 mode h"), ["hash"]);
        assert_eq!(c("run dev "), ["eth0", "lo"]);
        assert_eq!(c("run dev eth0 write /tmp/"), ["/tmp/cap/"]);
        assert_eq!(
            c("bench workers 4 "),
            ["rate", "per-worker", "seconds", "flows"]
        );
    }
}

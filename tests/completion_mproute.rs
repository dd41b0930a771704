//! mproute's generated completion scripts, driven in bash, zsh and fish against the real
//! binary: the next word after a verb, a keyword, `-n` (the namespaces of /run/netns, a
//! throwaway one among them, against `ip netns list`) and `dev` (the devices of the namespace
//! `-n` names, against `ip -j link show` there). Needs root for the namespaces; it fails, it
//! does not skip, without it.

#[path = "completion_shells.rs"]
mod shells;

use mpt_testkit::{require_root, veth, Netns};

const BIN: &str = env!("CARGO_BIN_EXE_mproute");

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn verbs_keywords_and_values_in_bash_zsh_and_fish() {
    let dp = ["attach", "detach", "show", "watch"];
    assert_eq!(
        shells::bash("mproute", BIN, &["mproute", "dataplane", ""]),
        dp
    );
    assert_eq!(
        shells::zsh("mproute", BIN, &["mproute", "dataplane", ""]),
        dp
    );
    assert_eq!(
        sorted(shells::fish("mproute", BIN, "mproute dataplane ")),
        sorted(dp.map(String::from).to_vec())
    );
    // the words before are read as mproute reads them: ip's abbreviations and spelling
    assert_eq!(shells::bash("mproute", BIN, &["mproute", "da", ""]), dp);
    assert_eq!(
        shells::bash("mproute", BIN, &["mproute", "-json", "dp", ""]),
        dp
    );
    let shown = shells::bash("mproute", BIN, &["mproute", "ro", "sh", ""]);
    assert!(
        shown.iter().any(|w| w == "proto") && shown.iter().any(|w| w == "exact"),
        "route show's selector after ro sh: {shown:?}"
    );

    let algos = [
        "l3-hash",
        "l4-hash",
        "per-packet",
        "drr",
        "random",
        "wrandom",
    ];
    let add = ["mproute", "add", "10.0.0.0/8", "algo", ""];
    assert_eq!(shells::bash("mproute", BIN, &add), algos);
    assert_eq!(shells::zsh("mproute", BIN, &add), algos);
    assert_eq!(
        sorted(shells::fish("mproute", BIN, "mproute add 10.0.0.0/8 algo ")),
        sorted(algos.map(String::from).to_vec())
    );

    // a prefix narrows; modes and on/off after attach
    assert_eq!(
        shells::bash(
            "mproute",
            BIN,
            &["mproute", "dataplane", "attach", "dev", "x", "xdp"]
        ),
        ["xdp", "xdp-generic"]
    );
    assert_eq!(
        shells::bash(
            "mproute",
            BIN,
            &["mproute", "dp", "attach", "dev", "x", "peer", ""]
        ),
        ["on", "off"]
    );
    // the verbs, from the first word on
    let verbs = shells::bash("mproute", BIN, &["mproute", ""]);
    for v in [
        "add",
        "replace",
        "del",
        "show",
        "flush",
        "sync",
        "get",
        "dataplane",
    ] {
        assert!(verbs.iter().any(|x| x == v), "{v} not in {verbs:?}");
    }
    assert_eq!(shells::bash("mproute", BIN, &["mproute", "sy"]), ["sync"]);
    assert_eq!(
        shells::bash("mproute", BIN, &["mproute", "sync", ""]),
        ["--reset"]
    );
}

#[test]
fn namespaces_after_n_and_devices_of_that_namespace_after_dev() {
    require_root();
    let a = Netns::new("cpa");
    let b = Netns::new("cpb");
    veth(&a, "cva", &b, "cvb");

    // -n: what ip netns list lists (the oracle), our throwaway one among them
    let listed = String::from_utf8_lossy(
        &std::process::Command::new("ip")
            .args(["netns", "list"])
            .output()
            .expect("ip netns list")
            .stdout,
    )
    .lines()
    .filter_map(|l| l.split_whitespace().next().map(str::to_string))
    .collect::<Vec<_>>();
    let offered = shells::bash("mproute", BIN, &["mproute", "-n", ""]);
    assert!(
        offered.iter().any(|n| n == a.name()),
        "{} not in {offered:?}",
        a.name()
    );
    assert_eq!(sorted(offered), sorted(listed.clone()));
    let offered = shells::bash("mproute", BIN, &["mproute", "--netns", a.name()]);
    assert_eq!(offered, [a.name()]);
    assert_eq!(
        shells::zsh("mproute", BIN, &["mproute", "-j", "-n", a.name()]),
        [a.name()]
    );

    // dev: the devices of namespace a, as ip -j link show lists them there
    let links: Vec<String> = a
        .ip_json(&["link", "show"])
        .as_array()
        .expect("ip -j link show: a list")
        .iter()
        .filter_map(|l| l["ifname"].as_str().map(str::to_string))
        .collect();
    assert_eq!(sorted(links.clone()), ["cva", "lo"]);
    let words = ["mproute", "-n", a.name(), "dataplane", "attach", "dev", ""];
    assert_eq!(
        sorted(shells::bash("mproute", BIN, &words)),
        sorted(links.clone())
    );
    assert_eq!(sorted(shells::zsh("mproute", BIN, &words)), sorted(links));
    let words = [
        "mproute",
        "-n",
        b.name(),
        "add",
        "198.18.0.0/15",
        "nexthop",
        "via",
        "192.0.2.1",
        "dev",
        "c",
    ];
    assert_eq!(shells::bash("mproute", BIN, &words), ["cvb"]);
    let line = format!(
        "mproute -n {} add 198.18.0.0/15 via 192.0.2.1 dev c",
        b.name()
    );
    assert_eq!(shells::fish("mproute", BIN, &line), ["cvb"]);
    // a namespace that is not there: nothing, not the caller's devices
    let words = [
        "mproute",
        "-n",
        "mpt-no-such-ns",
        "dataplane",
        "detach",
        "dev",
        "",
    ];
    assert_eq!(shells::bash("mproute", BIN, &words), Vec::<String>::new());
}

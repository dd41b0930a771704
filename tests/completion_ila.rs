//! ila's generated completion scripts, driven in bash, zsh and fish against the real binary.

#[path = "completion_shells.rs"]
mod shells;

const BIN: &str = env!("CARGO_BIN_EXE_ila");

#[test]
fn objects_verbs_and_checksum_modes() {
    let objects = ["xlat", "route", "dataplane", "metrics", "save"];
    assert_eq!(shells::bash("ila", BIN, &["ila", ""]), objects);
    assert_eq!(shells::zsh("ila", BIN, &["ila", ""]), objects);
    let modes = [
        "adj-transport",
        "neutral-map",
        "neutral-map-auto",
        "no-action",
    ];
    let words = [
        "ila",
        "xlat",
        "add",
        "loc_match",
        "2001:0:119:0",
        "loc",
        "3333:0:0:1",
        "csum-mode",
        "",
    ];
    assert_eq!(shells::bash("ila", BIN, &words), modes);
    let mut fish = shells::fish(
        "ila",
        BIN,
        "ila route add 3333::/64 loc 2001:0:87:0 csum-mode neutral",
    );
    fish.sort();
    assert_eq!(fish, ["neutral-map", "neutral-map-auto"]);
    assert_eq!(
        shells::bash("ila", BIN, &["ila", "--backend", ""]),
        ["auto", "kernel", "bpf"]
    );
}

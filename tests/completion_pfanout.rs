//! pfanout's generated completion scripts, driven in bash, zsh and fish against the real binary.

#[path = "completion_shells.rs"]
mod shells;

const BIN: &str = env!("CARGO_BIN_EXE_pfanout");

#[test]
fn commands_modes_and_flags() {
    assert_eq!(
        shells::bash("pfanout", BIN, &["pfanout", ""]),
        ["show", "run", "bench", "metrics"]
    );
    let modes = ["hash", "lb", "cpu", "rollover", "rnd", "qm", "cbpf", "ebpf"];
    let words = ["pfanout", "run", "dev", "lo", "mode", ""];
    assert_eq!(shells::bash("pfanout", BIN, &words), modes);
    assert_eq!(shells::zsh("pfanout", BIN, &words), modes);
    assert_eq!(
        shells::fish("pfanout", BIN, "pfanout run dev lo mode hash flags ign"),
        ["ignore-outgoing"]
    );
}

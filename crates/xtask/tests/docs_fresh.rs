//! `cargo test` fails when man/ or completions/ are stale: run `cargo xtask gen-docs`.

use std::process::Command;

#[test]
fn man_pages_and_completions_are_fresh() -> Result<(), Box<dyn std::error::Error>> {
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("check-docs")
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "xtask check-docs failed ({}):\n{stdout}{stderr}",
        out.status
    );
    Ok(())
}

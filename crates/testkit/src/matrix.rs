//! What a test may expect of the kernel it runs on when `cargo xtask test` runs it in a kernel of
//! its matrix (`MPT_KERNEL_SERIES`: 5.10, 6.1, 6.12; unset on the host): an oracle that does not
//! ask the tools what the kernel has.

use crate::{require_root, Netns, Tool};

/// The matrix's name for the kernel this runs on (`None`: not in the matrix).
pub fn series() -> Option<String> {
    std::env::var("MPT_KERNEL_SERIES").ok()
}

/// Whether this runs in one of these kernels of the matrix.
pub fn series_in(list: &[&str]) -> bool {
    series().is_some_and(|s| list.contains(&s.as_str()))
}

/// Whether the kernel's `memlock` figure of a map (fdinfo, bpftool's `bytes_memlock`) is what
/// the map uses: from 6.4 on; the matrix's 5.10 and 6.1 charge an estimate from the capacity
/// (an LPM trie of a million entries "costs" 96 MiB there, empty).
pub fn memlock_is_usage() -> bool {
    !series_in(&["5.10", "6.1"])
}

/// On a kernel of the matrix that lacks what mproute's dataplane needs (Debian 11's 5.10:
/// global BPF functions with pointer arguments, 5.12), `dataplane attach` must refuse in one
/// line naming the release and leave nothing attached: true there, after checking it.
pub fn dataplane_refused_here(mproute: &Tool) -> bool {
    if series().as_deref() != Some("5.10") {
        return false;
    }
    require_root();
    let ns = Netns::new("old-kernel");
    ns.ip_ok(&["link", "add", "x0", "type", "veth", "peer", "name", "x1"]);
    let o = mproute.at(&ns, &["dataplane", "attach", "dev", "x0"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.lines()
            .next()
            .is_some_and(|l| l.contains("needs Linux 5.12")),
        "{err}"
    );
    assert!(mproute.json(&ns, &["dataplane", "show"])["attachments"]
        .as_array()
        .is_some_and(Vec::is_empty));
    true
}

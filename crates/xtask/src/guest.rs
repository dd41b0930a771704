//! `xtask guest`: what runs inside a kernel of the matrix ([`crate::kernels`]): the machine
//! made ready as set-up makes the host (bpffs), the demo's steps with the prebuilt tools, then
//! the chosen root tests ([`GUEST_TESTS`]) from their prebuilt executables. One `guest: ...`
//! line per part, for the host's summary; the exit code says whether all passed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result};

/// A test executable a kernel of the matrix runs, and which of its tests.
#[derive(Debug)]
pub struct GuestTests {
    /// The test target (`dp_fixtures`).
    pub name: &'static str,
    /// Full test names (run with `--exact`; none: all the executable's tests).
    pub filters: &'static [&'static str],
    /// The kernels (matrix series) that run it; empty: all.
    pub series: &'static [&'static str],
}

const ALL: &[&str] = &[];

const fn t(
    name: &'static str,
    filters: &'static [&'static str],
    series: &'static [&'static str],
) -> GuestTests {
    GuestTests {
        name,
        filters,
        series,
    }
}

/// The root tests the kernels run, besides the demo's steps (mproute's tc dataplane with every
/// algorithm and real traffic, get, detach, flush; ila's kernel backend and translator with
/// traffic seen on the wire; a fanout group run and shown). Chosen so that every feature row
/// has a real-traffic test on every kernel and each kernel's run stays near ten minutes of
/// plain emulation, some sixty times slower than this machine for these tests: the rest of
/// each suite runs on the host's kernel. Where a test is spread over the kernels (the ILA
/// byte comparison on the oldest and the newest: the kernel's ILA code is the same from 5.10
/// to 6.12), the table says so.
pub const GUEST_TESTS: &[GuestTests] = &[
    // BPF programs on crafted packets (BPF_PROG_TEST_RUN): each kernel's verifier and helpers
    t("dp_fixtures", ALL, ALL),
    t("ila_fixtures", ALL, ALL),
    t("hash_parity", ALL, ALL),
    t("pfanout_steer", ALL, ALL),
    // a fanout group's workers streaming pcap into tcpdump, a reader killed mid-run; the
    // rollover counters of another program's sockets (pidfd_getfd, 5.6+)
    t(
        "pfanout_tap",
        &[
            "exec_tcpdump_per_worker_and_a_killed_reader",
            "show_s_reads_rollover_counters_of_other_programs_or_says_why_not",
        ],
        ALL,
    ),
    t("load", ALL, ALL),
    // growable maps: a larger copy the kernel accepts as the array's element (5.15-6.1
    // compare the value layout their BTF gives)
    t("grow", ALL, ALL),
    // the state: its identity and lock, -n and ip netns exec, the tc hook in use
    t(
        "mproute_netns",
        &[
            "v4_route_agrees_with_ip_route_in_both_directions",
            "v6_route_and_ip_netns_exec_see_the_same_state",
            "two_namespaces_never_mix_state",
            "a_deleted_namespace_leaves_nothing",
            "the_tc_hook_in_use_is_the_one_reported",
        ],
        ALL,
    ),
    // the state's maps freed by ip netns del alone, reported as the kernel has them, and grown
    // (an inner hash map of another capacity: accepted since 5.10)
    t(
        "state_lifetime",
        &[
            "state_dies_with_its_namespace",
            "dataplane_show_reports_the_maps_as_the_kernel_does",
            "the_route_maps_grow_with_the_table",
        ],
        ALL,
    ),
    // the hooks the demo does not use (it runs tc), TCP through them, and resilient tables
    t(
        "fastpath_netns",
        &["tcp_data::xdp", "udp_forwarding::xdp_generic"],
        ALL,
    ),
    // the flow cache (6.2+: the ingress device from XDP) keyed by what the kernel's lookup
    // reads (its rules and multipath hash policy, read from struct net by CO-RE)
    t(
        "fastpath_netns",
        &["flow_cache_key_is_what_the_lookup_reads"],
        &["6.12"],
    ),
    t(
        "dataplane_netns",
        &["resilient_routes_move_only_the_flows_of_a_removed_nexthop"],
        ALL,
    ),
    // TCP through ila's translator in every checksum mode and hook
    t(
        "ila_netns",
        &[
            "traffic_through_the_translator_in_every_mode",
            "tables_grow_with_their_entries",
        ],
        ALL,
    ),
    // the kernel's own ILA: its tables by ila's kernel backend with TCP, on each kernel; ila's
    // translator against it byte for byte on the oldest and the newest
    t(
        "ila_kernel",
        &[
            "the_kernel_backend_drives_the_kernels_ila",
            "the_wire_carries_the_ila_address",
            "a_kernel_route_batch_dumps_the_fib_once",
        ],
        ALL,
    ),
    t(
        "ila_kernel",
        &["the_translator_matches_the_kernels_ila_byte_for_byte"],
        &["5.10", "6.12"],
    ),
    // save and -b restore the same state (the classic tc hook below 6.6, tcx above); ila's
    // on the oldest kernel
    t(
        "save_restore",
        &["save_then_batch_restores_routes_and_attachments"],
        ALL,
    ),
    t(
        "ila_save_restore",
        &["save_then_batch_restores_mappings_routes_and_attachments"],
        &["5.10"],
    ),
];

/// Run the guest's part. `tests`: a file of `NAME=PATH` lines, the prebuilt test executables.
pub fn guest(series: &str, tests: &Path) -> Result<bool> {
    let tests: Vec<String> = std::fs::read_to_string(tests)
        .with_context(|| format!("read {}", tests.display()))?
        .lines()
        .map(str::to_string)
        .collect();
    let start = Instant::now();
    println!("guest: kernel {} (matrix series {series})", release());
    prepare()?;
    let mut ok = true;
    let bin_dir = std::env::current_exe()
        .context("xtask's own path")?
        .parent()
        .map(Path::to_path_buf)
        .context("xtask's directory")?;
    let t = Instant::now();
    let demo = if std::env::var_os("MPT_GUEST_NO_DEMO").is_some() {
        println!("guest: demo: left out (MPT_GUEST_NO_DEMO)");
        Ok(())
    } else {
        crate::demo::steps(&bin_dir)
    };
    match demo {
        Ok(()) if std::env::var_os("MPT_GUEST_NO_DEMO").is_some() => {}
        Ok(()) => println!("guest: demo: ok in {:.0} s", t.elapsed().as_secs_f64()),
        Err(e) => {
            ok = false;
            println!("guest: demo: FAILED: {e:#}");
        }
    }
    let paths: Vec<(String, PathBuf)> = tests
        .iter()
        .filter_map(|s| s.split_once('='))
        .map(|(n, p)| (n.to_string(), PathBuf::from(p)))
        .collect();
    for GuestTests {
        name,
        filters,
        series: only,
    } in GUEST_TESTS
    {
        if !only.is_empty() && !only.contains(&series) {
            continue;
        }
        // (the host gives every one; a list by hand may give fewer)
        let Some((_, exe)) = paths.iter().find(|(n, _)| n == name) else {
            continue;
        };
        let t = Instant::now();
        let out = Command::new(exe)
            .args(filters.iter())
            .args(if filters.is_empty() {
                None
            } else {
                Some("--exact")
            })
            .args(["--test-threads=2"])
            .env("MPT_KERNEL_SERIES", series)
            .output()
            .with_context(|| format!("run {}", exe.display()))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let result = text
            .lines()
            .rev()
            .find(|l| l.starts_with("test result:"))
            .unwrap_or("no result")
            .to_string();
        let secs = t.elapsed().as_secs_f64();
        if out.status.success() {
            println!("guest: {name}: {result} ({secs:.0} s)");
        } else {
            ok = false;
            print!("{text}");
            print!("{}", String::from_utf8_lossy(&out.stderr));
            println!("guest: {name}: FAILED: {result} ({secs:.0} s)");
        }
    }
    println!(
        "guest: {} in {:.0} s",
        if ok { "all passed" } else { "FAILED" },
        start.elapsed().as_secs_f64()
    );
    Ok(ok)
}

fn release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

/// What set-up does on the host and a fresh guest lacks: bpffs.
fn prepare() -> Result<()> {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    if !mounts
        .lines()
        .any(|l| l.split_whitespace().nth(1) == Some("/sys/fs/bpf"))
    {
        crate::util::run(Command::new("mount").args(["-t", "bpf", "bpf", "/sys/fs/bpf"]))?;
    }
    Ok(())
}

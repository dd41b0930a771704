//! The packet-rate report: rates against kernel forwarding and the ceiling, the run time of
//! `vin`'s program, the CPU split, and one summary line per case.

use std::collections::BTreeMap;

use super::cases::{Case, Figures};
use super::{AUTO_GOAL, GOAL, USER_NOISE_PCT};
use crate::support::{median, met, spread};

/// Share of R's dataplane verdicts that went to the kernel as `no-route`, in percent.
fn no_route_pct(v: &BTreeMap<String, u64>) -> Option<f64> {
    let total: u64 = v.values().sum();
    (total > 0).then(|| v.get("no-route").copied().unwrap_or(0) as f64 * 100.0 / total as f64)
}

/// Verdicts other than `redirected` and `no-route`, for a note.
fn other_verdicts(v: &BTreeMap<String, u64>) -> String {
    v.iter()
        .filter(|(k, n)| **n > 0 && k.as_str() != "redirected" && k.as_str() != "no-route")
        .map(|(k, n)| format!("{k} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `a`'s rate over `b`'s, round by round.
fn per_round(figs: &[(Case, Figures)], a: Case, b: Case) -> Vec<f64> {
    let get = |c: Case| figs.iter().find(|(k, _)| *k == c).map(|(_, f)| &f.mpps);
    match (get(a), get(b)) {
        (Some(x), Some(y)) => x.iter().zip(y).map(|(p, q)| p / q).collect(),
        _ => Vec::new(),
    }
}

pub(super) fn print_results(
    figs: &[(Case, Figures)],
    seconds: u32,
    runs: u32,
    threads: u32,
    udp_csum: bool,
    flows: u32,
    ipv6: bool,
) -> bool {
    let med = |c: Case| {
        figs.iter()
            .find(|(k, _)| *k == c)
            .map_or(f64::NAN, |(_, f)| median(&f.mpps))
    };
    let (kernel, ceiling) = (med(Case::Kernel), med(Case::Ceiling));
    println!();
    println!(
        "Packet rate delivered at H2 (Mpps; {runs} runs × {seconds} s per case, interleaved; \
         {threads} generator thread(s); 64-byte UDP/{} {}, {} flows)",
        if ipv6 { "IPv6" } else { "IPv4" },
        if udp_csum {
            "with checksum"
        } else {
            "without checksum"
        },
        flows
    );
    println!(
        "{:<24}  {:<22}  {:>6}  {:>11}  {:>8}  {:>9}  {:>9}  {:>8}  goal",
        "case", "runs", "median", "min–max", "× kernel", "% ceiling", "offered", "no-route"
    );
    let mut all_flowed = true;
    for (case, f) in figs {
        let m = median(&f.mpps);
        all_flowed &= f.mpps.iter().all(|x| *x > 0.0);
        let ratio = m / kernel;
        let goal = if case.is_xdp() {
            format!("≥{GOAL:.1}× {}", met(ratio >= GOAL))
        } else {
            String::new()
        };
        let offered = if f.offered.is_empty() {
            "-".to_string()
        } else {
            format!("{:.3}", median(&f.offered))
        };
        let nr = no_route_pct(&f.verdicts).map_or("-".to_string(), |p| format!("{p:.1}%"));
        println!(
            "{:<24}  {:<22}  {:>6.3}  {:>11}  {:>7.2}×  {:>8.1}%  {:>9}  {:>8}  {goal}",
            case.label(),
            f.mpps
                .iter()
                .map(|x| format!("{x:.3}"))
                .collect::<Vec<_>>()
                .join(" "),
            m,
            spread(&f.mpps, 2),
            ratio,
            m * 100.0 / ceiling,
            offered,
            nr
        );
    }
    println!(
        "(offered: packets arriving at R's vin, from mpt_bench_drop/mpt_bench_pass or mproute's \
         own verdict counters; no-route: share of them mproute's dataplane passed to the kernel \
         for want of a managed route)"
    );
    for (case, f) in figs {
        let o = other_verdicts(&f.verdicts);
        if !o.is_empty() {
            println!("note: {}: other dataplane verdicts: {o}", case.label());
        }
    }

    println!();
    println!(
        "Run time of the program on R's vin, XDP or mproute's tc (one more run per case with the kernel's BPF \
         statistics on, ns per packet; the rest of a packet's time is the generator, the veths \
         and the sink)"
    );
    for (case, f) in figs {
        if let Some(ns) = f.prog_ns.first() {
            println!("  {:<24} {ns:>6.0} ns", case.label());
        }
    }

    let ncpu = std::thread::available_parallelism().map_or(1, usize::from);
    println!();
    println!("CPU split during each case's runs (/proc/stat, all {ncpu} CPUs, % of CPU time)");
    println!(
        "{:<24}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}",
        "case", "user", "system", "softirq", "idle", "other"
    );
    for (case, f) in figs {
        let [user, nice, system, idle, iowait, irq, softirq, steal] = f.cpu;
        let total = f.cpu.iter().sum::<u64>().max(1) as f64;
        let pct = |x: u64| x as f64 * 100.0 / total;
        println!(
            "{:<24}  {:>5.1}%  {:>5.1}%  {:>6.1}%  {:>5.1}%  {:>5.1}%",
            case.label(),
            pct(user + nice),
            pct(system),
            pct(softirq),
            pct(idle + iowait),
            pct(irq + steal)
        );
    }
    // The benchmark itself runs in the kernel (system, softirq); xtask sleeps meanwhile.
    for (case, f) in figs {
        let total = f.cpu.iter().sum::<u64>().max(1) as f64;
        let user = (f.cpu[0] + f.cpu[1]) as f64 * 100.0 / total;
        if user > USER_NOISE_PCT {
            println!(
                "note: {}: {user:.1}% user time: other processes shared the CPUs, its figures \
                 are disturbed",
                case.label()
            );
        }
    }

    println!();
    for (case, f) in figs {
        let m = median(&f.mpps);
        let mut line = format!("forward: {}: {m:.3} Mpps", case.label());
        match case {
            Case::Ceiling => {}
            Case::Kernel => {
                line.push_str(&format!(" ({:.1}% of the ceiling)", m * 100.0 / ceiling))
            }
            _ => {
                line.push_str(&format!(
                    " = {:.2}× kernel forwarding, {:.1}% of the ceiling",
                    m / kernel,
                    m * 100.0 / ceiling
                ));
                if (case.is_xdp() || *case == Case::XdpForward) && med(Case::Minimal).is_finite() {
                    line.push_str(&format!(
                        ", {:.0}% of the minimal forwarder",
                        m * 100.0 / med(Case::Minimal)
                    ));
                }
                if case.is_tc() && *case != Case::MinimalTc && med(Case::MinimalTc).is_finite() {
                    line.push_str(&format!(
                        ", {:.0}% of the minimal tc forwarder",
                        m * 100.0 / med(Case::MinimalTc)
                    ));
                }
                if matches!(case, Case::AutoManaged | Case::AutoUnmanaged) {
                    line.push_str(&format!(
                        " (goal ≥ {AUTO_GOAL:.1}×: {})",
                        met(m / kernel >= AUTO_GOAL)
                    ));
                }
                let peer = med(Case::XdpForward);
                if case.is_xdp() && peer.is_finite() {
                    // and each round's own ratio (the cases of one round ran back to back)
                    let rounds = per_round(figs, *case, Case::XdpForward);
                    line.push_str(&format!(
                        ", {:.2}× xdp-forward (goal ≥ 1.0×: {}; per round {}, median {:.2}×)",
                        m / peer,
                        met(m / peer >= 1.0),
                        rounds
                            .iter()
                            .map(|r| format!("{r:.2}"))
                            .collect::<Vec<_>>()
                            .join(" "),
                        median(&rounds)
                    ));
                }
                if case.is_xdp() {
                    line.push_str(&format!(
                        " (goal ≥ {GOAL:.1}×: {})",
                        met(m / kernel >= GOAL)
                    ));
                }
                if let Some(p) = no_route_pct(&f.verdicts) {
                    if p > 0.0 {
                        line.push_str(&format!(
                            "; {p:.1}% of its packets went to the kernel as no-route"
                        ));
                    }
                }
            }
        }
        println!("{line}");
    }
    all_flowed
}

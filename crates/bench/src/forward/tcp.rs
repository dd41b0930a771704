//! TCP throughput through R: one stream H1 → H2 from hosts with default offloads, kernel
//! forwarding against mproute in each mode, and the limit (the stream received in R).

use std::path::Path;

use anyhow::{Context, Result};

use super::generator::pin_this_thread;
use super::topology::{on_this_thread_in, Topology};
use super::{Mproute, TCP_GOAL};
use crate::support::{median, met};

/// CPU of the TCP sender and receiver. Left to the scheduler, they were sometimes apart and
/// sometimes together, and runs ranged over 2× (11.6–24.5 Gbit/s); pinned apart they moved
/// ~9 Gbit/s, pinned together ~14. Together, the whole path runs on one CPU, as in the packet
/// rate figures, so the figure is the CPU time per byte of each router.
pub(super) const TCP_CPU: usize = 0;

/// One TCP stream H1 → H2 through R for `seconds`, from hosts with default offloads; returns
/// Gbit/s received by H2.
fn tcp_stream(topo: &Topology, seconds: u32, to_r: bool) -> Result<f64> {
    use std::io::{Read, Write};
    let (h1, h2) = (
        topo.h1.name().to_string(),
        if to_r { topo.r.name() } else { topo.h2.name() }.to_string(),
    );
    let addr: &'static str = if to_r {
        "10.10.0.1:5201"
    } else {
        "10.20.0.2:5201"
    };
    let listener = on_this_thread_in(&h2, || {
        std::net::TcpListener::bind(addr).with_context(|| format!("bind {addr} in {h2}"))
    })?;
    let dur = std::time::Duration::from_secs(u64::from(seconds));
    let server = std::thread::spawn(move || -> Result<u64> {
        pin_this_thread(TCP_CPU, "the TCP receiver")?;
        let (mut c, _) = listener.accept().context("accept in H2")?;
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0u64;
        loop {
            match c.read(&mut buf) {
                Ok(0) => return Ok(total),
                Ok(n) => total += n as u64,
                Err(e) => return Err(e).context("read in H2"),
            }
        }
    });
    let start = std::time::Instant::now();
    let sent = std::thread::spawn(move || -> Result<()> {
        pin_this_thread(TCP_CPU, "the TCP sender")?;
        let mut s = on_this_thread_in(&h1, || {
            std::net::TcpStream::connect_timeout(
                &addr.parse().context("address")?,
                std::time::Duration::from_secs(3),
            )
            .context("connect from H1 through R")
        })?;
        let buf = vec![0x5au8; 1 << 16];
        while start.elapsed() < dur {
            s.write_all(&buf).context("write from H1")?;
        }
        Ok(())
    });
    sent.join()
        .map_err(|_| anyhow::anyhow!("TCP client thread panicked"))??;
    let bytes = server
        .join()
        .map_err(|_| anyhow::anyhow!("TCP server thread panicked"))??;
    Ok(bytes as f64 * 8.0 / start.elapsed().as_secs_f64() / 1e9)
}

/// TCP throughput from hosts with default offloads: kernel forwarding, then mproute in each
/// mode (auto is tc on these veths), in a fresh topology with no program but ours.
pub(super) fn tcp_figures(bin: &Path, seconds: u32, runs: u32) -> Result<()> {
    let topo = Topology::build()?;
    let m = Mproute {
        bin,
        ns: topo.r.name(),
    };
    // Both router ports, as a router is set up: the ACKs from H2 come in on vout. The words
    // after `dataplane attach dev vin dev vout`; None: no dataplane.
    let modes: [(&str, Option<&[&str]>); 6] = [
        ("no forwarding (to R)", None),
        ("kernel forwarding", None),
        ("mproute auto", Some(&[])),
        ("mproute tc peer off", Some(&["tc", "peer", "off"])),
        ("mproute xdp-generic", Some(&["xdp-generic"])),
        ("mproute xdp", Some(&["xdp", "prepare-peers"])),
    ];
    let mut results: Vec<(&str, Vec<f64>)> = modes.iter().map(|(n, _)| (*n, Vec::new())).collect();
    for _ in 0..runs {
        for (i, (_, attach)) in modes.iter().enumerate() {
            if let Some(words) = attach {
                let mut a = vec!["dataplane", "attach", "dev", "vin", "dev", "vout"];
                a.extend_from_slice(words);
                m.run(&a).context("attach for the TCP run")?;
            }
            let g = tcp_stream(&topo, seconds, i == 0)?;
            results[i].1.push(g);
            m.run(&["dataplane", "detach", "dev", "vin", "dev", "vout"])
                .ok();
        }
    }
    println!();
    println!(
        "TCP, one stream H1 → H2, hosts with default offloads, {runs} runs × {seconds} s, \
         sender and receiver on CPU {TCP_CPU}:"
    );
    let kernel = median(&results[1].1);
    for (name, v) in &results {
        let med = median(v);
        let runs_s = v
            .iter()
            .map(|g| format!("{g:.2}"))
            .collect::<Vec<_>>()
            .join(" ");
        let mut line = format!(
            "  {name:<22} {runs_s:<24} median {med:.2} Gbit/s = {:.2}× kernel",
            med / kernel
        );
        if *name == "mproute auto" {
            line.push_str(&format!(
                " (goal ≥ {TCP_GOAL:.1}×: {}; the limit, no forwarding: {:.2}×)",
                met(med / kernel >= TCP_GOAL),
                median(&results[0].1) / kernel
            ));
        }
        println!("{line}");
    }
    Ok(())
}

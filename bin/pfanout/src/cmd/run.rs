//! `pfanout run`: the workers of a group, one thread each, counting what they read (and
//! writing it to pcap files), the kernel's counters of each socket sampled by its own worker,
//! a live line or table once a second, a summary at the end.

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mpt_cli::Failure;
use mpt_sys::packet::PacketSocket;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::DataLink;

use crate::grammar::RunCmd;
use crate::group::Group;
use crate::view::{Ended, GroupInfo, WorkerStats};

/// How long a worker waits for a packet before it looks at the stop flag again.
const POLL: Duration = Duration::from_millis(50);
/// How often a worker reads its socket's kernel counters.
const SAMPLE: Duration = Duration::from_millis(50);
/// Most packets a worker still reads from its queue once told to stop.
const DRAIN: usize = 1 << 16;
/// Bytes copied per packet (and the pcap files' snap length).
const SNAPLEN: usize = 65535;

/// Counters of one worker, shared with the main thread.
#[derive(Debug, Default)]
struct Counters {
    packets: AtomicU64,
    bytes: AtomicU64,
    kernel_packets: AtomicU64,
    drops: AtomicU64,
    roll_all: AtomicU64,
    roll_huge: AtomicU64,
    roll_failed: AtomicU64,
}

impl Counters {
    fn read(&self, worker: u32) -> WorkerStats {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        WorkerStats {
            worker: Some(worker),
            packets: l(&self.packets),
            bytes: l(&self.bytes),
            kernel_packets: l(&self.kernel_packets),
            drops: l(&self.drops),
            rollover_all: l(&self.roll_all),
            rollover_huge: l(&self.roll_huge),
            rollover_failed: l(&self.roll_failed),
        }
    }

    fn sample(&self, s: &PacketSocket) -> Result<(), mpt_sys::Error> {
        let st = s.statistics()?;
        self.kernel_packets
            .fetch_add(u64::from(st.packets), Ordering::Relaxed);
        self.drops.fetch_add(u64::from(st.drops), Ordering::Relaxed);
        if let Some(r) = s.rollover_stats()? {
            self.roll_all.store(r.all, Ordering::Relaxed);
            self.roll_huge.store(r.huge, Ordering::Relaxed);
            self.roll_failed.store(r.failed, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// A token bucket that sleeps: `rate` tokens a second, at most 10 ms of them at once.
#[derive(Debug)]
struct Bucket {
    rate: f64,
    tokens: f64,
    cap: f64,
    last: Instant,
}

impl Bucket {
    fn new(rate: u32) -> Bucket {
        let rate = f64::from(rate);
        Bucket {
            rate,
            tokens: 1.0,
            cap: (rate / 100.0).max(1.0),
            last: Instant::now(),
        }
    }
    /// Wait (at most `max`) until a token is there; whether one is.
    fn wait(&mut self, max: Duration) -> bool {
        let now = Instant::now();
        self.tokens =
            (self.tokens + now.duration_since(self.last).as_secs_f64() * self.rate).min(self.cap);
        self.last = now;
        if self.tokens >= 1.0 {
            return true;
        }
        let need = Duration::from_secs_f64((1.0 - self.tokens) / self.rate);
        std::thread::sleep(need.min(max));
        false
    }
    fn take(&mut self) {
        self.tokens -= 1.0;
    }
}

/// The running group.
#[derive(Debug)]
pub struct Running {
    /// Group id.
    pub id: u16,
    /// Group description for output.
    pub info: GroupInfo,
    counters: Vec<Arc<Counters>>,
    threads: Vec<std::thread::JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    error: Arc<Mutex<Option<String>>>,
    started: Instant,
    /// The device's index (0: every device).
    ifindex: u32,
}

fn pcap_writer(
    dir: &File,
    dir_path: &Path,
    i: u32,
    link: DataLink,
    made: &mut Vec<PathBuf>,
) -> Result<PcapWriter<BufWriter<File>>, Failure> {
    let name = format!("worker-{i}.pcap");
    let path: PathBuf = dir_path.join(&name);
    let f = mpt_sys::fs::create_private(dir, &name)
        .map_err(|e| Failure::system(format!("create {}: {e}", path.display())))?;
    made.push(path.clone());
    let header = PcapHeader {
        datalink: link,
        snaplen: SNAPLEN as u32,
        ..PcapHeader::default()
    };
    PcapWriter::with_header(BufWriter::new(f), header)
        .map_err(|e| Failure::system(format!("write {}: {e}", path.display())))
}

/// The pcap link type of what a packet socket reads on device `ifindex`: Ethernet frames on
/// Ethernet and loopback devices, IP packets on devices without a link header (tun,
/// WireGuard, IP tunnels).
fn link_type(ifindex: u32) -> DataLink {
    match mpt_sys::iface::hw_type(ifindex) {
        Ok(1) | Ok(772) => DataLink::ETHERNET,
        Ok(_) => DataLink::RAW,
        Err(_) => DataLink::ETHERNET,
    }
}

/// The pcap files of `cmd.write`, one per worker; on a failure, what was made is removed.
fn pcap_writers(
    cmd: &RunCmd,
    ifindex: u32,
) -> Result<Vec<Option<PcapWriter<BufWriter<File>>>>, Failure> {
    let Some(dir) = &cmd.write else {
        return Ok((0..cmd.workers).map(|_| None).collect());
    };
    // Captured traffic is for root's eyes, and root writes only where no one else can make it
    // write elsewhere: a directory another user owns or can write is refused (as the tools'
    // /run and bpffs directories are), and each file is created through the directory's
    // descriptor, never through a symbolic link, mode 0600.
    if let Some(why) = mpt_sys::fs::untrusted(dir, dir) {
        return Err(Failure::system(format!("refuse the pcap directory: {why}"))
            .hint("write to a directory that only root can write (it is made, mode 0700, if it is not there)"));
    }
    let fresh = !dir.exists();
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| Failure::system(format!("create {}: {e}", dir.display())))?;
    }
    let dir_fd = mpt_sys::fs::open_dir(dir)
        .map_err(|e| Failure::system(format!("open {}: {e}", dir.display())))?;
    let mut made = Vec::new();
    let link = link_type(ifindex);
    let mut out = Vec::new();
    for i in 0..cmd.workers {
        match pcap_writer(&dir_fd, dir, i, link, &mut made) {
            Ok(w) => out.push(Some(w)),
            Err(f) => {
                drop(out);
                for p in &made {
                    let _ = std::fs::remove_file(p);
                }
                if fresh {
                    let _ = std::fs::remove_dir(dir);
                }
                return Err(f);
            }
        }
    }
    Ok(out)
}

impl Running {
    /// Open the group and start its workers. `stop` ends them (a signal handler sets it).
    pub fn start(cmd: &RunCmd, stop: Arc<AtomicBool>) -> Result<Running, Failure> {
        // the group first: a refused join leaves no files either
        let group = Group::open(cmd)?;
        let writers = pcap_writers(cmd, group.ifindex)?;
        let info = GroupInfo {
            group: group.id,
            mode: group.mode.to_string(),
            flags: group.flags.names(),
            dev: group.dev.clone(),
            workers: cmd.workers,
            ring: cmd.ring,
        };
        let error = Arc::new(Mutex::new(None));
        let total = Arc::new(AtomicU64::new(0));
        let mut counters = Vec::new();
        let mut threads = Vec::new();
        let id = group.id;
        let ifindex = group.ifindex;
        for (i, (sock, w)) in group.sockets.into_iter().zip(writers).enumerate() {
            let c = Arc::new(Counters::default());
            counters.push(Arc::clone(&c));
            let job = Job {
                sock,
                pcap: w,
                counters: c,
                stop: Arc::clone(&stop),
                error: Arc::clone(&error),
                total: Arc::clone(&total),
                count: cmd.count,
                bucket: cmd.per_worker.map(Bucket::new),
                ring: cmd.ring,
            };
            let t = std::thread::Builder::new()
                .name(format!("worker-{i}"))
                .spawn(move || job.run());
            match t {
                Ok(t) => threads.push(t),
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    for t in threads {
                        let _ = t.join();
                    }
                    return Err(Failure::system(format!("start worker {i}: {e}")));
                }
            }
        }
        // the steering program may go now: the group holds it
        Ok(Running {
            id,
            info,
            counters,
            threads,
            stop,
            error,
            started: Instant::now(),
            ifindex,
        })
    }

    /// Every worker's figures now.
    pub fn snapshot(&self) -> Vec<WorkerStats> {
        self.counters
            .iter()
            .enumerate()
            .map(|(i, c)| c.read(i as u32))
            .collect()
    }

    /// Whether the workers stopped (count reached, or an error).
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Seconds since the start.
    pub fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Stop the workers, wait for them, and give their last figures (or a worker's error).
    pub fn finish(self) -> Result<(Vec<WorkerStats>, f64), Failure> {
        self.stop.store(true, Ordering::Relaxed);
        let secs = self.elapsed();
        for t in self.threads {
            let _ = t.join();
        }
        if let Some(e) = self.error.lock().ok().and_then(|mut g| g.take()) {
            return Err(Failure::system(e));
        }
        let stats = self
            .counters
            .iter()
            .enumerate()
            .map(|(i, c)| c.read(i as u32))
            .collect();
        Ok((stats, secs))
    }

    /// Whether the device the group is bound to is gone (deleted, or moved to another
    /// namespace): its sockets will never read again, the run ends with an error. A device
    /// that is only down stays: it may come up again.
    pub fn device_gone(&self) -> bool {
        if self.ifindex == 0 || mpt_sys::iface::name(self.ifindex).is_some() {
            return false;
        }
        if let Ok(mut e) = self.error.lock() {
            e.get_or_insert_with(|| {
                format!(
                    "run: device {} (ifindex {}) is gone: deleted or moved to another namespace",
                    self.info.dev, self.ifindex
                )
            });
        }
        true
    }

    /// Whether a worker failed.
    pub fn failed(&self) -> bool {
        self.error.lock().map(|g| g.is_some()).unwrap_or(true)
    }
}

/// A worker's thread.
struct Job {
    sock: PacketSocket,
    pcap: Option<PcapWriter<BufWriter<File>>>,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
    error: Arc<Mutex<Option<String>>>,
    total: Arc<AtomicU64>,
    count: Option<u64>,
    bucket: Option<Bucket>,
    ring: bool,
}

impl Job {
    fn fail(&self, what: String) {
        if let Ok(mut g) = self.error.lock() {
            g.get_or_insert(what);
        }
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Count one packet (and write it); false when `count` was reached before it.
    fn seen(&mut self, data: &[u8], orig_len: usize, ts: Duration) -> bool {
        if let Some(c) = self.count {
            // take a place below count, or stop without counting this one
            let placed = self
                .total
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                    (n < c).then_some(n + 1)
                });
            match placed {
                Ok(n) if n + 1 >= c => self.stop.store(true, Ordering::Relaxed),
                Ok(_) => {}
                Err(_) => {
                    self.stop.store(true, Ordering::Relaxed);
                    return false;
                }
            }
        }
        self.counters.packets.fetch_add(1, Ordering::Relaxed);
        self.counters
            .bytes
            .fetch_add(orig_len as u64, Ordering::Relaxed);
        if let Some(w) = self.pcap.as_mut() {
            let p = PcapPacket::new(ts, orig_len as u32, data);
            if let Err(e) = w.write_packet(&p) {
                self.fail(format!("write pcap: {e}"));
                return false;
            }
        }
        if let Some(b) = self.bucket.as_mut() {
            b.take();
        }
        true
    }

    /// Receive what is queued, waiting up to `timeout` for it: one frame in copy mode, up to
    /// `blocks` blocks of the ring; each frame counted (and written). The frames received.
    fn receive(
        &mut self,
        buf: &mut [u8],
        timeout: Duration,
        blocks: usize,
    ) -> Result<usize, mpt_sys::Error> {
        if !self.ring {
            return Ok(match self.sock.recv(buf, timeout)? {
                Some(r) => {
                    let n = r.len.min(buf.len());
                    self.seen(&buf[..n], r.orig_len, r.ts);
                    1
                }
                None => 0,
            });
        }
        // the ring's frames are counted once it is handed back: the socket is borrowed
        // while it is walked (their bytes are kept only for a pcap file)
        let mut frames: Vec<(Vec<u8>, usize, Duration)> = Vec::new();
        let pcap = self.pcap.is_some();
        let n = self.sock.ring_poll(timeout, blocks, &mut |f| {
            frames.push((
                if pcap { f.data.to_vec() } else { Vec::new() },
                f.orig_len,
                f.ts,
            ));
        })?;
        for (d, len, ts) in frames {
            if !self.seen(&d, len, ts) {
                break;
            }
        }
        Ok(n)
    }

    /// After a stop by signal or duration: read what is still queued, so that the summary
    /// holds what the kernel delivered before the end (not with count, which is exact).
    fn drain(&mut self, buf: &mut [u8]) {
        if self.count.is_some() || self.bucket.is_some() {
            return;
        }
        let mut n = 0usize;
        while n < DRAIN {
            match self.receive(buf, Duration::ZERO, 8) {
                Ok(k) if k > 0 => n += k,
                _ => return,
            }
        }
    }

    fn run(mut self) {
        let mut buf = vec![0u8; SNAPLEN];
        let mut sampled = Instant::now();
        while !self.stop.load(Ordering::Relaxed) {
            if let Some(b) = self.bucket.as_mut() {
                if !b.wait(POLL) {
                    if sampled.elapsed() >= SAMPLE {
                        sampled = Instant::now();
                        if let Err(e) = self.counters.sample(&self.sock) {
                            self.fail(e.to_string());
                        }
                    }
                    continue;
                }
            }
            let blocks = if self.bucket.is_some() { 1 } else { 8 };
            match self.receive(&mut buf, POLL, blocks) {
                Ok(_) => {}
                Err(e) if link_down(&e) => {}
                Err(e) => {
                    self.fail(e.to_string());
                    break;
                }
            }
            if sampled.elapsed() >= SAMPLE {
                sampled = Instant::now();
                if let Err(e) = self.counters.sample(&self.sock) {
                    self.fail(e.to_string());
                }
            }
        }
        if self.error.lock().map(|g| g.is_none()).unwrap_or(false) {
            self.drain(&mut buf);
        }
        let _ = self.counters.sample(&self.sock);
        if let Some(w) = self.pcap.take() {
            let mut inner = w.into_writer();
            if let Err(e) = inner.flush() {
                self.fail(format!("write pcap: {e}"));
            }
        }
    }
}

/// The device went down (the kernel reports ENETDOWN once to a bound packet socket): the
/// socket stays in its group and receives again when the link comes back, so wait.
fn link_down(e: &mpt_sys::Error) -> bool {
    if e.errno() == Some(libc::ENETDOWN) {
        std::thread::sleep(POLL);
        true
    } else {
        false
    }
}

/// Whether the live view is a table (standard output is a terminal, not JSON).
pub fn live_table(json: bool) -> bool {
    !json && std::io::stdout().is_terminal()
}

/// SIGINT, SIGTERM and SIGHUP set a flag while this lives; dropped, they act as before again.
#[derive(Debug)]
pub struct SignalFlag {
    ids: Vec<signal_hook::SigId>,
}

impl Drop for SignalFlag {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// Install SIGINT, SIGTERM and SIGHUP handlers that set `stop`, until the result is dropped: a
/// closed terminal or session ends a run as an operator's ^C does, with its summary and whole
/// pcap files (SIGHUP killed it mid-write).
pub fn stop_on_signals(stop: &Arc<AtomicBool>) -> Result<SignalFlag, Failure> {
    let mut f = SignalFlag { ids: Vec::new() };
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        let id = signal_hook::flag::register(sig, Arc::clone(stop))
            .map_err(|e| Failure::system(format!("install a signal handler: {e}")))?;
        f.ids.push(id);
    }
    Ok(f)
}

/// Run until duration, count, a signal or an error; print the live view on the way.
pub fn run(
    cmd: &RunCmd,
    json: bool,
    mut live: impl FnMut(&Running, &[WorkerStats], bool),
) -> Result<crate::view::RunSummary, Failure> {
    let stop = Arc::new(AtomicBool::new(false));
    let signalled = Arc::new(AtomicBool::new(false));
    let _signals = stop_on_signals(&signalled)?;
    let running = Running::start(cmd, Arc::clone(&stop))?;
    let table = live_table(json);
    let mut next = Instant::now() + Duration::from_secs(1);
    let deadline = cmd.duration.map(|d| Instant::now() + d);
    let ended = loop {
        std::thread::sleep(Duration::from_millis(20));
        if signalled.load(Ordering::Relaxed) {
            break Ended::Signal;
        }
        if running.failed() {
            break Ended::Error;
        }
        if Instant::now() >= next && running.device_gone() {
            break Ended::Error;
        }
        if running.stopped() {
            break Ended::Count;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break Ended::Duration;
        }
        if Instant::now() >= next {
            next += Duration::from_secs(1);
            let s = running.snapshot();
            if json || table {
                live(&running, &s, table);
            }
        }
    };
    let info = running.info.clone();
    let (workers, seconds) = running.finish()?;
    let _ = std::io::stdout().flush();
    Ok(crate::view::RunSummary::new(info, workers, seconds, ended))
}

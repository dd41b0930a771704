//! `pfanout run`: the workers of a group, one thread each, counting what they read (and
//! writing it to pcap files), the kernel's counters of each socket sampled by its own worker,
//! a live line or table once a second, a summary at the end.

use std::io::{IsTerminal, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mpt_cli::Failure;
use mpt_sys::packet::PacketSocket;
use pcap_file::DataLink;

use crate::grammar::RunCmd;
use crate::group::Group;
use crate::tap::{self, Reader, Stream, SNAPLEN};
use crate::view::{Ended, GroupInfo, LiveMode, ReaderEnd, WorkerStats};

/// How long a worker waits for a packet before it looks at the stop flag again.
const POLL: Duration = Duration::from_millis(50);
/// How often a worker reads its socket's kernel counters.
const SAMPLE: Duration = Duration::from_millis(50);
/// Most packets a worker still reads from its queue once told to stop.
const DRAIN: usize = 1 << 16;
/// How long a worker whose reader has bytes waiting sleeps before it tries the pipe again.
const PIPE_RETRY: Duration = Duration::from_millis(2);

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
    streamed: AtomicU64,
    backpressure: AtomicU64,
    reader_gone: AtomicU64,
    stream_cut: AtomicBool,
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
            streamed: l(&self.streamed),
            pipe_dropped: l(&self.backpressure),
            reader_gone: l(&self.reader_gone),
            stream_cut: self.stream_cut.load(Ordering::Relaxed),
            reader: None,
        }
    }

    fn tally(&self, t: &tap::Tally) {
        self.streamed.store(t.streamed, Ordering::Relaxed);
        self.backpressure.store(t.backpressure, Ordering::Relaxed);
        self.reader_gone.store(t.reader_gone, Ordering::Relaxed);
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
    /// The readers of `exec`, worker 0 first.
    readers: Vec<Reader>,
    /// Readers already reported as ended mid-run.
    reported: Vec<bool>,
}

fn pcap_file(
    dir: &std::fs::File,
    dir_path: &Path,
    i: u32,
    link: DataLink,
    made: &mut Vec<PathBuf>,
) -> Result<Stream, Failure> {
    let name = format!("worker-{i}.pcap");
    let path: PathBuf = dir_path.join(&name);
    let f = mpt_sys::fs::create_private(dir, &name)
        .map_err(|e| Failure::system(format!("create {}: {e}", path.display())))?;
    made.push(path.clone());
    tap::file_stream(f, link, path.display().to_string())
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

/// The workers' streams: none, the pcap files of `write DIR` (on a failure, what was made is
/// removed), standard output (`write -`), or the readers of `exec` (on a failure, those
/// started are ended).
#[allow(clippy::type_complexity)]
fn streams(
    cmd: &RunCmd,
    ifindex: u32,
    json: bool,
) -> Result<(Vec<Option<Stream>>, Vec<Reader>), Failure> {
    let link = link_type(ifindex);
    if let Some(template) = &cmd.exec {
        let mut readers: Vec<Reader> = Vec::new();
        let mut out = Vec::new();
        for i in 0..cmd.workers {
            let command = cmd.exec_for(i).unwrap_or_else(|| template.clone());
            match tap::spawn_reader(command.clone(), i, link, json) {
                Ok((r, s)) => {
                    readers.push(r);
                    out.push(Some(s));
                }
                Err(e) => {
                    drop(out);
                    let end = Instant::now() + Duration::from_secs(1);
                    for r in &mut readers {
                        r.wait(end);
                    }
                    return Err(Failure::system(format!(
                        "start worker {i}'s reader \"{command}\": {e}"
                    )));
                }
            }
        }
        return Ok((out, readers));
    }
    let Some(dir) = &cmd.write else {
        return Ok(((0..cmd.workers).map(|_| None).collect(), Vec::new()));
    };
    if cmd.stdout_stream() {
        let _ = std::io::stdout().flush();
        // the stream takes standard output's descriptor; what pfanout prints goes to
        // standard error from now on
        // SAFETY: dup/dup2 on the process's own standard descriptors, integers only.
        let fd = unsafe { libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3) };
        if fd < 0 || unsafe { libc::dup2(2, 1) } < 0 {
            return Err(Failure::system(format!(
                "write -: {}",
                std::io::Error::last_os_error()
            )));
        }
        // SAFETY: fd is a new descriptor that nothing else owns.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        let s = Stream::new(owned, tap::Kind::Pipe, link, "standard output".into())
            .map_err(|e| Failure::system(format!("write -: {e}")))?;
        return Ok((vec![Some(s)], Vec::new()));
    }
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
    let mut out = Vec::new();
    for i in 0..cmd.workers {
        match pcap_file(&dir_fd, dir, i, link, &mut made) {
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
    Ok((out, Vec::new()))
}

impl Running {
    /// Open the group and start its workers. `stop` ends them (a signal handler sets it).
    pub fn start(cmd: &RunCmd, stop: Arc<AtomicBool>) -> Result<Running, Failure> {
        Running::start_with(cmd, stop, false, None)
    }

    /// [`Running::start`], with `json` (the readers' standard output goes to standard error)
    /// and an observer that sees every packet a worker processes.
    pub fn start_with(
        cmd: &RunCmd,
        stop: Arc<AtomicBool>,
        json: bool,
        observer: Option<Arc<dyn Observer>>,
    ) -> Result<Running, Failure> {
        if cmd.stdout_stream() && std::io::stdout().is_terminal() {
            return Err(Failure::usage(
                "write -: standard output is a terminal (a pcap stream is for a pipe or a file)",
            ));
        }
        // the group first: a refused join leaves no files (and starts no reader) either
        let group = Group::open(cmd)?;
        let (writers, mut readers) = streams(cmd, group.ifindex, json)?;
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
                index: i as u32,
                observer: observer.clone(),
                sock,
                stream: w,
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
                    let end = Instant::now() + tap::CLOSE_WAIT;
                    for r in &mut readers {
                        r.wait(end);
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
            reported: vec![false; readers.len()],
            readers,
        })
    }

    /// Readers that ended since the last call (while the run goes on): worker, pid, how.
    pub fn readers_ended(&mut self) -> Vec<(u32, u32, String)> {
        let mut out = Vec::new();
        for (i, r) in self.readers.iter_mut().enumerate() {
            if !self.reported[i] && r.poll() {
                self.reported[i] = true;
                let how = r
                    .status
                    .as_ref()
                    .map_or_else(String::new, tap::status_words);
                out.push((i as u32, r.pid(), how));
            }
        }
        out
    }

    /// Every worker's figures now.
    pub fn snapshot(&self) -> Vec<WorkerStats> {
        let mut v: Vec<WorkerStats> = self
            .counters
            .iter()
            .enumerate()
            .map(|(i, c)| c.read(i as u32))
            .collect();
        for (w, r) in v.iter_mut().zip(&self.readers) {
            w.reader = Some(reader_end(r));
        }
        v
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
    pub fn finish(mut self) -> Result<(Vec<WorkerStats>, f64), Failure> {
        self.stop.store(true, Ordering::Relaxed);
        let secs = self.elapsed();
        for t in std::mem::take(&mut self.threads) {
            let _ = t.join();
        }
        // every stream is closed now: a reader ends at its end of file
        let end = Instant::now() + tap::CLOSE_WAIT;
        for r in &mut self.readers {
            r.wait(end);
        }
        if let Some(e) = self.error.lock().ok().and_then(|mut g| g.take()) {
            return Err(Failure::system(e));
        }
        Ok((self.snapshot(), secs))
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
    index: u32,
    observer: Option<Arc<dyn Observer>>,
    sock: PacketSocket,
    stream: Option<Stream>,
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
        if let Some(o) = &self.observer {
            o.packet(self.index, data);
        }
        if let Some(w) = self.stream.as_mut() {
            if let Err(e) = w.packet(data, orig_len, ts) {
                self.fail(e.to_string());
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
        let keep = self.stream.is_some() || self.observer.is_some();
        let n = self.sock.ring_poll(timeout, blocks, &mut |f| {
            frames.push((
                if keep { f.data.to_vec() } else { Vec::new() },
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

    /// Write what the reader's pipe takes now; keep the counts where the main thread sees
    /// them.
    fn flush_stream(&mut self) {
        let mut failed = None;
        if let Some(w) = self.stream.as_mut() {
            if w.pending() {
                if let Err(e) = w.flush() {
                    failed = Some(e.to_string());
                }
            }
            let t = w.tally;
            self.counters.tally(&t);
        }
        if let Some(e) = failed {
            self.fail(e);
        }
    }

    /// How long to wait for a packet: briefly while the reader's pipe holds back bytes.
    fn wait_time(&self) -> Duration {
        match &self.stream {
            Some(w) if w.pending() => PIPE_RETRY,
            _ => POLL,
        }
    }

    fn run(mut self) {
        let mut buf = vec![0u8; SNAPLEN];
        let mut sampled = Instant::now();
        while !self.stop.load(Ordering::Relaxed) {
            if let Some(b) = self.bucket.as_mut() {
                let max = match &self.stream {
                    Some(w) if w.pending() => PIPE_RETRY,
                    _ => POLL,
                };
                if !b.wait(max) {
                    self.flush_stream();
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
            let wait = self.wait_time();
            match self.receive(&mut buf, wait, blocks) {
                Ok(_) => {}
                Err(e) if link_down(&e) => {}
                Err(e) => {
                    self.fail(e.to_string());
                    break;
                }
            }
            self.flush_stream();
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
        if let Some(w) = self.stream.take() {
            let t = w.tally;
            self.counters.tally(&t);
            // the end of the stream: what is buffered, then end of file for the reader
            match w.close(Instant::now() + tap::CLOSE_WAIT) {
                Ok(true) => {}
                Ok(false) => self.counters.stream_cut.store(true, Ordering::Relaxed),
                Err(e) => self.fail(e.to_string()),
            }
        }
    }
}

/// Sees every packet a worker processes (the bench's flow bookkeeping).
pub trait Observer: Send + Sync + std::fmt::Debug {
    /// Worker `worker` processed `data` (from the link-layer header on).
    fn packet(&self, worker: u32, data: &[u8]);
}

/// How worker's reader stands: running, or how it ended.
fn reader_end(r: &Reader) -> ReaderEnd {
    ReaderEnd {
        pid: r.pid(),
        command: r.command.clone(),
        exit: r.status.as_ref().map(tap::status_code),
        ended: r.status.as_ref().map(tap::status_words),
        killed_by_pfanout: r.killed,
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

/// How the live view is printed: JSON lines, a table in place on a terminal, else appended.
pub fn live_mode(json: bool) -> LiveMode {
    if json {
        LiveMode::Json
    } else if std::io::stdout().is_terminal() {
        LiveMode::InPlace
    } else {
        LiveMode::Appended
    }
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

/// Packets and drops per second of each worker between two snapshots `secs` apart.
pub fn rates(before: &[WorkerStats], now: &[WorkerStats], secs: f64) -> Vec<Rate> {
    let per = |a: u64, b: u64| {
        if secs > 0.0 {
            b.saturating_sub(a) as f64 / secs
        } else {
            0.0
        }
    };
    now.iter()
        .enumerate()
        .map(|(i, n)| {
            let b = before.get(i).cloned().unwrap_or_default();
            Rate {
                packets: per(b.packets, n.packets),
                drops: per(b.drops, n.drops),
                pipe_drops: per(
                    b.pipe_dropped + b.reader_gone,
                    n.pipe_dropped + n.reader_gone,
                ),
            }
        })
        .collect()
}

/// Run until duration, count, a signal or an error; print the live view on the way
/// (`live(running, figures, rates, in place)`: once a second).
pub fn run(
    cmd: &RunCmd,
    json: bool,
    mut live: impl FnMut(&Running, &[WorkerStats], &[Rate], LiveMode),
) -> Result<crate::view::RunSummary, Failure> {
    let stop = Arc::new(AtomicBool::new(false));
    let signalled = Arc::new(AtomicBool::new(false));
    let _signals = stop_on_signals(&signalled)?;
    let mut running = Running::start_with(cmd, Arc::clone(&stop), json, None)?;
    // after the start: `write -` gave standard output to the stream
    let table = live_mode(json);
    let mut next = Instant::now() + Duration::from_secs(1);
    let deadline = cmd.duration.map(|d| Instant::now() + d);
    let mut last = (running.snapshot(), Instant::now());
    let ended = loop {
        std::thread::sleep(Duration::from_millis(20));
        for (w, pid, how) in running.readers_ended() {
            // said at once (the summary says it again): the others go on
            eprintln!(
                "pfanout: worker {w}'s reader (pid {pid}) ended mid-run: {how}; its packets are \
                 counted as lost to it, the other workers go on"
            );
        }
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
            let now = Instant::now();
            let r = rates(&last.0, &s, now.duration_since(last.1).as_secs_f64());
            live(&running, &s, &r, table);
            last = (s, now);
        }
    };
    let info = running.info.clone();
    let (workers, seconds) = running.finish()?;
    let _ = std::io::stdout().flush();
    Ok(crate::view::RunSummary::new(info, workers, seconds, ended))
}

/// One worker's rates over the last interval.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, PartialEq)]
pub struct Rate {
    /// Packets the worker read per second.
    pub packets: f64,
    /// Packets the kernel dropped per second (the socket's queue was full).
    pub drops: f64,
    /// Packets per second its reader did not get (its pipe full, or the reader gone).
    pub pipe_drops: f64,
}

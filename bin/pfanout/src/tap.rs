//! The workers' pcap streams: a pcap file per worker (`write DIR`), the one worker's stream on
//! standard output (`write -`), or each worker's stream into the standard input of its own
//! reader process (`exec CMD`), so that any libpcap tool (tcpdump, Zeek, tshark) reads one
//! member of a fanout group, which libpcap itself cannot join.
//!
//! The format is pcap with nanosecond time stamps (magic `0xa1b23c4d`; libpcap reads it since
//! 1.5), the link type of the device; the header and records are pcap-file's, written into a
//! buffer of our own. A pipe is written without blocking: a reader that is slow fills its pipe
//! (and our buffer behind it), and then its worker drops whole records for it, counted, rather
//! than wait (a worker that waits lets its socket overflow, and with rollover its packets go to
//! the other workers); a reader that is gone (`EPIPE`) costs its worker nothing but a count.
//! A record is never cut: the stream each reader gets is whole pcap.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use pcap_file::pcap::PcapHeader;
use pcap_file::{DataLink, Endianness, TsResolution};

/// Bytes copied per packet (and the streams' snap length).
pub const SNAPLEN: usize = 65535;
/// The pipe size asked for (the kernel caps it at `fs.pipe-max-size`, 1 MiB by default).
const PIPE_SIZE: libc::c_int = 1 << 20;
/// Bytes a worker keeps for its reader beyond the pipe before it drops records.
const PIPE_BUFFER: usize = 4 << 20;
/// Bytes buffered for a file before they are written.
const FILE_BUFFER: usize = 1 << 16;
/// How long the end of a run waits for a reader to take what is still buffered.
pub const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// Where a stream goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A file: written whole (blocking), in chunks.
    File,
    /// A pipe to a reader (or standard output): written without blocking.
    Pipe,
}

/// What became of a stream's packets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Packets handed to the stream (written, or buffered to be).
    pub streamed: u64,
    /// Packets dropped because the reader's pipe and our buffer were full.
    pub backpressure: u64,
    /// Packets dropped because the reader had gone (`EPIPE`).
    pub reader_gone: u64,
}

/// One worker's pcap stream.
#[derive(Debug)]
pub struct Stream {
    fd: OwnedFd,
    kind: Kind,
    buf: Vec<u8>,
    /// Bytes of `buf` already written.
    off: usize,
    /// The reader is gone.
    gone: bool,
    /// What it says in messages: the file, `standard output`, `worker 3's reader`.
    name: String,
    /// The counts.
    pub tally: Tally,
}

/// The pcap file header: nanosecond time stamps, `SNAPLEN`, `link`.
fn header(link: DataLink) -> Vec<u8> {
    let h = PcapHeader {
        datalink: link,
        snaplen: SNAPLEN as u32,
        ts_resolution: TsResolution::NanoSecond,
        endianness: Endianness::native(),
        ..PcapHeader::default()
    };
    let mut v = Vec::with_capacity(24);
    // a Vec takes every write
    let _ = h.write_to(&mut v);
    v
}

impl Stream {
    /// A stream into `fd` (a pipe is made non-blocking, and as large as the kernel allows),
    /// its pcap header queued.
    pub fn new(fd: OwnedFd, kind: Kind, link: DataLink, name: String) -> io::Result<Stream> {
        if kind == Kind::Pipe {
            let raw = fd.as_raw_fd();
            // SAFETY: fcntl on a descriptor we own, integer arguments only.
            unsafe {
                // best effort: a smaller pipe only fills sooner
                libc::fcntl(raw, libc::F_SETPIPE_SZ, PIPE_SIZE);
                let fl = libc::fcntl(raw, libc::F_GETFL);
                if fl < 0 || libc::fcntl(raw, libc::F_SETFL, fl | libc::O_NONBLOCK) < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
        }
        let mut s = Stream {
            fd,
            kind,
            buf: header(link),
            off: 0,
            gone: false,
            name,
            tally: Tally::default(),
        };
        s.flush()?;
        Ok(s)
    }

    /// Whether the reader is gone.
    pub fn gone(&self) -> bool {
        self.gone
    }

    /// Whether bytes wait to be written.
    pub fn pending(&self) -> bool {
        self.off < self.buf.len()
    }

    /// Queue one packet's record and write what the stream takes now. An error only for a
    /// file (a pipe's reader that is gone or slow is counted, not an error).
    pub fn packet(&mut self, data: &[u8], orig_len: usize, ts: Duration) -> io::Result<()> {
        if self.gone {
            self.tally.reader_gone += 1;
            return Ok(());
        }
        let rec = 16 + data.len();
        if self.kind == Kind::Pipe && self.buf.len() - self.off + rec > PIPE_BUFFER {
            // one more try first: the reader may have taken some since
            self.flush()?;
            if self.gone {
                self.tally.reader_gone += 1;
                return Ok(());
            }
            if self.buf.len() - self.off + rec > PIPE_BUFFER {
                self.tally.backpressure += 1;
                return Ok(());
            }
        }
        record(&mut self.buf, data, orig_len, ts);
        self.tally.streamed += 1;
        match self.kind {
            Kind::Pipe => self.flush(),
            Kind::File if self.buf.len() >= FILE_BUFFER => self.flush(),
            Kind::File => Ok(()),
        }
    }

    /// Write what the stream takes now: all of it for a file; for a pipe, until it is full.
    pub fn flush(&mut self) -> io::Result<()> {
        while self.off < self.buf.len() && !self.gone {
            let rest = &self.buf[self.off..];
            // SAFETY: write reads rest.len() bytes of a live slice.
            let n = unsafe { libc::write(self.fd.as_raw_fd(), rest.as_ptr().cast(), rest.len()) };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EAGAIN) => break,
                    Some(libc::EPIPE) if self.kind == Kind::Pipe => {
                        self.gone = true;
                        self.buf.clear();
                        self.off = 0;
                        return Ok(());
                    }
                    _ => {
                        return Err(io::Error::new(
                            e.kind(),
                            format!("write {}: {e}", self.name),
                        ))
                    }
                }
            }
            self.off += n as usize;
        }
        if self.off == self.buf.len() {
            self.buf.clear();
            self.off = 0;
        } else if self.off > PIPE_BUFFER / 2 {
            self.buf.drain(..self.off);
            self.off = 0;
        }
        Ok(())
    }

    /// Write what is left, waiting at most until `deadline` for a pipe's reader; then close.
    /// The bytes (whole records and perhaps the start of one) a reader did not take by then
    /// are lost; `Ok(false)` says so.
    pub fn close(mut self, deadline: Instant) -> io::Result<bool> {
        loop {
            self.flush()?;
            if !self.pending() || self.gone {
                return Ok(!self.pending());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            let mut p = libc::pollfd {
                fd: self.fd.as_fd().as_raw_fd(),
                events: libc::POLLOUT,
                revents: 0,
            };
            // SAFETY: one live pollfd.
            unsafe { libc::poll(&mut p, 1, left.as_millis().clamp(1, 100) as libc::c_int) };
        }
    }
}

/// Append one pcap record (native byte order, as the header's magic says): seconds,
/// nanoseconds, captured and original length, the bytes. Written here rather than by
/// pcap-file's `PcapPacket::write_to`, which needs its byte-order crate named as ours.
fn record(buf: &mut Vec<u8>, data: &[u8], orig_len: usize, ts: Duration) {
    let data = &data[..data.len().min(SNAPLEN)];
    buf.extend_from_slice(&(ts.as_secs() as u32).to_ne_bytes());
    buf.extend_from_slice(&ts.subsec_nanos().to_ne_bytes());
    buf.extend_from_slice(&(data.len() as u32).to_ne_bytes());
    buf.extend_from_slice(&(orig_len.max(data.len()) as u32).to_ne_bytes());
    buf.extend_from_slice(data);
}

/// A stream into a new file (made by the caller, mode 0600).
pub fn file_stream(f: File, link: DataLink, name: String) -> io::Result<Stream> {
    Stream::new(f.into(), Kind::File, link, name)
}

/// A worker's reader process: `sh -c CMD`, in a process group of its own (a ^C on the
/// terminal reaches pfanout, which ends the streams; the readers end on their end of file),
/// its standard output pfanout's (or its standard error under `-j`, which keeps the JSON
/// lines whole).
#[derive(Debug)]
pub struct Reader {
    /// The command, `%i` replaced.
    pub command: String,
    child: Child,
    /// How it ended, once it has.
    pub status: Option<ExitStatus>,
    /// Whether pfanout had to end it (it did not exit after its stream was closed).
    pub killed: bool,
}

/// Start worker `i`'s reader; its stream.
pub fn spawn_reader(
    command: String,
    i: u32,
    link: DataLink,
    json: bool,
) -> io::Result<(Reader, Stream)> {
    use std::os::unix::process::CommandExt;
    let mut c = Command::new("/bin/sh");
    c.arg("-c")
        .arg(&command)
        .stdin(Stdio::piped())
        .process_group(0);
    if json {
        c.stdout(io::stderr());
    }
    let mut child = c.spawn()?;
    let Some(stdin) = child.stdin.take() else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(io::Error::other("no pipe to the reader"));
    };
    let fd: OwnedFd = stdin.into();
    let stream = match Stream::new(fd, Kind::Pipe, link, format!("worker {i}'s reader")) {
        Ok(s) => s,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
    };
    Ok((
        Reader {
            command,
            child,
            status: None,
            killed: false,
        },
        stream,
    ))
}

impl Reader {
    /// Whether it has exited (and then how, kept in `status`).
    pub fn poll(&mut self) -> bool {
        if self.status.is_none() {
            if let Ok(Some(s)) = self.child.try_wait() {
                self.status = Some(s);
            }
        }
        self.status.is_some()
    }

    /// Wait for it to exit until `deadline`; then SIGTERM its process group, and SIGKILL a
    /// second later.
    pub fn wait(&mut self, deadline: Instant) {
        while !self.poll() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if self.poll() {
            return;
        }
        self.killed = true;
        let pg = self.child.id() as libc::pid_t;
        // SAFETY: kill with integer arguments; the group is the one the child leads.
        unsafe { libc::kill(-pg, libc::SIGTERM) };
        let t = Instant::now() + Duration::from_secs(1);
        while !self.poll() && Instant::now() < t {
            std::thread::sleep(Duration::from_millis(10));
        }
        if !self.poll() {
            // SAFETY: as above.
            unsafe { libc::kill(-pg, libc::SIGKILL) };
            if let Ok(s) = self.child.wait() {
                self.status = Some(s);
            }
        }
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// How a reader ended, in words: `exit 0`, `killed by signal 9`.
pub fn status_words(s: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => "ended".to_string(),
    }
}

/// A reader's end as the shell reports it: the exit code, or 128 + the signal.
pub fn status_code(s: &ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => c,
        (None, Some(sig)) => 128 + sig,
        _ => -1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pipe() -> (OwnedFd, OwnedFd) {
        let (r, w) = nix::unistd::pipe().expect("pipe");
        (r, w)
    }

    #[test]
    fn a_full_pipe_drops_whole_records_and_a_closed_one_is_gone() {
        let (r, w) = pipe();
        let mut s = Stream::new(w, Kind::Pipe, DataLink::ETHERNET, "t".into()).expect("stream");
        let data = vec![0xabu8; 1500];
        let mut i = 0u64;
        while s.tally.backpressure == 0 {
            s.packet(&data, 1500, Duration::new(1, 2)).expect("packet");
            i += 1;
            assert!(i < 100_000, "never full");
        }
        assert_eq!(s.tally.streamed + s.tally.backpressure, i);
        // what the pipe holds starts with the nanosecond header and whole records
        let mut head = [0u8; 40];
        nix::unistd::read(r.as_raw_fd(), &mut head).expect("read");
        assert_eq!(
            u32::from_ne_bytes([head[0], head[1], head[2], head[3]]),
            0xa1b2_3c4d
        );
        assert_eq!(
            u32::from_ne_bytes([head[28], head[29], head[30], head[31]]),
            2,
            "nanoseconds"
        );
        drop(r);
        s.packet(&data, 1500, Duration::ZERO)
            .expect("gone is no error");
        s.packet(&data, 1500, Duration::ZERO)
            .expect("gone is no error");
        assert!(s.gone());
        assert!(s.tally.reader_gone >= 1);
    }
}

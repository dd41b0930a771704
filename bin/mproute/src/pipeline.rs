//! Batches: the lines of a batch file run on one [`Session`]. Consecutive `add` lines are
//! pipelined (up to 256 requests in flight, several per `sendmsg`, one acknowledgement per
//! datagram and refusals matched by sequence number); without `--force` a refused line stops
//! the batch and the lines after it that the kernel had already applied are rolled back, so
//! the result is the same as running the lines one by one. A batch of more add lines than a
//! window plans (and writes the state of) each window while a second thread writes the LPM
//! entries of the ones before and has the kernel take their routes (at most
//! [`DEPTH`]); what was planned or sent on lines that then did not stand is undone (the routes
//! the kernel took deleted again) and planned again (see [`Worker`]).

use std::collections::{HashMap, HashSet, VecDeque};

use mpt_cli::render::Style;
use mpt_cli::Failure;
use mpt_model::{Algo, RouteKey, Verb};
use mpt_netlink::msg::rtnl::route::{self as rmsg, PathForm, RouteRequest};

use crate::cli::Command;
use crate::session::Session;
use crate::store::Managed;
use crate::txn::{Op, Pending, Planned};
use crate::view::Output;

/// Requests pipelined per window; a batch of more add lines than this plans the next window
/// while the kernel takes the one before.
const WINDOW: usize = 256;

/// Windows sent to the kernel and not yet settled, at most: the worker has the next one
/// queued while the main thread plans.
const DEPTH: usize = 2;

/// A window sent to the kernel, with its lines (to plan again if an older window's line did
/// not stand).
struct Flight {
    pending: Vec<(usize, Pending)>,
    lines: Vec<Line>,
}

/// A batch line and its typed command.
type Line = (usize, Result<Command, Failure>);

/// The adds of a batch on their way: the window being planned, with its lines (to plan again
/// if a window in flight ends in trouble), and the windows with the kernel, oldest first.
#[derive(Default)]
struct Pipe {
    window: Vec<(usize, Pending)>,
    lines_of: Vec<Line>,
    inflight: VecDeque<Flight>,
}

/// What settling the window in flight left to do.
enum Land {
    /// Nothing in flight, or every line of it stood: go on.
    Clear,
    /// A line in flight did not stand (refused, with `--force`): these lines, planned on
    /// the assumption that it would, were undone and must be planned again.
    Again(Vec<Line>),
    /// The batch stops (reported).
    Stop,
}

/// The thread that takes full windows of route requests to the kernel (on a netlink socket
/// of its own, in the namespace it inherits) and returns the answers, so that the kernel's
/// work on one window overlaps with planning the next: the two halves of an install cost
/// about the same, and the machine has more than one CPU. A window's state is written before
/// it is handed over and its LPM entries by the worker before its routes (that share of the
/// map writes balances the two threads), so both still precede the FIB.
struct Worker {
    jobs: std::sync::mpsc::Sender<Job>,
    results: std::sync::mpsc::Receiver<Reply>,
    /// The last answers were waited for: the worker is the slower of the two threads, so the
    /// next window's LPM entries are written by the planner (see [`Session::window_maps`]).
    behind: std::cell::Cell<bool>,
}

/// A window for the worker: its LPM writes (made first), then its route requests.
struct Job {
    lpm: Option<mpt_bpf::mproute::state::LpmWrites>,
    reqs: Vec<(mpt_netlink::msg::Request, Op)>,
}

/// What became of a [`Job`].
enum Reply {
    /// The LPM writes failed, or those of a window before it did: none of its routes was
    /// sent.
    Maps(Failure),
    /// The kernel's answers to its routes.
    Fib(Answers),
}

impl Worker {
    fn spawn<'s>(sc: &'s std::thread::Scope<'s, '_>) -> Worker {
        let (jobs, job_rx) = std::sync::mpsc::channel::<Job>();
        let (res_tx, results) = std::sync::mpsc::channel();
        sc.spawn(move || {
            let mut sock: Option<mpt_netlink::sock::Socket> = None;
            // after a window's trie writes failed, the batch stops there: the windows after
            // it are neither written nor sent (the planner only undoes them)
            let mut failed: Option<Failure> = None;
            for job in job_rx {
                let written = match (&failed, job.lpm) {
                    (Some(f), _) => Err(f.clone()),
                    (None, Some(lpm)) => lpm
                        .write()
                        .map_err(|e| Failure::bpf("write dataplane state", e)),
                    (None, None) => Ok(()),
                };
                let reply = match written {
                    Err(f) => {
                        failed = Some(f.clone());
                        Reply::Maps(f)
                    }
                    Ok(()) => Reply::Fib(
                        (|| {
                            let s = match &mut sock {
                                Some(s) => s,
                                None => {
                                    let s = mpt_netlink::sock::Socket::route()?;
                                    s.set_rcvbuf(4 << 20);
                                    sock.insert(s)
                                }
                            };
                            s.pipeline(job.reqs.iter().map(|(r, o)| (r, *o)), job.reqs.len())
                        })()
                        .map_err(Failure::from),
                    ),
                };
                if res_tx.send(reply).is_err() {
                    break;
                }
            }
        });
        Worker {
            jobs,
            results,
            behind: std::cell::Cell::new(false),
        }
    }

    /// What became of the oldest window handed over (waits for it).
    fn answers(&self) -> Reply {
        let gone = || Reply::Fib(Err(Failure::system("netlink sender thread gone")));
        match self.results.try_recv() {
            Ok(r) => {
                self.behind.set(false);
                r
            }
            Err(std::sync::mpsc::TryRecvError::Empty) => {
                self.behind.set(true);
                self.results.recv().unwrap_or_else(|_| gone())
            }
            Err(std::sync::mpsc::TryRecvError::Disconnected) => gone(),
        }
    }
}

/// Report a window whose maps could not be written (it was undone, with the `later` lines
/// planned after it; the batch stops).
fn maps_failed(
    pending: &[(usize, Pending)],
    later: usize,
    f: &Failure,
    emit: &mut dyn FnMut(usize, Result<Output, Failure>),
) {
    if let Some((line, p)) = pending.first() {
        emit(
            *line,
            Err(Failure::system(format!(
                "{}: {} (this line and the {} after it were not installed)",
                p.op,
                f.message,
                pending.len() - 1 + later
            ))),
        );
    }
}

/// The kernel's answers to a window: every line stood.
fn clean(r: &Answers) -> bool {
    matches!(r, Ok(v) if v.iter().all(Result::is_ok))
}

/// The kernel's answers to a window's requests, in order (`Err`: the socket failed).
type Answers = Result<Vec<Result<(), mpt_netlink::KernelError>>, Failure>;

/// Put lines back at the front of the queue, in order, then `cur` (the line being run).
fn requeue(queue: &mut VecDeque<Line>, again: Vec<Line>, cur: Option<Line>) {
    if let Some(c) = cur {
        queue.push_front(c);
    }
    for l in again.into_iter().rev() {
        queue.push_front(l);
    }
}

impl mpt_cli::batch::BatchTool for Session {
    type Cmd = Command;
    type Out = Output;

    fn parse_line(words: Vec<String>) -> Result<Command, Failure> {
        crate::cli::parse_line(words)
    }

    fn run_lines(
        &mut self,
        lines: Vec<Line>,
        force: bool,
        emit: &mut dyn FnMut(usize, Result<Output, Failure>),
    ) {
        self.opts.force = force;
        // a line that gives an algorithm a choice (more than one path, a resilient table)
        let choice = lines.iter().any(|(_, c)| {
            matches!(c, Ok(Command::Write(s)) if s.nexthops.len() > 1 || s.resilient.is_some())
        });
        let mut failed = false;
        self.batch(lines, &mut |n, r| {
            failed |= r.is_err();
            emit(n, r)
        });
        // once for the batch, as a lone write says it (asked after the writes); a batch with a
        // failed line says only what failed, one line each
        if choice && !failed && !self.opts.check && matches!(self.enforced_by(), Ok("none")) {
            mpt_cli::error::eprint_once("mproute", "note", crate::cmd::write::NOT_ENFORCED);
        }
    }

    fn run(&mut self, c: &Command) -> Result<Output, Failure> {
        crate::cmd::run(self, c)
    }

    fn print(out: &Output, style: Style) {
        crate::view::print(out, style);
    }

    fn finish(&mut self) -> Result<(), Failure> {
        if self.opts.check {
            // a dry run changed nothing: nothing to collect or verify
            return Ok(());
        }
        Session::finish(self)
    }

    fn holds_lock(&self) -> bool {
        true
    }

    fn release(&mut self) {
        // the state holds the lock; finish has ended its journal
        self.store = None;
    }
}

impl mpt_cli::tool::Tool for Session {
    const NAME: &'static str = "mproute";
    type Cli = crate::cli::Cli;

    fn global(cli: &Self::Cli) -> &mpt_cli::GlobalOpts {
        &cli.global
    }

    fn command(cli: &Self::Cli) -> Option<Result<Command, Failure>> {
        cli.cmd.as_ref().map(|c| c.command())
    }

    fn default_command() -> Command {
        Command::Show(crate::grammar::ShowSpec::default())
    }

    fn open(cli: &Self::Cli) -> Self {
        let mut s = Session::new(cli.global.clone());
        s.use_nh_objects = cli.nexthop_objects;
        s
    }

    fn run_one(&mut self, command: Command, style: Style) -> Result<(), Failure> {
        self.read_only = matches!(command, Command::Show(_) | Command::Save);
        if command == Command::Dataplane(crate::grammar::DpSpec::Watch) && !self.opts.check {
            // runs until interrupted or its output is closed
            return crate::cmd::watch::run(self, style);
        }
        mpt_cli::batch::BatchTool::run(self, &command).map(|out| crate::view::print(&out, style))
    }
}

impl Session {
    /// Run the lines of a batch (see the module doc). `emit` gets every line's outcome in
    /// order; returns `false` when the batch stopped at a failure.
    pub fn batch(
        &mut self,
        lines: Vec<Line>,
        emit: &mut dyn FnMut(usize, Result<Output, Failure>),
    ) -> bool {
        let force = self.opts.force;
        if self.opts.check {
            // a dry run: every line predicted in order, on what the lines before it would do
            let mut ok = true;
            mpt_cli::batch::run_each(
                lines,
                force,
                &mut |l, r| {
                    ok &= r.is_ok();
                    emit(l, r)
                },
                |c| crate::cmd::run(self, &c),
            );
            return ok;
        }
        if lines
            .iter()
            .any(|(_, c)| c.as_ref().is_ok_and(Command::changes_routes))
        {
            if let Err(f) = self.disarm() {
                if let Some((line, _)) = lines.first() {
                    emit(*line, Err(f));
                }
                return false;
            }
        }
        // More add lines than a window: a second thread sends each full window to the kernel
        // while this one plans the next (see `Worker`).
        let adds = lines
            .iter()
            .filter(|(_, c)| matches!(c, Ok(Command::Write(s)) if s.verb == Verb::Add))
            .count();
        std::thread::scope(|sc| {
            let worker = (adds > WINDOW).then(|| Worker::spawn(sc));
            self.run_queue(lines.into(), worker.as_ref(), emit)
        })
    }

    fn run_queue(
        &mut self,
        mut queue: VecDeque<Line>,
        worker: Option<&Worker>,
        emit: &mut dyn FnMut(usize, Result<Output, Failure>),
    ) -> bool {
        let force = self.opts.force;
        let mut pipe = Pipe::default();
        loop {
            while let Some((line, cmd)) = queue.pop_front() {
                let planned = match &cmd {
                    Ok(Command::Write(spec)) if spec.verb == Verb::Add => {
                        Some(self.txn().plan(spec))
                    }
                    _ => None,
                };
                // what planning already settled for this line (None: not an add)
                let planned: Option<Result<Output, Failure>> = match planned {
                    Some(Ok(Planned::Send(p))) => {
                        pipe.window.push((line, p));
                        pipe.lines_of.push((line, cmd));
                        if pipe.window.len() < WINDOW {
                            continue;
                        }
                        let Some(w) = worker else {
                            pipe.lines_of.clear();
                            if !self.flush_window(&mut pipe.window, emit) {
                                return false;
                            }
                            continue;
                        };
                        match self.hand_over(&mut pipe, w, line, emit) {
                            Land::Stop => return false,
                            Land::Again(again) => requeue(&mut queue, again, None),
                            Land::Clear => {}
                        }
                        continue;
                    }
                    // an add is never unchanged (only replace and change are)
                    Some(Ok(Planned::Unchanged(done))) => Some(Ok(crate::cmd::done(done))),
                    Some(Err(f)) => Some(Err(f)),
                    None => None,
                };
                // Anything else runs after every line before it has settled (and is run again
                // if one of those did not stand).
                match self.drain(&mut pipe, worker, emit) {
                    Land::Stop => return false,
                    Land::Again(again) => {
                        requeue(&mut queue, again, Some((line, cmd)));
                        continue;
                    }
                    Land::Clear => {}
                }
                let r = match planned {
                    Some(r) => r,
                    None => cmd.and_then(|c| crate::cmd::run(self, &c)),
                };
                let failed = r.is_err();
                emit(line, r);
                if failed && !force {
                    return false;
                }
            }
            match self.drain(&mut pipe, worker, emit) {
                Land::Stop => return false,
                Land::Again(again) => requeue(&mut queue, again, None),
                Land::Clear => return true,
            }
        }
    }

    /// Hand the full window (its last line `line`) to the worker. At most [`DEPTH`] windows
    /// are with the kernel: the oldest is settled first, so that the worker always has the
    /// next one while this thread plans. `Again`: lines to plan again (the window among them
    /// if it was not handed over).
    fn hand_over(
        &mut self,
        pipe: &mut Pipe,
        w: &Worker,
        line: usize,
        emit: &mut dyn FnMut(usize, Result<Output, Failure>),
    ) -> Land {
        if pipe.inflight.len() >= DEPTH {
            match self.land_oldest(pipe, w, emit) {
                Land::Clear => {}
                other => return other,
            }
        }
        let lpm = match self.window_maps(w) {
            Ok(lpm) => lpm,
            Err(f) => {
                // the windows before it first, as line by line: this one is still the window
                // being planned, undone (newest first) with whatever a trouble in those
                // undoes, and counted with it
                return match self.land_all(pipe, w, emit) {
                    Land::Clear => {
                        pipe.lines_of.clear();
                        let pending = std::mem::take(&mut pipe.window);
                        for (_, p) in pending.iter().rev() {
                            let _ = self.txn().undo(p);
                            self.gc_needed = true;
                        }
                        maps_failed(&pending, 0, &f, emit);
                        Land::Stop
                    }
                    other => other,
                };
            }
        };
        let mut pending = std::mem::take(&mut pipe.window);
        let lines = std::mem::take(&mut pipe.lines_of);
        // the requests move to the worker (a line planned again is encoded again; rolling
        // back builds its own)
        let reqs = pending
            .iter_mut()
            .map(|(_, p)| (std::mem::take(&mut p.req), p.op))
            .collect();
        if w.jobs.send(Job { lpm, reqs }).is_err() {
            for (_, p) in pending.iter().rev() {
                let _ = self.txn().undo(p);
            }
            let _ = self.land_all(pipe, w, emit);
            emit(line, Err(Failure::system("netlink sender thread gone")));
            return Land::Stop;
        }
        pipe.inflight.push_back(Flight { pending, lines });
        Land::Clear
    }

    /// Settle everything: the windows in flight (see [`Session::land_oldest`]), then the
    /// window being planned, sent and settled here.
    fn drain(
        &mut self,
        pipe: &mut Pipe,
        worker: Option<&Worker>,
        emit: &mut dyn FnMut(usize, Result<Output, Failure>),
    ) -> Land {
        if let Some(w) = worker {
            match self.land_all(pipe, w, emit) {
                Land::Clear => {}
                other => return other,
            }
        }
        pipe.lines_of.clear();
        if self.flush_window(&mut pipe.window, emit) {
            Land::Clear
        } else {
            Land::Stop
        }
    }

    /// Settle every window in flight, oldest first (see [`Session::land_oldest`]).
    fn land_all(
        &mut self,
        pipe: &mut Pipe,
        w: &Worker,
        emit: &mut dyn FnMut(usize, Result<Output, Failure>),
    ) -> Land {
        while !pipe.inflight.is_empty() {
            match self.land_oldest(pipe, w, emit) {
                Land::Clear => {}
                other => return other,
            }
        }
        Land::Clear
    }

    /// Settle the oldest window in flight, if any. Everything after it (the newer windows in
    /// flight, the window being planned) was planned on the assumption that all its lines
    /// stand: if one did not, those are undone, newest first and before it is settled, as
    /// running the lines in order would have it (the newer windows' routes the kernel took
    /// are deleted again), and their lines are returned to be planned again.
    fn land_oldest(
        &mut self,
        pipe: &mut Pipe,
        w: &Worker,
        emit: &mut dyn FnMut(usize, Result<Output, Failure>),
    ) -> Land {
        let Some(oldest) = pipe.inflight.pop_front() else {
            return Land::Clear;
        };
        let results = match w.answers() {
            Reply::Fib(r) => r,
            Reply::Maps(f) => {
                // none of its routes went to the FIB: the batch stops there, as when the maps
                // of a window planned here cannot be written
                let later = self.undo_after(pipe, w).len();
                for (_, p) in oldest.pending.iter().rev() {
                    let _ = self.txn().undo(p);
                    self.gc_needed = true;
                }
                maps_failed(&oldest.pending, later, &f, emit);
                return Land::Stop;
            }
        };
        if clean(&results) {
            return if self.settle_window(oldest.pending, results, emit) {
                Land::Clear
            } else {
                Land::Stop
            };
        }
        let again = self.undo_after(pipe, w);
        if !self.settle_window(oldest.pending, results, emit) {
            return Land::Stop;
        }
        if again.is_empty() {
            Land::Clear
        } else {
            Land::Again(again)
        }
    }

    /// A window's held-back map writes, before it goes to the worker: the state's made here,
    /// and the LPM tries' either here too, when the worker is the slower thread, or handed to
    /// it (returned) to make before the routes. So the two threads share the map writes as
    /// their loads go, and the maps still precede the FIB.
    fn window_maps(
        &mut self,
        w: &Worker,
    ) -> Result<Option<mpt_bpf::mproute::state::LpmWrites>, Failure> {
        match self.txn().hand_off_maps()? {
            Some(lpm) if w.behind.get() => lpm
                .write()
                .map(|()| None)
                .map_err(|e| Failure::bpf("write dataplane state", e)),
            other => Ok(other),
        }
    }

    /// Undo everything planned after the oldest window in flight, newest first: the window
    /// being planned, then the newer windows in flight (see [`Session::roll_back`]). Returns
    /// their lines, in order, to be planned again.
    fn undo_after(&mut self, pipe: &mut Pipe, w: &Worker) -> Vec<Line> {
        for (_, p) in pipe.window.drain(..).rev() {
            let _ = self.txn().undo(&p);
            // objects it created may serve the lines planned again: collected at the end
            self.gc_needed = true;
        }
        let planned = std::mem::take(&mut pipe.lines_of);
        let newer: Vec<Flight> = pipe.inflight.drain(..).collect();
        let replies: Vec<Reply> = newer.iter().map(|_| w.answers()).collect();
        let mut again = Vec::new();
        for (f, r) in newer.into_iter().zip(replies).rev() {
            self.roll_back(&f.pending, &r);
            let mut lines = f.lines;
            lines.append(&mut again);
            again = lines;
        }
        again.extend(planned);
        again
    }

    /// Take back a window the kernel was sent (newest line first): the routes it took are
    /// deleted again, every line's state and dataplane entries put back.
    fn roll_back(&mut self, pending: &[(usize, Pending)], reply: &Reply) {
        if matches!(reply, Reply::Fib(Err(_))) {
            // the socket failed: what the kernel holds is re-read when needed
            self.fib.clear();
        }
        for (i, (_, p)) in pending.iter().enumerate().rev() {
            if matches!(reply, Reply::Fib(Ok(v)) if v.get(i).is_some_and(Result::is_ok)) {
                self.delete_again(p);
            }
            let _ = self.txn().undo(p);
            self.gc_needed = true;
        }
    }

    /// Delete the route a pending line installed (best effort: rolling back).
    fn delete_again(&mut self, p: &Pending) {
        let del = rmsg::encode(&RouteRequest {
            verb: Verb::Del,
            key: p.key,
            metric_given: true,
            protocol: Some(p.protocol),
            nexthops: &[],
            form: PathForm::Multipath,
            algo: Algo::L3Hash,
            encap: None,
        });
        let op = format!("roll back {}", p.op);
        if let Ok(s) = self.sock() {
            let _ = s.request(&del, &op);
        }
    }

    /// The window's map writes, held back until now, before its routes go to the FIB; on
    /// failure the window is undone and reported, and the batch stops (`false`).
    fn maps_first(
        &mut self,
        pending: &[(usize, Pending)],
        emit: &mut dyn FnMut(usize, Result<Output, Failure>),
    ) -> bool {
        let Err(f) = self.txn().flush_maps() else {
            return true;
        };
        for (_, p) in pending.iter().rev() {
            let _ = self.txn().undo(p);
        }
        maps_failed(pending, 0, &f, emit);
        false
    }

    /// Send the pending requests and settle them in order; `false` if the batch must stop.
    pub(crate) fn flush_window(
        &mut self,
        window: &mut Vec<(usize, Pending)>,
        emit: &mut dyn FnMut(usize, Result<Output, Failure>),
    ) -> bool {
        if window.is_empty() {
            return true;
        }
        let pending: Vec<(usize, Pending)> = std::mem::take(window);
        if !self.maps_first(&pending, emit) {
            return false;
        }
        let reqs = pending.iter().map(|(_, p)| (&p.req, p.op));
        let results = self
            .sock()
            .and_then(|s| s.pipeline(reqs, pending.len()).map_err(Failure::from));
        self.settle_window(pending, results, emit)
    }

    /// Settle a window sent to the FIB with the kernel's answers (`Err`: the socket failed);
    /// `false` if the batch must stop.
    fn settle_window(
        &mut self,
        pending: Vec<(usize, Pending)>,
        results: Answers,
        emit: &mut dyn FnMut(usize, Result<Output, Failure>),
    ) -> bool {
        let results = match results {
            Ok(r) => r,
            Err(f) => {
                // The socket failed: we cannot know what the kernel applied; re-read it.
                self.fib.clear();
                // State and LPM entries back as they were (newest first), like a refusal.
                for (_, p) in pending.iter().rev() {
                    let _ = self.txn().undo(p);
                }
                for (line, _) in pending {
                    emit(line, Err(f.clone()));
                }
                return false;
            }
        };
        // Which lines stand: applied, refused, or rolled back (applied after a refused line
        // without --force).
        #[derive(Clone, Copy, PartialEq)]
        enum LineOutcome {
            Applied,
            Refused,
            RolledBack,
        }
        let force = self.opts.force;
        let mut verdict = Vec::with_capacity(results.len());
        let mut stopped = false;
        for r in &results {
            verdict.push(if stopped {
                LineOutcome::RolledBack
            } else if r.is_err() {
                stopped = !force;
                LineOutcome::Refused
            } else {
                LineOutcome::Applied
            });
        }
        // Undo newest first: two lines of one key each saved the state the other wrote.
        let mut unsettled: Vec<RouteKey> = Vec::new();
        for i in (0..pending.len()).rev() {
            if verdict[i] == LineOutcome::Applied {
                continue;
            }
            let p = &pending[i].1;
            unsettled.push(p.key);
            if (i + 1..pending.len())
                .any(|j| verdict[j] == LineOutcome::Applied && pending[j].1.key == p.key)
            {
                // A later line of the same route stands (--force): its state is the route's.
                self.gc_needed = true;
                continue;
            }
            if verdict[i] == LineOutcome::RolledBack && results[i].is_ok() {
                self.delete_again(p);
            }
            let _ = self.txn().undo(p);
            // Objects this line created may be used by applied lines: collect at the end.
            self.gc_needed = true;
        }
        // With --force, a refused line's entry may have kept a later applied line of the same
        // prefix out of the LPM trie (a lower metric wins there): each prefix an undone line
        // touched goes to its lowest-metric managed route again, as the FIB has it.
        if let Err(f) = self.resettle_lpm(&unsettled) {
            if let Some((line, _)) = pending.first() {
                emit(*line, Err(f));
            }
            stopped = true;
        }
        for ((i, (line, p)), res) in pending.into_iter().enumerate().zip(results) {
            match (verdict[i], res) {
                (LineOutcome::Applied, _) => {
                    emit(line, self.txn().settle_ok(p).map(crate::cmd::done))
                }
                (LineOutcome::Refused, Err(e)) => {
                    emit(line, Err(Failure::from(mpt_netlink::Error::Kernel(e))))
                }
                _ => {}
            }
        }
        !stopped
    }

    /// Point the LPM entry of each of these routes' prefix (and table) at the lowest-metric
    /// managed route of it in our state, or remove it if none is left.
    pub(crate) fn resettle_lpm(&mut self, keys: &[RouteKey]) -> Result<(), Failure> {
        if keys.is_empty() {
            return Ok(());
        }
        let Some(s) = self.store(false)? else {
            return Ok(());
        };
        let ctx = |e| Failure::bpf("write dataplane state", e);
        let all = s.all()?;
        let raw = s.bpf();
        // indexed once: a scan of the state per key made undoing (or repairing) many routes
        // quadratic
        let mut best_of: HashMap<(ipnet::IpNet, u32), (RouteKey, Managed)> = HashMap::new();
        for (o, m) in &all {
            let e = best_of.entry((o.dst, o.table)).or_insert((*o, *m));
            if o.metric < e.0.metric {
                *e = (*o, *m);
            }
        }
        let ids: HashSet<RouteKey> = all.iter().map(|(o, _)| *o).collect();
        let mut done: HashSet<(ipnet::IpNet, u32)> = HashSet::new();
        for k in keys {
            if !done.insert((k.dst, k.table)) {
                continue;
            }
            let best = best_of.get(&(k.dst, k.table)).map(|(o, m)| (o, m));
            let cur = raw.dp_get_route(k).map_err(ctx)?;
            // An entry of no managed route (an undone line's) goes first: dp_put_route would
            // keep it if its metric is lower. One of a managed route is folded by the put.
            if let Some(c) = cur {
                if !ids.contains(&c.id) {
                    raw.dp_delete_route(&c.id).map_err(ctx)?;
                }
            }
            if let Some((o, m)) = best {
                // already the best route's, as it should be (most undone lines): leave it
                if cur.is_some_and(|c| {
                    c.id == *o
                        && !c.resilient
                        && c.algo == m.algo
                        && c.group == m.group
                        && c.recipe == m.recipe
                }) {
                    continue;
                }
                raw.dp_put_route(o, m.algo, m.group, m.recipe)
                    .map_err(ctx)?;
            }
        }
        Ok(())
    }
}

//! Batches: the lines of a batch file run on one [`Session`]. Consecutive `add` lines are
//! pipelined (up to 256 requests in flight, several per `sendmsg`, acknowledgements matched by
//! sequence number); without `--force` a refused line stops the batch and the lines after it
//! that the kernel had already applied are rolled back, so the result is the same as running
//! the lines one by one.

use mpt_cli::render::Style;
use mpt_cli::Failure;
use mpt_model::{Algo, RouteKey, Verb};
use mpt_netlink::msg::rtnl::route::{self as rmsg, PathForm, RouteRequest};

use crate::cli::Command;
use crate::cmd::Output;
use crate::session::Session;
use crate::txn::{Pending, Planned};

impl mpt_cli::batch::BatchTool for Session {
    type Cmd = Command;
    type Out = Output;

    fn parse_line(&self, words: Vec<String>) -> Result<Command, Failure> {
        crate::cli::parse_line(words)
    }

    fn run_lines(
        &mut self,
        lines: Vec<(usize, Result<Command, Failure>)>,
        force: bool,
        emit: &mut dyn FnMut(usize, Result<Output, Failure>),
    ) {
        self.opts.force = force;
        self.batch(lines, emit);
    }

    fn print(out: &Output, style: Style) {
        crate::view::print(out, style);
    }

    fn finish(&mut self) -> Result<(), Failure> {
        Session::finish(self)
    }
}

impl Session {
    /// Run the lines of a batch (see the module doc). `emit` gets every line's outcome in
    /// order; returns `false` when the batch stopped at a failure.
    pub fn batch(
        &mut self,
        lines: Vec<(usize, Result<Command, Failure>)>,
        emit: &mut dyn FnMut(usize, Result<Output, Failure>),
    ) -> bool {
        const WINDOW: usize = 256;
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
        let mut window: Vec<(usize, Pending)> = Vec::new();
        for (line, cmd) in lines {
            if let Ok(Command::Write(spec)) = &cmd {
                if spec.verb == Verb::Add {
                    match self.plan(spec) {
                        Ok(Planned::Send(p)) => {
                            window.push((line, p));
                            if window.len() >= WINDOW && !self.flush_window(&mut window, emit) {
                                return false;
                            }
                        }
                        Ok(Planned::Unchanged(out)) => {
                            if !self.flush_window(&mut window, emit) {
                                return false;
                            }
                            emit(line, Ok(out));
                        }
                        Err(f) => {
                            if !self.flush_window(&mut window, emit) {
                                return false;
                            }
                            emit(line, Err(f));
                            if !force {
                                return false;
                            }
                        }
                    }
                    continue;
                }
            }
            if !self.flush_window(&mut window, emit) {
                return false;
            }
            let r = cmd.and_then(|c| crate::cmd::run(self, &c));
            let failed = r.is_err();
            emit(line, r);
            if failed && !force {
                return false;
            }
        }
        self.flush_window(&mut window, emit)
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
        // the window's map writes, held back until now, before its routes go to the FIB
        if let Err(f) = self.flush_maps() {
            for (_, p) in pending.iter().rev() {
                let _ = self.undo(p);
            }
            if let Some((line, p)) = pending.first() {
                let n = pending.len();
                emit(
                    *line,
                    Err(Failure::system(format!(
                        "{}: {} (this line and the {} after it were not installed)",
                        p.op,
                        f.message,
                        n - 1
                    ))),
                );
            }
            return false;
        }
        let reqs = pending.iter().map(|(_, p)| (&p.req, p.op));
        let results = match self
            .sock()
            .and_then(|s| s.pipeline(reqs, pending.len()).map_err(Failure::from))
        {
            Ok(r) => r,
            Err(f) => {
                // The socket failed: we cannot know what the kernel applied; re-read it.
                self.fib.clear();
                // State and LPM entries back as they were (newest first), like a refusal.
                for (_, p) in pending.iter().rev() {
                    let _ = self.undo(p);
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
            let _ = self.undo(p);
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
                (LineOutcome::Applied, _) => emit(line, self.settle_ok(p)),
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
        let ctx = |e| crate::store::fail("write dataplane state", e);
        let all = s.all()?;
        let raw = s.bpf();
        let mut done: Vec<(ipnet::IpNet, u32)> = Vec::new();
        for k in keys {
            if done.contains(&(k.dst, k.table)) {
                continue;
            }
            done.push((k.dst, k.table));
            let best = all
                .iter()
                .filter(|(o, _)| o.dst == k.dst && o.table == k.table)
                .min_by_key(|(o, _)| o.metric);
            let cur = raw.dp_get_route(&crate::store::to_key(k)).map_err(ctx)?;
            // An entry of no managed route (an undone line's) goes first: dp_put_route would
            // keep it if its metric is lower. One of a managed route is folded by the put.
            if let Some(c) = cur {
                if !all.iter().any(|(o, _)| crate::store::to_key(o) == c.id) {
                    raw.dp_delete_route(&c.id).map_err(ctx)?;
                }
            }
            if let Some((o, m)) = best {
                let (key, algo) = (crate::store::to_key(o), m.algo.as_u32() as u8);
                // already the best route's, as it should be (most undone lines): leave it
                if cur.is_some_and(|c| c.id == key && c.algo == algo && c.group == m.group) {
                    continue;
                }
                raw.dp_put_route(&key, algo, m.group).map_err(ctx)?;
            }
        }
        Ok(())
    }
}

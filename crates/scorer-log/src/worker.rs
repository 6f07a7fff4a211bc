//! The writer thread behind [`super::DecisionLog`]: drains the channel,
//! batches records, appends them to the write-ahead files, rolls them and
//! hands sealed files to the compaction thread (see [`super::writer`] for
//! the cadence). While writes fail (disk full, I/O error) it drops what it
//! drains, counted, and retries a write every [`WRITE_RETRY_MS`].

use std::sync::Arc;
use std::sync::PoisonError;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use super::LogKind;
use super::batch::{decisions_batch_sampled, outcomes_batch};
use super::compactor::Compactor;
use super::config::LogConfig;
use super::dir_lock::DirLock;
use super::error::LogError;
use super::record::{DecisionRecord, OutcomeRecord};
use super::rolling::{RollReason, RollingFile, SealedFile};
use super::source::Source;
use super::stats::Counters;
use super::writer::{
    DRAIN_BATCH, Msg, Shared, WRITER_APPEND_ROWS, WRITER_POLL_MS, WRITER_TICK_MS, len_u64,
};
use scorer_core::clock::Clock;

/// While writes fail, how often (ms) the writer tries one again.
pub const WRITE_RETRY_MS: u64 = 1_000;

/// State owned by the writer thread.
pub(crate) struct Worker {
    rx: Receiver<Msg>,
    cfg: LogConfig,
    clock: Arc<dyn Clock>,
    shared: Arc<Shared>,
    decisions: RollingFile,
    outcomes: RollingFile,
    pending_decisions: Vec<DecisionRecord>,
    pending_decision_rows: u64,
    pending_outcomes: Vec<OutcomeRecord>,
    /// Of the pending decisions and outcomes, how many are routers'.
    pending_router: [u64; 2],
    first_error: Option<LogError>,
    /// Set while writes fail: when to try one again (the clock's monotonic ms).
    retry_at: Option<u64>,
    compactor: Compactor,
    /// Held until the writer thread ends ([`super::dir_lock`]).
    _locks: Vec<DirLock>,
}

/// What the writer learns of a compaction: its counters and log lines.
pub(crate) fn compacted(shared: Arc<Shared>) -> super::compactor::OnDone {
    Box::new(move |kind, sealed, result| {
        let c = &shared.counters;
        Counters::sub(&c.open_rows, sealed.rows);
        match result {
            Ok(Some(done)) => {
                Counters::add(&c.written_rows, done.rows);
                Counters::add(&c.files, 1);
                Counters::add(&c.bytes, done.bytes);
                tracing::debug!(path = ?done.path, rows = done.rows,
                    bytes = done.bytes, "decision log file compacted");
            }
            Ok(None) => {}
            Err(e) => {
                Counters::add(&c.write_errors, 1);
                tracing::error!(error = %e, kind = kind.prefix(), wal = ?sealed.wal,
                    rows = sealed.rows, "decision log compaction failed; start-up recovery will retry");
            }
        }
    })
}

impl Worker {
    pub(crate) fn new(
        rx: Receiver<Msg>,
        cfg: LogConfig,
        clock: Arc<dyn Clock>,
        shared: Arc<Shared>,
        [decisions, outcomes]: [RollingFile; 2],
        compactor: Compactor,
        locks: Vec<DirLock>,
    ) -> Self {
        Self {
            rx,
            cfg,
            clock,
            shared,
            decisions,
            outcomes,
            pending_decisions: Vec::new(),
            pending_decision_rows: 0,
            pending_outcomes: Vec::new(),
            pending_router: [0; 2],
            first_error: None,
            retry_at: None,
            compactor,
            _locks: locks,
        }
    }

    pub(crate) fn run(mut self) -> Result<(), LogError> {
        let tick = Duration::from_millis(WRITER_TICK_MS);
        let poll = Duration::from_millis(WRITER_POLL_MS);
        let flush_every = Duration::from_millis(self.cfg.flush_ms);
        let mut last_flush = Instant::now();
        // Busy: records arrived during the last poll. The writer then sleeps
        // instead of blocking in `recv`, so senders never have to wake it.
        let mut busy = false;
        loop {
            let first = if busy {
                std::thread::sleep(poll);
                match self.rx.try_recv() {
                    Ok(msg) => Some(msg),
                    Err(TryRecvError::Empty) => None,
                    Err(TryRecvError::Disconnected) => break,
                }
            } else {
                match self.rx.recv_timeout(tick) {
                    Ok(msg) => Some(msg),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            };
            match first {
                Some(msg) => {
                    self.handle(msg);
                    let mut disconnected = false;
                    for _ in 1..DRAIN_BATCH {
                        match self.rx.try_recv() {
                            Ok(msg) => self.handle(msg),
                            Err(TryRecvError::Empty) => break,
                            Err(TryRecvError::Disconnected) => {
                                disconnected = true;
                                break;
                            }
                        }
                    }
                    if disconnected {
                        break;
                    }
                    busy = true;
                }
                None => {
                    // Traffic paused: write what is pending.
                    self.flush_all();
                    last_flush = Instant::now();
                    busy = false;
                }
            }
            if last_flush.elapsed() >= flush_every {
                self.flush_all();
                last_flush = Instant::now();
            }
            self.tick();
        }
        self.flush_all();
        for kind in [LogKind::Decisions, LogKind::Outcomes] {
            let result = self.file(kind).close();
            self.after_close(kind, result, None);
        }
        if let Some(e) = self.compactor.finish() {
            self.first_error.get_or_insert(e);
        }
        match self.first_error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn file(&mut self, kind: LogKind) -> &mut RollingFile {
        match kind {
            LogKind::Decisions => &mut self.decisions,
            LogKind::Outcomes => &mut self.outcomes,
        }
    }

    fn handle(&mut self, msg: Msg) {
        if let Msg::Decision(_, source) | Msg::Outcome(_, source) = &msg {
            Counters::sub(self.shared.counters.queued(*source), 1);
        }
        match &msg {
            Msg::Decision(_, Source::Router) => self.pending_router[0] += 1,
            Msg::Outcome(_, Source::Router) => self.pending_router[1] += 1,
            _ => {}
        }
        match msg {
            Msg::Decision(rec, _) => {
                self.pending_decision_rows = self
                    .pending_decision_rows
                    .saturating_add(len_u64(rec.candidates.len()));
                self.pending_decisions.push(*rec);
                let limit = self.flush_threshold(LogKind::Decisions);
                if self.pending_decision_rows >= WRITER_APPEND_ROWS
                    || len_u64(self.pending_decisions.len()) >= limit
                {
                    self.flush(LogKind::Decisions);
                }
            }
            Msg::Outcome(rec, _) => {
                self.pending_outcomes.push(rec);
                let limit = self.flush_threshold(LogKind::Outcomes);
                if len_u64(self.pending_outcomes.len()) >= limit {
                    self.flush(LogKind::Outcomes);
                }
            }
            Msg::Hold => self.park(),
        }
    }

    /// Pending file rows (decisions or outcomes) at which to write:
    /// [`WRITER_APPEND_ROWS`], a row group, or what the file can take,
    /// whichever is least. Decisions are also written once their candidates
    /// reach [`WRITER_APPEND_ROWS`].
    fn flush_threshold(&self, kind: LogKind) -> u64 {
        let file = match kind {
            LogKind::Decisions => &self.decisions,
            LogKind::Outcomes => &self.outcomes,
        };
        WRITER_APPEND_ROWS
            .min(len_u64(self.cfg.row_group_rows))
            .min(file.remaining_rows(&self.cfg))
    }

    fn park(&mut self) {
        self.flush_all();
        let shared = self.shared.clone();
        let mut st = shared.hold_state();
        if st.holds == 0 {
            return;
        }
        st.parked = true;
        shared.hold_cv.notify_all();
        while st.holds > 0 && !shared.closed.load(Ordering::SeqCst) {
            st = shared
                .hold_cv
                .wait_timeout(st, Duration::from_millis(WRITER_TICK_MS))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        st.parked = false;
    }

    fn flush_all(&mut self) {
        self.flush(LogKind::Decisions);
        self.flush(LogKind::Outcomes);
    }

    /// Writes the pending records of `kind` as one batch, then checks for a roll.
    fn flush(&mut self, kind: LogKind) {
        let records = match kind {
            LogKind::Decisions => self.pending_decisions.len(),
            LogKind::Outcomes => self.pending_outcomes.len(),
        };
        if records == 0 {
            return;
        }
        if self
            .retry_at
            .is_some_and(|at| self.clock.monotonic_ms() < at)
        {
            // Writes are failing: drop, counted, until the next try.
            let all = [self.pending_decisions.len(), self.pending_outcomes.len()];
            self.pending_decisions.clear();
            self.pending_decision_rows = 0;
            self.pending_outcomes.clear();
            self.count_dropped(LogKind::Decisions, len_u64(all[0]));
            self.count_dropped(LogKind::Outcomes, len_u64(all[1]));
            return;
        }
        let batch = match kind {
            LogKind::Decisions => {
                self.pending_decision_rows = 0;
                let all_features_below = self.cfg.sample_rate * self.cfg.candidate_features_rate;
                decisions_batch_sampled(
                    &std::mem::take(&mut self.pending_decisions),
                    all_features_below,
                )
            }
            LogKind::Outcomes => outcomes_batch(&std::mem::take(&mut self.pending_outcomes)),
        };
        let now = self.clock.wall_ms();
        let result = batch
            .map_err(LogError::from)
            .and_then(|b| self.file(kind).write(&b, now).map(|()| b.num_rows()));
        match result {
            Ok(rows) => {
                self.pending_router[kind_index(kind)] = 0;
                Counters::add(&self.shared.counters.open_rows, len_u64(rows));
                if self.retry_at.take().is_some() {
                    self.shared
                        .counters
                        .writes_failing
                        .store(0, Ordering::Relaxed);
                    tracing::warn!(
                        dropped = self.shared.counters.snapshot().dropped,
                        "decision log writes succeed again; logging resumed"
                    );
                }
                std::thread::yield_now();
            }
            Err(e) => {
                self.count_dropped(kind, len_u64(records));
                self.fail(kind, e);
                return;
            }
        }
        self.roll(kind, now);
    }

    /// Counts the `n` pending records of `kind` dropped, by source.
    fn count_dropped(&mut self, kind: LogKind, n: u64) {
        let router = std::mem::take(&mut self.pending_router[kind_index(kind)]).min(n);
        let c = &self.shared.counters;
        c.dropped(Source::Router, router);
        c.dropped(Source::Service, n - router);
    }

    /// Rolls both files if due (age without traffic).
    fn tick(&mut self) {
        let now = self.clock.wall_ms();
        self.roll(LogKind::Decisions, now);
        self.roll(LogKind::Outcomes, now);
    }

    fn roll(&mut self, kind: LogKind, now: u64) {
        let file = match kind {
            LogKind::Decisions => &mut self.decisions,
            LogKind::Outcomes => &mut self.outcomes,
        };
        let result = file.maybe_roll(now, &self.cfg);
        match result {
            Ok(Some((closed, reason))) => self.after_close(kind, Ok(Some(closed)), Some(reason)),
            Ok(None) => {}
            Err(e) => self.after_close(kind, Err(e), None),
        }
    }

    fn after_close(
        &mut self,
        kind: LogKind,
        result: Result<Option<SealedFile>, LogError>,
        reason: Option<RollReason>,
    ) {
        match result {
            Ok(Some(sealed)) => {
                tracing::debug!(wal = ?sealed.wal, rows = sealed.rows, ?reason,
                    "decision log file sealed");
                self.compactor.submit(kind, sealed);
            }
            Ok(None) => {}
            Err(e) => self.fail(kind, e),
        }
    }

    /// Records a write failure: the open file of `kind` is abandoned (its
    /// write-ahead file left for start-up recovery, which keeps the rows
    /// written before the failure), and records are dropped (counted) until
    /// a write [`WRITE_RETRY_MS`] later succeeds.
    fn fail(&mut self, kind: LogKind, e: LogError) {
        let kept = self.file(kind).abandon();
        let c = &self.shared.counters;
        Counters::sub(&c.open_rows, kept);
        Counters::add(&c.write_errors, 1);
        if self.retry_at.is_none() {
            c.writes_failing.store(1, Ordering::Relaxed);
            tracing::error!(error = %e, kind = kind.prefix(), rows_left_for_recovery = kept,
                retry_ms = WRITE_RETRY_MS,
                "decision log write failed; dropping records (counted) until a write succeeds");
        } else {
            tracing::debug!(error = %e, kind = kind.prefix(), "decision log write failed again");
        }
        self.retry_at = Some(self.clock.monotonic_ms().saturating_add(WRITE_RETRY_MS));
        if self.first_error.is_none() {
            self.first_error = Some(e);
        }
    }
}

fn kind_index(kind: LogKind) -> usize {
    match kind {
        LogKind::Decisions => 0,
        LogKind::Outcomes => 1,
    }
}

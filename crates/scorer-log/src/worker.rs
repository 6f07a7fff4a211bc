//! The writer thread behind [`super::DecisionLog`]: drains the channel,
//! batches records, appends them to the write-ahead files, rolls them and
//! hands sealed files to the compaction thread (see [`super::writer`] for
//! the cadence). While writes fail (disk full, I/O error) it holds what it
//! could not write — in the same write-ahead file, which resumes where the
//! write stopped — takes nothing more from the channel, and retries every
//! [`WRITE_RETRY_MS`]; once a retry succeeds it writes everything held and
//! rolls the files, so their rows reach Parquet without a restart.

use std::sync::Arc;
use std::sync::PoisonError;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use super::LogKind;
use arrow::array::RecordBatch;

use super::batch::{decisions_batch_sampled, outcomes_batch};
use super::compact::CompactError;
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
    /// A batch of decisions or outcomes no file could be opened for,
    /// written at the next retry.
    unopened: [Option<RecordBatch>; 2],
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
        if !matches!(result, Err(CompactError::Log(_))) {
            // Compacted, or unreadable: no longer waiting (a write failure
            // is retried by the compactor).
            Counters::sub(&c.open_rows, sealed.rows);
        }
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
                    rows = sealed.rows, "decision log compaction failed; tried again before the next one, then at start-up");
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
            unopened: [None, None],
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
            if self.retry_at.is_some() {
                // Writes fail: take nothing more from the channel (it fills,
                // and the request path drops at its door, counted) until
                // what is held is written.
                let closing = self.shared.closed.load(Ordering::SeqCst);
                self.retry(closing);
                if self.retry_at.is_some() {
                    if closing {
                        break;
                    }
                    std::thread::sleep(poll);
                    continue;
                }
            }
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
        if self.retry_at.is_some() {
            self.give_up();
        }
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
            Msg::Durable(kind, batch, done) => {
                let _ = done.send(self.append_durable(kind, batch));
            }
        }
    }

    /// Writes what is pending of `kind`, then `batch` as it is; `Ok` once
    /// both are in the write-ahead file.
    fn append_durable(&mut self, kind: LogKind, batch: RecordBatch) -> Result<(), String> {
        self.flush(kind);
        if self.retry_at.is_some() {
            return Err("decision log writes are failing".to_owned());
        }
        let rows = len_u64(batch.num_rows());
        let now = self.clock.wall_ms();
        if !self.write_batch(kind, batch, now) {
            return Err("decision log write failed; the batch is held for a retry".to_owned());
        }
        let logged = match kind {
            LogKind::Decisions => &self.shared.counters.decisions_logged,
            LogKind::Outcomes => &self.shared.counters.outcomes_logged,
        };
        Counters::add(logged, rows);
        self.roll(kind, now);
        Ok(())
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

    /// Writes the pending records of `kind` as one batch, then checks for a
    /// roll. While writes fail, the records wait (see [`Worker::retry`]).
    fn flush(&mut self, kind: LogKind) {
        let records = match kind {
            LogKind::Decisions => self.pending_decisions.len(),
            LogKind::Outcomes => self.pending_outcomes.len(),
        };
        if records == 0 || self.retry_at.is_some() {
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
        let batch = match batch {
            Ok(b) => b,
            Err(e) => {
                // Records that do not make a batch: no retry helps.
                self.count_dropped(kind, len_u64(records));
                Counters::add(&self.shared.counters.write_errors, 1);
                tracing::error!(error = %e, kind = kind.prefix(), records,
                    "decision log records dropped: they do not make a batch");
                return;
            }
        };
        let now = self.clock.wall_ms();
        if self.write_batch(kind, batch, now) {
            std::thread::yield_now();
            self.roll(kind, now);
        }
    }

    /// Writes `batch` to the file of `kind`. On failure the batch is kept —
    /// in the file's memory, or here when no file could be opened — for
    /// [`Worker::retry`], and the writer [fails](Worker::fail). Returns
    /// whether the write succeeded.
    fn write_batch(&mut self, kind: LogKind, batch: RecordBatch, now: u64) -> bool {
        let rows = len_u64(batch.num_rows());
        let i = kind_index(kind);
        let result = self.file(kind).write(&batch, now);
        let kept = result.is_ok() || self.file(kind).pending();
        if kept {
            self.pending_router[i] = 0;
            Counters::add(&self.shared.counters.open_rows, rows);
        }
        match result {
            Ok(()) => true,
            Err(e) => {
                if !kept {
                    if self.file(kind).is_open() {
                        // The file took nothing: the batch does not fit it.
                        self.count_dropped(kind, rows);
                    } else {
                        self.unopened[i] = Some(batch);
                    }
                }
                self.fail(kind, e);
                false
            }
        }
    }

    /// While writes fail, once the retry is due (or `now` when `force`d, at
    /// shutdown): writes what the files hold, in the same files, and the
    /// batches no file could be opened for. When all succeed logging
    /// resumes: the records held meanwhile are written too and both files
    /// are rolled at once, so every row held through the failure reaches
    /// its Parquet file without a restart.
    fn retry(&mut self, force: bool) {
        if !force
            && self
                .retry_at
                .is_some_and(|at| self.clock.monotonic_ms() < at)
        {
            return;
        }
        let now = self.clock.wall_ms();
        for kind in [LogKind::Decisions, LogKind::Outcomes] {
            if let Err(e) = self.file(kind).retry() {
                self.fail(kind, e);
                return;
            }
            if let Some(batch) = self.unopened[kind_index(kind)].take()
                && !self.write_batch(kind, batch, now)
            {
                return;
            }
        }
        self.retry_at = None;
        let c = &self.shared.counters;
        c.writes_failing.store(0, Ordering::Relaxed);
        tracing::warn!(
            dropped = c.snapshot().dropped,
            "decision log writes succeed again; logging resumed"
        );
        self.flush_all();
        for kind in [LogKind::Decisions, LogKind::Outcomes] {
            let result = self.file(kind).close();
            self.after_close(kind, result, None);
        }
    }

    /// At shutdown on a disk that still fails: counts as dropped what could
    /// not be written — the rows the files hold in memory, the pending
    /// records, the batches no file took and what is left in the channel.
    /// The files keep what reached the disk, for start-up recovery.
    fn give_up(&mut self) {
        let held = [
            len_u64(self.pending_decisions.len()),
            len_u64(self.pending_outcomes.len()),
        ];
        self.pending_decisions.clear();
        self.pending_decision_rows = 0;
        self.pending_outcomes.clear();
        for kind in [LogKind::Decisions, LogKind::Outcomes] {
            let i = kind_index(kind);
            let unopened = self.unopened[i].take().map_or(0, |b| len_u64(b.num_rows()));
            let in_file = self.file(kind).pending_rows();
            Counters::sub(&self.shared.counters.open_rows, in_file);
            self.count_dropped(kind, held[i] + unopened + in_file);
        }
        let c = &self.shared.counters;
        while let Ok(msg) = self.rx.try_recv() {
            if let Msg::Decision(_, source) | Msg::Outcome(_, source) = msg {
                Counters::sub(c.queued(source), 1);
                c.dropped(source, 1);
            }
        }
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

    /// Records a write failure: what could not be written is held (in the
    /// file, which resumes where it stopped, or as a batch), the writer
    /// takes nothing more from the channel, and every [`WRITE_RETRY_MS`] it
    /// tries the write again ([`Worker::retry`]).
    fn fail(&mut self, kind: LogKind, e: LogError) {
        let c = &self.shared.counters;
        Counters::add(&c.write_errors, 1);
        if self.retry_at.is_none() {
            c.writes_failing.store(1, Ordering::Relaxed);
            tracing::error!(error = %e, kind = kind.prefix(), retry_ms = WRITE_RETRY_MS,
                "decision log write failed; holding what is written until a write succeeds \
                 (records the full queue cannot take are dropped, counted)");
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

//! [`DecisionLog`]: the request-path handle and its background writer thread.
//!
//! The request path only checks sampling and does a non-blocking `try_send` on one
//! bounded channel shared by decisions and outcomes; it never waits on I/O or on
//! the writer. Each [`Source`] has its own budget of the channel's slots
//! (`channel_capacity` for the service's records, `router_queue_share` of
//! it for routers'), so one source's flood never drops the other's. One thread drains the channel, buffers records until
//! `min(`[`WRITER_APPEND_ROWS`]`, row_group_rows, rows left before max_rows)`
//! rows (or [`WRITER_APPEND_ROWS`] candidates) are pending, traffic pauses for a poll interval, or
//! `log.flush_ms` passed, converts them to one `RecordBatch` and appends
//! it to the write-ahead file of its kind, flushed to the kernel: from then
//! on a crash of the process loses none of it. At roll-over the sealed file
//! goes to the compaction thread ([`super::compactor`]), which writes the
//! Parquet file (cutting row groups of `row_group_rows`). Appending after every lull wrote one-decision
//! batches whose fixed cost took a quarter of a 2-core machine at 3 000
//! decisions/s; appending whole row groups encoded in ~0.1 s bursts that
//! requests queued behind. After each append
//! and at least every [`WRITER_TICK_MS`] it asks [`roll_reason`](super::rolling::roll_reason) whether
//! to roll. A decisions file counts one row per decision (its candidates are
//! nested in it), so `max_rows` and `row_group_rows` count decisions there.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;

use super::LogKind;
use super::compactor::Compactor;
use super::config::LogConfig;
use super::dir_lock::{DirLock, lock_dir};
use super::error::LogError;
use super::record::{DecisionRecord, OutcomeRecord};
use super::recovery::recover_dir_with;
use super::rolling::{RollingFile, writer_properties};
use super::sampling::sampled_at;
use super::source::Source;
use super::stats::{Counters, LogStats};
use super::wal::{WalOpener, file_opener};
use super::worker::{Worker, compacted};
use scorer_core::clock::Clock;

/// The writer thread wakes at least this often (ms) to check age-based rolls.
pub const WRITER_TICK_MS: u64 = 100;
/// While records keep arriving, the writer sleeps this long (ms) between
/// drains instead of blocking on the channel: a blocked receiver costs every
/// sender a wake-up system call, a sleeping one costs them nothing.
pub const WRITER_POLL_MS: u64 = 10;
/// Pending candidates (or outcome rows) at which the writer appends them
/// (when below `row_group_rows`), yielding the CPU after each append: 512
/// candidate rows were ~1 ms of encoding, all a score call on a shared core waits
/// behind it. 4 096 rows gave a p99 of 6.2 ms at 8 connections
/// (`http_score` bench) against 3.4–4.0; at 128 the writer fell behind.
pub const WRITER_APPEND_ROWS: u64 = 512;
/// Messages drained in one go before the writer re-checks rolls.
pub const DRAIN_BATCH: usize = 4_096;
/// [`DecisionLog::hold_writer`] waits at most this long (ms) for the writer to park.
pub const HOLD_ACK_TIMEOUT_MS: u64 = 5_000;
/// Name of the writer thread.
pub const WRITER_THREAD_NAME: &str = "decision-log-writer";

/// A queued message; a decision is boxed because the bounded channel
/// allocates every slot up front (inline, 65 536 slots were ~19 MB).
pub(crate) enum Msg {
    Decision(Box<DecisionRecord>, Source),
    Outcome(OutcomeRecord, Source),
    /// Park until every [`WriterHold`] is dropped (or shutdown).
    Hold,
    /// A batch already in its kind's schema, to append as it is; `done`
    /// hears whether it reached the write-ahead file.
    Durable(LogKind, RecordBatch, SyncSender<Result<(), String>>),
}

#[derive(Debug, Default)]
pub(crate) struct HoldState {
    pub(crate) holds: usize,
    pub(crate) parked: bool,
}

#[derive(Debug, Default)]
pub(crate) struct Shared {
    pub(crate) counters: Counters,
    pub(crate) closed: AtomicBool,
    pub(crate) hold: Mutex<HoldState>,
    pub(crate) hold_cv: Condvar,
}

impl Shared {
    pub(crate) fn hold_state(&self) -> std::sync::MutexGuard<'_, HoldState> {
        self.hold.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Handle to the decision log; `Send + Sync`, share it behind an `Arc`.
///
/// Dropping it runs [`DecisionLog::shutdown`].
#[derive(Debug)]
pub struct DecisionLog {
    enabled: bool,
    sample_rate: f64,
    /// The service's own records the channel holds.
    capacity: usize,
    /// Routers' records the channel holds, beside the service's.
    router_capacity: usize,
    tx: RwLock<Option<SyncSender<Msg>>>,
    /// Held while a [`DecisionLog::append_durable`] waits: one at a time,
    /// in the one slot the channel keeps for it.
    durable: Mutex<()>,
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<Result<(), LogError>>>>,
}

/// While alive, the writer thread does not drain the channel. For tests and
/// benchmarks only (backpressure); see [`DecisionLog::hold_writer`].
#[derive(Debug)]
#[must_use = "the writer resumes as soon as the hold is dropped"]
pub struct WriterHold {
    shared: Option<Arc<Shared>>,
}

impl Drop for WriterHold {
    fn drop(&mut self) {
        if let Some(shared) = &self.shared {
            let mut st = shared.hold_state();
            st.holds = st.holds.saturating_sub(1);
            shared.hold_cv.notify_all();
        }
    }
}

impl DecisionLog {
    /// Validates `cfg`; when enabled, creates the decisions and outcomes
    /// directories, runs start-up [recovery](super::recovery) on both (counted in
    /// `recovered`/`quarantined`), and spawns the writer thread. `clock` stamps file
    /// names, partitions and age rolls (`wall_ms`).
    ///
    /// When `cfg.enabled` is false nothing is touched on disk and the returned log
    /// refuses every record: `log_*` and `sampled` return false and count nothing
    /// (a disabled log is not losing data anyone asked for).
    ///
    /// # Errors
    /// [`LogError::Config`] for an invalid config, [`LogError::Io`] if a directory
    /// cannot be created or recovery fails, [`LogError::Thread`] if the thread
    /// cannot be spawned.
    pub fn start(cfg: LogConfig, clock: Arc<dyn Clock>) -> Result<DecisionLog, LogError> {
        Self::start_with_opener(cfg, clock, file_opener())
    }

    /// [`DecisionLog::start`], creating the write-ahead files with `opener`
    /// (tests inject failing files here; [`file_opener`] is the real one).
    ///
    /// # Errors
    /// As [`DecisionLog::start`].
    pub fn start_with_opener(
        cfg: LogConfig,
        clock: Arc<dyn Clock>,
        opener: WalOpener,
    ) -> Result<DecisionLog, LogError> {
        cfg.validate().map_err(LogError::Config)?;
        let shared = Arc::new(Shared::default());
        if !cfg.enabled {
            return Ok(DecisionLog {
                enabled: false,
                sample_rate: cfg.sample_rate,
                capacity: 0,
                router_capacity: 0,
                tx: RwLock::new(None),
                durable: Mutex::new(()),
                shared,
                thread: Mutex::new(None),
            });
        }
        let outcomes_dir = cfg.resolved_outcomes_dir();
        // Lock both directories before recovery touches either (a second
        // service must not quarantine the first one's open files).
        let mut locks: Vec<DirLock> = Vec::with_capacity(2);
        for dir in [&cfg.dir, &outcomes_dir] {
            std::fs::create_dir_all(dir).map_err(|e| LogError::io(dir, e))?;
            let canonical = std::fs::canonicalize(dir).map_err(|e| LogError::io(dir, e))?;
            if !locks.iter().any(|l| l.dir() == canonical) {
                locks.push(lock_dir(&canonical)?);
            }
        }
        for dir in [&cfg.dir, &outcomes_dir] {
            let report = recover_dir_with(dir, &writer_properties(&cfg))?;
            let c = &shared.counters;
            Counters::add(&c.recovered, len_u64(report.recovered.len()));
            Counters::add(&c.quarantined, len_u64(report.quarantined.len()));
        }
        let sample_rate = cfg.sample_rate;
        let capacity = cfg.channel_capacity;
        let router_capacity = cfg.router_capacity();
        let st = shared.counters.snapshot();
        tracing::info!(dir = ?cfg.dir, outcomes_dir = ?outcomes_dir,
            sample_rate, candidate_features_rate = cfg.candidate_features_rate,
            recovered = st.recovered, quarantined = st.quarantined, "decision log started");
        let decisions =
            RollingFile::new(cfg.dir.clone(), LogKind::Decisions, &cfg).with_opener(opener.clone());
        let outcomes = RollingFile::new(outcomes_dir, LogKind::Outcomes, &cfg).with_opener(opener);
        let compactor = Compactor::spawn(writer_properties(&cfg), compacted(shared.clone()))?;
        // Each source's slots, one for a hold and one for a durable append,
        // so that a send within a source's budget always finds a free slot.
        let (tx, rx) = std::sync::mpsc::sync_channel(capacity + router_capacity + 2);
        let worker = Worker::new(
            rx,
            cfg,
            clock,
            shared.clone(),
            [decisions, outcomes],
            compactor,
            locks,
        );
        let handle = std::thread::Builder::new()
            .name(WRITER_THREAD_NAME.to_string())
            .spawn(move || worker.run())
            .map_err(|e| LogError::Thread(e.to_string()))?;
        Ok(DecisionLog {
            enabled: true,
            sample_rate,
            capacity,
            router_capacity,
            tx: RwLock::new(Some(tx)),
            durable: Mutex::new(()),
            shared,
            thread: Mutex::new(Some(handle)),
        })
    }

    /// Whether `decision_id` is in the sample: [`sampled_at`]`(decision_id,
    /// sample_rate)`, a stable hash of the id, so a decision and all its outcomes
    /// are kept or skipped together, in every process. False when disabled.
    pub fn sampled(&self, decision_id: &str) -> bool {
        self.enabled && sampled_at(decision_id, self.sample_rate)
    }

    /// Queues one of the service's own decisions without blocking. Returns
    /// true if accepted; false if not sampled, disabled or shut down (none
    /// counted), or if the service's share of the channel is full or the
    /// writer is gone (counted in `dropped_service`).
    pub fn log_decision(&self, rec: DecisionRecord) -> bool {
        self.log_decision_from(Source::Service, rec)
    }

    /// Queues an outcome of one of the service's decisions without
    /// blocking, kept iff its decision is [sampled](Self::sampled). Returns
    /// as [`DecisionLog::log_decision`].
    pub fn log_outcome(&self, rec: OutcomeRecord) -> bool {
        self.log_outcome_from(Source::Service, rec)
    }

    /// Queues a decision of `source`, within that source's budget of the
    /// channel (`channel_capacity` for the service, `router_queue_share`
    /// of it for routers): a full budget drops the record, counted for its
    /// source, and never takes the other source's slots.
    pub fn log_decision_from(&self, source: Source, rec: DecisionRecord) -> bool {
        if !self.sampled(&rec.decision_id) {
            return false;
        }
        self.offer(Msg::Decision(Box::new(rec), source), source, true)
    }

    /// Queues an outcome of `source`, as [`DecisionLog::log_decision_from`].
    pub fn log_outcome_from(&self, source: Source, rec: OutcomeRecord) -> bool {
        if !self.sampled(&rec.decision_id) {
            return false;
        }
        self.offer(Msg::Outcome(rec, source), source, false)
    }

    fn budget(&self, source: Source) -> u64 {
        len_u64(match source {
            Source::Service => self.capacity,
            Source::Router => self.router_capacity,
        })
    }

    fn offer(&self, msg: Msg, source: Source, decision: bool) -> bool {
        let guard = self.tx.read().unwrap_or_else(PoisonError::into_inner);
        let Some(tx) = guard.as_ref() else {
            return false;
        };
        let c = &self.shared.counters;
        let budget = self.budget(source);
        let queued = c.queued(source);
        let reserved = queued
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < budget).then_some(n + 1)
            })
            .is_ok();
        if !reserved {
            c.dropped(source, 1);
            return false;
        }
        match tx.try_send(msg) {
            Ok(()) => {
                let counter = if decision {
                    &c.decisions_logged
                } else {
                    &c.outcomes_logged
                };
                Counters::add(counter, 1);
                true
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                Counters::sub(queued, 1);
                c.dropped(source, 1);
                false
            }
        }
    }

    /// Appends `batch` (records of `kind` in [`LogKind::schema`], already
    /// sampled) to the log as it is, after what was queued before it, and
    /// blocks until it is in the write-ahead file (flushed to the kernel,
    /// and fsynced with `log.fsync = "batch"`): from then on a crash of the
    /// process no longer loses it. For a consumer that acknowledges what
    /// it wrote (the bus's log writers); never call it on a request path.
    ///
    /// # Errors
    /// A batch not in the kind's schema (nothing written), the log
    /// disabled or shut down, or a failed write: the batch is then held
    /// and written once writes succeed again, but is not durable yet.
    pub fn append_durable(&self, kind: LogKind, batch: RecordBatch) -> Result<(), LogError> {
        if batch.schema().fields() != kind.schema().fields() {
            return Err(LogError::Rejected(format!(
                "the batch is not in the {} schema",
                kind.prefix()
            )));
        }
        let tx = self
            .tx
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| LogError::Rejected("the log is disabled or shut down".to_owned()))?;
        let _one = self.durable.lock().unwrap_or_else(PoisonError::into_inner);
        let (done, heard) = std::sync::mpsc::sync_channel(1);
        tx.send(Msg::Durable(kind, batch, done))
            .map_err(|_| LogError::Rejected("the writer is gone".to_owned()))?;
        drop(tx);
        match heard.recv() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(why)) => Err(LogError::Rejected(why)),
            Err(_) => Err(LogError::Rejected("the writer is gone".to_owned())),
        }
    }

    /// The service's own records the channel can take now without dropping
    /// (an estimate: other threads may fill it meanwhile). 0 when disabled
    /// or closed.
    pub fn room(&self) -> usize {
        self.room_of(Source::Service)
    }

    /// Routers' records the channel can take now without dropping, within
    /// their budget (`router_queue_share`); as [`DecisionLog::room`].
    pub fn router_room(&self) -> usize {
        self.room_of(Source::Router)
    }

    fn room_of(&self, source: Source) -> usize {
        if !self.enabled || self.shared.closed.load(Ordering::Relaxed) {
            return 0;
        }
        let queued = self.shared.counters.queued(source).load(Ordering::Relaxed);
        usize::try_from(self.budget(source).saturating_sub(queued)).unwrap_or(usize::MAX)
    }

    /// A snapshot of the counters (see [`LogStats`] for each one's meaning).
    pub fn stats(&self) -> LogStats {
        self.shared.counters.snapshot()
    }

    /// For tests and benchmarks: parks the writer thread until the returned guard
    /// is dropped, so the channel fills and backpressure can be observed. Returns
    /// once the writer has processed everything queued before the call and parked
    /// (or after [`HOLD_ACK_TIMEOUT_MS`]). While parked the writer neither drains
    /// nor rolls by age. [`DecisionLog::shutdown`] overrides a hold. On a disabled
    /// or shut-down log the guard does nothing.
    pub fn hold_writer(&self) -> WriterHold {
        let tx = self
            .tx
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let Some(tx) = tx else {
            return WriterHold { shared: None };
        };
        let already_parked = {
            let mut st = self.shared.hold_state();
            st.holds += 1;
            st.parked
        };
        // The writer is draining unless already parked, so this send completes.
        if !already_parked && tx.send(Msg::Hold).is_err() {
            // Writer gone: nothing to hold.
            return WriterHold {
                shared: Some(self.shared.clone()),
            };
        }
        drop(tx);
        let deadline = Instant::now() + Duration::from_millis(HOLD_ACK_TIMEOUT_MS);
        let mut st = self.shared.hold_state();
        while !st.parked {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            st = self
                .shared
                .hold_cv
                .wait_timeout(st, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        drop(st);
        WriterHold {
            shared: Some(self.shared.clone()),
        }
    }

    /// Stops accepting records, lets the writer drain everything already accepted,
    /// closes (fsync + rename) the open files and joins the thread. Overrides any
    /// [`WriterHold`]. Idempotent: later calls return `Ok(())`.
    ///
    /// # Errors
    /// The first write/close error the writer hit during its life (its rows were
    /// lost; counted in `write_errors`), or [`LogError::Thread`] if it panicked.
    pub fn shutdown(&self) -> Result<(), LogError> {
        self.shared.closed.store(true, Ordering::SeqCst);
        {
            let _st = self.shared.hold_state();
            self.shared.hold_cv.notify_all();
        }
        // Dropping the only sender disconnects the channel once it is drained.
        drop(
            self.tx
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        let handle = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match handle {
            None => Ok(()),
            Some(h) => h
                .join()
                .unwrap_or_else(|_| Err(LogError::Thread("writer thread panicked".into()))),
        }
    }
}

impl Drop for DecisionLog {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::error!(error = %e, "decision log shutdown failed");
        }
    }
}

pub(crate) fn len_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

#[cfg(test)]
#[path = "writer_tests.rs"]
mod tests;

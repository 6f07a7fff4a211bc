//! The router's decisions and outcomes on their way to the service's
//! decision log: a bounded, lock-free buffer that a pick pushes to and the
//! reporter ([`crate::report_records`], feature `http`) drains.
//!
//! It samples as the service's log does ([`sampled_at`] of the decision id
//! at `log.sample_rate`), so a router sends exactly the rows the service
//! would have logged, with the pick's features always and every
//! candidate's on the `candidate_features_rate` sample. When the buffer is
//! full (the service is away or slow) a record is dropped and counted; a
//! pick never waits.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_queue::ArrayQueue;
use scorer_core::clock::Clock;
use scorer_engine::DecisionSink;
use scorer_engine::router_records::{RouterDecision, RouterOutcome, RouterRecords};
use scorer_log::sampling::sampled_at;
use scorer_log::{DecisionRecord, LogConfig, OutcomeRecord};

/// Default [`RecordBuffer`] capacity, records: about 13 s of a router
/// making 5 000 decisions a second.
pub const DEFAULT_RECORD_BUFFER: usize = 65_536;

/// A decision or an outcome waiting to be sent.
#[derive(Debug)]
enum Record {
    Decision(Box<DecisionRecord>),
    Outcome(OutcomeRecord),
}

/// What a [`RecordBuffer`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct RecordStats {
    /// Records taken into the buffer.
    pub queued: u64,
    /// Records dropped because the buffer was full.
    pub dropped: u64,
    /// Records the service accepted (logged, or skipped as unsampled).
    pub sent: u64,
    /// Records the service refused as invalid.
    pub refused: u64,
    /// Batches that failed or timed out (then retried).
    pub posts_failed: u64,
    /// Records waiting now.
    pub waiting: u64,
}

/// The bounded buffer of a router's decision-log records.
pub struct RecordBuffer {
    queue: ArrayQueue<Record>,
    sample_rate: f64,
    all_features_below: f64,
    clock: Arc<dyn Clock>,
    queued: AtomicU64,
    dropped: AtomicU64,
    pub(crate) sent: AtomicU64,
    pub(crate) refused: AtomicU64,
    pub(crate) posts_failed: AtomicU64,
}

impl std::fmt::Debug for RecordBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordBuffer")
            .field("capacity", &self.queue.capacity())
            .field("sample_rate", &self.sample_rate)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl RecordBuffer {
    /// A buffer of `capacity` records (at least 1), sampling as `log`
    /// (the service's `log` section), stamping rows with `clock`'s wall
    /// time.
    pub fn new(capacity: usize, log: &LogConfig, clock: Arc<dyn Clock>) -> Self {
        Self {
            queue: ArrayQueue::new(capacity.max(1)),
            sample_rate: if log.enabled { log.sample_rate } else { 0.0 },
            all_features_below: log.sample_rate * log.candidate_features_rate,
            clock,
            queued: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            posts_failed: AtomicU64::new(0),
        }
    }

    /// Wall clock now, Unix ms.
    pub fn wall_ms(&self) -> u64 {
        self.clock.wall_ms()
    }

    fn offer(&self, r: Record) -> bool {
        match self.queue.push(r) {
            Ok(()) => {
                self.queued.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(_) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// The counters.
    pub fn stats(&self) -> RecordStats {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        RecordStats {
            queued: get(&self.queued),
            dropped: get(&self.dropped),
            sent: get(&self.sent),
            refused: get(&self.refused),
            posts_failed: get(&self.posts_failed),
            waiting: self.queue.len() as u64,
        }
    }

    /// Records waiting.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Take up to `max` records, oldest first, as the body of
    /// `POST /v1/router/decisions` from `router_id`; `None` when none waits.
    pub fn drain(&self, router_id: &str, max: usize) -> Option<RouterRecords> {
        let mut batch = RouterRecords {
            router_id: router_id.to_owned(),
            decisions: Vec::new(),
            outcomes: Vec::new(),
        };
        for _ in 0..max {
            match self.queue.pop() {
                Some(Record::Decision(d)) => {
                    let all = sampled_at(&d.decision_id, self.all_features_below);
                    batch.decisions.push(RouterDecision::from_record(&d, all));
                }
                Some(Record::Outcome(o)) => batch.outcomes.push(RouterOutcome::from_record(&o)),
                None => break,
            }
        }
        (!batch.decisions.is_empty() || !batch.outcomes.is_empty()).then_some(batch)
    }
}

impl DecisionSink for RecordBuffer {
    fn sampled(&self, decision_id: &str) -> bool {
        sampled_at(decision_id, self.sample_rate)
    }

    fn log_decision(&self, rec: DecisionRecord) -> bool {
        self.sampled(&rec.decision_id) && self.offer(Record::Decision(Box::new(rec)))
    }

    fn log_outcome(&self, rec: OutcomeRecord) -> bool {
        self.sampled(&rec.decision_id) && self.offer(Record::Outcome(rec))
    }
}

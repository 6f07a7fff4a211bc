//! The records a replica on the bus accepts — its own decisions and
//! outcomes, and the routers' posted to it — go to the `SCORER_DECISIONS`
//! stream instead of a local log: [`BusSink`] is the engine's sink, a
//! bounded outbox the request path offers to without waiting (a full one
//! drops the record, counted in `scorer_bus_dropped_total{kind}`), and
//! [`publish`] cuts it into the log's own record batches, every
//! [`RECORDS_BATCH`] records or [`RECORDS_BATCH_MS`], off the request
//! thread.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use scorer_bus::arrow::array::RecordBatch;
use scorer_bus::arrow::error::ArrowError;
use scorer_bus::records::kind_label;
use scorer_bus::{Bus, BusCounters};
use scorer_log::batch::decisions_batch_sampled;
use scorer_log::{
    DecisionRecord, DecisionSink, LogConfig, LogKind, OutcomeRecord, outcomes_batch, sampled_at,
};
use tokio::sync::mpsc;

/// Records per published batch, at most (before a batch is cut to fit
/// `bus.max_message_bytes`).
pub const RECORDS_BATCH: usize = 512;
/// The longest a record waits in the outbox for its batch to fill, ms.
pub const RECORDS_BATCH_MS: u64 = 5;

/// One record waiting to be published.
#[derive(Debug)]
pub enum Outgoing {
    /// A decision (boxed: the outbox allocates its slots as it fills).
    Decision(Box<DecisionRecord>),
    /// An outcome.
    Outcome(OutcomeRecord),
}

/// The engine's sink on a replica whose records go to the bus.
#[derive(Debug)]
pub struct BusSink {
    enabled: bool,
    sample_rate: f64,
    outbox: RwLock<Option<mpsc::Sender<Outgoing>>>,
    taken: std::sync::Mutex<Option<mpsc::Receiver<Outgoing>>>,
    counters: Arc<BusCounters>,
}

impl BusSink {
    /// A sink sampling as `log` says, with an outbox of
    /// `log.channel_capacity` plus the routers' share, as the local log's
    /// queue would have.
    pub fn new(log: &LogConfig) -> Self {
        let capacity = (log.channel_capacity + log.router_capacity()).max(1);
        let (tx, rx) = mpsc::channel(capacity);
        Self {
            enabled: log.enabled,
            sample_rate: log.sample_rate,
            outbox: RwLock::new(Some(tx)),
            taken: std::sync::Mutex::new(Some(rx)),
            counters: Arc::default(),
        }
    }

    /// The counters the outbox's drops go to (the bus connection's).
    pub fn counters(&self) -> &Arc<BusCounters> {
        &self.counters
    }

    /// The outbox's receiving end, once.
    pub fn take_outbox(&self) -> Option<mpsc::Receiver<Outgoing>> {
        self.taken
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// Takes no more records; the publisher publishes what the outbox
    /// holds, then ends.
    pub fn close(&self) {
        self.outbox
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    fn offer(&self, kind: LogKind, msg: Outgoing) -> bool {
        let guard = self.outbox.read().unwrap_or_else(PoisonError::into_inner);
        let sent = guard.as_ref().is_some_and(|tx| tx.try_send(msg).is_ok());
        if !sent {
            self.counters.dropped(kind_label(kind));
        }
        sent
    }
}

impl DecisionSink for BusSink {
    fn sampled(&self, decision_id: &str) -> bool {
        self.enabled && sampled_at(decision_id, self.sample_rate)
    }

    fn log_decision(&self, rec: DecisionRecord) -> bool {
        self.sampled(&rec.decision_id)
            && self.offer(LogKind::Decisions, Outgoing::Decision(Box::new(rec)))
    }

    fn log_outcome(&self, rec: OutcomeRecord) -> bool {
        self.sampled(&rec.decision_id) && self.offer(LogKind::Outcomes, Outgoing::Outcome(rec))
    }

    fn room(&self) -> usize {
        self.outbox
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map_or(0, mpsc::Sender::capacity)
    }
}

/// The outbox's task: batches of up to [`RECORDS_BATCH`] records, each
/// published once it is full or [`RECORDS_BATCH_MS`] after its first
/// record; ends once the sink is closed and the outbox drained.
pub async fn publish(bus: Bus, mut rx: mpsc::Receiver<Outgoing>, all_features_below: f64) {
    let mut buf = Vec::with_capacity(RECORDS_BATCH);
    loop {
        if rx.recv_many(&mut buf, RECORDS_BATCH).await == 0 {
            return;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_millis(RECORDS_BATCH_MS);
        while buf.len() < RECORDS_BATCH {
            let more = RECORDS_BATCH - buf.len();
            match tokio::time::timeout_at(deadline, rx.recv_many(&mut buf, more)).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        let mut decisions = Vec::new();
        let mut outcomes = Vec::new();
        for r in buf.drain(..) {
            match r {
                Outgoing::Decision(d) => decisions.push(*d),
                Outgoing::Outcome(o) => outcomes.push(o),
            }
        }
        publish_kind(&bus, LogKind::Decisions, decisions.len(), || {
            decisions_batch_sampled(&decisions, all_features_below)
        })
        .await;
        publish_kind(&bus, LogKind::Outcomes, outcomes.len(), || {
            outcomes_batch(&outcomes)
        })
        .await;
    }
}

async fn publish_kind(
    bus: &Bus,
    kind: LogKind,
    records: usize,
    batch: impl FnOnce() -> Result<RecordBatch, ArrowError>,
) {
    if records == 0 {
        return;
    }
    match batch() {
        Ok(b) => bus.publish_records(kind, &b).await,
        Err(e) => {
            let n = u64::try_from(records).unwrap_or(u64::MAX);
            bus.counters().dropped_n(kind_label(kind), n);
            tracing::error!(error = %e, records, "records dropped: they do not make a batch");
        }
    }
}

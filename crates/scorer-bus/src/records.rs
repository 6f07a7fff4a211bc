//! Decision and outcome records on the stream [`RECORDS_STREAM`]: each
//! message one Arrow IPC stream (arrow's own `StreamWriter`, the format of
//! the log's write-ahead files) of the log's record schema, published with
//! a JetStream message id so that a batch published again (a lost
//! acknowledgement, retried) is dropped by the stream's duplicate window.
//!
//! The checks a writer applies before it writes a batch are here too
//! ([`check_batch`]): the size, the subject, the schema version header,
//! and the batch itself, decoded into exactly the log's schema.

use std::io::Cursor;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use arrow::array::RecordBatch;
use arrow::ipc::reader::StreamReader;
use arrow::ipc::writer::StreamWriter;
use async_nats::HeaderMap;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream::{self, RetentionPolicy};
use scorer_log::{LOG_SCHEMA_VERSION, LogKind};

use crate::counters::Refusal;
use crate::subject::{
    self, LOG_SCHEMA_HEADER, ORIGIN_HEADER, RECORDS_PREFIX, RECORDS_STREAM, records_kind,
};
use crate::{Bus, BusError};

/// How many times a batch is published (same message id) before its
/// records are counted as dropped.
pub const PUBLISH_ATTEMPTS: u32 = 3;
/// How long the stream remembers a message id, ms: a batch published again
/// within it is stored once.
pub const DUPLICATE_WINDOW_MS: u64 = 120_000;
/// How long the stream keeps a batch no writer acknowledged, ms (a day: the
/// writers were away).
pub const RECORDS_MAX_AGE_MS: u64 = 86_400_000;

/// The `/metrics` kind of records of `kind`.
pub fn kind_label(kind: LogKind) -> &'static str {
    kind.prefix()
}

impl Bus {
    /// Creates the records stream when it is missing.
    pub(crate) async fn ensure_records_stream(&self) -> Result<stream::Stream, BusError> {
        self.js
            .get_or_create_stream(stream::Config {
                name: RECORDS_STREAM.to_owned(),
                description: Some(
                    "decision and outcome records for the log writers (Arrow IPC)".to_owned(),
                ),
                subjects: vec![format!("{RECORDS_PREFIX}.>")],
                retention: RetentionPolicy::WorkQueue,
                max_age: Duration::from_millis(RECORDS_MAX_AGE_MS),
                duplicate_window: Duration::from_millis(DUPLICATE_WINDOW_MS),
                max_message_size: i32::try_from(self.max_message_bytes).unwrap_or(i32::MAX),
                num_replicas: self.stream_replicas,
                ..stream::Config::default()
            })
            .await
            .map_err(|e| BusError::Setup {
                what: "the records stream",
                reason: e.to_string(),
            })
    }

    /// Publishes `batch` (records of `kind` in the log's schema) on this
    /// replica's records subject, cut into messages that fit
    /// `bus.max_message_bytes`, each with its own message id and awaited
    /// until the stream stored it. Counted per record: published, or
    /// dropped when the stream did not take it after [`PUBLISH_ATTEMPTS`].
    pub async fn publish_records(&self, kind: LogKind, batch: &RecordBatch) {
        let label = kind_label(kind);
        let mut pieces = vec![batch.clone()];
        while let Some(piece) = pieces.pop() {
            let rows = u64::try_from(piece.num_rows()).unwrap_or(u64::MAX);
            if rows == 0 {
                continue;
            }
            let Ok(body) = encode(&piece) else {
                self.counters.dropped_n(label, rows);
                continue;
            };
            if body.len() > self.max_message_bytes {
                if piece.num_rows() == 1 {
                    self.counters.dropped_n(label, 1);
                    tracing::warn!(
                        bytes = body.len(),
                        "one record exceeds bus.max_message_bytes; dropped"
                    );
                    continue;
                }
                let half = piece.num_rows() / 2;
                pieces.push(piece.slice(half, piece.num_rows() - half));
                pieces.push(piece.slice(0, half));
                continue;
            }
            if self.publish_once(kind, body).await {
                self.counters.published_n(label, rows);
            } else {
                self.counters.dropped_n(label, rows);
            }
        }
    }

    /// Publishes one message, with retries under the same id; whether the
    /// stream stored it (or already had it).
    async fn publish_once(&self, kind: LogKind, body: Vec<u8>) -> bool {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let id = format!(
            "{}:{}:{}",
            self.origin,
            kind.prefix(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let body = bytes::Bytes::from(body);
        let subject = subject::records(kind, &self.replica);
        for attempt in 1..=PUBLISH_ATTEMPTS {
            let mut headers = HeaderMap::new();
            headers.insert(ORIGIN_HEADER, &*self.origin);
            headers.insert(LOG_SCHEMA_HEADER, LOG_SCHEMA_VERSION);
            let msg = PublishMessage::build()
                .payload(body.clone())
                .headers(headers)
                .message_id(&id);
            let stored = match self.js.send_publish(subject.clone(), msg).await {
                Ok(ack) => ack.await.map(|_| ()),
                Err(e) => Err(e),
            };
            match stored {
                Ok(()) => return true,
                Err(e) => {
                    tracing::debug!(error = %e, attempt, id, "record batch not stored; publishing it again");
                }
            }
        }
        false
    }
}

/// `batch` as one Arrow IPC stream.
///
/// # Errors
/// Arrow's, when the batch cannot be encoded.
pub fn encode(batch: &RecordBatch) -> Result<Vec<u8>, arrow::error::ArrowError> {
    let mut w = StreamWriter::try_new(Vec::new(), &batch.schema())?;
    w.write(batch)?;
    w.finish()?;
    w.into_inner()
}

/// A message's record batch, checked: refused for the reason given, or the
/// batch in the log's schema of its kind.
///
/// # Errors
/// The [`Refusal`]: larger than `max_message_bytes`, a subject that is not
/// a records subject, a schema version header other than
/// [`LOG_SCHEMA_VERSION`], a payload that is not one Arrow IPC stream of
/// the kind's schema (unknown or missing columns, other types, nulls in a
/// required column).
pub fn check_batch(
    subject: &str,
    headers: Option<&HeaderMap>,
    payload: &[u8],
    max_message_bytes: usize,
) -> Result<(LogKind, RecordBatch), (Option<LogKind>, Refusal)> {
    let kind = records_kind(subject);
    if payload.len() > max_message_bytes {
        return Err((kind, Refusal::Oversized));
    }
    let Some(kind) = kind else {
        return Err((None, Refusal::Subject));
    };
    let version = headers
        .and_then(|h| h.get(LOG_SCHEMA_HEADER))
        .map(|v| v.as_str());
    if version != Some(LOG_SCHEMA_VERSION) {
        return Err((Some(kind), Refusal::Schema));
    }
    decode(kind, payload)
        .ok_or((Some(kind), Refusal::Malformed))
        .map(|b| (kind, b))
}

/// The batches of one IPC stream, concatenated, in the log's schema of
/// `kind`; `None` when it is not that.
fn decode(kind: LogKind, payload: &[u8]) -> Option<RecordBatch> {
    // Arrow's reader may panic on hostile input; a panic is a refusal.
    catch_unwind(AssertUnwindSafe(|| {
        let reader = StreamReader::try_new(Cursor::new(payload), None).ok()?;
        let schema = kind.schema();
        if reader.schema().fields() != schema.fields() {
            return None;
        }
        let mut batches = Vec::new();
        for b in reader {
            let b = b.ok()?;
            batches.push(RecordBatch::try_new(schema.clone(), b.columns().to_vec()).ok()?);
        }
        arrow::compute::concat_batches(&schema, &batches).ok()
    }))
    .ok()
    .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use scorer_log::{OutcomeRecord, outcomes_batch};

    fn outcomes(n: usize) -> RecordBatch {
        let recs: Vec<OutcomeRecord> = (0..n)
            .map(|i| OutcomeRecord {
                decision_id: format!("d-{i}"),
                worker_id: "w".into(),
                ts_ms: 1_700_000_000_000,
                latency_ms: 1.0,
                success: true,
                caller: None,
                cache_hit: None,
            })
            .collect();
        outcomes_batch(&recs).expect("batch")
    }

    fn schema_header() -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(LOG_SCHEMA_HEADER, LOG_SCHEMA_VERSION);
        h
    }

    #[test]
    fn a_batch_round_trips_through_its_subject() {
        let body = encode(&outcomes(3)).expect("encode");
        let (kind, b) = check_batch(
            "scorer.records.outcomes.r1",
            Some(&schema_header()),
            &body,
            1 << 20,
        )
        .expect("accepted");
        assert_eq!(kind, LogKind::Outcomes);
        assert_eq!(b, outcomes(3));
    }

    #[test]
    fn what_is_not_a_batch_of_the_subjects_kind_is_refused() {
        let h = schema_header();
        let body = encode(&outcomes(3)).expect("encode");
        let refused = |subject: &str, h: Option<&HeaderMap>, body: &[u8], max: usize| {
            check_batch(subject, h, body, max).err().map(|e| e.1)
        };
        // Outcomes on the decisions subject: another schema.
        assert_eq!(
            refused("scorer.records.decisions.r1", Some(&h), &body, 1 << 20),
            Some(Refusal::Malformed)
        );
        assert_eq!(
            refused(
                "scorer.records.outcomes.r1",
                Some(&h),
                b"{\"json\":1}",
                1 << 20
            ),
            Some(Refusal::Malformed)
        );
        assert_eq!(
            refused(
                "scorer.records.outcomes.r1",
                Some(&h),
                &body[..body.len() / 2],
                1 << 20
            ),
            Some(Refusal::Malformed)
        );
        assert_eq!(
            refused("scorer.records.outcomes.r1", None, &body, 1 << 20),
            Some(Refusal::Schema)
        );
        assert_eq!(
            refused("scorer.records.other.r1", Some(&h), &body, 1 << 20),
            Some(Refusal::Subject)
        );
        assert_eq!(
            refused("scorer.records.outcomes.r1", Some(&h), &body, 16),
            Some(Refusal::Oversized)
        );
    }
}

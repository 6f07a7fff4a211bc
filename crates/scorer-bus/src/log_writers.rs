//! The log writers' side of [`RECORDS_STREAM`]: one durable pull consumer,
//! [`LOG_WRITERS_CONSUMER`], shared by every writer, so each batch goes to
//! one of them (JetStream's work-queue semantics; Dynamo's KV router reads
//! its event stream the same way). A writer acknowledges a batch once it is
//! in its log's write-ahead file; a batch not acknowledged within
//! `ack_wait` (its writer died) is delivered to another writer. A batch
//! that fails the checks ([`crate::records::check_batch`]) is counted and
//! terminated: never delivered again, never written.

use std::time::Duration;

use arrow::array::RecordBatch;
use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, pull};
use async_nats::jetstream::{AckKind, Message};
use futures_util::StreamExt;
use scorer_log::LogKind;

use crate::records::{check_batch, kind_label};
use crate::subject::{LOG_WRITERS_CONSUMER, ORIGIN_HEADER, RECORDS_PREFIX};
use crate::{Bus, BusError};

/// Default most batches delivered to the writers and not acknowledged yet.
pub const DEFAULT_MAX_ACK_PENDING: i64 = 1_024;
/// How long a batch whose write failed waits before it is delivered again.
pub const WRITE_FAILED_RETRY_MS: u64 = 1_000;

impl Bus {
    /// Joins the log writers: creates (or updates, to this `ack_wait_ms`)
    /// the shared durable consumer of the records stream and follows it.
    ///
    /// # Errors
    /// [`BusError::Setup`] when the stream or the consumer cannot be set up.
    pub async fn log_writers_feed(&self, ack_wait_ms: u64) -> Result<RecordsFeed, BusError> {
        let setup = |e: &dyn std::fmt::Display| BusError::Setup {
            what: "the log writers' consumer",
            reason: e.to_string(),
        };
        let stream = self.ensure_records_stream().await?;
        let consumer: async_nats::jetstream::consumer::Consumer<pull::Config> = stream
            .create_consumer(pull::Config {
                durable_name: Some(LOG_WRITERS_CONSUMER.to_owned()),
                description: Some("every log writer: each record batch goes to one".to_owned()),
                deliver_policy: DeliverPolicy::All,
                ack_policy: AckPolicy::Explicit,
                ack_wait: Duration::from_millis(ack_wait_ms),
                max_ack_pending: DEFAULT_MAX_ACK_PENDING,
                filter_subject: format!("{RECORDS_PREFIX}.>"),
                ..pull::Config::default()
            })
            .await
            .map_err(|e| setup(&e))?;
        let messages = consumer.messages().await.map_err(|e| setup(&e))?;
        Ok(RecordsFeed {
            bus: self.clone(),
            messages,
        })
    }
}

/// The record batches delivered to this writer, checked.
pub struct RecordsFeed {
    bus: Bus,
    messages: pull::Stream,
}

/// One batch delivered to this writer: write it, then [`Delivered::ack`].
pub struct Delivered {
    /// Decisions or outcomes.
    pub kind: LogKind,
    /// The records, in the log's schema of `kind`.
    pub batch: RecordBatch,
    /// How many times the stream delivered it (1: the first time).
    pub delivered: i64,
    /// Its publisher.
    pub origin: String,
    message: Message,
}

impl RecordsFeed {
    /// The next batch that passes the checks; the refused ones are counted
    /// and terminated on the way. `None` when the feed ended.
    pub async fn next(&mut self) -> Option<Delivered> {
        loop {
            let m = match self.messages.next().await? {
                Ok(m) => m,
                Err(e) => {
                    tracing::debug!(error = %e, "records feed interrupted; it resumes by itself");
                    continue;
                }
            };
            let checked = check_batch(
                m.subject.as_str(),
                m.headers.as_ref(),
                &m.payload,
                self.bus.max_message_bytes,
            );
            match checked {
                Ok((kind, batch)) => {
                    let delivered = m.info().map_or(1, |i| i.delivered);
                    let origin = m
                        .headers
                        .as_ref()
                        .and_then(|h| h.get(ORIGIN_HEADER))
                        .map_or_else(String::new, |v| v.as_str().to_owned());
                    return Some(Delivered {
                        kind,
                        batch,
                        delivered,
                        origin,
                        message: m,
                    });
                }
                Err((kind, why)) => {
                    let label = kind.map_or("decisions", kind_label);
                    self.bus.counters.refused(label, why);
                    tracing::warn!(subject = %m.subject, reason = why.as_str(),
                        "record batch refused; terminated, never written");
                    if let Err(e) = m.ack_with(AckKind::Term).await {
                        tracing::debug!(error = %e, "a refused batch's termination did not reach NATS; it is refused again when delivered again");
                    }
                }
            }
        }
    }
}

impl Delivered {
    /// Tells the stream the batch is written: it leaves the stream. Not
    /// confirmed by the server (one round trip a batch saved): an
    /// acknowledgement lost on the way makes the batch come back after
    /// `ack_wait`, and its records are skipped as already written.
    ///
    /// # Errors
    /// The connection did not take the acknowledgement.
    pub async fn ack(&self) -> Result<(), async_nats::Error> {
        self.message.ack().await
    }

    /// Tells the stream the batch could not be written now: it is delivered
    /// again after [`WRITE_FAILED_RETRY_MS`], to this writer or another.
    pub async fn retry_later(&self) {
        let later = AckKind::Nak(Some(Duration::from_millis(WRITE_FAILED_RETRY_MS)));
        if let Err(e) = self.message.ack_with(later).await {
            tracing::debug!(error = %e, "nak not delivered; the batch comes back after ack_wait");
        }
    }
}

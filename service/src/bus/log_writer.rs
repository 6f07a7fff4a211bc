//! A replica as one of the log writers (`bus.log_writer`): it takes record
//! batches from the shared consumer of the `SCORER_DECISIONS` stream and
//! writes them to its own `[log]` directory, in the layout the log writes
//! by itself.
//!
//! A batch is acknowledged only once its records are in the log's
//! write-ahead file ([`DecisionLog::append_durable`]): a writer killed
//! before that leaves the batch to another writer after `ack_wait`. The
//! records of a batch delivered again to the same writer are not written
//! twice ([`WrittenIds`]); see docs/api.md for what holds across writers.

use std::sync::Arc;

use scorer_bus::arrow::compute::filter_record_batch;
use scorer_bus::records::kind_label;
use scorer_bus::written::DEFAULT_WRITTEN_IDS;
use scorer_bus::{Bus, RecordsFeed, Refusal, WrittenIds};
use scorer_log::DecisionLog;

/// Writes what `feed` delivers into `log`, until the feed ends.
pub async fn write(bus: Bus, log: Arc<DecisionLog>, mut feed: RecordsFeed) {
    let mut written = WrittenIds::new(DEFAULT_WRITTEN_IDS);
    while let Some(d) = feed.next().await {
        let label = kind_label(d.kind);
        let Some((keys, fresh)) = written.fresh(d.kind, &d.batch) else {
            // The checks passed the schema, so the key columns are there.
            bus.counters().refused(label, Refusal::Malformed);
            continue;
        };
        let batch = match filter_record_batch(&d.batch, &fresh) {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(error = %e, "record batch not filtered; delivered again later");
                d.retry_later().await;
                continue;
            }
        };
        let rows = batch.num_rows();
        let again = d.batch.num_rows() - rows;
        if rows > 0 {
            let (log, kind) = (log.clone(), d.kind);
            let appended =
                tokio::task::spawn_blocking(move || log.append_durable(kind, batch)).await;
            match appended {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "record batch not written; delivered again later");
                    d.retry_later().await;
                    continue;
                }
                Err(e) => {
                    tracing::error!(error = %e, "record batch writer task failed");
                    d.retry_later().await;
                    continue;
                }
            }
        }
        let new_keys = keys
            .into_iter()
            .zip(fresh.iter())
            .filter_map(|(k, f)| (f == Some(true)).then_some(k));
        written.insert(new_keys);
        bus.counters()
            .applied_n(label, u64::try_from(rows).unwrap_or(u64::MAX));
        if again > 0 {
            tracing::info!(kind = label, records = again, delivered = d.delivered, origin = %d.origin,
                "records delivered again were already written; skipped");
        }
        if let Err(e) = d.ack().await {
            tracing::debug!(error = %e, "acknowledgement not confirmed; the batch may come again (its records are skipped)");
        }
    }
}

//! A replica as one of the log writers (`bus.log_writer`): it takes record
//! batches from the shared consumer of the `SCORER_DECISIONS` stream and
//! writes them to its own `[log]` directory, in the layout the log writes
//! by itself.
//!
//! What arrived together (up to [`GATHER_BATCHES`] batches, or what comes
//! within [`GATHER_MS`] of the first) is written as one append per kind.
//! A batch is acknowledged only once its records are in the log's
//! write-ahead file ([`DecisionLog::append_durable`]): a writer killed
//! before that leaves the batch to another writer after `ack_wait`. The
//! records of a batch delivered again to the same writer are not written
//! twice ([`WrittenIds`]); docs/api.md says what holds across writers.

use std::sync::Arc;
use std::time::Duration;

use scorer_bus::arrow::compute::{concat_batches, filter_record_batch};
use scorer_bus::records::kind_label;
use scorer_bus::written::DEFAULT_WRITTEN_IDS;
use scorer_bus::{Bus, Delivered, RecordsFeed, WrittenIds};
use scorer_log::{DecisionLog, LogKind};

/// Most batches written as one append.
pub const GATHER_BATCHES: usize = 256;
/// How long the writer waits for more batches after the first, ms.
pub const GATHER_MS: u64 = 2;

/// Writes what `feed` delivers into `log`, until the feed ends.
pub async fn write(bus: Bus, log: Arc<DecisionLog>, mut feed: RecordsFeed) {
    let mut written = WrittenIds::new(DEFAULT_WRITTEN_IDS);
    while let Some(first) = feed.next().await {
        let mut gathered = vec![first];
        let until = tokio::time::Instant::now() + Duration::from_millis(GATHER_MS);
        while gathered.len() < GATHER_BATCHES {
            match tokio::time::timeout_at(until, feed.next()).await {
                Ok(Some(d)) => gathered.push(d),
                Ok(None) | Err(_) => break,
            }
        }
        for kind in [LogKind::Decisions, LogKind::Outcomes] {
            let of_kind: Vec<&Delivered> = gathered.iter().filter(|d| d.kind == kind).collect();
            if of_kind.is_empty() {
                continue;
            }
            if write_kind(&bus, &log, &mut written, kind, &of_kind).await {
                for d in of_kind {
                    if let Err(e) = d.ack().await {
                        tracing::debug!(error = %e, "acknowledgement not sent; the batch comes again (its records are skipped)");
                    }
                }
            } else {
                for d in of_kind {
                    d.retry_later().await;
                }
            }
        }
    }
}

/// Writes the records of `kind` in `delivered` not written yet; whether
/// they are durable.
async fn write_kind(
    bus: &Bus,
    log: &Arc<DecisionLog>,
    written: &mut WrittenIds,
    kind: LogKind,
    delivered: &[&Delivered],
) -> bool {
    let label = kind_label(kind);
    let batches: Vec<_> = delivered.iter().map(|d| d.batch.clone()).collect();
    let all = match concat_batches(&kind.schema(), &batches) {
        Ok(b) => b,
        Err(e) => {
            tracing::error!(error = %e, "record batches not joined; delivered again later");
            return false;
        }
    };
    // The checks passed the schema, so the key columns are there.
    let Some((keys, fresh)) = written.fresh(kind, &all) else {
        return false;
    };
    let batch = match filter_record_batch(&all, &fresh) {
        Ok(b) => b,
        Err(e) => {
            tracing::error!(error = %e, "record batch not filtered; delivered again later");
            return false;
        }
    };
    let rows = batch.num_rows();
    let again = all.num_rows() - rows;
    if rows > 0 {
        let log = log.clone();
        match tokio::task::spawn_blocking(move || log.append_durable(kind, batch)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "record batches not written; delivered again later");
                return false;
            }
            Err(e) => {
                tracing::error!(error = %e, "record batch writer task failed");
                return false;
            }
        }
    }
    written.insert(
        keys.into_iter()
            .zip(fresh.iter())
            .filter_map(|(k, f)| (f == Some(true)).then_some(k)),
    );
    bus.counters()
        .applied_n(label, u64::try_from(rows).unwrap_or(u64::MAX));
    if again > 0 {
        let redelivered = delivered.iter().filter(|d| d.delivered > 1).count();
        tracing::info!(
            kind = label,
            records = again,
            redelivered,
            "records delivered again were already written; skipped"
        );
    }
    true
}

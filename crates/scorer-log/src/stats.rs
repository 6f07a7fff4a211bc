//! [`LogStats`]: counters of the decision log, and the atomics behind them.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

use crate::source::Source;

/// A snapshot of the log's counters (all monotone except `open_rows`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LogStats {
    /// Rows (one per decision, its candidates nested, plus one per outcome)
    /// in files closed and renamed to their final names by this process.
    pub written_rows: u64,
    /// Records refused because their source's share of the channel was
    /// full (as it fills while writes fail), or lost at a shutdown while
    /// writes still failed (not counting sampled-out records, records
    /// offered while disabled or after shutdown):
    /// `dropped_service + dropped_router`.
    pub dropped: u64,
    /// Of `dropped`, the service's own records.
    pub dropped_service: u64,
    /// Of `dropped`, routers' records (`POST /v1/router/decisions`).
    pub dropped_router: u64,
    /// Final files written by this process.
    pub files: u64,
    /// Bytes of the final files written by this process (on-disk sizes).
    pub bytes: u64,
    /// Leftover in-progress files moved to `quarantine/` at start-up.
    pub quarantined: u64,
    /// Leftover in-progress files found complete and renamed at start-up.
    pub recovered: u64,
    /// Decision records accepted into the channel.
    pub decisions_logged: u64,
    /// Outcome records accepted into the channel.
    pub outcomes_logged: u64,
    /// Write, seal, compaction or rename failures, each retry counted. A
    /// failed append is written again in the same write-ahead file once
    /// writes succeed; a failed seal or compaction leaves the file for
    /// start-up recovery.
    pub write_errors: u64,
    /// Gauge: rows in write-ahead files not yet compacted.
    pub open_rows: u64,
    /// Gauge: 1 while writes fail (disk full, I/O error): the writer holds
    /// what it could not write, takes nothing more from the channel (which
    /// fills; then records are dropped at its door, counted in `dropped`)
    /// and retries every second.
    pub writes_failing: u64,
}

/// The live atomics; [`Counters::snapshot`] gives a [`LogStats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub written_rows: AtomicU64,
    pub dropped_service: AtomicU64,
    pub dropped_router: AtomicU64,
    pub files: AtomicU64,
    pub bytes: AtomicU64,
    pub quarantined: AtomicU64,
    pub recovered: AtomicU64,
    pub decisions_logged: AtomicU64,
    pub outcomes_logged: AtomicU64,
    pub write_errors: AtomicU64,
    pub open_rows: AtomicU64,
    pub writes_failing: AtomicU64,
    /// The service's records in the channel, not yet taken by the writer.
    pub queued_service: AtomicU64,
    /// Routers' records in the channel, not yet taken by the writer.
    pub queued_router: AtomicU64,
}

impl Counters {
    /// Adds `n` to `counter` (relaxed: counters are independent).
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Subtracts `n` from a gauge, saturating at 0.
    pub fn sub(counter: &AtomicU64, n: u64) {
        let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
            Some(v.saturating_sub(n))
        });
    }

    /// Counts `n` records of `source` dropped.
    pub fn dropped(&self, source: Source, n: u64) {
        Self::add(
            match source {
                Source::Service => &self.dropped_service,
                Source::Router => &self.dropped_router,
            },
            n,
        );
    }

    /// The gauge of `source`'s records in the channel.
    pub fn queued(&self, source: Source) -> &AtomicU64 {
        match source {
            Source::Service => &self.queued_service,
            Source::Router => &self.queued_router,
        }
    }

    /// Reads every counter.
    pub fn snapshot(&self) -> LogStats {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        LogStats {
            written_rows: r(&self.written_rows),
            dropped: r(&self.dropped_service).saturating_add(r(&self.dropped_router)),
            dropped_service: r(&self.dropped_service),
            dropped_router: r(&self.dropped_router),
            files: r(&self.files),
            bytes: r(&self.bytes),
            quarantined: r(&self.quarantined),
            recovered: r(&self.recovered),
            decisions_logged: r(&self.decisions_logged),
            outcomes_logged: r(&self.outcomes_logged),
            write_errors: r(&self.write_errors),
            open_rows: r(&self.open_rows),
            writes_failing: r(&self.writes_failing),
        }
    }
}

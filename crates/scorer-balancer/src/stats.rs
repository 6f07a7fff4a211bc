//! What a balancer counts, for the router's metrics.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters, updated with relaxed atomics.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub picks: AtomicU64,
    pub blackout_picks: AtomicU64,
    pub uniform_picks: AtomicU64,
    pub outcomes: AtomicU64,
    pub outcomes_unknown: AtomicU64,
    pub views_applied: AtomicU64,
    pub views_refused: AtomicU64,
    pub reports_applied: AtomicU64,
    pub reports_skipped: AtomicU64,
    pub config_mismatches: AtomicU64,
    pub stream_connects: AtomicU64,
    pub stream_disconnects: AtomicU64,
    pub load_reports: AtomicU64,
    pub load_reports_failed: AtomicU64,
}

impl Counters {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// A point-in-time copy of a balancer's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct BalancerStats {
    /// Picks made, in every mode.
    pub picks: u64,
    /// Picks made on local evidence alone: the view was older than
    /// `view_ttl_ms`, or none had come.
    pub blackout_picks: u64,
    /// Picks drawn uniformly: no candidate was known, or none was
    /// selectable.
    pub uniform_picks: u64,
    /// Outcomes recorded.
    pub outcomes: u64,
    /// Outcomes whose decision the balancer did not (or no longer) remember.
    pub outcomes_unknown: u64,
    /// View events applied.
    pub views_applied: u64,
    /// View events refused whole (malformed).
    pub views_refused: u64,
    /// Reports replayed from views.
    pub reports_applied: u64,
    /// Reports in views that were not newer than what the balancer had.
    pub reports_skipped: u64,
    /// View events whose configuration hash differed from the balancer's.
    pub config_mismatches: u64,
    /// View streams opened (feature `http`).
    pub stream_connects: u64,
    /// View streams that ended or failed to open (feature `http`).
    pub stream_disconnects: u64,
    /// Load reports the service accepted (feature `http`).
    pub load_reports: u64,
    /// Load reports that failed or timed out (feature `http`).
    pub load_reports_failed: u64,
    /// Age of the last applied view, ms; `None` before the first.
    pub view_age_ms: Option<u64>,
    /// The decision-log buffer's counters, when the balancer has one.
    pub records: Option<crate::records::RecordStats>,
}

impl Counters {
    pub(crate) fn snapshot(&self, view_age_ms: Option<u64>) -> BalancerStats {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        BalancerStats {
            picks: get(&self.picks),
            blackout_picks: get(&self.blackout_picks),
            uniform_picks: get(&self.uniform_picks),
            outcomes: get(&self.outcomes),
            outcomes_unknown: get(&self.outcomes_unknown),
            views_applied: get(&self.views_applied),
            views_refused: get(&self.views_refused),
            reports_applied: get(&self.reports_applied),
            reports_skipped: get(&self.reports_skipped),
            config_mismatches: get(&self.config_mismatches),
            stream_connects: get(&self.stream_connects),
            stream_disconnects: get(&self.stream_disconnects),
            load_reports: get(&self.load_reports),
            load_reports_failed: get(&self.load_reports_failed),
            view_age_ms,
            records: None,
        }
    }
}

//! One worker's published state: smoothed signals, flags and history stats.
//!
//! A [`WorkerView`] is immutable; each accepted snapshot produces a new one
//! that the registry publishes with an atomic pointer swap, so readers never
//! see a half-applied report.

use std::sync::Arc;

use serde::Serialize;

use super::ewma::ewma;
use super::history::HistoryStats;
use crate::dynamics::PenaltyTracker;
use crate::telemetry::Snapshot;

/// EWMA-smoothed signals (issue #2, "Smoothing"). Optional signals are `None`
/// when the latest snapshot did not report them: unknown is not zero.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Smoothed {
    /// CPU utilisation, fraction 0..=1.
    pub cpu_usage: f64,
    /// Queue depth, requests.
    pub queue_depth: f64,
    /// Mean RTT, ms.
    pub rtt_ms_avg: f64,
    /// RTT p99, ms.
    pub rtt_ms_p99: f64,
    /// Error rate, fraction 0..=1.
    pub error_rate: f64,
    /// Available memory, fraction 0..=1.
    pub mem_available_ratio: Option<f64>,
    /// Disk IO await, ms.
    pub disk_io_await_ms: Option<f64>,
    /// Network loss, fraction 0..=1.
    pub net_loss_rate: Option<f64>,
    /// Cache hit rate, fraction 0..=1.
    pub cache_hit_rate: Option<f64>,
    /// Memtable size, bytes.
    pub memtable_bytes: Option<f64>,
    /// Free disk, fraction 0..=1.
    pub disk_free_ratio: Option<f64>,
}

impl Smoothed {
    /// Blend `s` into `prev` (None for the first report) with weight `alpha`.
    /// `cpu` is the accepted (possibly clamped) CPU value.
    pub fn update(prev: Option<&Smoothed>, s: &Snapshot, cpu: f64, alpha: f64) -> Smoothed {
        let req = |old: Option<f64>, v: f64| ewma(old, v, alpha);
        let opt = |old: Option<f64>, v: Option<f64>| v.map(|v| ewma(old, v, alpha));
        Smoothed {
            cpu_usage: req(prev.map(|p| p.cpu_usage), cpu),
            queue_depth: req(prev.map(|p| p.queue_depth), f64::from(s.queue_depth)),
            rtt_ms_avg: req(prev.map(|p| p.rtt_ms_avg), s.rtt_ms_avg),
            rtt_ms_p99: req(prev.map(|p| p.rtt_ms_p99), s.rtt_ms_p99),
            error_rate: req(prev.map(|p| p.error_rate), s.error_rate),
            mem_available_ratio: opt(
                prev.and_then(|p| p.mem_available_ratio),
                s.mem_available_ratio,
            ),
            disk_io_await_ms: opt(prev.and_then(|p| p.disk_io_await_ms), s.disk_io_await_ms),
            net_loss_rate: opt(prev.and_then(|p| p.net_loss_rate), s.net_loss_rate),
            cache_hit_rate: opt(prev.and_then(|p| p.cache_hit_rate), s.cache_hit_rate),
            memtable_bytes: opt(
                prev.and_then(|p| p.memtable_bytes),
                s.memtable_bytes.map(|b| b as f64),
            ),
            disk_free_ratio: opt(prev.and_then(|p| p.disk_free_ratio), s.disk_free_ratio),
        }
    }

    /// Number of optional signals not currently reported, 0..=6.
    pub fn missing_optional(&self) -> u32 {
        [
            self.mem_available_ratio,
            self.disk_io_await_ms,
            self.net_loss_rate,
            self.cache_hit_rate,
            self.memtable_bytes,
            self.disk_free_ratio,
        ]
        .iter()
        .filter(|v| v.is_none())
        .count() as u32
    }
}

/// Everything the scorer reads about one worker, as of its last accepted report.
#[derive(Debug, Clone)]
pub struct WorkerView {
    /// Worker id.
    pub worker_id: Arc<str>,
    /// Server monotonic time of the first accepted report, ms (warm-up starts here
    /// and is never reset by later reports).
    pub first_seen_ms: u64,
    /// Server monotonic time of the last return from silence (a report after
    /// more than `telemetry.dead_after_ms` without one), ms: slow start
    /// begins again here.
    pub revived_ms: Option<u64>,
    /// Server monotonic time of the last accepted report, ms.
    pub last_receive_ms: u64,
    /// Reporter's `timestamp_ms` of the last accepted report, Unix ms.
    pub last_timestamp_ms: u64,
    /// Accepted reports since registration.
    pub reports: u64,
    /// Smoothed signals.
    pub smoothed: Smoothed,
    /// Latest `compacting` flag.
    pub compacting: bool,
    /// Latest `under_repair` flag.
    pub under_repair: bool,
    /// Latest replication lag, log positions.
    pub version_lag: u64,
    /// Latest region, when reported.
    pub region: Option<Arc<str>>,
    /// Static relative capacity, > 0 (1.0 when never reported).
    pub capacity: f64,
    /// The latest report's CPU was above 1 and clamped.
    pub cpu_clamped: bool,
    /// Trend and volatility over the last 60 reports.
    pub history: HistoryStats,
    /// Penalty state machine, evaluated once per accepted report (issue #3).
    pub penalty: PenaltyTracker,
    /// The worker's latest cache digest, from this report or an earlier
    /// one (shared, not copied, between views).
    pub digest: Option<Arc<crate::locality::HeldDigest>>,
    /// What the registry's host derived from this view when it was
    /// published ([`super::IngestConfig::derive`]); a new report publishes
    /// a new view, so it never outlives the signals it was derived from.
    pub derived: Option<Derived>,
}

/// Terms a registry's host derives from a published view
/// ([`WorkerView::derived`]).
pub type Derived = Arc<dyn std::any::Any + Send + Sync>;

impl WorkerView {
    /// Age of the last report at `now_ms` (monotonic), ms; 0 if `now_ms` is earlier.
    pub fn age_ms(&self, now_ms: u64) -> u64 {
        now_ms.saturating_sub(self.last_receive_ms)
    }

    /// The digest of the view after report `s` received at `now_ms`
    /// ([`crate::locality::digest::carried`]).
    pub fn next_digest(
        prev: Option<&Self>,
        s: &Snapshot,
        now_ms: u64,
    ) -> Option<Arc<crate::locality::HeldDigest>> {
        crate::locality::digest::carried(prev.and_then(|p| p.digest.as_ref()), s, now_ms)
    }

    /// Time since first registration at `now_ms`, ms.
    pub fn registered_for_ms(&self, now_ms: u64) -> u64 {
        now_ms.saturating_sub(self.first_seen_ms)
    }
}

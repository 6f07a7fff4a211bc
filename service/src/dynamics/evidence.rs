//! One worker's local evidence: what the service itself saw of it, never
//! reset by a telemetry snapshot.
//!
//! * **Outstanding picks**, exact: `+1` at a pick, `−1` at its feedback or
//!   when the pick expires without feedback (see [`EvidenceConfig::expiry_ms`]).
//! * **Service time**, a [`PeakEwma`] of `latency / (1 + outstanding at the
//!   pick)`: a request that waited behind `n` others took about `n + 1`
//!   service times on a one-at-a-time worker, so the estimate is the
//!   worker's own speed, not its queue (which `outstanding` already counts).
//!   A failure or timeout is a sample of at least the pick's timeout (the
//!   "penalty latency"), so a fast refusal never looks fast (Linkerd's load
//!   biaser does the same).
//! * **Observed failure rate**, an EWMA over outcomes.
//! * **Unseen backlog**: the snapshot's `queue_depth` that our own
//!   outstanding picks do not explain, decaying with the snapshot's age.
//!   This is C3's concurrency compensation (Suresh et al., "C3: Cutting
//!   Tail Latency in Cloud Data Stores via Adaptive Replica Selection",
//!   NSDI 2015: `q̂ = 1 + os·n + q`) seen from the one router that knows
//!   every pick: the queue a worker reports is ours plus somebody else's.
//! * The worker's [`OutlierDetector`].
//!
//! # Concurrency
//!
//! A `Mutex` around a few plain numbers:
//! the critical sections are a few float operations, never allocate or
//! block, and a poisoned lock is recovered with the last values.

use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use super::outlier::{EjectionCause, OutlierConfig, OutlierDetector};
use super::peak_ewma::PeakEwma;

/// Default [`EvidenceConfig::latency_decay_ms`], ms.
pub const DEFAULT_LATENCY_DECAY_MS: u64 = 100;
/// Default [`EvidenceConfig::idle_decay_ms`], ms (Linkerd's peak-EWMA decay).
pub const DEFAULT_IDLE_DECAY_MS: u64 = 10_000;
/// Default [`EvidenceConfig::failure_penalty_ms`], ms.
pub const DEFAULT_FAILURE_PENALTY_MS: f64 = 1_000.0;
/// Default [`EvidenceConfig::expiry_factor`].
pub const DEFAULT_EXPIRY_FACTOR: f64 = 2.0;
/// Default [`EvidenceConfig::default_expiry_ms`], ms.
pub const DEFAULT_EXPIRY_MS: u64 = 10_000;
/// Default [`EvidenceConfig::max_expiry_ms`], ms.
pub const DEFAULT_MAX_EXPIRY_MS: u64 = 60_000;
/// Default [`EvidenceConfig::failure_rate_alpha`].
pub const DEFAULT_FAILURE_RATE_ALPHA: f64 = 0.05;
/// Default [`EvidenceConfig::unseen_backlog_decay_ms`], ms.
pub const DEFAULT_UNSEEN_BACKLOG_DECAY_MS: u64 = 2_000;

/// `[evidence]`: the service's own per-worker evidence. Times in ms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EvidenceConfig {
    /// Peak-EWMA decay of the service-time estimate, ms, `>= 1`. Default 100.
    pub latency_decay_ms: u64,
    /// Time constant with which an unsampled estimate returns to the pool's
    /// median, ms, `>= 1`. Default 10 000.
    pub idle_decay_ms: u64,
    /// Penalty latency of a failure whose pick named no `timeout_ms`, ms,
    /// `> 0`. Default 1 000.
    pub failure_penalty_ms: f64,
    /// A pick without feedback expires after this × its `timeout_ms`, `>= 1`.
    /// Default 2.
    pub expiry_factor: f64,
    /// Expiry of a pick whose request named no `timeout_ms`, ms, `>= 1`.
    /// Default 10 000.
    pub default_expiry_ms: u64,
    /// Longest expiry of any pick, ms, `>= default_expiry_ms`. Default 60 000.
    pub max_expiry_ms: u64,
    /// Weight of each outcome in the observed failure rate, fraction
    /// `(0, 1]`. Default 0.05 (about the last 20 outcomes).
    pub failure_rate_alpha: f64,
    /// Time constant of the unseen backlog's decay, ms, `>= 1`. Default 2 000.
    pub unseen_backlog_decay_ms: u64,
}

impl Default for EvidenceConfig {
    fn default() -> Self {
        Self {
            latency_decay_ms: DEFAULT_LATENCY_DECAY_MS,
            idle_decay_ms: DEFAULT_IDLE_DECAY_MS,
            failure_penalty_ms: DEFAULT_FAILURE_PENALTY_MS,
            expiry_factor: DEFAULT_EXPIRY_FACTOR,
            default_expiry_ms: DEFAULT_EXPIRY_MS,
            max_expiry_ms: DEFAULT_MAX_EXPIRY_MS,
            failure_rate_alpha: DEFAULT_FAILURE_RATE_ALPHA,
            unseen_backlog_decay_ms: DEFAULT_UNSEEN_BACKLOG_DECAY_MS,
        }
    }
}

impl EvidenceConfig {
    /// Checks the fields; `Err` names the bad key.
    pub fn validate(&self) -> Result<(), String> {
        for (k, v) in [
            ("latency_decay_ms", self.latency_decay_ms),
            ("idle_decay_ms", self.idle_decay_ms),
            ("default_expiry_ms", self.default_expiry_ms),
            ("unseen_backlog_decay_ms", self.unseen_backlog_decay_ms),
        ] {
            if v == 0 {
                return Err(format!("{k} must be >= 1, got 0"));
            }
        }
        if self.max_expiry_ms < self.default_expiry_ms {
            return Err(format!(
                "max_expiry_ms ({}) must be >= default_expiry_ms ({})",
                self.max_expiry_ms, self.default_expiry_ms
            ));
        }
        if !(self.failure_penalty_ms.is_finite() && self.failure_penalty_ms > 0.0) {
            return Err(format!(
                "failure_penalty_ms must be finite and > 0, got {}",
                self.failure_penalty_ms
            ));
        }
        if !(self.expiry_factor.is_finite() && self.expiry_factor >= 1.0) {
            return Err(format!(
                "expiry_factor must be finite and >= 1, got {}",
                self.expiry_factor
            ));
        }
        if !(self.failure_rate_alpha > 0.0 && self.failure_rate_alpha <= 1.0) {
            return Err(format!(
                "failure_rate_alpha must be within (0, 1], got {}",
                self.failure_rate_alpha
            ));
        }
        Ok(())
    }

    /// How long a pick waits for its feedback before it stops counting as
    /// outstanding, ms: `expiry_factor × timeout_ms`, or `default_expiry_ms`
    /// without a timeout, at most `max_expiry_ms`.
    pub fn expiry_ms(&self, timeout_ms: Option<u64>) -> u64 {
        let ms = timeout_ms.map_or(self.default_expiry_ms, |t| {
            (t as f64 * self.expiry_factor).ceil() as u64
        });
        ms.clamp(1, self.max_expiry_ms)
    }

    /// The penalty latency of a failed pick, ms: its timeout, or
    /// `failure_penalty_ms` without one.
    pub fn penalty_ms(&self, timeout_ms: Option<u64>) -> f64 {
        timeout_ms.map_or(self.failure_penalty_ms, |t| (t as f64).max(1.0))
    }
}

/// What the service remembers of one pick until its feedback.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PickRecord {
    /// The worker's outstanding picks just before this one.
    pub outstanding_before: u32,
    /// Penalty latency if it fails, ms ([`EvidenceConfig::penalty_ms`]).
    pub penalty_ms: f64,
}

/// A copy of a worker's evidence at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct EvidenceSnapshot {
    /// Outstanding picks.
    pub outstanding: u32,
    /// Service-time estimator (read it with [`PeakEwma::value_at`]).
    pub service: PeakEwma,
    /// Observed failure rate, fraction 0..=1.
    pub failure_rate: f64,
    /// Outcomes seen.
    pub outcomes: u64,
    /// Unseen backlog when the last snapshot arrived, requests.
    pub unseen_backlog: f64,
    /// When the last snapshot arrived, monotonic ms.
    pub unseen_at_ms: u64,
    /// Outlier detector.
    pub outlier: OutlierDetector,
}

impl EvidenceSnapshot {
    /// The unseen backlog at `now_ms`, requests, decayed with `decay_ms`.
    pub fn unseen_backlog_at(&self, now_ms: u64, decay_ms: u64) -> f64 {
        if self.unseen_backlog <= 0.0 {
            return 0.0;
        }
        let age = now_ms.saturating_sub(self.unseen_at_ms) as f64;
        self.unseen_backlog * (-age / decay_ms.max(1) as f64).exp()
    }
}

/// A worker's evidence. `Send + Sync`.
#[derive(Debug, Default)]
pub struct LocalEvidence {
    inner: Mutex<EvidenceSnapshot>,
}

impl LocalEvidence {
    fn lock(&self) -> MutexGuard<'_, EvidenceSnapshot> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A copy of the evidence.
    pub fn snapshot(&self) -> EvidenceSnapshot {
        *self.lock()
    }

    /// Counts a pick; returns the outstanding picks before it.
    pub fn pick(&self) -> u32 {
        let mut g = self.lock();
        let before = g.outstanding;
        g.outstanding = g.outstanding.saturating_add(1);
        before
    }

    /// A pick expired (or was evicted) without feedback: it stops counting.
    pub fn expire(&self) {
        let mut g = self.lock();
        g.outstanding = g.outstanding.saturating_sub(1);
    }

    /// The outcome of `pick` at `now_ms`: releases it and learns from it.
    /// Returns true when the outlier rules ask for an ejection.
    pub fn complete(
        &self,
        pick: &PickRecord,
        latency_ms: f64,
        success: bool,
        now_ms: u64,
        cfg: &EvidenceConfig,
        outlier: &OutlierConfig,
    ) -> bool {
        let mut g = self.lock();
        g.outstanding = g.outstanding.saturating_sub(1);
        let sample = if success {
            latency_ms / (1.0 + f64::from(pick.outstanding_before))
        } else {
            latency_ms.max(pick.penalty_ms)
        };
        g.service.observe(sample, now_ms, cfg.latency_decay_ms);
        let failed = if success { 0.0 } else { 1.0 };
        g.failure_rate += cfg.failure_rate_alpha * (failed - g.failure_rate);
        g.outcomes = g.outcomes.saturating_add(1);
        g.outlier.record(success, now_ms, outlier)
    }

    /// A snapshot reporting `queue_depth` was accepted at `now_ms`.
    pub fn on_snapshot(&self, queue_depth: u32, now_ms: u64) {
        let mut g = self.lock();
        g.unseen_backlog = (f64::from(queue_depth) - f64::from(g.outstanding)).max(0.0);
        g.unseen_at_ms = now_ms;
    }

    /// Ejects the worker at `now_ms`; returns the ejection length, ms.
    pub fn eject(&self, now_ms: u64, cause: EjectionCause, cfg: &OutlierConfig) -> u64 {
        self.lock().outlier.eject(now_ms, cause, cfg)
    }

    /// Ends the success-rate interval (see [`OutlierDetector::end_interval`]).
    pub fn end_interval(&self, now_ms: u64) {
        self.lock().outlier.end_interval(now_ms);
    }

    /// The worker came back from silence: what was learnt of the old
    /// process (speed, failures) no longer holds.
    pub fn forget_outcomes(&self) {
        let mut g = self.lock();
        g.service.reset();
        g.failure_rate = 0.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(before: u32) -> PickRecord {
        PickRecord {
            outstanding_before: before,
            penalty_ms: 100.0,
        }
    }

    #[test]
    fn outstanding_is_exact_and_never_negative() {
        let (e, c, o) = (LocalEvidence::default(), EvidenceConfig::default(), OutlierConfig::default());
        assert_eq!(e.pick(), 0);
        assert_eq!(e.pick(), 1);
        e.complete(&rec(0), 2.0, true, 10, &c, &o);
        assert_eq!(e.snapshot().outstanding, 1);
        e.expire();
        e.expire();
        assert_eq!(e.snapshot().outstanding, 0);
    }

    #[test]
    fn a_snapshot_does_not_reset_outstanding_and_counts_only_unseen_backlog() {
        let e = LocalEvidence::default();
        for _ in 0..3 {
            e.pick();
        }
        e.on_snapshot(5, 1_000);
        let s = e.snapshot();
        assert_eq!(s.outstanding, 3);
        assert_eq!(s.unseen_backlog, 2.0);
        assert_eq!(s.unseen_backlog_at(1_000, 2_000), 2.0);
        let later = s.unseen_backlog_at(3_000, 2_000);
        assert!((later - 2.0 * (-1f64).exp()).abs() < 1e-12, "{later}");
        // Our picks explain all of a smaller queue.
        e.on_snapshot(2, 1_000);
        assert_eq!(e.snapshot().unseen_backlog, 0.0);
    }

    #[test]
    fn a_queued_request_teaches_the_service_time_not_the_wait() {
        let (e, c, o) = (LocalEvidence::default(), EvidenceConfig::default(), OutlierConfig::default());
        // Waited behind 3 others: 8 ms is 4 service times of 2 ms.
        e.pick();
        e.complete(&rec(3), 8.0, true, 10, &c, &o);
        assert_eq!(e.snapshot().service.last_ms(), Some(2.0));
    }

    #[test]
    fn a_fast_failure_counts_as_the_timeout() {
        let (e, c, o) = (LocalEvidence::default(), EvidenceConfig::default(), OutlierConfig::default());
        e.pick();
        e.complete(&rec(0), 2.0, true, 10, &c, &o);
        e.pick();
        // Refused after 0.1 ms: the peak takes the 100 ms penalty at once.
        e.complete(&rec(0), 0.1, false, 11, &c, &o);
        let s = e.snapshot();
        assert_eq!(s.service.last_ms(), Some(100.0));
        assert!((s.failure_rate - 0.05).abs() < 1e-12);
    }

    #[test]
    fn consecutive_failures_ask_for_ejection() {
        let (e, c, o) = (LocalEvidence::default(), EvidenceConfig::default(), OutlierConfig::default());
        let asks: Vec<bool> = (0..5)
            .map(|i| {
                e.pick();
                e.complete(&rec(0), 100.0, false, i, &c, &o)
            })
            .collect();
        assert_eq!(asks, [false, false, false, false, true]);
    }

    #[test]
    fn expiry_follows_the_timeout_and_is_bounded() {
        let c = EvidenceConfig::default();
        assert_eq!(c.expiry_ms(Some(100)), 200);
        assert_eq!(c.expiry_ms(None), 10_000);
        assert_eq!(c.expiry_ms(Some(u64::MAX / 4)), 60_000);
        assert_eq!(c.penalty_ms(Some(100)), 100.0);
        assert_eq!(c.penalty_ms(None), 1_000.0);
    }
}

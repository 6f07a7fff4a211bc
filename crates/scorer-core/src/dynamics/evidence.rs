//! One worker's local evidence: what the service itself saw of it, never
//! reset by a telemetry snapshot.
//!
//! * **Outstanding picks**, exact: `+1` at a pick, `−1` at its feedback or
//!   when the pick expires without feedback (see [`EvidenceConfig::expiry_ms`]).
//! * **Service time**, a [`PeakEwma`] of each outcome's latency less the
//!   time it waited behind the previous request: on a worker that serves in
//!   order, a request starts when the outcome before it arrives (or when it
//!   was picked, if later), so `latency − (last outcome − pick)` is its own
//!   service time, not its queue (which `outstanding` already counts). On a
//!   worker serving `c` at once this is the time between departures, about
//!   a service time over `c`, which is what `(1 + outstanding)` multiplies.
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
//! * **The other routers' outstanding picks** (an embedded balancer's share
//!   of the view's `load`), kept with the instant they were true: a count
//!   that is a few service times old says little about where the next
//!   request should go, so the cost stage pulls it toward the pool's median
//!   as it ages (Dahlin, "Interpreting Stale Load Information", IEEE TPDS
//!   2000; C3's treatment of the others' load). Keeping the count as if it
//!   were fresh sends every router to the same apparent minimum (herding:
//!   Mitzenmacher, "How Useful Is Old Information?", IEEE TPDS 2000).
//! * **The head of the line**: when the oldest outstanding pick was made.
//!   On a worker that serves in order, the oldest pick is the one in
//!   service, and it started when the previous outcome arrived (or when it
//!   was picked, if later); a request in service for much longer than a
//!   service time is likely a large one, and what waits behind it waits
//!   longer (head-of-line blocking).
//! * The worker's [`OutlierDetector`].
//!
//! # Concurrency
//!
//! A `Mutex` around a few plain numbers:
//! the critical sections are a few float operations, never allocate or
//! block, and a poisoned lock is recovered with the last values.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use super::outlier::{EjectionCause, OutlierConfig, OutlierDetector};
use super::peak_ewma::PeakEwma;

/// Default [`EvidenceConfig::latency_decay_ms`], ms.
pub const DEFAULT_LATENCY_DECAY_MS: u64 = 100;
/// Default [`EvidenceConfig::failure_rate_decay_ms`], ms.
pub const DEFAULT_FAILURE_RATE_DECAY_MS: u64 = 10_000;
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
/// Default [`EvidenceConfig::others_load_decay_service_times`].
pub const DEFAULT_OTHERS_LOAD_DECAY_SERVICE_TIMES: f64 = 0.25;

/// `[evidence]`: the service's own per-worker evidence. Times in ms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EvidenceConfig {
    /// Peak-EWMA decay of the service-time estimate, ms, `>= 1`: how fast a
    /// sample below the estimate is blended in, and how fast an estimate
    /// without new samples returns to the pool's median. Default 100.
    pub latency_decay_ms: u64,
    /// Time constant with which the observed failure rate fades while no
    /// outcome arrives, ms, `>= 1`. Default 10 000.
    pub failure_rate_decay_ms: u64,
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
    /// Time constant with which the other routers' outstanding picks on a
    /// worker are pulled toward the pool's median as they age, in the
    /// pool's median service times, within 0.01..=1000. Default 0.25: a
    /// count a quarter of a service time old keeps `1/e` of its difference
    /// from the median (tuned in the simulator's `many-routers` scenarios,
    /// see docs/selection.md).
    pub others_load_decay_service_times: f64,
}

impl Default for EvidenceConfig {
    fn default() -> Self {
        Self {
            latency_decay_ms: DEFAULT_LATENCY_DECAY_MS,
            failure_rate_decay_ms: DEFAULT_FAILURE_RATE_DECAY_MS,
            failure_penalty_ms: DEFAULT_FAILURE_PENALTY_MS,
            expiry_factor: DEFAULT_EXPIRY_FACTOR,
            default_expiry_ms: DEFAULT_EXPIRY_MS,
            max_expiry_ms: DEFAULT_MAX_EXPIRY_MS,
            failure_rate_alpha: DEFAULT_FAILURE_RATE_ALPHA,
            unseen_backlog_decay_ms: DEFAULT_UNSEEN_BACKLOG_DECAY_MS,
            others_load_decay_service_times: DEFAULT_OTHERS_LOAD_DECAY_SERVICE_TIMES,
        }
    }
}

impl EvidenceConfig {
    /// Checks the fields; `Err` names the bad key.
    pub fn validate(&self) -> Result<(), String> {
        for (k, v) in [
            ("latency_decay_ms", self.latency_decay_ms),
            ("failure_rate_decay_ms", self.failure_rate_decay_ms),
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
        if !(0.01..=1_000.0).contains(&self.others_load_decay_service_times) {
            return Err(format!(
                "others_load_decay_service_times must be within 0.01..=1000, got {}",
                self.others_load_decay_service_times
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
    /// When the pick was made, monotonic ms.
    pub picked_ms: u64,
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
    /// Picks made since the worker was first seen.
    pub picks: u64,
    /// Service-time estimator (read it with [`PeakEwma::value_at`]).
    pub service: PeakEwma,
    /// Observed failure rate at the last outcome, fraction 0..=1 (read it
    /// with [`EvidenceSnapshot::failure_rate_at`]).
    pub failure_rate: f64,
    /// Outcomes seen.
    pub outcomes: u64,
    /// When the last outcome arrived, monotonic ms.
    pub last_outcome_ms: u64,
    /// Unseen backlog when the last snapshot arrived, requests.
    pub unseen_backlog: f64,
    /// When the last snapshot arrived, monotonic ms.
    pub unseen_at_ms: u64,
    /// The other routers' outstanding picks, as last heard, requests.
    pub others_backlog: f64,
    /// When that count was true, monotonic ms (when it arrived less its
    /// age).
    pub others_at_ms: u64,
    /// Outlier detector.
    pub outlier: OutlierDetector,
    /// When the oldest outstanding pick was made, monotonic ms.
    pub oldest_pick_ms: Option<u64>,
}

impl EvidenceSnapshot {
    /// The observed failure rate at `now_ms`, fading with `decay_ms` since
    /// the last outcome: a worker avoided after a bad spell is not held to
    /// it forever.
    pub fn failure_rate_at(&self, now_ms: u64, decay_ms: u64) -> f64 {
        let idle = now_ms.saturating_sub(self.last_outcome_ms) as f64;
        self.failure_rate * (-idle / decay_ms.max(1) as f64).exp()
    }

    /// How long the request at the head of the worker's line has been in
    /// service at `now_ms`, ms: since the later of its pick and the last
    /// outcome; 0 without outstanding picks.
    pub fn head_elapsed_ms(&self, now_ms: u64) -> f64 {
        match self.oldest_pick_ms {
            Some(t) if self.outstanding > 0 => {
                now_ms.saturating_sub(t.max(self.last_outcome_ms)) as f64
            }
            _ => 0.0,
        }
    }

    /// The unseen backlog at `now_ms`, requests: the last snapshot's,
    /// moved toward `prior` (the pool's typical unseen backlog) as the
    /// snapshot ages, with time constant `decay_ms`. An old report of an
    /// empty queue says little about the queue now.
    pub fn unseen_backlog_at(&self, now_ms: u64, prior: f64, decay_ms: u64) -> f64 {
        let age = now_ms.saturating_sub(self.unseen_at_ms) as f64;
        let w = (-age / decay_ms.max(1) as f64).exp();
        (self.unseen_backlog * w + prior.max(0.0) * (1.0 - w)).max(0.0)
    }

    /// The other routers' outstanding picks at `now_ms`, requests: the last
    /// count heard, moved toward `prior` (the candidates' median count) as
    /// it ages, with time constant `tau_ms` (about a service time: after
    /// that long the count has turned over). An old count says how loaded
    /// the pool is, hardly which worker is.
    pub fn others_backlog_at(&self, now_ms: u64, prior: f64, tau_ms: f64) -> f64 {
        let age = now_ms.saturating_sub(self.others_at_ms) as f64;
        let w = (-age / tau_ms.max(1e-3)).exp();
        (self.others_backlog * w + prior.max(0.0) * (1.0 - w)).max(0.0)
    }
}

/// Pick times kept per worker for the head of the line; beyond this many
/// outstanding picks the newest are not timed (the head is what matters).
pub const MAX_TIMED_PICKS: usize = 4_096;

#[derive(Debug, Default)]
struct State {
    snap: EvidenceSnapshot,
    /// Times of the outstanding picks, oldest first (releases take the
    /// oldest: a worker serves in order).
    picks: VecDeque<u64>,
}

impl std::ops::Deref for State {
    type Target = EvidenceSnapshot;
    fn deref(&self) -> &EvidenceSnapshot {
        &self.snap
    }
}

impl std::ops::DerefMut for State {
    fn deref_mut(&mut self) -> &mut EvidenceSnapshot {
        &mut self.snap
    }
}

impl State {
    fn release(&mut self) {
        self.snap.outstanding = self.snap.outstanding.saturating_sub(1);
        self.picks.pop_front();
        if self.snap.outstanding == 0 {
            self.picks.clear();
        }
    }
}

/// A worker's evidence. `Send + Sync`.
#[derive(Debug, Default)]
pub struct LocalEvidence {
    inner: Mutex<State>,
}

impl LocalEvidence {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A copy of the evidence.
    pub fn snapshot(&self) -> EvidenceSnapshot {
        let g = self.lock();
        EvidenceSnapshot {
            oldest_pick_ms: g.picks.front().copied(),
            ..g.snap
        }
    }

    /// Counts a pick made at `now_ms`; returns the outstanding picks before it.
    pub fn pick(&self, now_ms: u64) -> u32 {
        let mut g = self.lock();
        let before = g.outstanding;
        g.outstanding = g.outstanding.saturating_add(1);
        g.snap.picks = g.snap.picks.saturating_add(1);
        if g.picks.len() < MAX_TIMED_PICKS {
            g.picks.push_back(now_ms);
        }
        before
    }

    /// A pick expired (or was evicted) without feedback: it stops counting.
    pub fn expire(&self) {
        self.lock().release();
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
        g.release();
        let sample = if success {
            let waited = g.last_outcome_ms.saturating_sub(pick.picked_ms) as f64;
            (latency_ms - waited).clamp(latency_ms.min(1e-3), latency_ms)
        } else {
            latency_ms.max(pick.penalty_ms)
        };
        g.service.observe(sample, now_ms, cfg.latency_decay_ms);
        let failed = if success { 0.0 } else { 1.0 };
        let rate = g.failure_rate_at(now_ms, cfg.failure_rate_decay_ms);
        g.failure_rate = rate + cfg.failure_rate_alpha * (failed - rate);
        g.last_outcome_ms = g.last_outcome_ms.max(now_ms);
        g.outcomes = g.outcomes.saturating_add(1);
        g.outlier.record(success, now_ms, outlier)
    }

    /// A snapshot reporting `queue_depth` was accepted at `now_ms`: the
    /// unseen backlog is the queue that neither this router's outstanding
    /// picks nor the other routers' (as last heard) explain.
    pub fn on_snapshot(&self, queue_depth: u32, now_ms: u64) {
        let mut g = self.lock();
        let explained = f64::from(g.outstanding) + g.others_backlog;
        g.unseen_backlog = (f64::from(queue_depth) - explained).max(0.0);
        g.unseen_at_ms = now_ms;
    }

    /// The other routers' outstanding picks on this worker, `others`, as
    /// they were at monotonic `at_ms` (an embedded balancer's share of the
    /// view's load, received less its age): backlog this router did not
    /// send. Kept apart from the snapshot's unseen backlog, with its age.
    pub fn on_others(&self, others: u32, at_ms: u64) {
        let mut g = self.lock();
        g.others_backlog = f64::from(others);
        g.others_at_ms = at_ms;
    }

    /// Ejects the worker at `now_ms`; returns the ejection length, ms.
    pub fn eject(&self, now_ms: u64, cause: EjectionCause, cfg: &OutlierConfig) -> u64 {
        self.lock().outlier.eject(now_ms, cause, cfg)
    }

    /// Ends the success-rate interval (see [`OutlierDetector::end_interval`]).
    pub fn end_interval(&self, now_ms: u64) {
        self.lock().outlier.end_interval(now_ms);
    }

    /// The worker reports again at `now_ms` after silence: what was learnt
    /// of the old process (speed, failures) no longer holds, and an outlier
    /// ejection ends (the report is a passed health check: Envoy's
    /// `successful_active_health_check_uneject_host`, default on). Slow
    /// start follows.
    pub fn on_revival(&self, now_ms: u64) {
        let mut g = self.lock();
        g.snap.service.reset();
        g.snap.failure_rate = 0.0;
        let o = &mut g.snap.outlier;
        if o.is_ejected(now_ms) {
            o.ejected_until_ms = now_ms;
        }
        o.consecutive_failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(before: u32) -> PickRecord {
        PickRecord {
            picked_ms: 0,
            outstanding_before: before,
            penalty_ms: 100.0,
        }
    }

    #[test]
    fn outstanding_is_exact_and_never_negative() {
        let (e, c, o) = (
            LocalEvidence::default(),
            EvidenceConfig::default(),
            OutlierConfig::default(),
        );
        assert_eq!(e.pick(0), 0);
        assert_eq!(e.pick(0), 1);
        assert_eq!(e.snapshot().oldest_pick_ms, Some(0));
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
            e.pick(0);
        }
        e.on_snapshot(5, 1_000);
        let s = e.snapshot();
        assert_eq!(s.outstanding, 3);
        assert_eq!(s.unseen_backlog, 2.0);
        assert_eq!(s.unseen_backlog_at(1_000, 0.0, 2_000), 2.0);
        let later = s.unseen_backlog_at(3_000, 0.0, 2_000);
        assert!((later - 2.0 * (-1f64).exp()).abs() < 1e-12, "{later}");
        // Toward the pool's typical backlog, not toward empty.
        let w = (-1f64).exp();
        assert!(
            (s.unseen_backlog_at(3_000, 10.0, 2_000) - (2.0 * w + 10.0 * (1.0 - w))).abs() < 1e-12
        );
        // Our picks explain all of a smaller queue.
        e.on_snapshot(2, 1_000);
        assert_eq!(e.snapshot().unseen_backlog, 0.0);
    }

    #[test]
    fn the_others_load_keeps_its_age_and_fades_toward_the_median_in_service_times() {
        let e = LocalEvidence::default();
        e.pick(0);
        // Heard at 1 000, as it was at 995: 5 ms old on arrival.
        e.on_others(6, 995);
        let s = e.snapshot();
        assert_eq!((s.others_backlog, s.others_at_ms), (6.0, 995));
        // With a 2 ms service time, 5 ms old keeps e^-2.5 of its
        // difference from the pool's median (2).
        let w = (-2.5f64).exp();
        let at = s.others_backlog_at(1_000, 2.0, 2.0);
        assert!((at - (6.0 * w + 2.0 * (1.0 - w))).abs() < 1e-12, "{at}");
        // A snapshot's queue counts only what neither router explains:
        // 9 reported = 1 ours + 6 theirs + 2 unseen.
        e.on_snapshot(9, 1_000);
        assert_eq!(e.snapshot().unseen_backlog, 2.0);
        assert_eq!(e.snapshot().others_backlog, 6.0);
    }

    #[test]
    fn a_queued_request_teaches_the_service_time_not_the_wait() {
        let (e, c, o) = (
            LocalEvidence::default(),
            EvidenceConfig::default(),
            OutlierConfig::default(),
        );
        // Both picked at 0; the first answers at 20 after 20 ms, the second
        // at 22 after 22 ms, of which it waited 20 behind the first.
        e.pick(0);
        e.pick(0);
        e.complete(&rec(0), 20.0, true, 20, &c, &o);
        assert_eq!(e.snapshot().service.last_ms(), Some(20.0));
        e.complete(&rec(1), 22.0, true, 22, &c, &o);
        let s = e.snapshot().service.last_ms().unwrap();
        let w = (-2f64 / 100.0).exp();
        assert!((s - (20.0 * w + 2.0 * (1.0 - w))).abs() < 1e-9, "{s}");
    }

    #[test]
    fn a_fast_failure_counts_as_the_timeout() {
        let (e, c, o) = (
            LocalEvidence::default(),
            EvidenceConfig::default(),
            OutlierConfig::default(),
        );
        e.pick(0);
        e.complete(&rec(0), 2.0, true, 10, &c, &o);
        e.pick(0);
        // Refused after 0.1 ms: the peak takes the 100 ms penalty at once.
        e.complete(&rec(0), 0.1, false, 11, &c, &o);
        let s = e.snapshot();
        assert_eq!(s.service.last_ms(), Some(100.0));
        assert!((s.failure_rate - 0.05).abs() < 1e-12);
    }

    #[test]
    fn consecutive_failures_ask_for_ejection() {
        let (e, c, o) = (
            LocalEvidence::default(),
            EvidenceConfig::default(),
            OutlierConfig::default(),
        );
        let asks: Vec<bool> = (0..5)
            .map(|i| {
                e.pick(0);
                e.complete(&rec(0), 100.0, false, i, &c, &o)
            })
            .collect();
        assert_eq!(asks, [false, false, false, false, true]);
    }

    #[test]
    fn the_head_of_the_line_started_at_the_last_outcome_or_its_pick() {
        let (e, c, o) = (
            LocalEvidence::default(),
            EvidenceConfig::default(),
            OutlierConfig::default(),
        );
        e.pick(100);
        e.pick(105);
        assert_eq!(e.snapshot().head_elapsed_ms(130), 30.0);
        // The first answers at 140: the second has been in service since.
        e.complete(&rec(0), 40.0, true, 140, &c, &o);
        let s = e.snapshot();
        assert_eq!(s.oldest_pick_ms, Some(105));
        assert_eq!(s.head_elapsed_ms(150), 10.0);
        e.expire();
        assert_eq!(e.snapshot().head_elapsed_ms(200), 0.0);
    }

    #[test]
    fn a_revived_worker_is_uneejected_and_forgets_its_outcomes() {
        let (e, c, o) = (
            LocalEvidence::default(),
            EvidenceConfig::default(),
            OutlierConfig::default(),
        );
        e.pick(0);
        e.complete(&rec(0), 100.0, false, 10, &c, &o);
        e.eject(10, EjectionCause::ConsecutiveFailures, &o);
        assert!(e.snapshot().outlier.is_ejected(5_000));
        e.on_revival(5_000);
        let s = e.snapshot();
        assert!(!s.outlier.is_ejected(5_000));
        assert_eq!(s.outlier.returned_at_ms(5_000), Some(5_000));
        assert_eq!(s.service.samples(), 0);
        assert_eq!(s.failure_rate, 0.0);
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

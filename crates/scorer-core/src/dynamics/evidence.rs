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
use crate::locality::CacheEvidence;

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
    /// The routing-age bucket of the request's key on this worker when it
    /// was picked ([`crate::locality::age_bucket`]); `None` without a
    /// routing index.
    pub warm_bucket: Option<u8>,
    /// [`crate::locality::hash_str`] of the request's key prefix, to learn
    /// the `(prefix, worker)` hit rate from the outcome
    /// ([`crate::locality::PrefixHitRates`]); `None` with locality off.
    pub prefix_hash: Option<u64>,
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
    /// What outcomes that said hit or miss taught.
    pub cache: CacheEvidence,
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
        self.complete_cached(pick, latency_ms, success, None, now_ms, cfg, outlier)
    }

    /// [`LocalEvidence::complete`], with whether the worker served it from
    /// its cache: a success's service time then teaches the hit or miss
    /// time, and the pick's routing-age bucket how often such keys are warm.
    #[allow(clippy::too_many_arguments)]
    pub fn complete_cached(
        &self,
        pick: &PickRecord,
        latency_ms: f64,
        success: bool,
        cache_hit: Option<bool>,
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
        if let Some(hit) = cache_hit.filter(|_| success) {
            g.snap.cache.observe(pick.warm_bucket, sample, hit);
        }
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
        g.snap.cache.cold_since_ms = now_ms;
        let o = &mut g.snap.outlier;
        if o.is_ejected(now_ms) {
            o.ejected_until_ms = now_ms;
        }
        o.consecutive_failures = 0;
    }
}

//! Per-worker dynamics for the scoring service: what happens to a worker's
//! score *over time*, on top of the stateless rule score (0..=100).
//!
//! # Guide
//!
//! One concept per file:
//!
//! * [`penalty`] — the penalty state machine `Healthy → Observation →
//!   Cooldown → Recovering → Healthy`: ejection with exponential backoff
//!   (after Envoy outlier detection) and a linear slow-start ramp on return
//!   (after Envoy `slow_start_config` and HAProxy `slowstart`).
//! * [`penalty_config`] — its `[penalty]` tunables and defaults.
//! * [`penalty_reason`] — the numbers behind a penalty state's explanation,
//!   formatted only when displayed.
//! * [`freshness`] — trust in a telemetry snapshot as it ages, and pulling
//!   stale metrics toward a pessimistic prior (never better than fresh).
//! * [`evidence`] — the service's own evidence per worker: exact
//!   outstanding picks, a peak-EWMA service time from outcomes, the observed
//!   failure rate and the unseen backlog (C3), never reset by a snapshot.
//! * [`peak_ewma`] — the peak-sensitive EWMA behind the service time (tower,
//!   Finagle).
//! * [`outlier`] — ejection from outcomes with Envoy's semantics
//!   (consecutive failures, success rate, `max_ejection_percent`).
//!
//! # Conventions
//!
//! * Time is never read here. Every function that needs it takes
//!   `now_ms: u64`, monotonic server milliseconds supplied by the caller.
//!   Elapsed times use saturating arithmetic: a `now_ms` earlier than a
//!   stored time counts as 0 ms elapsed and never panics.
//! * Fractions are `f64` in `0..=1`; scores are `f64` on the 0..=100 rule
//!   scale; durations are `u64` ms (`_ms` suffix).
//! * No `NaN` ever enters stored state: non-finite rule scores are ignored
//!   by [`PenaltyTracker::evaluate`], and the helpers document what they do
//!   with `NaN` inputs.
//! * Every default is a named `pub const` (`DEFAULT_*`). Configs have a
//!   `validate()` that names the bad key; validated configs are a
//!   precondition of the functions taking them, checked with
//!   `debug_assert!` (release builds still never panic on an invalid
//!   config). Runtime data (scores, times, counts) is never `debug_assert!`ed.
//!
//! # How a caller composes them (per worker, per routing decision)
//!
//! ```text
//! on accepted snapshot (at now_ms):
//!     raw metrics → rule_score (0..=100)
//!     penalty.evaluate(rule_score, now_ms, &cfg.penalty)   // log the Transition, if any
//!     evidence.on_snapshot(queue_depth, now_ms)            // unseen backlog; nothing reset
//!
//! on routing request (at now_ms):
//!     score    = rule_score(...)                          // health, 0..=100
//!     view     = penalty.state_at(now_ms, &cfg.penalty)   // read only
//!     skip the worker if !view.eligible or it is ejected by outliers
//!     E        = scoring::apply_cost(evidence, snapshot, health)  // routing cost (and expected latency)
//!
//! on pick:      evidence.pick()                          // +1 outstanding
//! on feedback:  evidence.complete(...)                   // −1, learn, maybe eject
//! on expiry:    evidence.expire()                        // −1
//! ```

pub mod evidence;
#[cfg(test)]
mod evidence_tests;
pub mod freshness;
pub mod outlier;
pub mod peak_ewma;
pub mod penalty;
pub mod penalty_config;
pub mod penalty_reason;

pub use crate::dynamics::evidence::{EvidenceConfig, EvidenceSnapshot, LocalEvidence, PickRecord};
pub use crate::dynamics::freshness::{
    DEFAULT_DEAD_AFTER_MS, DEFAULT_FRESH_MS, FreshnessConfig, Priors, freshness_factor, median,
    median_in, pull_toward_prior,
};
pub use crate::dynamics::outlier::{EjectionCause, OutlierConfig, OutlierDetector};
pub use crate::dynamics::peak_ewma::PeakEwma;
pub use crate::dynamics::penalty::{
    DEFAULT_BACKOFF_RESET_AFTER_MS, DEFAULT_COOLDOWN_AFTER_CONSECUTIVE_LOW,
    DEFAULT_COOLDOWN_BASE_MS, DEFAULT_COOLDOWN_FACTOR, DEFAULT_COOLDOWN_MAX_MS,
    DEFAULT_LOW_SCORE_THRESHOLD, DEFAULT_MIN_WEIGHT_FRACTION, DEFAULT_OBSERVATION_FACTOR,
    DEFAULT_RECOVER_CONSECUTIVE, DEFAULT_RECOVER_SCORE_THRESHOLD, DEFAULT_SLOW_START_MS,
    PenaltyConfig, PenaltyState, PenaltyTracker, PenaltyView, Transition, cooldown_len_ms,
    slow_start_fraction, slow_start_weight,
};
pub use crate::dynamics::penalty_reason::PenaltyReason;

//! Per-worker penalty state machine: observation, ejection ("cooldown") with
//! exponential backoff, and slow-start recovery.
//!
//! # Sources
//!
//! * Ejection with a growing ejection time is Envoy outlier detection
//!   (<https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/outlier>):
//!   a host is ejected for `base_ejection_time` × a multiplier, capped at
//!   `max_ejection_time`, and the multiplier shrinks again only while the host
//!   stays healthy. We differ in two documented ways: the multiplier is
//!   exponential (`2^level`) rather than linear, and it is reset to 0 (not
//!   decremented) after [`PenaltyConfig::backoff_reset_after_ms`] of
//!   *continuous* `Healthy` state.
//! * Slow start is Envoy's `slow_start_config` (`slow_start_window`,
//!   `min_weight_percent`, with `aggression = 1.0`, i.e. linear) and
//!   HAProxy's `slowstart` server option (weight grows linearly from a minimum
//!   to 100 % over the window after a server comes back up).
//!
//! # States
//!
//! ```text
//! from         event (accepted evaluation unless noted)          to
//! Healthy      score < low                                       Observation
//! Observation  N consecutive low (entering one included)         Cooldown
//! Observation  M consecutive good                                Healthy
//! Cooldown     now_ms >= cooldown_until_ms (a read is enough)    Recovering
//! Recovering   N consecutive low                                 Cooldown (level + 1)
//! Recovering   slow start finished and M consecutive good        Healthy
//! ```
//!
//! With the defaults: low = score `< 40`, good = score `> 60`, middle = score
//! in `[40, 60]`, N = [`PenaltyConfig::cooldown_after_consecutive_low`] = 3,
//! M = [`PenaltyConfig::recover_consecutive`] = 3.
//!
//! # Transition rules (precise)
//!
//! Every *accepted* evaluation (finite `rule_score`, worker not inside an
//! active cooldown) classifies the score as low, middle or good and updates
//! two streak counters:
//!
//! * low: `low_streak += 1`, `good_streak = 0`;
//! * good: `good_streak += 1`, `low_streak = 0`;
//! * middle: **both** streaks reset to 0 (hysteresis: a middling score is
//!   neither evidence of failure nor of recovery, and breaks both runs).
//!
//! Then, by state:
//!
//! * `Healthy`: a low score enters `Observation` with `low_streak = 1` (the
//!   entering evaluation counts). Middle and good scores change nothing.
//! * `Observation`: `low_streak >= N` enters `Cooldown`; `good_streak >= M`
//!   returns to `Healthy`; otherwise stay.
//! * `Cooldown`: while `now_ms < cooldown_until_ms` evaluations are ignored
//!   entirely (the worker is ejected; they count neither as low, as good, nor
//!   as healthy time) and `evaluate` returns `None`. Once
//!   `now_ms >= cooldown_until_ms` the worker *is* `Recovering` (both for
//!   [`PenaltyTracker::state_at`] and for the next `evaluate`, which first
//!   records that change and then applies its score as a `Recovering`
//!   evaluation).
//! * `Recovering`: `low_streak >= N` re-enters `Cooldown` at the next backoff
//!   level; the worker becomes `Healthy` at the first evaluation where the
//!   slow-start ramp has finished (`now_ms - cooldown_until_ms >=
//!   slow_start_ms`) **and** `good_streak >= M` (good scores received during
//!   the ramp count toward the streak). The ramp starts at
//!   `cooldown_until_ms`, i.e. it restarts on every return from cooldown.
//!
//! Entering `Cooldown` lasts [`cooldown_len_ms`]`(level)` =
//! `min(cooldown_max_ms, cooldown_base_ms × 2^level)` where `level` is the
//! backoff level *before* the entry; the level is then incremented (so with
//! the defaults successive cooldowns last 1, 2, 4, 8, 16, 30, 30, ... s).
//! Both streaks reset on entry.
//!
//! The backoff level resets to 0 on an evaluation that leaves the worker
//! `Healthy` when the worker has been continuously `Healthy` (since the
//! evaluation that made it `Healthy`) for at least `backoff_reset_after_ms`.
//! Any excursion to `Observation` restarts that clock; time spent in
//! `Cooldown` or `Recovering` never counts; a single good report never resets
//! the level.
//!
//! Non-finite scores (`NaN`, `±inf`) are ignored: no state, counter or clock
//! changes and `evaluate` returns `None`. Finite scores outside `0..=100` are
//! compared against the thresholds as they are.
//!
//! Time only ever enters as `now_ms` (monotonic server milliseconds). If
//! `now_ms` goes backwards, all elapsed times saturate at 0: nothing panics,
//! an active cooldown simply has not ended yet and a slow-start ramp is at
//! its floor.

use super::penalty_reason::PenaltyReason;
use serde::Serialize;

pub use super::penalty_config::{
    DEFAULT_BACKOFF_RESET_AFTER_MS, DEFAULT_COOLDOWN_AFTER_CONSECUTIVE_LOW,
    DEFAULT_COOLDOWN_BASE_MS, DEFAULT_COOLDOWN_FACTOR, DEFAULT_COOLDOWN_MAX_MS,
    DEFAULT_LOW_SCORE_THRESHOLD, DEFAULT_MIN_WEIGHT_FRACTION, DEFAULT_OBSERVATION_FACTOR,
    DEFAULT_RECOVER_CONSECUTIVE, DEFAULT_RECOVER_SCORE_THRESHOLD, DEFAULT_SLOW_START_MS,
    PenaltyConfig,
};

/// Penalty state of one worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PenaltyState {
    /// No recent low scores; full score, full weight.
    Healthy,
    /// At least one recent low score; score multiplied by
    /// [`PenaltyConfig::observation_factor`], still eligible.
    Observation,
    /// Ejected until `cooldown_until_ms`; not eligible.
    Cooldown,
    /// Back from cooldown; eligible, weight ramping up (slow start).
    Recovering,
}

impl PenaltyState {
    /// Returns the stable snake_case name (same as the serde name), e.g.
    /// `"cooldown"`.
    pub fn as_str(self) -> &'static str {
        match self {
            PenaltyState::Healthy => "healthy",
            PenaltyState::Observation => "observation",
            PenaltyState::Cooldown => "cooldown",
            PenaltyState::Recovering => "recovering",
        }
    }
}

/// A state change produced by [`PenaltyTracker::evaluate`], for logging.
///
/// Successive transitions of one tracker form a chain: each `from` equals the
/// previous `to`. `from == to` only happens for `Cooldown → Cooldown` when a
/// cooldown ended and the very evaluation that noticed it ejected the worker
/// again (possible only with `cooldown_after_consecutive_low = 1`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Transition {
    /// State stored before the evaluation.
    pub from: PenaltyState,
    /// State stored after the evaluation.
    pub to: PenaltyState,
    /// Plain-sentence explanation, including the score and thresholds.
    pub reason: String,
}

/// Read-only view of a worker's penalty at a given `now_ms`
/// (see [`PenaltyTracker::state_at`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PenaltyView {
    /// Effective state at `now_ms` (an expired `Cooldown` reads as
    /// `Recovering`).
    pub state: PenaltyState,
    /// Multiplier for the rule score, fraction 0..=1:
    /// `observation_factor` in `Observation`, `cooldown_factor` in
    /// `Cooldown`, 1.0 otherwise.
    pub score_factor: f64,
    /// Whether routers may pick this worker: `false` only in `Cooldown`.
    pub eligible: bool,
    /// End of the active cooldown (monotonic ms); `Some` only in `Cooldown`.
    pub cooldown_until_ms: Option<u64>,
    /// Weight multiplier, fraction in `[min_weight_fraction, 1]`:
    /// `max(min_weight_fraction, elapsed_ms / slow_start_ms)` while
    /// `Recovering` (elapsed since `cooldown_until_ms`), 1.0 once the ramp
    /// finished and in `Healthy`/`Observation`, and `min_weight_fraction` in
    /// `Cooldown` (the value the ramp will start from; the worker is not
    /// eligible anyway).
    pub slow_start_fraction: f64,
    /// Number of cooldowns entered since the last backoff reset; the next
    /// cooldown lasts [`cooldown_len_ms`]`(backoff_level)`.
    pub backoff_level: u32,
    /// Explanation of the state; `Display` (and JSON) give the sentence.
    pub reason: PenaltyReason,
}

/// Returns the length in ms of a cooldown entered at backoff level
/// `backoff_level`: `min(cooldown_max_ms, cooldown_base_ms × 2^backoff_level)`,
/// computed with saturating arithmetic (never overflows or panics).
pub fn cooldown_len_ms(backoff_level: u32, cfg: &PenaltyConfig) -> u64 {
    let multiplier = 1u64.checked_shl(backoff_level).unwrap_or(u64::MAX);
    cfg.cooldown_base_ms
        .saturating_mul(multiplier)
        .min(cfg.cooldown_max_ms)
}

/// Returns the slow-start weight fraction `elapsed_ms` after a ramp started:
/// `max(min_weight_fraction, elapsed_ms / slow_start_ms)`, 1.0 once
/// `elapsed_ms >= slow_start_ms` or when `slow_start_ms == 0`. Always within
/// `[min_weight_fraction, 1]` for a valid config.
pub fn slow_start_fraction(elapsed_ms: u64, cfg: &PenaltyConfig) -> f64 {
    if cfg.slow_start_ms == 0 || elapsed_ms >= cfg.slow_start_ms {
        return 1.0;
    }
    let linear = elapsed_ms as f64 / cfg.slow_start_ms as f64;
    // `f64::max`/`min` ignore a NaN operand, so an invalid floor cannot leak NaN.
    linear.max(cfg.min_weight_fraction).min(1.0)
}

/// Returns `weight × fraction`: the weight a router should use for a worker
/// in slow start (`fraction` = [`PenaltyView::slow_start_fraction`]).
///
/// Input handling (no panics, no NaN produced from a finite weight): a `NaN`
/// fraction is treated as 1.0 (no ramp known), other fractions are clamped to
/// `0..=1`; a `NaN` or negative weight yields 0.0.
///
/// Because [`PenaltyConfig::min_weight_fraction`] is validated to be `> 0`,
/// when every eligible worker is ramping at once (same fraction) their
/// relative weights are unchanged and the total stays positive.
pub fn slow_start_weight(weight: f64, fraction: f64) -> f64 {
    let fraction = if fraction.is_nan() {
        1.0
    } else {
        fraction.clamp(0.0, 1.0)
    };
    if weight.is_nan() || weight <= 0.0 {
        return 0.0;
    }
    weight * fraction
}

/// How a rule score classifies against the two thresholds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Band {
    /// `score < low_score_threshold`.
    Low,
    /// `low_score_threshold <= score <= recover_score_threshold`.
    Middle,
    /// `score > recover_score_threshold`.
    Good,
}

fn band(score: f64, cfg: &PenaltyConfig) -> Band {
    if score < cfg.low_score_threshold {
        Band::Low
    } else if score > cfg.recover_score_threshold {
        Band::Good
    } else {
        Band::Middle
    }
}

/// Per-worker penalty state machine (see the module docs for the rules).
///
/// One tracker per worker; [`evaluate`](Self::evaluate) is the only writer,
/// [`state_at`](Self::state_at) is a pure read.
#[derive(Clone, Debug)]
pub struct PenaltyTracker {
    /// Stored state; a `Cooldown` whose end has passed reads as `Recovering`.
    state: PenaltyState,
    /// Consecutive low evaluations (meaningful in Observation/Recovering).
    low_streak: u32,
    /// Consecutive good evaluations (meaningful in Observation/Recovering).
    good_streak: u32,
    /// Cooldowns entered since the last backoff reset.
    backoff_level: u32,
    /// End of the last cooldown, ms; also the slow-start ramp start.
    cooldown_until_ms: u64,
    /// Length of the last cooldown, ms (for reasons).
    last_cooldown_len_ms: u64,
    /// Evaluation time at which the current continuous `Healthy` run began;
    /// `None` outside `Healthy` and before the first evaluation.
    healthy_since_ms: Option<u64>,
}

impl Default for PenaltyTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl PenaltyTracker {
    /// Returns a tracker in `Healthy` with backoff level 0.
    pub fn new() -> Self {
        PenaltyTracker {
            state: PenaltyState::Healthy,
            low_streak: 0,
            good_streak: 0,
            backoff_level: 0,
            cooldown_until_ms: 0,
            last_cooldown_len_ms: 0,
            healthy_since_ms: None,
        }
    }

    /// Feeds one fresh evaluation (call once per accepted telemetry snapshot)
    /// with its `rule_score` (0..=100) at `now_ms` (monotonic ms).
    ///
    /// Returns the state change it caused, if any (`from` = state stored
    /// before the call, `to` = state stored after). Returns `None` for
    /// non-finite scores (ignored, nothing changes), for evaluations inside an
    /// active cooldown (ignored), and when the state did not change. A backoff
    /// level reset is not a state change and is not reported; it is visible in
    /// [`PenaltyView::backoff_level`].
    ///
    /// Precondition: `cfg.validate()` is `Ok` (checked by `debug_assert!`);
    /// with an invalid config this still never panics in release builds.
    pub fn evaluate(
        &mut self,
        rule_score: f64,
        now_ms: u64,
        cfg: &PenaltyConfig,
    ) -> Option<Transition> {
        debug_assert!(cfg.validate().is_ok(), "invalid PenaltyConfig: {cfg:?}");
        if !rule_score.is_finite() {
            return None;
        }
        let from = self.state;
        let mut reasons: Vec<String> = Vec::new();

        if self.state == PenaltyState::Cooldown {
            if now_ms < self.cooldown_until_ms {
                return None;
            }
            self.state = PenaltyState::Recovering;
            self.low_streak = 0;
            self.good_streak = 0;
            reasons.push(format!(
                "cooldown ended at {} ms; slow start began",
                self.cooldown_until_ms
            ));
        }

        let b = band(rule_score, cfg);
        match self.state {
            PenaltyState::Healthy => {
                if b == Band::Low {
                    self.state = PenaltyState::Observation;
                    self.low_streak = 1;
                    self.good_streak = 0;
                    self.healthy_since_ms = None;
                    reasons.push(format!(
                        "rule score {rule_score:.1} fell below {}",
                        cfg.low_score_threshold
                    ));
                    if self.low_streak >= cfg.cooldown_after_consecutive_low {
                        reasons.push(self.enter_cooldown(rule_score, now_ms, cfg));
                    }
                } else if self.healthy_since_ms.is_none() {
                    self.healthy_since_ms = Some(now_ms);
                }
            }
            PenaltyState::Observation | PenaltyState::Recovering => {
                match b {
                    Band::Low => {
                        self.low_streak = self.low_streak.saturating_add(1);
                        self.good_streak = 0;
                    }
                    Band::Good => {
                        self.good_streak = self.good_streak.saturating_add(1);
                        self.low_streak = 0;
                    }
                    Band::Middle => {
                        self.low_streak = 0;
                        self.good_streak = 0;
                    }
                }
                let ramp_done = self.state == PenaltyState::Observation
                    || now_ms.saturating_sub(self.cooldown_until_ms) >= cfg.slow_start_ms;
                if self.low_streak >= cfg.cooldown_after_consecutive_low {
                    reasons.push(self.enter_cooldown(rule_score, now_ms, cfg));
                } else if ramp_done && self.good_streak >= cfg.recover_consecutive {
                    let what = if self.state == PenaltyState::Recovering {
                        "slow start finished and "
                    } else {
                        ""
                    };
                    reasons.push(format!(
                        "{what}{} consecutive rule scores above {} (latest {rule_score:.1})",
                        self.good_streak, cfg.recover_score_threshold
                    ));
                    self.state = PenaltyState::Healthy;
                    self.low_streak = 0;
                    self.good_streak = 0;
                    self.healthy_since_ms = Some(now_ms);
                }
            }
            // Unreachable: an active cooldown returned above and an expired one
            // became `Recovering`. Kept as a no-op rather than a panic.
            PenaltyState::Cooldown => {}
        }

        // Backoff reset: only on an evaluation that leaves the worker Healthy,
        // after a continuous Healthy run of `backoff_reset_after_ms`.
        if self.state == PenaltyState::Healthy
            && self.backoff_level > 0
            && let Some(since) = self.healthy_since_ms
            && now_ms.saturating_sub(since) >= cfg.backoff_reset_after_ms
        {
            self.backoff_level = 0;
        }

        debug_assert!(
            self.state != PenaltyState::Healthy || (self.low_streak == 0 && self.good_streak == 0)
        );
        if reasons.is_empty() {
            None
        } else {
            Some(Transition {
                from,
                to: self.state,
                reason: reasons.join("; then "),
            })
        }
    }

    /// Ejects the worker at `now_ms`; returns the reason sentence.
    fn enter_cooldown(&mut self, rule_score: f64, now_ms: u64, cfg: &PenaltyConfig) -> String {
        let len_ms = cooldown_len_ms(self.backoff_level, cfg);
        let reason = format!(
            "{} consecutive rule scores below {} (latest {rule_score:.1}); ejected for {len_ms} ms \
             at backoff level {}",
            self.low_streak, cfg.low_score_threshold, self.backoff_level
        );
        self.state = PenaltyState::Cooldown;
        self.cooldown_until_ms = now_ms.saturating_add(len_ms);
        self.last_cooldown_len_ms = len_ms;
        self.backoff_level = self.backoff_level.saturating_add(1);
        self.low_streak = 0;
        self.good_streak = 0;
        self.healthy_since_ms = None;
        reason
    }

    /// Returns the penalty as seen at `now_ms` without modifying the tracker:
    /// an expired cooldown reads as `Recovering` even if no evaluation has
    /// arrived since. See [`PenaltyView`] for each field.
    ///
    /// Precondition: `cfg.validate()` is `Ok` (checked by `debug_assert!`).
    pub fn state_at(&self, now_ms: u64, cfg: &PenaltyConfig) -> PenaltyView {
        debug_assert!(cfg.validate().is_ok(), "invalid PenaltyConfig: {cfg:?}");
        let state = match self.state {
            PenaltyState::Cooldown if now_ms >= self.cooldown_until_ms => PenaltyState::Recovering,
            s => s,
        };
        // Streaks restart at cooldown end, which `evaluate` has not recorded yet.
        let (low_streak, good_streak) = if state == self.state {
            (
                self.low_streak.min(cfg.cooldown_after_consecutive_low),
                self.good_streak.min(cfg.recover_consecutive),
            )
        } else {
            (0, 0)
        };
        let level = self.backoff_level;
        let (score_factor, eligible, cooldown_until_ms, slow_start, reason) = match state {
            PenaltyState::Healthy => {
                let healthy_ms = self
                    .healthy_since_ms
                    .map_or(0, |since| now_ms.saturating_sub(since));
                let reason = PenaltyReason::Healthy {
                    backoff_level: level,
                    reset_after_ms: cfg.backoff_reset_after_ms,
                    healthy_ms,
                };
                (1.0, true, None, 1.0, reason)
            }
            PenaltyState::Observation => (
                cfg.observation_factor,
                true,
                None,
                1.0,
                PenaltyReason::Observation {
                    low_streak,
                    needed_low: cfg.cooldown_after_consecutive_low,
                    low_threshold: cfg.low_score_threshold,
                    good_streak,
                    needed_good: cfg.recover_consecutive,
                    good_threshold: cfg.recover_score_threshold,
                },
            ),
            PenaltyState::Cooldown => (
                cfg.cooldown_factor,
                false,
                Some(self.cooldown_until_ms),
                cfg.min_weight_fraction.clamp(0.0, 1.0),
                PenaltyReason::Cooldown {
                    cooldown_ms: self.last_cooldown_len_ms,
                    needed_low: cfg.cooldown_after_consecutive_low,
                    low_threshold: cfg.low_score_threshold,
                    until_ms: self.cooldown_until_ms,
                    backoff_level: level,
                },
            ),
            PenaltyState::Recovering => {
                let elapsed = now_ms.saturating_sub(self.cooldown_until_ms);
                let fraction = slow_start_fraction(elapsed, cfg);
                (
                    1.0,
                    true,
                    None,
                    fraction,
                    PenaltyReason::Recovering {
                        elapsed_ms: elapsed,
                        slow_start_ms: cfg.slow_start_ms,
                        fraction,
                        good_streak,
                        needed_good: cfg.recover_consecutive,
                        good_threshold: cfg.recover_score_threshold,
                    },
                )
            }
        };
        debug_assert!(slow_start.is_nan() || (0.0..=1.0).contains(&slow_start));
        PenaltyView {
            state,
            score_factor,
            eligible,
            cooldown_until_ms,
            slow_start_fraction: slow_start,
            backoff_level: level,
            reason,
        }
    }
}

#[cfg(test)]
#[path = "penalty_tests.rs"]
mod tests;

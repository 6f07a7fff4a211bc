//! `[penalty]`: the tunables of the penalty state machine
//! ([`super::penalty`]) and their documented defaults.

use serde::Serialize;

/// Default [`PenaltyConfig::low_score_threshold`]: rule scores strictly below
/// this (0..=100 scale) are "low".
pub const DEFAULT_LOW_SCORE_THRESHOLD: f64 = 40.0;
/// Default [`PenaltyConfig::recover_score_threshold`]: rule scores strictly
/// above this (0..=100 scale) are "good".
pub const DEFAULT_RECOVER_SCORE_THRESHOLD: f64 = 60.0;
/// Default [`PenaltyConfig::recover_consecutive`]: consecutive good
/// evaluations needed to return to `Healthy`.
pub const DEFAULT_RECOVER_CONSECUTIVE: u32 = 3;
/// Default [`PenaltyConfig::cooldown_after_consecutive_low`]: consecutive low
/// evaluations that eject the worker.
pub const DEFAULT_COOLDOWN_AFTER_CONSECUTIVE_LOW: u32 = 3;
/// Default [`PenaltyConfig::cooldown_base_ms`]: first cooldown length, ms.
pub const DEFAULT_COOLDOWN_BASE_MS: u64 = 1_000;
/// Default [`PenaltyConfig::cooldown_max_ms`]: cap on a cooldown length, ms.
pub const DEFAULT_COOLDOWN_MAX_MS: u64 = 30_000;
/// Default [`PenaltyConfig::backoff_reset_after_ms`]: continuous `Healthy`
/// time after which the backoff level resets to 0, ms.
pub const DEFAULT_BACKOFF_RESET_AFTER_MS: u64 = 60_000;
/// Default [`PenaltyConfig::observation_factor`]: score multiplier (fraction
/// 0..=1) while in `Observation`.
pub const DEFAULT_OBSERVATION_FACTOR: f64 = 0.85;
/// Default [`PenaltyConfig::cooldown_factor`]: score multiplier (fraction
/// 0..=1) while in `Cooldown`.
pub const DEFAULT_COOLDOWN_FACTOR: f64 = 0.2;
/// Default [`PenaltyConfig::slow_start_ms`]: slow-start ramp length after a
/// cooldown, ms.
pub const DEFAULT_SLOW_START_MS: u64 = 30_000;
/// Default [`PenaltyConfig::min_weight_fraction`]: slow-start floor (fraction
/// in `(0, 1]`).
pub const DEFAULT_MIN_WEIGHT_FRACTION: f64 = 0.2;

/// Tunables of the penalty state machine. All times in ms, all factors are
/// fractions 0..=1, scores on the 0..=100 rule-score scale.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PenaltyConfig {
    /// A rule score strictly below this is "low" (default
    /// [`DEFAULT_LOW_SCORE_THRESHOLD`] = 40). Must be within 0..=100.
    pub low_score_threshold: f64,
    /// A rule score strictly above this is "good" (default
    /// [`DEFAULT_RECOVER_SCORE_THRESHOLD`] = 60). Must be within 0..=100 and
    /// `>= low_score_threshold`.
    pub recover_score_threshold: f64,
    /// Consecutive good evaluations needed to leave `Observation` or
    /// `Recovering` (default [`DEFAULT_RECOVER_CONSECUTIVE`] = 3). Must be
    /// `>= 1`.
    pub recover_consecutive: u32,
    /// Consecutive low evaluations (the one entering `Observation` included)
    /// that eject the worker (default
    /// [`DEFAULT_COOLDOWN_AFTER_CONSECUTIVE_LOW`] = 3). Must be `>= 1`.
    pub cooldown_after_consecutive_low: u32,
    /// First cooldown length, ms (default [`DEFAULT_COOLDOWN_BASE_MS`] =
    /// 1 000). Must be `>= 1`.
    pub cooldown_base_ms: u64,
    /// Cap on any cooldown length, ms (default [`DEFAULT_COOLDOWN_MAX_MS`] =
    /// 30 000). Must be `>= cooldown_base_ms`.
    pub cooldown_max_ms: u64,
    /// Continuous `Healthy` time after which the backoff level resets to 0,
    /// ms (default [`DEFAULT_BACKOFF_RESET_AFTER_MS`] = 60 000).
    pub backoff_reset_after_ms: u64,
    /// Score multiplier in `Observation`, fraction 0..=1 (default
    /// [`DEFAULT_OBSERVATION_FACTOR`] = 0.85).
    pub observation_factor: f64,
    /// Score multiplier in `Cooldown`, fraction 0..=1 (default
    /// [`DEFAULT_COOLDOWN_FACTOR`] = 0.2).
    pub cooldown_factor: f64,
    /// Slow-start ramp length after a cooldown, ms (default
    /// [`DEFAULT_SLOW_START_MS`] = 30 000). 0 disables slow start.
    pub slow_start_ms: u64,
    /// Slow-start floor, fraction in `(0, 1]` (default
    /// [`DEFAULT_MIN_WEIGHT_FRACTION`] = 0.2). Strictly positive so that a
    /// pool whose eligible workers are all ramping never has a total weight
    /// of zero and keeps their relative weights.
    pub min_weight_fraction: f64,
}

impl Default for PenaltyConfig {
    fn default() -> Self {
        PenaltyConfig {
            low_score_threshold: DEFAULT_LOW_SCORE_THRESHOLD,
            recover_score_threshold: DEFAULT_RECOVER_SCORE_THRESHOLD,
            recover_consecutive: DEFAULT_RECOVER_CONSECUTIVE,
            cooldown_after_consecutive_low: DEFAULT_COOLDOWN_AFTER_CONSECUTIVE_LOW,
            cooldown_base_ms: DEFAULT_COOLDOWN_BASE_MS,
            cooldown_max_ms: DEFAULT_COOLDOWN_MAX_MS,
            backoff_reset_after_ms: DEFAULT_BACKOFF_RESET_AFTER_MS,
            observation_factor: DEFAULT_OBSERVATION_FACTOR,
            cooldown_factor: DEFAULT_COOLDOWN_FACTOR,
            slow_start_ms: DEFAULT_SLOW_START_MS,
            min_weight_fraction: DEFAULT_MIN_WEIGHT_FRACTION,
        }
    }
}

impl PenaltyConfig {
    /// Checks every field; returns `Err` with a sentence naming the first bad
    /// key (e.g. `"min_weight_fraction must be > 0 and <= 1, got 0"`).
    pub fn validate(&self) -> Result<(), String> {
        for (key, v) in [
            ("low_score_threshold", self.low_score_threshold),
            ("recover_score_threshold", self.recover_score_threshold),
        ] {
            if !(0.0..=100.0).contains(&v) {
                return Err(format!(
                    "{key} must be a finite score within 0..=100, got {v}"
                ));
            }
        }
        if self.recover_score_threshold < self.low_score_threshold {
            return Err(format!(
                "recover_score_threshold ({}) must be >= low_score_threshold ({})",
                self.recover_score_threshold, self.low_score_threshold
            ));
        }
        if self.recover_consecutive == 0 {
            return Err("recover_consecutive must be >= 1, got 0".to_owned());
        }
        if self.cooldown_after_consecutive_low == 0 {
            return Err("cooldown_after_consecutive_low must be >= 1, got 0".to_owned());
        }
        if self.cooldown_base_ms == 0 {
            return Err("cooldown_base_ms must be >= 1, got 0".to_owned());
        }
        if self.cooldown_max_ms < self.cooldown_base_ms {
            return Err(format!(
                "cooldown_max_ms ({}) must be >= cooldown_base_ms ({})",
                self.cooldown_max_ms, self.cooldown_base_ms
            ));
        }
        for (key, v) in [
            ("observation_factor", self.observation_factor),
            ("cooldown_factor", self.cooldown_factor),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("{key} must be a fraction within 0..=1, got {v}"));
            }
        }
        let m = self.min_weight_fraction;
        if !(m > 0.0 && m <= 1.0) {
            return Err(format!("min_weight_fraction must be > 0 and <= 1, got {m}"));
        }
        Ok(())
    }
}

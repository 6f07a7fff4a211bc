//! The training target: what the model predicts for a picked candidate.
//!
//! The model predicts `y = ln(latency_ms) − ln(E)`, the log of the picked
//! worker's outcome latency against the rules' routing cost E (feature
//! `expected_latency_ln_ms`, logged in the decision's feature vector). The
//! service multiplies E by `exp(prediction)`, bounded, so the target is
//! exactly what corrects the cost. It is relative by construction: a pool
//! that is uniformly slow or fast has targets near 0, and only what the
//! rules mis-estimate remains (the informative 10–100 ms tail included;
//! nothing is dropped between thresholds).
//!
//! * **Censoring.** A failed outcome is recorded at
//!   `max(latency, timeout, failure_penalty_ms)`, `timeout` the request's
//!   deadline (feature `timeout_ms`), the same penalty latency the service's
//!   own evidence counts for a failure: a fast refusal never looks fast.
//! * **Weights.** Only picked rows carry outcomes, and the logging policy
//!   picked them with the logged propensity `p`. Each row is weighted by the
//!   clipped inverse propensity `min(1/p, max_weight)` (1 when the log has
//!   no propensity), so candidates the policy rarely picked count for the
//!   decisions they stand for; under a deterministic policy (`max`, `p = 1`)
//!   every weight is 1.
//! * **Slow outcome** (for `trainer compare` and the card): a failure, or a
//!   latency above `slow_factor × E`.

use scorer_core::features::FEATURE_COUNT;
use serde::{Deserialize, Serialize};

use crate::error::{Result, TrainerError};

pub use scorer_core::features::schema::EXPECTED_LATENCY_FEATURE;
/// Index of `timeout_ms` in the feature vector (`-1` when absent).
pub use scorer_model::blend::TIMEOUT_FEATURE;
/// Shortest latency the target takes the log of, ms.
pub const MIN_LATENCY_MS: f64 = 1e-3;

/// How outcomes become targets (`--failure-penalty-ms`, `--slow-factor`,
/// `--max-weight`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TargetRule {
    /// Latency a failure counts as at least, ms (the service's
    /// `evidence.failure_penalty_ms`). Default 1000.
    pub failure_penalty_ms: f64,
    /// An outcome slower than this × E is slow. Default 2.
    pub slow_factor: f64,
    /// Cap on the inverse-propensity weight, >= 1. Default 10.
    pub max_weight: f64,
}

impl Default for TargetRule {
    fn default() -> Self {
        Self {
            failure_penalty_ms: scorer_core::dynamics::EvidenceConfig::default().failure_penalty_ms,
            slow_factor: 2.0,
            max_weight: 10.0,
        }
    }
}

impl TargetRule {
    /// Checks ranges.
    ///
    /// # Errors
    /// [`TrainerError::InvalidArgument`] naming the flag.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(TrainerError::InvalidArgument(m));
        if !(self.failure_penalty_ms.is_finite() && self.failure_penalty_ms > 0.0) {
            return bad(format!(
                "--failure-penalty-ms must be a finite number of ms > 0, got {}",
                self.failure_penalty_ms
            ));
        }
        if !(self.slow_factor.is_finite() && self.slow_factor >= 1.0) {
            return bad(format!(
                "--slow-factor must be a finite number >= 1, got {}",
                self.slow_factor
            ));
        }
        if !(self.max_weight.is_finite() && self.max_weight >= 1.0) {
            return bad(format!(
                "--max-weight must be a finite weight >= 1, got {}",
                self.max_weight
            ));
        }
        Ok(())
    }

    /// The latency an outcome counts as, ms: a failure at least its
    /// timeout and the failure penalty.
    pub fn censored_latency_ms(&self, row: &[f32], latency_ms: f64, success: bool) -> f64 {
        if success {
            return latency_ms;
        }
        let timeout = f64::from(row[TIMEOUT_FEATURE]);
        latency_ms.max(timeout).max(self.failure_penalty_ms)
    }

    /// The rules' routing cost E of the row (unitless; ms only at cost exponent 1).
    pub fn expected_ms(row: &[f32]) -> f64 {
        f64::from(row[EXPECTED_LATENCY_FEATURE]).exp()
    }

    /// The target `ln(censored latency) − ln(E)` of a picked row.
    pub fn target(&self, row: &[f32], latency_ms: f64, success: bool) -> f32 {
        debug_assert_eq!(row.len(), FEATURE_COUNT);
        let l = self
            .censored_latency_ms(row, latency_ms, success)
            .max(MIN_LATENCY_MS);
        (l.ln() - f64::from(row[EXPECTED_LATENCY_FEATURE])) as f32
    }

    /// Whether an outcome is slow: a failure, or slower than `slow_factor × E`.
    pub fn is_slow(&self, row: &[f32], latency_ms: f64, success: bool) -> bool {
        !success || latency_ms > self.slow_factor * Self::expected_ms(row)
    }

    /// The row's weight: `min(1/p, max_weight)`, 1 without a usable propensity.
    pub fn weight(&self, propensity: Option<f64>) -> f32 {
        match propensity {
            Some(p) if p > 0.0 && p.is_finite() => (1.0 / p).min(self.max_weight) as f32,
            _ => 1.0,
        }
    }
}

/// How many rows each step kept or dropped, and what the targets look like.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TargetCounts {
    /// Decisions loaded.
    pub decisions: usize,
    /// Candidate rows loaded.
    pub candidate_rows: usize,
    /// Picked candidate rows.
    pub picked_rows: usize,
    /// Picked rows without an outcome (dropped).
    pub missing_outcome: usize,
    /// Rows with a target.
    pub rows: usize,
    /// Of those, failures (censored at the penalty latency).
    pub failures: usize,
    /// Of those, slow outcomes (see [`TargetRule::is_slow`]).
    pub slow: usize,
    /// Of those, weights that hit `max_weight`.
    pub clipped_weights: usize,
}

impl std::fmt::Display for TargetCounts {
    /// One line for error messages, with a hint when no picked row has an
    /// outcome (the outcomes directory was probably not given).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} decisions, {} picked, {} without an outcome, {} with a target ({} failures, {} slow)",
            self.decisions,
            self.picked_rows,
            self.missing_outcome,
            self.rows,
            self.failures,
            self.slow
        )?;
        if self.picked_rows > 0 && self.missing_outcome == self.picked_rows {
            write!(
                f,
                "; no picked row has an outcome: give the outcomes directory too (--logs <dir>/outcomes)"
            )?;
        }
        Ok(())
    }
}

/// Quantiles of a target sample.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Distribution {
    /// Rows.
    pub rows: usize,
    /// Mean.
    pub mean: f64,
    /// Standard deviation.
    pub std: f64,
    /// 10th percentile.
    pub p10: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
}

impl Distribution {
    /// The distribution of `xs` (all zeros when empty).
    pub fn of(xs: &[f32]) -> Self {
        let n = xs.len();
        if n == 0 {
            return Self::default();
        }
        let mut v: Vec<f64> = xs.iter().map(|&x| f64::from(x)).collect();
        v.sort_by(f64::total_cmp);
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        let q = |p: f64| v[((p * (n - 1) as f64).round() as usize).min(n - 1)];
        Self {
            rows: n,
            mean,
            std: var.sqrt(),
            p10: q(0.1),
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(expected_ms: f64, timeout_ms: f32) -> Vec<f32> {
        let mut r = vec![0f32; FEATURE_COUNT];
        r[EXPECTED_LATENCY_FEATURE] = expected_ms.ln() as f32;
        r[TIMEOUT_FEATURE] = timeout_ms;
        r
    }

    #[test]
    fn target_is_the_log_ratio_to_the_expected_latency() {
        let t = TargetRule::default();
        let r = row(4.0, -1.0);
        assert!((t.target(&r, 8.0, true) - 2f32.ln()).abs() < 1e-6);
        assert!((t.target(&r, 4.0, true)).abs() < 1e-6);
        assert!(t.is_slow(&r, 8.1, true) && !t.is_slow(&r, 8.0, true));
    }

    #[test]
    fn failures_are_censored_at_the_timeout_or_the_penalty() {
        let t = TargetRule::default();
        // A 1 ms refusal without a deadline counts as the 1 s penalty.
        let r = row(4.0, -1.0);
        assert_eq!(t.censored_latency_ms(&r, 1.0, false), 1000.0);
        assert!((t.target(&r, 1.0, false) - (250f32).ln()).abs() < 1e-5);
        assert!(t.is_slow(&r, 1.0, false), "a failure is always slow");
        // With a deadline above the penalty, the deadline.
        let r = row(4.0, 5000.0);
        assert_eq!(t.censored_latency_ms(&r, 1.0, false), 5000.0);
        // A success is never censored.
        assert_eq!(t.censored_latency_ms(&r, 1.0, true), 1.0);
        // A zero latency does not take ln 0.
        assert!(t.target(&r, 0.0, true).is_finite());
    }

    #[test]
    fn weights_are_clipped_inverse_propensities() {
        let t = TargetRule::default();
        assert_eq!(t.weight(Some(1.0)), 1.0);
        assert_eq!(t.weight(Some(0.25)), 4.0);
        assert_eq!(t.weight(Some(0.01)), 10.0, "clipped at max_weight");
        assert_eq!(t.weight(None), 1.0);
        assert_eq!(t.weight(Some(0.0)), 1.0);
        assert_eq!(t.weight(Some(f64::NAN)), 1.0);
    }

    #[test]
    fn bad_flags_are_refused() {
        for r in [
            TargetRule {
                failure_penalty_ms: 0.0,
                ..TargetRule::default()
            },
            TargetRule {
                slow_factor: 0.5,
                ..TargetRule::default()
            },
            TargetRule {
                max_weight: f64::NAN,
                ..TargetRule::default()
            },
        ] {
            assert!(r.validate().is_err(), "{r:?}");
        }
        assert!(TargetRule::default().validate().is_ok());
    }

    #[test]
    fn distribution_quantiles() {
        let xs: Vec<f32> = (0..101).map(|i| i as f32).collect();
        let d = Distribution::of(&xs);
        assert_eq!(
            (d.rows, d.p10, d.p50, d.p90, d.p99),
            (101, 10.0, 50.0, 90.0, 99.0)
        );
        assert!((d.mean - 50.0).abs() < 1e-9);
        assert_eq!(Distribution::of(&[]).rows, 0);
    }
}

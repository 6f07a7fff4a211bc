//! `softmax`: Boltzmann (softmax) sampling over normalised scores.
//!
//! # Algorithm
//!
//! Softmax / Boltzmann action selection as in Sutton & Barto,
//! *Reinforcement Learning: An Introduction* (2nd ed., 2018, §2.8 and
//! §13.1), with a per-candidate mass multiplier:
//!
//! 1. Min–max normalise the scores over this call's candidates:
//!    `s_i = (score_i − min) / (max − min) ∈ [0, 1]`; if all scores are
//!    equal, every `s_i = 1`. Normalising makes the temperature scale-free:
//!    `T` is measured in "fractions of the score spread".
//! 2. Work in log space: `l_i = ln(weight_i) − (1 − s_i) / T`.
//! 3. Subtract `max_j l_j` (the log-sum-exp trick), exponentiate and
//!    normalise: `p_i = exp(l_i − max l) / Σ_j exp(l_j − max l)`. The largest
//!    term is exactly `exp(0) = 1`, so the denominator is `>= 1`: no
//!    overflow, no division by zero, and every `p_i` is finite.
//! 4. Sample the pick from `p` with one uniform draw.
//!
//! Net effect: `p_i ∝ weight_i × exp(−(1 − s_i)/T)`.
//!
//! # Temperature
//!
//! * `T < SOFTMAX_MIN_TEMPERATURE` (1e-6, including `0`): behaves exactly
//!   like [`MaxScore`](crate::selection::MaxScore), including its `1/k`
//!   propensities. (Weights are ignored there, as in `max`.)
//! * `T` large (e.g. `1e308`): all `(1 − s_i)/T` vanish and the distribution
//!   becomes uniform in proportion to `weight`.
//! * `T < 0`, NaN or ±inf: [`SelectionError::InvalidTemperature`].
//!
//! Cost: O(n) time, one allocation (the probabilities `Vec`).

use crate::selection::max::{max_probabilities, select_max};
use crate::selection::support::{sample_index, validate};
use crate::selection::{Candidate, Policy, Selection, SelectionError};

/// Temperatures below this (1e-6, dimensionless, relative to the score
/// spread) are treated as `0`, i.e. the `max` policy.
pub const SOFTMAX_MIN_TEMPERATURE: f64 = 1e-6;

/// The `softmax` policy at a fixed temperature. Stateless and `Copy`; build
/// one per call if the temperature varies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Softmax {
    temperature: f64,
}

impl Softmax {
    /// A softmax policy with temperature `temperature` (dimensionless,
    /// `>= 0`, finite; values below [`SOFTMAX_MIN_TEMPERATURE`] mean `max`).
    ///
    /// # Errors
    /// [`SelectionError::InvalidTemperature`] if `temperature` is negative,
    /// NaN or infinite.
    pub fn new(temperature: f64) -> Result<Self, SelectionError> {
        if temperature.is_finite() && temperature >= 0.0 {
            Ok(Self { temperature })
        } else {
            Err(SelectionError::InvalidTemperature(temperature))
        }
    }

    /// The temperature this policy was built with.
    pub fn temperature(&self) -> f64 {
        self.temperature
    }

    /// The propensities this policy would report, without sampling (for
    /// callers that only need `p`). Below [`SOFTMAX_MIN_TEMPERATURE`] these
    /// are `max`'s `1/k` propensities.
    ///
    /// # Errors
    /// Input validation errors (see the module guide).
    pub fn probabilities(&self, candidates: &[Candidate<'_>]) -> Result<Vec<f64>, SelectionError> {
        validate(candidates)?;
        if self.temperature < SOFTMAX_MIN_TEMPERATURE {
            return Ok(max_probabilities(candidates));
        }
        Ok(self.softmax_probabilities(candidates))
    }

    /// Steps 1–3 of the algorithm; requires `temperature >=
    /// SOFTMAX_MIN_TEMPERATURE` and validated, non-empty candidates.
    fn softmax_probabilities(&self, candidates: &[Candidate<'_>]) -> Vec<f64> {
        let (lo, hi) = candidates
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), c| {
                (lo.min(c.score), hi.max(c.score))
            });
        let spread = hi - lo;
        let t = self.temperature;

        // Logits, stored in the output buffer to avoid a second allocation.
        let mut out: Vec<f64> = candidates
            .iter()
            .map(|c| {
                let s = if spread > 0.0 {
                    (c.score - lo) / spread
                } else {
                    1.0
                };
                c.weight.ln() - (1.0 - s) / t
            })
            .collect();
        let max_logit = out.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mut total = 0.0;
        for v in &mut out {
            *v = (*v - max_logit).exp();
            total += *v;
        }
        // total >= 1 (the arg-max term is exp(0)); the guard is belt and braces.
        if total > 0.0 && total.is_finite() {
            for v in &mut out {
                *v /= total;
            }
        } else {
            let uniform = 1.0 / out.len().max(1) as f64;
            out.iter_mut().for_each(|v| *v = uniform);
        }
        out
    }
}

impl Policy for Softmax {
    /// Errors: input validation errors only (the temperature was checked in
    /// [`Softmax::new`]).
    fn select<R: rand::Rng + ?Sized>(
        &self,
        candidates: &[Candidate<'_>],
        _key: &str,
        rng: &mut R,
    ) -> Result<Selection, SelectionError> {
        validate(candidates)?;
        if self.temperature < SOFTMAX_MIN_TEMPERATURE {
            return Ok(select_max(candidates, rng));
        }
        let probabilities = self.softmax_probabilities(candidates);
        let pick = sample_index(&probabilities, rng);
        Ok(Selection {
            pick,
            probabilities,
        })
    }
}

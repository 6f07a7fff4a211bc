//! Peak-sensitive EWMA of a worker's per-request service time, ms.
//!
//! # Algorithm
//!
//! tower's `load::PeakEwma` (linkerd2-proxy) and Finagle's `PeakEwma`: a
//! sample above the estimate replaces it at once (the "peak"), a sample
//! below it is blended in with a weight that grows with the time since the
//! last update, `w = exp(−Δt / decay_ms)`, `estimate' = estimate × w +
//! sample × (1 − w)`. Slowness is believed at once; speed has to be shown
//! for a while. Two changes, both for a service that sees far more samples
//! per worker than a proxy connection does:
//!
//! * `Δt` is at least [`MIN_STEP_MS`]: timestamps are whole milliseconds,
//!   and with `Δt = 0` a burst of fast samples in one millisecond would
//!   never lower the estimate.
//! * Without samples the estimate decays on read with the same time
//!   constant, as tower's `RttEstimate::decay` and Finagle's `get()` do, but
//!   toward a prior (the pool's median estimate) rather than toward 0: a
//!   worker that was avoided after a bad spell is probed again instead of
//!   being shunned, and one never measured starts at the prior, never at 0.

use serde::Serialize;

/// Smallest time step of a blend, ms (see the module docs).
pub const MIN_STEP_MS: u64 = 1;

/// The estimator's state. `Copy`; kept inside a worker's evidence lock.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct PeakEwma {
    /// Current estimate, ms; meaningless while `samples == 0`.
    estimate_ms: f64,
    /// Monotonic time of the last sample, ms.
    updated_ms: u64,
    /// Samples seen.
    samples: u64,
}

impl PeakEwma {
    /// Takes `sample_ms` (finite, `>= 0`; anything else is ignored) observed
    /// at `now_ms`, blending with time constant `decay_ms` (`>= 1`).
    pub fn observe(&mut self, sample_ms: f64, now_ms: u64, decay_ms: u64) {
        if !(sample_ms.is_finite() && sample_ms >= 0.0) {
            return;
        }
        if self.samples == 0 || sample_ms > self.estimate_ms {
            self.estimate_ms = sample_ms;
        } else {
            let dt = now_ms.saturating_sub(self.updated_ms).max(MIN_STEP_MS);
            let w = (-(dt as f64) / decay_ms.max(1) as f64).exp();
            self.estimate_ms = self.estimate_ms * w + sample_ms * (1.0 - w);
        }
        self.updated_ms = self.updated_ms.max(now_ms);
        self.samples = self.samples.saturating_add(1);
    }

    /// The estimate at `now_ms`, ms: `prior_ms` when never sampled, else the
    /// last estimate moved toward `prior_ms` by `1 − exp(−idle / decay_ms)`
    /// for the time `idle` since the last sample.
    pub fn value_at(&self, now_ms: u64, prior_ms: f64, decay_ms: u64) -> f64 {
        if self.samples == 0 {
            return prior_ms;
        }
        let idle = now_ms.saturating_sub(self.updated_ms);
        if idle == 0 {
            return self.estimate_ms;
        }
        let w = (-(idle as f64) / decay_ms.max(1) as f64).exp();
        prior_ms + (self.estimate_ms - prior_ms) * w
    }

    /// The last estimate without idle decay, ms, if ever sampled.
    pub fn last_ms(&self) -> Option<f64> {
        (self.samples > 0).then_some(self.estimate_ms)
    }

    /// Samples seen.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Forgets every sample (a worker that restarted is a new worker).
    pub fn reset(&mut self) {
        *self = Self::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slower_sample_is_taken_at_once_a_faster_one_blended() {
        let mut e = PeakEwma::default();
        e.observe(2.0, 0, 100);
        e.observe(10.0, 1, 100);
        assert_eq!(e.last_ms(), Some(10.0));
        // 100 ms later a 2 ms sample: 10 e^-1 + 2 (1 - e^-1).
        e.observe(2.0, 101, 100);
        let want = 10.0 * (-1f64).exp() + 2.0 * (1.0 - (-1f64).exp());
        assert!((e.last_ms().unwrap() - want).abs() < 1e-12);
    }

    #[test]
    fn samples_in_the_same_millisecond_still_lower_the_estimate() {
        let mut e = PeakEwma::default();
        e.observe(10.0, 5, 100);
        e.observe(2.0, 5, 100);
        let want = 10.0 * (-0.01f64).exp() + 2.0 * (1.0 - (-0.01f64).exp());
        assert!((e.last_ms().unwrap() - want).abs() < 1e-12);
    }

    #[test]
    fn never_sampled_is_the_prior_and_idle_returns_toward_it() {
        let e = PeakEwma::default();
        assert_eq!(e.value_at(1_000, 3.0, 10_000), 3.0);
        let mut e = PeakEwma::default();
        e.observe(100.0, 0, 100);
        assert_eq!(e.value_at(0, 3.0, 10_000), 100.0);
        let v = e.value_at(10_000, 3.0, 10_000);
        assert!((v - (3.0 + 97.0 * (-1f64).exp())).abs() < 1e-9, "{v}");
    }

    #[test]
    fn non_finite_or_negative_samples_are_ignored() {
        let mut e = PeakEwma::default();
        e.observe(f64::NAN, 0, 100);
        e.observe(-1.0, 0, 100);
        e.observe(f64::INFINITY, 0, 100);
        assert_eq!(e.samples(), 0);
        assert_eq!(e.last_ms(), None);
    }
}

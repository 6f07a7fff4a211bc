//! Minimum-share exploration floor.
//!
//! # Algorithm
//!
//! A greedy policy starves low-scoring but eligible workers, so their scores
//! never get refreshed by fresh observations. The floor mixes the policy
//! with a uniform distribution (the ε-greedy / "ε-exploration" construction,
//! Sutton & Barto 2018 §2.2–2.3, here with `ε = n·q`):
//!
//! ```text
//! q  = min(min_share, 1/n)            // clamp: at 1/n the mix is uniform
//! p'_i = (1 − n·q) · p_i + q
//! ```
//!
//! so every eligible worker is picked with probability at least `q`. The
//! pick is re-sampled to match: with probability `n·q` (one `rng.random()`
//! draw) a candidate is drawn uniformly, otherwise the policy's own pick
//! stands. Hence `p'` is the *true* propensity of the final pick, and
//! `Σ p'_i = (1 − n·q) + n·q = 1`.
//!
//! `min_share = 0` (the default) disables the floor and consumes no
//! randomness. [`Selector`](crate::selection::Selector) applies it to the
//! stochastic policies only (max, softmax, p2c, prequal); SWRR and hash stay
//! deterministic.

use crate::selection::{Candidate, Policy, Selection, SelectionError};

fn check_min_share(min_share: f64) -> Result<(), SelectionError> {
    if min_share.is_finite() && (0.0..=1.0).contains(&min_share) {
        Ok(())
    } else {
        Err(SelectionError::InvalidConfig {
            field: "min_share",
            reason: "must be finite and in 0..=1",
        })
    }
}

/// Applies the floor to `selection` in place: rewrites its probabilities to
/// `(1 − n·q)·p + q` with `q = min(min_share, 1/n)` and, with probability
/// `n·q`, replaces the pick by a uniform draw.
///
/// `min_share` is a probability per candidate, `0..=1`; `0` is a no-op that
/// draws nothing from `rng`. An empty selection is left untouched.
///
/// # Errors
/// [`SelectionError::InvalidConfig`] if `min_share` is NaN, infinite or
/// outside `0..=1`.
pub fn apply_min_share<R: rand::Rng + ?Sized>(
    selection: &mut Selection,
    min_share: f64,
    rng: &mut R,
) -> Result<(), SelectionError> {
    check_min_share(min_share)?;
    let n = selection.probabilities.len();
    if n == 0 || min_share == 0.0 {
        return Ok(());
    }
    let nf = n as f64;
    // Clamp so that n·q <= 1 exactly, even after rounding.
    let explore = (min_share * nf).min(1.0);
    let q = explore / nf;
    let keep = 1.0 - explore;
    for p in &mut selection.probabilities {
        *p = (keep * *p + q).clamp(0.0, 1.0);
    }
    if rng.random::<f64>() < explore {
        selection.pick = rng.random_range(0..n);
    }
    Ok(())
}

/// A policy wrapped with the minimum-share floor (see the module docs).
#[derive(Debug, Clone)]
pub struct MinShareFloor<P> {
    inner: P,
    min_share: f64,
}

impl<P: Policy> MinShareFloor<P> {
    /// Wraps `inner` so every candidate gets at least `min(min_share, 1/n)`
    /// probability. `min_share` is `0..=1`; `0` disables the floor.
    ///
    /// # Errors
    /// [`SelectionError::InvalidConfig`] if `min_share` is NaN, infinite or
    /// outside `0..=1`.
    pub fn new(inner: P, min_share: f64) -> Result<Self, SelectionError> {
        check_min_share(min_share)?;
        Ok(Self { inner, min_share })
    }

    /// The wrapped policy.
    pub fn inner(&self) -> &P {
        &self.inner
    }

    /// The configured floor (before clamping to `1/n`).
    pub fn min_share(&self) -> f64 {
        self.min_share
    }
}

impl<P: Policy> Policy for MinShareFloor<P> {
    /// Errors: whatever the inner policy returns.
    fn select<R: rand::Rng + ?Sized>(
        &self,
        candidates: &[Candidate<'_>],
        key: &str,
        rng: &mut R,
    ) -> Result<Selection, SelectionError> {
        let mut selection = self.inner.select(candidates, key, rng)?;
        apply_min_share(&mut selection, self.min_share, rng)?;
        Ok(selection)
    }
}

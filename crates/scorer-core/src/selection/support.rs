//! Shared input validation and categorical sampling used by the policies.

use std::cell::RefCell;

use crate::selection::{Candidate, MAX_CANDIDATES, SelectionError};

/// Probability buffers [`recycle`]d, at most this many per thread.
const POOLED: usize = 4;

thread_local! {
    static POOL: RefCell<Vec<Vec<f64>>> = const { RefCell::new(Vec::new()) };
}

/// A buffer of `n` zeros for a selection's probabilities, one given back
/// with [`recycle`] when there is one: a caller that recycles each
/// selection's probabilities allocates none in the steady state.
pub(crate) fn zeroed(n: usize) -> Vec<f64> {
    let mut v = POOL
        .try_with(|p| p.try_borrow_mut().ok().and_then(|mut p| p.pop()))
        .ok()
        .flatten()
        .unwrap_or_default();
    v.clear();
    v.resize(n, 0.0);
    v
}

/// Gives a [`super::Selection`]'s probabilities back for the next
/// selection on this thread.
pub fn recycle(v: Vec<f64>) {
    let _ = POOL.try_with(|p| {
        if let Ok(mut p) = p.try_borrow_mut()
            && p.len() < POOLED
        {
            p.push(v);
        }
    });
}

/// Checks the input contract documented in the module guide.
///
/// Errors: [`SelectionError::Empty`], [`SelectionError::TooManyCandidates`],
/// [`SelectionError::InvalidScore`], [`SelectionError::InvalidWeight`],
/// [`SelectionError::InvalidInFlight`] (first offending candidate wins).
pub(crate) fn validate(candidates: &[Candidate<'_>]) -> Result<(), SelectionError> {
    if candidates.is_empty() {
        return Err(SelectionError::Empty);
    }
    if candidates.len() > MAX_CANDIDATES {
        return Err(SelectionError::TooManyCandidates {
            len: candidates.len(),
            max: MAX_CANDIDATES,
        });
    }
    for (index, c) in candidates.iter().enumerate() {
        // NaN fails both comparisons, so it is rejected here too.
        if !(c.score.is_finite() && (0.0..=100.0).contains(&c.score)) {
            return Err(SelectionError::InvalidScore {
                index,
                score: c.score,
            });
        }
        if !(c.weight.is_finite() && c.weight > 0.0) {
            return Err(SelectionError::InvalidWeight {
                index,
                weight: c.weight,
            });
        }
        if !(c.in_flight.is_finite() && c.in_flight >= 0.0) {
            return Err(SelectionError::InvalidInFlight {
                index,
                in_flight: c.in_flight,
            });
        }
    }
    Ok(())
}

/// Draws an index from `probabilities` (non-negative, summing to ~1).
///
/// Uses one `rng.random::<f64>()` draw in `[0, 1)` scaled by the actual
/// total, so rounding in the sum cannot push the draw past the end; if it
/// still does (only through rounding), the last index with positive mass is
/// returned. Returns 0 for an all-zero or empty slice (callers never pass
/// one).
pub(crate) fn sample_index<R: rand::Rng + ?Sized>(probabilities: &[f64], rng: &mut R) -> usize {
    let total: f64 = probabilities.iter().sum();
    let u: f64 = rng.random::<f64>() * total;
    let mut acc = 0.0;
    let mut last_positive = 0;
    for (i, &p) in probabilities.iter().enumerate() {
        if p > 0.0 {
            acc += p;
            last_positive = i;
            if u < acc {
                return i;
            }
        }
    }
    last_positive
}

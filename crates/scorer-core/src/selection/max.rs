//! `max`: pick the highest final score, ties broken uniformly at random.
//!
//! # Algorithm
//!
//! One pass finds the maximum score `m` and the number `k >= 1` of
//! candidates whose score equals `m` exactly (`==` on `f64`, so `-0.0` and
//! `0.0` tie). One uniform draw `r ∈ 0..k` then picks the `r`-th tied
//! candidate. The propensity is `1/k` for each tied candidate and `0` for
//! every other one.
//!
//! Breaking ties at random — rather than by list order or hash-map order —
//! matters: identical workers would otherwise all lose to whichever happens
//! to be listed first, and the reported propensities would be a lie. Because
//! the pick is a uniform draw over the tied set, the *distribution* of the
//! chosen worker does not depend on candidate order (a particular seed may
//! map to a different worker after a reordering, but every tied worker still
//! has probability `1/k`).
//!
//! Only `score` is consulted; `weight` and `in_flight` are ignored.
//!
//! Cost: O(n) time, one allocation (the probabilities `Vec`).

use crate::selection::support::validate;
use crate::selection::{Candidate, Policy, Selection, SelectionError};

/// The `max` policy. Stateless; see the module docs for the algorithm.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MaxScore;

impl Policy for MaxScore {
    /// Errors: input validation errors only (see the module guide).
    fn select<R: rand::Rng + ?Sized>(
        &self,
        candidates: &[Candidate<'_>],
        _key: &str,
        rng: &mut R,
    ) -> Result<Selection, SelectionError> {
        validate(candidates)?;
        Ok(select_max(candidates, rng))
    }
}

/// `max` on already-validated, non-empty candidates (also used by softmax
/// for temperatures below [`crate::selection::SOFTMAX_MIN_TEMPERATURE`]).
pub(crate) fn select_max<R: rand::Rng + ?Sized>(
    candidates: &[Candidate<'_>],
    rng: &mut R,
) -> Selection {
    let mut best = f64::NEG_INFINITY;
    let mut ties: usize = 0;
    for c in candidates {
        if c.score > best {
            best = c.score;
            ties = 1;
        } else if c.score == best {
            ties += 1;
        }
    }
    // Validated input is non-empty with finite scores, so ties >= 1; the
    // max() only guards the range below against an impossible empty range.
    let ties = ties.max(1);
    let target = rng.random_range(0..ties);
    let share = 1.0 / ties as f64;

    let mut probabilities = Vec::with_capacity(candidates.len());
    let mut pick = 0;
    let mut seen = 0;
    for (i, c) in candidates.iter().enumerate() {
        if c.score == best {
            if seen == target {
                pick = i;
            }
            seen += 1;
            probabilities.push(share);
        } else {
            probabilities.push(0.0);
        }
    }
    Selection {
        pick,
        probabilities,
    }
}

/// `max`'s propensities (`1/k` on the `k` tied best, 0 elsewhere) for
/// already-validated, non-empty candidates.
pub(crate) fn max_probabilities(candidates: &[Candidate<'_>]) -> Vec<f64> {
    let best = candidates
        .iter()
        .map(|c| c.score)
        .fold(f64::NEG_INFINITY, f64::max);
    let ties = candidates.iter().filter(|c| c.score == best).count().max(1);
    let share = 1.0 / ties as f64;
    candidates
        .iter()
        .map(|c| if c.score == best { share } else { 0.0 })
        .collect()
}

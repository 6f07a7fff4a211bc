//! `p2c`: the power of two choices.
//!
//! # Algorithm
//!
//! Mitzenmacher, "The Power of Two Choices in Randomized Load Balancing",
//! IEEE TPDS 12(10), 2001 (and Azar, Broder, Karlin, Upfal, "Balanced
//! Allocations", 1999); the same shape as tower's `balance::p2c`.
//!
//! Sample an ordered pair of *distinct* candidates `(i, j)` uniformly at
//! random (two draws: `i ∈ 0..n`, `j ∈ 0..n−1` shifted past `i`) and keep
//! the better one. "Better" is lexicographic:
//!
//! 1. higher `score` wins;
//! 2. on an exactly equal score, lower `in_flight` wins;
//! 3. on an exact tie of both, a fair coin decides.
//!
//! With a single candidate it is picked (no draws). `weight` is ignored.
//!
//! # Exact propensities
//!
//! For `n >= 2`, each of the `n(n−1)` ordered pairs is equally likely, so
//! candidate `i` is picked with probability
//!
//! ```text
//! P(i) = [2·W(i) + T(i)] / (n(n−1))
//! ```
//!
//! where `W(i)` is the number of candidates strictly worse than `i` (each
//! appears in 2 ordered pairs with `i`, and `i` always wins) and `T(i)` is the
//! number of *other* candidates tied with `i` (2 pairs each, won half the
//! time). Summing over `i` gives `2·C(n,2) = n(n−1)`, so the propensities sum
//! to 1. Both counts come from one sort by the comparison key, O(n log n);
//! the sort works on an index buffer in a thread-local scratch `Vec` reused
//! across calls, and the probabilities go in a recycled buffer
//! ([`crate::selection::recycle`]), so steady state allocates nothing.

use std::cell::RefCell;
use std::cmp::Ordering;

use crate::selection::support::validate;
use crate::selection::{Candidate, Policy, Selection, SelectionError};

thread_local! {
    /// Reused index buffer for the O(n log n) propensity computation.
    static SCRATCH: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// The `p2c` policy. Stateless; see the module docs for the algorithm.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PowerOfTwoChoices;

/// Orders candidates worst→best: `Greater` means `a` beats `b`.
///
/// Inputs are validated finite, so `partial_cmp` never returns `None`; the
/// `Equal` fallback keeps this total without a panic path (and makes `-0.0`
/// tie with `0.0`, matching IEEE `==`).
fn compare(a: &Candidate<'_>, b: &Candidate<'_>) -> Ordering {
    a.score
        .partial_cmp(&b.score)
        .unwrap_or(Ordering::Equal)
        .then_with(|| {
            b.in_flight
                .partial_cmp(&a.in_flight)
                .unwrap_or(Ordering::Equal)
        })
}

impl PowerOfTwoChoices {
    /// Exact propensities of the two-choice procedure (see the module docs).
    ///
    /// # Errors
    /// Input validation errors (see the module guide).
    pub fn probabilities(&self, candidates: &[Candidate<'_>]) -> Result<Vec<f64>, SelectionError> {
        validate(candidates)?;
        Ok(exact_probabilities(candidates))
    }
}

/// Requires validated, non-empty candidates.
fn exact_probabilities(candidates: &[Candidate<'_>]) -> Vec<f64> {
    let n = candidates.len();
    let mut out = crate::selection::support::zeroed(n);
    if n == 1 {
        // ok: `out` has length n == 1.
        out[0] = 1.0;
        return out;
    }
    let fill = |order: &mut Vec<usize>, out: &mut [f64]| {
        order.clear();
        order.extend(0..n);
        order.sort_unstable_by(|&a, &b| compare(&candidates[a], &candidates[b]));
        let denom = n as f64 * (n - 1) as f64;
        let mut start = 0;
        while start < n {
            let mut end = start + 1;
            while end < n
                && compare(&candidates[order[start]], &candidates[order[end]]) == Ordering::Equal
            {
                end += 1;
            }
            // `start` candidates are strictly worse; `end - start - 1` others tie.
            // ok: every index below is < n (order is a permutation of 0..n).
            let p = (2 * start + (end - start - 1)) as f64 / denom;
            for &idx in &order[start..end] {
                out[idx] = p;
            }
            start = end;
        }
    };
    let done = SCRATCH
        .try_with(|cell| match cell.try_borrow_mut() {
            Ok(mut order) => {
                fill(&mut order, &mut out);
                true
            }
            Err(_) => false,
        })
        .unwrap_or(false);
    if !done {
        // Thread-local unavailable (thread teardown) or re-entered: use a
        // one-off buffer instead of panicking.
        fill(&mut Vec::with_capacity(n), &mut out);
    }
    out
}

impl Policy for PowerOfTwoChoices {
    /// Errors: input validation errors only (see the module guide).
    fn select<R: rand::Rng + ?Sized>(
        &self,
        candidates: &[Candidate<'_>],
        _key: &str,
        rng: &mut R,
    ) -> Result<Selection, SelectionError> {
        validate(candidates)?;
        let n = candidates.len();
        let probabilities = exact_probabilities(candidates);
        if n == 1 {
            return Ok(Selection {
                pick: 0,
                probabilities,
            });
        }
        let i = rng.random_range(0..n);
        let mut j = rng.random_range(0..n - 1);
        if j >= i {
            j += 1;
        }
        let pick = match compare(&candidates[i], &candidates[j]) {
            Ordering::Greater => i,
            Ordering::Less => j,
            Ordering::Equal => {
                if rng.random_bool(0.5) {
                    i
                } else {
                    j
                }
            }
        };
        Ok(Selection {
            pick,
            probabilities,
        })
    }
}

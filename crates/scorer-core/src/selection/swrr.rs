//! `swrr`: nginx smooth weighted round robin.
//!
//! # Algorithm
//!
//! The "smooth" weighted round robin of nginx
//! (`src/http/ngx_http_upstream_round_robin.c`,
//! `ngx_http_upstream_get_peer`, introduced in nginx 1.3.1 by Maxim Dounin),
//! also used by LVS/pingora. Every worker keeps a *current weight* `c_i`.
//! On each call, over the candidates present in that call:
//!
//! 1. `c_i += w_i` for every candidate, and `total = Σ w_i`;
//! 2. pick the candidate with the largest `c_i` (exact ties: the
//!    lexicographically smaller `worker_id`, so the result does not depend
//!    on candidate order);
//! 3. `c_pick −= total`.
//!
//! Over any window of `Σ w` picks with a fixed candidate set, each worker is
//! picked in proportion to its weight, and picks are interleaved as evenly
//! as possible (weights 5:1:1 give `a a b a c a a`, not `a a a a a b c`);
//! equal weights give exact rotation `a, b, c, a, b, c, …`.
//!
//! # Effective weights
//!
//! `w_i = score_i × weight_i`. To make overflow impossible, when the largest
//! weight exceeds 1 every weight is first multiplied by the same power of
//! two `2^-k`, `k = ceil(log2(max weight))`, so each scaled weight is `<= 1`
//! and every `w_i <= 100`, `total <= 100·n`. Scaling by a power of two is
//! exact in binary floating point, so ratios are preserved bit-for-bit and
//! small integer weights keep exact, drift-free arithmetic (with the
//! normal `weight = 1.0` no scaling happens at all). If every `w_i` is zero
//! (all scores zero, or extreme weight ratios underflowing), all `w_i = 1`,
//! i.e. plain round robin; there is no division anywhere.
//!
//! # State
//!
//! Current weights are `f64`s keyed by `worker_id` in a `HashMap` behind a
//! `Mutex`, so a worker's state persists across calls; workers absent from
//! a call are untouched. The map is bounded: a sweep every
//! [`SWRR_SWEEP_INTERVAL`] calls evicts entries not seen in the last
//! [`SWRR_STATE_TTL_CALLS`] calls, and if it still holds more than
//! [`SWRR_MAX_ENTRIES`] entries, everything not seen in the current call is
//! dropped. An evicted worker that comes back restarts from `c = 0`.
//!
//! # Propensities
//!
//! SWRR is deterministic given its state: the reported probabilities are
//! 1.0 on the pick and 0 elsewhere. This is *degenerate* as a propensity —
//! it describes this call's certainty, not the long-run share — so do not
//! use it for inverse-propensity weighting. The min-share floor does not
//! apply. The rng is not used.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::selection::support::validate;
use crate::selection::{Candidate, Policy, Selection, SelectionError};

/// Entries not seen in this many calls (4096) are evicted by the sweep.
pub const SWRR_STATE_TTL_CALLS: u64 = 4096;

/// Hard cap (131 072) on the number of remembered workers; at least
/// `2 × MAX_CANDIDATES`, so one call's candidates always fit.
pub const SWRR_MAX_ENTRIES: usize = 2 * crate::selection::MAX_CANDIDATES;

/// The TTL sweep runs once every this many calls (1024), keeping the
/// amortised cost per call O(1).
pub const SWRR_SWEEP_INTERVAL: u64 = 1024;

#[derive(Debug, Clone, Copy)]
struct Entry {
    current: f64,
    last_seen: u64,
}

#[derive(Debug, Default)]
struct State {
    current: HashMap<String, Entry>,
    calls: u64,
}

impl State {
    fn sweep(&mut self) {
        let now = self.calls;
        self.current
            .retain(|_, e| now.saturating_sub(e.last_seen) <= SWRR_STATE_TTL_CALLS);
        if self.current.len() > SWRR_MAX_ENTRIES {
            self.current.retain(|_, e| e.last_seen == now);
        }
    }
}

/// The `swrr` policy: nginx smooth weighted round robin with per-worker
/// state. `Send + Sync`; state is behind a `Mutex` held for one O(n) pass.
#[derive(Debug, Default)]
pub struct SmoothWeightedRoundRobin {
    state: Mutex<State>,
}

impl SmoothWeightedRoundRobin {
    /// A policy with empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of workers currently remembered (bounded by
    /// [`SWRR_MAX_ENTRIES`]).
    pub fn tracked_workers(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .current
            .len()
    }

    /// Forgets all current weights.
    pub fn reset(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.current.clear();
    }
}

impl Policy for SmoothWeightedRoundRobin {
    /// Errors: input validation errors only (see the module guide). The rng
    /// and key are unused.
    fn select<R: rand::Rng + ?Sized>(
        &self,
        candidates: &[Candidate<'_>],
        _key: &str,
        _rng: &mut R,
    ) -> Result<Selection, SelectionError> {
        validate(candidates)?;

        let max_weight = candidates.iter().map(|c| c.weight).fold(0.0_f64, f64::max);
        let scale = if max_weight > 1.0 {
            // max_weight is finite, so log2 <= 1024 and the exponent fits;
            // 0.5^k is an exact power of two (>= 2^-1024, representable).
            0.5_f64.powi(max_weight.log2().ceil() as i32)
        } else {
            1.0
        };
        let scaled = |c: &Candidate<'_>| c.score * (c.weight * scale);
        // All zero (all scores 0, or extreme weight ratios underflowing):
        // plain round robin.
        let round_robin = candidates.iter().all(|c| scaled(c) <= 0.0);
        let effective = |c: &Candidate<'_>| -> f64 { if round_robin { 1.0 } else { scaled(c) } };

        // Poisoning cannot leave the state inconsistent in a way that
        // matters (worst case: one skewed pick), so recover instead of
        // panicking.
        let mut guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let state = &mut *guard;
        state.calls = state.calls.wrapping_add(1);
        let now = state.calls;

        let mut total = 0.0;
        let mut pick = 0;
        let mut best = f64::NEG_INFINITY;
        for (i, c) in candidates.iter().enumerate() {
            let w = effective(c);
            total += w;
            let current = match state.current.get_mut(c.worker_id) {
                Some(e) => {
                    e.current += w;
                    e.last_seen = now;
                    e.current
                }
                None => {
                    state.current.insert(
                        c.worker_id.to_owned(),
                        Entry {
                            current: w,
                            last_seen: now,
                        },
                    );
                    w
                }
            };
            let better = current > best
                || (current == best
                    && candidates
                        .get(pick)
                        .is_some_and(|p| c.worker_id < p.worker_id));
            if better {
                best = current;
                pick = i;
            }
        }
        if let Some(e) = candidates
            .get(pick)
            .and_then(|c| state.current.get_mut(c.worker_id))
        {
            e.current -= total;
        }
        if now.is_multiple_of(SWRR_SWEEP_INTERVAL) || state.current.len() > SWRR_MAX_ENTRIES {
            state.sweep();
        }
        drop(guard);

        let mut probabilities = crate::selection::support::zeroed(candidates.len());
        if let Some(p) = probabilities.get_mut(pick) {
            *p = 1.0;
        }
        Ok(Selection {
            pick,
            probabilities,
        })
    }
}

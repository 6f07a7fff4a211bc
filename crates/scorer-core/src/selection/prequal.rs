//! `prequal`: Prequal's hot-cold lexicographic (HCL) rule.
//!
//! # Source
//!
//! Wydrowski, Kleinberg, Rumble, Archer, "Load is not what you should
//! balance: Introducing Prequal", NSDI 2024 (arXiv:2312.10172), §4: a
//! client probes a few random replicas for their requests-in-flight (RIF)
//! and a latency estimate, then picks by the hot-cold lexicographic rule. A
//! probed replica is *hot* when its RIF exceeds the `Q_RIF` quantile of the
//! RIF distribution, *cold* otherwise; if any probed replica is cold, the
//! cold one with the lowest latency estimate wins, else (all hot) the one
//! with the lowest RIF.
//!
//! # Algorithm
//!
//! 1. **Threshold.** `T` = the nearest-rank `q_rif` quantile of every
//!    candidate's [`outstanding`](Candidate::outstanding) (sorted ascending,
//!    the value at rank `⌈q_rif·n⌉`). The paper estimates the RIF
//!    distribution from its pool of recent probes across replicas; the
//!    service sees every candidate's exact outstanding count, so it takes
//!    the quantile over all of them. Because `T` does not depend on the
//!    probe draw, the rule below is one fixed ranking and the propensities
//!    stay exact.
//! 2. **Hot/cold.** A candidate is hot when `outstanding > T` (the paper's
//!    "exceeds"), cold otherwise. With "strictly below `T`" an idle pool
//!    (every RIF 0) would be all hot and the rule would ignore latency.
//! 3. **Probe.** Draw `d` = `probes` distinct candidates uniformly at
//!    random (`d >= n` probes them all, no randomness).
//! 4. **Pick** the best probed candidate in the lexicographic order:
//!    every cold candidate beats every hot one; cold ones by lower latency,
//!    then lower RIF; hot ones by lower RIF, then lower latency; then the
//!    worker id, then the input index (a deterministic, total order).
//!
//! The latency estimate is the routing [`cost`](Candidate::cost), which
//! orders candidates as their expected latency does with queues weighing
//! more, when every candidate has one. Otherwise (e.g. the engine's panic mode,
//! which skips the cost stage) it is derived from the score for all
//! candidates alike: the engine's score is `100 × fastest / cost`, so a
//! higher score is a lower latency. `weight` and `in_flight` are ignored.
//!
//! # Parameters
//!
//! * `probes` (`selection.prequal_probes`), default [`DEFAULT_PREQUAL_PROBES`]
//!   = 3: the paper's probing rate `r_probe` of 3 probes per query (the
//!   reference implementation `prequal-rs`, `prequal-core/src/config.rs`,
//!   ships `probes_per_query: 3.0` "following the paper").
//! * `q_rif` (`selection.prequal_q_rif`), default [`DEFAULT_PREQUAL_Q_RIF`]
//!   = 0.84: the paper's default `Q_RIF`, as `prequal-rs` documents it ("the
//!   paper's 0.84"; that crate itself ships 0.6 after herding in its
//!   simulation). Must be in `(0, 1]`; 1 makes nothing hot.
//!
//! Not reproduced: the paper's asynchronous probe pool, probe reuse and
//! ageing — the service reads current state at decision time.
//!
//! # Exact propensities
//!
//! Rank the candidates `r = 0..n` best first by the order above. A
//! candidate is picked exactly when it is probed and no better one is, so
//! with `d` of `n` drawn uniformly without replacement
//!
//! ```text
//! P(r) = C(n−1−r, d−1) / C(n, d)
//! ```
//!
//! (zero once `r > n − d`). Computed as `P(0) = d/n`,
//! `P(r+1) = P(r) · (n−d−r)/(n−1−r)`, O(n) after the O(n log n) sort; the
//! terms sum to `C(n, d)/C(n, d) = 1` (hockey-stick identity).

use std::cmp::Ordering;

use crate::selection::support::validate;
use crate::selection::{Candidate, Policy, Selection, SelectionError};

/// Default number of probed candidates per pick (3, the paper's `r_probe`).
pub const DEFAULT_PREQUAL_PROBES: u32 = 3;

/// Default hot/cold RIF quantile (0.84, the paper's `Q_RIF`).
pub const DEFAULT_PREQUAL_Q_RIF: f64 = 0.84;

/// The `prequal` policy. Stateless; see the module docs for the algorithm.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prequal {
    probes: u32,
    q_rif: f64,
}

impl Default for Prequal {
    fn default() -> Self {
        Self {
            probes: DEFAULT_PREQUAL_PROBES,
            q_rif: DEFAULT_PREQUAL_Q_RIF,
        }
    }
}

/// One candidate's place in the HCL order (lower sorts first = better).
#[derive(Debug, Clone, Copy)]
struct Key<'a> {
    hot: bool,
    rif: u32,
    /// Latency estimate, lower is better (ms, or `−score` as a stand-in).
    latency: f64,
    id: &'a str,
    index: usize,
}

fn cmp_f64(a: f64, b: f64) -> Ordering {
    // Validated finite, so `None` never happens; `Equal` keeps it total.
    a.partial_cmp(&b).unwrap_or(Ordering::Equal)
}

/// `Less` means `a` is the better pick.
fn compare(a: &Key<'_>, b: &Key<'_>) -> Ordering {
    a.hot
        .cmp(&b.hot)
        .then_with(|| {
            if a.hot {
                a.rif
                    .cmp(&b.rif)
                    .then_with(|| cmp_f64(a.latency, b.latency))
            } else {
                cmp_f64(a.latency, b.latency).then_with(|| a.rif.cmp(&b.rif))
            }
        })
        .then_with(|| a.id.cmp(b.id))
        .then_with(|| a.index.cmp(&b.index))
}

impl Prequal {
    /// A policy probing `probes` candidates with hot/cold quantile `q_rif`.
    ///
    /// # Errors
    /// [`SelectionError::InvalidConfig`] if `probes` is 0 or `q_rif` is not
    /// finite and in `(0, 1]`.
    pub fn new(probes: u32, q_rif: f64) -> Result<Self, SelectionError> {
        if probes == 0 {
            return Err(SelectionError::InvalidConfig {
                field: "prequal_probes",
                reason: "must be at least 1",
            });
        }
        if !(q_rif.is_finite() && q_rif > 0.0 && q_rif <= 1.0) {
            return Err(SelectionError::InvalidConfig {
                field: "prequal_q_rif",
                reason: "must be finite and in (0, 1]",
            });
        }
        Ok(Self { probes, q_rif })
    }

    /// Probed candidates per pick.
    pub fn probes(&self) -> u32 {
        self.probes
    }

    /// Hot/cold RIF quantile.
    pub fn q_rif(&self) -> f64 {
        self.q_rif
    }

    /// The RIF threshold `T` (see the module docs): candidates with
    /// `outstanding > T` are hot. Requires a non-empty slice.
    pub fn rif_threshold(&self, candidates: &[Candidate<'_>]) -> u32 {
        let mut rifs: Vec<u32> = candidates.iter().map(|c| c.outstanding).collect();
        let n = rifs.len();
        if n == 0 {
            return 0;
        }
        // Nearest rank ⌈q·n⌉, 1-based, clamped to 1..=n against rounding.
        let rank = ((self.q_rif * n as f64).ceil() as usize).clamp(1, n);
        *rifs.select_nth_unstable(rank - 1).1
    }

    /// Exact propensities (see the module docs), in input order.
    ///
    /// # Errors
    /// Input validation errors (see the module guide), including
    /// [`SelectionError::InvalidCost`].
    pub fn probabilities(&self, candidates: &[Candidate<'_>]) -> Result<Vec<f64>, SelectionError> {
        let keys = self.keys(candidates)?;
        Ok(self.exact_probabilities(&keys))
    }

    /// Validates and builds every candidate's key.
    fn keys<'a>(&self, candidates: &[Candidate<'a>]) -> Result<Vec<Key<'a>>, SelectionError> {
        validate(candidates)?;
        for (index, c) in candidates.iter().enumerate() {
            if let Some(ms) = c.cost
                && !(ms.is_finite() && ms >= 0.0)
            {
                return Err(SelectionError::InvalidCost { index, cost: ms });
            }
        }
        let all_ms = candidates.iter().all(|c| c.cost.is_some());
        let t = self.rif_threshold(candidates);
        Ok(candidates
            .iter()
            .enumerate()
            .map(|(index, c)| Key {
                hot: c.outstanding > t,
                rif: c.outstanding,
                latency: match c.cost {
                    Some(ms) if all_ms => ms,
                    _ => -c.score,
                },
                id: c.worker_id,
                index,
            })
            .collect())
    }

    /// Probes the pick would draw from `n` candidates.
    fn d(&self, n: usize) -> usize {
        (self.probes as usize).min(n)
    }

    fn exact_probabilities(&self, keys: &[Key<'_>]) -> Vec<f64> {
        let n = keys.len();
        let d = self.d(n);
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_unstable_by(|&a, &b| compare(&keys[a], &keys[b]));
        let mut out = vec![0.0; n];
        let mut p = d as f64 / n as f64;
        for (r, &idx) in order.iter().enumerate() {
            if p <= 0.0 {
                break;
            }
            // ok: idx < n (order is a permutation of 0..n).
            out[idx] = p;
            // P(r+1) = P(r)·(n−d−r)/(n−1−r); zero once r reaches n − d.
            if r + 1 < n {
                let num = (n - d).saturating_sub(r);
                p *= num as f64 / (n - 1 - r) as f64;
            }
        }
        out
    }
}

impl Policy for Prequal {
    /// Errors: input validation errors only (see the module guide).
    fn select<R: rand::Rng + ?Sized>(
        &self,
        candidates: &[Candidate<'_>],
        _key: &str,
        rng: &mut R,
    ) -> Result<Selection, SelectionError> {
        let keys = self.keys(candidates)?;
        let probabilities = self.exact_probabilities(&keys);
        let n = keys.len();
        let d = self.d(n);
        let pick = if d >= n {
            (0..n).min_by(|&a, &b| compare(&keys[a], &keys[b]))
        } else {
            rand::seq::index::sample(rng, n, d)
                .into_iter()
                .min_by(|&a, &b| compare(&keys[a], &keys[b]))
        }
        .unwrap_or(0);
        Ok(Selection {
            pick,
            probabilities,
        })
    }
}

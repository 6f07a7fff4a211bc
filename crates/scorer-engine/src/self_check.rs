//! The scorer watching itself: whether its scores still predict outcomes.
//!
//! A scorer that has silently gone wrong (its inputs lie, a weight was
//! mistyped, a model drifted) looks healthy in every per-worker gauge. Two
//! views show it:
//!
//! - **distributions**: every candidate's final score per decision, and
//!   the pick's expected latency beside its observed latency. A healthy
//!   score distribution is unimodal; one collapsed to 0 and 100 means the
//!   rules saturate;
//! - **agreement**: Spearman's rank correlation between the pick's expected
//!   latency (the cost model's `expected_latency_ms`) and the latency its
//!   outcome reported, over the last [`RANK_WINDOW`] outcomes. Honest
//!   inputs give a clearly positive ρ; when the inputs lie the routing cost
//!   stops ordering the outcomes and ρ falls toward 0 or below.
//!
//! The histograms are lock-free atomics. The window takes a `try_lock`: an
//! outcome that finds it busy is not sampled (counted in `skipped`), so a
//! pick or outcome never waits.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Upper bounds of the final-score histogram (scores are 0..=100).
pub const SCORE_BUCKETS: [f64; 10] = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0];
/// Upper bounds of the latency histograms, ms.
pub const LATENCY_BUCKETS_MS: [f64; 15] = [
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1_000.0, 2_500.0,
    10_000.0,
];
/// Outcomes the rank correlation is computed over (the latest).
pub const RANK_WINDOW: usize = 1_024;
/// Fewest outcomes in the window for a rank correlation.
pub const RANK_MIN_PAIRS: usize = 64;

/// A histogram of fixed upper bounds, updated with relaxed atomics.
#[derive(Debug)]
pub struct AtomicHistogram {
    bounds: &'static [f64],
    /// One count per bound, then the `+Inf` bucket.
    counts: Vec<AtomicU64>,
    sum_bits: AtomicU64,
}

/// A copy of a histogram.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    /// Sum of the observations.
    pub sum: f64,
    /// Observations.
    pub count: u64,
    /// `(upper bound, observations in this bucket alone)`, the last bound
    /// `+Inf`.
    pub buckets: Vec<(f64, u64)>,
}

impl AtomicHistogram {
    /// An empty histogram over `bounds` (ascending) and `+Inf`.
    pub fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_bits: AtomicU64::new(0f64.to_bits()),
        }
    }

    /// Count `v`; a NaN is not counted.
    pub fn observe(&self, v: f64) {
        self.observe_all([v]);
    }

    /// Count each of `values` (NaNs are not counted), adding to the sum
    /// once.
    pub fn observe_all(&self, values: impl IntoIterator<Item = f64>) {
        let mut sum = 0.0;
        for v in values.into_iter().filter(|v| !v.is_nan()) {
            let i = self.bounds.partition_point(|b| *b < v);
            self.counts[i].fetch_add(1, Ordering::Relaxed);
            sum += v;
        }
        if sum != 0.0 {
            let _ = self
                .sum_bits
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                    Some((f64::from_bits(bits) + sum).to_bits())
                });
        }
    }

    /// The counts now.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let buckets: Vec<(f64, u64)> = self
            .bounds
            .iter()
            .copied()
            .chain([f64::INFINITY])
            .zip(&self.counts)
            .map(|(b, c)| (b, c.load(Ordering::Relaxed)))
            .collect();
        HistogramSnapshot {
            sum: f64::from_bits(self.sum_bits.load(Ordering::Relaxed)),
            count: buckets.iter().map(|b| b.1).sum(),
            buckets,
        }
    }
}

/// The last [`RANK_WINDOW`] (expected, observed) pairs, oldest overwritten.
#[derive(Debug, Default)]
struct PairRing {
    pairs: Vec<(f64, f64)>,
    next: usize,
}

/// What the self-check shows now.
#[derive(Debug, Clone, PartialEq)]
pub struct SelfCheckSnapshot {
    /// Every candidate's final score, per decision made.
    pub final_scores: HistogramSnapshot,
    /// The pick's expected latency, ms, per outcome of a remembered pick.
    pub expected_latency_ms: HistogramSnapshot,
    /// The observed latency, ms, of the same outcomes.
    pub observed_latency_ms: HistogramSnapshot,
    /// Spearman's ρ of expected against observed latency over the window;
    /// `None` below [`RANK_MIN_PAIRS`] pairs or when either side is
    /// constant.
    pub rank_correlation: Option<f64>,
    /// Pairs in the window.
    pub window_pairs: usize,
    /// Outcomes not sampled into the window because it was busy.
    pub skipped: u64,
}

/// The engine's self-check.
#[derive(Debug)]
pub struct SelfCheck {
    final_scores: AtomicHistogram,
    expected_ms: AtomicHistogram,
    observed_ms: AtomicHistogram,
    window: Mutex<PairRing>,
    skipped: AtomicU64,
}

impl Default for SelfCheck {
    fn default() -> Self {
        Self {
            final_scores: AtomicHistogram::new(&SCORE_BUCKETS),
            expected_ms: AtomicHistogram::new(&LATENCY_BUCKETS_MS),
            observed_ms: AtomicHistogram::new(&LATENCY_BUCKETS_MS),
            window: Mutex::new(PairRing::default()),
            skipped: AtomicU64::new(0),
        }
    }
}

impl SelfCheck {
    /// A decision scored its candidates `final_scores`.
    pub fn on_decision(&self, final_scores: impl IntoIterator<Item = f64>) {
        self.final_scores.observe_all(final_scores);
    }

    /// A remembered pick expected to take `expected_ms` took `observed_ms`.
    pub fn on_outcome(&self, expected_ms: f64, observed_ms: f64) {
        if !expected_ms.is_finite() || !observed_ms.is_finite() {
            return;
        }
        self.expected_ms.observe(expected_ms);
        self.observed_ms.observe(observed_ms);
        let Ok(mut ring) = self.window.try_lock() else {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let at = ring.next;
        if ring.pairs.len() < RANK_WINDOW {
            ring.pairs.push((expected_ms, observed_ms));
        } else {
            ring.pairs[at] = (expected_ms, observed_ms);
        }
        ring.next = (at + 1) % RANK_WINDOW;
    }

    /// The histograms and the rank correlation now (sorts the window: call
    /// it from a scrape, not per request).
    pub fn snapshot(&self) -> SelfCheckSnapshot {
        let pairs = self
            .window
            .lock()
            .map(|r| r.pairs.clone())
            .unwrap_or_default();
        SelfCheckSnapshot {
            final_scores: self.final_scores.snapshot(),
            expected_latency_ms: self.expected_ms.snapshot(),
            observed_latency_ms: self.observed_ms.snapshot(),
            rank_correlation: (pairs.len() >= RANK_MIN_PAIRS)
                .then(|| spearman(&pairs))
                .flatten(),
            window_pairs: pairs.len(),
            skipped: self.skipped.load(Ordering::Relaxed),
        }
    }
}

/// Ranks of `v`, 1-based, ties given their average rank.
fn ranks(v: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..v.len()).collect();
    order.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut r = vec![0.0; v.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && v[order[j + 1]] == v[order[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            r[k] = avg;
        }
        i = j + 1;
    }
    r
}

/// Spearman's ρ: Pearson's correlation of the ranks; `None` when either
/// side is constant.
pub fn spearman(pairs: &[(f64, f64)]) -> Option<f64> {
    let xs: Vec<f64> = pairs.iter().map(|p| p.0).collect();
    let ys: Vec<f64> = pairs.iter().map(|p| p.1).collect();
    let (rx, ry) = (ranks(&xs), ranks(&ys));
    let n = rx.len() as f64;
    let mean = (n + 1.0) / 2.0;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in rx.iter().zip(&ry) {
        let (dx, dy) = (a - mean, b - mean);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    (sxx > 0.0 && syy > 0.0).then(|| sxy / (sxx * syy).sqrt())
}

#[cfg(test)]
#[path = "self_check_tests.rs"]
mod tests;

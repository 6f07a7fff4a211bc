//! Counters and the inference latency histograms behind `GET /v1/model`
//! (issue #6) and `GET /metrics` (issue #8). The exact one is HdrHistogram
//! (Gil Tene) via the `hdrhistogram` crate, 3 significant digits,
//! 1 ns .. 10 s; the Prometheus one has buckets 1 µs .. ~1 s, ×2 apart.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use hdrhistogram::Histogram;
use serde::Serialize;

use super::fallback::FallbackReason;

const HIST_MAX_NS: u64 = 10_000_000_000;
/// Smallest Prometheus bucket bound, seconds (1 µs).
const PROM_FIRST_BUCKET_S: f64 = 1e-6;
/// Prometheus buckets: 1 µs × 2^k, k = 0..20 (up to ~0.5 s).
const PROM_BUCKETS: u16 = 20;

/// Since-start counters of the model path.
#[derive(Debug)]
pub struct ModelStats {
    calls: AtomicU64,
    used: AtomicU64,
    fallbacks: [AtomicU64; FallbackReason::ALL.len()],
    /// `None` only if HdrHistogram refused the constant bounds (it does not).
    latency_ns: Mutex<Option<Histogram<u64>>>,
    /// The same latencies in Prometheus buckets, seconds.
    latency_prom: prometheus_client::metrics::histogram::Histogram,
}

impl Default for ModelStats {
    fn default() -> Self {
        Self {
            calls: AtomicU64::new(0),
            used: AtomicU64::new(0),
            fallbacks: Default::default(),
            latency_ns: Mutex::new(Histogram::new_with_bounds(1, HIST_MAX_NS, 3).ok()),
            latency_prom: prometheus_client::metrics::histogram::Histogram::new(
                prometheus_client::metrics::histogram::exponential_buckets(
                    PROM_FIRST_BUCKET_S,
                    2.0,
                    PROM_BUCKETS,
                ),
            ),
        }
    }
}

/// A point-in-time copy of [`ModelStats`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelStatsSnapshot {
    /// Decisions that asked the model path (model enabled or not).
    pub calls: u64,
    /// Decisions whose final scores used the model's output.
    pub used: u64,
    /// Decisions that fell back to the rules, by reason label.
    pub fallbacks: Vec<(String, u64)>,
    /// Inferences timed (inside or outside budget).
    pub inferences: u64,
    /// Inference latency percentiles, µs: p50, p90, p99, p99.9, max.
    pub latency_us: LatencyPercentiles,
}

/// Latency percentiles, µs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencyPercentiles {
    /// Median, µs.
    pub p50: f64,
    /// 90th percentile, µs.
    pub p90: f64,
    /// 99th percentile, µs.
    pub p99: f64,
    /// 99.9th percentile, µs.
    pub p999: f64,
    /// Maximum, µs.
    pub max: f64,
}

impl ModelStats {
    /// Counts a decision that asked the model path.
    pub fn on_call(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a decision that used the model.
    pub fn on_used(&self) {
        self.used.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a fallback.
    pub fn on_fallback(&self, reason: FallbackReason) {
        self.fallbacks[reason.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// The inference latency histogram in Prometheus buckets, seconds (a
    /// handle on the live histogram, for registration in a scrape).
    pub fn prometheus_histogram(&self) -> prometheus_client::metrics::histogram::Histogram {
        self.latency_prom.clone()
    }

    /// Records one inference's wall time, ns.
    pub fn record_latency_ns(&self, ns: u64) {
        self.latency_prom.observe(ns as f64 / 1e9);
        let mut h = self
            .latency_ns
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(h) = h.as_mut() {
            h.saturating_record(ns.clamp(1, HIST_MAX_NS));
        }
    }

    /// Fallbacks counted for `reason`.
    pub fn fallbacks(&self, reason: FallbackReason) -> u64 {
        self.fallbacks[reason.index()].load(Ordering::Relaxed)
    }

    /// A snapshot of every counter and the latency percentiles.
    pub fn snapshot(&self) -> ModelStatsSnapshot {
        let h = self
            .latency_ns
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let us = |q: f64| {
            h.as_ref()
                .map_or(0.0, |h| h.value_at_quantile(q) as f64 / 1_000.0)
        };
        ModelStatsSnapshot {
            calls: self.calls.load(Ordering::Relaxed),
            used: self.used.load(Ordering::Relaxed),
            fallbacks: FallbackReason::ALL
                .iter()
                .map(|r| (r.as_str().to_owned(), self.fallbacks(*r)))
                .collect(),
            inferences: h.as_ref().map_or(0, Histogram::len),
            latency_us: LatencyPercentiles {
                p50: us(0.5),
                p90: us(0.9),
                p99: us(0.99),
                p999: us(0.999),
                max: h.as_ref().map_or(0.0, |h| h.max() as f64 / 1_000.0),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_follow_recorded_latencies() {
        let s = ModelStats::default();
        for us in 1..=1_000u64 {
            s.record_latency_ns(us * 1_000);
        }
        s.on_fallback(FallbackReason::BudgetExceeded);
        s.on_fallback(FallbackReason::BudgetExceeded);
        let snap = s.snapshot();
        assert_eq!(snap.inferences, 1_000);
        assert!(
            (snap.latency_us.p50 - 500.0).abs() < 1.0,
            "{:?}",
            snap.latency_us
        );
        assert!(
            (snap.latency_us.p99 - 990.0).abs() < 1.0,
            "{:?}",
            snap.latency_us
        );
        assert_eq!(snap.fallbacks[0], ("budget_exceeded".to_owned(), 2));
    }
}

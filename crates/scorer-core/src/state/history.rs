//! The last [`RING_CAPACITY`] samples of each worker and the history features
//! derived from them (trend slopes and volatility, issue #2).
//!
//! Derived values are computed once per accepted snapshot on the write path,
//! so the scoring path only reads them.

use std::collections::VecDeque;

/// Samples kept per worker.
pub const RING_CAPACITY: usize = 60;

/// The numeric part of one accepted snapshot.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Server monotonic receive time, ms.
    pub receive_ms: u64,
    /// Reported RTT p99, ms.
    pub rtt_ms_p99: f64,
    /// Reported error rate, fraction.
    pub error_rate: f64,
    /// Reported cache hit rate, fraction, when present.
    pub cache_hit_rate: Option<f64>,
}

/// A fixed-capacity ring of [`Sample`]s; the oldest is dropped when full.
#[derive(Debug, Clone, Default)]
pub struct History {
    ring: VecDeque<Sample>,
}

/// Values derived from a worker's ring.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct HistoryStats {
    /// Least-squares slope of RTT p99 over the ring, ms per second of receive time.
    pub p99_slope_ms_per_s: f64,
    /// Population standard deviation of the error rate over the ring, fraction.
    pub error_rate_stddev: f64,
    /// Least-squares slope of the cache hit rate, fraction per second; `None` with < 2 points.
    pub cache_hit_slope_per_s: Option<f64>,
    /// Samples in the ring, 1..=60.
    pub samples: usize,
}

impl History {
    /// Append a sample, evicting the oldest when the ring is full.
    pub fn push(&mut self, s: Sample) {
        if self.ring.len() == RING_CAPACITY {
            self.ring.pop_front();
        }
        self.ring.push_back(s);
    }

    /// Number of samples held.
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    /// True when no sample has been pushed.
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// Trend and volatility over the ring.
    pub fn stats(&self) -> HistoryStats {
        let t0 = self.ring.front().map_or(0, |s| s.receive_ms);
        let secs = |s: &Sample| s.receive_ms.saturating_sub(t0) as f64 / 1000.0;
        let p99: Vec<(f64, f64)> = self.ring.iter().map(|s| (secs(s), s.rtt_ms_p99)).collect();
        let cache: Vec<(f64, f64)> = self
            .ring
            .iter()
            .filter_map(|s| s.cache_hit_rate.map(|c| (secs(s), c)))
            .collect();
        let n = self.ring.len() as f64;
        // Error rates are fractions in 0..=1: these sums cannot overflow.
        let err_stddev = if self.ring.is_empty() {
            0.0
        } else {
            let mean = self.ring.iter().map(|s| s.error_rate).sum::<f64>() / n;
            (self
                .ring
                .iter()
                .map(|s| (s.error_rate - mean).powi(2))
                .sum::<f64>()
                / n)
                .sqrt()
        };
        HistoryStats {
            p99_slope_ms_per_s: slope(&p99).unwrap_or(0.0),
            error_rate_stddev: err_stddev,
            cache_hit_slope_per_s: slope(&cache),
            samples: self.ring.len(),
        }
    }
}

/// Ordinary least-squares slope of `y` on `x`; `None` with fewer than two
/// points or when every `x` is equal.
pub fn slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    // Extreme (accepted) values can overflow the sums: no trend rather than NaN.
    Some(sxy / sxx).filter(|s| s.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(ms: u64, p99: f64, err: f64) -> Sample {
        Sample {
            receive_ms: ms,
            rtt_ms_p99: p99,
            error_rate: err,
            cache_hit_rate: None,
        }
    }

    #[test]
    fn ring_keeps_last_sixty() {
        let mut h = History::default();
        for i in 0..100u64 {
            h.push(sample(i * 1000, i as f64, 0.0));
        }
        assert_eq!(h.len(), RING_CAPACITY);
        assert_eq!(h.ring.front().map(|s| s.rtt_ms_p99), Some(40.0));
    }

    #[test]
    fn p99_slope_is_ms_per_second() {
        let mut h = History::default();
        // p99 rises 2 ms per report, one report every 500 ms: 4 ms/s.
        for i in 0..10u64 {
            h.push(sample(i * 500, 10.0 + 2.0 * i as f64, 0.0));
        }
        let s = h.stats();
        assert!((s.p99_slope_ms_per_s - 4.0).abs() < 1e-9);
        assert_eq!(s.cache_hit_slope_per_s, None);
    }

    #[test]
    fn error_volatility_is_population_stddev() {
        let mut h = History::default();
        for (i, e) in [0.0, 0.2, 0.0, 0.2].into_iter().enumerate() {
            h.push(sample(i as u64, 1.0, e));
        }
        assert!((h.stats().error_rate_stddev - 0.1).abs() < 1e-12);
    }

    #[test]
    fn slope_needs_two_distinct_x() {
        assert_eq!(slope(&[(1.0, 2.0)]), None);
        assert_eq!(slope(&[(1.0, 2.0), (1.0, 3.0)]), None);
        assert_eq!(slope(&[(0.0, 0.0), (2.0, 1.0)]), Some(0.5));
        assert_eq!(slope(&[(0.0, 1e308), (1.0, 1.7e308), (2.0, 1e308)]), None);
    }
}

//! Outlier ejection from outcomes, with Envoy's semantics and defaults.
//!
//! # Source
//!
//! Envoy outlier detection
//! (<https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/outlier>,
//! `config.cluster.v3.OutlierDetection`):
//!
//! * **Consecutive failures.** `consecutive_5xx` (default 5) failures in a
//!   row eject the worker. A refused connection or a timeout is a failure
//!   at once (Envoy maps local-origin errors to 5xx the same way).
//! * **Success rate.** Every `interval` (10 s), among workers with at least
//!   `success_rate_request_volume` (100) outcomes in the interval, and only
//!   when there are at least `success_rate_minimum_hosts` (5) of them, a
//!   worker whose success rate is below `mean − success_rate_stdev_factor ×
//!   stdev` (factor 1.9) is ejected.
//! * **Ejection time** is `base_ejection_time` (30 s) × the number of times
//!   the worker has been ejected, capped at `max_ejection_time` (300 s); the
//!   multiplier drops by one for every interval the worker stays in.
//! * **`max_ejection_percent`** (10 %) of the pool may be ejected at once,
//!   but at least one worker regardless of the value.
//!
//! The pool-wide checks (success rate, ejection percent) need every worker
//! and live in the engine; this file is one worker's detector.

use serde::{Deserialize, Serialize};

/// Default [`OutlierConfig::consecutive_failures`] (Envoy `consecutive_5xx`).
pub const DEFAULT_CONSECUTIVE_FAILURES: u32 = 5;
/// Default [`OutlierConfig::interval_ms`] (Envoy `interval`), ms.
pub const DEFAULT_OUTLIER_INTERVAL_MS: u64 = 10_000;
/// Default [`OutlierConfig::base_ejection_ms`] (Envoy `base_ejection_time`), ms.
pub const DEFAULT_BASE_EJECTION_MS: u64 = 30_000;
/// Default [`OutlierConfig::max_ejection_ms`] (Envoy `max_ejection_time`), ms.
pub const DEFAULT_MAX_EJECTION_MS: u64 = 300_000;
/// Default [`OutlierConfig::max_ejection_percent`] (Envoy), percent.
pub const DEFAULT_MAX_EJECTION_PERCENT: f64 = 10.0;
/// Default [`OutlierConfig::success_rate_minimum_hosts`] (Envoy).
pub const DEFAULT_SUCCESS_RATE_MINIMUM_HOSTS: usize = 5;
/// Default [`OutlierConfig::success_rate_request_volume`] (Envoy).
pub const DEFAULT_SUCCESS_RATE_REQUEST_VOLUME: u64 = 100;
/// Default [`OutlierConfig::success_rate_stdev_factor`] (Envoy's 1900 / 1000).
pub const DEFAULT_SUCCESS_RATE_STDEV_FACTOR: f64 = 1.9;

/// `[outlier]`: ejection from outcomes. Times in ms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutlierConfig {
    /// Failures in a row that eject a worker; 0 turns this rule off.
    /// Default [`DEFAULT_CONSECUTIVE_FAILURES`] = 5.
    pub consecutive_failures: u32,
    /// Success-rate analysis period, ms, `>= 1`. Default 10 000.
    pub interval_ms: u64,
    /// First ejection length, ms, `>= 1`; the n-th lasts n × this. Default 30 000.
    pub base_ejection_ms: u64,
    /// Cap on an ejection's length, ms, `>= base_ejection_ms`. Default 300 000.
    pub max_ejection_ms: u64,
    /// Largest share of the pool ejected at once, percent 0..=100 (at least
    /// one worker may always be ejected). Default 10.
    pub max_ejection_percent: f64,
    /// Workers with enough volume needed for the success-rate rule; 0 turns
    /// the rule off. Default 5.
    pub success_rate_minimum_hosts: usize,
    /// Outcomes in an interval for a worker to count in the success-rate
    /// rule, `>= 1`. Default 100.
    pub success_rate_request_volume: u64,
    /// Standard deviations below the mean success rate that eject, `> 0`.
    /// Default 1.9.
    pub success_rate_stdev_factor: f64,
}

impl Default for OutlierConfig {
    fn default() -> Self {
        Self {
            consecutive_failures: DEFAULT_CONSECUTIVE_FAILURES,
            interval_ms: DEFAULT_OUTLIER_INTERVAL_MS,
            base_ejection_ms: DEFAULT_BASE_EJECTION_MS,
            max_ejection_ms: DEFAULT_MAX_EJECTION_MS,
            max_ejection_percent: DEFAULT_MAX_EJECTION_PERCENT,
            success_rate_minimum_hosts: DEFAULT_SUCCESS_RATE_MINIMUM_HOSTS,
            success_rate_request_volume: DEFAULT_SUCCESS_RATE_REQUEST_VOLUME,
            success_rate_stdev_factor: DEFAULT_SUCCESS_RATE_STDEV_FACTOR,
        }
    }
}

impl OutlierConfig {
    /// Checks the fields; `Err` names the bad key.
    pub fn validate(&self) -> Result<(), String> {
        if self.interval_ms == 0 {
            return Err("interval_ms must be >= 1, got 0".into());
        }
        if self.base_ejection_ms == 0 {
            return Err("base_ejection_ms must be >= 1, got 0".into());
        }
        if self.max_ejection_ms < self.base_ejection_ms {
            return Err(format!(
                "max_ejection_ms ({}) must be >= base_ejection_ms ({})",
                self.max_ejection_ms, self.base_ejection_ms
            ));
        }
        if !(0.0..=100.0).contains(&self.max_ejection_percent) {
            return Err(format!(
                "max_ejection_percent must be within 0..=100, got {}",
                self.max_ejection_percent
            ));
        }
        if self.success_rate_request_volume == 0 {
            return Err("success_rate_request_volume must be >= 1, got 0".into());
        }
        if !(self.success_rate_stdev_factor.is_finite() && self.success_rate_stdev_factor > 0.0) {
            return Err(format!(
                "success_rate_stdev_factor must be finite and > 0, got {}",
                self.success_rate_stdev_factor
            ));
        }
        Ok(())
    }

    /// How many of `pool` workers may be ejected at once: the percentage,
    /// rounded down, but at least one.
    pub fn max_ejected(&self, pool: usize) -> usize {
        ((pool as f64 * self.max_ejection_percent / 100.0).floor() as usize).max(1)
    }
}

/// Why a worker was ejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EjectionCause {
    /// `consecutive_failures` failures in a row.
    ConsecutiveFailures,
    /// Success rate far below the pool's.
    SuccessRate,
}

impl EjectionCause {
    /// Stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ConsecutiveFailures => "consecutive_failures",
            Self::SuccessRate => "success_rate",
        }
    }
}

/// One worker's detector. `Copy`; kept inside the worker's evidence lock.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct OutlierDetector {
    /// Failures in a row.
    pub consecutive_failures: u32,
    /// Outcomes and successes in the current interval.
    pub window_total: u64,
    /// Successes in the current interval.
    pub window_successes: u64,
    /// The ejection multiplier: times ejected, minus healthy intervals.
    pub multiplier: u32,
    /// Ejected until this monotonic time, ms (0: never ejected).
    pub ejected_until_ms: u64,
    /// The cause of the latest ejection.
    pub cause: Option<EjectionCause>,
}

impl OutlierDetector {
    /// Whether the worker is ejected at `now_ms`.
    pub fn is_ejected(&self, now_ms: u64) -> bool {
        now_ms < self.ejected_until_ms
    }

    /// Counts one outcome; returns true when the consecutive-failure rule
    /// now asks for an ejection (the engine decides whether the pool allows it).
    pub fn record(&mut self, success: bool, now_ms: u64, cfg: &OutlierConfig) -> bool {
        self.window_total = self.window_total.saturating_add(1);
        if success {
            self.window_successes = self.window_successes.saturating_add(1);
            self.consecutive_failures = 0;
            return false;
        }
        self.consecutive_failures = self.consecutive_failures.saturating_add(1);
        cfg.consecutive_failures > 0
            && self.consecutive_failures >= cfg.consecutive_failures
            && !self.is_ejected(now_ms)
    }

    /// Ejects at `now_ms` for `base × multiplier` (after incrementing it),
    /// capped; returns the ejection length, ms.
    pub fn eject(&mut self, now_ms: u64, cause: EjectionCause, cfg: &OutlierConfig) -> u64 {
        self.multiplier = self.multiplier.saturating_add(1);
        let len = cfg
            .base_ejection_ms
            .saturating_mul(u64::from(self.multiplier))
            .min(cfg.max_ejection_ms);
        self.ejected_until_ms = now_ms.saturating_add(len);
        self.consecutive_failures = 0;
        self.cause = Some(cause);
        len
    }

    /// The success rate of the interval, when it has `volume` outcomes.
    pub fn window_success_rate(&self, volume: u64) -> Option<f64> {
        (self.window_total >= volume.max(1))
            .then(|| self.window_successes as f64 / self.window_total as f64)
    }

    /// Ends an interval: counters restart; a worker that is in and saw no
    /// failure streak lowers its multiplier by one (Envoy).
    pub fn end_interval(&mut self, now_ms: u64) {
        if !self.is_ejected(now_ms) && self.consecutive_failures == 0 {
            self.multiplier = self.multiplier.saturating_sub(1);
        }
        self.window_total = 0;
        self.window_successes = 0;
    }

    /// When the last ejection ended, if the worker was ever ejected and is
    /// back at `now_ms` (the start of its slow start).
    pub fn returned_at_ms(&self, now_ms: u64) -> Option<u64> {
        (self.ejected_until_ms > 0 && !self.is_ejected(now_ms)).then_some(self.ejected_until_ms)
    }
}

/// Success-rate outliers among `(index, success_rate)`: Envoy's rule, given
/// the workers that had enough volume. Empty when fewer than `minimum_hosts`.
pub fn success_rate_outliers(rates: &[(usize, f64)], cfg: &OutlierConfig) -> Vec<usize> {
    if cfg.success_rate_minimum_hosts == 0 || rates.len() < cfg.success_rate_minimum_hosts {
        return Vec::new();
    }
    let n = rates.len() as f64;
    let mean = rates.iter().map(|r| r.1).sum::<f64>() / n;
    let var = rates.iter().map(|r| (r.1 - mean).powi(2)).sum::<f64>() / n;
    let threshold = mean - cfg.success_rate_stdev_factor * var.sqrt();
    rates
        .iter()
        .filter(|r| r.1 < threshold)
        .map(|r| r.0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_failures_in_a_row_ask_for_ejection_a_success_breaks_the_run() {
        let cfg = OutlierConfig::default();
        let mut d = OutlierDetector::default();
        for _ in 0..4 {
            assert!(!d.record(false, 0, &cfg));
        }
        assert!(!d.record(true, 0, &cfg));
        for _ in 0..4 {
            assert!(!d.record(false, 0, &cfg));
        }
        assert!(d.record(false, 0, &cfg));
    }

    #[test]
    fn ejection_time_grows_with_the_multiplier_and_is_capped() {
        let cfg = OutlierConfig::default();
        let mut d = OutlierDetector::default();
        assert_eq!(d.eject(0, EjectionCause::ConsecutiveFailures, &cfg), 30_000);
        assert!(d.is_ejected(29_999) && !d.is_ejected(30_000));
        assert_eq!(d.returned_at_ms(30_000), Some(30_000));
        assert_eq!(
            d.eject(40_000, EjectionCause::ConsecutiveFailures, &cfg),
            60_000
        );
        for _ in 0..20 {
            d.eject(0, EjectionCause::ConsecutiveFailures, &cfg);
        }
        assert_eq!(d.ejected_until_ms, 300_000);
        // Healthy intervals lower the multiplier again.
        let mut d = OutlierDetector::default();
        d.eject(0, EjectionCause::ConsecutiveFailures, &cfg);
        d.end_interval(40_000);
        assert_eq!(d.multiplier, 0);
    }

    #[test]
    fn success_rate_rule_needs_hosts_and_ejects_far_below_mean() {
        let cfg = OutlierConfig::default();
        let four = [(0, 0.2), (1, 1.0), (2, 1.0), (3, 1.0)];
        assert!(success_rate_outliers(&four, &cfg).is_empty());
        let rates: Vec<(usize, f64)> = (0..10)
            .map(|i| (i, if i == 3 { 0.15 } else { 0.99 }))
            .collect();
        assert_eq!(success_rate_outliers(&rates, &cfg), vec![3]);
    }

    #[test]
    fn at_least_one_worker_may_be_ejected() {
        let cfg = OutlierConfig::default();
        assert_eq!(cfg.max_ejected(3), 1);
        assert_eq!(cfg.max_ejected(12), 1);
        assert_eq!(cfg.max_ejected(40), 4);
    }
}

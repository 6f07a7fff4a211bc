//! Telemetry freshness: how much to trust a worker's last snapshot given its
//! age, and how to blend stale metrics toward a pessimistic prior.
//!
//! # Why linear decay
//!
//! [`freshness_factor`] is 1 while the snapshot is younger than
//! [`FreshnessConfig::fresh_ms`] (normal reporting jitter must not cost
//! anything), then falls *linearly* to 0 at
//! [`FreshnessConfig::dead_after_ms`]. Linear was chosen over exponential
//! because it reaches exactly 0 at a configured, documented age (an
//! exponential never does, so a dead worker would keep a residual share of
//! trust), it is monotonic and trivially explainable in a debug view ("70 %
//! trusted"), and both ends are operator-set knobs rather than a derived time
//! constant. Envoy's client-side weighted round robin treats stale ORCA load
//! reports with a step (`weight_expiration_period`); this is the same idea
//! with the step smoothed into a ramp.
//!
//! # Never better when stale
//!
//! [`pull_toward_prior`] moves a metric toward a caller-supplied prior as it
//! ages, but the target is never *better* than the metric itself, so a worker
//! that stopped reporting can never look better than it did when fresh (that
//! would reward going silent).

use serde::Serialize;

use crate::scoring::ScoringConfig;
use crate::state::Smoothed;

/// Default [`FreshnessConfig::fresh_ms`]: age up to which a snapshot is fully
/// trusted, ms.
pub const DEFAULT_FRESH_MS: u64 = 3_000;
/// Default [`FreshnessConfig::dead_after_ms`]: age at and beyond which a
/// snapshot is not trusted at all, ms.
pub const DEFAULT_DEAD_AFTER_MS: u64 = 10_000;

/// Freshness tunables (ms of snapshot age).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FreshnessConfig {
    /// Age (ms) up to which a snapshot is fully trusted (default
    /// [`DEFAULT_FRESH_MS`] = 3 000).
    pub fresh_ms: u64,
    /// Age (ms) at and beyond which a snapshot has no weight (default
    /// [`DEFAULT_DEAD_AFTER_MS`] = 10 000). Must be `> fresh_ms`.
    pub dead_after_ms: u64,
}

impl Default for FreshnessConfig {
    fn default() -> Self {
        FreshnessConfig {
            fresh_ms: DEFAULT_FRESH_MS,
            dead_after_ms: DEFAULT_DEAD_AFTER_MS,
        }
    }
}

impl FreshnessConfig {
    /// Checks the fields; returns `Err` with a sentence naming the bad key.
    pub fn validate(&self) -> Result<(), String> {
        if self.dead_after_ms <= self.fresh_ms {
            return Err(format!(
                "dead_after_ms ({}) must be > fresh_ms ({})",
                self.dead_after_ms, self.fresh_ms
            ));
        }
        Ok(())
    }
}

/// Returns the trust in a snapshot of age `age_ms`, a fraction 0..=1:
/// exactly 1.0 for `age_ms <= fresh_ms`, `1 − (age_ms − fresh_ms) /
/// (dead_after_ms − fresh_ms)` in between, exactly 0.0 for
/// `age_ms >= dead_after_ms`. Non-increasing in `age_ms`.
///
/// Callers compute `age_ms` as `now_ms.saturating_sub(snapshot_ms)`, so a
/// clock going backwards reads as age 0.
///
/// Precondition: `cfg.validate()` is `Ok` (checked by `debug_assert!`); with
/// `dead_after_ms <= fresh_ms` release builds degrade to a step at `fresh_ms`.
pub fn freshness_factor(age_ms: u64, cfg: &FreshnessConfig) -> f64 {
    debug_assert!(cfg.validate().is_ok(), "invalid FreshnessConfig: {cfg:?}");
    if age_ms <= cfg.fresh_ms {
        return 1.0;
    }
    if age_ms >= cfg.dead_after_ms {
        return 0.0;
    }
    // Here fresh_ms < age_ms < dead_after_ms, so the span is >= 2.
    let span = (cfg.dead_after_ms - cfg.fresh_ms) as f64;
    let over = (age_ms - cfg.fresh_ms) as f64;
    (1.0 - over / span).clamp(0.0, 1.0)
}

/// Returns `value` pulled toward a pessimistic target as trust fades:
/// `freshness × value + (1 − freshness) × target`, where `target` is `prior`
/// unless `prior` is better than `value`, in which case it is `value` itself.
/// The result is then bounded so it is never better than `value`
/// (`max(value, blended)` when `higher_is_worse`, e.g. queue depth or
/// latency; `min(value, blended)` otherwise, e.g. cache hit rate).
///
/// * `value`: the metric from the worker's last snapshot.
/// * `prior`: supplied by the caller — the pool median of the same metric, or
///   the configured threshold for it when no pool median is available.
/// * `freshness`: [`freshness_factor`] of the snapshot, fraction 0..=1.
///
/// Exact endpoints: `freshness >= 1` returns `value`; `freshness <= 0`
/// returns `target`. Moving `freshness` toward 0 moves the result
/// monotonically toward `target`.
///
/// Odd inputs (never panics): `NaN` freshness is treated as 0 (no trust);
/// a `NaN` prior means "no prior", returning `value`; a `NaN` value returns
/// the prior (so the result is `NaN` only if both are `NaN`).
pub fn pull_toward_prior(value: f64, prior: f64, freshness: f64, higher_is_worse: bool) -> f64 {
    if value.is_nan() {
        return prior;
    }
    if prior.is_nan() {
        return value;
    }
    let freshness = if freshness.is_nan() {
        0.0
    } else {
        freshness.clamp(0.0, 1.0)
    };
    let worse = |a: f64, b: f64| if higher_is_worse { a.max(b) } else { a.min(b) };
    let target = worse(prior, value);
    if freshness >= 1.0 {
        return value;
    }
    if freshness <= 0.0 {
        return target;
    }
    // Same as `freshness × value + (1 − freshness) × target`, written so that
    // every rounding step is monotone in `freshness`.
    let blended = target + freshness * (value - target);
    if blended.is_nan() {
        // Only reachable with infinities of opposite sign.
        return target;
    }
    worse(value, blended)
}

// The priors a stale worker's signals are pulled toward: the worse of the
// configured threshold (the worst value that costs no points) and the median
// of the request's fresh, live candidates, so "unknown is not zero" and a
// stale idle worker drifts toward what its busy peers report.

/// Per-signal priors for one request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Priors {
    cpu: f64,
    queue: f64,
    p99: f64,
    avg: f64,
    error: f64,
    cache_hit: f64,
}

/// Median of `v`; `None` when empty.
pub fn median(mut v: Vec<f64>) -> Option<f64> {
    median_in(&mut v)
}

/// [`median`] of `v`, sorting it in place (a caller reusing its buffer
/// allocates nothing).
pub fn median_in(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

impl Priors {
    /// Priors from the fresh candidates' smoothed signals and the thresholds.
    pub fn new<'a>(fresh: impl Iterator<Item = &'a Smoothed> + Clone, c: &ScoringConfig) -> Self {
        let med = |f: fn(&Smoothed) -> Option<f64>| median(fresh.clone().filter_map(f).collect());
        Self {
            cpu: med(|s| Some(s.cpu_usage)).map_or(c.cpu_high, |m| m.max(c.cpu_high)),
            queue: med(|s| Some(s.queue_depth))
                .map_or(c.queue_high_watermark, |m| m.max(c.queue_high_watermark)),
            p99: med(|s| Some(s.rtt_ms_p99))
                .map_or(c.rtt_p99_baseline_ms, |m| m.max(c.rtt_p99_baseline_ms)),
            avg: med(|s| Some(s.rtt_ms_avg))
                .map_or(c.rtt_p99_baseline_ms, |m| m.max(c.rtt_p99_baseline_ms)),
            error: med(|s| Some(s.error_rate)).unwrap_or(0.0),
            cache_hit: med(|s| s.cache_hit_rate)
                .map_or(c.cache_hit_low, |m| m.min(c.cache_hit_low)),
        }
    }

    /// `s` pulled toward the priors with freshness `f` in [0, 1].
    pub fn pull(&self, s: &Smoothed, f: f64) -> Smoothed {
        Smoothed {
            cpu_usage: pull_toward_prior(s.cpu_usage, self.cpu, f, true),
            queue_depth: pull_toward_prior(s.queue_depth, self.queue, f, true),
            rtt_ms_avg: pull_toward_prior(s.rtt_ms_avg, self.avg, f, true),
            rtt_ms_p99: pull_toward_prior(s.rtt_ms_p99, self.p99, f, true),
            error_rate: pull_toward_prior(s.error_rate, self.error, f, true),
            cache_hit_rate: s
                .cache_hit_rate
                .map(|h| pull_toward_prior(h, self.cache_hit, f, false)),
            ..*s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freshness_exact_endpoints() {
        let c = FreshnessConfig::default();
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(freshness_factor(0, &c), 1.0);
        assert_eq!(freshness_factor(3_000, &c), 1.0);
        assert!(freshness_factor(3_001, &c) < 1.0);
        assert_eq!(freshness_factor(6_500, &c), 0.5);
        assert!(freshness_factor(9_999, &c) > 0.0);
        assert_eq!(freshness_factor(10_000, &c), 0.0);
        assert_eq!(freshness_factor(u64::MAX, &c), 0.0);
    }

    #[test]
    fn freshness_is_monotonic_non_increasing() {
        let c = FreshnessConfig::default();
        let mut prev = f64::INFINITY;
        for age in (0..12_000).step_by(7) {
            let f = freshness_factor(age, &c);
            assert!((0.0..=1.0).contains(&f));
            assert!(f <= prev, "age {age}: {f} > {prev}");
            prev = f;
        }
    }

    #[test]
    fn validate_rejects_dead_not_after_fresh() {
        let c = FreshnessConfig {
            fresh_ms: 5,
            dead_after_ms: 5,
        };
        assert!(c.validate().unwrap_err().contains("dead_after_ms"));
    }

    #[test]
    fn pull_exact_endpoints() {
        // Higher is worse (queue depth): prior worse than value.
        assert_eq!(pull_toward_prior(10.0, 50.0, 1.0, true), 10.0);
        assert_eq!(pull_toward_prior(10.0, 50.0, 0.0, true), 50.0);
        assert_eq!(pull_toward_prior(10.0, 50.0, 0.5, true), 30.0);
        // Prior better than value: stays at value.
        assert_eq!(pull_toward_prior(80.0, 50.0, 0.0, true), 80.0);
        // Lower is worse (hit rate).
        assert_eq!(pull_toward_prior(0.9, 0.5, 0.0, false), 0.5);
        assert_eq!(pull_toward_prior(0.9, 0.5, 1.0, false), 0.9);
        assert_eq!(pull_toward_prior(0.3, 0.5, 0.0, false), 0.3);
    }

    #[test]
    fn stale_pull_is_never_better_than_fresh_and_monotonic() {
        let samples = [-5.0, 0.0, 0.1, 0.5, 1.0, 3.0, 42.0, 1e9];
        for &value in &samples {
            for &prior in &samples {
                for higher_is_worse in [true, false] {
                    let mut prev = value;
                    for i in (0..=100).rev() {
                        let f = f64::from(i) / 100.0;
                        let r = pull_toward_prior(value, prior, f, higher_is_worse);
                        if higher_is_worse {
                            assert!(r >= value && r >= prev, "{value} {prior} {f}: {r}");
                        } else {
                            assert!(r <= value && r <= prev, "{value} {prior} {f}: {r}");
                        }
                        prev = r;
                    }
                }
            }
        }
    }

    #[test]
    fn pull_handles_nan_inputs() {
        assert_eq!(pull_toward_prior(10.0, 50.0, f64::NAN, true), 50.0);
        assert_eq!(pull_toward_prior(10.0, f64::NAN, 0.0, true), 10.0);
        assert_eq!(pull_toward_prior(f64::NAN, 50.0, 1.0, true), 50.0);
        assert!(!pull_toward_prior(f64::INFINITY, f64::NEG_INFINITY, 0.5, false).is_nan());
    }

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }

    #[test]
    fn stale_idle_worker_drifts_to_busy_pool_never_better() {
        let c = ScoringConfig::default();
        let busy = Smoothed {
            cpu_usage: 0.9,
            queue_depth: 30.0,
            rtt_ms_avg: 5.0,
            rtt_ms_p99: 40.0,
            error_rate: 0.01,
            ..Smoothed::default()
        };
        let idle = Smoothed {
            cpu_usage: 0.02,
            ..Smoothed::default()
        };
        let p = Priors::new([busy, busy].iter(), &c);
        let half = p.pull(&idle, 0.5);
        assert!((half.cpu_usage - 0.46).abs() < 1e-12);
        assert_eq!(half.queue_depth, 15.0);
        let gone = p.pull(&idle, 0.0);
        assert_eq!(gone.cpu_usage, 0.9);
        assert_eq!(p.pull(&idle, 1.0), idle);
        // With no fresh peers the thresholds are the prior.
        let alone = Priors::new(std::iter::empty(), &c).pull(&idle, 0.0);
        assert_eq!(
            (alone.cpu_usage, alone.queue_depth, alone.rtt_ms_p99),
            (0.70, 20.0, 10.0)
        );
    }
}

//! Stale telemetry (issue #3, "Freshness"): a snapshot's influence fades
//! with its age on the server clock, and a stale worker's signals are pulled
//! toward a pessimistic prior so that it never looks better than a fresh
//! worker with the same metrics.
//!
//! The prior of each signal is the worse of the configured threshold (the
//! worst value that costs no points) and the median of the request's fresh,
//! live candidates — "unknown is not zero", and a stale idle worker drifts
//! toward what its busy peers report rather than looking idle.

use crate::config::ScoringConfig;
use scorer_core::dynamics::pull_toward_prior;
use scorer_core::state::Smoothed;

/// Per-signal priors for one request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Priors {
    cpu: f64,
    queue: f64,
    p99: f64,
    avg: f64,
    error: f64,
    cache_hit: f64,
}

/// Median of `v`; `None` when empty.
pub(super) fn median(mut v: Vec<f64>) -> Option<f64> {
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
    pub(super) fn new<'a>(
        fresh: impl Iterator<Item = &'a Smoothed> + Clone,
        c: &ScoringConfig,
    ) -> Self {
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
    pub(super) fn pull(&self, s: &Smoothed, f: f64) -> Smoothed {
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

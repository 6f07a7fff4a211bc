//! Summaries of a run: latency percentiles, error and timeout rates,
//! retries, load balance, oscillation, drain and recovery.
//!
//! Definitions (units in the field names):
//! - percentiles: nearest rank over every finished request's client-observed
//!   latency (first attempt to final answer, retries included; a request
//!   that failed after all retries counts with the time it took to fail);
//! - `error_rate`: requests failed after all retries / requests;
//! - `timeout_rate`: attempts that hit the client timeout / attempts;
//! - `balance_cv`: coefficient of variation (population std / mean) of picks
//!   per worker over the run (0 = perfectly even; heterogeneous clusters
//!   *should* be uneven);
//! - `oscillations`: times a worker's share of a window's picks differs by
//!   more than 2× from its share in the previous window, counting only pairs
//!   where the larger share is at least half the fair share `1/N` and both
//!   windows hold at least `5N` picks (so sampling noise on tiny shares does
//!   not count);
//! - `time_to_drain_ms`: for the scenario's first fault with a window, the
//!   time from its start to the start of the first window after which the
//!   faulty worker's share stays below 10% of the fair share, and below 1%
//!   of the picks, until the fault ends (`null` = never drained);
//! - `recovery_ms`: from the fault's end to the first window in which the
//!   worker's share is back to half its fair share (`null` = not within the
//!   run); `recovery_peak_share`: its largest share in the 10 s after the fault
//!   ends, as a multiple of the fair share (> 2 = flooded on return).

use serde::Serialize;

use crate::sim::RunRecord;

/// Value at quantile `q` (0..=1) of ascending `sorted` by nearest rank; 0 when empty.
pub fn percentile_sorted(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// One policy's row in results.json. Numbers are `null` for a skipped policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyResult {
    /// Policy name (see [`crate::arms::POLICIES`]).
    pub name: String,
    /// `ok` or `skipped`.
    pub status: String,
    /// Why it was skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip_reason: Option<String>,
    /// Requests issued.
    pub requests: Option<u64>,
    /// Median latency, ms.
    pub p50_ms: Option<f64>,
    /// 95th percentile latency, ms.
    pub p95_ms: Option<f64>,
    /// 99th percentile latency, ms.
    pub p99_ms: Option<f64>,
    /// 99.9th percentile latency, ms.
    pub p999_ms: Option<f64>,
    /// 99th percentile latency of the requests that finished in the last
    /// third of the run, ms (simulator only): what an arm that learns
    /// during the run reaches once it has learned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_last_third_ms: Option<f64>,
    /// Mean latency, ms.
    pub mean_ms: Option<f64>,
    /// Requests failed after all retries, fraction.
    pub error_rate: Option<f64>,
    /// Attempts timed out, fraction.
    pub timeout_rate: Option<f64>,
    /// Retries sent.
    pub retries: Option<u64>,
    /// Coefficient of variation of picks per worker.
    pub balance_cv: Option<f64>,
    /// Share swings > 2× between consecutive windows.
    pub oscillations: Option<u64>,
    /// Time to stop sending to the impaired worker, ms (`null`: never, or no fault).
    pub time_to_drain_ms: Option<f64>,
    /// Time to give the recovered worker half its fair share again, ms.
    pub recovery_ms: Option<f64>,
    /// Largest share of the recovered worker in the 10 s after the fault, × fair share.
    pub recovery_peak_share: Option<f64>,
    /// Picks where the policy fell back to a uniform choice.
    pub fallbacks: Option<u64>,
    /// Picks per worker over the run.
    pub picks_per_worker: Vec<u64>,
    /// The model arms: model version, selection policy, budget, how many
    /// decisions used the model, and (for `model-retrained`) its training.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<crate::arms::model::ModelArmInfo>,
    /// `service-learning`: what the retraining loop did during the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub learning: Option<crate::arms::learning::LearningInfo>,
    /// What a pick cost the router, p50, µs: the score call for a service
    /// arm (simulated from the calibration, or measured over HTTP), the
    /// in-process choice for a baseline (0 in the simulator).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pick_us_p50: Option<f64>,
    /// The same, p99, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pick_us_p99: Option<f64>,
    /// Over several seeds: the p99 of each and which seed's run this row
    /// is ([`crate::seeds`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seeds: Option<crate::seeds::SeedSpread>,
    /// Testbed: score calls that failed or hit the router's scorer timeout;
    /// the router then picked by itself (counted in `fallbacks`) and served
    /// the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scorer_errors: Option<u64>,
    /// Testbed: arrivals the load generator did not send (too many
    /// requests outstanding).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropped: Option<u64>,
    /// Testbed: the cores the redis-servers, the service, the agent and the
    /// load generator shared (`available_parallelism`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cores: Option<usize>,
    /// A service arm's self-check through the run (simulator).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub self_check: Option<crate::self_check_series::SelfCheckSeries>,
    /// With several routers: herding, the mean number of distinct routers
    /// that picked the same worker within one 5 ms view interval, over the
    /// (interval, worker) pairs with a pick (simulator).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub herding: Option<f64>,
    /// With caches: hit rates and the origin's traffic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<crate::cache_summary::CacheSummary>,
    /// Testbed `cache`: hit rates from the workers' `INFO` and the
    /// router's count, origin reads, evictions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis_cache: Option<crate::testbed::cache::CacheResult>,
}

impl PolicyResult {
    /// A skipped policy.
    pub fn skipped(name: &str, reason: &str) -> Self {
        Self {
            name: name.to_owned(),
            status: "skipped".to_owned(),
            skip_reason: Some(reason.to_owned()),
            requests: None,
            p50_ms: None,
            p95_ms: None,
            p99_ms: None,
            p999_ms: None,
            p99_last_third_ms: None,
            mean_ms: None,
            error_rate: None,
            timeout_rate: None,
            retries: None,
            balance_cv: None,
            oscillations: None,
            time_to_drain_ms: None,
            recovery_ms: None,
            recovery_peak_share: None,
            fallbacks: None,
            picks_per_worker: Vec::new(),
            model: None,
            learning: None,
            seeds: None,
            pick_us_p50: None,
            pick_us_p99: None,
            scorer_errors: None,
            dropped: None,
            cores: None,
            self_check: None,
            herding: None,
            cache: None,
            redis_cache: None,
        }
    }

    /// A test's arm that ran, every figure unset but its p99, ms.
    #[cfg(test)]
    pub(crate) fn test_ran(name: &str, p99_ms: f64) -> Self {
        let mut p = Self::skipped(name, "");
        p.status = "ok".to_owned();
        p.skip_reason = None;
        p.p99_ms = Some(p99_ms);
        p
    }

    /// Summarise `rec`; `fault` is the impaired worker and its window, ms.
    pub fn from_record(name: &str, rec: &RunRecord, fault: Option<(usize, f64, f64)>) -> Self {
        let mut lat = rec.latencies_ms.clone();
        lat.sort_by(f64::total_cmp);
        let requests = lat.len() as u64;
        let p = |q| Some(round3(percentile_sorted(&lat, q)));
        let n = rec.window_picks.first().map_or(0, Vec::len);
        let mut per_worker = vec![0u64; n];
        for w in &rec.window_picks {
            for (i, &c) in w.iter().enumerate() {
                per_worker[i] += u64::from(c);
            }
        }
        let (drain, recovery, peak) = match fault {
            Some((worker, from, to)) => drain_and_recovery(rec, worker, from, to),
            None => (None, None, None),
        };
        let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        // The pick's cost, µs: the simulated score calls of a remote arm;
        // nothing for an arm that decides in the router.
        let mut pick = rec.decision_ms.clone();
        pick.sort_by(f64::total_cmp);
        let pick_us = |q| Some(round3(percentile_sorted(&pick, q) * 1_000.0));
        let (pick_us_p50, pick_us_p99) = if pick.is_empty() {
            (Some(0.0), Some(0.0))
        } else {
            (pick_us(0.5), pick_us(0.99))
        };
        Self {
            name: name.to_owned(),
            status: "ok".to_owned(),
            skip_reason: None,
            requests: Some(requests),
            p50_ms: p(0.50),
            p95_ms: p(0.95),
            p99_ms: p(0.99),
            p999_ms: p(0.999),
            p99_last_third_ms: last_third_p99(rec).map(round3),
            mean_ms: Some(round3(lat.iter().sum::<f64>() / lat.len().max(1) as f64)),
            error_rate: Some(round6(ratio(rec.failed, requests))),
            timeout_rate: Some(round6(ratio(rec.timeouts, rec.attempts))),
            retries: Some(rec.retries),
            balance_cv: Some(round3(cv(&per_worker))),
            oscillations: Some(oscillations(&rec.window_picks)),
            time_to_drain_ms: drain,
            recovery_ms: recovery,
            recovery_peak_share: peak.map(round3),
            fallbacks: Some(rec.fallbacks),
            picks_per_worker: per_worker,
            model: None,
            learning: None,
            seeds: None,
            pick_us_p50,
            pick_us_p99,
            scorer_errors: (rec.scorer_errors > 0).then_some(rec.scorer_errors),
            dropped: None,
            cores: None,
            self_check: None,
            herding: rec.herding.map(round3),
            cache: rec.cache.as_ref().map(|c| {
                let mut s = crate::cache_summary::CacheSummary::from_record(c);
                if let Some((worker, _, to)) = fault {
                    s.return_hit_rate_back_ms =
                        crate::cache_summary::CacheSummary::hit_rate_back_ms(
                            c,
                            worker,
                            to,
                            rec.window_ms,
                        );
                }
                s
            }),
            redis_cache: None,
        }
    }
}

/// The p99 of the requests of `rec` that finished in the last third of the
/// run, ms; `None` without finish times.
fn last_third_p99(rec: &RunRecord) -> Option<f64> {
    if rec.duration_ms <= 0.0 || rec.finished_at_ms.len() != rec.latencies_ms.len() {
        return None;
    }
    let from = rec.duration_ms * 2.0 / 3.0;
    let mut lat: Vec<f64> = rec
        .latencies_ms
        .iter()
        .zip(&rec.finished_at_ms)
        .filter(|(_, t)| **t >= from)
        .map(|(l, _)| *l)
        .collect();
    if lat.is_empty() {
        return None;
    }
    lat.sort_by(f64::total_cmp);
    Some(percentile_sorted(&lat, 0.99))
}

fn round3(x: f64) -> f64 {
    (x * 1e3).round() / 1e3
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// Population coefficient of variation; 0 for an empty or all-zero input.
pub fn cv(counts: &[u64]) -> f64 {
    if counts.is_empty() {
        return 0.0;
    }
    let n = counts.len() as f64;
    let mean = counts.iter().sum::<u64>() as f64 / n;
    if mean == 0.0 {
        return 0.0;
    }
    let var = counts
        .iter()
        .map(|&c| (c as f64 - mean).powi(2))
        .sum::<f64>()
        / n;
    var.sqrt() / mean
}

/// Each window's picks as shares of that window's total.
pub fn shares(window_picks: &[Vec<u32>]) -> Vec<Vec<f64>> {
    window_picks
        .iter()
        .map(|w| {
            let total: u32 = w.iter().sum();
            w.iter()
                .map(|&c| {
                    if total == 0 {
                        0.0
                    } else {
                        f64::from(c) / f64::from(total)
                    }
                })
                .collect()
        })
        .collect()
}

/// Share swings by more than 2× between consecutive windows (see module docs).
pub fn oscillations(window_picks: &[Vec<u32>]) -> u64 {
    let Some(n) = window_picks.first().map(Vec::len) else {
        return 0;
    };
    let fair = 1.0 / n.max(1) as f64;
    let min_total = 5 * n as u32;
    let sh = shares(window_picks);
    let mut count = 0;
    for w in 1..window_picks.len() {
        let (ta, tb): (u32, u32) = (
            window_picks[w - 1].iter().sum(),
            window_picks[w].iter().sum(),
        );
        if ta < min_total || tb < min_total {
            continue;
        }
        for (&a, &b) in sh[w - 1].iter().zip(&sh[w]) {
            let (lo, hi) = if a < b { (a, b) } else { (b, a) };
            if hi >= 0.5 * fair && hi > 2.0 * lo {
                count += 1;
            }
        }
    }
    count
}

/// A worker is drained once its share of the picks stays below this (and
/// below 10% of its fair share): the operator's "below 1% of picks".
pub const DRAINED_BELOW_SHARE: f64 = 0.01;

/// (time_to_drain_ms, recovery_ms, recovery_peak_share) for `worker`
/// impaired in `[from, to)` ms.
pub fn drain_and_recovery(
    rec: &RunRecord,
    worker: usize,
    from: f64,
    to: f64,
) -> (Option<f64>, Option<f64>, Option<f64>) {
    let sh = shares(&rec.window_picks);
    let n = rec.window_picks.first().map_or(1, Vec::len).max(1);
    let fair = 1.0 / n as f64;
    let wms = rec.window_ms;
    let start_w = (from / wms).ceil() as usize;
    let end_w = ((to / wms).floor() as usize).min(sh.len());
    // Latest window in the fault with a share ≥ 10% fair or ≥ 1% of the
    // picks; drained after it.
    let drained_below = (0.1 * fair).min(DRAINED_BELOW_SHARE);
    let mut drain = None;
    if start_w < end_w {
        let last_high = (start_w..end_w)
            .rev()
            .find(|&w| sh[w][worker] >= drained_below);
        drain = match last_high {
            None => Some(0.0),
            Some(w) if w + 1 < end_w => Some(((w + 1) as f64 * wms - from).max(0.0)),
            Some(_) => None,
        };
    }
    let rec_start = (to / wms).ceil() as usize;
    let recovery = (rec_start..sh.len())
        .find(|&w| sh[w][worker] >= 0.5 * fair)
        .map(|w| ((w as f64 + 1.0) * wms - to).max(0.0));
    let peak_end = (rec_start + (10_000.0 / wms).ceil() as usize).min(sh.len());
    let peak = (rec_start < peak_end).then(|| {
        (rec_start..peak_end)
            .map(|w| sh[w][worker] / fair)
            .fold(0.0, f64::max)
    });
    (drain, recovery, peak)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile_sorted(&v, 0.5), 50.0);
        assert_eq!(percentile_sorted(&v, 0.99), 99.0);
        assert_eq!(percentile_sorted(&v, 0.999), 100.0);
        assert_eq!(percentile_sorted(&[], 0.5), 0.0);
    }

    #[test]
    fn cv_of_even_and_uneven() {
        assert_eq!(cv(&[5, 5, 5]), 0.0);
        // mean 2, deviations ±2 → std 2 → cv 1.
        assert!((cv(&[0, 4]) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn oscillation_counts_big_swings_only() {
        // Two workers: 50/50 → 90/10 → 50/50: worker 1 swings twice (10 vs 50),
        // worker 0 never (90 vs 50 is < 2×).
        let w = vec![vec![50, 50], vec![90, 10], vec![50, 50]];
        assert_eq!(oscillations(&w), 2);
        // Tiny windows are ignored.
        assert_eq!(oscillations(&[vec![1, 0], vec![0, 1]]), 0);
    }

    #[test]
    fn drain_and_recovery_on_windows() {
        // 4 workers, 1 s windows, fault on worker 0 in [2000, 6000).
        let mut rec = RunRecord {
            window_ms: 1000.0,
            ..RunRecord::default()
        };
        let shares0 = [25, 25, 20, 1, 0, 0, 30, 60, 25, 25];
        rec.window_picks = shares0.iter().map(|&a| vec![a, 100 - a, 0, 0]).collect();
        let (drain, recovery, peak) = drain_and_recovery(&rec, 0, 2000.0, 6000.0);
        // Window 2 still has 20% ≥ 2.5%, and window 3's 1% is below 10% of
        // the fair share but not below 1% of the picks: drained from
        // window 4 → 2000 ms.
        assert_eq!(drain, Some(2000.0));
        // Window 6 (30% ≥ 12.5%) → end of window 6 − 6000 = 1000 ms.
        assert_eq!(recovery, Some(1000.0));
        // Peak 60% = 2.4× fair.
        assert!((peak.unwrap_or(0.0) - 2.4).abs() < 1e-9);
    }
}

//! What the caches did under one arm: hit rates overall and per worker,
//! and the origin's traffic.
//!
//! Definitions: the hit rate is GETs that found their key / GETs that
//! reached a worker (a PUT writes through and is no lookup); a worker that
//! served no GET has hit rate `null`; `origin_bytes` is what the misses
//! fetched from the origin.

use std::fmt::Write as _;

use serde::Serialize;

use crate::run_summary::PolicyResult;
use crate::sim::CacheRecord;

/// Points of hit rate a returning worker's may trail the others' by and
/// count as back.
pub const HIT_RATE_BACK_POINTS: f64 = 5.0;
/// GETs a returning worker needs in a window for its hit rate to count.
pub const HIT_RATE_BACK_MIN_GETS: u32 = 20;

/// One arm's cache figures in results.json.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CacheSummary {
    /// Hits / GETs, over every worker (`null` when no GET reached one).
    pub hit_rate: Option<f64>,
    /// Hits / GETs, per worker.
    pub hit_rate_per_worker: Vec<Option<f64>>,
    /// GETs that missed: reads from the origin.
    pub origin_reads: u64,
    /// Bytes fetched from the origin.
    pub origin_bytes: u64,
    /// With a worker that returns from a crash with an empty cache: how
    /// long after its return, ms, the first window ends in which its hit
    /// rate is within [`HIT_RATE_BACK_POINTS`] points of the other
    /// workers' (with at least [`HIT_RATE_BACK_MIN_GETS`] GETs there);
    /// `null` when it never is within the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub return_hit_rate_back_ms: Option<f64>,
}

impl CacheSummary {
    /// The summary of a testbed run's caches, from the workers' own
    /// `INFO` counters; `value_bytes` per origin read.
    pub fn from_redis(c: &crate::testbed::cache::CacheResult, value_bytes: usize) -> Self {
        Self {
            hit_rate: c.hit_rate_redis.map(round4),
            hit_rate_per_worker: c
                .hit_rate_redis_per_worker
                .iter()
                .map(|r| r.map(round4))
                .collect(),
            origin_reads: c.origin_reads,
            origin_bytes: c.origin_reads * value_bytes as u64,
            return_hit_rate_back_ms: None,
        }
    }

    /// The summary of a simulated run's caches.
    pub fn from_record(rec: &CacheRecord) -> Self {
        let rate = |h: u64, m: u64| (h + m > 0).then(|| round4(h as f64 / (h + m) as f64));
        let (hits, misses): (u64, u64) = (rec.hits.iter().sum(), rec.misses.iter().sum());
        Self {
            hit_rate: rate(hits, misses),
            hit_rate_per_worker: rec
                .hits
                .iter()
                .zip(&rec.misses)
                .map(|(&h, &m)| rate(h, m))
                .collect(),
            origin_reads: misses,
            origin_bytes: rec.origin_bytes,
            return_hit_rate_back_ms: None,
        }
    }

    /// [`Self::return_hit_rate_back_ms`] of `worker`, back at `to_ms`.
    pub fn hit_rate_back_ms(
        rec: &CacheRecord,
        worker: usize,
        to_ms: f64,
        window_ms: f64,
    ) -> Option<f64> {
        let first = (to_ms / window_ms).ceil() as usize;
        (first..rec.window_gets.len()).find_map(|w| {
            let (gets, hits) = (&rec.window_gets[w], &rec.window_hits[w]);
            let (g, h) = (*gets.get(worker)?, *hits.get(worker)?);
            let others_g: u32 = gets.iter().sum::<u32>() - g;
            let others_h: u32 = hits.iter().sum::<u32>() - h;
            let back = g >= HIT_RATE_BACK_MIN_GETS
                && others_g > 0
                && f64::from(h) / f64::from(g)
                    >= f64::from(others_h) / f64::from(others_g) - HIT_RATE_BACK_POINTS / 100.0;
            back.then(|| ((w + 1) as f64 * window_ms - to_ms).max(0.0))
        })
    }
}

/// The cache table under a scenario's main table: per arm the hit rate,
/// its lowest and highest worker, origin reads and MiB, the picks of the
/// least and most loaded worker as multiples of the fair share, and the
/// latency percentiles. Empty when no arm ran with caches.
pub fn cache_table(policies: &[PolicyResult]) -> String {
    let mut s = String::new();
    for p in policies {
        let Some(c) = &p.cache else { continue };
        if s.is_empty() {
            s.push_str(
                "\n| policy | hit rate | worker hit rates (lowest–highest) | origin reads | origin MiB | worker load (lowest–highest, × fair) | p50 ms | p99 ms | p99.9 ms |\n\
                 |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
            );
        }
        let rates: Vec<f64> = c.hit_rate_per_worker.iter().flatten().copied().collect();
        let (lo, hi) = min_max(&rates);
        let range = if lo.is_finite() && hi.is_finite() {
            format!("{:.1}–{:.1}%", lo * 100.0, hi * 100.0)
        } else {
            "–".to_owned()
        };
        let picks: Vec<f64> = p.picks_per_worker.iter().map(|&x| x as f64).collect();
        let fair = picks.iter().sum::<f64>() / picks.len().max(1) as f64;
        let (plo, phi) = min_max(&picks);
        let ms = |v: Option<f64>| v.map_or_else(|| "–".to_owned(), |x| format!("{x:.2}"));
        let _ = writeln!(
            s,
            "| {} | {} | {range} | {} | {:.1} | {:.2}–{:.2} | {} | {} | {} |",
            p.name,
            c.hit_rate
                .map_or_else(|| "–".to_owned(), |h| format!("{:.1}%", h * 100.0)),
            c.origin_reads,
            c.origin_bytes as f64 / 1_048_576.0,
            plo / fair.max(1e-9),
            phi / fair.max(1e-9),
            ms(p.p50_ms),
            ms(p.p99_ms),
            ms(p.p999_ms),
        );
    }
    if !s.is_empty() {
        s.push_str("\nhit rate = GETs that found their key in the worker's cache / GETs; origin = what the misses fetched; worker load = picks per worker over the run. Definitions: `evaluation/src/cache_summary.rs`.\n");
    }
    s
}

fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::NAN, f64::NAN), |(lo, hi), &x| (lo.min(x), hi.max(x)))
}

fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hit_rates_count_gets_per_worker_and_overall() {
        let rec = CacheRecord {
            hits: vec![3, 0, 0],
            misses: vec![1, 4, 0],
            origin_bytes: 5 * 4_096,
            ..CacheRecord::new(3)
        };
        let s = CacheSummary::from_record(&rec);
        assert_eq!(s.hit_rate, Some(0.375));
        let puts_only = CacheRecord::new(2);
        let none = CacheSummary::from_record(&puts_only);
        assert_eq!(none.hit_rate, None, "no GET: no hit rate");
        let table = cache_table(&[{
            let mut p = PolicyResult::test_ran("x", 1.0);
            p.cache = Some(none);
            p
        }]);
        assert!(table.contains("| x | – | – | 0 |"), "{table}");
        assert_eq!(s.hit_rate_per_worker, vec![Some(0.75), Some(0.0), None]);
        assert_eq!((s.origin_reads, s.origin_bytes), (5, 20_480));
    }

    #[test]
    fn a_returning_worker_is_back_once_its_hit_rate_nears_the_others() {
        let mut rec = CacheRecord::new(2);
        // Window 2: 30 GETs each, the returning worker 0 hits 10, worker 1 hits 27.
        // Window 3: worker 0 hits 26 of 30, worker 1 hits 27 of 30.
        for (w, h0) in [(2, 10), (3, 26)] {
            for i in 0..30 {
                rec.record_window(w, 0, i < h0);
                rec.record_window(w, 1, i < 27);
            }
        }
        rec.record_window(1, 0, false);
        // Back at 1 500 ms, 1 000 ms windows: window 3 ends at 4 000 ms.
        assert_eq!(
            CacheSummary::hit_rate_back_ms(&rec, 0, 1_500.0, 1_000.0),
            Some(2_500.0)
        );
        assert_eq!(
            CacheSummary::hit_rate_back_ms(&rec, 0, 3_500.0, 1_000.0),
            None
        );
    }
}

//! The `cache` testbed scenario: the workers are caches in front of an
//! origin. Each `redis-server` worker gets `maxmemory` (its empty
//! `used_memory` plus [`CACHE_BYTES`]) and `maxmemory-policy allkeys-lru`,
//! so it holds about 250 of the [`KEYS`] Zipf-popular keys of
//! [`VALUE_BYTES`] each: the key space is larger than one worker's memory
//! and smaller than all of theirs together. The origin is one more
//! `redis-server`, preloaded with every key; the router reads cache-aside
//! ([`super::cache_aside`]) with a [`MISS_PENALTY_MS`] penalty per miss.
//!
//! Per arm the workers are flushed, the arm's own routing warms them for
//! [`WARMUP_S`] (the first seconds of `--duration-s`, not measured), and
//! the rest of the run is measured: the hit rate from the workers' `INFO`
//! `keyspace_hits`/`keyspace_misses` over it, beside the router's own
//! count. No transient fault (the fault flags are unused).

use std::fmt::Write as _;

use redis::aio::MultiplexedConnection;
use serde::Serialize;

use super::cache_aside::RouterCounts;
use super::loadgen::key;
use super::procs::RedisProc;
use crate::run_summary::PolicyResult;

/// Scenario name.
pub const NAME: &str = "cache";
/// Distinct keys (Zipf exponent 0.99, as every testbed scenario).
pub const KEYS: usize = 1200;
/// Bytes of every value: under jemalloc's 16 KiB size class with the
/// string header, so a value takes 16 KiB of the worker's memory.
pub const VALUE_BYTES: usize = 16_000;
/// Each worker's cache, bytes above its empty `used_memory`: about 250
/// values (measured: 249 on redis-server 7.0).
pub const CACHE_BYTES: u64 = 4 << 20;
/// What a miss costs the router before it answers, ms: a read of a
/// database on another host.
pub const MISS_PENALTY_MS: u64 = 5;
/// Warm-up at the start of each arm's run, s, not measured.
pub const WARMUP_S: f64 = 4.0;
/// Keys SET on the origin per pipeline while preloading.
const PRELOAD_BATCH: usize = 100;

async fn connect(port: u16) -> Result<MultiplexedConnection, String> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .map_err(|e| format!("port {port}: {e}"))?;
    client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| format!("port {port}: {e}"))
}

async fn info(c: &mut MultiplexedConnection, section: &str) -> Result<String, String> {
    redis::cmd("INFO")
        .arg(section)
        .query_async(c)
        .await
        .map_err(|e| format!("INFO {section}: {e}"))
}

/// Make every worker a cache: `maxmemory` = its empty `used_memory` +
/// [`CACHE_BYTES`], `allkeys-lru`. Returns the limits set, bytes.
///
/// # Errors
/// A worker that does not answer or refuses the configuration.
pub async fn make_caches(workers: &[RedisProc]) -> Result<Vec<u64>, String> {
    let mut limits = Vec::with_capacity(workers.len());
    for w in workers {
        let mut c = connect(w.port).await?;
        let mem = agent::redis_info::parse_info(&info(&mut c, "memory").await?);
        let used = mem
            .used_memory
            .ok_or_else(|| format!("port {}: INFO without used_memory", w.port))?;
        let limit = used + CACHE_BYTES;
        for (key, value) in [
            ("maxmemory", limit.to_string()),
            ("maxmemory-policy", "allkeys-lru".to_owned()),
        ] {
            redis::cmd("CONFIG")
                .arg("SET")
                .arg(key)
                .arg(&value)
                .query_async::<()>(&mut c)
                .await
                .map_err(|e| format!("port {}: CONFIG SET {key} {value}: {e}", w.port))?;
        }
        limits.push(limit);
    }
    Ok(limits)
}

/// Store every key on the origin.
///
/// # Errors
/// The origin does not answer.
pub async fn preload_origin(origin: &RedisProc) -> Result<(), String> {
    let mut c = connect(origin.port).await?;
    let value = vec![b'v'; VALUE_BYTES];
    let ranks: Vec<usize> = (1..=KEYS).collect();
    for chunk in ranks.chunks(PRELOAD_BATCH) {
        let mut pipe = redis::pipe();
        for &rank in chunk {
            pipe.cmd("SET").arg(key(rank)).arg(&value).ignore();
        }
        pipe.query_async::<()>(&mut c)
            .await
            .map_err(|e| format!("origin preload: {e}"))?;
    }
    Ok(())
}

/// Empty every worker's cache (before each arm).
///
/// # Errors
/// A worker that does not answer.
pub async fn flush(workers: &[RedisProc]) -> Result<(), String> {
    for w in workers {
        let mut c = connect(w.port).await?;
        redis::cmd("FLUSHALL")
            .query_async::<()>(&mut c)
            .await
            .map_err(|e| format!("port {}: FLUSHALL: {e}", w.port))?;
    }
    Ok(())
}

/// One worker's cumulative cache counters from `INFO stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// `keyspace_hits`.
    pub hits: u64,
    /// `keyspace_misses`.
    pub misses: u64,
    /// `evicted_keys`.
    pub evicted: u64,
}

/// Every worker's counters now.
///
/// # Errors
/// A worker that does not answer or lacks the counters.
pub async fn read_stats(workers: &[RedisProc]) -> Result<Vec<WorkerStats>, String> {
    let mut out = Vec::with_capacity(workers.len());
    for w in workers {
        let mut c = connect(w.port).await?;
        let s = agent::redis_info::parse_info(&info(&mut c, "stats").await?);
        let missing = || format!("port {}: INFO stats without keyspace counters", w.port);
        out.push(WorkerStats {
            hits: s.keyspace_hits.ok_or_else(missing)?,
            misses: s.keyspace_misses.ok_or_else(missing)?,
            evicted: s.evicted_keys.unwrap_or(0),
        });
    }
    Ok(out)
}

/// One arm's cache figures over the measured run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CacheResult {
    /// Hit rate from the workers' `INFO`: Δ`keyspace_hits` / (Δhits +
    /// Δ`keyspace_misses`) summed over the workers; `None` without lookups.
    pub hit_rate_redis: Option<f64>,
    /// Hit rate the router counted (GETs answered with a value / GETs).
    pub hit_rate_router: Option<f64>,
    /// Δ`keyspace_hits`, summed over the workers.
    pub redis_hits: u64,
    /// Δ`keyspace_misses`, summed over the workers.
    pub redis_misses: u64,
    /// The router's hits.
    pub router_hits: u64,
    /// The router's misses.
    pub router_misses: u64,
    /// Reads of the origin.
    pub origin_reads: u64,
    /// Δ`evicted_keys`, summed over the workers.
    pub evicted_keys: u64,
    /// Each worker's hit rate from its `INFO`.
    pub hit_rate_redis_per_worker: Vec<Option<f64>>,
}

fn rate(hits: u64, misses: u64) -> Option<f64> {
    let lookups = hits + misses;
    (lookups > 0).then(|| hits as f64 / lookups as f64)
}

impl CacheResult {
    /// From the workers' counters before and after the measured run and
    /// the router's counts over it.
    pub fn new(before: &[WorkerStats], after: &[WorkerStats], router: &RouterCounts) -> Self {
        let deltas: Vec<WorkerStats> = after
            .iter()
            .zip(before)
            .map(|(a, b)| WorkerStats {
                hits: a.hits.saturating_sub(b.hits),
                misses: a.misses.saturating_sub(b.misses),
                evicted: a.evicted.saturating_sub(b.evicted),
            })
            .collect();
        let redis_hits = deltas.iter().map(|d| d.hits).sum();
        let redis_misses = deltas.iter().map(|d| d.misses).sum();
        let router_hits = router.hits.iter().sum();
        let router_misses = router.misses.iter().sum();
        Self {
            hit_rate_redis: rate(redis_hits, redis_misses),
            hit_rate_router: rate(router_hits, router_misses),
            redis_hits,
            redis_misses,
            router_hits,
            router_misses,
            origin_reads: router.origin_reads,
            evicted_keys: deltas.iter().map(|d| d.evicted).sum(),
            hit_rate_redis_per_worker: deltas.iter().map(|d| rate(d.hits, d.misses)).collect(),
        }
    }
}

/// One sentence for the report; `limits` are the workers' `maxmemory`.
pub fn describe(limits: &[u64]) -> String {
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    let lo = limits.iter().copied().min().unwrap_or(0);
    let hi = limits.iter().copied().max().unwrap_or(0);
    format!(
        "each worker is a cache: maxmemory {:.2}–{:.2} MiB (its empty used_memory + {:.0} MiB, about 250 values), \
         allkeys-lru; {KEYS} Zipf-popular keys (s 0.99) of {VALUE_BYTES} bytes: more than one worker holds, \
         less than all together; the router reads cache-aside from an origin redis-server holding every key, \
         a miss costs a {MISS_PENALTY_MS} ms sleep on the router before the value is SET on the picked worker; \
         a PUT writes the origin and the worker. Per arm the workers are flushed and the arm's own routing \
         warms them for the first {WARMUP_S:.0} s (not measured); no transient fault",
        mib(lo),
        mib(hi),
        mib(CACHE_BYTES),
    )
}

/// The cache table of the arms that measured one; empty otherwise.
pub fn notes(policies: &[PolicyResult]) -> String {
    let rows: Vec<(&PolicyResult, &CacheResult)> = policies
        .iter()
        .filter_map(|p| p.redis_cache.as_ref().map(|c| (p, c)))
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let pct = |v: Option<f64>| v.map_or_else(|| "–".to_owned(), |v| format!("{:.1}%", v * 100.0));
    let mut s = String::from(
        "\nCache (measured run): hit rate from the workers' INFO keyspace_hits/keyspace_misses deltas, and as the router counted its GETs\n\n\
         | arm | hit rate (Redis INFO) | hit rate (router) | origin reads | evicted keys | p99 ms |\n\
         |---|---|---|---|---|---|\n",
    );
    for (p, c) in rows {
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {} | {} | {} |",
            p.name,
            pct(c.hit_rate_redis),
            pct(c.hit_rate_router),
            c.origin_reads,
            c.evicted_keys,
            p.p99_ms
                .map_or_else(|| "–".to_owned(), |v| format!("{v:.2}"))
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(hits: u64, misses: u64, evicted: u64) -> WorkerStats {
        WorkerStats {
            hits,
            misses,
            evicted,
        }
    }

    #[test]
    fn hit_rates_are_deltas_summed_over_the_workers() {
        let before = [stats(100, 50, 0), stats(10, 10, 5)];
        let after = [stats(190, 60, 30), stats(10, 10, 5)];
        let router = RouterCounts {
            hits: vec![88, 0],
            misses: vec![11, 0],
            origin_reads: 11,
        };
        let c = CacheResult::new(&before, &after, &router);
        assert_eq!((c.redis_hits, c.redis_misses, c.evicted_keys), (90, 10, 30));
        assert_eq!(c.hit_rate_redis, Some(0.9));
        assert_eq!(c.hit_rate_router, Some(88.0 / 99.0));
        assert_eq!(c.hit_rate_redis_per_worker, vec![Some(0.9), None]);
        assert_eq!(c.origin_reads, 11);
    }

    #[test]
    fn the_key_space_is_larger_than_one_cache_and_smaller_than_six() {
        let per_worker = CACHE_BYTES / 16_384;
        assert!(KEYS as u64 > per_worker && (KEYS as u64) < 6 * per_worker);
        assert_eq!(key(7), "user:7:profile");
    }

    #[test]
    fn notes_list_only_arms_with_cache_figures() {
        assert_eq!(notes(&[PolicyResult::skipped("x", "y")]), "");
        let mut p = PolicyResult::skipped("least-request-all", "");
        p.redis_cache = Some(CacheResult::new(
            &[stats(0, 0, 0)],
            &[stats(3, 1, 2)],
            &RouterCounts {
                hits: vec![3],
                misses: vec![1],
                origin_reads: 1,
            },
        ));
        let n = notes(&[p]);
        assert!(
            n.contains("| `least-request-all` | 75.0% | 75.0% | 1 | 2 |"),
            "{n}"
        );
    }
}

//! Caches in front of a slower origin: what a worker holds warm, what a hit
//! and a miss cost, and the key space's prefixes and hot key.
//!
//! Each worker holds at most `capacity_keys` keys (a worker's own
//! [`super::WorkerSpec::cache_keys`] overrides it). A GET that finds its
//! key costs `hit_cost_ms`; one that does not costs `miss_cost_ms` (the
//! fetch from the origin, during which the worker's server is busy, as a
//! read-through cache or a storage engine's block cache is) and admits the
//! key, evicting by `policy`. A PUT costs `put_cost_ms` as before, writes
//! through to the origin and admits the key on its worker; with
//! `invalidate_on_put` every other worker's copy is dropped. A request's
//! hit or miss is decided when it reaches the worker, and the key is
//! admitted then, so later requests for it queued behind share the fetch
//! (as a read-through cache coalesces them). A crash empties the cache.
//!
//! Caches start as a long-running, locality-blind cluster leaves them:
//! each holds the most popular keys it has room for. The offered `load` is a
//! fraction of the capacity at `load_hit_rate`: a locality-blind router
//! then runs the pool about as loaded as in the other scenarios, and
//! routing that raises the hit rate frees capacity.

use serde::{Deserialize, Serialize};

/// How a full cache picks the key to evict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum EvictionPolicy {
    /// Least recently used (a hit refreshes the key): Redis
    /// `allkeys-lru`, memcached.
    #[default]
    Lru,
    /// First in, first out (a hit does not refresh the key).
    Fifo,
}

/// The workers' caches (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheSpec {
    /// Keys one worker's cache holds.
    pub capacity_keys: usize,
    /// Mean GET service time on a hit at speed 1, ms.
    pub hit_cost_ms: f64,
    /// Mean GET service time on a miss at speed 1 (the origin fetch), ms.
    pub miss_cost_ms: f64,
    /// Eviction policy: `lru` or `fifo`.
    pub policy: EvictionPolicy,
    /// Whether a PUT drops the key from every other worker's cache.
    pub invalidate_on_put: bool,
    /// Size of one value, bytes (× `large_factor` for a large request):
    /// what a miss fetches from the origin.
    pub value_bytes: u64,
    /// The GET hit rate at which `load` is the offered fraction of the
    /// pool's capacity.
    pub load_hit_rate: f64,
    /// Bits per key of the cache digest each worker publishes with its
    /// telemetry (a Bloom filter of the keys it holds, as the agent builds
    /// one), within 0..=[`MAX_DIGEST_BITS_PER_KEY`]; 0: none.
    pub digest_bits_per_key: usize,
}

impl Default for CacheSpec {
    /// The `cache-affinity` caches: 2 000 keys each, hits 1 ms, misses
    /// 10 ms, LRU, no invalidation, 4 KiB values, load at a 45 % hit rate,
    /// digests at 10 bits per key.
    fn default() -> Self {
        Self {
            capacity_keys: 2_000,
            hit_cost_ms: 1.0,
            miss_cost_ms: 10.0,
            policy: EvictionPolicy::Lru,
            invalidate_on_put: false,
            value_bytes: 4_096,
            load_hit_rate: 0.45,
            digest_bits_per_key: scorer_core::locality::bloom::DEFAULT_BITS_PER_KEY,
        }
    }
}

/// Most [`CacheSpec::digest_bits_per_key`].
pub const MAX_DIGEST_BITS_PER_KEY: usize = 64;

/// Largest cache, keys (the simulator holds every cache in memory).
pub const MAX_CACHE_KEYS: usize = 10_000_000;

/// Largest value, bytes (1 GiB, Redis's largest string is 512 MiB).
pub const MAX_VALUE_BYTES: u64 = 1 << 30;

impl CacheSpec {
    /// Mean GET service time at speed 1 at hit rate `h`, ms.
    pub fn get_cost_at_ms(&self, h: f64) -> f64 {
        h * self.hit_cost_ms + (1.0 - h) * self.miss_cost_ms
    }

    /// Checks every key.
    ///
    /// # Errors
    /// The first key out of range, named `cache.<key>`.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=MAX_CACHE_KEYS).contains(&self.capacity_keys) {
            return Err(format!(
                "`cache.capacity_keys` must be in 1..={MAX_CACHE_KEYS}, got {}",
                self.capacity_keys
            ));
        }
        for (key, v) in [
            ("hit_cost_ms", self.hit_cost_ms),
            ("miss_cost_ms", self.miss_cost_ms),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!(
                    "`cache.{key}` must be a finite number > 0, got {v}"
                ));
            }
        }
        if !(1..=MAX_VALUE_BYTES).contains(&self.value_bytes) {
            return Err(format!(
                "`cache.value_bytes` must be in 1..={MAX_VALUE_BYTES} (1 GiB), got {}",
                self.value_bytes
            ));
        }
        if self.miss_cost_ms < self.hit_cost_ms {
            return Err(format!(
                "`cache.miss_cost_ms` ({}) must be at least `cache.hit_cost_ms` ({})",
                self.miss_cost_ms, self.hit_cost_ms
            ));
        }
        if !(self.load_hit_rate.is_finite() && (0.0..=1.0).contains(&self.load_hit_rate)) {
            return Err(format!(
                "`cache.load_hit_rate` must be in 0..=1, got {}",
                self.load_hit_rate
            ));
        }
        if self.digest_bits_per_key > MAX_DIGEST_BITS_PER_KEY {
            return Err(format!(
                "`cache.digest_bits_per_key` must be in 0..={MAX_DIGEST_BITS_PER_KEY}, got {}",
                self.digest_bits_per_key
            ));
        }
        Ok(())
    }
}

/// From `from_ms` on, one key takes `share` of the requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HotKey {
    /// When the key turns hot, ms.
    pub from_ms: f64,
    /// Fraction of requests for it from then on.
    pub share: f64,
    /// Cost multiplier of its requests (a large value: a celebrity's
    /// timeline, a big hash).
    pub size_factor: f64,
}

impl HotKey {
    /// Checks every key against a run of `duration_ms`.
    ///
    /// # Errors
    /// The first key out of range, named `hot_key.<key>`.
    pub fn validate(&self, duration_ms: f64) -> Result<(), String> {
        if !(self.from_ms.is_finite() && (0.0..duration_ms).contains(&self.from_ms)) {
            return Err(format!(
                "`hot_key.from_ms` must be in 0..{duration_ms} ms (inside the run), got {}",
                self.from_ms
            ));
        }
        if !(self.share.is_finite() && self.share > 0.0 && self.share <= 1.0) {
            return Err(format!(
                "`hot_key.share` must be in (0, 1], got {}",
                self.share
            ));
        }
        if !(self.size_factor.is_finite() && self.size_factor > 0.0) {
            return Err(format!(
                "`hot_key.size_factor` must be a finite number > 0, got {}",
                self.size_factor
            ));
        }
        Ok(())
    }
}

/// Largest number of key prefixes.
pub const MAX_PREFIXES: usize = 100_000;

/// Checks the key-space keys: `prefixes` (0 = none, else 1..=[`MAX_PREFIXES`]
/// and at most `keys`), `prefix_zipf_s`.
///
/// # Errors
/// The first key out of range, named.
pub fn validate_prefixes(prefixes: usize, prefix_zipf_s: f64, keys: usize) -> Result<(), String> {
    if prefixes > MAX_PREFIXES.min(keys) {
        return Err(format!(
            "`prefixes` must be at most {} (and at most `keys`), got {prefixes}",
            MAX_PREFIXES.min(keys)
        ));
    }
    if !(prefix_zipf_s.is_finite() && prefix_zipf_s >= 0.0) {
        return Err(format!(
            "`prefix_zipf_s` must be a finite number >= 0, got {prefix_zipf_s}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cache_key_is_checked_by_name() {
        assert!(CacheSpec::default().validate().is_ok());
        let bad = |f: fn(&mut CacheSpec)| {
            let mut c = CacheSpec::default();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert!(bad(|c| c.capacity_keys = 0).contains("cache.capacity_keys"));
        assert!(bad(|c| c.hit_cost_ms = f64::NAN).contains("cache.hit_cost_ms"));
        assert!(bad(|c| c.miss_cost_ms = -1.0).contains("cache.miss_cost_ms"));
        assert!(bad(|c| c.miss_cost_ms = 0.5).contains("at least `cache.hit_cost_ms`"));
        assert!(bad(|c| c.load_hit_rate = 1.5).contains("cache.load_hit_rate"));
        assert!(bad(|c| c.value_bytes = 0).contains("cache.value_bytes"));
        assert!(bad(|c| c.value_bytes = u64::MAX).contains("cache.value_bytes"));
        let hot = HotKey {
            from_ms: 20_000.0,
            share: 0.2,
            size_factor: 10.0,
        };
        assert!(hot.validate(60_000.0).is_ok());
        assert!(
            hot.validate(10_000.0)
                .unwrap_err()
                .contains("hot_key.from_ms")
        );
        let mut share = hot.clone();
        share.share = 0.0;
        assert!(
            share
                .validate(60_000.0)
                .unwrap_err()
                .contains("hot_key.share")
        );
        assert!(
            validate_prefixes(100, 0.8, 10)
                .unwrap_err()
                .contains("`prefixes`")
        );
        assert!(
            validate_prefixes(10, -1.0, 100)
                .unwrap_err()
                .contains("prefix_zipf_s")
        );
    }

    #[test]
    fn the_get_cost_blends_hits_and_misses() {
        let c = CacheSpec::default();
        assert!((c.get_cost_at_ms(0.6) - 4.6).abs() < 1e-12);
        assert!((c.get_cost_at_ms(c.load_hit_rate) - 5.95).abs() < 1e-12);
        assert_eq!(c.get_cost_at_ms(1.0), 1.0);
    }
}

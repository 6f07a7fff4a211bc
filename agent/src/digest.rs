//! The worker's cache digest: a Bloom filter of the keys it holds
//! ([`scorer_core::locality::bloom`]), built by walking the keyspace with
//! `SCAN` in bounded batches over a connection of its own, so that a long
//! walk never delays the PINGs and `INFO` of the report interval.
//!
//! What Redis can and cannot tell about locality:
//!
//! * `INFO stats` `keyspace_hits` / `keyspace_misses` are instance-wide:
//!   the agent reports their ratio over the interval as `cache_hit_rate`.
//!   Redis keeps no hit or miss count per key or per prefix, so per-prefix
//!   hit rates come from the routers' `cache_hit` outcomes, not from here.
//! * Which keys it holds, Redis does tell: `SCAN` returns every key present
//!   for the whole walk at least once (a key added or removed during the
//!   walk may or may not be seen). The digest is that set.
//! * Per-key recency (`OBJECT IDLETIME`, LRU policies) or frequency
//!   (`OBJECT FREQ`, LFU policies) exist, one call per key: too dear to
//!   poll, and not reported.
//!
//! Memory: one filter of [`DigestConfig::max_keys`] ×
//! [`DigestConfig::bits_per_key`] bits (rounded up to a power of two, at
//! most 1 MiB) under construction, plus the SCAN batch in flight.

use std::time::Duration;

use scorer_core::locality::Bloom;
use scorer_core::telemetry::CacheDigest;
use tokio::sync::watch;
use tokio::time::{Instant, sleep, sleep_until};
use tracing::debug;

use crate::probe::Probe;

/// Default [`DigestConfig::interval_ms`]: 0, no digest.
pub const DEFAULT_DIGEST_INTERVAL_MS: u64 = 0;
/// Default [`DigestConfig::max_keys`].
pub const DEFAULT_DIGEST_MAX_KEYS: u64 = 100_000;
/// Default [`DigestConfig::scan_count`].
pub const DEFAULT_DIGEST_SCAN_COUNT: u32 = 1_000;
/// Default [`DigestConfig::batch_pause_ms`].
pub const DEFAULT_DIGEST_BATCH_PAUSE_MS: u64 = 1;

/// How the agent builds each worker's digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DigestConfig {
    /// A walk starts at most this often, ms; 0: no digest. Keep it below
    /// the service's `telemetry.dead_after_ms`, after which a digest no
    /// longer counts.
    pub interval_ms: u64,
    /// Keys the filter is sized for; more fill it and raise its
    /// false-positive rate (which the service measures and discounts).
    pub max_keys: u64,
    /// Bits per key (the filter sets 7 per key: about 0.8 % false
    /// positives at 10).
    pub bits_per_key: u32,
    /// `SCAN ... COUNT` hint: keys per batch.
    pub scan_count: u32,
    /// Pause between batches, ms: bounds the walk's load on the worker.
    pub batch_pause_ms: u64,
}

impl Default for DigestConfig {
    fn default() -> Self {
        Self {
            interval_ms: DEFAULT_DIGEST_INTERVAL_MS,
            max_keys: DEFAULT_DIGEST_MAX_KEYS,
            bits_per_key: scorer_core::locality::bloom::DEFAULT_BITS_PER_KEY as u32,
            scan_count: DEFAULT_DIGEST_SCAN_COUNT,
            batch_pause_ms: DEFAULT_DIGEST_BATCH_PAUSE_MS,
        }
    }
}

impl DigestConfig {
    /// Whether digests are built at all.
    pub fn enabled(&self) -> bool {
        self.interval_ms > 0
    }

    /// Checks the bounds; `Err` says which.
    pub fn validate(&self) -> Result<(), &'static str> {
        if !self.enabled() {
            return Ok(());
        }
        if !(1..=64).contains(&self.bits_per_key) {
            return Err("digest bits per key must be 1..=64");
        }
        if self.max_keys == 0 {
            return Err("digest max keys must be >= 1");
        }
        if !(1..=100_000).contains(&self.scan_count) {
            return Err("digest scan count must be 1..=100000");
        }
        Ok(())
    }
}

/// One walk of the keyspace into a filter.
#[derive(Debug)]
pub struct DigestWalk {
    bloom: Bloom,
    keys: u64,
    cursor: u64,
}

impl DigestWalk {
    /// A walk from the start, into an empty filter sized by `cfg`.
    pub fn new(cfg: &DigestConfig) -> Self {
        let keys = usize::try_from(cfg.max_keys).unwrap_or(usize::MAX);
        Self {
            bloom: Bloom::for_keys(keys, cfg.bits_per_key as usize),
            keys: 0,
            cursor: 0,
        }
    }

    /// The cursor of the next `SCAN`.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// One `SCAN` reply: the next cursor and a batch of keys. Returns the
    /// digest when the walk is done (the cursor is back to 0).
    pub fn feed(&mut self, next_cursor: u64, keys: &[Vec<u8>]) -> Option<CacheDigest> {
        for k in keys {
            // Keys that are not UTF-8 cannot be a router's key.
            if let Ok(k) = std::str::from_utf8(k) {
                self.bloom.insert(k);
                self.keys += 1;
            }
        }
        self.cursor = next_cursor;
        (next_cursor == 0).then(|| CacheDigest::from_bloom(&self.bloom, self.keys))
    }
}

/// Walks the worker's keys every `cfg.interval_ms` and publishes each
/// finished digest on `tx`; returns when `tx` has no receiver.
pub(crate) async fn walk_loop(
    id: String,
    mut probe: Probe,
    cfg: DigestConfig,
    tx: watch::Sender<Option<CacheDigest>>,
) {
    let every = Duration::from_millis(cfg.interval_ms);
    let pause = Duration::from_millis(cfg.batch_pause_ms);
    loop {
        let start = Instant::now();
        if !probe.is_connected() && probe.connect().await.is_err() {
            sleep_until(start + every).await;
            continue;
        }
        let mut walk = DigestWalk::new(&cfg);
        let digest = loop {
            match probe.scan(walk.cursor(), cfg.scan_count).await {
                Ok((next, keys)) => {
                    if let Some(d) = walk.feed(next, &keys) {
                        break Some(d);
                    }
                }
                Err(e) => {
                    debug!(worker = %id, error = %e, "SCAN failed; digest walk abandoned");
                    break None;
                }
            }
            sleep(pause).await;
        };
        if let Some(d) = digest
            && tx.send(Some(d)).is_err()
        {
            return;
        }
        sleep_until(start + every).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scorer_core::locality::key_hash;

    #[test]
    fn a_walk_ends_when_the_cursor_returns_to_zero_with_every_key() {
        let cfg = DigestConfig {
            interval_ms: 1_000,
            max_keys: 100,
            ..DigestConfig::default()
        };
        let mut walk = DigestWalk::new(&cfg);
        assert!(
            walk.feed(17, &[b"user:1".to_vec(), vec![0xff, 0xfe]])
                .is_none()
        );
        assert_eq!(walk.cursor(), 17);
        let d = walk.feed(0, &[b"user:2".to_vec()]).expect("done");
        assert_eq!(d.key_count, 2, "the key that is not UTF-8 is skipped");
        let bloom = d.decode().expect("a valid digest");
        assert!(bloom.contains_hash(key_hash("user:1")) && bloom.contains_hash(key_hash("user:2")));
        // 100 keys × 10 bits: 125 bytes, rounded up to 128.
        assert_eq!(d.size_bytes, 128);
    }

    #[test]
    fn the_config_is_checked_only_when_enabled() {
        let off = DigestConfig {
            bits_per_key: 0,
            ..DigestConfig::default()
        };
        assert!(off.validate().is_ok());
        let on = DigestConfig {
            interval_ms: 5_000,
            ..off
        };
        assert!(on.validate().is_err());
        let ok = DigestConfig {
            interval_ms: 5_000,
            ..DigestConfig::default()
        };
        assert!(ok.validate().is_ok());
    }
}

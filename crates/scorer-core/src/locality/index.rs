//! The routing index: which worker this router sent which key to, and
//! when, in a fixed-size table (approximate mode, as Dynamo's KV router
//! learns each cache from its own routing with a TTL, and SGLang's
//! cache-aware router mirrors each worker's cache from its routing
//! history).
//!
//! The table is set-associative, as a CPU cache is: a key hashes to one
//! bucket of [`WAYS`] entries (one 64-byte cache line), which holds its
//! `(key, worker)` pairs beside other keys', and a new pair replaces the
//! bucket's oldest. A decision's lookups for all its candidates read that
//! one line. Each entry is one `u64`, a 32-bit
//! tag of the pair's hash and the time of the last routing in
//! [`STAMP_MS`] ms units, read and written with relaxed atomics: no lock,
//! and a race between two picks loses at most one routing. Memory is
//! [`RoutingIndex::memory_bytes`], 8 bytes an entry whatever the number of
//! distinct keys: more pairs than entries evict the oldest, so the index
//! forgets old routings first, as the workers' LRU caches do.

use std::sync::atomic::{AtomicU64, Ordering};

use super::buckets::Buckets;

/// Entries in one bucket: 8 × 8 bytes, one cache line.
pub const WAYS: usize = 8;
/// Time resolution of an entry, ms (a `u32` of these wraps after 2.2 years).
pub const STAMP_MS: u64 = 16;

/// A `(key, worker)` pair's hashes: the key's, which picks the bucket (so
/// that a decision's lookups for every candidate read one cache line), and
/// the pair's, which tags the entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairHash {
    key: u64,
    pair: u64,
}

impl PairHash {
    /// The pair of `key_hash` and `worker_hash` ([`super::hash_str`]).
    pub fn new(key_hash: u64, worker_hash: u64) -> Self {
        Self {
            key: key_hash,
            pair: super::mix(key_hash ^ worker_hash.rotate_left(29)),
        }
    }

    /// The pair's rendezvous weight: of a key's candidates, the one with
    /// the highest is its home.
    pub fn weight(self) -> u64 {
        self.pair
    }

    fn tag(self) -> u32 {
        // Never 0: an entry of 0 is empty.
        ((self.pair >> 32) as u32) | 1
    }
}

/// The routing index.
#[derive(Debug)]
pub struct RoutingIndex {
    table: Buckets<WAYS>,
}

fn stamp(now_ms: u64) -> u32 {
    // Wrapping: ages are differences.
    (now_ms / STAMP_MS) as u32
}

impl RoutingIndex {
    /// An index of at least `entries` entries (rounded up to a power of two
    /// buckets of [`WAYS`], at least one bucket).
    pub fn new(entries: usize) -> Self {
        Self {
            table: Buckets::new(entries),
        }
    }

    /// Entries held.
    pub fn capacity(&self) -> usize {
        self.table.len()
    }

    /// The table's memory, bytes.
    pub fn memory_bytes(&self) -> usize {
        self.table.memory_bytes()
    }

    fn bucket(&self, pair: PairHash) -> &[AtomicU64] {
        self.table.bucket(pair.key)
    }

    /// The pair was routed at `now_ms`.
    pub fn record(&self, pair: PairHash, now_ms: u64) {
        let tag = pair.tag();
        let now = stamp(now_ms);
        let entry = (u64::from(tag) << 32) | u64::from(now);
        let bucket = self.bucket(pair);
        let mut oldest = (0, 0u32);
        for (i, e) in bucket.iter().enumerate() {
            let v = e.load(Ordering::Relaxed);
            if v == 0 || (v >> 32) as u32 == tag {
                e.store(entry, Ordering::Relaxed);
                return;
            }
            let age = now.wrapping_sub(v as u32);
            if age >= oldest.1 {
                oldest = (i, age);
            }
        }
        bucket[oldest.0].store(entry, Ordering::Relaxed);
    }

    /// How long ago the pair was last routed, ms, at `now_ms`; `None` when
    /// the index does not hold it (never routed, or evicted).
    pub fn age_ms(&self, pair: PairHash, now_ms: u64) -> Option<u64> {
        let tag = pair.tag();
        self.bucket(pair).iter().find_map(|e| {
            let v = e.load(Ordering::Relaxed);
            ((v >> 32) as u32 == tag)
                .then(|| u64::from(stamp(now_ms).wrapping_sub(v as u32)) * STAMP_MS)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locality::{hash_str, mix};

    fn pair(key: &str, worker: &str) -> PairHash {
        PairHash::new(hash_str(key), hash_str(worker))
    }

    #[test]
    fn a_routed_pair_is_found_with_its_age_and_another_worker_is_not() {
        let ix = RoutingIndex::new(1024);
        ix.record(pair("user:1", "w1"), 1_000);
        assert_eq!(ix.age_ms(pair("user:1", "w1"), 3_000), Some(2_000));
        assert_eq!(ix.age_ms(pair("user:1", "w2"), 3_000), None);
        assert_eq!(ix.age_ms(pair("user:2", "w1"), 3_000), None);
        // A second routing refreshes the age.
        ix.record(pair("user:1", "w1"), 2_992);
        assert_eq!(ix.age_ms(pair("user:1", "w1"), 3_000), Some(0));
    }

    #[test]
    fn a_full_bucket_forgets_its_oldest_routing_first() {
        // One bucket: the ninth pair evicts the first.
        let ix = RoutingIndex::new(WAYS);
        assert_eq!(ix.capacity(), WAYS);
        for i in 0..=WAYS as u64 {
            ix.record(pair(&format!("k{i}"), "w"), i * 100);
        }
        assert_eq!(ix.age_ms(pair("k0", "w"), 1_000), None);
        for i in 1..=WAYS as u64 {
            assert!(ix.age_ms(pair(&format!("k{i}"), "w"), 1_000).is_some());
        }
    }

    #[test]
    fn the_memory_is_fixed_by_the_entries_whatever_the_distinct_keys() {
        let entries = 1 << 16;
        let ix = RoutingIndex::new(entries);
        let before = ix.memory_bytes();
        assert_eq!(before, entries * 8);
        for k in 0..200_000u64 {
            ix.record(PairHash::new(k, hash_str("w3")), k);
        }
        assert_eq!(ix.memory_bytes(), before);
        // The most recent routings are still there.
        let recent = (200_000 - 1_000..200_000u64)
            .filter(|&k| {
                ix.age_ms(PairHash::new(k, hash_str("w3")), 200_000)
                    .is_some()
            })
            .count();
        assert!(recent > 990, "{recent}");
    }

    #[test]
    fn ten_million_keys_over_sixteen_workers_stay_within_64_mib() {
        // 10 million keys, each routed once, to the 16 workers in turn,
        // 1 ms apart.
        let ix = RoutingIndex::new(8 << 20);
        assert_eq!(ix.memory_bytes(), 64 << 20);
        let workers: Vec<u64> = (0..16).map(|w| hash_str(&format!("w{w}"))).collect();
        let pairs = 10_000_000u64;
        let pair = |i: u64| PairHash::new(mix(i), workers[(i % 16) as usize]);
        for i in 0..pairs {
            ix.record(pair(i), i);
        }
        assert_eq!(ix.memory_bytes(), 64 << 20);
        // Of the latest million routings, how many the index still holds.
        let latest = (pairs - 1_000_000..pairs)
            .filter(|&i| ix.age_ms(pair(i), pairs).is_some())
            .count();
        assert!(latest > 990_000, "{latest}");
        // And of all ten million (8 million fit).
        let held = (0..pairs)
            .filter(|&i| ix.age_ms(pair(i), pairs).is_some())
            .count();
        eprintln!("latest million held: {latest}; all ten million held: {held}");
        assert!((7_000_000..=8_388_608).contains(&held), "{held}");
    }

    #[test]
    fn ages_survive_the_stamp_wrapping() {
        let ix = RoutingIndex::new(64);
        let t = (u64::from(u32::MAX) + 10) * STAMP_MS;
        ix.record(pair("k", "w"), t - 100 * STAMP_MS);
        assert_eq!(ix.age_ms(pair("k", "w"), t), Some(100 * STAMP_MS));
    }
}

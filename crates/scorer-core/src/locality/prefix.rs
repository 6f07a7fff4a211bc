//! Per `(key prefix, worker)` cache hit rates, learnt from outcomes that
//! say hit or miss: how often the keys of one prefix (`user`, `session`,
//! …) were served from one worker's cache lately. A worker that caches
//! small `session` values but evicts large `blob` ones shows it here,
//! where its overall hit rate averages the two.
//!
//! A fixed table, set-associative as the [routing index](super::index)
//! is: a pair hashes to one bucket of [`WAYS`] entries, and each entry is
//! one `u64`, a 32-bit tag of the pair's hash and the pair's decayed hits
//! and outcomes as two 16-bit fixed-point numbers ([`ONE`] = one
//! outcome). An outcome multiplies both by `1 − 2^−`[`DECAY_SHIFT`] and
//! adds itself (about the pair's last 64 outcomes), in one
//! compare-and-swap: no lock, and a race between two outcomes of pairs new
//! to a bucket loses at most one of them. A pair new to a full bucket
//! replaces the entry with the fewest decayed outcomes. Memory is
//! [`PrefixHitRates::memory_bytes`] whatever the number of pairs.

use std::sync::atomic::{AtomicU64, Ordering};

use super::buckets::Buckets;

use super::PairHash;

/// Entries in one bucket: 4 × 8 bytes.
pub const WAYS: usize = 4;
/// Entries of the engine's table: 4 096 (32 KiB), a thousand prefixes on
/// four workers or four prefixes on a thousand workers.
pub const DEFAULT_ENTRIES: usize = 4_096;
/// One outcome in the fixed-point counts.
pub const ONE: u32 = 256;
/// Each outcome keeps `1 − 2^−DECAY_SHIFT` of the counts before it: 6,
/// about the pair's last 64 outcomes (at most 64 × [`ONE`] = 16 384, well
/// within 16 bits).
pub const DECAY_SHIFT: u32 = 6;

/// The table of `(prefix, worker)` hit rates.
#[derive(Debug)]
pub struct PrefixHitRates {
    table: Buckets<WAYS>,
}

fn tag(pair: PairHash) -> u32 {
    // Never 0: an entry of 0 is empty.
    ((pair.weight() >> 32) as u32) | 1
}

fn entry_tag(v: u64) -> u32 {
    (v >> 32) as u32
}

fn hits(v: u64) -> u32 {
    ((v >> 16) & 0xffff) as u32
}

fn outcomes(v: u64) -> u32 {
    (v & 0xffff) as u32
}

fn pack(tag: u32, hits: u32, outcomes: u32) -> u64 {
    let (h, o) = (hits.min(0xffff), outcomes.min(0xffff));
    (u64::from(tag) << 32) | (u64::from(h) << 16) | u64::from(o)
}

/// `v` after one more outcome, a hit or not.
fn learn(v: u64, hit: bool) -> u64 {
    let decay = |x: u32| x - (x >> DECAY_SHIFT);
    let add = if hit { ONE } else { 0 };
    pack(entry_tag(v), decay(hits(v)) + add, decay(outcomes(v)) + ONE)
}

impl PrefixHitRates {
    /// A table of at least `entries` entries (rounded up to a power of two
    /// buckets of [`WAYS`], at least one bucket).
    pub fn new(entries: usize) -> Self {
        Self {
            table: Buckets::new(entries),
        }
    }

    /// The table's memory, bytes.
    pub fn memory_bytes(&self) -> usize {
        self.table.memory_bytes()
    }

    fn bucket(&self, pair: PairHash) -> &[AtomicU64] {
        self.table.bucket(pair.weight())
    }

    /// An outcome of the pair ([`PairHash::new`] of the prefix's and the
    /// worker's [`super::hash_str`]) that was a hit or a miss.
    pub fn observe(&self, pair: PairHash, hit: bool) {
        let tag = tag(pair);
        let bucket = self.bucket(pair);
        for e in bucket {
            let held = e.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                (entry_tag(v) == tag).then(|| learn(v, hit))
            });
            if held.is_ok() {
                return;
            }
        }
        // Not held: the entry with the least evidence (an empty one first)
        // makes way.
        let victim = bucket
            .iter()
            .min_by_key(|e| outcomes(e.load(Ordering::Relaxed)))
            .unwrap_or(&bucket[0]);
        victim.store(learn(pack(tag, 0, 0), hit), Ordering::Relaxed);
    }

    /// The pair's decayed hit rate, fraction 0..=1, with its decayed
    /// outcomes; `None` before its first outcome (or once evicted).
    pub fn rate(&self, pair: PairHash) -> Option<(f64, f64)> {
        let tag = tag(pair);
        self.bucket(pair).iter().find_map(|e| {
            let v = e.load(Ordering::Relaxed);
            (entry_tag(v) == tag && outcomes(v) > 0).then(|| {
                let n = f64::from(outcomes(v));
                ((f64::from(hits(v)) / n).clamp(0.0, 1.0), n / f64::from(ONE))
            })
        })
    }

    /// [`PrefixHitRates::rate`] without the outcomes.
    pub fn hit_rate(&self, pair: PairHash) -> Option<f64> {
        self.rate(pair).map(|(r, _)| r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locality::hash_str;

    fn pair(prefix: &str, worker: &str) -> PairHash {
        PairHash::new(hash_str(prefix), hash_str(worker))
    }

    #[test]
    fn each_prefix_and_worker_learns_its_own_hit_rate() {
        let t = PrefixHitRates::new(DEFAULT_ENTRIES);
        assert_eq!(t.hit_rate(pair("user", "w1")), None);
        for i in 0..400 {
            // `user` hits 9 in 10 on w1, `blob` 1 in 10; w2 never hits `user`.
            t.observe(pair("user", "w1"), i % 10 != 0);
            t.observe(pair("blob", "w1"), i % 10 == 0);
            t.observe(pair("user", "w2"), false);
        }
        let user = t.hit_rate(pair("user", "w1")).expect("learnt");
        let blob = t.hit_rate(pair("blob", "w1")).expect("learnt");
        assert!((user - 0.9).abs() < 0.05, "{user}");
        assert!((blob - 0.1).abs() < 0.05, "{blob}");
        assert_eq!(t.hit_rate(pair("user", "w2")), Some(0.0));
        assert_eq!(t.hit_rate(pair("session", "w1")), None);
        // The counts stay bounded: about the last 64 outcomes.
        let (_, n) = t.rate(pair("user", "w1")).expect("learnt");
        assert!((60.0..=64.0).contains(&n), "{n}");
    }

    #[test]
    fn the_rate_follows_a_change_within_the_decay() {
        let t = PrefixHitRates::new(64);
        let p = pair("user", "w1");
        for _ in 0..300 {
            t.observe(p, true);
        }
        assert!(t.hit_rate(p).expect("learnt") > 0.99);
        // The worker's cache was flushed: it misses from now on.
        for _ in 0..150 {
            t.observe(p, false);
        }
        let r = t.hit_rate(p).expect("learnt");
        assert!(r < 0.15, "{r}");
    }

    #[test]
    fn a_full_bucket_forgets_its_least_evidenced_pair_and_memory_is_fixed() {
        // One bucket.
        let t = PrefixHitRates::new(WAYS);
        let before = t.memory_bytes();
        assert_eq!(before, WAYS * 8);
        for (i, n) in [50, 40, 30, 20].into_iter().enumerate() {
            for _ in 0..n {
                t.observe(pair(&format!("p{i}"), "w"), true);
            }
        }
        t.observe(pair("new", "w"), true);
        assert_eq!(t.hit_rate(pair("p3", "w")), None, "the fewest outcomes");
        for p in ["p0", "p1", "p2", "new"] {
            assert_eq!(t.hit_rate(pair(p, "w")), Some(1.0), "{p}");
        }
        for k in 0..10_000 {
            t.observe(pair(&format!("k{k}"), "w"), false);
        }
        assert_eq!(t.memory_bytes(), before);
    }
}

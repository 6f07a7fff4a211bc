//! Locality: how likely a request's key is warm in each worker's cache,
//! and what that makes the request cost there.
//!
//! * [`index`]: the router's own routing history, which key went to which
//!   worker and when, in a fixed-size table (approximate mode).
//! * [`warmth`]: per worker, from outcomes that say hit or miss, the hit
//!   and miss service times and how often a key routed there some time
//!   ago was still warm.
//! * [`prefix`]: per key prefix and worker, the decayed share of hits
//!   (a feature of the model, not a term of the cost).
//!
//! The cost stage prices key `k` on worker `w` at
//! `P(warm) × hit time(w) + (1 − P(warm)) × miss time(w)` in place of the
//! worker's flat service time, once `w` has [`LocalityConfig::min_outcomes`]
//! hits and misses; a deployment that never reports a hit or a miss
//! prices and allocates exactly as without this module.

pub mod bloom;
mod buckets;
pub mod digest;
pub mod index;
pub mod prefix;
pub mod warmth;

use serde::{Deserialize, Serialize};

pub use bloom::{Bloom, key_hash};
pub use digest::{HeldDigest, warm_with_digest};
pub use index::{PairHash, RoutingIndex};
pub use prefix::PrefixHitRates;
pub use warmth::{CacheEvidence, age_bucket};

/// Default [`LocalityConfig::index_entries`]: 8 MiB.
pub const DEFAULT_INDEX_ENTRIES: usize = 1 << 20;
/// Most [`LocalityConfig::index_entries`]: 1 GiB.
pub const MAX_INDEX_ENTRIES: usize = 1 << 27;
/// Default [`LocalityConfig::min_outcomes`].
pub const DEFAULT_MIN_OUTCOMES: u64 = 8;

/// `[locality]`: pricing a key by where it is likely warm.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LocalityConfig {
    /// Price keys by where they are warm. Default true; without outcomes
    /// that say hit or miss it changes nothing.
    pub enabled: bool,
    /// Entries of the routing index, 8 bytes each, within
    /// 8..=[`MAX_INDEX_ENTRIES`] (rounded up to a power of two). Allocated
    /// at the first outcome that says hit or miss. Default 1 048 576
    /// (8 MiB): a `(key, worker)` pair per entry, the oldest forgotten
    /// first. Takes effect at restart.
    pub index_entries: usize,
    /// Hits and misses each a worker needs before its keys are priced by
    /// warmth, `>= 1`. Default 8.
    pub min_outcomes: u64,
}

impl Default for LocalityConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            index_entries: DEFAULT_INDEX_ENTRIES,
            min_outcomes: DEFAULT_MIN_OUTCOMES,
        }
    }
}

impl LocalityConfig {
    /// Checks the fields; `Err` names the bad key.
    pub fn validate(&self) -> Result<(), String> {
        if !(index::WAYS..=MAX_INDEX_ENTRIES).contains(&self.index_entries) {
            return Err(format!(
                "index_entries must be within {}..={MAX_INDEX_ENTRIES}, got {}",
                index::WAYS,
                self.index_entries
            ));
        }
        if self.min_outcomes == 0 {
            return Err("min_outcomes must be >= 1, got 0".into());
        }
        Ok(())
    }
}

/// A stable 64-bit hash of `s` (FNV-1a, then [`mix`]): the same on every
/// router, so that what one learns names the same keys for another.
pub fn hash_str(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    mix(h)
}

/// MurmurHash3's 64-bit finaliser: every input bit moves every output bit.
pub fn mix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// What the locality term knew of one candidate for one key.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LocalityEstimate {
    /// How long ago this router last routed the key here, ms; `None`:
    /// never, forgotten, or before the worker came back empty.
    pub routed_age_ms: Option<u64>,
    /// Whether the worker is the key's home among the candidates
    /// ([`warmth::HOME_BUCKET`]).
    pub home: bool,
    /// The routing-age bucket ([`age_bucket`]).
    pub bucket: u8,
    /// The chance the key is warm here, fraction 0..=1: the routing
    /// estimate, moved by the worker's digest when one is fresh.
    pub p_warm: f64,
    /// The chance from this router's own routing alone, fraction 0..=1.
    pub p_routing: f64,
    /// What the worker's fresh digest said of the key: `Some(true)`
    /// present, `Some(false)` absent, `None` no fresh digest.
    pub digest: Option<bool>,
    /// The worker's hit service time, ms.
    pub hit_ms: f64,
    /// The worker's miss service time, ms.
    pub miss_ms: f64,
    /// Whether the cost priced the key by it (the worker's hit and miss
    /// times are learnt).
    pub priced: bool,
}

impl LocalityEstimate {
    /// The key's expected service time here, ms.
    pub fn expected_ms(&self) -> f64 {
        self.p_warm * self.hit_ms + (1.0 - self.p_warm) * self.miss_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_hash_is_stable_across_processes() {
        // Pinned: routers in other processes must agree.
        assert_eq!(hash_str(""), mix(0xcbf2_9ce4_8422_2325));
        assert_eq!(hash_str("tenant:1:user:2"), hash_str("tenant:1:user:2"));
        assert_ne!(hash_str("tenant:1:user:2"), hash_str("tenant:1:user:3"));
    }

    #[test]
    fn the_config_names_its_bad_key() {
        assert!(LocalityConfig::default().validate().is_ok());
        let small = LocalityConfig {
            index_entries: 4,
            ..LocalityConfig::default()
        };
        assert!(small.validate().unwrap_err().contains("index_entries"));
        let zero = LocalityConfig {
            min_outcomes: 0,
            ..LocalityConfig::default()
        };
        assert!(zero.validate().unwrap_err().contains("min_outcomes"));
    }
}

//! What a worker's cache digest ([`super::bloom`]) says of a key's warmth
//! there, combined with what this router's own routing says.
//!
//! A Bloom filter never misses a key it holds, and finds one it does not
//! hold with its false-positive rate `f`. So, from the routing estimate `p`:
//!
//! * present: Bayes' rule with likelihoods 1 (warm) and `f` (cold),
//!   `p / (p + f × (1 − p))`;
//! * absent: the key was cold when the digest was taken. If this router
//!   has routed it here since, that routing is newer evidence and `p`
//!   stands; else the key is warm only if another router filled it since,
//!   `p × ABSENT_KEEP`.
//!
//! A digest older than the telemetry's `dead_after_ms` is ignored: its
//! worker may have filled or evicted anything since.

use std::sync::Arc;

use super::bloom::Bloom;
use crate::telemetry::{CacheDigest, Snapshot};

/// The share of the routing estimate kept when the digest says absent and
/// this router has not routed the key here since: the chance another
/// router filled it within the digest's age.
pub const ABSENT_KEEP: f64 = 0.05;

/// A worker's latest digest as the router holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldDigest {
    /// The filter.
    pub bloom: Bloom,
    /// Its false-positive rate, measured once when received, 0..=1.
    pub false_positive_rate: f64,
    /// When the report carrying it was received, monotonic ms.
    pub received_ms: u64,
}

impl HeldDigest {
    /// `bloom`, received at `received_ms`.
    pub fn new(bloom: Bloom, received_ms: u64) -> Self {
        let false_positive_rate = bloom.false_positive_rate().clamp(0.0, 1.0);
        Self {
            bloom,
            false_positive_rate,
            received_ms,
        }
    }

    /// Its age at `now_ms`, ms.
    pub fn age_ms(&self, now_ms: u64) -> u64 {
        now_ms.saturating_sub(self.received_ms)
    }

    /// Whether it still counts at `now_ms` under a `ttl_ms` lifetime.
    pub fn is_fresh(&self, now_ms: u64, ttl_ms: u64) -> bool {
        self.age_ms(now_ms) <= ttl_ms
    }

    /// Whether the key whose [`super::bloom::key_hash`] is `hash` is in it.
    pub fn contains_hash(&self, hash: u64) -> bool {
        self.bloom.contains_hash(hash)
    }
}

/// The digest a worker's view holds after report `s` received at
/// `now_ms`: the report's own (validated before), else the previous one.
pub fn carried(
    prev: Option<&Arc<HeldDigest>>,
    s: &Snapshot,
    now_ms: u64,
) -> Option<Arc<HeldDigest>> {
    match s.cache_digest.as_ref().map(CacheDigest::decode) {
        Some(Ok(bloom)) => Some(Arc::new(HeldDigest::new(bloom, now_ms))),
        _ => prev.cloned(),
    }
}

/// The chance the key is warm given the routing estimate `p_routing`, the
/// digest's answer `present` at false-positive rate `fp`, and whether this
/// router routed the key here after the digest was taken.
pub fn warm_with_digest(p_routing: f64, present: bool, fp: f64, routed_since: bool) -> f64 {
    let p = p_routing.clamp(0.0, 1.0);
    let f = fp.clamp(0.0, 1.0);
    let out = if present {
        let d = p + f * (1.0 - p);
        if d > 0.0 { p / d } else { 0.0 }
    } else if routed_since {
        p
    } else {
        p * ABSENT_KEEP
    };
    out.clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presence_raises_absence_lowers_and_a_newer_routing_stands() {
        let p = 0.5;
        let present = warm_with_digest(p, true, 0.01, false);
        assert!((present - 0.5 / 0.505).abs() < 1e-12, "{present}");
        // A filter that finds everything says nothing.
        assert_eq!(warm_with_digest(p, true, 1.0, false), p);
        assert_eq!(warm_with_digest(p, false, 0.01, false), p * ABSENT_KEEP);
        assert_eq!(warm_with_digest(p, false, 0.01, true), p);
        assert_eq!(warm_with_digest(f64::NAN.max(0.0), true, 0.0, false), 0.0);
    }

    #[test]
    fn a_digest_is_fresh_within_its_lifetime() {
        let d = HeldDigest::new(Bloom::new(8, 1).expect("shape"), 1_000);
        assert_eq!(d.false_positive_rate, 0.0);
        assert!(d.is_fresh(11_000, 10_000));
        assert!(!d.is_fresh(11_001, 10_000));
        assert_eq!(d.age_ms(500), 0);
    }
}

//! One worker's cache evidence, learnt from outcomes that say hit or miss:
//! its hit and miss service times, and how often a key this router routed
//! there some time ago was still warm.
//!
//! The chance that key `k` is warm on worker `w` is calibrated, not
//! assumed: the routing index gives how long ago this router last sent `k`
//! to `w` (or that it never did), that age falls in one of [`AGE_BOUNDS_MS`]'s
//! buckets, and each bucket keeps the decayed share of hits among the
//! outcomes whose keys were in it when they were picked. A worker whose
//! LRU cache turns over in 5 s learns that a routing 16 s old says little;
//! one whose cache holds everything learns that even keys never routed
//! there hit. A bucket with few outcomes leans on the worker's hit rate
//! over all buckets ([`PRIOR_WEIGHT`] outcomes' worth).

use serde::Serialize;

/// Upper bounds of the routing-age buckets, ms; a routing older than the
/// last, or none, falls in [`HOME_BUCKET`] or [`NEVER_BUCKET`].
pub const AGE_BOUNDS_MS: [u64; 5] = [1_000, 4_000, 16_000, 64_000, 256_000];
/// The bucket of a key this router has not routed to the worker lately,
/// on the key's home worker: the candidate with the highest
/// rendezvous-hash weight for the key (Thaler and Ravishankar's highest
/// random weight), the same on every router without a word between them.
/// Routers send a key nobody has routed lately to its home unless its
/// queue says otherwise, so a key's home is likelier warm; how much
/// likelier is learnt, as for every bucket.
pub const HOME_BUCKET: u8 = AGE_BOUNDS_MS.len() as u8;
/// The bucket of a key this router has not routed to the worker lately,
/// elsewhere than its home.
pub const NEVER_BUCKET: u8 = HOME_BUCKET + 1;
/// Buckets: the routing ages, home and never.
pub const BUCKETS: usize = NEVER_BUCKET as usize + 1;
/// Weight of each outcome in a bucket's hit share: about its last 256.
pub const BUCKET_ALPHA: f64 = 1.0 / 256.0;
/// Weight of each outcome in the hit and miss service times once warm:
/// about the last 20.
pub const SERVICE_ALPHA: f64 = 0.05;
/// Outcomes of the worker's overall hit rate a bucket's share starts from.
pub const PRIOR_WEIGHT: f64 = 4.0;

/// The bucket of a routing `age_ms` old (`None`: never, or forgotten) to
/// the key's home worker or not.
pub fn age_bucket(age_ms: Option<u64>, home: bool) -> u8 {
    let old = if home { HOME_BUCKET } else { NEVER_BUCKET };
    age_ms.map_or(old, |a| {
        AGE_BOUNDS_MS
            .iter()
            .position(|&b| a < b)
            .map_or(old, |i| i as u8)
    })
}

/// A worker's cache evidence.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct CacheEvidence {
    /// Service time of a hit, ms (valid with `hits > 0`).
    pub hit_ms: f64,
    /// Hits learnt.
    pub hits: u64,
    /// Service time of a miss, ms (valid with `misses > 0`).
    pub miss_ms: f64,
    /// Misses learnt.
    pub misses: u64,
    /// Per routing-age bucket, decayed hits.
    pub bucket_hits: [f64; BUCKETS],
    /// Per routing-age bucket, decayed outcomes.
    pub bucket_outcomes: [f64; BUCKETS],
    /// When the worker last came back empty (a restart), monotonic ms: what
    /// was routed to it before then is no longer warm.
    pub cold_since_ms: u64,
}

fn blend(old: f64, sample: f64, n: u64) -> f64 {
    let alpha = (1.0 / n as f64).max(SERVICE_ALPHA);
    old + alpha * (sample - old)
}

impl CacheEvidence {
    /// An outcome of a request picked with its key in `bucket` (see
    /// [`age_bucket`]; `None` when the pick had no routing index) that
    /// took `service_ms` and was a hit or not.
    pub fn observe(&mut self, bucket: Option<u8>, service_ms: f64, hit: bool) {
        if !service_ms.is_finite() || service_ms < 0.0 {
            return;
        }
        if hit {
            self.hits = self.hits.saturating_add(1);
            self.hit_ms = blend(self.hit_ms, service_ms, self.hits);
        } else {
            self.misses = self.misses.saturating_add(1);
            self.miss_ms = blend(self.miss_ms, service_ms, self.misses);
        }
        if let Some(b) = bucket.map(usize::from).filter(|b| *b < BUCKETS) {
            let keep = 1.0 - BUCKET_ALPHA;
            self.bucket_hits[b] = self.bucket_hits[b] * keep + f64::from(u8::from(hit));
            self.bucket_outcomes[b] = self.bucket_outcomes[b] * keep + 1.0;
        }
    }

    /// Whether both service times rest on at least `min_outcomes` outcomes
    /// each: only then does the locality term price a key.
    pub fn is_learnt(&self, min_outcomes: u64) -> bool {
        self.hits >= min_outcomes && self.misses >= min_outcomes
    }

    /// The worker's hit rate over every bucket, fraction; 0.5 without any.
    pub fn hit_rate(&self) -> f64 {
        let n: f64 = self.bucket_outcomes.iter().sum();
        if n > 0.0 {
            self.bucket_hits.iter().sum::<f64>() / n
        } else {
            0.5
        }
    }

    /// The chance a key whose routing here falls in `bucket` is warm,
    /// fraction 0..=1.
    pub fn warm_probability(&self, bucket: u8) -> f64 {
        let b = usize::from(bucket).min(BUCKETS - 1);
        let p0 = self.hit_rate();
        // The home starts as warm as a fresh routing: were it to start at
        // the worker's rate, no router would prefer a key's home, and no
        // home would become warmer than elsewhere.
        let prior = if bucket == HOME_BUCKET {
            p0.max(self.share(0, p0))
        } else {
            p0
        };
        self.share(b, prior)
    }

    fn share(&self, b: usize, prior: f64) -> f64 {
        ((self.bucket_hits[b] + PRIOR_WEIGHT * prior) / (self.bucket_outcomes[b] + PRIOR_WEIGHT))
            .clamp(0.0, 1.0)
    }

    /// The expected service time of a key warm with chance `p`, ms.
    pub fn expected_ms(&self, p: f64) -> f64 {
        p * self.hit_ms + (1.0 - p) * self.miss_ms
    }

    /// A routing `age_ms` old at `now_ms`, as it counts: forgotten when it
    /// was made before the worker last came back empty.
    pub fn routing_age(&self, age_ms: Option<u64>, now_ms: u64) -> Option<u64> {
        age_ms.filter(|a| now_ms.saturating_sub(*a) >= self.cold_since_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_fall_in_their_buckets_and_never_routed_in_the_last() {
        assert_eq!(age_bucket(Some(0), false), 0);
        assert_eq!(age_bucket(Some(999), true), 0);
        assert_eq!(age_bucket(Some(1_000), false), 1);
        assert_eq!(age_bucket(Some(255_999), false), 4);
        assert_eq!(age_bucket(Some(256_000), false), NEVER_BUCKET);
        assert_eq!(age_bucket(Some(256_000), true), HOME_BUCKET);
        assert_eq!(age_bucket(None, false), NEVER_BUCKET);
        assert_eq!(age_bucket(None, true), HOME_BUCKET);
    }

    #[test]
    fn a_recent_routing_that_hits_is_likelier_warm_than_none() {
        let mut c = CacheEvidence::default();
        for i in 0..200 {
            // Routed here within a second: 9 hits in 10.
            c.observe(Some(0), 1.0, i % 10 != 0);
            // Never routed here: 1 hit in 5.
            c.observe(Some(NEVER_BUCKET), 10.0, i % 5 == 0);
        }
        let (recent, never) = (c.warm_probability(0), c.warm_probability(NEVER_BUCKET));
        assert!((recent - 0.9).abs() < 0.03, "{recent}");
        assert!((never - 0.2).abs() < 0.03, "{never}");
        // A bucket without outcomes leans on the worker's hit rate.
        assert!((c.warm_probability(3) - c.hit_rate()).abs() < 1e-9);
        assert!(c.is_learnt(8));
        assert!(!CacheEvidence::default().is_learnt(1));
    }

    #[test]
    fn a_keys_home_starts_as_warm_as_a_fresh_routing_then_learns() {
        let mut c = CacheEvidence::default();
        for i in 0..100 {
            c.observe(Some(0), 1.0, i % 10 != 0);
            c.observe(Some(NEVER_BUCKET), 10.0, i % 2 == 0);
        }
        let fresh = c.warm_probability(0);
        assert!((c.warm_probability(HOME_BUCKET) - fresh).abs() < 1e-9);
        // Outcomes at home say it is cold: the prior gives way.
        for _ in 0..100 {
            c.observe(Some(HOME_BUCKET), 10.0, false);
        }
        assert!(c.warm_probability(HOME_BUCKET) < 0.05);
    }

    #[test]
    fn hit_and_miss_times_are_learnt_apart_and_bad_samples_change_nothing() {
        let mut c = CacheEvidence::default();
        c.observe(None, 1.0, true);
        c.observe(None, 11.0, false);
        c.observe(None, 9.0, false);
        assert_eq!((c.hits, c.hit_ms), (1, 1.0));
        assert_eq!((c.misses, c.miss_ms), (2, 10.0));
        assert_eq!(c.expected_ms(0.5), 5.5);
        let before = c;
        c.observe(Some(0), f64::NAN, true);
        c.observe(Some(0), -1.0, true);
        c.observe(Some(200), f64::INFINITY, false);
        assert_eq!(c, before);
    }

    #[test]
    fn a_routing_made_before_the_worker_came_back_empty_is_forgotten() {
        let c = CacheEvidence {
            cold_since_ms: 10_000,
            ..CacheEvidence::default()
        };
        // Routed at 9 000 ms: before the restart.
        assert_eq!(c.routing_age(Some(3_000), 12_000), None);
        // Routed at 11 000 ms: after it.
        assert_eq!(c.routing_age(Some(1_000), 12_000), Some(1_000));
        assert_eq!(c.routing_age(None, 12_000), None);
    }
}

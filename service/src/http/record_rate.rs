//! How fast one credential may send router records
//! (`POST /v1/router/decisions`): a token bucket per credential name
//! (NGINX's `limit_req` keyed on the credential), refilled at
//! `limits.router_records_per_s` and holding one second of it, or one full
//! batch if that is more. A batch that finds too few tokens takes none and
//! is answered 429 with the seconds until it would fit; the balancer keeps
//! it and sends it again.
//!
//! Without a credential (the router role open), every caller shares the
//! bucket of [`ANONYMOUS`]. The table holds one bucket per configured
//! credential at most (plus that one), so it is bounded by the
//! configuration.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use scorer_engine::router_records::MAX_ROUTER_BATCH;

use crate::http::transport::streams::ANONYMOUS;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at_ms: u64,
}

/// The records' buckets, by credential name.
#[derive(Debug, Default)]
pub struct RecordRate {
    buckets: Mutex<HashMap<Arc<str>, Bucket>>,
}

/// A batch refused for its credential's rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateExceeded {
    /// Whole seconds until the batch would fit.
    pub retry_after_s: u64,
}

/// Tokens a bucket holds at most for `per_s`: one second's worth, or one
/// full batch if that is more.
pub fn burst(per_s: f64) -> f64 {
    per_s.max(MAX_ROUTER_BATCH as f64)
}

impl RecordRate {
    /// Takes `n` records for `credential` (`None`: the role is open) at
    /// monotonic `now_ms`, at `per_s` records per second.
    ///
    /// # Errors
    /// [`RateExceeded`] when the bucket holds fewer than `n`; nothing is
    /// taken then.
    pub fn take(
        &self,
        credential: Option<&Arc<str>>,
        n: usize,
        per_s: f64,
        now_ms: u64,
    ) -> Result<(), RateExceeded> {
        let cap = burst(per_s);
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let key = credential.cloned().unwrap_or_else(|| Arc::from(ANONYMOUS));
        let b = buckets.entry(key).or_insert(Bucket {
            tokens: cap,
            at_ms: now_ms,
        });
        let elapsed_s = now_ms.saturating_sub(b.at_ms) as f64 / 1_000.0;
        b.tokens = (b.tokens + elapsed_s * per_s).min(cap);
        b.at_ms = now_ms.max(b.at_ms);
        let want = n as f64;
        if b.tokens >= want {
            b.tokens -= want;
            return Ok(());
        }
        let wait_s = ((want - b.tokens) / per_s).ceil().max(1.0);
        Err(RateExceeded {
            // A batch never exceeds the burst, so the wait is finite and small.
            retry_after_s: wait_s.min(3_600.0) as u64,
        })
    }
}

impl RecordRate {
    /// Gives back `n` records taken for `credential` whose batch was not
    /// logged after all (the log was busy), up to the bucket's size at
    /// `per_s`.
    pub fn refund(&self, credential: Option<&Arc<str>>, n: usize, per_s: f64) {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let key: &str = credential.map_or(ANONYMOUS, |c| c);
        if let Some(b) = buckets.get_mut(key) {
            b.tokens = (b.tokens + n as f64).min(burst(per_s));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_gets_its_rate_and_a_burst_and_others_are_not_charged() {
        let r = RecordRate::default();
        let (edge1, edge2) = (Arc::from("edge-1"), Arc::from("edge-2"));
        // A full bucket: the burst (one batch, as 1 000/s is less) at once.
        assert_eq!(r.take(Some(&edge1), MAX_ROUTER_BATCH, 1_000.0, 0), Ok(()));
        assert_eq!(
            r.take(Some(&edge1), 2_000, 1_000.0, 0),
            Err(RateExceeded { retry_after_s: 2 })
        );
        // edge-2 has its own bucket.
        assert_eq!(r.take(Some(&edge2), 2_000, 1_000.0, 0), Ok(()));
        // Two seconds later edge-1's 2 000 fit, and nothing more.
        assert_eq!(r.take(Some(&edge1), 2_000, 1_000.0, 2_000), Ok(()));
        assert!(r.take(Some(&edge1), 1, 1_000.0, 2_000).is_err());
        // A batch the log could not take is given back.
        r.refund(Some(&edge1), 1_000, 1_000.0);
        assert_eq!(r.take(Some(&edge1), 1_000, 1_000.0, 2_000), Ok(()));
        // The open role shares one bucket.
        assert_eq!(r.take(None, MAX_ROUTER_BATCH, 1_000.0, 0), Ok(()));
        assert!(r.take(None, 1, 1_000.0, 0).is_err());
    }
}

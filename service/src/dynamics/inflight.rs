//! Decaying in-flight counter: picks the service handed out for a worker that
//! its telemetry cannot reflect yet.
//!
//! # Sources
//!
//! Finagle's `PeakEwma` balancer and Linkerd2-proxy's `tower::load::PeakEwma`
//! weight a worker by its outstanding requests and let load estimates decay
//! exponentially with a time constant (`decay` / `default_rtt`), so that
//! evidence that is never confirmed fades instead of sticking. Here a
//! router's pick is counted immediately (`+1`), removed when feedback for it
//! arrives (`-1`), and otherwise decays as `v(t) = v0 × exp(−(t − t0) / tau)`
//! with `tau` = [`InFlightConfig::decay_ms`], so lost feedback can never leak
//! a permanent penalty.
//!
//! # Concurrency choice
//!
//! [`InFlight`] holds the value and the time of its last update, which must
//! change together (a decay is only meaningful relative to its timestamp).
//! Two independent `AtomicU64`s could be read torn; a 128-bit CAS is not
//! available on stable Rust. A `std::sync::Mutex` around two plain numbers is
//! used instead: the critical section is a few float operations, never
//! allocates, never blocks on I/O, and cannot panic, so a poisoned lock (only
//! possible if a panic happened elsewhere while holding it) is recovered with
//! the last consistent values.

use std::sync::{Mutex, MutexGuard};

use serde::Serialize;

/// Default [`InFlightConfig::decay_ms`]: decay time constant `tau`, ms.
pub const DEFAULT_INFLIGHT_DECAY_MS: u64 = 1_000;
/// Default [`InFlightConfig::per_pick`]: rule-score points deducted per
/// in-flight pick.
pub const DEFAULT_INFLIGHT_PER_PICK: f64 = 2.0;
/// Default [`InFlightConfig::cap`]: maximum rule-score points deducted for
/// in-flight picks.
pub const DEFAULT_INFLIGHT_CAP: f64 = 20.0;

/// In-flight tunables.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct InFlightConfig {
    /// Decay time constant `tau`, ms (default [`DEFAULT_INFLIGHT_DECAY_MS`] =
    /// 1 000): after `tau` an unconfirmed pick counts `e^-1 ≈ 0.37`. Must be
    /// `>= 1`.
    pub decay_ms: u64,
    /// Score points (0..=100 scale) deducted per in-flight pick (default
    /// [`DEFAULT_INFLIGHT_PER_PICK`] = 2.0). Finite, `>= 0`.
    pub per_pick: f64,
    /// Maximum deduction in score points (default [`DEFAULT_INFLIGHT_CAP`] =
    /// 20.0). Finite, `>= 0`.
    pub cap: f64,
}

impl Default for InFlightConfig {
    fn default() -> Self {
        InFlightConfig {
            decay_ms: DEFAULT_INFLIGHT_DECAY_MS,
            per_pick: DEFAULT_INFLIGHT_PER_PICK,
            cap: DEFAULT_INFLIGHT_CAP,
        }
    }
}

impl InFlightConfig {
    /// Checks the fields; returns `Err` with a sentence naming the bad key.
    pub fn validate(&self) -> Result<(), String> {
        if self.decay_ms == 0 {
            return Err("decay_ms must be >= 1, got 0".to_owned());
        }
        for (key, v) in [("per_pick", self.per_pick), ("cap", self.cap)] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("{key} must be finite and >= 0, got {v}"));
            }
        }
        Ok(())
    }
}

/// Returns the score deduction (0..=100 points) for an in-flight `value`:
/// `min(cap, value × per_pick)`, never negative. A `NaN` or negative `value`
/// deducts 0.
///
/// Precondition: `per_pick` and `cap` are finite and `>= 0` (as
/// [`InFlightConfig::validate`] ensures; checked by `debug_assert!`). In
/// release builds an invalid `per_pick`/`cap` still yields a finite result
/// `>= 0`.
pub fn inflight_deduction(value: f64, per_pick: f64, cap: f64) -> f64 {
    debug_assert!(
        per_pick.is_finite() && per_pick >= 0.0,
        "per_pick {per_pick}"
    );
    debug_assert!(cap.is_finite() && cap >= 0.0, "cap {cap}");
    if value.is_nan() || value <= 0.0 {
        return 0.0;
    }
    let d = value * per_pick;
    // `f64::min`/`max` ignore NaN operands; the final clamp keeps it finite.
    let d = if d.is_nan() { 0.0 } else { d.min(cap) };
    if d.is_finite() { d.max(0.0) } else { 0.0 }
}

/// `(value, last_update_ms)`.
#[derive(Clone, Copy, Debug)]
struct Decayed {
    value: f64,
    at_ms: u64,
}

impl Decayed {
    /// Value decayed to `now_ms`; a `now_ms` before `at_ms` means no decay.
    fn at(self, now_ms: u64, decay_ms: u64) -> f64 {
        let elapsed = now_ms.saturating_sub(self.at_ms);
        if elapsed == 0 || self.value == 0.0 {
            return self.value;
        }
        if decay_ms == 0 {
            return 0.0;
        }
        let v = self.value * (-(elapsed as f64) / decay_ms as f64).exp();
        debug_assert!(v.is_finite() && v >= 0.0);
        v
    }
}

/// Per-worker decaying count of picks not yet confirmed by feedback or a
/// fresh snapshot. `Send + Sync`; share it by reference or `Arc`.
#[derive(Debug)]
pub struct InFlight {
    decay_ms: u64,
    inner: Mutex<Decayed>,
}

impl Default for InFlight {
    fn default() -> Self {
        Self::new(DEFAULT_INFLIGHT_DECAY_MS)
    }
}

impl InFlight {
    /// Returns a zero counter decaying with time constant `decay_ms` (ms).
    ///
    /// Precondition: `decay_ms >= 1` (checked by `debug_assert!`); with 0 in
    /// release builds a pick counts only within the same millisecond.
    pub fn new(decay_ms: u64) -> Self {
        debug_assert!(decay_ms >= 1, "decay_ms must be >= 1");
        InFlight {
            decay_ms,
            inner: Mutex::new(Decayed {
                value: 0.0,
                at_ms: 0,
            }),
        }
    }

    /// Returns the decay time constant, ms.
    pub fn decay_ms(&self) -> u64 {
        self.decay_ms
    }

    fn lock(&self) -> MutexGuard<'_, Decayed> {
        // The guarded data is two plain numbers written together; recover
        // from poisoning rather than panic.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies `f` to the value decayed to `now_ms` and stores the result.
    /// The stored timestamp never moves backwards: a `now_ms` earlier than
    /// the last update is treated as no time having passed.
    fn update(&self, now_ms: u64, f: impl FnOnce(f64) -> f64) {
        let mut g = self.lock();
        let v = f(g.at(now_ms, self.decay_ms));
        g.value = if v.is_finite() { v.max(0.0) } else { 0.0 };
        g.at_ms = g.at_ms.max(now_ms);
    }

    /// Records one pick handed out at `now_ms`: decays to `now_ms`, adds 1.
    pub fn add_pick(&self, now_ms: u64) {
        self.update(now_ms, |v| v + 1.0);
    }

    /// Records that feedback for one pick arrived at `now_ms`: decays to
    /// `now_ms`, subtracts 1, floors at 0 (feedback for a pick that already
    /// decayed away never makes the count negative).
    pub fn release(&self, now_ms: u64) {
        self.update(now_ms, |v| (v - 1.0).max(0.0));
    }

    /// Returns the in-flight estimate at `now_ms` (`>= 0`, finite):
    /// `v0 × exp(−(now_ms − t0) / decay_ms)`, or `v0` if `now_ms <= t0`.
    /// Read-only.
    pub fn value(&self, now_ms: u64) -> f64 {
        self.lock().at(now_ms, self.decay_ms)
    }

    /// Clears the counter at `now_ms` because a fresh telemetry snapshot was
    /// accepted: its queue depth / active count already includes the picks
    /// that reached the worker, so keeping them here would count them twice.
    /// (Picks made after the worker took the snapshot but before it arrived
    /// are lost by this; they are at most one reporting interval's worth and
    /// show up in the next snapshot.)
    pub fn reset_on_snapshot(&self, now_ms: u64) {
        self.update(now_ms, |_| 0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn inflight_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<InFlight>();
    }

    #[test]
    fn defaults_are_valid() {
        let c = InFlightConfig::default();
        assert_eq!(c.validate(), Ok(()));
        assert_eq!((c.decay_ms, c.per_pick, c.cap), (1_000, 2.0, 20.0));
        let bad = InFlightConfig {
            cap: f64::NAN,
            ..c.clone()
        };
        assert!(bad.validate().unwrap_err().contains("cap"));
        let bad = InFlightConfig { decay_ms: 0, ..c };
        assert!(bad.validate().unwrap_err().contains("decay_ms"));
    }

    #[test]
    fn inflight_decays_to_e_inverse_after_one_tau() {
        let f = InFlight::default();
        f.add_pick(5_000);
        assert_eq!(f.value(5_000), 1.0);
        let v = f.value(6_000);
        assert!((v - (-1.0f64).exp()).abs() < 1e-12, "{v}");
        let v = f.value(7_000);
        assert!((v - (-2.0f64).exp()).abs() < 1e-12, "{v}");
        // Adding later decays first: 2 picks, the first 1 tau old.
        f.add_pick(6_000);
        assert!((f.value(6_000) - (1.0 + (-1.0f64).exp())).abs() < 1e-12);
    }

    #[test]
    fn release_floors_at_zero() {
        let f = InFlight::new(1_000);
        f.release(0);
        assert_eq!(f.value(0), 0.0);
        f.add_pick(0);
        f.add_pick(0);
        f.release(10);
        assert!(f.value(10) > 0.0 && f.value(10) < 1.0);
        f.release(20);
        f.release(30);
        assert_eq!(f.value(30), 0.0);
        assert_eq!(f.value(u64::MAX), 0.0);
    }

    #[test]
    fn reset_on_snapshot_clears() {
        let f = InFlight::default();
        for t in 0..5 {
            f.add_pick(t);
        }
        f.reset_on_snapshot(5);
        assert_eq!(f.value(5), 0.0);
    }

    #[test]
    fn time_going_backwards_does_not_panic_or_inflate() {
        let f = InFlight::default();
        f.add_pick(u64::MAX);
        f.add_pick(0);
        assert_eq!(f.value(0), 2.0);
        assert_eq!(f.value(u64::MAX), 2.0);
        f.release(3);
        assert_eq!(f.value(u64::MAX), 1.0);
    }

    #[test]
    fn deduction_scales_and_caps() {
        let c = InFlightConfig::default();
        assert_eq!(inflight_deduction(0.0, c.per_pick, c.cap), 0.0);
        assert_eq!(inflight_deduction(3.0, c.per_pick, c.cap), 6.0);
        assert_eq!(inflight_deduction(100.0, c.per_pick, c.cap), 20.0);
        assert_eq!(inflight_deduction(f64::INFINITY, c.per_pick, c.cap), 20.0);
        assert_eq!(inflight_deduction(f64::NAN, c.per_pick, c.cap), 0.0);
        assert_eq!(inflight_deduction(-4.0, c.per_pick, c.cap), 0.0);
    }

    #[test]
    fn concurrent_picks_are_all_counted() {
        let f = Arc::new(InFlight::default());
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let f = Arc::clone(&f);
                std::thread::spawn(move || {
                    for _ in 0..1_000 {
                        f.add_pick(42);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(f.value(42), 2_000.0);
    }
}

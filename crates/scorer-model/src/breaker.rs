//! Circuit breaker on inference budget misses (issue #6), after the
//! closed → open → half-open pattern of Nygard, *Release It!* (2007) as used
//! by Envoy's outlier detection and Hystrix.
//!
//! Closed: every request runs the model; `breaker_after` consecutive budget
//! misses open it. Open: the model is skipped until `open_ms` have passed.
//! Half-open: requests run the model again; the first one inside budget
//! closes the breaker, the first miss re-opens it for another `open_ms`.
//! Time is passed in (monotonic ms).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use serde::Serialize;

/// What the breaker allows at a given time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakerState {
    /// Model in use.
    Closed,
    /// Model skipped.
    Open,
    /// Open period over; the next outcome decides.
    HalfOpen,
}

/// A lock-free breaker shared by all request threads.
#[derive(Debug)]
pub struct Breaker {
    after: u32,
    open_ms: u64,
    misses: AtomicU32,
    /// 0 when closed, else the monotonic ms at which the open period ends.
    open_until_ms: AtomicU64,
    opened: AtomicU64,
}

impl Breaker {
    /// A closed breaker opening after `after` (>= 1) consecutive misses for `open_ms`.
    pub fn new(after: u32, open_ms: u64) -> Self {
        debug_assert!(after >= 1 && open_ms >= 1);
        Self {
            after: after.max(1),
            open_ms: open_ms.max(1),
            misses: AtomicU32::new(0),
            open_until_ms: AtomicU64::new(0),
            opened: AtomicU64::new(0),
        }
    }

    /// The state at monotonic `now_ms`.
    pub fn state(&self, now_ms: u64) -> BreakerState {
        match self.open_until_ms.load(Ordering::Acquire) {
            0 => BreakerState::Closed,
            until if now_ms < until => BreakerState::Open,
            _ => BreakerState::HalfOpen,
        }
    }

    /// Records an inference inside budget: closes the breaker.
    pub fn on_success(&self) {
        self.misses.store(0, Ordering::Relaxed);
        self.open_until_ms.store(0, Ordering::Release);
    }

    /// Records a budget miss at `now_ms`; returns true when this miss opened
    /// (or re-opened) the breaker.
    pub fn on_miss(&self, now_ms: u64) -> bool {
        let misses = self
            .misses
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1);
        let half_open = self.state(now_ms) == BreakerState::HalfOpen;
        if half_open || misses >= self.after {
            self.open_until_ms.store(
                now_ms.saturating_add(self.open_ms).max(1),
                Ordering::Release,
            );
            self.misses.store(0, Ordering::Relaxed);
            self.opened.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Times the breaker has opened since creation.
    pub fn times_opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }

    /// Consecutive misses counted towards opening.
    pub fn consecutive_misses(&self) -> u32 {
        self.misses.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_n_misses_then_half_opens_and_closes() {
        let b = Breaker::new(3, 5_000);
        assert!(!b.on_miss(10));
        assert!(!b.on_miss(11));
        assert_eq!(b.state(11), BreakerState::Closed);
        assert!(b.on_miss(12));
        assert_eq!(b.state(12), BreakerState::Open);
        assert_eq!(b.state(5_011), BreakerState::Open);
        assert_eq!(b.state(5_012), BreakerState::HalfOpen);
        b.on_success();
        assert_eq!(b.state(5_013), BreakerState::Closed);
        assert_eq!(b.times_opened(), 1);
    }

    #[test]
    fn a_miss_while_half_open_reopens_at_once() {
        let b = Breaker::new(20, 100);
        for t in 0..20 {
            b.on_miss(t);
        }
        assert_eq!(b.state(50), BreakerState::Open);
        assert_eq!(b.state(119), BreakerState::HalfOpen);
        assert!(b.on_miss(119));
        assert_eq!(b.state(120), BreakerState::Open);
        assert_eq!(b.state(219), BreakerState::HalfOpen);
        assert_eq!(b.times_opened(), 2);
    }

    #[test]
    fn a_success_resets_the_miss_count() {
        let b = Breaker::new(2, 100);
        b.on_miss(0);
        b.on_success();
        assert!(!b.on_miss(1));
        assert_eq!(b.state(1), BreakerState::Closed);
    }
}

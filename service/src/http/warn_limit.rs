//! A rate limit for warnings a misbehaving client can trigger on every
//! request (rejected telemetry): at most one line per interval, the next one
//! counting the lines held back, so a buggy reporter is findable in the log
//! without flooding it.

use std::sync::atomic::{AtomicU64, Ordering};

/// Default interval between two rejected-telemetry warnings, ms.
pub const DEFAULT_WARN_INTERVAL_MS: u64 = 10_000;

/// One warning per `interval_ms` of the injected monotonic clock.
#[derive(Debug)]
pub struct WarnLimit {
    interval_ms: u64,
    /// Monotonic ms from which the next warning may be written.
    next_ms: AtomicU64,
    /// Warnings held back since the last one written.
    suppressed: AtomicU64,
}

impl Default for WarnLimit {
    fn default() -> Self {
        Self::new(DEFAULT_WARN_INTERVAL_MS)
    }
}

impl WarnLimit {
    /// A limit of one warning per `interval_ms`.
    pub fn new(interval_ms: u64) -> Self {
        Self {
            interval_ms,
            next_ms: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// `Some(held back since the last)` when a warning may be written at
    /// `now_ms`; `None` (and counted) when it must be held back.
    pub fn admit(&self, now_ms: u64) -> Option<u64> {
        let next = self.next_ms.load(Ordering::Relaxed);
        if now_ms >= next
            && self
                .next_ms
                .compare_exchange(
                    next,
                    now_ms.saturating_add(self.interval_ms),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            Some(self.suppressed.swap(0, Ordering::Relaxed))
        } else {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_warning_per_interval_then_the_count_held_back() {
        let w = WarnLimit::new(1_000);
        assert_eq!(w.admit(5), Some(0));
        assert_eq!(w.admit(6), None);
        assert_eq!(w.admit(1_004), None);
        assert_eq!(w.admit(1_005), Some(2));
        assert_eq!(w.admit(1_005), None);
        assert_eq!(w.admit(9_000), Some(1));
    }
}

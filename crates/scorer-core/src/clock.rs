//! Time source. Algorithms take `now_ms` as an argument; only the HTTP layer
//! and the binary read a [`Clock`], so tests drive time with [`ManualClock`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Two readings every handler needs.
pub trait Clock: Send + Sync + 'static {
    /// Monotonic milliseconds since an arbitrary origin; never goes backwards.
    /// Freshness and liveness are measured on this clock (issue #2).
    fn monotonic_ms(&self) -> u64;
    /// Wall clock, Unix ms; only used to bound reporters' clock skew and to stamp logs.
    fn wall_ms(&self) -> u64;
    /// Monotonic nanoseconds, for timing work against a µs budget (the model
    /// inference, issue #6). Defaults to `monotonic_ms × 1e6`, so a manual
    /// clock times everything as 0 ns unless advanced.
    fn monotonic_ns(&self) -> u64 {
        self.monotonic_ms().saturating_mul(1_000_000)
    }
}

/// The process clock: [`Instant`] for monotonic time, [`SystemTime`] for wall time.
#[derive(Debug)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    /// A clock whose monotonic origin is now.
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn monotonic_ms(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
    fn monotonic_ns(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
    fn wall_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0)
    }
}

/// A clock moved by hand, for tests.
#[derive(Debug)]
pub struct ManualClock {
    mono_ms: AtomicU64,
    wall_ms: AtomicU64,
}

impl ManualClock {
    /// Starts at monotonic `mono_ms` and wall `wall_ms` (Unix ms).
    pub fn new(mono_ms: u64, wall_ms: u64) -> Self {
        Self {
            mono_ms: AtomicU64::new(mono_ms),
            wall_ms: AtomicU64::new(wall_ms),
        }
    }
    /// Moves both clocks forward by `ms`.
    pub fn advance(&self, ms: u64) {
        self.mono_ms.fetch_add(ms, Ordering::SeqCst);
        self.wall_ms.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn monotonic_ms(&self) -> u64 {
        self.mono_ms.load(Ordering::SeqCst)
    }
    fn wall_ms(&self) -> u64 {
        self.wall_ms.load(Ordering::SeqCst)
    }
}

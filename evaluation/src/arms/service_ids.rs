//! The simulated cluster as the service sees it: worker `i` is `w{i}`, and
//! simulated time is the engine's monotonic clock (offset so that 0 is not
//! monotonic 0) and, from [`WALL_EPOCH_MS`], its wall clock.

/// Simulated wall clock origin, Unix ms (2025-06-15).
pub const WALL_EPOCH_MS: u64 = 1_750_000_000_000;

/// Monotonic origin offset, ms, so simulated time 0 is not monotonic 0.
const MONO_OFFSET_MS: u64 = 1_000;

/// Worker id of index `i` as the service sees it.
pub fn worker_id(i: usize) -> String {
    format!("w{i}")
}

/// Index of worker id `id` (`w{i}`).
pub(crate) fn parse_worker(id: &str) -> Option<usize> {
    id.strip_prefix('w')?.parse().ok()
}

/// The engine's monotonic clock at simulated `now_ms`.
pub(crate) fn mono(now_ms: f64) -> u64 {
    MONO_OFFSET_MS + now_ms.max(0.0) as u64
}

/// The engine's wall clock at simulated `now_ms`.
pub(crate) fn wall(now_ms: f64) -> u64 {
    WALL_EPOCH_MS + now_ms.max(0.0) as u64
}

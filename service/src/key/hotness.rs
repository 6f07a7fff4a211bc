//! Per-prefix hotness: a decayed access counter turned into a level 0..=5.
//!
//! Counters live in a fixed table of [`SLOTS`] cells indexed by a hash of the
//! prefix (a count sketch with one row): no allocation per request, bounded
//! memory whatever the key space; colliding prefixes share a counter. Each
//! cell holds an exponentially decayed count with half-life
//! `features.hotness_half_life_ms`; the level is `floor(log10(count))`
//! clamped to 0..=5 (1 access → 0, 10 → 1, …, 100_000+ → 5).

use std::sync::Mutex;

/// Cells in the counter table.
pub const SLOTS: usize = 4096;
/// Highest hotness level.
pub const HOTNESS_LEVELS: u8 = 5;

#[derive(Debug, Clone, Copy, Default)]
struct Cell {
    count: f64,
    last_ms: u64,
}

/// Decayed per-prefix access counters.
#[derive(Debug)]
pub struct HotnessTracker {
    cells: Vec<Mutex<Cell>>,
    half_life_ms: f64,
}

impl HotnessTracker {
    /// A tracker whose counts halve every `half_life_ms` (> 0) ms.
    pub fn new(half_life_ms: u64) -> Self {
        debug_assert!(half_life_ms > 0);
        Self {
            cells: (0..SLOTS).map(|_| Mutex::new(Cell::default())).collect(),
            half_life_ms: half_life_ms.max(1) as f64,
        }
    }

    fn slot(prefix: &str) -> usize {
        // FNV-1a 64: stable and cheap; quality is enough for spreading prefixes.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in prefix.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        (h % SLOTS as u64) as usize
    }

    /// Record one access to `prefix` at `now_ms` and return its hotness level 0..=5.
    pub fn touch(&self, prefix: &str, now_ms: u64) -> u8 {
        let mut cell = self.cells[Self::slot(prefix)]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let dt = now_ms.saturating_sub(cell.last_ms) as f64;
        cell.count = cell.count * (0.5f64).powf(dt / self.half_life_ms) + 1.0;
        cell.last_ms = cell.last_ms.max(now_ms);
        level(cell.count)
    }

    /// The level [`HotnessTracker::touch`] would return for one access to
    /// `prefix` at `now_ms`, without recording the access (previews).
    pub fn peek(&self, prefix: &str, now_ms: u64) -> u8 {
        let cell = *self.cells[Self::slot(prefix)]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let dt = now_ms.saturating_sub(cell.last_ms) as f64;
        level(cell.count * (0.5f64).powf(dt / self.half_life_ms) + 1.0)
    }
}

fn level(count: f64) -> u8 {
    if count < 10.0 {
        return 0;
    }
    (count.log10().floor() as u8).min(HOTNESS_LEVELS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_grows_with_log10_of_count() {
        assert_eq!(level(1.0), 0);
        assert_eq!(level(9.99), 0);
        assert_eq!(level(10.0), 1);
        assert_eq!(level(999.0), 2);
        assert_eq!(level(1e9), 5);
    }

    #[test]
    fn counts_decay_with_half_life() {
        let t = HotnessTracker::new(1_000);
        for _ in 0..99 {
            t.touch("user", 0);
        }
        assert_eq!(t.touch("user", 0), 2); // 100 accesses
        // Ten half-lives later: 100 / 1024 + 1 ≈ 1.1 → level 0.
        assert_eq!(t.touch("user", 10_000), 0);
        // Another prefix (different slot) is unaffected.
        assert_eq!(t.touch("order", 10_000), 0);
    }

    #[test]
    fn peek_predicts_touch_without_recording() {
        let t = HotnessTracker::new(1_000);
        for _ in 0..9 {
            t.touch("user", 0);
        }
        // A 10th access would reach level 1; peeking any number of times does not count.
        for _ in 0..50 {
            assert_eq!(t.peek("user", 0), 1);
        }
        assert_eq!(t.touch("user", 0), 1);
        assert_eq!(t.peek("cold", 0), 0);
    }

    #[test]
    fn time_going_backwards_does_not_panic_or_inflate() {
        let t = HotnessTracker::new(1_000);
        t.touch("k", 5_000);
        assert_eq!(t.touch("k", 1_000), 0);
    }
}

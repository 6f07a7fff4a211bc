//! `--memory-budget`: what the streaming reader ([`crate::stream`]) may
//! hold at once, and how it counts.
//!
//! The reader counts, in bytes:
//! * the window: the row group being decoded, at [`WINDOW_FACTOR`] times
//!   its uncompressed size from the Parquet footer (the decoded nested
//!   batch, its flattened candidate rows and the decoder's page buffers);
//! * the outcome map: [`OUTCOME_ENTRY_BYTES`] per (decision, worker) key;
//! * the decision ids seen: [`SEEN_ID_BYTES`] per decision;
//! * the labelled rows: [`LABELLED_ROW_BYTES`] each, plus
//!   [`LIGHTGBM_ROW_BYTES`] for LightGBM's binned copy of the training rows.
//!
//! It refuses, naming the budget and what would pass it, a row group
//! bigger than the budget, and data whose map and rows would not fit (then
//! `--sample` or sharding across machines is the way).

use std::fmt;
use std::str::FromStr;

use scorer_core::features::FEATURE_COUNT;

/// Default `--memory-budget`: 1 GiB.
pub const DEFAULT_MEMORY_BUDGET_BYTES: u64 = 1 << 30;

/// The window counts a row group at this many times its uncompressed size.
pub const WINDOW_FACTOR: u64 = 3;

/// Bytes per outcome-map entry: a 128-bit key hash, the latency (f64) and
/// the success flag, at hashbrown's 7/8 load with one control byte.
pub const OUTCOME_ENTRY_BYTES: u64 = 40;

/// Bytes per decision id seen (a 128-bit hash in a set, as above).
pub const SEEN_ID_BYTES: u64 = 20;

/// Bytes per labelled row: the features (f32), target and weight (f32),
/// slow flag, censored latency (f64), decision time (i64), rule score (f64).
pub const LABELLED_ROW_BYTES: u64 = (FEATURE_COUNT * 4 + 4 + 4 + 1 + 8 + 8 + 8) as u64;

/// Bytes per training row in LightGBM's dataset (one-byte bins, row-wise
/// and column-wise copies while it is built).
pub const LIGHTGBM_ROW_BYTES: u64 = (2 * FEATURE_COUNT) as u64;

/// A byte count given as `1073741824`, `1GiB`, `512MiB`, `64KiB` or
/// `1.5GiB` (binary units; `B` optional).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Bytes(pub u64);

impl FromStr for Bytes {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let scale: u64 = match unit.trim() {
            "" | "B" => 1,
            "KiB" => 1 << 10,
            "MiB" => 1 << 20,
            "GiB" => 1 << 30,
            "TiB" => 1 << 40,
            other => {
                return Err(format!(
                    "unknown unit {other:?} in {s:?}: give bytes, or KiB, MiB, GiB, TiB"
                ));
            }
        };
        let value: f64 = num
            .parse()
            .map_err(|_| format!("{s:?} is not a size (e.g. 1GiB, 512MiB, 1073741824)"))?;
        let bytes = value * scale as f64;
        if !(bytes.is_finite() && bytes >= 1.0 && bytes < u64::MAX as f64) {
            return Err(format!("{s:?} is not a positive size"));
        }
        Ok(Bytes(bytes as u64))
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        if b >= 1 << 30 {
            write!(f, "{:.2} GiB ({b} bytes)", b as f64 / (1u64 << 30) as f64)
        } else if b >= 1 << 20 {
            write!(f, "{:.1} MiB ({b} bytes)", b as f64 / (1u64 << 20) as f64)
        } else {
            write!(f, "{b} bytes")
        }
    }
}

/// What the reader holds, counted as the module docs say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    /// Outcome-map entries.
    pub outcome_keys: u64,
    /// Decision ids seen.
    pub seen_ids: u64,
    /// Labelled rows held (training and validation).
    pub labelled_rows: u64,
    /// Training rows LightGBM will bin.
    pub training_rows: u64,
}

impl Held {
    /// Bytes counted.
    pub fn bytes(&self) -> u64 {
        self.outcome_keys * OUTCOME_ENTRY_BYTES
            + self.seen_ids * SEEN_ID_BYTES
            + self.labelled_rows * LABELLED_ROW_BYTES
            + self.training_rows * LIGHTGBM_ROW_BYTES
    }
}

/// Bytes a row group of `uncompressed_bytes` takes while it is read.
pub fn window_bytes(uncompressed_bytes: u64) -> u64 {
    uncompressed_bytes.saturating_mul(WINDOW_FACTOR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_binary_units_and_nonsense_is_refused() {
        assert_eq!("1GiB".parse(), Ok(Bytes(1 << 30)));
        assert_eq!("512 MiB".parse(), Ok(Bytes(512 << 20)));
        assert_eq!("1.5GiB".parse(), Ok(Bytes(3 << 29)));
        assert_eq!("4096".parse(), Ok(Bytes(4096)));
        assert_eq!("4096B".parse(), Ok(Bytes(4096)));
        for bad in ["", "GiB", "-1GiB", "1GB", "0", "1e9", "nanMiB"] {
            assert!(bad.parse::<Bytes>().is_err(), "{bad:?} should be refused");
        }
        assert_eq!(Bytes(3 << 29).to_string(), "1.50 GiB (1610612736 bytes)");
    }

    #[test]
    fn held_bytes_count_each_part() {
        let h = Held {
            outcome_keys: 10,
            seen_ids: 10,
            labelled_rows: 10,
            training_rows: 8,
        };
        assert_eq!(
            h.bytes(),
            10 * 40 + 10 * 20 + 10 * LABELLED_ROW_BYTES + 8 * LIGHTGBM_ROW_BYTES
        );
        assert_eq!(LABELLED_ROW_BYTES, 201);
    }
}

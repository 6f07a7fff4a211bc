//! `--memory-budget`: what the streaming reader ([`crate::stream`]) may
//! hold at once, and how it counts.
//!
//! The reader counts, in bytes:
//! * the window: the row group being decoded, at [`WINDOW_FACTOR`] times
//!   its uncompressed size from the Parquet footer (the decoded nested
//!   batch, its flattened candidate rows and the decoder's page buffers);
//! * the outcome map and the set of decision ids seen, as allocated
//!   ([`hash_table_bytes`]: 33 bytes per bucket for the map, 17 for the
//!   set, at most 8/7 buckets per entry rounded up to a power of two);
//! * the labelled rows as allocated ([`LABELLED_ROW_BYTES`] each when the
//!   count is known up front), plus [`LIGHTGBM_ROW_BYTES`] per training
//!   row for LightGBM's dataset and training state.
//!
//! * [`RUNTIME_RESERVE_BYTES`] for what it does not track.
//!
//! It refuses, naming the budget and what would pass it, a row group
//! bigger than the budget, and data whose map and rows would not fit (then
//! `--sample` or sharding across machines is the way).

use std::fmt;
use std::str::FromStr;

use scorer_core::features::FEATURE_COUNT;

use crate::error::{Result, TrainerError};

/// Counted for what the reader does not track: the code, the allocator,
/// LightGBM's and tract's working memory, and the validation step's
/// predictions (64 MiB; measured: 10 M decisions sampled to fit 1 GiB
/// peaked 18 MiB above the counted bytes without it).
pub const RUNTIME_RESERVE_BYTES: u64 = 64 << 20;

/// Default `--memory-budget`: 1 GiB.
pub const DEFAULT_MEMORY_BUDGET_BYTES: u64 = 1 << 30;

/// The window counts a row group at this many times its uncompressed size.
pub const WINDOW_FACTOR: u64 = 3;

/// Bytes per labelled row: the features (f32), target and weight (f32),
/// slow flag, censored latency (f64), decision time (i64), rule score (f64).
pub const LABELLED_ROW_BYTES: u64 = (FEATURE_COUNT * 4 + 4 + 4 + 1 + 8 + 8 + 8) as u64;

/// Bytes per training row in LightGBM's dataset and training state
/// (bins, the row-wise copy `force_row_wise` builds, gradients, scores,
/// leaf indices). Measured: 10 M synthetic decisions, 7.84 M training
/// rows from a spill file, peaked at 1.78 GB with 0.41 GB of other rows
/// held: 167 bytes a row.
pub const LIGHTGBM_ROW_BYTES: u64 = 168;

/// Bytes per validation row for its predictions (LightGBM's and the
/// served, f64 each).
pub const PREDICTION_BYTES: u64 = 16;

/// Bytes a hash table (hashbrown, as std's) of `capacity` entries of
/// `slot_bytes` takes: its buckets, a power of two holding `capacity` at a
/// load of 7/8, each with the slot and one control byte.
pub fn hash_table_bytes(capacity: usize, slot_bytes: usize) -> u64 {
    if capacity == 0 {
        return 0;
    }
    let buckets = if capacity < 8 {
        (capacity + 1).next_power_of_two()
    } else {
        (capacity * 8 / 7).next_power_of_two()
    };
    (buckets * (slot_bytes + 1)) as u64
}

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

/// What the reader holds, as the module docs count it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    /// Outcome-map entries.
    pub outcome_keys: u64,
    /// Bytes of the outcome map.
    pub outcome_map_bytes: u64,
    /// Decision ids seen.
    pub seen_ids: u64,
    /// Bytes of the set of ids seen.
    pub seen_ids_bytes: u64,
    /// Labelled rows held (training and validation).
    pub labelled_rows: u64,
    /// Bytes of the labelled rows (as allocated).
    pub labelled_bytes: u64,
    /// Training rows LightGBM will bin.
    pub training_rows: u64,
}

impl Held {
    /// Bytes counted.
    pub fn bytes(&self) -> u64 {
        self.outcome_map_bytes
            + self.seen_ids_bytes
            + self.labelled_bytes
            + self.training_rows * LIGHTGBM_ROW_BYTES
    }
}

/// Bytes a row group of `uncompressed_bytes` takes while it is read.
pub fn window_bytes(uncompressed_bytes: u64) -> u64 {
    uncompressed_bytes.saturating_mul(WINDOW_FACTOR)
}

/// Bytes per line of the sample LightGBM holds while it finds the bin
/// boundaries of a spill file (up to `bin_construct_sample_cnt` = 200 000
/// lines: the text and its parsed values). Measured: 157 000 spilled rows
/// peaked 120 MB above the same run in memory, 764 bytes a line.
pub const LIGHTGBM_FILE_SAMPLE_LINE_BYTES: u64 = 800;

/// Lines LightGBM samples from a data file for its bin boundaries
/// (`bin_construct_sample_cnt`, its default).
pub const LIGHTGBM_FILE_SAMPLE_LINES: u64 = 200_000;

/// Where a refusal comes from, for the advice it gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Command {
    /// `trainer train`: a sample, a larger budget, or shards.
    Train,
    /// `trainer validate`: a larger budget.
    Validate,
}

impl Command {
    fn advice(self) -> &'static str {
        match self {
            Command::Train => {
                "raise --memory-budget, train on a time-stratified sample (--sample), or split the log files across machines (--machines)"
            }
            Command::Validate => {
                "raise --memory-budget, or validate on fewer log directories at a time"
            }
        }
    }
}

/// The budget as the reader spends it: the limit, the peak counted, and
/// the largest row-group window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Budget {
    pub(crate) limit: u64,
    pub(crate) peak: u64,
    pub(crate) window: u64,
    pub(crate) command: Command,
}

impl Budget {
    /// A budget of `limit` bytes for `command`.
    pub(crate) fn new(limit: u64, command: Command) -> Self {
        Self {
            limit,
            peak: 0,
            window: 0,
            command,
        }
    }

    /// Refuses when `held` and a `window` pass the limit.
    pub(crate) fn check(&mut self, held: &Held, window: u64, what: &str) -> Result<()> {
        let counted = held.bytes() + window + RUNTIME_RESERVE_BYTES;
        self.peak = self.peak.max(counted);
        if counted > self.limit {
            return Err(TrainerError::MemoryBudget(format!(
                "{what} would hold {} (outcome map of {} keys {}, decision ids {} after {} decisions, {} labelled rows {}, a {} row-group window, 64 MiB for the process), more than --memory-budget {}: {}",
                Bytes(counted),
                held.outcome_keys,
                Bytes(held.outcome_map_bytes),
                Bytes(held.seen_ids_bytes),
                held.seen_ids,
                held.labelled_rows,
                Bytes(held.labelled_bytes),
                Bytes(window),
                Bytes(self.limit),
                self.command.advice()
            )));
        }
        Ok(())
    }

    /// The largest sample of training rows that fits beside the map, the
    /// ids and `valid_rows` validation rows, if any.
    fn sample_that_fits(&self, held: &Held, ids: u64, valid_rows: u64) -> Option<u64> {
        let fixed = held.outcome_map_bytes
            + ids
            + self.window
            + RUNTIME_RESERVE_BYTES
            + valid_rows * LABELLED_ROW_BYTES;
        let fits = self.limit.saturating_sub(fixed) / (LABELLED_ROW_BYTES + LIGHTGBM_ROW_BYTES);
        (fits >= 2).then_some(fits)
    }

    /// Refuses, before the decisions are read, rows that cannot fit in
    /// memory: with the map held and the ids to come, `rows` labelled rows
    /// of which `train_rows` train (a sample of `of_train_rows`).
    /// `split_copy`: the validation rows are copied out of one table of
    /// every row once it is read (so they count twice).
    pub(crate) fn project(
        &mut self,
        held: &Held,
        ids: u64,
        (rows, train_rows, of_train_rows): (usize, usize, usize),
        split_copy: bool,
    ) -> Result<()> {
        let valid_rows = (rows - train_rows) as u64;
        let copy = if split_copy {
            valid_rows * LABELLED_ROW_BYTES
        } else {
            0
        };
        let fixed = held.outcome_map_bytes + ids + self.window + RUNTIME_RESERVE_BYTES + copy;
        let per_train = LABELLED_ROW_BYTES + LIGHTGBM_ROW_BYTES;
        let projected = fixed + valid_rows * LABELLED_ROW_BYTES + train_rows as u64 * per_train;
        self.peak = self.peak.max(projected);
        if projected <= self.limit {
            return Ok(());
        }
        let hint = match self.sample_that_fits(held, ids, valid_rows) {
            Some(fits) => format!(
                "--sample {fits} (a fraction {:.3} of the {of_train_rows} training rows, chosen evenly over time) would fit; without --sample the training rows go to disk if that fits; or raise --memory-budget, or split the log files across machines (--machines)",
                fits as f64 / of_train_rows.max(1) as f64
            ),
            None => format!(
                "not even the validation window ({valid_rows} rows) fits beside the outcome map: raise --memory-budget, lower --valid-fraction, or split the log files across machines (--machines)"
            ),
        };
        Err(TrainerError::MemoryBudget(format!(
            "{rows} labelled rows ({train_rows} to train) need about {} with the outcome map ({}) and the decision ids ({}), more than --memory-budget {}: {hint}",
            Bytes(projected),
            Bytes(held.outcome_map_bytes),
            Bytes(ids),
            Bytes(self.limit)
        )))
    }

    /// Refuses, before the decisions are read, a spill that cannot fit:
    /// while reading, the map, the ids and the `metrics_rows` kept in
    /// memory; while LightGBM bins and trains on the `train_rows` from
    /// disk, its sample of the file and its dataset; while validating, the
    /// `valid_rows` read back and their predictions.
    pub(crate) fn project_spill(
        &mut self,
        held: &Held,
        ids: u64,
        (valid_rows, metrics_rows, train_rows): (usize, usize, usize),
    ) -> Result<()> {
        let kept = metrics_rows as u64 * LABELLED_ROW_BYTES;
        let reading = held.outcome_map_bytes + ids + self.window + kept;
        let sample_lines = (train_rows as u64).min(LIGHTGBM_FILE_SAMPLE_LINES);
        let training = kept
            + train_rows as u64 * LIGHTGBM_ROW_BYTES
            + sample_lines * LIGHTGBM_FILE_SAMPLE_LINE_BYTES;
        let validating = kept + valid_rows as u64 * (LABELLED_ROW_BYTES + PREDICTION_BYTES);
        let projected = reading.max(training).max(validating) + RUNTIME_RESERVE_BYTES;
        self.peak = self.peak.max(projected);
        if projected <= self.limit {
            return Ok(());
        }
        let sample = match self.sample_that_fits(held, ids, valid_rows as u64) {
            Some(fits) => format!(
                "--sample {fits} (a fraction {:.3} of them, chosen evenly over time) would fit, or ",
                fits as f64 / train_rows.max(1) as f64
            ),
            None => String::new(),
        };
        Err(TrainerError::MemoryBudget(format!(
            "even with the {train_rows} training rows on disk, the logs need about {} (outcome map {}, decision ids {}, LightGBM's sample and dataset of the training rows, the {valid_rows} validation rows), more than --memory-budget {}: {sample}raise --memory-budget, lower --valid-fraction, or split the log files across machines (--machines)",
            Bytes(projected),
            Bytes(held.outcome_map_bytes),
            Bytes(ids),
            Bytes(self.limit)
        )))
    }
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
    fn hash_tables_count_their_power_of_two_buckets() {
        assert_eq!(hash_table_bytes(0, 32), 0);
        assert_eq!(hash_table_bytes(3, 32), 4 * 33);
        assert_eq!(hash_table_bytes(14, 32), 16 * 33);
        assert_eq!(hash_table_bytes(1_000_000, 32), (1 << 21) * 33);
        assert_eq!(LABELLED_ROW_BYTES, 201);
    }
}

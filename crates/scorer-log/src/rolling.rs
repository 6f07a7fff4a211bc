//! When to roll a file ([`roll_reason`], a pure function) and the one open file
//! of a log kind ([`RollingFile`]): a write-ahead file ([`super::wal`]) that
//! each batch is appended to, sealed at roll-over and handed to
//! [`super::compact`] for its Parquet file.
//!
//! Size is the bytes of the write-ahead file: Arrow IPC, about the records'
//! in-memory size, before Parquet's encodings and compression; so the
//! Parquet file is several times smaller than `max_bytes`.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;
use arrow::datatypes::DataType;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use super::LogKind;
use super::config::LogConfig;
use super::error::LogError;
use super::naming::{day_of, final_path, max_seq, wal_path};
use super::schema::{
    CANDIDATES_COLUMN, FEATURE_ITEM_NAME, candidate_fields, decisions_schema, outcomes_schema,
};
use super::wal::{WalOpener, WalWriter, file_opener};

/// Zstd level used for every log file (the Parquet default, fast).
pub const ZSTD_LEVEL: i32 = 1;
/// Attempts to find a file name not already taken before giving up.
pub const MAX_NAME_ATTEMPTS: u32 = 1_000;

/// Why a file was rolled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RollReason {
    /// `rows >= max_rows`.
    Rows,
    /// Estimated `bytes >= max_bytes`.
    Bytes,
    /// `now_ms - opened_at_ms >= max_age_ms`.
    Age,
    /// The UTC date of `now_ms` differs from that of `opened_at_ms`, so the file's
    /// `dt=` partition would no longer match.
    DayChanged,
}

/// Whether an open file holding `rows` rows and an estimated `bytes` bytes,
/// opened at wall time `opened_at_ms` (Unix ms), must be closed at `now_ms`.
/// Checked in the order rows, bytes, age, day; an empty file (`rows == 0`) never
/// rolls (no file is opened before the first row). A clock that went backwards
/// counts as age 0.
pub fn roll_reason(
    rows: u64,
    bytes: u64,
    opened_at_ms: u64,
    now_ms: u64,
    cfg: &LogConfig,
) -> Option<RollReason> {
    if rows == 0 {
        None
    } else if rows >= cfg.max_rows {
        Some(RollReason::Rows)
    } else if bytes >= cfg.max_bytes {
        Some(RollReason::Bytes)
    } else if now_ms.saturating_sub(opened_at_ms) >= cfg.max_age_ms {
        Some(RollReason::Age)
    } else if day_of(now_ms) != day_of(opened_at_ms) {
        Some(RollReason::DayChanged)
    } else {
        None
    }
}

/// Columns written with dictionary encoding: strings that take few values
/// (readers can load them as categoricals). A name is a top-level column of
/// the decisions or outcomes file, or a field of a `candidates` item
/// ([`leaf_paths`]). Every other string is written PLAIN: ids and keys rarely
/// repeat, and the per-decision labels (`policy`, `config_hash`, …) cost
/// less as PLAIN bytes that zstd folds into one match per run than as a
/// dictionary lookup.
pub const DICTIONARY_COLUMNS: [&str; 3] = ["pick", "worker_id", "penalty_state"];

/// Integer columns slowly changing from row to row, written
/// DELTA_BINARY_PACKED (a run of equal values costs a few bits per row).
pub const DELTA_BINARY_PACKED_COLUMNS: [&str; 4] =
    ["ts_ms", "shard_id", "timeout_ms", "batch_size"];

/// Float columns written BYTE_STREAM_SPLIT (smaller after zstd than PLAIN).
pub const BYTE_STREAM_SPLIT_COLUMNS: [&str; 5] = [
    "pick_probability",
    "rule_score",
    "model_action",
    "final_score",
    "probability",
];

/// Parquet leaf path of the `features` values inside a `candidates` item
/// (`candidates.list.item.features.list.item`).
pub const FEATURES_LEAF_PATH: [&str; 6] = [
    CANDIDATES_COLUMN,
    "list",
    FEATURE_ITEM_NAME,
    "features",
    "list",
    FEATURE_ITEM_NAME,
];

/// The Parquet leaf paths of column `name`: the top-level column `name`
/// (of the decisions or the outcomes file), and when `name` is a field of a
/// `candidates` item, `candidates.list.item.<name>` too (`worker_id` is both).
pub fn leaf_paths(name: &str) -> Vec<ColumnPath> {
    let mut paths = vec![ColumnPath::from(name)];
    if candidate_fields().find(name).is_some() {
        paths.push(ColumnPath::from(
            [CANDIDATES_COLUMN, "list", FEATURE_ITEM_NAME, name]
                .iter()
                .map(|s| (*s).to_string())
                .collect::<Vec<_>>(),
        ));
    }
    paths
}

/// Largest data page, bytes, before it is encoded and compressed. A column
/// writer buffers its current page uncompressed; with parquet's 1 MiB
/// default, the ~24 columns of an open row group held up to ~24 MiB per
/// file (measured: RSS 93 MiB with the log on, 45 MiB off, `http_score`
/// bench with 1 000 workers).
pub const PAGE_BYTES: usize = 64 * 1024;

/// Parquet writer settings for log files: zstd [`ZSTD_LEVEL`]; row groups of at
/// most `cfg.row_group_rows` rows; dictionary encoding only for
/// [`DICTIONARY_COLUMNS`]; [`DELTA_BINARY_PACKED_COLUMNS`] and
/// [`BYTE_STREAM_SPLIT_COLUMNS`] so encoded; the `features` values
/// BYTE_STREAM_SPLIT-encoded (about 15% smaller after zstd than PLAIN, and
/// faster) without statistics (min/max over all 42 features of a page is
/// meaningless). Page statistics (min/max) are kept for the numeric,
/// boolean and timestamp columns (e.g. `ts_ms` pruning) and dropped for the
/// string columns, where a page's min/max id or name is rarely a useful
/// filter and the per-value comparisons cost 11% of the writer's
/// instructions. All these encodings are read by pyarrow, polars, DuckDB
/// and Spark ≥ 3.2 (BYTE_STREAM_SPLIT).
pub fn writer_properties(cfg: &LogConfig) -> WriterProperties {
    // ok: ZSTD_LEVEL is a valid constant level; fall back to the default anyway.
    let level = ZstdLevel::try_new(ZSTD_LEVEL).unwrap_or_default();
    let features = ColumnPath::from(
        FEATURES_LEAF_PATH
            .iter()
            .map(|s| (*s).to_string())
            .collect::<Vec<_>>(),
    );
    let mut builder = WriterProperties::builder()
        .set_compression(Compression::ZSTD(level))
        .set_data_page_size_limit(PAGE_BYTES)
        .set_max_row_group_row_count(Some(cfg.row_group_rows.max(1)))
        .set_dictionary_enabled(false)
        .set_column_encoding(features.clone(), Encoding::BYTE_STREAM_SPLIT)
        .set_column_statistics_enabled(features, EnabledStatistics::None);
    for path in DICTIONARY_COLUMNS.iter().flat_map(|c| leaf_paths(c)) {
        builder = builder.set_column_dictionary_enabled(path, true);
    }
    let encoded = [
        (
            &DELTA_BINARY_PACKED_COLUMNS[..],
            Encoding::DELTA_BINARY_PACKED,
        ),
        (&BYTE_STREAM_SPLIT_COLUMNS[..], Encoding::BYTE_STREAM_SPLIT),
    ];
    for (columns, encoding) in encoded {
        for path in columns.iter().flat_map(|c| leaf_paths(c)) {
            builder = builder.set_column_encoding(path, encoding);
        }
    }
    let schemas = [decisions_schema(), outcomes_schema()];
    let strings = schemas
        .iter()
        .flat_map(|s| s.fields().iter())
        .filter(|f| *f.data_type() == DataType::Utf8);
    for path in strings.flat_map(|f| leaf_paths(f.name())) {
        builder = builder.set_column_statistics_enabled(path, EnabledStatistics::None);
    }
    // A page of candidates mixes many decisions: min/max of their scores
    // prune nothing a decision-level column would not.
    for field in candidate_fields().iter() {
        if let Some(path) = leaf_paths(field.name()).into_iter().nth(1) {
            builder = builder.set_column_statistics_enabled(path, EnabledStatistics::None);
        }
    }
    builder.build()
}

/// A write-ahead file sealed at roll-over, to be compacted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedFile {
    /// The write-ahead file.
    pub wal: PathBuf,
    /// The Parquet file it becomes.
    pub final_path: PathBuf,
    /// Rows in it.
    pub rows: u64,
}

struct OpenFile {
    wal: WalWriter,
    wal_path: PathBuf,
    final_path: PathBuf,
    opened_at_ms: u64,
    rows: u64,
}

/// The currently open file of one log kind under one root directory.
pub struct RollingFile {
    root: PathBuf,
    kind: LogKind,
    fsync: super::config::FsyncPolicy,
    opener: WalOpener,
    next_seq: u64,
    open: Option<OpenFile>,
}

impl std::fmt::Debug for RollingFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RollingFile")
            .field("root", &self.root)
            .field("kind", &self.kind)
            .field("next_seq", &self.next_seq)
            .field("open", &self.open.as_ref().map(|o| &o.wal_path))
            .finish()
    }
}

impl RollingFile {
    /// A roller for `kind` under `root`; sequence numbers start past any already
    /// present under `root`. Opens no file yet.
    pub fn new(root: PathBuf, kind: LogKind, cfg: &LogConfig) -> Self {
        let next_seq = max_seq(&root, kind).saturating_add(1);
        Self {
            root,
            kind,
            fsync: cfg.fsync,
            opener: file_opener(),
            next_seq,
            open: None,
        }
    }

    /// This roller creating its write-ahead files with `opener`.
    pub fn with_opener(mut self, opener: WalOpener) -> Self {
        self.opener = opener;
        self
    }

    /// The log kind.
    pub fn kind(&self) -> LogKind {
        self.kind
    }

    /// Rows in the open file (0 if none).
    pub fn rows(&self) -> u64 {
        self.open.as_ref().map_or(0, |o| o.rows)
    }

    /// Size of the open write-ahead file in bytes (0 if none).
    pub fn estimated_bytes(&self) -> u64 {
        self.open.as_ref().map_or(0, |o| o.wal.bytes())
    }

    /// Rows the open file can still take before the row limit (≥ 1).
    pub fn remaining_rows(&self, cfg: &LogConfig) -> u64 {
        cfg.max_rows.saturating_sub(self.rows()).max(1)
    }

    /// Appends `batch` to the write-ahead file, opening one stamped `now_ms`
    /// if none is open. Empty batches are ignored. Once this returns, the
    /// rows survive a crash of the process.
    ///
    /// # Errors
    /// Creating the directory or file failed (the batch is not taken), or
    /// writing failed: then the file holds the batch
    /// ([`RollingFile::pending`]) until [`RollingFile::retry`] writes it.
    pub fn write(&mut self, batch: &RecordBatch, now_ms: u64) -> Result<(), LogError> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        if self.open.is_none() {
            self.open = Some(self.open_file(now_ms)?);
        }
        let Some(open) = self.open.as_mut() else {
            return Ok(()); // ok: set just above
        };
        let result = open.wal.append(batch);
        if result.is_ok() || open.wal.pending() {
            open.rows = open
                .rows
                .saturating_add(u64::try_from(batch.num_rows()).unwrap_or(u64::MAX));
        }
        result
    }

    /// Whether a write-ahead file is open.
    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// Whether the open file holds rows a failed write left in memory.
    pub fn pending(&self) -> bool {
        self.open.as_ref().is_some_and(|o| o.wal.pending())
    }

    /// Rows a failed write left in memory (see [`WalWriter::pending_rows`]).
    pub fn pending_rows(&self) -> u64 {
        self.open.as_ref().map_or(0, |o| o.wal.pending_rows())
    }

    /// Writes what a failed write left in memory, in the same file.
    ///
    /// # Errors
    /// The write failed again.
    pub fn retry(&mut self) -> Result<(), LogError> {
        match self.open.as_mut() {
            Some(open) => open.wal.drain(),
            None => Ok(()),
        }
    }

    /// Seals the open file if [`roll_reason`] says so at `now_ms`.
    ///
    /// # Errors
    /// As [`RollingFile::close`].
    pub fn maybe_roll(
        &mut self,
        now_ms: u64,
        cfg: &LogConfig,
    ) -> Result<Option<(SealedFile, RollReason)>, LogError> {
        let Some(open) = &self.open else {
            return Ok(None);
        };
        let reason = roll_reason(
            open.rows,
            self.estimated_bytes(),
            open.opened_at_ms,
            now_ms,
            cfg,
        );
        match reason {
            Some(reason) => Ok(self.close()?.map(|c| (c, reason))),
            None => Ok(None),
        }
    }

    /// Seals the open write-ahead file (end-of-stream marker, fsync) for
    /// compaction. `Ok(None)` if no file was open.
    ///
    /// # Errors
    /// Writing or syncing failed; the file is left for start-up recovery.
    pub fn close(&mut self) -> Result<Option<SealedFile>, LogError> {
        let Some(open) = self.open.take() else {
            return Ok(None);
        };
        let wal = open.wal.seal()?;
        Ok(Some(SealedFile {
            wal,
            final_path: open.final_path,
            rows: open.rows,
        }))
    }

    fn open_file(&mut self, now_ms: u64) -> Result<OpenFile, LogError> {
        for _ in 0..MAX_NAME_ATTEMPTS {
            let seq = self.next_seq;
            self.next_seq = self.next_seq.saturating_add(1);
            let final_path = final_path(&self.root, self.kind, now_ms, seq);
            let wal_path = wal_path(&final_path);
            if let Some(dir) = final_path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| LogError::io(dir, e))?;
            }
            if final_path.exists() || wal_path.exists() {
                continue;
            }
            let wal =
                match WalWriter::create(&wal_path, &self.kind.schema(), self.fsync, &self.opener) {
                    Ok(w) => w,
                    Err(LogError::Io { source, .. })
                        if source.kind() == std::io::ErrorKind::AlreadyExists =>
                    {
                        continue;
                    }
                    Err(e) => return Err(e),
                };
            return Ok(OpenFile {
                wal,
                wal_path,
                final_path,
                opened_at_ms: now_ms,
                rows: 0,
            });
        }
        Err(LogError::io(
            &self.root,
            std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "no free log file name found",
            ),
        ))
    }
}

/// Fsyncs a directory so renames in it are durable (no-op off Unix).
pub(crate) fn sync_dir(dir: &Path) -> Result<(), LogError> {
    #[cfg(unix)]
    {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| LogError::io(dir, e))?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> LogConfig {
        LogConfig {
            max_rows: 100,
            max_bytes: 1_000,
            max_age_ms: 60_000,
            ..LogConfig::default()
        }
    }

    // 2024-03-05T10:00:00Z
    const T0: u64 = 1_709_632_800_000;

    #[test]
    fn data_pages_are_cut_small_so_open_row_groups_stay_small() {
        let props = writer_properties(&LogConfig::default());
        assert_eq!(props.data_page_size_limit(), PAGE_BYTES);
        const { assert!(PAGE_BYTES <= 64 * 1024, "parquet's default is 1 MiB") };
    }

    #[test]
    fn empty_never_rolls() {
        assert_eq!(roll_reason(0, 10_000, 0, u64::MAX, &cfg()), None);
    }

    #[test]
    fn rows_threshold() {
        assert_eq!(roll_reason(99, 0, T0, T0, &cfg()), None);
        assert_eq!(roll_reason(100, 0, T0, T0, &cfg()), Some(RollReason::Rows));
        assert_eq!(roll_reason(101, 0, T0, T0, &cfg()), Some(RollReason::Rows));
    }

    #[test]
    fn bytes_threshold() {
        assert_eq!(roll_reason(1, 999, T0, T0, &cfg()), None);
        assert_eq!(
            roll_reason(1, 1_000, T0, T0, &cfg()),
            Some(RollReason::Bytes)
        );
    }

    #[test]
    fn age_threshold_and_backwards_clock() {
        assert_eq!(roll_reason(1, 0, T0, T0 + 59_999, &cfg()), None);
        assert_eq!(
            roll_reason(1, 0, T0, T0 + 60_000, &cfg()),
            Some(RollReason::Age)
        );
        assert_eq!(roll_reason(1, 0, T0, T0 - 5, &cfg()), None);
    }

    #[test]
    fn day_change_and_priority() {
        let before_midnight = T0 + 14 * 3_600_000 - 1; // 23:59:59.999
        assert_eq!(
            roll_reason(1, 0, before_midnight, before_midnight + 1, &cfg()),
            Some(RollReason::DayChanged)
        );
        // Rows win over everything else.
        assert_eq!(
            roll_reason(100, 5_000, T0, T0 + 1_000_000_000, &cfg()),
            Some(RollReason::Rows)
        );
        assert_eq!(
            roll_reason(1, 5_000, T0, T0 + 1_000_000_000, &cfg()),
            Some(RollReason::Bytes)
        );
    }
}

//! Reading the log files of one kind into memory, whole or keeping only
//! the rows a filter selects as each file is read.

use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;
use scorer_core::features::FEATURE_SCHEMA_VERSION;
use scorer_log::{LoadedLog, LogKind, read_file};

use crate::error::{Result, TrainerError};

/// Which rows of a decision batch to keep while reading.
pub(crate) type RowFilter<'a> = &'a dyn Fn(&RecordBatch) -> Result<arrow::array::BooleanArray>;

/// The files of `kind`, read whole, in order, telling `on_file` of each.
pub(crate) fn read_kind(
    files: Vec<PathBuf>,
    kind: LogKind,
    on_file: &mut dyn FnMut(&Path, usize, usize),
) -> Result<LoadedLog> {
    read_kind_where(files, kind, None, on_file)
}

/// As [`read_kind`], keeping of each file's batches only the rows `keep`
/// selects, so that what is held is what is kept.
pub(crate) fn read_kind_where(
    files: Vec<PathBuf>,
    kind: LogKind,
    keep: Option<RowFilter<'_>>,
    on_file: &mut dyn FnMut(&Path, usize, usize),
) -> Result<LoadedLog> {
    let mut all = LoadedLog::default();
    let total = files.len();
    for (i, f) in files.into_iter().enumerate() {
        on_file(&f, i + 1, total);
        let mut log = read_file(&f, kind)?;
        if let Some(keep) = keep {
            let mut kept = Vec::with_capacity(log.batches.len());
            for b in &log.batches {
                let mask = keep(b)?;
                kept.push(arrow::compute::filter_record_batch(b, &mask)?);
            }
            log.rows = kept.iter().map(RecordBatch::num_rows).sum();
            log.batches = kept;
        }
        if let Some((path, reason)) = log.skipped.into_iter().next() {
            return Err(TrainerError::SchemaMismatch {
                path,
                reason,
                expected: FEATURE_SCHEMA_VERSION,
            });
        }
        all.rows += log.rows;
        all.batches.extend(log.batches);
        all.files.extend(log.files);
    }
    Ok(all)
}

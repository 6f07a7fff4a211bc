//! Reading one final log file a row group at a time, for readers that must
//! stay within a memory budget (the trainer on logs bigger than memory).
//!
//! [`FileStream::open`] checks the file's layout as [`super::reader`] does
//! and reports each row group's size from the footer before anything is
//! decoded; iterating then yields the file's batches (at most one row
//! group, and at most [`super::reader::READ_BATCH_ROWS`] rows, per batch) as candidate rows or
//! outcomes, exactly as [`super::read_file`] would have returned them in one
//! piece. Each decode runs under `catch_unwind`, so corrupt bytes are an
//! error naming the file, never a panic.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};

use super::LogKind;
use super::error::ReadError;
use super::flatten::{candidate_rows, is_nested};
use super::reader::{READ_BATCH_ROWS, complete, layout_of, panic_message, restamp};
use super::schema::{candidate_rows_schema, outcomes_schema};
use super::upgrade::{feature_version, upgrade_features};
use scorer_core::features::FEATURE_SCHEMA_VERSION;

/// One row group as the footer describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowGroupShape {
    /// Rows (decisions in a nested decisions file, candidate rows in a flat
    /// one, outcomes in an outcomes file).
    pub rows: usize,
    /// Uncompressed size of its column chunks, bytes.
    pub uncompressed_bytes: u64,
}

/// An open log file, yielding its batches in order.
pub struct FileStream {
    path: PathBuf,
    kind: LogKind,
    layout: SchemaRef,
    /// The feature schema the file's vectors were written under.
    features_from: String,
    row_groups: Vec<RowGroupShape>,
    reader: Option<ParquetRecordBatchReader>,
}

impl std::fmt::Debug for FileStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileStream")
            .field("path", &self.path)
            .field("kind", &self.kind)
            .field("row_groups", &self.row_groups.len())
            .finish_non_exhaustive()
    }
}

fn guarded<T>(path: &Path, f: impl FnOnce() -> Result<T, String>) -> Result<T, ReadError> {
    let reason = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => return Ok(v),
        Ok(Err(reason)) => reason,
        Err(payload) => panic_message(payload.as_ref()),
    };
    Err(ReadError::File {
        path: path.to_path_buf(),
        reason,
    })
}

/// What [`FileStream::open`] found.
#[derive(Debug)]
pub enum Opened {
    /// The file is of a layout this reader loads.
    Stream(FileStream),
    /// Readable footer but another schema or version: the reason (as
    /// [`super::LoadedLog::skipped`] reports it).
    Mismatch(String),
}

impl FileStream {
    /// Opens `path` as `kind` and reads its footer.
    ///
    /// # Errors
    /// [`ReadError::File`] if the file cannot be opened or its footer read.
    pub fn open(path: &Path, kind: LogKind) -> Result<Opened, ReadError> {
        guarded(path, || {
            let file = scorer_core::regular_file::open_regular(path).map_err(|e| e.to_string())?;
            let builder =
                ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| e.to_string())?;
            let layout = match layout_of(kind, builder.schema()) {
                Ok(schema) => schema,
                Err(reason) => return Ok(Opened::Mismatch(reason)),
            };
            let features_from = feature_version(builder.schema())
                .unwrap_or_else(|| FEATURE_SCHEMA_VERSION.to_owned());
            let row_groups: Vec<RowGroupShape> = builder
                .metadata()
                .row_groups()
                .iter()
                .map(|rg| RowGroupShape {
                    rows: usize::try_from(rg.num_rows()).unwrap_or(0),
                    uncompressed_bytes: u64::try_from(rg.total_byte_size()).unwrap_or(0),
                })
                .collect();
            // A batch holds no more rows than the largest row group, so
            // the window is about one group.
            let largest = row_groups.iter().map(|g| g.rows).max();
            let reader = builder
                .with_batch_size(largest.unwrap_or(1).clamp(1, READ_BATCH_ROWS))
                .build()
                .map_err(|e| e.to_string())?;
            Ok(Opened::Stream(FileStream {
                path: path.to_path_buf(),
                kind,
                layout,
                features_from,
                row_groups,
                reader: Some(reader),
            }))
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its row groups, from the footer.
    pub fn row_groups(&self) -> &[RowGroupShape] {
        &self.row_groups
    }

    /// Rows in the file, from the footer.
    pub fn rows(&self) -> usize {
        self.row_groups.iter().map(|g| g.rows).sum()
    }

    fn decode_next(&mut self) -> Option<Result<RecordBatch, String>> {
        let batch = match self.reader.as_mut()?.next()? {
            Ok(b) => b,
            Err(e) => return Some(Err(e.to_string())),
        };
        let full = match self.kind {
            LogKind::Outcomes => outcomes_schema(),
            LogKind::Decisions => candidate_rows_schema(),
        };
        let out = restamp(&self.layout, &batch)
            .and_then(|b| {
                if is_nested(&b) {
                    candidate_rows(&b)
                } else {
                    Ok(b)
                }
            })
            .and_then(|b| complete(b, &full))
            .and_then(|b| match self.kind {
                LogKind::Outcomes => Ok(b),
                LogKind::Decisions => upgrade_features(b, &self.features_from),
            });
        Some(out.map_err(|e| e.to_string()))
    }
}

impl Iterator for FileStream {
    type Item = Result<RecordBatch, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        let path = self.path.clone();
        let out = match catch_unwind(AssertUnwindSafe(|| self.decode_next())) {
            Ok(None) => None,
            Ok(Some(r)) => Some(guarded(&path, || r)),
            Err(payload) => Some(guarded(&path, || -> Result<RecordBatch, String> {
                std::panic::resume_unwind(payload)
            })),
        };
        if matches!(out, Some(Err(_))) {
            // A decoder that failed once is not trusted for more batches.
            self.reader = None;
        }
        out
    }
}

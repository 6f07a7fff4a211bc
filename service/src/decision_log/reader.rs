//! Loading final log files back for training.
//!
//! [`read_dir`] walks a log root recursively and loads every final file of the
//! requested kind (`<prefix>-….parquet`), in path order, which is chronological
//! (`dt=` partitions, then the timestamp in the name). In-progress files
//! (`*.inprogress`), anything under a `quarantine/` directory and files of the
//! other kind are ignored. Each file's columns must equal the expected schema's
//! (up to the name of the feature list's item: `element` as pyarrow writes it,
//! or `item`) and its metadata must carry the current versions ([`META_LOG_SCHEMA_VERSION`]
//! for both kinds, [`META_FEATURE_SCHEMA_VERSION`] for decisions); a file that
//! does not is listed in [`LoadedLog::skipped`] with the reason, never mixed in.
//! A file that cannot be decoded at all (empty, truncated, not Parquet, corrupt)
//! is an error naming the file: final files are only ever produced complete, so
//! such a file signals real damage and is not skipped silently.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use arrow::array::{RecordBatch, make_array};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::error::ArrowError;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::LogKind;
use super::error::ReadError;
use super::naming::{PARQUET_EXT, QUARANTINE_DIR};
use super::schema::{LOG_SCHEMA_VERSION, META_FEATURE_SCHEMA_VERSION, META_LOG_SCHEMA_VERSION};
use crate::features::FEATURE_SCHEMA_VERSION;

/// Rows per `RecordBatch` when reading.
pub const READ_BATCH_ROWS: usize = 65_536;

/// Everything loaded from one or more files of one kind.
#[derive(Debug, Clone, Default)]
pub struct LoadedLog {
    /// Record batches, all with the kind's exact schema, in file then row order.
    pub batches: Vec<RecordBatch>,
    /// Files loaded, in load order.
    pub files: Vec<PathBuf>,
    /// Total rows over `batches`.
    pub rows: usize,
    /// Files not loaded because of a schema or version mismatch, with the reason.
    pub skipped: Vec<(PathBuf, String)>,
}

/// Outcome of decoding one file.
pub(crate) enum FileContents {
    /// Schema and versions match: the batches, re-stamped with the expected schema.
    Loaded(Vec<RecordBatch>),
    /// Readable footer but a different schema or version: the reason.
    Mismatch(String),
}

/// Whether two column types are the same up to the names of nested list
/// items: Parquet's compliant nested types (pyarrow's default when it writes)
/// call a list's child `element`, arrow-rs calls it `item`; the values are
/// laid out the same.
fn same_shape(a: &DataType, b: &DataType) -> bool {
    match (a, b) {
        (DataType::FixedSizeList(fa, na), DataType::FixedSizeList(fb, nb)) => {
            na == nb && same_shape(fa.data_type(), fb.data_type())
        }
        (DataType::List(fa), DataType::List(fb)) => same_shape(fa.data_type(), fb.data_type()),
        _ => a == b,
    }
}

/// Why `schema` is not the expected one for `kind`, if it is not: the first
/// column that is missing, extra, renamed, or of another type or
/// nullability, with what was expected.
pub fn schema_mismatch(kind: LogKind, schema: &SchemaRef) -> Option<String> {
    let expected = kind.schema();
    let (got, want) = (schema.fields(), expected.fields());
    for i in 0..got.len().max(want.len()) {
        let problem = match (got.get(i), want.get(i)) {
            (Some(g), Some(w)) if g.name() != w.name() => {
                format!("column {i} is `{}`, expected `{}`", g.name(), w.name())
            }
            (Some(g), Some(w)) if !same_shape(g.data_type(), w.data_type()) => format!(
                "column `{}` is {}, expected {}",
                g.name(),
                g.data_type(),
                w.data_type()
            ),
            (Some(g), Some(w)) if g.is_nullable() != w.is_nullable() => format!(
                "column `{}` is {}, expected {}",
                g.name(),
                if g.is_nullable() {
                    "nullable"
                } else {
                    "non-nullable"
                },
                if w.is_nullable() {
                    "nullable"
                } else {
                    "non-nullable"
                }
            ),
            (Some(_), Some(_)) => continue,
            (Some(g), None) => format!("extra column `{}`", g.name()),
            (None, Some(w)) => format!("column `{}` ({}) is missing", w.name(), w.data_type()),
            (None, None) => continue,
        };
        return Some(format!(
            "columns differ from the {} schema: {problem}",
            kind.prefix()
        ));
    }
    let meta = schema.metadata();
    let mut wanted = vec![(META_LOG_SCHEMA_VERSION, LOG_SCHEMA_VERSION)];
    if kind == LogKind::Decisions {
        wanted.push((META_FEATURE_SCHEMA_VERSION, FEATURE_SCHEMA_VERSION));
    }
    for (key, want) in wanted {
        match meta.get(key) {
            Some(v) if v == want => {}
            Some(v) => return Some(format!("{key} is {v:?}, expected {want:?}")),
            None => return Some(format!("{key} metadata missing, expected {want:?}")),
        }
    }
    None
}

/// `batch` under `schema`, whose columns it matches up to nested item names
/// ([`same_shape`]): such columns are relabelled (same buffers).
fn restamp(schema: &SchemaRef, batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| {
            if c.data_type() == f.data_type() {
                Ok(c.clone())
            } else {
                let data = c
                    .to_data()
                    .into_builder()
                    .data_type(f.data_type().clone())
                    .build()?;
                Ok(make_array(data))
            }
        })
        .collect::<Result<Vec<_>, ArrowError>>()?;
    RecordBatch::try_new(schema.clone(), columns)
}

fn decode(path: &Path, kind: Option<LogKind>) -> Result<FileContents, String> {
    let file = crate::regular_file::open_regular(path).map_err(|e| e.to_string())?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| e.to_string())?;
    let expected = match kind {
        Some(kind) => {
            if let Some(reason) = schema_mismatch(kind, builder.schema()) {
                return Ok(FileContents::Mismatch(reason));
            }
            Some(kind.schema())
        }
        None => None,
    };
    let reader = builder
        .with_batch_size(READ_BATCH_ROWS)
        .build()
        .map_err(|e| e.to_string())?;
    let mut batches = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| e.to_string())?;
        let batch = match &expected {
            Some(schema) => restamp(schema, &batch).map_err(|e| e.to_string())?,
            None => batch,
        };
        batches.push(batch);
    }
    Ok(FileContents::Loaded(batches))
}

/// Decodes every row group of `path`; with `Some(kind)` the schema is checked
/// first (a mismatch is returned without decoding). The Parquet decoder is run
/// under `catch_unwind` so that a decoder panic on corrupt bytes becomes an error.
///
/// # Errors
/// The reason the file is unreadable (I/O, footer, page or decode failure).
pub(crate) fn decode_file(path: &Path, kind: Option<LogKind>) -> Result<FileContents, String> {
    match catch_unwind(AssertUnwindSafe(|| decode(path, kind))) {
        Ok(r) => r,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            Err(format!("parquet decoder panicked: {msg}"))
        }
    }
}

impl LoadedLog {
    fn add(&mut self, path: PathBuf, kind: LogKind) -> Result<(), ReadError> {
        match decode_file(&path, Some(kind)) {
            Ok(FileContents::Loaded(batches)) => {
                self.rows += batches.iter().map(RecordBatch::num_rows).sum::<usize>();
                self.batches.extend(batches);
                self.files.push(path);
                Ok(())
            }
            Ok(FileContents::Mismatch(reason)) => {
                tracing::warn!(path = %path.display(), %reason, "skipping decision log file");
                self.skipped.push((path, reason));
                Ok(())
            }
            Err(reason) => Err(ReadError::File { path, reason }),
        }
    }
}

/// Loads one file as `kind` (whatever its name).
///
/// # Errors
/// [`ReadError::File`] naming `path` if it is empty, truncated, not Parquet or corrupt.
/// A schema/version mismatch is not an error: it is reported in `skipped`.
pub fn read_file(path: &Path, kind: LogKind) -> Result<LoadedLog, ReadError> {
    let mut log = LoadedLog::default();
    log.add(path.to_path_buf(), kind)?;
    Ok(log)
}

/// Final files of `kind` under `dir` (recursive, skipping `quarantine/`), sorted.
///
/// # Errors
/// [`ReadError::Io`] if a directory cannot be listed.
pub fn list_files(dir: &Path, kind: LogKind) -> Result<Vec<PathBuf>, ReadError> {
    let prefix = format!("{}-", kind.prefix());
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).map_err(|source| ReadError::Io {
            path: d.clone(),
            source,
        })?;
        for entry in entries {
            let entry = entry.map_err(|source| ReadError::Io {
                path: d.clone(),
                source,
            })?;
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if is_dir {
                if name != QUARANTINE_DIR {
                    stack.push(path);
                }
            } else if name.starts_with(&prefix) && name.ends_with(PARQUET_EXT) {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Loads every final file of `kind` under `dir` (see the module docs).
///
/// # Errors
/// [`ReadError::Io`] if `dir` or a subdirectory cannot be listed;
/// [`ReadError::File`] naming the first unreadable file.
pub fn read_dir(dir: &Path, kind: LogKind) -> Result<LoadedLog, ReadError> {
    let mut log = LoadedLog::default();
    for path in list_files(dir, kind)? {
        log.add(path, kind)?;
    }
    Ok(log)
}

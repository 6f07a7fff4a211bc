//! Loading final log files back for training.
//!
//! [`read_dir`] walks a log root recursively and loads every final file of the
//! requested kind (`<prefix>-….parquet`), in path order, which is chronological
//! (`dt=` partitions, then the timestamp in the name). In-progress files
//! (`*.inprogress`), anything under a `quarantine/` directory and files of the
//! other kind are ignored.
//!
//! A file's [`META_LOG_SCHEMA_VERSION`] names its layout: `"5"`
//! ([`LOG_SCHEMA_VERSION`], one decisions row per decision, candidates
//! nested with their `operator_override`, with `caller`, outcomes with
//! `cache_hit`), `"4"` ([`LOG_SCHEMA_VERSION_OVERRIDE`], the same without
//! `cache_hit`), `"3"` ([`LOG_SCHEMA_VERSION_CALLER`], without
//! `operator_override` either),
//! `"2"` ([`LOG_SCHEMA_VERSION_NESTED`], without `caller` either) or `"1"`
//! ([`LOG_SCHEMA_VERSION_FLAT`], one row per candidate, without both).
//! Its columns must equal that layout's (up to the names of list items:
//! `element` as pyarrow writes them, or `item`) and a decisions file must
//! carry a [`META_FEATURE_SCHEMA_VERSION`] that reads as the current one
//! (the current, or version 2, whose vectors load with the locality
//! features imputed: [`scorer_core::features::compat`]); a file that does
//! not, or names another layout, is listed in [`LoadedLog::skipped`] with
//! the reason, never mixed in. Decisions of every layout are returned as
//! candidate rows ([`candidate_rows_schema`]), outcomes as
//! [`outcomes_schema`]; a file written before `caller`,
//! `operator_override` or `cache_hit` reads with it null.
//! A file that cannot be decoded at all (empty, truncated, not Parquet, corrupt)
//! is an error naming the file: final files are only ever produced complete, so
//! such a file signals real damage and is not skipped silently.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use arrow::array::{ArrayData, ArrayRef, RecordBatch, make_array, new_null_array};
use arrow::datatypes::{DataType, Field, SchemaRef};
use arrow::error::ArrowError;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::LogKind;
use super::error::ReadError;
use super::flatten::{candidate_rows, is_nested};
use super::naming::{PARQUET_EXT, QUARANTINE_DIR};
use super::schema::{
    LOG_SCHEMA_VERSION, LOG_SCHEMA_VERSION_CALLER, LOG_SCHEMA_VERSION_FLAT,
    LOG_SCHEMA_VERSION_NESTED, LOG_SCHEMA_VERSION_OVERRIDE, META_FEATURE_SCHEMA_VERSION,
    META_LOG_SCHEMA_VERSION, candidate_rows_schema, decisions_schema, decisions_schema_v2,
    decisions_schema_v3, decisions_schema_v4, flat_layout_read_schema, flat_layout_schema,
    outcomes_schema, outcomes_schema_v2, outcomes_schema_v3, outcomes_schema_v4,
};
use super::upgrade::{feature_version, upgrade_features};
use scorer_core::features::{FEATURE_SCHEMA_VERSION, compat};

/// Rows per `RecordBatch` when reading.
pub const READ_BATCH_ROWS: usize = 65_536;

/// Everything loaded from one or more files of one kind.
#[derive(Debug, Clone, Default)]
pub struct LoadedLog {
    /// Record batches in file then row order: candidate rows
    /// ([`candidate_rows_schema`]) for decisions, [`outcomes_schema`] for outcomes.
    pub batches: Vec<RecordBatch>,
    /// Files loaded, in load order.
    pub files: Vec<PathBuf>,
    /// Total rows over `batches` (candidate rows for decisions).
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
            na == nb && same_field(fa, fb, false)
        }
        (DataType::List(fa), DataType::List(fb)) => same_field(fa, fb, false),
        (DataType::Struct(fa), DataType::Struct(fb)) => {
            fa.len() == fb.len()
                && fa
                    .iter()
                    .zip(fb.iter())
                    .all(|(x, y)| same_field(x, y, true))
        }
        _ => a == b,
    }
}

/// `same_shape` on the fields' types and equal nullability; names compared
/// only when `named` (list items may be called anything).
fn same_field(a: &Field, b: &Field, named: bool) -> bool {
    (!named || a.name() == b.name())
        && a.is_nullable() == b.is_nullable()
        && same_shape(a.data_type(), b.data_type())
}

/// The layouts a file of `kind` may have: (log schema version, the file's
/// schema, the schema its batches are read as).
fn layouts(kind: LogKind) -> Vec<(&'static str, SchemaRef, SchemaRef)> {
    match kind {
        LogKind::Decisions => vec![
            (LOG_SCHEMA_VERSION, decisions_schema(), decisions_schema()),
            (
                LOG_SCHEMA_VERSION_OVERRIDE,
                decisions_schema_v4(),
                decisions_schema_v4(),
            ),
            (
                LOG_SCHEMA_VERSION_CALLER,
                decisions_schema_v3(),
                decisions_schema_v3(),
            ),
            (
                LOG_SCHEMA_VERSION_NESTED,
                decisions_schema_v2(),
                decisions_schema_v2(),
            ),
            (
                LOG_SCHEMA_VERSION_FLAT,
                flat_layout_schema(),
                flat_layout_read_schema(),
            ),
        ],
        LogKind::Outcomes => vec![
            (LOG_SCHEMA_VERSION, outcomes_schema(), outcomes_schema()),
            (
                LOG_SCHEMA_VERSION_OVERRIDE,
                outcomes_schema_v4(),
                outcomes_schema_v4(),
            ),
            (
                LOG_SCHEMA_VERSION_CALLER,
                outcomes_schema_v3(),
                outcomes_schema_v3(),
            ),
            (
                LOG_SCHEMA_VERSION_NESTED,
                outcomes_schema_v2(),
                outcomes_schema_v2(),
            ),
            (
                LOG_SCHEMA_VERSION_FLAT,
                outcomes_schema_v2(),
                outcomes_schema_v2(),
            ),
        ],
    }
}

/// `batch` with the columns of `schema`: its own where it has them, null
/// where it lacks a nullable one (a column added by a later layout).
///
/// # Errors
/// A non-nullable column of `schema` is missing.
pub(crate) fn complete(batch: RecordBatch, schema: &SchemaRef) -> Result<RecordBatch, ArrowError> {
    if batch.schema().fields().len() == schema.fields().len() {
        return Ok(batch);
    }
    let columns = schema
        .fields()
        .iter()
        .map(|f| -> Result<ArrayRef, ArrowError> {
            match batch.column_by_name(f.name()) {
                Some(c) => Ok(c.clone()),
                None if f.is_nullable() => Ok(new_null_array(f.data_type(), batch.num_rows())),
                None => Err(ArrowError::SchemaError(format!(
                    "batch has no column `{}`",
                    f.name()
                ))),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(schema.clone(), columns)
}

/// Why `schema`'s columns are not `expected`'s, if they are not: the first
/// column that is missing, extra, renamed, or of another type or
/// nullability, with what was expected.
fn columns_mismatch(schema: &SchemaRef, expected: &SchemaRef) -> Option<String> {
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
        return Some(problem);
    }
    None
}

/// The schema a file of `kind` with `schema` is read as: the layout its
/// [`META_LOG_SCHEMA_VERSION`] names, if this reader knows that layout and
/// the columns match it; otherwise why not (the version or first column at
/// fault, with what was expected).
pub fn layout_of(kind: LogKind, schema: &SchemaRef) -> Result<SchemaRef, String> {
    let meta = schema.metadata();
    let known = layouts(kind);
    let versions = known
        .iter()
        .map(|(v, _, _)| format!("{v:?}"))
        .collect::<Vec<_>>()
        .join(" or ");
    let Some(version) = meta.get(META_LOG_SCHEMA_VERSION) else {
        return Err(format!(
            "{META_LOG_SCHEMA_VERSION} metadata missing, expected {versions}"
        ));
    };
    let Some((_, expected, read_as)) = known.into_iter().find(|(v, _, _)| v == version) else {
        return Err(format!(
            "{META_LOG_SCHEMA_VERSION} is {version:?} (a log layout this reader does not know), expected {versions}"
        ));
    };
    if let Some(problem) = columns_mismatch(schema, &expected) {
        return Err(format!(
            "columns differ from the {} schema of log layout {version}: {problem}",
            kind.prefix()
        ));
    }
    if kind == LogKind::Decisions {
        let want = FEATURE_SCHEMA_VERSION;
        match meta.get(META_FEATURE_SCHEMA_VERSION) {
            Some(v) if compat::is_readable(v) => {}
            Some(v) => {
                let readable = compat::READABLE_SCHEMA_VERSIONS.join(", ");
                return Err(format!(
                    "{META_FEATURE_SCHEMA_VERSION} is {v:?}, expected {want:?} (readable: {readable})"
                ));
            }
            None => {
                return Err(format!(
                    "{META_FEATURE_SCHEMA_VERSION} metadata missing, expected {want:?}"
                ));
            }
        }
    }
    Ok(read_as)
}

/// Why `schema` is not one this reader loads for `kind`, if it is not (see
/// [`layout_of`]).
pub fn schema_mismatch(kind: LogKind, schema: &SchemaRef) -> Option<String> {
    layout_of(kind, schema).err()
}

/// `data` relabelled as `to`, which it matches up to nested item names
/// ([`same_shape`]): same buffers, children relabelled in turn.
fn relabel(data: ArrayData, to: &DataType) -> Result<ArrayData, ArrowError> {
    if data.data_type() == to {
        return Ok(data);
    }
    let child_types: Vec<DataType> = match to {
        DataType::List(f) | DataType::FixedSizeList(f, _) => vec![f.data_type().clone()],
        DataType::Struct(fs) => fs.iter().map(|f| f.data_type().clone()).collect(),
        _ => Vec::new(),
    };
    let children = data
        .child_data()
        .iter()
        .zip(child_types.iter().chain(std::iter::repeat(&DataType::Null)))
        .map(|(c, t)| {
            if *t == DataType::Null {
                Ok(c.clone())
            } else {
                relabel(c.clone(), t)
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    data.into_builder()
        .data_type(to.clone())
        .child_data(children)
        .build()
}

/// `batch` under `schema`, whose columns it matches up to nested item names
/// ([`same_shape`]): such columns are relabelled (same buffers).
pub(crate) fn restamp(schema: &SchemaRef, batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| {
            if c.data_type() == f.data_type() {
                Ok(c.clone())
            } else {
                Ok(make_array(relabel(c.to_data(), f.data_type())?))
            }
        })
        .collect::<Result<Vec<_>, ArrowError>>()?;
    RecordBatch::try_new(schema.clone(), columns)
}

fn decode(path: &Path, kind: Option<LogKind>) -> Result<FileContents, String> {
    let file = scorer_core::regular_file::open_regular(path).map_err(|e| e.to_string())?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| e.to_string())?;
    let features_from = feature_version(builder.schema());
    let expected = match kind {
        Some(kind) => match layout_of(kind, builder.schema()) {
            Ok(schema) => Some(schema),
            Err(reason) => return Ok(FileContents::Mismatch(reason)),
        },
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
            Some(schema) => {
                let batch = restamp(schema, &batch).map_err(|e| e.to_string())?;
                let batch = if is_nested(&batch) {
                    candidate_rows(&batch).map_err(|e| e.to_string())?
                } else {
                    batch
                };
                match kind {
                    Some(LogKind::Outcomes) => {
                        complete(batch, &outcomes_schema()).map_err(|e| e.to_string())?
                    }
                    _ => complete(batch, &candidate_rows_schema())
                        .and_then(|b| {
                            upgrade_features(
                                b,
                                features_from.as_deref().unwrap_or(FEATURE_SCHEMA_VERSION),
                            )
                        })
                        .map_err(|e| e.to_string())?,
                }
            }
            None => batch,
        };
        batches.push(batch);
    }
    Ok(FileContents::Loaded(batches))
}

/// "parquet decoder panicked: …" with the panic's message.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string());
    format!("parquet decoder panicked: {msg}")
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
        Err(payload) => Err(panic_message(payload.as_ref())),
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
                tracing::warn!(path = ?path, %reason, "skipping decision log file");
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

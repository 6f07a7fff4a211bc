//! A sealed (or crash-left) write-ahead file rewritten as the Parquet file
//! readers see: written under its hidden in-progress name, fsynced,
//! atomically renamed to its final name, and only then is the write-ahead
//! file deleted. A crash between the rename and the delete leaves both; the
//! final file wins and the write-ahead file is deleted ([`compact`] checks
//! first), so no row is ever read twice.
//!
//! A write-ahead file left by an earlier version in a layout the reader
//! still knows (say layout 4's outcomes, before `cache_hit`) is written in
//! that layout, its own schema and version, and reads as such; any other
//! schema is the current one.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;

use super::LogKind;
use super::error::LogError;
use super::naming::inprogress_path;
use super::rolling::sync_dir;
use super::wal::WalReader;

/// A write-ahead file now in Parquet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compacted {
    /// The final Parquet path.
    pub path: PathBuf,
    /// Rows in it.
    pub rows: u64,
    /// Its size, bytes.
    pub bytes: u64,
    /// Why the write-ahead file's tail was dropped, if it was torn.
    pub torn: Option<String>,
}

/// Why a write-ahead file was not compacted.
#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    /// Its header cannot be read: quarantine it.
    #[error("{0}")]
    Unreadable(String),
    /// Writing, syncing or renaming failed; the write-ahead file is kept.
    #[error(transparent)]
    Log(#[from] LogError),
}

fn remove(path: &Path) -> Result<(), LogError> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(LogError::io(path, e)),
    }
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Rewrites the write-ahead file `wal` of `kind` as Parquet at `final_path`
/// with `props`, then deletes `wal`. `Ok(None)` when there was nothing to
/// write: no complete batch, or `final_path` already exists (compacted
/// before a crash).
///
/// # Errors
/// [`CompactError::Unreadable`] for a file without a readable header,
/// [`CompactError::Log`] if writing fails (`wal` is kept).
pub fn compact(
    wal: &Path,
    final_path: &Path,
    kind: LogKind,
    props: &WriterProperties,
) -> Result<Option<Compacted>, CompactError> {
    if final_path.exists() {
        remove(wal)?;
        return Ok(None);
    }
    let mut reader = WalReader::open(wal).map_err(CompactError::Unreadable)?;
    let inprogress = inprogress_path(final_path);
    let parquet_err = |source| LogError::Parquet {
        path: inprogress.clone(),
        source,
    };
    // An older layout the reader knows stays that layout (see the module docs).
    let own = reader.schema();
    let schema = match super::reader::layout_of(kind, &own) {
        Ok(_) => own,
        Err(_) => kind.schema(),
    };
    let mut writer: Option<ArrowWriter<File>> = None;
    let mut rows = 0u64;
    while let Some(batch) = reader.next_batch() {
        if batch.num_rows() == 0 {
            continue;
        }
        let batch = RecordBatch::try_new(schema.clone(), batch.columns().to_vec())
            .map_err(|e| CompactError::Unreadable(format!("batch of another schema: {e}")))?;
        let w = match writer.as_mut() {
            Some(w) => w,
            None => {
                let file = File::create(&inprogress).map_err(|e| LogError::io(&inprogress, e))?;
                let mut w = ArrowWriter::try_new(file, schema.clone(), Some(props.clone()))
                    .map_err(parquet_err)?;
                super::schema::append_version_metadata(&mut w, &schema);
                writer.insert(w)
            }
        };
        w.write(&batch).map_err(parquet_err)?;
        rows = rows.saturating_add(u64::try_from(batch.num_rows()).unwrap_or(u64::MAX));
    }
    let torn = reader.torn.take();
    let Some(mut writer) = writer else {
        remove(wal)?;
        return Ok(None);
    };
    writer.finish().map_err(parquet_err)?;
    let file = writer.inner();
    file.sync_all().map_err(|e| LogError::io(&inprogress, e))?;
    let bytes = file
        .metadata()
        .map_err(|e| LogError::io(&inprogress, e))?
        .len();
    drop(writer);
    std::fs::rename(&inprogress, final_path).map_err(|e| LogError::io(final_path, e))?;
    if let Some(dir) = final_path.parent() {
        sync_dir(dir)?;
    }
    remove(wal)?;
    Ok(Some(Compacted {
        path: final_path.to_owned(),
        rows,
        bytes,
        torn,
    }))
}

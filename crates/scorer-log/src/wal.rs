//! The write-ahead file of one open log file: an Arrow IPC *stream*
//! (`.<stem>.arrows`), appended a record batch at a time and flushed to the
//! kernel after each, fsynced per [`FsyncPolicy`]. A stream has no footer,
//! so a file cut short by a crash reads back up to its last complete batch
//! ([`read_wal`]); [`super::compact`] rewrites it as the Parquet file
//! readers see.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::Schema;
use arrow::ipc::reader::StreamReader;
use arrow::ipc::writer::StreamWriter;

use super::config::FsyncPolicy;
use super::error::LogError;

/// Where a write-ahead file's bytes go: a [`File`], or in tests a writer
/// that fails on demand.
pub trait WalFile: Write + Send {
    /// Flushes the file's data (`all`: and metadata) to the disk.
    ///
    /// # Errors
    /// As `fsync(2)`.
    fn sync(&self, all: bool) -> std::io::Result<()>;
}

impl WalFile for File {
    fn sync(&self, all: bool) -> std::io::Result<()> {
        if all {
            self.sync_all()
        } else {
            self.sync_data()
        }
    }
}

/// Creates the write-ahead file at a path that must not exist yet.
pub type WalOpener = Arc<dyn Fn(&Path) -> std::io::Result<Box<dyn WalFile>> + Send + Sync>;

/// The opener of real files (`O_CREAT | O_EXCL`).
pub fn file_opener() -> WalOpener {
    Arc::new(|path: &Path| {
        let file = OpenOptions::new().write(true).create_new(true).open(path)?;
        Ok(Box::new(file) as Box<dyn WalFile>)
    })
}

/// An open write-ahead file. Each batch is encoded in memory, then written
/// out; a write that fails part-way (ENOSPC, EIO) keeps the bytes not yet
/// on disk, and [`WalWriter::drain`] writes them on a later try, so the
/// file resumes exactly where it stopped: no torn batch, no new file.
pub struct WalWriter {
    stream: StreamWriter<Vec<u8>>,
    file: Box<dyn WalFile>,
    /// Encoded bytes not on disk yet.
    unwritten: Vec<u8>,
    /// Bytes encoded so far (on disk or in `unwritten`).
    bytes: u64,
    /// Rows of the batches not wholly on disk.
    unwritten_rows: u64,
    path: PathBuf,
    fsync: FsyncPolicy,
}

impl std::fmt::Debug for WalWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WalWriter")
            .field("path", &self.path)
            .field("bytes", &self.bytes)
            .field("unwritten", &self.unwritten.len())
            .finish()
    }
}

impl WalWriter {
    /// Creates `path` (which must not exist) with `open` and encodes the
    /// stream's schema; the schema reaches the disk with the first
    /// [`WalWriter::append`] (or [`WalWriter::drain`]), so a full disk
    /// leaves at most this one file, which a later try completes.
    ///
    /// # Errors
    /// [`LogError::Io`] if the file exists or cannot be created.
    pub fn create(
        path: &Path,
        schema: &Schema,
        fsync: FsyncPolicy,
        open: &WalOpener,
    ) -> Result<Self, LogError> {
        let file = open(path).map_err(|e| LogError::io(path, e))?;
        let stream = StreamWriter::try_new(Vec::new(), schema).map_err(|e| arrow_err(path, e))?;
        let mut w = Self {
            stream,
            file,
            unwritten: Vec::new(),
            bytes: 0,
            unwritten_rows: 0,
            path: path.to_owned(),
            fsync,
        };
        w.take_encoded();
        Ok(w)
    }

    /// Encodes `batch` into the stream, then [drains](WalWriter::drain)
    /// it to the kernel (and to the disk with [`FsyncPolicy::Batch`]):
    /// once this returns `Ok`, a crash of the process no longer loses it.
    ///
    /// # Errors
    /// [`LogError::Io`] on a failed write or fsync (e.g. ENOSPC): the
    /// batch is kept ([`WalWriter::pending`]) for the next drain. A batch
    /// that does not fit the schema is not taken: an error with nothing
    /// pending.
    pub fn append(&mut self, batch: &RecordBatch) -> Result<(), LogError> {
        self.stream
            .write(batch)
            .map_err(|e| arrow_err(&self.path, e))?;
        self.take_encoded();
        self.unwritten_rows = self
            .unwritten_rows
            .saturating_add(u64::try_from(batch.num_rows()).unwrap_or(u64::MAX));
        self.drain()
    }

    /// Writes the encoded bytes not yet on disk, resuming where a failed
    /// write stopped; `Ok` at once when there are none.
    ///
    /// # Errors
    /// [`LogError::Io`] when a write or fsync fails again.
    pub fn drain(&mut self) -> Result<(), LogError> {
        if self.unwritten.is_empty() {
            return Ok(());
        }
        let mut done = 0;
        let result = loop {
            if done == self.unwritten.len() {
                break self.file.flush();
            }
            match self.file.write(&self.unwritten[done..]) {
                Ok(0) => break Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        self.unwritten.drain(..done);
        result.map_err(|e| LogError::io(&self.path, e))?;
        self.unwritten_rows = 0;
        if self.fsync == FsyncPolicy::Batch {
            self.file
                .sync(false)
                .map_err(|e| LogError::io(&self.path, e))?;
        }
        Ok(())
    }

    /// Whether encoded bytes wait for a write that failed.
    pub fn pending(&self) -> bool {
        !self.unwritten.is_empty()
    }

    /// Rows of the batches a failed write left (partly) in memory: lost
    /// if the file is dropped before a drain succeeds.
    pub fn pending_rows(&self) -> u64 {
        self.unwritten_rows
    }

    /// Bytes of the stream so far (Arrow IPC: about the in-memory size).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The path of the file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn take_encoded(&mut self) {
        let encoded = self.stream.get_mut();
        self.bytes = self
            .bytes
            .saturating_add(u64::try_from(encoded.len()).unwrap_or(u64::MAX));
        if self.unwritten.is_empty() {
            std::mem::swap(&mut self.unwritten, encoded);
        } else {
            self.unwritten.append(encoded);
        }
    }

    /// Writes the end-of-stream marker (and whatever a failed write left)
    /// and fsyncs the file.
    ///
    /// # Errors
    /// [`LogError::Io`] on a failed write or fsync; the file stays for recovery.
    pub fn seal(mut self) -> Result<PathBuf, LogError> {
        self.stream.finish().map_err(|e| arrow_err(&self.path, e))?;
        self.take_encoded();
        self.drain()?;
        self.file
            .sync(true)
            .map_err(|e| LogError::io(&self.path, e))?;
        Ok(self.path)
    }
}

fn arrow_err(path: &Path, e: arrow::error::ArrowError) -> LogError {
    let e = match e {
        arrow::error::ArrowError::IoError(_, io) => io,
        other => std::io::Error::other(other.to_string()),
    };
    LogError::io(path, e)
}

/// A write-ahead file opened for reading: its batches, in order, up to the
/// last complete one.
pub struct WalReader {
    reader: StreamReader<BufReader<File>>,
    /// Set once a batch could not be read whole (a torn tail), with why.
    pub torn: Option<String>,
}

impl WalReader {
    /// Opens `path` and reads its schema.
    ///
    /// # Errors
    /// Why the header cannot be read: the file is not a write-ahead file.
    pub fn open(path: &Path) -> Result<Self, String> {
        // Not `File::open`: a FIFO under that name would block start-up.
        let file = scorer_core::regular_file::open_regular(path).map_err(|e| e.to_string())?;
        let opened = catch_unwind(AssertUnwindSafe(|| {
            StreamReader::try_new(BufReader::new(file), None)
        }));
        match opened {
            Ok(Ok(reader)) => Ok(Self { reader, torn: None }),
            Ok(Err(e)) => Err(format!("not an Arrow IPC stream: {e}")),
            Err(_) => Err("not an Arrow IPC stream: the reader panicked".to_owned()),
        }
    }

    /// The schema in the file's header, with its metadata.
    pub fn schema(&self) -> arrow::datatypes::SchemaRef {
        self.reader.schema()
    }

    /// The next complete batch, or `None` at the end of the stream or at a
    /// torn tail (then [`WalReader::torn`] says why).
    pub fn next_batch(&mut self) -> Option<RecordBatch> {
        if self.torn.is_some() {
            return None;
        }
        match catch_unwind(AssertUnwindSafe(|| self.reader.next())) {
            Ok(Some(Ok(batch))) => Some(batch),
            Ok(None) => None,
            Ok(Some(Err(e))) => {
                self.torn = Some(e.to_string());
                None
            }
            Err(_) => {
                self.torn = Some("the reader panicked on the tail".to_owned());
                None
            }
        }
    }
}

/// Every complete batch of `path` and, if its tail is torn, why.
///
/// # Errors
/// Why the header cannot be read.
pub fn read_wal(path: &Path) -> Result<(Vec<RecordBatch>, Option<String>), String> {
    let mut r = WalReader::open(path)?;
    let mut batches = Vec::new();
    while let Some(b) = r.next_batch() {
        batches.push(b);
    }
    Ok((batches, r.torn))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::outcomes_batch;
    use crate::record::OutcomeRecord;

    fn batch(n: usize) -> RecordBatch {
        let recs: Vec<OutcomeRecord> = (0..n)
            .map(|i| OutcomeRecord {
                decision_id: format!("d-{i}"),
                worker_id: "w".into(),
                ts_ms: 1_700_000_000_000,
                latency_ms: i as f64,
                success: true,
                caller: None,
                cache_hit: None,
            })
            .collect();
        outcomes_batch(&recs).unwrap()
    }

    #[test]
    fn a_torn_tail_reads_up_to_the_last_complete_batch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".outcomes-x-000001.arrows");
        let schema = crate::schema::outcomes_schema();
        let mut w = WalWriter::create(&path, &schema, FsyncPolicy::Roll, &file_opener()).unwrap();
        w.append(&batch(3)).unwrap();
        let after_first = w.bytes();
        w.append(&batch(5)).unwrap();
        // Never sealed: the process "died" here. Cut the second batch short.
        drop(w);
        let full = std::fs::read(&path).unwrap();
        let cut = usize::try_from(after_first).unwrap() + 40;
        std::fs::write(&path, &full[..cut]).unwrap();
        let (batches, torn) = read_wal(&path).unwrap();
        assert_eq!(batches.len(), 1);
        assert_eq!(batches[0].num_rows(), 3);
        assert!(torn.is_some(), "the cut batch is reported");
        // Uncut: both batches, nothing torn (no end-of-stream marker needed).
        std::fs::write(&path, &full).unwrap();
        let (batches, torn) = read_wal(&path).unwrap();
        assert_eq!(batches.iter().map(RecordBatch::num_rows).sum::<usize>(), 8);
        assert!(torn.is_none(), "{torn:?}");
    }

    #[test]
    fn a_file_without_a_readable_header_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".outcomes-x-000002.arrows");
        std::fs::write(&path, b"\xff\xff\xff\xffgarbage").unwrap();
        assert!(read_wal(&path).is_err());
        std::fs::write(&path, b"").unwrap();
        assert!(read_wal(&path).is_err());
    }
}

//! The compaction thread: sealed write-ahead files become Parquet files off
//! the writer thread, so a roll-over never stops the writer from draining
//! the request path's channel. Jobs run in order; one that fails writing
//! (a full disk) is tried again before each later job and once more at
//! [`Compactor::finish`], which waits for the last one (shutdown closes
//! every file before it returns); what still fails is left to start-up
//! recovery.

use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use parquet::file::properties::WriterProperties;

use super::LogKind;
use super::compact::{CompactError, Compacted, compact};
use super::error::LogError;
use super::naming::inprogress_path;
use super::rolling::SealedFile;

/// Name of the compaction thread.
pub const COMPACTOR_THREAD_NAME: &str = "decision-log-compactor";

/// What the owner learns of each job: the file, and its Parquet file or why not.
pub type OnDone =
    Box<dyn Fn(LogKind, &SealedFile, &Result<Option<Compacted>, CompactError>) + Send>;

struct Job {
    kind: LogKind,
    sealed: SealedFile,
}

/// Handle to the compaction thread.
pub struct Compactor {
    tx: Option<Sender<Job>>,
    handle: Option<JoinHandle<()>>,
    first_error: Arc<Mutex<Option<LogError>>>,
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compactor").finish_non_exhaustive()
    }
}

impl Compactor {
    /// Starts the thread; it writes with `props` and reports to `on_done`.
    ///
    /// # Errors
    /// [`LogError::Thread`] if the thread cannot be spawned.
    pub fn spawn(props: WriterProperties, on_done: OnDone) -> Result<Self, LogError> {
        let (tx, rx) = channel::<Job>();
        let first_error: Arc<Mutex<Option<LogError>>> = Arc::default();
        let errors = first_error.clone();
        let handle = std::thread::Builder::new()
            .name(COMPACTOR_THREAD_NAME.to_owned())
            .spawn(move || {
                let mut failed: Vec<Job> = Vec::new();
                let run = |job: Job, failed: &mut Vec<Job>| {
                    let result = compact(&job.sealed.wal, &job.sealed.final_path, job.kind, &props);
                    on_done(job.kind, &job.sealed, &result);
                    let Err(e) = result else {
                        return;
                    };
                    let e = match e {
                        CompactError::Log(e) => {
                            // Free what a full disk let it write; try again later.
                            let _ = std::fs::remove_file(inprogress_path(&job.sealed.final_path));
                            failed.push(job);
                            e
                        }
                        CompactError::Unreadable(reason) => {
                            LogError::io(&job.sealed.wal, std::io::Error::other(reason))
                        }
                    };
                    let mut first = errors.lock().unwrap_or_else(PoisonError::into_inner);
                    first.get_or_insert(e);
                };
                for job in rx {
                    for earlier in std::mem::take(&mut failed) {
                        run(earlier, &mut failed);
                    }
                    run(job, &mut failed);
                }
                for earlier in std::mem::take(&mut failed) {
                    run(earlier, &mut Vec::new());
                }
            })
            .map_err(|e| LogError::Thread(e.to_string()))?;
        Ok(Self {
            tx: Some(tx),
            handle: Some(handle),
            first_error,
        })
    }

    /// Queues `sealed` for compaction. If the thread is gone the file stays
    /// on disk, and start-up recovery compacts it.
    pub fn submit(&self, kind: LogKind, sealed: SealedFile) {
        let sent = self
            .tx
            .as_ref()
            .is_some_and(|tx| tx.send(Job { kind, sealed }).is_ok());
        if !sent {
            tracing::error!("decision log compaction thread is gone; the file waits for recovery");
        }
    }

    /// Waits for every queued job; the first compaction error, if any.
    pub fn finish(&mut self) -> Option<LogError> {
        drop(self.tx.take());
        if let Some(h) = self.handle.take()
            && h.join().is_err()
        {
            return Some(LogError::Thread("compaction thread panicked".into()));
        }
        self.first_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

impl Drop for Compactor {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

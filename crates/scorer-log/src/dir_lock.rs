//! One writing service per log directory.
//!
//! Start-up recovery ([`super::recover_dir`]) treats every `*.inprogress`
//! file as a crash's leftover. A second service started on the same
//! directory (a second instance, or `scripts/demo.sh` next to a running
//! service) would therefore quarantine the first one's open file, and the
//! first would lose its rows at close (found by a fresh-eyes run). Each
//! writer holds an exclusive advisory lock (`flock(2)` through
//! [`std::fs::File::try_lock`]) on `<dir>/.writer.lock` from before recovery
//! until its writer thread ends; a second writer is refused before it
//! touches anything. The kernel drops the lock when the process dies, so a
//! crash never leaves the directory locked.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use super::error::LogError;

/// Name of the lock file inside a log directory.
pub const LOCK_FILE: &str = ".writer.lock";

/// An exclusive lock on a log directory, released on drop.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
    dir: PathBuf,
}

impl DirLock {
    /// The locked directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Locks `dir` (which must exist) for this writer.
///
/// # Errors
/// [`LogError::DirInUse`] when another writer holds the lock;
/// [`LogError::Io`] when the lock file cannot be opened or locked.
pub fn lock_dir(dir: &Path) -> Result<DirLock, LogError> {
    let path = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| LogError::io(&path, e))?;
    match file.try_lock() {
        Ok(()) => Ok(DirLock {
            _file: file,
            dir: dir.to_path_buf(),
        }),
        Err(TryLockError::WouldBlock) => Err(LogError::DirInUse {
            dir: dir.to_path_buf(),
        }),
        Err(TryLockError::Error(e)) => Err(LogError::io(&path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_writer_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock_dir(dir.path()).unwrap();
        assert_eq!(first.dir(), dir.path());
        match lock_dir(dir.path()) {
            Err(LogError::DirInUse { dir: d }) => assert_eq!(d, dir.path()),
            other => panic!("expected DirInUse, got {other:?}"),
        }
        drop(first);
        assert!(lock_dir(dir.path()).is_ok());
    }
}

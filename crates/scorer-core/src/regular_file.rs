//! Opening a file that must be a regular file, without hanging on a FIFO.
//!
//! `open(2)` of a FIFO for reading blocks until a writer appears, so a stray
//! `mkfifo model.onnx` (or `…parquet.inprogress`) in a model or decision-log
//! directory would hang start-up, a hot reload or the trainer instead of being
//! refused. [`open_regular`] opens with `O_NONBLOCK`, which returns at once
//! for every file type and changes nothing for reads of a regular file
//! (`open(2)`: "O_NONBLOCK … has no effect for regular files"), then refuses
//! anything `fstat` does not call a regular file: a FIFO, a socket, a device,
//! a directory. Symlinks are followed.

use std::fs::File;
use std::io::{Error, ErrorKind};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The message of the `InvalidInput` error for a path that is not a regular
/// file.
pub const NOT_REGULAR: &str = "not a regular file";

/// Opens `path` for reading if it is a regular file (after following
/// symlinks), never blocking on a FIFO.
///
/// # Errors
/// The `std::io::Error` of `open(2)` or `fstat(2)` (`NotFound`,
/// `PermissionDenied`, …); `InvalidInput` with [`NOT_REGULAR`] when `path`
/// is a FIFO, socket, device or directory.
pub fn open_regular(path: &Path) -> std::io::Result<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if file.metadata()?.is_file() {
        Ok(file)
    } else {
        Err(Error::new(ErrorKind::InvalidInput, NOT_REGULAR))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn a_regular_file_reads_whole_and_a_symlink_to_it_too() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"0123456789").unwrap();
        let mut s = String::new();
        open_regular(&f).unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, "0123456789");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&f, &link).unwrap();
        let mut s = String::new();
        open_regular(&link).unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, "0123456789");
    }

    #[test]
    fn a_fifo_is_refused_at_once_instead_of_blocking() {
        // Found by a fresh-eyes run: a FIFO named model.onnx hung start-up.
        // Without O_NONBLOCK this test never returns (no writer exists).
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("model.onnx");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let e = open_regular(&fifo).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert_eq!(e.to_string(), NOT_REGULAR);
    }

    #[test]
    fn directories_devices_and_absent_paths_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let e = open_regular(dir.path()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        let e = open_regular(Path::new("/dev/null")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        let e = open_regular(&dir.path().join("absent")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound);
    }
}

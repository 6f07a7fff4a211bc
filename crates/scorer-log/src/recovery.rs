//! Start-up recovery of `*.parquet.inprogress` files left by a crash.
//!
//! A leftover is recovered (renamed to its final name) only if it is a complete
//! Parquet file: the footer metadata parses and every row group decodes. Anything
//! else (empty, truncated, corrupt, or a final name already taken) is moved to
//! `<root>/quarantine/` under its own name (with `.N` appended on a clash) so a
//! human can inspect it; readers never look there. Both are logged at warn.
//! Nothing here panics on bad bytes; only filesystem failures are errors.

use std::path::{Path, PathBuf};

use super::error::LogError;
use super::naming::{INPROGRESS_SUFFIX, QUARANTINE_DIR, strip_inprogress};
use super::reader::{FileContents, decode_file};
use super::rolling::sync_dir;

/// What [`recover_dir`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Final paths of leftovers found complete and renamed.
    pub recovered: Vec<PathBuf>,
    /// New paths (under `quarantine/`) of unreadable leftovers, with the reason.
    pub quarantined: Vec<(PathBuf, String)>,
}

fn leftovers(root: &Path) -> Result<Vec<PathBuf>, LogError> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| LogError::io(&dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| LogError::io(&dir, e))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                if name != QUARANTINE_DIR {
                    stack.push(entry.path());
                }
            } else if name.ends_with(INPROGRESS_SUFFIX) {
                out.push(entry.path());
            }
        }
    }
    out.sort();
    Ok(out)
}

fn quarantine_target(root: &Path, path: &Path) -> PathBuf {
    let qdir = root.join(QUARANTINE_DIR);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "unnamed".to_string());
    let mut target = qdir.join(&name);
    let mut n = 1u32;
    while target.exists() {
        target = qdir.join(format!("{name}.{n}"));
        n = n.saturating_add(1);
    }
    target
}

/// Recovers or quarantines every `*.inprogress` file under `root` (recursively,
/// outside `quarantine/`). A missing `root` is not an error (nothing to do).
///
/// # Errors
/// [`LogError::Io`] if a directory cannot be listed or a rename/fsync fails.
pub fn recover_dir(root: &Path) -> Result<RecoveryReport, LogError> {
    let mut report = RecoveryReport::default();
    if !root.exists() {
        return Ok(report);
    }
    for path in leftovers(root)? {
        let final_path = strip_inprogress(&path);
        let verdict = match (&final_path, decode_file(&path, None)) {
            (None, _) => Err("name is not valid UTF-8".to_string()),
            (Some(f), Ok(_)) if f.exists() => Err(format!("{} already exists", f.display())),
            (Some(_), Ok(FileContents::Loaded(_) | FileContents::Mismatch(_))) => Ok(()),
            (Some(_), Err(reason)) => Err(reason),
        };
        match (verdict, final_path) {
            (Ok(()), Some(final_path)) => {
                std::fs::rename(&path, &final_path).map_err(|e| LogError::io(&final_path, e))?;
                if let Some(dir) = final_path.parent() {
                    sync_dir(dir)?;
                }
                tracing::warn!(path = %final_path.display(), "recovered in-progress decision log file");
                report.recovered.push(final_path);
            }
            (verdict, _) => {
                let reason = verdict.err().unwrap_or_default();
                let target = quarantine_target(root, &path);
                if let Some(dir) = target.parent() {
                    std::fs::create_dir_all(dir).map_err(|e| LogError::io(dir, e))?;
                }
                std::fs::rename(&path, &target).map_err(|e| LogError::io(&target, e))?;
                if let Some(dir) = target.parent() {
                    sync_dir(dir)?;
                }
                tracing::warn!(
                    from = %path.display(),
                    to = %target.display(),
                    %reason,
                    "quarantined unreadable in-progress decision log file"
                );
                report.quarantined.push((target, reason));
            }
        }
    }
    Ok(report)
}

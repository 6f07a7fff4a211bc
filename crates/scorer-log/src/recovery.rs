//! Start-up recovery of what a crash left: write-ahead files
//! (`.<stem>.arrows`) and `*.parquet.inprogress` files.
//!
//! A write-ahead file is compacted ([`super::compact`]) up to its last
//! complete batch; a torn tail is dropped, logged and reported. If its
//! Parquet file already exists (the crash came between the rename and the
//! delete), the write-ahead file is deleted: no row twice. A
//! `*.parquet.inprogress` beside a write-ahead file is a compaction cut
//! short and is deleted (the write-ahead file is compacted again). Only a
//! write-ahead file whose header cannot be read is quarantined.
//!
//! Any other `*.parquet.inprogress` (written by earlier versions) is recovered (renamed to its final name) only if it is a complete
//! Parquet file: the footer metadata parses and every row group decodes. Anything
//! else (empty, truncated, corrupt, or a final name already taken) is moved to
//! `<root>/quarantine/` under its own name (with `.N` appended on a clash) so a
//! human can inspect it; readers never look there. Both are logged at warn.
//! Nothing here panics on bad bytes; only filesystem failures are errors.

use std::path::{Path, PathBuf};

use parquet::file::properties::WriterProperties;

use super::LogKind;
use super::compact::{CompactError, compact};
use super::error::LogError;
use super::naming::{
    INPROGRESS_PREFIX, INPROGRESS_SUFFIX, QUARANTINE_DIR, WAL_EXT, final_of_wal, strip_inprogress,
    wal_path,
};
use super::reader::{FileContents, decode_file};
use super::rolling::sync_dir;

/// What [`recover_dir`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Final paths of leftovers found complete and renamed.
    pub recovered: Vec<PathBuf>,
    /// New paths (under `quarantine/`) of unreadable leftovers, with the reason.
    pub quarantined: Vec<(PathBuf, String)>,
    /// Final paths of files compacted from a write-ahead file whose tail was
    /// torn (its last batch dropped), with why.
    pub torn: Vec<(PathBuf, String)>,
}

fn leftovers(root: &Path, suffix: &str) -> Result<Vec<PathBuf>, LogError> {
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
            } else if name.ends_with(suffix) {
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

fn quarantine(root: &Path, path: &Path, reason: String) -> Result<(PathBuf, String), LogError> {
    let target = quarantine_target(root, path);
    if let Some(dir) = target.parent() {
        std::fs::create_dir_all(dir).map_err(|e| LogError::io(dir, e))?;
    }
    std::fs::rename(path, &target).map_err(|e| LogError::io(&target, e))?;
    if let Some(dir) = target.parent() {
        sync_dir(dir)?;
    }
    tracing::warn!(
        from = ?path,
        to = ?target,
        %reason,
        "quarantined an unreadable decision log leftover"
    );
    Ok((target, reason))
}

fn kind_of_wal(path: &Path) -> Option<LogKind> {
    let name = path
        .file_name()?
        .to_str()?
        .strip_prefix(INPROGRESS_PREFIX)?;
    [LogKind::Decisions, LogKind::Outcomes]
        .into_iter()
        .find(|k| name.starts_with(k.prefix()) && name[k.prefix().len()..].starts_with('-'))
}

/// [`recover_dir_with`] writing Parquet with the default properties.
///
/// # Errors
/// As [`recover_dir_with`].
pub fn recover_dir(root: &Path) -> Result<RecoveryReport, LogError> {
    recover_dir_with(
        root,
        &super::rolling::writer_properties(&super::config::LogConfig::default()),
    )
}

/// Recovers, compacts or quarantines every leftover under `root`
/// (recursively, outside `quarantine/`; see the module docs), writing
/// Parquet with `props`. A missing `root` is not an error (nothing to do).
///
/// # Errors
/// [`LogError::Io`] if a directory cannot be listed or a write, rename or
/// fsync fails.
pub fn recover_dir_with(root: &Path, props: &WriterProperties) -> Result<RecoveryReport, LogError> {
    let mut report = RecoveryReport::default();
    if !root.exists() {
        return Ok(report);
    }
    for path in leftovers(root, INPROGRESS_SUFFIX)? {
        let final_path = strip_inprogress(&path);
        if final_path.as_ref().is_some_and(|f| wal_path(f).exists()) {
            // A compaction cut short: its write-ahead file is compacted below.
            std::fs::remove_file(&path).map_err(|e| LogError::io(&path, e))?;
            continue;
        }
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
                tracing::warn!(path = ?final_path, "recovered in-progress decision log file");
                report.recovered.push(final_path);
            }
            (verdict, _) => {
                let reason = verdict.err().unwrap_or_default();
                report.quarantined.push(quarantine(root, &path, reason)?);
            }
        }
    }
    for wal in leftovers(root, WAL_EXT)? {
        let (Some(final_path), Some(kind)) = (final_of_wal(&wal), kind_of_wal(&wal)) else {
            let reason = "not a write-ahead file name of this log".to_owned();
            report.quarantined.push(quarantine(root, &wal, reason)?);
            continue;
        };
        match compact(&wal, &final_path, kind, props) {
            Ok(Some(done)) => {
                match &done.torn {
                    Some(reason) => {
                        tracing::warn!(path = ?done.path, rows = done.rows, %reason,
                            "recovered a write-ahead file up to its torn tail");
                        report.torn.push((done.path.clone(), reason.clone()));
                    }
                    None => tracing::warn!(path = ?done.path, rows = done.rows,
                        "recovered a write-ahead file"),
                }
                report.recovered.push(done.path);
            }
            Ok(None) => {}
            Err(CompactError::Unreadable(reason)) => {
                report.quarantined.push(quarantine(root, &wal, reason)?);
            }
            Err(CompactError::Log(e)) => return Err(e),
        }
    }
    Ok(report)
}

//! File and partition names.
//!
//! `<root>/dt=YYYY-MM-DD/<prefix>-YYYYMMDDTHHMMSSmmmZ-<seq>.parquet`, where the date
//! and timestamp are the UTC wall clock when the file was opened and `seq` is a
//! zero-padded (at least [`SEQ_DIGITS`] digits) per-log counter that starts past the
//! highest sequence already present under the root, so names never collide across
//! restarts. A file being written is hidden: [`INPROGRESS_PREFIX`] before its
//! final name and [`INPROGRESS_SUFFIX`] after it (`.decisions-….parquet.inprogress`),
//! as Flink names in-progress part files, so that dataset readers which list a
//! live directory (pyarrow's and Spark's skip names starting with `.` or `_`;
//! DuckDB's and polars' `*.parquet` globs do not match the suffix) never open a
//! file without a footer. Records are first appended to a hidden write-ahead
//! file in Arrow IPC stream format, `.<prefix>-…-<seq>.arrows` ([`wal_path`]),
//! which no Parquet reader lists either.

use std::path::{Path, PathBuf};

use super::LogKind;

/// Extension of a finished log file.
pub const PARQUET_EXT: &str = ".parquet";
/// Suffix appended to the final name while a file is being written.
pub const INPROGRESS_SUFFIX: &str = ".inprogress";
/// Prefix put before the final name while a file is being written (hidden).
pub const INPROGRESS_PREFIX: &str = ".";
/// Extension of a write-ahead file (Arrow IPC stream format).
pub const WAL_EXT: &str = ".arrows";
/// Directory (directly under a log root) where unreadable leftovers are moved.
pub const QUARANTINE_DIR: &str = "quarantine";
/// Prefix of a date partition directory.
pub const PARTITION_PREFIX: &str = "dt=";
/// Minimum digits of the sequence number in a file name.
pub const SEQ_DIGITS: usize = 6;

const MS_PER_DAY: u64 = 86_400_000;

/// Proleptic Gregorian (year, month 1..=12, day 1..=31) of `days` since 1970-01-01
/// (Howard Hinnant's `civil_from_days`).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11]
    let d = doy - (153 * mp + 2) / 5 + 1; // [1, 31]
    let m = if mp < 10 { mp + 3 } else { mp - 9 }; // [1, 12]
    let y = if m <= 2 { y + 1 } else { y };
    // ok: d in 1..=31 and m in 1..=12 by construction, so the casts are lossless.
    (y, m as u32, d as u32)
}

/// UTC day number (days since 1970-01-01) of Unix milliseconds `ms`.
pub fn day_of(ms: u64) -> u64 {
    ms / MS_PER_DAY
}

fn ymd(ms: u64) -> (i64, u32, u32) {
    civil_from_days(i64::try_from(day_of(ms)).unwrap_or(i64::MAX / 2))
}

/// `YYYY-MM-DD` (UTC) of Unix milliseconds `ms`.
pub fn date_string(ms: u64) -> String {
    let (y, m, d) = ymd(ms);
    format!("{y:04}-{m:02}-{d:02}")
}

/// `YYYYMMDDTHHMMSSmmmZ` (UTC) of Unix milliseconds `ms`.
pub fn timestamp_string(ms: u64) -> String {
    let (y, mo, d) = ymd(ms);
    let in_day = ms % MS_PER_DAY;
    let (h, mi, s, milli) = (
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1_000 % 60,
        in_day % 1_000,
    );
    format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}{milli:03}Z")
}

/// Partition directory name `dt=YYYY-MM-DD` for Unix milliseconds `ms`.
pub fn partition_name(ms: u64) -> String {
    format!("{PARTITION_PREFIX}{}", date_string(ms))
}

/// Final file name `<prefix>-<timestamp>-<seq>.parquet` (no directory).
pub fn file_name(kind: LogKind, opened_at_ms: u64, seq: u64) -> String {
    format!(
        "{}-{}-{seq:0width$}{PARQUET_EXT}",
        kind.prefix(),
        timestamp_string(opened_at_ms),
        width = SEQ_DIGITS
    )
}

/// Final path `<root>/dt=…/<file_name>` of a file opened at `opened_at_ms`.
pub fn final_path(root: &Path, kind: LogKind, opened_at_ms: u64, seq: u64) -> PathBuf {
    root.join(partition_name(opened_at_ms))
        .join(file_name(kind, opened_at_ms, seq))
}

/// The in-progress path of a final path: `<dir>/.<name>.inprogress`.
pub fn inprogress_path(final_path: &Path) -> PathBuf {
    let mut name = std::ffi::OsString::from(INPROGRESS_PREFIX);
    name.push(final_path.file_name().unwrap_or_default());
    name.push(INPROGRESS_SUFFIX);
    final_path.with_file_name(name)
}

/// The write-ahead path of a final path: `<dir>/.<stem>.arrows`.
pub fn wal_path(final_path: &Path) -> PathBuf {
    let name = final_path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let stem = name.strip_suffix(PARQUET_EXT).unwrap_or(name);
    final_path.with_file_name(format!("{INPROGRESS_PREFIX}{stem}{WAL_EXT}"))
}

/// The final path a write-ahead path (`.<stem>.arrows`) compacts to, or
/// `None` if it is not one.
pub fn final_of_wal(path: &Path) -> Option<PathBuf> {
    let stem = path
        .file_name()?
        .to_str()?
        .strip_suffix(WAL_EXT)?
        .strip_prefix(INPROGRESS_PREFIX)?;
    (!stem.is_empty()).then(|| path.with_file_name(format!("{stem}{PARQUET_EXT}")))
}

/// The final path of an in-progress path (`.<name>.inprogress`, or
/// `<name>.inprogress` as earlier versions named them), or `None` if it
/// lacks the suffix.
pub fn strip_inprogress(path: &Path) -> Option<PathBuf> {
    let name = path
        .file_name()?
        .to_str()?
        .strip_suffix(INPROGRESS_SUFFIX)?;
    let name = name.strip_prefix(INPROGRESS_PREFIX).unwrap_or(name);
    (!name.is_empty()).then(|| path.with_file_name(name))
}

/// Sequence number of a log file name of `kind` (final, in-progress or
/// write-ahead), if it is one.
pub fn parse_seq(kind: LogKind, name: &str) -> Option<u64> {
    let name = name
        .strip_suffix(INPROGRESS_SUFFIX)
        .map_or(name, |n| n.strip_prefix(INPROGRESS_PREFIX).unwrap_or(n));
    let stem = match name.strip_suffix(WAL_EXT) {
        Some(wal) => wal.strip_prefix(INPROGRESS_PREFIX)?,
        None => name.strip_suffix(PARQUET_EXT)?,
    };
    let rest = stem.strip_prefix(kind.prefix())?.strip_prefix('-')?;
    let (_ts, seq) = rest.rsplit_once('-')?;
    if seq.is_empty() || !seq.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    seq.parse().ok()
}

/// Highest sequence number of `kind` anywhere under `root` (including quarantine),
/// or 0 when there is none or `root` does not exist. Unreadable directories are skipped.
pub fn max_seq(root: &Path, kind: LogKind) -> u64 {
    let mut max = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path);
            } else if let Some(seq) = entry.file_name().to_str().and_then(|n| parse_seq(kind, n)) {
                max = max.max(seq);
            }
        }
    }
    max
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }

    #[test]
    fn names() {
        // 2024-03-05T10:11:12.345Z
        let ms = 1_709_633_472_345;
        assert_eq!(date_string(ms), "2024-03-05");
        assert_eq!(timestamp_string(ms), "20240305T101112345Z");
        let p = final_path(Path::new("/r"), LogKind::Decisions, ms, 7);
        assert_eq!(
            p,
            PathBuf::from("/r/dt=2024-03-05/decisions-20240305T101112345Z-000007.parquet")
        );
        let ip = inprogress_path(&p);
        assert_eq!(
            ip,
            PathBuf::from(
                "/r/dt=2024-03-05/.decisions-20240305T101112345Z-000007.parquet.inprogress"
            ),
            "hidden from dataset readers while written"
        );
        assert_eq!(strip_inprogress(&ip), Some(p.clone()));
        // Leftovers named by earlier versions (no leading dot) still recover.
        let old = PathBuf::from(format!("{}{INPROGRESS_SUFFIX}", p.display()));
        assert_eq!(strip_inprogress(&old), Some(p));
        assert_eq!(strip_inprogress(Path::new("/r/.inprogress")), None);
        assert_eq!(
            file_name(LogKind::Outcomes, ms, 1_234_567),
            "outcomes-20240305T101112345Z-1234567.parquet"
        );
    }

    #[test]
    fn seq_parsing() {
        let n = "decisions-20240305T101112345Z-000042.parquet";
        assert_eq!(parse_seq(LogKind::Decisions, n), Some(42));
        assert_eq!(parse_seq(LogKind::Outcomes, n), None);
        assert_eq!(
            parse_seq(LogKind::Decisions, &format!("{n}{INPROGRESS_SUFFIX}")),
            Some(42)
        );
        assert_eq!(
            parse_seq(LogKind::Decisions, &format!(".{n}{INPROGRESS_SUFFIX}")),
            Some(42)
        );
        assert_eq!(parse_seq(LogKind::Decisions, "decisions-x-.parquet"), None);
        assert_eq!(parse_seq(LogKind::Decisions, "notes.txt"), None);
        assert_eq!(
            parse_seq(
                LogKind::Decisions,
                ".decisions-20240305T101112345Z-000043.arrows"
            ),
            Some(43)
        );
    }

    #[test]
    fn a_write_ahead_file_is_hidden_and_names_its_parquet_file() {
        let p = PathBuf::from("/r/dt=2024-03-05/decisions-20240305T101112345Z-000042.parquet");
        let wal = wal_path(&p);
        assert_eq!(
            wal,
            PathBuf::from("/r/dt=2024-03-05/.decisions-20240305T101112345Z-000042.arrows")
        );
        assert_eq!(final_of_wal(&wal), Some(p));
        assert_eq!(final_of_wal(Path::new("/r/x.arrows")), None);
        assert_eq!(final_of_wal(Path::new("/r/.arrows")), None);
    }
}

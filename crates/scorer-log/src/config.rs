//! [`LogConfig`]: where and how much to log, with documented defaults.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Default for [`LogConfig::enabled`].
pub const DEFAULT_ENABLED: bool = true;
/// Default for [`LogConfig::dir`] (relative to the working directory).
pub const DEFAULT_DIR: &str = "data/decisions";
/// Directory name of the outcomes log when [`LogConfig::outcomes_dir`] is `None`:
/// a sibling of [`LogConfig::dir`].
pub const DEFAULT_OUTCOMES_DIR_NAME: &str = "outcomes";
/// Default for [`LogConfig::sample_rate`]: log every decision.
pub const DEFAULT_SAMPLE_RATE: f64 = 1.0;
/// Default for [`LogConfig::candidate_features_rate`]: every candidate's
/// feature vector on one logged decision in ten, the picked candidate's on
/// all. Measured with `cargo bench -p service --bench log_writer`: 16
/// candidates' vectors are most of a decision's bytes and of the writer's
/// work (44–58 k decisions/s with all of them, 98 k at 0.1, 120 k at 0).
pub const DEFAULT_CANDIDATE_FEATURES_RATE: f64 = 0.1;
/// Default for [`LogConfig::max_rows`], rows per file (decisions in a decisions file).
pub const DEFAULT_MAX_ROWS: u64 = 1_000_000;
/// Default for [`LogConfig::max_bytes`], bytes per file (256 MiB).
pub const DEFAULT_MAX_BYTES: u64 = 256 * 1024 * 1024;
/// Default for [`LogConfig::max_age_ms`], milliseconds a file stays open.
pub const DEFAULT_MAX_AGE_MS: u64 = 60_000;
/// Default for [`LogConfig::row_group_rows`], rows per Parquet row group:
/// 4 096 decisions of 16 candidates are the 65 536 candidate rows a group
/// held when each candidate was a row, ~5 MiB the writer buffers encoded.
pub const DEFAULT_ROW_GROUP_ROWS: usize = 4_096;
/// Default for [`LogConfig::channel_capacity`], records queued between the request
/// path and the writer thread: about a second of traffic at 8 000 decisions/s,
/// and at most ~40 MiB of queued 16-candidate decisions (~5 KiB each). The
/// writer keeps up unless the CPU is saturated; past the capacity records are
/// dropped and counted rather than queued without bound.
pub const DEFAULT_CHANNEL_CAPACITY: usize = 8_192;
/// Default for [`LogConfig::router_queue_share`]: routers' records may
/// queue up to a quarter of `channel_capacity` (2 048 records by default,
/// 32 of the balancer's 64-record batches), on top of the service's own
/// `channel_capacity`, so a router flood never takes a slot of the
/// service's own decisions.
pub const DEFAULT_ROUTER_QUEUE_SHARE: f64 = 0.25;
/// Default for [`LogConfig::flush_ms`]: under sustained traffic, records
/// reach the write-ahead file at least every 200 ms, which bounds what a
/// crash of the process loses.
pub const DEFAULT_FLUSH_MS: u64 = 200;
/// Longest accepted [`LogConfig::flush_ms`] (a minute, the default file age).
pub const MAX_FLUSH_MS: u64 = 60_000;

/// When the write-ahead file is fsynced ([`LogConfig::fsync`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FsyncPolicy {
    /// At each roll-over, before compaction: a process crash loses at most
    /// `flush_ms`; a machine crash can lose what the kernel had not written.
    #[default]
    Roll,
    /// After every appended batch too: a machine crash loses at most
    /// `flush_ms` as well, at the cost of an fsync per batch.
    Batch,
}

/// Decision log settings. Every field has a default (the `DEFAULT_*` constants);
/// unknown keys are rejected when deserializing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// Master switch; when false nothing is accepted or written.
    pub enabled: bool,
    /// Root directory of the decisions log.
    pub dir: PathBuf,
    /// Root directory of the outcomes log; `None` means `<parent of dir>/outcomes`.
    pub outcomes_dir: Option<PathBuf>,
    /// Fraction of decision ids logged, in [0, 1]; see [`super::sampling`].
    pub sample_rate: f64,
    /// Fraction of logged decisions, in [0, 1], on which every candidate's
    /// feature vector is logged; the others log the picked candidate's
    /// only (training needs no more). Off-policy estimates (`trainer
    /// compare`) use the decisions with every vector. Chosen by decision id,
    /// as `sample_rate` is: a decision has every vector when its id's
    /// [`super::sampling::id_unit`] is below `sample_rate ×
    /// candidate_features_rate`.
    pub candidate_features_rate: f64,
    /// Roll a file once it holds this many rows (≥ 1): decisions in a
    /// decisions file, outcomes in an outcomes file.
    pub max_rows: u64,
    /// Roll a file once its estimated size reaches this many bytes (≥ 1).
    pub max_bytes: u64,
    /// Roll a file this many milliseconds after it was opened (≥ 1).
    pub max_age_ms: u64,
    /// Maximum rows per Parquet row group (≥ 1), counted as `max_rows` is.
    pub row_group_rows: usize,
    /// Capacity of the bounded channel to the writer thread for the
    /// service's own records, in records (≥ 1).
    pub channel_capacity: usize,
    /// Routers' records (`POST /v1/router/decisions`) may queue at most
    /// this fraction of `channel_capacity`, in [0, 1], in slots of their
    /// own beside the service's: the service's records are never dropped
    /// to make room for them. 0 refuses every router record.
    pub router_queue_share: f64,
    /// Under sustained traffic, pending records are appended to the
    /// write-ahead file at least this often, ms (1..=60 000); a process
    /// crash loses at most the last `flush_ms` of accepted records.
    pub flush_ms: u64,
    /// When the write-ahead file is fsynced: `roll` (default) or `batch`.
    pub fsync: FsyncPolicy,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            enabled: DEFAULT_ENABLED,
            dir: PathBuf::from(DEFAULT_DIR),
            outcomes_dir: None,
            sample_rate: DEFAULT_SAMPLE_RATE,
            candidate_features_rate: DEFAULT_CANDIDATE_FEATURES_RATE,
            max_rows: DEFAULT_MAX_ROWS,
            max_bytes: DEFAULT_MAX_BYTES,
            max_age_ms: DEFAULT_MAX_AGE_MS,
            row_group_rows: DEFAULT_ROW_GROUP_ROWS,
            channel_capacity: DEFAULT_CHANNEL_CAPACITY,
            router_queue_share: DEFAULT_ROUTER_QUEUE_SHARE,
            flush_ms: DEFAULT_FLUSH_MS,
            fsync: FsyncPolicy::Roll,
        }
    }
}

impl LogConfig {
    /// Checks every value.
    ///
    /// # Errors
    /// A message starting with the offending key and giving its value:
    /// `sample_rate`, `candidate_features_rate` or `router_queue_share`
    /// outside [0, 1] or NaN, an
    /// empty `dir`/`outcomes_dir`, or
    /// `max_rows`, `max_bytes`, `max_age_ms`, `row_group_rows`, `channel_capacity` < 1.
    pub fn validate(&self) -> Result<(), String> {
        let fractions = [
            ("sample_rate", self.sample_rate),
            ("candidate_features_rate", self.candidate_features_rate),
            ("router_queue_share", self.router_queue_share),
        ];
        for (key, value) in fractions {
            if !(value.is_finite() && (0.0..=1.0).contains(&value)) {
                return Err(format!("{key} must be in [0, 1], got {value}"));
            }
        }
        if self.dir.as_os_str().is_empty() {
            return Err("dir must not be empty".to_string());
        }
        if self
            .outcomes_dir
            .as_ref()
            .is_some_and(|d| d.as_os_str().is_empty())
        {
            return Err("outcomes_dir must not be empty when set".to_string());
        }
        let at_least_one: [(&str, u64); 5] = [
            ("max_rows", self.max_rows),
            ("max_bytes", self.max_bytes),
            ("max_age_ms", self.max_age_ms),
            (
                "row_group_rows",
                u64::try_from(self.row_group_rows).unwrap_or(u64::MAX),
            ),
            (
                "channel_capacity",
                u64::try_from(self.channel_capacity).unwrap_or(u64::MAX),
            ),
        ];
        for (key, value) in at_least_one {
            if value < 1 {
                return Err(format!("{key} must be >= 1, got {value}"));
            }
        }
        if !(1..=MAX_FLUSH_MS).contains(&self.flush_ms) {
            return Err(format!(
                "flush_ms must be in 1..={MAX_FLUSH_MS}, got {}",
                self.flush_ms
            ));
        }
        Ok(())
    }

    /// Records the routers may queue: `router_queue_share ×
    /// channel_capacity`, rounded down.
    pub fn router_capacity(&self) -> usize {
        let share = self.router_queue_share.clamp(0.0, 1.0);
        let n = (share * self.channel_capacity as f64).floor() as usize;
        n.min(self.channel_capacity)
    }

    /// The outcomes directory: `outcomes_dir`, or `outcomes` next to `dir`.
    pub fn resolved_outcomes_dir(&self) -> PathBuf {
        match &self.outcomes_dir {
            Some(d) => d.clone(),
            None => self
                .dir
                .parent()
                .unwrap_or(Path::new(""))
                .join(DEFAULT_OUTCOMES_DIR_NAME),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_outcomes_is_a_sibling() {
        let c = LogConfig::default();
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.resolved_outcomes_dir(), PathBuf::from("data/outcomes"));
        assert_eq!(c.max_bytes, 268_435_456);
        assert_eq!(c.router_capacity(), 2_048);
    }

    #[test]
    fn bad_values_name_the_key() {
        let bad = |f: fn(&mut LogConfig)| {
            let mut c = LogConfig::default();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert!(bad(|c| c.sample_rate = 1.5).starts_with("sample_rate"));
        assert!(bad(|c| c.sample_rate = f64::NAN).starts_with("sample_rate"));
        assert!(bad(|c| c.candidate_features_rate = -0.1).starts_with("candidate_features_rate"));
        assert!(
            bad(|c| c.candidate_features_rate = f64::NAN).starts_with("candidate_features_rate")
        );
        assert!(bad(|c| c.max_rows = 0).starts_with("max_rows"));
        assert!(bad(|c| c.max_bytes = 0).starts_with("max_bytes"));
        assert!(bad(|c| c.max_age_ms = 0).starts_with("max_age_ms"));
        assert!(bad(|c| c.row_group_rows = 0).starts_with("row_group_rows"));
        assert!(bad(|c| c.channel_capacity = 0).starts_with("channel_capacity"));
        assert!(bad(|c| c.router_queue_share = 1.01).starts_with("router_queue_share"));
        assert!(bad(|c| c.router_queue_share = f64::NAN).starts_with("router_queue_share"));
        assert!(bad(|c| c.flush_ms = 0).starts_with("flush_ms"));
        assert!(bad(|c| c.flush_ms = 60_001).starts_with("flush_ms"));
    }

    #[test]
    fn serde_defaults_and_unknown_keys() {
        let c: LogConfig = serde_json::from_str(r#"{"sample_rate":0.25}"#).unwrap();
        assert_eq!(c.sample_rate, 0.25);
        assert_eq!(c.max_rows, DEFAULT_MAX_ROWS);
        assert!(serde_json::from_str::<LogConfig>(r#"{"sample_rat":0.25}"#).is_err());
    }
}

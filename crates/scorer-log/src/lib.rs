//! The decision log: every scoring decision and every observed outcome, written
//! to Parquet so models can be retrained offline.
//!
//! # Guide
//!
//! | file | concept |
//! | --- | --- |
//! | [`record`] | the in-memory records the request path hands over |
//! | [`schema`] | the Arrow schemas (the one place they live) |
//! | [`batch`] | records → `RecordBatch` (one row per decision, candidates nested) |
//! | [`flatten`] | nested decisions → candidate rows, the form readers load |
//! | [`config`] | [`LogConfig`], its defaults and validation |
//! | [`sampling`] | deterministic, id-hash based sampling |
//! | [`naming`] | file and partition names, `dt=YYYY-MM-DD`, sequence numbers |
//! | [`rolling`] | the pure roll decision and the one open file per kind |
//! | [`writer`] | [`DecisionLog`]: bounded channel + background writer thread |
//! | [`source`] | [`Source`]: the service's own records or a router's, each with its queue budget |
//! | [`stats`] | [`LogStats`] counters, drops per source |
//! | [`recovery`] | start-up recovery of `*.inprogress` files left by a crash |
//! | [`reader`] | loading final files back, with schema/version checks |
//! | [`join`] | decisions ⋈ outcomes on `(decision_id, worker_id)` |
//! | [`error`] | [`LogError`], [`ReadError`] |
//!
//! ## Data flow
//!
//! The request path calls [`DecisionLog::log_decision`] / [`DecisionLog::log_outcome`],
//! which only check sampling and do a non-blocking `try_send` on one bounded channel
//! (capacity [`LogConfig::channel_capacity`] for the service's records, and
//! [`LogConfig::router_queue_share`] of it more for routers' records, sent with
//! [`DecisionLog::log_decision_from`]); a source's full budget drops its record and
//! counts it in [`LogStats::dropped`] (and per [`Source`]). One background thread drains the channel,
//! builds `RecordBatch`es of one row per decision (its candidates in a nested
//! list column) and
//! appends them to the open file of its kind (decisions or outcomes) with
//! `ArrowWriter` (zstd). Files roll on rows, bytes, age or UTC day change
//! ([`rolling::roll_reason`]).
//!
//! ## On disk
//!
//! ```text
//! <dir>/dt=YYYY-MM-DD/decisions-YYYYMMDDTHHMMSSmmmZ-000001.parquet
//! <outcomes_dir>/dt=YYYY-MM-DD/outcomes-YYYYMMDDTHHMMSSmmmZ-000001.parquet
//! <dir>/quarantine/…                     unreadable leftovers of a crash
//! ```
//!
//! A file is written as `*.parquet.inprogress`, closed, fsynced, then atomically
//! renamed (and the directory fsynced), so a final name always holds a complete file.
//! The partition date and the timestamp in the name are the writer's wall clock
//! ([`scorer_core::clock::Clock::wall_ms`]) when the file was opened; rows carry their own
//! `ts_ms`.
//!
//! ## Durability
//!
//! Appended batches are in the write-ahead file: a crash of the process loses
//! at most the last [`LogConfig::flush_ms`] plus whatever sat in the channel;
//! [`recovery`] compacts leftover write-ahead files at start-up and moves
//! unreadable leftovers to `quarantine/`. A full disk loses nothing accepted:
//! a failed write is held and resumed in the same file once writes succeed
//! ([`wal::WalWriter::drain`]).
//!
//! ## Training
//!
//! [`reader::read_dir`] loads both kinds, decisions as one row per
//! candidate ([`schema::candidate_rows_schema`]); [`join::join_outcomes`] attaches
//! `latency_ms`/`success` to each candidate row. `probability` is the propensity of
//! the picked candidate under the logging policy, for off-policy estimators.

pub mod config;
pub mod record;
pub mod sampling;
pub mod sink;
pub mod source;

#[cfg(feature = "parquet")]
pub mod batch;
#[cfg(feature = "parquet")]
pub mod compact;
#[cfg(feature = "parquet")]
pub mod compactor;
#[cfg(feature = "parquet")]
pub mod dir_lock;
#[cfg(feature = "parquet")]
pub mod error;
#[cfg(feature = "parquet")]
pub mod flatten;
#[cfg(feature = "parquet")]
pub mod join;
#[cfg(feature = "parquet")]
pub mod naming;
#[cfg(feature = "parquet")]
pub mod reader;
#[cfg(feature = "parquet")]
pub mod recovery;
#[cfg(feature = "parquet")]
pub mod rolling;
#[cfg(feature = "parquet")]
pub mod schema;
#[cfg(feature = "parquet")]
pub mod stats;
#[cfg(feature = "parquet")]
pub mod stream;
#[cfg(feature = "parquet")]
mod upgrade;
#[cfg(feature = "parquet")]
pub mod wal;
#[cfg(feature = "parquet")]
mod worker;
#[cfg(feature = "parquet")]
pub mod writer;

#[cfg(all(test, feature = "parquet"))]
mod layout_tests;
#[cfg(all(test, feature = "parquet"))]
mod log_tests;

#[cfg(feature = "parquet")]
use arrow::datatypes::SchemaRef;

#[cfg(feature = "parquet")]
pub use batch::{decisions_batch, outcomes_batch};
pub use config::{FsyncPolicy, LogConfig};
#[cfg(feature = "parquet")]
pub use error::{LogError, ReadError};
#[cfg(feature = "parquet")]
pub use flatten::candidate_rows;
#[cfg(feature = "parquet")]
pub use join::{join_outcomes, joined_schema};
#[cfg(feature = "parquet")]
pub use reader::{LoadedLog, read_dir, read_file};
pub use record::{CandidateRow, DecisionRecord, OutcomeRecord, SHADOW_ARM};
#[cfg(feature = "parquet")]
pub use recovery::{RecoveryReport, recover_dir, recover_dir_with};
#[cfg(feature = "parquet")]
pub use rolling::{RollReason, roll_reason};
pub use sampling::sampled_at;
#[cfg(feature = "parquet")]
pub use schema::{
    CACHE_HIT_COLUMN, LOG_SCHEMA_VERSION, LOG_SCHEMA_VERSION_FLAT, META_FEATURE_SCHEMA_VERSION,
    META_LOG_SCHEMA_VERSION, candidate_rows_schema, decisions_schema, outcomes_schema,
};
pub use sink::DecisionSink;
pub use source::Source;
#[cfg(feature = "parquet")]
pub use stats::LogStats;
#[cfg(feature = "parquet")]
pub use writer::{DecisionLog, WriterHold};

/// Which of the two logs a file or directory holds.
#[cfg(feature = "parquet")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LogKind {
    /// One row per decision, candidates nested; [`decisions_schema`].
    Decisions,
    /// One row per observed outcome; [`outcomes_schema`].
    Outcomes,
}

#[cfg(feature = "parquet")]
impl LogKind {
    /// File name prefix: `"decisions"` or `"outcomes"`.
    pub fn prefix(self) -> &'static str {
        match self {
            LogKind::Decisions => "decisions",
            LogKind::Outcomes => "outcomes",
        }
    }

    /// The Arrow schema files of this kind must have.
    pub fn schema(self) -> SchemaRef {
        match self {
            LogKind::Decisions => decisions_schema(),
            LogKind::Outcomes => outcomes_schema(),
        }
    }
}

//! Telemetry ingestion: the snapshot wire type and its validation.
//!
//! Workers (or the telemetry agent) push [`Snapshot`]s in batches; a batch is
//! validated snapshot by snapshot with [`validate::check_snapshot`] and applied
//! by [`crate::state::Registry::ingest`] only when
//! every snapshot passes (issue #2: "the batch is atomic").

mod config;
pub mod digest;
mod snapshot;
pub mod validate;

pub use config::{
    DEFAULT_DEAD_AFTER_MS, DEFAULT_EWMA_ALPHA, DEFAULT_FORGET_AFTER_MS, DEFAULT_MAX_CLOCK_SKEW_MS,
    DEFAULT_MAX_WORKERS, TelemetryConfig,
};
pub use digest::CacheDigest;
pub use snapshot::{Snapshot, TelemetryBatch};

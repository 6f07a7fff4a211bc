//! Telemetry ingestion: the snapshot wire type and its validation.
//!
//! Workers (or the telemetry agent) push [`Snapshot`]s in batches; a batch is
//! validated snapshot by snapshot with [`validate::check_snapshot`] and applied
//! by [`crate::state::Registry::ingest`] only when
//! every snapshot passes (issue #2: "the batch is atomic").

mod snapshot;
pub mod validate;

pub use snapshot::{Snapshot, TelemetryBatch};

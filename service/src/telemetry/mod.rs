//! Telemetry ingestion: the snapshot wire type and its validation.
//!
//! Workers (or the telemetry agent) push [`Snapshot`]s in batches; a batch is
//! validated as a whole by [`validate::validate_batch`] and applied only when
//! every snapshot passes (issue #2: "the batch is atomic").

mod snapshot;
pub mod validate;

pub use snapshot::{Snapshot, TelemetryBatch};

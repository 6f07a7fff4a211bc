//! Per-worker state: the registry of workers and their smoothed signals.
//!
//! Concurrency design (issue #2 asks to say which and why): the scoring path
//! reads, the telemetry path writes.
//! - The worker table is an `ArcSwap<HashMap<Arc<str>, Arc<WorkerSlot>>>`:
//!   readers take one atomic load and look candidates up by `&str` with no
//!   lock and no allocation. The map is copied only when a batch registers
//!   new workers (rare), once per batch.
//! - Each worker's published [`WorkerView`] sits behind its own `ArcSwap`, so
//!   a report replaces it atomically and a reader holds a consistent view.
//! - Writers (telemetry batches) are serialised by one ingest mutex, which is
//!   what makes a batch atomic: validation of stale timestamps and apply
//!   happen under it. The scoring path never takes it.

mod ewma;
pub mod history;
mod registry;
mod worker;

pub use ewma::ewma;
pub use history::{History, HistoryStats, RING_CAPACITY, Sample};
pub use registry::{
    IngestConfig, IngestError, IngestOutcome, NEW_WORKER_IDS_MAX, Registry, WorkerSlot,
};
pub use worker::{Derived, Smoothed, WorkerView};

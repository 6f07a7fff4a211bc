//! `[telemetry]`: ingestion limits, liveness and smoothing, with their
//! documented defaults.

use serde::{Deserialize, Serialize};

pub use crate::dynamics::DEFAULT_DEAD_AFTER_MS;

/// Default tolerated reporter clock lead over the server clock, ms.
pub const DEFAULT_MAX_CLOCK_SKEW_MS: u64 = 5_000;
/// Default EWMA smoothing factor: weight of the newest sample, in (0, 1].
pub const DEFAULT_EWMA_ALPHA: f64 = 0.5;
/// Default silence after which a worker is forgotten, ms (10 min).
pub const DEFAULT_FORGET_AFTER_MS: u64 = 600_000;
/// Default maximum number of tracked workers.
pub const DEFAULT_MAX_WORKERS: usize = 100_000;

/// `[telemetry]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// How far a report's `timestamp_ms` may lead the server's wall clock, ms. Default 5000.
    pub max_clock_skew_ms: u64,
    /// A worker whose last report was received longer ago than this is dead, ms. Default 10_000.
    pub dead_after_ms: u64,
    /// EWMA weight of the newest sample, in (0, 1]. Default 0.5.
    pub ewma_alpha: f64,
    /// Most workers tracked at once; new ids beyond it are rejected. Default 100_000.
    pub max_workers: usize,
    /// A worker silent for longer than this is forgotten (state, history,
    /// metrics), ms; must be >= `dead_after_ms`. Default 600_000.
    pub forget_after_ms: u64,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            max_clock_skew_ms: DEFAULT_MAX_CLOCK_SKEW_MS,
            dead_after_ms: DEFAULT_DEAD_AFTER_MS,
            ewma_alpha: DEFAULT_EWMA_ALPHA,
            max_workers: DEFAULT_MAX_WORKERS,
            forget_after_ms: DEFAULT_FORGET_AFTER_MS,
        }
    }
}

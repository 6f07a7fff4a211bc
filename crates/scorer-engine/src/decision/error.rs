//! Why a decision was refused.

use crate::api::{MAX_KEY_BYTES, MAX_TIMEOUT_MS};
use crate::no_eligible::NoEligible;
use scorer_core::selection::SelectionError;

/// Longest client region a request may name, bytes.
pub const MAX_CLIENT_REGION_BYTES: usize = 64;

/// Why a score request was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScoreError {
    /// `context.client_region` is longer than [`MAX_CLIENT_REGION_BYTES`]
    /// or has a control character (422).
    #[error(
        "`context.client_region` must be at most {MAX_CLIENT_REGION_BYTES} bytes without control characters"
    )]
    BadClientRegion,
    /// `context.batch_size` is 0 (422).
    #[error("`context.batch_size` must be at least 1")]
    BadBatchSize,
    /// `context.timeout_ms` is above [`MAX_TIMEOUT_MS`] (422).
    #[error("`context.timeout_ms` must be at most {MAX_TIMEOUT_MS} ms (one day), got {0}")]
    BadTimeout(u64),
    /// `candidates` is empty (422).
    #[error("`candidates` must name at least one worker")]
    NoCandidates,
    /// More distinct candidates than `server.max_candidates` (422).
    #[error("{count} distinct candidates, at most {max} are allowed")]
    TooManyCandidates {
        /// Distinct candidates in the request.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// The key is empty or longer than [`MAX_KEY_BYTES`] (422).
    #[error("`key` must be 1..={MAX_KEY_BYTES} bytes, got {0}")]
    BadKey(usize),
    /// A candidate id fails [`scorer_core::telemetry::validate::is_valid_worker_id`]
    /// (422), as telemetry refuses such worker ids.
    #[error(
        "candidate {0} is not a valid worker id (1..=128 bytes; no control or invisible formatting characters; no whitespace at either end)"
    )]
    BadCandidate(usize),
    /// `policy` is not a policy name (422).
    #[error("unknown policy `{0}`: expected max, softmax, p2c, swrr, hash, prequal or none")]
    BadPolicy(String),
    /// `temperature` is negative, NaN or infinite (422).
    #[error("`temperature` must be finite and >= 0, got {}", scorer_core::fmt::exact(*.0))]
    BadTemperature(f64),
    /// No candidate can be picked: each is dead, unknown, unhealthy, or
    /// drained or disabled by an operator (503); the message names the
    /// operators' overrides.
    #[error("no eligible workers: {0}")]
    NoEligibleWorkers(NoEligible),
    /// The selector refused its input; a bug, answered 500 and logged.
    #[error("selection failed: {0}")]
    Selection(SelectionError),
}

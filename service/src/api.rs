//! Wire types of the v1 HTTP contract that in-process callers (the
//! simulator, benches) use too.

use serde::{Deserialize, Serialize};

use crate::features::FEATURE_COUNT;
use crate::scoring::{Adjustment, RequestContext};

/// Longest accepted key, bytes.
pub const MAX_KEY_BYTES: usize = 1024;

/// Body of `POST /v1/score`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScoreRequest {
    /// The request's key, 1..=1024 bytes.
    pub key: String,
    /// Request facts; absent fields may come from `X-*` headers.
    #[serde(default)]
    pub context: Option<RequestContext>,
    /// Candidate worker ids, 1..=`server.max_candidates` after collapsing duplicates.
    pub candidates: Vec<String>,
    /// Include each candidate's 42-feature vector.
    #[serde(default)]
    pub explain: bool,
}

/// One candidate's score in a [`ScoreResponse`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkerScore {
    /// Worker id.
    pub worker_id: String,
    /// Whether the worker may be picked.
    pub eligible: bool,
    /// Machine reason when not eligible (`unknown_worker`, `heartbeat_dead`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    /// Rule score, 0..=100.
    pub rule_score: f64,
    /// Final score after later stages (equals `rule_score` without a model), 0..=100.
    pub final_score: f64,
    /// The steps from 100 to `rule_score`, in order.
    pub adjustments: Vec<Adjustment>,
    /// The observation vector, present when `explain` was set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub features: Option<Vec<f32>>,
    /// The observation vector, always kept for logging.
    #[serde(skip)]
    pub observation: [f32; FEATURE_COUNT],
}

/// Answer of `POST /v1/score`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoreResponse {
    /// Unique id of this decision (UUID v7, time-ordered).
    pub decision_id: String,
    /// One entry per distinct candidate, in request order.
    pub scores: Vec<WorkerScore>,
    /// Worker ids by final score, highest first: eligible workers, then the
    /// rest; ties broken by worker id.
    pub ranking: Vec<String>,
}

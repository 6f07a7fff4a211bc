//! The records the request path hands to the log.
//!
//! A [`DecisionRecord`] becomes one Parquet row, its [`CandidateRow`]s the
//! items of its nested `candidates` column (see [`super::schema`]).

use scorer_core::features::FEATURE_COUNT;

/// `arm` value of shadow rows in the decision log.
pub const SHADOW_ARM: &str = "shadow";

/// One scoring decision: the request context plus every candidate scored.
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionRecord {
    /// Unique id of the decision; joins with [`OutcomeRecord::decision_id`].
    pub decision_id: String,
    /// Wall clock time of the decision, Unix milliseconds (UTC).
    pub ts_ms: i64,
    /// Key prefix the request was routed on.
    pub key_prefix: String,
    /// Shard the key maps to, when known.
    pub shard_id: Option<u64>,
    /// Request type label (e.g. `"get"`), when known.
    pub request_type: Option<&'static str>,
    /// Region of the calling client, when known.
    pub client_region: Option<String>,
    /// Client timeout, milliseconds.
    pub timeout_ms: Option<u64>,
    /// Number of keys in the request batch.
    pub batch_size: Option<u32>,
    /// Name of the policy that made the decision.
    pub policy: &'static str,
    /// True when the service was in panic mode (all candidates treated as eligible).
    pub panic: bool,
    /// Version of the model used, if a model was consulted.
    pub model_version: Option<String>,
    /// Experiment arm, if any.
    pub arm: Option<String>,
    /// Hash of the active configuration.
    pub config_hash: String,
    /// Configured name of the credential that asked for the decision (a
    /// token's or a client certificate's name, never the token); `None`
    /// without one.
    pub caller: Option<std::sync::Arc<str>>,
    /// Every candidate considered, in scoring order; may be empty (an empty `candidates` list).
    pub candidates: Vec<CandidateRow>,
}

impl DecisionRecord {
    /// The shadow rows of a decision: the primary record's rows with
    /// `arm = "shadow"`, the shadow's `model_version`, its action in
    /// `model_action` and the final score it would have given; `picked` false
    /// and `probability` null everywhere (the shadow picks nothing), and no
    /// `fallback_reason`. Candidates the model stage did not score keep the
    /// primary's final score and a null action. Readers joining outcomes drop
    /// `arm = "shadow"` rows, or use them to compare models offline.
    pub fn shadow(&self, version: &str, rows: &[Option<(f64, f64)>]) -> DecisionRecord {
        let mut rec = self.clone();
        rec.arm = Some(SHADOW_ARM.to_owned());
        rec.model_version = Some(version.to_owned());
        for (c, row) in rec.candidates.iter_mut().zip(rows) {
            c.picked = false;
            c.probability = None;
            c.fallback_reason = None;
            c.model_action = row.map(|r| r.0);
            if let Some((_, fin)) = row {
                c.final_score = *fin;
            }
        }
        rec
    }
}

/// One candidate worker of a decision.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateRow {
    /// Worker id.
    pub worker_id: String,
    /// Whether the worker passed eligibility filters.
    pub eligible: bool,
    /// Rule-based score (dimensionless, higher is better).
    pub rule_score: f64,
    /// Raw model output for this candidate, if a model was consulted.
    pub model_action: Option<f64>,
    /// Score the policy ranked on (dimensionless).
    pub final_score: f64,
    /// Probability in [0, 1] that the policy picks this candidate (the propensity).
    pub probability: Option<f64>,
    /// True for the candidate that was picked.
    pub picked: bool,
    /// Penalty state label of the worker (e.g. `"none"`, `"penalized"`).
    pub penalty_state: &'static str,
    /// Why the model was bypassed for this candidate, if it was.
    pub fallback_reason: Option<&'static str>,
    /// Observation vector, `FEATURE_COUNT` values in the order of the feature schema.
    pub features: [f32; FEATURE_COUNT],
    /// The operator's override in force on the worker (`drain`, `disable`,
    /// `weight`), if any.
    pub operator_override: Option<&'static str>,
}

/// The observed result of sending a request to a worker.
#[derive(Debug, Clone, PartialEq)]
pub struct OutcomeRecord {
    /// The decision this outcome belongs to.
    pub decision_id: String,
    /// The worker that served the request.
    pub worker_id: String,
    /// Wall clock time the outcome was observed, Unix milliseconds (UTC).
    pub ts_ms: i64,
    /// Observed latency, milliseconds.
    pub latency_ms: f64,
    /// Whether the request succeeded.
    pub success: bool,
    /// Configured name of the credential that reported it; `None` without one.
    pub caller: Option<std::sync::Arc<str>>,
    /// Whether the worker served the request from its cache: `Some(true)` a
    /// hit, `Some(false)` a miss (a cache-aside GET that found nothing);
    /// `None` when unknown or not a read.
    pub cache_hit: Option<bool>,
}

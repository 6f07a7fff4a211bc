//! What a router's balancer sends for the service's decision log
//! (`POST /v1/router/decisions`): the decisions it made, at the log's
//! `sample_rate`, and their outcomes, in batches every few ms. The service
//! checks each record and writes it to the same Parquet log as its own
//! decisions, so the trainer learns from every router.
//!
//! A router's decision ids are `<router_id>-<16 hex digits>`: the prefix
//! tags every row with the router that decided it, and the service refuses
//! a record whose id does not carry the sending router's id.
//!
//! Candidates' features travel as the log keeps them: the pick's always,
//! every candidate's on the `candidate_features_rate` sample (chosen by
//! decision id, so router and service agree). Other candidates' features
//! are `null` and written as null.

use serde::{Deserialize, Serialize};

use scorer_core::features::FEATURE_COUNT;
use scorer_core::scoring::RequestType;
use scorer_core::selection::PolicyKind;
use scorer_core::telemetry::validate::{MAX_LATENCY_MS, is_invisible_format, is_valid_worker_id};
use scorer_log::{CandidateRow, DecisionRecord, OutcomeRecord};
use scorer_model::fallback::FallbackReason;

use crate::api::{MAX_KEY_BYTES, MAX_TIMEOUT_MS};
use crate::overrides::OverrideKind;

/// Most decisions plus outcomes in one batch.
pub const MAX_ROUTER_BATCH: usize = 4096;
/// Hex digits after the router id in a router's decision id.
pub const DECISION_SEQ_HEX: usize = 16;
/// Latest `ts_ms` accepted: 9999-12-31T23:59:59.999Z, Unix ms.
pub const MAX_TS_MS: i64 = 253_402_300_799_999;
/// Longest model version, arm, config hash or client region, bytes.
pub const MAX_LABEL_BYTES: usize = 128;
/// Oldest record accepted, ms before the service's wall clock: a router
/// holds records while the service is away, not for longer than a day.
pub const MAX_RECORD_AGE_MS: i64 = 86_400_000;
/// Furthest a record's time may be ahead of the service's wall clock, ms
/// (clock skew between router and service hosts).
pub const MAX_RECORD_AHEAD_MS: i64 = 300_000;
/// Smallest probability a pick may carry: a propensity below it would
/// weigh the decision past any use in training (1 / p).
pub const MIN_PICK_PROBABILITY: f64 = 1e-6;
/// Largest `final_score`, as the engine scores (0..=100).
const MAX_SCORE: f64 = 100.0;

/// What a router's records are checked against.
#[derive(Debug, Clone, Copy)]
pub struct RecordCheck<'a> {
    /// The sending router: every decision id must carry it.
    pub router_id: &'a str,
    /// The service's wall clock, Unix ms: a record's time must be within
    /// [`MAX_RECORD_AGE_MS`] before it and [`MAX_RECORD_AHEAD_MS`] after.
    pub now_ms: i64,
    /// `server.max_candidates`.
    pub max_candidates: usize,
}

/// Penalty states a candidate row may carry (`"unknown"`: no telemetry).
const PENALTY_STATES: [&str; 5] = [
    "healthy",
    "observation",
    "cooldown",
    "recovering",
    "unknown",
];

/// Body of `POST /v1/router/decisions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RouterRecords {
    /// The sending router: 1..=32 bytes of ASCII letters, digits, `-`, `_`
    /// and `.`; every decision id and outcome in the batch starts with it
    /// and a `-`.
    #[schema(min_length = 1, max_length = 32, pattern = "^[A-Za-z0-9._-]{1,32}$")]
    pub router_id: String,
    /// Decisions, in the order they were made (with `outcomes`, at most
    /// 4 096 records).
    #[serde(default)]
    #[schema(max_items = 4096)]
    pub decisions: Vec<RouterDecision>,
    /// Outcomes of the router's decisions.
    #[serde(default)]
    #[schema(max_items = 4096)]
    pub outcomes: Vec<RouterOutcome>,
}

/// One decision of a router: a row of the decision log. Its fields' ranges
/// are checked per record (a bad record is refused in the answer, not the
/// batch), so the schema states them in words only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RouterDecision {
    /// `<router_id>-<16 lowercase hex digits>`.
    pub decision_id: String,
    /// When the decision was made, Unix ms (UTC), within a day before and
    /// 5 minutes after the service's clock.
    pub ts_ms: i64,
    /// The key's prefix, at most 1024 bytes, without control or invisible
    /// formatting characters.
    pub key_prefix: String,
    /// The key's shard, when the sharding names one.
    #[serde(default)]
    pub shard_id: Option<u64>,
    /// `GET`, `PUT`, `DELETE` or `MGET`.
    #[serde(default)]
    pub request_type: Option<String>,
    /// The client's region, at most 128 bytes.
    #[serde(default)]
    pub client_region: Option<String>,
    /// The client's timeout, ms, at most 86400000.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Keys in the request, at least 1.
    #[serde(default)]
    pub batch_size: Option<u32>,
    /// The selection policy: `max`, `softmax`, `p2c`, `swrr`, `hash` or
    /// `prequal`.
    pub policy: String,
    /// Whether no candidate was eligible (panic mode).
    pub panic: bool,
    /// The model's version, when one ran.
    #[serde(default)]
    pub model_version: Option<String>,
    /// The experiment arm, when one applied.
    #[serde(default)]
    pub arm: Option<String>,
    /// The hash of the configuration the router decided with.
    pub config_hash: String,
    /// Every candidate, in the request's order; exactly one picked.
    pub candidates: Vec<RouterCandidate>,
}

/// One candidate of a router's decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RouterCandidate {
    /// The worker, 1..=128 bytes.
    pub worker_id: String,
    /// Whether it could be picked.
    pub eligible: bool,
    /// Rule score, 0..=100.
    pub rule_score: f64,
    /// The model's action, when the model scored it.
    #[serde(default)]
    pub model_action: Option<f64>,
    /// Final score, 0..=100.
    pub final_score: f64,
    /// Its probability of being picked, 0..=1: at least 0.000001 on the
    /// pick, 0 on a candidate that was not eligible.
    #[serde(default)]
    pub probability: Option<f64>,
    /// Whether it was picked.
    pub picked: bool,
    /// `healthy`, `observation`, `cooldown`, `recovering` or `unknown`.
    pub penalty_state: String,
    /// Why the model fell back, when it did.
    #[serde(default)]
    pub fallback_reason: Option<String>,
    /// The 42 features in feature-schema order (`null` for a missing
    /// value); required on the pick, and on every candidate of a decision
    /// in the `candidate_features_rate` sample; `null` otherwise.
    #[serde(default)]
    #[schema(value_type = Option<Vec<Option<f32>>>)]
    pub features: Option<Vec<Option<f32>>>,
    /// The operator's override the router saw on the worker: `drain`,
    /// `disable` or `weight`; absent without one.
    #[serde(default, rename = "override", skip_serializing_if = "Option::is_none")]
    pub operator_override: Option<String>,
}

/// One outcome of a router's decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RouterOutcome {
    /// The decision's id, `<router_id>-<16 hex digits>`.
    pub decision_id: String,
    /// The worker the request went to, 1..=128 bytes.
    pub worker_id: String,
    /// When the outcome was known, Unix ms (UTC), within a day before and
    /// 5 minutes after the service's clock.
    pub ts_ms: i64,
    /// Observed latency, ms, 0..=86400000.
    pub latency_ms: f64,
    /// Whether the request succeeded.
    pub success: bool,
    /// Whether the worker served it from its cache: `true` a hit, `false`
    /// a miss (a cache-aside GET that found nothing); absent when unknown
    /// or not a read. Logged as `cache_hit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_hit: Option<bool>,
}

/// Why a record was refused: the field (relative to the record) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{field}`: {reason}")]
pub struct RecordError {
    /// The field, e.g. `candidates[2].features`.
    pub field: String,
    /// Why.
    pub reason: String,
}

fn refuse<T>(field: impl Into<String>, reason: impl Into<String>) -> Result<T, RecordError> {
    Err(RecordError {
        field: field.into(),
        reason: reason.into(),
    })
}

/// Whether `id` is `<router_id>-<16 lowercase hex digits>`.
pub fn is_router_decision_id(router_id: &str, id: &str) -> bool {
    id.strip_prefix(router_id)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|seq| {
            seq.len() == DECISION_SEQ_HEX
                && seq.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        })
}

fn check_label(field: &str, s: &str, max: usize) -> Result<(), RecordError> {
    if s.is_empty() || s.len() > max || s.chars().any(char::is_control) {
        return refuse(
            field,
            format!("must be 1..={max} bytes without control characters"),
        );
    }
    Ok(())
}

fn check_ids(check: &RecordCheck<'_>, decision_id: &str, ts_ms: i64) -> Result<(), RecordError> {
    let router_id = check.router_id;
    if !is_router_decision_id(router_id, decision_id) {
        return refuse(
            "decision_id",
            format!("must be `{router_id}-` and {DECISION_SEQ_HEX} lowercase hex digits"),
        );
    }
    let earliest = check.now_ms.saturating_sub(MAX_RECORD_AGE_MS).max(1);
    let latest = check
        .now_ms
        .saturating_add(MAX_RECORD_AHEAD_MS)
        .min(MAX_TS_MS);
    if !(earliest..=latest).contains(&ts_ms) {
        return refuse(
            "ts_ms",
            format!(
                "must be Unix ms within a day before and 5 minutes after the service's clock ({earliest}..={latest}), got {ts_ms}"
            ),
        );
    }
    Ok(())
}

/// The candidates as the engine writes them: distinct workers, exactly one
/// picked; the pick eligible (in panic mode none is), with a probability
/// of at least [`MIN_PICK_PROBABILITY`] when it states one; the others
/// that could not be picked with a probability of 0, if any.
fn check_candidates(panic: bool, candidates: &[RouterCandidate]) -> Result<(), RecordError> {
    let picked = candidates.iter().filter(|c| c.picked).count();
    if picked != 1 {
        return refuse(
            "candidates",
            format!("exactly one must be picked, got {picked}"),
        );
    }
    let mut seen = std::collections::HashSet::with_capacity(candidates.len());
    for (i, c) in candidates.iter().enumerate() {
        let field = |f: &str| format!("candidates[{i}].{f}");
        if !seen.insert(c.worker_id.as_str()) {
            return refuse(field("worker_id"), "repeats an earlier candidate");
        }
        if panic && c.eligible {
            return refuse(
                field("eligible"),
                "must be false in panic mode (no candidate was eligible)",
            );
        }
        if c.picked && !panic && !c.eligible {
            return refuse(
                field("eligible"),
                "the pick must be eligible (outside panic mode)",
            );
        }
        let p = c.probability.unwrap_or(0.0);
        if c.picked && c.probability.is_some() && p < MIN_PICK_PROBABILITY {
            return refuse(
                field("probability"),
                format!("the pick's probability must be at least {MIN_PICK_PROBABILITY}"),
            );
        }
        if !c.picked && !c.eligible && !panic && p != 0.0 {
            return refuse(
                field("probability"),
                "must be 0 or null on a candidate that was not eligible",
            );
        }
    }
    Ok(())
}

/// The override kinds, as logged.
const OVERRIDE_KINDS: [&str; 3] = [
    OverrideKind::Drain.as_str(),
    OverrideKind::Disable.as_str(),
    OverrideKind::Weight.as_str(),
];

fn known(field: &str, value: &str, names: &[&'static str]) -> Result<&'static str, RecordError> {
    names
        .iter()
        .find(|n| **n == value)
        .copied()
        .ok_or_else(|| RecordError {
            field: field.to_owned(),
            reason: format!("unknown value {value:?}; one of {}", names.join(", ")),
        })
}

impl RouterDecision {
    /// The wire form of `rec`; every candidate's features when
    /// `all_features`, else the pick's alone.
    pub fn from_record(rec: &DecisionRecord, all_features: bool) -> Self {
        Self {
            decision_id: rec.decision_id.clone(),
            ts_ms: rec.ts_ms,
            key_prefix: rec.key_prefix.clone(),
            shard_id: rec.shard_id,
            request_type: rec.request_type.map(str::to_owned),
            client_region: rec.client_region.clone(),
            timeout_ms: rec.timeout_ms,
            batch_size: rec.batch_size,
            policy: rec.policy.to_owned(),
            panic: rec.panic,
            model_version: rec.model_version.clone(),
            arm: rec.arm.clone(),
            config_hash: rec.config_hash.clone(),
            candidates: rec
                .candidates
                .iter()
                .map(|c| RouterCandidate {
                    worker_id: c.worker_id.clone(),
                    eligible: c.eligible,
                    rule_score: c.rule_score,
                    model_action: c.model_action,
                    final_score: c.final_score,
                    probability: c.probability,
                    picked: c.picked,
                    penalty_state: c.penalty_state.to_owned(),
                    fallback_reason: c.fallback_reason.map(str::to_owned),
                    operator_override: c.operator_override.map(str::to_owned),
                    features: (c.picked || all_features).then(|| {
                        c.features
                            .iter()
                            .map(|f| f.is_finite().then_some(*f))
                            .collect()
                    }),
                })
                .collect(),
        }
    }

    /// The log record of this decision, checked against `check`:
    /// `all_features` says whether the log keeps every candidate's
    /// features for it (then each must have them).
    ///
    /// # Errors
    /// [`RecordError`] naming the first bad field; nothing is built.
    pub fn into_record(
        self,
        check: &RecordCheck<'_>,
        all_features: bool,
    ) -> Result<DecisionRecord, RecordError> {
        check_ids(check, &self.decision_id, self.ts_ms)?;
        if self.key_prefix.len() > MAX_KEY_BYTES
            || self
                .key_prefix
                .chars()
                .any(|c| c.is_control() || is_invisible_format(c))
        {
            return refuse(
                "key_prefix",
                format!(
                    "must be at most {MAX_KEY_BYTES} bytes without control or invisible formatting (zero-width, bidi) characters"
                ),
            );
        }
        if self.timeout_ms.is_some_and(|t| t > MAX_TIMEOUT_MS) {
            return refuse(
                "timeout_ms",
                format!("must be at most {MAX_TIMEOUT_MS} ms (one day)"),
            );
        }
        if self.batch_size == Some(0) {
            return refuse("batch_size", "must be at least 1");
        }
        let request_type = match &self.request_type {
            None => None,
            Some(t) => Some(
                RequestType::parse(t)
                    .ok_or_else(|| RecordError {
                        field: "request_type".into(),
                        reason: format!("unknown value {t:?}; one of GET, PUT, DELETE, MGET"),
                    })?
                    .as_str(),
            ),
        };
        for (field, value) in [
            ("client_region", &self.client_region),
            ("model_version", &self.model_version),
            ("arm", &self.arm),
        ] {
            if let Some(v) = value {
                check_label(field, v, MAX_LABEL_BYTES)?;
            }
        }
        check_label("config_hash", &self.config_hash, MAX_LABEL_BYTES)?;
        let policies: Vec<&'static str> = PolicyKind::ALL
            .iter()
            .filter(|p| **p != PolicyKind::None)
            .map(|p| p.as_str())
            .collect();
        let policy = known("policy", &self.policy, &policies)?;
        let (n, max_candidates) = (self.candidates.len(), check.max_candidates);
        if n == 0 || n > max_candidates {
            return refuse(
                "candidates",
                format!("must have 1..={max_candidates} items, got {n}"),
            );
        }
        check_candidates(self.panic, &self.candidates)?;
        let mut candidates = Vec::with_capacity(n);
        for (i, c) in self.candidates.into_iter().enumerate() {
            candidates.push(c.into_row(all_features).map_err(|e| RecordError {
                field: format!("candidates[{i}].{}", e.field),
                reason: e.reason,
            })?);
        }
        Ok(DecisionRecord {
            decision_id: self.decision_id,
            ts_ms: self.ts_ms,
            key_prefix: self.key_prefix,
            shard_id: self.shard_id,
            request_type,
            client_region: self.client_region,
            timeout_ms: self.timeout_ms,
            batch_size: self.batch_size,
            policy,
            panic: self.panic,
            model_version: self.model_version,
            arm: self.arm,
            config_hash: self.config_hash,
            caller: None,
            candidates,
        })
    }
}

impl RouterCandidate {
    fn into_row(self, all_features: bool) -> Result<CandidateRow, RecordError> {
        if !is_valid_worker_id(&self.worker_id) {
            return refuse(
                "worker_id",
                "must be 1..=128 bytes without control or invisible formatting characters or whitespace at either end",
            );
        }
        if !(0.0..=100.0).contains(&self.rule_score) {
            return refuse("rule_score", "must be a number within 0..=100");
        }
        if !(0.0..=MAX_SCORE).contains(&self.final_score) {
            return refuse("final_score", "must be a number within 0..=100");
        }
        if self.model_action.is_some_and(|a| !a.is_finite()) {
            return refuse("model_action", "must be a finite number or null");
        }
        if self.probability.is_some_and(|p| !(0.0..=1.0).contains(&p)) {
            return refuse("probability", "must be a fraction within 0..=1 or null");
        }
        let penalty_state = known("penalty_state", &self.penalty_state, &PENALTY_STATES)?;
        let reasons: Vec<&'static str> = FallbackReason::ALL.iter().map(|r| r.as_str()).collect();
        let fallback_reason = match &self.fallback_reason {
            None => None,
            Some(r) => Some(known("fallback_reason", r, &reasons)?),
        };
        let operator_override = match &self.operator_override {
            None => None,
            Some(o) => Some(known("override", o, &OVERRIDE_KINDS)?),
        };
        let mut features = [0.0_f32; FEATURE_COUNT];
        match self.features {
            Some(values) if values.len() == FEATURE_COUNT => {
                for (slot, v) in features.iter_mut().zip(values) {
                    match v {
                        Some(x) if x.is_finite() => *slot = x,
                        Some(_) => return refuse("features", "values must be finite or null"),
                        None => *slot = f32::NAN,
                    }
                }
            }
            Some(values) => {
                return refuse(
                    "features",
                    format!("must have {FEATURE_COUNT} values, got {}", values.len()),
                );
            }
            None if self.picked || all_features => {
                return refuse(
                    "features",
                    "required on the pick, and on every candidate of a decision in the log's candidate_features_rate sample",
                );
            }
            None => {}
        }
        Ok(CandidateRow {
            worker_id: self.worker_id,
            eligible: self.eligible,
            rule_score: self.rule_score,
            model_action: self.model_action,
            final_score: self.final_score,
            probability: self.probability,
            picked: self.picked,
            penalty_state,
            fallback_reason,
            features,
            operator_override,
        })
    }
}

impl RouterOutcome {
    /// The wire form of `rec`.
    pub fn from_record(rec: &OutcomeRecord) -> Self {
        Self {
            decision_id: rec.decision_id.clone(),
            worker_id: rec.worker_id.clone(),
            ts_ms: rec.ts_ms,
            latency_ms: rec.latency_ms,
            success: rec.success,
            cache_hit: rec.cache_hit,
        }
    }

    /// The log record of this outcome, checked against `check`.
    ///
    /// # Errors
    /// [`RecordError`] naming the first bad field.
    pub fn into_record(self, check: &RecordCheck<'_>) -> Result<OutcomeRecord, RecordError> {
        check_ids(check, &self.decision_id, self.ts_ms)?;
        if !is_valid_worker_id(&self.worker_id) {
            return refuse("worker_id", "must be 1..=128 bytes of a valid worker id");
        }
        if !(0.0..=MAX_LATENCY_MS).contains(&self.latency_ms) {
            return refuse(
                "latency_ms",
                "must be a number of ms within 0..=86400000 (one day)",
            );
        }
        Ok(OutcomeRecord {
            decision_id: self.decision_id,
            worker_id: self.worker_id,
            ts_ms: self.ts_ms,
            latency_ms: self.latency_ms,
            success: self.success,
            caller: None,
            cache_hit: self.cache_hit,
        })
    }
}

#[cfg(test)]
#[path = "router_records_tests.rs"]
mod tests;

//! Log: a sampled decision's record for the decision log, built from the
//! decision itself (its key as the decision parsed it, every candidate's
//! row with its feature vector), and its shadow model's rows beside it.
//! The sink only queues them: encoding and writing happen on its own
//! thread.

use std::sync::Arc;

use crate::api::ShadowDecision;
use crate::canary::{Canary, ConfigArm};
use crate::decision::Decision;
use scorer_core::features::FEATURE_COUNT;
use scorer_log::{CandidateRow, DecisionRecord, DecisionSink};

/// What a decision's record says beside the decision: who asked, when,
/// under which configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stamp<'a> {
    /// Unix ms.
    pub wall_ms: u64,
    pub caller: Option<&'a Arc<str>>,
    pub config_hash: &'a str,
    pub arm: Option<(&'a Canary, ConfigArm)>,
}

/// Queues `d`'s record, and its shadow's, on `sink`.
pub(crate) fn log(d: &Decision<'_>, stamp: Stamp<'_>, sink: &dyn DecisionSink) {
    let rec = record(d, stamp);
    let shadow = d.shadow.as_ref().map(|sh| shadow_record(&rec, sh));
    sink.log_decision(rec);
    if let Some(sh) = shadow {
        sink.log_decision(sh);
    }
}

/// The decision-log record of `d` (after its selection): one row per
/// candidate. Feature vectors are those the decision built (zeros when it
/// built none).
pub(crate) fn record(d: &Decision<'_>, stamp: Stamp<'_>) -> DecisionRecord {
    let ctx = d.context;
    DecisionRecord {
        decision_id: d.decision_id.clone(),
        ts_ms: i64::try_from(stamp.wall_ms).unwrap_or(i64::MAX),
        key_prefix: d.key.prefix.to_owned(),
        shard_id: d.key.shard_id,
        request_type: ctx.request_type.map(|t| t.as_str()),
        client_region: ctx.client_region.clone(),
        timeout_ms: ctx.timeout_ms,
        batch_size: ctx.batch_size,
        policy: d.policy.as_str(),
        panic: d.panic,
        model_version: d.model.version.clone(),
        arm: d
            .model
            .arm
            .or(stamp.arm.map(|(_, a)| a.as_str()))
            .map(str::to_owned),
        config_hash: stamp.config_hash.to_owned(),
        caller: stamp.caller.cloned(),
        candidates: d
            .scored
            .iter()
            .enumerate()
            .map(|(i, s)| CandidateRow {
                worker_id: d.ids[i].to_owned(),
                eligible: s.reason.is_none(),
                rule_score: s.rule,
                model_action: d.model_actions.get(i).copied().flatten(),
                final_score: s.e.score,
                probability: d.probability.get(i).copied().flatten(),
                picked: d.pick == Some(i),
                penalty_state: s.state,
                fallback_reason: d.model.fallback_reason,
                features: d
                    .observations
                    .get(i)
                    .copied()
                    .unwrap_or([0.0; FEATURE_COUNT]),
                operator_override: s.operator.map(crate::overrides::OverrideKind::as_str),
            })
            .collect(),
    }
}

/// The shadow rows of a decision: [`DecisionRecord::shadow`] of the
/// primary record with the shadow model's version and rows.
pub fn shadow_record(primary: &DecisionRecord, shadow: &ShadowDecision) -> DecisionRecord {
    primary.shadow(&shadow.version, &shadow.rows)
}

//! Hand decisions and outcomes to the decision log (issue #4). The request
//! path only builds a record and does a non-blocking send; the log's writer
//! thread does the rest.

use std::sync::Arc;

use rand::RngCore;

use super::{Engine, Feedback, FeedbackError, FeedbackOutcome, ScoreError};
use crate::api::{ScoreRequest, ScoreResponse};
use scorer_core::key::KeyFingerprint;
use scorer_core::scoring::RequestContext;
use scorer_log::{CandidateRow, DecisionRecord, OutcomeRecord};

fn wall_i64(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

impl Engine {
    /// [`Engine::score`], then log the decision (when a log is attached and
    /// the decision id is sampled). `now_wall_ms` (Unix ms) stamps the row.
    ///
    /// # Errors
    /// As [`Engine::score`]; logging never fails a request (a full log
    /// channel drops the record and counts it).
    pub fn score_and_log(
        &self,
        req: &ScoreRequest,
        context: &RequestContext,
        now_mono_ms: u64,
        now_wall_ms: u64,
        decision_id: String,
        rng: &mut dyn RngCore,
    ) -> Result<ScoreResponse, ScoreError> {
        let resp = self.score(req, context, now_mono_ms, decision_id, rng)?;
        self.log_scored(req, context, &resp, now_wall_ms, None);
        Ok(resp)
    }

    /// Queues `resp`'s decision (and its shadow's) for the decision log when
    /// a log is configured and the decision is sampled; `caller` is the
    /// configured name of the credential that asked for it.
    pub fn log_scored(
        &self,
        req: &ScoreRequest,
        context: &RequestContext,
        resp: &ScoreResponse,
        now_wall_ms: u64,
        caller: Option<&Arc<str>>,
    ) {
        if let Some(log) = &self.log
            && log.sampled(&resp.decision_id)
        {
            let mut rec = self.decision_record(req, context, resp, now_wall_ms);
            rec.caller = caller.cloned();
            let shadow = resp.shadow.as_ref().map(|sh| shadow_record(&rec, sh));
            log.log_decision(rec);
            if let Some(sh) = shadow {
                log.log_decision(sh);
            }
        }
    }

    /// The decision-log record of a scored request: one row per candidate.
    pub fn decision_record(
        &self,
        req: &ScoreRequest,
        context: &RequestContext,
        resp: &ScoreResponse,
        now_wall_ms: u64,
    ) -> DecisionRecord {
        let key = KeyFingerprint::parse(&req.key, self.sharding.as_ref());
        DecisionRecord {
            decision_id: resp.decision_id.clone(),
            ts_ms: wall_i64(now_wall_ms),
            key_prefix: key.prefix.to_owned(),
            shard_id: key.shard_id,
            request_type: context.request_type.map(|t| t.as_str()),
            client_region: context.client_region.clone(),
            timeout_ms: context.timeout_ms,
            batch_size: context.batch_size,
            policy: resp.policy,
            panic: resp.panic,
            model_version: resp.model.version.clone(),
            arm: resp.model.arm.or(resp.config_arm).map(str::to_owned),
            config_hash: resp.config_hash.to_string(),
            caller: None,
            candidates: resp
                .scores
                .iter()
                .map(|s| CandidateRow {
                    worker_id: s.worker_id.clone(),
                    eligible: s.eligible,
                    rule_score: s.rule_score,
                    model_action: s.model_action,
                    final_score: s.final_score,
                    probability: s.probability,
                    picked: resp.pick.as_deref() == Some(s.worker_id.as_str()),
                    penalty_state: s.penalty_state,
                    fallback_reason: resp.model.fallback_reason,
                    features: s.observation,
                    operator_override: s
                        .operator_override
                        .map(crate::overrides::OverrideKind::as_str),
                })
                .collect(),
        }
    }

    /// [`Engine::feedback`], then log the outcome (when the decision id is
    /// sampled). `now_wall_ms` (Unix ms) stamps the row; `caller` is the
    /// configured name of the credential that reported it.
    ///
    /// # Errors
    /// As [`Engine::feedback`]; nothing is logged for a refused feedback.
    pub fn feedback_and_log(
        &self,
        f: &Feedback,
        now_mono_ms: u64,
        now_wall_ms: u64,
        caller: Option<&Arc<str>>,
    ) -> Result<FeedbackOutcome, FeedbackError> {
        let out = self.feedback(f, now_mono_ms)?;
        if let Some(log) = &self.log {
            log.log_outcome(OutcomeRecord {
                decision_id: f.decision_id.clone(),
                worker_id: f.worker_id.clone(),
                ts_ms: wall_i64(now_wall_ms),
                latency_ms: f.latency_ms,
                success: f.success,
                caller: caller.cloned(),
                cache_hit: f.cache_hit,
            });
        }
        Ok(out)
    }
}

/// The shadow rows of a decision: [`DecisionRecord::shadow`] of the
/// primary record with the shadow model's version and rows.
pub fn shadow_record(
    primary: &DecisionRecord,
    shadow: &crate::api::ShadowDecision,
) -> DecisionRecord {
    primary.shadow(&shadow.version, &shadow.rows)
}

pub use scorer_log::SHADOW_ARM;

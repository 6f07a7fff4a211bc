//! `POST /v1/score`: rule scores, dynamics, selection.
//!
//! Per candidate: the rule score (health) on its (freshness-adjusted)
//! signals; then the dynamics stage — the snapshot's age discounting the
//! rule deductions, the penalty state factor (observation ×0.85, cooldown
//! ×0.2 and ineligible), outlier ejection (ineligible); then the cost stage
//! — the expected latency from the service's own evidence
//! ([`scorer_core::scoring::apply_cost`]); then a pick over the eligible
//! candidates with the requested policy and the propensity of every
//! candidate. When none is eligible, panic mode ranks
//! and picks among live candidates on their rule scores, ignoring penalty
//! states (Envoy's "panic threshold" behaviour: fail open, never closed by
//! accident).

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use rand::RngCore;

use super::Engine;
use super::cost_stage::Scored;
use super::freshness::Priors;
use crate::api::{Explain, MAX_KEY_BYTES, ScoreRequest, ScoreResponse, WorkerScore};
use scorer_core::dynamics::{
    EvidenceSnapshot, FreshnessConfig, PenaltyState, PickRecord, freshness_factor,
};
use scorer_core::features::{CandidateInputs, FEATURE_COUNT, ObservationInputs, RequestFeatures};
use scorer_core::key::KeyFingerprint;
use scorer_core::scoring::{
    Explained, Reason, ReasonKind, RequestContext, RuleInputs, Stage, rule_score,
};
use scorer_core::selection::{Candidate, PolicyKind, SelectionError};
use scorer_core::state::{WorkerSlot, WorkerView};

/// Why a score request was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScoreError {
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
    /// Every candidate is dead or unknown (503).
    #[error("no eligible workers: every candidate is dead or has never reported")]
    NoEligibleWorkers,
    /// The selector refused its input; a bug, answered 500 and logged.
    #[error("selection failed: {0}")]
    Selection(SelectionError),
}

/// Whether a scoring is a routing decision or only shows one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScoreMode {
    /// A decision: the pick is charged to its worker's in-flight count and
    /// remembered for feedback; the decision and model
    /// counters, the model latency histogram and breaker, the shadow
    /// comparison and each worker's last final score are updated.
    Decide,
    /// A preview (`GET /v1/debug/score`, the status page): the same scores,
    /// features and explanations a decision would get at that instant, but
    /// nothing above changes and no shadow model runs, so looking at the
    /// service never moves what it decides.
    Preview,
}

impl Engine {
    /// Score `req`'s candidates at monotonic `now_ms` and pick one with the
    /// request's policy, drawing randomness from `rng` (seed it for
    /// reproducible picks). `context` is the request's context already merged
    /// with headers. A [`ScoreMode::Decide`] scoring.
    ///
    /// # Errors
    /// [`ScoreError`]: 422 kinds for bad input, `NoEligibleWorkers` (503) when
    /// every candidate is dead or unknown. Unknown workers alone are not
    /// errors; they come back ineligible.
    pub fn score(
        &self,
        req: &ScoreRequest,
        context: &RequestContext,
        now_ms: u64,
        decision_id: String,
        rng: &mut dyn RngCore,
    ) -> Result<ScoreResponse, ScoreError> {
        self.score_in(ScoreMode::Decide, req, context, now_ms, decision_id, rng)
    }

    /// [`Engine::score`] as a [`ScoreMode::Preview`]: what a decision would
    /// show at `now_ms`, changing no state (the decision id is empty).
    ///
    /// # Errors
    /// As [`Engine::score`].
    pub fn preview(
        &self,
        req: &ScoreRequest,
        context: &RequestContext,
        now_ms: u64,
        rng: &mut dyn RngCore,
    ) -> Result<ScoreResponse, ScoreError> {
        self.score_in(ScoreMode::Preview, req, context, now_ms, String::new(), rng)
    }

    fn score_in(
        &self,
        mode: ScoreMode,
        req: &ScoreRequest,
        context: &RequestContext,
        now_ms: u64,
        decision_id: String,
        rng: &mut dyn RngCore,
    ) -> Result<ScoreResponse, ScoreError> {
        let decide = mode == ScoreMode::Decide;
        let active = self.active.load();
        let cfg = &*active.config;
        if req.key.is_empty() || req.key.len() > MAX_KEY_BYTES {
            return Err(ScoreError::BadKey(req.key.len()));
        }
        let policy = match &req.policy {
            Some(p) => p
                .parse::<PolicyKind>()
                .map_err(|_| ScoreError::BadPolicy(p.clone()))?,
            None => cfg.selection.policy().unwrap_or(PolicyKind::Softmax),
        };
        if let Some(t) = req.temperature
            && !(t.is_finite() && t >= 0.0)
        {
            return Err(ScoreError::BadTemperature(t));
        }
        if req.candidates.is_empty() {
            return Err(ScoreError::NoCandidates);
        }
        // foldhash: candidate ids are request input, but capped in number
        // (`server.max_candidates`) and the hasher is randomly seeded.
        let mut seen = HashSet::with_capacity_and_hasher(
            req.candidates.len(),
            foldhash::fast::RandomState::default(),
        );
        let mut ids = Vec::with_capacity(req.candidates.len());
        for (i, c) in req.candidates.iter().enumerate() {
            if !scorer_core::telemetry::validate::is_valid_worker_id(c) {
                return Err(ScoreError::BadCandidate(i));
            }
            if seen.insert(c.as_str()) {
                ids.push(c.as_str());
            }
        }
        if ids.len() > cfg.server.max_candidates {
            return Err(ScoreError::TooManyCandidates {
                count: ids.len(),
                max: cfg.server.max_candidates,
            });
        }

        let key = KeyFingerprint::parse(&req.key, self.sharding.as_ref());
        let size = cfg.features.value_size_bytes.get(key.prefix).copied();
        let rule_inputs = RuleInputs {
            cfg: &cfg.scoring,
            dead_after_ms: cfg.telemetry.dead_after_ms,
            request_type: context.request_type,
            now_ms,
            warmup: true,
        };
        let fresh_cfg = FreshnessConfig {
            fresh_ms: cfg.freshness.fresh_ms,
            dead_after_ms: cfg.telemetry.dead_after_ms,
        };

        let slots: Vec<Option<Arc<WorkerSlot>>> =
            ids.iter().map(|id| self.registry.get(id)).collect();
        let views: Vec<Option<Arc<WorkerView>>> = slots
            .iter()
            .map(|s| s.as_ref().map(|s| s.view_full()))
            .collect();
        let freshness: Vec<f64> = views
            .iter()
            .map(|v| {
                v.as_ref()
                    .map_or(0.0, |v| freshness_factor(v.age_ms(now_ms), &fresh_cfg))
            })
            .collect();
        let priors = freshness.iter().any(|&f| f < 1.0).then(|| {
            let fresh = views
                .iter()
                .zip(&freshness)
                .filter(|(_, f)| **f >= 1.0)
                .filter_map(|(v, _)| v.as_ref().map(|v| &v.smoothed));
            Priors::new(fresh, &cfg.scoring)
        });

        // Pass 1: rule scores (stale candidates on pulled signals).
        let mut rules: Vec<Option<(Explained, bool)>> = Vec::with_capacity(ids.len());
        let mut stale = vec![false; ids.len()];
        for (i, view) in views.iter().enumerate() {
            let Some(v) = view.as_deref() else {
                rules.push(None);
                continue;
            };
            let f = freshness[i];
            stale[i] = f < 1.0 && v.age_ms(now_ms) <= cfg.telemetry.dead_after_ms;
            rules.push(Some(match &priors {
                Some(p) if stale[i] => {
                    let mut pulled = v.clone();
                    pulled.smoothed = p.pull(&v.smoothed, f);
                    rule_score(&pulled, &rule_inputs)
                }
                _ => rule_score(v, &rule_inputs),
            }));
        }
        // A stale worker never outranks the median fresh candidate (no herding
        // onto a worker whose idleness is old news), then pays for its age.
        let any_stale = stale.iter().any(|&s| s);
        let cap = if any_stale {
            let fresh_scores: Vec<f64> = rules
                .iter()
                .zip(&stale)
                .zip(&freshness)
                .filter(|((_, st), f)| !**st && **f >= 1.0)
                .filter_map(|((r, _), _)| r.as_ref().filter(|r| r.1).map(|r| r.0.score))
                .collect();
            super::freshness::median(fresh_scores)
        } else {
            None
        };
        for (i, r) in rules.iter_mut().enumerate() {
            let (Some((e, _)), Some(v)) = (r.as_mut(), views[i].as_deref()) else {
                continue;
            };
            if !stale[i] {
                continue;
            }
            if let Some(cap) = cap.filter(|&c| e.score > c) {
                e.deduct(
                    "stale_cap",
                    e.score - cap,
                    Reason::new(ReasonKind::StaleCap, [cap, 0.0, 0.0, 0.0, 0.0]),
                    None,
                );
            }
            let age = v.age_ms(now_ms);
            e.deduct(
                "stale_telemetry",
                (1.0 - freshness[i]) * cfg.freshness.stale_max_deduct,
                Reason::new(
                    ReasonKind::StaleTelemetry,
                    [
                        age as f64 / 1000.0,
                        cfg.freshness.fresh_ms as f64 / 1000.0,
                        cfg.telemetry.dead_after_ms as f64 / 1000.0,
                        freshness[i],
                        0.0,
                    ],
                ),
                Some(age as f64),
            );
        }

        // Pass 2: dynamics.
        let mut scored: Vec<Scored> = Vec::with_capacity(ids.len());
        for (i, id) in ids.iter().enumerate() {
            let stale_i = stale[i];
            let (slot, view) = (slots[i].clone(), views[i].clone());
            let (Some(v), Some((mut e, live))) = (view.as_deref(), rules[i].take()) else {
                let mut e = Explained::new();
                e.multiply(
                    "unknown_worker",
                    0.0,
                    format!("worker `{id}` has never reported telemetry"),
                    None,
                );
                scored.push(Scored {
                    slot,
                    view,
                    rule: 0.0,
                    base: 0.0,
                    e,
                    reason: Some("unknown_worker"),
                    live: false,
                    state: "unknown",
                    ramp: 0.0,
                    evidence: EvidenceSnapshot::default(),
                    trust: 0.0,
                    cost_evidence: None,
                });
                continue;
            };
            e.clamp();
            let rule = e.score;
            let pv = v.penalty.state_at(now_ms, &cfg.penalty);
            let evidence = slot
                .as_ref()
                .map(|s| s.evidence().snapshot())
                .unwrap_or_default();
            let trust = cfg.cost.trust(v.age_ms(now_ms));
            let mut reason = (!live).then_some("heartbeat_dead");
            let mut ramp = 0.0;
            if live {
                e.stage = Stage::Dynamics;
                if !stale_i {
                    super::cost_stage::snapshot_age_give_back(&mut e, v.age_ms(now_ms), trust);
                }
                match pv.state {
                    PenaltyState::Healthy | PenaltyState::Recovering => {}
                    PenaltyState::Observation => {
                        e.multiply("observation", pv.score_factor, pv.reason, None);
                    }
                    PenaltyState::Cooldown => {
                        e.multiply("cooldown", pv.score_factor, pv.reason, None);
                        reason = Some("cooldown");
                    }
                }
                if evidence.outlier.is_ejected(now_ms) && reason.is_none() {
                    reason = Some("outlier_ejected");
                }
                ramp = super::weight::selection_weight(v, &pv, &evidence, now_ms, cfg);
                e.clamp();
            }
            scored.push(Scored {
                slot,
                view,
                rule,
                base: rule,
                e,
                reason,
                live,
                state: pv.state.as_str(),
                ramp,
                evidence,
                trust,
                cost_evidence: None,
            });
        }

        // Selectable set: eligible candidates, or in panic mode the live ones.
        let eligible: Vec<usize> = (0..scored.len())
            .filter(|&i| scored[i].reason.is_none())
            .collect();
        let (selectable, panic) = if !eligible.is_empty() {
            (eligible, false)
        } else if cfg.selection.panic_mode {
            (
                (0..scored.len()).filter(|&i| scored[i].live).collect(),
                true,
            )
        } else {
            (Vec::new(), false)
        };
        if selectable.is_empty() {
            if decide {
                self.counters.no_eligible.fetch_add(1, Ordering::Relaxed);
            }
            return Err(ScoreError::NoEligibleWorkers);
        }
        if !panic {
            self.apply_costs(&mut scored, &selectable, context, now_ms, cfg);
        }
        // Rank by rule score for the context features (0 = best).
        // Ids are distinct, so the order is total and an unstable sort is exact.
        let mut by_rule: Vec<(f64, usize)> = scored.iter().map(|s| s.rule).zip(0..).collect();
        by_rule.sort_unstable_by(|&(ra, a), &(rb, b)| {
            rb.total_cmp(&ra).then_with(|| ids[a].cmp(ids[b]))
        });
        let by_rule: Vec<usize> = by_rule.into_iter().map(|(_, i)| i).collect();
        let mut rank = vec![0usize; ids.len()];
        for (r, &i) in by_rule.iter().enumerate() {
            rank[i] = r;
        }
        let best = by_rule.first().map_or(0.0, |&i| scored[i].rule);
        let in_set: Vec<bool> = {
            let mut v = vec![false; scored.len()];
            for &i in &selectable {
                v[i] = true;
            }
            v
        };

        let request_features = RequestFeatures::new(&ObservationInputs {
            value_size_bytes: size.unwrap_or(cfg.features.default_value_size_bytes),
            ctx: context,
            worker: None,
            evidence: None,
            rule_score: 0.0,
            candidate_count: ids.len(),
            rule_rank: 0,
            best_rule_score: best,
            warmup_ms: cfg.scoring.warmup_ms,
            now_ms,
        });
        let observations: Vec<[f32; FEATURE_COUNT]> = scored
            .iter()
            .enumerate()
            .map(|(i, s)| {
                request_features.observation(&CandidateInputs {
                    worker: s.view.as_deref(),
                    evidence: s.cost_evidence,
                    rule_score: s.rule,
                    rule_rank: rank[i],
                    best_rule_score: best,
                })
            })
            .collect();

        // Model stage (issue #6): not in panic mode, where penalties are ignored.
        let models = self.models.current();
        let mut stage = (!panic).then(|| {
            // `selectable` is ascending, so when it holds every candidate the
            // observations are already the model's batch.
            debug_assert!(selectable.windows(2).all(|w| w[0] < w[1]));
            let obs: Cow<'_, [[f32; FEATURE_COUNT]]> = if selectable.len() == observations.len() {
                Cow::Borrowed(&observations)
            } else {
                Cow::Owned(selectable.iter().map(|&i| observations[i]).collect())
            };
            let mut es: Vec<&mut Explained> = Vec::with_capacity(selectable.len());
            for (i, s) in scored.iter_mut().enumerate() {
                if in_set[i] {
                    es.push(&mut s.e);
                }
            }
            let out = super::model_stage::apply(
                &self.models,
                &models,
                &req.key,
                key.prefix,
                &obs,
                &mut es,
                now_ms,
                decide,
            );
            (obs, out)
        });

        let sel_score = |s: &Scored| if panic { s.base } else { s.e.score };

        let cands: Vec<Candidate<'_>> = selectable
            .iter()
            .map(|&i| {
                let s = &scored[i];
                Candidate {
                    worker_id: ids[i],
                    // Slow start is a cost factor of the compared score.
                    score: sel_score(s).clamp(0.0, 100.0),
                    weight: s.ramp.max(f64::MIN_POSITIVE),
                    in_flight: f64::from(s.evidence.outstanding),
                    outstanding: s.evidence.outstanding,
                    expected_latency_ms: s.cost_evidence.map(|c| c.expected_latency_ms),
                }
            })
            .collect();
        let temperature = req.temperature;
        let selection = self
            .selector
            .load()
            .select(policy, &cands, &req.key, temperature, rng)
            .map_err(ScoreError::Selection)?;
        let mut probability = vec![None; scored.len()];
        let mut pick = None;
        if let Some(sel) = &selection {
            probability.fill(Some(0.0));
            for (j, &i) in selectable.iter().enumerate() {
                probability[i] = sel.probabilities.get(j).copied();
            }
            pick = selectable.get(sel.pick).copied();
        }
        if let Some(p) = pick.filter(|_| decide)
            && let Some(slot) = &scored[p].slot
        {
            let record = PickRecord {
                picked_ms: now_ms,
                outstanding_before: slot.evidence().pick(now_ms),
                penalty_ms: cfg.evidence.penalty_ms(context.timeout_ms),
            };
            let pending = super::pending::PendingPick {
                worker_id: Arc::from(ids[p]),
                slot: slot.clone(),
                record,
                expires_ms: now_ms.saturating_add(cfg.evidence.expiry_ms(context.timeout_ms)),
            };
            self.pending.remember(&decision_id, pending, now_ms);
        }
        if decide {
            self.counters.decisions.fetch_add(1, Ordering::Relaxed);
        }
        if panic && decide {
            self.counters
                .panic_decisions
                .fetch_add(1, Ordering::Relaxed);
            tracing::debug!(%decision_id, "panic mode: no eligible candidate, ranking live ones");
        }

        let mut ranking: Vec<(bool, f64, usize)> = (0..scored.len())
            .map(|i| (in_set[i], sel_score(&scored[i]), i))
            .collect();
        ranking.sort_unstable_by(|&(sa, xa, a), &(sb, xb, b)| {
            sb.cmp(&sa)
                .then_with(|| xb.total_cmp(&xa))
                .then_with(|| ids[a].cmp(ids[b]))
        });
        let ranking = ranking
            .into_iter()
            .map(|(_, _, i)| ids[i].to_owned())
            .collect();

        let mut model_a = vec![None; scored.len()];
        let mut rule_r = vec![None; scored.len()];
        let mut shadow = None;
        let mut decision = crate::api::ModelDecision::default();
        if let Some((obs, out)) = &mut stage {
            for (j, &i) in selectable.iter().enumerate() {
                model_a[i] = out.model_a[j];
                rule_r[i] = out.rule_r.get(j).copied();
            }
            shadow = (decide && models.shadow.is_some())
                .then(|| {
                    let primary_final: Vec<f64> =
                        selectable.iter().map(|&i| scored[i].e.score).collect();
                    super::model_stage::shadow(
                        &self.models,
                        &models,
                        obs,
                        out,
                        &primary_final,
                        now_ms,
                    )
                })
                .flatten()
                .map(|(v, rows)| {
                    super::model_stage::shadow_decision(v, rows, &selectable, scored.len())
                });
            decision = std::mem::take(&mut out.decision);
        }

        let scores: Vec<WorkerScore> = scored
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                let obs = observations[i];
                if let Some(slot) = s.slot.as_ref().filter(|_| decide) {
                    slot.record_final_score(s.e.score);
                }
                WorkerScore {
                    worker_id: ids[i].to_owned(),
                    eligible: s.reason.is_none(),
                    reason: s.reason,
                    penalty_state: s.state,
                    rule_score: s.rule,
                    final_score: s.e.score,
                    weight: if in_set[i] { s.ramp } else { 0.0 },
                    probability: probability[i],
                    adjustments: s.e.adjustments,
                    features: (req.explain == Explain::Full).then(|| obs.to_vec()),
                    observation: obs,
                    model_action: model_a[i],
                    rule_action: rule_r[i],
                    outstanding: s.slot.as_ref().map(|_| s.evidence.outstanding),
                    expected_latency_ms: s.cost_evidence.map(|c| c.expected_latency_ms),
                }
            })
            .collect();
        Ok(ScoreResponse {
            decision_id,
            probability: pick.and_then(|p| scores[p].probability),
            scores,
            ranking,
            policy: policy.as_str(),
            pick: pick.map(|p| ids[p].to_owned()),
            panic,
            model: decision,
            shadow,
            config_hash: active.hash.clone(),
        })
    }
}

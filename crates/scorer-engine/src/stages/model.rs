//! The model stage of a decision: after the rules, dynamics and cost,
//! before selection. Runs the model once on the selectable candidates'
//! observation vectors as one batch; each prediction of `ln(latency / E)`
//! becomes a bounded factor on the candidate's routing cost (line
//! `model`), and the deterministic rule action adds its points
//! ([`scorer_model::blend`]); or the stage falls back to the rule action
//! alone with a [`scorer_model::FallbackReason`]. The shadow model runs on the same batch
//! and only feeds statistics and the decision log.
//!
//! First, every candidate's 42-feature vector ([`RequestFeatures`]), with
//! its rank by rule score; an explained answer carries them whether or not
//! the model runs (it does not in panic mode, where penalties are ignored).
//! A compact decision builds them only when something reads them: the
//! model, the shadow model, or the rule action for a key it may apply to.

use std::borrow::Cow;
use std::cell::RefCell;

use crate::api::{ModelDecision, ShadowDecision};
use crate::config::Config;
use crate::decision::Decision;
use scorer_core::features::schema::EXPECTED_LATENCY_FEATURE;
use scorer_core::features::{CandidateInputs, FEATURE_COUNT, ObservationInputs, RequestFeatures};
use scorer_core::scoring::{Explained, Reason, ReasonKind, Stage};
use scorer_model::blend::{mean_prediction, rule_actions, rule_may_apply};
use scorer_model::{Arm, FallbackReason, ModelHub, ModelSet, Slot, arm_for};

/// Runs the model stage: `d.observations` for every candidate, then, out
/// of panic mode, the model (or its fallback) on the selectable ones, and
/// the shadow model on a decision.
pub(crate) fn model(d: &mut Decision<'_>, hub: &ModelHub, cfg: &Config) {
    let decide = d.decides();
    let set = hub.current();
    let held = (d.routers > 1 && !set.cfg.many_deciders).then_some(FallbackReason::ManyDeciders);
    let read = d.explain
        || d.features
        || (decide && set.shadow.is_some())
        || (held.is_none() && matches!(chosen(&set, &d.req.key).1, Slot::Ready(_)))
        || rule_may_apply(d.key.prefix);
    if !read {
        if !d.panic {
            d.model = fallback(hub, &set, &d.req.key, held, decide);
        }
        return;
    }
    observations(d, cfg);
    let n = d.scored.len();
    d.model_actions = vec![None; n];
    d.rule_actions = vec![None; n];
    if d.panic {
        return;
    }
    // `selectable` is ascending, so when it holds every candidate the
    // observations are already the model's batch.
    debug_assert!(d.selectable.windows(2).all(|w| w[0] < w[1]));
    let obs: Cow<'_, [[f32; FEATURE_COUNT]]> =
        if d.selectable.len() == d.observations.len() || d.observations.is_empty() {
            Cow::Borrowed(&d.observations)
        } else {
            Cow::Owned(d.selectable.iter().map(|&i| d.observations[i]).collect())
        };
    let in_set = d.in_set();
    let mut es: Vec<&mut Explained> = d
        .scored
        .iter_mut()
        .zip(&in_set)
        .filter_map(|(s, &inside)| inside.then_some(&mut s.e))
        .collect();
    let mut out = apply(
        hub,
        &set,
        &d.req.key,
        d.key.prefix,
        &obs,
        &mut es,
        d.now_ms,
        decide,
        held,
    );
    for (j, &i) in d.selectable.iter().enumerate() {
        d.model_actions[i] = out.model_a[j];
        d.rule_actions[i] = out.rule_r.get(j).copied();
    }
    if decide && set.shadow.is_some() {
        let primary_final: Vec<f64> = d.selectable.iter().map(|&i| d.scored[i].e.score).collect();
        d.shadow = shadow(hub, &set, &obs, &out, &primary_final, d.now_ms)
            .map(|(v, rows)| shadow_decision(v, rows, &d.selectable, n));
    }
    d.model = std::mem::take(&mut out.decision);
}

/// Every candidate's observation vector, ranked by rule score (0 = best).
fn observations(d: &mut Decision<'_>, cfg: &Config) {
    let ids = &d.ids;
    // Ids are distinct, so the order is total and an unstable sort is exact.
    let mut by_rule: Vec<(f64, usize)> = d.scored.iter().map(|s| s.rule).zip(0..).collect();
    by_rule
        .sort_unstable_by(|&(ra, a), &(rb, b)| rb.total_cmp(&ra).then_with(|| ids[a].cmp(ids[b])));
    let mut rank = vec![0usize; ids.len()];
    for (r, &(_, i)) in by_rule.iter().enumerate() {
        rank[i] = r;
    }
    let best = by_rule.first().map_or(0.0, |&(_, i)| d.scored[i].rule);
    let size = cfg.features.value_size_bytes.get(d.key.prefix).copied();
    let request = RequestFeatures::new(&ObservationInputs {
        value_size_bytes: size.unwrap_or(cfg.features.default_value_size_bytes),
        ctx: d.context,
        worker: None,
        evidence: None,
        locality: None,
        prefix_hit_rate: None,
        rule_score: 0.0,
        candidate_count: ids.len(),
        rule_rank: 0,
        best_rule_score: best,
        warmup_ms: cfg.scoring.warmup_ms,
        now_ms: d.now_ms,
    });
    d.observations = d
        .scored
        .iter()
        .zip(rank)
        .map(|(s, rule_rank)| {
            request.observation(&CandidateInputs {
                worker: s.view.as_deref(),
                evidence: s.cost_evidence,
                locality: s.locality,
                prefix_hit_rate: s.prefix_hit_rate,
                rule_score: s.rule,
                rule_rank,
                best_rule_score: best,
            })
        })
        .collect();
}

thread_local! {
    /// Reused per thread: the model's outputs (its `n × 42` input is the
    /// observation array itself, flattened).
    static OUTPUTS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// What the stage did, per selectable candidate (same order as its input).
#[derive(Debug, Default)]
pub(crate) struct StageOut {
    pub decision: ModelDecision,
    pub model_a: Vec<Option<f64>>,
    pub rule_r: Vec<f64>,
    /// Scores before the stage (rules + dynamics), for the shadow's blend.
    pub pre: Vec<f64>,
}

/// The stage when nothing reads the observations: the model does not run
/// and the rule action is 0, so no score changes; what [`apply`] reports
/// and counts then.
fn fallback(
    hub: &ModelHub,
    set: &ModelSet,
    key: &str,
    held: Option<FallbackReason>,
    record: bool,
) -> ModelDecision {
    let (arm, slot) = chosen(set, key);
    let reason = match (held, slot) {
        (Some(reason), _) => reason,
        (None, Slot::Refused { reason, .. }) => *reason,
        (None, Slot::Ready(_)) => FallbackReason::ModelMissing,
    };
    if record {
        hub.stats().on_call();
        hub.stats().on_fallback(reason);
    }
    ModelDecision {
        arm: arm.map(Arm::as_str),
        fallback_reason: Some(reason.as_str()),
        ..ModelDecision::default()
    }
}

/// The A/B arm of `key` (when an A/B test runs) and the model slot it
/// decides with.
fn chosen<'s>(set: &'s ModelSet, key: &str) -> (Option<Arm>, &'s Slot) {
    let arm = set.ab.as_ref().map(|_| arm_for(key, set.cfg.ab.fraction));
    let slot = match (arm, &set.ab) {
        (Some(Arm::B), Some(b)) => b,
        _ => &set.primary,
    };
    (arm, slot)
}

/// Applies the model stage to `es` (the selectable candidates' explained
/// scores) with `obs` their observation vectors (none when neither the
/// model nor the rule action reads them), at monotonic `now_ms`. With
/// `record` false (previews) no model counter, latency or breaker state
/// changes.
#[allow(clippy::too_many_arguments)]
pub(crate) fn apply(
    hub: &ModelHub,
    set: &ModelSet,
    key: &str,
    key_prefix: &str,
    obs: &[[f32; FEATURE_COUNT]],
    es: &mut [&mut Explained],
    now_ms: u64,
    record: bool,
    held: Option<FallbackReason>,
) -> StageOut {
    debug_assert!(obs.len() == es.len() || obs.is_empty());
    let n = es.len();
    let cfg = &set.cfg;
    let blend = cfg.blend();
    if record {
        hub.stats().on_call();
    }
    let mut rule_r = Vec::with_capacity(n);
    if obs.is_empty() {
        rule_r.resize(n, 0.0);
    } else {
        rule_actions(key_prefix, obs, &mut rule_r);
    }
    let pre: Vec<f64> = es.iter().map(|e| e.score).collect();
    let (arm, slot) = chosen(set, key);
    let mut decision = ModelDecision {
        arm: arm.map(Arm::as_str),
        ..ModelDecision::default()
    };
    let mut model_a = vec![None; n];
    let mut raw = vec![0f32; n];
    let result = match (held, slot) {
        (Some(reason), _) => Err(reason),
        (None, Slot::Refused { reason, .. }) => Err(*reason),
        (None, Slot::Ready(m)) => {
            decision.version = Some(m.card.model_version.clone());
            OUTPUTS.with(|b| {
                let out = &mut *b.borrow_mut();
                let rows = obs.as_flattened();
                let timed = if record {
                    hub.infer(m, rows, n, cfg.budget_us, now_ms, out)?
                } else {
                    hub.infer_preview(m, rows, n, cfg.budget_us, now_ms, out)?
                };
                let mean = mean_prediction(out);
                for ((a, r), p) in model_a.iter_mut().zip(raw.iter_mut()).zip(out.iter()) {
                    *a = Some(blend.model_action(*p - mean));
                    *r = *p;
                }
                Ok(timed)
            })
        }
    };
    let used = match result {
        Ok(timed) => {
            decision.used = true;
            decision.inference_us = Some(timed.elapsed_ns as f64 / 1_000.0);
            if record {
                hub.stats().on_used();
            }
            true
        }
        Err(reason) => {
            decision.fallback_reason = Some(reason.as_str());
            if record {
                hub.stats().on_fallback(reason);
            }
            model_a.fill(None);
            false
        }
    };
    for (i, e) in es.iter_mut().enumerate() {
        e.stage = Stage::Model;
        // The rule's points are at a score of 100 and scale with the
        // score: they are multiplicative on the routing cost
        // (score = 100 × fastest / E), whatever the score's level.
        let at = pre[i].max(0.0) / 100.0;
        if let Some(a) = model_a[i] {
            let factor = a.exp();
            // The model predicts ln(latency / cost).
            let cost = f64::from(obs[i][EXPECTED_LATENCY_FEATURE]).exp();
            let ratio = f64::from(raw[i]).exp();
            let predicted_ms = cost * ratio;
            // Dividing the score by the factor (up to ×2 either way) is an
            // added line, so the sum of the lines stays exact.
            let delta = e.score * (1.0 / factor - 1.0);
            e.add(
                "model",
                delta,
                Reason::new(
                    ReasonKind::ModelAction,
                    [factor, predicted_ms, cost, ratio, 0.0],
                ),
                Some(a),
            );
        }
        let r = rule_r[i];
        // With the model, both actions are shown; without it, the rule
        // action only where the rule fired (explanations stay short).
        if !used && r == 0.0 {
            continue;
        }
        e.add(
            "rule_action",
            blend.rule_points(r) * at,
            Reason::new(
                ReasonKind::RuleAction,
                [f64::from(r), blend.blend_rule, blend.scale, 0.0, 0.0],
            ),
            Some(f64::from(r)),
        );
        e.clamp();
    }
    StageOut {
        decision,
        model_a,
        rule_r: rule_r.into_iter().map(f64::from).collect(),
        pre,
    }
}

/// Runs the shadow model (if configured and loaded) on the same batch and
/// records the comparison; returns its per-candidate (action, final score)
/// in selectable order, or `None` when there is no usable shadow output.
/// `primary_final` are the final scores the response used.
pub(crate) fn shadow(
    hub: &ModelHub,
    set: &ModelSet,
    obs: &[[f32; FEATURE_COUNT]],
    stage: &StageOut,
    primary_final: &[f64],
    now_ms: u64,
) -> Option<(String, Vec<(f64, f64)>)> {
    let m = set.shadow.as_ref()?.model()?;
    let n = obs.len();
    let blend = set.cfg.blend();
    let probs = OUTPUTS.with(|b| {
        let out = &mut *b.borrow_mut();
        let rows = obs.as_flattened();
        // The shadow never affects the response: no budget of its own beyond
        // the primary's, and its misses only open its own breaker.
        hub.infer(m, rows, n, set.cfg.budget_us, now_ms, out)
            .ok()
            .map(|_| out.clone())
    })?;
    let mean = mean_prediction(&probs);
    let rows: Vec<(f64, f64)> = probs
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let c = *p - mean;
            let fin = blend.final_score(stage.pre[i], Some(c), stage.rule_r[i] as f32);
            (blend.model_action(c), fin)
        })
        .collect();
    let shadow_final: Vec<f64> = rows.iter().map(|r| r.1).collect();
    let primary_a: Vec<f32> = stage
        .model_a
        .iter()
        .map(|a| a.unwrap_or(0.0) as f32)
        .collect();
    let shadow_a: Vec<f32> = rows.iter().map(|r| r.0 as f32).collect();
    hub.shadow_stats()
        .record(primary_final, &shadow_final, &primary_a, &shadow_a);
    Some((m.card.model_version.clone(), rows))
}

/// Builds the response's shadow record over all `len` candidates.
pub(crate) fn shadow_decision(
    version: String,
    rows: Vec<(f64, f64)>,
    selectable: &[usize],
    len: usize,
) -> ShadowDecision {
    let mut all = vec![None; len];
    for (j, &i) in selectable.iter().enumerate() {
        all[i] = rows.get(j).copied();
    }
    ShadowDecision { version, rows: all }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::cost;
    use crate::stages::test_support::{engine, report, request, through_dynamics};

    #[test]
    fn every_candidate_gets_a_vector_and_without_a_model_the_rule_action_alone() {
        let e = engine();
        report(&e, "a", 0.2, 1, 1_000);
        report(&e, "b", 0.6, 9, 1_000);
        let req = request(&["a", "b", "ghost"]);
        let cfg = e.config();
        let mut d = through_dynamics(&req, &e, 1_000);
        cost(&mut d, &cfg, None, None);
        model(&mut d, e.models(), &cfg);
        assert_eq!(d.observations.len(), 3);
        assert_eq!(d.model.fallback_reason, Some("model_missing"));
        assert!(!d.model.used);
        assert_eq!(d.model_actions, [None, None, None]);
        // The rule action on the selectable candidates only.
        assert!(d.rule_actions[0].is_some() && d.rule_actions[1].is_some());
        assert_eq!(d.rule_actions[2], None);
        // The rule ranks (feature `rule_rank_frac`) put the idler worker first.
        let rank = scorer_core::features::FEATURES
            .iter()
            .position(|f| f.name == "rule_rank_frac")
            .expect("a rule_rank_frac feature");
        assert!(d.observations[0][rank] < d.observations[1][rank]);
    }
}

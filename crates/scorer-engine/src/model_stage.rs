//! The model stage of a decision: after the rules, dynamics and cost,
//! before selection. Runs the model once on the selectable candidates'
//! observation vectors as one batch; each prediction of `ln(latency / E)`
//! becomes a bounded factor on the candidate's expected latency (line
//! `model`), and the deterministic rule action adds its points
//! ([`scorer_model::blend`]); or the stage falls back to the rule action
//! alone with a [`scorer_model::FallbackReason`]. The shadow model runs after selection on the same
//! batch and only feeds statistics and the decision log.

use std::cell::RefCell;

use crate::api::{ModelDecision, ShadowDecision};
use scorer_core::features::FEATURE_COUNT;
use scorer_core::features::schema::EXPECTED_LATENCY_FEATURE;
use scorer_core::scoring::{Explained, Reason, ReasonKind, Stage};
use scorer_model::blend::{mean_prediction, rule_actions};
use scorer_model::{Arm, ModelHub, ModelSet, arm_for};

thread_local! {
    /// Reused per thread: the model's outputs (its `n × 42` input is the
    /// observation array itself, flattened).
    static OUTPUTS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// What the stage did, per selectable candidate (same order as its input).
#[derive(Debug, Default)]
pub(super) struct StageOut {
    pub decision: ModelDecision,
    pub model_a: Vec<Option<f64>>,
    pub rule_r: Vec<f64>,
    /// Scores before the stage (rules + dynamics), for the shadow's blend.
    pub pre: Vec<f64>,
}

/// Applies the model stage to `es` (the selectable candidates' explained
/// scores) with `obs` their observation vectors, at monotonic `now_ms`.
/// With `record` false (previews) no model counter, latency or breaker
/// state changes.
#[allow(clippy::too_many_arguments)]
pub(super) fn apply(
    hub: &ModelHub,
    set: &ModelSet,
    key: &str,
    key_prefix: &str,
    obs: &[[f32; FEATURE_COUNT]],
    es: &mut [&mut Explained],
    now_ms: u64,
    record: bool,
) -> StageOut {
    debug_assert_eq!(obs.len(), es.len());
    let n = obs.len();
    let cfg = &set.cfg;
    let blend = cfg.blend();
    if record {
        hub.stats().on_call();
    }
    let mut rule_r = Vec::with_capacity(n);
    rule_actions(key_prefix, obs, &mut rule_r);
    let pre: Vec<f64> = es.iter().map(|e| e.score).collect();

    let arm = set.ab.as_ref().map(|_| arm_for(key, cfg.ab.fraction));
    let slot = match (arm, &set.ab) {
        (Some(Arm::B), Some(b)) => b,
        _ => &set.primary,
    };
    let mut decision = ModelDecision {
        arm: arm.map(Arm::as_str),
        ..ModelDecision::default()
    };
    let mut model_a = vec![None; n];
    let mut raw = vec![0f32; n];
    let result = match slot {
        scorer_model::Slot::Refused { reason, .. } => Err(*reason),
        scorer_model::Slot::Ready(m) => {
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
        // score: they are multiplicative on the expected latency
        // (score = 100 × fastest / E), whatever the score's level.
        let at = pre[i].max(0.0) / 100.0;
        if let Some(a) = model_a[i] {
            let factor = a.exp();
            let expected_ms = f64::from(obs[i][EXPECTED_LATENCY_FEATURE]).exp();
            let predicted_ms = expected_ms * f64::from(raw[i]).exp();
            // Dividing the score by the factor (up to ×2 either way) is an
            // added line, so the sum of the lines stays exact.
            let delta = e.score * (1.0 / factor - 1.0);
            e.add(
                "model",
                delta,
                Reason::new(
                    ReasonKind::ModelAction,
                    [factor, predicted_ms, expected_ms, 0.0, 0.0],
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
pub(super) fn shadow(
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
pub(super) fn shadow_decision(
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

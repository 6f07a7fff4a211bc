//! Record: on a decision, the pick is charged to its worker's outstanding
//! count and remembered until its feedback or expiry, the counters move and
//! each worker's last final score is kept ([`charge`]); then the answer: the
//! explained one ([`answer`]), candidates ranked selectable first, by the
//! score selection compared, or a compact one: the pick alone
//! ([`compact`]), or with every candidate's final score ([`scores`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::Counters;
use crate::api::{CompactPick, CompactScore, CompactScores, Explain, ScoreResponse, WorkerScore};
use crate::canary::{Canary, ConfigArm};
use crate::config::Config;
use crate::decision::Decision;
use crate::pending::{PendingPick, PendingPicks};
use crate::routed_outbox::RoutedOutbox;
use crate::self_check::SelfCheck;
use scorer_core::dynamics::PickRecord;
use scorer_core::locality::{PairHash, RoutingIndex, hash_str};

/// Runs the record stage and builds the explained answer (the stage's unit
/// test; the driver calls [`charge`], then its answer).
#[cfg(test)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn record(
    d: Decision<'_>,
    pending: &PendingPicks,
    counters: &Counters,
    self_check: &SelfCheck,
    cfg: &Config,
    config_hash: Arc<str>,
    arm: Option<(&Canary, ConfigArm)>,
    routing: Option<(&RoutingIndex, Option<&RoutedOutbox>)>,
) -> ScoreResponse {
    let id = d.decision_id.clone();
    charge(&d, id, pending, counters, self_check, cfg, arm, routing);
    answer(d, config_hash, arm)
}

/// The record stage's effects on a decision (none on a preview); its pick
/// is remembered under `decision_id`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn charge(
    d: &Decision<'_>,
    decision_id: String,
    pending: &PendingPicks,
    counters: &Counters,
    self_check: &SelfCheck,
    cfg: &Config,
    arm: Option<(&Canary, ConfigArm)>,
    routing: Option<(&RoutingIndex, Option<&RoutedOutbox>)>,
) {
    let decide = d.decides();
    let now_ms = d.now_ms;
    if let Some(p) = d.pick.filter(|_| decide)
        && let Some(slot) = &d.scored[p].slot
    {
        let record = PickRecord {
            picked_ms: now_ms,
            outstanding_before: slot.evidence().pick(now_ms),
            penalty_ms: cfg.evidence.penalty_ms(d.context.timeout_ms),
            warm_bucket: d.scored[p].locality.map(|l| l.bucket),
            prefix_hash: cfg.locality.enabled.then(|| hash_str(d.key.prefix)),
        };
        let worker_id: Arc<str> = match &d.scored[p].view {
            Some(v) => v.worker_id.clone(),
            None => Arc::from(d.ids[p]),
        };
        if let Some((ix, outbox)) = routing {
            ix.record(PairHash::new(d.key_hash, hash_str(d.ids[p])), now_ms);
            if let Some(o) = outbox {
                o.push(d.key_hash, worker_id.clone(), now_ms);
            }
        }
        let pick = PendingPick {
            worker_id,
            slot: slot.clone(),
            record,
            expires_ms: now_ms.saturating_add(cfg.evidence.expiry_ms(d.context.timeout_ms)),
            expected_ms: d.scored[p]
                .cost_evidence
                .map_or(f64::NAN, |c| c.expected_latency_ms),
            arm: arm.map(|(c, a)| (c.generation, a)),
        };
        pending.remember(decision_id, pick, now_ms);
    }
    if decide {
        counters.decisions.fetch_add(1, Ordering::Relaxed);
        if let Some((c, a)) = arm {
            c.on_decision(a);
        }
        self_check.on_decision(d.scored.iter().map(|s| s.e.score));
        if d.panic {
            counters.panic_decisions.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(decision_id = %d.decision_id, "panic mode: no eligible candidate, ranking live ones");
        }
        for s in &d.scored {
            if let Some(slot) = &s.slot {
                slot.record_final_score(s.e.score);
            }
        }
    }
}

/// The compact answer of a charged decision: the pick, its propensity and
/// score.
pub(crate) fn compact<'r>(d: &Decision<'r>, arm: Option<(&Canary, ConfigArm)>) -> CompactPick<'r> {
    let picked = d.pick.map(|p| (d.ids[p], &d.scored[p]));
    CompactPick {
        pick: picked.map(|(id, _)| id),
        probability: d.pick.and_then(|p| d.probability[p]),
        final_score: picked.map(|(_, s)| s.e.score),
        policy: d.policy.as_str(),
        panic: d.panic,
        model_used: d.model.used,
        config_arm: arm.map(|(_, a)| a.as_str()),
    }
}

/// The compact answer with every candidate's final score of a charged
/// decision (its id moves into the answer).
pub(crate) fn scores<'r>(d: &mut Decision<'r>) -> CompactScores<'r> {
    CompactScores {
        decision_id: std::mem::take(&mut d.decision_id),
        pick: d.pick.map(|p| d.ids[p]),
        probability: d.pick.and_then(|p| d.probability[p]),
        policy: d.policy.as_str(),
        panic: d.panic,
        scores: d
            .ids
            .iter()
            .zip(&d.scored)
            .map(|(&worker_id, s)| CompactScore {
                worker_id,
                reason: s.reason,
                final_score: s.e.score,
            })
            .collect(),
    }
}

/// The explained answer of a charged decision.
pub(crate) fn answer(
    d: Decision<'_>,
    config_hash: Arc<str>,
    arm: Option<(&Canary, ConfigArm)>,
) -> ScoreResponse {
    let in_set = d.in_set();
    let ids = &d.ids;
    let mut ranking: Vec<(bool, f64, usize)> = (0..d.scored.len())
        .map(|i| (in_set[i], d.scored[i].selection_score(d.panic), i))
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
    let full = d.req.explain == Explain::Full;
    let scores: Vec<WorkerScore> = d
        .scored
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            let obs = d.observations[i];
            WorkerScore {
                worker_id: ids[i].to_owned(),
                eligible: s.reason.is_none(),
                reason: s.reason,
                penalty_state: s.state,
                rule_score: s.rule,
                final_score: s.e.score,
                weight: if in_set[i] { s.ramp } else { 0.0 },
                probability: d.probability[i],
                adjustments: s.e.adjustments,
                features: full.then(|| obs.to_vec()),
                observation: obs,
                model_action: d.model_actions[i],
                rule_action: d.rule_actions[i],
                outstanding: s.slot.as_ref().map(|_| s.evidence.outstanding),
                expected_latency_ms: s.cost_evidence.map(|c| c.expected_latency_ms),
                cost: s.cost_evidence.map(|c| c.cost),
                operator_override: s.operator,
            }
        })
        .collect();
    ScoreResponse {
        probability: d.pick.and_then(|p| scores[p].probability),
        decision_id: d.decision_id,
        scores,
        ranking,
        policy: d.policy.as_str(),
        pick: d.pick.map(|p| ids[p].to_owned()),
        panic: d.panic,
        model: d.model,
        shadow: d.shadow,
        config_hash,
        config_arm: arm.map(|(_, a)| a.as_str()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::test_support::{engine, report, request, through_dynamics};
    use crate::stages::{cost, model, select};
    use rand::SeedableRng;

    #[test]
    fn a_decision_charges_its_pick_and_ranks_selectable_candidates_first() {
        let e = engine();
        report(&e, "busy", 0.9, 40, 1_000);
        report(&e, "idle", 0.1, 0, 1_000);
        let req = request(&["ghost", "busy", "idle"]);
        let cfg = e.config();
        let mut d = through_dynamics(&req, &e, 1_000);
        cost(&mut d, &cfg, None, None);
        model(&mut d, e.models(), &cfg);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        select(&mut d, &Default::default(), &mut rng).unwrap();
        let pending = PendingPicks::new(16);
        let counters = Counters::default();
        let self_check = SelfCheck::default();
        let resp = record(
            d,
            &pending,
            &counters,
            &self_check,
            &cfg,
            "hash".into(),
            None,
            None,
        );
        assert_eq!(resp.pick.as_deref(), Some("idle"));
        assert_eq!(resp.ranking, ["idle", "busy", "ghost"]);
        // The answer shows the evidence the decision saw; the pick is
        // charged after it.
        assert_eq!(resp.scores[2].outstanding, Some(0));
        assert_eq!(resp.scores[0].outstanding, None);
        let idle = e.registry().get("idle").expect("known");
        assert_eq!(idle.evidence().snapshot().outstanding, 1);
        assert_eq!(counters.decisions.load(Ordering::Relaxed), 1);
        assert_eq!(&*resp.config_hash, "hash");
        // Every candidate's final score is in the self-check's histogram.
        assert_eq!(self_check.snapshot().final_scores.count, 3);
    }
}

//! The cost stage of a scoring: each selectable candidate's expected
//! latency from the service's own evidence and its snapshot
//! ([`scorer_core::scoring::apply_cost`]), relative to the fastest candidate.

use std::sync::Arc;

use super::Engine;
use crate::config::Config;
use scorer_core::dynamics::EvidenceSnapshot;
use scorer_core::features::CandidateEvidence;
use scorer_core::scoring::{
    CostInputs, Explained, Reason, ReasonKind, RequestContext, Stage, apply_cost,
};
use scorer_core::state::{WorkerSlot, WorkerView};

/// One candidate while it is being scored.
pub(super) struct Scored {
    pub slot: Option<Arc<WorkerSlot>>,
    pub view: Option<Arc<WorkerView>>,
    pub e: Explained,
    pub rule: f64,
    /// Rule score before dynamics; what panic mode ranks on.
    pub base: f64,
    pub reason: Option<&'static str>,
    pub live: bool,
    pub state: &'static str,
    /// Selection weight (capacity × slow start).
    pub ramp: f64,
    pub evidence: EvidenceSnapshot,
    /// Trust in the candidate's snapshot, fraction 0..=1.
    pub trust: f64,
    /// What the cost stage used and its expected latency, once it ran.
    pub cost_evidence: Option<CandidateEvidence>,
}

/// Gives back `(100 − rule score) × (1 − trust)` of a fresh report's
/// deductions (line `snapshot_age`), `e` holding the rule score: the older
/// the snapshot, the less it counts. Stale reports (past
/// `freshness.fresh_ms`) are left to the stale rules, whose cap this would
/// lift.
pub(super) fn snapshot_age_give_back(e: &mut Explained, age_ms: u64, trust: f64) {
    let deducted = (100.0 - e.score).max(0.0);
    if trust < 1.0 && deducted > 0.0 {
        let why = Reason::new(
            ReasonKind::SnapshotAge,
            [age_ms as f64 / 1000.0, trust, 0.0, 0.0, 0.0],
        );
        e.add(
            "snapshot_age",
            deducted * (1.0 - trust),
            why,
            Some(age_ms as f64),
        );
    }
}

/// The service-time prior of candidates without outcomes, ms: the median
/// estimate of those with outcomes, else the median reported mean RTT,
/// else 1 ms (all candidates then share it, so only its ratio matters).
fn prior_ms(scored: &[Scored], selectable: &[usize]) -> f64 {
    let sampled: Vec<f64> = selectable
        .iter()
        .filter_map(|&i| scored[i].evidence.service.last_ms())
        .collect();
    if let Some(m) = super::freshness::median(sampled) {
        return m.max(1e-6);
    }
    let reported: Vec<f64> = selectable
        .iter()
        .filter_map(|&i| scored[i].view.as_ref().map(|v| v.smoothed.rtt_ms_avg))
        .filter(|r| *r > 0.0)
        .collect();
    super::freshness::median(reported).unwrap_or(1.0).max(1e-6)
}

impl Engine {
    /// Runs the cost stage on the `selectable` candidates of `scored`.
    pub(super) fn apply_costs(
        &self,
        scored: &mut [Scored],
        selectable: &[usize],
        context: &RequestContext,
        now_ms: u64,
        cfg: &Config,
    ) {
        let ev = &cfg.evidence;
        let prior = prior_ms(scored, selectable);
        let service: Vec<f64> = selectable
            .iter()
            .map(|&i| {
                scored[i]
                    .evidence
                    .service
                    .value_at(now_ms, prior, ev.latency_decay_ms)
                    .max(1e-6)
            })
            .collect();
        let fastest = service.iter().copied().fold(f64::INFINITY, f64::min);
        // The pool's typical unseen backlog (the median of the candidates'
        // last reports): an aged report's is pulled toward it.
        let decay = ev.unseen_backlog_decay_ms;
        let unseen_prior = super::freshness::median(
            selectable
                .iter()
                .map(|&i| scored[i].evidence.unseen_backlog)
                .collect(),
        )
        .unwrap_or(0.0);
        let penalty_ms = ev.penalty_ms(context.timeout_ms);
        // Slow start counts relative to the most ramped-up candidate: a pool
        // that is all new (or all back) together is not slowed against itself.
        let full = selectable
            .iter()
            .map(|&i| scored[i].ramp.min(1.0))
            .fold(f64::MIN_POSITIVE, f64::max);
        for (j, &i) in selectable.iter().enumerate() {
            let s = &mut scored[i];
            let Some(v) = s.view.as_deref() else {
                continue;
            };
            let inputs = CostInputs {
                service_ms: service[j],
                service_is_prior: s.evidence.service.samples() == 0,
                outcomes: s.evidence.outcomes,
                fastest_ms: fastest,
                outstanding: s.evidence.outstanding,
                unseen_backlog: s.evidence.unseen_backlog_at(now_ms, unseen_prior, decay),
                head_elapsed_ms: s.evidence.head_elapsed_ms(now_ms),
                reported_failure_rate: v.smoothed.error_rate,
                observed_failure_rate: s.evidence.failure_rate_at(now_ms, ev.failure_rate_decay_ms),
                trust: s.trust,
                compacting: v.compacting,
                cpu_usage: v.smoothed.cpu_usage,
                request_type: context.request_type,
                ramp: (s.ramp.min(1.0) / full).min(1.0),
                penalty_ms,
            };
            s.e.stage = Stage::Cost;
            let expected_ms = apply_cost(&mut s.e, &inputs, &cfg.cost);
            s.cost_evidence = Some(CandidateEvidence {
                outstanding: inputs.outstanding,
                service_time_ms: inputs.service_ms,
                outcomes: inputs.outcomes,
                unseen_backlog: inputs.unseen_backlog,
                observed_failure_rate: inputs.observed_failure_rate,
                expected_latency_ms: expected_ms,
            });
        }
    }
}

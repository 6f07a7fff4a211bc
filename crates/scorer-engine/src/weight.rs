//! The selection weight of a worker: what a decision's `weight` shows and
//! `GET /v1/workers` reports.

use crate::config::Config;
use scorer_core::dynamics::{EvidenceSnapshot, PenaltyState, PenaltyView, slow_start_fraction};
use scorer_core::state::WorkerView;

/// The selection weight of a live worker at `now_ms` (dimensionless, `>= 0`):
/// `capacity × ramp`. The ramp is the smallest of the slow-start fractions
/// (Envoy `slow_start_config`: linear from `penalty.min_weight_fraction` to
/// 1 over `penalty.slow_start_ms`) that apply: after a cooldown (the
/// penalty view's), after a return from silence (`revived_ms`), after an
/// outlier ejection ended, and with `selection.slow_start_new_workers` since
/// registration.
pub fn selection_weight(
    v: &WorkerView,
    pv: &PenaltyView,
    evidence: &EvidenceSnapshot,
    now_ms: u64,
    cfg: &Config,
) -> f64 {
    let since = |t: u64| slow_start_fraction(now_ms.saturating_sub(t), &cfg.penalty);
    let mut ramp = pv.slow_start_fraction;
    if cfg.selection.slow_start_new_workers {
        ramp = ramp.min(since(v.first_seen_ms));
    }
    if let Some(t) = v.revived_ms {
        ramp = ramp.min(since(t));
    }
    if let Some(t) = evidence.outlier.returned_at_ms(now_ms) {
        ramp = ramp.min(since(t));
    }
    ramp * v.capacity
}

/// The weight `GET /v1/workers` lists: [`selection_weight`] for a worker a
/// decision could pick, 0 for one it cannot (dead, in cooldown, ejected),
/// as a decision's own `weight` shows it.
pub fn listed_weight(
    v: &WorkerView,
    pv: &PenaltyView,
    evidence: &EvidenceSnapshot,
    now_ms: u64,
    cfg: &Config,
) -> f64 {
    let pickable = v.age_ms(now_ms) <= cfg.telemetry.dead_after_ms
        && pv.state != PenaltyState::Cooldown
        && !evidence.outlier.is_ejected(now_ms);
    if pickable {
        selection_weight(v, pv, evidence, now_ms, cfg)
    } else {
        0.0
    }
}

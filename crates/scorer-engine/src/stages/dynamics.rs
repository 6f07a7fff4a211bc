//! Dynamics: per live candidate, the snapshot's age gives back part of the
//! rule deductions, the penalty state scales the score (observation ×0.85,
//! cooldown ×0.2 and ineligible), outlier ejection makes it ineligible, and
//! slow start and capacity set its selection weight. Then the selectable
//! set: the eligible candidates, or, when none is, the live ones in panic
//! mode (Envoy's panic threshold: fail open, never closed by accident).

use crate::config::Config;
use crate::decision::Decision;
use crate::decision::ScoreError;
use crate::no_eligible::NoEligible;
use crate::overrides::OverrideKind;
use crate::weight::selection_weight;
use scorer_core::dynamics::PenaltyState;
use scorer_core::scoring::{Explained, Reason, ReasonKind, Stage};

/// Runs the dynamics stage and sets `d.selectable` and `d.panic`.
///
/// # Errors
/// [`ScoreError::NoEligibleWorkers`] when nothing is selectable, naming
/// the candidates an operator drained or disabled.
pub(crate) fn dynamics(d: &mut Decision<'_>, cfg: &Config) -> Result<(), ScoreError> {
    let now_ms = d.now_ms;
    for (s, id) in d.scored.iter_mut().zip(&d.ids) {
        let Some(v) = s.view.as_deref() else {
            let why = if s.e.explains() {
                format!("worker `{id}` has never reported telemetry")
            } else {
                String::new()
            };
            s.e.multiply("unknown_worker", 0.0, why, None);
            s.reason = Some("unknown_worker");
            continue;
        };
        s.e.clamp();
        s.rule = s.e.score;
        s.base = s.rule;
        let pv = v.penalty.state_at(now_ms, &cfg.penalty);
        s.evidence = s
            .slot
            .as_ref()
            .map(|slot| slot.evidence().snapshot())
            .unwrap_or_default();
        s.trust = if d.blackout {
            0.0
        } else {
            cfg.cost.trust(v.age_ms(now_ms))
        };
        s.state = pv.state.as_str();
        if !s.live {
            s.reason = Some("heartbeat_dead");
            continue;
        }
        let e = &mut s.e;
        e.stage = Stage::Dynamics;
        if !s.stale && !d.blackout {
            snapshot_age_give_back(e, v.age_ms(now_ms), s.trust);
        }
        match pv.state {
            _ if d.blackout => {}
            PenaltyState::Healthy | PenaltyState::Recovering => {}
            PenaltyState::Observation => {
                e.multiply("observation", pv.score_factor, pv.reason, None);
            }
            PenaltyState::Cooldown => {
                e.multiply("cooldown", pv.score_factor, pv.reason, None);
                s.reason = Some("cooldown");
            }
        }
        if s.evidence.outlier.is_ejected(now_ms) && s.reason.is_none() {
            s.reason = Some("outlier_ejected");
        }
        s.ramp = selection_weight(v, &pv, &s.evidence, now_ms, cfg);
        e.clamp();
    }
    if !d.overrides.is_empty() {
        operator_overrides(d);
    }
    let (scored, selectable) = (&d.scored, &mut d.selectable);
    selectable.clear();
    selectable.extend((0..scored.len()).filter(|&i| scored[i].reason.is_none()));
    d.panic = false;
    if selectable.is_empty() && cfg.selection.panic_mode {
        let live = (0..scored.len())
            .filter(|&i| scored[i].live && scored[i].operator != Some(OverrideKind::Disable));
        selectable.extend(live);
        d.panic = true;
    }
    if d.selectable.is_empty() {
        return Err(ScoreError::NoEligibleWorkers(no_eligible(d)));
    }
    Ok(())
}

/// Why nothing is selectable: the candidates an operator drained or
/// disabled, named, and the others counted.
fn no_eligible(d: &Decision<'_>) -> NoEligible {
    let mut why = NoEligible::default();
    for (s, id) in d.scored.iter().zip(&d.ids) {
        match s.operator {
            Some(kind @ (OverrideKind::Drain | OverrideKind::Disable)) => {
                why.push_overridden(id, kind, s.live);
            }
            _ => why.others += 1,
        }
    }
    why
}

/// Applies the operators' overrides in force: a drained or disabled
/// candidate is ineligible whatever else holds (its score 0), a weighted one
/// carries its weight to the select stage.
fn operator_overrides(d: &mut Decision<'_>) {
    let now_ms = d.now_ms;
    for (s, id) in d.scored.iter_mut().zip(&d.ids) {
        let Some(o) = d.overrides.get(id, now_ms) else {
            continue;
        };
        s.operator = Some(o.kind);
        let (code, reason) = match o.kind {
            OverrideKind::Weight => {
                s.operator_weight = o.weight;
                continue;
            }
            OverrideKind::Drain => ("drained", "drained"),
            OverrideKind::Disable => ("disabled", "disabled"),
        };
        s.reason = Some(reason);
        s.e.stage = Stage::Dynamics;
        let why = if s.e.explains() {
            format!(
                "{reason} by {} ({})",
                o.set_by,
                if o.reason.is_empty() {
                    "no reason given"
                } else {
                    &o.reason
                }
            )
        } else {
            String::new()
        };
        s.e.multiply(code, 0.0, Reason::Text(why), None);
    }
}

/// Gives back `(100 − rule score) × (1 − trust)` of a fresh report's
/// deductions (line `snapshot_age`), `e` holding the rule score: the older
/// the snapshot, the less it counts. Stale reports (past
/// `freshness.fresh_ms`) are left to the stale rules, whose cap this would
/// lift.
fn snapshot_age_give_back(e: &mut Explained, age_ms: u64, trust: f64) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::test_support::{decision, engine, report, request};
    use crate::stages::{freshness, rules};

    fn run(d: &mut Decision<'_>, e: &crate::Engine) -> Result<(), ScoreError> {
        let cfg = e.config();
        rules(d, e.registry(), &cfg);
        freshness(d, &cfg);
        dynamics(d, &cfg)
    }

    #[test]
    fn unknown_and_dead_candidates_are_ineligible_and_the_rest_selectable() {
        let e = engine();
        report(&e, "dead", 0.1, 0, 0);
        report(&e, "ok", 0.1, 0, 20_000);
        let req = request(&["dead", "ok", "ghost"]);
        let mut d = decision(&req, &e, 20_000);
        run(&mut d, &e).unwrap();
        let reasons: Vec<_> = d.scored.iter().map(|s| s.reason).collect();
        assert_eq!(
            reasons,
            [Some("heartbeat_dead"), None, Some("unknown_worker")]
        );
        assert_eq!((d.selectable.as_slice(), d.panic), (&[1][..], false));
        assert_eq!(d.scored[2].e.score, 0.0);
        assert!(d.scored[1].ramp > 0.0);
    }

    #[test]
    fn an_old_fresh_snapshot_gives_back_part_of_its_deductions() {
        let mut e = Explained::new();
        e.deduct(
            "cpu_high",
            40.0,
            Reason::new(ReasonKind::StaleCap, [0.0; 5]),
            None,
        );
        snapshot_age_give_back(&mut e, 2_000, 0.75);
        assert_eq!(e.score, 70.0);
        let mut full = Explained::new();
        snapshot_age_give_back(&mut full, 2_000, 0.5);
        assert!(full.adjustments.is_empty());
    }

    #[test]
    fn in_a_blackout_every_known_candidate_is_live_and_its_reported_signals_count_for_nothing() {
        let e = engine();
        report(&e, "old", 0.1, 0, 0);
        report(&e, "hot", 0.99, 80, 20_000);
        let req = request(&["old", "hot", "ghost"]);
        let mut d = decision(&req, &e, 20_000);
        d.blackout = true;
        run(&mut d, &e).unwrap();
        let reasons: Vec<_> = d.scored.iter().map(|s| s.reason).collect();
        assert_eq!(reasons, [None, None, Some("unknown_worker")]);
        assert_eq!((d.selectable.as_slice(), d.panic), (&[0, 1][..], false));
        for s in &d.scored[..2] {
            assert_eq!((s.e.score, s.trust), (100.0, 0.0));
        }
    }

    #[test]
    fn with_no_live_candidate_even_panic_mode_refuses() {
        let e = engine();
        report(&e, "a", 0.1, 0, 0);
        let req = request(&["a", "ghost"]);
        let mut d = decision(&req, &e, 20_000);
        assert_eq!(
            run(&mut d, &e),
            Err(ScoreError::NoEligibleWorkers(NoEligible {
                others: 2,
                ..NoEligible::default()
            }))
        );
        assert!(d.selectable.is_empty());
    }
}

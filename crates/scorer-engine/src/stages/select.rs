//! Select: the pick among the selectable candidates under the request's
//! policy, and every candidate's propensity (0 outside the selectable set),
//! for off-policy evaluation. Selection compares final scores, or rule
//! scores in panic mode; slow start enters as the candidate's weight.

use rand::RngCore;

use crate::decision::Decision;
use crate::decision::ScoreError;
use crate::scratch::relabel_candidates;
use scorer_core::selection::{Candidate, Selector};

/// Runs the select stage: `d.probability` and `d.pick`.
///
/// # Errors
/// [`ScoreError::Selection`] when the selector refuses its input (a bug).
pub(crate) fn select(
    d: &mut Decision<'_>,
    selector: &Selector,
    rng: &mut dyn RngCore,
) -> Result<(), ScoreError> {
    if !d.panic && !d.overrides.is_empty() {
        operator_weights(d);
    }
    let mut cands = relabel_candidates(std::mem::take(&mut d.scratch.candidates));
    cands.extend(d.selectable.iter().map(|&i| {
        let s = &d.scored[i];
        Candidate {
            worker_id: d.ids[i],
            score: s.selection_score(d.panic).clamp(0.0, 100.0),
            weight: s.ramp.max(f64::MIN_POSITIVE),
            in_flight: f64::from(s.evidence.outstanding),
            outstanding: s.evidence.outstanding,
            cost: s.cost_evidence.map(|c| c.cost),
        }
    }));
    let selection = selector.select(d.policy, &cands, &d.req.key, d.req.temperature, rng);
    d.scratch.candidates = relabel_candidates(cands);
    let selection = selection.map_err(ScoreError::Selection)?;
    d.probability.clear();
    d.probability.resize(d.scored.len(), None);
    if let Some(sel) = selection {
        d.probability.fill(Some(0.0));
        for (j, &i) in d.selectable.iter().enumerate() {
            d.probability[i] = sel.probabilities.get(j).copied();
        }
        d.pick = d.selectable.get(sel.pick).copied();
        scorer_core::selection::recycle(sel.probabilities);
    }
    Ok(())
}

/// Operator weights `w` on the selectable candidates: the score times `w`
/// (at most 100: a score-based policy cannot favour beyond its scale), the
/// routing cost divided by `w`, the selection weight times `w`. Panic mode
/// ignores them, as it ignores penalties.
fn operator_weights(d: &mut Decision<'_>) {
    for &i in &d.selectable {
        let s = &mut d.scored[i];
        let w = s.operator_weight;
        if w == 1.0 {
            continue;
        }
        let why = if s.e.explains() {
            format!("operator weight {}", scorer_core::fmt::num(w))
        } else {
            String::new()
        };
        if w < 1.0 {
            s.e.multiply("operator_weight", w, why, Some(w));
        } else {
            let lift = (s.e.score * (w - 1.0)).min(100.0 - s.e.score).max(0.0);
            s.e.add("operator_weight", lift, why, Some(w));
        }
        s.ramp *= w;
        if let Some(c) = &mut s.cost_evidence {
            c.cost /= w;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::test_support::{engine, report, request, through_dynamics};
    use rand::SeedableRng;

    #[test]
    fn max_picks_the_best_selectable_candidate_and_gives_the_rest_probability_zero() {
        let e = engine();
        report(&e, "busy", 0.9, 40, 1_000);
        report(&e, "idle", 0.1, 0, 1_000);
        let req = request(&["busy", "idle", "ghost"]);
        let mut d = through_dynamics(&req, &e, 1_000);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        select(&mut d, &Selector::default(), &mut rng).unwrap();
        assert_eq!(d.pick, Some(1));
        assert_eq!(d.probability, [Some(0.0), Some(1.0), Some(0.0)]);
    }

    #[test]
    fn policy_none_picks_nothing_and_reports_no_propensities() {
        let e = engine();
        report(&e, "a", 0.1, 0, 1_000);
        let mut req = request(&["a"]);
        req.policy = Some("none".into());
        let mut d = through_dynamics(&req, &e, 1_000);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        select(&mut d, &Selector::default(), &mut rng).unwrap();
        assert_eq!((d.pick, d.probability.as_slice()), (None, &[None][..]));
    }
}

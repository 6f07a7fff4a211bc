//! Freshness: a stale worker never outranks the median fresh candidate (no
//! herding onto a worker whose idleness is old news), then pays for its age
//! (`freshness.stale_max_deduct × (1 − freshness)`). The freshness factor
//! and the priors are [`scorer_core::dynamics::freshness`].

use crate::config::Config;
use crate::decision::Decision;
use scorer_core::dynamics::median;
use scorer_core::scoring::{Reason, ReasonKind};

/// Runs the freshness stage on the stale candidates of `d`.
pub(crate) fn freshness(d: &mut Decision<'_>, cfg: &Config) {
    if !d.scored.iter().any(|s| s.stale) {
        return;
    }
    let cap = median(
        d.scored
            .iter()
            .filter(|s| !s.stale && s.freshness >= 1.0 && s.live)
            .map(|s| s.e.score)
            .collect(),
    );
    for s in &mut d.scored {
        let Some(v) = s.view.as_deref().filter(|_| s.stale) else {
            continue;
        };
        let e = &mut s.e;
        if let Some(cap) = cap.filter(|&c| e.score > c) {
            e.deduct(
                "stale_cap",
                e.score - cap,
                Reason::new(ReasonKind::StaleCap, [cap, 0.0, 0.0, 0.0, 0.0]),
                None,
            );
        }
        let age = v.age_ms(d.now_ms);
        e.deduct(
            "stale_telemetry",
            (1.0 - s.freshness) * cfg.freshness.stale_max_deduct,
            Reason::new(
                ReasonKind::StaleTelemetry,
                [
                    age as f64 / 1000.0,
                    cfg.freshness.fresh_ms as f64 / 1000.0,
                    cfg.telemetry.dead_after_ms as f64 / 1000.0,
                    s.freshness,
                    0.0,
                ],
            ),
            Some(age as f64),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::rules;
    use crate::stages::test_support::{decision, engine, report, request};

    #[test]
    fn a_stale_candidate_is_capped_at_the_median_fresh_score_then_pays_for_its_age() {
        let e = engine();
        report(&e, "idle", 0.0, 0, 0);
        report(&e, "busy", 0.95, 60, 6_000);
        report(&e, "fresh", 0.0, 0, 6_000);
        let req = request(&["busy", "idle", "fresh"]);
        let mut d = decision(&req, &e, 6_000);
        let cfg = e.config();
        rules(&mut d, e.registry(), &cfg);
        let fresh_median = median(vec![d.scored[0].e.score, d.scored[2].e.score]).unwrap();
        let pulled = d.scored[1].e.score;
        freshness(&mut d, &cfg);
        let idle = &d.scored[1];
        let codes: Vec<&str> = idle.e.adjustments.iter().map(|a| a.code).collect();
        assert!(codes.contains(&"stale_telemetry"), "{codes:?}");
        let age_cost = (1.0 - idle.freshness) * cfg.freshness.stale_max_deduct;
        let expected = pulled.min(fresh_median) - age_cost;
        assert!(
            (idle.e.score - expected).abs() < 1e-5,
            "{} vs {expected}",
            idle.e.score
        );
        // Fresh candidates are untouched.
        assert_eq!(d.scored[2].e.score, 100.0);
    }

    #[test]
    fn without_a_stale_candidate_nothing_changes() {
        let e = engine();
        report(&e, "a", 0.5, 3, 1_000);
        let req = request(&["a"]);
        let mut d = decision(&req, &e, 1_000);
        let cfg = e.config();
        rules(&mut d, e.registry(), &cfg);
        let before = d.scored[0].e.clone();
        freshness(&mut d, &cfg);
        assert_eq!(d.scored[0].e, before);
    }
}

//! Rules: each candidate's slot and view from the registry, its snapshot's
//! freshness, and its rule score ([`rule_score_with`]; a compact decision
//! takes it from the worker's [`WorkerTerms`] while they hold). A stale candidate (past
//! `freshness.fresh_ms`, not dead) is scored on its signals pulled toward
//! the priors of the request's fresh candidates ([`Priors`]), so it never
//! looks better than it did when fresh.

use crate::config::Config;
use crate::decision::{Decision, Scored};
use crate::worker_terms::WorkerTerms;
use scorer_core::dynamics::{FreshnessConfig, Priors, freshness_factor};
use scorer_core::scoring::{Explained, RuleInputs, rule_score_with};
use scorer_core::state::Registry;

/// Runs the rules stage: fills `d.scored`, one per id.
pub(crate) fn rules(d: &mut Decision<'_>, registry: &Registry, cfg: &Config) {
    let now_ms = d.now_ms;
    let rule_inputs = RuleInputs {
        cfg: &cfg.scoring,
        dead_after_ms: cfg.telemetry.dead_after_ms,
        request_type: d.context.request_type,
        now_ms,
        warmup: true,
    };
    let fresh_cfg = FreshnessConfig {
        fresh_ms: cfg.freshness.fresh_ms,
        dead_after_ms: cfg.telemetry.dead_after_ms,
    };
    let explain = d.explain;
    d.scored.clear();
    d.scored.extend(d.ids.iter().map(|id| {
        let slot = registry.get(id);
        let view = slot.as_ref().map(|s| s.view_full());
        let mut s = Scored::unknown(slot, view, explain);
        if let Some(v) = s.view.as_deref() {
            s.freshness = freshness_factor(v.age_ms(now_ms), &fresh_cfg);
        }
        s
    }));
    if d.blackout {
        for s in d.scored.iter_mut().filter(|s| s.view.is_some()) {
            s.live = true;
            s.e.add(
                "telemetry_blackout",
                0.0,
                "no view of the workers' telemetry: scored on local evidence alone",
                None,
            );
        }
        return;
    }
    let priors = d.scored.iter().any(|s| s.freshness < 1.0).then(|| {
        let fresh = d
            .scored
            .iter()
            .filter(|s| s.freshness >= 1.0)
            .filter_map(|s| s.view.as_ref().map(|v| &v.smoothed));
        Priors::new(fresh, &cfg.scoring)
    });
    for s in &mut d.scored {
        let Some(v) = s.view.as_deref() else {
            continue;
        };
        s.stale = s.freshness < 1.0 && v.age_ms(now_ms) <= cfg.telemetry.dead_after_ms;
        let (e, live) = match &priors {
            Some(p) if s.stale => {
                let mut pulled = v.clone();
                pulled.smoothed = p.pull(&v.smoothed, s.freshness);
                rule_score_with(&pulled, &rule_inputs, d.explain)
            }
            _ => {
                let cached = d.terms_under.as_ref().and_then(|hash| {
                    WorkerTerms::rule_score(v, hash, d.context.request_type, now_ms)
                });
                match cached {
                    Some(score) => {
                        let mut e = Explained::quiet();
                        e.score = score;
                        (e, true)
                    }
                    None => rule_score_with(v, &rule_inputs, d.explain),
                }
            }
        };
        s.e = e;
        s.live = live;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::test_support::{decision, engine, report, request};

    #[test]
    fn unknown_candidates_stay_unknown_and_known_ones_get_rule_scores() {
        let e = engine();
        report(&e, "w1", 0.2, 0, 1_000);
        let req = request(&["w1", "ghost"]);
        let mut d = decision(&req, &e, 1_000);
        rules(&mut d, e.registry(), &e.config());
        assert_eq!(d.scored.len(), 2);
        let (w1, ghost) = (&d.scored[0], &d.scored[1]);
        assert!(w1.live && !w1.stale);
        assert_eq!((w1.freshness, w1.e.score), (1.0, 100.0));
        assert!(ghost.view.is_none() && !ghost.live);
        assert_eq!((ghost.freshness, ghost.state), (0.0, "unknown"));
    }

    #[test]
    fn a_stale_idle_candidate_is_scored_on_signals_pulled_toward_its_busy_peers() {
        let e = engine();
        report(&e, "idle", 0.0, 0, 0);
        report(&e, "busy", 0.95, 60, 6_000);
        let req = request(&["busy", "idle"]);
        let mut d = decision(&req, &e, 6_000);
        rules(&mut d, e.registry(), &e.config());
        let idle = &d.scored[1];
        assert!(idle.stale && idle.live);
        assert!(
            idle.freshness > 0.0 && idle.freshness < 1.0,
            "{}",
            idle.freshness
        );
        // On its own idle signals it would score 100.
        assert!(idle.e.score < 100.0, "{}", idle.e.score);
    }
}

//! The targets of routing to where a key is warm: `service-embedded`
//! against the locality baselines and the oracle in the scenarios with
//! caches, its hit rate against the best arm's, a returning cold worker's
//! share, and the retrained model against the rules where speeds and cache
//! sizes differ.

use super::{RETURN_PEAK_MAX_SHARE, TargetCheck, get, p99};
use crate::run_summary::PolicyResult;
use crate::runner::ScenarioResults;

use super::cache::HASH_BOUNDED;
use super::embedded::EMBEDDED_ARM;

/// Hit-rate points `service-embedded` may trail the best arm (the oracle
/// aside) by on `cache-affinity`.
pub const HIT_RATE_POINTS: f64 = 2.0;
/// Largest `service-embedded` p99 on `cache-affinity`, × the oracle's.
pub const ORACLE_FACTOR: f64 = 1.3;
/// Largest `service-embedded` p99 on `hot-key`, × `hash-bounded`'s.
pub const HOT_KEY_FACTOR: f64 = 0.8;
/// Largest `model-retrained` p99 on `cache-heterogeneous`, × `service-rules`'s.
pub const RETRAINED_FACTOR: f64 = 0.9;

fn hit_rate(p: &PolicyResult) -> Option<f64> {
    p.cache.as_ref().and_then(|c| c.hit_rate)
}

/// Every locality target of the simulator scenarios in `sims`.
pub fn locality_targets(sims: &[&ScenarioResults]) -> Vec<TargetCheck> {
    let mut out = Vec::new();
    for r in sims {
        match r.scenario.as_str() {
            "cache-affinity" => {
                out.push(hit_rate_target(r));
                out.push(ratio_target(r, EMBEDDED_ARM, "oracle", ORACLE_FACTOR));
            }
            "hot-key" => out.push(ratio_target(r, EMBEDDED_ARM, HASH_BOUNDED, HOT_KEY_FACTOR)),
            "cold-restart" => out.push(cold_return_target(r)),
            "cache-heterogeneous" => out.push(ratio_target(
                r,
                "model-retrained",
                "service-rules",
                RETRAINED_FACTOR,
            )),
            _ => {}
        }
    }
    out
}

/// `arm` p99 ≤ `k` × `other`'s.
fn ratio_target(r: &ScenarioResults, arm: &str, other: &str, k: f64) -> TargetCheck {
    let target = format!("{} (sim): `{arm}` p99 ≤ {k} × `{other}`'s", r.scenario);
    let (Some(a), Some(o)) = (get(r, arm), get(r, other)) else {
        return TargetCheck::not_measured(target, "an arm did not run");
    };
    let ratio = p99(a) / p99(o);
    TargetCheck {
        target,
        measured: format!("{:.2} ms against {:.2} ms: {ratio:.3} ×", p99(a), p99(o)),
        met: ratio <= k,
    }
}

/// `service-embedded`'s hit rate within [`HIT_RATE_POINTS`] of the best
/// other arm's (the oracle, which reads the caches, aside).
fn hit_rate_target(r: &ScenarioResults) -> TargetCheck {
    let target = format!(
        "{} (sim): `{EMBEDDED_ARM}` hit rate within {HIT_RATE_POINTS:.0} points of the highest arm's (the oracle aside)",
        r.scenario
    );
    let Some(e) = get(r, EMBEDDED_ARM).and_then(hit_rate) else {
        return TargetCheck::not_measured(target, "the embedded arm or its hit rate is missing");
    };
    let best = r
        .policies
        .iter()
        .filter(|p| p.status == "ok" && p.name != "oracle" && p.name != EMBEDDED_ARM)
        .filter_map(|p| hit_rate(p).map(|h| (p.name.as_str(), h)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let Some((name, h)) = best else {
        return TargetCheck::not_measured(target, "no other arm's hit rate");
    };
    let gap = (h - e) * 100.0;
    TargetCheck {
        target,
        measured: format!(
            "`{EMBEDDED_ARM}` {:.1}%, highest other `{name}` {:.1}%: {gap:.1} points behind",
            e * 100.0,
            h * 100.0
        ),
        met: gap <= HIT_RATE_POINTS,
    }
}

/// The worker that returns with an empty cache takes at most
/// [`RETURN_PEAK_MAX_SHARE`] × its fair share from `service-embedded`.
fn cold_return_target(r: &ScenarioResults) -> TargetCheck {
    let target = format!(
        "{} (sim): `{EMBEDDED_ARM}` peak share of the returning cold worker ≤ {RETURN_PEAK_MAX_SHARE:.0} × fair share",
        r.scenario
    );
    let Some(e) = get(r, EMBEDDED_ARM) else {
        return TargetCheck::not_measured(target, "the embedded arm did not run");
    };
    let back = e.recovery_ms.map_or_else(
        || "never back to half its fair share within the run".to_owned(),
        |ms| format!("back to half its fair share after {ms:.0} ms"),
    );
    TargetCheck {
        measured: e.recovery_peak_share.map_or_else(
            || format!("no share measured after the fault; {back}"),
            |x| format!("peak share on return {x:.2} × fair share; {back}"),
        ),
        met: e
            .recovery_peak_share
            .is_some_and(|x| x <= RETURN_PEAK_MAX_SHARE)
            && e.recovery_ms.is_some(),
        target,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targets::cache::tests::arm;

    #[test]
    fn the_embedded_arm_is_judged_on_hit_rate_and_p99_against_the_anchors() {
        let affinity = crate::targets::tests::run(
            "cache-affinity",
            vec![
                arm("oracle", 16.0, 0.90),
                arm("kv-cost", 19.0, 0.84),
                arm(EMBEDDED_ARM, 19.5, 0.83),
            ],
        );
        let hot = crate::targets::tests::run(
            "hot-key",
            vec![arm(HASH_BOUNDED, 25.0, 0.78), arm(EMBEDDED_ARM, 23.5, 0.8)],
        );
        let t = locality_targets(&[&affinity, &hot]);
        let met: Vec<bool> = t.iter().map(|t| t.met).collect();
        // 1 point behind kv-cost, 1.22 × the oracle, 0.94 × hash-bounded.
        assert_eq!(met, [true, true, false]);
        assert!(
            t[0].measured.contains("`kv-cost` 84.0%"),
            "{}",
            t[0].measured
        );
        assert!(t[2].measured.contains("0.940 ×"), "{}", t[2].measured);
    }

    #[test]
    fn a_cold_return_needs_a_measured_peak_and_a_recovery() {
        let mut e = arm(EMBEDDED_ARM, 20.0, 0.8);
        e.recovery_peak_share = Some(1.5);
        let r = crate::targets::tests::run("cold-restart", vec![e.clone()]);
        assert!(!locality_targets(&[&r])[0].met, "never recovered");
        e.recovery_ms = Some(2_000.0);
        let r = crate::targets::tests::run("cold-restart", vec![e]);
        assert!(locality_targets(&[&r])[0].met);
    }
}

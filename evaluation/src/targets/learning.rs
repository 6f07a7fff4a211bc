//! The retraining loop's targets: `service-learning` (the service as
//! shipped, starting on its rules, with `trainer loop` beside it on the
//! run's own log) against `service-rules`, at p99.
//!
//! * on `hidden-signal-mid-run`, once the loop has had the run's second
//!   third to learn the new signal, its p99 over the last third is
//!   ≤ [`MID_RUN_RATIO`] × `service-rules`' over the same third;
//! * on every scenario its p99 over the whole run is never more than
//!   [`super::NEVER_WORSE`] × `service-rules`': the gate keeps out what
//!   does not help.

use super::model::{NEVER_WORSE, RULES_ARM, over_never_worse};
use super::{TargetCheck, get};
use crate::runner::ScenarioResults;

/// The arm with the loop.
pub const LEARNING_ARM: &str = "service-learning";

/// The scenario whose signal starts mid-run.
pub const MID_RUN_SCENARIO: &str = "hidden-signal-mid-run";

/// Largest last-third p99 ratio to `service-rules` on [`MID_RUN_SCENARIO`].
pub const MID_RUN_RATIO: f64 = 0.85;

/// [`MID_RUN_SCENARIO`]: `service-learning`'s last-third p99 ≤
/// [`MID_RUN_RATIO`] × `service-rules`'.
fn mid_run_target(sims: &[&ScenarioResults]) -> TargetCheck {
    let target = format!(
        "{MID_RUN_SCENARIO} (sim): `{LEARNING_ARM}` p99 over the last third of the run ≤ {MID_RUN_RATIO:.2} × `{RULES_ARM}`'s"
    );
    let Some(r) = sims.iter().find(|r| r.scenario == MID_RUN_SCENARIO) else {
        return TargetCheck::not_measured(target, "the scenario did not run");
    };
    let third = |arm: &str| get(r, arm).and_then(|p| p.p99_last_third_ms);
    let (Some(a), Some(b)) = (third(LEARNING_ARM), third(RULES_ARM)) else {
        return TargetCheck::not_measured(
            target,
            &format!("`{LEARNING_ARM}` or `{RULES_ARM}` did not run"),
        );
    };
    let promotions = get(r, LEARNING_ARM)
        .and_then(|p| p.learning.as_ref())
        .map_or(0, |l| l.promotions);
    let x = a / b.max(1e-9);
    TargetCheck {
        measured: format!(
            "last-third p99 {a:.2} ms = {x:.3} × {RULES_ARM} ({b:.2} ms; limit {:.2} ms); {promotions} promotion{}",
            MID_RUN_RATIO * b,
            if promotions == 1 { "" } else { "s" }
        ),
        met: x <= MID_RUN_RATIO,
        target,
    }
}

/// Every scenario: `service-learning` p99 ≤ [`NEVER_WORSE`] ×
/// `service-rules`' over the whole run.
fn never_worse_target(sims: &[&ScenarioResults]) -> TargetCheck {
    let (worse, worst) = over_never_worse(sims, LEARNING_ARM);
    let promoted: Vec<&str> = sims
        .iter()
        .filter(|r| {
            get(r, LEARNING_ARM)
                .and_then(|p| p.learning.as_ref())
                .is_some_and(|l| l.promotions > 0)
        })
        .map(|r| r.scenario.as_str())
        .collect();
    TargetCheck {
        target: format!(
            "every simulator scenario: `{LEARNING_ARM}` p99 ≤ {NEVER_WORSE:.2} × `{RULES_ARM}` over the whole run"
        ),
        measured: format!(
            "worst {}; over the limit or not measured: {}; a model promoted on: {}",
            worst.map_or_else(|| "n/a".to_owned(), |(s, x)| format!("{s} {x:.3}")),
            if worse.is_empty() {
                "none".to_owned()
            } else {
                worse.join(", ")
            },
            if promoted.is_empty() {
                "none".to_owned()
            } else {
                promoted.join(", ")
            }
        ),
        met: !sims.is_empty() && worse.is_empty(),
    }
}

/// Every learning target over the simulator scenarios `sims`.
pub fn learning_targets(sims: &[&ScenarioResults]) -> Vec<TargetCheck> {
    vec![mid_run_target(sims), never_worse_target(sims)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_summary::PolicyResult;

    fn arm(name: &str, p99_ms: f64, last_third_ms: f64) -> PolicyResult {
        let mut p = PolicyResult::test_ran(name, p99_ms);
        p.p99_last_third_ms = Some(last_third_ms);
        p
    }

    fn sc(name: &str, learning: (f64, f64)) -> ScenarioResults {
        super::super::tests::run(
            name,
            vec![
                arm(RULES_ARM, 10.0, 10.0),
                arm(LEARNING_ARM, learning.0, learning.1),
            ],
        )
    }

    #[test]
    fn the_mid_run_target_reads_the_last_third_and_the_other_the_whole_run() {
        let sims = [
            sc(MID_RUN_SCENARIO, (10.0, 8.4)),
            sc("homogeneous", (10.3, 9.0)),
        ];
        let refs: Vec<&ScenarioResults> = sims.iter().collect();
        let t = learning_targets(&refs);
        assert!(t[0].met, "{}", t[0].measured);
        assert!(t[0].measured.contains("0.840 ×"), "{}", t[0].measured);
        assert!(t[1].met, "1.03 is the limit: {}", t[1].measured);
        let worse = [
            sc(MID_RUN_SCENARIO, (10.0, 8.6)),
            sc("homogeneous", (10.4, 9.0)),
        ];
        let refs: Vec<&ScenarioResults> = worse.iter().collect();
        let t = learning_targets(&refs);
        assert!(!t[0].met && !t[1].met);
        assert!(
            t[1].measured.contains("homogeneous (1.040)"),
            "{}",
            t[1].measured
        );
        let t = learning_targets(&refs[1..]);
        assert!(t[0].measured.starts_with("not measured"));
    }
}

//! The target of `service-replicas`, the service run as several replicas
//! sharing one view over a bus: where several routers spread over them,
//! its tail stays within [`REPLICAS_P99_FACTOR`] of one service's
//! (`service`), in the same run.

use super::{TargetCheck, get, p99};
use crate::runner::ScenarioResults;

/// The replicated arm.
pub const REPLICAS_ARM: &str = "service-replicas";

/// The scenarios of the target.
pub const REPLICAS_SCENARIOS: [&str; 2] = ["many-routers", "cache-many-routers"];

/// Largest p99 of the replicated arm, × the `service` arm's.
pub const REPLICAS_P99_FACTOR: f64 = 1.1;

/// One target per scenario of [`REPLICAS_SCENARIOS`] in `sims` where the
/// replicated arm ran: its p99 ≤ [`REPLICAS_P99_FACTOR`] × `service`'s.
pub fn replicas_targets(sims: &[&ScenarioResults]) -> Vec<TargetCheck> {
    sims.iter()
        .filter(|r| REPLICAS_SCENARIOS.contains(&r.scenario.as_str()))
        .filter(|r| r.policies.iter().any(|p| p.name == REPLICAS_ARM))
        .map(|r| replicas_target(r))
        .collect()
}

fn replicas_target(r: &ScenarioResults) -> TargetCheck {
    let replicas = crate::arms::replicas::DEFAULT_REPLICAS;
    let target = format!(
        "{} (sim): `{REPLICAS_ARM}` ({replicas} replicas sharing telemetry and load over the bus) p99 ≤ {REPLICAS_P99_FACTOR:.1} × `{}`'s (one replica)",
        r.scenario,
        super::SHIPPED_ARM
    );
    let (Some(many), Some(one)) = (get(r, REPLICAS_ARM), get(r, super::SHIPPED_ARM)) else {
        return TargetCheck::not_measured(target, "an arm did not run");
    };
    let (m, o) = (p99(many), p99(one));
    TargetCheck {
        measured: format!(
            "p99 {m:.2} ms = {:.3} × `{}` ({o:.2} ms; limit {:.2} ms); errors {:.3}% vs {:.3}%",
            m / o.max(1e-9),
            super::SHIPPED_ARM,
            REPLICAS_P99_FACTOR * o,
            many.error_rate.unwrap_or(0.0) * 100.0,
            one.error_rate.unwrap_or(0.0) * 100.0
        ),
        met: m <= REPLICAS_P99_FACTOR * o,
        target,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_summary::PolicyResult;

    fn run(scenario: &str, replicas_p99: Option<f64>) -> ScenarioResults {
        let mut arms = vec![PolicyResult::test_ran("service", 10.0)];
        arms.extend(replicas_p99.map(|p| PolicyResult::test_ran(REPLICAS_ARM, p)));
        crate::targets::tests::run(scenario, arms)
    }

    #[test]
    fn the_replicas_are_held_to_one_services_tail_where_they_ran() {
        let (within, beyond, absent, elsewhere) = (
            run("many-routers", Some(11.0)),
            run("cache-many-routers", Some(11.2)),
            run("many-routers", None),
            run("homogeneous", Some(50.0)),
        );
        let t = replicas_targets(&[&within, &beyond, &absent, &elsewhere]);
        let met: Vec<bool> = t.iter().map(|t| t.met).collect();
        assert_eq!(met, [true, false]);
        assert!(t[1].target.starts_with("cache-many-routers (sim)"));
        assert!(
            t[1].measured.contains("1.120 × `service`"),
            "{}",
            t[1].measured
        );
    }
}

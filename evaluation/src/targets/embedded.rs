//! The targets of `service-embedded`, the service's decision made inside
//! each router by the embedded balancer: against the best baseline in
//! every simulator scenario and on every testbed scenario, under the same
//! rules as the `service` arm (its pick time charged, its view delayed).
//! On the testbed with several routers, each embedding its own balancer,
//! the baselines run one instance per router.

use super::{TargetCheck, arm_vs_best_baseline};
use crate::runner::ScenarioResults;

/// The embedded arm.
pub const EMBEDDED_ARM: &str = "service-embedded";

/// The p99 factor of the embedded arm's simulator target for `scenario`:
/// 1.0 on `homogeneous`; 0.8 on `many-routers` and its heterogeneous and
/// fault variants, where the shared picture should win, and on
/// `cache-affinity` and `cache-heterogeneous`, where knowing where a key is
/// warm and how fast each worker is should; 0.9 with 32 and 128 routers
/// and elsewhere.
pub fn embedded_p99_factor(scenario: &str) -> f64 {
    match scenario {
        "homogeneous" => 1.0,
        "many-routers"
        | "many-routers-heterogeneous"
        | "many-routers-fault"
        | "cache-affinity"
        | "cache-heterogeneous" => 0.8,
        _ => 0.9,
    }
}

/// The p99 factor of the embedded arm's testbed target for `scenario`:
/// 0.8 on `cache`, where its workers cache; 1.0 elsewhere.
pub fn embedded_testbed_factor(scenario: &str) -> Option<f64> {
    (scenario == "cache").then_some(0.8)
}

/// How a testbed run's target is labelled: by its scenario, and with
/// several routers as the several-routers check.
fn testbed_label(r: &ScenarioResults) -> String {
    if r.routers > 1 {
        format!(
            "Testbed, several routers (`{}`, {} routers, each embedding its own balancer; each baseline one instance per router)",
            r.scenario, r.routers
        )
    } else {
        format!("testbed {}", r.scenario)
    }
}

/// One target per simulator scenario in `sims` and per testbed scenario in
/// `testbeds` where the embedded arm ran: p99 ≤ factor × the best
/// baseline's (1.0 on the testbed), errors ≤ the lowest of theirs.
pub fn embedded_targets(
    sims: &[&ScenarioResults],
    testbeds: &[&ScenarioResults],
) -> Vec<TargetCheck> {
    let ran = |r: &&&ScenarioResults| r.policies.iter().any(|p| p.name == EMBEDDED_ARM);
    let sim = sims.iter().filter(ran).map(|r| {
        let k = embedded_p99_factor(&r.scenario);
        arm_vs_best_baseline(r, EMBEDDED_ARM, Some(k), &format!("{} (sim)", r.scenario))
    });
    let testbed = testbeds.iter().filter(ran).map(|r| {
        let k = embedded_testbed_factor(&r.scenario);
        arm_vs_best_baseline(r, EMBEDDED_ARM, k, &testbed_label(r))
    });
    sim.chain(testbed).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_summary::PolicyResult;

    fn run(scenario: &str, embedded_p99: f64) -> ScenarioResults {
        let arm = |name: &str, p99| {
            let mut p = PolicyResult::test_ran(name, p99);
            p.error_rate = Some(0.0);
            p
        };
        let arms = vec![arm("p2c-peak-ewma", 10.0), arm(EMBEDDED_ARM, embedded_p99)];
        crate::targets::tests::run(scenario, arms)
    }

    #[test]
    fn the_embedded_arm_is_held_to_its_factor_per_scenario() {
        let (slow, homog, many) = (
            run("slow-worker", 9.0),
            run("homogeneous", 10.0),
            run("many-routers", 8.5),
        );
        let tb = run("pause", 10.5);
        let t = embedded_targets(&[&slow, &homog, &many], &[&tb]);
        let met: Vec<bool> = t.iter().map(|t| t.met).collect();
        assert_eq!(met, [true, true, false, false]);
        assert!(t[2].target.contains("0.8 × "), "{}", t[2].target);
        assert!(t[3].target.starts_with("testbed pause"), "{}", t[3].target);
    }

    #[test]
    fn the_testbed_several_routers_check_needs_the_p99_and_the_errors() {
        let many = |embedded_p99: f64, embedded_errors: f64| {
            let mut r = run("many-routers", embedded_p99);
            r.mode = "testbed".to_owned();
            r.routers = 4;
            r.policies[0].name = "least-request-all".to_owned();
            let mut p2c = PolicyResult::test_ran("p2c-least-request", 12.0);
            p2c.error_rate = Some(0.001);
            r.policies.push(p2c);
            r.policies[1].error_rate = Some(embedded_errors);
            r
        };
        let (under, over, failing) = (many(9.5, 0.0), many(10.5, 0.0), many(9.5, 0.01));
        let t = embedded_targets(&[], &[&under, &over, &failing]);
        let met: Vec<bool> = t.iter().map(|t| t.met).collect();
        assert_eq!(met, [true, false, false]);
        assert!(
            t[0].target
                .starts_with("Testbed, several routers (`many-routers`, 4 routers"),
            "{}",
            t[0].target
        );
        assert!(
            t[1].measured.contains("least-request-all"),
            "{}",
            t[1].measured
        );
        assert!(t[2].measured.contains("errors 1.000%"), "{}", t[2].measured);
    }
}

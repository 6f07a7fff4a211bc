//! Which arms `evaluate all` runs where: every requested arm on each
//! simulator scenario but the replicated service where one router sends
//! every request, and on the testbed all but the simulator-only arms, those
//! kept to the simulator to hold the run time and, where the Redis workers
//! hold every key, the locality baselines.

use crate::arms::{Kind, SIM_ONLY};

/// Whether `name` is a locality baseline: `evaluate all` leaves them out
/// of the testbed scenarios whose Redis workers hold every key (they have
/// nothing to find there, and each arm costs the testbed about 13 s).
fn is_locality_baseline(name: &str) -> bool {
    crate::arms::spec(name).is_some_and(|a| a.class == crate::arms::Class::LocalityBaseline)
}

/// Arms `evaluate all` runs in the simulator only, to hold its run time:
/// `round-robin` and `random` (in no target; the simulator shows them on
/// every scenario) and `model-retrained` (in no testbed target; its
/// testbed run trains first and costs two arms' time). `evaluate testbed
/// --policies` still runs them.
pub const SIM_ONLY_IN_ALL: [&str; 3] = ["round-robin", "random", "model-retrained"];

/// The arms of `policies` that `evaluate all` runs on simulator scenario
/// `scenario`: all but the replicated service where one router sends
/// every request (one router calls one replica: the `service` arm), to
/// hold the run time.
pub(crate) fn sim_policies(policies: &[String], scenario: &str) -> Vec<String> {
    let replicated =
        |p: &str| crate::arms::spec(p).is_some_and(|a| matches!(a.kind, Kind::Replicas(_)));
    let several =
        crate::scenario::Scenario::preset(scenario, crate::scenario::DEFAULT_WORKERS, 1.0)
            .is_ok_and(|sc| sc.routers > 1);
    policies
        .iter()
        .filter(|p| several || !replicated(p))
        .cloned()
        .collect()
}

/// The arms of `policies` that the testbed runs on `scenario` in
/// `evaluate all` (`many-routers`: only its own arms, the embedded
/// balancer and the baselines it is checked against).
pub(crate) fn testbed_policies(policies: &[String], scenario: &str) -> Vec<String> {
    let caches = scenario == crate::testbed::cache::NAME;
    let many = scenario == crate::testbed::many_routers::NAME;
    policies
        .iter()
        .filter(|p| {
            (!many || crate::testbed::many_routers::ARMS.contains(&p.as_str()))
                && !SIM_ONLY.contains(&p.as_str())
                && !SIM_ONLY_IN_ALL.contains(&p.as_str())
                && (caches || !is_locality_baseline(p))
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arms::ALL_POLICIES;
    use crate::targets;

    #[test]
    fn the_testbed_runs_the_locality_baselines_only_where_workers_cache() {
        let all: Vec<String> = ALL_POLICIES.iter().map(|s| (*s).to_owned()).collect();
        let pause = testbed_policies(&all, "pause");
        for name in [
            "oracle",
            "round-robin",
            "random",
            "model-retrained",
            "hash-bounded",
        ] {
            assert!(!pause.iter().any(|p| p == name), "{name} on pause");
        }
        assert!(pause.iter().any(|p| p == "service-embedded"));
        let cache = testbed_policies(&all, crate::testbed::cache::NAME);
        for name in [
            "hash-bounded",
            "cache-aware",
            "kv-cost",
            "least-request-all",
        ] {
            assert!(cache.iter().any(|p| p == name), "{name} on cache");
        }
        assert!(
            !cache
                .iter()
                .any(|p| p == "oracle" || p == "model-retrained")
        );
        let mut many = testbed_policies(&all, crate::testbed::many_routers::NAME);
        many.sort();
        let mut arms = crate::testbed::many_routers::ARMS.map(str::to_owned);
        arms.sort();
        assert_eq!(many, arms);
    }

    #[test]
    fn the_replicated_service_runs_only_where_several_routers_share_it() {
        let all: Vec<String> = ALL_POLICIES.iter().map(|s| (*s).to_owned()).collect();
        let replicas = "service-replicas".to_owned();
        assert!(all.contains(&replicas));
        let mut ran = Vec::new();
        for scenario in crate::scenario::SCENARIOS {
            let runs = sim_policies(&all, scenario);
            let sc = crate::scenario::Scenario::preset(scenario, 12, 1.0).expect("a preset");
            assert_eq!(runs.contains(&replicas), sc.routers > 1, "{scenario}");
            assert_eq!(runs.len() + usize::from(sc.routers == 1), all.len());
            if runs.contains(&replicas) {
                ran.push(scenario);
            }
        }
        for scenario in targets::REPLICAS_SCENARIOS {
            assert!(ran.contains(&scenario), "{scenario}");
        }
        assert!(!testbed_policies(&all, "pause").contains(&replicas));
    }
}

//! The anchors of the world with caches: that it has locality worth
//! routing for (`hash-bounded` hits far more often than
//! `least-request-all`), that `cache-aware` sits between them or beats
//! both, that the oracle beats every arm, and that real Redis orders the
//! two baselines the same way.

use super::{TargetCheck, get, p99};
use crate::run_summary::PolicyResult;
use crate::runner::ScenarioResults;

/// Consistent hashing with bounded loads.
pub const HASH_BOUNDED: &str = "hash-bounded";
/// SGLang's cache-aware policy.
pub const CACHE_AWARE: &str = "cache-aware";
/// HAProxy `leastconn`: blind to where a key is warm.
pub const LEAST_REQUEST_ALL: &str = "least-request-all";

/// Hit-rate points `hash-bounded` must gain over `least-request-all` on
/// `cache-affinity`.
pub const LOCALITY_POINTS: f64 = 30.0;

fn hit_rate(p: &PolicyResult) -> Option<f64> {
    p.cache.as_ref().and_then(|c| c.hit_rate)
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// `hash-bounded`'s hit rate is at least [`LOCALITY_POINTS`] above
/// `least-request-all`'s on `cache-affinity`.
pub fn locality_target(r: &ScenarioResults) -> TargetCheck {
    let target = format!(
        "{} (sim): `{HASH_BOUNDED}` hit rate ≥ `{LEAST_REQUEST_ALL}`'s + {LOCALITY_POINTS:.0} points (the world has locality worth routing for)",
        r.scenario
    );
    hashing_against_leastconn(r, target, LOCALITY_POINTS)
}

/// `cache-aware`'s hit rate lies between the two baselines', or its p99
/// beats both.
pub fn cache_aware_target(r: &ScenarioResults) -> TargetCheck {
    let target = format!(
        "{} (sim): `{CACHE_AWARE}` hit rate between `{LEAST_REQUEST_ALL}`'s and `{HASH_BOUNDED}`'s, or its p99 below both",
        r.scenario
    );
    let (Some(c), Some(h), Some(l)) = (
        get(r, CACHE_AWARE),
        get(r, HASH_BOUNDED),
        get(r, LEAST_REQUEST_ALL),
    ) else {
        return TargetCheck::not_measured(target, "an arm did not run");
    };
    let (Some(hc), Some(hh), Some(hl)) = (hit_rate(c), hit_rate(h), hit_rate(l)) else {
        return TargetCheck::not_measured(target, "no hit rates");
    };
    let between = hc >= hh.min(hl) && hc <= hh.max(hl);
    let faster = p99(c) < p99(h).min(p99(l));
    TargetCheck {
        target,
        measured: format!(
            "hit rates `{CACHE_AWARE}` {}, `{LEAST_REQUEST_ALL}` {}, `{HASH_BOUNDED}` {}; p99 {:.2} / {:.2} / {:.2} ms",
            pct(hc),
            pct(hl),
            pct(hh),
            p99(c),
            p99(l),
            p99(h)
        ),
        met: between || faster,
    }
}

/// The oracle's p99 is below every other arm's.
pub fn oracle_beats_all_target(r: &ScenarioResults) -> TargetCheck {
    let target = format!(
        "{} (sim): `oracle` p99 below every other arm's (it knows every cache)",
        r.scenario
    );
    let Some(o) = get(r, "oracle") else {
        return TargetCheck::not_measured(target, "the oracle did not run");
    };
    let best_other = r
        .policies
        .iter()
        .filter(|p| p.status == "ok" && p.name != "oracle")
        .min_by(|a, b| p99(a).total_cmp(&p99(b)));
    let Some(b) = best_other else {
        return TargetCheck::not_measured(target, "no other arm ran");
    };
    TargetCheck {
        target,
        measured: format!(
            "`oracle` {:.2} ms, best other `{}` {:.2} ms",
            p99(o),
            b.name,
            p99(b)
        ),
        met: p99(o) < p99(b),
    }
}

/// Every cache target of the simulator scenarios with caches: the oracle
/// on each, the locality and `cache-aware` anchors on `cache-affinity`.
pub fn cache_targets(sims: &[&ScenarioResults]) -> Vec<TargetCheck> {
    let mut out = Vec::new();
    for r in sims.iter().filter(|r| has_caches(r)) {
        if r.scenario == "cache-affinity" {
            out.push(locality_target(r));
            out.push(cache_aware_target(r));
        }
        out.push(oracle_beats_all_target(r));
    }
    out
}

/// On the real-Redis `cache` testbed: `hash-bounded` hits more often than
/// `least-request-all`, by Redis's own counters.
pub fn testbed_cache_target(r: &ScenarioResults) -> TargetCheck {
    let target = format!(
        "testbed {}: `{HASH_BOUNDED}` hit rate (Redis `keyspace_hits`/`keyspace_misses`) above `{LEAST_REQUEST_ALL}`'s",
        r.scenario
    );
    hashing_against_leastconn(r, target, 0.0)
}

/// `hash-bounded`'s hit rate against `least-request-all`'s: met when the
/// gain is at least `points` (above 0 when `points` is 0).
fn hashing_against_leastconn(r: &ScenarioResults, target: String, points: f64) -> TargetCheck {
    let (Some(h), Some(l)) = (
        get(r, HASH_BOUNDED).and_then(hit_rate),
        get(r, LEAST_REQUEST_ALL).and_then(hit_rate),
    ) else {
        return TargetCheck::not_measured(target, "an arm or its hit rate is missing");
    };
    let gain = (h - l) * 100.0;
    TargetCheck {
        target,
        measured: format!(
            "`{HASH_BOUNDED}` {}, `{LEAST_REQUEST_ALL}` {}: {gain:+.1} points",
            pct(h),
            pct(l)
        ),
        met: if points > 0.0 {
            gain >= points
        } else {
            gain > 0.0
        },
    }
}

fn has_caches(r: &ScenarioResults) -> bool {
    r.policies.iter().any(|p| p.cache.is_some())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cache_summary::CacheSummary;

    /// An arm that ran with this p99 and hit rate.
    pub(crate) fn arm(name: &str, p99_ms: f64, hit: f64) -> PolicyResult {
        let mut p = PolicyResult::test_ran(name, p99_ms);
        p.cache = Some(CacheSummary {
            hit_rate: Some(hit),
            hit_rate_per_worker: vec![Some(hit)],
            origin_reads: 0,
            origin_bytes: 0,
            return_hit_rate_back_ms: None,
        });
        p
    }

    #[test]
    fn the_cache_anchors_judge_hit_rates_and_p99() {
        let r = crate::targets::tests::run(
            "cache-affinity",
            vec![
                arm(LEAST_REQUEST_ALL, 20.0, 0.55),
                arm(HASH_BOUNDED, 12.0, 0.90),
                arm(CACHE_AWARE, 15.0, 0.70),
                arm("oracle", 5.0, 0.95),
            ],
        );
        let t = cache_targets(&[&r]);
        assert_eq!(
            t.iter().map(|t| t.met).collect::<Vec<_>>(),
            [true, true, true]
        );
        assert!(t[0].measured.contains("+35.0 points"), "{}", t[0].measured);
        let short = crate::targets::tests::run(
            "cache-affinity",
            vec![
                arm(LEAST_REQUEST_ALL, 20.0, 0.70),
                arm(HASH_BOUNDED, 4.0, 0.90),
                arm(CACHE_AWARE, 25.0, 0.95),
                arm("oracle", 5.0, 0.95),
            ],
        );
        let t = cache_targets(&[&short]);
        assert_eq!(
            t.iter().map(|t| t.met).collect::<Vec<_>>(),
            [false, false, false]
        );
        let tb = crate::targets::tests::run(
            "cache",
            vec![
                arm(LEAST_REQUEST_ALL, 3.0, 0.5),
                arm(HASH_BOUNDED, 3.0, 0.8),
            ],
        );
        assert!(testbed_cache_target(&tb).met);
    }
}

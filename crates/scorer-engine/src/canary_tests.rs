use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::api::ScoreRequest;
use crate::config::Config;
use crate::stages::test_support::{engine, report};
use crate::{CanaryError, Engine, Feedback};
use scorer_core::scoring::RequestContext;

fn by_fraction(f: f64) -> CanaryRequest {
    CanaryRequest {
        fraction: Some(f),
        ..CanaryRequest::default()
    }
}

fn by_prefix(p: &str) -> CanaryRequest {
    CanaryRequest {
        key_prefix: Some(p.into()),
        reason: Some("retune the cpu threshold".into()),
        ..CanaryRequest::default()
    }
}

/// The engine's config with `scoring.cpu_high` moved (a threshold: no
/// weight step applies).
fn candidate(e: &Engine) -> Config {
    let mut c = (*e.config()).clone();
    c.scoring.cpu_high = 0.5;
    c
}

fn decide(e: &Engine, key: &str, n: u64) -> crate::api::ScoreResponse {
    let mut req = ScoreRequest::new(key, vec!["a".into(), "b".into()]);
    req.policy = Some("max".into());
    let mut rng = ChaCha8Rng::seed_from_u64(n);
    e.score(
        &req,
        &RequestContext::default(),
        1_000,
        format!("d{n}"),
        &mut rng,
    )
    .expect("scored")
}

fn two_workers() -> Engine {
    let e = engine();
    report(&e, "a", 0.6, 0, 1_000);
    report(&e, "b", 0.2, 0, 1_000);
    e
}

#[test]
fn the_fraction_split_is_sticky_per_key_and_near_its_fraction() {
    let split = CanarySplit::Fraction(0.05);
    let keys: Vec<String> = (0..20_000).map(|i| format!("user:{i}:cart")).collect();
    let share = keys.iter().filter(|k| split.takes(k)).count() as f64 / keys.len() as f64;
    assert!((0.045..=0.055).contains(&share), "share {share}");
    assert!(keys.iter().all(|k| split.takes(k) == split.takes(k)));
    // Salted: not the model A/B split's slice of the same keys.
    let ab = keys
        .iter()
        .filter(|k| split.takes(k) && scorer_model::ab::key_unit(k) < 0.05)
        .count();
    assert!(ab < 100, "{ab} keys in both slices");
}

#[test]
fn a_request_names_exactly_one_well_formed_split() {
    let bad = [
        CanaryRequest::default(),
        by_fraction(0.0),
        by_fraction(5e-324),
        by_fraction(1.0),
        by_fraction(f64::NAN),
        by_prefix(""),
        by_prefix("a\u{7}"),
        by_prefix(&"k".repeat(257)),
        CanaryRequest {
            fraction: Some(0.1),
            key_prefix: Some("user:".into()),
            reason: None,
        },
    ];
    for r in bad {
        assert!(CanarySplit::from_request(&r).is_err(), "{r:?}");
    }
    assert_eq!(
        CanarySplit::from_request(&by_prefix("user:7")),
        Ok(CanarySplit::KeyPrefix("user:7".into()))
    );
}

#[test]
fn quantiles_interpolate_in_their_bucket() {
    let h = HistogramSnapshot {
        sum: 0.0,
        count: 100,
        buckets: vec![(1.0, 50), (2.0, 40), (4.0, 9), (f64::INFINITY, 1)],
    };
    assert_eq!(histogram_quantile(0.5, &h), Some(1.0));
    assert_eq!(histogram_quantile(0.7, &h), Some(1.5));
    assert_eq!(histogram_quantile(0.99, &h), Some(4.0));
    assert_eq!(histogram_quantile(1.0, &h), Some(4.0));
    let empty = HistogramSnapshot {
        sum: 0.0,
        count: 0,
        buckets: vec![],
    };
    assert_eq!(histogram_quantile(0.5, &empty), None);
}

#[test]
fn the_candidate_scores_its_prefix_and_each_arm_counts_its_outcomes() {
    let e = two_workers();
    let stable_hash = e.config_hash();
    let st = e
        .start_canary(candidate(&e), &by_prefix("user:7"), "ops", false, 1_000)
        .expect("started");
    assert_eq!(st.changes.len(), 1);
    assert_eq!(st.changes[0].key, "scoring.cpu_high");
    assert_ne!(st.candidate_hash, st.stable_hash);
    let c = decide(&e, "user:7:cart", 1);
    assert_eq!(&*c.config_hash, st.candidate_hash);
    assert_eq!(c.config_arm, Some("canary"));
    let s = decide(&e, "user:8:cart", 2);
    assert_eq!(s.config_hash, stable_hash);
    assert_eq!(s.config_arm, Some("stable"));
    // Worker a (cpu 0.6) loses points above the candidate's 0.5 only.
    let a_score = |r: &crate::api::ScoreResponse| r.scores[0].rule_score;
    assert!(
        a_score(&c) < a_score(&s),
        "{} vs {}",
        a_score(&c),
        a_score(&s)
    );
    for (r, latency_ms, success) in [(&c, 8.0, false), (&s, 2.0, true)] {
        let f = Feedback {
            decision_id: r.decision_id.clone(),
            worker_id: r.pick.clone().expect("a pick"),
            latency_ms,
            success,
            cache_hit: None,
        };
        e.feedback(&f, 1_010).expect("accepted");
    }
    let st = e.canary().expect("running");
    let (stable, canary) = (&st.arms[0], &st.arms[1]);
    assert_eq!(
        (stable.decisions, stable.outcomes, stable.failures),
        (1, 1, 0)
    );
    assert_eq!(
        (canary.decisions, canary.outcomes, canary.failures),
        (1, 1, 1)
    );
    assert_eq!(canary.error_rate, Some(1.0));
    assert_eq!(stable.p50_ms, Some(1.75));
    let p99 = canary.p99_ms.expect("an outcome");
    assert!((p99 - 9.95).abs() < 1e-9, "{p99}");
    let ended = e.abort_canary().expect("aborted");
    assert_eq!(ended.arms[1].outcomes, 1);
    assert!(e.canary().is_none());
    assert_eq!(decide(&e, "user:7:cart", 3).config_hash, stable_hash);
    assert_eq!(decide(&e, "user:7:cart", 4).config_arm, None);
    assert!(matches!(e.abort_canary(), Err(CanaryError::NoCanary)));
}

#[test]
fn a_canary_is_refused_when_a_reload_would_be_or_it_has_nothing_to_try() {
    let e = two_workers();
    let same = (*e.config()).clone();
    let r = e.start_canary(same, &by_fraction(0.1), "ops", false, 0);
    assert!(matches!(r, Err(CanaryError::NoChange(_))), "{r:?}");
    let mut telemetry = candidate(&e);
    telemetry.telemetry.dead_after_ms += 1;
    let r = e.start_canary(telemetry, &by_fraction(0.1), "ops", false, 0);
    assert!(
        matches!(&r, Err(CanaryError::NotCanaryable(k)) if k == &["telemetry.dead_after_ms"]),
        "{r:?}"
    );
    let mut step = (*e.config()).clone();
    step.scoring.cpu_max_deduct *= 3.0;
    let r = e.start_canary(step.clone(), &by_fraction(0.1), "ops", false, 0);
    assert!(matches!(r, Err(CanaryError::Reload(_))), "{r:?}");
    let mut invalid = (*e.config()).clone();
    invalid.scoring.cpu_high = f64::NAN;
    let r = e.start_canary(invalid, &by_fraction(0.1), "ops", false, 0);
    assert!(matches!(r, Err(CanaryError::Reload(_))), "{r:?}");
    assert!(e.canary().is_none());
    // Forced past the weight step, as a reload may be; then a second one
    // waits for the first to end.
    e.start_canary(step, &by_fraction(0.1), "ops", true, 0)
        .expect("forced");
    let r = e.start_canary(candidate(&e), &by_fraction(0.1), "ops", false, 0);
    assert!(matches!(r, Err(CanaryError::Running(_))), "{r:?}");
}

#[test]
fn promoting_is_a_reload_of_the_candidate_which_ends_the_canary() {
    let e = two_workers();
    let st = e
        .start_canary(candidate(&e), &by_fraction(0.5), "ops", false, 0)
        .expect("started");
    let promoted = e.canary_candidate().expect("running");
    let report = e.reload_config(promoted, true).expect("applied");
    assert_eq!(report.new_hash, st.candidate_hash);
    assert_eq!(
        report.canary_ended.map(|c| c.candidate_hash),
        Some(st.candidate_hash.clone())
    );
    assert!(e.canary().is_none());
    assert_eq!(&*e.config_hash(), st.candidate_hash);
    // The rollback goes back to the stable config.
    let previous = e.previous_config().expect("kept");
    assert_eq!(previous.hash(), st.stable_hash);
}

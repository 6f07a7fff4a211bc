//! Unit tests of `compare.rs`.
use super::*;

#[test]
fn spearman_values() {
    assert_eq!(spearman(&[1.0, 2.0, 3.0], &[10.0, 20.0, 30.0]), Some(1.0));
    assert_eq!(spearman(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]), Some(-1.0));
    assert_eq!(spearman(&[1.0, 1.0], &[1.0, 2.0]), None);
    assert_eq!(ranks(&[5.0, 1.0, 5.0]), vec![2.5, 1.0, 2.5]);
}

#[test]
fn ips_snips_dr_and_ess() {
    let mut e = Estimator::default();
    // Matched, p 0.5 (w 2), latency 10, slow 0; q̂ 8 at both picks.
    e.add(true, 0.5, [10.0, 0.0], [8.0, 0.0], [8.0, 0.0], 20.0);
    // Matched, p 0.01 (w 100 -> 20), latency 100, slow 1.
    e.add(true, 0.01, [100.0, 1.0], [50.0, 1.0], [50.0, 1.0], 20.0);
    // Not matched: w 0; DR takes the direct method at the target's pick (30).
    e.add(false, 0.5, [5.0, 0.0], [30.0, 0.0], [5.0, 0.0], 20.0);
    let o = e.finish();
    assert_eq!((o.decisions, o.matches, o.clipped), (3, 2, 1));
    assert!((o.ips_latency_ms.unwrap() - (20.0 + 2000.0) / 3.0).abs() < 1e-9);
    assert!((o.snips_latency_ms.unwrap() - 2020.0 / 22.0).abs() < 1e-9);
    let dr = (8.0 + 2.0 * 2.0) + (50.0 + 20.0 * 50.0) + 30.0;
    assert!((o.dr_latency_ms.unwrap() - dr / 3.0).abs() < 1e-9);
    assert!((o.snips_slow.unwrap() - 20.0 / 22.0).abs() < 1e-12);
    assert!((o.ess - 22.0 * 22.0 / 404.0).abs() < 1e-12);
    assert!(o.weak, "an ESS of 1.2 is weak");
}

#[test]
fn no_usable_decision_is_no_estimate_not_zero() {
    let o = Estimator::default().finish();
    assert_eq!(
        (o.decisions, o.ips_latency_ms, o.snips_latency_ms, o.ess),
        (0, None, None, 0.0)
    );
    let json = serde_json::to_value(o).unwrap();
    assert!(json["ips_latency_ms"].is_null(), "{json}");
}

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::dataset::Decision;

/// `n` decisions of two eligible candidates with the same features (E =
/// 5 ms), so only the models' predictions tell them apart. The log picked
/// candidate `i % 2` with propensity 0.5; `latency(i, c)` is the outcome of
/// candidate `c` when picked in decision `i`.
fn two_candidates(n: usize, latency: impl Fn(usize, usize) -> f64) -> LogTable {
    let mut t = LogTable::default();
    let mut row = [0f32; FEATURE_COUNT];
    row[EXPECTED_LATENCY_FEATURE] = 5f32.ln();
    for i in 0..n {
        t.decisions.push(Decision {
            id: format!("d{i}"),
            ts_ms: i as i64,
            key_prefix: "user".to_string(),
            rows: 2 * i..2 * i + 2,
            all_features: true,
            arm: None,
            config_hash: "h".into(),
            model_version: None,
        });
        for c in 0..2 {
            let picked = c == i % 2;
            t.decision_of.push(i);
            t.eligible.push(true);
            t.rule_score.push(50.0);
            t.probability.push(Some(0.5));
            t.picked.push(picked);
            t.latency_ms.push(picked.then(|| latency(i, c)));
            t.success.push(picked.then_some(true));
            t.features.extend_from_slice(&row);
        }
    }
    t
}

/// Candidate 0 takes 2–2.8 ms, candidate 1 10–13 ms.
fn fast_and_slow(i: usize, c: usize) -> f64 {
    if c == 0 {
        2.0 + 0.2 * (i % 5) as f64
    } else {
        10.0 + 0.5 * (i % 7) as f64
    }
}

/// Per-row predictions `ln(latency / E)`: `first` for candidate 0 and its
/// negation for candidate 1. The model picks the candidate it predicts lower.
fn predictions(n: usize, first: f32) -> Vec<f32> {
    (0..2 * n)
        .map(|r| if r % 2 == 0 { first } else { -first })
        .collect()
}

fn compare(t: &LogTable, pa: &[f32], pb: &[f32], bootstrap: usize, seed: u64) -> CompareReport {
    let opts = CompareOptions {
        clip: DEFAULT_CLIP,
        bootstrap,
        seed,
    };
    compare_predictions(t, pa, pb, &TargetRule::default(), &Blend::default(), &opts)
}

#[test]
fn a_clearly_better_b_gets_an_interval_below_zero_and_the_lowers_verdict() {
    let n = 400;
    let t = two_candidates(n, fast_and_slow);
    // A picks the slow candidate 1, B the fast candidate 0.
    let r = compare(&t, &predictions(n, 0.5), &predictions(n, -0.5), 1_000, 42);
    let (a, b) = (&r.a.off_policy, &r.b.off_policy);
    assert_eq!(
        (a.matches, b.matches, a.weak, b.weak),
        (200, 200, false, false)
    );
    let mean = |c: usize| {
        let ys: Vec<f64> = (0..n)
            .filter(|i| i % 2 == c)
            .map(|i| fast_and_slow(i, c))
            .collect();
        ys.iter().sum::<f64>() / ys.len() as f64
    };
    assert!((a.snips_latency_ms.unwrap() - mean(1)).abs() < 1e-9);
    assert!((b.snips_latency_ms.unwrap() - mean(0)).abs() < 1e-9);
    let diff = r.dr_latency_diff_ms.unwrap();
    assert!((diff - (b.dr_latency_ms.unwrap() - a.dr_latency_ms.unwrap())).abs() < 1e-12);
    assert!(diff < -8.0, "B saves about 9 ms: {diff}");
    let ci = r.dr_latency_diff_ci_ms.unwrap();
    assert!(ci.high < 0.0 && ci.contains(diff), "{ci:?} around {diff}");
    let snips_ci = r.snips_latency_diff_ci_ms.unwrap();
    assert!(snips_ci.high < 0.0 && snips_ci.contains(r.snips_latency_diff_ms.unwrap()));
    for (op, lo, hi) in [(a, 10.0, 13.0), (b, 2.0, 2.8)] {
        let s = op.snips_latency_ci_ms.unwrap();
        assert!(s.contains(op.snips_latency_ms.unwrap()), "{s:?}");
        assert!(
            lo < s.low && s.high < hi,
            "within the outcomes' range: {s:?}"
        );
        assert!(
            op.dr_latency_ci_ms
                .unwrap()
                .contains(op.dr_latency_ms.unwrap())
        );
    }
    assert_eq!(r.verdict.outcome, VerdictOutcome::BLowers);
    assert!(!r.verdict.weak);
    let want = format!(
        "B lowers DR mean latency by {:.3} ms (95% CI {:.3} to {:.3} ms)",
        -diff, -ci.high, -ci.low
    );
    assert_eq!(r.verdict.text, want);
    let table = r.table();
    assert!(table.contains(&format!("verdict: {want}\n")), "{table}");
    assert!(
        table.contains(
            "95% CI, ms (bootstrap: 1000 resamples of the 400 usable decisions, seed 42)"
        ),
        "{table}"
    );
    // Swapped, B is the slow one.
    let r = compare(&t, &predictions(n, -0.5), &predictions(n, 0.5), 1_000, 42);
    assert_eq!(
        r.verdict.outcome,
        VerdictOutcome::BRaises,
        "{}",
        r.verdict.text
    );
    assert!(r.dr_latency_diff_ci_ms.unwrap().low > 0.0);
}

#[test]
fn identical_models_have_no_detectable_difference() {
    let n = 400;
    let t = two_candidates(n, fast_and_slow);
    let p = predictions(n, 0.5);
    let r = compare(&t, &p, &p, 1_000, 42);
    let ci = r.dr_latency_diff_ci_ms.unwrap();
    assert_eq!(
        (r.dr_latency_diff_ms, ci),
        (
            Some(0.0),
            Interval {
                low: 0.0,
                high: 0.0
            }
        )
    );
    assert_eq!(r.verdict.outcome, VerdictOutcome::NoDetectableDifference);
    assert_eq!(
        r.verdict.text,
        "no detectable difference at 95% (DR B - A: 0.000 ms, 95% CI 0.000 to 0.000 ms)"
    );
    // Each model's own interval has width: only the paired difference is 0.
    let own = r.a.off_policy.dr_latency_ci_ms.unwrap();
    assert!(own.high - own.low > 0.1, "{own:?}");
}

#[test]
fn different_picks_among_alike_candidates_have_no_detectable_difference() {
    let n = 2_000;
    // Both candidates' latencies come from the same distribution.
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let ys: Vec<f64> = (0..n).map(|_| rng.random_range(1.0..9.0)).collect();
    let t = two_candidates(n, |i, _| ys[i]);
    let r = compare(&t, &predictions(n, 0.5), &predictions(n, -0.5), 1_000, 42);
    let (diff, ci) = (
        r.dr_latency_diff_ms.unwrap(),
        r.dr_latency_diff_ci_ms.unwrap(),
    );
    assert!(
        diff != 0.0 && ci.contains(0.0) && ci.contains(diff),
        "{diff} {ci:?}"
    );
    assert!(ci.high - ci.low < 1.0, "{ci:?}");
    assert_eq!(r.verdict.outcome, VerdictOutcome::NoDetectableDifference);
    assert!(
        r.verdict
            .text
            .starts_with("no detectable difference at 95% (DR B - A: ")
    );
}

#[test]
fn intervals_are_a_function_of_the_seed() {
    let n = 400;
    let t = two_candidates(n, fast_and_slow);
    let (pa, pb) = (predictions(n, 0.5), predictions(n, -0.5));
    let first = compare(&t, &pa, &pb, 200, 7);
    let again = compare(&t, &pa, &pb, 200, 7);
    assert_eq!(first, again);
    assert_eq!(first.bootstrap_seed, 7);
    let other = compare(&t, &pa, &pb, 200, 8);
    assert_ne!(first.dr_latency_diff_ci_ms, other.dr_latency_diff_ci_ms);
    assert_eq!(
        first.dr_latency_diff_ms, other.dr_latency_diff_ms,
        "the estimate itself is not resampled"
    );
}

#[test]
fn bootstrap_zero_omits_the_intervals() {
    let n = 400;
    let t = two_candidates(n, fast_and_slow);
    let r = compare(&t, &predictions(n, 0.5), &predictions(n, -0.5), 0, 42);
    for op in [&r.a.off_policy, &r.b.off_policy] {
        assert_eq!((op.snips_latency_ci_ms, op.dr_latency_ci_ms), (None, None));
    }
    assert_eq!(
        (r.snips_latency_diff_ci_ms, r.dr_latency_diff_ci_ms),
        (None, None)
    );
    assert!(r.dr_latency_diff_ms.unwrap() < -8.0, "the estimates stay");
    assert_eq!(r.verdict.outcome, VerdictOutcome::Undetermined);
    assert!(
        r.verdict.text.contains("--bootstrap 0"),
        "{}",
        r.verdict.text
    );
    let table = r.table();
    assert!(!table.contains("95% CI"), "{table}");
    let json = serde_json::to_value(&r).unwrap();
    assert!(
        json["dr_latency_diff_ci_ms"].is_null()
            && json["a"]["off_policy"]["dr_latency_ci_ms"].is_null()
    );
    assert_eq!(json["verdict"]["outcome"], "undetermined");
}

#[test]
fn a_weak_side_is_named_in_the_verdict() {
    let n = 40;
    let t = two_candidates(n, fast_and_slow);
    let r = compare(&t, &predictions(n, 0.5), &predictions(n, -0.5), 1_000, 42);
    assert!(r.a.off_policy.weak && r.b.off_policy.weak);
    assert_eq!(r.a.off_policy.ess, 20.0);
    assert!(r.verdict.weak);
    assert_eq!(
        r.verdict.outcome,
        VerdictOutcome::BLowers,
        "{}",
        r.verdict.text
    );
    assert!(
        r.verdict.text.ends_with(
            "; weak: A's (ESS 20.0) and B's (ESS 20.0) estimates rest on few agreeing outcomes"
        ),
        "{}",
        r.verdict.text
    );
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["verdict"]["weak"], true);
    assert_eq!(json["verdict"]["outcome"], "b_lowers");
}

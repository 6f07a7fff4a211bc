//! Behavioural tests for every policy. All randomness is seeded ChaCha8.

use std::collections::HashMap;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::selection::{
    Candidate, ConsistentHash, MaxScore, MinShareFloor, Policy, PolicyKind, PowerOfTwoChoices,
    Selection, SelectionError, Selector, SelectorConfig, Softmax,
};

fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

fn cand(id: &str, score: f64) -> Candidate<'_> {
    Candidate::new(id, score)
}

fn pick(
    sel: &Selector,
    kind: PolicyKind,
    cs: &[Candidate<'_>],
    key: &str,
    t: Option<f64>,
    r: &mut ChaCha8Rng,
) -> Selection {
    match sel.select(kind, cs, key, t, r) {
        Ok(Some(s)) => s,
        other => panic!("{kind}: unexpected {other:?}"),
    }
}

fn assert_valid(s: &Selection, n: usize) {
    assert_eq!(s.probabilities.len(), n);
    assert!(s.pick < n);
    let mut sum = 0.0;
    for &p in &s.probabilities {
        assert!(p.is_finite() && (0.0..=1.0).contains(&p), "bad p {p}");
        sum += p;
    }
    assert!((sum - 1.0).abs() <= 1e-9, "sum {sum}");
    assert!(
        s.probabilities[s.pick] > 0.0,
        "picked a zero-propensity candidate"
    );
}

fn assert_close(a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= tol, "{a:?} vs {b:?}");
    }
}

fn chi_square(counts: &[u64], expected: f64) -> f64 {
    counts
        .iter()
        .map(|&c| (c as f64 - expected).powi(2) / expected)
        .sum()
}

fn ten_workers() -> Vec<String> {
    (0..10).map(|i| format!("worker-{i}")).collect()
}

const STOCHASTIC_AND_DETERMINISTIC: [PolicyKind; 6] = [
    PolicyKind::Max,
    PolicyKind::Softmax,
    PolicyKind::P2c,
    PolicyKind::Swrr,
    PolicyKind::Hash,
    PolicyKind::Prequal,
];

// ---------------------------------------------------------------- max

#[test]
fn max_identical_workers_split_evenly_and_independent_of_order() {
    let ids = ["w0", "w1", "w2", "w3"];
    let forward: Vec<_> = ids.iter().map(|id| cand(id, 70.0)).collect();
    let mut reversed = forward.clone();
    reversed.reverse();
    let sel = Selector::default();
    for (order, cs) in [("forward", &forward), ("reversed", &reversed)] {
        let mut r = rng(7);
        let mut counts: HashMap<&str, u64> = HashMap::new();
        for _ in 0..400 {
            let s = pick(&sel, PolicyKind::Max, cs, "", None, &mut r);
            assert_close(&s.probabilities, &[0.25; 4], 1e-12);
            *counts.entry(cs[s.pick].worker_id).or_default() += 1;
        }
        let per_worker: Vec<u64> = ids.iter().map(|id| counts[id]).collect();
        let stat = chi_square(&per_worker, 100.0);
        assert!(stat < 11.34, "{order}: chi2 {stat} counts {per_worker:?}");
    }
}

#[test]
fn max_picks_unique_best_with_probability_one() {
    let cs = [cand("a", 10.0), cand("b", 99.0), cand("c", 98.9)];
    let s = pick(
        &Selector::default(),
        PolicyKind::Max,
        &cs,
        "",
        None,
        &mut rng(1),
    );
    assert_eq!(s.pick, 1);
    assert_eq!(s.probabilities, vec![0.0, 1.0, 0.0]);
}

#[test]
fn max_ties_share_probability_and_ignore_weight() {
    let mut cs = [cand("a", 50.0), cand("b", 80.0), cand("c", 80.0)];
    cs[1].weight = 100.0;
    let s = pick(
        &Selector::default(),
        PolicyKind::Max,
        &cs,
        "",
        None,
        &mut rng(2),
    );
    assert_eq!(s.probabilities, vec![0.0, 0.5, 0.5]);
}

// ---------------------------------------------------------------- softmax

#[test]
fn softmax_zero_and_tiny_temperature_behave_like_max() {
    let cs = [
        cand("a", 90.0),
        cand("b", 100.0),
        cand("c", 100.0),
        cand("d", 0.0),
    ];
    let sel = Selector::default();
    for t in [0.0, 1e-12, 9e-7] {
        let mut r1 = rng(3);
        let mut r2 = rng(3);
        for _ in 0..50 {
            let s = pick(&sel, PolicyKind::Softmax, &cs, "", Some(t), &mut r1);
            let m = pick(&sel, PolicyKind::Max, &cs, "", None, &mut r2);
            assert_eq!(s, m, "T = {t}");
            assert_eq!(s.probabilities, vec![0.0, 0.5, 0.5, 0.0]);
        }
    }
}

#[test]
fn softmax_temperature_0_01_strongly_prefers_best_but_keeps_others_positive() {
    let cs = [cand("a", 100.0), cand("b", 90.0), cand("c", 50.0)];
    let p = Softmax::new(0.01)
        .and_then(|s| s.probabilities(&cs))
        .unwrap();
    // s = [1, 0.8, 0]; logits 0, -20, -100.
    let z = 1.0 + (-20.0f64).exp() + (-100.0f64).exp();
    assert_close(
        &p,
        &[1.0 / z, (-20.0f64).exp() / z, (-100.0f64).exp() / z],
        1e-15,
    );
    assert!(p[1] > 0.0 && p[2] > 0.0);
    assert!(p[0] > 0.999_999);
}

#[test]
fn softmax_temperature_1_matches_closed_form() {
    let cs = [cand("a", 100.0), cand("b", 90.0), cand("c", 50.0)];
    let sel = Selector::default();
    let s = pick(&sel, PolicyKind::Softmax, &cs, "", Some(1.0), &mut rng(4));
    let raw = [1.0, (-0.2f64).exp(), (-1.0f64).exp()];
    let z: f64 = raw.iter().sum();
    let expected: Vec<f64> = raw.iter().map(|x| x / z).collect();
    assert_close(&s.probabilities, &expected, 1e-12);
    assert_valid(&s, 3);
}

#[test]
fn softmax_huge_temperature_is_weighted_uniform() {
    let mut cs = [
        cand("a", 100.0),
        cand("b", 0.0),
        cand("c", 37.0),
        cand("d", 12.0),
    ];
    let sel = Selector::default();
    let s = pick(&sel, PolicyKind::Softmax, &cs, "", Some(1e308), &mut rng(5));
    assert_close(&s.probabilities, &[0.25; 4], 1e-12);
    cs[1].weight = 3.0;
    let s = pick(&sel, PolicyKind::Softmax, &cs, "", Some(1e308), &mut rng(5));
    assert_close(
        &s.probabilities,
        &[1.0 / 6.0, 0.5, 1.0 / 6.0, 1.0 / 6.0],
        1e-12,
    );
}

#[test]
fn softmax_invalid_temperature_is_rejected() {
    let cs = [cand("a", 1.0), cand("b", 2.0)];
    let sel = Selector::default();
    for t in [-1.0, -1e-300, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        match sel.select(PolicyKind::Softmax, &cs, "", Some(t), &mut rng(6)) {
            Err(SelectionError::InvalidTemperature(_)) => {}
            other => panic!("T = {t}: {other:?}"),
        }
    }
    // Other policies ignore the temperature.
    assert!(
        sel.select(PolicyKind::Max, &cs, "", Some(f64::NAN), &mut rng(6))
            .is_ok()
    );
}

#[test]
fn softmax_uses_default_temperature_when_none_and_equal_scores_are_weighted() {
    let cs = [cand("a", 100.0), cand("b", 90.0)];
    let sel = Selector::default();
    let a = pick(&sel, PolicyKind::Softmax, &cs, "", None, &mut rng(8));
    let b = pick(&sel, PolicyKind::Softmax, &cs, "", Some(0.1), &mut rng(8));
    assert_eq!(a, b);
    let z = 1.0 + (-10.0f64).exp();
    assert_close(&a.probabilities, &[1.0 / z, (-10.0f64).exp() / z], 1e-15);

    let mut eq = [cand("a", 40.0), cand("b", 40.0)];
    eq[1].weight = 3.0;
    let s = pick(&sel, PolicyKind::Softmax, &eq, "", Some(0.5), &mut rng(8));
    assert_close(&s.probabilities, &[0.25, 0.75], 1e-12);
}

#[test]
fn softmax_sampling_matches_reported_probabilities() {
    let cs = [cand("a", 100.0), cand("b", 80.0), cand("c", 60.0)];
    let sel = Selector::default();
    let mut r = rng(9);
    let mut counts = [0u64; 3];
    let trials = 100_000;
    let mut probs = Vec::new();
    for _ in 0..trials {
        let s = pick(&sel, PolicyKind::Softmax, &cs, "", Some(0.5), &mut r);
        counts[s.pick] += 1;
        probs = s.probabilities;
    }
    let freq: Vec<f64> = counts.iter().map(|&c| c as f64 / trials as f64).collect();
    assert_close(&freq, &probs, 0.01);
}

// ---------------------------------------------------------------- p2c

fn p2c_monte_carlo(cs: &[Candidate<'_>], seed: u64, trials: u64) -> (Vec<f64>, Vec<f64>) {
    let sel = Selector::default();
    let mut r = rng(seed);
    let mut counts = vec![0u64; cs.len()];
    let mut exact = Vec::new();
    for _ in 0..trials {
        let s = pick(&sel, PolicyKind::P2c, cs, "", None, &mut r);
        counts[s.pick] += 1;
        exact = s.probabilities;
    }
    let freq = counts.iter().map(|&c| c as f64 / trials as f64).collect();
    (freq, exact)
}

#[test]
fn p2c_monte_carlo_matches_exact_probabilities() {
    let mut cs = vec![
        cand("a", 90.0),
        cand("b", 90.0),
        cand("c", 90.0),
        cand("d", 70.0),
        cand("e", 70.0),
        cand("f", 10.0),
        cand("g", 100.0),
    ];
    cs[2].in_flight = 2.0; // c loses ties to a and b
    cs[4].in_flight = 0.5;
    let (freq, exact) = p2c_monte_carlo(&cs, 10, 200_000);
    assert_close(&freq, &exact, 0.01);
    let sum: f64 = exact.iter().sum();
    assert!((sum - 1.0).abs() < 1e-12);
    // Spot-check the formula: n = 7, n(n-1) = 42.
    // g: 6 worse -> 12/42. a, b: 4 worse + 1 tie -> 9/42. c: 3 worse -> 6/42.
    // d: 1 worse (f) + e is worse (more in flight) -> 2 worse -> 4/42. e: 1 worse -> 2/42. f: 0.
    assert_close(
        &exact,
        &[9.0, 9.0, 6.0, 4.0, 2.0, 0.0, 12.0].map(|x| x / 42.0),
        1e-12,
    );
}

#[test]
fn p2c_identical_candidates_are_uniform_and_single_candidate_is_certain() {
    let cs: Vec<_> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|id| cand(id, 5.0))
        .collect();
    let (freq, exact) = p2c_monte_carlo(&cs, 11, 200_000);
    assert_close(&exact, &[0.2; 5], 1e-12);
    assert_close(&freq, &exact, 0.01);

    let one = [cand("solo", 3.0)];
    let s = pick(
        &Selector::default(),
        PolicyKind::P2c,
        &one,
        "",
        None,
        &mut rng(1),
    );
    assert_eq!((s.pick, s.probabilities), (0, vec![1.0]));
}

#[test]
fn p2c_probabilities_are_order_independent() {
    let mut r = rng(12);
    let cs: Vec<Candidate<'_>> = (0..50)
        .map(|_| Candidate {
            worker_id: "x",
            score: f64::from(r.random_range(0..5u8)) * 10.0,
            weight: 1.0,
            in_flight: f64::from(r.random_range(0..3u8)),
            ..Candidate::new("x", 0.0)
        })
        .collect();
    let p = PowerOfTwoChoices.probabilities(&cs).unwrap();
    let mut idx: Vec<usize> = (0..cs.len()).collect();
    idx.shuffle(&mut r);
    let shuffled: Vec<_> = idx.iter().map(|&i| cs[i]).collect();
    let q = PowerOfTwoChoices.probabilities(&shuffled).unwrap();
    for (k, &i) in idx.iter().enumerate() {
        assert!((q[k] - p[i]).abs() < 1e-15);
    }
}

#[path = "contract_tests.rs"]
mod contract;
#[path = "stateful_tests.rs"]
mod stateful;

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

// ---------------------------------------------------------------- swrr

#[test]
fn swrr_three_to_one_within_one_percent_over_a_million_picks() {
    let sel = Selector::default();
    let mut cs = [cand("heavy", 100.0), cand("light", 100.0)];
    cs[0].weight = 3.0;
    let mut r = rng(13);
    let mut counts = [0u64; 2];
    for _ in 0..1_000_000 {
        let s = pick(&sel, PolicyKind::Swrr, &cs, "", None, &mut r);
        counts[s.pick] += 1;
        assert_eq!(s.probabilities[s.pick], 1.0);
    }
    let ratio = counts[0] as f64 / counts[1] as f64;
    assert!((ratio - 3.0).abs() / 3.0 < 0.01, "ratio {ratio} {counts:?}");
}

#[test]
fn swrr_score_times_weight_three_to_one() {
    // 75 × 1 vs 25 × 1: the effective weight is score × weight.
    let sel = Selector::default();
    let cs = [cand("a", 75.0), cand("b", 25.0)];
    let mut r = rng(0);
    let seq: Vec<usize> = (0..8)
        .map(|_| pick(&sel, PolicyKind::Swrr, &cs, "", None, &mut r).pick)
        .collect();
    assert_eq!(seq.iter().filter(|&&p| p == 0).count(), 6);
}

#[test]
fn swrr_equal_weights_rotate_exactly() {
    let sel = Selector::default();
    let cs = [cand("a", 50.0), cand("b", 50.0), cand("c", 50.0)];
    let mut r = rng(0);
    let seq: String = (0..9)
        .map(|_| cs[pick(&sel, PolicyKind::Swrr, &cs, "", None, &mut r).pick].worker_id)
        .collect();
    assert_eq!(seq, "abcabcabc");
}

#[test]
fn swrr_matches_nginx_smooth_sequence() {
    // nginx's documented example: weights 5, 1, 1 -> a a b a c a a.
    let sel = Selector::default();
    let mut cs = [cand("a", 100.0), cand("b", 100.0), cand("c", 100.0)];
    cs[0].weight = 5.0;
    let mut r = rng(0);
    let seq: String = (0..14)
        .map(|_| cs[pick(&sel, PolicyKind::Swrr, &cs, "", None, &mut r).pick].worker_id)
        .collect();
    assert_eq!(seq, "aabacaaaabacaa");
}

#[test]
fn swrr_all_zero_weights_fall_back_to_round_robin() {
    let sel = Selector::default();
    let cs = [cand("x", 0.0), cand("y", 0.0), cand("z", 0.0)];
    let mut r = rng(0);
    let seq: String = (0..6)
        .map(|_| cs[pick(&sel, PolicyKind::Swrr, &cs, "", None, &mut r).pick].worker_id)
        .collect();
    assert_eq!(seq, "xyzxyz");
}

#[test]
fn swrr_is_order_independent_and_keeps_state_for_absent_workers() {
    let sel = Selector::default();
    let mut r = rng(0);
    let abc = [cand("a", 50.0), cand("b", 50.0), cand("c", 50.0)];
    let cba = [cand("c", 50.0), cand("b", 50.0), cand("a", 50.0)];
    // a picked (a = -2, b = 1, c = 1).
    assert_eq!(
        abc[pick(&sel, PolicyKind::Swrr, &abc, "", None, &mut r).pick].worker_id,
        "a"
    );
    // Only b and c present: b (tie broken by id, not order), a untouched.
    let cb = [cand("c", 50.0), cand("b", 50.0)];
    assert_eq!(
        cb[pick(&sel, PolicyKind::Swrr, &cb, "", None, &mut r).pick].worker_id,
        "b"
    );
    // a = -2, b = 2 - 2 = 0, c = 2 -> c next, in any order.
    assert_eq!(
        cba[pick(&sel, PolicyKind::Swrr, &cba, "", None, &mut r).pick].worker_id,
        "c"
    );
    assert_eq!(sel.swrr().tracked_workers(), 3);
}

#[test]
fn swrr_state_map_is_bounded() {
    let sel = Selector::default();
    let mut r = rng(0);
    let ids: Vec<String> = (0..6000).map(|i| format!("w{i}")).collect();
    for id in &ids {
        let cs = [cand(id, 50.0), cand("stable", 50.0)];
        pick(&sel, PolicyKind::Swrr, &cs, "", None, &mut r);
    }
    let tracked = sel.swrr().tracked_workers();
    // Sweeps run every 1024 calls with a 4096-call TTL.
    assert!(tracked <= 4096 + 1024 + 1, "{tracked}");
    assert!(tracked >= 4096, "{tracked}");
}

// ---------------------------------------------------------------- hash

fn ten_workers() -> Vec<String> {
    (0..10).map(|i| format!("worker-{i}")).collect()
}

#[test]
fn hash_same_key_same_worker_across_calls_and_candidate_orders() {
    let ids = ten_workers();
    let cs: Vec<_> = ids.iter().map(|id| cand(id, 50.0)).collect();
    let sel = Selector::default();
    let mut r = rng(14);
    for k in 0..500 {
        let key = format!("user-{k}");
        let first = cs[pick(&sel, PolicyKind::Hash, &cs, &key, None, &mut r).pick].worker_id;
        for _ in 0..3 {
            let mut shuffled = cs.clone();
            shuffled.shuffle(&mut r);
            let s = pick(&sel, PolicyKind::Hash, &shuffled, &key, None, &mut r);
            assert_eq!(shuffled[s.pick].worker_id, first);
            assert_eq!(s.probabilities.iter().sum::<f64>(), 1.0);
        }
    }
    // A fresh selector (new cache) agrees: the mapping is stable.
    let fresh = Selector::default();
    let s = pick(&fresh, PolicyKind::Hash, &cs, "user-0", None, &mut r);
    let again = pick(&sel, PolicyKind::Hash, &cs, "user-0", None, &mut r);
    assert_eq!(s.pick, again.pick);
}

#[test]
fn hash_removing_one_of_ten_moves_only_its_keys_about_one_tenth() {
    let ids = ten_workers();
    let all: Vec<_> = ids.iter().map(|id| cand(id, 50.0)).collect();
    let removed = "worker-3";
    let fewer: Vec<_> = all
        .iter()
        .copied()
        .filter(|c| c.worker_id != removed)
        .collect();
    let sel = Selector::default();
    let mut r = rng(15);
    let mut moved = 0;
    for k in 0..10_000 {
        let key = format!("key-{k}");
        let before = all[pick(&sel, PolicyKind::Hash, &all, &key, None, &mut r).pick].worker_id;
        let after = fewer[pick(&sel, PolicyKind::Hash, &fewer, &key, None, &mut r).pick].worker_id;
        if before != after {
            assert_eq!(before, removed, "key {key} moved from a surviving worker");
            moved += 1;
        } else {
            assert_ne!(before, removed);
        }
    }
    let frac = f64::from(moved) / 10_000.0;
    assert!((0.05..=0.15).contains(&frac), "moved {frac}");
    // Two id sets -> exactly two ring builds despite 20k lookups.
    assert_eq!(sel.hash().ring_builds(), 2);
}

#[test]
fn hash_bounded_load_diverts_keys_from_overloaded_worker() {
    let ids = ten_workers();
    let idle: Vec<_> = ids.iter().map(|id| cand(id, 50.0)).collect();
    let mut hot = idle.clone();
    hot[0].in_flight = 100.0; // cap = ceil(1.25 × 101 / 10) = 13 < 101
    let sel = Selector::default();
    let mut r = rng(16);
    let (mut on_hot_before, mut diverted) = (0, 0);
    for k in 0..2000 {
        let key = format!("k{k}");
        let a = pick(&sel, PolicyKind::Hash, &idle, &key, None, &mut r).pick;
        let b = pick(&sel, PolicyKind::Hash, &hot, &key, None, &mut r).pick;
        assert_ne!(b, 0, "overloaded worker still receives key {key}");
        if a == 0 {
            on_hot_before += 1;
            diverted += 1;
        } else {
            assert_eq!(a, b, "unaffected key {key} moved");
        }
    }
    assert!(on_hot_before > 100 && diverted == on_hot_before);
    // Evenly spread load: cap = ceil(1.25 × 51 / 10) = 7 >= 5 + 1, nobody is skipped.
    let mut all_busy = idle.clone();
    all_busy.iter_mut().for_each(|c| c.in_flight = 5.0);
    for k in 0..200 {
        let key = format!("k{k}");
        let a = pick(&sel, PolicyKind::Hash, &idle, &key, None, &mut r).pick;
        let b = pick(&sel, PolicyKind::Hash, &all_busy, &key, None, &mut r).pick;
        assert_eq!(a, b, "uniform load must not move keys");
    }
}

#[test]
fn hash_all_skipped_takes_first_and_duplicates_are_rejected() {
    let sel = Selector::new(SelectorConfig {
        hash_load_factor: 1.0,
        ..SelectorConfig::default()
    })
    .unwrap();
    let c = [cand("only", 1.0)];
    let s = pick(&sel, PolicyKind::Hash, &c, "k", None, &mut rng(0));
    assert_eq!(s.pick, 0);

    let dup = [cand("a", 1.0), cand("b", 1.0), cand("a", 2.0)];
    assert_eq!(
        sel.select(PolicyKind::Hash, &dup, "k", None, &mut rng(0)),
        Err(SelectionError::DuplicateWorker("a".into()))
    );
}

#[test]
fn hash_ring_cache_is_bounded() {
    let h = ConsistentHash::new(8, 1.25).unwrap();
    let mut r = rng(17);
    let ids: Vec<String> = (0..100).map(|i| format!("n{i}")).collect();
    for i in 0..99 {
        let cs = [cand(&ids[i], 1.0), cand(&ids[i + 1], 1.0)];
        h.select(&cs, "key", &mut r).unwrap();
    }
    assert_eq!(h.ring_builds(), 99);
    assert!(h.cached_rings() <= crate::selection::HASH_MAX_CACHED_RINGS);
}

// ---------------------------------------------------------------- floor

#[test]
fn min_share_floor_lifts_low_candidates_and_remains_true_propensity() {
    let sel = Selector::new(SelectorConfig {
        min_share: 0.05,
        ..SelectorConfig::default()
    })
    .unwrap();
    let cs = [
        cand("best", 100.0),
        cand("b", 10.0),
        cand("c", 0.0),
        cand("d", 5.0),
    ];
    let mut r = rng(18);
    let trials = 100_000;
    let mut counts = [0u64; 4];
    let mut probs = Vec::new();
    for _ in 0..trials {
        let s = pick(&sel, PolicyKind::Max, &cs, "", None, &mut r);
        counts[s.pick] += 1;
        probs = s.probabilities;
    }
    assert_close(&probs, &[0.85, 0.05, 0.05, 0.05], 1e-12);
    let freq: Vec<f64> = counts.iter().map(|&c| c as f64 / trials as f64).collect();
    assert_close(&freq, &probs, 0.01);

    // Deterministic policies are not floored.
    let s = pick(&sel, PolicyKind::Swrr, &cs, "", None, &mut r);
    assert_eq!(s.probabilities.iter().filter(|&&p| p == 0.0).count(), 3);
}

#[test]
fn min_share_above_one_over_n_is_clamped_to_uniform() {
    let floor = MinShareFloor::new(MaxScore, 0.9).unwrap();
    let cs = [cand("a", 100.0), cand("b", 0.0)];
    let s = floor.select(&cs, "", &mut rng(19)).unwrap();
    assert_close(&s.probabilities, &[0.5, 0.5], 1e-12);
    assert!(MinShareFloor::new(MaxScore, f64::NAN).is_err());
    assert!(MinShareFloor::new(MaxScore, -0.1).is_err());
}

// ---------------------------------------------------------------- cross-cutting

#[test]
fn same_seed_gives_same_pick_sequence_for_every_policy() {
    let ids: Vec<String> = (0..12).map(|i| format!("w{i}")).collect();
    let mut setup = rng(20);
    let cs: Vec<Candidate<'_>> = ids
        .iter()
        .map(|id| Candidate {
            worker_id: id,
            score: f64::from(setup.random_range(0..4u8)) * 25.0,
            weight: setup.random_range(0.5..2.0),
            in_flight: f64::from(setup.random_range(0..3u8)),
            outstanding: setup.random_range(0..3u32),
            expected_latency_ms: Some(f64::from(setup.random_range(1..4u8))),
        })
        .collect();
    let config = SelectorConfig {
        min_share: 0.01,
        ..SelectorConfig::default()
    };
    for kind in STOCHASTIC_AND_DETERMINISTIC {
        let (s1, s2) = (
            Selector::new(config).unwrap(),
            Selector::new(config).unwrap(),
        );
        let (mut r1, mut r2) = (rng(21), rng(21));
        let a: Vec<Selection> = (0..300)
            .map(|k| pick(&s1, kind, &cs, &format!("k{k}"), Some(0.3), &mut r1))
            .collect();
        let b: Vec<Selection> = (0..300)
            .map(|k| pick(&s2, kind, &cs, &format!("k{k}"), Some(0.3), &mut r2))
            .collect();
        assert_eq!(a, b, "{kind}");
        if kind.is_stochastic() {
            let distinct: std::collections::HashSet<usize> = a.iter().map(|s| s.pick).collect();
            assert!(distinct.len() > 1, "{kind} never varied");
        }
    }
}

#[test]
fn nan_or_infinite_or_out_of_range_score_is_an_error() {
    let sel = Selector::default();
    for bad in [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.5,
        100.000_001,
    ] {
        let cs = [cand("a", 50.0), cand("b", bad)];
        for kind in PolicyKind::ALL {
            match sel.select(kind, &cs, "k", None, &mut rng(0)) {
                Err(SelectionError::InvalidScore { index: 1, .. }) => {}
                other => panic!("{kind} score {bad}: {other:?}"),
            }
        }
    }
}

#[test]
fn invalid_weight_or_in_flight_is_an_error() {
    let sel = Selector::default();
    for bad in [f64::NAN, f64::INFINITY, 0.0, -1.0] {
        let mut cs = [cand("a", 50.0)];
        cs[0].weight = bad;
        for kind in PolicyKind::ALL {
            assert!(matches!(
                sel.select(kind, &cs, "", None, &mut rng(0)),
                Err(SelectionError::InvalidWeight { index: 0, .. })
            ));
        }
    }
    for bad in [f64::NAN, f64::INFINITY, -0.1] {
        let mut cs = [cand("a", 50.0)];
        cs[0].in_flight = bad;
        for kind in PolicyKind::ALL {
            assert!(matches!(
                sel.select(kind, &cs, "", None, &mut rng(0)),
                Err(SelectionError::InvalidInFlight { index: 0, .. })
            ));
        }
    }
}

#[test]
fn empty_candidate_list_is_an_error() {
    let sel = Selector::default();
    for kind in PolicyKind::ALL {
        assert_eq!(
            sel.select(kind, &[], "k", None, &mut rng(0)),
            Err(SelectionError::Empty),
            "{kind}"
        );
    }
}

#[test]
fn none_policy_returns_none() {
    let cs = [cand("a", 1.0)];
    let r = Selector::default().select(PolicyKind::None, &cs, "", None, &mut rng(0));
    assert_eq!(r, Ok(None));
}

#[test]
fn probabilities_sum_to_one_for_random_inputs_of_size_1_to_1024() {
    let ids: Vec<String> = (0..1024).map(|i| format!("worker-{i:04}")).collect();
    let sel = Selector::default();
    let floored = Selector::new(SelectorConfig {
        min_share: 0.002,
        ..SelectorConfig::default()
    })
    .unwrap();
    for seed in 0..48u64 {
        let mut r = rng(1000 + seed);
        let n = match seed {
            0 => 1,
            1 => 2,
            2 => 1024,
            _ => r.random_range(1..=1024),
        };
        // Mix of coarse (tie-heavy) and continuous scores, extreme weights.
        let cs: Vec<Candidate<'_>> = ids[..n]
            .iter()
            .map(|id| Candidate {
                worker_id: id,
                score: if r.random_bool(0.5) {
                    f64::from(r.random_range(0..=4u8)) * 25.0
                } else {
                    r.random_range(0.0..=100.0)
                },
                weight: match r.random_range(0..4u8) {
                    0 => 1.0,
                    1 => f64::MIN_POSITIVE,
                    2 => 1e300,
                    _ => r.random_range(1e-3..1e3),
                },
                in_flight: r.random_range(0.0..20.0),
                outstanding: r.random_range(0..20u32),
                expected_latency_ms: r.random_bool(0.9).then(|| r.random_range(0.0..50.0)),
            })
            .collect();
        let t = [0.0, 1e-9, 0.01, 0.1, 1.0, 1e308][(seed % 6) as usize];
        for s in [&sel, &floored] {
            for kind in STOCHASTIC_AND_DETERMINISTIC {
                let out = pick(s, kind, &cs, &format!("key{seed}"), Some(t), &mut r);
                assert_valid(&out, n);
            }
        }
    }
}

#[test]
fn policy_kind_parses_and_prints() {
    for kind in PolicyKind::ALL {
        assert_eq!(kind.as_str().parse::<PolicyKind>(), Ok(kind));
        assert_eq!(kind.to_string(), kind.as_str());
    }
    assert_eq!(" P2C ".parse::<PolicyKind>(), Ok(PolicyKind::P2c));
    assert!(matches!(
        "random".parse::<PolicyKind>(),
        Err(SelectionError::UnknownPolicy(_))
    ));
}

#[test]
fn default_config_is_valid_and_bad_config_is_rejected() {
    let d = SelectorConfig::default();
    assert_eq!(d.default_temperature, 0.1);
    assert_eq!(d.hash_virtual_nodes, 160);
    assert_eq!(d.hash_load_factor, 1.25);
    assert_eq!(d.min_share, 0.0);
    assert!(Selector::new(d).is_ok());
    let bad = [
        SelectorConfig {
            default_temperature: -1.0,
            ..d
        },
        SelectorConfig {
            default_temperature: f64::NAN,
            ..d
        },
        SelectorConfig {
            hash_virtual_nodes: 0,
            ..d
        },
        SelectorConfig {
            hash_virtual_nodes: 5000,
            ..d
        },
        SelectorConfig {
            hash_load_factor: 0.9,
            ..d
        },
        SelectorConfig {
            hash_load_factor: f64::INFINITY,
            ..d
        },
        SelectorConfig {
            min_share: 1.5,
            ..d
        },
        SelectorConfig {
            min_share: f64::NAN,
            ..d
        },
    ];
    for c in bad {
        assert!(
            matches!(Selector::new(c), Err(SelectionError::InvalidConfig(_))),
            "{c:?}"
        );
    }
}

#[test]
fn selector_is_send_sync_and_usable_from_many_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Selector>();

    let sel = Selector::default();
    let ids = ten_workers();
    let cs: Vec<_> = ids.iter().map(|id| cand(id, 50.0)).collect();
    let counts = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..2u64)
            .map(|t| {
                let (sel, cs) = (&sel, &cs);
                scope.spawn(move || {
                    let mut r = rng(t);
                    let mut counts = vec![0u64; cs.len()];
                    for k in 0..5000 {
                        for kind in STOCHASTIC_AND_DETERMINISTIC {
                            let s = pick(sel, kind, cs, &format!("{k}"), None, &mut r);
                            if kind == PolicyKind::Swrr {
                                counts[s.pick] += 1;
                            }
                        }
                    }
                    counts
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .fold(vec![0u64; 10], |acc, c| {
                acc.iter().zip(&c).map(|(a, b)| a + b).collect()
            })
    });
    // Shared SWRR state: 10 000 picks over 10 equal workers, exactly 1000 each.
    assert!(counts.iter().all(|&c| c == 1000), "{counts:?}");
}

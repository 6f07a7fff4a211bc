//! The stateful and key-based policies (`swrr`, `hash`) and the minimum-share
//! floor.

use super::*;

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

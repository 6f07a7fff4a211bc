use super::*;

#[test]
fn a_histogram_counts_each_value_in_the_first_bucket_that_holds_it() {
    let h = AtomicHistogram::new(&SCORE_BUCKETS);
    for v in [0.0, 10.0, 10.5, 99.0, 100.0, 250.0, f64::NAN] {
        h.observe(v);
    }
    let s = h.snapshot();
    assert_eq!(s.count, 6);
    assert_eq!(s.sum, 0.0 + 10.0 + 10.5 + 99.0 + 100.0 + 250.0);
    let counts: Vec<u64> = s.buckets.iter().map(|b| b.1).collect();
    assert_eq!(counts, [2, 1, 0, 0, 0, 0, 0, 0, 0, 2, 1]);
    assert_eq!(s.buckets.last().map(|b| b.0), Some(f64::INFINITY));
}

#[test]
fn spearman_is_one_for_any_increasing_relation_and_minus_one_reversed() {
    let up: Vec<(f64, f64)> = (0..50)
        .map(|i| (f64::from(i), f64::from(i).powi(3)))
        .collect();
    assert!((spearman(&up).unwrap() - 1.0).abs() < 1e-12);
    let down: Vec<(f64, f64)> = (0..50)
        .map(|i| (f64::from(i), -f64::from(i).exp()))
        .collect();
    assert!((spearman(&down).unwrap() + 1.0).abs() < 1e-12);
    assert_eq!(spearman(&[(1.0, 2.0), (1.0, 3.0)]), None, "constant side");
    // Ties take their average rank: x = [1, 1, 2], y = [1, 2, 3].
    let tied = spearman(&[(1.0, 1.0), (1.0, 2.0), (2.0, 3.0)]).unwrap();
    assert!((tied - 0.866_025_403_784_438_6).abs() < 1e-12, "{tied}");
}

#[test]
fn the_window_keeps_the_latest_pairs_and_the_correlation_follows_them() {
    let c = SelfCheck::default();
    for i in 0..(RANK_MIN_PAIRS - 1) {
        c.on_outcome(i as f64, i as f64);
    }
    assert_eq!(c.snapshot().rank_correlation, None, "too few pairs");
    // Agreeing outcomes fill the window: ρ = 1.
    for i in 0..RANK_WINDOW {
        c.on_outcome(i as f64, 2.0 * i as f64);
    }
    let s = c.snapshot();
    assert_eq!(s.window_pairs, RANK_WINDOW);
    assert!((s.rank_correlation.unwrap() - 1.0).abs() < 1e-12);
    // Then the scores lie: the cheaper a pick looked, the slower it was.
    // Once these fill the window, ρ = -1.
    for i in 0..RANK_WINDOW {
        c.on_outcome(i as f64, 1.0 / (1.0 + i as f64));
    }
    let s = c.snapshot();
    assert!((s.rank_correlation.unwrap() + 1.0).abs() < 1e-12);
    assert_eq!(
        s.expected_latency_ms.count,
        (RANK_MIN_PAIRS - 1 + 2 * RANK_WINDOW) as u64
    );
    c.on_outcome(f64::NAN, 1.0);
    assert_eq!(
        c.snapshot().observed_latency_ms.count,
        s.observed_latency_ms.count
    );
}

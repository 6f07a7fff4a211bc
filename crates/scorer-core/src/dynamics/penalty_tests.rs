//! Tests of the penalty state machine (driven by `now_ms`, never sleeping).
use super::*;

fn cfg() -> PenaltyConfig {
    PenaltyConfig::default()
}

/// Feeds `n` evaluations of `score`, 1 ms apart starting at `t`; returns
/// the time of the last one.
fn feed(tr: &mut PenaltyTracker, score: f64, t: u64, n: u64, c: &PenaltyConfig) -> u64 {
    for i in 0..n {
        tr.evaluate(score, t + i, c);
    }
    t + (n - 1)
}

/// Drives a tracker (Healthy or expired Cooldown) into a new cooldown
/// with three low scores starting at `t`; returns (entry time, length).
fn eject(tr: &mut PenaltyTracker, t: u64, c: &PenaltyConfig) -> (u64, u64) {
    let last = feed(tr, 10.0, t, 3, c);
    let v = tr.state_at(last, c);
    assert_eq!(v.state, PenaltyState::Cooldown);
    (last, v.cooldown_until_ms.unwrap() - last)
}

/// Brings an ejected tracker back to Healthy; returns the time it became
/// Healthy.
fn recover(tr: &mut PenaltyTracker, c: &PenaltyConfig) -> u64 {
    let until = tr.cooldown_until_ms;
    let done = until + c.slow_start_ms;
    feed(tr, 90.0, until, 3, c);
    tr.evaluate(90.0, done, c);
    assert_eq!(tr.state_at(done, c).state, PenaltyState::Healthy);
    done
}

#[test]
fn defaults_are_valid_and_documented_values() {
    let c = cfg();
    assert_eq!(c.validate(), Ok(()));
    assert_eq!(c.low_score_threshold, 40.0);
    assert_eq!(c.recover_score_threshold, 60.0);
    assert_eq!(c.cooldown_base_ms, 1_000);
    assert_eq!(c.cooldown_max_ms, 30_000);
    assert_eq!(c.slow_start_ms, 30_000);
}

#[test]
fn validate_names_the_bad_key() {
    for bad in [0.0, -0.1, 1.01, f64::NAN] {
        let c = PenaltyConfig {
            min_weight_fraction: bad,
            ..cfg()
        };
        assert!(c.validate().unwrap_err().contains("min_weight_fraction"));
    }
    let c = PenaltyConfig {
        recover_score_threshold: 30.0,
        ..cfg()
    };
    assert!(
        c.validate()
            .unwrap_err()
            .contains("recover_score_threshold")
    );
    let c = PenaltyConfig {
        cooldown_max_ms: 10,
        ..cfg()
    };
    assert!(c.validate().unwrap_err().contains("cooldown_max_ms"));
    let c = PenaltyConfig {
        observation_factor: f64::NAN,
        ..cfg()
    };
    assert!(c.validate().unwrap_err().contains("observation_factor"));
    let c = PenaltyConfig {
        recover_consecutive: 0,
        ..cfg()
    };
    assert!(c.validate().unwrap_err().contains("recover_consecutive"));
}

#[test]
fn state_names_are_snake_case() {
    assert_eq!(PenaltyState::Recovering.as_str(), "recovering");
    assert_eq!(PenaltyState::Observation.as_str(), "observation");
}

#[test]
fn flapping_worker_cooldowns_double_then_cap_at_30s() {
    let c = cfg();
    let mut tr = PenaltyTracker::new();
    let mut lens = Vec::new();
    let mut t = 0;
    for cycle in 0..7 {
        let (entered, len) = eject(&mut tr, t, &c);
        lens.push(len);
        assert_eq!(tr.state_at(entered, &c).backoff_level, cycle + 1);
        // Come back exactly when the cooldown ends and fail again.
        t = entered + len;
    }
    assert_eq!(lens, [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
}

#[test]
fn entering_observation_counts_as_first_low() {
    let c = cfg();
    let mut tr = PenaltyTracker::new();
    let tx = tr.evaluate(39.9, 0, &c).unwrap();
    assert_eq!(
        (tx.from, tx.to),
        (PenaltyState::Healthy, PenaltyState::Observation)
    );
    assert!(tr.evaluate(10.0, 1, &c).is_none());
    let tx = tr.evaluate(10.0, 2, &c).unwrap();
    assert_eq!(
        (tx.from, tx.to),
        (PenaltyState::Observation, PenaltyState::Cooldown)
    );
    assert!(tx.reason.contains("ejected for 1000 ms"));
}

#[test]
fn one_good_report_does_not_reset_backoff_level() {
    let c = cfg();
    let mut tr = PenaltyTracker::new();
    let (entered, len) = eject(&mut tr, 0, &c);
    let until = entered + len;
    tr.evaluate(95.0, until, &c);
    assert_eq!(tr.state_at(until, &c).backoff_level, 1);
    let healthy_at = recover(&mut tr, &c);
    tr.evaluate(100.0, healthy_at + 1, &c);
    assert_eq!(tr.state_at(healthy_at + 1, &c).backoff_level, 1);
    // Next ejection is at level 1 → 2 s.
    let (_, len) = eject(&mut tr, healthy_at + 2, &c);
    assert_eq!(len, 2_000);
}

#[test]
fn backoff_resets_only_after_60s_continuously_healthy_not_60s_in_cooldown() {
    // A 61 s cooldown: more than backoff_reset_after_ms spent ejected.
    let c = PenaltyConfig {
        cooldown_base_ms: 61_000,
        cooldown_max_ms: 61_000,
        ..cfg()
    };
    let mut tr = PenaltyTracker::new();
    let (entered, len) = eject(&mut tr, 0, &c);
    // Good reports during the cooldown are ignored: no transition, no healthy time.
    for t in (entered..entered + len).step_by(1_000) {
        assert!(tr.evaluate(100.0, t, &c).is_none());
    }
    assert_eq!(
        tr.state_at(entered + len - 1, &c).state,
        PenaltyState::Cooldown
    );
    assert_eq!(tr.state_at(entered + len - 1, &c).backoff_level, 1);
    let healthy_at = recover(&mut tr, &c);
    assert_eq!(tr.state_at(healthy_at, &c).backoff_level, 1);
    tr.evaluate(100.0, healthy_at + 59_999, &c);
    assert_eq!(tr.state_at(healthy_at + 59_999, &c).backoff_level, 1);
    tr.evaluate(100.0, healthy_at + 60_000, &c);
    assert_eq!(tr.state_at(healthy_at + 60_000, &c).backoff_level, 0);
}

#[test]
fn observation_dip_restarts_the_healthy_clock() {
    let c = cfg();
    let mut tr = PenaltyTracker::new();
    eject(&mut tr, 0, &c);
    let h = recover(&mut tr, &c);
    tr.evaluate(30.0, h + 50_000, &c); // → Observation
    feed(&mut tr, 90.0, h + 50_001, 3, &c); // → Healthy again at h + 50_003
    tr.evaluate(90.0, h + 70_000, &c);
    assert_eq!(tr.state_at(h + 70_000, &c).backoff_level, 1);
    tr.evaluate(90.0, h + 50_003 + 60_000, &c);
    assert_eq!(tr.state_at(h + 110_003, &c).backoff_level, 0);
}

#[test]
fn low_score_at_reset_time_does_not_reset_backoff() {
    let c = cfg();
    let mut tr = PenaltyTracker::new();
    eject(&mut tr, 0, &c);
    let h = recover(&mut tr, &c);
    tr.evaluate(10.0, h + 60_000, &c);
    assert_eq!(tr.state_at(h + 60_000, &c).backoff_level, 1);
}

#[test]
fn hysteresis_middle_scores_keep_observation_and_reset_streaks() {
    let c = cfg();
    let mut tr = PenaltyTracker::new();
    tr.evaluate(30.0, 0, &c);
    for (i, s) in [45.0, 55.0, 40.0, 60.0].into_iter().enumerate() {
        assert!(tr.evaluate(s, 1 + i as u64, &c).is_none());
        assert_eq!(tr.state_at(10, &c).state, PenaltyState::Observation);
    }
    // Low streak was reset by the middle scores: two lows do not eject.
    tr.evaluate(30.0, 10, &c);
    tr.evaluate(30.0, 11, &c);
    tr.evaluate(50.0, 12, &c);
    tr.evaluate(30.0, 13, &c);
    assert_eq!(tr.state_at(13, &c).state, PenaltyState::Observation);
    // Good streak is reset by a middle score too.
    tr.evaluate(70.0, 14, &c);
    tr.evaluate(70.0, 15, &c);
    tr.evaluate(50.0, 16, &c);
    tr.evaluate(70.0, 17, &c);
    assert!(tr.evaluate(70.0, 18, &c).is_none());
    assert_eq!(tr.state_at(18, &c).state, PenaltyState::Observation);
    assert_eq!(tr.state_at(18, &c).score_factor, 0.85);
    let tx = tr.evaluate(60.1, 19, &c).unwrap();
    assert_eq!(
        (tx.from, tx.to),
        (PenaltyState::Observation, PenaltyState::Healthy)
    );
    let v = tr.state_at(19, &c);
    assert_eq!(
        (v.score_factor, v.eligible, v.backoff_level),
        (1.0, true, 0)
    );
}

#[test]
fn healthy_ignores_middle_scores() {
    let c = cfg();
    let mut tr = PenaltyTracker::new();
    for (t, s) in [40.0, 50.0, 60.0].into_iter().enumerate() {
        assert!(tr.evaluate(s, t as u64, &c).is_none());
    }
    assert_eq!(tr.state_at(3, &c).state, PenaltyState::Healthy);
}

#[test]
fn cooldown_turns_into_recovering_by_read_without_evaluation() {
    let c = cfg();
    let mut tr = PenaltyTracker::new();
    let (entered, len) = eject(&mut tr, 100, &c);
    let until = entered + len;
    let v = tr.state_at(until - 1, &c);
    assert_eq!(v.state, PenaltyState::Cooldown);
    assert!(!v.eligible);
    assert_eq!(v.score_factor, 0.2);
    assert_eq!(v.cooldown_until_ms, Some(until));
    let v = tr.state_at(until, &c);
    assert_eq!(v.state, PenaltyState::Recovering);
    assert!(v.eligible);
    assert_eq!(v.score_factor, 1.0);
    assert_eq!(v.cooldown_until_ms, None);
    assert_eq!(v.slow_start_fraction, 0.2);
    // The next evaluation reports the change.
    let tx = tr.evaluate(50.0, until + 5, &c).unwrap();
    assert_eq!(
        (tx.from, tx.to),
        (PenaltyState::Cooldown, PenaltyState::Recovering)
    );
}

#[test]
fn slow_start_floor_then_linear_restarted_on_each_return() {
    let c = cfg();
    let mut tr = PenaltyTracker::new();
    let mut t = 0;
    for _ in 0..2 {
        let (entered, len) = eject(&mut tr, t, &c);
        let until = entered + len;
        let f = |dt: u64| tr.state_at(until + dt, &c).slow_start_fraction;
        assert_eq!(f(0), 0.2);
        assert_eq!(f(3_000), 0.2);
        assert_eq!(f(6_000), 0.2);
        assert!((f(15_000) - 0.5).abs() < 1e-12);
        assert!((f(24_000) - 0.8).abs() < 1e-12);
        assert!(f(29_999) < 1.0);
        assert_eq!(f(30_000), 1.0);
        assert_eq!(f(1_000_000), 1.0);
        // Good scores during the ramp keep it Recovering.
        feed(&mut tr, 90.0, until, 5, &c);
        assert_eq!(tr.state_at(until + 10, &c).state, PenaltyState::Recovering);
        // Fail again mid-ramp to start the next cycle.
        t = until + 10_000;
    }
}

#[test]
fn recovering_needs_finished_ramp_and_good_streak() {
    let c = cfg();
    let mut tr = PenaltyTracker::new();
    let (entered, len) = eject(&mut tr, 0, &c);
    let until = entered + len;
    let done = until + c.slow_start_ms;
    // Ramp done but only 2 good scores so far.
    tr.evaluate(90.0, done, &c);
    tr.evaluate(90.0, done + 1, &c);
    assert_eq!(tr.state_at(done + 1, &c).state, PenaltyState::Recovering);
    let tx = tr.evaluate(90.0, done + 2, &c).unwrap();
    assert_eq!(
        (tx.from, tx.to),
        (PenaltyState::Recovering, PenaltyState::Healthy)
    );
    assert!(tx.reason.contains("slow start finished"));
}

#[test]
fn all_workers_ramping_keep_relative_weights() {
    let c = cfg();
    let weights = [1.0, 2.0, 5.0];
    let fraction = slow_start_fraction(0, &c);
    let scaled: Vec<f64> = weights
        .iter()
        .map(|w| slow_start_weight(*w, fraction))
        .collect();
    let total: f64 = scaled.iter().sum();
    assert!(total > 0.0);
    for (s, w) in scaled.iter().zip(weights) {
        assert!((s / total - w / 8.0).abs() < 1e-12);
    }
    assert_eq!(slow_start_weight(3.0, f64::NAN), 3.0);
    assert_eq!(slow_start_weight(f64::NAN, 0.5), 0.0);
    assert_eq!(slow_start_weight(-1.0, 0.5), 0.0);
    assert_eq!(slow_start_weight(4.0, 2.0), 4.0);
}

#[test]
fn nan_score_is_ignored_in_every_state() {
    let c = cfg();
    let mut tr = PenaltyTracker::new();
    let check = |tr: &mut PenaltyTracker, t: u64| {
        let before = tr.state_at(t, &c);
        for s in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(tr.evaluate(s, t, &c).is_none());
        }
        assert_eq!(tr.state_at(t, &c), before);
    };
    check(&mut tr, 0); // Healthy
    tr.evaluate(10.0, 1, &c);
    check(&mut tr, 2); // Observation
    // NaN did not break the low streak nor count as one.
    tr.evaluate(10.0, 3, &c);
    assert_eq!(tr.state_at(3, &c).state, PenaltyState::Observation);
    tr.evaluate(10.0, 4, &c);
    assert_eq!(tr.state_at(4, &c).state, PenaltyState::Cooldown);
    check(&mut tr, 5); // Cooldown
    check(&mut tr, 1_004); // expired Cooldown: NaN does not materialise it
    tr.evaluate(50.0, 1_005, &c);
    check(&mut tr, 1_006); // Recovering
}

#[test]
fn now_going_backwards_does_not_panic() {
    let c = cfg();
    let mut tr = PenaltyTracker::new();
    let times = [
        u64::MAX,
        5_000,
        0,
        u64::MAX - 1,
        1,
        100_000,
        0,
        0,
        u64::MAX,
        3,
        2,
        1,
    ];
    for (i, &t) in times.iter().cycle().take(200).enumerate() {
        let score = [10.0, 50.0, 90.0, 10.0, 10.0][i % 5];
        tr.evaluate(score, t, &c);
        let v = tr.state_at(t, &c);
        assert!(v.slow_start_fraction.is_finite());
        assert!(v.score_factor.is_finite());
        tr.state_at(t.wrapping_sub(7), &c);
    }
    // A cooldown entered near u64::MAX saturates instead of overflowing.
    let mut tr = PenaltyTracker::new();
    feed(&mut tr, 0.0, u64::MAX - 2, 3, &c);
    assert_eq!(
        tr.state_at(u64::MAX - 1, &c).cooldown_until_ms,
        Some(u64::MAX)
    );
    // Backwards read during Recovering stays at the floor.
    let mut tr = PenaltyTracker::new();
    let (entered, len) = eject(&mut tr, 10_000, &c);
    tr.evaluate(90.0, entered + len, &c);
    assert_eq!(tr.state_at(0, &c).slow_start_fraction, 0.2);
}

#[test]
fn cooldown_len_saturates_for_huge_levels() {
    let c = cfg();
    assert_eq!(cooldown_len_ms(0, &c), 1_000);
    assert_eq!(cooldown_len_ms(4, &c), 16_000);
    assert_eq!(cooldown_len_ms(5, &c), 30_000);
    assert_eq!(cooldown_len_ms(63, &c), 30_000);
    assert_eq!(cooldown_len_ms(u32::MAX, &c), 30_000);
}

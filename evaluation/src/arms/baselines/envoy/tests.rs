//! Tests of the `envoy` baseline: ejection, its timing and limits, panic
//! mode and the P2C draw.

use super::*;
use rand::SeedableRng;

fn result(worker: usize, success: bool, now_ms: f64) -> Outcome<'static> {
    Outcome {
        worker,
        decision_id: None,
        latency_ms: if success { 2.0 } else { 100.0 },
        success,
        now_ms,
        router: 0,
        cache_hit: None,
    }
}

/// `k` failures of `worker`, 1 ms apart from `from_ms`.
fn fail(p: &mut Envoy, worker: usize, k: u32, from_ms: f64) {
    for j in 0..k {
        p.outcome(&result(worker, false, from_ms + f64::from(j)));
    }
}

/// Picks (each answered at once) between `from_ms` and `to_ms`, 10 ms
/// apart; how often each worker was picked.
fn picks(p: &mut Envoy, rng: &mut ChaCha8Rng, from_ms: f64, to_ms: f64) -> Vec<u32> {
    let mut seen = vec![0u32; p.hosts.len()];
    let mut t = from_ms;
    while t < to_ms {
        let w = p.pick(&PickRequest::test_get(t), rng).worker;
        seen[w] += 1;
        p.outcome(&result(w, true, t));
        t += 10.0;
    }
    seen
}

#[test]
fn five_consecutive_failures_eject_at_once_for_30_s_then_60_s() {
    let mut p = Envoy::new(12);
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    fail(&mut p, 3, 4, 1_000.0);
    p.outcome(&result(3, true, 1_004.0)); // a success resets the count
    fail(&mut p, 3, 4, 1_005.0);
    assert!(!p.is_ejected(3));
    fail(&mut p, 3, 1, 1_009.0); // the 5th in a row: ejected at once, not at a sweep
    assert!(p.is_ejected(3));
    assert_eq!((p.ejected_count(), p.ejection_backoff(3)), (1, 1));
    // Not picked while ejected: 30 s elapse at 31.009 s, but it returns
    // only at the sweep at 40 s.
    let seen = picks(&mut p, &mut rng, 1_010.0, 40_000.0);
    assert_eq!(seen[3], 0, "{seen:?}");
    assert!(
        seen.iter().enumerate().all(|(i, &c)| i == 3 || c > 200),
        "{seen:?}"
    );
    assert!(p.is_ejected(3));
    p.sweep_to(40_000.0);
    assert!(!p.is_ejected(3));
    // Ejected again before it has been healthy for a whole interval: the
    // multiplier is still 1, so this ejection lasts 2 × 30 s = 60 s —
    // still out at the sweep at 100 s (58.996 s), back at 110 s.
    fail(&mut p, 3, 5, 41_000.0);
    assert_eq!((p.num_ejections(3), p.ejection_backoff(3)), (2, 2));
    let seen = picks(&mut p, &mut rng, 41_010.0, 110_000.0);
    assert_eq!(seen[3], 0, "{seen:?}");
    p.sweep_to(110_000.0);
    assert!(!p.is_ejected(3));
    // Healthy since 110 s: each sweep from one interval after the
    // un-ejection lowers the multiplier (120 s: 1, 130 s: 0) ...
    p.sweep_to(120_000.0);
    assert_eq!(p.ejection_backoff(3), 1);
    p.sweep_to(130_000.0);
    assert_eq!(p.ejection_backoff(3), 0);
    // ... so a third ejection lasts 30 s again: back at the 170 s sweep.
    fail(&mut p, 3, 5, 135_000.0);
    p.sweep_to(160_000.0);
    assert!(p.is_ejected(3));
    p.sweep_to(170_000.0);
    assert!(!p.is_ejected(3));
}

#[test]
fn sweeps_run_lazily_on_the_times_passed_in() {
    let mut p = Envoy::new(12);
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    fail(&mut p, 0, 5, 5_000.0);
    assert!(p.is_ejected(0));
    // No call for 90 s: the next pick runs the nine sweeps due (10 s …
    // 90 s); the host came back at 40 s and its multiplier fell to 0 at 50 s.
    p.pick(&PickRequest::test_get(95_000.0), &mut rng);
    assert!(!p.is_ejected(0));
    assert_eq!(p.ejection_backoff(0), 0);
}

#[test]
fn ejection_time_grows_by_base_and_is_capped_at_max() {
    let mut p = Envoy::new(12);
    let mut t = 5.0;
    let mut durations_s = Vec::new();
    for _ in 0..12 {
        fail(&mut p, 7, 5, t);
        let ejected_ms = t + 4.0;
        let mut sweep = (ejected_ms / DEFAULT_INTERVAL_MS).ceil() * DEFAULT_INTERVAL_MS;
        loop {
            p.sweep_to(sweep);
            if !p.is_ejected(7) {
                break;
            }
            sweep += DEFAULT_INTERVAL_MS;
        }
        // Ejected 4 ms after a sweep: back one interval after the
        // ejection time has elapsed.
        durations_s.push(((sweep - ejected_ms) / 1_000.0).round() - 10.0);
        t = sweep + 1.0; // fail again right away: no decrement
    }
    assert_eq!(
        durations_s,
        [
            30.0, 60.0, 90.0, 120.0, 150.0, 180.0, 210.0, 240.0, 270.0, 300.0, 300.0, 300.0
        ]
    );
    assert_eq!(p.ejection_backoff(7), 11);
}

#[test]
fn at_most_max_ejection_percent_of_hosts_are_ejected() {
    // 20 hosts: 10 % is two; a third would make 15 %.
    let mut p = Envoy::new(20);
    for w in 0..3 {
        fail(&mut p, w, 5, 1_000.0 + 10.0 * w as f64);
    }
    assert_eq!(
        (p.is_ejected(0), p.is_ejected(1), p.is_ejected(2)),
        (true, true, false)
    );
    assert_eq!(p.ejected_count(), 2);
    // 12 hosts (the simulator's default): one (8.3 %); two would be 16.7 %.
    let mut p = Envoy::new(12);
    fail(&mut p, 0, 5, 1_000.0);
    fail(&mut p, 1, 5, 1_000.0);
    assert_eq!(p.ejected_count(), 1);
    // 5 hosts: one is 20 % > 10 %, so Envoy (≥ 1.28) ejects none ...
    let mut p = Envoy::new(5);
    fail(&mut p, 0, 50, 1_000.0);
    assert_eq!(p.ejected_count(), 0);
    // ... unless `always_eject_one_host`: then exactly one.
    let cfg = EnvoyConfig {
        always_eject_one_host: true,
        ..EnvoyConfig::default()
    };
    let mut p = Envoy::with_config(5, cfg);
    fail(&mut p, 0, 5, 1_000.0);
    fail(&mut p, 1, 5, 1_000.0);
    assert_eq!((p.is_ejected(0), p.is_ejected(1)), (true, false));
}

#[test]
fn a_success_rate_outlier_with_enough_volume_is_ejected_at_the_sweep() {
    // 10 hosts, 200 requests each in the first interval; host 0 fails
    // every 4th (75 %, never 5 in a row), the others none. Mean 97.5,
    // stdev 7.5, threshold 97.5 − 1.9 × 7.5 = 83.25 > 75.
    let mut p = Envoy::new(10);
    for j in 0..200u32 {
        let t = 1_000.0 + f64::from(j) * 40.0; // up to 8.96 s
        for w in 0..10 {
            p.outcome(&result(w, !(w == 0 && j % 4 == 3), t));
        }
    }
    assert!(!p.is_ejected(0));
    p.sweep_to(10_000.0);
    assert!(p.is_ejected(0));
    assert_eq!(p.ejected_count(), 1);
}

#[test]
fn success_rate_needs_the_request_volume() {
    // The same failure rate on only 80 requests: below the volume of
    // 100, host 0 is not evaluated; the other nine agree (stdev 0).
    let mut p = Envoy::new(10);
    for j in 0..200u32 {
        let t = 1_000.0 + f64::from(j) * 40.0;
        for w in 0..10 {
            if w == 0 && j >= 80 {
                continue;
            }
            p.outcome(&result(w, !(w == 0 && j % 4 == 3), t));
        }
    }
    p.sweep_to(10_000.0);
    assert_eq!(p.ejected_count(), 0);
}

#[test]
fn below_the_panic_threshold_all_hosts_are_used() {
    let cfg = EnvoyConfig {
        max_ejection_percent: 100,
        ..EnvoyConfig::default()
    };
    let mut p = Envoy::with_config(4, cfg);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    fail(&mut p, 0, 5, 1_000.0);
    fail(&mut p, 1, 5, 1_000.0);
    // 2 of 4 healthy: 50 % is not below 50 %: only the healthy two.
    assert!(!p.in_panic());
    let seen = picks(&mut p, &mut rng, 2_000.0, 5_000.0);
    assert_eq!((seen[0], seen[1]), (0, 0), "{seen:?}");
    // 1 of 4 healthy (25 %): panic, health ignored, all four used.
    fail(&mut p, 2, 5, 5_000.0);
    assert!(p.in_panic());
    let seen = picks(&mut p, &mut rng, 5_010.0, 9_000.0);
    assert!(seen.iter().all(|&c| c > 50), "{seen:?}");
    // All ejected: still all four.
    fail(&mut p, 3, 5, 9_000.0);
    assert_eq!(p.ejected_count(), 4);
    let seen = picks(&mut p, &mut rng, 9_010.0, 9_990.0);
    assert!(seen.iter().all(|&c| c > 5), "{seen:?}");
}

#[test]
fn p2c_draws_with_replacement_as_envoy() {
    // Host 0 stuck with 100 in flight is picked only when both draws
    // land on it: 1/16 of the picks over 4 hosts.
    let mut p = Envoy::new(4);
    p.hosts[0].in_flight = 100;
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let seen = picks(&mut p, &mut rng, 0.0, 400_000.0);
    assert!((2_200..2_800).contains(&seen[0]), "{seen:?}");
}

#[test]
fn a_drained_host_leaves_the_set_with_its_ejection_and_returns_fresh() {
    let mut p = Envoy::new(12);
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    fail(&mut p, 3, 5, 1_000.0);
    assert_eq!(p.ejected_count(), 1);
    p.drain(3, true, 1_100.0);
    assert_eq!(p.ejected_count(), 0, "a removed host is no longer ejected");
    p.drain(5, true, 1_100.0);
    let seen = picks(&mut p, &mut rng, 1_200.0, 5_000.0);
    assert_eq!((seen[3], seen[5]), (0, 0), "{seen:?}");
    p.drain(3, false, 5_000.0);
    p.drain(5, false, 5_000.0);
    assert!(!p.is_ejected(3));
    assert_eq!(p.num_ejections(3), 0, "a returning host is a new host");
    let seen = picks(&mut p, &mut rng, 5_000.0, 10_000.0);
    assert!(seen[3] > 0 && seen[5] > 0, "{seen:?}");
}

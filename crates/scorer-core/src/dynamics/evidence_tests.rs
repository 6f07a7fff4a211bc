//! Tests of a worker's local evidence.
use super::evidence::*;
use super::outlier::{EjectionCause, OutlierConfig};

fn rec(before: u32) -> PickRecord {
    PickRecord {
        picked_ms: 0,
        outstanding_before: before,
        penalty_ms: 100.0,
        warm_bucket: None,
        prefix_hash: None,
    }
}

#[test]
fn outstanding_is_exact_and_never_negative() {
    let (e, c, o) = (
        LocalEvidence::default(),
        EvidenceConfig::default(),
        OutlierConfig::default(),
    );
    assert_eq!(e.pick(0), 0);
    assert_eq!(e.pick(0), 1);
    assert_eq!(e.snapshot().oldest_pick_ms, Some(0));
    e.complete(&rec(0), 2.0, true, 10, &c, &o);
    assert_eq!(e.snapshot().outstanding, 1);
    e.expire();
    e.expire();
    assert_eq!(e.snapshot().outstanding, 0);
}

#[test]
fn a_snapshot_does_not_reset_outstanding_and_counts_only_unseen_backlog() {
    let e = LocalEvidence::default();
    for _ in 0..3 {
        e.pick(0);
    }
    e.on_snapshot(5, 1_000);
    let s = e.snapshot();
    assert_eq!(s.outstanding, 3);
    assert_eq!(s.unseen_backlog, 2.0);
    assert_eq!(s.unseen_backlog_at(1_000, 0.0, 2_000), 2.0);
    let later = s.unseen_backlog_at(3_000, 0.0, 2_000);
    assert!((later - 2.0 * (-1f64).exp()).abs() < 1e-12, "{later}");
    // Toward the pool's typical backlog, not toward empty.
    let w = (-1f64).exp();
    assert!((s.unseen_backlog_at(3_000, 10.0, 2_000) - (2.0 * w + 10.0 * (1.0 - w))).abs() < 1e-12);
    // Our picks explain all of a smaller queue.
    e.on_snapshot(2, 1_000);
    assert_eq!(e.snapshot().unseen_backlog, 0.0);
}

#[test]
fn the_others_load_keeps_its_age_and_fades_toward_the_median_in_service_times() {
    let e = LocalEvidence::default();
    e.pick(0);
    // Heard at 1 000, as it was at 995: 5 ms old on arrival.
    e.on_others(6, 995);
    let s = e.snapshot();
    assert_eq!((s.others_backlog, s.others_at_ms), (6.0, 995));
    // With a 2 ms service time, 5 ms old keeps e^-2.5 of its
    // difference from the pool's median (2).
    let w = (-2.5f64).exp();
    let at = s.others_backlog_at(1_000, 2.0, 2.0);
    assert!((at - (6.0 * w + 2.0 * (1.0 - w))).abs() < 1e-12, "{at}");
    // A snapshot's queue counts only what neither router explains:
    // 9 reported = 1 ours + 6 theirs + 2 unseen.
    e.on_snapshot(9, 1_000);
    assert_eq!(e.snapshot().unseen_backlog, 2.0);
    assert_eq!(e.snapshot().others_backlog, 6.0);
}

#[test]
fn a_queued_request_teaches_the_service_time_not_the_wait() {
    let (e, c, o) = (
        LocalEvidence::default(),
        EvidenceConfig::default(),
        OutlierConfig::default(),
    );
    // Both picked at 0; the first answers at 20 after 20 ms, the second
    // at 22 after 22 ms, of which it waited 20 behind the first.
    e.pick(0);
    e.pick(0);
    e.complete(&rec(0), 20.0, true, 20, &c, &o);
    assert_eq!(e.snapshot().service.last_ms(), Some(20.0));
    e.complete(&rec(1), 22.0, true, 22, &c, &o);
    let s = e.snapshot().service.last_ms().unwrap();
    let w = (-2f64 / 100.0).exp();
    assert!((s - (20.0 * w + 2.0 * (1.0 - w))).abs() < 1e-9, "{s}");
}

#[test]
fn a_fast_failure_counts_as_the_timeout() {
    let (e, c, o) = (
        LocalEvidence::default(),
        EvidenceConfig::default(),
        OutlierConfig::default(),
    );
    e.pick(0);
    e.complete(&rec(0), 2.0, true, 10, &c, &o);
    e.pick(0);
    // Refused after 0.1 ms: the peak takes the 100 ms penalty at once.
    e.complete(&rec(0), 0.1, false, 11, &c, &o);
    let s = e.snapshot();
    assert_eq!(s.service.last_ms(), Some(100.0));
    assert!((s.failure_rate - 0.05).abs() < 1e-12);
}

#[test]
fn consecutive_failures_ask_for_ejection() {
    let (e, c, o) = (
        LocalEvidence::default(),
        EvidenceConfig::default(),
        OutlierConfig::default(),
    );
    let asks: Vec<bool> = (0..5)
        .map(|i| {
            e.pick(0);
            e.complete(&rec(0), 100.0, false, i, &c, &o)
        })
        .collect();
    assert_eq!(asks, [false, false, false, false, true]);
}

#[test]
fn the_head_of_the_line_started_at_the_last_outcome_or_its_pick() {
    let (e, c, o) = (
        LocalEvidence::default(),
        EvidenceConfig::default(),
        OutlierConfig::default(),
    );
    e.pick(100);
    e.pick(105);
    assert_eq!(e.snapshot().head_elapsed_ms(130), 30.0);
    // The first answers at 140: the second has been in service since.
    e.complete(&rec(0), 40.0, true, 140, &c, &o);
    let s = e.snapshot();
    assert_eq!(s.oldest_pick_ms, Some(105));
    assert_eq!(s.head_elapsed_ms(150), 10.0);
    e.expire();
    assert_eq!(e.snapshot().head_elapsed_ms(200), 0.0);
}

#[test]
fn a_revived_worker_is_uneejected_and_forgets_its_outcomes() {
    let (e, c, o) = (
        LocalEvidence::default(),
        EvidenceConfig::default(),
        OutlierConfig::default(),
    );
    e.pick(0);
    e.complete(&rec(0), 100.0, false, 10, &c, &o);
    e.eject(10, EjectionCause::ConsecutiveFailures, &o);
    assert!(e.snapshot().outlier.is_ejected(5_000));
    e.on_revival(5_000);
    let s = e.snapshot();
    assert!(!s.outlier.is_ejected(5_000));
    assert_eq!(s.outlier.returned_at_ms(5_000), Some(5_000));
    assert_eq!(s.service.samples(), 0);
    assert_eq!(s.failure_rate, 0.0);
}

#[test]
fn expiry_follows_the_timeout_and_is_bounded() {
    let c = EvidenceConfig::default();
    assert_eq!(c.expiry_ms(Some(100)), 200);
    assert_eq!(c.expiry_ms(None), 10_000);
    assert_eq!(c.expiry_ms(Some(u64::MAX / 4)), 60_000);
    assert_eq!(c.penalty_ms(Some(100)), 100.0);
    assert_eq!(c.penalty_ms(None), 1_000.0);
}

#[test]
fn a_hit_or_miss_teaches_the_cache_evidence_and_a_restart_makes_the_worker_cold() {
    let (e, c, o) = (
        LocalEvidence::default(),
        EvidenceConfig::default(),
        OutlierConfig::default(),
    );
    let warm = PickRecord {
        warm_bucket: Some(0),
        ..rec(0)
    };
    e.pick(0);
    e.complete_cached(&warm, 1.0, true, Some(true), 10, &c, &o);
    let later = PickRecord {
        picked_ms: 20,
        ..rec(0)
    };
    e.pick(20);
    e.complete_cached(&later, 9.0, true, Some(false), 30, &c, &o);
    // A failure says nothing of the cache.
    e.pick(40);
    e.complete_cached(&warm, 100.0, false, Some(true), 50, &c, &o);
    let s = e.snapshot().cache;
    assert_eq!((s.hits, s.hit_ms, s.misses, s.miss_ms), (1, 1.0, 1, 9.0));
    assert_eq!((s.bucket_hits[0], s.bucket_outcomes[0]), (1.0, 1.0));
    // Without a bucket the pick counts in none.
    assert_eq!(s.bucket_outcomes.iter().sum::<f64>(), 1.0);
    e.on_revival(5_000);
    assert_eq!(e.snapshot().cache.cold_since_ms, 5_000);
}

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use scorer_core::scoring::RequestContext;
use scorer_core::telemetry::Snapshot;
use scorer_engine::ScoreError;
use scorer_engine::api::ScoreRequest;
use scorer_engine::config::Config;
use scorer_engine::view::{View, ViewKind, ViewWorker};

use crate::{Balancer, BalancerConfig, BalancerConfigError, PickError, PickSource, ViewError};

/// Unix ms at monotonic 0.
const WALL: u64 = 1_750_000_000_000;

fn balancer() -> Balancer {
    let mut cfg = Config::default();
    cfg.scoring.warmup_ms = 0;
    Balancer::new(cfg, BalancerConfig::new("router-1")).expect("valid")
}

fn report(id: &str, cpu: f64, queue: u32, at_ms: u64, age_ms: u64) -> ViewWorker {
    let mut s = Snapshot::new(id, WALL + at_ms);
    s.cpu_usage = cpu;
    s.queue_depth = queue;
    s.rtt_ms_avg = 1.0;
    s.rtt_ms_p99 = 2.0;
    ViewWorker {
        snapshot: s,
        age_ms,
    }
}

fn view(b: &Balancer, kind: ViewKind, workers: Vec<ViewWorker>) -> View {
    View {
        kind,
        seq: 0,
        config_hash: b.engine().config_hash().to_string(),
        model_version: None,
        workers,
        load: None,
        load_age_ms: None,
        load_routers: None,
        routed: None,
        overrides: None,
    }
}

fn request(ids: &[&str], policy: &str) -> ScoreRequest {
    let mut req = ScoreRequest::new("user:1:profile", ids.iter().map(|&s| s.into()).collect());
    req.policy = Some(policy.into());
    req
}

#[test]
fn a_full_view_is_replayed_with_its_ages_and_the_pick_follows_the_services_health() {
    let b = balancer();
    let v = view(
        &b,
        ViewKind::Full,
        vec![
            report("idle", 0.1, 0, 1_000, 0),
            report("hot", 0.97, 90, 1_000, 400),
        ],
    );
    let applied = b.apply_view(&v, 1_400, WALL + 1_400).expect("valid view");
    assert_eq!((applied.applied, applied.skipped), (2, 0));
    assert!(applied.config_matches);
    let slot = b.engine().registry().get("hot").expect("replayed");
    assert_eq!(slot.view().age_ms(1_400), 400);
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let pick = b.pick(&request(&["hot", "idle"], "max"), 1_400, &mut rng);
    let pick = pick.expect("a pick");
    assert_eq!(
        (pick.worker.as_str(), pick.source),
        ("idle", PickSource::View)
    );
    assert_eq!(pick.probability, 1.0);
    assert!(
        pick.decision_id.starts_with("router-1-"),
        "{}",
        pick.decision_id
    );
    // The same view again changes nothing.
    let again = b.apply_view(&v, 1_500, WALL + 1_500).expect("valid view");
    assert_eq!((again.applied, again.skipped), (0, 2));
}

#[test]
fn outstanding_picks_steer_the_next_pick_until_their_outcome_releases_them() {
    let b = balancer();
    let v = view(
        &b,
        ViewKind::Full,
        vec![report("a", 0.2, 0, 1_000, 0), report("b", 0.2, 0, 1_000, 0)],
    );
    b.apply_view(&v, 1_000, WALL + 1_000).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let req = request(&["a", "b"], "max");
    let first = b.pick(&req, 1_000, &mut rng).unwrap();
    let second = b.pick(&req, 1_000, &mut rng).unwrap();
    assert_ne!(first.worker, second.worker, "one outstanding pick each");
    let out = b
        .outcome(&first.decision_id, &first.worker, 1.0, true, 1_001)
        .expect("valid outcome");
    assert!(out.known_decision && out.released);
    // The first worker is free again, the second still has its pick.
    let third = b.pick(&req, 1_002, &mut rng).unwrap();
    assert_eq!(third.worker, first.worker);
    assert_eq!(b.stats(1_002).outcomes, 1);
    // Bad input changes nothing and says why.
    assert!(
        b.outcome(&second.decision_id, "b", f64::NAN, true, 1_003)
            .is_err()
    );
    assert!(
        b.outcome(&second.decision_id, "b", -1.0, true, 1_003)
            .is_err()
    );
    assert_eq!(b.stats(1_003).outcomes, 1);
}

#[test]
fn without_a_view_the_pick_is_uniform_and_past_the_ttl_it_rests_on_local_evidence() {
    let b = balancer();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let req = request(&["a", "b", "a", "c"], "max");
    let pick = b.pick(&req, 0, &mut rng).expect("a pick without any view");
    assert_eq!(pick.source, PickSource::Uniform);
    assert!((pick.probability - 1.0 / 3.0).abs() < 1e-12);
    // A view, then silence past the TTL: the reports are long dead, yet
    // the known workers stay selectable, and the busier costs more.
    let v = view(
        &b,
        ViewKind::Full,
        vec![
            report("a", 0.9, 50, 1_000, 0),
            report("b", 0.1, 0, 1_000, 0),
        ],
    );
    b.apply_view(&v, 1_000, WALL + 1_000).unwrap();
    let later = 1_000 + b.config().view_ttl_ms + 1;
    assert!(b.in_blackout(later));
    let p1 = b
        .pick(&request(&["a", "b"], "max"), later, &mut rng)
        .unwrap();
    assert_eq!(p1.source, PickSource::Blackout);
    // Reported health no longer counts: with one pick outstanding on the
    // first choice, the next goes to the other worker.
    let p2 = b
        .pick(&request(&["a", "b"], "max"), later, &mut rng)
        .unwrap();
    assert_ne!(p1.worker, p2.worker);
    let stats = b.stats(later);
    assert_eq!(
        (stats.picks, stats.blackout_picks, stats.uniform_picks),
        (3, 2, 1)
    );
    assert_eq!(stats.view_age_ms, Some(b.config().view_ttl_ms + 1));
}

#[test]
fn a_malformed_view_is_refused_whole_and_changes_nothing() {
    let b = balancer();
    let mut bad = report("b", 0.1, 0, 1_000, 0);
    bad.snapshot.cpu_usage = -1.0;
    let v = view(&b, ViewKind::Full, vec![report("a", 0.1, 0, 1_000, 0), bad]);
    let err = b.apply_view(&v, 1_000, WALL + 1_000).unwrap_err();
    assert!(
        matches!(
            err,
            ViewError::InvalidReport {
                index: 1,
                field: "cpu_usage",
                ..
            }
        ),
        "{err}"
    );
    assert!(
        b.engine().registry().is_empty(),
        "the valid report was not applied either"
    );
    assert_eq!(b.view_age_ms(1_000), None);
    let twice = view(
        &b,
        ViewKind::Full,
        vec![report("a", 0.1, 0, 1_000, 0), report("a", 0.1, 0, 1_001, 0)],
    );
    assert!(matches!(
        b.apply_view(&twice, 1_000, WALL + 1_000),
        Err(ViewError::Repeated { index: 1, .. })
    ));
    let backwards = view(
        &b,
        ViewKind::Delta,
        vec![report("a", 0.1, 0, 1_001, 0), report("a", 0.1, 0, 1_000, 0)],
    );
    assert!(matches!(
        b.apply_view(&backwards, 1_000, WALL + 1_000),
        Err(ViewError::Repeated { index: 1, .. })
    ));
    let future = view(&b, ViewKind::Delta, vec![report("a", 0.1, 0, 3_600_000, 0)]);
    assert!(matches!(
        b.apply_view(&future, 1_000, WALL + 1_000),
        Err(ViewError::Future { index: 0, .. })
    ));
    let old = view(
        &b,
        ViewKind::Delta,
        vec![report("a", 0.1, 0, 1_000, u64::MAX)],
    );
    assert!(matches!(
        b.apply_view(&old, 1_000, WALL + 1_000),
        Err(ViewError::Age { index: 0, .. })
    ));
    let stats = b.stats(1_000);
    assert_eq!((stats.views_refused, stats.views_applied), (5, 0));
    assert!(b.engine().registry().is_empty());
}

#[test]
fn a_delta_replays_each_report_in_order_and_a_foreign_config_is_counted() {
    let b = balancer();
    let mut v = view(
        &b,
        ViewKind::Delta,
        vec![
            report("a", 0.1, 0, 1_000, 20),
            report("a", 0.5, 4, 1_010, 10),
        ],
    );
    v.config_hash = "another".into();
    let applied = b.apply_view(&v, 1_020, WALL + 1_020).unwrap();
    assert_eq!((applied.applied, applied.config_matches), (2, false));
    let view = b.engine().registry().get("a").unwrap().view_full();
    assert_eq!((view.reports, view.last_timestamp_ms), (2, WALL + 1_010));
    assert_eq!(b.stats(1_020).config_mismatches, 1);
}

#[test]
fn a_pick_checks_the_requests_context_as_the_service_does() {
    let b = balancer();
    b.apply_view(
        &view(&b, ViewKind::Full, vec![report("a", 0.1, 0, 1_000, 0)]),
        1_000,
        WALL + 1_000,
    )
    .unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let with = |ctx: RequestContext| {
        let mut req = request(&["a"], "max");
        req.context = Some(ctx);
        req
    };
    let cases = [
        (
            RequestContext {
                timeout_ms: Some(scorer_engine::api::MAX_TIMEOUT_MS + 1),
                ..RequestContext::default()
            },
            ScoreError::BadTimeout(scorer_engine::api::MAX_TIMEOUT_MS + 1),
        ),
        (
            RequestContext {
                batch_size: Some(0),
                ..RequestContext::default()
            },
            ScoreError::BadBatchSize,
        ),
        (
            RequestContext {
                client_region: Some("r".repeat(65)),
                ..RequestContext::default()
            },
            ScoreError::BadClientRegion,
        ),
    ];
    for (ctx, refused) in cases {
        assert_eq!(
            b.pick(&with(ctx), 1_000, &mut rng),
            Err(PickError::Invalid(refused))
        );
    }
    // A refused pick charges nothing.
    let a = b.engine().registry().get("a").unwrap();
    assert_eq!(a.evidence().snapshot().outstanding, 0);
    let fine = RequestContext {
        timeout_ms: Some(50),
        batch_size: Some(1),
        client_region: Some("eu".into()),
        ..RequestContext::default()
    };
    assert_eq!(b.pick(&with(fine), 1_000, &mut rng).unwrap().worker, "a");
}

#[test]
fn bad_requests_and_settings_are_refused() {
    let b = balancer();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    assert_eq!(
        b.pick(&request(&["a"], "none"), 0, &mut rng),
        Err(PickError::NoPickPolicy)
    );
    assert!(matches!(
        b.pick(&request(&[], "max"), 0, &mut rng),
        Err(PickError::Invalid(_))
    ));
    assert!(matches!(
        b.pick(&request(&["a"], "bogus"), 0, &mut rng),
        Err(PickError::Invalid(_))
    ));
    for id in ["", "has space", &"x".repeat(33)] {
        assert!(matches!(
            Balancer::new(Config::default(), BalancerConfig::new(id)),
            Err(BalancerConfigError::RouterId(_))
        ));
    }
    let mut zero = BalancerConfig::new("r");
    zero.view_ttl_ms = 0;
    assert_eq!(
        Balancer::new(Config::default(), zero).unwrap_err(),
        BalancerConfigError::ViewTtl
    );
}

#[test]
fn the_other_routers_load_steers_the_pick_and_this_routers_is_reported() {
    use scorer_engine::view::WorkerLoad;
    let b = balancer();
    let mut v = view(
        &b,
        ViewKind::Full,
        vec![report("a", 0.2, 0, 1_000, 0), report("b", 0.2, 0, 1_000, 0)],
    );
    let load = |n| WorkerLoad {
        worker_id: "a".into(),
        outstanding: n,
    };
    v.load = Some(vec![load(6)]);
    b.apply_view(&v, 1_000, WALL + 1_000).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let req = request(&["a", "b"], "max");
    // Six picks of other routers on `a`: this router sends its next
    // three to `b` before `a` is worth it again.
    for _ in 0..3 {
        assert_eq!(b.pick(&req, 1_000, &mut rng).unwrap().worker, "b");
    }
    let own = b.outstanding();
    assert_eq!(own.len(), 1);
    assert_eq!((own[0].worker_id.as_str(), own[0].outstanding), ("b", 3));
    // A load list that no longer names `a`: nobody else is on it.
    let mut idle = view(&b, ViewKind::Delta, Vec::new());
    idle.load = Some(Vec::new());
    b.apply_view(&idle, 1_001, WALL + 1_001).unwrap();
    assert_eq!(b.pick(&req, 1_001, &mut rng).unwrap().worker, "a");
    // A repeated or invalid worker in the load is refused whole.
    let mut bad = view(&b, ViewKind::Delta, Vec::new());
    bad.load = Some(vec![load(1), load(2)]);
    assert!(matches!(
        b.apply_view(&bad, 1_002, WALL + 1_002),
        Err(ViewError::BadLoad { index: 1, .. })
    ));
}

#[test]
fn the_services_drain_reaches_the_pick_and_a_bad_override_refuses_the_view() {
    use scorer_engine::overrides::{OverrideKind, WorkerOverride};
    let b = balancer();
    let drain = WorkerOverride {
        worker_id: "w1".into(),
        kind: OverrideKind::Drain,
        weight: None,
        reason: "kernel upgrade".into(),
        set_by: "ops".into(),
        age_ms: 0,
        remaining_ms: Some(5_000),
    };
    let mut v = view(
        &b,
        ViewKind::Full,
        vec![
            report("w1", 0.1, 0, 1_000, 0),
            report("w2", 0.5, 0, 1_000, 0),
        ],
    );
    v.overrides = Some(vec![drain.clone()]);
    b.apply_view(&v, 1_000, WALL + 1_000).expect("valid view");
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for _ in 0..50 {
        let pick = b.pick(&request(&["w1", "w2"], "softmax"), 1_000, &mut rng);
        assert_eq!(pick.expect("a pick").worker, "w2");
    }
    // A malformed override (a weight on a drain) refuses the whole view.
    let mut bad = v.clone();
    bad.overrides = Some(vec![WorkerOverride {
        weight: Some(2.0),
        ..drain
    }]);
    assert!(matches!(
        b.apply_view(&bad, 1_100, WALL + 1_100),
        Err(ViewError::BadOverrides(_))
    ));
    assert_eq!(b.engine().overrides(1_100).len(), 1);
    // The next full view without it lifts the drain.
    v.overrides = Some(Vec::new());
    b.apply_view(&v, 1_200, WALL + 1_200).expect("valid view");
    assert!(b.engine().overrides(1_200).is_empty());
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let pick = b.pick(&request(&["w1", "w2"], "max"), 1_200, &mut rng);
    assert_eq!(pick.expect("a pick").worker, "w1");
}

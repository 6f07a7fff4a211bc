use super::*;

fn features(seed: f32) -> [f32; FEATURE_COUNT] {
    std::array::from_fn(|i| seed + i as f32)
}

fn record() -> DecisionRecord {
    let row = |id: &str, picked: bool, seed: f32| CandidateRow {
        worker_id: id.into(),
        eligible: true,
        rule_score: 80.0,
        model_action: Some(0.25),
        final_score: 78.5,
        probability: Some(if picked { 0.75 } else { 0.25 }),
        picked,
        penalty_state: "healthy",
        fallback_reason: None,
        features: features(seed),
        operator_override: (!picked).then_some("drain"),
    };
    DecisionRecord {
        decision_id: "edge-7-00000000000000a1".into(),
        ts_ms: 1_765_000_000_000,
        key_prefix: "user".into(),
        shard_id: Some(3),
        request_type: Some("GET"),
        client_region: Some("eu".into()),
        timeout_ms: Some(50),
        batch_size: None,
        policy: "softmax",
        panic: false,
        model_version: Some("default-3ef7c7d7".into()),
        arm: None,
        config_hash: "abc123".into(),
        caller: None,
        candidates: vec![row("w1", false, 1.0), row("w2", true, 100.0)],
    }
}

/// The service's clock: 10 s after the records were made.
const NOW_MS: i64 = 1_765_000_010_000;

fn check(router_id: &str, max_candidates: usize) -> RecordCheck<'_> {
    RecordCheck {
        router_id,
        now_ms: NOW_MS,
        max_candidates,
    }
}

fn wire(all_features: bool) -> RouterDecision {
    RouterDecision::from_record(&record(), all_features)
}

#[test]
fn a_decision_round_trips_through_the_wire_with_the_pick_features_only_outside_the_sample() {
    let sent = wire(false);
    assert!(sent.candidates[0].features.is_none());
    assert_eq!(
        sent.candidates[1].features.as_ref().map(Vec::len),
        Some(FEATURE_COUNT)
    );
    let json = serde_json::to_string(&sent).unwrap();
    let back: RouterDecision = serde_json::from_str(&json).unwrap();
    let rec = back.into_record(&check("edge-7", 64), false).unwrap();
    let mut want = record();
    want.candidates[0].features = [0.0; FEATURE_COUNT];
    assert_eq!(rec, want);
    let all = wire(true).into_record(&check("edge-7", 64), true).unwrap();
    assert_eq!(all, record());
}

#[test]
fn a_missing_feature_value_travels_as_null_and_comes_back_nan() {
    let mut rec = record();
    rec.candidates[1].features[4] = f32::NAN;
    let sent = RouterDecision::from_record(&rec, false);
    let json = serde_json::to_value(&sent).unwrap();
    assert!(json["candidates"][1]["features"][4].is_null());
    let back: RouterDecision = serde_json::from_value(json).unwrap();
    let got = back.into_record(&check("edge-7", 64), false).unwrap();
    assert!(got.candidates[1].features[4].is_nan());
    assert_eq!(got.candidates[1].features[5], 105.0);
}

#[test]
fn each_bad_field_is_refused_by_name() {
    type Mutation = Box<dyn Fn(&mut RouterDecision)>;
    let cases: Vec<(&str, Mutation)> = vec![
        (
            "decision_id",
            Box::new(|d| d.decision_id = "edge-8-00000000000000a1".into()),
        ),
        (
            "decision_id",
            Box::new(|d| d.decision_id = "edge-7-00000000000000A1".into()),
        ),
        (
            "decision_id",
            Box::new(|d| d.decision_id = "edge-7-a1".into()),
        ),
        ("ts_ms", Box::new(|d| d.ts_ms = 0)),
        ("ts_ms", Box::new(|d| d.ts_ms = MAX_TS_MS + 1)),
        // 1970 and 9999 are valid Unix ms, but no router decided then.
        ("ts_ms", Box::new(|d| d.ts_ms = 1)),
        ("ts_ms", Box::new(|d| d.ts_ms = MAX_TS_MS)),
        (
            "ts_ms",
            Box::new(|d| d.ts_ms = NOW_MS - MAX_RECORD_AGE_MS - 1),
        ),
        (
            "ts_ms",
            Box::new(|d| d.ts_ms = NOW_MS + MAX_RECORD_AHEAD_MS + 1),
        ),
        ("key_prefix", Box::new(|d| d.key_prefix = "a\nb".into())),
        (
            "key_prefix",
            Box::new(|d| d.key_prefix = "user\u{202E}resu".into()),
        ),
        ("timeout_ms", Box::new(|d| d.timeout_ms = Some(u64::MAX))),
        ("batch_size", Box::new(|d| d.batch_size = Some(0))),
        (
            "request_type",
            Box::new(|d| d.request_type = Some("get".into())),
        ),
        (
            "client_region",
            Box::new(|d| d.client_region = Some(String::new())),
        ),
        ("config_hash", Box::new(|d| d.config_hash = "x".repeat(129))),
        ("policy", Box::new(|d| d.policy = "none".into())),
        ("candidates", Box::new(|d| d.candidates.clear())),
        ("candidates", Box::new(|d| d.candidates[0].picked = true)),
        ("candidates", Box::new(|d| d.candidates[1].picked = false)),
        (
            "candidates[0].worker_id",
            Box::new(|d| d.candidates[0].worker_id = " w".into()),
        ),
        (
            "candidates[0].rule_score",
            Box::new(|d| d.candidates[0].rule_score = 101.0),
        ),
        (
            "candidates[0].final_score",
            Box::new(|d| d.candidates[0].final_score = f64::NAN),
        ),
        (
            "candidates[0].final_score",
            Box::new(|d| d.candidates[0].final_score = 1e308),
        ),
        (
            "candidates[0].final_score",
            Box::new(|d| d.candidates[0].final_score = -1e308),
        ),
        (
            "candidates[1].worker_id",
            Box::new(|d| d.candidates[1].worker_id = "w1".into()),
        ),
        (
            "candidates[1].eligible",
            Box::new(|d| d.candidates[1].eligible = false),
        ),
        (
            "candidates[0].eligible",
            Box::new(|d| {
                d.panic = true;
                d.candidates[1].eligible = false;
            }),
        ),
        (
            "candidates[1].probability",
            Box::new(|d| d.candidates[1].probability = Some(1e-300)),
        ),
        (
            "candidates[0].probability",
            Box::new(|d| d.candidates[0].eligible = false),
        ),
        (
            "candidates[0].model_action",
            Box::new(|d| d.candidates[0].model_action = Some(f64::INFINITY)),
        ),
        (
            "candidates[0].probability",
            Box::new(|d| d.candidates[0].probability = Some(1.5)),
        ),
        (
            "candidates[0].penalty_state",
            Box::new(|d| d.candidates[0].penalty_state = "dead".into()),
        ),
        (
            "candidates[0].fallback_reason",
            Box::new(|d| d.candidates[0].fallback_reason = Some("tired".into())),
        ),
        (
            "candidates[0].override",
            Box::new(|d| d.candidates[0].operator_override = Some("maintenance".into())),
        ),
        (
            "candidates[1].features",
            Box::new(|d| d.candidates[1].features = None),
        ),
        (
            "candidates[1].features",
            Box::new(|d| d.candidates[1].features = Some(vec![Some(1.0)])),
        ),
        (
            "candidates[1].features",
            Box::new(|d| {
                if let Some(f) = &mut d.candidates[1].features {
                    f[0] = Some(f32::INFINITY);
                }
            }),
        ),
    ];
    for (field, mutate) in cases {
        let mut d = wire(false);
        mutate(&mut d);
        let err = d.into_record(&check("edge-7", 64), false).unwrap_err();
        assert_eq!(err.field, field, "{err}");
    }
    let too_many = wire(false)
        .into_record(&check("edge-7", 1), false)
        .unwrap_err();
    assert_eq!(too_many.field, "candidates");
}

#[test]
fn a_decision_in_the_features_sample_needs_every_candidates_features() {
    let err = wire(false)
        .into_record(&check("edge-7", 64), true)
        .unwrap_err();
    assert_eq!(err.field, "candidates[0].features");
    assert!(wire(true).into_record(&check("edge-7", 64), true).is_ok());
}

#[test]
fn an_outcome_is_checked_against_its_router() {
    let ok = RouterOutcome {
        decision_id: "edge-7-00000000000000a1".into(),
        worker_id: "w2".into(),
        ts_ms: 1_765_000_000_010,
        latency_ms: 1.5,
        success: true,
        cache_hit: None,
    };
    let rec = ok.clone().into_record(&check("edge-7", 64)).unwrap();
    assert_eq!(RouterOutcome::from_record(&rec), ok);
    assert_eq!(
        ok.clone()
            .into_record(&check("edge-8", 64))
            .unwrap_err()
            .field,
        "decision_id"
    );
    let mut bad = ok.clone();
    bad.latency_ms = -1.0;
    assert_eq!(
        bad.into_record(&check("edge-7", 64)).unwrap_err().field,
        "latency_ms"
    );
    let mut bad = ok;
    bad.worker_id = String::new();
    assert_eq!(
        bad.into_record(&check("edge-7", 64)).unwrap_err().field,
        "worker_id"
    );
}

#[test]
fn a_router_id_that_prefixes_another_does_not_pass_for_it() {
    assert!(is_router_decision_id("edge", "edge-0123456789abcdef"));
    assert!(!is_router_decision_id("edge", "edge-7-0123456789abcdef"));
    assert!(!is_router_decision_id("edge", "edgy-0123456789abcdef"));
}

#[test]
fn a_decision_in_panic_mode_picks_among_the_ineligible() {
    let mut d = wire(false);
    d.panic = true;
    for c in &mut d.candidates {
        c.eligible = false;
    }
    assert!(d.into_record(&check("edge-7", 64), false).is_ok());
}

#[test]
fn an_outcome_in_1970_or_9999_is_refused() {
    for ts_ms in [1, MAX_TS_MS] {
        let o = RouterOutcome {
            decision_id: "edge-7-00000000000000a1".into(),
            worker_id: "w2".into(),
            ts_ms,
            latency_ms: 1.5,
            success: true,
            cache_hit: None,
        };
        assert_eq!(
            o.into_record(&check("edge-7", 64)).unwrap_err().field,
            "ts_ms"
        );
    }
}

#[test]
fn an_outcomes_cache_hit_goes_into_its_record_and_is_optional_on_the_wire() {
    let json = serde_json::json!({"decision_id": "edge-7-00000000000000a1", "worker_id": "w2",
        "ts_ms": 1_765_000_000_010i64, "latency_ms": 1.5, "success": true});
    let unknown: RouterOutcome = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(unknown.cache_hit, None);
    let rec = unknown.into_record(&check("edge-7", 64)).unwrap();
    assert_eq!(rec.cache_hit, None);
    for hit in [true, false] {
        let mut body = json.clone();
        body["cache_hit"] = hit.into();
        let o: RouterOutcome = serde_json::from_value(body.clone()).unwrap();
        let rec = o.into_record(&check("edge-7", 64)).unwrap();
        assert_eq!(rec.cache_hit, Some(hit));
        assert_eq!(
            serde_json::to_value(RouterOutcome::from_record(&rec)).unwrap(),
            body
        );
    }
    let wire = serde_json::to_value(RouterOutcome::from_record(&rec)).unwrap();
    assert!(wire.get("cache_hit").is_none(), "{wire}");
}

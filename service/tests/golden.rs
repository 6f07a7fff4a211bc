//! The golden scores of issue #2, in-process and through HTTP, and the
//! "base plus adjustments equals score" invariant.

mod common;

use axum::http::StatusCode;
use common::{WALL, no_warmup, test_app};
use scorer_core::scoring::{Adjustment, BASE_SCORE, Explained, RequestContext, Stage};
use scorer_core::telemetry::Snapshot;
use scorer_engine::api::{Explain, ScoreRequest};
use serde_json::{Value, json};

fn rng() -> rand_chacha::ChaCha8Rng {
    rand::SeedableRng::seed_from_u64(7)
}

fn golden_snapshots() -> Vec<Snapshot> {
    let mut w1 = Snapshot::new("W1", WALL);
    (w1.cpu_usage, w1.rtt_ms_p99, w1.error_rate, w1.queue_depth) = (0.50, 12.5, 0.0, 5);
    let mut w2 = Snapshot::new("W2", WALL);
    (w2.cpu_usage, w2.rtt_ms_p99, w2.error_rate, w2.queue_depth) = (0.30, 8.0, 0.0, 3);
    w2.compacting = true;
    let mut w3 = Snapshot::new("W3", WALL);
    (w3.cpu_usage, w3.rtt_ms_p99, w3.error_rate, w3.queue_depth) = (0.88, 37.5, 0.02, 25);
    vec![w1, w2, w3]
}

fn request() -> ScoreRequest {
    ScoreRequest {
        explain: Explain::Full,
        ..ScoreRequest::new(
            "user:12345:profile",
            vec!["W1".into(), "W2".into(), "W3".into()],
        )
    }
}

#[test]
fn golden_scores_in_process() {
    let engine = scorer_engine::Engine::new(no_warmup());
    engine
        .ingest(&golden_snapshots(), 1_000, WALL)
        .expect("valid");
    let resp = engine
        .score(
            &request(),
            &RequestContext::default(),
            1_500,
            "d".into(),
            &mut rng(),
        )
        .expect("scored");
    let got: Vec<(String, f64)> = resp
        .scores
        .iter()
        .map(|s| (s.worker_id.clone(), s.rule_score))
        .collect();
    let want = [("W1", 96.25), ("W2", 70.0), ("W3", 47.8)];
    for ((id, score), (wid, wscore)) in got.iter().zip(want) {
        assert_eq!(id, wid);
        assert!((score - wscore).abs() < 1e-9, "{id}: {score} != {wscore}");
    }
    // The ranking is by final score, i.e. routing cost: W1 reports 5
    // queued requests the service did not send (unseen backlog, cubed),
    // W2 none, so compacting W2 is the cheaper; W3 (25 queued) the dearest.
    assert_eq!(resp.ranking, ["W2", "W1", "W3"]);
    let w3 = &resp.scores[2];
    let impacts: Vec<(&str, f64)> = w3
        .adjustments
        .iter()
        .filter(|a| a.stage == Stage::Rule)
        .map(|a| (a.code, a.impact))
        .collect();
    assert_eq!(
        impacts,
        [
            ("cpu_high", -7.2),
            ("rtt_p99_high", -25.0),
            ("errors", -10.0),
            ("queue_high", -10.0)
        ]
    );
    // The snapshot is 0.5 s old: the dynamics stage gives back its
    // deductions × (1 − e^−0.5) (trust time constant 1 s).
    let age = w3
        .adjustments
        .iter()
        .find(|a| a.stage == Stage::Dynamics && a.code == "snapshot_age")
        .expect("snapshot_age line");
    let back = (100.0 - 47.8) * (1.0 - (-0.5f64).exp());
    assert!((age.impact - back).abs() < 1e-4, "{} != {back}", age.impact);
    for s in &resp.scores {
        assert_invariant(s);
        assert!(
            s.expected_latency_ms
                .is_some_and(|e| e.is_finite() && e > 0.0)
        );
    }
}

/// Replaying the rule-stage adjustments gives `rule_score`, all of them `final_score`.
fn assert_invariant(s: &scorer_engine::api::WorkerScore) {
    let rule: Vec<Adjustment> = s
        .adjustments
        .iter()
        .filter(|a| a.stage == Stage::Rule)
        .cloned()
        .collect();
    assert!(
        s.adjustments
            .iter()
            .skip(rule.len())
            .all(|a| a.stage != Stage::Rule),
        "rule adjustments come first"
    );
    assert_sums(s.rule_score, &rule);
    assert_sums(s.final_score, &s.adjustments);
}

fn assert_sums(score: f64, adjustments: &[Adjustment]) {
    let replayed = Explained::replay(BASE_SCORE, adjustments);
    assert!((replayed - score).abs() < 1e-9, "{replayed} != {score}");
    let summed = BASE_SCORE + adjustments.iter().map(|a| a.impact).sum::<f64>();
    assert!((summed - score).abs() < 1e-9, "{summed} != {score}");
    assert!(score.is_finite() && (0.0..=100.0).contains(&score));
}

#[tokio::test]
async fn golden_scores_through_http() {
    let app = test_app(no_warmup());
    let batch = json!({ "snapshots": golden_snapshots() });
    let (status, body) = app.post_json("/v1/telemetry", &batch).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["accepted"], 3);
    app.clock.advance(500);
    let (status, body) = app
        .post(
            "/v1/score",
            r#"{"key":"user:12345:profile","candidates":["W3","W2","W1"],"explain":"full"}"#,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let scores = body["scores"].as_array().expect("scores");
    let by_id = |id: &str| {
        scores
            .iter()
            .find(|s| s["worker_id"] == id)
            .expect(id)
            .clone()
    };
    assert_eq!(by_id("W1")["rule_score"], 96.25);
    assert_eq!(by_id("W2")["rule_score"], 70.0);
    assert_eq!(by_id("W3")["rule_score"], 47.8);
    assert_eq!(body["ranking"], json!(["W2", "W1", "W3"]));
    let w1 = by_id("W1");
    assert_eq!(w1["adjustments"][0]["code"], "rtt_p99_high");
    assert_eq!(w1["adjustments"][0]["impact"], -3.75);
    assert_eq!(
        w1["adjustments"][0]["reason"],
        "RTT p99 12.5 ms is 25% above the 10 ms baseline"
    );
    assert_eq!(w1["features"].as_array().map(Vec::len), Some(42));
    let w2 = by_id("W2");
    assert_eq!(w2["adjustments"][0]["kind"], "multiply");
    assert_eq!(w2["adjustments"][0]["factor"], 0.7);
    for s in scores {
        let adj: Vec<Value> = s["adjustments"].as_array().cloned().unwrap_or_default();
        let sum = |rule_only: bool| {
            100.0
                + adj
                    .iter()
                    .filter(|a| !rule_only || a["stage"] == "rule")
                    .map(|a| a["impact"].as_f64().unwrap_or(f64::NAN))
                    .sum::<f64>()
        };
        let rule = s["rule_score"].as_f64().expect("number");
        assert!((sum(true) - rule).abs() < 1e-9, "{s}");
        let fin = s["final_score"].as_f64().expect("number");
        assert!((sum(false) - fin).abs() < 1e-9, "{s}");
        assert!((0.0..=100.0).contains(&fin), "{s}");
    }
}

#[test]
fn invariant_holds_for_many_random_workers() {
    use std::collections::hash_map::DefaultHasher;
    use std::hash::{Hash, Hasher};
    // Deterministic pseudo-random values (a hash of the index) spanning every rule.
    let val = |i: u64, salt: u64| {
        let mut h = DefaultHasher::new();
        (i, salt).hash(&mut h);
        (h.finish() % 10_000) as f64 / 10_000.0
    };
    let mut cfg = no_warmup();
    cfg.scoring.warmup_ms = 60_000;
    let engine = scorer_engine::Engine::new(cfg);
    let mut batch = Vec::new();
    for i in 0..300u64 {
        let mut s = Snapshot::new(format!("w{i}"), WALL);
        s.cpu_usage = val(i, 1);
        s.rtt_ms_avg = val(i, 2) * 50.0;
        s.rtt_ms_p99 = s.rtt_ms_avg + val(i, 3) * 200.0;
        s.error_rate = val(i, 4) * 0.2;
        s.queue_depth = (val(i, 5) * 60.0) as u32;
        s.compacting = val(i, 6) > 0.7;
        s.under_repair = val(i, 7) > 0.8;
        s.mem_available_ratio = (val(i, 8) > 0.5).then(|| val(i, 9));
        s.disk_io_await_ms = (val(i, 10) > 0.5).then(|| val(i, 11) * 300.0);
        s.net_loss_rate = (val(i, 12) > 0.5).then(|| val(i, 13) * 0.1);
        s.cache_hit_rate = (val(i, 14) > 0.5).then(|| val(i, 15));
        s.memtable_bytes = (val(i, 16) > 0.5).then(|| (val(i, 17) * 4e9) as u64);
        batch.push(s);
    }
    // The last worker is as bad as it gets, so the clamp is exercised.
    let worst = &mut batch[299];
    (
        worst.cpu_usage,
        worst.rtt_ms_p99,
        worst.error_rate,
        worst.queue_depth,
    ) = (1.0, 500.0, 1.0, 99);
    worst.compacting = true;
    worst.under_repair = true;
    worst.disk_io_await_ms = Some(900.0);
    engine.ingest(&batch, 1_000, WALL).expect("valid");
    let req = ScoreRequest::new("order:7:x", (0..300).map(|i| format!("w{i}")).collect());
    let ctx = RequestContext {
        request_type: Some(scorer_core::scoring::RequestType::Put),
        ..RequestContext::default()
    };
    let resp = engine
        .score(&req, &ctx, 5_000, "d".into(), &mut rng())
        .expect("scored");
    assert!(resp.scores.iter().all(|s| s.eligible), "all alive at 4 s");
    assert_eq!(resp.scores.len(), 300);
    let mut clamped = 0;
    for s in &resp.scores {
        assert_invariant(s);
        clamped += usize::from(s.adjustments.iter().any(|a| a.code == "clamp"));
        assert!(s.observation.iter().all(|x| x.is_finite()));
    }
    assert!(clamped > 0, "the sample must exercise the clamp");
}

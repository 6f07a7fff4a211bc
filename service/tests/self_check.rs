//! The scorer watching itself in `/metrics`: the final-score and latency
//! histograms, and the rank correlation of the pick's expected against
//! observed latency, which falls when the scores stop predicting outcomes.

mod common;

use axum::http::StatusCode;
use common::{TestApp, metric_value, no_warmup, test_app};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use scorer_core::clock::Clock;
use serde_json::json;

const WORKERS: usize = 8;

async fn report(app: &TestApp) {
    let snaps: Vec<_> = (0..WORKERS)
        .map(|i| {
            json!({"worker_id": format!("w{i}"), "timestamp_ms": app.clock.wall_ms(),
                   "cpu_usage": 0.1 + 0.1 * i as f64, "queue_depth": 4 * i,
                   "rtt_ms_avg": 1.0 + i as f64, "rtt_ms_p99": 2.0 + 2.0 * i as f64, "error_rate": 0.0})
        })
        .collect();
    let (s, b) = app
        .post_json("/v1/telemetry", &json!({"snapshots": snaps}))
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
}

/// `rounds` decisions in batches of 24 held open together (so that the
/// outstanding picks spread them over the workers), each then answered
/// with `latency(worker index, its outstanding picks when picked)`.
async fn run(app: &TestApp, rounds: usize, mut latency: impl FnMut(usize, u64) -> f64) {
    let candidates: Vec<String> = (0..WORKERS).map(|i| format!("w{i}")).collect();
    let mut open = Vec::new();
    for i in 0..rounds {
        if i % 100 == 0 {
            app.clock.advance(100);
            report(app).await;
        }
        let body = json!({"key": format!("user:{i}"), "candidates": candidates, "seed": i,
                          "explain": "full"});
        let (s, a) = app.post_json("/v1/score", &body).await;
        assert_eq!(s, StatusCode::OK, "{a}");
        let pick = a["pick"].as_str().expect("a pick").to_owned();
        let index: usize = pick[1..].parse().expect("w<i>");
        let ahead = a["scores"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["worker_id"] == pick.as_str()))
            .and_then(|s| s["outstanding"].as_u64())
            .expect("the pick's outstanding");
        let ms = latency(index, ahead);
        open.push(json!({"decision_id": a["decision_id"], "worker_id": pick,
                         "latency_ms": ms, "success": true}));
        if open.len() == 24 {
            for fb in open.drain(..) {
                assert_eq!(app.post_json("/v1/feedback", &fb).await.0, StatusCode::OK);
            }
        }
    }
    for fb in open.drain(..) {
        assert_eq!(app.post_json("/v1/feedback", &fb).await.0, StatusCode::OK);
    }
}

#[tokio::test]
async fn the_rank_correlation_falls_when_the_scores_stop_predicting_outcomes() {
    let app = test_app(no_warmup());
    report(&app).await;
    let text = app.metrics().await;
    assert_eq!(
        metric_value(&text, "scorer_self_check_window_outcomes"),
        Some(0.0)
    );
    assert!(
        !text.contains("scorer_self_check_rank_correlation"),
        "absent before 64 outcomes"
    );

    // Honest: a worker answers in its reported service time for each pick
    // ahead of this one, and the busier it reports itself the slower.
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    run(&app, 1_100, |i, ahead| {
        (1.0 + 2.0 * i as f64) * (1 + ahead) as f64 * rng.random_range(0.8..1.2)
    })
    .await;
    let text = app.metrics().await;
    let honest = metric_value(&text, "scorer_self_check_rank_correlation").expect("a gauge");
    assert!(honest > 0.5, "honest inputs: rho = {honest}");
    assert_eq!(
        metric_value(&text, "scorer_final_score_count"),
        Some((1_100 * WORKERS) as f64)
    );
    assert_eq!(
        metric_value(&text, "scorer_pick_observed_latency_seconds_count"),
        Some(1_100.0)
    );
    assert!(
        text.contains("scorer_final_score_bucket{le=\"100.0\"}"),
        "{text}"
    );

    // The inputs lie: latency no longer follows what the workers report.
    run(&app, 1_100, |_, _| rng.random_range(1.0..15.0)).await;
    let lying =
        metric_value(&app.metrics().await, "scorer_self_check_rank_correlation").expect("a gauge");
    assert!(
        lying < 0.2 && lying < honest - 0.4,
        "honest {honest}, lying {lying}"
    );
}

//! What an operator reads in the log: a buggy telemetry reporter named by
//! its worker id and first problem, at most one line per interval.

mod common;

use axum::http::StatusCode;
use common::{WALL, capture_logs, no_warmup, test_app};
use serde_json::json;
use service::http::warn_limit::DEFAULT_WARN_INTERVAL_MS;

#[tokio::test]
async fn rejected_telemetry_is_warned_with_its_worker_and_problem_rate_limited() {
    let t = test_app(no_warmup());
    let (_guard, logs) = capture_logs(tracing::Level::WARN);
    let snap = |id: &str, error_rate: f64| {
        json!({"worker_id": id, "timestamp_ms": WALL, "cpu_usage": 0.2, "queue_depth": 2,
               "rtt_ms_avg": 1.0, "rtt_ms_p99": 6.0, "error_rate": error_rate, "cache_hit_rate": 0.9})
    };
    let bad = json!({"snapshots": [snap("good", 0.0), snap("kv-7", 2.0)]});
    for _ in 0..3 {
        let (s, _) = t.post_json("/v1/telemetry", &bad).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    }
    let text = logs.text();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("telemetry rejected"))
        .collect();
    assert_eq!(lines.len(), 1, "one line per interval: {text}");
    assert!(
        lines[0].contains("worker_id=\"kv-7\"") || lines[0].contains("worker_id=kv-7"),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains("error_rate") && lines[0].contains("held_back=0"),
        "{}",
        lines[0]
    );

    t.clock.advance(DEFAULT_WARN_INTERVAL_MS);
    let (s, _) = t.post("/v1/telemetry", "{not json").await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let text = logs.text();
    let last = text
        .lines()
        .rfind(|l| l.contains("telemetry rejected"))
        .unwrap_or_default();
    assert!(
        last.contains("held_back=2") && last.contains("worker_id=\"-\"")
            || last.contains("worker_id=-"),
        "{last}"
    );
}

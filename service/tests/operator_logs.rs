//! What an operator reads in the log: a buggy telemetry reporter named by
//! its worker id and first problem, at most one line per interval.

mod common;

use axum::http::StatusCode;
use common::{WALL, capture_logs, no_warmup, test_app};
use scorer_core::clock::Clock;
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

/// The fields of a `key=value` log line as `tracing`'s text format writes
/// them: a quoted value runs to its closing unescaped quote, so text inside
/// it cannot start a field.
fn fields(line: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(eq) = rest.find('=') {
        let key = rest[..eq].rsplit(' ').next().unwrap_or_default().to_owned();
        let after = &rest[eq + 1..];
        let (value, tail) = if let Some(quoted) = after.strip_prefix('"') {
            let mut end = quoted.len();
            let mut escaped = false;
            for (i, c) in quoted.char_indices() {
                match c {
                    '\\' if !escaped => escaped = true,
                    '"' if !escaped => {
                        end = i;
                        break;
                    }
                    _ => escaped = false,
                }
            }
            (
                format!("\"{}\"", &quoted[..end]),
                quoted.get(end + 1..).unwrap_or(""),
            )
        } else {
            let end = after.find(' ').unwrap_or(after.len());
            (after[..end].to_owned(), &after[end..])
        };
        out.push((key, value));
        rest = tail;
    }
    out
}

#[tokio::test]
async fn an_override_reason_cannot_forge_a_log_field() {
    let t = test_app(no_warmup());
    let snap = json!({"snapshots": [{"worker_id": "w1", "timestamp_ms": WALL, "cpu_usage": 0.2,
        "queue_depth": 2, "rtt_ms_avg": 1.0, "rtt_ms_p99": 6.0, "error_rate": 0.0}]});
    let (s, b) = t.post_json("/v1/telemetry", &snap).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let (_guard, logs) = capture_logs(tracing::Level::WARN);
    let put = |reason: &str| {
        axum::http::Request::put("/v1/admin/workers/w1/override")
            .header("content-type", "application/json")
            .body(axum::body::Body::from(
                json!({"kind": "drain", "ttl_ms": 1_000, "reason": reason}).to_string(),
            ))
            .expect("request")
    };
    let (s, b) = t.send(put("x\nset_by=root")).await;
    assert_eq!(
        s,
        StatusCode::UNPROCESSABLE_ENTITY,
        "a newline is refused: {b}"
    );
    assert!(!logs.text().contains("override set"), "{}", logs.text());

    for reason in ["x set_by=root", "x\" set_by=\"root"] {
        let (s, b) = t.send(put(reason)).await;
        assert_eq!(s, StatusCode::OK, "{b}");
    }
    t.clock.advance(2_000);
    t.state.engine.forget_silent(t.clock.monotonic_ms());
    let text = logs.text();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("worker override set") || l.contains("worker override expired"))
        .collect();
    assert_eq!(lines.len(), 3, "two sets, one expiry: {text}");
    for (line, reason) in lines.iter().zip([
        r#""x set_by=root""#,
        r#""x\" set_by=\"root""#,
        r#""x\" set_by=\"root""#,
    ]) {
        let f = fields(line);
        let of = |k: &str| {
            f.iter()
                .filter(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
                .collect::<Vec<_>>()
        };
        assert_eq!(of("set_by"), [r#""anonymous""#], "{line}");
        assert_eq!(of("reason"), [reason], "{line}");
        assert_eq!(of("worker"), [r#""w1""#], "{line}");
    }
}

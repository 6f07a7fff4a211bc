//! Every rejection reason of `POST /v1/telemetry` and `POST /v1/score`: a
//! JSON error naming the problem, and no change of state.

mod common;

use axum::http::StatusCode;
use common::{WALL, no_warmup, test_app};
use serde_json::{Value, json};

fn snap(id: &str, ts: u64) -> Value {
    json!({"worker_id": id, "timestamp_ms": ts, "cpu_usage": 0.5, "queue_depth": 3,
           "rtt_ms_avg": 1.0, "rtt_ms_p99": 4.0, "error_rate": 0.0})
}

/// The worker table as served, to prove a rejection changed nothing.
async fn workers(app: &common::TestApp) -> Value {
    app.get("/v1/workers").await.1
}

async fn seeded() -> common::TestApp {
    let app = test_app(no_warmup());
    let (s, b) = app
        .post_json("/v1/telemetry", &json!({"snapshots": [snap("w1", WALL)]}))
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    app
}

async fn assert_rejected(
    app: &common::TestApp,
    body: &str,
    status: StatusCode,
    code: &str,
) -> Value {
    let before = workers(app).await;
    let (s, b) = app.post("/v1/telemetry", body).await;
    assert_eq!(s, status, "{body} → {b}");
    assert_eq!(b["error"]["code"], code, "{b}");
    assert!(
        b["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
    assert_eq!(
        workers(app).await,
        before,
        "a rejected batch must change nothing"
    );
    b
}

#[tokio::test]
async fn nan_and_infinity_tokens_are_malformed_json() {
    let app = seeded().await;
    for token in ["NaN", "Infinity", "-Infinity", "1e999"] {
        let body = format!(
            r#"{{"snapshots":[{{"worker_id":"w1","timestamp_ms":{},"cpu_usage":{token},"queue_depth":1,"rtt_ms_avg":1,"rtt_ms_p99":2,"error_rate":0}}]}}"#,
            WALL + 1
        );
        let before = workers(&app).await;
        let (s, b) = app.post("/v1/telemetry", &body).await;
        assert!(
            s == StatusCode::BAD_REQUEST || s == StatusCode::UNPROCESSABLE_ENTITY,
            "{token}: {s} {b}"
        );
        assert!(b["error"]["code"].is_string(), "{b}");
        assert_eq!(workers(&app).await, before);
    }
    let (s, b) = app.post("/v1/telemetry", "{not json").await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(b["error"]["code"], "malformed_json");
}

#[tokio::test]
async fn negative_and_out_of_range_values_name_the_field() {
    let app = seeded().await;
    let cases = [
        ("rtt_ms_avg", json!(-1.0)),
        ("rtt_ms_p99", json!(-0.5)),
        ("error_rate", json!(1.5)),
        ("cpu_usage", json!(4.5)),
        ("cpu_usage", json!(-0.1)),
        ("cache_hit_rate", json!(2.0)),
        ("net_loss_rate", json!(-0.1)),
        ("disk_io_await_ms", json!(-3.0)),
        ("capacity", json!(0.0)),
        ("used_memory_bytes", json!((1u64 << 50) + 1)),
        ("maxmemory_bytes", json!(0)),
        ("maxmemory_bytes", json!(u64::MAX)),
        ("evicted_keys_per_s", json!(-1.0)),
        ("evicted_keys_per_s", json!(1e10)),
    ];
    for (field, value) in cases {
        let mut s = snap("w2", WALL);
        s[field] = value.clone();
        let body = json!({"snapshots": [snap("w3", WALL), s]}).to_string();
        let b = assert_rejected(
            &app,
            &body,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_telemetry",
        )
        .await;
        let d = &b["error"]["details"][0];
        assert_eq!(d["field"], field, "{value}: {b}");
        assert_eq!(d["index"], 1);
        assert_eq!(d["worker_id"], "w2");
    }
    // A negative queue depth does not fit u32: the type rejects it.
    let mut s = snap("w2", WALL);
    s["queue_depth"] = json!(-1);
    let b = assert_rejected(
        &app,
        &json!({"snapshots": [s]}).to_string(),
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_body",
    )
    .await;
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("queue_depth"),
        "{b}"
    );
}

#[tokio::test]
async fn stale_equal_and_future_timestamps_are_rejected() {
    let app = seeded().await;
    for ts in [WALL, WALL - 1] {
        let body = json!({"snapshots": [snap("w1", ts)]}).to_string();
        let b = assert_rejected(
            &app,
            &body,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_telemetry",
        )
        .await;
        assert_eq!(b["error"]["details"][0]["code"], "stale_timestamp");
    }
    let body = json!({"snapshots": [snap("w9", WALL + 5_001)]}).to_string();
    let b = assert_rejected(
        &app,
        &body,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_telemetry",
    )
    .await;
    assert_eq!(b["error"]["details"][0]["code"], "future_timestamp");
    // Within the skew is fine.
    let (s, _) = app
        .post_json(
            "/v1/telemetry",
            &json!({"snapshots": [snap("w9", WALL + 5_000)]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn duplicate_ids_unknown_fields_and_empty_batches() {
    let app = seeded().await;
    let body = json!({"snapshots": [snap("w5", WALL), snap("w5", WALL + 1)]}).to_string();
    let b = assert_rejected(
        &app,
        &body,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_telemetry",
    )
    .await;
    assert_eq!(b["error"]["details"][0]["code"], "duplicate_worker");

    let mut s = snap("w6", WALL);
    s["cpu_usge"] = json!(0.1);
    let b = assert_rejected(
        &app,
        &json!({"snapshots": [s]}).to_string(),
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_body",
    )
    .await;
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("cpu_usge"),
        "{b}"
    );

    let b = assert_rejected(
        &app,
        r#"{"snapshots":[],"extra":1}"#,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_body",
    )
    .await;
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("extra")
    );
    assert_rejected(
        &app,
        r#"{"snapshots":[]}"#,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_telemetry",
    )
    .await;

    let long = "x".repeat(129);
    let body = json!({"snapshots": [snap(&long, WALL)]}).to_string();
    let b = assert_rejected(
        &app,
        &body,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_telemetry",
    )
    .await;
    assert_eq!(b["error"]["details"][0]["field"], "worker_id");
}

#[tokio::test]
async fn oversized_body_is_413_with_json() {
    let mut cfg = no_warmup();
    cfg.server.max_body_bytes = 1024;
    let app = test_app(cfg);
    let many: Vec<Value> = (0..50).map(|i| snap(&format!("w{i}"), WALL)).collect();
    let body = json!({"snapshots": many}).to_string();
    assert!(body.len() > 1024);
    let (s, b) = app.post("/v1/telemetry", &body).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{b}");
    assert_eq!(b["error"]["code"], "body_too_large");
    assert_eq!(
        b["error"]["message"],
        "request body is over server.max_body_bytes (1024 bytes)"
    );
    assert_eq!(app.get("/v1/workers").await.1["workers"], json!([]));
}

#[tokio::test]
async fn unclosed_deep_nesting_is_reported_as_json_syntax() {
    let app = seeded().await;
    let (s, b) = app.post("/v1/telemetry", &"[".repeat(100_000)).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    assert_eq!(b["error"]["code"], "malformed_json");
    let message = b["error"]["message"].as_str().unwrap_or_default();
    assert!(!message.contains("invalid type"), "{message}");
}

#[tokio::test]
async fn json_suffix_media_types_need_a_subtype() {
    let app = seeded().await;
    let body = r#"{"key":"k","candidates":["w1"]}"#;
    for (ct, want) in [
        ("application/vnd.router+json", StatusCode::OK),
        ("application/json; charset=utf-8", StatusCode::OK),
        ("application/+json", StatusCode::UNSUPPORTED_MEDIA_TYPE),
        ("application/jsonx", StatusCode::UNSUPPORTED_MEDIA_TYPE),
    ] {
        let (s, b) = app
            .send(
                axum::http::Request::post("/v1/score")
                    .header("content-type", ct)
                    .body(axum::body::Body::from(body))
                    .expect("request"),
            )
            .await;
        assert_eq!(s, want, "{ct}: {b}");
    }
}

#[tokio::test]
async fn too_many_workers_is_429() {
    let mut cfg = no_warmup();
    cfg.telemetry.max_workers = 1;
    let app = test_app(cfg);
    let (s, _) = app
        .post_json("/v1/telemetry", &json!({"snapshots": [snap("a", WALL)]}))
        .await;
    assert_eq!(s, StatusCode::OK);
    let (s, b) = app
        .post_json("/v1/telemetry", &json!({"snapshots": [snap("b", WALL)]}))
        .await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(b["error"]["code"], "too_many_workers");
}

#[tokio::test]
async fn clamped_cpu_is_accepted_with_a_warning() {
    let app = test_app(no_warmup());
    let mut s = snap("w1", WALL);
    s["cpu_usage"] = json!(1.8);
    let (st, b) = app
        .post_json("/v1/telemetry", &json!({"snapshots": [s]}))
        .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(b["warnings"][0]["field"], "cpu_usage");
    let w = app.get("/v1/workers").await.1;
    assert_eq!(w["workers"][0]["smoothed"]["cpu_usage"], 1.0);
    assert_eq!(w["workers"][0]["cpu_clamped"], true);
}

#[tokio::test]
async fn bad_score_requests_are_422_and_never_500() {
    let app = seeded().await;
    let cases = [
        (r#"{"key":"k","candidates":[]}"#, "invalid_request"),
        (r#"{"key":"","candidates":["w1"]}"#, "invalid_request"),
        (r#"{"key":"k","candidates":[""]}"#, "invalid_request"),
        (
            r#"{"key":"k","candidates":["w1","a\u0001"]}"#,
            "invalid_request",
        ),
        (
            r#"{"key":"k","candidates":["w1","\ufeffw1"]}"#,
            "invalid_request",
        ),
        (r#"{"key":"k","candidates":["w1 "]}"#, "invalid_request"),
        (
            r#"{"key":"k","candidates":["w1"],"bogus":1}"#,
            "invalid_body",
        ),
        (
            r#"{"key":"k","candidates":["w1"],"context":{"request_type":"POST"}}"#,
            "invalid_body",
        ),
        (
            r#"{"key":"k","candidates":["w1"],"context":{"timeout_ms":-5}}"#,
            "invalid_body",
        ),
        (
            r#"{"key":"k","candidates":["w1"],"context":{"batch_size":0}}"#,
            "invalid_request",
        ),
        (r#"{"candidates":["w1"]}"#, "invalid_body"),
    ];
    for (body, code) in cases {
        let (s, b) = app.post("/v1/score", body).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{body} → {b}");
        assert_eq!(b["error"]["code"], code, "{body} → {b}");
    }
    let many: Vec<String> = (0..1025).map(|i| format!("c{i}")).collect();
    let (s, b) = app
        .post_json("/v1/score", &json!({"key": "k", "candidates": many}))
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{b}");
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("1025")
    );
}

#[tokio::test]
async fn bad_context_headers_are_422() {
    let app = seeded().await;
    for (h, v) in [
        ("x-request-type", "FETCH"),
        ("x-timeout-ms", "soon"),
        ("x-batch-size", "-1"),
    ] {
        let req = axum::http::Request::post("/v1/score")
            .header("content-type", "application/json")
            .header(h, v)
            .body(axum::body::Body::from(r#"{"key":"k","candidates":["w1"]}"#))
            .expect("request");
        let (s, b) = app.send(req).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{h}: {b}");
        assert!(
            b["error"]["message"]
                .as_str()
                .unwrap_or("")
                .to_lowercase()
                .contains(h),
            "{b}"
        );
    }
}

#[tokio::test]
async fn a_deadline_beyond_a_day_is_refused_and_enters_no_state() {
    let app = seeded().await;
    for (body, header) in [
        (
            r#"{"key":"k","candidates":["w1"],"context":{"timeout_ms":18446744073709551615}}"#,
            None,
        ),
        (r#"{"key":"k","candidates":["w1"]}"#, Some("86400001")),
    ] {
        let mut req =
            axum::http::Request::post("/v1/score").header("content-type", "application/json");
        if let Some(v) = header {
            req = req.header("x-timeout-ms", v);
        }
        let req = req.body(axum::body::Body::from(body)).expect("request");
        let (s, b) = app.send(req).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{b}");
        let msg = b["error"]["message"].as_str().unwrap_or("");
        assert!(
            msg.contains("`context.timeout_ms` must be at most 86400000 ms"),
            "{msg}"
        );
    }
    assert_eq!(
        workers(&app).await["workers"][0]["outstanding"],
        0,
        "no pick was made"
    );
    let ok = r#"{"key":"k","candidates":["w1"],"context":{"timeout_ms":86400000}}"#;
    assert_eq!(app.post("/v1/score", ok).await.0, StatusCode::OK);
}

#[tokio::test]
async fn wrong_method_is_json_405() {
    let app = seeded().await;
    let (s, b) = app.get("/v1/score").await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(b["error"]["code"], "method_not_allowed");
}

#[tokio::test]
async fn wrong_json_types_are_422_not_400() {
    let app = seeded().await;
    for body in [
        r#"{"key":"k","candidates":["w1"],"context":{"request_type":1}}"#,
        r#"{"key":"k","candidates":["w1"],"context":[1]}"#,
        r#"{"key":5,"candidates":["w1"]}"#,
    ] {
        let (s, b) = app.post("/v1/score", body).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{body} → {b}");
        assert_eq!(b["error"]["code"], "invalid_body");
    }
    let (s, b) = app
        .post("/v1/score", r#"{"key":"k","candidates":["w1"]} trailing"#)
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
}

#[tokio::test]
async fn huge_invalid_batches_list_at_most_100_problems() {
    let app = seeded().await;
    let many: Vec<Value> = (0..500)
        .map(|i| {
            let mut s = snap(&format!("x{i}"), WALL);
            s["error_rate"] = json!(-1.0);
            s
        })
        .collect();
    let (s, b) = app
        .post_json("/v1/telemetry", &json!({"snapshots": many}))
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(b["error"]["details"].as_array().map(Vec::len), Some(100));
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap_or("")
            .starts_with("500 problems"),
        "{b}"
    );
}

#[tokio::test]
async fn workers_are_paged() {
    let app = test_app(no_warmup());
    let many: Vec<Value> = (0..25).map(|i| snap(&format!("w{i:02}"), WALL)).collect();
    app.post_json("/v1/telemetry", &json!({"snapshots": many}))
        .await;
    let (s, b) = app.get("/v1/workers?limit=10&offset=20").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(b["total"], 25);
    let ids: Vec<&str> = b["workers"]
        .as_array()
        .map(|a| a.iter().filter_map(|w| w["worker_id"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(ids, ["w20", "w21", "w22", "w23", "w24"]);
    for bad in ["limit=0", "limit=10001", "offset=-1", "bogus=1"] {
        let (s, b) = app.get(&format!("/v1/workers?{bad}")).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {b}");
    }
}

#[tokio::test]
async fn tiny_capacity_and_control_characters_in_region_are_rejected() {
    let app = seeded().await;
    let mut s = snap("w7", WALL);
    s["capacity"] = json!(5e-324);
    let b = assert_rejected(
        &app,
        &json!({"snapshots": [s]}).to_string(),
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_telemetry",
    )
    .await;
    assert_eq!(b["error"]["details"][0]["field"], "capacity");
    let (s, _) = app
        .post(
            "/v1/score",
            r#"{"key":"k","candidates":["w1"],"context":{"client_region":"a\u0000b"}}"#,
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
}

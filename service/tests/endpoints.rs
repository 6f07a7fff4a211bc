//! Behaviour of the v1 endpoints beyond validation: unknown and dead
//! workers, context from headers, warm-up, readiness, schema.

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::{WALL, no_warmup, test_app};
use scorer_engine::config::Config;
use serde_json::{Value, json};

fn snap(id: &str, ts: u64) -> Value {
    json!({"worker_id": id, "timestamp_ms": ts, "cpu_usage": 0.2, "queue_depth": 1,
           "rtt_ms_avg": 1.0, "rtt_ms_p99": 4.0, "error_rate": 0.0})
}

fn score_of<'a>(body: &'a Value, id: &str) -> &'a Value {
    body["scores"]
        .as_array()
        .and_then(|a| a.iter().find(|s| s["worker_id"] == id))
        .unwrap_or_else(|| panic!("{id} not in {body}"))
}

#[tokio::test]
async fn unknown_workers_are_ineligible_and_duplicates_collapse() {
    let app = test_app(no_warmup());
    app.post_json("/v1/telemetry", &json!({"snapshots": [snap("w1", WALL)]}))
        .await;
    let (s, b) = app
        .post(
            r#"/v1/score"#,
            r#"{"key":"user:1","explain":true,"candidates":["ghost","w1","w1","ghost"]}"#,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["scores"].as_array().map(Vec::len), Some(2));
    let ghost = score_of(&b, "ghost");
    assert_eq!(ghost["eligible"], false);
    assert_eq!(ghost["reason"], "unknown_worker");
    assert_eq!(ghost["rule_score"], 0.0);
    assert_eq!(b["ranking"], json!(["w1", "ghost"]));
    assert!(
        score_of(&b, "w1").get("features").is_none(),
        "features only with explain"
    );
}

#[tokio::test]
async fn worker_dies_after_dead_after_ms_on_the_server_clock() {
    let app = test_app(no_warmup());
    // The reporter's clock is an hour behind: freshness must not care.
    app.post_json(
        "/v1/telemetry",
        &json!({"snapshots": [snap("w1", WALL - 3_600_000)]}),
    )
    .await;
    app.clock.advance(10_000);
    let (_, b) = app
        .post(
            "/v1/score",
            r#"{"key":"k","explain":true,"candidates":["w1"]}"#,
        )
        .await;
    assert_eq!(
        score_of(&b, "w1")["eligible"],
        true,
        "10 s old is still alive"
    );
    app.clock.advance(1);
    let (s, b) = app
        .post(
            "/v1/score",
            r#"{"key":"k","explain":true,"candidates":["w1","ghost"]}"#,
        )
        .await;
    assert_eq!(
        s,
        StatusCode::SERVICE_UNAVAILABLE,
        "all dead or unknown: {b}"
    );
    assert_eq!(b["error"]["code"], "no_eligible_workers");
    app.post_json("/v1/telemetry", &json!({"snapshots": [snap("w2", WALL)]}))
        .await;
    let (_, b) = app
        .post(
            "/v1/score",
            r#"{"key":"k","explain":true,"candidates":["w1","w2"]}"#,
        )
        .await;
    assert_eq!(b["pick"], "w2");
    let w1 = score_of(&b, "w1");
    assert_eq!(w1["eligible"], false);
    assert_eq!(w1["reason"], "heartbeat_dead");
    assert_eq!(w1["rule_score"], 0.0);
    assert_eq!(w1["probability"], 0.0);
    assert_eq!(w1["adjustments"][0]["code"], "heartbeat_dead");
}

#[tokio::test]
async fn request_type_header_weighs_disk_for_writes() {
    let app = test_app(no_warmup());
    let mut s = snap("w1", WALL);
    s["disk_io_await_ms"] = json!(100.0);
    app.post_json("/v1/telemetry", &json!({"snapshots": [s]}))
        .await;
    let send = |h: Option<&'static str>| {
        let mut r = Request::post("/v1/score").header("content-type", "application/json");
        if let Some(v) = h {
            r = r.header("X-Request-Type", v);
        }
        r.body(Body::from(
            r#"{"key":"k","explain":true,"candidates":["w1"]}"#,
        ))
        .expect("request")
    };
    let (_, read) = app.send(send(None)).await;
    let (_, write) = app.send(send(Some("PUT"))).await;
    // (100 − 50) / 50 × 5 = 5 points for reads, ×2 for writes.
    assert_eq!(score_of(&read, "w1")["rule_score"], 95.0);
    assert_eq!(score_of(&write, "w1")["rule_score"], 90.0);
    // The body's context wins over the header.
    let r = Request::post("/v1/score")
        .header("content-type", "application/json")
        .header("X-Request-Type", "PUT")
        .body(Body::from(
            r#"{"key":"k","explain":true,"candidates":["w1"],"context":{"request_type":"GET"}}"#,
        ))
        .expect("request");
    let (_, b) = app.send(r).await;
    assert_eq!(score_of(&b, "w1")["rule_score"], 95.0);
}

#[tokio::test]
async fn warmup_counts_from_first_registration_not_last_heartbeat() {
    let app = test_app(Config::default()); // warmup_ms = 30_000, 10 points
    app.post_json("/v1/telemetry", &json!({"snapshots": [snap("w1", WALL)]}))
        .await;
    app.clock.advance(15_000);
    app.post_json(
        "/v1/telemetry",
        &json!({"snapshots": [snap("w1", WALL + 15_000)]}),
    )
    .await;
    let (_, b) = app
        .post(
            "/v1/score",
            r#"{"key":"k","explain":true,"candidates":["w1"]}"#,
        )
        .await;
    let w1 = score_of(&b, "w1");
    assert_eq!(w1["rule_score"], 95.0, "half the warm-up left: 5 points");
    assert_eq!(w1["adjustments"][0]["code"], "warming_up");
    app.clock.advance(15_000);
    app.post_json(
        "/v1/telemetry",
        &json!({"snapshots": [snap("w1", WALL + 30_000)]}),
    )
    .await;
    let (_, b) = app
        .post(
            "/v1/score",
            r#"{"key":"k","explain":true,"candidates":["w1"]}"#,
        )
        .await;
    assert_eq!(score_of(&b, "w1")["rule_score"], 100.0);
    let (_, w) = app.get("/v1/workers").await;
    assert_eq!(w["workers"][0]["warming_up"], false);
    assert_eq!(w["workers"][0]["reports"], 3);
}

#[tokio::test]
async fn cache_memory_and_evictions_are_accepted_and_not_scored() {
    let app = test_app(no_warmup());
    let mut s = snap("w1", WALL);
    s["used_memory_bytes"] = json!(4_190_000u64);
    s["maxmemory_bytes"] = json!(4_194_304u64);
    s["evicted_keys_per_s"] = json!(850.0);
    let (st, b) = app
        .post_json(
            "/v1/telemetry",
            &json!({"snapshots": [s, snap("w2", WALL)]}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{b}");
    let (_, b) = app
        .post(
            "/v1/score",
            r#"{"key":"k","explain":true,"candidates":["w1","w2"],"policy":"none"}"#,
        )
        .await;
    let (w1, w2) = (score_of(&b, "w1"), score_of(&b, "w2"));
    assert_eq!(w1["rule_score"], w2["rule_score"], "{b}");
    assert_eq!(w1["final_score"], w2["final_score"], "{b}");
    assert_eq!(w1["adjustments"], w2["adjustments"], "{b}");
}

#[tokio::test]
async fn optional_signals_deduct_only_when_reported() {
    let app = test_app(no_warmup());
    let mut s = snap("w1", WALL);
    s["cache_hit_rate"] = json!(0.5);
    s["mem_available_ratio"] = json!(0.05);
    s["net_loss_rate"] = json!(0.03);
    s["memtable_bytes"] = json!(3u64 << 30);
    app.post_json(
        "/v1/telemetry",
        &json!({"snapshots": [s, snap("w2", WALL)]}),
    )
    .await;
    let (_, b) = app
        .post(
            "/v1/score",
            r#"{"key":"k","explain":true,"candidates":["w1","w2"]}"#,
        )
        .await;
    // The rule stage's lines (the cost stage follows with the queue).
    let codes: Vec<&str> = score_of(&b, "w1")["adjustments"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|x| x["stage"] == "rule")
                .filter_map(|x| x["code"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        codes,
        ["memory_low", "network_loss", "cache_cold", "memtable_large"]
    );
    // 100 − 6.666667 (mem) − 4 (net) − 4 (cache) − 5 (memtable)
    let w1 = score_of(&b, "w1")["rule_score"]
        .as_f64()
        .unwrap_or(f64::NAN);
    assert!((w1 - 80.333333).abs() < 1e-6, "{w1}");
    assert_eq!(
        score_of(&b, "w2")["rule_score"],
        100.0,
        "never reported is not a deduction"
    );
}

#[tokio::test]
async fn readiness_follows_live_workers() {
    let app = test_app(no_warmup());
    assert_eq!(app.get("/healthz").await.0, StatusCode::OK);
    let (s, b) = app.get("/readyz").await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{b}");
    app.post_json("/v1/telemetry", &json!({"snapshots": [snap("w1", WALL)]}))
        .await;
    assert_eq!(app.get("/readyz").await.0, StatusCode::OK);
    app.clock.advance(10_001);
    assert_eq!(app.get("/readyz").await.0, StatusCode::SERVICE_UNAVAILABLE);
}

#[tokio::test]
async fn features_endpoint_serves_the_schema() {
    let app = test_app(no_warmup());
    let (s, b) = app.get("/v1/features").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(b["count"], 42);
    assert_eq!(b["hash"], scorer_core::features::schema_hash());
    let f = b["features"].as_array().expect("features");
    assert_eq!(f.len(), 42);
    assert_eq!(f[11]["name"], "rtt_ms_p99");
    assert_eq!(f[11]["unit"], "ms");
    assert_eq!(f[11]["impute"], 10.0);
}

#[tokio::test]
async fn unknown_route_is_json_404() {
    let app = test_app(no_warmup());
    let (s, b) = app.get("/v2/nothing").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(b["error"]["code"], "not_found");
}

#[tokio::test]
async fn decayed_error_rate_stops_deducting_below_the_floor() {
    let app = test_app(no_warmup());
    let mut s = snap("w1", WALL);
    s["error_rate"] = json!(1.0);
    app.post_json("/v1/telemetry", &json!({"snapshots": [s]}))
        .await;
    // EWMA 0.5: 1.0 halves with every clean report; after 10 it is ~0.00098.
    for i in 1..=10 {
        app.post_json(
            "/v1/telemetry",
            &json!({"snapshots": [snap("w1", WALL + i)]}),
        )
        .await;
    }
    let (_, b) = app
        .post(
            "/v1/score",
            r#"{"key":"k","explain":true,"candidates":["w1"],"policy":"none"}"#,
        )
        .await;
    let w1 = score_of(&b, "w1");
    assert_eq!(w1["rule_score"], 100.0, "{w1}");
    // One report earlier (0.00195) it still deducted.
    let app = test_app(no_warmup());
    let mut s = snap("w1", WALL);
    s["error_rate"] = json!(1.0);
    app.post_json("/v1/telemetry", &json!({"snapshots": [s]}))
        .await;
    for i in 1..=9 {
        app.post_json(
            "/v1/telemetry",
            &json!({"snapshots": [snap("w1", WALL + i)]}),
        )
        .await;
    }
    let (_, b) = app
        .post(
            "/v1/score",
            r#"{"key":"k","explain":true,"candidates":["w1"],"policy":"none"}"#,
        )
        .await;
    assert!(
        (score_of(&b, "w1")["rule_score"].as_f64().unwrap_or(0.0) - 99.023438).abs() < 1e-6,
        "{b}"
    );
}

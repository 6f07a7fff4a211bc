//! Whether a worker served a request from its cache, as the caller says
//! it (`cache_hit` of `POST /v1/feedback`, one outcome or a batch, and of a
//! router's outcome records), lands in the outcome's `cache_hit` column of
//! the decision log; absent, the column is null.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::AsArray;
use axum::http::StatusCode;
use common::{TestApp, WALL, no_warmup};
use scorer_core::clock::ManualClock;
use scorer_engine::Engine;
use scorer_log::{CACHE_HIT_COLUMN, DecisionLog, LogKind, read_dir};
use serde_json::{Value, json};
use service::{AppState, EngineLog, app};

fn logged_app(root: &std::path::Path) -> TestApp {
    let mut cfg = no_warmup();
    cfg.log.enabled = true;
    cfg.log.sample_rate = 1.0;
    cfg.log.dir = root.join("decisions");
    let clock = Arc::new(ManualClock::new(1_000, WALL));
    let log = DecisionLog::start(cfg.log.clone(), clock.clone()).expect("log starts");
    let state = AppState::new(Engine::new(cfg).with_log(Arc::new(log)), clock.clone());
    TestApp {
        router: app(state.clone()),
        clock,
        state,
    }
}

/// Every outcome row's `cache_hit`, by decision id.
fn logged_hits(t: &TestApp, root: &std::path::Path) -> HashMap<String, Option<bool>> {
    let log = t.state.engine.decision_log().expect("log").clone();
    log.shutdown().expect("clean close");
    let o = read_dir(&root.join("outcomes"), LogKind::Outcomes).expect("readable");
    assert!(o.skipped.is_empty(), "{:?}", o.skipped);
    let mut out = HashMap::new();
    for b in &o.batches {
        let ids = b
            .column_by_name("decision_id")
            .expect("ids")
            .as_string::<i32>();
        let hits = b
            .column_by_name(CACHE_HIT_COLUMN)
            .expect("a cache_hit column")
            .as_boolean();
        for (id, hit) in ids.iter().zip(hits.iter()) {
            out.insert(id.expect("an id").to_owned(), hit);
        }
    }
    out
}

#[tokio::test]
async fn a_feedbacks_cache_hit_lands_in_its_outcome_row() {
    let dir = tempfile::tempdir().expect("temp dir");
    let t = logged_app(dir.path());
    let snap = json!({"snapshots": [{"worker_id": "a", "timestamp_ms": WALL, "cpu_usage": 0.2,
        "queue_depth": 1, "rtt_ms_avg": 1.0, "rtt_ms_p99": 3.0, "error_rate": 0.0}]});
    assert_eq!(t.post_json("/v1/telemetry", &snap).await.0, StatusCode::OK);
    let mut ids = Vec::new();
    for i in 0..4 {
        let body = json!({"key": format!("user:{i}"), "candidates": ["a"],
                          "context": {"request_type": "GET"}});
        let (s, r) = t.post_json("/v1/score", &body).await;
        assert_eq!(s, StatusCode::OK, "{r}");
        ids.push(r["decision_id"].as_str().expect("an id").to_owned());
    }
    let fb = |id: &str, hit: Option<bool>| {
        let mut f =
            json!({"decision_id": id, "worker_id": "a", "latency_ms": 1.5, "success": true});
        if let Some(hit) = hit {
            f["cache_hit"] = json!(hit);
        }
        f
    };
    // One outcome, a hit.
    let (s, b) = t.post_json("/v1/feedback", &fb(&ids[0], Some(true))).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    // A batch: a miss, one without it, and an explicit null.
    let mut explicit = fb(&ids[3], None);
    explicit["cache_hit"] = Value::Null;
    let batch = json!({"outcomes": [fb(&ids[1], Some(false)), fb(&ids[2], None), explicit]});
    let (s, b) = t.post_json("/v1/feedback", &batch).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["accepted"], 3, "{b}");
    // Not a boolean: 422 alone, that item's error in a batch.
    let mut wrong = fb(&ids[0], None);
    wrong["cache_hit"] = json!(1);
    let (s, b) = t.post_json("/v1/feedback", &wrong).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{b}");
    let bad = json!({"outcomes": [{"decision_id": ids[0], "worker_id": "a", "latency_ms": 1.0,
                                    "success": true, "cache_hit": "yes"}]});
    let (s, b) = t.post_json("/v1/feedback", &bad).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["rejected"], 1, "{b}");

    let hits = logged_hits(&t, dir.path());
    assert_eq!(hits.len(), 4, "{hits:?}");
    assert_eq!(hits[&ids[0]], Some(true));
    assert_eq!(hits[&ids[1]], Some(false));
    assert_eq!(hits[&ids[2]], None);
    assert_eq!(hits[&ids[3]], None);
}

#[tokio::test]
async fn a_routers_reported_hit_lands_in_its_outcome_row() {
    let dir = tempfile::tempdir().expect("temp dir");
    let t = logged_app(dir.path());
    let outcome = |seq: u32, hit: Option<bool>| {
        let mut o = json!({"decision_id": format!("edge-7-{seq:016x}"), "worker_id": "w1",
                           "ts_ms": WALL, "latency_ms": 2.0, "success": true});
        if let Some(hit) = hit {
            o["cache_hit"] = json!(hit);
        }
        o
    };
    let body = json!({"router_id": "edge-7", "outcomes": [
        outcome(1, Some(true)), outcome(2, Some(false)), outcome(3, None)]});
    let (s, b) = t.post_json("/v1/router/decisions", &body).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["outcomes"]["logged"], 3, "{b}");

    let hits = logged_hits(&t, dir.path());
    assert_eq!(hits["edge-7-0000000000000001"], Some(true));
    assert_eq!(hits["edge-7-0000000000000002"], Some(false));
    assert_eq!(hits["edge-7-0000000000000003"], None);
}

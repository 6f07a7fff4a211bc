//! The score answer's `explain` levels, batch feedback, and where a score
//! call computes (inline or on the blocking pool).

mod common;

use axum::http::StatusCode;
use common::{WALL, no_warmup, test_app};
use serde_json::{Value, json};

fn snap(id: &str) -> Value {
    json!({"worker_id": id, "timestamp_ms": WALL, "cpu_usage": 0.2, "queue_depth": 1,
           "rtt_ms_avg": 1.0, "rtt_ms_p99": 4.0, "error_rate": 0.0})
}

fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    k.sort_unstable();
    k
}

async fn app_with_two_workers() -> common::TestApp {
    let app = test_app(no_warmup());
    let mut slower = snap("w2");
    slower["queue_depth"] = json!(20);
    slower["rtt_ms_p99"] = json!(40.0);
    let (s, b) = app
        .post_json("/v1/telemetry", &json!({"snapshots": [snap("w1"), slower]}))
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    app
}

#[tokio::test]
async fn the_default_answer_is_compact() {
    let app = app_with_two_workers().await;
    let (s, b) = app
        .post_json(
            "/v1/score",
            &json!({"key": "user:1", "candidates": ["w1", "ghost", "w2"]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(
        keys(&b),
        [
            "decision_id",
            "panic",
            "pick",
            "policy",
            "probability",
            "scores"
        ],
        "{b}"
    );
    assert_eq!(b["probability"], 1.0, "max picks with certainty: {b}");
    let scores = b["scores"].as_array().expect("scores");
    assert_eq!(scores.len(), 3);
    assert_eq!(keys(&scores[0]), ["eligible", "final_score", "worker_id"]);
    assert_eq!(
        scores[1],
        json!({"worker_id": "ghost", "eligible": false, "reason": "unknown_worker", "final_score": 0.0})
    );
    let pick = b["pick"].as_str().expect("pick");
    let best = scores
        .iter()
        .filter(|s| s["eligible"] == true)
        .max_by(|a, b| {
            a["final_score"]
                .as_f64()
                .partial_cmp(&b["final_score"].as_f64())
                .expect("finite")
        })
        .expect("an eligible candidate");
    assert_eq!(best["worker_id"], pick, "{b}");

    // `"none"` and `false` are the same level.
    for level in [json!("none"), json!(false)] {
        let (_, c) = app
            .post_json(
                "/v1/score",
                &json!({"key": "user:1", "candidates": ["w1", "ghost", "w2"], "explain": level}),
            )
            .await;
        assert_eq!(keys(&c), keys(&b), "{c}");
    }
}

#[tokio::test]
async fn itemised_and_full_answers_carry_the_explanation() {
    let app = app_with_two_workers().await;
    for level in [json!(true), json!("itemised")] {
        let (s, b) = app
            .post_json(
                "/v1/score",
                &json!({"key": "user:1", "candidates": ["w1", "w2"], "explain": level}),
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{b}");
        assert_eq!(b["ranking"].as_array().map(Vec::len), Some(2), "{b}");
        assert!(b["model"].is_object(), "{b}");
        let w = &b["scores"][0];
        assert!(w["adjustments"].is_array(), "{w}");
        assert_eq!(w["penalty_state"], "healthy");
        assert!(w.get("features").is_none(), "features only with full: {w}");
    }
    let (_, b) = app
        .post_json(
            "/v1/score",
            &json!({"key": "user:1", "candidates": ["w1", "w2"], "explain": "full"}),
        )
        .await;
    assert_eq!(
        b["scores"][0]["features"].as_array().map(Vec::len),
        Some(42),
        "{b}"
    );
    assert!(b["scores"][0]["adjustments"].is_array(), "{b}");
}

#[tokio::test]
async fn an_unknown_explain_level_is_refused() {
    let app = app_with_two_workers().await;
    for level in [json!("verbose"), json!(1), json!([])] {
        let (s, b) = app
            .post_json(
                "/v1/score",
                &json!({"key": "user:1", "candidates": ["w1"], "explain": level}),
            )
            .await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{level}: {b}");
        assert_eq!(b["error"]["code"], "invalid_body", "{b}");
        assert!(
            b["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("explain")),
            "{b}"
        );
    }
}

async fn pick(app: &common::TestApp) -> (String, String) {
    let (s, b) = app
        .post_json(
            "/v1/score",
            &json!({"key": "k", "candidates": ["w1", "w2"]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    (
        b["decision_id"].as_str().expect("id").to_owned(),
        b["pick"].as_str().expect("pick").to_owned(),
    )
}

async fn outstanding(app: &common::TestApp) -> u64 {
    let (_, w) = app.get("/v1/workers").await;
    w["workers"]
        .as_array()
        .expect("workers")
        .iter()
        .map(|w| w["outstanding"].as_u64().expect("outstanding"))
        .sum()
}

#[tokio::test]
async fn a_mixed_batch_applies_only_its_valid_items() {
    let app = app_with_two_workers().await;
    let (a, pick_a) = pick(&app).await;
    let (b, pick_b) = pick(&app).await;
    assert_eq!(outstanding(&app).await, 2);
    let body = json!({"outcomes": [
        {"decision_id": a, "worker_id": pick_a, "latency_ms": 3.5, "success": true},
        {"decision_id": b, "worker_id": pick_b, "latency_ms": -1.0, "success": true},
        {"decision_id": b, "worker_id": pick_b, "latency_ms": "slow", "success": true},
        {"decision_id": "not-a-uuid", "worker_id": pick_b, "latency_ms": 1.0, "success": true},
        {"decision_id": b, "worker_id": pick_b, "latency_ms": 2.0, "success": true, "extra": 1},
    ]});
    let (s, r) = app.post_json("/v1/feedback", &body).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["accepted"], 1, "{r}");
    assert_eq!(r["rejected"], 4, "{r}");
    let results = r["results"].as_array().expect("results");
    assert_eq!(
        results[0],
        json!({"known_decision": true, "worker_was_picked": true, "released": true})
    );
    assert_eq!(results[1]["error"]["code"], "invalid_request", "{r}");
    assert!(
        results[1]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("latency_ms"))
    );
    assert_eq!(results[2]["error"]["code"], "invalid_body", "{r}");
    assert!(
        results[2]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("latency_ms")),
        "{r}"
    );
    assert_eq!(results[3]["error"]["code"], "invalid_request", "{r}");
    assert!(
        results[4]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("extra")),
        "{r}"
    );
    // Only the first item released its pick; b is still outstanding and
    // counted as feedback nowhere.
    assert_eq!(outstanding(&app).await, 1);
    let (_, stats) = app.get("/v1/stats").await;
    assert_eq!(stats["feedback"], 1, "{stats}");

    // The single-outcome form still answers as before.
    let (s, one) = app
        .post_json(
            "/v1/feedback",
            &json!({"decision_id": b, "worker_id": pick_b, "latency_ms": 2.0, "success": true}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{one}");
    assert_eq!(one["released"], true, "{one}");
    assert_eq!(outstanding(&app).await, 0);
}

#[tokio::test]
async fn a_batch_with_a_bad_envelope_is_refused_whole() {
    let mut cfg = no_warmup();
    cfg.server.max_feedback_batch = 2;
    let app = test_app(cfg);
    let item = json!({"decision_id": "019ad1c4-5e2a-7c3d-9f10-2b3c4d5e6f70", "worker_id": "w1",
                      "latency_ms": 1.0, "success": true});
    let (s, b) = app
        .post_json("/v1/feedback", &json!({"outcomes": [item, item, item]}))
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{b}");
    assert!(
        b["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("max_feedback_batch")),
        "{b}"
    );
    let (s, b) = app
        .post_json(
            "/v1/feedback",
            &json!({"outcomes": [item], "decision_id": "x"}),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{b}");
    let (s, b) = app
        .post_json("/v1/feedback", &json!({"outcomes": {"a": 1}}))
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{b}");
    let (_, stats) = app.get("/v1/stats").await;
    assert_eq!(stats["feedback"], 0, "nothing recorded: {stats}");
    let (s, b) = app
        .post_json("/v1/feedback", &json!({"outcomes": []}))
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b, json!({"accepted": 0, "rejected": 0, "results": []}));
}

fn dispatch_count(metrics: &str, how: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix(&format!(
                "scorer_score_dispatch_total{{dispatch=\"{how}\"}} "
            ))
        })
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_call_scores_inline_alone_and_on_the_pool_behind_another() {
    let app = app_with_two_workers().await;
    pick(&app).await;
    let m = app.metrics().await;
    assert_eq!(dispatch_count(&m, "inline"), 1, "{m}");
    assert_eq!(dispatch_count(&m, "pool"), 0, "{m}");
    // Another call in progress: this one goes to the pool, where it holds
    // its concurrency permit while it waits, so the limit sees the backlog.
    let other = app.state.in_progress.enter();
    assert_eq!(other.ahead, 0);
    pick(&app).await;
    drop(other);
    // Past two busy windows (10 ms each) of the app's clock, so that however
    // long this machine took to score, the busy-time rule has forgotten it.
    app.clock.advance(30);
    pick(&app).await;
    let m = app.metrics().await;
    assert_eq!(dispatch_count(&m, "inline"), 2, "{m}");
    assert_eq!(dispatch_count(&m, "pool"), 1, "{m}");
    assert_eq!(app.state.in_progress.get(), 0);
    for stage in service::http::ScoreStage::ALL.map(service::http::ScoreStage::as_str) {
        assert!(
            m.contains(&format!(
                "scorer_score_stage_seconds_count{{stage=\"{stage}\"}} 3"
            )),
            "{stage}: {m}"
        );
    }
    for stage in scorer_engine::DecisionStage::ALL.map(scorer_engine::DecisionStage::as_str) {
        assert!(
            m.contains(&format!(
                "scorer_decision_stage_seconds_count{{stage=\"{stage}\"}} 3"
            )),
            "{stage}: {m}"
        );
    }
}

#[tokio::test]
async fn explain_levels_ignore_case_and_null_is_absent() {
    let app = app_with_two_workers().await;
    let (s, b) = app
        .post_json(
            "/v1/score",
            &json!({"key": "user:1", "candidates": ["w1"], "explain": "FULL"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(
        b["scores"][0]["features"].as_array().map(Vec::len),
        Some(42)
    );
    let (s, b) = app
        .post_json(
            "/v1/score",
            &json!({"key": "user:1", "candidates": ["w1"], "explain": null}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert!(
        b.get("ranking").is_none(),
        "null is the compact default: {b}"
    );
}

#[tokio::test]
async fn each_batch_item_is_parsed_as_a_single_outcome_would_be() {
    let app = app_with_two_workers().await;
    let (a, pick_a) = pick(&app).await;
    let (b, pick_b) = pick(&app).await;
    let other = if pick_b == "w1" { "w2" } else { "w1" };
    // Raw text: a duplicate key and an out-of-range number are that item's
    // error, as they would be alone; an upper-case id is the same decision.
    let body = format!(
        r#"{{"outcomes": [
            {{"decision_id": "{b}", "worker_id": "{other}", "worker_id": "{pick_b}", "latency_ms": 1, "success": true}},
            {{"decision_id": "{b}", "worker_id": "{pick_b}", "latency_ms": 1e400, "success": true}},
            {{"decision_id": "{}", "worker_id": "{pick_a}", "latency_ms": 2, "success": true}}
        ]}}"#,
        a.to_ascii_uppercase()
    );
    let (s, r) = app.post("/v1/feedback", &body).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["accepted"], 1, "{r}");
    let results = r["results"].as_array().expect("results");
    assert!(
        results[0]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("duplicate field")),
        "{r}"
    );
    assert_eq!(results[1]["error"]["code"], "invalid_body", "{r}");
    assert_eq!(results[2]["released"], true, "{r}");
    assert_eq!(outstanding(&app).await, 1, "only a's pick was released");

    // A wrong envelope names what is wrong with it.
    let (s, e) = app.post("/v1/feedback", r#"{"outcomes": null}"#).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("sequence")),
        "{e}"
    );
    let (s, e) = app
        .post("/v1/feedback", r#"{"outcomes": [], "outcomes": []}"#)
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("duplicate field")),
        "{e}"
    );
    let (s, e) = app.post("/v1/feedback", r#"{"outcomes": [}"#).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
}

#[test]
fn a_feedback_batch_may_not_exceed_the_log_channel() {
    let mut cfg = scorer_engine::config::Config::default();
    cfg.server.max_feedback_batch = cfg.log.channel_capacity + 1;
    let err = cfg.validate().expect_err("refused").to_string();
    assert!(err.contains("server.max_feedback_batch"), "{err}");
    cfg.log.enabled = false;
    assert!(cfg.validate().is_ok());
}

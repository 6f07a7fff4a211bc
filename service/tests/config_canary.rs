//! The config canary over HTTP: a candidate from the config source scores
//! a slice of keys (by prefix or by hash), each arm's outcomes show in
//! `GET /v1/config/canary` and `/metrics`, the decision log tags each row
//! with its arm and config hash, and promote, abort and the refusals do
//! what they say and nothing else.

mod common;

use arrow::array::{Array, AsArray};
use axum::http::StatusCode;
use common::{TestApp, metric_value, reloadable};
use scorer_engine::canary::canary_unit;
use scorer_engine::config::Config;
use scorer_log::{LogKind, read_dir};
use serde_json::{Value, json};
use service::EngineLog;

use common::{report_busy_w1 as seed, rules_only as base};

/// Scores `key` on `w1`: (decision id, w1's rule score).
async fn score(t: &TestApp, key: &str) -> (String, f64) {
    let body = json!({"key": key, "explain": true, "candidates": ["w1"], "policy": "max"});
    let (s, b) = t.post_json("/v1/score", &body).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let id = b["decision_id"].as_str().expect("id").to_owned();
    (id, b["scores"][0]["rule_score"].as_f64().expect("score"))
}

async fn feedback(t: &TestApp, id: &str, latency_ms: f64, success: bool) {
    let body =
        json!({"decision_id": id, "worker_id": "w1", "latency_ms": latency_ms, "success": success});
    let (s, b) = t.post_json("/v1/feedback", &body).await;
    assert_eq!(s, StatusCode::OK, "{b}");
}

/// The candidate: `cpu_high` 0.99, so w1 at 95% CPU loses no points.
fn candidate() -> Config {
    let mut c = base();
    c.scoring.cpu_high = 0.99;
    c
}

#[tokio::test]
async fn a_prefix_canary_scores_its_keys_counts_each_arm_and_tags_the_log() {
    let (dir, cfg, log) = common::logging("canary", base());
    let (t, next) = reloadable(cfg.clone(), Some(log));
    seed(&t).await;
    let (_, stable_score) = score(&t, "user:7:cart").await;

    *next.lock().expect("lock") = Config {
        log: cfg.log.clone(),
        ..candidate()
    };
    let req = json!({"key_prefix": "user:7", "reason": "cpu threshold 0.99"});
    let (s, st) = t.post_json("/v1/admin/config/canary", &req).await;
    assert_eq!(s, StatusCode::OK, "{st}");
    assert_eq!(st["key_prefix"], "user:7");
    assert_eq!(st["changes"][0]["key"], "scoring.cpu_high");
    assert_eq!(st["changes"][0]["new"], 0.99);
    assert_eq!(st["set_by"], "anonymous");
    assert_eq!(st["stable_hash"], cfg.hash());
    let candidate_hash = st["candidate_hash"].as_str().expect("hash").to_owned();

    let (c_id, c_score) = score(&t, "user:7:cart").await;
    let (s_id, s_score) = score(&t, "user:8:cart").await;
    assert!(c_score > stable_score, "{c_score} vs {stable_score}");
    assert_eq!(s_score, stable_score);
    feedback(&t, &c_id, 30.0, false).await;
    feedback(&t, &s_id, 2.0, true).await;

    let (s, st) = t.get("/v1/config/canary").await;
    assert_eq!(s, StatusCode::OK, "{st}");
    let arm = |i: usize, f: &str| st["arms"][i][f].clone();
    assert_eq!(
        (arm(0, "arm"), arm(0, "decisions"), arm(0, "outcomes")),
        (json!("stable"), json!(1), json!(1))
    );
    assert_eq!(
        (arm(1, "arm"), arm(1, "failures"), arm(1, "error_rate")),
        (json!("canary"), json!(1), json!(1.0))
    );
    assert_eq!(arm(0, "p50_ms"), json!(1.75));
    let m = t.metrics().await;
    let series = |name: &str, arm: &str, hash: &str| {
        metric_value(
            &m,
            &format!("{name}{{arm=\"{arm}\",config_hash=\"{hash}\"}}"),
        )
    };
    assert_eq!(
        series(
            "scorer_config_arm_failures_total",
            "canary",
            &candidate_hash
        ),
        Some(1.0)
    );
    assert_eq!(
        series(
            "scorer_config_arm_latency_seconds_count",
            "stable",
            &cfg.hash()
        ),
        Some(1.0)
    );
    assert!(m.contains("scorer_config_arm_decisions_total{arm=\"stable\""));

    t.state
        .engine
        .decision_log()
        .expect("log")
        .shutdown()
        .expect("close");
    let rows = read_dir(&dir.join("decisions"), LogKind::Decisions).expect("read");
    let column = |name: &str| -> Vec<Option<String>> {
        rows.batches
            .iter()
            .flat_map(|b| {
                let s = b.column_by_name(name).expect("column").as_string::<i32>();
                (0..s.len())
                    .map(|i| s.is_valid(i).then(|| s.value(i).to_owned()))
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    assert_eq!(
        column("arm"),
        [None, Some("canary".into()), Some("stable".into())]
    );
    assert_eq!(
        column("config_hash"),
        [Some(cfg.hash()), Some(candidate_hash), Some(cfg.hash())]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_hash_canary_takes_its_fraction_of_keys_and_aborts_to_stable() {
    let (t, next) = reloadable(base(), None);
    seed(&t).await;
    let (_, stable_score) = score(&t, "user:0:profile").await;
    *next.lock().expect("lock") = candidate();
    let (s, b) = t
        .post_json("/v1/admin/config/canary", &json!({"fraction": 0.2}))
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let keys: Vec<String> = (0..1_000).map(|i| format!("user:{i}:profile")).collect();
    let mut taken = 0u64;
    for key in &keys {
        let on_canary = canary_unit(key) < 0.2;
        taken += u64::from(on_canary);
        let (_, s) = score(&t, key).await;
        assert_eq!(s > stable_score, on_canary, "{key}: {s} vs {stable_score}");
    }
    assert!((170..=230).contains(&taken), "{taken} of 1 000 keys");
    let (_, st) = t.get("/v1/config/canary").await;
    assert_eq!(st["arms"][1]["decisions"], taken);
    assert_eq!(st["arms"][0]["decisions"], 1_000 - taken);

    let (s, ended) = t.post("/v1/admin/config/canary/abort", "").await;
    assert_eq!(s, StatusCode::OK, "{ended}");
    assert_eq!(ended["arms"][1]["decisions"], taken);
    let (s, b) = t.get("/v1/config/canary").await;
    assert_eq!(
        (s, b["error"]["code"].clone()),
        (StatusCode::NOT_FOUND, json!("no_canary"))
    );
    for key in keys.iter().take(50) {
        assert_eq!(score(&t, key).await.1, stable_score, "{key}");
    }
    let (s, b) = t.post("/v1/admin/config/canary/abort", "").await;
    assert_eq!(
        (s, b["error"]["code"].clone()),
        (StatusCode::CONFLICT, json!("no_canary"))
    );
}

#[tokio::test]
async fn promote_applies_the_candidate_and_rollback_restores_the_stable_hash() {
    let (t, next) = reloadable(base(), None);
    seed(&t).await;
    *next.lock().expect("lock") = candidate();
    let (s, st) = t
        .post_json("/v1/admin/config/canary", &json!({"fraction": 0.05}))
        .await;
    assert_eq!(s, StatusCode::OK, "{st}");
    let (s, b) = t.post("/v1/admin/config/canary/promote", "").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["promoted"], true);
    assert_eq!(b["new_hash"], st["candidate_hash"]);
    assert_eq!(b["canary_ended"]["candidate_hash"], st["candidate_hash"]);
    let (_, view) = t.get("/v1/admin/config").await;
    assert_eq!(view["hash"], st["candidate_hash"]);
    assert_eq!(t.get("/v1/config/canary").await.0, StatusCode::NOT_FOUND);
    let (s, b) = t.post("/v1/admin/config/canary/promote", "").await;
    assert_eq!(
        (s, b["error"]["code"].clone()),
        (StatusCode::CONFLICT, json!("no_canary"))
    );
    let (s, b) = t.post_json("/v1/admin/config/rollback", &json!({})).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["new_hash"], st["stable_hash"]);
}

#[tokio::test]
async fn a_reload_ends_a_running_canary() {
    let (t, next) = reloadable(base(), None);
    *next.lock().expect("lock") = candidate();
    let (s, st) = t
        .post_json("/v1/admin/config/canary", &json!({"key_prefix": "user:"}))
        .await;
    assert_eq!(s, StatusCode::OK, "{st}");
    next.lock().expect("lock").scoring.cpu_high = 0.9;
    let (s, b) = t.post("/v1/admin/reload", "").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["canary_ended"]["candidate_hash"], st["candidate_hash"]);
    assert_eq!(t.get("/v1/config/canary").await.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn bad_canaries_get_a_precise_error_and_change_nothing() {
    let (t, next) = reloadable(base(), None);
    let start = |body: Value| {
        let t = &t;
        async move { t.post_json("/v1/admin/config/canary", &body).await }
    };
    let code =
        |r: (StatusCode, Value)| (r.0, r.1["error"]["code"].as_str().unwrap_or("").to_owned());
    let unprocessable = |c: &str| (StatusCode::UNPROCESSABLE_ENTITY, c.to_owned());
    // Nothing differs from the configuration in force.
    assert_eq!(
        code(start(json!({"fraction": 0.1})).await),
        unprocessable("no_change")
    );
    *next.lock().expect("lock") = candidate();
    for body in [
        json!({}),
        json!({"fraction": 0.1, "key_prefix": "user:"}),
        json!({"fraction": 1.0}),
        json!({"fraction": 0}),
        json!({"key_prefix": ""}),
        json!({"key_prefix": "user:", "reason": "a\u{7}b"}),
    ] {
        assert_eq!(
            code(start(body.clone()).await),
            unprocessable("invalid_canary"),
            "{body}"
        );
    }
    assert_eq!(
        code(start(json!({"fraction": 0.1, "weight": 2})).await),
        unprocessable("invalid_body")
    );
    let mut c = candidate();
    c.telemetry.dead_after_ms += 1;
    *next.lock().expect("lock") = c;
    let (s, b) = start(json!({"fraction": 0.1})).await;
    assert_eq!(code((s, b.clone())), unprocessable("not_canaryable"));
    assert_eq!(
        b["error"]["details"]["keys"],
        json!(["telemetry.dead_after_ms"])
    );
    let mut c = base();
    c.scoring.cpu_max_deduct *= 3.0;
    *next.lock().expect("lock") = c;
    assert_eq!(
        code(start(json!({"fraction": 0.1})).await),
        unprocessable("weight_step_too_large")
    );
    assert_eq!(t.get("/v1/config/canary").await.0, StatusCode::NOT_FOUND);
    // Forced past the step; then a second canary waits for the first.
    let (s, b) = t
        .post_json(
            "/v1/admin/config/canary?force=true",
            &json!({"fraction": 0.1}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    *next.lock().expect("lock") = candidate();
    assert_eq!(
        code(start(json!({"fraction": 0.1})).await),
        (StatusCode::CONFLICT, "canary_running".to_owned())
    );
}

//! Config hot reload through `POST /v1/admin/reload` (issue #8): validated
//! whole, weights stepped, start-up keys refused, every change reported with
//! old and new values, and the new hash in the decision rows.

mod common;

use arrow::array::{Array, AsArray};
use axum::http::StatusCode;
use common::{TestApp, no_warmup, reloadable};
use scorer_log::{LogKind, read_dir};
use serde_json::{Value, json};
use service::EngineLog;

use common::{report_busy_w1 as seed, rules_only as base};

async fn busy_worker_score(t: &TestApp) -> f64 {
    let (s, b) = t
        .post_json(
            "/v1/score",
            &json!({"key": "user:1", "explain": true, "candidates": ["w1"], "policy": "max"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    b["scores"][0]["rule_score"].as_f64().expect("score")
}

#[tokio::test]
async fn a_weight_within_the_step_is_applied_and_reported() {
    let (t, next) = reloadable(base(), None);
    seed(&t).await;
    let before = busy_worker_score(&t).await;
    let (_, cfg0) = t.get("/v1/admin/config").await;
    let old_points = base().scoring.cpu_points_per_step;
    let new_points = old_points * 1.2;
    next.lock().expect("lock").scoring.cpu_points_per_step = new_points;

    let (s, b) = t.post("/v1/admin/reload", "").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["applied"], true);
    assert_eq!(b["forced"], false);
    assert_eq!(
        b["changes"],
        json!([{"key": "scoring.cpu_points_per_step", "old": old_points, "new": new_points}])
    );
    assert_eq!(b["old_hash"], cfg0["hash"]);
    let mut expected = base();
    expected.scoring.cpu_points_per_step = new_points;
    assert_eq!(b["new_hash"], expected.hash());
    let (_, cfg1) = t.get("/v1/admin/config").await;
    assert_eq!(cfg1["hash"], expected.hash());
    assert_eq!(cfg1["config"]["scoring"]["cpu_points_per_step"], new_points);

    // cpu 0.95 is (0.95 − cpu_high) / cpu_step = 5 steps over the threshold,
    // below the cap either way: the deduction grows by 5 × the change.
    let s = base().scoring;
    let steps = (0.95 - s.cpu_high) / s.cpu_step;
    let after = busy_worker_score(&t).await;
    assert!(
        ((before - after) - steps * (new_points - old_points)).abs() < 1e-5,
        "before {before}, after {after}"
    );
}

#[tokio::test]
async fn a_weight_beyond_the_step_is_refused_unless_forced() {
    let (t, next) = reloadable(base(), None);
    let hash = base().hash();
    seed(&t).await;
    let before = busy_worker_score(&t).await;
    next.lock().expect("lock").scoring.cpu_points_per_step =
        base().scoring.cpu_points_per_step * 2.0;

    let (s, b) = t.post("/v1/admin/reload", "").await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{b}");
    assert_eq!(b["error"]["code"], "weight_step_too_large");
    let msg = b["error"]["message"].as_str().expect("message");
    assert!(
        msg.contains("scoring.cpu_points_per_step") && msg.contains("force=true"),
        "{msg}"
    );
    assert_eq!(t.get("/v1/admin/config").await.1["hash"], hash);
    assert_eq!(busy_worker_score(&t).await, before, "nothing changed");

    let (s, b) = t.post("/v1/admin/reload?force=true", "").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["forced"], true);
    assert_ne!(t.get("/v1/admin/config").await.1["hash"], hash);
    assert!(busy_worker_score(&t).await < before);
}

#[tokio::test]
async fn start_up_keys_and_invalid_configs_change_nothing() {
    let (t, next) = reloadable(base(), None);
    let hash = base().hash();
    {
        let mut n = next.lock().expect("lock");
        n.server.listen = "127.0.0.1:1".into();
        n.scoring.cpu_high = 0.8;
    }
    let (s, b) = t.post("/v1/admin/reload?force=true", "").await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{b}");
    assert_eq!(b["error"]["code"], "restart_required");
    assert_eq!(b["error"]["details"]["keys"], json!(["server.listen"]));

    *next.lock().expect("lock") = {
        let mut c = base();
        c.telemetry.ewma_alpha = 0.0;
        c
    };
    let (s, b) = t.post("/v1/admin/reload", "").await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{b}");
    assert_eq!(b["error"]["code"], "invalid_config");
    assert!(
        b["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("telemetry.ewma_alpha")),
        "{b}"
    );

    let (s, b) = t.post("/v1/admin/reload?force=maybe", "").await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{b}");
    assert_eq!(b["error"]["code"], "invalid_request");

    let (_, cfg) = t.get("/v1/admin/config").await;
    assert_eq!(cfg["hash"], hash);
    assert_eq!(
        cfg["config"]["scoring"]["cpu_high"],
        base().scoring.cpu_high
    );
}

#[tokio::test]
async fn the_token_is_redacted_in_the_view_and_the_changes() {
    let mut cfg = base();
    cfg.admin.token = Some("first-token-0123456789".into());
    let (t, next) = reloadable(cfg, None);
    let auth = |tok: &str| {
        axum::http::Request::post("/v1/admin/reload")
            .header("authorization", format!("Bearer {tok}"))
            .body(axum::body::Body::empty())
            .expect("request")
    };
    next.lock().expect("lock").admin.token = Some("second-token-0123456789".into());
    let (s, b) = t.send(auth("first-token-0123456789")).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(
        b["changes"],
        json!([{"key": "admin.token", "old": "<redacted>", "new": "<redacted>"}])
    );
    // The new token is in force at once; the old one no longer works.
    assert_eq!(
        t.send(auth("first-token-0123456789")).await.0,
        StatusCode::UNAUTHORIZED
    );
    let view = axum::http::Request::get("/v1/admin/config")
        .header("authorization", "Bearer second-token-0123456789")
        .body(axum::body::Body::empty())
        .expect("request");
    let (s, v) = t.send(view).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["config"]["admin"]["token"], "<redacted>");
    assert!(!v.to_string().contains("second-token"), "{v}");
}

#[tokio::test]
async fn decision_rows_carry_the_hash_of_the_config_that_scored_them() {
    let (dir, cfg, log) = common::logging("reload", base());
    let (t, next) = reloadable(cfg.clone(), Some(log));
    let h0 = cfg.hash();
    seed(&t).await;
    busy_worker_score(&t).await;
    next.lock().expect("lock").scoring.cpu_high = 0.8;
    let (s, b) = t.post("/v1/admin/reload", "").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let h1 = b["new_hash"].as_str().expect("hash").to_owned();
    assert_ne!(h0, h1);
    busy_worker_score(&t).await;
    t.state
        .engine
        .decision_log()
        .expect("log")
        .shutdown()
        .expect("close");

    let rows = read_dir(&dir.join("decisions"), LogKind::Decisions).expect("read");
    let hashes: Vec<String> = rows
        .batches
        .iter()
        .flat_map(|b| {
            let col = b.column_by_name("config_hash").expect("column");
            let s = col.as_string::<i32>();
            (0..s.len())
                .map(|i| s.value(i).to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(hashes, vec![h0, h1]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn reload_without_a_model_in_use_still_applies_the_config() {
    // The default model dir does not exist from the test's working
    // directory: the service scores on rules alone, and a config change is
    // still taken; the report says why the model stays out.
    let mut cfg = no_warmup();
    cfg.model.dir = "does/not/exist".into();
    let (t, next) = reloadable(cfg, None);
    next.lock().expect("lock").scoring.cpu_high = 0.8;
    let (s, b) = t.post("/v1/admin/reload", "").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["model"]["applied"], false);
    assert!(
        b["model"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("does/not/exist")),
        "{b}"
    );
    assert_eq!(
        t.get("/v1/admin/config").await.1["config"]["scoring"]["cpu_high"],
        Value::from(0.8)
    );
}

#[test]
fn a_reload_completes_while_the_blocking_pool_is_saturated() {
    // The service runs with one blocking-pool thread per core, shared with
    // the score path; a reload used to run there too, so slow reloads could
    // take every scoring thread (found by a fresh-eyes run). Here the pool's
    // only thread is held for the whole test: the reload must still finish.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .max_blocking_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (t, next) = reloadable(base(), None);
        let (release, held) = std::sync::mpsc::channel::<()>();
        let holder = tokio::task::spawn_blocking(move || held.recv());
        let mut cfg = base();
        cfg.scoring.cpu_high = 0.8;
        *next.lock().expect("lock") = cfg;
        let (s, b) = tokio::time::timeout(
            std::time::Duration::from_secs(60),
            t.post("/v1/admin/reload", ""),
        )
        .await
        .expect("the reload finished without a blocking-pool thread");
        assert_eq!(s, StatusCode::OK, "{b}");
        assert_eq!(b["changes"][0]["key"], "scoring.cpu_high", "{b}");
        release.send(()).expect("release");
        holder.await.expect("holder").expect("recv");
    });
}

#[tokio::test]
async fn a_config_rollback_restores_the_exact_previous_hash_and_toggles() {
    let (t, next) = reloadable(base(), None);
    let (s, b) = t.post_json("/v1/admin/config/rollback", &json!({})).await;
    assert_eq!(s, StatusCode::CONFLICT, "{b}");
    assert_eq!(b["error"]["code"], "no_previous_config");
    let (_, view) = t.get("/v1/admin/config").await;
    let first = view["hash"].clone();

    // A change far beyond the weight step, forced in.
    next.lock().expect("lock").scoring.cpu_high = 0.5;
    let (s, b) = t.post_json("/v1/admin/reload?force=true", &json!({})).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let second = b["new_hash"].clone();
    assert_ne!(first, second);

    let (s, b) = t.post_json("/v1/admin/config/rollback", &json!({})).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["rolled_back"], true);
    assert_eq!(b["new_hash"], first, "the exact previous configuration");
    let (_, view) = t.get("/v1/admin/config").await;
    assert_eq!(view["hash"], first);
    assert_eq!(
        view["config"]["scoring"]["cpu_high"],
        base().scoring.cpu_high
    );

    // Rolling back again returns to the change.
    let (s, b) = t.post_json("/v1/admin/config/rollback", &json!({})).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["new_hash"], second);

    // A reload that changes nothing keeps what a rollback returns to.
    let (s, _) = t.post_json("/v1/admin/reload?force=true", &json!({})).await;
    assert_eq!(s, StatusCode::OK);
    let (_, b) = t.post_json("/v1/admin/config/rollback", &json!({})).await;
    assert_eq!(b["new_hash"], first);
}

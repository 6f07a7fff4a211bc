//! Worker overrides over the admin API: drain, disable and weight one
//! worker, with a time to live, a reason and who set it; listed, cleared,
//! kept across a reload, shown in `/v1/workers` and sent to the routers'
//! balancers in the view.

mod common;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use scorer_core::clock::{Clock, ManualClock};
use scorer_engine::Engine;
use serde_json::{Value, json};
use service::{AppState, app};
use tower::ServiceExt;

use common::{TestApp, WALL, no_warmup, test_app, view_events};

const ADMIN: &str = "admin-token-0123456789";

async fn report(app: &TestApp, id: &str, cpu: f64) {
    let now = app.clock.wall_ms();
    let body = json!({"snapshots": [{
        "worker_id": id, "timestamp_ms": now, "cpu_usage": cpu, "queue_depth": 0,
        "rtt_ms_avg": 1.0, "rtt_ms_p99": 2.0, "error_rate": 0.0,
        "compacting": false, "under_repair": false, "version_lag": 0,
    }]});
    let (status, answer) = app.post_json("/v1/telemetry", &body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}

async fn send(app: &TestApp, method: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    let mut req = Request::builder().method(method).uri(path);
    if body.is_some() {
        req = req.header("content-type", "application/json");
    }
    let body = body.map_or_else(Body::empty, |b| Body::from(b.to_string()));
    app.send(req.body(body).expect("request")).await
}

async fn picks(app: &TestApp, n: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let body =
            json!({"key": "user:1:profile", "candidates": ["w1", "w2"], "policy": "softmax"});
        let (s, b) = app.post_json("/v1/score", &body).await;
        assert_eq!(s, StatusCode::OK, "{b}");
        out.push(b["pick"].as_str().expect("a pick").to_owned());
        let fb = json!({"decision_id": b["decision_id"], "worker_id": b["pick"], "latency_ms": 1.0, "success": true});
        let (s, b) = app.post_json("/v1/feedback", &fb).await;
        assert_eq!(s, StatusCode::OK, "{b}");
    }
    out
}

#[tokio::test]
async fn a_drain_with_a_ttl_stops_picks_shows_everywhere_and_expires() {
    let app = test_app(no_warmup());
    report(&app, "w1", 0.1).await;
    report(&app, "w2", 0.1).await;
    let body = json!({"kind": "drain", "ttl_ms": 2_000, "reason": "kernel upgrade"});
    let (s, b) = send(&app, "PUT", "/v1/admin/workers/w1/override", Some(body)).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(
        b,
        json!({"worker_id": "w1", "kind": "drain", "reason": "kernel upgrade",
               "set_by": "anonymous", "age_ms": 0, "remaining_ms": 2_000})
    );
    assert!(picks(&app, 30).await.iter().all(|p| p == "w2"));
    let (_, workers) = app.get("/v1/workers").await;
    let w1 = &workers["workers"][0];
    assert_eq!(
        (w1["worker_id"].as_str(), w1["override"]["kind"].as_str()),
        (Some("w1"), Some("drain"))
    );
    assert!(workers["workers"][1].get("override").is_none());
    let (_, answer) = app
        .post_json(
            "/v1/score",
            &json!({"key": "k:1", "candidates": ["w1", "w2"], "explain": "itemised"}),
        )
        .await;
    let w1 = answer["scores"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["worker_id"] == "w1")
        .unwrap()
        .clone();
    assert_eq!(
        (w1["reason"].as_str(), w1["override"].as_str()),
        (Some("drained"), Some("drain")),
        "{w1}"
    );
    app.clock.advance(1_500);
    let (_, list) = app.get("/v1/admin/overrides").await;
    assert_eq!(list["overrides"][0]["remaining_ms"], 500);
    // Past its time to live it no longer counts: w1 is picked again.
    app.clock.advance(600);
    report(&app, "w1", 0.1).await;
    report(&app, "w2", 0.1).await;
    let (_, list) = app.get("/v1/admin/overrides").await;
    assert_eq!(list, json!({"overrides": []}));
    let after = picks(&app, 60).await;
    assert!(after.iter().any(|p| p == "w1"), "{after:?}");
}

#[tokio::test]
async fn unknown_workers_and_bad_bodies_are_refused_and_change_nothing() {
    let app = test_app(no_warmup());
    report(&app, "w1", 0.1).await;
    let (s, b) = send(
        &app,
        "PUT",
        "/v1/admin/workers/ghost/override",
        Some(json!({"kind": "drain"})),
    )
    .await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("unknown_worker")),
        "{b}"
    );
    assert!(
        b["error"]["message"].as_str().unwrap().contains("`ghost`"),
        "{b}"
    );
    for (body, field) in [
        (json!({"kind": "weight"}), "`weight`"),
        (json!({"kind": "weight", "weight": 1000.0}), "`weight`"),
        (json!({"kind": "drain", "weight": 2.0}), "`weight`"),
        (json!({"kind": "disable", "ttl_ms": 0}), "`ttl_ms`"),
        (
            json!({"kind": "drain", "reason": "x".repeat(300)}),
            "`reason`",
        ),
        (json!({"kind": "pause"}), "kind"),
        (json!({"kind": "drain", "extra": 1}), "extra"),
    ] {
        let (s, b) = send(
            &app,
            "PUT",
            "/v1/admin/workers/w1/override",
            Some(body.clone()),
        )
        .await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {b}");
        assert!(
            b["error"]["message"].as_str().unwrap().contains(field),
            "{body}: {b}"
        );
    }
    let (s, b) = send(
        &app,
        "PUT",
        "/v1/admin/workers/%20w1/override",
        Some(json!({"kind": "drain"})),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{b}");
    let (s, b) = send(&app, "DELETE", "/v1/admin/workers/w1/override", None).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("no_override")),
        "{b}"
    );
    let (_, list) = app.get("/v1/admin/overrides").await;
    assert_eq!(list, json!({"overrides": []}));
    assert_eq!(app.state.engine.override_table().generation(), 0);
}

#[tokio::test]
async fn overrides_hold_across_a_reload_and_are_cleared_in_one_call() {
    let clock = Arc::new(ManualClock::new(1_000, WALL));
    let next = {
        let mut c = no_warmup();
        c.selection.default_policy = "softmax".into();
        c
    };
    let state = AppState::new(Engine::new(no_warmup()), clock.clone())
        .with_config_source(Arc::new(move || Ok(next.clone())));
    let app = TestApp {
        router: app(state.clone()),
        clock,
        state,
    };
    report(&app, "w1", 0.1).await;
    report(&app, "w2", 0.1).await;
    let body = json!({"kind": "weight", "weight": 0.5});
    let (s, b) = send(&app, "PUT", "/v1/admin/workers/w1/override", Some(body)).await;
    assert_eq!(
        (s, b["weight"].as_f64()),
        (StatusCode::OK, Some(0.5)),
        "{b}"
    );
    let (s, _) = send(
        &app,
        "PUT",
        "/v1/admin/workers/w2/override",
        Some(json!({"kind": "disable"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let (s, b) = app.post("/v1/admin/reload", "").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_ne!(b["old_hash"], b["new_hash"], "{b}");
    let (_, list) = app.get("/v1/admin/overrides").await;
    let kinds: Vec<_> = list["overrides"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].clone())
        .collect();
    assert_eq!(kinds, [json!("weight"), json!("disable")]);
    let (s, b) = send(&app, "DELETE", "/v1/admin/workers/w2/override", None).await;
    assert_eq!(
        (s, b["cleared"][0]["kind"].as_str()),
        (StatusCode::OK, Some("disable")),
        "{b}"
    );
    let (s, b) = send(&app, "DELETE", "/v1/admin/overrides", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(b["cleared"].as_array().map(Vec::len), Some(1), "{b}");
    let (_, list) = app.get("/v1/admin/overrides").await;
    assert_eq!(list, json!({"overrides": []}));
}

#[tokio::test]
async fn set_by_is_the_credential_name_and_the_view_carries_the_override() {
    let mut cfg = no_warmup();
    cfg.auth.admin.insert("ops".into(), ADMIN.into());
    let app = test_app(cfg);
    let auth =
        |r: axum::http::request::Builder| r.header("authorization", format!("Bearer {ADMIN}"));
    let telemetry = json!({"snapshots": [{
        "worker_id": "w1", "timestamp_ms": WALL, "cpu_usage": 0.1, "queue_depth": 0,
        "rtt_ms_avg": 1.0, "rtt_ms_p99": 2.0, "error_rate": 0.0,
        "compacting": false, "under_repair": false, "version_lag": 0,
    }]});
    let req = auth(Request::post("/v1/telemetry").header("content-type", "application/json"))
        .body(Body::from(telemetry.to_string()))
        .unwrap();
    assert_eq!(app.send(req).await.0, StatusCode::OK);
    let req = auth(
        Request::put("/v1/admin/workers/w1/override").header("content-type", "application/json"),
    )
    .body(Body::from(
        json!({"kind": "disable", "reason": "disk swap"}).to_string(),
    ))
    .unwrap();
    let (s, b) = app.send(req).await;
    assert_eq!(
        (s, b["set_by"].as_str()),
        (StatusCode::OK, Some("ops")),
        "{b}"
    );
    let req = auth(Request::get("/v1/view?max_events=1"))
        .extension(axum::extract::ConnectInfo(std::net::SocketAddr::from((
            [127, 0, 0, 1],
            40000,
        ))))
        .body(Body::empty())
        .unwrap();
    let resp = app.router.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let text = resp.into_body().collect().await.unwrap().to_bytes();
    let view = &view_events(std::str::from_utf8(&text).unwrap())[0];
    let overrides = view
        .overrides
        .clone()
        .expect("a full view carries the overrides");
    assert_eq!(overrides.len(), 1);
    assert_eq!(
        (
            overrides[0].worker_id.as_str(),
            overrides[0].reason.as_str()
        ),
        ("w1", "disk swap")
    );
}

#[tokio::test]
async fn the_decision_log_keeps_each_candidates_override() {
    let (dir, cfg, log) = common::logging("override-log", no_warmup());
    let clock = Arc::new(ManualClock::new(1_000, WALL));
    let state = AppState::new(Engine::new(cfg).with_log(Arc::new(log)), clock.clone());
    let app = TestApp {
        router: app(state.clone()),
        clock,
        state,
    };
    for id in ["w1", "w2", "w3"] {
        report(&app, id, 0.2).await;
    }
    let drain = json!({"kind": "drain", "reason": "disk swap"});
    let path = "/v1/admin/workers/w2/override";
    assert_eq!(send(&app, "PUT", path, Some(drain)).await.0, StatusCode::OK);
    let weight = json!({"kind": "weight", "weight": 2.0});
    let path = "/v1/admin/workers/w3/override";
    assert_eq!(
        send(&app, "PUT", path, Some(weight)).await.0,
        StatusCode::OK
    );
    let body = json!({"key": "user:1", "candidates": ["w1", "w2", "w3"]});
    assert_eq!(app.post_json("/v1/score", &body).await.0, StatusCode::OK);
    service::EngineLog::decision_log(app.state.engine.as_ref())
        .expect("log")
        .shutdown()
        .expect("close");
    let rows =
        scorer_log::read_dir(&dir.join("decisions"), scorer_log::LogKind::Decisions).expect("read");
    use arrow::array::{Array, AsArray};
    let b = &rows.batches[0];
    let workers = b
        .column_by_name("worker_id")
        .expect("column")
        .as_string::<i32>();
    let overrides = b
        .column_by_name("operator_override")
        .expect("column")
        .as_string::<i32>();
    let seen: Vec<(&str, Option<&str>)> = (0..b.num_rows())
        .map(|i| {
            (
                workers.value(i),
                overrides.is_valid(i).then(|| overrides.value(i)),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [("w1", None), ("w2", Some("drain")), ("w3", Some("weight"))]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

//! A router is its credential: with router tokens configured, a router may
//! report load, send records and follow the view only under its own id
//! (or, with `auth.router_ids = "prefixed"`, ids its name prefixes); a load
//! report names at most the pool, and only known workers count.

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use scorer_core::clock::Clock;
use scorer_engine::config::Config;
use scorer_engine::config::auth::RouterIds;
use serde_json::{Value, json};

use common::{TestApp, no_warmup, test_app};

const EDGE1: &str = "edge-1-token-7f3a9c21d4e8b605";
const EDGE2: &str = "edge-2-token-c81e4f0a9b3d7265";
const FLEET: &str = "fleet-token-5e9a1c7d3f2b8046a";
const OPS: &str = "ops-admin-token-93b7e1f5c0a2d684";

fn config(mode: RouterIds) -> Config {
    let mut cfg = no_warmup();
    cfg.auth.router.insert("edge-1".into(), EDGE1.into());
    cfg.auth.router.insert("edge-2".into(), EDGE2.into());
    cfg.auth.router.insert("fleet".into(), FLEET.into());
    cfg.auth.admin.insert("ops".into(), OPS.into());
    cfg.auth.router_ids = mode;
    cfg
}

async fn call(
    app: &TestApp,
    token: &str,
    method: &str,
    uri: &str,
    body: Option<&Value>,
) -> (StatusCode, Value) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
        .unwrap();
    app.send(req).await
}

async fn report_workers(app: &TestApp, ids: &[&str]) {
    let wall = app.clock.wall_ms();
    let snapshots: Vec<Value> = ids
        .iter()
        .map(|id| {
            json!({"worker_id": id, "timestamp_ms": wall, "cpu_usage": 0.2, "queue_depth": 0,
                "rtt_ms_avg": 1.0, "rtt_ms_p99": 2.0, "error_rate": 0.0})
        })
        .collect();
    let (status, body) = app
        .post_json("/v1/telemetry", &json!({ "snapshots": snapshots }))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

async fn post_load(app: &TestApp, token: &str, body: &Value) -> (StatusCode, Value) {
    call(app, token, "POST", "/v1/router/load", Some(body)).await
}

fn load(router: &str, workers: &[(&str, u32)]) -> Value {
    let outstanding: Vec<Value> = workers
        .iter()
        .map(|(w, n)| json!({"worker_id": w, "outstanding": n}))
        .collect();
    json!({"router_id": router, "outstanding": outstanding})
}

#[tokio::test]
async fn one_router_cannot_report_stream_or_log_as_another() {
    let app = test_app(config(RouterIds::Exact));
    report_workers(&app, &["w1", "w2"]).await;
    // edge-1's own load counts.
    let (status, body) = post_load(&app, EDGE1, &load("edge-1", &[("w1", 3)])).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // edge-2 can neither overwrite nor erase it...
    let (status, body) = post_load(&app, EDGE2, &load("edge-1", &[])).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "router_id_not_yours");
    let others = app.state.load_board.others(None, app.clock.monotonic_ms());
    assert_eq!(others.load[0].outstanding, 3);
    // ...nor send records under edge-1's id, nor follow the view as edge-1.
    let records = json!({"router_id": "edge-1", "decisions": [], "outcomes": []});
    let (status, body) = call(&app, EDGE2, "POST", "/v1/router/decisions", Some(&records)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, body) = call(
        &app,
        EDGE2,
        "GET",
        "/v1/view?router_id=edge-1&max_events=1",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");

    // Under its own id, each goes through; an admin may act for any router.
    let (status, _) = post_load(&app, EDGE2, &load("edge-2", &[("w2", 1)])).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = post_load(&app, OPS, &load("probe", &[])).await;
    assert_eq!(status, StatusCode::OK);
    // A shared fleet credential may not use prefixed ids in exact mode.
    let (status, _) = post_load(&app, FLEET, &load("fleet-3", &[])).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn a_prefixed_credential_reports_for_a_bounded_fleet_of_its_own_ids() {
    let app = test_app(config(RouterIds::Prefixed));
    report_workers(&app, &["w1"]).await;
    for i in 0..16 {
        let id = format!("fleet-{i}");
        let (status, body) = post_load(&app, FLEET, &load(&id, &[])).await;
        assert_eq!(status, StatusCode::OK, "{id}: {body}");
    }
    let (status, body) = post_load(&app, FLEET, &load("fleet-16", &[])).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["error"]["code"], "too_many_routers");
    // The fleet's credential cannot squeeze other routers out of the table.
    let (status, _) = post_load(&app, EDGE1, &load("edge-1", &[])).await;
    assert_eq!(status, StatusCode::OK);
    // Nor pass for edge-1 by prefix: `fleet` does not prefix it.
    let (status, _) = post_load(&app, FLEET, &load("edge-1", &[])).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn a_load_report_names_at_most_the_pool_and_only_known_workers_count() {
    let app = test_app(config(RouterIds::Exact));
    report_workers(&app, &["w1", "w2", "w3"]).await;
    let invented: Vec<String> = (0..100_000).map(|i| format!("made-up-{i}")).collect();
    let named: Vec<(&str, u32)> = invented.iter().map(|w| (w.as_str(), 1)).collect();
    let (status, body) = post_load(&app, EDGE1, &load("edge-1", &named)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("pool holds 3"),
        "{body}"
    );
    let now = app.clock.monotonic_ms();
    assert_eq!(app.state.load_board.others(None, now).routers, 0);

    // Within the pool, a made-up worker is left out and counted.
    let (status, body) =
        post_load(&app, EDGE1, &load("edge-1", &[("w1", 2), ("made-up", 7)])).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["unknown_workers"], 1);
    let others = app.state.load_board.others(None, now);
    assert_eq!(others.load.len(), 1);
    assert_eq!(others.load[0].worker_id, "w1");
    // u32::MAX outstanding on one worker is refused by name.
    let (status, body) = post_load(&app, EDGE1, &load("edge-1", &[("w1", u32::MAX)])).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("outstanding[0].outstanding"),
        "{body}"
    );
}

#[tokio::test]
async fn a_credential_past_its_record_rate_is_told_when_to_retry_and_others_are_not() {
    let mut cfg = config(RouterIds::Exact);
    cfg.limits.router_records_per_s = 100.0;
    let app = test_app(cfg);
    // Records are charged by count before they are parsed: a full batch
    // (the burst) goes through, one more record does not.
    let batch =
        |router: &str, n: usize| json!({"router_id": router, "outcomes": vec![json!({}); n]});
    let (status, body) = call(
        &app,
        EDGE1,
        "POST",
        "/v1/router/decisions",
        Some(&batch("edge-1", 4_096)),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let req = Request::post("/v1/router/decisions")
        .header("authorization", format!("Bearer {EDGE1}"))
        .header("content-type", "application/json")
        .body(Body::from(batch("edge-1", 1).to_string()))
        .unwrap();
    let resp = tower::ServiceExt::oneshot(app.router.clone(), req)
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(resp.headers()["retry-after"], "1");
    // edge-2 has its own budget.
    let (status, _) = call(
        &app,
        EDGE2,
        "POST",
        "/v1/router/decisions",
        Some(&batch("edge-2", 10)),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    // A second later, 100 more fit.
    app.clock.advance(1_000);
    let (status, _) = call(
        &app,
        EDGE1,
        "POST",
        "/v1/router/decisions",
        Some(&batch("edge-1", 100)),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let metrics = app.metrics().await;
    assert!(
        metrics.contains(r#"scorer_limit_refusals_total{role="router",credential="edge-1",limit="router_records_per_s"} 1"#),
        "{metrics}"
    );
}

//! `[limits]` on view streams: per credential, in all, and the share of
//! the connections streams may hold; past one, 429 `too_many_streams` with
//! `Retry-After`, counted by credential name in `/metrics`.

mod common;

use std::net::SocketAddr;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use scorer_engine::config::Config;
use serde_json::Value;
use tower::ServiceExt;

use common::{TestApp, no_warmup, test_app};

const EDGE_A: &str = "edge-a-token-0123456789";
const EDGE_B: &str = "edge-b-token-0123456789";

fn two_routers() -> Config {
    let mut c = no_warmup();
    c.auth.router.insert("edge-a".into(), EDGE_A.into());
    c.auth.router.insert("edge-b".into(), EDGE_B.into());
    c
}

/// The answer to `GET /v1/view` with `token` from `peer`: the open body
/// (which holds the stream) or the refusal.
async fn open(app: &TestApp, token: Option<&str>, peer: [u8; 4]) -> axum::http::Response<Body> {
    let mut req = Request::get("/v1/view")
        .extension(axum::extract::ConnectInfo(SocketAddr::from((peer, 40000))));
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    app.router
        .clone()
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap()
}

async fn refusal(resp: axum::http::Response<Body>) -> Value {
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(resp.headers()["retry-after"], "5");
    assert_eq!(resp.headers()["connection"], "close");
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["error"]["code"], "too_many_streams", "{v}");
    v
}

fn refusals(metrics: &str, credential: &str, limit: &str) -> f64 {
    let series = format!(
        "scorer_limit_refusals_total{{role=\"router\",credential=\"{credential}\",limit=\"{limit}\"}} "
    );
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(start_paused = true)]
async fn one_stream_past_a_credentials_limit_is_refused_and_counted_and_another_credential_still_streams()
 {
    let mut cfg = two_routers();
    cfg.limits.view_streams_per_credential = 3;
    let app = test_app(cfg);
    let mut held = Vec::new();
    for _ in 0..3 {
        let r = open(&app, Some(EDGE_A), [10, 0, 0, 1]).await;
        assert_eq!(r.status(), StatusCode::OK);
        held.push(r);
    }
    let v = refusal(open(&app, Some(EDGE_A), [10, 0, 0, 1]).await).await;
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("limits.view_streams_per_credential"),
        "{message}"
    );
    assert!(!message.contains(EDGE_A), "never the token: {message}");

    let b = open(&app, Some(EDGE_B), [10, 0, 0, 2]).await;
    assert_eq!(
        b.status(),
        StatusCode::OK,
        "another credential still streams"
    );

    let m = app.metrics().await;
    assert_eq!(refusals(&m, "edge-a", "view_streams_per_credential"), 1.0);
    assert_eq!(refusals(&m, "edge-b", "view_streams_per_credential"), 0.0);
    assert_eq!(common::metric_value(&m, "scorer_view_streams"), Some(4.0));
    assert!(!m.contains(EDGE_A), "the token is never a label");

    // A closed stream frees its place.
    held.pop();
    let mut open_now = app.state.view_streams.watch_open();
    open_now.wait_for(|&n| n == 3).await.unwrap();
    let again = open(&app, Some(EDGE_A), [10, 0, 0, 1]).await;
    assert_eq!(again.status(), StatusCode::OK);
    assert_eq!(
        common::metric_value(&app.metrics().await, "scorer_view_streams"),
        Some(4.0)
    );
}

#[tokio::test(start_paused = true)]
async fn streams_hold_at_most_their_share_of_the_connections_and_the_total() {
    let mut cfg = two_routers();
    // 8 connections, 3/4 kept for short requests: 2 for streams.
    cfg.server.max_connections = 8;
    let app = test_app(cfg);
    let _a = open(&app, Some(EDGE_A), [10, 0, 0, 1]).await;
    let _b = open(&app, Some(EDGE_B), [10, 0, 0, 2]).await;
    let v = refusal(open(&app, Some(EDGE_B), [10, 0, 0, 2]).await).await;
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("reserved_connections_share"),
        "{v}"
    );
    // Short requests still pass.
    let (status, _) = app.get("/healthz").await;
    assert_eq!(status, StatusCode::OK);

    let mut cfg = two_routers();
    cfg.limits.view_streams_max = 1;
    let app = test_app(cfg);
    let _a = open(&app, Some(EDGE_A), [10, 0, 0, 1]).await;
    refusal(open(&app, Some(EDGE_B), [10, 0, 0, 2]).await).await;
    let m = app.metrics().await;
    assert_eq!(refusals(&m, "edge-b", "view_streams_max"), 1.0);
}

#[tokio::test(start_paused = true)]
async fn with_the_router_role_open_streams_are_counted_per_peer_address_as_anonymous() {
    let mut cfg = no_warmup();
    cfg.limits.view_streams_per_credential = 1;
    let app = test_app(cfg);
    let one = open(&app, None, [10, 0, 0, 1]).await;
    assert_eq!(one.status(), StatusCode::OK);
    refusal(open(&app, None, [10, 0, 0, 1]).await).await;
    let other = open(&app, None, [10, 0, 0, 2]).await;
    assert_eq!(other.status(), StatusCode::OK, "another peer");
    let m = app.metrics().await;
    assert_eq!(
        refusals(&m, "anonymous", "view_streams_per_credential"),
        1.0
    );
    assert!(!m.contains("10.0.0.1"), "addresses are never labels");
}

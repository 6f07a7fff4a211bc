//! Who may call what, over real sockets: each role's routes refuse a
//! request without a token or with another role's, two tokens of a role
//! are valid at once, an admin token opens everything, and a refused
//! telemetry post changes no worker.

mod common;

use std::net::SocketAddr;

use common::{no_warmup, test_app};
use scorer_engine::config::Config;
use serde_json::{Value, json};
use service::http::ConnectionLimits;
use tokio::net::TcpListener;

const AGENT: &str = "agent-token-0123456789";
const ROUTER_OLD: &str = "router-old-0123456789";
const ROUTER_NEW: &str = "router-new-0123456789";
const READER: &str = "reader-token-0123456789";
const ADMIN: &str = "admin-token-0123456789";

fn config() -> Config {
    let mut c = no_warmup();
    c.auth.agent.insert("agent-1".into(), AGENT.into());
    c.auth.router.insert("old".into(), ROUTER_OLD.into());
    c.auth.router.insert("new".into(), ROUTER_NEW.into());
    c.auth.reader.insert("dash".into(), READER.into());
    c.auth.admin.insert("ops".into(), ADMIN.into());
    c
}

async fn start(cfg: Config) -> (SocketAddr, common::TestApp) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let limits = ConnectionLimits::from_config(&cfg.server);
    let t = test_app(cfg);
    tokio::spawn(service::http::serve(
        listener,
        t.router.clone(),
        limits,
        None,
        std::future::pending(),
    ));
    (addr, t)
}

/// Status and JSON body of `method path` with `token` and `body`.
async fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let client = reqwest::Client::new();
    let url = format!("http://{addr}{path}");
    let mut req = match method {
        "GET" => client.get(&url),
        "PUT" => client.put(&url),
        "DELETE" => client.delete(&url),
        _ => client.post(&url),
    };
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.expect("send");
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn telemetry() -> Value {
    json!({"snapshots": [{"worker_id": "w1", "timestamp_ms": common::WALL, "cpu_usage": 0.2,
        "queue_depth": 1, "rtt_ms_avg": 1.0, "rtt_ms_p99": 2.0, "error_rate": 0.0}]})
}

#[tokio::test]
async fn each_role_refuses_no_token_and_another_roles_token() {
    let (addr, _t) = start(config()).await;
    let score = json!({"key": "user:1", "candidates": ["w1"]});
    let routes: [(&str, &str, Option<Value>, &str, &str); 5] = [
        (
            "POST",
            "/v1/telemetry",
            Some(telemetry()),
            AGENT,
            ROUTER_NEW,
        ),
        ("POST", "/v1/score", Some(score), ROUTER_NEW, AGENT),
        ("GET", "/v1/workers", None, READER, AGENT),
        ("GET", "/metrics", None, READER, ROUTER_OLD),
        ("GET", "/v1/admin/config", None, ADMIN, READER),
    ];
    for (method, path, body, own, other) in routes {
        let (s, b) = call(addr, method, path, None, body.clone()).await;
        assert_eq!(s, 401, "{path} without a token: {b}");
        assert_eq!(b["error"]["code"], "unauthorized", "{path}");
        let (s, b) = call(
            addr,
            method,
            path,
            Some("nobody-0123456789abc"),
            body.clone(),
        )
        .await;
        assert_eq!(s, 401, "{path} with an unknown token: {b}");
        let (s, b) = call(addr, method, path, Some(other), body.clone()).await;
        assert_eq!(s, 403, "{path} with another role's token: {b}");
        assert_eq!(b["error"]["code"], "forbidden", "{path}");
        let (s, b) = call(addr, method, path, Some(own), body.clone()).await;
        assert!(
            s != 401 && s != 403,
            "{path} with its role's token: {s} {b}"
        );
        let (s, b) = call(addr, method, path, Some(ADMIN), body).await;
        assert!(s != 401 && s != 403, "{path} with the admin token: {s} {b}");
    }
    // Health stays open.
    assert_eq!(call(addr, "GET", "/healthz", None, None).await.0, 200);
    let m = reqwest::Client::new()
        .get(format!("http://{addr}/metrics"))
        .bearer_auth(READER)
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        m.contains(r#"scorer_auth_refusals_total{route="/v1/score",reason="wrong_role"} 1"#),
        "{m}"
    );
    assert!(!m.contains(AGENT) && !m.contains(ADMIN));
}

#[tokio::test]
async fn two_router_tokens_are_valid_at_once() {
    let (addr, _t) = start(config()).await;
    call(
        addr,
        "POST",
        "/v1/telemetry",
        Some(AGENT),
        Some(telemetry()),
    )
    .await;
    let score = json!({"key": "user:1", "candidates": ["w1"]});
    for token in [ROUTER_OLD, ROUTER_NEW] {
        let (s, b) = call(addr, "POST", "/v1/score", Some(token), Some(score.clone())).await;
        assert_eq!(s, 200, "{b}");
        assert_eq!(b["pick"], "w1");
    }
}

#[tokio::test]
async fn a_refused_telemetry_post_changes_no_worker() {
    let (addr, t) = start(config()).await;
    let (s, _) = call(
        addr,
        "POST",
        "/v1/telemetry",
        Some(ROUTER_NEW),
        Some(telemetry()),
    )
    .await;
    assert_eq!(s, 403);
    assert!(t.state.engine.registry().get("w1").is_none());
    let (s, _) = call(addr, "POST", "/v1/telemetry", None, Some(telemetry())).await;
    assert_eq!(s, 401);
    assert!(t.state.engine.registry().get("w1").is_none());
    let (s, _) = call(
        addr,
        "POST",
        "/v1/telemetry",
        Some(AGENT),
        Some(telemetry()),
    )
    .await;
    assert_eq!(s, 200);
    assert!(t.state.engine.registry().get("w1").is_some());
}

#[tokio::test]
async fn without_tokens_every_route_but_admin_off_loopback_is_open() {
    let (addr, _t) = start(no_warmup()).await;
    let (s, b) = call(addr, "POST", "/v1/telemetry", None, Some(telemetry())).await;
    assert_eq!(s, 200, "{b}");
    let (s, _) = call(addr, "GET", "/v1/workers", None, None).await;
    assert_eq!(s, 200);
    // The test client is on loopback, so admin answers too.
    let (s, _) = call(addr, "GET", "/v1/admin/config", None, None).await;
    assert_eq!(s, 200);
}

#[tokio::test]
async fn every_route_of_a_role_refuses_no_token_and_the_document_declares_it() {
    use utoipa::OpenApi;
    let (addr, _t) = start(config()).await;
    let doc = service::http::ApiDoc::openapi();
    let json = serde_json::to_value(&doc).expect("document");
    for (path, _role) in service::http::auth::ROUTE_ROLES {
        let item = &json["paths"][*path];
        let method = ["post", "put", "delete", "get"]
            .into_iter()
            .find(|m| item.get(*m).is_some())
            .map_or("GET", |m| match m {
                "post" => "POST",
                "put" => "PUT",
                "delete" => "DELETE",
                _ => "GET",
            });
        let op = &item[method.to_lowercase()];
        assert!(op.is_object(), "{path} is not in the document");
        assert_eq!(
            op["security"],
            json!([{}, {"bearer": []}]),
            "{path} declares no bearer security"
        );
        let body = (method == "POST" || method == "PUT").then(|| json!({}));
        let uri = path.replace("{worker_id}", "w1");
        let (s, b) = call(addr, method, &uri, None, body).await;
        assert_eq!(s, 401, "{method} {path}: {b}");
    }
    // Every other documented path is one of the open ones.
    for path in json["paths"].as_object().expect("paths").keys() {
        let known = service::http::auth::ROUTE_ROLES
            .iter()
            .any(|(p, _)| p == path);
        assert!(
            known || ["/healthz", "/readyz", "/openapi.json"].contains(&path.as_str()),
            "{path} has no role"
        );
    }
}

//! Who may call what, over real sockets: each role's routes refuse a
//! request without a token or with another role's, two tokens of a role
//! are valid at once, an admin token opens everything, a refused
//! telemetry post changes no worker, two `Authorization` headers get 400,
//! a 401 carries its challenge, and a peer guessing tokens is locked out
//! while the clients that succeeded from it before keep working.

mod common;

use std::net::SocketAddr;

use common::no_warmup;
use reqwest::header::HeaderMap;
use scorer_engine::config::Config;
use serde_json::{Value, json};

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
    common::serve_on_socket(cfg).await
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
            known || ["/healthz", "/readyz", "/openapi.json", "/"].contains(&path.as_str()),
            "{path} has no role"
        );
    }
}

/// Status, headers and JSON body of `GET path` with every `Authorization`
/// value in `auth`, each as a header of its own.
async fn get_with(addr: SocketAddr, path: &str, auth: &[&str]) -> (u16, HeaderMap, Value) {
    let mut req = reqwest::Client::new().get(format!("http://{addr}{path}"));
    for a in auth {
        req = req.header("authorization", *a);
    }
    let resp = req.send().await.expect("send");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let text = resp.text().await.expect("body");
    (
        status,
        headers,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}

async fn metrics(addr: SocketAddr) -> String {
    let (s, _, _) = get_with(addr, "/metrics", &[]).await;
    assert_eq!(s, 401, "metrics without the reader token");
    reqwest::Client::new()
        .get(format!("http://{addr}/metrics"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text")
}

#[tokio::test]
async fn two_authorization_headers_get_400_and_change_nothing() {
    let (addr, t) = start(config()).await;
    let agent = format!("Bearer {AGENT}");
    let resp = reqwest::Client::new()
        .post(format!("http://{addr}/v1/telemetry"))
        .header("authorization", &agent)
        .header("authorization", "Bearer nobody-0123456789abc")
        .json(&telemetry())
        .send()
        .await
        .expect("send");
    assert_eq!(resp.status().as_u16(), 400);
    let b: Value = resp.json().await.expect("json");
    assert_eq!(b["error"]["code"], "repeated_authorization", "{b}");
    assert!(t.state.engine.registry().get("w1").is_none());
    // The same token twice is refused too: the first does not win.
    let (s, _, b) = get_with(addr, "/v1/workers", &[&agent, &agent]).await;
    assert_eq!(s, 400, "{b}");
    let m = metrics(addr).await;
    assert!(
        m.contains(
            r#"scorer_auth_refusals_total{route="/v1/telemetry",reason="repeated_authorization"} 1"#
        ),
        "{m}"
    );
}

#[tokio::test]
async fn every_401_carries_a_bearer_challenge() {
    let (addr, _t) = start(config()).await;
    let (s, h, _) = get_with(addr, "/v1/workers", &[]).await;
    assert_eq!(s, 401);
    assert_eq!(h["www-authenticate"], r#"Bearer realm="scorer""#);
    let (s, h, _) = get_with(addr, "/v1/workers", &["Bearer nobody-0123456789abc"]).await;
    assert_eq!(s, 401);
    assert_eq!(
        h["www-authenticate"],
        r#"Bearer realm="scorer", error="invalid_token""#
    );
    let (s, h, _) = get_with(addr, "/v1/workers", &[&format!("Bearer {AGENT}")]).await;
    assert_eq!(s, 403);
    assert!(h.get("www-authenticate").is_none());
}

#[tokio::test]
async fn a_guessing_peer_is_locked_out_and_a_client_that_succeeded_before_is_not() {
    let mut cfg = config();
    cfg.auth.failure_burst = 3;
    cfg.auth.failure_refill_ms = 2_000;
    let (addr, t) = start(cfg).await;
    let reader = format!("Bearer {READER}");
    let guess = "Bearer nobody-0123456789abc";
    assert_eq!(get_with(addr, "/v1/workers", &[&reader]).await.0, 200);
    for _ in 0..3 {
        assert_eq!(get_with(addr, "/v1/workers", &[guess]).await.0, 401);
    }
    let (s, h, b) = get_with(addr, "/v1/workers", &[guess]).await;
    assert_eq!(s, 429, "{b}");
    assert_eq!(b["error"]["code"], "too_many_auth_failures");
    assert_eq!(h["retry-after"], "2");
    // The reader token succeeded from this address before: it still works.
    assert_eq!(get_with(addr, "/v1/workers", &[&reader]).await.0, 200);
    // The admin token is right, but guessed during the lockout: refused,
    // exactly as a wrong one.
    let admin = format!("Bearer {ADMIN}");
    let (s, _, b) = get_with(addr, "/v1/workers", &[&admin]).await;
    assert_eq!(s, 429, "{b}");
    assert_eq!(get_with(addr, "/v1/workers", &[]).await.0, 429);
    t.clock.advance(1_000);
    let (s, h, _) = get_with(addr, "/v1/workers", &[&admin]).await;
    assert_eq!(s, 429);
    assert_eq!(h["retry-after"], "1");
    // One attempt back after failure_refill_ms.
    t.clock.advance(1_000);
    assert_eq!(get_with(addr, "/v1/workers", &[&admin]).await.0, 200);
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
        m.contains(
            r#"scorer_auth_refusals_total{route="/v1/workers",reason="too_many_auth_failures"} 4"#
        ),
        "{m}"
    );
    assert!(
        m.contains(r#"scorer_auth_refusals_total{route="/v1/workers",reason="unknown_token"} 3"#),
        "{m}"
    );
}

/// `(role, METHOD, path)` of every route in docs/operations.md's role table.
fn documented_roles() -> std::collections::BTreeSet<(String, String, String)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/operations.md");
    let text = std::fs::read_to_string(&path).expect("docs/operations.md");
    let mut out = std::collections::BTreeSet::new();
    let rows = text
        .lines()
        .skip_while(|l| l.trim() != "| role | routes |")
        .skip(2)
        .take_while(|l| l.starts_with('|'));
    for row in rows {
        let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
        let [role, routes] = cells[..] else {
            panic!("a role row has two cells: {row}");
        };
        let role = role.trim_matches('`').to_owned();
        for quoted in routes.split('`').skip(1).step_by(2) {
            if let Some((method, path)) = quoted.split_once(' ')
                && ["GET", "POST", "PUT", "DELETE"].contains(&method)
            {
                out.insert((role.clone(), method.to_owned(), path.to_owned()));
            }
        }
    }
    out
}

#[test]
fn the_documented_role_table_is_the_enforced_one_both_ways() {
    use utoipa::OpenApi;
    let doc = serde_json::to_value(service::http::ApiDoc::openapi()).expect("document");
    let enforced: std::collections::BTreeSet<(String, String, String)> =
        service::http::auth::ROUTE_ROLES
            .iter()
            .flat_map(|(path, role)| {
                let methods = doc["paths"][*path]
                    .as_object()
                    .unwrap_or_else(|| panic!("{path} is not in the OpenAPI document"))
                    .keys()
                    .filter(|m| ["get", "post", "put", "delete"].contains(&m.as_str()))
                    .map(|m| m.to_uppercase())
                    .collect::<Vec<_>>();
                methods
                    .into_iter()
                    .map(|m| (role.as_str().to_owned(), m, (*path).to_owned()))
            })
            .collect();
    let documented = documented_roles();
    let undocumented: Vec<_> = enforced.difference(&documented).collect();
    let unenforced: Vec<_> = documented.difference(&enforced).collect();
    assert!(
        undocumented.is_empty() && unenforced.is_empty(),
        "docs/operations.md's role table differs from ROUTE_ROLES:\n\
         missing from the table: {undocumented:?}\nnot enforced so: {unenforced:?}"
    );
}

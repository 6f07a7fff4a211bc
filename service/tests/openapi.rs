//! The OpenAPI document at `GET /openapi.json` against the handlers (issue
//! #8): every served route is documented and every documented route is
//! served, and real answers (and the request bodies that produced them)
//! validate against the document's schemas.

mod common;

use std::collections::BTreeSet;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use common::{TestApp, WALL, no_warmup, test_app};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

/// Every route of `service::app`, as (method, path).
const ROUTES: &[(&str, &str)] = &[
    ("post", "/v1/telemetry"),
    ("post", "/v1/score"),
    ("post", "/v1/feedback"),
    ("get", "/v1/view"),
    ("post", "/v1/router/load"),
    ("post", "/v1/router/decisions"),
    ("get", "/v1/model/files/{file}"),
    ("get", "/v1/stats"),
    ("get", "/v1/log/stats"),
    ("get", "/v1/workers"),
    ("get", "/v1/features"),
    ("get", "/v1/model"),
    ("get", "/v1/shadow"),
    ("post", "/v1/admin/reload"),
    ("get", "/v1/admin/config"),
    ("post", "/v1/admin/config/rollback"),
    ("post", "/v1/admin/config/canary"),
    ("get", "/v1/config/canary"),
    ("post", "/v1/admin/config/canary/promote"),
    ("post", "/v1/admin/config/canary/abort"),
    ("post", "/v1/admin/model/promote"),
    ("post", "/v1/admin/model/pin"),
    ("delete", "/v1/admin/model/pin"),
    ("post", "/v1/admin/model/rollback"),
    ("get", "/v1/admin/overrides"),
    ("delete", "/v1/admin/overrides"),
    ("put", "/v1/admin/workers/{worker_id}/override"),
    ("delete", "/v1/admin/workers/{worker_id}/override"),
    ("get", "/v1/debug/score"),
    ("get", "/"),
    ("get", "/metrics"),
    ("get", "/openapi.json"),
    ("get", "/healthz"),
    ("get", "/readyz"),
];

async fn document(t: &TestApp) -> Value {
    let (s, doc) = t.get("/openapi.json").await;
    assert_eq!(s, StatusCode::OK);
    doc
}

/// Validates `instance` against `schema`, resolving `#/components/...`
/// references in `doc`.
fn validate(doc: &Value, schema: &Value, instance: &Value, what: &str) {
    let mut root = schema.clone();
    root["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
    root["components"] = doc["components"].clone();
    let validator = jsonschema::validator_for(&root)
        .unwrap_or_else(|e| panic!("{what}: schema does not compile: {e}"));
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{what}: {errors:#?}\ninstance: {instance}"
    );
}

/// The documented JSON schema of `method path` answering `status`.
fn response_schema<'a>(doc: &'a Value, method: &str, path: &str, status: u16) -> &'a Value {
    let op = &doc["paths"][path][method];
    let resp = &op["responses"][status.to_string()];
    assert!(
        resp.is_object(),
        "{method} {path} answered {status}, which the document does not list"
    );
    &resp["content"]["application/json"]["schema"]
}

/// Sends `body` to `method path`, checks the status is `expect`, and
/// validates the answer (and, when `expect` is a success, the request body)
/// against the document.
async fn check(
    t: &TestApp,
    doc: &Value,
    method: &str,
    path_and_query: &str,
    body: Option<&Value>,
    expect: StatusCode,
) -> Value {
    let path = path_and_query.split('?').next().unwrap_or(path_and_query);
    // Requests sent to provoke an error may break the schema on purpose.
    if let Some(b) = body.filter(|_| expect.is_success()) {
        let schema =
            &doc["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"];
        validate(doc, schema, b, &format!("request of {method} {path}"));
    }
    let (s, answer) = match (method, body) {
        ("post", Some(b)) => t.post_json(path_and_query, b).await,
        ("post", None) => t.post(path_and_query, "").await,
        _ => t.get(path_and_query).await,
    };
    assert_eq!(s, expect, "{method} {path_and_query}: {answer}");
    let schema = response_schema(doc, method, path, s.as_u16());
    validate(
        doc,
        schema,
        &answer,
        &format!("{s} answer of {method} {path}"),
    );
    answer
}

#[tokio::test]
async fn every_route_is_documented_and_every_documented_route_is_served() {
    let t = test_app(no_warmup());
    let doc = document(&t).await;
    assert!(
        doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")),
        "{}",
        doc["openapi"]
    );
    let documented: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .expect("paths")
        .iter()
        .flat_map(|(p, item)| {
            item.as_object()
                .expect("path item")
                .keys()
                .filter(|m| ["get", "post", "put", "delete", "patch"].contains(&m.as_str()))
                .map(move |m| (m.clone(), p.clone()))
        })
        .collect();
    let served: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(m, p)| ((*m).to_owned(), (*p).to_owned()))
        .collect();
    assert_eq!(documented, served);
    for (m, p) in &served {
        // A path parameter gets a value; the route must then answer as
        // itself, not as the fallback (whose 404 says `not_found`).
        let uri = p
            .replace("{file}", "model.onnx")
            .replace("{worker_id}", "w1");
        let mut req = Request::builder()
            .method(m.to_uppercase().as_str())
            .uri(uri.as_str())
            .body(Body::empty())
            .expect("request");
        req.extensions_mut()
            .insert(axum::extract::ConnectInfo(std::net::SocketAddr::from((
                [127, 0, 0, 1],
                40000,
            ))));
        let resp = t.router.clone().oneshot(req).await.expect("infallible");
        let s = resp.status();
        // Only a 404's body is read (the view stream's never ends).
        let fallback = s == StatusCode::NOT_FOUND && {
            let body = resp.into_body().collect().await.expect("body").to_bytes();
            String::from_utf8_lossy(&body).contains("\"not_found\"")
        };
        assert!(
            !fallback && s != StatusCode::METHOD_NOT_ALLOWED,
            "{m} {p} is documented but answered {s}"
        );
    }
    // Every operation documents its answers and says what it does.
    for (m, p) in &documented {
        let op = &doc["paths"][p][m];
        assert!(op["responses"]["200"].is_object(), "{m} {p}: no 200");
        assert!(
            op["description"].is_string() || op["summary"].is_string(),
            "{m} {p}: no text"
        );
    }
}

#[tokio::test]
async fn the_snapshot_declares_cache_memory_and_evictions_with_their_bounds() {
    let t = test_app(no_warmup());
    let doc = document(&t).await;
    let props = &doc["components"]["schemas"]["Snapshot"]["properties"];
    let bound = |field: &str, which: &str| props[field][which].as_f64();
    let max_bytes = Some((1u64 << 50) as f64);
    assert_eq!(bound("used_memory_bytes", "maximum"), max_bytes, "{props}");
    assert_eq!(bound("maxmemory_bytes", "minimum"), Some(1.0), "{props}");
    assert_eq!(bound("maxmemory_bytes", "maximum"), max_bytes, "{props}");
    assert_eq!(bound("evicted_keys_per_s", "minimum"), Some(0.0), "{props}");
    assert_eq!(bound("evicted_keys_per_s", "maximum"), Some(1e9), "{props}");
    let required = doc["components"]["schemas"]["Snapshot"]["required"].to_string();
    for field in ["used_memory_bytes", "maxmemory_bytes", "evicted_keys_per_s"] {
        assert!(!required.contains(field), "{field} is optional: {required}");
    }
}

#[tokio::test]
async fn the_snapshot_declares_an_optional_cache_digest_with_its_bounds() {
    let t = test_app(no_warmup());
    let doc = document(&t).await;
    let schemas = &doc["components"]["schemas"];
    let field = schemas["Snapshot"]["properties"]["cache_digest"].to_string();
    assert!(field.contains("CacheDigest"), "{field}");
    let required = schemas["Snapshot"]["required"].to_string();
    assert!(!required.contains("cache_digest"), "{required}");
    let d = &schemas["CacheDigest"]["properties"];
    assert_eq!(
        d["size_bytes"]["maximum"].as_f64(),
        Some(1_048_576.0),
        "{d}"
    );
    assert_eq!(d["hash_count"]["maximum"].as_f64(), Some(16.0), "{d}");
    assert_eq!(d["bloom_b64"]["maxLength"].as_u64(), Some(1_398_104), "{d}");
}

#[tokio::test]
async fn answers_validate_against_the_document() {
    let t = test_app(no_warmup());
    let doc = document(&t).await;
    let snap = |id: &str, cpu: f64| {
        json!({"worker_id": id, "timestamp_ms": WALL, "cpu_usage": cpu, "queue_depth": 3,
               "rtt_ms_avg": 2.0, "rtt_ms_p99": 9.0, "error_rate": 0.01,
               "disk_io_await_ms": 4.0, "cache_hit_rate": 0.9, "region": "eu-1",
               "used_memory_bytes": 3_000_000u64, "maxmemory_bytes": 4_194_304u64,
               "evicted_keys_per_s": 12.5})
    };
    // A cpu in (1, 4] is clamped with a warning: the warnings array is checked too.
    let batch = json!({"snapshots": [snap("w1", 0.2), snap("w2", 1.5), snap("w3", 0.9)]});
    let accepted = check(
        &t,
        &doc,
        "post",
        "/v1/telemetry",
        Some(&batch),
        StatusCode::OK,
    )
    .await;
    assert_eq!(accepted["warnings"].as_array().map(Vec::len), Some(1));

    let score = json!({"key": "order:42", "candidates": ["w1", "w2", "w3", "ghost"],
        "context": {"request_type": "PUT", "timeout_ms": 30, "client_region": "eu-1", "batch_size": 1},
        "explain": "full", "policy": "softmax", "temperature": 0.2, "seed": 7});
    let answer = check(&t, &doc, "post", "/v1/score", Some(&score), StatusCode::OK).await;
    let fb = json!({"decision_id": answer["decision_id"], "worker_id": answer["pick"],
                    "latency_ms": 3.5, "success": true});
    check(&t, &doc, "post", "/v1/feedback", Some(&fb), StatusCode::OK).await;

    // Errors share one documented body.
    let bad = json!({"snapshots": [snap("w1", -0.5)]});
    let e = check(
        &t,
        &doc,
        "post",
        "/v1/telemetry",
        Some(&bad),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(e["error"]["details"][0]["field"], "cpu_usage");
    let ghosts = json!({"key": "k", "candidates": ["ghost"]});
    check(
        &t,
        &doc,
        "post",
        "/v1/score",
        Some(&ghosts),
        StatusCode::SERVICE_UNAVAILABLE,
    )
    .await;
    let (s, e) = t.post("/v1/score", "{\"key\": ").await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    validate(
        &doc,
        response_schema(&doc, "post", "/v1/score", 400),
        &e,
        "400",
    );

    for path in [
        "/v1/stats",
        "/v1/log/stats",
        "/v1/workers?limit=2&offset=1",
        "/v1/features",
        "/v1/model",
        "/v1/shadow",
        "/v1/admin/config",
        "/healthz",
        "/readyz",
        "/v1/debug/score?key=user:1&candidates=w1,w2&request_type=GET&format=json",
    ] {
        check(&t, &doc, "get", path, None, StatusCode::OK).await;
    }
    check(
        &t,
        &doc,
        "get",
        "/v1/workers?limit=0",
        None,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    check(
        &t,
        &doc,
        "get",
        "/v1/debug/score?key=k&candidates=w1&timeout_ms=soon",
        None,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    check(&t, &doc, "post", "/v1/admin/reload", None, StatusCode::OK).await;
    check(
        &t,
        &doc,
        "post",
        "/v1/admin/model/rollback",
        None,
        StatusCode::CONFLICT,
    )
    .await;
    check(
        &t,
        &doc,
        "post",
        "/v1/admin/model/promote",
        Some(&json!({"dir": "no/such/model"})),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
}

#[tokio::test]
async fn text_answers_carry_their_documented_content_types() {
    let t = test_app(no_warmup());
    let doc = document(&t).await;
    for (path, query) in [
        ("/", ""),
        ("/metrics", ""),
        ("/v1/debug/score", "?key=k&candidates=w1"),
    ] {
        let resp = t
            .router
            .clone()
            .oneshot(
                Request::get(format!("{path}{query}"))
                    .body(Body::empty())
                    .expect("request"),
            )
            .await
            .expect("infallible");
        let status = resp.status();
        let ct = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let _ = resp.into_body().collect().await;
        let content = doc["paths"][path]["get"]["responses"][status.as_str()]["content"]
            .as_object()
            .unwrap_or_else(|| panic!("{path} answered {status}, undocumented"));
        let essence = ct.split(';').next().unwrap_or("").trim();
        assert!(
            content.contains_key(essence),
            "{path}: content type {ct} not in {:?}",
            content.keys().collect::<Vec<_>>()
        );
    }
}

#[tokio::test]
async fn each_routes_security_is_what_the_running_config_enforces() {
    let security =
        |doc: &Value, method: &str, path: &str| doc["paths"][path][method]["security"].clone();
    // No credentials: every role's routes are open, or take a bearer token.
    let open = document(&test_app(no_warmup())).await;
    assert_eq!(
        security(&open, "post", "/v1/score"),
        json!([{}, {"bearer": []}])
    );
    assert!(security(&open, "get", "/healthz").is_null());

    let mut cfg = no_warmup();
    cfg.auth
        .router
        .insert("edge-1".into(), "router-token-0123456789".into());
    let doc = document(&test_app(cfg.clone())).await;
    assert_eq!(security(&doc, "post", "/v1/score"), json!([{"bearer": []}]));
    assert_eq!(
        security(&doc, "post", "/v1/feedback"),
        json!([{"bearer": []}])
    );
    assert_eq!(
        security(&doc, "post", "/v1/telemetry"),
        json!([{}, {"bearer": []}])
    );
    assert!(doc["components"]["securitySchemes"]["mutualTLS"].is_null());

    cfg.server.tls.cert_path = Some("server.crt".into());
    cfg.server.tls.key_path = Some("server.key".into());
    cfg.server.tls.client_ca_path = Some("clients.crt".into());
    let doc = document(&test_app(cfg)).await;
    assert_eq!(
        security(&doc, "post", "/v1/score"),
        json!([{"bearer": []}, {"mutualTLS": []}])
    );
    assert_eq!(
        doc["components"]["securitySchemes"]["mutualTLS"]["type"],
        "mutualTLS"
    );
}

#[tokio::test]
async fn canary_answers_validate_against_the_document() {
    let mut cfg = no_warmup();
    cfg.model.enabled = false;
    let (t, next) = common::reloadable(cfg, None);
    let doc = document(&t).await;
    let (start, status) = ("/v1/admin/config/canary", "/v1/config/canary");
    let split = json!({"fraction": 0.1, "reason": "try a lower cpu threshold"});
    let unprocessable = StatusCode::UNPROCESSABLE_ENTITY;
    check(&t, &doc, "post", start, Some(&split), unprocessable).await;
    check(&t, &doc, "get", status, None, StatusCode::NOT_FOUND).await;
    next.lock().expect("lock").scoring.cpu_high = 0.6;
    check(&t, &doc, "post", start, Some(&split), StatusCode::OK).await;
    check(&t, &doc, "post", start, Some(&split), StatusCode::CONFLICT).await;
    let snap = json!({"snapshots": [{"worker_id": "w1", "timestamp_ms": WALL, "cpu_usage": 0.5,
        "queue_depth": 0, "rtt_ms_avg": 1.0, "rtt_ms_p99": 2.0, "error_rate": 0.0}]});
    t.post_json("/v1/telemetry", &snap).await;
    for i in 0..20 {
        let (_, d) = t
            .post_json(
                "/v1/score",
                &json!({"key": format!("user:{i}"), "candidates": ["w1"]}),
            )
            .await;
        let fb = json!({"decision_id": d["decision_id"], "worker_id": "w1", "latency_ms": 1.5, "success": i % 2 == 0});
        t.post_json("/v1/feedback", &fb).await;
    }
    let st = check(&t, &doc, "get", status, None, StatusCode::OK).await;
    assert_eq!(
        st["arms"][0]["outcomes"].as_u64().unwrap_or(0)
            + st["arms"][1]["outcomes"].as_u64().unwrap_or(0),
        20
    );
    let abort = "/v1/admin/config/canary/abort";
    check(&t, &doc, "post", abort, None, StatusCode::OK).await;
    check(&t, &doc, "post", abort, None, StatusCode::CONFLICT).await;
    let promote = "/v1/admin/config/canary/promote";
    check(&t, &doc, "post", promote, None, StatusCode::CONFLICT).await;
    check(&t, &doc, "post", start, Some(&split), StatusCode::OK).await;
    check(&t, &doc, "post", promote, None, StatusCode::OK).await;
}

#[tokio::test]
async fn an_outcomes_cache_hit_is_an_optional_boolean() {
    let t = test_app(no_warmup());
    let doc = document(&t).await;
    for name in ["Feedback", "RouterOutcome"] {
        let schema = &doc["components"]["schemas"][name];
        let hit = &schema["properties"]["cache_hit"];
        assert!(hit.to_string().contains("boolean"), "{name}: {hit}");
        assert!(
            hit["description"]
                .as_str()
                .is_some_and(|d| d.contains("miss")),
            "{name}: {hit}"
        );
        let required = schema["required"].to_string();
        assert!(!required.contains("cache_hit"), "{name}: {required}");
        for good in [json!(true), json!(false), Value::Null] {
            validate(&doc, hit, &good, &format!("{name}.cache_hit {good}"));
        }
    }
    // A body with it validates and is recorded.
    common::report_busy_w1(&t).await;
    let score = json!({"key": "user:1", "candidates": ["w1"]});
    let answer = check(&t, &doc, "post", "/v1/score", Some(&score), StatusCode::OK).await;
    let fb = json!({"decision_id": answer["decision_id"], "worker_id": "w1",
                    "latency_ms": 2.5, "success": true, "cache_hit": false});
    check(&t, &doc, "post", "/v1/feedback", Some(&fb), StatusCode::OK).await;
}

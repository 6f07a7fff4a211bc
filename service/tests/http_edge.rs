//! The HTTP edge over real sockets: slow and silent clients are cut off,
//! open connections are capped, slow and oversized bodies are answered at
//! once with their own codes, and every body is read as the objects it
//! claims to be.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use common::{WALL, no_warmup, test_app};
use scorer_engine::config::Config;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest any socket wait in these tests may take before it counts as "never".
const PATIENCE: Duration = Duration::from_secs(5);

async fn start(cfg: Config) -> SocketAddr {
    common::serve_on_socket(cfg).await.0
}

/// Reads until the peer closes; the bytes read and how long it took, or
/// `None` if it was still open after [`PATIENCE`].
async fn until_closed(s: &mut TcpStream) -> Option<(Vec<u8>, Duration)> {
    let t0 = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = PATIENCE.checked_sub(t0.elapsed())?;
        match tokio::time::timeout(left, s.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0) | Err(_)) => return Some((got, t0.elapsed())),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// Reads one whole response (head and `content-length` body) off a kept-alive connection.
async fn response(s: &mut TcpStream) -> (u16, Value) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + PATIENCE;
    let head_end = loop {
        if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = tokio::time::timeout_at(deadline.into(), s.read(&mut buf))
            .await
            .expect("a response in time")
            .expect("read");
        assert!(n > 0, "closed before a response: {got:?}");
        got.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&got[..head_end]).to_ascii_lowercase();
    let status = head[9..12].parse().expect("status");
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().expect("length"));
    while got.len() < head_end + len {
        let n = tokio::time::timeout_at(deadline.into(), s.read(&mut buf))
            .await
            .expect("a body in time")
            .expect("read");
        assert!(n > 0, "closed mid-body");
        got.extend_from_slice(&buf[..n]);
    }
    let body = &got[head_end..head_end + len];
    (status, serde_json::from_slice(body).unwrap_or(Value::Null))
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nhost: t\r\n\r\n")
}

fn fast_timeouts() -> Config {
    let mut cfg = no_warmup();
    cfg.server.header_read_timeout_ms = 200;
    cfg
}

#[tokio::test]
async fn half_a_request_line_is_closed_after_the_header_timeout() {
    let addr = start(fast_timeouts()).await;
    let mut ok = TcpStream::connect(addr).await.expect("connect");
    ok.write_all(get("/healthz").as_bytes())
        .await
        .expect("write");
    assert_eq!(response(&mut ok).await.0, 200);

    let mut slow = TcpStream::connect(addr).await.expect("connect");
    slow.write_all(b"GET /healthz HT").await.expect("write");
    let (_, after) = until_closed(&mut slow)
        .await
        .expect("closed by the header timeout");
    assert!(
        after >= Duration::from_millis(150),
        "closed after {after:?}"
    );
}

#[tokio::test]
async fn a_connection_with_no_traffic_is_closed_after_the_idle_timeout() {
    let mut cfg = no_warmup();
    cfg.server.request_timeout_ms = 100;
    cfg.server.body_read_timeout_ms = 50;
    cfg.server.idle_timeout_ms = 300;
    // Far beyond the test's patience: only the idle timer can close it.
    cfg.server.header_read_timeout_ms = 60_000;
    let addr = start(cfg).await;
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(get("/healthz").as_bytes())
        .await
        .expect("write");
    assert_eq!(response(&mut s).await.0, 200);
    let (rest, after) = until_closed(&mut s).await.expect("closed when idle");
    assert!(rest.is_empty(), "{rest:?}");
    assert!(
        after >= Duration::from_millis(250),
        "closed after {after:?}"
    );
}

#[tokio::test]
async fn connections_beyond_the_cap_are_closed_at_once() {
    let mut cfg = no_warmup();
    cfg.server.max_connections = 2;
    let addr = start(cfg).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        s.write_all(get("/healthz").as_bytes())
            .await
            .expect("write");
        assert_eq!(response(&mut s).await.0, 200);
        held.push(s);
    }
    let mut third = TcpStream::connect(addr).await.expect("tcp connect");
    let _ = third.write_all(get("/healthz").as_bytes()).await;
    let (answer, _) = until_closed(&mut third).await.expect("closed at once");
    assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));

    // A freed slot serves again (bounded poll: the slot frees when the
    // server notices the close).
    drop(held.pop());
    let deadline = Instant::now() + PATIENCE;
    loop {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        let _ = s
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n")
            .await;
        match until_closed(&mut s).await {
            Some((bytes, _)) if bytes.starts_with(b"HTTP/1.1 200") => break,
            _ if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(20)).await,
            other => panic!("no slot freed: {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_slow_body_gets_408_body_timeout() {
    let mut cfg = no_warmup();
    cfg.server.body_read_timeout_ms = 200;
    let addr = start(cfg).await;
    for path in ["/v1/telemetry", "/v1/score", "/v1/feedback"] {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"sna"
        );
        s.write_all(head.as_bytes()).await.expect("write");
        let t0 = Instant::now();
        let (status, body) = response(&mut s).await;
        assert_eq!(status, 408, "{path}: {body}");
        assert_eq!(body["error"]["code"], "body_timeout", "{path}: {body}");
        // Well before the 2 s request timeout's 503.
        assert!(t0.elapsed() < Duration::from_millis(1_500), "{path}");
    }
}

#[tokio::test]
async fn a_declared_length_over_the_limit_gets_413_without_waiting_for_the_body() {
    let mut cfg = no_warmup();
    cfg.server.max_body_bytes = 1024;
    let addr = start(cfg).await;
    for path in ["/v1/telemetry", "/v1/score", "/v1/feedback"] {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\ncontent-length: 1000000000000\r\n\r\n"
        );
        s.write_all(head.as_bytes()).await.expect("write");
        let t0 = Instant::now();
        let (status, body) = response(&mut s).await;
        assert_eq!(status, 413, "{path}: {body}");
        assert_eq!(body["error"]["code"], "body_too_large", "{path}: {body}");
        // No body was sent at all: only an answer from the headers is this fast.
        assert!(t0.elapsed() < Duration::from_millis(500), "{path}");
    }
}

#[tokio::test]
async fn arrays_in_place_of_objects_are_refused_everywhere() {
    let t = test_app(no_warmup());
    for (path, body, expected) in [
        (
            "/v1/score",
            json!(["user:1", null, ["w1", "w2"]]),
            "expected a JSON object with fields `key`",
        ),
        (
            "/v1/score",
            json!({"key": "k", "context": ["GET"], "candidates": ["w1"]}),
            "context: expected a JSON object with fields",
        ),
        (
            "/v1/telemetry",
            json!({"snapshots": [["w", WALL, 0.5, 1, 1, 1, 0]]}),
            "snapshots[0]: expected a JSON object with fields `worker_id`",
        ),
        (
            "/v1/telemetry",
            json!([[["w", WALL, 0.5, 1, 1, 1, 0]]]),
            "expected a JSON object with fields `snapshots`, got an array",
        ),
        (
            "/v1/feedback",
            json!(["019ad1c4-0000-7000-8000-000000000000", "w1", 1.0, true]),
            "expected a JSON object with fields `decision_id`",
        ),
    ] {
        let (status, answer) = t.post_json(path, &body).await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{path} {body}: {answer}"
        );
        assert_eq!(answer["error"]["code"], "invalid_body", "{answer}");
        let message = answer["error"]["message"].as_str().expect("message");
        assert!(message.starts_with(expected), "{path} {body}: {message}");
        assert!(!message.contains("invalid length"), "{message}");
    }
    // Nothing was applied.
    let (_, workers) = t.get("/v1/workers").await;
    assert_eq!(workers["total"], 0, "{workers}");
    let (_, stats) = t.get("/v1/stats").await;
    assert_eq!(stats["decisions"], 0, "{stats}");
}

#[tokio::test]
async fn a_timestamp_in_seconds_is_refused_suggesting_milliseconds() {
    let t = test_app(no_warmup());
    let snap = json!({"worker_id": "w1", "timestamp_ms": 1_796_147_107_u64, "cpu_usage": 0.5,
        "queue_depth": 1, "rtt_ms_avg": 1.0, "rtt_ms_p99": 2.0, "error_rate": 0.0});
    let (status, answer) = t
        .post_json("/v1/telemetry", &json!({"snapshots": [snap]}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    let detail = &answer["error"]["details"][0];
    assert_eq!(detail["code"], "implausible_timestamp", "{answer}");
    assert!(
        detail["reason"]
            .as_str()
            .expect("reason")
            .contains("milliseconds"),
        "{answer}"
    );
    let (_, workers) = t.get("/v1/workers").await;
    assert_eq!(workers["total"], 0, "{workers}");
}

/// A request hyper cannot parse is answered before any service runs; the
/// answer still has the service's error shape, and the connection closes.
#[tokio::test]
async fn an_unparsable_request_gets_a_json_400_and_is_closed() {
    let addr = start(fast_timeouts()).await;
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(b"GARBAGE\r\n\r\n").await.expect("write");
    let (answer, _) = until_closed(&mut s).await.expect("closed");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 400 "), "{text}");
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    assert_eq!(v["error"]["code"], "malformed_request", "{text}");
    assert!(text.contains("content-type: application/json"), "{text}");
}

/// More than 100 headers: hyper's 431, with the service's error shape.
#[tokio::test]
async fn too_many_headers_get_a_json_431() {
    let addr = start(fast_timeouts()).await;
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let mut req = b"GET /healthz HTTP/1.1\r\nhost: x\r\n".to_vec();
    for i in 0..200 {
        req.extend_from_slice(format!("x-h{i}: v\r\n").as_bytes());
    }
    req.extend_from_slice(b"\r\n");
    s.write_all(&req).await.expect("write");
    let (answer, _) = until_closed(&mut s).await.expect("closed");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 431 "), "{text}");
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    assert_eq!(v["error"]["code"], "headers_too_large", "{text}");
}

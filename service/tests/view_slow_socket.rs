//! A view stream over a real socket whose client stops reading: the bytes
//! its socket does not take count against `limits.view_stream_budget_bytes`,
//! so it is cut off, its queue freed, its place given back and its
//! connection closed, while the service keeps answering.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{TestApp, no_warmup};
use scorer_core::clock::Clock;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

/// Budget of the test's streams, bytes: well below one full view.
const BUDGET_BYTES: u64 = 256 * 1024;
/// Workers reported: a full view of about 2 MB.
const WORKERS: usize = 10_000;

async fn start() -> (SocketAddr, TestApp) {
    let mut cfg = no_warmup();
    cfg.limits.view_stream_budget_bytes = BUDGET_BYTES;
    common::serve_on_socket(cfg).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_cut_off_and_its_queue_freed() {
    let (addr, app) = start().await;
    let now = app.clock.wall_ms();
    let snapshots: Vec<_> = (0..WORKERS)
        .map(|i| {
            json!({"worker_id": format!("worker-{i:05}"), "timestamp_ms": now, "cpu_usage": 0.5,
                   "queue_depth": 3, "rtt_ms_avg": 1.0, "rtt_ms_p99": 2.0, "error_rate": 0.0})
        })
        .collect();
    let (status, body) = app
        .post_json("/v1/telemetry", &json!({ "snapshots": snapshots }))
        .await;
    assert_eq!(status.as_u16(), 200, "{body}");

    let mut open_now = app.state.view_streams.watch_open();
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .set_recv_buffer_size(4_096)
        .expect("small receive buffer");
    let mut stalled = socket.connect(addr).await.expect("connect");
    stalled
        .write_all(b"GET /v1/view HTTP/1.1\r\nhost: test\r\n\r\n")
        .await
        .expect("request");
    tokio::time::timeout(Duration::from_secs(10), open_now.changed())
        .await
        .expect("the stream opens within 10 s")
        .expect("watch");
    // Never read: full views pile up in the socket, then in the queue.
    tokio::time::timeout(Duration::from_secs(60), open_now.wait_for(|&n| n == 0))
        .await
        .expect("cut off within a minute")
        .expect("watch");
    let m = app.metrics().await;
    assert_eq!(
        common::metric_value(&m, "scorer_view_stream_cutoffs_total"),
        Some(1.0)
    );
    assert_eq!(
        common::metric_value(&m, "scorer_view_stream_queued_bytes"),
        Some(0.0)
    );
    // The client that still does not read has its connection closed: once
    // it reads again, the stream ends in a close, not a kept-alive wait.
    tokio::time::sleep(Duration::from_millis(
        service::http::endpoints::view::CUT_GRACE_MS + 500,
    ))
    .await;
    let ends = async {
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match stalled.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(5), ends)
        .await
        .expect("the connection is closed");
    // The service still answers on other connections.
    let health = reqwest::get(format!("http://{addr}/healthz"))
        .await
        .expect("healthz");
    assert_eq!(health.status().as_u16(), 200);
}

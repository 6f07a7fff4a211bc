//! HTTP throughput of `POST /v1/score` with the decision log on vs off,
//! measured in the same run on loopback (issue #4; target: logging costs
//! <= 5%). Rounds alternate between the two servers so machine noise hits
//! both; the median of the rounds is reported. A logging round includes the
//! writer's flush of what it queued (a conservative figure: in service the
//! flush overlaps the next requests).
//!
//! `cargo bench -p service --bench http_log_overhead`

#![allow(missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use cpu_time::ProcessTime;

use scorer_core::clock::SystemClock;
use scorer_engine::Engine;
use scorer_engine::config::Config;
use scorer_log::DecisionLog;
use serde_json::json;
use service::{AppState, app};

const WORKERS: usize = 16;
const CLIENTS: usize = 8;
const REQUESTS_PER_ROUND: usize = 4_000;
const ROUNDS: usize = 7;
/// Overrides [`REQUESTS_PER_ROUND`] (e.g. a short run under `valgrind`).
const REQUESTS_ENV: &str = "HTTP_LOG_OVERHEAD_REQUESTS";
/// Overrides [`ROUNDS`].
const ROUNDS_ENV: &str = "HTTP_LOG_OVERHEAD_ROUNDS";
/// `on` or `off`: run only that server's rounds, so that two runs under
/// `valgrind --tool=callgrind` give the instructions logging adds per
/// request, a figure the host's noise does not move.
const ONLY_ENV: &str = "HTTP_LOG_OVERHEAD_ONLY";

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(default)
}

/// One round's figures: requests per second and process CPU time (client,
/// server and log writer together) per request, microseconds.
struct Round {
    rps: f64,
    cpu_us_per_request: f64,
}

async fn serve(log: bool, dir: &std::path::Path) -> (String, Option<Arc<DecisionLog>>) {
    let mut cfg = Config::default();
    cfg.scoring.warmup_ms = 0;
    // One report must keep the workers alive and fresh for the whole run.
    cfg.telemetry.dead_after_ms = 3_600_000;
    cfg.telemetry.forget_after_ms = 3_600_000;
    cfg.freshness.fresh_ms = 3_599_999;
    cfg.log.dir = dir.join("decisions");
    let clock = Arc::new(SystemClock::new());
    let mut engine = Engine::new(cfg.clone());
    let mut handle = None;
    if log {
        let l = Arc::new(DecisionLog::start(cfg.log.clone(), clock.clone()).expect("log"));
        engine = engine.with_log(l.clone());
        handle = Some(l);
    }
    let state = AppState::new(engine, clock);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app(state)).await });
    (format!("http://{addr}"), handle)
}

/// Requests per second of one round. With a log, the round ends only once
/// the writer has appended everything the round queued, so the writer's work
/// is charged to the round that caused it rather than to the next one.
async fn round(
    client: &reqwest::Client,
    (base, log): &(String, Option<Arc<DecisionLog>>),
    body: &serde_json::Value,
    total: usize,
) -> Round {
    let start = Instant::now();
    let cpu_start = ProcessTime::now();
    let per = total / CLIENTS;
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let (c, url, b) = (client.clone(), format!("{base}/v1/score"), body.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..per {
                let r = c.post(&url).json(&b).send().await.expect("send");
                assert!(r.status().is_success(), "status {}", r.status());
                let _ = r.bytes().await;
            }
        }));
    }
    for t in tasks {
        t.await.expect("client");
    }
    if let Some(log) = log {
        let log = log.clone();
        tokio::task::spawn_blocking(move || drop(log.hold_writer()))
            .await
            .expect("flush");
    }
    let done = (per * CLIENTS) as f64;
    Round {
        rps: done / start.elapsed().as_secs_f64(),
        cpu_us_per_request: cpu_start.elapsed().as_secs_f64() * 1e6 / done,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

#[tokio::main]
async fn main() {
    // `cargo test --all-targets` runs benches once in test mode: keep that quick.
    let quick =
        std::env::args().any(|a| a == "--test") || !std::env::args().any(|a| a == "--bench");
    let dir = std::env::temp_dir().join(format!("scorer-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let on_srv = serve(true, &dir.join("on")).await;
    let off_srv = serve(false, &dir.join("off")).await;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(CLIENTS)
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let snaps: Vec<_> = (0..WORKERS)
        .map(|i| json!({"worker_id": format!("w{i}"), "timestamp_ms": now, "cpu_usage": (i % 10) as f64 / 10.0,
                        "queue_depth": i % 30, "rtt_ms_avg": 1.0, "rtt_ms_p99": 5.0 + i as f64, "error_rate": 0.0}))
        .collect();
    for (base, _) in [&on_srv, &off_srv] {
        let r = client
            .post(format!("{base}/v1/telemetry"))
            .json(&json!({"snapshots": snaps}))
            .send()
            .await
            .expect("telemetry");
        assert!(r.status().is_success());
    }
    let body = json!({"key": "user:1:profile", "candidates": (0..WORKERS).map(|i| format!("w{i}")).collect::<Vec<_>>()});
    if quick {
        let _ = round(&client, &on_srv, &body, CLIENTS * 4).await;
        println!("http_log_overhead: smoke run ok (run with `cargo bench` for figures)");
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    let requests = env_usize(REQUESTS_ENV, REQUESTS_PER_ROUND);
    let rounds = env_usize(ROUNDS_ENV, ROUNDS);
    let only = std::env::var(ONLY_ENV).ok();
    let (run_on, run_off) = match only.as_deref() {
        Some("on") => (true, false),
        Some("off") => (false, true),
        _ => (true, true),
    };
    let (mut on, mut off) = (Vec::new(), Vec::new());
    let warm = if run_off { &off_srv } else { &on_srv };
    let _ = round(&client, warm, &body, requests).await;
    for _ in 0..rounds {
        if run_on {
            on.push(round(&client, &on_srv, &body, requests).await);
        }
        if run_off {
            off.push(round(&client, &off_srv, &body, requests).await);
        }
    }
    if !(run_on && run_off) {
        let (mode, v) = if run_on { ("on", &on) } else { ("off", &off) };
        let r = median(v.iter().map(|r| r.rps).collect());
        println!("log {mode} only: median {r:.0} req/s ({rounds} rounds of {requests})");
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    let rps = |v: &[Round]| median(v.iter().map(|r| r.rps).collect());
    let cpu = |v: &[Round]| median(v.iter().map(|r| r.cpu_us_per_request).collect());
    let (m_on, m_off) = (rps(&on), rps(&off));
    let (c_on, c_off) = (cpu(&on), cpu(&off));
    println!(
        "POST /v1/score, {WORKERS} candidates, {CLIENTS} keep-alive clients, {rounds} alternating rounds of {requests}"
    );
    println!("  log off: median {m_off:.0} req/s, {c_off:.1} us CPU/request");
    println!("  log on:  median {m_on:.0} req/s, {c_on:.1} us CPU/request");
    println!(
        "  logging costs {:.1}% of throughput, {:.1}% more CPU per request",
        (1.0 - m_on / m_off) * 100.0,
        (c_on / c_off - 1.0) * 100.0
    );
    let _ = std::fs::remove_dir_all(&dir);
}

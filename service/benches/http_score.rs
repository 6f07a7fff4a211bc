//! Per-call cost of `POST /v1/score` beside the server's HTTP floor
//! (`GET /healthz`), measured from a separate process against the real
//! service binary, in the same run.
//!
//! The bench starts `target/<profile>/service` with a temporary config (16
//! workers, default model, decision log on unless `HTTP_SCORE_LOG=off`),
//! pinned to core 0 with `taskset` when there are two cores or more, and
//! pins itself (a one-thread client: hyper HTTP/1.1 connections, one
//! request in flight per connection, closed loop) to core 1. It then runs
//! alternating rounds of `/healthz` and `/v1/score` at 1 and 8 connections
//! and prints, per endpoint and concurrency, the median over rounds of the
//! per-round p50, p99 and requests per second, the ratios the scorer call
//! is held to, the service's own per-stage breakdown of the score calls
//! (`scorer_score_stage_seconds` from `/metrics`: mean per call), the
//! client's CPU use (a client near 100% of its core caps the figures) and
//! the service's RSS.
//!
//! `cargo bench -p service --bench http_score`. Env: `HTTP_SCORE_SECS` per
//! round (2); `HTTP_SCORE_ROUNDS` (3); `HTTP_SCORE_LOG` `on`/`off`, or `both`
//! (the log's cost: a service with it on against one with it off, 5
//! alternating rounds); `HTTP_SCORE_EXPLAIN` the request's `explain` (JSON);
//! `HTTP_SCORE_PIN` `both`/`client`/`none`; `HTTP_SCORE_SERVICE_BIN` another
//! binary; `HTTP_SCORE_WORKERS` workers reporting (16; each request names the
//! next 16); `HTTP_SCORE_FEEDBACK=0`: no feedback (by default each answer's
//! outcome goes back in a batch every 5 ms, as a router should).
//!
//! `cargo bench -p service --bench http_score -- --calibrate FILE` instead
//! measures what the evaluation's simulator charges a score call and writes
//! it to FILE (relative to the repository root; the shipped one is
//! `evaluation/calibration/http_score.json`): alternating rounds of
//! `/healthz` and `/v1/score` at one connection, the median `/healthz`
//! round trip as `round_trip_us`, and the quantiles of (score latency −
//! that round trip) as `in_service_us`, with the date, commit and host.

#![allow(missing_docs)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use cpu_time::ProcessTime;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde_json::json;

#[path = "http_score/calibrate.rs"]
mod calibrate;
#[path = "http_score/stages.rs"]
mod stages;

use stages::{stage_delta, stages};

/// Candidates per score request.
const CANDIDATES: usize = 16;
const CONCURRENCIES: [usize; 2] = [1, 8];

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Service {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// `HTTP_SCORE_PIN`: `both` (default: service on core 0, client on core 1),
/// `client` (client on core 1, service free on every core) or `none`.
fn pin_mode() -> String {
    std::env::var("HTTP_SCORE_PIN").unwrap_or_else(|_| "both".to_owned())
}

fn can_pin() -> bool {
    pin_mode() != "none"
        && std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2
        && Command::new("taskset")
            .arg("-V")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

fn start_service(log: bool, pin: bool) -> Service {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:{port}\"\n\n\
         [scoring]\nwarmup_ms = 0\n\n\
         [telemetry]\ndead_after_ms = 3600000\nforget_after_ms = 3600000\n\n\
         [freshness]\nfresh_ms = 3599999\n\n\
         [log]\nenabled = {log}\ndir = \"{}\"\n",
        dir.path().join("decisions").display()
    );
    let path = dir.path().join("config.toml");
    std::fs::write(&path, config).expect("config");
    let bin = std::env::var("HTTP_SCORE_SERVICE_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_service").to_owned());
    let bin = bin.as_str();
    let mut cmd = if pin {
        let mut c = Command::new("taskset");
        c.args(["-c", "0", bin]);
        c
    } else {
        Command::new(bin)
    };
    // The model directory is relative to the repository root.
    cmd.current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .arg("--config")
        .arg(&path)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let child = cmd.spawn().expect("start the service binary");
    Service {
        child,
        port,
        _dir: dir,
    }
}

async fn connect(port: u16) -> SendRequest<Full<Bytes>> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
            Ok(s) => {
                s.set_nodelay(true).expect("nodelay");
                let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s))
                    .await
                    .expect("handshake");
                tokio::spawn(conn);
                return send;
            }
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("service did not listen within 60 s: {e}"),
        }
    }
}

#[derive(Clone)]
enum Call {
    Healthz,
    /// Bodies used in turn (each names another 16 of the workers).
    Score(
        std::sync::Arc<Vec<Bytes>>,
        std::sync::Arc<std::sync::atomic::AtomicUsize>,
    ),
    Telemetry(Bytes),
    Feedback(Bytes),
    Metrics,
    LogStats,
}

impl Call {
    fn request(&self) -> hyper::Request<Full<Bytes>> {
        let b = hyper::Request::builder().header("host", "127.0.0.1");
        let (b, body) = match self {
            Self::Healthz => (b.method("GET").uri("/healthz"), Bytes::new()),
            Self::Metrics => (b.method("GET").uri("/metrics"), Bytes::new()),
            Self::LogStats => (b.method("GET").uri("/v1/log/stats"), Bytes::new()),
            Self::Score(bodies, next) => (
                b.method("POST")
                    .uri("/v1/score")
                    .header("content-type", "application/json"),
                bodies[next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % bodies.len()]
                    .clone(),
            ),
            Self::Telemetry(body) => (
                b.method("POST")
                    .uri("/v1/telemetry")
                    .header("content-type", "application/json"),
                body.clone(),
            ),
            Self::Feedback(body) => (
                b.method("POST")
                    .uri("/v1/feedback")
                    .header("content-type", "application/json"),
                body.clone(),
            ),
        };
        b.body(Full::new(body)).expect("request")
    }
}

async fn call(send: &mut SendRequest<Full<Bytes>>, c: &Call) -> Bytes {
    send.ready().await.expect("connection ready");
    let resp = send.send_request(c.request()).await.expect("send");
    let status = resp.status();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    assert!(
        status.is_success(),
        "status {status}: {}",
        String::from_utf8_lossy(&body)
    );
    body
}

/// One round's figures.
struct Round {
    p50_us: f64,
    p99_us: f64,
    rps: f64,
    client_cpu: f64,
    /// Every call's latency, sorted, µs.
    latencies_us: Vec<f64>,
}

/// Outcomes waiting for the next batch, as JSON items.
type Outbox = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// The feedback item for a score answer: its decision and pick, with the
/// call's latency standing in for the request's.
fn outcome(answer: &[u8], latency_ms: f64) -> Option<String> {
    let text = std::str::from_utf8(answer).ok()?;
    let field = |name: &str| {
        let start = text.find(&format!("\"{name}\":\""))? + name.len() + 4;
        let len = text[start..].find('"')?;
        Some(&text[start..start + len])
    };
    Some(format!(
        r#"{{"decision_id":"{}","worker_id":"{}","latency_ms":{latency_ms:.3},"success":true}}"#,
        field("decision_id")?,
        field("pick")?
    ))
}

/// Sends what `outbox` holds as one `{"outcomes": [...]}` batch every
/// [`FEEDBACK_FLUSH`], as a router should, until `stop`.
async fn flush_feedback(port: u16, outbox: Outbox, stop: Instant) {
    let mut s = connect(port).await;
    loop {
        tokio::time::sleep(FEEDBACK_FLUSH).await;
        let items = std::mem::take(&mut *outbox.lock().expect("outbox"));
        if !items.is_empty() {
            let body = format!(r#"{{"outcomes":[{}]}}"#, items.join(","));
            call(&mut s, &Call::Feedback(Bytes::from(body))).await;
        }
        if Instant::now() >= stop {
            return;
        }
    }
}

/// How often the client sends its buffered outcomes.
const FEEDBACK_FLUSH: Duration = Duration::from_millis(5);

async fn round(port: u16, conns: usize, c: &Call, secs: f64) -> Round {
    let mut senders = Vec::new();
    for _ in 0..conns {
        senders.push(connect(port).await);
    }
    let start = Instant::now();
    let cpu = ProcessTime::now();
    let stop = start + Duration::from_secs_f64(secs);
    let feedback = matches!(c, Call::Score(..)) && env_or("HTTP_SCORE_FEEDBACK", 1) == 1;
    let outbox = Outbox::default();
    let flusher = feedback.then(|| tokio::spawn(flush_feedback(port, outbox.clone(), stop)));
    let mut tasks = Vec::new();
    for mut s in senders {
        let (c, outbox) = (c.clone(), outbox.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(65_536);
            while Instant::now() < stop {
                let t = Instant::now();
                let answer = call(&mut s, &c).await;
                let us = t.elapsed().as_secs_f64() * 1e6;
                lat.push(us);
                if feedback && let Some(item) = outcome(&answer, us / 1e3) {
                    outbox.lock().expect("outbox").push(item);
                }
            }
            lat
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("client task"));
    }
    let wall = start.elapsed().as_secs_f64();
    if let Some(f) = flusher {
        f.await.expect("feedback flusher");
    }
    all.sort_by(f64::total_cmp);
    let q = |p: f64| all[((all.len() - 1) as f64 * p).round() as usize];
    Round {
        p50_us: q(0.5),
        p99_us: q(0.99),
        rps: all.len() as f64 / wall,
        client_cpu: cpu.elapsed().as_secs_f64() / wall,
        latencies_us: all,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

async fn scrape(port: u16) -> String {
    let mut s = connect(port).await;
    String::from_utf8_lossy(&call(&mut s, &Call::Metrics).await).into_owned()
}

fn rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

fn main() {
    // `cargo test --all-targets` runs benches once in test mode: keep that quick.
    let quick =
        std::env::args().any(|a| a == "--test") || !std::env::args().any(|a| a == "--bench");
    let log_mode = std::env::var("HTTP_SCORE_LOG").unwrap_or_default();
    let log = log_mode != "off";
    let pin = !quick && can_pin();
    if log_mode == "both" && !quick {
        let on = start_service(true, pin && pin_mode() == "both");
        let off = start_service(false, pin && pin_mode() == "both");
        pin_self(pin);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(log_overhead(&on, &off));
        return;
    }
    let svc = start_service(log, pin && pin_mode() == "both");
    pin_self(pin);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if let Some(path) = calibrate::calibrate_path() {
        rt.block_on(calibrate::calibrate(&svc, &path, pin, quick));
        return;
    }
    rt.block_on(run(&svc, log, pin, quick));
}

/// Reports the workers to the service on `port` and returns the score
/// call (16 candidates a request) and the size of its answer, bytes.
async fn setup(port: u16) -> (Call, usize) {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let workers: usize = env_or("HTTP_SCORE_WORKERS", CANDIDATES).max(CANDIDATES);
    let snaps: Vec<_> = (0..workers)
        .map(|i| {
            json!({"worker_id": format!("w{i}"), "timestamp_ms": now_ms,
                        "cpu_usage": 0.1 + 0.05 * (i % 16) as f64, "queue_depth": i % 16,
                        "rtt_ms_avg": 2.0, "rtt_ms_p99": 5.0 + (i % 16) as f64, "error_rate": 0.0})
        })
        .collect();
    let mut s = connect(port).await;
    call(
        &mut s,
        &Call::Telemetry(json!({ "snapshots": snaps }).to_string().into()),
    )
    .await;
    let explain: Option<serde_json::Value> = std::env::var("HTTP_SCORE_EXPLAIN")
        .ok()
        .map(|e| serde_json::from_str(&e).expect("HTTP_SCORE_EXPLAIN is JSON"));
    let bodies: Vec<Bytes> = (0..workers / CANDIDATES)
        .map(|b| {
            let mut req = json!({"key": format!("user:{b}:profile"),
                "candidates": (0..CANDIDATES).map(|i| format!("w{}", b * CANDIDATES + i)).collect::<Vec<_>>(),
                "context": {"request_type": "GET"}});
            if let Some(e) = &explain {
                req["explain"] = e.clone();
            }
            Bytes::from(req.to_string())
        })
        .collect();
    let score = Call::Score(std::sync::Arc::new(bodies), std::sync::Arc::default());
    let answer = call(&mut s, &score).await;
    (score, answer.len())
}

fn pin_self(pin: bool) {
    if pin {
        let pid = std::process::id().to_string();
        let args = ["-a", "-p", "-c", "1", &pid];
        let _ = Command::new("taskset")
            .args(args)
            .stdout(Stdio::null())
            .status();
    }
}

/// `HTTP_SCORE_LOG=both`: the same calls to a service with the decision
/// log on and one with it off (both on core 0 when pinned; only one is
/// loaded at a time), in alternating rounds; prints the median req/s and
/// p99 of each and the throughput ratio on / off. The writer thread's work
/// shares the service's core, so it is charged to the logging rounds.
async fn log_overhead(on: &Service, off: &Service) {
    let (score_on, _) = setup(on.port).await;
    let (score_off, _) = setup(off.port).await;
    let secs: f64 = env_or("HTTP_SCORE_SECS", 2.0);
    let rounds: usize = env_or("HTTP_SCORE_ROUNDS", 5).max(1);
    round(on.port, 8, &score_on, secs).await;
    round(off.port, 8, &score_off, secs).await;
    let (pid_on, pid_off) = (on.child.id(), off.child.id());
    println!(
        "decision log on (pid {pid_on}) vs off (pid {pid_off}), {rounds} alternating rounds of {secs} s\n\
        | connections | log off req/s | log on req/s | on / off | p99 off µs | p99 on µs |\n|---:|---:|---:|---:|---:|---:|"
    );
    for conns in CONCURRENCIES {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            a.push(round(off.port, conns, &score_off, secs).await);
            b.push(round(on.port, conns, &score_on, secs).await);
        }
        let m = |v: &[Round], f: fn(&Round) -> f64| median(v.iter().map(f).collect());
        let (off_rps, on_rps) = (m(&a, |r| r.rps), m(&b, |r| r.rps));
        println!(
            "| {conns} | {off_rps:.0} | {on_rps:.0} | {:.3} | {:.0} | {:.0} |",
            on_rps / off_rps,
            m(&a, |r| r.p99_us),
            m(&b, |r| r.p99_us)
        );
    }
    let stats = call(&mut connect(on.port).await, &Call::LogStats).await;
    let stats: serde_json::Value = serde_json::from_slice(&stats).unwrap_or_default();
    let (st, rss) = (&stats["stats"], (rss_mib(pid_on), rss_mib(pid_off)));
    println!(
        "RSS log on {:.1} MiB, off {:.1} MiB; decision log: {} decisions logged, {} dropped",
        rss.0, rss.1, st["decisions_logged"], st["dropped"]
    );
}

async fn run(svc: &Service, log: bool, pin: bool, quick: bool) {
    let port = svc.port;
    let (score, answer_len) = setup(port).await;
    let workers: usize = env_or("HTTP_SCORE_WORKERS", CANDIDATES).max(CANDIDATES);
    if quick {
        round(port, 2, &score, 0.2).await;
        println!(
            "http_score: smoke run ok, answer {answer_len} bytes (run with `cargo bench` for figures)"
        );
        return;
    }
    let secs: f64 = env_or("HTTP_SCORE_SECS", 2.0);
    let rounds: usize = env_or("HTTP_SCORE_ROUNDS", 3).max(1);
    // Warm-up: the model, allocator arenas and the log's first row group.
    round(port, 8, &score, secs).await;
    round(port, 8, &Call::Healthz, secs / 2.0).await;
    println!(
        "service pid {} ({}), log {}, {workers} workers, {CANDIDATES} candidates, answer {} bytes, {rounds} alternating rounds of {secs} s",
        svc.child.id(),
        match (pin, pin_mode().as_str()) {
            (true, "both") => "service on core 0, client on core 1",
            (true, _) => "client on core 1, service on any core",
            _ => "unpinned",
        },
        if log { "on" } else { "off" },
        answer_len
    );
    println!(
        "| endpoint | connections | p50 µs | p99 µs | req/s | client CPU | score / healthz p50, p99, req/s |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|");
    let mut stage_rows = Vec::new();
    for conns in CONCURRENCIES {
        let (mut h, mut sc) = (Vec::new(), Vec::new());
        let before = stages(&scrape(port).await);
        for _ in 0..rounds {
            h.push(round(port, conns, &Call::Healthz, secs).await);
            sc.push(round(port, conns, &score, secs).await);
        }
        let after = stages(&scrape(port).await);
        let m = |v: &[Round], f: fn(&Round) -> f64| median(v.iter().map(f).collect());
        let (hp50, hp99, hrps) = (m(&h, |r| r.p50_us), m(&h, |r| r.p99_us), m(&h, |r| r.rps));
        let (sp50, sp99, srps) = (
            m(&sc, |r| r.p50_us),
            m(&sc, |r| r.p99_us),
            m(&sc, |r| r.rps),
        );
        println!(
            "| GET /healthz | {conns} | {hp50:.0} | {hp99:.0} | {hrps:.0} | {:.0}% | |",
            m(&h, |r| r.client_cpu) * 100.0
        );
        println!(
            "| POST /v1/score | {conns} | {sp50:.0} | {sp99:.0} | {srps:.0} | {:.0}% | {:.2}×, {:.2}×, {:.2}× |",
            m(&sc, |r| r.client_cpu) * 100.0,
            sp50 / hp50,
            sp99 / hp99,
            srps / hrps
        );
        let order = service::http::ScoreStage::ALL.map(service::http::ScoreStage::as_str);
        let row: Vec<String> = order
            .iter()
            .chain(&["total"])
            .filter_map(|stage| {
                let (mean, p99) = stage_delta(before.get(*stage), after.get(*stage)?)?;
                Some(format!("{stage} {mean:.1} (p99 ≤ {p99:.0})"))
            })
            .collect();
        stage_rows.push((conns, row));
    }
    for (conns, row) in stage_rows {
        if row.is_empty() {
            println!("stages at {conns} connections: no scorer_score_stage_seconds in /metrics");
        } else {
            println!(
                "in service at {conns} connections, mean µs per call (p99 ≤ bucket bound): {}",
                row.join(", ")
            );
        }
    }
    let mut s = connect(port).await;
    let log_stats = call(&mut s, &Call::LogStats).await;
    let stats: serde_json::Value = serde_json::from_slice(&log_stats).unwrap_or_default();
    println!(
        "service RSS {:.1} MiB; decision log: {} decisions and {} outcomes logged, {} records dropped",
        rss_mib(svc.child.id()),
        stats["stats"]["decisions_logged"],
        stats["stats"]["outcomes_logged"],
        stats["stats"]["dropped"]
    );
}

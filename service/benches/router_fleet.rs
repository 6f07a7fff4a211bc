//! A fleet of routers that embed the balancer, against the real release
//! service with the decision log on at its defaults: `FLEET_ROUTERS` (64)
//! balancers in this process, each following `GET /v1/view`, reporting its
//! load and sending its decisions and outcomes (`POST /v1/router/decisions`),
//! together picking `FLEET_RATE` (50 000) times a second among 16 workers
//! for `FLEET_SECONDS` (10 s), each outcome told 10 ms after its pick.
//!
//! It runs twice: once without the decision records (the view and the load
//! reports alone), then with them. From `/proc` it reports the service's
//! CPU by thread (the log's writer and compactor threads apart from the
//! HTTP runtime), its peak RSS, and whether it kept up: records dropped in
//! the routers or the log, or still waiting at the end. CPU per decision
//! splits into view (the first run's HTTP CPU), ingest (what the records
//! add to it) and log (the log's threads).
//!
//! `cargo bench -p service --bench router_fleet`

#![allow(missing_docs)]

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use scorer_balancer::follow::{FollowConfig, follow_view};
use scorer_balancer::records::{DEFAULT_RECORD_BUFFER, RecordBuffer};
use scorer_balancer::report::report_load;
use scorer_balancer::report_records::report_records;
use scorer_balancer::{Balancer, BalancerConfig};
use scorer_core::clock::{Clock, SystemClock};
use scorer_engine::api::ScoreRequest;
use scorer_engine::config::Config;
use serde_json::{Value, json};
use tokio::sync::watch;

const WORKERS: usize = 16;
const TICK_MS: u64 = 10;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn start(root: &Path, port: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_service"))
        .env("SCORER_SERVER__LISTEN", format!("127.0.0.1:{port}"))
        .env("SCORER_LOG__DIR", root.join("decisions"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("service starts")
}

/// CPU seconds of `pid`'s threads: (decision-log threads, the others).
fn cpu_s(pid: u32) -> (f64, f64) {
    let ticks = 100.0; // USER_HZ on Linux
    let (mut log, mut other) = (0.0, 0.0);
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return (0.0, 0.0);
    };
    for t in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = &stat[open + 1..close];
        let rest: Vec<&str> = stat[close + 2..].split_whitespace().collect();
        let field = |i: usize| {
            rest.get(i)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        let s = (field(11) + field(12)) / ticks;
        if comm.starts_with("decision-log") {
            log += s;
        } else {
            other += s;
        }
    }
    (log, other)
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

async fn report_workers(http: &reqwest::Client, base: &str, clock: &SystemClock) {
    let snaps: Vec<Value> = (0..WORKERS)
        .map(|i| {
            json!({"worker_id": format!("w{i}"), "timestamp_ms": clock.wall_ms(),
                   "cpu_usage": 0.2 + 0.03 * i as f64, "queue_depth": i % 4,
                   "rtt_ms_avg": 1.0, "rtt_ms_p99": 3.0, "error_rate": 0.0})
        })
        .collect();
    let _ = http
        .post(format!("{base}/v1/telemetry"))
        .json(&json!({"snapshots": snaps}))
        .send()
        .await;
}

struct Run {
    decisions: u64,
    seconds: f64,
    cpu_log_s: f64,
    cpu_http_s: f64,
    peak_rss_mib: f64,
    router_dropped: u64,
    refused: u64,
    waiting: u64,
    log: Value,
}

async fn fleet(root: &Path, routers: usize, rate: f64, seconds: f64, records: bool) -> Run {
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut child = start(root, port);
    let pid = child.id();
    let http = reqwest::Client::new();
    let clock = SystemClock::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !http
        .get(format!("{base}/healthz"))
        .send()
        .await
        .is_ok_and(|r| r.status().is_success())
    {
        assert!(Instant::now() < deadline, "service did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    report_workers(&http, &base, &clock).await;

    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let wall: Arc<dyn Clock> = Arc::new(SystemClock::new());
    let mut balancers = Vec::new();
    for r in 0..routers {
        let cfg = Config::default();
        let mut b =
            Balancer::new(cfg.clone(), BalancerConfig::new(format!("router-{r}"))).expect("valid");
        if records {
            let buf = RecordBuffer::new(DEFAULT_RECORD_BUFFER, &cfg.log, wall.clone());
            b = b.with_records(Arc::new(buf));
        }
        let b = Arc::new(b);
        let follow = FollowConfig::new(base.clone());
        tokio::spawn(follow_view(
            b.clone(),
            http.clone(),
            follow.clone(),
            wall.clone(),
            |_| {},
            stopped(stop_rx.clone()),
        ));
        tokio::spawn(report_load(
            b.clone(),
            http.clone(),
            follow.clone(),
            stopped(stop_rx.clone()),
        ));
        tokio::spawn(report_records(
            b.clone(),
            http.clone(),
            follow,
            stopped(stop_rx.clone()),
        ));
        balancers.push(b);
    }
    while balancers
        .iter()
        .any(|b| b.engine().registry().len() < WORKERS)
    {
        assert!(Instant::now() < deadline, "routers got no view");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let per_tick = rate / routers as f64 * TICK_MS as f64 / 1_000.0;
    let (cpu0, t0) = (cpu_s(pid), Instant::now());
    let mut pickers = Vec::new();
    for (r, b) in balancers.iter().enumerate() {
        let b = b.clone();
        let mono = Arc::new(SystemClock::new());
        pickers.push(tokio::spawn(async move {
            let ids: Vec<String> = (0..WORKERS).map(|i| format!("w{i}")).collect();
            let mut req = ScoreRequest::new("", ids);
            let mut rng = ChaCha8Rng::seed_from_u64(r as u64);
            let mut tick = tokio::time::interval(Duration::from_millis(TICK_MS));
            let (mut owed, mut made) = (0.0, 0u64);
            let mut open: Vec<(String, String)> = Vec::new();
            let end = Instant::now() + Duration::from_secs_f64(seconds);
            while Instant::now() < end {
                tick.tick().await;
                let now = mono.monotonic_ms();
                for (id, worker) in open.drain(..) {
                    let _ = b.outcome(&id, &worker, 1.2, true, now);
                }
                owed += per_tick;
                while owed >= 1.0 {
                    owed -= 1.0;
                    req.key = format!("user:{}:profile", made % 1_000);
                    if let Ok(p) = b.pick(&req, now, &mut rng) {
                        open.push((p.decision_id, p.worker));
                    }
                    made += 1;
                }
            }
            made
        }));
    }
    let mut peak_rss_mib: f64 = 0.0;
    let telemetry_every = Duration::from_secs(1);
    let mut last_telemetry = Instant::now();
    while pickers.iter().any(|p| !p.is_finished()) {
        peak_rss_mib = peak_rss_mib.max(rss_mib(pid));
        if last_telemetry.elapsed() >= telemetry_every {
            report_workers(&http, &base, &clock).await;
            last_telemetry = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut decisions = 0;
    for p in pickers {
        decisions += p.await.unwrap_or(0);
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let cpu1 = cpu_s(pid);
    // Let what the routers still hold reach the service (bounded).
    let drain_deadline = Instant::now() + Duration::from_secs(5);
    let waiting = |bs: &[Arc<Balancer>]| -> u64 {
        bs.iter()
            .filter_map(|b| b.records().map(|r| r.len() as u64))
            .sum()
    };
    while waiting(&balancers) > 0 && Instant::now() < drain_deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let log: Value = match http.get(format!("{base}/v1/log/stats")).send().await {
        Ok(r) => r.json().await.unwrap_or(Value::Null),
        Err(_) => Value::Null,
    };
    let _ = stop_tx.send(true);
    let (mut router_dropped, mut refused) = (0, 0);
    for b in &balancers {
        if let Some(r) = b.stats(0).records {
            router_dropped += r.dropped;
            refused += r.refused;
        }
    }
    let waiting = waiting(&balancers);
    let _ = child.kill();
    let _ = child.wait();
    Run {
        decisions,
        seconds: elapsed,
        cpu_log_s: cpu1.0 - cpu0.0,
        cpu_http_s: cpu1.1 - cpu0.1,
        peak_rss_mib,
        router_dropped,
        refused,
        waiting,
        log: log["stats"].clone(),
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let quick =
        std::env::args().any(|a| a == "--test") || !std::env::args().any(|a| a == "--bench");
    let routers: usize = env_or("FLEET_ROUTERS", if quick { 4 } else { 64 });
    let rate: f64 = env_or("FLEET_RATE", if quick { 1_000.0 } else { 50_000.0 });
    let seconds: f64 = env_or("FLEET_SECONDS", if quick { 0.5 } else { 10.0 });
    let root = std::env::temp_dir().join(format!("router-fleet-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("dir");
    println!("router_fleet: {routers} routers, {rate} decisions/s asked, {seconds} s, 16 workers");
    let view = fleet(&root.join("view"), routers, rate, seconds, false).await;
    let full = fleet(&root.join("full"), routers, rate, seconds, true).await;
    let _ = std::fs::remove_dir_all(&root);
    for (name, r) in [
        ("view + load only", &view),
        ("with decision records", &full),
    ] {
        let per = |cpu: f64| cpu / r.decisions.max(1) as f64 * 1e6;
        println!(
            "{name}: {:.0} decisions/s made; service CPU {:.2} cores (http {:.2}, log {:.2}); {:.2} µs/decision (http {:.2}, log {:.2}); peak RSS {:.1} MiB",
            r.decisions as f64 / r.seconds,
            (r.cpu_http_s + r.cpu_log_s) / r.seconds,
            r.cpu_http_s / r.seconds,
            r.cpu_log_s / r.seconds,
            per(r.cpu_http_s + r.cpu_log_s),
            per(r.cpu_http_s),
            per(r.cpu_log_s),
            r.peak_rss_mib,
        );
    }
    let per = |cpu: f64| cpu / full.decisions.max(1) as f64 * 1e6;
    let view_cpu = view.cpu_http_s / view.seconds * full.seconds;
    println!(
        "split per decision: view {:.2} µs, ingest {:.2} µs, log {:.2} µs",
        per(view_cpu),
        per(full.cpu_http_s - view_cpu),
        per(full.cpu_log_s),
    );
    let log_dropped = full.log["dropped"].as_u64().unwrap_or(0);
    let logged = full.log["decisions_logged"].as_u64().unwrap_or(0);
    println!(
        "kept up: decisions logged {logged} of {}, dropped in routers {}, in the log {log_dropped}, refused {}, still waiting {}",
        full.decisions, full.router_dropped, full.refused, full.waiting
    );
}

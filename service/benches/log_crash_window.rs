//! What a SIGKILL loses from the decision log, measured on the real binary
//! under load: the release service with the log on (defaults: `flush_ms`
//! 200), 16 workers reported, `CLIENTS` connections scoring as fast as they
//! can for `LOAD_S` seconds, then `kill -9`. A restart on the same
//! directory recovers the write-ahead files and a SIGTERM closes the rest;
//! every decision id read back is matched with the answers the clients got.
//! Reports the rate, how many answered decisions are missing, and the loss
//! window: how long before the kill the oldest missing decision was
//! answered. The guarantee checked is "every decision answered more than
//! `flush_ms` + 50 ms before the kill is in the Parquet files".
//!
//! `cargo bench -p service --bench log_crash_window`

#![allow(missing_docs)]

use std::collections::HashSet;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use scorer_log::{LogKind, read_dir};
use serde_json::{Value, json};

const CLIENTS: usize = 8;
const LOAD_S: f64 = 3.0;
/// Under `cargo test --all-targets` (test mode, debug build): a short run.
const QUICK_LOAD_S: f64 = 0.5;
const WORKERS: usize = 16;
const FLUSH_MS: u64 = 200;
const MARGIN_MS: u64 = 50;

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
        .env("SCORER_SCORING__WARMUP_MS", "0")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("service starts")
}

async fn wait_healthy(http: &reqwest::Client, base: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if http
            .get(format!("{base}/healthz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{base} never became healthy");
}

fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[tokio::main]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` lists benches; nothing to list here.
    }
    let quick =
        std::env::args().any(|a| a == "--test") || !std::env::args().any(|a| a == "--bench");
    let load_s = if quick { QUICK_LOAD_S } else { LOAD_S };
    let root = std::env::temp_dir().join(format!("log-crash-window-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("dir");
    let http = reqwest::Client::new();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut child = start(&root, port);
    wait_healthy(&http, &base).await;
    let ids: Vec<String> = (0..WORKERS).map(|i| format!("w{i}")).collect();
    let snaps: Vec<Value> = ids
        .iter()
        .map(|id| {
            json!({"worker_id": id, "timestamp_ms": wall_ms(), "cpu_usage": 0.3,
            "queue_depth": 1, "rtt_ms_avg": 1.0, "rtt_ms_p99": 3.0, "error_rate": 0.0})
        })
        .collect();
    http.post(format!("{base}/v1/telemetry"))
        .json(&json!({"snapshots": snaps}))
        .send()
        .await
        .expect("telemetry");

    let answered: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let stop_at = Instant::now() + Duration::from_secs_f64(load_s);
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let (http, base, ids, answered) =
            (http.clone(), base.clone(), ids.clone(), answered.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < stop_at {
                let body = json!({"key": format!("user:{c}:{n}"), "candidates": ids});
                n += 1;
                let Ok(r) = http
                    .post(format!("{base}/v1/score"))
                    .json(&body)
                    .send()
                    .await
                else {
                    break;
                };
                let Ok(v) = r.json::<Value>().await else {
                    break;
                };
                if let Some(id) = v["decision_id"].as_str() {
                    let at = Instant::now();
                    answered.lock().expect("lock").push((id.to_owned(), at));
                }
            }
        }));
    }
    tokio::time::sleep_until(stop_at.into()).await;
    let killed_at = Instant::now();
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    for t in tasks {
        let _ = t.await;
    }
    let answered = std::mem::take(&mut *answered.lock().expect("lock"));

    // Recover, then close cleanly.
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut again = start(&root, port);
    wait_healthy(&http, &base).await;
    let pid = again.id().to_string();
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    let _ = again.wait();

    let log = read_dir(&root.join("decisions"), LogKind::Decisions).expect("readable");
    let mut logged: HashSet<String> = HashSet::new();
    for b in &log.batches {
        let col = b
            .column_by_name("decision_id")
            .and_then(|c| {
                c.as_any()
                    .downcast_ref::<arrow::array::StringArray>()
                    .cloned()
            })
            .expect("decision_id");
        for i in 0..arrow::array::Array::len(&col) {
            logged.insert(col.value(i).to_owned());
        }
    }
    let missing: Vec<Duration> = answered
        .iter()
        .filter(|(id, _)| !logged.contains(id))
        .map(|(_, at)| killed_at.saturating_duration_since(*at))
        .collect();
    let window = missing.iter().max().copied().unwrap_or_default();
    let rate = answered.len() as f64 / load_s;
    let bound = Duration::from_millis(FLUSH_MS + MARGIN_MS);
    println!(
        "{} decisions answered in {load_s} s ({rate:.0}/s, {CLIENTS} connections, {WORKERS} candidates); \
         {} in the log after SIGKILL and recovery; {} missing; loss window {:.0} ms (bound: flush_ms {FLUSH_MS} + {MARGIN_MS} ms) -> {}",
        answered.len(),
        logged.len(),
        missing.len(),
        window.as_secs_f64() * 1e3,
        if window <= bound {
            "within"
        } else {
            "EXCEEDED"
        }
    );
    let _ = std::fs::remove_dir_all(&root);
}

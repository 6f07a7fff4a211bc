//! Crash safety of the decision log with the real binary: after a SIGKILL
//! mid-stream every rolled file reads, and the restart compacts the
//! write-ahead files the kill left, so every decision the writer had
//! appended is in the Parquet files, once; SIGTERM drains and closes
//! cleanly.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use scorer_log::{LogKind, read_dir};
use serde_json::{Value, json};

struct Service {
    child: Child,
    base: String,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

fn start(root: &Path, tag: &str) -> Service {
    let port = free_port();
    let log = std::fs::File::create(root.join(format!("{tag}.log"))).expect("log file");
    let child = Command::new(env!("CARGO_BIN_EXE_service"))
        .env("SCORER_SERVER__LISTEN", format!("127.0.0.1:{port}"))
        .env("SCORER_LOG__DIR", root.join("decisions"))
        .env("SCORER_LOG__MAX_ROWS", "40")
        .env("SCORER_SCORING__WARMUP_MS", "0")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("service starts");
    Service {
        child,
        base: format!("http://127.0.0.1:{port}"),
    }
}

async fn wait_healthy(client: &reqwest::Client, s: &Service) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(r) = client.get(format!("{}/healthz", s.base)).send().await
            && r.status().is_success()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("service at {} did not become healthy", s.base);
}

async fn log_stats(client: &reqwest::Client, s: &Service) -> Value {
    let r = client
        .get(format!("{}/v1/log/stats", s.base))
        .send()
        .await
        .expect("stats");
    r.json().await.expect("json")
}

fn files_with_suffix(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == "quarantine") {
                continue; // quarantined leftovers keep their name on purpose
            }
            out.extend(files_with_suffix(&p, suffix));
        } else if p.to_string_lossy().ends_with(suffix) {
            out.push(p);
        }
    }
    out
}

/// Report workers a, b, c as healthy, stamped `ts_ms` (Unix ms).
async fn report_workers(client: &reqwest::Client, s: &Service, ts_ms: u64) {
    let snaps: Vec<Value> = ["a", "b", "c"]
        .iter()
        .map(|id| {
            json!({"worker_id": id, "timestamp_ms": ts_ms, "cpu_usage": 0.3, "queue_depth": 1,
                   "rtt_ms_avg": 1.0, "rtt_ms_p99": 3.0, "error_rate": 0.0})
        })
        .collect();
    let r = client
        .post(format!("{}/v1/telemetry", s.base))
        .json(&json!({"snapshots": snaps}))
        .send()
        .await
        .expect("telemetry");
    assert!(r.status().is_success());
}

/// One successful score request over workers a, b, c.
async fn score(client: &reqwest::Client, s: &Service, key: &str) {
    let r = client
        .post(format!("{}/v1/score", s.base))
        .json(&json!({"key": key, "candidates": ["a", "b", "c"]}))
        .send()
        .await
        .expect("score");
    assert!(r.status().is_success());
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_mid_stream_loses_no_rolled_file_and_restart_recovers() {
    let root = std::env::temp_dir().join(format!("scorer-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("temp dir");
    let client = reqwest::Client::new();

    let first = start(&root, "first");
    wait_healthy(&client, &first).await;
    report_workers(&client, &first, wall_ms()).await;
    // Stream decisions until at least three files have rolled (40 decisions each).
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut sent = 0;
    loop {
        for _ in 0..20 {
            score(&client, &first, "user:1:x").await;
            sent += 1;
        }
        if log_stats(&client, &first).await["stats"]["files"]
            .as_u64()
            .unwrap_or(0)
            >= 3
        {
            break;
        }
        assert!(Instant::now() < deadline, "no roll after {sent} decisions");
    }
    // Make sure a file is in progress (every sent decision processed, some
    // rows in the open file), then kill -9.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let st = log_stats(&client, &first).await["stats"].clone();
        let open = st["open_rows"].as_u64().unwrap_or(0);
        let done = st["written_rows"].as_u64().unwrap_or(0) + open;
        // One file row per decision (its candidates nested).
        if done == sent && open > 0 {
            break;
        }
        if done == sent {
            score(&client, &first, "user:1:x").await;
            sent += 1;
        }
        assert!(Instant::now() < deadline, "the writer never settled: {st}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(first); // SIGKILL

    let decisions = root.join("decisions");
    let rolled = read_dir(&decisions, LogKind::Decisions).expect("every rolled file reads");
    assert_eq!(rolled.rows % 3, 0, "whole decisions only");
    let leftovers = files_with_suffix(&root, ".arrows");
    assert!(
        !leftovers.is_empty(),
        "the kill should leave a write-ahead file"
    );

    let second = start(&root, "second");
    wait_healthy(&client, &second).await;
    let stats = log_stats(&client, &second).await;
    assert_eq!(stats["stats"]["quarantined"], 0, "{stats}");
    assert!(
        stats["stats"]["recovered"].as_u64().unwrap_or(0) >= 1,
        "{stats}"
    );
    for f in &leftovers {
        assert!(!f.exists(), "{} was not compacted", f.display());
    }
    let after = read_dir(&decisions, LogKind::Decisions).expect("still readable");
    // Every decision the writer had appended survived the kill, once.
    assert_eq!(
        u64::try_from(after.rows).unwrap(),
        sent * 3,
        "{sent} decisions sent"
    );
    let mut ids: Vec<String> = after
        .batches
        .iter()
        .flat_map(|b| {
            let ids = b
                .column_by_name("decision_id")
                .expect("decision_id")
                .as_any()
                .downcast_ref::<arrow::array::StringArray>()
                .expect("utf8")
                .clone();
            (0..arrow::array::Array::len(&ids)).map(move |i| ids.value(i).to_owned())
        })
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(
        u64::try_from(ids.len()).unwrap(),
        sent,
        "no decision twice, none lost"
    );

    // SIGTERM: graceful shutdown drains and closes; nothing stays in progress.
    report_workers(&client, &second, wall_ms() + 1).await;
    for _ in 0..5 {
        score(&client, &second, "user:2:x").await;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while log_stats(&client, &second).await["stats"]["open_rows"]
        .as_u64()
        .unwrap_or(0)
        == 0
    {
        assert!(Instant::now() < deadline, "the writer never opened a file");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = second.child.id().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let mut second = second;
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(s) = second.child.try_wait().expect("wait") {
            break s;
        }
        assert!(Instant::now() < deadline, "no exit after SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "exit status {status}");
    assert!(files_with_suffix(&root, ".inprogress").is_empty());
    assert!(files_with_suffix(&root, ".arrows").is_empty());
    let last = read_dir(&decisions, LogKind::Decisions).expect("readable after shutdown");
    assert_eq!(
        last.rows,
        after.rows + 5 * 3,
        "the open file was closed, not lost"
    );
    let _ = std::fs::remove_dir_all(&root);
}

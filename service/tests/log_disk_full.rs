//! A decision log whose disk is full: scoring still answers, `/readyz` and
//! `/metrics` say the log is failing, and both clear once writes succeed;
//! the log holds what it accepted meanwhile, in one write-ahead file, and
//! writes it all once the disk frees.

mod common;

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use common::{WALL, no_warmup};
use scorer_core::clock::ManualClock;
use scorer_engine::Engine;
use scorer_log::wal::{WalFile, WalOpener};
use scorer_log::{DecisionLog, LogKind, read_dir};
use serde_json::json;
use service::{AppState, app};

/// A real file whose writes fail with ENOSPC while `full` is set.
struct Filling {
    file: std::fs::File,
    full: Arc<AtomicBool>,
}

impl Write for Filling {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.full.load(Ordering::SeqCst) {
            return Err(std::io::Error::from_raw_os_error(28)); // ENOSPC
        }
        self.file.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl WalFile for Filling {
    fn sync(&self, all: bool) -> std::io::Result<()> {
        self.file.sync(all)
    }
}

fn opener(full: Arc<AtomicBool>) -> WalOpener {
    Arc::new(move |path: &Path| {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)?;
        Ok(Box::new(Filling {
            file,
            full: full.clone(),
        }) as Box<dyn WalFile>)
    })
}

#[tokio::test]
async fn scoring_answers_while_the_logs_disk_is_full_and_readyz_says_so() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut cfg = no_warmup();
    cfg.log.dir = dir.path().join("decisions");
    let cfg_dir = cfg.log.dir.clone();
    let clock = Arc::new(ManualClock::new(1_000, WALL));
    let full = Arc::new(AtomicBool::new(true));
    let log = DecisionLog::start_with_opener(cfg.log.clone(), clock.clone(), opener(full.clone()))
        .expect("log");
    let log = Arc::new(log);
    let state = AppState::new(Engine::new(cfg).with_log(log.clone()), clock.clone());
    let t = common::TestApp {
        router: app(state.clone()),
        clock: clock.clone(),
        state,
    };
    let snap = json!({"snapshots": [{"worker_id": "a", "timestamp_ms": WALL, "cpu_usage": 0.2,
        "queue_depth": 1, "rtt_ms_avg": 1.0, "rtt_ms_p99": 2.0, "error_rate": 0.0}]});
    assert_eq!(t.post_json("/v1/telemetry", &snap).await.0, StatusCode::OK);
    let score = json!({"key": "user:1", "candidates": ["a"]});
    for _ in 0..5 {
        assert_eq!(t.post_json("/v1/score", &score).await.0, StatusCode::OK);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while log.stats().writes_failing == 0 {
        assert!(Instant::now() < deadline, "{:?}", log.stats());
        std::thread::sleep(Duration::from_millis(5));
    }
    // Scoring goes on; readiness tells.
    assert_eq!(t.post_json("/v1/score", &score).await.0, StatusCode::OK);
    let (s, ready) = t.get("/readyz").await;
    assert_eq!(s, StatusCode::OK, "{ready}");
    assert_eq!(ready["decision_log"]["status"], "writes_failing", "{ready}");
    assert_eq!(
        ready["decision_log"]["dropped"], 0,
        "held, not dropped: {ready}"
    );
    // Retries while the disk stays full reuse the one write-ahead file.
    for tries in 2..5 {
        clock.advance(1_000);
        let deadline = Instant::now() + Duration::from_secs(10);
        while log.stats().write_errors < tries {
            assert!(Instant::now() < deadline, "{:?}", log.stats());
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    assert_eq!(wal_files(&cfg_dir).len(), 1, "{:?}", wal_files(&cfg_dir));
    let metrics = {
        use http_body_util::BodyExt;
        use tower::ServiceExt;
        let req = axum::http::Request::get("/metrics")
            .body(axum::body::Body::empty())
            .expect("request");
        let resp = t.router.clone().oneshot(req).await.expect("infallible");
        let bytes = resp.into_body().collect().await.expect("body").to_bytes();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    assert!(metrics.contains("scorer_log_writes_failing 1"), "{metrics}");

    full.store(false, Ordering::SeqCst);
    clock.advance(1_000);
    let mut scored = 6;
    let deadline = Instant::now() + Duration::from_secs(10);
    while log.stats().writes_failing == 1 {
        assert_eq!(t.post_json("/v1/score", &score).await.0, StatusCode::OK);
        scored += 1;
        assert!(Instant::now() < deadline, "{:?}", log.stats());
        std::thread::sleep(Duration::from_millis(5));
    }
    let (_, ready) = t.get("/readyz").await;
    assert_eq!(ready["decision_log"]["status"], "ok", "{ready}");
    // Without a restart, the five decisions the failed write held are in a
    // Parquet file (the later ones waited in the queue).
    let deadline = Instant::now() + Duration::from_secs(10);
    while log.stats().written_rows < 5 {
        assert!(Instant::now() < deadline, "{:?}", log.stats());
        std::thread::sleep(Duration::from_millis(5));
    }
    let read = read_dir(&cfg_dir, LogKind::Decisions).expect("read");
    assert!(read.rows >= 5, "{} rows", read.rows);
    let _ = log.shutdown();
    let read = read_dir(&cfg_dir, LogKind::Decisions).expect("read");
    assert_eq!(read.rows, scored, "every decision, one candidate each");
    assert_eq!(log.stats().dropped, 0, "{:?}", log.stats());
}

/// The write-ahead files under `root`.
fn wal_files(root: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "arrows") {
                out.push(p);
            }
        }
    }
    out
}

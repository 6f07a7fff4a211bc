//! The decision log end to end (issue #4): HTTP → Parquet → reader, the
//! files read by pyarrow, backpressure without slowing `/v1/score`.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{Float32Type, Float64Type};
use axum::http::StatusCode;
use common::{WALL, no_warmup};
use scorer_core::clock::ManualClock;
use scorer_engine::Engine;
use scorer_engine::config::Config;
use scorer_log::{DecisionLog, LogConfig, LogKind, join_outcomes, read_dir};
use serde_json::{Value, json};
use service::{AppState, EngineLog, app};

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!("scorer-{tag}-{}-{}", std::process::id(), WALL));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("temp dir");
        Self(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn logged_app(root: &Path, tweak: impl FnOnce(&mut LogConfig)) -> common::TestApp {
    let mut cfg: Config = no_warmup();
    cfg.log.dir = root.join("decisions");
    tweak(&mut cfg.log);
    // A feedback batch may not exceed the channel (config validation).
    cfg.server.max_feedback_batch = cfg.server.max_feedback_batch.min(cfg.log.channel_capacity);
    let clock = Arc::new(ManualClock::new(1_000, WALL));
    let log = DecisionLog::start(cfg.log.clone(), clock.clone()).expect("log starts");
    let state = AppState::new(Engine::new(cfg).with_log(Arc::new(log)), clock.clone());
    common::TestApp {
        router: app(state.clone()),
        clock,
        state,
    }
}

fn snap(id: &str, ts: u64, cpu: f64) -> Value {
    json!({"worker_id": id, "timestamp_ms": ts, "cpu_usage": cpu, "queue_depth": 2,
           "rtt_ms_avg": 1.0, "rtt_ms_p99": 6.0, "error_rate": 0.0, "cache_hit_rate": 0.9})
}

#[tokio::test]
async fn decisions_round_trip_through_parquet_bit_equal() {
    let dir = TempDir::new("roundtrip");
    let t = logged_app(&dir.0, |c| c.candidate_features_rate = 1.0);
    let batch =
        json!({"snapshots": [snap("a", WALL, 0.2), snap("b", WALL, 0.75), snap("c", WALL, 0.9)]});
    assert_eq!(t.post_json("/v1/telemetry", &batch).await.0, StatusCode::OK);
    let mut responses = Vec::new();
    for i in 0..30u64 {
        t.clock.advance(7);
        let body = json!({"key": format!("user:{i}:profile"), "explain": true, "candidates": ["a", "b", "c", "ghost"],
                          "context": {"request_type": if i % 2 == 0 { "GET" } else { "PUT" }, "timeout_ms": 50},
                          "explain": "full", "seed": i});
        let (s, b) = t.post_json("/v1/score", &body).await;
        assert_eq!(s, StatusCode::OK, "{b}");
        responses.push(b);
    }
    for r in responses.iter().take(10) {
        let fb = json!({"decision_id": r["decision_id"], "worker_id": r["pick"], "latency_ms": 4.5, "success": true});
        assert_eq!(t.post_json("/v1/feedback", &fb).await.0, StatusCode::OK);
    }
    let log = t.state.engine.decision_log().expect("log").clone();
    log.shutdown().expect("clean close");
    let (_, stats) = t.get("/v1/log/stats").await;
    // One row per decision (candidates nested), one per outcome.
    assert_eq!(stats["stats"]["written_rows"], 30 + 10, "{stats}");
    assert_eq!(stats["stats"]["dropped"], 0);

    let decisions = read_dir(&dir.0.join("decisions"), LogKind::Decisions).expect("readable");
    let outcomes = read_dir(&dir.0.join("outcomes"), LogKind::Outcomes).expect("readable");
    assert_eq!(decisions.rows, 120);
    assert_eq!(outcomes.rows, 10);
    assert!(
        decisions.skipped.is_empty()
            && decisions
                .files
                .iter()
                .all(|f| { f.to_string_lossy().contains("/dt=2025-06-15/decisions-") }),
        "{:?}",
        decisions.files
    );

    // Every row equals what the HTTP answer said, features bit for bit.
    let joined = join_outcomes(&decisions, &outcomes).expect("join");
    let col = |name: &str| {
        joined
            .column_by_name(name)
            .unwrap_or_else(|| panic!("{name}"))
            .clone()
    };
    let ids = col("decision_id");
    let ids = ids.as_string::<i32>();
    let workers = col("worker_id");
    let workers = workers.as_string::<i32>();
    let rule = col("rule_score");
    let rule = rule.as_primitive::<Float64Type>();
    let prob = col("probability");
    let prob = prob.as_primitive::<Float64Type>();
    let picked = col("picked");
    let picked = picked.as_boolean();
    let latency = col("latency_ms");
    let latency = latency.as_primitive::<Float64Type>();
    let features = col("features");
    let features = features.as_fixed_size_list();
    let mut matched_outcomes = 0;
    for row in 0..joined.num_rows() {
        let r = responses
            .iter()
            .find(|r| r["decision_id"] == ids.value(row))
            .expect("decision logged once per response");
        let s = r["scores"]
            .as_array()
            .and_then(|a| a.iter().find(|s| s["worker_id"] == workers.value(row)))
            .expect("candidate");
        assert_eq!(
            rule.value(row),
            s["rule_score"].as_f64().unwrap_or(f64::NAN)
        );
        assert_eq!(
            prob.value(row),
            s["probability"].as_f64().unwrap_or(f64::NAN)
        );
        assert_eq!(picked.value(row), r["pick"] == workers.value(row));
        let fv = features.value(row);
        let fv = fv.as_primitive::<Float32Type>();
        let want: Vec<u32> = s["features"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|x| (x.as_f64().unwrap_or(f64::NAN) as f32).to_bits())
                    .collect()
            })
            .unwrap_or_default();
        let got: Vec<u32> = fv.values().iter().map(|x| x.to_bits()).collect();
        assert_eq!(got, want, "features of row {row}");
        if !latency.is_null(row) {
            matched_outcomes += 1;
            assert_eq!(latency.value(row), 4.5);
        }
    }
    assert_eq!(matched_outcomes, 10);

    // Data scientists' tools read the files as they are.
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/check_parquet.py");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(&dir.0)
        .args(["30", "120", "10"])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "pyarrow check failed (scripts/test.sh installs pyarrow): {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // Files rewritten by pyarrow with its defaults (snappy, the feature
    // list's item named `element`) read back the same (a fresh-eyes run saw
    // them refused).
    let rewritten = dir.0.join("rewritten");
    let rewrite = "import sys, pathlib, pyarrow.parquet as pq\n\
        src, dst = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])\n\
        for f in sorted(src.rglob('decisions-*.parquet')):\n\
        \x20   out = dst / f.relative_to(src)\n\
        \x20   out.parent.mkdir(parents=True, exist_ok=True)\n\
        \x20   pq.write_table(pq.ParquetFile(f).read(), out)\n\
        \x20   assert pq.ParquetFile(out).metadata.row_group(0).column(0).compression == 'SNAPPY'\n";
    let out = std::process::Command::new("python3")
        .args(["-c", rewrite])
        .arg(dir.0.join("decisions"))
        .arg(&rewritten)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again = read_dir(&rewritten, LogKind::Decisions).expect("readable");
    assert!(again.skipped.is_empty(), "{:?}", again.skipped);
    assert_eq!(again.rows, decisions.rows);
    let flat = |log: &scorer_log::LoadedLog| -> Vec<u32> {
        log.batches
            .iter()
            .flat_map(|b| {
                let f = b
                    .column_by_name("features")
                    .expect("features")
                    .as_fixed_size_list();
                f.values()
                    .as_primitive::<Float32Type>()
                    .values()
                    .iter()
                    .map(|x| x.to_bits())
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    assert_eq!(flat(&again), flat(&decisions));
}

#[tokio::test]
async fn a_blocked_writer_drops_and_counts_but_never_blocks_scoring() {
    let dir = TempDir::new("backpressure");
    let t = logged_app(&dir.0, |c| c.channel_capacity = 4);
    let batch = json!({"snapshots": [snap("a", WALL, 0.2), snap("b", WALL, 0.5)]});
    t.post_json("/v1/telemetry", &batch).await;
    let log = t.state.engine.decision_log().expect("log").clone();
    let hold = log.hold_writer();
    for _ in 0..50 {
        let (s, _) = t
            .post(
                "/v1/score",
                r#"{"key":"k","explain":true,"candidates":["a","b"]}"#,
            )
            .await;
        assert_eq!(s, StatusCode::OK);
    }
    let (_, stats) = t.get("/v1/log/stats").await;
    assert_eq!(stats["stats"]["dropped"], 46, "{stats}");
    drop(hold);
    log.shutdown().expect("clean close");
    let decisions = read_dir(&dir.0.join("decisions"), LogKind::Decisions).expect("readable");
    assert_eq!(
        decisions.rows,
        4 * 2,
        "exactly the accepted decisions are on disk"
    );
}

#[tokio::test]
async fn sampling_keeps_decisions_and_their_outcomes_together() {
    let dir = TempDir::new("sampling");
    let t = logged_app(&dir.0, |c| c.sample_rate = 0.5);
    t.post_json(
        "/v1/telemetry",
        &json!({"snapshots": [snap("a", WALL, 0.2)]}),
    )
    .await;
    let mut kept = 0;
    for _ in 0..200 {
        let (_, r) = t
            .post(
                "/v1/score",
                r#"{"key":"k","explain":true,"candidates":["a"]}"#,
            )
            .await;
        let fb = json!({"decision_id": r["decision_id"], "worker_id": "a", "latency_ms": 1.0, "success": true});
        t.post_json("/v1/feedback", &fb).await;
        kept += usize::from(
            t.state
                .engine
                .decision_log()
                .is_some_and(|l| l.sampled(r["decision_id"].as_str().unwrap_or(""))),
        );
    }
    let log = t.state.engine.decision_log().expect("log").clone();
    log.shutdown().expect("close");
    let d = read_dir(&dir.0.join("decisions"), LogKind::Decisions).expect("readable");
    let o = read_dir(&dir.0.join("outcomes"), LogKind::Outcomes).expect("readable");
    assert_eq!((d.rows, o.rows), (kept, kept));
    assert!(
        (60..=140).contains(&kept),
        "about half of 200 sampled: {kept}"
    );
}

/// Runs `code` with python3, `args` as `sys.argv[1:]`; panics with its
/// output when it fails.
fn python(code: &str, args: &[&Path]) -> String {
    let out = std::process::Command::new("python3")
        .args(["-c", code])
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "python failed (scripts/test.sh installs pyarrow and duckdb): {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[tokio::test]
async fn dataset_readers_read_a_live_directory_without_the_open_file() {
    let dir = TempDir::new("live");
    let t = logged_app(&dir.0, |c| c.max_rows = 10);
    let batch = json!({"snapshots": [snap("a", WALL, 0.2), snap("b", WALL, 0.5)]});
    assert_eq!(t.post_json("/v1/telemetry", &batch).await.0, StatusCode::OK);
    for i in 0..25 {
        let body = json!({"key": format!("user:{i}"), "candidates": ["a", "b"]});
        assert_eq!(t.post_json("/v1/score", &body).await.0, StatusCode::OK);
    }
    let log = t.state.engine.decision_log().expect("log").clone();
    // Two files of 10 decisions rolled, the last 5 in the open file.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !(log.stats().written_rows == 20 && log.stats().open_rows == 5) {
        assert!(
            std::time::Instant::now() < deadline,
            "writer never settled: {:?}",
            log.stats()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let decisions = dir.0.join("decisions");
    let hidden = python(
        "import sys, pathlib\n\
         print(sorted(p.name.startswith('.') for p in pathlib.Path(sys.argv[1]).rglob('*.arrows')))",
        &[&decisions],
    );
    assert_eq!(hidden, "[True]", "one open write-ahead file, hidden");
    let pyarrow = python(
        "import sys, pyarrow.dataset as ds\n\
         print(ds.dataset(sys.argv[1], format='parquet', partitioning='hive').to_table().num_rows)",
        &[&decisions],
    );
    assert_eq!(
        pyarrow, "20",
        "pyarrow's dataset reads the two rolled files"
    );
    let glob = decisions.join("*").join("*.parquet");
    let duckdb = python(
        "import sys, duckdb\n\
         print(duckdb.sql(f\"SELECT count(*), count(DISTINCT c.worker_id) FROM \
         (SELECT UNNEST(candidates) AS c FROM read_parquet('{sys.argv[1]}'))\").fetchall()[0])",
        &[&glob],
    );
    assert_eq!(
        duckdb, "(40, 2)",
        "DuckDB unnests the rolled files' candidates"
    );
    log.shutdown().expect("close");
    let all = python(
        "import sys, pyarrow.dataset as ds\n\
         print(ds.dataset(sys.argv[1], format='parquet', partitioning='hive').to_table().num_rows)",
        &[&decisions],
    );
    assert_eq!(all, "25", "the open file, closed, joins them");
}

#[test]
fn the_start_log_line_names_both_directories() {
    let dir = TempDir::new("start-line");
    let cfg = LogConfig {
        dir: dir.0.join("decisions"),
        ..LogConfig::default()
    };
    let clock = Arc::new(ManualClock::new(1_000, WALL));
    let log = common::logs_of(tracing::Level::INFO, || {
        let log = DecisionLog::start(cfg, clock).expect("log starts");
        log.shutdown().expect("close");
    });
    let line = log
        .lines()
        .find(|l| l.contains("decision log started"))
        .unwrap_or_else(|| panic!("no start line in {log}"));
    for want in [
        format!("dir={:?}", dir.0.join("decisions")),
        format!("outcomes_dir={:?}", dir.0.join("outcomes")),
        "candidate_features_rate=0.1".to_string(),
    ] {
        assert!(line.contains(&want), "{want} in {line}");
    }
}

#[tokio::test]
async fn a_callers_name_is_the_provenance_of_its_decisions_and_outcomes() {
    const EDGE: &str = "edge-token-0123456789";
    let dir = TempDir::new("caller");
    let mut cfg: Config = no_warmup();
    cfg.log.dir = dir.0.join("decisions");
    cfg.auth.router.insert("edge-1".into(), EDGE.into());
    let clock = Arc::new(ManualClock::new(1_000, WALL));
    let log = Arc::new(DecisionLog::start(cfg.log.clone(), clock.clone()).expect("log"));
    let state = AppState::new(Engine::new(cfg).with_log(log.clone()), clock.clone());
    let t = common::TestApp {
        router: app(state.clone()),
        clock,
        state,
    };
    let batch = json!({"snapshots": [snap("a", WALL, 0.2)]});
    assert_eq!(t.post_json("/v1/telemetry", &batch).await.0, StatusCode::OK);
    let post = |path: &str, body: Value| {
        axum::http::Request::post(path)
            .header("content-type", "application/json")
            .header("authorization", format!("Bearer {EDGE}"))
            .body(axum::body::Body::from(body.to_string()))
            .expect("request")
    };
    let (s, r) = t
        .send(post(
            "/v1/score",
            json!({"key": "user:1", "candidates": ["a"]}),
        ))
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let fb = json!({"decision_id": r["decision_id"], "worker_id": "a", "latency_ms": 2.0, "success": true});
    let (s, b) = t.send(post("/v1/feedback", fb)).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    log.shutdown().expect("close");

    let d = read_dir(&dir.0.join("decisions"), LogKind::Decisions).expect("decisions");
    let o = read_dir(&dir.0.join("outcomes"), LogKind::Outcomes).expect("outcomes");
    let caller = |b: &arrow::array::RecordBatch| {
        b.column_by_name("caller")
            .expect("caller column")
            .as_string::<i32>()
            .value(0)
            .to_owned()
    };
    assert_eq!(caller(&d.batches[0]), "edge-1");
    assert_eq!(caller(&o.batches[0]), "edge-1");
}

#[tokio::test(start_paused = true)]
async fn a_router_flood_never_drops_the_services_own_decisions() {
    let dir = TempDir::new("router-flood");
    let t = logged_app(&dir.0, |c| {
        c.channel_capacity = 16;
        c.router_queue_share = 0.5;
    });
    let batch = json!({"snapshots": [snap("a", WALL, 0.2)]});
    assert_eq!(t.post_json("/v1/telemetry", &batch).await.0, StatusCode::OK);
    let log = t.state.engine.decision_log().expect("log").clone();
    // The writer takes nothing: the queue is all the log can hold, 16 of
    // the service's records and 8 of the routers'.
    let hold = log.hold_writer();
    let (mut router_ok, mut router_busy) = (0, 0);
    for i in 0..12u64 {
        // Twice the whole queue of router records, 4 a batch, interleaved
        // with the service's own decisions.
        let outcomes: Vec<Value> = (0..4)
            .map(|j| {
                json!({"decision_id": format!("r1-{:016x}", i * 4 + j), "worker_id": "a",
                       "ts_ms": WALL, "latency_ms": 1.0, "success": true})
            })
            .collect();
        let records = json!({"router_id": "r1", "outcomes": outcomes});
        let (s, b) = t.post_json("/v1/router/decisions", &records).await;
        match s {
            StatusCode::OK => router_ok += 1,
            StatusCode::SERVICE_UNAVAILABLE => {
                assert_eq!(b["error"]["code"], "log_busy", "{b}");
                router_busy += 1;
            }
            other => panic!("{other}: {b}"),
        }
        // 16 decisions in all: the service's whole queue.
        for k in 0..if i < 4 { 2 } else { 1 } {
            let score = json!({"key": format!("user:{i}:{k}"), "candidates": ["a"]});
            let (s, b) = t.post_json("/v1/score", &score).await;
            assert_eq!(s, StatusCode::OK, "{b}");
        }
    }
    assert_eq!((router_ok, router_busy), (2, 10));
    // Straight into the sink, past the routers' budget: dropped, counted.
    let sink = t.state.engine.decision_sink().expect("sink").clone();
    for i in 0..5u64 {
        let rec = scorer_log::OutcomeRecord {
            decision_id: format!("r2-{i:016x}"),
            worker_id: "a".into(),
            ts_ms: 0,
            latency_ms: 1.0,
            success: true,
            caller: None,
            cache_hit: None,
        };
        assert!(!sink.log_router_outcome(rec));
    }
    let st = log.stats();
    assert_eq!(
        (st.decisions_logged, st.dropped_service),
        (16, 0),
        "every one of the service's decisions queued: {st:?}"
    );
    assert_eq!((st.dropped_router, st.dropped), (5, 5), "{st:?}");
    let metrics = t.metrics().await;
    for want in [
        r#"scorer_log_records_dropped_total{source="service"} 0"#,
        r#"scorer_log_records_dropped_total{source="router"} 5"#,
    ] {
        assert!(metrics.contains(want), "{want} in {metrics}");
    }
    let (_, stats) = t.get("/v1/log/stats").await;
    assert_eq!(
        (
            &stats["stats"]["dropped_service"],
            &stats["stats"]["dropped_router"]
        ),
        (&json!(0), &json!(5)),
        "{stats}"
    );
    drop(hold);
    log.shutdown().expect("clean close");
    let decisions = read_dir(&dir.0.join("decisions"), LogKind::Decisions).unwrap();
    let outcomes = read_dir(&dir.0.join("outcomes"), LogKind::Outcomes).unwrap();
    assert_eq!(
        (decisions.rows, outcomes.rows),
        (16, 8),
        "each candidate row; the two batches taken"
    );
}

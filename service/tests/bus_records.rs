//! Decision and outcome records over a real nats-server: what routers post
//! to one replica reaches the `SCORER_DECISIONS` stream as Arrow IPC
//! batches, and two log writers (service processes with `bus.log_writer`)
//! write each record once; a writer killed with SIGKILL leaves the batches
//! it held to the other, so nothing is lost and nothing is written twice;
//! a malformed, oversized or mismatched batch is refused, counted,
//! terminated and never written; a batch stored twice is written once.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Array, AsArray};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::nats::NatsServer;
use common::{TestApp, WALL, no_warmup};
use http_body_util::BodyExt;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use scorer_balancer::records::RecordBuffer;
use scorer_balancer::{Balancer, BalancerConfig};
use scorer_bus::async_nats;
use scorer_bus::subject::{LOG_SCHEMA_HEADER, LOG_WRITERS_CONSUMER, RECORDS_STREAM};
use scorer_core::clock::{Clock, ManualClock};
use scorer_engine::Engine;
use scorer_engine::api::ScoreRequest;
use scorer_engine::config::Config;
use scorer_log::{LOG_SCHEMA_VERSION, LogKind, read_dir, recover_dir};
use serde_json::json;
use service::bus::records::BusSink;
use service::{AppState, app};
use tower::ServiceExt;

/// How long the bus and the writers may take before a test fails.
const DEADLINE: Duration = Duration::from_secs(60);
/// The writers' `bus.log_ack_wait_ms`: a killed writer's batches come back
/// after it.
const ACK_WAIT_MS: u64 = 2_000;

/// A service process as a log writer; SIGKILLed when dropped.
struct Writer {
    child: Child,
    base: String,
    decisions: PathBuf,
    outcomes: PathBuf,
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

fn writer(root: &Path, name: &str, nats: &str, extra: &[(&str, &str)]) -> Writer {
    let port = free_port();
    let decisions = root.join(name).join("decisions");
    let outcomes = root.join(name).join("outcomes");
    let log = std::fs::File::create(root.join(format!("{name}.log"))).expect("log file");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_service"));
    cmd.env("SCORER_SERVER__LISTEN", format!("127.0.0.1:{port}"))
        .env("SCORER_LOG__DIR", &decisions)
        .env("SCORER_LOG__OUTCOMES_DIR", &outcomes)
        .env("SCORER_BUS__NATS_URL", nats)
        .env("SCORER_BUS__REPLICA_ID", name)
        .env("SCORER_BUS__LOG_ACK_WAIT_MS", ACK_WAIT_MS.to_string())
        .env("RUST_LOG", "info");
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let child = cmd
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("service starts");
    Writer {
        child,
        base: format!("http://127.0.0.1:{port}"),
        decisions,
        outcomes,
    }
}

async fn wait_healthy(w: &Writer) {
    let client = reqwest::Client::new();
    let deadline = Instant::now() + DEADLINE;
    while Instant::now() < deadline {
        if let Ok(r) = client.get(format!("{}/healthz", w.base)).send().await
            && r.status().is_success()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("writer at {} never became ready", w.base);
}

fn signal(w: &Writer, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &w.child.id().to_string()])
        .status()
        .expect("kill");
    assert!(ok.success(), "kill {sig}");
}

/// The shared consumer's (pending, unacknowledged, redelivered and not yet
/// acknowledged) batches.
async fn consumer_state(js: &async_nats::jetstream::Context) -> (u64, usize, usize) {
    let stream = js.get_stream(RECORDS_STREAM).await.expect("records stream");
    let info = stream
        .consumer_info(LOG_WRITERS_CONSUMER)
        .await
        .expect("the writers' consumer");
    (info.num_pending, info.num_ack_pending, info.num_redelivered)
}

/// Polls `js`'s consumer until `done` holds of its state.
async fn wait_consumer(
    js: &async_nats::jetstream::Context,
    what: &str,
    done: impl Fn((u64, usize, usize)) -> bool,
) -> (u64, usize, usize) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let s = consumer_state(js).await;
        if done(s) {
            return s;
        }
        assert!(Instant::now() < deadline, "{what}: consumer at {s:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until `t` published `n` decisions to the stream (each stored).
async fn published(t: &TestApp, n: usize) {
    let counters = t.state.bus.as_ref().expect("bus").bus().counters().clone();
    let n = u64::try_from(n).expect("count");
    let deadline = Instant::now() + DEADLINE;
    while counters.published_count("decisions") < n {
        assert!(Instant::now() < deadline, "{n} decisions not published");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A replica on the bus whose records go to the stream (not a writer).
async fn publishing_replica(url: &str) -> (TestApp, Vec<tokio::task::JoinHandle<()>>) {
    let mut cfg = no_warmup();
    cfg.bus.nats_url = url.to_owned();
    cfg.bus.replica_id = "front".to_owned();
    cfg.bus.log_writer = false;
    cfg.log.enabled = true;
    cfg.log.sample_rate = 1.0;
    cfg.log.candidate_features_rate = 0.5;
    let clock = Arc::new(ManualClock::new(1_000, WALL));
    let sink = Arc::new(BusSink::new(&cfg.log));
    let state = AppState::new(Engine::new(cfg).with_log(sink), clock.clone());
    let (state, tasks) = service::bus::start(state)
        .await
        .expect("on the bus")
        .expect("the bus is on");
    let t = TestApp {
        router: app(state.clone()),
        clock,
        state,
    };
    for (w, cpu) in [("w1", 0.1), ("w2", 0.6)] {
        let body = json!({"snapshots": [{
            "worker_id": w, "timestamp_ms": t.clock.wall_ms(), "cpu_usage": cpu, "queue_depth": 0,
            "rtt_ms_avg": 1.0, "rtt_ms_p99": 2.0, "error_rate": 0.0}]});
        assert_eq!(t.post_json("/v1/telemetry", &body).await.0, StatusCode::OK);
    }
    (t, tasks)
}

/// A router's balancer, following `t`'s view, keeping its records.
async fn router(t: &TestApp, cfg: &Config) -> (Balancer, Arc<RecordBuffer>) {
    let req = Request::get("/v1/view?max_events=1")
        .body(Body::empty())
        .expect("request");
    let resp = t.router.clone().oneshot(req).await.expect("view");
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    let view = common::view_events(std::str::from_utf8(&body).expect("utf-8")).remove(0);
    let wall = Arc::new(ManualClock::new(0, WALL + 5));
    let records = Arc::new(RecordBuffer::new(100_000, &cfg.log, wall));
    let b = Balancer::new(cfg.clone(), BalancerConfig::new("edge-7"))
        .expect("balancer")
        .with_records(records.clone());
    b.apply_view(&view, 0, WALL).expect("view applied");
    (b, records)
}

/// `n` decisions of the router, an outcome for every second one, posted to
/// `t`; their decision ids.
async fn post_records(
    t: &TestApp,
    b: &Balancer,
    records: &RecordBuffer,
    n: usize,
    seed: u64,
) -> Vec<String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let req = ScoreRequest::new("user:1:a", vec!["w1".into(), "w2".into()]);
    let mut ids = Vec::new();
    for i in 0..n {
        let p = b.pick(&req, 0, &mut rng).expect("pick");
        if i % 2 == 0 {
            b.outcome(&p.decision_id, &p.worker, 3.5, true, 1)
                .expect("outcome");
        }
        ids.push(p.decision_id);
    }
    let batch = records.drain("edge-7", 100_000).expect("records");
    let (s, answer) = t
        .post_json(
            "/v1/router/decisions",
            &serde_json::to_value(&batch).expect("json"),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{answer}");
    assert_eq!(answer["decisions"]["logged"], n, "{answer}");
    ids
}

/// Every row of `kind` in the writers' directories, keyed by its decision
/// id (and, for decisions, read back one row per candidate, its worker),
/// with its count.
fn rows_written(dirs: &[&Path], kind: LogKind) -> HashMap<(String, String), usize> {
    let mut out = HashMap::new();
    for dir in dirs {
        let loaded = read_dir(dir, kind).expect("log reads");
        for b in &loaded.batches {
            let ids = b
                .column_by_name("decision_id")
                .expect("decision_id")
                .as_string::<i32>();
            let workers = b
                .column_by_name("worker_id")
                .expect("worker_id")
                .as_string::<i32>();
            for i in 0..ids.len() {
                let key = (ids.value(i).to_owned(), workers.value(i).to_owned());
                *out.entry(key).or_default() += 1;
            }
        }
    }
    out
}

/// The decision ids among `rows`.
fn ids_of(rows: &HashMap<(String, String), usize>) -> std::collections::HashSet<String> {
    rows.keys().map(|(id, _)| id.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_killed_mid_stream_leaves_its_batches_to_the_other_none_lost_none_twice() {
    let nats = NatsServer::start(None);
    let root = tempfile::tempdir().expect("root");
    let (front, _tasks) = publishing_replica(&nats.url()).await;
    let mut w1 = writer(root.path(), "writer-1", &nats.url(), &[]);
    let mut w2 = writer(root.path(), "writer-2", &nats.url(), &[]);
    wait_healthy(&w1).await;
    wait_healthy(&w2).await;
    let raw = async_nats::connect(nats.url()).await.expect("raw client");
    let js = async_nats::jetstream::new(raw);
    let cfg = front.state.engine.config().clone();
    let (b, records) = router(&front, &cfg).await;

    // Both writers take their share, and acknowledge it.
    let mut ids = Vec::new();
    for round in 0..4 {
        ids.extend(post_records(&front, &b, &records, 300, round).await);
    }
    published(&front, ids.len()).await;
    wait_consumer(&js, "every batch written", |(p, a, _)| p == 0 && a == 0).await;

    // Writer 1 stops (SIGSTOP) holding no batch; what is published now
    // partly reaches it and waits there, unacknowledged; then SIGKILL.
    signal(&w1, "-STOP");
    let mut round = 10;
    loop {
        ids.extend(post_records(&front, &b, &records, 300, round).await);
        round += 1;
        published(&front, ids.len()).await;
        let (_, unacked, _) = wait_consumer(&js, "batches delivered", |(p, _, _)| p == 0).await;
        if unacked > 0 {
            break;
        }
        assert!(round < 40, "no batch ever reached the stopped writer");
    }
    signal(&w1, "-KILL");
    let _ = w1.child.wait();

    // After ack_wait, writer 2 takes what writer 1 held.
    wait_consumer(&js, "the killed writer's batches rewritten", |(p, a, _)| {
        p == 0 && a == 0
    })
    .await;
    signal(&w2, "-TERM");
    let status = w2.child.wait().expect("writer 2 exits");
    assert!(status.success(), "writer 2 stopped cleanly: {status:?}");

    // The killed writer's write-ahead files become Parquet at its next
    // start; recover them here as that start would.
    recover_dir(&w1.decisions).expect("recovery");
    recover_dir(&w1.outcomes).expect("recovery");
    let rows = rows_written(&[&w1.decisions, &w2.decisions], LogKind::Decisions);
    let twice = rows.values().filter(|n| **n > 1).count();
    assert_eq!(twice, 0, "candidate rows written twice");
    let written = ids_of(&rows);
    let lost = ids.iter().filter(|id| !written.contains(*id)).count();
    assert_eq!(lost, 0, "{lost} of {} decisions lost", ids.len());
    assert_eq!(written.len(), ids.len());
    let outcomes = rows_written(&[&w1.outcomes, &w2.outcomes], LogKind::Outcomes);
    assert_eq!(outcomes.len(), ids.len().div_ceil(2));
    assert!(
        outcomes.values().all(|n| *n == 1),
        "an outcome written twice"
    );
    let counters = front.state.bus.as_ref().expect("bus").bus().counters();
    assert_eq!(counters.dropped_count("decisions"), 0);
    assert_eq!(
        counters.published_count("decisions"),
        u64::try_from(ids.len()).expect("count")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_oversized_and_mismatched_batches_are_refused_counted_and_never_written() {
    let nats = NatsServer::start(None);
    let root = tempfile::tempdir().expect("root");
    // A replica with the default limit creates the stream, so that the
    // stream stores what this writer, at 4096 bytes, finds too large.
    let cfg = scorer_engine::config::bus::BusConfig {
        nats_url: nats.url(),
        ..Default::default()
    };
    let _front = scorer_bus::Bus::connect(&cfg, "front").await.expect("bus");
    let mut w = writer(
        root.path(),
        "writer-1",
        &nats.url(),
        &[("SCORER_BUS__MAX_MESSAGE_BYTES", "4096")],
    );
    wait_healthy(&w).await;
    let raw = async_nats::connect(nats.url()).await.expect("raw client");
    let js = async_nats::jetstream::new(raw);
    let outcome = |id: &str| scorer_log::OutcomeRecord {
        decision_id: id.to_owned(),
        worker_id: "w1".into(),
        ts_ms: 1_700_000_000_000,
        latency_ms: 2.0,
        success: true,
        caller: None,
        cache_hit: None,
    };
    let good = scorer_bus::records::encode(
        &scorer_log::outcomes_batch(&[outcome("good-1"), outcome("good-2")]).expect("batch"),
    )
    .expect("encode");
    let bad = scorer_bus::records::encode(
        &scorer_log::outcomes_batch(&[outcome("bad-1")]).expect("batch"),
    )
    .expect("encode");
    let with_schema = || {
        let mut h = async_nats::HeaderMap::new();
        h.insert(LOG_SCHEMA_HEADER, LOG_SCHEMA_VERSION);
        h
    };
    let publish = |subject: &'static str, headers: async_nats::HeaderMap, body: Vec<u8>| {
        let js = js.clone();
        async move {
            js.publish_with_headers(subject, headers, body.into())
                .await
                .expect("publish")
                .await
                .expect("stored");
        }
    };
    // Not Arrow at all; JSON; outcomes on the decisions subject; cut short.
    publish(
        "scorer.records.decisions.x",
        with_schema(),
        b"\xff\x00garbage".to_vec(),
    )
    .await;
    publish(
        "scorer.records.outcomes.x",
        with_schema(),
        br#"{"decision_id":"bad-2"}"#.to_vec(),
    )
    .await;
    publish("scorer.records.decisions.x", with_schema(), bad.clone()).await;
    publish(
        "scorer.records.outcomes.x",
        with_schema(),
        bad[..bad.len() - 9].to_vec(),
    )
    .await;
    // Larger than the writer's 4096 bytes.
    let mut big = bad.clone();
    big.resize(10_000, 0);
    publish("scorer.records.outcomes.x", with_schema(), big).await;
    // Another schema version; none at all.
    let mut old = async_nats::HeaderMap::new();
    old.insert(LOG_SCHEMA_HEADER, "1");
    publish("scorer.records.outcomes.x", old, bad.clone()).await;
    publish(
        "scorer.records.outcomes.x",
        async_nats::HeaderMap::new(),
        bad.clone(),
    )
    .await;
    // And one good batch, published twice without a message id (so the
    // stream keeps both): the writer writes its records once.
    publish("scorer.records.outcomes.x", with_schema(), good.clone()).await;
    publish("scorer.records.outcomes.x", with_schema(), good).await;
    wait_consumer(&js, "every batch settled", |(p, a, _)| p == 0 && a == 0).await;

    let metrics = reqwest::get(format!("{}/metrics", w.base))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    let refused = |kind: &str, reason: &str| {
        let line = format!("scorer_bus_refused_total{{kind=\"{kind}\",reason=\"{reason}\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .unwrap_or_else(|| panic!("no {line} in /metrics"))
            .to_owned()
    };
    assert_eq!(refused("decisions", "malformed"), "2");
    assert_eq!(refused("outcomes", "malformed"), "2");
    assert_eq!(refused("outcomes", "oversized"), "1");
    assert_eq!(refused("outcomes", "schema"), "2");

    signal(&w, "-TERM");
    assert!(w.child.wait().expect("exits").success());
    let rows = rows_written(&[&w.outcomes], LogKind::Outcomes);
    assert!(rows.values().all(|n| *n == 1), "{rows:?}");
    let mut ids: Vec<_> = ids_of(&rows).into_iter().collect();
    ids.sort();
    assert_eq!(ids, ["good-1", "good-2"], "only the good batch is written");
    assert!(
        read_dir(&w.decisions, LogKind::Decisions)
            .expect("reads")
            .rows
            == 0
    );
}

//! `POST /v1/router/decisions`: a router's balancer sends its decisions and
//! outcomes, and they land in the service's decision log beside its own,
//! tagged by their ids; bad records are refused one by one and change
//! nothing.

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{Array, AsArray};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use scorer_balancer::records::RecordBuffer;
use scorer_balancer::{Balancer, BalancerConfig, PickSource};
use scorer_core::clock::{Clock, ManualClock};
use scorer_engine::Engine;
use scorer_engine::api::ScoreRequest;
use scorer_engine::config::Config;
use scorer_log::{DecisionLog, LogKind, join_outcomes, read_dir};
use serde_json::{Value, json};
use service::{AppState, EngineLog, app};
use tower::ServiceExt;

use common::{TestApp, WALL, no_warmup, test_app, view_events};

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn logged_config(root: &std::path::Path) -> Config {
    let mut cfg = no_warmup();
    cfg.log.enabled = true;
    cfg.log.dir = root.join("decisions");
    cfg.log.sample_rate = 1.0;
    cfg.log.candidate_features_rate = 0.5;
    cfg
}

fn logged_app(cfg: &Config) -> TestApp {
    let clock = Arc::new(ManualClock::new(1_000, WALL));
    let log = DecisionLog::start(cfg.log.clone(), clock.clone()).expect("log starts");
    let state = AppState::new(
        Engine::new(cfg.clone()).with_log(Arc::new(log)),
        clock.clone(),
    );
    TestApp {
        router: app(state.clone()),
        clock,
        state,
    }
}

async fn report(app: &TestApp, id: &str, cpu: f64) {
    let body = json!({"snapshots": [{
        "worker_id": id, "timestamp_ms": app.clock.wall_ms(), "cpu_usage": cpu, "queue_depth": 0,
        "rtt_ms_avg": 1.0, "rtt_ms_p99": 2.0, "error_rate": 0.0,
    }]});
    assert_eq!(
        app.post_json("/v1/telemetry", &body).await.0,
        StatusCode::OK
    );
}

/// A logging service with workers w1 and w2, and router edge-7's balancer
/// on its first view, keeping up to `capacity` records.
async fn edge7_on_two_workers(
    cfg: &Config,
    capacity: usize,
) -> (TestApp, Balancer, Arc<RecordBuffer>) {
    let app = logged_app(cfg);
    report(&app, "w1", 0.1).await;
    report(&app, "w2", 0.6).await;
    let view = &first_view(&app).await;
    let wall = Arc::new(ManualClock::new(0, WALL + 5));
    let records = Arc::new(RecordBuffer::new(capacity, &cfg.log, wall));
    let b = Balancer::new(cfg.clone(), BalancerConfig::new("edge-7"))
        .unwrap()
        .with_records(records.clone());
    b.apply_view(view, 0, WALL).unwrap();
    (app, b, records)
}

#[tokio::test]
async fn a_routers_decisions_and_outcomes_land_in_the_services_log_tagged_by_their_ids() {
    let root =
        TempDir(std::env::temp_dir().join(format!("scorer-router-log-{}", std::process::id())));
    let cfg = logged_config(&root.0);
    let (app, b, records) = edge7_on_two_workers(&cfg, 1024).await;
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let req = ScoreRequest::new("user:1:a", vec!["w1".into(), "w2".into()]);
    let picks: Vec<_> = (0..40)
        .map(|_| b.pick(&req, 0, &mut rng).unwrap())
        .collect();
    assert!(picks.iter().all(|p| p.source == PickSource::View));
    for p in &picks[..10] {
        b.outcome(&p.decision_id, &p.worker, 3.5, true, 1).unwrap();
    }
    let batch = records.drain("edge-7", 1024).expect("records");
    assert_eq!((batch.decisions.len(), batch.outcomes.len()), (40, 10));
    let (status, answer) = app
        .post_json(
            "/v1/router/decisions",
            &serde_json::to_value(&batch).unwrap(),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["logging"], true);
    assert_eq!(
        answer["decisions"],
        json!({"logged": 40, "unsampled": 0, "dropped": 0, "refused": 0})
    );
    assert_eq!(answer["outcomes"]["logged"], 10);

    // Bad records are refused one by one, named, and logged nothing.
    let mut bad = batch.clone();
    bad.decisions.truncate(2);
    bad.outcomes.truncate(1);
    bad.decisions[0].decision_id = "edge-8-00000000000000a0".into();
    bad.decisions[1].candidates[0].rule_score = f64::MAX;
    bad.outcomes[0].latency_ms = -1.0;
    let (status, answer) = app
        .post_json("/v1/router/decisions", &serde_json::to_value(&bad).unwrap())
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["decisions"]["refused"], 2);
    assert_eq!(answer["outcomes"]["refused"], 1);
    assert_eq!(answer["errors"][0]["field"], "decisions[0].decision_id");
    assert_eq!(
        answer["errors"][1]["field"],
        "decisions[1].candidates[0].rule_score"
    );
    assert_eq!(answer["errors"][2]["field"], "outcomes[0].latency_ms");

    // A record of the wrong shape is refused alone, too.
    let shapeless =
        json!({"router_id": "edge-7", "outcomes": [{"decision_id": 5}, {"latency_ms": "slow"}]});
    let (status, answer) = app.post_json("/v1/router/decisions", &shapeless).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["outcomes"]["refused"], 2);
    assert_eq!(answer["errors"][0]["field"], "outcomes[0]");

    let log = app.state.engine.decision_log().expect("log").clone();
    log.shutdown().expect("clean close");
    let decisions = read_dir(&root.0.join("decisions"), LogKind::Decisions).unwrap();
    let outcomes = read_dir(&root.0.join("outcomes"), LogKind::Outcomes).unwrap();
    assert_eq!(
        (decisions.rows, outcomes.rows),
        (80, 10),
        "one row per candidate"
    );
    let joined = join_outcomes(&decisions, &outcomes).unwrap();
    let col = |n: &str| joined.column_by_name(n).unwrap().clone();
    let ids = col("decision_id");
    let ids = ids.as_string::<i32>();
    let picked = col("picked");
    let picked = picked.as_boolean();
    let features = col("features");
    let latency = col("latency_ms");
    let mut with_outcome = 0;
    let mut unpicked_with_features = 0;
    for row in 0..joined.num_rows() {
        let id = ids.value(row);
        assert!(picks.iter().any(|p| p.decision_id == id), "{id}");
        assert!(id.starts_with("edge-7-"));
        if picked.value(row) {
            assert!(features.is_valid(row), "the pick's features are kept");
            with_outcome += usize::from(latency.is_valid(row));
        } else {
            unpicked_with_features += usize::from(features.is_valid(row));
        }
    }
    assert_eq!(with_outcome, 10);
    // About half the decisions are in the candidate-features sample.
    assert!(
        (5..=35).contains(&unpicked_with_features),
        "{unpicked_with_features}"
    );
}

fn outcome() -> Value {
    json!({"decision_id": "r1-00000000000000a0", "worker_id": "w1", "ts_ms": WALL,
           "latency_ms": 1.0, "success": true})
}

async fn first_view(app: &TestApp) -> scorer_engine::view::View {
    let req = Request::get("/v1/view?max_events=1")
        .body(Body::empty())
        .unwrap();
    let resp = app.router.clone().oneshot(req).await.unwrap();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    view_events(std::str::from_utf8(&body).unwrap()).remove(0)
}

#[tokio::test]
async fn a_bad_envelope_is_refused_whole_and_a_service_without_a_log_logs_nothing() {
    let app = test_app(no_warmup());
    for (bad, what) in [
        (json!({"router_id": "has space"}), "router_id"),
        (
            json!({"router_id": "r1", "decisions": [], "extra": 1}),
            "extra",
        ),
        (
            json!({"router_id": "r1", "outcomes": vec![outcome(); 4097]}),
            "outcomes",
        ),
    ] {
        let (status, body) = app.post_json("/v1/router/decisions", &bad).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{what}: {body}");
    }
    let ok = json!({"router_id": "r1", "outcomes": [outcome()]});
    let (status, body) = app.post_json("/v1/router/decisions", &ok).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["logging"], false);
    assert_eq!(body["outcomes"]["logged"], 0);
}

#[tokio::test(start_paused = true)]
async fn a_batch_the_log_cannot_take_is_answered_503_and_logged_later() {
    let root =
        TempDir(std::env::temp_dir().join(format!("scorer-router-busy-{}", std::process::id())));
    let mut cfg = logged_config(&root.0);
    cfg.log.channel_capacity = 8;
    cfg.log.router_queue_share = 1.0;
    cfg.server.max_feedback_batch = 8;
    let app = logged_app(&cfg);
    let outcomes: Vec<Value> = (0..6)
        .map(|i| {
            json!({"decision_id": format!("r1-{i:016x}"), "worker_id": "w1", "ts_ms": WALL,
                   "latency_ms": 1.0, "success": true})
        })
        .collect();
    let batch = json!({"router_id": "r1", "outcomes": outcomes});
    let log = app.state.engine.decision_log().expect("log").clone();
    let hold = log.hold_writer();
    let (status, body) = app.post_json("/v1/router/decisions", &batch).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Six records wait in a channel of eight: the same batch no longer
    // fits, and after waiting its 500 ms for the writer it is refused.
    let started = tokio::time::Instant::now();
    let (status, body) = app.post_json("/v1/router/decisions", &batch).await;
    assert!(started.elapsed() >= std::time::Duration::from_millis(500));
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "log_busy", "{body}");
    assert_eq!(
        log.stats().dropped,
        0,
        "nothing dropped: the router keeps it"
    );
    drop(hold);
    log.shutdown().expect("clean close");
    let outcomes = read_dir(&root.0.join("outcomes"), LogKind::Outcomes).unwrap();
    assert_eq!(outcomes.rows, 6, "the first batch only");
}

#[tokio::test]
async fn records_the_service_would_never_write_are_refused_each_by_name() {
    let root =
        TempDir(std::env::temp_dir().join(format!("scorer-router-odd-{}", std::process::id())));
    let cfg = logged_config(&root.0);
    let (app, b, records) = edge7_on_two_workers(&cfg, 64).await;
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let req = ScoreRequest::new("user:1:a", vec!["w1".into(), "w2".into()]);
    let p = b.pick(&req, 0, &mut rng).unwrap();
    b.outcome(&p.decision_id, &p.worker, 3.5, true, 1).unwrap();
    let mut odd = records.drain("edge-7", 64).expect("records");
    // The same decision twice, its outcome twice, and one from 1970.
    odd.decisions.push(odd.decisions[0].clone());
    odd.outcomes.push(odd.outcomes[0].clone());
    let mut old = odd.outcomes[0].clone();
    old.ts_ms = 1;
    odd.outcomes.push(old);
    let (status, answer) = app
        .post_json("/v1/router/decisions", &serde_json::to_value(&odd).unwrap())
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["decisions"]["logged"], 1, "{answer}");
    assert_eq!(answer["decisions"]["refused"], 1, "{answer}");
    assert_eq!(answer["outcomes"]["logged"], 1, "{answer}");
    assert_eq!(answer["outcomes"]["refused"], 2, "{answer}");
    let fields: Vec<&str> = answer["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "decisions[1].decision_id",
            "outcomes[1].decision_id",
            "outcomes[2].ts_ms"
        ]
    );
    // A record is an object: its fields in order as an array are refused,
    // as in every other body.
    let positional = json!({"router_id": "edge-7",
        "outcomes": [["edge-7-00000000000000b1", "w1", WALL, 1.5, true]]});
    let (status, answer) = app.post_json("/v1/router/decisions", &positional).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["outcomes"]["refused"], 1, "{answer}");
    assert_eq!(answer["errors"][0]["field"], "outcomes[0]");
}

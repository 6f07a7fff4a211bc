//! Replicas sharing one view over a real nats-server: telemetry, router
//! load and overrides accepted by one replica reach the others; a new
//! replica starts from every worker's latest report; what is malformed,
//! oversized, mismatched or from a peer without the credential is refused
//! and never applied; and everything reconnects after the server restarts.

mod common;

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::nats::NatsServer;
use common::replicas::{CROSSING, applied, config, cpu_of, replica, report, reports_of, snapshot};
use common::{TestApp, WALL};
use scorer_bus::Refusal;
use scorer_core::clock::Clock;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telemetry_accepted_by_one_replica_reaches_the_other_and_a_newcomer_starts_from_the_latest()
{
    let nats = NatsServer::start(None);
    let (a, _ta) = replica(config(&nats.url(), "a")).await;
    let (b, _tb) = replica(config(&nats.url(), "b")).await;
    report(&a, &[snapshot("w1", 0.10), snapshot("w2", 0.20)]).await;
    applied(&b, 2).await;
    assert_eq!(cpu_of(&b, "w1"), Some(0.10));
    assert_eq!(cpu_of(&b, "w2"), Some(0.20));
    // A's own reports come back to it from the stream and are skipped.
    assert_eq!(
        a.state
            .bus
            .as_ref()
            .expect("bus")
            .bus()
            .counters()
            .applied_count("telemetry"),
        0
    );

    report(&a, &[snapshot("w1", 0.70)]).await;
    applied(&b, 3).await;
    assert_eq!(reports_of(&b, "w1"), 2);

    // A replica that joins now finds each worker's latest report, once.
    let (c, _tc) = replica(config(&nats.url(), "c")).await;
    applied(&c, 2).await;
    assert_eq!(cpu_of(&c, "w1"), Some(0.70));
    assert_eq!(cpu_of(&c, "w2"), Some(0.20));
    assert_eq!((reports_of(&c, "w1"), reports_of(&c, "w2")), (1, 1));
    // ... and passes them to the routers following its view.
    let (_, v) = c.get("/v1/workers").await;
    assert_eq!(v["workers"].as_array().map(Vec::len), Some(2), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_taken_by_one_replica_reaches_the_other_and_a_restarted_replica_and_router_load_counts_on_both()
 {
    let nats = NatsServer::start(None);
    let (a, _ta) = replica(config(&nats.url(), "a")).await;
    let (b, _tb) = replica(config(&nats.url(), "b")).await;
    report(&a, &[snapshot("w1", 0.10), snapshot("w2", 0.10)]).await;
    applied(&b, 2).await;

    let req = Request::put("/v1/admin/workers/w1/override")
        .header("content-type", "application/json")
        .body(Body::from(
            json!({"kind": "drain", "reason": "kernel upgrade"}).to_string(),
        ))
        .expect("request");
    let (s, body) = a.send(req).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    applied(&b, 3).await;
    let now = b.clock.monotonic_ms();
    let on_b = b.state.engine.overrides(now);
    assert_eq!(on_b.len(), 1, "{on_b:?}");
    assert_eq!(on_b[0].worker_id, "w1");
    assert_eq!(on_b[0].reason, "kernel upgrade");
    let (_, score) = b
        .post_json(
            "/v1/score",
            &json!({"key": "user:42", "candidates": ["w1", "w2"]}),
        )
        .await;
    assert_eq!(score["pick"], "w2", "{score}");

    // Replica a restarted under its name finds the drain it took in the
    // bucket, and its workers' last reports in the stream.
    let (a2, _ta2) = replica(config(&nats.url(), "a")).await;
    applied(&a2, 3).await;
    let on_a2 = a2.state.engine.overrides(a2.clock.monotonic_ms());
    assert_eq!(on_a2.len(), 1, "{on_a2:?}");
    assert_eq!(on_a2[0].worker_id, "w1");
    assert_eq!(reports_of(&a2, "w2"), 1);

    let load =
        json!({"router_id": "edge-1", "outstanding": [{"worker_id": "w2", "outstanding": 7}]});
    let (s, body) = a.post_json("/v1/router/load", &load).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    applied(&b, 4).await;
    // Beside replica a's own (empty) load, router edge-1's counts on b.
    let others = b.state.load_board.others(Some("a"), b.clock.monotonic_ms());
    assert_eq!(others.routers, 1);
    assert_eq!(others.load.len(), 1, "{:?}", others.load);
    assert_eq!(others.load[0].outstanding, 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_oversized_and_mismatched_messages_are_refused_counted_and_never_applied() {
    let nats = NatsServer::start(None);
    let mut cfg = config(&nats.url(), "b");
    cfg.bus.max_message_bytes = 1_024;
    let (b, _tb) = replica(cfg).await;
    let raw = scorer_bus::async_nats::connect(nats.url())
        .await
        .expect("raw client");
    let counters = b.state.bus.as_ref().expect("bus").bus().counters().clone();

    let send = |subject: &'static str, body: Vec<u8>| {
        let raw = raw.clone();
        async move { raw.publish(subject, body.into()).await.expect("publish") }
    };
    // One subject each: the stream keeps one message per subject, and a
    // message replaced before it was delivered is never seen at all.
    send("scorer.telemetry.w5", b"{not json".to_vec()).await;
    send(
        "scorer.telemetry.w9",
        snapshot("w8", 0.1).to_string().into_bytes(),
    )
    .await;
    // Past the stream's own limit (bus.max_message_bytes): never stored.
    send("scorer.telemetry.w6", vec![b' '; 2_000]).await;
    send(
        "scorer.telemetry.w4",
        snapshot("w4", -1.0).to_string().into_bytes(),
    )
    .await;
    send(
        "scorer.telemetry.w.9",
        snapshot("w.9", 0.1).to_string().into_bytes(),
    )
    .await;
    // The barrier: a good report after the bad ones, on the same subject
    // tree from the same connection, so it is applied after they were seen.
    send(
        "scorer.telemetry.w7",
        snapshot("w7", 0.3).to_string().into_bytes(),
    )
    .await;
    applied(&b, 1).await;
    assert_eq!(cpu_of(&b, "w7"), Some(0.3));
    for gone in ["w4", "w5", "w6", "w8", "w9", "w.9"] {
        assert_eq!(cpu_of(&b, gone), None, "{gone} was applied");
    }
    let t = |why| counters.refused_count("telemetry", why);
    assert_eq!(
        (
            t(Refusal::Malformed),
            t(Refusal::Subject),
            t(Refusal::Oversized),
            t(Refusal::Invalid)
        ),
        (1, 2, 0, 1)
    );

    send("scorer.load.edge-1", b"[]".to_vec()).await;
    send("scorer.load.edge-1", vec![b' '; 2_000]).await;
    send(
        "scorer.load.edge-1",
        json!({"router_id": "edge-2", "outstanding": []})
            .to_string()
            .into_bytes(),
    )
    .await;
    send(
        "scorer.load.edge-1",
        json!({"router_id": "edge-1", "outstanding": [{"worker_id": "w7", "outstanding": 1}]})
            .to_string()
            .into_bytes(),
    )
    .await;
    applied(&b, 2).await;
    assert_eq!(counters.refused_count("load", Refusal::Malformed), 1);
    assert_eq!(counters.refused_count("load", Refusal::Subject), 1);
    assert_eq!(counters.refused_count("load", Refusal::Oversized), 1);
    let metrics = b.metrics().await;
    assert!(
        metrics.contains(r#"scorer_bus_refused_total{kind="telemetry",reason="subject"} 2"#),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_server_restarts_replicas_reconnect_and_readyz_says_when_they_are_cut_off() {
    let mut nats = NatsServer::start(None);
    let (a, _ta) = replica(config(&nats.url(), "a")).await;
    let (b, _tb) = replica(config(&nats.url(), "b")).await;
    report(&a, &[snapshot("w1", 0.10)]).await;
    applied(&b, 1).await;

    nats.kill();
    let link = b.state.bus.as_ref().expect("bus").clone();
    let deadline = tokio::time::Instant::now() + CROSSING;
    while link.bus().connected() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "never saw the server go"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (_, ready) = b.get("/readyz").await;
    assert_eq!(ready["bus"]["status"], "disconnected", "{ready}");
    // Still scoring on what it has.
    let (s, _) = b
        .post_json(
            "/v1/score",
            &json!({"key": "user:42", "candidates": ["w1"]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK);

    nats.restart();
    // Reports accepted while A reconnects may be lost with its connection
    // (telemetry is latest-value-wins): A's agent keeps reporting, and one
    // of them reaches B once both are back.
    let deadline = tokio::time::Instant::now() + CROSSING;
    let before = reports_of(&b, "w1");
    while reports_of(&b, "w1") == before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "B never heard from A again"
        );
        report(&a, &[snapshot("w1", 0.5)]).await;
        let mut rx = link.applied();
        let _ = tokio::time::timeout(Duration::from_millis(500), rx.changed()).await;
    }
    let (_, ready) = b.get("/readyz").await;
    assert_eq!(ready["bus"]["status"], "connected", "{ready}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_refuses_a_peer_without_the_credential_and_an_agent_outside_its_subjects() {
    let conf = r#"
authorization {
  users = [
    { user: replica, password: "replica-secret-1",
      permissions: { publish: [">"], subscribe: [">"] } }
    { user: agent, password: "agent-secret-1",
      permissions: { publish: ["scorer.telemetry.>"], subscribe: ["_INBOX.>"] } }
    { user: router, password: "router-secret-1",
      permissions: { publish: ["scorer.load.edge-1"], subscribe: ["_INBOX.>"] } }
  ]
}
"#;
    let nats = NatsServer::start(Some(conf));
    let mut cfg = config(&nats.url(), "b");
    cfg.bus.user = Some("replica".into());
    cfg.bus.password = Some("replica-secret-1".into());
    let (b, _tb) = replica(cfg.clone()).await;

    let mut stranger = cfg.clone();
    stranger.bus.password = Some("guess".into());
    let refused = scorer_bus::Bus::connect(&stranger.bus, "x").await;
    assert!(
        matches!(refused, Err(scorer_bus::BusError::Connect { .. })),
        "{refused:?}"
    );

    let agent = scorer_bus::async_nats::ConnectOptions::with_user_and_password(
        "agent".into(),
        "agent-secret-1".into(),
    )
    .connect(nats.url())
    .await
    .expect("agent connects");
    // Outside its subjects: the server drops it, the replica never sees it.
    agent
        .publish(
            "scorer.load.edge-1",
            json!({"router_id": "edge-1", "outstanding": []})
                .to_string()
                .into(),
        )
        .await
        .expect("publish");
    agent
        .publish(
            "scorer.telemetry.w1",
            snapshot("w1", 0.4).to_string().into(),
        )
        .await
        .expect("publish");
    applied(&b, 1).await;
    assert_eq!(cpu_of(&b, "w1"), Some(0.4));
    let c = b.state.bus.as_ref().expect("bus").bus().counters().clone();
    assert_eq!(c.applied_count("load"), 0);
    assert_eq!(c.applied_count("telemetry"), 1);
}

/// A `redis-server` on a free loopback port, stopped when dropped.
struct Redis(std::process::Child, u16);

impl Redis {
    fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server on PATH (scripts/test.sh installs it)");
        Self(child, port)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_pointed_at_the_bus_reaches_every_replica_without_posting_to_any() {
    let nats = NatsServer::start(None);
    let mut cfg = config(&nats.url(), "a");
    // The agent stamps its reports with the real time.
    cfg.telemetry.max_clock_skew_ms = 60_000;
    let (a, _ta) = replica(cfg.clone()).await;
    cfg.bus.replica_id = "b".into();
    let (b, _tb) = replica(cfg).await;
    let now_ms = agent::redis_info::unix_ms_now();
    for t in [&a, &b] {
        t.clock.advance(now_ms.saturating_sub(WALL));
    }
    let redis = Redis::start();

    let mut agent_cfg = agent::AgentConfig::new(
        // Nothing listens here: the reports must travel by the bus.
        "http://127.0.0.1:9",
        vec![format!("w1=127.0.0.1:{}", redis.1).parse().expect("spec")],
    );
    agent_cfg.interval_ms = 200;
    agent_cfg.probe_timeout_ms = 50;
    agent_cfg.bus.nats_url = nats.url();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let agent = tokio::spawn(agent::run(agent_cfg, async {
        let _ = stopped.await;
    }));

    applied(&a, 1).await;
    applied(&b, 1).await;
    for t in [&a, &b] {
        assert!(reports_of(t, "w1") >= 1);
        let c = t.state.bus.as_ref().expect("bus").bus().counters().clone();
        assert_eq!(c.refused_count("telemetry", Refusal::Invalid), 0);
        assert_eq!(c.published_count("telemetry"), 0, "a replica republished");
    }
    let _ = stop.send(());
    agent
        .await
        .expect("agent task")
        .expect("the agent ran on the bus");
}

/// Replica `t`'s backlog on `worker` from its peers' picks.
fn others_on(t: &TestApp, worker: &str) -> f64 {
    let slot = t.state.engine.registry().get(worker).expect("known");
    slot.evidence().snapshot().others_backlog
}

/// Polls (a real server is on the way) until `t`'s backlog from its
/// peers on `worker` is `want`.
async fn others_reach(t: &TestApp, worker: &str, want: f64) {
    let deadline = tokio::time::Instant::now() + CROSSING;
    while others_on(t, worker) != want {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{worker}: peers' backlog {} not {want} within {CROSSING:?}",
            others_on(t, worker)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pick_made_by_one_replica_counts_on_the_others_until_its_outcome() {
    let nats = NatsServer::start(None);
    let (a, _ta) = replica(config(&nats.url(), "a")).await;
    let (b, _tb) = replica(config(&nats.url(), "b")).await;
    report(&a, &[snapshot("w1", 0.10), snapshot("w2", 0.10)]).await;
    applied(&b, 2).await;

    let (s, pick) = a
        .post_json(
            "/v1/score",
            &json!({"key": "user:1", "candidates": ["w1", "w2"]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{pick}");
    let worker = pick["pick"].as_str().expect("a pick").to_owned();
    let other = if worker == "w1" { "w2" } else { "w1" };
    others_reach(&b, &worker, 1.0).await;
    assert_eq!(others_on(&b, other), 0.0);
    // Replica b counts a as a decider beside it, and the routers that
    // follow b see a's pick in their view's load.
    assert_eq!(b.state.engine.routers_sharing(), 2);
    let board = b.state.load_board.others(None, b.clock.monotonic_ms());
    assert_eq!(board.routers, 1);
    assert_eq!(board.load.len(), 1, "{:?}", board.load);
    assert_eq!(
        (board.load[0].worker_id.as_str(), board.load[0].outstanding),
        (worker.as_str(), 1)
    );
    // Replica a's own evidence is its own pick, not a peer's.
    assert_eq!(others_on(&a, &worker), 0.0);

    let fb = json!({"decision_id": pick["decision_id"], "worker_id": worker,
                    "latency_ms": 1.5, "success": true});
    let (s, body) = a.post_json("/v1/feedback", &fb).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    others_reach(&b, &worker, 0.0).await;
}

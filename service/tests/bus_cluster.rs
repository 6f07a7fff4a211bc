//! Replicas on a three-node NATS cluster (real nats-servers joined by
//! routes, JetStream clustered): each replica talks to its own node, what
//! one accepts reaches the others across the routes, and with
//! `bus.stream_replicas = 3` a node's loss keeps every worker's latest
//! report and the overrides for a replica that starts after it.

mod common;

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::TestApp;
use common::nats::{NatsServer, free_port};
use common::replicas::{applied, config, cpu_of, report, snapshot, try_replica};
use scorer_core::clock::Clock;
use scorer_engine::config::Config;
use serde_json::json;

/// Three nodes of one cluster, each routed to the other two.
fn cluster() -> Vec<NatsServer> {
    let routes: Vec<u16> = (0..3).map(|_| free_port()).collect();
    (0..3)
        .map(|i| {
            let peers: Vec<String> = routes
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, p)| format!("nats-route://127.0.0.1:{p}"))
                .collect();
            NatsServer::start(Some(&format!(
                "server_name: n{i}\ncluster {{\n  name: scorer\n  listen: 127.0.0.1:{}\n  routes: [{}]\n}}\n",
                routes[i],
                peers.join(", ")
            )))
        })
        .collect()
}

/// How long a cluster may take to elect its leaders, after its nodes start
/// or after one is lost (seconds on a quiet host, much longer on a loaded
/// one).
const ELECTION: Duration = Duration::from_secs(90);

/// A replica on `url` with three copies of the shared state, started once
/// the cluster's JetStream answers: a cluster elects its leaders a few
/// seconds after its nodes start, and again after one is lost.
async fn clustered_replica(url: &str, name: &str) -> (TestApp, Vec<tokio::task::JoinHandle<()>>) {
    let mut cfg: Config = config(url, name);
    cfg.bus.stream_replicas = 3;
    let deadline = tokio::time::Instant::now() + ELECTION;
    loop {
        match try_replica(cfg.clone()).await {
            Ok(r) => return r,
            Err(e) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the cluster's JetStream did not answer within {ELECTION:?}: {e}"
                );
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_on_different_nodes_share_telemetry_and_a_drain_and_the_state_outlives_a_node() {
    let mut nodes = cluster();
    let (a, _ta) = clustered_replica(&nodes[0].url(), "a").await;
    let (b, _tb) = clustered_replica(&nodes[2].url(), "b").await;

    report(&a, &[snapshot("w1", 0.10), snapshot("w2", 0.20)]).await;
    applied(&b, 2).await;
    assert_eq!(cpu_of(&b, "w1"), Some(0.10));
    assert_eq!(cpu_of(&b, "w2"), Some(0.20));

    let drain = Request::put("/v1/admin/workers/w1/override")
        .header("content-type", "application/json")
        .body(Body::from(
            json!({"kind": "drain", "reason": "disk swap"}).to_string(),
        ))
        .expect("request");
    let (s, body) = b.send(drain).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    applied(&a, 1).await;
    let on_a = a.state.engine.overrides(a.clock.monotonic_ms());
    assert_eq!(on_a.len(), 1, "{on_a:?}");
    assert_eq!(on_a[0].worker_id, "w1");

    // The node that leads the telemetry stream is lost; a replica that
    // starts on another finds every worker's latest report and the drain
    // in the copies left.
    let leader = leader_of(&nodes[1].url(), scorer_bus::subject::TELEMETRY_STREAM).await;
    nodes[leader].kill();
    let survivor = (0..3).find(|i| *i != leader).expect("a node left");
    let (c, _tc) = clustered_replica(&nodes[survivor].url(), "c").await;
    applied(&c, 3).await;
    assert_eq!(cpu_of(&c, "w1"), Some(0.10));
    assert_eq!(cpu_of(&c, "w2"), Some(0.20));
    let on_c = c.state.engine.overrides(c.clock.monotonic_ms());
    assert_eq!(on_c.len(), 1, "{on_c:?}");
    assert_eq!(on_c[0].reason, "disk swap");
}

/// The index of the node that leads `stream` (its name is `n<index>`).
async fn leader_of(url: &str, stream: &str) -> usize {
    let client = scorer_bus::async_nats::connect(url).await.expect("connect");
    let js = scorer_bus::async_nats::jetstream::new(client);
    let mut s = js.get_stream(stream).await.expect("the stream");
    let info = s.info().await.expect("its info");
    let leader = info
        .cluster
        .as_ref()
        .and_then(|c| c.leader.clone())
        .expect("a clustered stream has a leader");
    leader
        .strip_prefix('n')
        .and_then(|i| i.parse().ok())
        .expect("a node's name")
}

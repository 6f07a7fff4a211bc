//! Service replicas on a real nats-server, for the bus tests: a replica's
//! configuration, a replica started on the bus, and a wait for what it
//! applied from its peers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::json;

use scorer_engine::config::Config;

use super::{TestApp, WALL, rules_only, test_app};

/// How long a message may take to cross the bus in a test before it fails.
pub const CROSSING: Duration = Duration::from_secs(20);

/// The rules-only configuration of replica `replica` on the bus at `url`.
pub fn config(url: &str, replica: &str) -> Config {
    let mut c = rules_only();
    c.bus.nats_url = url.to_owned();
    c.bus.replica_id = replica.to_owned();
    c
}

/// A replica on the bus at `url`, and its bus tasks.
pub async fn replica(cfg: Config) -> (TestApp, Vec<tokio::task::JoinHandle<()>>) {
    try_replica(cfg).await.expect("on the bus")
}

/// A replica on the bus at `url`, and its bus tasks, or why it could not
/// join.
pub async fn try_replica(
    cfg: Config,
) -> Result<(TestApp, Vec<tokio::task::JoinHandle<()>>), scorer_bus::BusError> {
    let t = test_app(cfg);
    let (state, tasks) = service::bus::start(t.state.clone())
        .await?
        .expect("the bus is on");
    let router = service::app(state.clone());
    Ok((
        TestApp {
            router,
            clock: t.clock,
            state,
        },
        tasks,
    ))
}

/// Waits until `t` applied at least `n` messages from its peers.
pub async fn applied(t: &TestApp, n: u64) {
    let mut rx = t.state.bus.as_ref().expect("bus").applied();
    tokio::time::timeout(CROSSING, rx.wait_for(|c| *c >= n))
        .await
        .unwrap_or_else(|_| panic!("{n} messages not applied within {CROSSING:?}"))
        .expect("bus link alive");
}

/// A report of `worker`, each one later than the one before (a replica
/// refuses a report not after the worker's last).
pub fn snapshot(worker: &str, cpu: f64) -> serde_json::Value {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let at = WALL - 1_000 + SEQ.fetch_add(1, Ordering::Relaxed);
    json!({"worker_id": worker, "timestamp_ms": at, "cpu_usage": cpu, "queue_depth": 0,
           "rtt_ms_avg": 1.0, "rtt_ms_p99": 2.0, "error_rate": 0.0})
}

/// Posts `snaps` to `t`'s telemetry endpoint, which must accept them.
pub async fn report(t: &TestApp, snaps: &[serde_json::Value]) {
    let (s, b) = t
        .post_json("/v1/telemetry", &json!({ "snapshots": snaps }))
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
}

/// The worker's smoothed CPU (its first report's, exactly).
pub fn cpu_of(t: &TestApp, worker: &str) -> Option<f64> {
    let slot = t.state.engine.registry().get(worker)?;
    Some(slot.view().smoothed.cpu_usage)
}

/// Reports the replica accepted from the worker.
pub fn reports_of(t: &TestApp, worker: &str) -> u64 {
    let slot = t.state.engine.registry().get(worker);
    slot.map_or(0, |s| s.view().reports)
}

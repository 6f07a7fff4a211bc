//! Telemetry agent: polls `redis-server` workers and pushes one
//! [`Snapshot`] per worker per interval to the
//! scoring service's `POST /v1/telemetry`, or, with `bus.nats_url` set, to
//! the bus's `scorer.telemetry.<worker>` subjects that every replica
//! follows ([`Sink`]).
//!
//! Each worker is polled by its own task over its own connection, every call
//! bounded by the probe timeout, so a stalled worker never delays the
//! others. Per interval (`interval_ms`):
//!
//! * `pings_per_interval` timed `PING`s started over the first
//!   `interval_ms - 2 * probe_timeout_ms`: RTT mean / p99 and error rate (a
//!   time-out is an error and an RTT sample equal to the timeout; while the
//!   server stalls, PINGs that would overrun into the `INFO` slot are skipped);
//! * one `INFO` in the last `probe_timeout_ms`: CPU, queue depth, hit rate,
//!   memory headroom, compaction and loading flags (see [`redis_info`]). If it
//!   times out (e.g. `CLIENT PAUSE`) the last known values are reported;
//! * with `digest.interval_ms > 0`, a walk of the keyspace (`SCAN` in
//!   batches, its own connection) builds a Bloom filter of the keys held
//!   at most that often; the next snapshot after a walk ends carries it as
//!   `cache_digest` (see [`digest`] for what Redis can and cannot tell);
//! * the snapshot is handed to the worker's reporter task, which posts it as
//!   a one-snapshot batch (or publishes it); a failure is logged and the
//!   snapshot dropped.
//!
//! A worker that refuses connections for a whole interval is not reported
//! (the service ages it out) and is reconnected at every PING slot.

pub mod config;
pub mod digest;
pub mod probe;
pub mod probe_window;
pub mod redis_info;
pub mod report;
pub mod sink;
mod worker;

use std::future::Future;

use scorer_core::telemetry::Snapshot;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tracing::{error, info};

pub use config::{AgentConfig, ConfigError, WorkerSpec};
pub use probe::ProbeError;
pub use report::{ReportError, Reporter};
pub use sink::Sink;

/// Snapshots buffered per worker while a POST is in flight.
const REPORT_QUEUE: usize = 2;

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The HTTP client could not be built.
    #[error("cannot build HTTP client: {0}")]
    Report(#[from] ReportError),
    /// The bus could not be reached (`bus.nats_url` set).
    #[error(transparent)]
    Bus(#[from] scorer_bus::BusError),
    /// A worker's redis client could not be built.
    #[error("worker {worker}: {source}")]
    Probe {
        /// The worker id.
        worker: String,
        /// The underlying error.
        source: ProbeError,
    },
}

/// Runs the agent until `shutdown` completes, then stops all tasks.
///
/// Fails only at start-up (invalid configuration, or a bus that cannot be
/// reached); unreachable workers and failed reports are logged and
/// retried, never fatal.
pub async fn run(cfg: AgentConfig, shutdown: impl Future<Output = ()>) -> Result<(), AgentError> {
    let url = cfg.validate()?;
    let sink = if cfg.bus.enabled() {
        Sink::Bus(Box::new(
            scorer_bus::Bus::connect_publisher(&cfg.bus, sink::BUS_NAME).await?,
        ))
    } else {
        // A POST may take at most one interval, so reports never pile up.
        Sink::Http(Reporter::new(url, cfg.interval(), &cfg.credentials)?)
    };
    let timing = worker::Timing {
        interval: cfg.interval(),
        probe_timeout: cfg.probe_timeout(),
        pings: cfg.pings_per_interval,
    };

    let mut tasks = JoinSet::new();
    for spec in &cfg.workers {
        let probe =
            probe::Probe::new(spec, cfg.probe_timeout()).map_err(|source| AgentError::Probe {
                worker: spec.id.clone(),
                source,
            })?;
        let (tx, rx) = mpsc::channel(REPORT_QUEUE);
        let digests = if cfg.digest.enabled() {
            let walker = probe::Probe::new(spec, cfg.probe_timeout()).map_err(|source| {
                AgentError::Probe {
                    worker: spec.id.clone(),
                    source,
                }
            })?;
            let (dtx, drx) = tokio::sync::watch::channel(None);
            tasks.spawn(digest::walk_loop(spec.id.clone(), walker, cfg.digest, dtx));
            Some(drx)
        } else {
            None
        };
        tasks.spawn(worker::poll_worker(
            spec.id.clone(),
            probe,
            timing,
            digests,
            tx,
        ));
        tasks.spawn(report_loop(spec.id.clone(), sink.clone(), rx));
    }
    info!(
        to = %sink.describe(),
        workers = cfg.workers.len(),
        interval_ms = cfg.interval_ms,
        "agent started"
    );

    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(done) = tasks.join_next() => {
                if let Err(e) = done {
                    error!(error = %e, "agent task ended unexpectedly");
                }
            }
        }
    }
    tasks.shutdown().await;
    info!("agent stopped");
    Ok(())
}

/// Sends each snapshot from `rx` on its own.
async fn report_loop(id: String, sink: Sink, mut rx: mpsc::Receiver<Snapshot>) {
    while let Some(snapshot) = rx.recv().await {
        sink.send(&id, snapshot).await;
    }
}

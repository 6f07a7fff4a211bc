//! The service as one replica among peers on the bus (`[bus]`): it
//! publishes what it accepts (telemetry, router load, the overrides) and
//! its own outstanding picks, and applies what the others publish, through
//! the same engine calls as its HTTP endpoints (see `scorer-bus` for the
//! subjects and the checks).
//!
//! A request never waits for the bus: what it accepted goes into a
//! bounded outbox ([`BusLink::send`]), which one task publishes; a full
//! outbox drops the message and counts it. Telemetry and load are
//! latest-value-wins, so the next report makes up for a dropped one; the
//! overrides are written whole, from the table in force when the task
//! writes them.
//!
//! The decision and outcome records take their own outbox
//! ([`records::BusSink`], the engine's sink on a replica on the bus) to the
//! `SCORER_DECISIONS` stream, and a replica that is a log writer
//! ([`log_writer`]) writes what the stream delivers to it.

mod inbound;
pub mod log_writer;
mod own_load;
pub mod records;

use std::any::Any;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use scorer_bus::{Bus, BusError, SharedOverrides};
use scorer_core::telemetry::Snapshot;
use scorer_engine::view::RouterLoad;
use scorer_log::DecisionLog;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::http::AppState;

/// What waits in the outbox.
#[derive(Debug)]
pub enum Outgoing {
    /// Snapshots the engine accepted.
    Telemetry(Vec<Snapshot>),
    /// A router's load the board accepted.
    Load(RouterLoad),
    /// The overrides changed: write the table in force.
    Overrides,
}

impl Outgoing {
    fn kind(&self) -> &'static str {
        match self {
            Self::Telemetry(_) => "telemetry",
            Self::Load(_) => "load",
            Self::Overrides => "overrides",
        }
    }
}

/// This replica's link to the bus.
#[derive(Debug)]
pub struct BusLink {
    bus: Bus,
    outbox: mpsc::Sender<Outgoing>,
    /// Monotonic ms of the last message applied from a peer, 0 before any.
    last_applied_ms: std::sync::atomic::AtomicU64,
    /// Telemetry, router load and overrides messages applied from peers
    /// so far.
    applied: watch::Sender<u64>,
    /// The peer replicas' own load, as last heard.
    peers: Mutex<scorer_engine::view::peer_load::PeerLoads>,
    /// The engine's sink when the records go to the bus.
    sink: Option<Arc<records::BusSink>>,
    /// The task publishing the records' outbox.
    records_task: Mutex<Option<JoinHandle<()>>>,
    /// The log this replica writes the stream's records to, as a writer.
    writer_log: Option<Arc<DecisionLog>>,
}

impl BusLink {
    /// Queues `msg` for publishing; a full outbox drops it (counted).
    pub fn send(&self, msg: Outgoing) {
        let kind = msg.kind();
        if self.outbox.try_send(msg).is_err() {
            self.bus.counters().dropped(kind);
        }
    }

    /// The connection.
    pub fn bus(&self) -> &Bus {
        &self.bus
    }

    /// The count of telemetry, router load and overrides messages applied
    /// from peers, to wait on (a peer's own load, sent at least every
    /// 250 ms, is counted in the metrics only).
    pub fn applied(&self) -> watch::Receiver<u64> {
        self.applied.subscribe()
    }

    /// Monotonic ms of the last message applied from a peer, 0 before any.
    pub fn last_applied_ms(&self) -> u64 {
        self.last_applied_ms
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The log this replica writes the stream's records to, when it is a
    /// log writer.
    pub fn writer_log(&self) -> Option<&Arc<DecisionLog>> {
        self.writer_log.as_ref()
    }

    /// Closes the records' outbox and waits, at most `within`, until what
    /// it held is published (at shutdown, after the requests drained).
    pub async fn drain_records(&self, within: Duration) {
        if let Some(sink) = &self.sink {
            sink.close();
        }
        let task = self
            .records_task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(task) = task
            && tokio::time::timeout(within, task).await.is_err()
        {
            tracing::warn!(
                within_ms = within.as_millis(),
                "records still in the outbox at shutdown were not all published"
            );
        }
    }
}

/// The replica's name: `bus.replica_id`, or the host name and the process
/// id.
pub fn replica_id(configured: &str) -> String {
    if !configured.is_empty() {
        return configured.to_owned();
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| {
            h.trim()
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                .take(20)
                .collect::<String>()
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "replica".to_owned());
    format!("{host}-{}", std::process::id())
}

/// Connects `state`'s engine to the bus of its `[bus]` section, starts the
/// outbox and the feeds, and returns the state with its link and the
/// tasks (abort them to leave the bus). `Ok(None)` when the bus is off.
///
/// # Errors
/// [`BusError`] when NATS cannot be reached or set up.
pub async fn start(state: AppState) -> Result<Option<(AppState, Vec<JoinHandle<()>>)>, BusError> {
    start_with_writer(state, None).await
}

/// [`start`], and with `writer`, this replica is also a log writer: it
/// writes the records the stream delivers to it into `writer`. When the
/// engine's sink is a [`records::BusSink`], its outbox is published to the
/// stream.
///
/// # Errors
/// [`BusError`] when NATS cannot be reached or set up.
pub async fn start_with_writer(
    state: AppState,
    writer: Option<Arc<DecisionLog>>,
) -> Result<Option<(AppState, Vec<JoinHandle<()>>)>, BusError> {
    let cfg = state.engine.config().bus.clone();
    if !cfg.enabled() {
        return Ok(None);
    }
    let replica = replica_id(&cfg.replica_id);
    let sink = state.engine.decision_sink().and_then(|s| {
        let any: Arc<dyn Any + Send + Sync> = s.clone();
        any.downcast::<records::BusSink>().ok()
    });
    let counters = sink
        .as_ref()
        .map_or_else(Arc::default, |s| s.counters().clone());
    let bus = Bus::connect_counting(&cfg, &replica, counters).await?;
    let records_feed = match &writer {
        Some(_) => Some(bus.log_writers_feed(cfg.log_ack_wait_ms).await?),
        None => None,
    };
    let telemetry = bus.telemetry_feed().await?;
    let load = bus.load_feed().await?;
    let overrides = bus.overrides_feed().await?;
    let replica_load = bus.replica_load_feed().await?;
    let (tx, rx) = mpsc::channel(cfg.outbox_capacity);
    let log = &state.engine.config().log;
    let all_features_below = log.sample_rate * log.candidate_features_rate;
    let records_task = sink
        .as_ref()
        .and_then(|s| s.take_outbox())
        .map(|rx| tokio::spawn(records::publish(bus.clone(), rx, all_features_below)));
    let mut tasks = Vec::new();
    if let (Some(log), Some(feed)) = (&writer, records_feed) {
        tasks.push(tokio::spawn(log_writer::write(
            bus.clone(),
            log.clone(),
            feed,
        )));
    }
    let link = Arc::new(BusLink {
        bus,
        outbox: tx,
        last_applied_ms: std::sync::atomic::AtomicU64::new(0),
        applied: watch::channel(0).0,
        peers: Mutex::default(),
        sink,
        records_task: Mutex::new(records_task),
        writer_log: writer,
    });
    let state = state.with_bus(link.clone());
    tracing::info!(replica = %replica, url = %cfg.nats_url, "on the bus");
    tasks.extend([
        tokio::spawn(publish(state.clone(), rx)),
        tokio::spawn(inbound::telemetry(state.clone(), link.clone(), telemetry)),
        tokio::spawn(inbound::load(state.clone(), link.clone(), load)),
        tokio::spawn(inbound::overrides(state.clone(), link.clone(), overrides)),
        tokio::spawn(own_load::hear(state.clone(), link.clone(), replica_load)),
        tokio::spawn(own_load::share(state.clone(), link)),
    ]);
    Ok(Some((state, tasks)))
}

/// The outbox's task.
async fn publish(st: AppState, mut rx: mpsc::Receiver<Outgoing>) {
    let Some(link) = st.bus.clone() else { return };
    while let Some(msg) = rx.recv().await {
        match msg {
            Outgoing::Telemetry(snapshots) => {
                link.bus.publish_telemetry(&snapshots).await;
            }
            Outgoing::Load(report) => link.bus.publish_load(&report).await,
            Outgoing::Overrides => {
                let table = SharedOverrides {
                    origin: link.bus.origin().to_owned(),
                    written_unix_ms: st.clock.wall_ms(),
                    config_hash: st.engine.config_hash().to_string(),
                    overrides: st.engine.overrides(st.clock.monotonic_ms()),
                };
                if let Err(e) = link.bus.put_overrides(&table).await {
                    tracing::warn!(error = %e, "overrides not shared on the bus");
                }
            }
        }
    }
}

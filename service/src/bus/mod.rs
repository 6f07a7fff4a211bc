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

mod inbound;
mod own_load;

use std::sync::Arc;

use scorer_bus::{Bus, BusError, SharedOverrides};
use scorer_core::telemetry::Snapshot;
use scorer_engine::view::RouterLoad;
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
    peers: std::sync::Mutex<scorer_engine::view::peer_load::PeerLoads>,
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
    let cfg = state.engine.config().bus.clone();
    if !cfg.enabled() {
        return Ok(None);
    }
    let replica = replica_id(&cfg.replica_id);
    let bus = Bus::connect(&cfg, &replica).await?;
    let telemetry = bus.telemetry_feed().await?;
    let load = bus.load_feed().await?;
    let overrides = bus.overrides_feed().await?;
    let replica_load = bus.replica_load_feed().await?;
    let (tx, rx) = mpsc::channel(cfg.outbox_capacity);
    let link = Arc::new(BusLink {
        bus,
        outbox: tx,
        last_applied_ms: std::sync::atomic::AtomicU64::new(0),
        applied: watch::channel(0).0,
        peers: std::sync::Mutex::default(),
    });
    let state = state.with_bus(link.clone());
    tracing::info!(replica = %replica, url = %cfg.nats_url, "on the bus");
    let tasks = vec![
        tokio::spawn(publish(state.clone(), rx)),
        tokio::spawn(inbound::telemetry(state.clone(), link.clone(), telemetry)),
        tokio::spawn(inbound::load(state.clone(), link.clone(), load)),
        tokio::spawn(inbound::overrides(state.clone(), link.clone(), overrides)),
        tokio::spawn(own_load::hear(state.clone(), link.clone(), replica_load)),
        tokio::spawn(own_load::share(state.clone(), link)),
    ];
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

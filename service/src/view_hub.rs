//! The view the service streams to the balancers in the routers
//! (`GET /v1/view`): the latest accepted report of every worker, and each
//! accepted batch as it comes.
//!
//! The telemetry endpoint publishes every accepted batch here after the
//! engine applied it. Each stream starts with a full view, sends the
//! batches as deltas coalesced over [`DEFAULT_COALESCE_MS`], a full view
//! again every [`DEFAULT_FULL_INTERVAL_MS`] and at once when it fell behind
//! (the broadcast buffer holds [`BUFFERED_BATCHES`]), and ends when the
//! service shuts down.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use scorer_core::telemetry::Snapshot;
use scorer_engine::Engine;
use scorer_engine::view::{View, ViewKind, ViewWorker};
use tokio::sync::{broadcast, watch};

/// How often a stream repeats the full view, ms.
pub const DEFAULT_FULL_INTERVAL_MS: u64 = 1_000;
/// How long a delta waits for more batches before it is sent, ms.
pub const DEFAULT_COALESCE_MS: u64 = 5;
/// Accepted batches a stream may fall behind by before it resynchronises
/// with a full view.
pub const BUFFERED_BATCHES: usize = 1_024;

/// Reports with the service's monotonic time of acceptance, ms.
pub type Published = Arc<[(Snapshot, u64)]>;

/// The latest reports and the live feed of accepted batches.
#[derive(Debug)]
pub struct ViewHub {
    latest: Mutex<HashMap<Arc<str>, (Snapshot, u64)>>,
    feed: broadcast::Sender<Published>,
    closed: watch::Sender<bool>,
}

impl Default for ViewHub {
    fn default() -> Self {
        Self {
            latest: Mutex::default(),
            feed: broadcast::channel(BUFFERED_BATCHES).0,
            closed: watch::channel(false).0,
        }
    }
}

impl ViewHub {
    /// Record `batch`, which the engine accepted at monotonic
    /// `received_ms`, and pass it to the open streams.
    pub fn publish(&self, batch: &[Snapshot], received_ms: u64) {
        let mut latest = self.latest.lock().unwrap_or_else(|e| e.into_inner());
        for s in batch {
            latest.insert(Arc::from(s.worker_id.as_str()), (s.clone(), received_ms));
        }
        drop(latest);
        if self.feed.receiver_count() > 0 {
            let items: Published = batch.iter().map(|s| (s.clone(), received_ms)).collect();
            // No receiver between the check and the send is not an error.
            let _ = self.feed.send(items);
        }
    }

    /// The full view at monotonic `now_ms`: the latest report of every
    /// worker the engine still knows (the forgotten are dropped here too).
    pub fn full(&self, engine: &Engine, now_ms: u64, seq: u64) -> View {
        let registry = engine.registry();
        let mut latest = self.latest.lock().unwrap_or_else(|e| e.into_inner());
        latest.retain(|id, _| registry.get(id).is_some());
        let mut workers: Vec<ViewWorker> = latest
            .values()
            .map(|(s, at)| worker(s, *at, now_ms))
            .collect();
        drop(latest);
        workers.sort_by(|a, b| a.snapshot.worker_id.cmp(&b.snapshot.worker_id));
        view(engine, ViewKind::Full, seq, workers)
    }

    /// A delta of `batches` at monotonic `now_ms`.
    pub fn delta(engine: &Engine, batches: &[Published], now_ms: u64, seq: u64) -> View {
        let workers = batches
            .iter()
            .flat_map(|b| b.iter())
            .map(|(s, at)| worker(s, *at, now_ms))
            .collect();
        view(engine, ViewKind::Delta, seq, workers)
    }

    /// The live feed, for one stream.
    pub fn subscribe(&self) -> broadcast::Receiver<Published> {
        self.feed.subscribe()
    }

    /// Resolves when the service shuts down.
    pub fn closed(&self) -> watch::Receiver<bool> {
        self.closed.subscribe()
    }

    /// Ends every stream (the service is shutting down: a stream that never
    /// ends would hold the graceful shutdown open).
    pub fn close(&self) {
        self.closed.send_replace(true);
    }
}

fn worker(s: &Snapshot, received_ms: u64, now_ms: u64) -> ViewWorker {
    ViewWorker {
        snapshot: s.clone(),
        age_ms: now_ms.saturating_sub(received_ms),
    }
}

fn view(engine: &Engine, kind: ViewKind, seq: u64, workers: Vec<ViewWorker>) -> View {
    let models = engine.models().current();
    View {
        kind,
        seq,
        config_hash: engine.config_hash().to_string(),
        model_version: models.primary.model().map(|m| m.card.model_version.clone()),
        workers,
        load: None,
        load_age_ms: None,
        load_routers: None,
        overrides: None,
    }
}

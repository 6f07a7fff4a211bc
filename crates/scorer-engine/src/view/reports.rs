//! The reports a view is built from: every worker's latest accepted
//! telemetry report with the monotonic time the service accepted it, and
//! the full and delta views built from them at a given time.
//!
//! Pure state: the transports (the service's server-sent events, the bus)
//! decide when to build a view (see [`super::DEFAULT_COALESCE_MS`] and
//! [`super::DEFAULT_FULL_INTERVAL_MS`]) and how to send it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use scorer_core::telemetry::Snapshot;

use super::{View, ViewKind, ViewWorker};
use crate::Engine;

/// Reports with the service's monotonic time of acceptance, ms.
pub type Published = Arc<[(Snapshot, u64)]>;

/// Every worker's latest accepted report.
#[derive(Debug, Default)]
pub struct Reports {
    latest: Mutex<HashMap<Arc<str>, (Snapshot, u64)>>,
}

impl Reports {
    /// Record `batch`, which the engine accepted at monotonic `received_ms`.
    pub fn record(&self, batch: &[Snapshot], received_ms: u64) {
        let mut latest = self.latest.lock().unwrap_or_else(|e| e.into_inner());
        for s in batch {
            latest.insert(Arc::from(s.worker_id.as_str()), (s.clone(), received_ms));
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
        routed: None,
        overrides: None,
    }
}

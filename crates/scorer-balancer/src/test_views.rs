//! Views for the balancer's tests.

use scorer_core::telemetry::Snapshot;
use scorer_engine::view::{View, ViewKind, ViewWorker};

/// Unix ms at monotonic 0.
pub(crate) const WALL: u64 = 1_750_000_000_000;

/// A full view `seq` under `config_hash`: each `(worker, cpu)` reported
/// at `WALL + seq`, age 0.
pub(crate) fn full_view(config_hash: &str, seq: u64, workers: &[(&str, f64)]) -> View {
    View {
        kind: ViewKind::Full,
        seq,
        config_hash: config_hash.to_owned(),
        model_version: None,
        workers: workers
            .iter()
            .map(|&(id, cpu)| {
                let mut s = Snapshot::new(id, WALL + seq);
                s.cpu_usage = cpu;
                ViewWorker {
                    snapshot: s,
                    age_ms: 0,
                }
            })
            .collect(),
        load: None,
        load_age_ms: None,
        load_routers: None,
        routed: None,
        overrides: None,
    }
}

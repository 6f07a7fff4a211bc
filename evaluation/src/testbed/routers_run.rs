//! The `many-routers` scenario's load: every router on its own task, over
//! its own connections to the workers, from one shared start, then the
//! workers drained and the routers' runs merged ([`many_routers::merge`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::conns::Conns;
use super::loadgen::{self, Load};
use super::many_routers::{self, Merged};
use super::picker::Picker;

/// Runs `pickers[i]` with `loads[i]` against the workers on `ports` (each
/// request holding its worker for `service_ms`), every router at once;
/// waits at most `drain_limit` for the workers to answer what is queued.
///
/// # Errors
/// A router task that panicked.
pub(super) async fn run_routers(
    pickers: Vec<Picker>,
    loads: Vec<Load>,
    ports: &[u16],
    service_ms: &[f64],
    drain_limit: Duration,
) -> Result<Merged, String> {
    let n = ports.len();
    let start = Instant::now();
    let mut conns = Vec::with_capacity(pickers.len());
    let mut tasks = Vec::with_capacity(pickers.len());
    for (picker, load) in pickers.into_iter().zip(loads) {
        let c = Arc::new(Conns::new(ports.to_vec(), Some(service_ms.to_vec())));
        conns.push(c.clone());
        tasks.push(tokio::spawn(async move {
            loadgen::run_from(Arc::new(picker), c, n, &load, start).await
        }));
    }
    let mut runs = Vec::with_capacity(tasks.len());
    for t in tasks {
        runs.push(t.await.map_err(|e| format!("a router task failed: {e}"))?);
    }
    for c in &conns {
        c.drain(drain_limit).await;
    }
    Ok(many_routers::merge(runs))
}

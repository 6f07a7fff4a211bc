//! The testbed's `drain` scenario: the operator takes worker 0 out for the
//! fault's length, as each arm's operator would. A service arm's operator
//! calls the service's admin API (`PUT /v1/admin/workers/w0/override`, a
//! drain with a TTL of the fault's length, with the admin token), and the
//! service returns the worker by itself when the TTL expires; the embedded
//! arm's routers learn it from the view stream. A baseline's endpoint leaves
//! the router's set and comes back at the fault's end, as a proxy's does on
//! a service-discovery update.

use std::time::Duration;

use serde_json::json;

use super::picker::SharedBaseline;
use crate::arms::service_ids::worker_id;

/// The testbed scenario name.
pub const DRAIN: &str = "drain";

/// How the operator drains a worker for one arm.
pub enum Drainer {
    /// A service arm: the admin API of the service at `base`.
    Service {
        /// A client that sends the admin token.
        http: reqwest::Client,
        /// Service base URL.
        base: String,
    },
    /// A baseline: its endpoint set.
    Baseline(SharedBaseline),
}

impl Drainer {
    /// Drains `worker` for `len`, starting `at_ms` into the load (the
    /// load's clock, which a baseline's estimates run on); returns when the
    /// drain is over.
    ///
    /// # Errors
    /// The service refused the override (the error names its status and
    /// body).
    pub async fn run(&self, worker: usize, len: Duration, at_ms: f64) -> Result<(), String> {
        let len_ms = u64::try_from(len.as_millis()).unwrap_or(u64::MAX).max(1);
        match self {
            Self::Service { http, base } => {
                let url = format!("{base}/v1/admin/workers/{}/override", worker_id(worker));
                let body =
                    json!({"kind": "drain", "ttl_ms": len_ms, "reason": "testbed: drain scenario"});
                let resp = http
                    .put(&url)
                    .json(&body)
                    .send()
                    .await
                    .map_err(|e| format!("PUT {url}: {e}"))?;
                let status = resp.status();
                if !status.is_success() {
                    let text = resp.text().await.unwrap_or_default();
                    return Err(format!("PUT {url}: {status}: {text}"));
                }
                tokio::time::sleep(len).await;
            }
            Self::Baseline(router) => {
                set(router, worker, true, at_ms);
                tokio::time::sleep(len).await;
                set(router, worker, false, at_ms + len_ms as f64);
            }
        }
        Ok(())
    }
}

fn set(router: &SharedBaseline, worker: usize, drained: bool, now_ms: f64) {
    let mut g = router
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    g.0.drain(worker, drained, now_ms);
}

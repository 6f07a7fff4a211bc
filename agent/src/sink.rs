//! Where the snapshots go: the service's `POST /v1/telemetry`, or, with
//! `bus.nats_url` set, the bus's `scorer.telemetry.<worker>` subjects,
//! which every scorer replica follows.

use scorer_core::telemetry::{Snapshot, TelemetryBatch};
use tracing::{debug, warn};

use crate::report::Reporter;

/// The agent's name on the bus; its messages' origin is
/// `agent/<instance>`, which no replica takes for its own.
pub const BUS_NAME: &str = "agent";

/// Where one worker's snapshots are sent.
#[derive(Debug, Clone)]
pub enum Sink {
    /// Posted to the service, one snapshot a batch.
    Http(Reporter),
    /// Published on the bus, one snapshot a message. The replicas check
    /// and count what they refuse; the stream keeps each worker's latest.
    Bus(Box<scorer_bus::Bus>),
}

impl Sink {
    /// Where the snapshots go, for the start-up line.
    pub fn describe(&self) -> String {
        match self {
            Self::Http(r) => r.url().to_string(),
            Self::Bus(b) => format!("the bus, as {}", b.origin()),
        }
    }

    /// Sends `snapshot` of worker `id`; a failure is logged, and the next
    /// interval's snapshot replaces it.
    pub async fn send(&self, id: &str, snapshot: Snapshot) {
        match self {
            Self::Http(reporter) => {
                let batch = TelemetryBatch {
                    snapshots: vec![snapshot],
                };
                match reporter.post(&batch).await {
                    Ok(accepted) => debug!(worker = %id, ?accepted, "telemetry posted"),
                    Err(e) => warn!(worker = %id, error = %e, "telemetry POST failed"),
                }
            }
            Self::Bus(bus) => {
                if bus.publish_telemetry(std::slice::from_ref(&snapshot)).await == 0 {
                    warn!(worker = %id, connected = bus.connected(), "telemetry not published on the bus");
                } else {
                    debug!(worker = %id, "telemetry published");
                }
            }
        }
    }
}

//! Worker reports on `scorer.telemetry.<worker>`: one snapshot per
//! message, every worker's latest kept in the telemetry stream.

use async_nats::jetstream::consumer::DeliverPolicy;
use async_nats::jetstream::consumer::push::{Ordered, OrderedConfig};
use futures_util::StreamExt;
use scorer_core::telemetry::Snapshot;

use crate::counters::Refusal;
use crate::subject::{self, TELEMETRY_PREFIX, TELEMETRY_STREAM};
use crate::{Bus, BusError, Received};

const KIND: &str = "telemetry";

impl Bus {
    /// Publishes each of `snapshots`, which this replica accepted, on its
    /// worker's subject. A snapshot that cannot be published (the
    /// connection's buffer is full) is counted as dropped: the worker's
    /// next report replaces it. Returns how many were handed to the
    /// connection.
    pub async fn publish_telemetry(&self, snapshots: &[Snapshot]) -> usize {
        let mut published = 0;
        for s in snapshots {
            if self
                .publish_json(KIND, subject::telemetry(&s.worker_id), s)
                .await
            {
                published += 1;
            }
        }
        published
    }

    /// Every worker's latest report, then each new one as it is published.
    ///
    /// # Errors
    /// [`BusError::Setup`] when the consumer cannot be created.
    pub async fn telemetry_feed(&self) -> Result<TelemetryFeed, BusError> {
        let setup = |e: &dyn std::fmt::Display| BusError::Setup {
            what: "the telemetry consumer",
            reason: e.to_string(),
        };
        let stream = self
            .js
            .get_stream(TELEMETRY_STREAM)
            .await
            .map_err(|e| setup(&e))?;
        let consumer = stream
            .create_consumer(OrderedConfig {
                deliver_subject: self.client.new_inbox(),
                filter_subject: format!("{TELEMETRY_PREFIX}.>"),
                deliver_policy: DeliverPolicy::LastPerSubject,
                ..OrderedConfig::default()
            })
            .await
            .map_err(|e| setup(&e))?;
        let messages = consumer.messages().await.map_err(|e| setup(&e))?;
        Ok(TelemetryFeed {
            bus: self.clone(),
            messages,
        })
    }
}

/// The peers' worker reports, checked.
pub struct TelemetryFeed {
    bus: Bus,
    messages: Ordered,
}

impl TelemetryFeed {
    /// The next report a peer published, skipping this replica's own and
    /// the refused ones (counted); `None` when the feed ended.
    pub async fn next(&mut self) -> Option<Received<Snapshot>> {
        loop {
            let m = match self.messages.next().await? {
                Ok(m) => m,
                Err(e) => {
                    tracing::debug!(error = %e, "telemetry feed interrupted; it resumes by itself");
                    continue;
                }
            };
            let Some(origin) = self.bus.peer_origin(m.headers.as_ref()) else {
                continue;
            };
            if !self.bus.fits(KIND, m.payload.len()) {
                continue;
            }
            let Some(worker) = subject::id_under(TELEMETRY_PREFIX, &m.subject) else {
                self.bus.counters.refused(KIND, Refusal::Subject);
                continue;
            };
            let Some(snapshot) = self.bus.parse::<Snapshot>(KIND, &m.payload) else {
                continue;
            };
            if snapshot.worker_id != worker {
                self.bus.counters.refused(KIND, Refusal::Subject);
                continue;
            }
            return Some(Received {
                origin,
                value: snapshot,
            });
        }
    }
}

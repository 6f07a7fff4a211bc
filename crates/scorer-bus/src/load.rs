//! Load on the bus, as absolute outstanding gauges in the JSON of
//! `POST /v1/router/load` (core NATS only: a gauge older than a second no
//! longer counts, so nothing of it needs to survive):
//!
//! - a router's, on `scorer.load.<router>`, published by the router or by
//!   the replica it reported to;
//! - a replica's own (the picks it made for its HTTP callers), on
//!   `scorer.replica_load.<replica>`, which its peers add to the backlog
//!   they did not send.

use async_nats::Subscriber;
use futures_util::StreamExt;
use scorer_engine::view::RouterLoad;

use crate::counters::Refusal;
use crate::subject::{self, LOAD_PREFIX, REPLICA_LOAD_PREFIX};
use crate::{Bus, BusError, Received};

const KIND: &str = "load";
const REPLICA_KIND: &str = "replica_load";

impl Bus {
    /// Publishes `report`, which this replica accepted from a router.
    pub async fn publish_load(&self, report: &RouterLoad) {
        self.publish_json(KIND, subject::load(&report.router_id), report)
            .await;
    }

    /// Publishes this replica's own outstanding picks (`report.router_id`
    /// is the replica's name).
    pub async fn publish_replica_load(&self, report: &RouterLoad) {
        self.publish_json(
            REPLICA_KIND,
            subject::replica_load(&report.router_id),
            report,
        )
        .await;
    }

    /// Every router's gauges as they are published.
    ///
    /// # Errors
    /// [`BusError::Setup`] when the subscription cannot be made.
    pub async fn load_feed(&self) -> Result<LoadFeed, BusError> {
        self.gauge_feed(LOAD_PREFIX, KIND).await
    }

    /// Every peer replica's own gauges as they are published.
    ///
    /// # Errors
    /// [`BusError::Setup`] when the subscription cannot be made.
    pub async fn replica_load_feed(&self) -> Result<LoadFeed, BusError> {
        self.gauge_feed(REPLICA_LOAD_PREFIX, REPLICA_KIND).await
    }

    async fn gauge_feed(
        &self,
        prefix: &'static str,
        kind: &'static str,
    ) -> Result<LoadFeed, BusError> {
        let sub = self
            .client
            .subscribe(format!("{prefix}.*"))
            .await
            .map_err(|e| BusError::Setup {
                what: "a load subscription",
                reason: e.to_string(),
            })?;
        Ok(LoadFeed {
            bus: self.clone(),
            sub,
            prefix,
            kind,
        })
    }
}

/// Gauges from the bus, checked.
pub struct LoadFeed {
    bus: Bus,
    sub: Subscriber,
    prefix: &'static str,
    kind: &'static str,
}

impl LoadFeed {
    /// The next report a router or a peer published, skipping this
    /// replica's own and the refused ones (counted); `None` when the
    /// subscription ended.
    pub async fn next(&mut self) -> Option<Received<RouterLoad>> {
        let kind = self.kind;
        loop {
            let m = self.sub.next().await?;
            let Some(origin) = self.bus.peer_origin(m.headers.as_ref()) else {
                continue;
            };
            if !self.bus.fits(kind, m.payload.len()) {
                continue;
            }
            let Some(router) = subject::id_under(self.prefix, &m.subject) else {
                self.bus.counters.refused(kind, Refusal::Subject);
                continue;
            };
            let Some(report) = self.bus.parse::<RouterLoad>(kind, &m.payload) else {
                continue;
            };
            if report.router_id != router {
                self.bus.counters.refused(kind, Refusal::Subject);
                continue;
            }
            return Some(Received {
                origin,
                value: report,
            });
        }
    }
}

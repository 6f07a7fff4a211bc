//! Router load on `scorer.load.<router>`: absolute outstanding gauges, as
//! `POST /v1/router/load` takes them. Core NATS only: a gauge older than
//! a second no longer counts, so nothing of it needs to survive.

use async_nats::Subscriber;
use futures_util::StreamExt;
use scorer_engine::view::RouterLoad;

use crate::counters::Refusal;
use crate::subject::{self, LOAD_PREFIX};
use crate::{Bus, BusError, Received};

const KIND: &str = "load";

impl Bus {
    /// Publishes `report`, which this replica accepted from a router.
    pub async fn publish_load(&self, report: &RouterLoad) {
        self.publish_json(KIND, subject::load(&report.router_id), report)
            .await;
    }

    /// Every router's gauges as they are published.
    ///
    /// # Errors
    /// [`BusError::Setup`] when the subscription cannot be made.
    pub async fn load_feed(&self) -> Result<LoadFeed, BusError> {
        let sub = self
            .client
            .subscribe(format!("{LOAD_PREFIX}.*"))
            .await
            .map_err(|e| BusError::Setup {
                what: "the load subscription",
                reason: e.to_string(),
            })?;
        Ok(LoadFeed {
            bus: self.clone(),
            sub,
        })
    }
}

/// The routers' gauges, checked.
pub struct LoadFeed {
    bus: Bus,
    sub: Subscriber,
}

impl LoadFeed {
    /// The next report a router or a peer published, skipping this
    /// replica's own and the refused ones (counted); `None` when the
    /// subscription ended.
    pub async fn next(&mut self) -> Option<Received<RouterLoad>> {
        loop {
            let m = self.sub.next().await?;
            let Some(origin) = self.bus.peer_origin(m.headers.as_ref()) else {
                continue;
            };
            if !self.bus.fits(KIND, m.payload.len()) {
                continue;
            }
            let Some(router) = subject::id_under(LOAD_PREFIX, &m.subject) else {
                self.bus.counters.refused(KIND, Refusal::Subject);
                continue;
            };
            let Some(report) = self.bus.parse::<RouterLoad>(KIND, &m.payload) else {
                continue;
            };
            if report.router_id != router {
                self.bus.counters.refused(KIND, Refusal::Subject);
                continue;
            }
            return Some(Received {
                origin,
                value: report,
            });
        }
    }
}

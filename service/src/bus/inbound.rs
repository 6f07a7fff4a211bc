//! Applying what the peers publish, through the engine calls the HTTP
//! endpoints make; what the engine refuses is counted, never applied.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use scorer_bus::{LoadFeed, OverridesFeed, Refusal, TelemetryFeed};
use scorer_engine::overrides::{WorkerOverride, from_view};

use super::BusLink;
use crate::http::AppState;
use crate::http::endpoints::router_load::put_load;

/// Each peer's worker reports, ingested and passed to this replica's view
/// streams as if they had been posted here.
pub(super) async fn telemetry(st: AppState, link: Arc<BusLink>, mut feed: TelemetryFeed) {
    while let Some(r) = feed.next().await {
        let now_ms = st.clock.monotonic_ms();
        let batch = [r.value];
        match st.engine.ingest(&batch, now_ms, st.clock.wall_ms()) {
            Ok(out) => {
                st.metrics.snapshots_accepted(out.accepted);
                st.view_hub.publish(&batch, now_ms);
                applied(&link, "telemetry", now_ms);
            }
            Err(e) => {
                link.bus().counters().refused("telemetry", Refusal::Invalid);
                tracing::debug!(origin = %r.origin, error = %e, "telemetry from the bus refused");
            }
        }
    }
}

/// Each router's gauges, onto this replica's load board.
pub(super) async fn load(st: AppState, link: Arc<BusLink>, mut feed: LoadFeed) {
    while let Some(r) = feed.next().await {
        let now_ms = st.clock.monotonic_ms();
        match put_load(&st, r.value, None, now_ms) {
            Ok(_) => applied(&link, "load", now_ms),
            Err(e) => {
                link.bus().counters().refused("load", Refusal::Invalid);
                tracing::debug!(origin = %r.origin, error = %e, "router load from the bus refused");
            }
        }
    }
}

/// The overrides a peer wrote, aged by the time since, in place of this
/// replica's.
pub(super) async fn overrides(st: AppState, link: Arc<BusLink>, mut feed: OverridesFeed) {
    while let Some(r) = feed.next().await {
        let since_ms = st.clock.wall_ms().saturating_sub(r.value.written_unix_ms);
        let aged: Vec<WorkerOverride> = r
            .value
            .overrides
            .into_iter()
            .filter_map(|mut o| {
                o.age_ms = o.age_ms.saturating_add(since_ms);
                match o.remaining_ms {
                    Some(left) if left <= since_ms => None,
                    Some(left) => {
                        o.remaining_ms = Some(left - since_ms);
                        Some(o)
                    }
                    None => Some(o),
                }
            })
            .collect();
        let now_ms = st.clock.monotonic_ms();
        match from_view(&aged, now_ms) {
            Ok(table) => {
                st.engine.replace_overrides(table);
                applied(&link, "overrides", now_ms);
                tracing::warn!(origin = %r.origin, count = aged.len(), "worker overrides taken from a peer");
            }
            Err(e) => {
                link.bus().counters().refused("overrides", Refusal::Invalid);
                tracing::warn!(origin = %r.origin, error = %e, "overrides from the bus refused");
            }
        }
    }
}

fn applied(link: &BusLink, kind: &str, now_ms: u64) {
    heard(link, kind, now_ms);
    link.applied.send_modify(|n| *n += 1);
}

/// Counts a message of `kind` applied at `now_ms`, without waking the
/// waiters on [`BusLink::applied`].
pub(super) fn heard(link: &BusLink, kind: &str, now_ms: u64) {
    link.bus().counters().applied(kind);
    link.last_applied_ms.store(now_ms.max(1), Ordering::Relaxed);
}

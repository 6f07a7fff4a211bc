//! This replica's own outstanding picks (those of the decisions it made
//! for its HTTP callers) shared with its peers, and theirs kept in its
//! engine, so that replicas deciding on one pool count each other's picks
//! as an embedded balancer counts the other routers'.
//!
//! Every [`LOAD_INTERVAL_MS`] the replica compares its load with its last
//! report ([`LoadSchedule`]) and publishes it, with the keys it routed
//! since, on `scorer.replica_load.<replica>`; the peers' reports older
//! than a second stop counting ([`PeerLoads::expire`]).

use std::sync::Arc;
use std::time::Duration;

use scorer_bus::{LoadFeed, Refusal};
use scorer_engine::view::peer_load::{LoadSchedule, PeerLoads, outstanding_of};
use scorer_engine::view::{LOAD_INTERVAL_MS, MAX_VIEW_AGE_MS, RouterLoad};

use super::BusLink;
use super::inbound::heard;
use crate::http::AppState;
use crate::http::endpoints::router_load::put_load;

const KIND: &str = "replica_load";

/// Publishes this replica's load on its schedule, and forgets the peers
/// gone silent.
pub(super) async fn share(st: AppState, link: Arc<BusLink>) {
    let mut tick = tokio::time::interval(Duration::from_millis(LOAD_INTERVAL_MS));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut schedule = LoadSchedule::default();
    loop {
        tick.tick().await;
        let now_ms = st.clock.monotonic_ms();
        {
            let mut peers = lock(&link);
            if peers.expire(now_ms) {
                peers.apply(&st.engine, now_ms);
            }
        }
        let outstanding = outstanding_of(st.engine.registry());
        let routed = st.engine.take_routed(now_ms);
        if !schedule.due(&outstanding, &routed, now_ms) {
            continue;
        }
        let report = RouterLoad {
            router_id: link.bus().replica().to_owned(),
            outstanding,
            routed,
        };
        link.bus().publish_replica_load(&report).await;
        schedule.sent(report.outstanding, now_ms);
    }
}

/// Each peer's own load: onto this replica's load board (so the routers
/// following it see it), into its engine as backlog it did not send, and
/// the keys the peer routed into its routing index.
pub(super) async fn hear(st: AppState, link: Arc<BusLink>, mut feed: LoadFeed) {
    while let Some(r) = feed.next().await {
        let now_ms = st.clock.monotonic_ms();
        let report = r.value;
        let (replica, outstanding) = (report.router_id.clone(), report.outstanding.clone());
        let routed = report.routed.clone();
        if let Err(e) = put_load(&st, report, None, now_ms) {
            link.bus().counters().refused(KIND, Refusal::Invalid);
            tracing::debug!(origin = %r.origin, error = %e, "replica load from the bus refused");
            continue;
        }
        for k in &routed {
            if let Some(hash) = k.hash() {
                let at_ms = now_ms.saturating_sub(k.age_ms.min(MAX_VIEW_AGE_MS));
                st.engine.learn_routing(hash, &k.worker_id, at_ms);
            }
        }
        {
            let mut peers = lock(&link);
            peers.hear(&replica, outstanding, now_ms);
            peers.apply(&st.engine, now_ms);
        }
        heard(&link, KIND, now_ms);
    }
}

fn lock(link: &BusLink) -> std::sync::MutexGuard<'_, PeerLoads> {
    link.peers
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

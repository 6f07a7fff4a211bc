//! Reporting this router's load to the service (`POST /v1/router/load`,
//! feature `http`), so that the other routers see it in their view.
//!
//! Every [`DEFAULT_LOAD_REPORT_MS`] the router's outstanding picks are
//! compared with the last report; a change is sent at once, and the same
//! load again after [`HEARTBEAT_MS`] so that the service keeps counting the
//! router (it forgets one silent for a second). One report is in flight at
//! a time, each bounded by [`REPORT_TIMEOUT_MS`]; a failed one is counted
//! and the next tick tries again. Picks never wait for it.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use scorer_engine::view::RouterLoad;
use scorer_engine::view::peer_load::{LOAD_HEARTBEAT_MS, LoadSchedule};

use crate::follow::FollowConfig;
use crate::stats::Counters;
use crate::{Balancer, DEFAULT_LOAD_REPORT_MS};

/// The longest a router's unchanged load goes unreported, ms.
pub const HEARTBEAT_MS: u64 = LOAD_HEARTBEAT_MS;
/// The longest one report may take, ms.
pub const REPORT_TIMEOUT_MS: u64 = 200;

/// Report `balancer`'s load to the service in `cfg` with `http` until
/// `stop` resolves.
pub async fn report_load(
    balancer: Arc<Balancer>,
    http: reqwest::Client,
    cfg: FollowConfig,
    stop: impl Future<Output = ()> + Send,
) {
    let url = format!("{}/v1/router/load", cfg.base_url.trim_end_matches('/'));
    let mut tick = tokio::time::interval(Duration::from_millis(DEFAULT_LOAD_REPORT_MS));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut schedule = LoadSchedule::default();
    let start = Instant::now();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => return,
            _ = tick.tick() => {}
        }
        let outstanding = balancer.outstanding();
        let routed = balancer.routed();
        let now_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
        if !schedule.due(&outstanding, &routed, now_ms) {
            continue;
        }
        let body = RouterLoad {
            router_id: balancer.config().router_id.clone(),
            outstanding,
            routed,
        };
        let mut req = http
            .post(&url)
            .json(&body)
            .timeout(Duration::from_millis(REPORT_TIMEOUT_MS));
        if let Some(token) = &cfg.token {
            req = req.bearer_auth(token);
        }
        let sent = tokio::select! {
            () = &mut stop => return,
            r = req.send() => r.and_then(|r| r.error_for_status()).is_ok(),
        };
        if sent {
            Counters::bump(&balancer.counters.load_reports);
            let now_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
            schedule.sent(body.outstanding, now_ms);
        } else {
            Counters::bump(&balancer.counters.load_reports_failed);
        }
    }
}

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;

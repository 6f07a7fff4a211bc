//! Sending the router's decisions and outcomes to the service's decision
//! log (`POST /v1/router/decisions`, feature `http`).
//!
//! Every [`RECORD_REPORT_MS`] the reporter takes up to [`MAX_BATCH`] records
//! from the balancer's [`RecordBuffer`](crate::records::RecordBuffer) and
//! sends them in one request, bounded by [`RECORD_POST_TIMEOUT_MS`]. A batch
//! that fails is kept and sent again after a backoff (doubling from
//! [`RETRY_MIN_MS`] to [`RETRY_MAX_MS`]); meanwhile new records wait in the
//! buffer, and once it is full they are dropped and counted. One batch is
//! in flight at a time. A record the service refuses as invalid, or a batch
//! it refuses whole with a 4xx (other than 408 and 429), is counted as
//! refused and not sent again. Picks never wait for any of it.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use scorer_engine::router_records::{MAX_ROUTER_BATCH, RouterRecords};

use crate::Balancer;
use crate::follow::FollowConfig;

/// How often the buffer is drained, ms.
pub const RECORD_REPORT_MS: u64 = 5;
/// Most records in one request.
pub const MAX_BATCH: usize = 64;
/// The longest one request may take, ms.
pub const RECORD_POST_TIMEOUT_MS: u64 = 1_000;
/// First wait after a failed batch, ms.
pub const RETRY_MIN_MS: u64 = 50;
/// Longest wait after failed batches, ms.
pub const RETRY_MAX_MS: u64 = 2_000;

const _: () = assert!(MAX_BATCH <= MAX_ROUTER_BATCH);

#[derive(serde::Deserialize)]
struct Counts {
    refused: u64,
}

#[derive(serde::Deserialize)]
struct Answer {
    decisions: Counts,
    outcomes: Counts,
}

enum Sent {
    Answered(Answer),
    /// A 4xx other than 408 and 429: sending the batch again cannot help.
    Refused(reqwest::StatusCode),
    Failed(reqwest::Error),
}

async fn send(req: reqwest::RequestBuilder) -> Sent {
    let r = match req.send().await {
        Ok(r) => r,
        Err(e) => return Sent::Failed(e),
    };
    let status = r.status();
    let retryable = matches!(status.as_u16(), 408 | 429);
    if status.is_client_error() && !retryable {
        return Sent::Refused(status);
    }
    match r.error_for_status() {
        Ok(r) => r
            .json::<Answer>()
            .await
            .map_or_else(Sent::Failed, Sent::Answered),
        Err(e) => Sent::Failed(e),
    }
}

/// Send `balancer`'s records to the service in `cfg` with `http` until
/// `stop` resolves; returns at once when the balancer has no
/// [`RecordBuffer`](crate::records::RecordBuffer).
pub async fn report_records(
    balancer: Arc<Balancer>,
    http: reqwest::Client,
    cfg: FollowConfig,
    stop: impl Future<Output = ()> + Send,
) {
    let Some(records) = balancer.records().cloned() else {
        return;
    };
    let url = format!("{}/v1/router/decisions", cfg.base_url.trim_end_matches('/'));
    let router_id = balancer.config().router_id.clone();
    let mut tick = tokio::time::interval(Duration::from_millis(RECORD_REPORT_MS));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut pending: Option<RouterRecords> = None;
    let mut retry_ms = RETRY_MIN_MS;
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => return,
            _ = tick.tick() => {}
        }
        let Some(batch) = pending
            .take()
            .or_else(|| records.drain(&router_id, MAX_BATCH))
        else {
            continue;
        };
        let n = (batch.decisions.len() + batch.outcomes.len()) as u64;
        let mut req = http
            .post(&url)
            .json(&batch)
            .timeout(Duration::from_millis(RECORD_POST_TIMEOUT_MS));
        if let Some(token) = &cfg.token {
            req = req.bearer_auth(token);
        }
        let answer = tokio::select! {
            () = &mut stop => return,
            r = send(req) => r,
        };
        match answer {
            Sent::Refused(status) => {
                records.refused.fetch_add(n, Ordering::Relaxed);
                tracing::warn!(%status, records = n, "router records refused whole by the service; dropped");
                retry_ms = RETRY_MIN_MS;
            }
            Sent::Answered(a) => {
                let refused = a.decisions.refused + a.outcomes.refused;
                records.refused.fetch_add(refused, Ordering::Relaxed);
                records
                    .sent
                    .fetch_add(n.saturating_sub(refused), Ordering::Relaxed);
                retry_ms = RETRY_MIN_MS;
            }
            Sent::Failed(e) => {
                records.posts_failed.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(error = %e, records = n, retry_ms, "router records not sent");
                pending = Some(batch);
                tokio::select! {
                    () = &mut stop => return,
                    () = tokio::time::sleep(Duration::from_millis(retry_ms)) => {}
                }
                retry_ms = (retry_ms * 2).min(RETRY_MAX_MS);
            }
        }
    }
}

#[cfg(test)]
#[path = "report_records_tests.rs"]
mod tests;

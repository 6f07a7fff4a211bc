//! Following the service's view stream (`GET /v1/view`) over HTTP and
//! applying every event to a [`Balancer`] (feature `http`).
//!
//! The stream is server-sent events, parsed by `eventsource-stream`. A
//! dropped or refused connection is retried after an exponential backoff
//! with full jitter ([`backoff_ms`]); the first event of every connection
//! is a full view, so nothing else is needed to catch up. An event that is
//! not a `View` is refused (counted in `views_refused`) and the stream goes
//! on. One event may hold at most [`MAX_EVENT_BYTES`]: a stream that sends
//! more without ending an event is dropped, so a faulty service cannot grow
//! the router's memory.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use rand::Rng;
use scorer_core::clock::Clock;
use scorer_engine::view::View;

use crate::Balancer;
use crate::stats::Counters;

/// Default [`FollowConfig::backoff_base_ms`].
pub const DEFAULT_BACKOFF_BASE_MS: u64 = 100;
/// Default [`FollowConfig::backoff_max_ms`].
pub const DEFAULT_BACKOFF_MAX_MS: u64 = 5_000;
/// Most bytes of one event (a full view of 100 000 workers at about
/// 400 bytes each, with room).
pub const MAX_EVENT_BYTES: usize = 64 << 20;

/// Where and how to follow the view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowConfig {
    /// The service's base URL, e.g. `http://127.0.0.1:8080`.
    pub base_url: String,
    /// A router-role bearer token, when the service requires one.
    pub token: Option<String>,
    /// First reconnection delay bound, ms; doubles per failed attempt.
    pub backoff_base_ms: u64,
    /// Largest reconnection delay bound, ms.
    pub backoff_max_ms: u64,
}

impl FollowConfig {
    /// Defaults for the service at `base_url`.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            token: None,
            backoff_base_ms: DEFAULT_BACKOFF_BASE_MS,
            backoff_max_ms: DEFAULT_BACKOFF_MAX_MS,
        }
    }
}

/// What the follower saw, for the router's logs and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowEvent {
    /// A stream opened.
    Connected,
    /// A view event was applied (its `seq`).
    Applied(u64),
    /// A view event was refused whole (why).
    Refused(String),
    /// The stream ended or could not open (why); the next attempt waits
    /// `retry_in_ms`.
    Disconnected {
        /// What happened.
        reason: String,
        /// The jittered delay before the next attempt, ms.
        retry_in_ms: u64,
    },
}

/// The delay before reconnection attempt `attempt` (0 for the first after
/// a success): uniform in `[0, min(max_ms, base_ms × 2^attempt)]`, drawn
/// with `u` in `[0, 1)` ("full jitter": routers that lost the service
/// together do not come back together).
pub fn backoff_ms(attempt: u32, base_ms: u64, max_ms: u64, u: f64) -> u64 {
    let bound = base_ms.saturating_mul(1u64 << attempt.min(32)).min(max_ms);
    (u.clamp(0.0, 1.0) * bound as f64) as u64
}

/// Follow the view of the service in `cfg` with `http` until `stop`
/// resolves, applying each event to `balancer` at `clock`'s time and
/// telling `observe` what happened. Never returns an error: a router keeps
/// picking on what it has while the service is away.
pub async fn follow_view(
    balancer: Arc<Balancer>,
    http: reqwest::Client,
    cfg: FollowConfig,
    clock: Arc<dyn Clock>,
    mut observe: impl FnMut(FollowEvent) + Send,
    stop: impl Future<Output = ()> + Send,
) {
    let url = format!(
        "{}/v1/view?router_id={}",
        cfg.base_url.trim_end_matches('/'),
        balancer.config().router_id
    );
    let mut attempt = 0u32;
    tokio::pin!(stop);
    loop {
        let session = follow_once(&balancer, &http, &url, &cfg, &*clock, &mut observe);
        let (reason, applied) = tokio::select! {
            () = &mut stop => return,
            r = session => r,
        };
        if applied {
            attempt = 0;
        }
        let u: f64 = rand::rng().random();
        let retry_in_ms = backoff_ms(attempt, cfg.backoff_base_ms, cfg.backoff_max_ms, u);
        attempt = attempt.saturating_add(1);
        Counters::bump(&balancer.counters.stream_disconnects);
        observe(FollowEvent::Disconnected {
            reason,
            retry_in_ms,
        });
        tokio::select! {
            () = &mut stop => return,
            () = tokio::time::sleep(Duration::from_millis(retry_in_ms)) => {}
        }
    }
}

/// One connection: why it ended, and whether it applied any view.
async fn follow_once(
    balancer: &Balancer,
    http: &reqwest::Client,
    url: &str,
    cfg: &FollowConfig,
    clock: &dyn Clock,
    observe: &mut (impl FnMut(FollowEvent) + Send),
) -> (String, bool) {
    let mut req = http.get(url);
    if let Some(token) = &cfg.token {
        req = req.bearer_auth(token);
    }
    let resp = match req.send().await.and_then(|r| r.error_for_status()) {
        Ok(r) => r,
        Err(e) => return (format!("connect: {e}"), false),
    };
    Counters::bump(&balancer.counters.stream_connects);
    observe(FollowEvent::Connected);
    let over = std::sync::atomic::AtomicBool::new(false);
    let bytes = resp.bytes_stream().scan(0usize, |pending, chunk| {
        if let Ok(c) = &chunk {
            // Bytes since the last blank line: an event that never ends is cut.
            *pending = match last_blank_line(c) {
                Some(end) => c.len() - end,
                None => *pending + c.len(),
            };
            over.store(*pending > MAX_EVENT_BYTES, Relaxed);
        }
        std::future::ready((!over.load(Relaxed)).then_some(chunk))
    });
    let mut events = Box::pin(bytes.eventsource());
    let mut applied = false;
    while let Some(ev) = events.next().await {
        let ev = match ev {
            Ok(ev) => ev,
            Err(e) => return (format!("stream: {e}"), applied),
        };
        if ev.event != "view" {
            continue;
        }
        let outcome = serde_json::from_str::<View>(&ev.data)
            .map_err(|e| format!("not a view: {e}"))
            .and_then(|v| {
                balancer
                    .apply_view(&v, clock.monotonic_ms(), clock.wall_ms())
                    .map(|_| v.seq)
                    .map_err(|e| e.to_string())
            });
        match outcome {
            Ok(seq) => {
                applied = true;
                observe(FollowEvent::Applied(seq));
            }
            Err(why) => {
                if why.starts_with("not a view") {
                    Counters::bump(&balancer.counters.views_refused);
                    tracing::warn!(error = %why, "view refused");
                }
                observe(FollowEvent::Refused(why));
            }
        }
    }
    let reason = if over.load(Relaxed) {
        format!("an event longer than {MAX_EVENT_BYTES} bytes")
    } else {
        "the stream ended".to_owned()
    };
    (reason, applied)
}

/// The offset just past the last blank line (`\n\n`) in `chunk`, if any.
fn last_blank_line(chunk: &[u8]) -> Option<usize> {
    chunk.windows(2).rposition(|w| w == b"\n\n").map(|i| i + 2)
}

#[cfg(test)]
#[path = "follow_tests.rs"]
mod tests;

//! Admission of long-lived streams (`GET /v1/view`): at most
//! `limits.view_streams_per_credential` per credential, and at most
//! `limits.view_streams_max` and the long-lived share of
//! `server.max_connections` in all (as NGINX's `limit_conn` keyed on the
//! credential, and HAProxy's `maxconn`). A stream holds a [`StreamPermit`]
//! for as long as it is open; dropping it frees its place.
//!
//! Refusals are counted by role, credential name and limit
//! (`scorer_limit_refusals_total`), never by token; open streams are a
//! gauge (`scorer_view_streams`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use scorer_engine::config::limits::LimitsConfig;

use crate::http::warn_limit::WarnLimit;

/// The credential name a stream is counted under when the role is open
/// and the peer address is unknown; also the metric label of every
/// stream without a credential (addresses would make the label unbounded).
pub const ANONYMOUS: &str = "anonymous";

/// Seconds a client refused for too many streams is asked to wait.
pub const STREAM_RETRY_AFTER_S: u64 = 5;

/// Which limit refused a stream, named as its configuration key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamLimit {
    /// `limits.view_streams_per_credential`.
    PerCredential,
    /// `limits.view_streams_max`.
    Total,
    /// `limits.reserved_connections_share`: streams already hold their
    /// share of `server.max_connections`.
    ReservedConnections,
}

impl StreamLimit {
    /// Its configuration key under `[limits]`, the metric's `limit` label.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::PerCredential => "view_streams_per_credential",
            Self::Total => "view_streams_max",
            Self::ReservedConnections => "reserved_connections_share",
        }
    }
}

/// Who asks for a stream.
#[derive(Debug, Clone)]
pub struct StreamOwner {
    /// What it is counted under: the credential's name, or the peer's
    /// address when the role is open.
    pub key: Arc<str>,
    /// Its metric label: the credential's name, or [`ANONYMOUS`].
    pub label: Arc<str>,
    /// The role of the route, a metric label.
    pub role: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusalLabels {
    role: &'static str,
    credential: String,
    limit: &'static str,
}

#[derive(Debug, Default)]
struct Open {
    by_key: HashMap<Arc<str>, usize>,
    total: usize,
}

/// Open view streams and their refusals.
#[derive(Debug, Default)]
pub struct StreamLimiter {
    open: Mutex<Open>,
    open_now: tokio::sync::watch::Sender<usize>,
    gauge: Gauge,
    refusals: Family<RefusalLabels, Counter>,
    cutoffs: Counter,
    queued: Gauge,
    /// Rate limit of the refused-stream warning.
    pub warn: WarnLimit,
    /// Rate limit of the cut-off-stream warning.
    pub cut_warn: WarnLimit,
}

/// A place among the open streams, freed on drop.
#[derive(Debug)]
pub struct StreamPermit {
    limiter: Arc<StreamLimiter>,
    key: Arc<str>,
}

impl StreamLimiter {
    /// A permit for `owner`'s new stream under `limits` with
    /// `max_connections` (`server.max_connections`), or the limit it is
    /// past (counted).
    ///
    /// # Errors
    /// The [`StreamLimit`] that refuses the stream.
    pub fn try_open(
        self: &Arc<Self>,
        owner: &StreamOwner,
        limits: &LimitsConfig,
        max_connections: usize,
    ) -> Result<StreamPermit, StreamLimit> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let mine = open.by_key.get(&owner.key).copied().unwrap_or(0);
        let refused = if mine >= limits.view_streams_per_credential {
            Some(StreamLimit::PerCredential)
        } else if open.total >= limits.view_streams_max {
            Some(StreamLimit::Total)
        } else if open.total >= limits.long_lived_connections(max_connections) {
            Some(StreamLimit::ReservedConnections)
        } else {
            None
        };
        if let Some(limit) = refused {
            drop(open);
            self.count_refusal(owner.role, &owner.label, limit.as_str());
            return Err(limit);
        }
        *open.by_key.entry(owner.key.clone()).or_insert(0) += 1;
        open.total += 1;
        self.gauge
            .set(i64::try_from(open.total).unwrap_or(i64::MAX));
        Ok(StreamPermit {
            limiter: self.clone(),
            key: owner.key.clone(),
        })
    }

    /// Counts a request of `role` by `credential` (a name, or
    /// [`ANONYMOUS`]) refused by the `[limits]` key `limit`, in
    /// `scorer_limit_refusals_total`, which every limit shares.
    pub fn count_refusal(&self, role: &'static str, credential: &str, limit: &'static str) {
        self.refusals
            .get_or_create(&RefusalLabels {
                role,
                credential: credential.to_owned(),
                limit,
            })
            .inc();
    }

    /// Streams open now.
    pub fn open(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).total
    }

    /// The count of open streams, as it changes.
    pub fn watch_open(&self) -> tokio::sync::watch::Receiver<usize> {
        self.open_now.subscribe()
    }

    /// Counts a stream cut off for falling behind its byte budget.
    pub fn cut_off(&self) {
        self.cutoffs.inc();
    }

    /// The gauge of bytes queued in every stream, for each stream's queue.
    pub fn queued_gauge(&self) -> Gauge {
        self.queued.clone()
    }

    /// Adds the stream metrics to a scrape's registry.
    pub fn register(&self, r: &mut Registry) {
        r.register(
            "scorer_view_streams",
            "View streams (GET /v1/view) open now",
            self.gauge.clone(),
        );
        r.register(
            "scorer_limit_refusals",
            "Requests refused by a [limits] limit, by role, credential name and limit",
            self.refusals.clone(),
        );
        r.register(
            "scorer_view_stream_cutoffs",
            "View streams cut off for holding more unsent bytes than limits.view_stream_budget_bytes",
            self.cutoffs.clone(),
        );
        r.register(
            "scorer_view_stream_queued_bytes",
            "Bytes queued in every view stream and not yet handed to its connection",
            self.queued.clone(),
        );
    }
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        let mut open = self.limiter.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.by_key.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                open.by_key.remove(&self.key);
            }
        }
        open.total = open.total.saturating_sub(1);
        self.limiter
            .gauge
            .set(i64::try_from(open.total).unwrap_or(i64::MAX));
        self.limiter.open_now.send_replace(open.total);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(name: &str) -> StreamOwner {
        StreamOwner {
            key: Arc::from(name),
            label: Arc::from(name),
            role: "router",
        }
    }

    #[test]
    fn each_limit_refuses_by_its_key_and_a_dropped_permit_frees_its_place() {
        let l = Arc::new(StreamLimiter::default());
        let limits = LimitsConfig {
            view_streams_per_credential: 2,
            view_streams_max: 3,
            ..LimitsConfig::default()
        };
        let a1 = l.try_open(&owner("a"), &limits, 4_096).unwrap();
        let _a2 = l.try_open(&owner("a"), &limits, 4_096).unwrap();
        assert_eq!(
            l.try_open(&owner("a"), &limits, 4_096).unwrap_err(),
            StreamLimit::PerCredential
        );
        let _b1 = l.try_open(&owner("b"), &limits, 4_096).unwrap();
        assert_eq!(
            l.try_open(&owner("c"), &limits, 4_096).unwrap_err(),
            StreamLimit::Total
        );
        drop(a1);
        assert_eq!(l.open(), 2);
        let _c1 = l.try_open(&owner("c"), &limits, 4_096).unwrap();
        // 8 connections with 3/4 reserved leave 2 to streams.
        assert_eq!(
            l.try_open(&owner("d"), &LimitsConfig::default(), 8)
                .unwrap_err(),
            StreamLimit::ReservedConnections
        );
    }
}

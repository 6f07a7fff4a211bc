//! The view a service streams to the balancers in the routers: every
//! worker's latest accepted telemetry report and its age at the service,
//! with the configuration hash and model version the service decides with.
//!
//! A balancer replays the reports through its own [`crate::Engine::ingest`],
//! so its smoothing, penalty state machine and rule scores are the
//! service's, computed from the same inputs in the same order (as NVIDIA
//! Dynamo's KV router replays the workers' load events in every router
//! replica). The router's own evidence (outstanding picks, outcome
//! peak-EWMA, ejection) never comes from the view; the other routers'
//! outstanding picks do ([`View::load`]), as the routers report them to the
//! service, so that many routers act as one.
//!
//! The protocol lives here, whatever carries it: the types and constants,
//! the reports a view is built from ([`reports`]) and the routers' load
//! board ([`load_board`], with the keys they routed in [`routed_log`]).
//! The service streams it as server-sent events; the bus carries the same
//! payloads between replicas.

use serde::{Deserialize, Serialize};

use scorer_core::telemetry::Snapshot;

pub mod load_board;
pub mod peer_load;
pub mod reports;
pub mod routed_log;

/// How often a view stream repeats the full view, ms.
pub const DEFAULT_FULL_INTERVAL_MS: u64 = 1_000;
/// How long a delta waits for more accepted reports before it is sent, ms.
pub const DEFAULT_COALESCE_MS: u64 = 5;
/// Accepted batches a stream may fall behind by before it resynchronises
/// with a full view.
pub const BUFFERED_BATCHES: usize = 1_024;
/// Shared views a stream may fall behind by before it resynchronises with
/// a full view of its own.
pub const BUFFERED_VIEWS: usize = 64;

/// Most workers one view event may carry.
pub const MAX_VIEW_WORKERS: usize = 100_000;

/// How often a router reports its outstanding picks, and the service
/// streams the other routers' load, ms.
pub const LOAD_INTERVAL_MS: u64 = 5;

/// After this long without a report from a router, ms, its load no longer
/// counts (it stopped or lost the service).
pub const ROUTER_LOAD_TTL_MS: u64 = 1_000;

/// Oldest report age a view may carry, ms (a day): older is a bug.
pub const MAX_VIEW_AGE_MS: u64 = 86_400_000;

/// Whether an event holds every worker or what changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ViewKind {
    /// Every worker the service knows, once each: on connect and every
    /// `view.full_interval_ms`.
    Full,
    /// The reports the service accepted since the previous event, oldest
    /// first (a worker may appear more than once).
    Delta,
}

/// One event of the view stream (`GET /v1/view`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct View {
    /// Full or delta.
    pub kind: ViewKind,
    /// Event number on this connection: 0 on connect, then +1 per event.
    #[schema(format = "uint64")]
    pub seq: u64,
    /// Hash of the configuration the service decides with (its
    /// `config_hash`); a balancer built from another configuration counts
    /// the mismatch.
    pub config_hash: String,
    /// The active model's version, when the service has one loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_version: Option<String>,
    /// Reports, at most [`MAX_VIEW_WORKERS`].
    pub workers: Vec<ViewWorker>,
    /// The other routers' load: present, it is complete (a worker it does
    /// not name has none); absent, the event says nothing of the load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<Vec<WorkerLoad>>,
    /// How old `load` was when the event left the service, ms: the mean,
    /// over the router reports summed in it, of the time since the service
    /// received each. A balancer ages the load from there (absent: 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = "uint64")]
    pub load_age_ms: Option<u64>,
    /// With `load`: how many other routers' reports it sums. A balancer
    /// counts itself in, and from `selection.many_routers_min` routers on
    /// decides with `selection.many_routers_policy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = "uint32")]
    pub load_routers: Option<u32>,
    /// Keys the other routers routed since the previous event, at most
    /// [`MAX_ROUTED_PER_VIEW`], oldest first: a balancer's routing index
    /// learns them as its own, so that the routers agree where a key is
    /// warm. Absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routed: Option<Vec<RoutedKey>>,
    /// The operators' overrides (drain, disable, weight): present, they
    /// are complete (every full view carries them, and a delta when they
    /// changed); absent, the event says nothing of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overrides: Option<Vec<crate::overrides::WorkerOverride>>,
}

/// A router's outstanding picks, as it reports them to the service
/// (`POST /v1/router/load`): complete, a worker it does not name has none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RouterLoad {
    /// The router, 1..=32 bytes of ASCII letters, digits, `-`, `_`, `.`.
    #[schema(min_length = 1, max_length = 32, pattern = "^[A-Za-z0-9._-]{1,32}$")]
    pub router_id: String,
    /// Its outstanding picks per worker, each worker once.
    pub outstanding: Vec<WorkerLoad>,
    /// The keys it routed since its previous report, at most
    /// [`MAX_ROUTED_PER_REPORT`], oldest first (a router whose workers do
    /// not report cache hits sends none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routed: Vec<RoutedKey>,
}

/// Most routed keys one load report may carry.
pub const MAX_ROUTED_PER_REPORT: usize = 4_096;
/// Most routed keys one view event may carry.
pub const MAX_ROUTED_PER_VIEW: usize = 16_384;

/// A key a router sent to a worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RoutedKey {
    /// The key's 64-bit hash as 16 lowercase hex digits: FNV-1a 64 of the
    /// key's UTF-8 bytes, then MurmurHash3's 64-bit finaliser
    /// (`scorer_core::locality::hash_str`). The key itself never leaves
    /// the router.
    #[schema(min_length = 16, max_length = 16, pattern = "^[0-9a-f]{16}$")]
    pub key_hash: String,
    /// The worker it went to, 1..=128 bytes.
    #[schema(min_length = 1, max_length = 128)]
    pub worker_id: String,
    /// How long before the report (or the view event) was written the key
    /// was routed, ms, at most [`MAX_VIEW_AGE_MS`].
    #[schema(format = "uint64")]
    pub age_ms: u64,
}

impl RoutedKey {
    /// The key hash, when `key_hash` is 16 lowercase hex digits.
    pub fn hash(&self) -> Option<u64> {
        let h = self.key_hash.as_bytes();
        (h.len() == 16 && h.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .then(|| u64::from_str_radix(&self.key_hash, 16).ok())
            .flatten()
    }

    /// The entry for `key_hash` routed to `worker_id` `age_ms` ago.
    pub fn new(key_hash: u64, worker_id: impl Into<String>, age_ms: u64) -> Self {
        Self {
            key_hash: format!("{key_hash:016x}"),
            worker_id: worker_id.into(),
            age_ms,
        }
    }
}

/// Whether `id` is a valid router id: 1..=32 bytes of ASCII letters,
/// digits, `-`, `_` and `.`.
pub fn is_valid_router_id(id: &str) -> bool {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    (1..=32).contains(&id.len()) && id.chars().all(ok)
}

/// One worker's outstanding picks, as routers report them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerLoad {
    /// The worker, 1..=128 bytes.
    #[schema(min_length = 1, max_length = 128)]
    pub worker_id: String,
    /// Picks without an outcome yet (a router reports at most 1000000 per
    /// worker; the view sums the routers' reports).
    #[schema(format = "uint32")]
    pub outstanding: u32,
}

/// One worker's report in a [`View`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ViewWorker {
    /// The report as the service accepted it (after validation; a CPU
    /// above 1 still reads as sent and is clamped again on replay).
    pub snapshot: Snapshot,
    /// How long before the event was written the service accepted the
    /// report, ms, at most [`MAX_VIEW_AGE_MS`].
    #[schema(format = "uint64")]
    pub age_ms: u64,
}

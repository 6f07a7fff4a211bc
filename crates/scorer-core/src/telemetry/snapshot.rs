//! The wire shape of one telemetry report, as pushed by a worker (or the
//! telemetry agent) to `POST /v1/telemetry`.

use serde::{Deserialize, Serialize};

/// One worker's self-reported metrics at `timestamp_ms`.
///
/// Units are in the field names or documented per field; fractions are in
/// `0..=1`. Validation rules (ranges, finiteness, ordering) live in
/// [`crate::telemetry::validate`]; this type only describes the shape.
/// Unknown fields are rejected when deserialising.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    /// Worker identifier, 1..=128 bytes, no control or invisible formatting
    /// characters, no whitespace at either end.
    #[schema(min_length = 1, max_length = 128)]
    pub worker_id: String,
    /// The reporter's wall clock when the sample was taken, Unix ms.
    #[schema(format = "uint64")]
    pub timestamp_ms: u64,
    /// CPU utilisation, fraction `0..=1`; `(1, 4]` is clamped to 1 with a warning.
    #[schema(minimum = 0.0, maximum = 4.0)]
    pub cpu_usage: f64,
    /// Pending requests in the worker's queue.
    #[schema(format = "uint32")]
    pub queue_depth: u32,
    /// Mean request round-trip time over the report interval, ms.
    #[schema(minimum = 0.0, maximum = 86_400_000.0)]
    pub rtt_ms_avg: f64,
    /// 99th-percentile round-trip time over the report interval, ms.
    #[schema(minimum = 0.0, maximum = 86_400_000.0)]
    pub rtt_ms_p99: f64,
    /// Fraction of requests that failed over the report interval, `0..=1`.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub error_rate: f64,
    /// The worker is compacting (or snapshotting) its storage.
    #[serde(default)]
    pub compacting: bool,
    /// The worker is repairing or loading data (anti-entropy, restore).
    #[serde(default)]
    pub under_repair: bool,
    /// Replication log positions behind the primary.
    #[serde(default)]
    #[schema(format = "uint64")]
    pub version_lag: u64,
    /// Available memory as a fraction of the limit, `0..=1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub mem_available_ratio: Option<f64>,
    /// Disk IO await, ms (at most one day, [`super::validate::MAX_LATENCY_MS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0.0, maximum = 86_400_000.0)]
    pub disk_io_await_ms: Option<f64>,
    /// Network packet loss, fraction `0..=1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub net_loss_rate: Option<f64>,
    /// Cache hit rate over the report interval, fraction `0..=1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub cache_hit_rate: Option<f64>,
    /// Bytes held in the memtable (not yet flushed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = "uint64")]
    pub memtable_bytes: Option<u64>,
    /// Free disk space as a fraction of capacity, `0..=1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub disk_free_ratio: Option<f64>,
    /// Memory the worker holds, bytes (Redis `used_memory`), at most 2^50
    /// (1 PiB). Reported, not scored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = "uint64", maximum = 1_125_899_906_842_624.0)]
    pub used_memory_bytes: Option<u64>,
    /// The worker's memory limit, bytes (Redis `maxmemory`), 1..=2^50
    /// (1 PiB); absent when the worker has no limit (Redis `maxmemory 0`)
    /// or does not say. Reported, not scored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = "uint64", minimum = 1.0, maximum = 1_125_899_906_842_624.0)]
    pub maxmemory_bytes: Option<u64>,
    /// Keys evicted to stay under the memory limit, per second over the
    /// report interval, `0..=1e9`. Reported, not scored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0.0, maximum = 1_000_000_000.0)]
    pub evicted_keys_per_s: Option<f64>,
    /// The worker's region or zone name, at most 64 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 64)]
    pub region: Option<String>,
    /// Static relative capacity, `> 0`; 1.0 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(exclusive_minimum = 0.0)]
    pub capacity: Option<f64>,
    /// A Bloom filter of the keys the worker holds (its cache digest), at
    /// most 1 MiB; see [`super::CacheDigest`]. A report without one keeps
    /// the last one received, which counts until it is older than
    /// `telemetry.dead_after_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_digest: Option<super::CacheDigest>,
}

impl Snapshot {
    /// A snapshot with the required fields set and every optional one absent.
    ///
    /// Convenient for agents and tests; the caller fills the rest.
    pub fn new(worker_id: impl Into<String>, timestamp_ms: u64) -> Self {
        Self {
            worker_id: worker_id.into(),
            timestamp_ms,
            cpu_usage: 0.0,
            queue_depth: 0,
            rtt_ms_avg: 0.0,
            rtt_ms_p99: 0.0,
            error_rate: 0.0,
            compacting: false,
            under_repair: false,
            version_lag: 0,
            mem_available_ratio: None,
            disk_io_await_ms: None,
            net_loss_rate: None,
            cache_hit_rate: None,
            memtable_bytes: None,
            disk_free_ratio: None,
            used_memory_bytes: None,
            maxmemory_bytes: None,
            evicted_keys_per_s: None,
            region: None,
            capacity: None,
            cache_digest: None,
        }
    }
}

/// Body of `POST /v1/telemetry`: 1..=`max_batch` snapshots, applied atomically.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TelemetryBatch {
    /// The snapshots; worker ids must be distinct within one batch.
    pub snapshots: Vec<Snapshot>,
}

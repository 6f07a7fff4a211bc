//! Feature schema: order, names, units, expected ranges and imputation.
//!
//! Imputation rule (one rule, shared with the trainer): a signal that is
//! missing — an optional signal the worker does not report, or any worker
//! signal of a candidate the service has never heard from — takes the
//! feature's `impute` value below. For worker signals that value is the
//! rule scorer's default threshold (the worst value that costs no points),
//! never zero and never NaN, so "missing" cannot masquerade as "perfect";
//! features `worker_known` and `optional_missing_count` tell the model when
//! imputation happened. The vector never contains NaN or infinity.
//!
//! The evidence features (0..=4, 6, 7) are what the service itself saw of
//! the worker: outstanding picks, the outcome-latency estimate and how many
//! outcomes back it, the unseen backlog, the observed failure rate, and the
//! rules' routing cost E that the model's target is relative to (the
//! model predicts `ln(latency) − ln(E)`). A candidate the cost did not run
//! for (a worker that never reported, a decision in panic mode) takes their
//! `impute` values. Schema version 2 put them in the slots of key-shape
//! features (prefix and shard buckets, key length and segments, hotness,
//! the size-table flag), which were the same for every candidate of a
//! request and so could not tell workers apart.
//!
//! The locality features (31 `warm_probability`, 35 `prefix_hit_rate`)
//! are what the service knows of the request's key on the worker's cache:
//! the cost's chance that the key is warm there
//! ([`crate::locality::LocalityEstimate::p_warm`]) and the decayed hit
//! rate of the key's prefix there ([`crate::locality::PrefixHitRates`]).
//! Both impute −1, outside their 0..=1 range, so a missing estimate (no
//! outcome has said hit or miss yet, locality off, a worker the cost did
//! not run for, a prefix without outcomes on the worker) is told apart
//! from any learnt one, and never reads as a cold or a warm key. Schema
//! version 3 put them in the slots of `req_mget` and `candidate_count`:
//! both were never split on by the shipped model of version 2, both are
//! the same for every candidate of a request (the model's predictions
//! are centred on the decision's mean, so such a feature acts only
//! through interactions), an MGET of several keys still shows in
//! `batch_size`, and the candidate count still scales `rule_rank_frac`.
//! Logs of version 2 read as version 3 with both features imputed
//! ([`super::compat`]).

use std::sync::OnceLock;

use serde::Serialize;
use sha2::{Digest, Sha256};

/// Number of features.
pub const FEATURE_COUNT: usize = 42;
/// Index of `expected_latency_ln_ms` (a historical name, kept because names
/// are part of the schema hash), ln of the rules' routing cost E,
/// that the model's target is relative to.
pub const EXPECTED_LATENCY_FEATURE: usize = 7;
/// Version of the schema; bump on any change of order, meaning or imputation.
pub const FEATURE_SCHEMA_VERSION: &str = "3";
/// Index of `warm_probability`, the cost's chance that the key is warm on
/// the worker.
pub const WARM_PROBABILITY_FEATURE: usize = 31;
/// Index of `prefix_hit_rate`, the decayed hit rate of the key's prefix on
/// the worker.
pub const PREFIX_HIT_RATE_FEATURE: usize = 35;

/// The group a feature belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FeatureGroup {
    /// From the key: its value size, and its locality on the worker (3).
    Key,
    /// From the service's own evidence and cost for the worker (7).
    Evidence,
    /// From the worker's telemetry (20).
    Worker,
    /// From the request context and the candidate set (8).
    Context,
    /// From the worker's report history (4).
    History,
}

/// One feature's definition.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FeatureSpec {
    /// Position in the vector.
    pub index: usize,
    /// Stable name.
    pub name: &'static str,
    /// Group.
    pub group: FeatureGroup,
    /// Unit (`fraction`, `ms`, `bool`, `count`, …).
    pub unit: &'static str,
    /// Expected minimum.
    pub min: f32,
    /// Expected maximum (values are clamped into [min, max]).
    pub max: f32,
    /// Value used when the signal is missing.
    pub impute: f32,
    /// How the value is derived.
    pub description: &'static str,
}

// A table row constructor: one argument per column reads better than a builder here.
#[allow(clippy::too_many_arguments)]
const fn f(
    index: usize,
    name: &'static str,
    group: FeatureGroup,
    unit: &'static str,
    min: f32,
    max: f32,
    impute: f32,
    description: &'static str,
) -> FeatureSpec {
    FeatureSpec {
        index,
        name,
        group,
        unit,
        min,
        max,
        impute,
        description,
    }
}

use FeatureGroup::{Context as C, Evidence as E, History as H, Key as K, Worker as W};

/// The features, in vector order.
pub const FEATURES: [FeatureSpec; FEATURE_COUNT] = [
    f(
        0,
        "outstanding",
        E,
        "requests",
        0.0,
        100_000.0,
        0.0,
        "the service's own outstanding picks of the worker at decision time",
    ),
    f(
        1,
        "service_time_ms",
        E,
        "ms",
        0.0,
        600_000.0,
        10.0,
        "peak-EWMA service time of the worker's outcomes, as the cost used it (the pool's prior without outcomes)",
    ),
    f(
        2,
        "outcomes_log1p",
        E,
        "ln(1+count)",
        0.0,
        50.0,
        0.0,
        "ln(1 + outcomes seen for the worker): how much evidence backs service_time_ms",
    ),
    f(
        3,
        "unseen_backlog",
        E,
        "requests",
        0.0,
        100_000.0,
        0.0,
        "the reported queue our outstanding picks do not explain, aged toward the pool median (C3)",
    ),
    f(
        4,
        "observed_failure_rate",
        E,
        "fraction",
        0.0,
        1.0,
        0.0,
        "failure rate of the worker's recent outcomes, fading since the last one",
    ),
    f(
        5,
        "value_size_log2_bytes",
        K,
        "log2(bytes)",
        0.0,
        40.0,
        10.0,
        "log2 of the prefix's estimated value size (features.value_size_bytes)",
    ),
    f(
        6,
        "put_x_compacting",
        E,
        "bool",
        0.0,
        1.0,
        0.0,
        "1 for a PUT to a worker whose latest snapshot says it is compacting",
    ),
    f(
        7,
        "expected_latency_ln_ms",
        E,
        "ln(ms)",
        -14.0,
        14.0,
        std::f32::consts::LN_10,
        "ln of the rules' routing cost E (before the model; ms only at cost exponent 1); the model predicts ln(latency) minus this",
    ),
    f(
        8,
        "cpu_usage",
        W,
        "fraction",
        0.0,
        1.0,
        0.70,
        "EWMA CPU utilisation",
    ),
    f(
        9,
        "queue_depth",
        W,
        "requests",
        0.0,
        100_000.0,
        20.0,
        "EWMA queue depth",
    ),
    f(
        10,
        "rtt_ms_avg",
        W,
        "ms",
        0.0,
        600_000.0,
        10.0,
        "EWMA mean RTT",
    ),
    f(
        11,
        "rtt_ms_p99",
        W,
        "ms",
        0.0,
        600_000.0,
        10.0,
        "EWMA RTT p99",
    ),
    f(
        12,
        "error_rate",
        W,
        "fraction",
        0.0,
        1.0,
        0.0,
        "EWMA error rate",
    ),
    f(
        13,
        "compacting",
        W,
        "bool",
        0.0,
        1.0,
        0.0,
        "latest compacting flag",
    ),
    f(
        14,
        "under_repair",
        W,
        "bool",
        0.0,
        1.0,
        0.0,
        "latest under_repair flag",
    ),
    f(
        15,
        "version_lag_log1p",
        W,
        "ln(1+positions)",
        0.0,
        45.0,
        0.0,
        "ln(1 + version_lag)",
    ),
    f(
        16,
        "mem_available_ratio",
        W,
        "fraction",
        0.0,
        1.0,
        0.15,
        "EWMA available memory",
    ),
    f(
        17,
        "disk_io_await_ms",
        W,
        "ms",
        0.0,
        600_000.0,
        50.0,
        "EWMA disk IO await",
    ),
    f(
        18,
        "net_loss_rate",
        W,
        "fraction",
        0.0,
        1.0,
        0.01,
        "EWMA network loss",
    ),
    f(
        19,
        "cache_hit_rate",
        W,
        "fraction",
        0.0,
        1.0,
        0.70,
        "EWMA cache hit rate",
    ),
    f(
        20,
        "memtable_gib",
        W,
        "GiB",
        0.0,
        1024.0,
        2.0,
        "EWMA memtable size",
    ),
    f(
        21,
        "disk_free_ratio",
        W,
        "fraction",
        0.0,
        1.0,
        0.5,
        "EWMA free disk",
    ),
    f(
        22,
        "capacity",
        W,
        "relative",
        0.0,
        1000.0,
        1.0,
        "static relative capacity",
    ),
    f(
        23,
        "report_age_ms",
        W,
        "ms",
        0.0,
        3_600_000.0,
        10_000.0,
        "server time since the last accepted report",
    ),
    f(
        24,
        "warmup_remaining",
        W,
        "fraction",
        0.0,
        1.0,
        1.0,
        "share of the warm-up window still ahead",
    ),
    f(
        25,
        "worker_known",
        W,
        "bool",
        0.0,
        1.0,
        0.0,
        "1 when the worker has reported at least once",
    ),
    f(
        26,
        "rule_score_frac",
        W,
        "fraction",
        0.0,
        1.0,
        0.0,
        "rule score / 100",
    ),
    f(
        27,
        "optional_missing_count",
        W,
        "count",
        0.0,
        6.0,
        6.0,
        "optional signals not reported (imputed)",
    ),
    f(
        28,
        "req_get",
        C,
        "bool",
        0.0,
        1.0,
        0.0,
        "request_type is GET",
    ),
    f(
        29,
        "req_put",
        C,
        "bool",
        0.0,
        1.0,
        0.0,
        "request_type is PUT",
    ),
    f(
        30,
        "req_delete",
        C,
        "bool",
        0.0,
        1.0,
        0.0,
        "request_type is DELETE (an MGET or an absent type has all three 0)",
    ),
    f(
        31,
        "warm_probability",
        K,
        "fraction",
        -1.0,
        1.0,
        -1.0,
        "the cost's chance that the key is warm on the worker (by how long ago this router routed it there, or the key's home); -1 without an estimate",
    ),
    f(
        32,
        "timeout_ms",
        C,
        "ms",
        -1.0,
        600_000.0,
        -1.0,
        "client deadline; -1 when absent",
    ),
    f(
        33,
        "batch_size",
        C,
        "keys",
        1.0,
        100_000.0,
        1.0,
        "keys in the request",
    ),
    f(
        34,
        "region_match",
        C,
        "bool",
        0.0,
        1.0,
        0.5,
        "1 same region, 0 different, 0.5 when either is unknown",
    ),
    f(
        35,
        "prefix_hit_rate",
        K,
        "fraction",
        -1.0,
        1.0,
        -1.0,
        "decayed hit rate of the key's prefix on the worker over its last ~64 outcomes that said hit or miss; -1 without any",
    ),
    f(
        36,
        "rule_rank_frac",
        C,
        "fraction",
        0.0,
        1.0,
        1.0,
        "rank by rule score among candidates, 0 best .. 1 worst",
    ),
    f(
        37,
        "rule_gap_to_best",
        C,
        "fraction",
        0.0,
        1.0,
        1.0,
        "(best rule score − this) / 100",
    ),
    f(
        38,
        "p99_slope_ms_per_s",
        H,
        "ms/s",
        -10_000.0,
        10_000.0,
        0.0,
        "least-squares slope of RTT p99 over the last 60 reports",
    ),
    f(
        39,
        "error_rate_stddev",
        H,
        "fraction",
        0.0,
        1.0,
        0.0,
        "standard deviation of the error rate over the last 60 reports",
    ),
    f(
        40,
        "cache_hit_slope_per_s",
        H,
        "fraction/s",
        -1.0,
        1.0,
        0.0,
        "least-squares slope of the cache hit rate over the last 60 reports",
    ),
    f(
        41,
        "registered_s",
        H,
        "s",
        0.0,
        31_536_000.0,
        0.0,
        "seconds since the worker's first report",
    ),
];

/// Stable hash of the schema (version, order, names, units, ranges, imputation):
/// first 16 hex digits of SHA-256. A model trained on another hash is refused.
pub fn schema_hash() -> &'static str {
    static HASH: OnceLock<String> = OnceLock::new();
    HASH.get_or_init(|| {
        let mut h = Sha256::new();
        h.update(FEATURE_SCHEMA_VERSION.as_bytes());
        for s in &FEATURES {
            h.update(
                format!(
                    "|{}:{}:{}:{}:{}:{}",
                    s.index, s.name, s.unit, s.min, s.max, s.impute
                )
                .as_bytes(),
            );
        }
        h.finalize()
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect()
    })
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;

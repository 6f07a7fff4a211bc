//! The configuration: one struct per TOML section, its defaults, its
//! ranges ([`Config::validate`]) and its hash.
//!
//! Unknown keys are rejected by serde (`deny_unknown_fields`) and ranges by
//! [`Config::validate`]. Loading (embedded defaults, an optional TOML file,
//! then environment overrides `SCORER_<SECTION>__<KEY>`) is the service's
//! `LoadConfig`, through figment.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use scorer_core::dynamics::PenaltyConfig;
pub use scorer_core::scoring::ScoringConfig;
use scorer_core::selection::{PolicyKind, SelectionError, SelectorConfig};
pub use scorer_core::telemetry::{
    DEFAULT_DEAD_AFTER_MS, DEFAULT_EWMA_ALPHA, DEFAULT_FORGET_AFTER_MS, DEFAULT_MAX_CLOCK_SKEW_MS,
    DEFAULT_MAX_WORKERS, TelemetryConfig,
};
pub use scorer_log::LogConfig;

#[path = "config_auth.rs"]
pub mod auth;
#[path = "config_bus.rs"]
pub mod bus;
#[path = "config_limits.rs"]
pub mod limits;
#[path = "config_server.rs"]
mod server;
#[path = "config_tls.rs"]
pub mod tls;
pub use server::{
    DEFAULT_BODY_READ_TIMEOUT_MS, DEFAULT_HEADER_READ_TIMEOUT_MS, DEFAULT_IDLE_TIMEOUT_MS,
    DEFAULT_LISTEN, DEFAULT_MAX_BATCH, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CANDIDATES,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_FEEDBACK_BATCH, ScoreDispatch, ServerConfig,
};

/// Prefix of environment overrides.
pub const ENV_PREFIX: &str = "SCORER_";

/// Errors raised while loading or validating configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read or a key could not be parsed; the message
    /// (figment's) names the key and where it came from.
    #[error("{0}")]
    Load(String),
    /// A value is out of its documented range.
    #[error("config key `{key}`: {reason}")]
    Invalid {
        /// Dotted key, e.g. `telemetry.ewma_alpha`.
        key: String,
        /// What is wrong, with the offending value.
        reason: String,
    },
}

/// The whole configuration, one struct per TOML section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// `[server]`: listener and request limits.
    pub server: ServerConfig,
    /// `[telemetry]`: ingestion, liveness and smoothing.
    pub telemetry: TelemetryConfig,
    /// `[scoring]`: rule scorer thresholds and deductions.
    pub scoring: ScoringConfig,
    /// `[features]`: key fingerprint tables for the observation vector.
    pub features: FeaturesConfig,
    /// `[penalty]`: the per-worker penalty state machine and slow start (issue #3).
    pub penalty: PenaltyConfig,
    /// `[freshness]`: how a snapshot's influence fades with age (issue #3).
    pub freshness: FreshnessSection,
    /// `[evidence]`: the service's own per-worker evidence (outstanding
    /// picks, outcome latency, unseen backlog).
    pub evidence: scorer_core::dynamics::EvidenceConfig,
    /// `[outlier]`: ejection from outcomes (Envoy semantics).
    pub outlier: scorer_core::dynamics::OutlierConfig,
    /// `[cost]`: the routing cost that orders the candidates.
    pub cost: scorer_core::scoring::CostConfig,
    /// `[locality]`: pricing a key by where it is likely warm.
    pub locality: scorer_core::locality::LocalityConfig,
    /// `[selection]`: policies, propensities and panic mode (issue #3).
    pub selection: SelectionSection,
    /// `[log]`: the Parquet decision log (issue #4).
    pub log: LogConfig,
    /// `[model]`: the ONNX model in the scoring path (issue #6).
    pub model: scorer_model::ModelConfig,
    /// `[admin]`: admin endpoint protection (issue #8).
    pub admin: AdminConfig,
    /// `[auth]`: per-role bearer tokens.
    pub auth: auth::AuthConfig,
    /// `[reload]`: limits on what a hot reload may change (issue #8).
    pub reload: crate::config_reload::ReloadConfig,
    /// `[limits]`: how much long-lived streams may hold.
    pub limits: limits::LimitsConfig,
    /// `[bus]`: sharing the view with other replicas over NATS.
    pub bus: bus::BusConfig,
}

/// `[freshness]` section. The dead end of the ramp is `telemetry.dead_after_ms`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FreshnessSection {
    /// Reports younger than this are fully trusted, ms. Default 3000.
    pub fresh_ms: u64,
    /// Deduction at freshness 0 (just before death), points; scaled by `1 − freshness`. Default 10.
    pub stale_max_deduct: f64,
}

impl Default for FreshnessSection {
    fn default() -> Self {
        Self {
            fresh_ms: scorer_core::dynamics::DEFAULT_FRESH_MS,
            stale_max_deduct: 10.0,
        }
    }
}

/// Default [`SelectionSection::many_routers_min`].
pub const DEFAULT_MANY_ROUTERS_MIN: u32 = 64;

/// `[selection]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SelectionSection {
    /// Policy when a request names none: `max`, `softmax`, `p2c`, `swrr`, `hash`, `prequal`, `none`. Default `max` (the lowest routing cost).
    pub default_policy: String,
    /// Softmax temperature when a request names none, >= 0 (0 = max). Default 0.1.
    pub temperature: f64,
    /// Virtual nodes per worker on the consistent-hash ring. Default 160.
    pub hash_virtual_nodes: u32,
    /// Bounded-load factor of the consistent-hash ring, >= 1. Default 1.25.
    pub hash_load_factor: f64,
    /// Minimum pick probability for every eligible worker under max, softmax
    /// and p2c (an exploration floor), fraction; 0 = off. Default 0.
    pub min_share: f64,
    /// Candidates the `prequal` policy probes per pick, >= 1 (at least the
    /// candidate count probes them all). Default 3 (Prequal's `r_probe`).
    pub prequal_probes: u32,
    /// `prequal`'s hot/cold quantile of the candidates' requests in flight,
    /// in (0, 1]: a candidate above it is hot. Default 0.84 (Prequal's `Q_RIF`).
    pub prequal_q_rif: f64,
    /// When no candidate is eligible, rank the live ones ignoring penalty states
    /// (`"panic": true`) instead of failing. Default true.
    pub panic_mode: bool,
    /// Apply slow start to newly registered workers too, not only to workers
    /// returning from cooldown. Default true.
    pub slow_start_new_workers: bool,
    /// Decisions remembered for matching feedback to picks. Default 100_000.
    pub remembered_decisions: usize,
    /// Policy of an embedded balancer's pick that names none while its
    /// view counts at least `many_routers_min` routers sharing the pool
    /// (itself included): with that many deciders on a view a few service
    /// times old, the lowest cost is the same worker for all of them, and a
    /// randomized choice spreads them (Mitzenmacher, "How Useful Is Old
    /// Information?"). Default `p2c`.
    pub many_routers_policy: String,
    /// Routers sharing the pool, this one included, from which
    /// `many_routers_policy` applies, >= 2. Default 64 (see
    /// docs/selection.md, "Many deciders").
    pub many_routers_min: u32,
}

impl Default for SelectionSection {
    fn default() -> Self {
        Self {
            default_policy: "max".to_owned(),
            temperature: scorer_core::selection::DEFAULT_TEMPERATURE,
            hash_virtual_nodes: scorer_core::selection::DEFAULT_HASH_VIRTUAL_NODES,
            hash_load_factor: scorer_core::selection::DEFAULT_HASH_LOAD_FACTOR,
            min_share: scorer_core::selection::DEFAULT_MIN_SHARE,
            prequal_probes: scorer_core::selection::DEFAULT_PREQUAL_PROBES,
            prequal_q_rif: scorer_core::selection::DEFAULT_PREQUAL_Q_RIF,
            panic_mode: true,
            slow_start_new_workers: true,
            remembered_decisions: 100_000,
            many_routers_policy: "p2c".to_owned(),
            many_routers_min: DEFAULT_MANY_ROUTERS_MIN,
        }
    }
}

impl SelectionSection {
    /// The selector configuration these keys describe.
    pub fn selector_config(&self) -> SelectorConfig {
        SelectorConfig {
            default_temperature: self.temperature,
            hash_virtual_nodes: self.hash_virtual_nodes,
            hash_load_factor: self.hash_load_factor,
            min_share: self.min_share,
            prequal_probes: self.prequal_probes,
            prequal_q_rif: self.prequal_q_rif,
        }
    }

    /// The default policy, parsed.
    ///
    /// # Errors
    /// When `default_policy` is not a policy name.
    pub fn policy(&self) -> Result<PolicyKind, SelectionError> {
        self.default_policy.parse()
    }

    /// The default policy of a pick made while `routers` share the pool
    /// (this one included): `many_routers_policy` from `many_routers_min`
    /// on, else `default_policy`.
    ///
    /// # Errors
    /// When the key in force is not a policy name.
    pub fn policy_for(&self, routers: u32) -> Result<PolicyKind, SelectionError> {
        if routers >= self.many_routers_min {
            self.many_routers_policy.parse()
        } else {
            self.policy()
        }
    }
}

/// `[admin]` section (issue #8).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    /// Bearer token required by `/v1/admin/*` (env `SCORER_ADMIN__TOKEN`).
    /// Unset: admin endpoints answer only to loopback peers.
    pub token: Option<String>,
}

/// `[features]` section: tables the key fingerprint uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FeaturesConfig {
    /// Estimated value size per key prefix, bytes (e.g. `user = 512`).
    pub value_size_bytes: BTreeMap<String, u64>,
    /// Estimate for prefixes not in the table, bytes. Default 1024.
    pub default_value_size_bytes: u64,
}

impl Default for FeaturesConfig {
    fn default() -> Self {
        Self {
            value_size_bytes: BTreeMap::from([
                ("user".to_owned(), 512),
                ("session".to_owned(), 256),
                ("order".to_owned(), 2048),
                ("blob".to_owned(), 65_536),
            ]),
            default_value_size_bytes: 1024,
        }
    }
}

impl Config {
    /// Check every value against its documented range.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the first offending key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        fn bad(key: &str, reason: String) -> Result<(), ConfigError> {
            Err(ConfigError::Invalid {
                key: key.to_owned(),
                reason,
            })
        }
        if let Err((key, reason)) = self.server.validate() {
            return bad(key, reason);
        }
        if self.log.enabled && self.server.max_feedback_batch > self.log.channel_capacity {
            return bad(
                "server.max_feedback_batch",
                format!(
                    "must be at most log.channel_capacity ({}) so that one batch cannot overflow the decision log, got {}",
                    self.log.channel_capacity, self.server.max_feedback_batch
                ),
            );
        }
        if self.telemetry.max_workers == 0 {
            return bad("telemetry.max_workers", "must be at least 1".to_owned());
        }
        if let Some(t) = self.admin.token.as_deref()
            && let Err(reason) = auth::check_token(t)
        {
            return bad("admin.token", format!("{reason} when set"));
        }
        if let Err((key, reason)) = self.auth.validate() {
            return bad(&key, reason);
        }
        if let Err((key, reason)) = self.limits.validate() {
            return bad(key, reason);
        }
        if let Err((key, reason)) = self.bus.validate() {
            return bad(key, reason);
        }
        if let Ok(listen) = self.server.listen.parse()
            && let Err(reason) = auth::check_exposure(
                listen,
                &self.auth,
                self.admin.token.as_deref(),
                self.server.tls.verifies_clients(),
                self.server.insecure_allow_unauthenticated,
            )
        {
            return bad("server.listen", reason);
        }
        if let Ok(listen) = self.server.listen.parse()
            && let Err(reason) = auth::check_reader_exposure(
                listen,
                &self.auth,
                self.server.tls.verifies_clients(),
                self.server.insecure_allow_unauthenticated,
            )
        {
            return bad("server.listen", reason);
        }
        let t = &self.telemetry;
        if !(t.ewma_alpha > 0.0 && t.ewma_alpha <= 1.0) {
            return bad(
                "telemetry.ewma_alpha",
                format!("must be in (0, 1], got {}", t.ewma_alpha),
            );
        }
        if t.dead_after_ms == 0 {
            return bad("telemetry.dead_after_ms", "must be at least 1".to_owned());
        }
        if t.forget_after_ms < t.dead_after_ms {
            return bad(
                "telemetry.forget_after_ms",
                format!(
                    "must be >= telemetry.dead_after_ms ({}), got {}",
                    t.dead_after_ms, t.forget_after_ms
                ),
            );
        }
        let c = &self.scoring;
        for (key, v) in [
            ("scoring.compacting_factor", c.compacting_factor),
            ("scoring.under_repair_factor", c.under_repair_factor),
            ("scoring.cpu_high", c.cpu_high),
            ("scoring.mem_available_low", c.mem_available_low),
            ("scoring.net_loss_high", c.net_loss_high),
            ("scoring.cache_hit_low", c.cache_hit_low),
            ("scoring.error_rate_floor", c.error_rate_floor),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return bad(key, format!("must be a fraction in [0, 1], got {v}"));
            }
        }
        for (key, v) in [
            ("scoring.cpu_step", c.cpu_step),
            ("scoring.rtt_p99_baseline_ms", c.rtt_p99_baseline_ms),
            ("scoring.disk_io_await_high_ms", c.disk_io_await_high_ms),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return bad(key, format!("must be finite and > 0, got {v}"));
            }
        }
        for (key, v) in [
            ("scoring.cpu_points_per_step", c.cpu_points_per_step),
            ("scoring.rtt_points_per_ratio", c.rtt_points_per_ratio),
            ("scoring.error_points_per_rate", c.error_points_per_rate),
            ("scoring.queue_high_watermark", c.queue_high_watermark),
            (
                "scoring.disk_io_points_per_threshold",
                c.disk_io_points_per_threshold,
            ),
            ("scoring.disk_io_write_weight", c.disk_io_write_weight),
            (
                "scoring.net_loss_points_per_rate",
                c.net_loss_points_per_rate,
            ),
            (
                "scoring.cache_hit_points_per_rate",
                c.cache_hit_points_per_rate,
            ),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return bad(key, format!("must be finite and >= 0, got {v}"));
            }
        }
        for (key, v) in [
            ("scoring.cpu_max_deduct", c.cpu_max_deduct),
            ("scoring.rtt_max_deduct", c.rtt_max_deduct),
            ("scoring.error_max_deduct", c.error_max_deduct),
            ("scoring.queue_deduct", c.queue_deduct),
            ("scoring.mem_max_deduct", c.mem_max_deduct),
            ("scoring.disk_io_max_deduct", c.disk_io_max_deduct),
            ("scoring.net_loss_max_deduct", c.net_loss_max_deduct),
            ("scoring.cache_hit_max_deduct", c.cache_hit_max_deduct),
            ("scoring.memtable_deduct", c.memtable_deduct),
            ("scoring.warmup_max_deduct", c.warmup_max_deduct),
        ] {
            if !(0.0..=100.0).contains(&v) {
                return bad(key, format!("must be in [0, 100] points, got {v}"));
            }
        }
        if let Err(e) = self.penalty.validate() {
            return bad(
                &format!("penalty.{}", e.split_whitespace().next().unwrap_or("")),
                e,
            );
        }
        for (section, r) in [
            ("evidence", self.evidence.validate()),
            ("outlier", self.outlier.validate()),
            ("cost", self.cost.validate()),
            ("locality", self.locality.validate()),
        ] {
            if let Err(e) = r {
                return bad(
                    &format!("{section}.{}", e.split_whitespace().next().unwrap_or("")),
                    e,
                );
            }
        }
        if self.freshness.fresh_ms >= t.dead_after_ms {
            return bad(
                "freshness.fresh_ms",
                format!(
                    "must be below telemetry.dead_after_ms ({}), got {}",
                    t.dead_after_ms, self.freshness.fresh_ms
                ),
            );
        }
        if !(0.0..=100.0).contains(&self.freshness.stale_max_deduct) {
            return bad(
                "freshness.stale_max_deduct",
                format!(
                    "must be in [0, 100] points, got {}",
                    self.freshness.stale_max_deduct
                ),
            );
        }
        let sel = &self.selection;
        if let Err(e) = sel.policy() {
            return bad("selection.default_policy", e.to_string());
        }
        match sel.many_routers_policy.parse::<PolicyKind>() {
            Err(e) => return bad("selection.many_routers_policy", e.to_string()),
            Ok(PolicyKind::None) => {
                return bad(
                    "selection.many_routers_policy",
                    "must pick a worker: `none` makes no pick".to_owned(),
                );
            }
            Ok(_) => {}
        }
        if sel.many_routers_min < 2 {
            return bad(
                "selection.many_routers_min",
                format!("must be >= 2, got {}", sel.many_routers_min),
            );
        }
        if let Err(e) = scorer_core::selection::Selector::new(sel.selector_config()) {
            let key = match e {
                // `SelectorConfig::default_temperature` is the section's `temperature`.
                SelectionError::InvalidConfig {
                    field: "default_temperature",
                    ..
                } => "selection.temperature".to_owned(),
                SelectionError::InvalidConfig { field, .. } => format!("selection.{field}"),
                _ => "selection".to_owned(),
            };
            return bad(&key, e.to_string());
        }
        if let Err(e) = self.log.validate() {
            return bad(
                &format!("log.{}", e.split_whitespace().next().unwrap_or("")),
                e,
            );
        }
        if let Err(e) = self.model.validate() {
            return bad(
                &format!("model.{}", e.split_whitespace().next().unwrap_or("")),
                e,
            );
        }
        let step = self.reload.max_weight_step;
        if !(step.is_finite() && step > 0.0) {
            return bad(
                "reload.max_weight_step",
                format!("must be finite and > 0, got {step}"),
            );
        }
        if sel.remembered_decisions == 0 {
            return bad(
                "selection.remembered_decisions",
                "must be at least 1".to_owned(),
            );
        }
        Ok(())
    }

    /// Stable SHA-256 of the effective configuration (its canonical JSON), hex, first 16 chars.
    ///
    /// Written next to decisions so a row can be traced to the config that produced it.
    pub fn hash(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        let digest = Sha256::digest(&json);
        digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
    }
}

//! A configuration canary: a candidate configuration scores a slice of the
//! decisions, chosen by key hash or by key prefix, beside the stable one,
//! until an operator promotes it to every decision or aborts it.
//!
//! The slice is sticky per key (a key always meets the same arm), as
//! Envoy's runtime fractions and the model A/B split are. The candidate
//! passes the same checks as a hot reload ([`crate::config_reload::plan`])
//! against the configuration in force, and may change only the keys read
//! per decision ([`CANARY_KEYS`]): the telemetry, penalty, evidence and
//! outlier sections shape per-worker state that every decision shares, so
//! a slice of decisions cannot have its own.
//!
//! Each arm counts its decisions and the outcomes of its remembered picks
//! (latency histogram, failures), so the arms compare live; the decision
//! log tags each decision's `arm` (`stable`, `canary`) beside the
//! `config_hash` that scored it, for `trainer compare --config-arms`.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::ActiveConfig;
use crate::config_reload::ConfigChange;
use crate::self_check::{AtomicHistogram, HistogramSnapshot, LATENCY_BUCKETS_MS};
use scorer_core::selection::Selector;

/// Dotted-key prefixes a canary may change: what is read per decision.
pub const CANARY_KEYS: &[&str] = &["scoring.", "freshness.", "cost.", "selection.", "features."];

/// Longest `key_prefix` or `reason`, bytes.
pub const MAX_CANARY_TEXT_BYTES: usize = 256;
/// Smallest `fraction`: one key in ten thousand.
pub const MIN_CANARY_FRACTION: f64 = 1e-4;

/// Which configuration scored a decision while a canary runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ConfigArm {
    /// The configuration in force.
    Stable,
    /// The candidate.
    Canary,
}

impl ConfigArm {
    /// `"stable"` or `"canary"`, as in the decision log's `arm` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stable => "stable",
            Self::Canary => "canary",
        }
    }
}

/// The body of `POST /v1/admin/config/canary`: the slice of decisions the
/// candidate scores, exactly one of `fraction` and `key_prefix`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CanaryRequest {
    /// The fraction of keys, by key hash, 0.0001 <= fraction < 1.
    #[serde(default)]
    #[schema(minimum = 0.0001, exclusive_maximum = 1.0)]
    pub fraction: Option<f64>,
    /// Or every key that starts with this prefix, 1..=256 bytes.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 256)]
    pub key_prefix: Option<String>,
    /// Why, up to 256 bytes of printable text.
    #[serde(default)]
    #[schema(max_length = 256)]
    pub reason: Option<String>,
}

/// The slice of decisions a canary scores.
#[derive(Debug, Clone, PartialEq)]
pub enum CanarySplit {
    /// Keys whose hash falls below the fraction.
    Fraction(f64),
    /// Keys starting with the prefix.
    KeyPrefix(String),
}

impl CanarySplit {
    /// The split `req` asks for.
    ///
    /// # Errors
    /// Not exactly one of the two, a fraction outside [0.0001, 1), or a prefix
    /// that is empty, too long or holds control characters: the message.
    pub fn from_request(req: &CanaryRequest) -> Result<Self, String> {
        match (req.fraction, &req.key_prefix) {
            (Some(f), None) if (MIN_CANARY_FRACTION..1.0).contains(&f) => Ok(Self::Fraction(f)),
            (Some(f), None) => Err(format!(
                "`fraction` must be a number with {MIN_CANARY_FRACTION} <= fraction < 1, got {}",
                scorer_core::fmt::exact(f)
            )),
            (None, Some(p)) => {
                check_text("key_prefix", p)?;
                if p.is_empty() {
                    return Err("`key_prefix` must not be empty".into());
                }
                Ok(Self::KeyPrefix(p.clone()))
            }
            _ => Err("give exactly one of `fraction` and `key_prefix`".into()),
        }
    }

    /// Whether the canary scores `key`.
    pub fn takes(&self, key: &str) -> bool {
        match self {
            Self::Fraction(f) => canary_unit(key) < *f,
            Self::KeyPrefix(p) => key.starts_with(p.as_str()),
        }
    }
}

/// Checks an operator's text field.
pub(crate) fn check_text(field: &str, s: &str) -> Result<(), String> {
    if s.len() > MAX_CANARY_TEXT_BYTES {
        return Err(format!(
            "`{field}` must be at most {MAX_CANARY_TEXT_BYTES} bytes, got {}",
            s.len()
        ));
    }
    if s.chars().any(char::is_control) {
        return Err(format!("`{field}` must not hold control characters"));
    }
    Ok(())
}

/// The key's position in `[0, 1)` for the canary split: FNV-1a 64 of a
/// salt and the key, then splitmix64's finaliser. Salted so that the
/// canary's slice is not the model A/B split's.
pub fn canary_unit(key: &str) -> f64 {
    let mut z = b"config-canary\0"
        .iter()
        .chain(key.as_bytes())
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// One arm's live counts.
#[derive(Debug)]
pub(crate) struct ArmStats {
    decisions: AtomicU64,
    outcomes: AtomicU64,
    failures: AtomicU64,
    latency_ms: AtomicHistogram,
}

impl Default for ArmStats {
    fn default() -> Self {
        Self {
            decisions: AtomicU64::new(0),
            outcomes: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            latency_ms: AtomicHistogram::new(&LATENCY_BUCKETS_MS),
        }
    }
}

/// One arm of a canary as `GET /v1/config/canary`, `/metrics` and
/// the status page show it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ArmSnapshot {
    /// `stable` or `canary`.
    pub arm: ConfigArm,
    /// Hash of the configuration this arm scores with.
    pub config_hash: String,
    /// Decisions it made.
    pub decisions: u64,
    /// Outcomes of its remembered picks.
    pub outcomes: u64,
    /// Of which failures (`success: false`).
    pub failures: u64,
    /// failures / outcomes; absent without outcomes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_rate: Option<f64>,
    /// Median outcome latency, ms, interpolated in its histogram bucket as
    /// Prometheus's `histogram_quantile` does; absent without outcomes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_ms: Option<f64>,
    /// 99th percentile outcome latency, ms, likewise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
    /// The outcome latency histogram, ms.
    #[serde(skip)]
    pub latency_ms: HistogramSnapshot,
}

/// The canary in force.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct CanaryStatus {
    /// Hash of the candidate configuration.
    pub candidate_hash: String,
    /// Hash of the stable configuration it runs beside.
    pub stable_hash: String,
    /// The fraction of keys it scores, when split by hash.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fraction: Option<f64>,
    /// The key prefix it scores, when split by prefix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_prefix: Option<String>,
    /// Every key the candidate changes, with the stable and the candidate value.
    #[schema(value_type = Vec<Object>)]
    pub changes: Vec<ConfigChange>,
    /// Why (empty when none was given).
    pub reason: String,
    /// Who started it (the credential's name, `anonymous` without auth).
    pub set_by: String,
    /// When it started, monotonic ms of the service's clock.
    pub started_ms: u64,
    /// The two arms, stable first.
    pub arms: Vec<ArmSnapshot>,
}

/// A running canary: the candidate, its selector and split, and both arms'
/// counts. `generation` tells its picks from an earlier canary's.
#[derive(Debug)]
pub(crate) struct Canary {
    pub(crate) generation: u64,
    pub(crate) candidate: ActiveConfig,
    pub(crate) selector: Selector,
    pub(crate) split: CanarySplit,
    pub(crate) stable_hash: std::sync::Arc<str>,
    pub(crate) changes: Vec<ConfigChange>,
    pub(crate) reason: String,
    pub(crate) set_by: String,
    pub(crate) started_ms: u64,
    arms: [ArmStats; 2],
}

impl Canary {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        generation: u64,
        candidate: ActiveConfig,
        selector: Selector,
        split: CanarySplit,
        stable_hash: std::sync::Arc<str>,
        changes: Vec<ConfigChange>,
        reason: String,
        set_by: String,
        started_ms: u64,
    ) -> Self {
        Self {
            generation,
            candidate,
            selector,
            split,
            stable_hash,
            changes,
            reason,
            set_by,
            started_ms,
            arms: [ArmStats::default(), ArmStats::default()],
        }
    }

    fn arm(&self, arm: ConfigArm) -> &ArmStats {
        &self.arms[usize::from(arm == ConfigArm::Canary)]
    }

    /// Counts a decision made by `arm`.
    pub(crate) fn on_decision(&self, arm: ConfigArm) {
        self.arm(arm).decisions.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts the outcome of a pick `arm` made.
    pub(crate) fn on_outcome(&self, arm: ConfigArm, latency_ms: f64, success: bool) {
        let a = self.arm(arm);
        a.outcomes.fetch_add(1, Ordering::Relaxed);
        if !success {
            a.failures.fetch_add(1, Ordering::Relaxed);
        }
        a.latency_ms.observe(latency_ms);
    }

    /// What it shows now.
    pub(crate) fn status(&self) -> CanaryStatus {
        let arm = |which: ConfigArm, hash: &str| {
            let a = self.arm(which);
            let outcomes = a.outcomes.load(Ordering::Relaxed);
            let failures = a.failures.load(Ordering::Relaxed);
            let latency_ms = a.latency_ms.snapshot();
            ArmSnapshot {
                arm: which,
                config_hash: hash.to_owned(),
                decisions: a.decisions.load(Ordering::Relaxed),
                outcomes,
                failures,
                error_rate: (outcomes > 0).then(|| failures as f64 / outcomes as f64),
                p50_ms: histogram_quantile(0.5, &latency_ms),
                p99_ms: histogram_quantile(0.99, &latency_ms),
                latency_ms,
            }
        };
        let (fraction, key_prefix) = match &self.split {
            CanarySplit::Fraction(f) => (Some(*f), None),
            CanarySplit::KeyPrefix(p) => (None, Some(p.clone())),
        };
        CanaryStatus {
            candidate_hash: self.candidate.hash.to_string(),
            stable_hash: self.stable_hash.to_string(),
            fraction,
            key_prefix,
            changes: self.changes.clone(),
            reason: self.reason.clone(),
            set_by: self.set_by.clone(),
            started_ms: self.started_ms,
            arms: vec![
                arm(ConfigArm::Stable, &self.stable_hash),
                arm(ConfigArm::Canary, &self.candidate.hash),
            ],
        }
    }
}

/// The `q` quantile of `h`, interpolated linearly inside its bucket (from
/// the bucket below's bound, 0 for the first) as Prometheus's
/// `histogram_quantile`; in the `+Inf` bucket, the highest finite bound.
/// `None` for an empty histogram.
pub fn histogram_quantile(q: f64, h: &HistogramSnapshot) -> Option<f64> {
    if h.count == 0 {
        return None;
    }
    let rank = q * h.count as f64;
    let (mut below, mut lower) = (0u64, 0.0);
    for &(upper, n) in &h.buckets {
        if n > 0 && (below + n) as f64 >= rank {
            if upper.is_infinite() {
                return Some(lower);
            }
            return Some(lower + (upper - lower) * ((rank - below as f64) / n as f64));
        }
        below += n;
        if upper.is_finite() {
            lower = upper;
        }
    }
    Some(lower)
}

#[cfg(test)]
#[path = "canary_tests.rs"]
mod tests;

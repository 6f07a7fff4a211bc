//! `[model]` configuration (issue #6), env `SCORER_MODEL__*`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::blend::{
    Blend, DEFAULT_BLEND_MODEL, DEFAULT_BLEND_RULE, DEFAULT_FACTOR_MAX, DEFAULT_FACTOR_MIN,
    DEFAULT_SCALE,
};

/// Default model directory, relative to the working directory.
pub const DEFAULT_MODEL_DIR: &str = "models/default";
/// Default inference budget per request, µs.
pub const DEFAULT_BUDGET_US: u64 = 100;
/// Default number of consecutive budget misses that opens the breaker.
pub const DEFAULT_BREAKER_AFTER: u32 = 20;
/// Default time the breaker stays open before a half-open trial, ms.
pub const DEFAULT_BREAKER_OPEN_MS: u64 = 5_000;

/// `[model]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    /// Model directory (`card.json`, `model.onnx`, `golden.json`). Default `models/default`.
    pub dir: PathBuf,
    /// Use the model at all. Default true.
    pub enabled: bool,
    /// Inference budget per request, µs; a slower inference is discarded.
    /// 0 discards every output (to exercise the fallback). Default 100.
    pub budget_us: u64,
    /// Consecutive budget misses that open the breaker, >= 1. Default 20.
    pub breaker_after: u32,
    /// How long an open breaker skips the model, ms, >= 1. Default 5000.
    pub breaker_open_ms: u64,
    /// Weight of the model's predicted `ln(latency / E)`, an exponent on its
    /// cost factor, in [0, 1000]. Default 1.
    pub blend_model: f64,
    /// Weight of the deterministic rule action, >= 0. Default 0.3.
    pub blend_rule: f64,
    /// Score points per unit of rule action, in [0, 100]. Default 5.
    pub scale: f64,
    /// Lowest model cost factor, in (0, 1]. Default 0.25.
    pub factor_min: f64,
    /// Highest model cost factor, in [1, 100]. Default 4.
    pub factor_max: f64,
    /// Use the model where the decider shares its workers with other
    /// routers deciding on the same view (an embedded balancer whose view
    /// counts other routers). Default false: there the model's correction
    /// is common to every router and correlates their picks (herding).
    pub many_deciders: bool,
    /// `[model.shadow]`: a model evaluated beside the primary, never used.
    pub shadow: ShadowConfig,
    /// `[model.ab]`: a second model serving a fraction of keys.
    pub ab: AbConfig,
}

/// `[model.shadow]` section.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShadowConfig {
    /// Shadow model directory; unset = no shadow.
    pub dir: Option<PathBuf>,
}

/// `[model.ab]` section.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AbConfig {
    /// Arm B's model directory; unset = no A/B split.
    pub dir: Option<PathBuf>,
    /// Fraction of keys (by a stable hash) served by arm B, 0..=1. Default 0.
    pub fraction: f64,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            dir: PathBuf::from(DEFAULT_MODEL_DIR),
            enabled: true,
            budget_us: DEFAULT_BUDGET_US,
            breaker_after: DEFAULT_BREAKER_AFTER,
            breaker_open_ms: DEFAULT_BREAKER_OPEN_MS,
            blend_model: DEFAULT_BLEND_MODEL,
            blend_rule: DEFAULT_BLEND_RULE,
            scale: DEFAULT_SCALE,
            factor_min: DEFAULT_FACTOR_MIN,
            factor_max: DEFAULT_FACTOR_MAX,
            many_deciders: false,
            shadow: ShadowConfig::default(),
            ab: AbConfig::default(),
        }
    }
}

impl ModelConfig {
    /// The blend weights.
    pub fn blend(&self) -> Blend {
        Blend {
            blend_model: self.blend_model,
            blend_rule: self.blend_rule,
            scale: self.scale,
            factor_min: self.factor_min,
            factor_max: self.factor_max,
        }
    }

    /// Checks ranges; the error starts with the offending key (without `model.`).
    ///
    /// # Errors
    /// A message naming the key and the accepted range.
    pub fn validate(&self) -> Result<(), String> {
        if self.dir.as_os_str().is_empty() {
            return Err("dir must not be empty".to_owned());
        }
        if self.breaker_after == 0 {
            return Err("breaker_after must be at least 1".to_owned());
        }
        if self.breaker_open_ms == 0 {
            return Err("breaker_open_ms must be at least 1".to_owned());
        }
        for (key, v) in [
            ("blend_model", self.blend_model),
            ("blend_rule", self.blend_rule),
        ] {
            if !(v.is_finite() && (0.0..=1_000.0).contains(&v)) {
                return Err(format!("{key} must be in [0, 1000], got {v}"));
            }
        }
        if !(self.scale.is_finite() && (0.0..=100.0).contains(&self.scale)) {
            return Err(format!(
                "scale must be in [0, 100] points, got {}",
                self.scale
            ));
        }
        if !(self.factor_min.is_finite() && self.factor_min > 0.0 && self.factor_min <= 1.0) {
            return Err(format!(
                "factor_min must be in (0, 1], got {}",
                self.factor_min
            ));
        }
        if !(self.factor_max.is_finite() && (1.0..=100.0).contains(&self.factor_max)) {
            return Err(format!(
                "factor_max must be in [1, 100], got {}",
                self.factor_max
            ));
        }
        if !(self.ab.fraction.is_finite() && (0.0..=1.0).contains(&self.ab.fraction)) {
            return Err(format!(
                "ab.fraction must be in [0, 1], got {}",
                self.ab.fraction
            ));
        }
        if self.ab.fraction > 0.0 && self.ab.dir.is_none() {
            return Err(format!(
                "ab.fraction is {} but ab.dir is unset: no key could be served by arm B; set [model.ab] dir, or fraction = 0",
                self.ab.fraction
            ));
        }
        Ok(())
    }
}

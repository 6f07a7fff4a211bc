//! Planning a configuration hot reload (issue #8, "Config hot reload").
//!
//! A reload (SIGHUP or `POST /v1/admin/reload`) goes through [`plan`] before
//! anything changes:
//!
//! 1. the whole new config is validated ([`Config::validate`]);
//! 2. the two configs are flattened to dotted keys and compared; each
//!    difference becomes a [`ConfigChange`] with the old and new value
//!    (`admin.token` is shown as `"<redacted>"`);
//! 3. a change to a key read only at start-up ([`RESTART_KEYS`]: the
//!    listener, the HTTP layers' limits, the decision-log writer, the table
//!    sizes) refuses the whole reload, since applying the rest would leave
//!    the service running a config that is not the one on disk;
//! 4. a change to a *weight* ([`is_weight`]: score deductions, points per
//!    unit, damping factors, the model blend) larger than
//!    `[reload] max_weight_step` × max(|old|, 1) refuses the whole reload
//!    unless `force` is set, so that a typo (`cpu_max_deduct = 200`) or a
//!    large retune cannot swing every score at once. Walk a weight in
//!    several reloads, or force it. The limit itself ([`STEP_LIMIT_KEY`])
//!    obeys the same rule when it rises (lowering it is free), so raising it
//!    in one reload and using it in the next is no way around the rule.
//!
//! The limit is relative (a fraction of the current value) because weights
//! come in different units: deductions in score points (0..=100), the blend
//! weights and damping factors as fractions. The floor of 1 lets a weight
//! leave zero.
//!
//! Thresholds (`cpu_high`, `queue_high_watermark`, …) and everything else
//! change freely once valid.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::{Config, ConfigError};

/// The dotted key of `[reload] max_weight_step`, which may rise by at most
/// its own step per reload without `force`.
pub const STEP_LIMIT_KEY: &str = "reload.max_weight_step";

/// Default `[reload] max_weight_step`: a weight may move by 25% of its
/// current magnitude (at least 0.25 units) per reload.
pub const DEFAULT_MAX_WEIGHT_STEP: f64 = 0.25;

/// Keys read once at start-up: changing one needs a restart. A key matches
/// when it equals an entry or starts with an entry ending in `.`.
pub const RESTART_KEYS: &[&str] = &[
    "server.listen",
    "server.max_body_bytes",
    "server.max_concurrent_scores",
    "server.request_timeout_ms",
    "server.header_read_timeout_ms",
    "server.idle_timeout_ms",
    "server.body_read_timeout_ms",
    "server.max_connections",
    "log.",
    "selection.remembered_decisions",
    "bus.",
];

/// The key named when a reload would turn TLS on or off.
pub const TLS_SWITCH_KEY: &str = "server.tls.cert_path";

/// Keys whose values are secret: shown as `"<redacted>"` in changes, logs
/// and the config view. A key matches when it equals an entry or starts
/// with an entry ending in `.`.
pub const SECRET_KEYS: &[&str] = &[
    "admin.token",
    "auth.agent.",
    "auth.router.",
    "auth.reader.",
    "auth.admin.",
    "bus.password",
    "bus.token",
    "bus.nkey_seed",
];

/// Whether the dotted `key` holds a secret (see [`SECRET_KEYS`]).
pub fn is_secret(key: &str) -> bool {
    SECRET_KEYS.iter().any(|s| match s.strip_suffix('.') {
        Some(section) => key
            .strip_prefix(section)
            .is_some_and(|rest| rest.starts_with('.')),
        None => key == *s,
    })
}

/// `config` (a serialised [`Config`]) with every secret leaf replaced by
/// `"<redacted>"`.
pub fn redact_secrets(config: &mut Value) {
    fn walk(prefix: &str, v: &mut Value) {
        match v {
            Value::Object(map) => {
                for (k, child) in map.iter_mut() {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&key, child);
                }
            }
            leaf if !leaf.is_null() && is_secret(prefix) => *leaf = Value::from("<redacted>"),
            _ => {}
        }
    }
    walk("", config);
}

/// `[reload]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReloadConfig {
    /// Largest change of a weight per reload without `force`, as a fraction
    /// of max(|current value|, 1). Finite, `> 0`. Default
    /// [`DEFAULT_MAX_WEIGHT_STEP`] (0.25).
    pub max_weight_step: f64,
}

impl Default for ReloadConfig {
    fn default() -> Self {
        Self {
            max_weight_step: DEFAULT_MAX_WEIGHT_STEP,
        }
    }
}

/// One key whose value differs between the current and the new config.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfigChange {
    /// Dotted key, e.g. `scoring.cpu_max_deduct`.
    pub key: String,
    /// Current value (`null` when the key is absent, e.g. an unset option).
    pub old: Value,
    /// Value after the reload.
    pub new: Value,
}

/// Why a reload was refused. Nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The new configuration does not load or validate.
    #[error("new configuration refused: {0}")]
    Invalid(#[from] ConfigError),
    /// Keys read only at start-up changed.
    #[error("these keys take effect only at start-up; restart to change them: {}", .keys.join(", "))]
    RestartRequired {
        /// The changed start-up keys.
        keys: Vec<String>,
    },
    /// A weight moved by more than the allowed step.
    #[error(
        "`{key}` would change from {old} to {new}, more than the allowed step of {max_step} \
         ([reload] max_weight_step = {fraction} × max(|old|, 1)); change it in smaller steps or reload with force=true"
    )]
    StepTooLarge {
        /// The weight's dotted key.
        key: String,
        /// Current value.
        old: f64,
        /// Requested value.
        new: f64,
        /// Largest allowed |new − old|.
        max_step: f64,
        /// The configured fraction.
        fraction: f64,
    },
    /// A model configured in the new config was refused (see `GET /v1/model`).
    #[error("model refused: {0}")]
    Model(String),
}

/// Whether `key` (dotted) is a weight subject to the step limit: in
/// `[scoring]` or `[freshness]`, a name ending in `_deduct`, `_factor` or
/// `_weight` or containing `_points_per_`; and the model blend
/// (`model.blend_model`, `model.blend_rule`, `model.scale`).
pub fn is_weight(key: &str) -> bool {
    if matches!(
        key,
        "model.blend_model" | "model.blend_rule" | "model.scale"
    ) {
        return true;
    }
    let Some(name) = key
        .strip_prefix("scoring.")
        .or_else(|| key.strip_prefix("freshness."))
    else {
        return false;
    };
    name.ends_with("_deduct")
        || name.ends_with("_factor")
        || name.ends_with("_weight")
        || name.contains("_points_per_")
}

/// Whether changing `key` needs a restart (see [`RESTART_KEYS`]).
pub fn needs_restart(key: &str) -> bool {
    RESTART_KEYS.iter().any(|r| match r.strip_suffix('.') {
        Some(prefix) => key.starts_with(prefix) && key[prefix.len()..].starts_with('.'),
        None => key == *r,
    })
}

/// The changes from `old` to `new`, in key order, with secrets redacted.
pub fn diff(old: &Config, new: &Config) -> Vec<ConfigChange> {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    flatten(
        "",
        &serde_json::to_value(old).unwrap_or(Value::Null),
        &mut a,
    );
    flatten(
        "",
        &serde_json::to_value(new).unwrap_or(Value::Null),
        &mut b,
    );
    let a: std::collections::BTreeMap<_, _> = a.into_iter().collect();
    let b: std::collections::BTreeMap<_, _> = b.into_iter().collect();
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter_map(|k| {
            let (o, n) = (
                a.get(k).cloned().unwrap_or(Value::Null),
                b.get(k).cloned().unwrap_or(Value::Null),
            );
            (o != n).then(|| {
                let redact = |v: Value| {
                    if is_secret(k) && !v.is_null() {
                        Value::from("<redacted>")
                    } else {
                        v
                    }
                };
                ConfigChange {
                    key: k.clone(),
                    old: redact(o),
                    new: redact(n),
                }
            })
        })
        .collect()
}

/// Checks that `new` may replace `old` and returns the changes.
///
/// # Errors
/// [`ReloadError::Invalid`] when `new` fails validation,
/// [`ReloadError::RestartRequired`] when a start-up key changed,
/// [`ReloadError::StepTooLarge`] when a weight moved by more than `old`'s
/// `[reload] max_weight_step` allows and `force` is false. (The step of the
/// *current* config applies, so a reload cannot raise its own limit and use
/// it at once; and the limit itself rises by at most one step per reload,
/// so two reloads cannot do it either.)
pub fn plan(old: &Config, new: &Config, force: bool) -> Result<Vec<ConfigChange>, ReloadError> {
    new.validate()?;
    let changes = diff(old, new);
    let mut restart: Vec<String> = changes
        .iter()
        .filter(|c| needs_restart(&c.key))
        .map(|c| c.key.clone())
        .collect();
    // New certificate files reload; turning TLS on or off changes what the
    // listener speaks, which only a restart can.
    if old.server.tls.enabled() != new.server.tls.enabled() {
        restart.push(TLS_SWITCH_KEY.to_owned());
    }
    if !restart.is_empty() {
        return Err(ReloadError::RestartRequired { keys: restart });
    }
    if !force {
        let fraction = old.reload.max_weight_step;
        for c in changes.iter() {
            let (Some(o), Some(n)) = (c.old.as_f64(), c.new.as_f64()) else {
                continue;
            };
            // The limit itself rises by at most one step per reload (lowering
            // it is always safe): otherwise two reloads without force, one
            // raising the limit and one using it, would make any jump.
            let limit_raised = c.key == STEP_LIMIT_KEY && n > o;
            if !is_weight(&c.key) && !limit_raised {
                continue;
            }
            let max_step = fraction * o.abs().max(1.0);
            // A hair of tolerance so that an exact step (0.25 × 20 = 5) passes
            // despite binary rounding of the two decimals.
            if (n - o).abs() > max_step * (1.0 + 1e-12) {
                return Err(ReloadError::StepTooLarge {
                    key: c.key.clone(),
                    old: o,
                    new: n,
                    max_step,
                    fraction,
                });
            }
        }
    }
    Ok(changes)
}

fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, out);
            }
        }
        _ => out.push((prefix.to_owned(), v.clone())),
    }
}

#[cfg(test)]
#[path = "config_reload_tests.rs"]
mod tests;

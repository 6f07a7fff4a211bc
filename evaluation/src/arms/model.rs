//! The model arms: a learned model in the service's scoring path.
//!
//! * `model`: the service's rules + dynamics + the shipped default model
//!   (`models/default`, resolved from this crate's `CARGO_MANIFEST_DIR`, so
//!   it works from any working directory; `--model-dir` overrides it),
//!   loaded with [`ModelHub::load`] and attached with
//!   [`scorer_engine::Engine::with_models`], exactly as the service binary does.
//! * `model-retrained`: the loop closed in-process, as the model issue
//!   defines it. The scenario's `service-rules` arm (the shipped
//!   configuration with the model off, [`RETRAIN_LOGGING_ARM`]) runs with a
//!   decision log on a **held-out seed** (`seed + RETRAIN_SEED_OFFSET`: same
//!   scenario, a different workload draw, so the evaluation run is not the
//!   training run), the trainer library ([`trainer::pipeline::run_train`],
//!   the code behind `trainer train`, default flags) trains a model on those
//!   logs, and the scenario runs again with the shipped configuration and
//!   that model in place of the default one.
//!
//! The `service` arm (the service as shipped) loads the same default model
//! the same way.
//!
//! **Selection policy.** Every arm with a model picks with the configured
//! default policy (`config.selection.default_policy`; the score request
//! names none), as the shipped service does: `model-retrained` differs from
//! `service-rules` only by its model, so `model-retrained` vs
//! `service-rules` is what the retrained model adds to the service as
//! shipped, and `service` vs `service-rules` what the shipped default model
//! adds. (`model` is therefore the `service` arm under another name, kept
//! so that older commands and result files still read.)
//!
//! **Time.** The simulator's time is simulated: inference does not advance
//! it, whatever it costs in wall time. The model's budget, however, is
//! measured on the real wall clock (`ModelHub` times each inference with
//! [`SystemClock`]); a budget miss would silently drop the model's output for
//! that decision and make a run depend on machine load. The simulator
//! therefore sets a generous [`SIM_BUDGET_US`] (10 s) so every inference is
//! used and a run stays a pure function of (scenario, policy, seed); the
//! fallback counts in results.json (`model.fallbacks`) show that none
//! occurred. The budget itself is exercised by the service's own tests and
//! the testbed, not here.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use scorer_core::clock::SystemClock;
use scorer_engine::config::Config;
use scorer_model::{ModelHub, Slot};
use serde::Serialize;

/// The arm whose logs train `model-retrained`: the shipped configuration
/// with the model off.
pub const RETRAIN_LOGGING_ARM: &str = "service-rules";

/// Seed offset of the logging run that trains `model-retrained`.
pub const RETRAIN_SEED_OFFSET: u64 = 1_000;

/// Inference budget in the simulator, µs: generous so that no wall-clock
/// budget miss changes a (simulated, deterministic) run.
pub const SIM_BUDGET_US: u64 = 10_000_000;

/// The shipped default model, `<repo>/models/default`, independent of the
/// working directory.
pub fn default_model_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .join("models")
        .join("default")
}

/// A hub holding the model in `dir` with budget `budget_us`, on top of the
/// model settings of `config`.
///
/// # Errors
/// The model was refused (missing files, schema mismatch, golden rows off):
/// the arm must not silently run on rules alone.
pub fn load_hub(dir: &Path, budget_us: u64, config: &Config) -> Result<Arc<ModelHub>, String> {
    let mut cfg = config.model.clone();
    cfg.dir = dir.to_path_buf();
    cfg.enabled = true;
    cfg.budget_us = budget_us;
    let hub = ModelHub::load(&cfg, Arc::new(SystemClock::new()));
    if let Slot::Refused { message, .. } = &hub.current().primary {
        return Err(format!("model {} refused: {message}", dir.display()));
    }
    Ok(Arc::new(hub))
}

/// What results.json says about a model arm.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelArmInfo {
    /// `model_version` of the model used (name + hash of `model.onnx`).
    pub version: String,
    /// Service selection policy of the arm.
    pub selection_policy: String,
    /// Inference budget, µs (see [`SIM_BUDGET_US`]).
    pub budget_us: u64,
    /// Decisions that asked the model path.
    pub decisions: u64,
    /// Decisions whose final scores used the model's output.
    pub used: u64,
    /// Decisions that fell back to the rules, by reason (non-zero only).
    pub fallbacks: Vec<(String, u64)>,
    /// Mean over decisions of the ratio of the largest to the smallest of
    /// the model's cost factors across the candidates (1 = the model changes
    /// no ranking); `None` where it is not measured (the testbed scores over
    /// HTTP, whose compact answer carries no factors).
    pub factor_spread_mean: Option<f64>,
    /// Largest such ratio; `None` where not measured.
    pub factor_spread_max: Option<f64>,
    /// For `model-retrained`: how the model was trained.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retrain: Option<RetrainInfo>,
}

impl ModelArmInfo {
    /// Counters of `hub` after a run of an arm selecting with
    /// `selection_policy`.
    pub fn from_hub(
        hub: &ModelHub,
        selection_policy: &str,
        spread: Option<super::service::ModelSpread>,
        retrain: Option<RetrainInfo>,
    ) -> Self {
        let spread = spread.filter(|s| s.decisions > 0);
        let r3 = |x: f64| (x * 1000.0).round() / 1000.0;
        let set = hub.current();
        let s = hub.stats().snapshot();
        Self {
            version: set
                .primary
                .model()
                .map_or_else(String::new, |m| m.card.model_version.clone()),
            selection_policy: selection_policy.to_owned(),
            budget_us: set.cfg.budget_us,
            decisions: s.calls,
            used: s.used,
            fallbacks: s.fallbacks.into_iter().filter(|(_, n)| *n > 0).collect(),
            factor_spread_mean: spread.map(|s| r3(s.mean_ratio)),
            factor_spread_max: spread.map(|s| r3(s.max_ratio)),
            retrain,
        }
    }
}

/// How `model-retrained`'s model was trained (from the trainer's summary).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetrainInfo {
    /// Arm that wrote the training logs.
    pub logging_arm: String,
    /// Seed of the logging run (held out from the evaluation seed).
    pub logging_seed: u64,
    /// Target counts (decisions, picked rows, rows with a target, failures, slow).
    pub target_counts: serde_json::Value,
    /// Training rows (earliest by decision time).
    pub train_rows: usize,
    /// Validation rows (latest by decision time).
    pub valid_rows: usize,
    /// Validation R² of the model's `ln(latency / E)` (`null` without variance).
    pub valid_r2: Option<f64>,
    /// Validation MAE in log space of the model.
    pub valid_mae_log: f64,
    /// Validation MAE in log space of the rules (predicting E exactly).
    pub valid_rules_mae_log: f64,
    /// Trees, depth, seed… (`trainer train` defaults).
    pub params: serde_json::Value,
    /// Where the logs and the model were kept (`--log-dir`), if anywhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept_in: Option<String>,
}

impl RetrainInfo {
    /// A fully measured record (no `null` field), for the target tests.
    #[cfg(test)]
    pub(crate) fn example() -> Self {
        Self {
            logging_arm: RETRAIN_LOGGING_ARM.to_owned(),
            logging_seed: 1_001,
            target_counts: serde_json::json!({"decisions": 10}),
            train_rows: 8,
            valid_rows: 2,
            valid_r2: Some(0.2),
            valid_mae_log: 0.3,
            valid_rules_mae_log: 0.4,
            params: serde_json::json!({"trees": 1}),
            kept_in: None,
        }
    }
}

/// A model trained on a logging run; the directory is removed on drop
/// unless it is kept under `--log-dir`.
#[derive(Debug)]
pub struct Retrained {
    /// The model directory (`card.json`, `model.onnx`, …).
    pub model_dir: PathBuf,
    /// How it was trained.
    pub info: RetrainInfo,
    cleanup: Option<PathBuf>,
}

impl Drop for Retrained {
    fn drop(&mut self) {
        if let Some(dir) = self.cleanup.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Working directory of a retrain: `log_dir/<scenario>/model-retrained`
/// (kept) or a fresh directory under the system temp dir (removed).
pub fn retrain_dir(log_dir: Option<&Path>, scenario: &str) -> (PathBuf, bool) {
    static N: AtomicU64 = AtomicU64::new(0);
    match log_dir {
        Some(d) => (d.join(scenario).join("model-retrained"), true),
        None => (
            std::env::temp_dir().join(format!(
                "evaluate-retrain-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            )),
            false,
        ),
    }
}

/// Train a model on the decision logs under `logs` (`decisions/`,
/// `outcomes/`) into `work/retrained` with the trainer library and
/// `trainer train`'s default flags.
///
/// # Errors
/// The trainer's error (e.g. too few labelled rows), as text.
pub fn train_on_logs(
    logs: &Path,
    work: &Path,
    keep: bool,
    logging_seed: u64,
) -> Result<Retrained, String> {
    use trainer::dataset::TargetRule;
    use trainer::pipeline::{TrainOptions, run_train};
    use trainer::progress::Progress;
    use trainer::train::TrainParams;

    let model_dir = work.join("retrained");
    let opts = TrainOptions {
        logs: vec![logs.join("decisions"), logs.join("outcomes")],
        out: model_dir.clone(),
        params: TrainParams::default(),
        target: TargetRule::default(),
        valid_fraction: 0.2,
        memory_budget_bytes: trainer::budget::DEFAULT_MEMORY_BUDGET_BYTES,
        sample: None,
        network: None,
        spill_dir: None,
    };
    let cleanup = (!keep).then(|| work.to_path_buf());
    let summary = match run_train(&opts, Progress::hidden()) {
        Ok(s) => s,
        Err(e) => {
            if let Some(dir) = &cleanup {
                let _ = std::fs::remove_dir_all(dir);
            }
            return Err(format!(
                "trainer train on the {RETRAIN_LOGGING_ARM} logs: {e}"
            ));
        }
    };
    let info = RetrainInfo {
        logging_arm: RETRAIN_LOGGING_ARM.to_owned(),
        logging_seed,
        target_counts: serde_json::to_value(summary.counts).unwrap_or_default(),
        train_rows: summary.train_rows,
        valid_rows: summary.valid_rows,
        valid_r2: summary.metrics.model.r2,
        valid_mae_log: summary.metrics.model.mae_log,
        valid_rules_mae_log: summary.metrics.rules.mae_log,
        // The leaves actually used, not `null` for "the default".
        params: {
            let mut v = serde_json::to_value(&opts.params).unwrap_or_default();
            v["num_leaves"] = serde_json::json!(opts.params.leaves());
            v
        },
        kept_in: keep.then(|| work.display().to_string()),
    };
    Ok(Retrained {
        model_dir,
        info,
        cleanup,
    })
}

//! `trainer validate`: re-checks a model directory.
//!
//! 1. `card.json` must be for this build's feature schema (version and hash).
//! 2. Golden parity: every `golden.json` row through the service's ONNX path
//!    (tract) and through LightGBM (`model.txt`) must match the stored
//!    prediction within 1e-5 (a changed `model.onnx`, `model.txt` or
//!    `golden.json` fails here).
//! 3. The service's own vetting ([`vet_as_service`]) must pass: a model
//!    `validate` passes is one the service loads.
//! 4. With logs: the rows with a target (the card's target rule) are
//!    scored by LightGBM and by the ONNX path; parity on every row, then
//!    R², MAE and the quantile calibration beside the rules' baseline
//!    ([`crate::regression_metrics`]).

use std::path::{Path, PathBuf};

use lightgbm3::Booster;
use scorer_core::features::{FEATURE_COUNT, FEATURE_SCHEMA_VERSION, schema_hash};
use scorer_model::card::{MAX_TEXT_MODEL_BYTES, ONNX_FILE, TEXT_FILE, read_capped};
use scorer_model::{ModelCard, load_model, read_card, read_golden};
use serde::Serialize;

use crate::budget::DEFAULT_MEMORY_BUDGET_BYTES;
use crate::dataset::{TargetCounts, TargetRule};
use crate::error::{Result, TrainerError, io_err};
use crate::parity::{ParityReport, check};
use crate::pipeline::{golden_parity, parity_on};
use crate::progress::Progress;
use crate::regression_metrics::Metrics;
use crate::stream::for_each_labelled;
use crate::train::predict;

/// A loaded model directory: card, LightGBM booster and the served plan.
pub struct ModelDir {
    /// The directory.
    pub dir: PathBuf,
    /// `card.json`.
    pub card: ModelCard,
    /// `model.txt` loaded in LightGBM.
    pub booster: Booster,
    /// `model.onnx` loaded through the service's ONNX path.
    pub plan: scorer_model::RunnablePlan,
}

impl std::fmt::Debug for ModelDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelDir")
            .field("dir", &self.dir)
            .field("model_version", &self.card.model_version)
            .finish_non_exhaustive()
    }
}

/// Reads `card.json` and checks it is for this build's feature schema.
///
/// # Errors
/// [`TrainerError::Card`] for a missing or malformed card,
/// [`TrainerError::FeatureSchema`] for another schema.
pub fn read_checked_card(dir: &Path) -> Result<ModelCard> {
    let card = read_card(dir)?;
    if card.feature_schema_version != FEATURE_SCHEMA_VERSION
        || card.feature_schema_hash != schema_hash()
        || card.n_features != FEATURE_COUNT
    {
        return Err(TrainerError::FeatureSchema {
            model: dir.to_path_buf(),
            found_version: card.feature_schema_version,
            found_hash: card.feature_schema_hash,
            expected_version: FEATURE_SCHEMA_VERSION,
            expected_hash: schema_hash(),
        });
    }
    Ok(card)
}

/// Runs the service's own vetting of `dir` ([`scorer_model::load_model_dir`]:
/// card, schema hash, tract plan, golden rows present and within 1e-5), so
/// `validate` and `compare` never pass a directory the service would refuse
/// (an empty `golden.json`, a `model.onnx` that is not the card's model).
///
/// # Errors
/// [`TrainerError::Refused`] with the service's reason.
pub fn vet_as_service(dir: &Path) -> Result<()> {
    scorer_model::load_model_dir(dir, &scorer_model::ModelConfig::default(), 0)
        .map(drop)
        .map_err(|source| TrainerError::Refused {
            dir: dir.to_path_buf(),
            source,
        })
}

/// Loads the card, `model.txt` (LightGBM) and `model.onnx` (service path).
///
/// # Errors
/// [`TrainerError::MissingModelDir`], card errors, [`TrainerError::Io`] for a
/// missing `model.txt`, LightGBM and tract errors.
pub fn load_model_dir(dir: &Path) -> Result<ModelDir> {
    if !dir.is_dir() {
        return Err(TrainerError::MissingModelDir(dir.to_path_buf()));
    }
    let card = read_checked_card(dir)?;
    let text_path = dir.join(TEXT_FILE);
    let bytes = read_capped(&text_path, MAX_TEXT_MODEL_BYTES).map_err(io_err(&text_path))?;
    let text = String::from_utf8(bytes)
        .map_err(|e| io_err(&text_path)(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
    let booster = Booster::from_string(&text)?;
    let plan = load_model(dir.join(ONNX_FILE).as_path())?;
    Ok(ModelDir {
        dir: dir.to_path_buf(),
        card,
        booster,
        plan,
    })
}

/// The target rule recorded in a card (`details.target.rule`), if any.
pub fn card_target(card: &ModelCard) -> Option<TargetRule> {
    serde_json::from_value(card.details.get("target")?.get("rule")?.clone()).ok()
}

/// What `trainer validate` found.
#[derive(Debug, Clone, Serialize)]
pub struct ValidateSummary {
    /// Model version from the card.
    pub model_version: String,
    /// Parity reports: golden (served and LightGBM vs stored), and logs.
    pub parity: Vec<ParityReport>,
    /// Target rule used on the logs (the card's).
    pub target: Option<TargetRule>,
    /// Target counts on the logs.
    pub counts: Option<TargetCounts>,
    /// Metrics on the logs.
    pub metrics: Option<Metrics>,
}

/// Runs `trainer validate` (see the module docs).
///
/// # Errors
/// [`TrainerError::Parity`] naming the first offending row; load errors.
pub fn run_validate(dir: &Path, logs: &[PathBuf], progress: Progress) -> Result<ValidateSummary> {
    run_validate_within(dir, logs, DEFAULT_MEMORY_BUDGET_BYTES, progress)
}

/// Rows validated at a time.
pub const VALIDATE_CHUNK_ROWS: usize = 65_536;

/// A parity failure in a chunk, with its row index in the whole set.
fn offset_failure(e: TrainerError, offset: usize) -> TrainerError {
    match e {
        TrainerError::Parity(mut f) => {
            f.row += offset;
            TrainerError::Parity(f)
        }
        other => other,
    }
}

/// [`run_validate`] with the log reader held to `memory_budget_bytes`.
///
/// # Errors
/// As [`run_validate`]; [`TrainerError::MemoryBudget`] when the outcome
/// map does not fit.
pub fn run_validate_within(
    dir: &Path,
    logs: &[PathBuf],
    memory_budget_bytes: u64,
    progress: Progress,
) -> Result<ValidateSummary> {
    let m = load_model_dir(dir)?;
    let golden = read_golden(dir, FEATURE_COUNT)?;
    let mut parity = vec![golden_parity(&m.plan, &golden)?];
    // LightGBM itself must still give the stored probabilities.
    let flat: Vec<f32> = golden.rows.iter().flat_map(|r| r.values()).collect();
    let kinds: Vec<String> = golden.rows.iter().map(|r| r.kind.clone()).collect();
    let stored: Vec<f64> = golden.rows.iter().map(|r| r.prediction).collect();
    let lgb: Vec<f32> = predict(&m.booster, &flat)?
        .into_iter()
        .map(|p| p as f32)
        .collect();
    let mut r = check("golden (model.txt)", &flat, &stored, &lgb, Some(&kinds))?;
    r.set = "golden (LightGBM model.txt vs stored)".into();
    parity.push(r);
    // After the checks above, whose failures print the row's features.
    vet_as_service(dir)?;

    let mut summary = ValidateSummary {
        model_version: m.card.model_version.clone(),
        parity,
        target: None,
        counts: None,
        metrics: None,
    };
    if logs.is_empty() {
        return Ok(summary);
    }
    let rule = card_target(&m.card).unwrap_or_default();
    rule.validate()?;
    // Streamed a chunk at a time: only the predictions, targets and PUT
    // flags of every row are kept (13 bytes a row).
    let (mut p, mut targets, mut is_put) = (Vec::new(), Vec::new(), Vec::new());
    let mut logs_parity: Option<ParityReport> = None;
    let (counts, report) = for_each_labelled(
        logs,
        &rule,
        memory_budget_bytes,
        VALIDATE_CHUNK_ROWS,
        progress,
        &mut |chunk| {
            let (pc, r) = parity_on(
                "logs",
                &m.booster,
                &m.plan,
                &chunk.features,
                Progress::hidden(),
            )
            .map_err(|e| offset_failure(e, p.len()))?;
            logs_parity = Some(match logs_parity.take() {
                None => r,
                Some(acc) => ParityReport {
                    rows: acc.rows + r.rows,
                    max_abs_diff: acc.max_abs_diff.max(r.max_abs_diff),
                    ..acc
                },
            });
            p.extend(pc);
            targets.extend_from_slice(&chunk.targets);
            is_put.extend((0..chunk.len()).map(|i| chunk.is_put(i)));
            Ok(())
        },
    )?;
    if report.decisions_dropped.total() > 0 {
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "warning: {}", report.decisions_dropped);
    }
    let Some(logs_parity) = logs_parity else {
        return Err(TrainerError::NoData(format!(
            "no rows with a target in the logs ({counts})"
        )));
    };
    summary.parity.push(logs_parity);
    summary.metrics = Some(Metrics::compute(&p, &targets, &is_put));
    summary.target = Some(rule);
    summary.counts = Some(counts);
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_rule_comes_from_the_card() {
        let mut card = ModelCard {
            model_version: "m".into(),
            created_at: String::new(),
            trainer_version: String::new(),
            feature_schema_version: String::new(),
            feature_schema_hash: String::new(),
            n_features: FEATURE_COUNT,
            num_trees: 1,
            output: String::new(),
            details: serde_json::Map::new(),
        };
        assert_eq!(card_target(&card), None);
        let rule = TargetRule {
            slow_factor: 3.0,
            ..TargetRule::default()
        };
        card.details
            .insert("target".into(), serde_json::json!({ "rule": rule }));
        assert_eq!(card_target(&card), Some(rule));
    }
}

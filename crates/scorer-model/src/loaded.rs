//! Loading and vetting a model directory (issue #6): card, schema hash,
//! tract plan, golden rows. A model that fails any check is refused with a
//! reason; the service then scores on rules alone.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::breaker::Breaker;
use super::card::{
    CardError, MAX_ONNX_BYTES, MODEL_OUTPUT, ModelCard, ONNX_FILE, PARITY_TOLERANCE, read_capped,
    read_card, read_golden,
};
use super::config::ModelConfig;
use super::fallback::FallbackReason;
use super::op::{ModelError, load_model};
use super::runner::Runner;
use scorer_core::features::schema::{FEATURE_COUNT, schema_hash};

/// Why a model directory was refused.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The directory does not exist.
    #[error("model directory {0} does not exist")]
    Missing(PathBuf),
    /// The path names something other than a directory (a file, say).
    #[error(
        "model path {0} is not a directory: name the directory that holds card.json, model.onnx and golden.json"
    )]
    NotADirectory(PathBuf),
    /// `card.json` or `golden.json` is missing or invalid.
    #[error(transparent)]
    Card(#[from] CardError),
    /// The card's feature schema hash differs from the service's.
    #[error(
        "feature schema mismatch: model trained on schema {model_version} ({model_hash}), service has {service_hash}"
    )]
    SchemaMismatch {
        /// Card's `feature_schema_version`.
        model_version: String,
        /// Card's `feature_schema_hash`.
        model_hash: String,
        /// [`schema_hash`] of this build.
        service_hash: String,
    },
    /// The card's output is not what the service's model stage reads.
    #[error(
        "the model's output is `{found}`; the service reads `{expected}` (a model trained before feature schema 2 predicts something else: retrain it)"
    )]
    Output {
        /// Card's `output`.
        found: String,
        /// [`MODEL_OUTPUT`].
        expected: &'static str,
    },
    /// The card declares a width other than 42.
    #[error("card declares {0} features, the service builds {FEATURE_COUNT}")]
    Width(usize),
    /// `model.onnx` could not be read, parsed or planned by tract.
    #[error("{ONNX_FILE}: {0}")]
    Onnx(#[from] ModelError),
    /// `golden.json` has no rows, so parity cannot be checked.
    #[error("golden.json has no rows: parity cannot be checked")]
    NoGoldenRows,
    /// A golden row's output differs from the card's by more than 1e-5.
    #[error(
        "golden row {row} ({kind}): served {served} vs LightGBM {expected} (|Δ| {diff:e} > {PARITY_TOLERANCE:e})"
    )]
    GoldenMismatch {
        /// Row index.
        row: usize,
        /// The row's `kind`.
        kind: String,
        /// What the ONNX path computed.
        served: f64,
        /// LightGBM's value from the file.
        expected: f64,
        /// `|served − expected|`.
        diff: f64,
    },
}

impl LoadError {
    /// The fallback reason decisions report while this refusal stands.
    pub fn fallback_reason(&self) -> FallbackReason {
        match self {
            LoadError::Missing(_) | LoadError::NotADirectory(_) => FallbackReason::ModelMissing,
            LoadError::SchemaMismatch { .. } | LoadError::Width(_) | LoadError::Output { .. } => {
                FallbackReason::SchemaMismatch
            }
            LoadError::Card(CardError::Io { source, path })
                if source.kind() == std::io::ErrorKind::NotFound
                    && path.ends_with(super::card::CARD_FILE) =>
            {
                FallbackReason::ModelMissing
            }
            _ => FallbackReason::ModelError,
        }
    }
}

/// A vetted model ready for the request path.
#[derive(Debug)]
pub struct LoadedModel {
    /// Where it was loaded from.
    pub dir: PathBuf,
    /// Its card.
    pub card: ModelCard,
    /// First 16 hex digits of the SHA-256 of `model.onnx`.
    pub onnx_sha256: String,
    /// Golden rows checked at load.
    pub golden_rows: usize,
    /// Largest `|served − LightGBM|` over the golden rows.
    pub golden_max_abs_diff: f64,
    /// Wall-clock load time, Unix ms.
    pub loaded_at_ms: u64,
    /// The plan and its per-thread states.
    pub runner: Runner,
    /// Budget-miss breaker of this model.
    pub breaker: Breaker,
}

/// Loads `dir` and vets it: card → schema hash → tract plan → every golden
/// row within [`PARITY_TOLERANCE`] of the card's LightGBM output.
///
/// # Errors
/// [`LoadError`], naming the first failed check.
pub fn load_model_dir(
    dir: &Path,
    cfg: &ModelConfig,
    now_wall_ms: u64,
) -> Result<LoadedModel, LoadError> {
    if !dir.is_dir() {
        return Err(if dir.exists() {
            LoadError::NotADirectory(dir.to_path_buf())
        } else {
            LoadError::Missing(dir.to_path_buf())
        });
    }
    let card = read_card(dir)?;
    if card.feature_schema_hash != schema_hash() {
        return Err(LoadError::SchemaMismatch {
            model_version: card.feature_schema_version.clone(),
            model_hash: card.feature_schema_hash.clone(),
            service_hash: schema_hash().to_owned(),
        });
    }
    if card.output != MODEL_OUTPUT {
        return Err(LoadError::Output {
            found: card.output.clone(),
            expected: MODEL_OUTPUT,
        });
    }
    if card.n_features != FEATURE_COUNT {
        return Err(LoadError::Width(card.n_features));
    }
    let golden = read_golden(dir, FEATURE_COUNT)?;
    if golden.rows.is_empty() {
        return Err(LoadError::NoGoldenRows);
    }
    let onnx_path = dir.join(ONNX_FILE);
    let bytes = read_capped(&onnx_path, MAX_ONNX_BYTES).map_err(|source| ModelError::Io {
        path: onnx_path.display().to_string(),
        source,
    })?;
    let digest = Sha256::digest(&bytes);
    let onnx_sha256: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    let plan = load_model(bytes.as_slice())?;
    if plan.n_features() != FEATURE_COUNT {
        return Err(LoadError::Width(plan.n_features()));
    }
    let runner = Runner::new(plan);
    let rows: Vec<f32> = golden.rows.iter().flat_map(|r| r.values()).collect();
    let mut served = Vec::new();
    runner.predict(&rows, golden.rows.len(), &mut served)?;
    let mut max_diff = 0.0f64;
    for (i, (row, &p)) in golden.rows.iter().zip(&served).enumerate() {
        let diff = (f64::from(p) - row.prediction).abs();
        if diff.is_nan() || diff > PARITY_TOLERANCE {
            return Err(LoadError::GoldenMismatch {
                row: i,
                kind: row.kind.clone(),
                served: f64::from(p),
                expected: row.prediction,
                diff,
            });
        }
        max_diff = max_diff.max(diff);
    }
    Ok(LoadedModel {
        dir: dir.to_path_buf(),
        card,
        onnx_sha256,
        golden_rows: golden.rows.len(),
        golden_max_abs_diff: max_diff,
        loaded_at_ms: now_wall_ms,
        runner,
        breaker: Breaker::new(cfg.breaker_after, cfg.breaker_open_ms),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_or_a_missing_path_is_refused_and_says_which() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("model.onnx");
        std::fs::write(&file, b"not a directory").unwrap();
        let cfg = ModelConfig::default();
        let Err(e) = load_model_dir(&file, &cfg, 0) else {
            panic!("a file is refused")
        };
        assert!(matches!(e, LoadError::NotADirectory(_)), "{e}");
        assert!(e.to_string().contains("is not a directory"), "{e}");
        assert_eq!(e.fallback_reason(), FallbackReason::ModelMissing);
        let gone = tmp.path().join("gone");
        let Err(e) = load_model_dir(&gone, &cfg, 0) else {
            panic!("a missing dir is refused")
        };
        assert!(e.to_string().contains("does not exist"), "{e}");
    }
}

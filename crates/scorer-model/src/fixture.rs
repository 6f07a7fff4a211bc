//! Synthetic model directories for tests and benchmarks (issue #6).
//!
//! [`write_model_dir`] builds a random LightGBM-shaped ensemble (complete
//! trees of a given depth over the 42 features, NaN-aware splits), exports it
//! with [`export_onnx`], and writes `model.onnx`, `card.json` and
//! `golden.json` exactly as `trainer train` does. The golden predictions
//! come from [`predict_f64`], a direct f64 walk with LightGBM's semantics
//! (`x <= threshold` in f64, NaN to the default side), independent of the
//! ONNX path under test. Real models come from the trainer; this exists so
//! the service's tests and benches need no LightGBM.

use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::card::{
    CARD_FILE, GOLDEN_FILE, GoldenFile, GoldenRow, JsonF32, MODEL_OUTPUT, ModelCard, ONNX_FILE,
};
use super::export::{ExportError, LgbModel, LgbTree, MissingType, export_onnx, is_regression};
use scorer_core::features::schema::{FEATURE_COUNT, FEATURE_SCHEMA_VERSION, FEATURES, schema_hash};

/// `decision_type` for a NaN-aware split sending NaN left (bit 1 default_left, missing type NaN).
const NAN_LEFT: u8 = 0b1010;

/// A random regression ensemble (the served target, [`MODEL_OUTPUT`]) of of `trees` complete trees of `depth`
/// `trees` complete trees of `depth` (1..=10) splitting on features drawn
/// from the schema's ranges.
pub fn random_model(trees: usize, depth: u32, seed: u64) -> LgbModel {
    let depth = depth.clamp(1, 10);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let internal = (1usize << depth) - 1;
    let leaves = internal + 1;
    let child = |c: usize| -> i32 {
        if c < internal {
            i32::try_from(c).unwrap_or(i32::MAX)
        } else {
            !i32::try_from(c - internal).unwrap_or(i32::MAX)
        }
    };
    let trees = (0..trees)
        .map(|_| {
            let split_feature: Vec<u32> = (0..internal)
                .map(|_| rng.random_range(0..FEATURE_COUNT as u32))
                .collect();
            let threshold = split_feature
                .iter()
                .map(|&f| {
                    let spec = &FEATURES[f as usize];
                    f64::from(rng.random_range(spec.min..=spec.max.max(spec.min + 1.0)))
                })
                .collect();
            LgbTree {
                num_leaves: leaves,
                split_feature,
                threshold,
                decision_type: (0..internal)
                    .map(|_| {
                        if rng.random_bool(0.5) {
                            NAN_LEFT
                        } else {
                            0b1000
                        }
                    })
                    .collect(),
                left_child: (0..internal).map(|k| child(2 * k + 1)).collect(),
                right_child: (0..internal).map(|k| child(2 * k + 2)).collect(),
                leaf_value: (0..leaves).map(|_| rng.random_range(-0.3..0.3)).collect(),
                is_linear: false,
                shrinkage: 0.1,
            }
        })
        .collect();
    LgbModel {
        num_class: 1,
        num_tree_per_iteration: 1,
        max_feature_idx: FEATURE_COUNT - 1,
        objective: "regression".into(),
        trees,
    }
}

/// LightGBM's prediction for one row: f64 tree walk, then the sigmoid for a
/// binary objective (a regression's prediction is the raw score).
/// Only NaN and None missing types occur in [`random_model`] ensembles.
pub fn predict_f64(model: &LgbModel, row: &[f32]) -> f64 {
    let mut margin = 0.0f64;
    for t in &model.trees {
        if t.num_leaves <= 1 {
            margin += t.leaf_value.first().copied().unwrap_or(0.0);
            continue;
        }
        let mut node = 0i32;
        while node >= 0 {
            let k = node as usize;
            let x = f64::from(row[t.split_feature[k] as usize]);
            let dt = t.decision_type[k];
            let left = match MissingType::from_decision_type(dt) {
                Some(MissingType::NaN) if x.is_nan() => dt & 2 != 0,
                _ => {
                    let x = if x.is_nan() { 0.0 } else { x };
                    x <= t.threshold[k]
                }
            };
            node = if left {
                t.left_child[k]
            } else {
                t.right_child[k]
            };
        }
        margin += t.leaf_value[(!node) as usize];
    }
    if is_regression(&model.objective) {
        margin
    } else {
        1.0 / (1.0 + (-margin).exp())
    }
}

/// A random row inside the schema's ranges, with some NaN, 0.0 and −0.0.
pub fn random_row(rng: &mut impl Rng) -> Vec<f32> {
    FEATURES
        .iter()
        .map(|s| match rng.random_range(0..10) {
            0 => f32::NAN,
            1 => 0.0,
            2 => -0.0,
            _ => rng.random_range(s.min..=s.max.max(s.min + 1.0)),
        })
        .collect()
}

/// Writes `model.onnx`, `card.json` and `golden.json` for `model` into `dir`
/// (created if missing), with `golden_rows` random rows plus one all-NaN and
/// one all-zero row. `version` becomes the card's `model_version`.
///
/// # Errors
/// [`FixtureError`] if the model cannot be exported or a file not written.
pub fn write_model_dir(
    dir: &Path,
    model: &LgbModel,
    version: &str,
    golden_rows: usize,
    seed: u64,
) -> Result<(), FixtureError> {
    std::fs::create_dir_all(dir)?;
    let onnx = export_onnx(model)?;
    std::fs::write(dir.join(ONNX_FILE), onnx)?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut rows: Vec<(String, Vec<f32>)> = (0..golden_rows)
        .map(|_| ("random".to_owned(), random_row(&mut rng)))
        .collect();
    rows.push(("nan".to_owned(), vec![f32::NAN; FEATURE_COUNT]));
    rows.push(("zero".to_owned(), vec![0.0; FEATURE_COUNT]));
    let golden = GoldenFile {
        rows: rows
            .into_iter()
            .map(|(kind, r)| GoldenRow {
                prediction: predict_f64(model, &r),
                kind,
                features: r.into_iter().map(JsonF32).collect(),
            })
            .collect(),
    };
    let card = ModelCard {
        model_version: version.to_owned(),
        created_at: "1970-01-01T00:00:00Z".to_owned(),
        trainer_version: "fixture".to_owned(),
        feature_schema_version: FEATURE_SCHEMA_VERSION.to_owned(),
        feature_schema_hash: schema_hash().to_owned(),
        n_features: FEATURE_COUNT,
        num_trees: model.trees.len(),
        output: MODEL_OUTPUT.to_owned(),
        details: serde_json::Map::new(),
    };
    std::fs::write(dir.join(CARD_FILE), serde_json::to_vec_pretty(&card)?)?;
    std::fs::write(dir.join(GOLDEN_FILE), serde_json::to_vec_pretty(&golden)?)?;
    Ok(())
}

/// Errors writing a fixture.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    /// Export failed.
    #[error(transparent)]
    Export(#[from] ExportError),
    /// Writing failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Serializing failed.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

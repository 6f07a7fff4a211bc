//! LightGBM training: parameters, the binary classifier, its text model,
//! and the ONNX export of that text model.
//!
//! Determinism: LightGBM runs with `deterministic = true`,
//! `force_row_wise = true`, `num_threads` as given (1 by default) and every
//! seed (`seed`, `bagging_seed`, `feature_fraction_seed`,
//! `data_random_seed`, …) derived from [`TrainParams::seed`], so the same
//! rows and parameters give a byte-identical `model.txt`.
//!
//! Dataset parameters: `lightgbm3`'s `Dataset::from_slice` builds the
//! dataset without parameters, so dataset-level settings (`max_bin`,
//! `min_data_in_bin`, `use_missing`, `zero_as_missing`,
//! `feature_pre_filter`, …) would be silently ignored if passed here. The
//! trainer passes none and LightGBM's defaults apply ([`DATASET_PARAMS_NOTE`],
//! recorded in every card).

use lightgbm3::{Booster, Dataset};
use scorer_core::features::FEATURE_COUNT;
use scorer_model::LgbModel;
use serde::{Deserialize, Serialize};

use crate::error::{Result, TrainerError};
use crate::text_model::parse_model_text;

/// Recorded in `card.json`: why dataset parameters are absent.
pub const DATASET_PARAMS_NOTE: &str = "lightgbm3's Dataset::from_slice builds the dataset with no parameters, so dataset-level settings (max_bin, use_missing, zero_as_missing, ...) are LightGBM's defaults; none are passed";

/// Training parameters (the `train` flags).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainParams {
    /// Boosting rounds = trees (regression: one tree per round).
    pub num_trees: usize,
    /// Maximum tree depth (>= 1).
    pub max_depth: usize,
    /// Maximum leaves per tree; `None` means `min(31, 2^max_depth)`.
    pub num_leaves: Option<usize>,
    /// Shrinkage per round (0 < lr <= 1).
    pub learning_rate: f64,
    /// Minimum rows per leaf.
    pub min_data_in_leaf: usize,
    /// Seed of every LightGBM random choice.
    pub seed: u64,
    /// LightGBM threads (the trees are identical for any value with
    /// `deterministic = true`; `model.txt` echoes the value in its
    /// parameters; 1 is the reference).
    pub threads: usize,
    /// Processes training together, each on its own shard of the logs
    /// (LightGBM's data-parallel learner over its own network); 1 trains
    /// alone.
    #[serde(default = "one")]
    pub machines: usize,
}

fn one() -> usize {
    1
}

impl Default for TrainParams {
    fn default() -> Self {
        Self {
            num_trees: 50,
            max_depth: 6,
            num_leaves: None,
            learning_rate: 0.1,
            min_data_in_leaf: 20,
            seed: 42,
            threads: 1,
            machines: 1,
        }
    }
}

/// Most leaves per tree LightGBM accepts (`num_leaves` ≤ 131072).
pub const MAX_LEAVES: usize = 131_072;

impl TrainParams {
    /// Leaves per tree actually used.
    pub fn leaves(&self) -> usize {
        self.num_leaves
            .unwrap_or_else(|| (1usize << self.max_depth.min(20)).min(31))
            .max(2)
    }

    /// Checks ranges.
    ///
    /// # Errors
    /// [`TrainerError::InvalidArgument`] naming the flag.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(TrainerError::InvalidArgument(m.to_string()));
        if self.num_trees == 0 || self.num_trees > 10_000 {
            return bad("--num-trees must be in 1..=10000");
        }
        if self.max_depth == 0 || self.max_depth > 30 {
            return bad("--max-depth must be in 1..=30");
        }
        if !(self.learning_rate > 0.0 && self.learning_rate <= 1.0) {
            return bad("--learning-rate must be in (0, 1]");
        }
        if self.threads == 0 {
            return bad("--threads must be >= 1");
        }
        if self
            .num_leaves
            .is_some_and(|l| !(2..=MAX_LEAVES).contains(&l))
        {
            return bad("--num-leaves must be in 2..=131072 (LightGBM's limit)");
        }
        if self.machines == 0 {
            return bad("the number of machines must be >= 1");
        }
        if self.min_data_in_leaf == 0 {
            return bad("--min-data-in-leaf must be >= 1");
        }
        Ok(())
    }

    /// The LightGBM parameter object passed to `Booster::train`.
    pub fn lightgbm_params(&self) -> serde_json::Value {
        let s = self.seed;
        let mut p = serde_json::json!({
            "objective": "regression",
            "boosting": "gbdt",
            "num_iterations": self.num_trees,
            "learning_rate": self.learning_rate,
            "max_depth": self.max_depth,
            "num_leaves": self.leaves(),
            "min_data_in_leaf": self.min_data_in_leaf,
            "seed": s,
            "bagging_seed": s.wrapping_add(1),
            "feature_fraction_seed": s.wrapping_add(2),
            "data_random_seed": s.wrapping_add(3),
            "extra_seed": s.wrapping_add(4),
            "drop_seed": s.wrapping_add(5),
            "objective_seed": s.wrapping_add(6),
            "deterministic": true,
            "force_row_wise": true,
            "num_threads": self.threads,
            "verbosity": -1,
        });
        if self.machines > 1 {
            p["tree_learner"] = "data".into();
            p["num_machines"] = self.machines.into();
        }
        p
    }
}

/// A trained model: LightGBM's booster, its text and the parsed trees.
pub struct Trained {
    /// The booster (for `predict`).
    pub booster: Booster,
    /// `Booster::save_string` (the `model.txt` contents).
    pub text: String,
    /// Parsed trees, for export.
    pub model: LgbModel,
}

impl std::fmt::Debug for Trained {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trained")
            .field("trees", &self.model.trees.len())
            .finish_non_exhaustive()
    }
}

/// Trains an L2 regression on row-major `features` (`FEATURE_COUNT` f32
/// per row), `targets` and per-row `weights` (see [`crate::target`]).
///
/// L2 rather than a high quantile: the prediction multiplies E, so a
/// quantile model's systematic offset (every candidate ×e^q̂) would spend
/// the factor's bounds on a shift that changes no ranking.
///
/// # Errors
/// [`TrainerError::InvalidArgument`] for bad parameters or mismatched
/// lengths, [`TrainerError::NoData`] without rows,
/// [`TrainerError::LightGbm`] if LightGBM refuses,
/// [`TrainerError::TextModel`] if its text model cannot be parsed.
pub fn train(
    features: &[f32],
    targets: &[f32],
    weights: &[f32],
    params: &TrainParams,
) -> Result<Trained> {
    params.validate()?;
    if features.len() != targets.len() * FEATURE_COUNT || weights.len() != targets.len() {
        return Err(TrainerError::InvalidArgument(format!(
            "{} feature values and {} weights for {} targets",
            features.len(),
            weights.len(),
            targets.len()
        )));
    }
    if targets.is_empty() {
        return Err(TrainerError::NoData("no training rows".into()));
    }
    let mut ds = Dataset::from_slice(features, targets, FEATURE_COUNT as i32, true)?;
    ds.set_weights(weights)?;
    let booster = Booster::train(ds, &params.lightgbm_params())?;
    let text = booster.save_string()?;
    let model = parse_model_text(&text)?;
    Ok(Trained {
        booster,
        text,
        model,
    })
}

/// Trains as [`train`] on the rows of a spill file ([`crate::spill`]),
/// which LightGBM loads in two rounds.
///
/// # Errors
/// As [`train`]; [`TrainerError::LightGbmExt`] if LightGBM refuses the
/// file.
pub fn train_file(path: &std::path::Path, params: &TrainParams) -> Result<Trained> {
    params.validate()?;
    let text = lightgbm_ext::train_from_file(
        path,
        &crate::spill::dataset_params(params.machines),
        &params.lightgbm_params(),
    )?;
    let booster = Booster::from_string(&text)?;
    let model = parse_model_text(&text)?;
    Ok(Trained {
        booster,
        text,
        model,
    })
}

/// LightGBM's prediction on f32 rows (`Booster::predict` on the f32
/// values, which LightGBM widens to f64 exactly).
///
/// # Errors
/// [`TrainerError::LightGbm`].
pub fn predict(booster: &Booster, features: &[f32]) -> Result<Vec<f64>> {
    if features.is_empty() {
        return Ok(Vec::new());
    }
    Ok(booster.predict(features, FEATURE_COUNT as i32, true)?)
}

//! Export of a LightGBM binary or regression model to an ONNX `ModelProto`,
//! in pure Rust.
//!
//! Input: an [`LgbModel`], the LightGBM tree structure as written in
//! LightGBM's text model (`Booster::save_string` / `model.txt`; field meanings
//! from LightGBM `include/LightGBM/tree.h`). Output graph (opsets `""` v13 and
//! `ai.onnx.ml` v3):
//!
//! ```text
//! features f32[N, F] ─▶ ai.onnx.ml.TreeEnsembleRegressor ─▶ margin f32[N, 1]
//!                                                         └▶ Sigmoid ─▶ probability f32[N, 1]
//! ```
//!
//! `F = max_feature_idx + 1`, `margin` is LightGBM's raw score (n_targets 1,
//! aggregate SUM, post_transform NONE, no base_values: LightGBM folds
//! `boost_from_average` into the first tree), `probability = 1 / (1 + e^-margin)`.
//!
//! A regression objective (`regression`, `regression_l1`, `huber`, `fair`,
//! `quantile`: LightGBM's prediction is the raw score itself) exports the
//! ensemble alone, its one output named [`PREDICTION_OUTPUT`]:
//!
//! ```text
//! features f32[N, F] ─▶ ai.onnx.ml.TreeEnsembleRegressor ─▶ prediction f32[N, 1]
//! ```
//!
//! Exactness. LightGBM compares `x <= t` in f64 (tree.h `NumericalDecision`)
//! while the ONNX graph sees f32 inputs. Each threshold is exported as
//! [`f32_round_down`]`(t)`, the largest f32 `<= t` (adjusted near zero, below): for every f32 `x`,
//! `x <= t` ⇔ `x <= f32_round_down(t)`, so every branch equals LightGBM's on
//! f32 inputs (including ±∞; NaN is handled by the missing-value rule below).
//! Rounding to the nearest f32 instead breaks this for `x` between `t` and a
//! nearest value above it.
//!
//! Missing values (tree.h `NumericalDecision`, `decision_type` bits 2–3):
//! * missing type NaN (2): NaN goes to the `default_left` side (bit 1) →
//!   `nodes_missing_value_tracks_true = default_left`;
//! * missing type None (0): NaN is replaced by 0.0 before the comparison →
//!   `tracks_true = (0.0 <= t)`;
//! * missing type Zero (1), categorical splits (bit 0), linear trees,
//!   multiclass and other objectives are refused with an [`ExportError`].
//!
//! Near-zero inputs. LightGBM's prediction on a dense matrix (C API
//! `RowPairFunctionFromDenseMatrix`) reads every value with
//! `|x| <= kZeroThreshold` (`meta.h`: `1e-35f`, exactly an f32) as 0.0 before
//! walking the trees. This changes the branch only for thresholds
//! `t ∈ [-kZeroThreshold, kZeroThreshold)`, which LightGBM does emit (its bin
//! bounds around zero are `±kZeroThreshold`). [`lightgbm_threshold_f32`] folds
//! that rule into the exported threshold, so the exported branch equals
//! LightGBM's for **every** f32 input (checked against real LightGBM in the
//! `trainer` tests).

use crate::ensemble::{EnsembleError, FlatEnsemble, MODE_BRANCH_LEQ, TreeEnsembleAttributes};

/// Name of the graph input (`f32 [N, F]`).
pub const INPUT_NAME: &str = "features";
/// Name of the raw-margin output (`f32 [N, 1]`).
pub const MARGIN_OUTPUT: &str = "margin";
/// Name of a regression model's output (`f32 [N, 1]`).
pub const PREDICTION_OUTPUT: &str = "prediction";
/// Name of the probability output (`f32 [N, 1]`).
pub const PROBABILITY_OUTPUT: &str = crate::op::PROBABILITY_OUTPUT;
/// Default-domain opset imported by the exported model.
pub const ONNX_OPSET: i64 = 13;
/// `ai.onnx.ml` opset imported by the exported model.
pub const ML_OPSET: i64 = 3;
/// ONNX IR version written (IR 8 = ONNX 1.10, the first with `ai.onnx.ml` v3).
pub const IR_VERSION: i64 = 8;

/// `decision_type` bit 0: categorical split (LightGBM tree.h `kCategoricalMask`).
pub const CATEGORICAL_MASK: u8 = 1;
/// `decision_type` bit 1: missing values go left (LightGBM tree.h `kDefaultLeftMask`).
pub const DEFAULT_LEFT_MASK: u8 = 2;

/// LightGBM missing-value handling of a split, `decision_type` bits 2–3
/// (tree.h `MissingType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingType {
    /// 0: no special handling; NaN is treated as 0.0.
    None,
    /// 1: zero (and `|x| <= 1e-35`, and NaN) go to the default side.
    Zero,
    /// 2: NaN goes to the default side.
    NaN,
}

impl MissingType {
    /// Decodes bits 2–3 of a LightGBM `decision_type`; `None` for the unused value 3.
    pub fn from_decision_type(decision_type: u8) -> Option<MissingType> {
        match (decision_type >> 2) & 3 {
            0 => Some(MissingType::None),
            1 => Some(MissingType::Zero),
            2 => Some(MissingType::NaN),
            _ => None,
        }
    }
}

/// One LightGBM tree, field by field as in the text model's `Tree=` block.
///
/// Internal nodes are `0..num_leaves-1`, leaves `0..num_leaves`. A child
/// `c >= 0` is internal node `c`, `c < 0` is leaf `!c` (= `-c-1`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LgbTree {
    /// Number of leaves (>= 1); a tree with one leaf has no splits.
    pub num_leaves: usize,
    /// Feature index of each split (`num_leaves - 1` entries).
    pub split_feature: Vec<u32>,
    /// f64 threshold of each split: go left when `x <= threshold`.
    pub threshold: Vec<f64>,
    /// Split flags: bit 0 categorical, bit 1 default_left, bits 2–3 missing type.
    pub decision_type: Vec<u8>,
    /// Left child of each split (negative: leaf `!c`).
    pub left_child: Vec<i32>,
    /// Right child of each split (negative: leaf `!c`).
    pub right_child: Vec<i32>,
    /// Output of each leaf (`num_leaves` entries), shrinkage already applied.
    pub leaf_value: Vec<f64>,
    /// Whether the leaves hold linear models (`is_linear=1`); refused by export.
    pub is_linear: bool,
    /// Learning rate applied to this tree (informational).
    pub shrinkage: f64,
}

/// A LightGBM model: header fields and trees in iteration order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LgbModel {
    /// `num_class` (1 for binary and regression).
    pub num_class: usize,
    /// `num_tree_per_iteration` (1 unless multiclass).
    pub num_tree_per_iteration: usize,
    /// `max_feature_idx`: the model reads `max_feature_idx + 1` features.
    pub max_feature_idx: usize,
    /// `objective` line, e.g. `binary sigmoid:1`.
    pub objective: String,
    /// Trees, in the order LightGBM sums them.
    pub trees: Vec<LgbTree>,
}

/// Why a model could not be exported.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExportError {
    /// More than one class / tree per iteration.
    #[error(
        "multiclass models are not supported (num_class {num_class}, trees per iteration {per_iteration})"
    )]
    Multiclass {
        /// `num_class`.
        num_class: usize,
        /// `num_tree_per_iteration`.
        per_iteration: usize,
    },
    /// The objective is neither `binary` with `sigmoid:1` nor a regression.
    #[error(
        "objective `{0}` is not supported: only `binary` with sigmoid:1 and the regression objectives (regression, regression_l1, huber, fair, quantile) export"
    )]
    Objective(String),
    /// The model has no trees.
    #[error("the model has no trees")]
    NoTrees,
    /// A tree has linear leaves.
    #[error("tree {tree} is a linear tree; linear trees are not supported")]
    LinearTree {
        /// Tree index.
        tree: usize,
    },
    /// A split is categorical.
    #[error("tree {tree} split {node} is categorical; categorical splits are not supported")]
    Categorical {
        /// Tree index.
        tree: usize,
        /// Split index.
        node: usize,
    },
    /// A split uses missing type Zero.
    #[error("tree {tree} split {node} uses missing type Zero (zero_as_missing); not supported")]
    MissingZero {
        /// Tree index.
        tree: usize,
        /// Split index.
        node: usize,
    },
    /// A split has an invalid missing type (value 3) or a NaN threshold.
    #[error("tree {tree} split {node}: {reason}")]
    BadSplit {
        /// Tree index.
        tree: usize,
        /// Split index.
        node: usize,
        /// Details.
        reason: String,
    },
    /// Array lengths or child indices are inconsistent.
    #[error("tree {tree} is malformed: {reason}")]
    Malformed {
        /// Tree index.
        tree: usize,
        /// Details.
        reason: String,
    },
    /// The produced ensemble failed validation (should not happen for a well-formed tree).
    #[error("exported ensemble is invalid: {0}")]
    Ensemble(#[from] EnsembleError),
}

/// How f64 thresholds become f32 (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ThresholdRounding {
    /// Largest f32 `<= t`: exact for every f32 input. Always use this.
    #[default]
    Down,
    /// Nearest f32 (`t as f32`). Wrong on boundary inputs; exists to demonstrate that in tests.
    Nearest,
}

/// Export options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExportOptions {
    /// Threshold rounding; default [`ThresholdRounding::Down`].
    pub rounding: ThresholdRounding,
}

/// The largest f32 that is `<= t` (rounding toward −∞).
///
/// For every f32 `x` (as f64), `x <= t` ⇔ `x <= f32_round_down(t)`.
/// `t > f32::MAX` gives `f32::MAX`, `t < -f32::MAX` gives −∞, ±∞ map to
/// themselves, NaN stays NaN.
pub fn f32_round_down(t: f64) -> f32 {
    let f = t as f32; // round to nearest, ties to even; saturates to ±inf
    if f64::from(f) > t { f.next_down() } else { f }
}

/// LightGBM `kZeroThreshold` (`include/LightGBM/meta.h`: `const double kZeroThreshold = 1e-35f;`,
/// a float literal, so exactly `1e-35f32` widened to f64 = 1.0000000180025095e-35).
pub const K_ZERO_THRESHOLD: f64 = 1e-35f32 as f64;

/// The f32 threshold `t'` such that, for every f32 input `x`, `x <= t'`
/// gives the same branch as LightGBM's dense-row prediction: `x` with
/// `|x| <= kZeroThreshold` is first read as 0.0, then compared `<= t` in f64.
///
/// * `t >= kZeroThreshold` or `t < -kZeroThreshold`: the zeroing never changes the
///   side, so `t' = round(t)`;
/// * `-kZeroThreshold <= t < 0`: left iff `x < -kZeroThreshold`, so `t'` = the largest f32
///   below `-kZeroThreshold`;
/// * `0 <= t < kZeroThreshold` (including `-0.0`): left iff `x <= kZeroThreshold`, so
///   `t' = kZeroThreshold`.
///
/// `round` is [`f32_round_down`] for [`ThresholdRounding::Down`] (exact) and
/// `as f32` for [`ThresholdRounding::Nearest`] (wrong on boundary inputs).
pub fn lightgbm_threshold_f32(t: f64, rounding: ThresholdRounding) -> f32 {
    let kz = 1e-35f32;
    if (-K_ZERO_THRESHOLD..0.0).contains(&t) {
        return (-kz).next_down();
    }
    if (0.0..K_ZERO_THRESHOLD).contains(&t) {
        return kz;
    }
    match rounding {
        ThresholdRounding::Down => f32_round_down(t),
        ThresholdRounding::Nearest => t as f32,
    }
}

/// LightGBM regression objectives whose prediction is the raw score.
const REGRESSION_OBJECTIVES: [&str; 6] = [
    "regression",
    "regression_l2",
    "regression_l1",
    "huber",
    "fair",
    "quantile",
];

/// Whether `objective` (a model's `objective` line) is a supported
/// regression objective, whose prediction is the raw score.
pub fn is_regression(objective: &str) -> bool {
    objective
        .split_whitespace()
        .next()
        .is_some_and(|w| REGRESSION_OBJECTIVES.contains(&w))
}

fn check_objective(objective: &str) -> Result<(), ExportError> {
    if is_regression(objective) {
        return Ok(());
    }
    let mut words = objective.split_whitespace();
    if words.next() != Some("binary") {
        return Err(ExportError::Objective(objective.to_string()));
    }
    for w in words {
        if let Some(s) = w.strip_prefix("sigmoid:")
            && s.parse::<f64>().ok() != Some(1.0)
        {
            return Err(ExportError::Objective(objective.to_string()));
        }
    }
    Ok(())
}

/// Builds the `TreeEnsembleRegressor` attributes for `model` (raw margin).
///
/// Tree `i` becomes ONNX tree id `i`; split `s` becomes node id `s`, leaf `l`
/// node id `num_leaves - 1 + l` (a single-leaf tree is one leaf with id 0).
///
/// # Errors
/// [`ExportError`] for multiclass/non-binary objectives, linear trees,
/// categorical or missing-Zero splits, NaN thresholds and malformed trees.
pub fn ensemble_attributes(
    model: &LgbModel,
    opts: &ExportOptions,
) -> Result<TreeEnsembleAttributes, ExportError> {
    if model.num_class != 1 || model.num_tree_per_iteration != 1 {
        return Err(ExportError::Multiclass {
            num_class: model.num_class,
            per_iteration: model.num_tree_per_iteration,
        });
    }
    check_objective(&model.objective)?;
    if model.trees.is_empty() {
        return Err(ExportError::NoTrees);
    }
    let mut a = TreeEnsembleAttributes {
        n_targets: 1,
        aggregate_function: Some("SUM".into()),
        post_transform: Some("NONE".into()),
        ..Default::default()
    };
    for (ti, tree) in model.trees.iter().enumerate() {
        let malformed = |reason: String| ExportError::Malformed { tree: ti, reason };
        if tree.is_linear {
            return Err(ExportError::LinearTree { tree: ti });
        }
        if tree.num_leaves == 0 {
            return Err(malformed("num_leaves is 0".into()));
        }
        let n_splits = tree.num_leaves - 1;
        for (name, len) in [
            ("split_feature", tree.split_feature.len()),
            ("threshold", tree.threshold.len()),
            ("decision_type", tree.decision_type.len()),
            ("left_child", tree.left_child.len()),
            ("right_child", tree.right_child.len()),
        ] {
            if len != n_splits {
                return Err(malformed(format!(
                    "{name} has {len} entries, expected {n_splits}"
                )));
            }
        }
        if tree.leaf_value.len() != tree.num_leaves {
            return Err(malformed(format!(
                "leaf_value has {} entries, expected {}",
                tree.leaf_value.len(),
                tree.num_leaves
            )));
        }
        let tid = ti as i64;
        let node_id = |c: i32| -> Result<i64, ExportError> {
            if c >= 0 {
                let c = c as usize;
                if c >= n_splits {
                    return Err(malformed(format!("child {c} is not a split")));
                }
                Ok(c as i64)
            } else {
                let leaf = (!c) as usize;
                if leaf >= tree.num_leaves {
                    return Err(malformed(format!("child leaf {leaf} out of range")));
                }
                Ok((n_splits + leaf) as i64)
            }
        };
        for s in 0..n_splits {
            let dt = tree.decision_type[s];
            if dt & CATEGORICAL_MASK != 0 {
                return Err(ExportError::Categorical { tree: ti, node: s });
            }
            let t = tree.threshold[s];
            if t.is_nan() {
                return Err(ExportError::BadSplit {
                    tree: ti,
                    node: s,
                    reason: "NaN threshold".into(),
                });
            }
            let tracks_true = match MissingType::from_decision_type(dt) {
                Some(MissingType::NaN) => dt & DEFAULT_LEFT_MASK != 0,
                Some(MissingType::None) => 0.0 <= t,
                Some(MissingType::Zero) => {
                    return Err(ExportError::MissingZero { tree: ti, node: s });
                }
                None => {
                    return Err(ExportError::BadSplit {
                        tree: ti,
                        node: s,
                        reason: format!("invalid missing type in decision_type {dt}"),
                    });
                }
            };
            if tree.split_feature[s] as usize > model.max_feature_idx {
                return Err(malformed(format!(
                    "split {s} reads feature {} > max_feature_idx {}",
                    tree.split_feature[s], model.max_feature_idx
                )));
            }
            a.nodes_treeids.push(tid);
            a.nodes_nodeids.push(s as i64);
            a.nodes_featureids.push(i64::from(tree.split_feature[s]));
            a.nodes_values
                .push(lightgbm_threshold_f32(t, opts.rounding));
            a.nodes_modes.push(MODE_BRANCH_LEQ.into());
            a.nodes_truenodeids.push(node_id(tree.left_child[s])?);
            a.nodes_falsenodeids.push(node_id(tree.right_child[s])?);
            a.nodes_missing_value_tracks_true
                .push(i64::from(tracks_true));
        }
        for (l, v) in tree.leaf_value.iter().enumerate() {
            a.push_leaf(tid, (n_splits + l) as i64, *v as f32);
        }
    }
    // Catches anything structural the checks above missed (cycles, shared children).
    FlatEnsemble::from_attributes(&a)?;
    Ok(a)
}

pub use super::export_graph::{export_onnx, export_onnx_with, model_proto, tree_ensemble_node};

#[cfg(test)]
#[path = "export_tests.rs"]
mod tests;

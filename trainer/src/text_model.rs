//! Parser for LightGBM's text model format (`Booster::save_string`, `model.txt`)
//! and an f64 evaluator that reproduces LightGBM's raw score.
//!
//! Format (LightGBM `src/boosting/gbdt_model_text.cpp`, `src/io/tree.cpp`
//! `Tree::ToString`): a header of `key=value` lines (`num_class`,
//! `num_tree_per_iteration`, `max_feature_idx`, `objective`, …), then one
//! block per tree starting with `Tree=<i>` holding `num_leaves`, `split_feature`,
//! `threshold`, `decision_type`, `left_child`, `right_child`, `leaf_value`,
//! `is_linear`, `shrinkage` (space-separated arrays; empty for a single-leaf
//! tree), and `end of trees`. Thresholds and leaf values are written with 17
//! significant digits, so parsing them with Rust's correctly rounded
//! `f64::from_str` gives back LightGBM's exact in-memory doubles.

use scorer_model::export::{CATEGORICAL_MASK, DEFAULT_LEFT_MASK, LgbModel, LgbTree, MissingType};
use std::collections::HashMap;

pub use scorer_model::export::K_ZERO_THRESHOLD;

/// Errors from [`parse_model_text`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TextModelError {
    /// A required header or tree field is absent.
    #[error("missing field `{field}`{}", tree.map(|t| format!(" in tree {t}")).unwrap_or_default())]
    MissingField {
        /// Field name.
        field: &'static str,
        /// Tree index, `None` for the header.
        tree: Option<usize>,
    },
    /// A field does not parse or has the wrong number of entries.
    #[error("field `{field}`{}: {reason}", tree.map(|t| format!(" in tree {t}")).unwrap_or_default())]
    BadField {
        /// Field name.
        field: &'static str,
        /// Tree index, `None` for the header.
        tree: Option<usize>,
        /// Details.
        reason: String,
    },
    /// No `Tree=` block was found.
    #[error("the model text contains no trees")]
    NoTrees,
}

fn scalar<T: std::str::FromStr>(
    kv: &HashMap<&str, &str>,
    field: &'static str,
    tree: Option<usize>,
) -> Result<T, TextModelError> {
    let v = kv
        .get(field)
        .ok_or(TextModelError::MissingField { field, tree })?;
    v.trim().parse::<T>().map_err(|_| TextModelError::BadField {
        field,
        tree,
        reason: format!("cannot parse `{v}`"),
    })
}

fn array<T: std::str::FromStr>(
    kv: &HashMap<&str, &str>,
    field: &'static str,
    tree: usize,
    len: usize,
) -> Result<Vec<T>, TextModelError> {
    let tree = Some(tree);
    let v = kv
        .get(field)
        .ok_or(TextModelError::MissingField { field, tree })?;
    let out = v
        .split_whitespace()
        .map(|s| {
            s.parse::<T>().map_err(|_| TextModelError::BadField {
                field,
                tree,
                reason: format!("cannot parse `{s}`"),
            })
        })
        .collect::<Result<Vec<T>, _>>()?;
    if out.len() != len {
        return Err(TextModelError::BadField {
            field,
            tree,
            reason: format!("{} entries, expected {len}", out.len()),
        });
    }
    Ok(out)
}

fn parse_tree(index: usize, lines: &[&str]) -> Result<LgbTree, TextModelError> {
    let kv: HashMap<&str, &str> = lines.iter().filter_map(|l| l.split_once('=')).collect();
    let t = Some(index);
    let num_leaves: usize = scalar(&kv, "num_leaves", t)?;
    if num_leaves == 0 {
        return Err(TextModelError::BadField {
            field: "num_leaves",
            tree: t,
            reason: "must be >= 1".into(),
        });
    }
    let n = num_leaves - 1;
    let tree = LgbTree {
        num_leaves,
        split_feature: array(&kv, "split_feature", index, n)?,
        threshold: array(&kv, "threshold", index, n)?,
        decision_type: array::<i16>(&kv, "decision_type", index, n)?
            .into_iter()
            .map(|d| {
                u8::try_from(d).map_err(|_| TextModelError::BadField {
                    field: "decision_type",
                    tree: t,
                    reason: format!("{d} out of range"),
                })
            })
            .collect::<Result<_, _>>()?,
        left_child: array(&kv, "left_child", index, n)?,
        right_child: array(&kv, "right_child", index, n)?,
        leaf_value: array(&kv, "leaf_value", index, num_leaves)?,
        is_linear: kv.contains_key("is_linear") && scalar::<u8>(&kv, "is_linear", t)? != 0,
        shrinkage: if kv.contains_key("shrinkage") {
            scalar(&kv, "shrinkage", t)?
        } else {
            1.0
        },
    };
    // Child indices must stay in range so that evaluation cannot index out of bounds.
    for (field, children) in [
        ("left_child", &tree.left_child),
        ("right_child", &tree.right_child),
    ] {
        for &c in children.iter() {
            let ok = if c >= 0 {
                (c as usize) < n
            } else {
                ((!c) as usize) < num_leaves
            };
            if !ok {
                return Err(TextModelError::BadField {
                    field,
                    tree: t,
                    reason: format!("child {c} out of range"),
                });
            }
        }
    }
    Ok(tree)
}

/// Parses a LightGBM text model.
///
/// Required header fields: `num_class`, `max_feature_idx`, `objective`
/// (`num_tree_per_iteration` defaults to `num_class`). Every `Tree=` block
/// needs `num_leaves`, `leaf_value` and, when `num_leaves > 1`, the split
/// arrays. Categorical splits and linear trees are parsed (flags kept) but not
/// evaluated; the exporter refuses them.
///
/// # Errors
/// [`TextModelError`] naming the field and tree for missing or malformed fields,
/// child indices out of range, or a model without trees.
pub fn parse_model_text(text: &str) -> Result<LgbModel, TextModelError> {
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    let first_tree = lines
        .iter()
        .position(|l| l.starts_with("Tree="))
        .ok_or(TextModelError::NoTrees)?;
    let header: HashMap<&str, &str> = lines[..first_tree]
        .iter()
        .filter_map(|l| l.split_once('='))
        .collect();
    let num_class: usize = scalar(&header, "num_class", None)?;
    let num_tree_per_iteration: usize = if header.contains_key("num_tree_per_iteration") {
        scalar(&header, "num_tree_per_iteration", None)?
    } else {
        num_class
    };
    let max_feature_idx: usize = scalar(&header, "max_feature_idx", None)?;
    let objective = header
        .get("objective")
        .ok_or(TextModelError::MissingField {
            field: "objective",
            tree: None,
        })?
        .trim()
        .to_string();
    let mut trees = Vec::new();
    let mut start = first_tree;
    loop {
        let end = lines[start + 1..]
            .iter()
            .position(|l| l.starts_with("Tree=") || *l == "end of trees")
            .map(|p| start + 1 + p)
            .unwrap_or(lines.len());
        trees.push(parse_tree(trees.len(), &lines[start + 1..end])?);
        if end >= lines.len() || !lines[end].starts_with("Tree=") {
            break;
        }
        start = end;
    }
    for (i, tree) in trees.iter().enumerate() {
        if let Some(f) = tree
            .split_feature
            .iter()
            .find(|f| **f as usize > max_feature_idx)
        {
            return Err(TextModelError::BadField {
                field: "split_feature",
                tree: Some(i),
                reason: format!("feature {f} > max_feature_idx {max_feature_idx}"),
            });
        }
    }
    Ok(LgbModel {
        num_class,
        num_tree_per_iteration,
        max_feature_idx,
        objective,
        trees,
    })
}

/// LightGBM's raw-score evaluation in f64 (extension trait for [`LgbModel`] / [`LgbTree`]).
pub trait EvaluateF64 {
    /// Raw score (margin) of one row of `max_feature_idx + 1` f64 features, as
    /// LightGBM's `Booster::predict` with raw scores computes it for a dense row:
    ///
    /// 1. the C API's dense-row conversion (`c_api.cpp`
    ///    `RowPairFunctionFromDenseMatrix`) drops values with
    ///    `|x| <= kZeroThreshold`, i.e. reads them as 0.0 (NaN is kept);
    /// 2. each tree is walked with tree.h `NumericalDecision`: for a missing type
    ///    other than NaN a NaN becomes 0.0; under missing type Zero a value with
    ///    `|x| <= kZeroThreshold`, under missing type NaN a NaN, goes to the
    ///    `default_left` side; otherwise left iff `x <= threshold`;
    /// 3. leaf values are summed in f64 in tree order starting from 0.0
    ///    (`GBDT::PredictRaw`; one tree per iteration).
    ///
    /// Returns NaN (never panics) when the row is narrower than a split's
    /// feature index, or when a reached split is categorical or a tree is linear
    /// (not modelled here).
    fn evaluate_f64(&self, row: &[f64]) -> f64;
}

fn numerical_decision(fval: f64, threshold: f64, decision_type: u8) -> bool {
    let missing = MissingType::from_decision_type(decision_type);
    let mut fval = fval;
    if fval.is_nan() && missing != Some(MissingType::NaN) {
        fval = 0.0;
    }
    let is_zero = (-K_ZERO_THRESHOLD..=K_ZERO_THRESHOLD).contains(&fval);
    if (missing == Some(MissingType::Zero) && is_zero)
        || (missing == Some(MissingType::NaN) && fval.is_nan())
    {
        return decision_type & DEFAULT_LEFT_MASK != 0;
    }
    fval <= threshold
}

impl EvaluateF64 for LgbTree {
    fn evaluate_f64(&self, row: &[f64]) -> f64 {
        if self.is_linear {
            return f64::NAN;
        }
        if self.num_leaves <= 1 {
            return self.leaf_value.first().copied().unwrap_or(f64::NAN);
        }
        let mut node: i32 = 0;
        // A well-formed tree reaches a leaf in < num_leaves steps; bound the walk anyway.
        for _ in 0..self.num_leaves {
            if node < 0 {
                break;
            }
            let s = node as usize;
            let (Some(&f), Some(&thr), Some(&dt)) = (
                self.split_feature.get(s),
                self.threshold.get(s),
                self.decision_type.get(s),
            ) else {
                return f64::NAN;
            };
            if dt & CATEGORICAL_MASK != 0 {
                return f64::NAN;
            }
            let Some(&x) = row.get(f as usize) else {
                return f64::NAN;
            };
            // Dense-row conversion of the C API: tiny values are dropped (read as 0).
            let x = if !x.is_nan() && x.abs() <= K_ZERO_THRESHOLD {
                0.0
            } else {
                x
            };
            let children = if numerical_decision(x, thr, dt) {
                &self.left_child
            } else {
                &self.right_child
            };
            node = match children.get(s) {
                Some(c) => *c,
                None => return f64::NAN,
            };
        }
        if node >= 0 {
            return f64::NAN;
        }
        self.leaf_value
            .get((!node) as usize)
            .copied()
            .unwrap_or(f64::NAN)
    }
}

impl EvaluateF64 for LgbModel {
    fn evaluate_f64(&self, row: &[f64]) -> f64 {
        let mut sum = 0.0f64;
        for t in &self.trees {
            sum += t.evaluate_f64(row);
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "tree
version=v4
num_class=1
num_tree_per_iteration=1
label_index=0
max_feature_idx=2
objective=binary sigmoid:1
feature_names=a b c

Tree=0
num_leaves=3
num_cat=0
split_feature=2 0
split_gain=1 2
threshold=1.0000000180025095e-35 0.5
decision_type=10 0
left_child=-1 -2
right_child=1 -3
leaf_value=0.1 -0.2 0.30000000000000004
is_linear=0
shrinkage=1


Tree=1
num_leaves=1
num_cat=0
split_feature=
split_gain=
threshold=
decision_type=
left_child=
right_child=
leaf_value=-0.05
is_linear=0
shrinkage=0.1


end of trees

parameters:
[boosting: gbdt]
end of parameters
";

    #[test]
    fn parses_and_evaluates() {
        let m = parse_model_text(TEXT).unwrap();
        assert_eq!(m.trees.len(), 2);
        assert_eq!(m.max_feature_idx, 2);
        assert_eq!(m.objective, "binary sigmoid:1");
        assert_eq!(m.trees[0].decision_type, vec![10, 0]);
        assert_eq!(m.trees[0].threshold[0], K_ZERO_THRESHOLD);
        assert_eq!(m.trees[1].num_leaves, 1);
        assert_eq!(m.trees[1].shrinkage, 0.1);
        let e = |r: [f64; 3]| m.evaluate_f64(&r);
        // split 0: feature 2, NaN type (8) | default_left (2)
        assert_eq!(e([0.0, 0.0, 0.0]), 0.1 - 0.05);
        assert_eq!(e([0.0, 0.0, f64::NAN]), 0.1 - 0.05);
        assert_eq!(e([0.0, 0.0, 1e-30]), -0.2 - 0.05);
        assert_eq!(e([0.0, 0.0, 1e-36]), 0.1 - 0.05); // tiny value read as 0
        // split 1: feature 0, missing None: NaN -> 0.0 <= 0.5 -> left
        assert_eq!(e([f64::NAN, 0.0, 1.0]), -0.2 - 0.05);
        assert_eq!(e([0.6, 0.0, 1.0]), 0.30000000000000004 - 0.05);
        assert!(m.evaluate_f64(&[0.0]).is_nan());
    }

    #[test]
    fn reports_bad_fields() {
        let bad = TEXT.replace("left_child=-1 -2", "left_child=-1");
        assert!(matches!(
            parse_model_text(&bad),
            Err(TextModelError::BadField {
                field: "left_child",
                tree: Some(0),
                ..
            })
        ));
        let bad = TEXT.replace("right_child=1 -3", "right_child=1 -9");
        assert!(parse_model_text(&bad).is_err());
        let bad = TEXT.replace("max_feature_idx=2", "");
        assert!(matches!(
            parse_model_text(&bad),
            Err(TextModelError::MissingField {
                field: "max_feature_idx",
                tree: None
            })
        ));
        assert_eq!(
            parse_model_text("num_class=1"),
            Err(TextModelError::NoTrees)
        );
    }
}

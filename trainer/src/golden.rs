//! `golden.json`: a few dozen input rows with LightGBM's own probability,
//! chosen where an exporter or a runtime is most likely to go wrong.
//!
//! Rows, in order ([`golden_inputs`]):
//! 1. up to [`GOLDEN_VALIDATION_ROWS`] validation rows, spread over the split;
//! 2. one row each of all-NaN, all-0.0, all-−0.0, all-+∞ and all-−∞;
//! 3. the first validation row with one of the two most-split features set
//!    to NaN, 0.0, −0.0, +∞ and −∞;
//! 4. for up to [`GOLDEN_BOUNDARY_SPLITS`] distinct splits (tree roots
//!    first), a row that reaches the split with its feature at the
//!    threshold rounded down to f32 (`t_down`, goes left) and at the next
//!    f32 above (`next_up`, goes right).
//!
//! Each row's `probability` is LightGBM's `predict` on those f32 values.

use lightgbm3::Booster;
use scorer_core::features::{FEATURE_COUNT, FEATURES};
use scorer_model::LgbModel;
use scorer_model::card::{GoldenFile, GoldenRow, JsonF32};
use scorer_model::export::{ThresholdRounding, lightgbm_threshold_f32};

use crate::error::Result;
use crate::train::predict;

/// Validation rows copied into the golden file.
pub const GOLDEN_VALIDATION_ROWS: usize = 6;
/// Splits whose boundary values are included (2 rows each).
pub const GOLDEN_BOUNDARY_SPLITS: usize = 12;

const SPECIALS: [(&str, f32); 5] = [
    ("nan", f32::NAN),
    ("zero", 0.0),
    ("negative_zero", -0.0),
    ("inf", f32::INFINITY),
    ("neg_inf", f32::NEG_INFINITY),
];

fn feature_name(f: usize) -> &'static str {
    FEATURES.get(f).map_or("?", |s| s.name)
}

/// A row reaching split `s` of `tree` (features on its path moved into the
/// path's intervals), starting from `base`.
fn reaching_row(tree: &scorer_model::LgbTree, s: usize, base: &[f32]) -> Vec<f32> {
    let n = tree.num_leaves.saturating_sub(1);
    let mut parent: Vec<Option<(usize, bool)>> = vec![None; n];
    for p in 0..n {
        if let Ok(c) = usize::try_from(tree.left_child[p]) {
            parent[c] = Some((p, true));
        }
        if let Ok(c) = usize::try_from(tree.right_child[p]) {
            parent[c] = Some((p, false));
        }
    }
    let mut bounds = vec![(f64::NEG_INFINITY, f64::INFINITY); FEATURE_COUNT];
    let mut constrained = [false; FEATURE_COUNT];
    let mut cur = s;
    while let Some((p, left)) = parent[cur] {
        let f = tree.split_feature[p] as usize;
        let t = tree.threshold[p];
        if f < FEATURE_COUNT {
            constrained[f] = true;
            if left {
                bounds[f].1 = bounds[f].1.min(t);
            } else {
                bounds[f].0 = bounds[f].0.max(t);
            }
        }
        cur = p;
    }
    let mut row = base.to_vec();
    for f in (0..FEATURE_COUNT).filter(|&f| constrained[f]) {
        let (lo, hi) = bounds[f];
        let v = f64::from(row[f]);
        if v.is_nan() || v <= lo || v > hi {
            let cand = lightgbm_threshold_f32(hi, ThresholdRounding::Down);
            row[f] = if hi.is_finite() && f64::from(cand) > lo {
                cand
            } else if lo.is_finite() {
                lightgbm_threshold_f32(lo, ThresholdRounding::Down).next_up()
            } else {
                0.0
            };
        }
    }
    row
}

/// The golden input rows and their kinds (see the module docs).
/// `valid` is row-major validation features (`FEATURE_COUNT` per row).
pub fn golden_inputs(model: &LgbModel, valid: &[f32]) -> Vec<(String, Vec<f32>)> {
    let n_valid = valid.len() / FEATURE_COUNT;
    let vrow = |i: usize| valid[i * FEATURE_COUNT..(i + 1) * FEATURE_COUNT].to_vec();
    let base = if n_valid > 0 {
        vrow(0)
    } else {
        vec![0.0; FEATURE_COUNT]
    };
    let mut rows = Vec::new();
    let take = GOLDEN_VALIDATION_ROWS.min(n_valid);
    for k in 0..take {
        rows.push(("validation".to_string(), vrow(k * n_valid / take)));
    }
    for (name, v) in SPECIALS {
        rows.push((format!("all_{name}"), vec![v; FEATURE_COUNT]));
    }
    // The two features with the most splits.
    let mut uses = [0usize; FEATURE_COUNT];
    for t in &model.trees {
        for &f in &t.split_feature {
            if let Some(u) = uses.get_mut(f as usize) {
                *u += 1;
            }
        }
    }
    let mut by_use: Vec<usize> = (0..FEATURE_COUNT).collect();
    by_use.sort_by_key(|&f| std::cmp::Reverse(uses[f]));
    for &f in by_use.iter().take(2) {
        for (name, v) in SPECIALS {
            let mut r = base.clone();
            r[f] = v;
            rows.push((format!("{name} f{f} {}", feature_name(f)), r));
        }
    }
    // Split boundaries: node 0 of every tree, then node 1, … (distinct splits).
    let mut seen: Vec<(u32, u64)> = Vec::new();
    let max_nodes = model
        .trees
        .iter()
        .map(|t| t.num_leaves.saturating_sub(1))
        .max()
        .unwrap_or(0);
    'outer: for s in 0..max_nodes {
        for (ti, t) in model.trees.iter().enumerate() {
            if seen.len() >= GOLDEN_BOUNDARY_SPLITS {
                break 'outer;
            }
            if s + 1 >= t.num_leaves {
                continue;
            }
            let f = t.split_feature[s];
            let thr = t.threshold[s];
            if seen.contains(&(f, thr.to_bits())) || f as usize >= FEATURE_COUNT {
                continue;
            }
            seen.push((f, thr.to_bits()));
            let b = if n_valid > 0 {
                vrow(seen.len() * 7 % n_valid)
            } else {
                base.clone()
            };
            let r = reaching_row(t, s, &b);
            let t32 = lightgbm_threshold_f32(thr, ThresholdRounding::Down);
            for (which, v) in [("t_down", t32), ("next_up", t32.next_up())] {
                let mut r2 = r.clone();
                r2[f as usize] = v;
                rows.push((
                    format!(
                        "split_boundary tree {ti} node {s} f{f} {} <= {thr:e}: {which}",
                        feature_name(f as usize)
                    ),
                    r2,
                ));
            }
        }
    }
    rows
}

/// Builds `golden.json` for `model`: [`golden_inputs`] with LightGBM's
/// probabilities from `booster`.
///
/// # Errors
/// [`crate::TrainerError::LightGbm`] if prediction fails.
pub fn build_golden(booster: &Booster, model: &LgbModel, valid: &[f32]) -> Result<GoldenFile> {
    let inputs = golden_inputs(model, valid);
    let flat: Vec<f32> = inputs.iter().flat_map(|(_, r)| r.iter().copied()).collect();
    let p = predict(booster, &flat)?;
    Ok(GoldenFile {
        rows: inputs
            .into_iter()
            .zip(p)
            .map(|((kind, r), probability)| GoldenRow {
                kind,
                features: r.into_iter().map(JsonF32).collect(),
                prediction: probability,
            })
            .collect(),
    })
}

//! The acceptance bar: the probability the service computes (the exported
//! ONNX graph run by tract through [`scorer_model::op`]) must equal
//! LightGBM's own `predict` on the same f32 features within
//! [`PARITY_TOLERANCE`] (1e-5) on every row. f32 summation of the leaf
//! values is the only difference allowed.

use std::fmt;

use scorer_core::features::{FEATURE_COUNT, FEATURES};
use scorer_model::RunnablePlan;
use scorer_model::card::PARITY_TOLERANCE;
use serde::{Deserialize, Serialize};

use crate::error::Result;

/// Rows per tract call when scoring many rows.
pub const SERVE_CHUNK_ROWS: usize = 16_384;

/// Runs `features` (row-major, `FEATURE_COUNT` per row) through the
/// service's ONNX path in chunks of [`SERVE_CHUNK_ROWS`]; `on_rows` gets
/// the number of rows done after each chunk.
///
/// # Errors
/// [`crate::TrainerError::Model`] if tract fails.
pub fn served_probabilities(
    plan: &RunnablePlan,
    features: &[f32],
    mut on_rows: impl FnMut(usize),
) -> Result<Vec<f32>> {
    let width = plan.n_features();
    let mut out = Vec::with_capacity(features.len() / width.max(1));
    for chunk in features.chunks(SERVE_CHUNK_ROWS * width) {
        let n = chunk.len() / width;
        out.extend(scorer_model::run(plan, chunk, n)?);
        on_rows(out.len());
    }
    Ok(out)
}

/// Largest difference observed on one set of rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParityReport {
    /// Which rows (`"validation"`, `"golden"`, …).
    pub set: String,
    /// Rows compared.
    pub rows: usize,
    /// max |served − LightGBM| over the rows.
    pub max_abs_diff: f64,
    /// Tolerance applied.
    pub tolerance: f64,
}

/// The first row (in order) whose difference exceeds the tolerance.
#[derive(Debug, Clone, PartialEq)]
pub struct ParityFailure {
    /// Which rows (`"validation"`, `"golden"`, …).
    pub set: String,
    /// Row index within the set.
    pub row: usize,
    /// Kind of row, for golden rows (`"nan"`, `"split_boundary …"`).
    pub kind: Option<String>,
    /// Prediction from the service's ONNX path (for the model.txt check,
    /// LightGBM's from `model.txt`).
    pub p_served: f64,
    /// Prediction from LightGBM (or the golden file).
    pub p_lightgbm: f64,
    /// Tolerance applied.
    pub tolerance: f64,
    /// The row's f32 features.
    pub features: Vec<f32>,
}

impl fmt::Display for ParityFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The model.txt check compares LightGBM's own prediction with the
        // stored golden value; every other set compares served with LightGBM.
        let (got, want) = if self.set.contains("model.txt") {
            ("model.txt", "stored")
        } else {
            ("served", "LightGBM")
        };
        write!(
            f,
            "parity check failed on {} row {}{}: {got} {:.9}, {want} {:.9}, |diff| = {:e} > {:e}\nrow features:",
            self.set,
            self.row,
            self.kind
                .as_deref()
                .map(|k| format!(" ({k})"))
                .unwrap_or_default(),
            self.p_served,
            self.p_lightgbm,
            (self.p_served - self.p_lightgbm).abs(),
            self.tolerance
        )?;
        for (i, v) in self.features.iter().enumerate() {
            let name = FEATURES.get(i).map_or("?", |s| s.name);
            write!(f, "\n  [{i:>2}] {name} = {v:?}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ParityFailure {}

/// Compares `p_served` with `p_lightgbm` row by row.
///
/// A NaN on either side fails. `kinds`, when given, labels the rows in a
/// failure.
///
/// # Errors
/// [`ParityFailure`] for the first row with `|diff| > PARITY_TOLERANCE`.
pub fn check(
    set: &str,
    features: &[f32],
    p_lightgbm: &[f64],
    p_served: &[f32],
    kinds: Option<&[String]>,
) -> Result<ParityReport, ParityFailure> {
    let mut max = 0f64;
    for (i, (&l, &s)) in p_lightgbm.iter().zip(p_served).enumerate() {
        let d = (f64::from(s) - l).abs();
        if d.is_nan() || d > PARITY_TOLERANCE {
            return Err(ParityFailure {
                set: set.to_string(),
                row: i,
                kind: kinds.and_then(|k| k.get(i)).cloned(),
                p_served: f64::from(s),
                p_lightgbm: l,
                tolerance: PARITY_TOLERANCE,
                features: features
                    .get(i * FEATURE_COUNT..(i + 1) * FEATURE_COUNT)
                    .map(<[f32]>::to_vec)
                    .unwrap_or_default(),
            });
        }
        max = max.max(d);
    }
    if p_lightgbm.len() != p_served.len() {
        return Err(ParityFailure {
            set: format!(
                "{set} (row count {} vs {})",
                p_lightgbm.len(),
                p_served.len()
            ),
            row: p_lightgbm.len().min(p_served.len()),
            kind: None,
            p_served: f64::NAN,
            p_lightgbm: f64::NAN,
            tolerance: PARITY_TOLERANCE,
            features: vec![],
        });
    }
    Ok(ParityReport {
        set: set.to_string(),
        rows: p_served.len(),
        max_abs_diff: max,
        tolerance: PARITY_TOLERANCE,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_first_offending_row_with_features() {
        let feats = vec![0.5f32; 2 * FEATURE_COUNT];
        let ok = check("v", &feats, &[0.25, 0.5], &[0.25, 0.500_001], None).unwrap();
        assert_eq!(ok.rows, 2);
        assert!(ok.max_abs_diff > 0.0 && ok.max_abs_diff < 2e-6);
        let kinds = vec!["a".to_string(), "nan".to_string()];
        let err = check("golden", &feats, &[0.25, 0.5], &[0.25, 0.6], Some(&kinds)).unwrap_err();
        assert_eq!(err.row, 1);
        let text = err.to_string();
        assert!(text.contains("golden row 1 (nan)"), "{text}");
        assert!(text.contains("cpu_usage = 0.5"), "{text}");
        assert!(check("v", &feats, &[0.5], &[f32::NAN], None).is_err());
    }
}

//! Regression metrics of predicted targets `ln(latency / E)` against the
//! observed ones, each beside the rules' own baseline on the same rows.
//!
//! The rules' prediction of the target is 0: they expect exactly E. So the
//! baseline's MAE is `mean |y|` and its R² is `1 − Σy² / Σ(y − ȳ)²` (≤ 0
//! whenever the rules are biased). The quantile calibration is the share
//! of outcomes above the prediction: about 0.5 for a mean (L2) model, about
//! `1 − α` for a quantile model at `α`.

use serde::{Deserialize, Serialize};

use crate::target::Distribution;

/// One predictor's errors.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Errors {
    /// Coefficient of determination (1 perfect, 0 the mean, < 0 worse).
    pub r2: Option<f64>,
    /// Mean absolute error in log space (0.1 ≈ 10 % off).
    pub mae_log: f64,
    /// Root mean squared error in log space.
    pub rmse_log: f64,
    /// Share of outcomes above the prediction, fraction 0..=1.
    pub share_above: f64,
}

impl Errors {
    /// Errors of `pred` against `y` (same length, non-empty).
    pub fn compute(pred: &[f64], y: &[f32]) -> Self {
        let n = y.len().max(1) as f64;
        let mean = y.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
        let (mut abs, mut sq, mut tot, mut above) = (0.0, 0.0, 0.0, 0usize);
        for (&p, &v) in pred.iter().zip(y) {
            let v = f64::from(v);
            abs += (v - p).abs();
            sq += (v - p).powi(2);
            tot += (v - mean).powi(2);
            above += usize::from(v > p);
        }
        Self {
            r2: (tot > 0.0).then(|| 1.0 - sq / tot),
            mae_log: abs / n,
            rmse_log: (sq / n).sqrt(),
            share_above: above as f64 / n,
        }
    }
}

/// The metrics `train` and `validate` report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Rows evaluated.
    pub rows: usize,
    /// The targets' distribution.
    pub target: Distribution,
    /// The model's errors.
    pub model: Errors,
    /// The rules' errors (predicting 0: exactly E).
    pub rules: Errors,
    /// The model's errors on PUT rows only (`None` without PUT rows).
    pub model_put: Option<Errors>,
    /// The rules' errors on PUT rows only.
    pub rules_put: Option<Errors>,
}

impl Metrics {
    /// All metrics of predictions `pred` against targets `y`; `is_put` says
    /// which rows are PUTs.
    pub fn compute(pred: &[f64], y: &[f32], is_put: &[bool]) -> Metrics {
        let zeros = vec![0.0; y.len()];
        let put: Vec<usize> = (0..y.len()).filter(|&i| is_put[i]).collect();
        let sub = |xs: &[f64]| put.iter().map(|&i| xs[i]).collect::<Vec<_>>();
        let y_put: Vec<f32> = put.iter().map(|&i| y[i]).collect();
        Metrics {
            rows: y.len(),
            target: Distribution::of(y),
            model: Errors::compute(pred, y),
            rules: Errors::compute(&zeros, y),
            model_put: (!put.is_empty()).then(|| Errors::compute(&sub(pred), &y_put)),
            rules_put: (!put.is_empty()).then(|| Errors::compute(&sub(&zeros), &y_put)),
        }
    }

    /// A human-readable table.
    pub fn table(&self) -> String {
        let f = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.4}"));
        let t = &self.target;
        let mut s = format!(
            "rows {}  target ln(latency/E): mean {:.3}  std {:.3}  p10 {:.3}  p50 {:.3}  p90 {:.3}  p99 {:.3}\n",
            self.rows, t.mean, t.std, t.p10, t.p50, t.p90, t.p99
        );
        s.push_str("           R²       MAE(log)  RMSE(log)  share above\n");
        let mut line = |name: &str, e: &Errors| {
            s.push_str(&format!(
                "{name:<9} {:>8}  {:>8.4}  {:>9.4}  {:>11.4}\n",
                f(e.r2),
                e.mae_log,
                e.rmse_log,
                e.share_above
            ));
        };
        line("model", &self.model);
        line("rules", &self.rules);
        if let (Some(m), Some(r)) = (&self.model_put, &self.rules_put) {
            line("model PUT", m);
            line("rules PUT", r);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_known_values() {
        let y = [1.0f32, -1.0, 1.0, -1.0];
        let perfect = Errors::compute(&[1.0, -1.0, 1.0, -1.0], &y);
        assert_eq!(perfect.r2, Some(1.0));
        assert_eq!(perfect.mae_log, 0.0);
        assert_eq!(perfect.share_above, 0.0);
        let zero = Errors::compute(&[0.0; 4], &y);
        assert_eq!(zero.r2, Some(0.0), "predicting the mean");
        assert_eq!(zero.mae_log, 1.0);
        assert_eq!(zero.share_above, 0.5);
        assert_eq!(Errors::compute(&[0.0], &[2.0]).r2, None, "no variance");
    }

    #[test]
    fn rules_baseline_predicts_zero_and_put_rows_are_split_out() {
        let y = [2.0f32, 2.0, 0.0, 0.0];
        let m = Metrics::compute(&[2.0, 2.0, 0.0, 0.0], &y, &[true, true, false, false]);
        assert_eq!(m.model.mae_log, 0.0);
        assert_eq!(m.rules.mae_log, 1.0);
        assert!(m.rules.r2.unwrap() < 0.0, "biased rules: R² below 0");
        assert_eq!(m.rules_put.unwrap().mae_log, 2.0);
        assert_eq!(m.model_put.unwrap().mae_log, 0.0);
        assert!(m.table().contains("rules PUT"));
        assert!(
            Metrics::compute(&[0.0], &[1.0], &[false])
                .model_put
                .is_none()
        );
    }
}

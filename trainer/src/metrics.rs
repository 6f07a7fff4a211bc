//! Classification metrics of predicted probabilities against 0/1 labels:
//! ROC AUC, log loss, Brier score and a calibration table by decile.

use serde::{Deserialize, Serialize};

/// Probabilities are clipped to `[EPS, 1 − EPS]` in the log loss.
pub const LOG_LOSS_EPS: f64 = 1e-15;

/// ROC AUC of `scores` (higher = more likely positive) against `labels`
/// (> 0.5 positive): the probability that a random positive scores above a
/// random negative, ties counting one half (Mann–Whitney U with average
/// ranks). `None` when either class is absent or the lengths differ.
pub fn auc(scores: &[f64], labels: &[f32]) -> Option<f64> {
    if scores.len() != labels.len() {
        return None;
    }
    let n_pos = labels.iter().filter(|&&y| y > 0.5).count();
    let n_neg = labels.len() - n_pos;
    if n_pos == 0 || n_neg == 0 {
        return None;
    }
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    let mut rank_sum_pos = 0.0;
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && scores[order[j + 1]] == scores[order[i]] {
            j += 1;
        }
        // Ranks i+1 ..= j+1 share their average.
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            if labels[k] > 0.5 {
                rank_sum_pos += avg;
            }
        }
        i = j + 1;
    }
    let (p, n) = (n_pos as f64, n_neg as f64);
    Some((rank_sum_pos - p * (p + 1.0) / 2.0) / (p * n))
}

/// Mean binary cross-entropy (nats), probabilities clipped to
/// `[LOG_LOSS_EPS, 1 − LOG_LOSS_EPS]`. `None` for empty or unequal inputs.
pub fn log_loss(p: &[f64], labels: &[f32]) -> Option<f64> {
    if p.is_empty() || p.len() != labels.len() {
        return None;
    }
    let s: f64 = p
        .iter()
        .zip(labels)
        .map(|(&p, &y)| {
            let p = p.clamp(LOG_LOSS_EPS, 1.0 - LOG_LOSS_EPS);
            if y > 0.5 { -p.ln() } else { -(1.0 - p).ln() }
        })
        .sum();
    Some(s / p.len() as f64)
}

/// Mean squared error of the probabilities (Brier score, 0 best).
/// `None` for empty or unequal inputs.
pub fn brier(p: &[f64], labels: &[f32]) -> Option<f64> {
    if p.is_empty() || p.len() != labels.len() {
        return None;
    }
    let s: f64 = p
        .iter()
        .zip(labels)
        .map(|(&p, &y)| (p - f64::from(y)).powi(2))
        .sum();
    Some(s / p.len() as f64)
}

/// One calibration bin.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CalibrationBin {
    /// Decile, 1 (lowest predictions) ..= 10.
    pub decile: usize,
    /// Rows in the bin.
    pub rows: usize,
    /// Mean predicted probability.
    pub mean_predicted: f64,
    /// Observed positive rate.
    pub observed_rate: f64,
}

/// Rows sorted by prediction and cut into 10 equal-count bins (the first
/// `n mod 10` bins get one extra row); empty bins are omitted.
pub fn calibration_deciles(p: &[f64], labels: &[f32]) -> Vec<CalibrationBin> {
    let n = p.len().min(labels.len());
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut out = Vec::new();
    let mut start = 0;
    for d in 0..10 {
        let len = n / 10 + usize::from(d < n % 10);
        let idx = &order[start..start + len];
        start += len;
        if idx.is_empty() {
            continue;
        }
        let k = idx.len() as f64;
        out.push(CalibrationBin {
            decile: d + 1,
            rows: idx.len(),
            mean_predicted: idx.iter().map(|&i| p[i]).sum::<f64>() / k,
            observed_rate: idx.iter().map(|&i| f64::from(labels[i])).sum::<f64>() / k,
        });
    }
    out
}

/// The metrics `train` and `validate` report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Rows evaluated.
    pub rows: usize,
    /// Share of positive rows.
    pub positive_rate: f64,
    /// ROC AUC of the model (`None` with a single class).
    pub auc: Option<f64>,
    /// ROC AUC of the logged rule score on the same rows, for reference.
    pub rule_score_auc: Option<f64>,
    /// Mean log loss, nats.
    pub log_loss: Option<f64>,
    /// Brier score.
    pub brier: Option<f64>,
    /// Calibration by decile of predicted probability.
    pub calibration: Vec<CalibrationBin>,
}

impl Metrics {
    /// All metrics of predictions `p` against `labels`; `rule_score` is the
    /// logged rule score of the same rows.
    pub fn compute(p: &[f64], labels: &[f32], rule_score: &[f64]) -> Metrics {
        let n = labels.len();
        Metrics {
            rows: n,
            positive_rate: if n == 0 {
                0.0
            } else {
                labels.iter().map(|&y| f64::from(y)).sum::<f64>() / n as f64
            },
            auc: auc(p, labels),
            rule_score_auc: auc(rule_score, labels),
            log_loss: log_loss(p, labels),
            brier: brier(p, labels),
            calibration: calibration_deciles(p, labels),
        }
    }

    /// A human-readable table.
    pub fn table(&self) -> String {
        let f = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.4}"));
        let mut s = format!(
            "rows {}  positive rate {:.4}\nAUC {}  (rule score AUC {})  log loss {}  Brier {}\n",
            self.rows,
            self.positive_rate,
            f(self.auc),
            f(self.rule_score_auc),
            f(self.log_loss),
            f(self.brier)
        );
        s.push_str("decile  rows  mean p  observed\n");
        for b in &self.calibration {
            s.push_str(&format!(
                "{:>6} {:>5}  {:.4}  {:.4}\n",
                b.decile, b.rows, b.mean_predicted, b.observed_rate
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auc_known_values() {
        let y = [0.0, 0.0, 1.0, 1.0];
        assert_eq!(auc(&[0.1, 0.4, 0.35, 0.8], &y), Some(0.75));
        assert_eq!(auc(&[0.1, 0.2, 0.3, 0.4], &y), Some(1.0));
        assert_eq!(auc(&[0.5; 4], &y), Some(0.5));
        assert_eq!(auc(&[0.5, 0.6], &[1.0, 1.0]), None);
    }

    #[test]
    fn losses_and_calibration() {
        let p = [0.5, 0.5];
        let y = [1.0, 0.0];
        assert!((log_loss(&p, &y).unwrap() - std::f64::consts::LN_2).abs() < 1e-12);
        assert_eq!(brier(&p, &y), Some(0.25));
        assert!(log_loss(&[1.0], &[0.0]).unwrap().is_finite());
        let p: Vec<f64> = (0..25).map(|i| f64::from(i) / 25.0).collect();
        let y: Vec<f32> = (0..25).map(|i| if i >= 20 { 1.0 } else { 0.0 }).collect();
        let c = calibration_deciles(&p, &y);
        assert_eq!(c.len(), 10);
        assert_eq!(c.iter().map(|b| b.rows).sum::<usize>(), 25);
        assert_eq!(c[0].rows, 3);
        assert_eq!(c[9].observed_rate, 1.0);
        assert_eq!(c[0].observed_rate, 0.0);
    }
}

//! Shadow-mode comparison statistics (issue #6, `GET /v1/shadow`).
//!
//! Per decision: whether the primary and shadow final scores pick the same
//! top candidate, Spearman's rank correlation ρ of the two score vectors
//! (ties get their average rank, Spearman 1904), and the mean |Δ action|
//! over candidates. Reported as since-start totals and means.

use std::sync::Mutex;

use serde::Serialize;

/// Since-start totals.
#[derive(Debug, Default)]
pub struct ShadowStats {
    inner: Mutex<Totals>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Totals {
    decisions: u64,
    top_agree: u64,
    spearman_sum: f64,
    spearman_n: u64,
    abs_delta_sum: f64,
    abs_delta_n: u64,
}

/// What `GET /v1/shadow` shows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ShadowReport {
    /// Decisions where both models ran.
    pub decisions_compared: u64,
    /// Fraction of them whose top pick by final score agreed, 0..=1 (null when none).
    pub top_pick_agreement: Option<f64>,
    /// Mean per-decision Spearman ρ of final scores, −1..=1 (decisions with
    /// at least 2 candidates and non-constant scores; null when none).
    pub spearman_mean: Option<f64>,
    /// Mean |shadow action − primary action| over all candidates, 0..=2.
    pub mean_abs_delta_action: Option<f64>,
}

/// Average ranks (1-based), ties sharing the mean of their positions.
pub fn average_ranks(v: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut ranks = vec![0.0; v.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
            j += 1;
        }
        let r = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            ranks[k] = r;
        }
        i = j + 1;
    }
    ranks
}

/// Spearman's ρ: Pearson correlation of the average ranks. `None` for fewer
/// than 2 values, different lengths, or a constant vector.
pub fn spearman(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len() != b.len() || a.len() < 2 {
        return None;
    }
    let (ra, rb) = (average_ranks(a), average_ranks(b));
    let n = ra.len() as f64;
    let (ma, mb) = (ra.iter().sum::<f64>() / n, rb.iter().sum::<f64>() / n);
    let (mut cov, mut va, mut vb) = (0.0, 0.0, 0.0);
    for (x, y) in ra.iter().zip(&rb) {
        cov += (x - ma) * (y - mb);
        va += (x - ma) * (x - ma);
        vb += (y - mb) * (y - mb);
    }
    (va > 0.0 && vb > 0.0).then(|| cov / (va * vb).sqrt())
}

fn argmax(v: &[f64]) -> Option<usize> {
    (0..v.len()).max_by(|&a, &b| v[a].total_cmp(&v[b]).then(b.cmp(&a)))
}

impl ShadowStats {
    /// Records one decision: final scores and actions of both models over the
    /// same candidates, in the same order.
    pub fn record(
        &self,
        primary_final: &[f64],
        shadow_final: &[f64],
        primary_a: &[f32],
        shadow_a: &[f32],
    ) {
        let agree = argmax(primary_final) == argmax(shadow_final);
        let rho = spearman(primary_final, shadow_final);
        let deltas: f64 = primary_a
            .iter()
            .zip(shadow_a)
            .map(|(p, s)| f64::from((s - p).abs()))
            .sum();
        let mut t = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        t.decisions += 1;
        t.top_agree += u64::from(agree);
        if let Some(r) = rho {
            t.spearman_sum += r;
            t.spearman_n += 1;
        }
        t.abs_delta_sum += deltas;
        t.abs_delta_n += primary_a.len().min(shadow_a.len()) as u64;
    }

    /// The since-start report.
    pub fn report(&self) -> ShadowReport {
        let t = *self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mean = |s: f64, n: u64| (n > 0).then(|| s / n as f64);
        ShadowReport {
            decisions_compared: t.decisions,
            top_pick_agreement: mean(t.top_agree as f64, t.decisions),
            spearman_mean: mean(t.spearman_sum, t.spearman_n),
            mean_abs_delta_action: mean(t.abs_delta_sum, t.abs_delta_n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spearman_known_values() {
        assert_eq!(spearman(&[1.0, 2.0, 3.0], &[10.0, 20.0, 30.0]), Some(1.0));
        assert_eq!(spearman(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]), Some(-1.0));
        // Classic example: d² = 0+1+1+0+... ; ρ = 1 − 6Σd²/(n(n²−1)).
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        let b = [2.0, 1.0, 4.0, 3.0, 5.0];
        let rho = spearman(&a, &b).unwrap();
        assert!(
            (rho - (1.0 - 6.0 * 4.0 / (5.0 * 24.0))).abs() < 1e-12,
            "{rho}"
        );
        assert_eq!(spearman(&[1.0, 1.0], &[1.0, 2.0]), None);
        assert_eq!(average_ranks(&[5.0, 1.0, 5.0]), [2.5, 1.0, 2.5]);
    }

    #[test]
    fn report_aggregates_decisions() {
        let s = ShadowStats::default();
        assert_eq!(s.report().top_pick_agreement, None);
        s.record(&[90.0, 50.0], &[80.0, 60.0], &[0.5, -0.5], &[0.25, -0.25]);
        s.record(&[90.0, 50.0], &[40.0, 60.0], &[0.5, -0.5], &[0.5, -0.5]);
        let r = s.report();
        assert_eq!(r.decisions_compared, 2);
        assert_eq!(r.top_pick_agreement, Some(0.5));
        assert_eq!(r.spearman_mean, Some(0.0));
        assert_eq!(r.mean_abs_delta_action, Some(0.125));
    }
}

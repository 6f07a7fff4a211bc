//! `trainer compare`: offline shadow comparison of two models on logged
//! decisions.
//!
//! For every logged decision with at least one eligible candidate, each
//! model scores the eligible candidates through the service's ONNX path;
//! the final score is what the service would rank on:
//! [`Blend::final_score`]`(rule_score, Some(2p − 1), rule_action)` with the
//! logged rule score and the deterministic rule action of
//! [`service::model::rule_actions`] (default blend weights). Then:
//!
//! * **top-pick agreement**: share of decisions where both models'
//!   highest final score is the same candidate (ties: first in log order);
//! * **Spearman**: rank correlation of the two models' final scores per
//!   decision (average ranks for ties), averaged over decisions with ≥ 2
//!   eligible candidates where neither side is constant;
//! * **mean |Δ action|**: mean over eligible candidates of
//!   `|a_A − a_B|`, `a = 2p − 1`;
//! * **off-policy good-outcome rate** of each model used greedily (pick the
//!   top final score), by inverse propensity scoring over decisions whose
//!   picked candidate has an outcome and a logged propensity:
//!   `w = min(1[target pick = logged pick] / propensity, clip)`,
//!   `IPS = Σ w·r / n`, self-normalised `SNIPS = Σ w·r / Σ w`, and the
//!   effective sample size `ESS = (Σ w)² / Σ w²`; `r` = 1 for a good
//!   outcome (success and latency `< good_ms`), else 0: every outcome counts,
//!   there is no "in between" (training's `--bad-ms` has no role here). A
//!   small ESS (or few matches) means the estimate is weak; with no usable
//!   decision the estimates are `None` (`null` in JSON, `n/a` in the table),
//!   never a 0 that would read as a measured rate.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use service::features::FEATURE_COUNT;
use service::model::{Blend, model_action, rule_actions};

use crate::dataset::{LabelRule, LogTable};
use crate::error::{Result, TrainerError, io_err};
use crate::parity::served_probabilities;
use crate::pipeline::load_with_progress;
use crate::progress::Progress;
use crate::validate::{load_model_dir, vet_as_service};

/// Default cap on importance weights.
pub const DEFAULT_CLIP: f64 = 20.0;

/// Off-policy estimate of one policy's good-outcome rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OffPolicy {
    /// Decisions usable (picked candidate with outcome and propensity).
    pub decisions: usize,
    /// Of those, where the target policy picks the logged pick.
    pub matches: usize,
    /// Clipped IPS estimate of the good-outcome rate (`None` without usable
    /// decisions).
    pub ips: Option<f64>,
    /// Self-normalised IPS (`None` without matches).
    pub snips: Option<f64>,
    /// Effective sample size `(Σw)² / Σw²`.
    pub ess: f64,
    /// Weights that hit the clip.
    pub clipped: usize,
}

/// One model's side of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSide {
    /// Model directory.
    pub dir: String,
    /// `model_version` from its card.
    pub model_version: String,
    /// Mean action `2p − 1` over eligible candidates.
    pub mean_action: f64,
    /// Off-policy estimate of its greedy policy.
    pub off_policy: OffPolicy,
}

/// `compare.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareReport {
    /// Model A.
    pub a: ModelSide,
    /// Model B.
    pub b: ModelSide,
    /// Decisions compared (with ≥ 1 eligible candidate).
    pub decisions: usize,
    /// Eligible candidate rows scored.
    pub candidate_rows: usize,
    /// Share of decisions where the top picks agree.
    pub top_pick_agreement: f64,
    /// Mean per-decision Spearman correlation of final scores.
    pub mean_spearman: Option<f64>,
    /// Decisions that entered the Spearman mean.
    pub spearman_decisions: usize,
    /// Mean |a_A − a_B| over eligible candidates.
    pub mean_abs_action_diff: f64,
    /// The logging policy's observed good-outcome rate on the usable decisions.
    pub logged_good_rate: Option<f64>,
    /// Weight cap.
    pub clip: f64,
    /// A good outcome: success and latency below this, ms.
    pub good_ms: f64,
    /// Blend used for final scores.
    pub blend: BlendJson,
}

/// [`Blend`] as JSON.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BlendJson {
    /// Weight of the model action.
    pub blend_model: f64,
    /// Weight of the rule action.
    pub blend_rule: f64,
    /// Score points per unit of blended action.
    pub scale: f64,
}

/// Average ranks and Spearman's ρ: the service's own, so offline and
/// online (`GET /v1/shadow`) comparisons agree.
pub use service::model::shadow::{average_ranks as ranks, spearman};

fn argmax(xs: &[f64]) -> usize {
    let mut best = 0;
    for (i, x) in xs.iter().enumerate() {
        if *x > xs[best] {
            best = i;
        }
    }
    best
}

#[derive(Default)]
struct Ips {
    decisions: usize,
    matches: usize,
    sw: f64,
    swr: f64,
    sw2: f64,
    clipped: usize,
}

impl Ips {
    fn add(&mut self, matched: bool, propensity: f64, reward: f64, clip: f64) {
        self.decisions += 1;
        if !matched {
            return;
        }
        self.matches += 1;
        let raw = 1.0 / propensity;
        let w = if raw > clip {
            self.clipped += 1;
            clip
        } else {
            raw
        };
        self.sw += w;
        self.swr += w * reward;
        self.sw2 += w * w;
    }

    fn finish(&self) -> OffPolicy {
        OffPolicy {
            decisions: self.decisions,
            matches: self.matches,
            ips: (self.decisions > 0).then(|| self.swr / self.decisions as f64),
            snips: (self.sw > 0.0).then(|| self.swr / self.sw),
            ess: if self.sw2 > 0.0 {
                self.sw * self.sw / self.sw2
            } else {
                0.0
            },
            clipped: self.clipped,
        }
    }
}

/// Compares two sets of per-row probabilities on `table` (rows in table
/// order; only eligible rows are read). `pa`, `pb` have one entry per row.
pub fn compare_probabilities(
    table: &LogTable,
    pa: &[f32],
    pb: &[f32],
    good_ms: f64,
    blend: &Blend,
    clip: f64,
) -> (CompareReport, [f64; 2]) {
    let mut agree = 0usize;
    let mut decisions = 0usize;
    let mut rows = 0usize;
    let (mut sp_sum, mut sp_n) = (0.0, 0usize);
    let mut dsum = 0.0;
    let mut act_sum = [0.0f64; 2];
    let mut ips = [Ips::default(), Ips::default()];
    let (mut logged_r, mut logged_n) = (0.0, 0usize);
    let mut obs: Vec<[f32; FEATURE_COUNT]> = Vec::new();
    let mut ra = Vec::new();
    for d in &table.decisions {
        let elig: Vec<usize> = d.rows.clone().filter(|&i| table.eligible[i]).collect();
        if elig.is_empty() {
            continue;
        }
        decisions += 1;
        rows += elig.len();
        obs.clear();
        for &i in &elig {
            let mut o = [0f32; FEATURE_COUNT];
            o.copy_from_slice(table.row(i));
            obs.push(o);
        }
        rule_actions(&d.key_prefix, &obs, &mut ra);
        let mut finals = [Vec::new(), Vec::new()];
        for (k, &i) in elig.iter().enumerate() {
            let a = [model_action(pa[i]), model_action(pb[i])];
            for m in 0..2 {
                act_sum[m] += f64::from(a[m]);
                finals[m].push(blend.final_score(table.rule_score[i], Some(a[m]), ra[k]));
            }
            dsum += f64::from((a[0] - a[1]).abs());
        }
        let picks = [argmax(&finals[0]), argmax(&finals[1])];
        if picks[0] == picks[1] {
            agree += 1;
        }
        if let Some(s) = spearman(&finals[0], &finals[1]) {
            sp_sum += s;
            sp_n += 1;
        }
        // Off-policy: the logged pick among the eligible candidates.
        let Some(k) = elig.iter().position(|&i| table.picked[i]) else {
            continue;
        };
        let i = elig[k];
        let (Some(lat), Some(ok), Some(prop)) =
            (table.latency_ms[i], table.success[i], table.probability[i])
        else {
            continue;
        };
        if prop.is_nan() || prop <= 0.0 {
            continue;
        }
        let r = LabelRule::reward_below(good_ms, lat, ok);
        logged_r += r;
        logged_n += 1;
        for m in 0..2 {
            ips[m].add(picks[m] == k, prop, r, clip);
        }
    }
    let side = |m: usize| ModelSide {
        dir: String::new(),
        model_version: String::new(),
        mean_action: if rows == 0 {
            0.0
        } else {
            act_sum[m] / rows as f64
        },
        off_policy: ips[m].finish(),
    };
    let report = CompareReport {
        a: side(0),
        b: side(1),
        decisions,
        candidate_rows: rows,
        top_pick_agreement: if decisions == 0 {
            0.0
        } else {
            agree as f64 / decisions as f64
        },
        mean_spearman: (sp_n > 0).then(|| sp_sum / sp_n as f64),
        spearman_decisions: sp_n,
        mean_abs_action_diff: if rows == 0 { 0.0 } else { dsum / rows as f64 },
        logged_good_rate: (logged_n > 0).then(|| logged_r / logged_n as f64),
        clip,
        good_ms,
        blend: BlendJson {
            blend_model: blend.blend_model,
            blend_rule: blend.blend_rule,
            scale: blend.scale,
        },
    };
    (report, act_sum)
}

/// Runs `trainer compare`: loads both models and the logs, compares, and
/// writes the report as JSON to `out`.
///
/// `good_ms`: a good outcome is a success faster than this, ms (> 0);
/// `clip`: cap on importance weights (>= 1).
///
/// # Errors
/// Model-directory, log and tract errors ([`TrainerError::Refused`] for a
/// model the service would refuse); [`TrainerError::NoData`] when no
/// decision has an eligible candidate; [`TrainerError::InvalidArgument`]
/// for `clip < 1` or `good_ms` not a positive finite number.
pub fn run_compare(
    a: &Path,
    b: &Path,
    logs: &[PathBuf],
    good_ms: f64,
    clip: f64,
    out: &Path,
    progress: Progress,
) -> Result<CompareReport> {
    if !(good_ms > 0.0 && good_ms.is_finite()) {
        return Err(TrainerError::InvalidArgument(format!(
            "--good-ms must be a finite number of ms > 0, got {good_ms}"
        )));
    }
    if !(clip >= 1.0 && clip.is_finite()) {
        return Err(TrainerError::InvalidArgument(format!(
            "--clip must be a finite weight >= 1, got {clip}"
        )));
    }
    let ma = load_model_dir(a)?;
    let mb = load_model_dir(b)?;
    vet_as_service(a)?;
    vet_as_service(b)?;
    let table = load_with_progress(logs, progress)?;
    let n = table.len() as u64;
    let pb_a = progress.bar(n, "scoring A", "rows");
    let pa = served_probabilities(&ma.plan, &table.features, |d| pb_a.set_position(d as u64))?;
    pb_a.finish_and_clear();
    let pb_b = progress.bar(n, "scoring B", "rows");
    let pbv = served_probabilities(&mb.plan, &table.features, |d| pb_b.set_position(d as u64))?;
    pb_b.finish_and_clear();
    let (mut report, _) =
        compare_probabilities(&table, &pa, &pbv, good_ms, &Blend::default(), clip);
    if report.decisions == 0 {
        return Err(TrainerError::NoData(
            "no logged decision has an eligible candidate".into(),
        ));
    }
    report.a.dir = a.display().to_string();
    report.a.model_version = ma.card.model_version.clone();
    report.b.dir = b.display().to_string();
    report.b.model_version = mb.card.model_version.clone();
    let mut json = serde_json::to_vec_pretty(&report)?;
    json.push(b'\n');
    std::fs::write(out, json).map_err(io_err(out))?;
    Ok(report)
}

impl CompareReport {
    /// A human-readable table.
    pub fn table(&self) -> String {
        let o = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.4}"));
        let mut s = format!(
            "decisions {}  eligible candidates {}\n\
             top-pick agreement      {:.4}\n\
             mean Spearman (finals)  {} over {} decisions\n\
             mean |action A - B|     {:.4}\n\
             logged policy good rate {}\n\n",
            self.decisions,
            self.candidate_rows,
            self.top_pick_agreement,
            o(self.mean_spearman),
            self.spearman_decisions,
            self.mean_abs_action_diff,
            o(self.logged_good_rate)
        );
        s.push_str(&format!(
            "{:<4} {:<28} {:>8} {:>8} {:>8} {:>9} {:>10} {:>8}\n",
            "", "model_version", "mean a", "IPS", "SNIPS", "ESS", "matches", "clipped"
        ));
        for (name, m) in [("A", &self.a), ("B", &self.b)] {
            let op = &m.off_policy;
            s.push_str(&format!(
                "{:<4} {:<28} {:>8.4} {:>8} {:>8} {:>9.1} {:>10} {:>8}\n",
                name,
                m.model_version,
                m.mean_action,
                o(op.ips),
                o(op.snips),
                op.ess,
                format!("{}/{}", op.matches, op.decisions),
                op.clipped
            ));
        }
        s.push_str(&format!(
            "(good = success and latency < {} ms; weights clipped at {}; IPS is weak when ESS is small)\n",
            self.good_ms, self.clip
        ));
        if self.a.off_policy.decisions == 0 {
            s.push_str(
                "(no decision has a picked candidate with an outcome and a propensity: no off-policy estimate; give the outcomes directory too)\n",
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spearman_values() {
        assert_eq!(spearman(&[1.0, 2.0, 3.0], &[10.0, 20.0, 30.0]), Some(1.0));
        assert_eq!(spearman(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]), Some(-1.0));
        assert_eq!(spearman(&[1.0, 1.0], &[1.0, 2.0]), None);
        assert_eq!(ranks(&[5.0, 1.0, 5.0]), vec![2.5, 1.0, 2.5]);
    }

    #[test]
    fn ips_weights_clip_and_ess() {
        let mut ips = Ips::default();
        ips.add(true, 0.5, 1.0, 20.0); // w 2
        ips.add(true, 0.01, 0.0, 20.0); // w 100 -> 20
        ips.add(false, 0.5, 1.0, 20.0);
        let o = ips.finish();
        assert_eq!((o.decisions, o.matches, o.clipped), (3, 2, 1));
        assert!((o.ips.unwrap() - 2.0 / 3.0).abs() < 1e-12);
        assert!((o.snips.unwrap() - 2.0 / 22.0).abs() < 1e-12);
        assert!((o.ess - 22.0 * 22.0 / 404.0).abs() < 1e-12);
    }

    #[test]
    fn no_usable_decision_is_no_estimate_not_zero() {
        // Found by a fresh-eyes run: logs without outcomes printed IPS 0.0000.
        let o = Ips::default().finish();
        assert_eq!((o.decisions, o.ips, o.snips, o.ess), (0, None, None, 0.0));
        let json = serde_json::to_value(o).unwrap();
        assert!(json["ips"].is_null(), "{json}");
    }
}

//! `trainer compare`: offline comparison of two models on logged decisions,
//! with off-policy estimates of what each would have done.
//!
//! For every logged decision with at least one eligible candidate and
//! every candidate's feature vector (the service logs them on a
//! `candidate_features_rate` sample of decisions, the pick's on all), each
//! model predicts `ln(latency / E)` for the eligible candidates through the
//! service's ONNX path. The score the service would rank on is rebuilt from
//! the log: before the model stage it is the routing cost's
//! `100 × fastest E / E` (E from feature `expected_latency_ln_ms`), then
//! [`Blend::final_score`] divides it by the model's bounded factor
//! (centred on the decision's mean prediction, as served) and adds
//! the deterministic rule action (default blend). Each model's policy is
//! greedy on that score (the service's default `max`). Then:
//!
//! * **top-pick agreement**, **Spearman** of the two models' final scores
//!   per decision, and the **mean |Δ action|** (`ln` of the factors);
//! * **off-policy estimates** of each greedy policy's **mean latency**
//!   (censored as in training: a failure counts as at least its timeout or
//!   the failure penalty) and **share of slow outcomes** (a failure, or
//!   slower than `slow_factor × E`), over decisions whose picked candidate
//!   has an outcome and a logged propensity `p`:
//!   - `w = min(1[target pick = logged pick] / p, clip)`;
//!   - IPS `Σ w·y / n`, self-normalised SNIPS `Σ w·y / Σ w`;
//!   - doubly robust `DR = (1/n) Σ [q̂(target pick) + w·(y − q̂(logged pick))]`,
//!     with the direct method `q̂` = model A's predicted latency `E·e^r̂`
//!     (and for the slow share, whether that prediction is above
//!     `slow_factor × E`), the same `q̂` for both policies;
//!   - the effective sample size `ESS = (Σ w)² / Σ w²`.
//!
//! An estimate is marked **weak** when its ESS is below [`WEAK_ESS`] or
//! under a tenth of the usable decisions: the target policy then rarely
//! agrees with what was logged, and IPS/SNIPS rest on few outcomes (DR
//! leans on `q̂`). Under a deterministic logging policy (`max`, `p = 1`),
//! only agreeing decisions carry weight.
//!
//! The SNIPS and DR mean latencies of each model and their paired
//! difference B − A get 95 % bootstrap intervals over the usable decisions
//! ([`bootstrap`]); the **verdict** says whether the DR difference's
//! interval excludes 0. Routing decisions interact through queues, which
//! no off-policy estimate sees: the closed-loop simulator run (`evaluate`)
//! is the real test.

use std::path::{Path, PathBuf};

use scorer_core::features::FEATURE_COUNT;
use scorer_model::{Blend, mean_prediction, rule_actions};
use serde::{Deserialize, Serialize};

use crate::dataset::LogTable;
use crate::error::{Result, TrainerError, io_err};
use crate::parity::served_probabilities;
use crate::pipeline::load_with_progress;
use crate::progress::Progress;
use crate::target::{EXPECTED_LATENCY_FEATURE, TargetRule};
use crate::validate::{load_model_dir, vet_as_service};

#[path = "compare_bootstrap.rs"]
pub mod bootstrap;
use bootstrap::Contribution;
pub use bootstrap::{DEFAULT_BOOTSTRAP, DEFAULT_BOOTSTRAP_SEED, Interval, Verdict, VerdictOutcome};

/// Default cap on importance weights.
pub const DEFAULT_CLIP: f64 = 20.0;
/// Below this effective sample size an estimate is weak.
pub const WEAK_ESS: f64 = 100.0;

/// How `trainer compare` estimates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompareOptions {
    /// Cap on importance weights, >= 1.
    pub clip: f64,
    /// Bootstrap resamples for the confidence intervals; 0 = no intervals.
    pub bootstrap: usize,
    /// Seed of the bootstrap's resampling.
    pub seed: u64,
}

impl Default for CompareOptions {
    fn default() -> Self {
        Self {
            clip: DEFAULT_CLIP,
            bootstrap: DEFAULT_BOOTSTRAP,
            seed: DEFAULT_BOOTSTRAP_SEED,
        }
    }
}

/// Off-policy estimates of one greedy policy.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OffPolicy {
    /// Decisions usable (picked candidate with outcome and propensity).
    pub decisions: usize,
    /// Of those, where the target policy picks the logged pick.
    pub matches: usize,
    /// IPS mean latency, ms (`None` without usable decisions).
    pub ips_latency_ms: Option<f64>,
    /// SNIPS mean latency, ms (`None` without matches).
    pub snips_latency_ms: Option<f64>,
    /// 95 % bootstrap interval of `snips_latency_ms`, ms (`None` without
    /// the bootstrap).
    #[serde(default)]
    pub snips_latency_ci_ms: Option<Interval>,
    /// Doubly robust mean latency, ms.
    pub dr_latency_ms: Option<f64>,
    /// 95 % bootstrap interval of `dr_latency_ms`, ms (`None` without the
    /// bootstrap).
    #[serde(default)]
    pub dr_latency_ci_ms: Option<Interval>,
    /// IPS share of slow outcomes, fraction.
    pub ips_slow: Option<f64>,
    /// SNIPS share of slow outcomes, fraction.
    pub snips_slow: Option<f64>,
    /// Doubly robust share of slow outcomes, fraction.
    pub dr_slow: Option<f64>,
    /// Effective sample size `(Σw)² / Σw²`.
    pub ess: f64,
    /// Weights that hit the clip.
    pub clipped: usize,
    /// The estimate is too weak to trust (see the module docs).
    pub weak: bool,
}

/// One model's side of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSide {
    /// Model directory.
    pub dir: String,
    /// `model_version` from its card.
    pub model_version: String,
    /// Mean action (`ln` of the cost factor) over eligible candidates.
    pub mean_action: f64,
    /// Off-policy estimates of its greedy policy.
    pub off_policy: OffPolicy,
}

/// `compare.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareReport {
    /// Model A.
    pub a: ModelSide,
    /// Model B.
    pub b: ModelSide,
    /// Decisions compared (with ≥ 1 eligible candidate and every
    /// candidate's feature vector logged).
    pub decisions: usize,
    /// Decisions left out because only their picked candidate's feature
    /// vector was logged (outside the service's `candidate_features_rate`
    /// sample): neither model can be scored on their other candidates.
    pub partial_feature_decisions: usize,
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
    /// The logging policy's observed mean (censored) latency, ms.
    pub logged_latency_ms: Option<f64>,
    /// The logging policy's observed share of slow outcomes.
    pub logged_slow: Option<f64>,
    /// Weight cap.
    pub clip: f64,
    /// Bootstrap resamples behind the intervals (0: no intervals).
    #[serde(default)]
    pub bootstrap_resamples: usize,
    /// Seed of the bootstrap's resampling.
    #[serde(default)]
    pub bootstrap_seed: u64,
    /// SNIPS mean latency of B minus A's, ms.
    #[serde(default)]
    pub snips_latency_diff_ms: Option<f64>,
    /// 95 % bootstrap interval of `snips_latency_diff_ms` (paired), ms.
    #[serde(default)]
    pub snips_latency_diff_ci_ms: Option<Interval>,
    /// DR mean latency of B minus A's, ms; negative when B is faster.
    #[serde(default)]
    pub dr_latency_diff_ms: Option<f64>,
    /// 95 % bootstrap interval of `dr_latency_diff_ms` (paired), ms.
    #[serde(default)]
    pub dr_latency_diff_ci_ms: Option<Interval>,
    /// The conclusion drawn from `dr_latency_diff_ci_ms`.
    pub verdict: Verdict,
    /// Target rule (censoring, slow factor).
    pub target: TargetRule,
}

/// Average ranks and Spearman's ρ: the service's own, so offline and
/// online (`GET /v1/shadow`) comparisons agree.
pub use scorer_model::shadow::{average_ranks as ranks, spearman};

fn argmax(xs: &[f64]) -> usize {
    let mut best = 0;
    for (i, x) in xs.iter().enumerate() {
        if *x > xs[best] {
            best = i;
        }
    }
    best
}

/// Running sums of one policy's estimates.
#[derive(Default)]
struct Estimator {
    decisions: usize,
    matches: usize,
    sw: f64,
    sw2: f64,
    clipped: usize,
    /// `[latency, slow]`: Σ w·y and Σ DR terms.
    swy: [f64; 2],
    dr: [f64; 2],
}

impl Estimator {
    /// One usable decision: whether the target matched the logged pick,
    /// the logged propensity, the outcome `y` (`[latency, slow]`), and the
    /// direct method at the target's and the logged pick. Returns the
    /// decision's share of the latency estimates.
    fn add(
        &mut self,
        matched: bool,
        propensity: f64,
        y: [f64; 2],
        q_target: [f64; 2],
        q_logged: [f64; 2],
        clip: f64,
    ) -> Contribution {
        self.decisions += 1;
        let w = if matched {
            self.matches += 1;
            let raw = 1.0 / propensity;
            if raw > clip {
                self.clipped += 1;
                clip
            } else {
                raw
            }
        } else {
            0.0
        };
        self.sw += w;
        self.sw2 += w * w;
        let dr = [0, 1].map(|k| q_target[k] + w * (y[k] - q_logged[k]));
        for k in 0..2 {
            self.swy[k] += w * y[k];
            self.dr[k] += dr[k];
        }
        Contribution {
            w,
            wy: w * y[0],
            dr: dr[0],
        }
    }

    fn finish(&self) -> OffPolicy {
        let n = self.decisions as f64;
        let per = |x: f64| (self.decisions > 0).then(|| x / n);
        let snips = |x: f64| (self.sw > 0.0).then(|| x / self.sw);
        let ess = if self.sw2 > 0.0 {
            self.sw * self.sw / self.sw2
        } else {
            0.0
        };
        OffPolicy {
            decisions: self.decisions,
            matches: self.matches,
            ips_latency_ms: per(self.swy[0]),
            snips_latency_ms: snips(self.swy[0]),
            snips_latency_ci_ms: None,
            dr_latency_ms: per(self.dr[0]),
            dr_latency_ci_ms: None,
            ips_slow: per(self.swy[1]),
            snips_slow: snips(self.swy[1]),
            dr_slow: per(self.dr[1]),
            ess,
            clipped: self.clipped,
            weak: ess < WEAK_ESS || ess < 0.1 * n,
        }
    }
}

/// Compares two models' per-row predictions on `table` (rows in table
/// order; only eligible rows are read). `pa`, `pb` have one entry per row.
pub fn compare_predictions(
    table: &LogTable,
    pa: &[f32],
    pb: &[f32],
    target: &TargetRule,
    blend: &Blend,
    opts: &CompareOptions,
) -> CompareReport {
    let clip = opts.clip;
    let mut agree = 0usize;
    let mut decisions = 0usize;
    let mut rows = 0usize;
    let (mut sp_sum, mut sp_n) = (0.0, 0usize);
    let mut dsum = 0.0;
    let mut act_sum = [0.0f64; 2];
    let mut est = [Estimator::default(), Estimator::default()];
    let mut contributions: Vec<[Contribution; 2]> = Vec::new();
    let (mut logged, mut logged_n) = ([0.0f64; 2], 0usize);
    let mut obs: Vec<[f32; FEATURE_COUNT]> = Vec::new();
    let mut ra = Vec::new();
    let mut partial = 0usize;
    for d in &table.decisions {
        if !d.all_features {
            partial += 1;
            continue;
        }
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
        let ln_e: Vec<f64> = obs
            .iter()
            .map(|o| f64::from(o[EXPECTED_LATENCY_FEATURE]))
            .collect();
        let ln_fastest = ln_e.iter().copied().fold(f64::INFINITY, f64::min);
        let mut finals = [Vec::new(), Vec::new()];
        let mean = |p: &[f32]| mean_prediction(&elig.iter().map(|&i| p[i]).collect::<Vec<_>>());
        let means = [mean(pa), mean(pb)];
        for (k, &i) in elig.iter().enumerate() {
            let pre = 100.0 * (ln_fastest - ln_e[k]).exp();
            let p = [pa[i] - means[0], pb[i] - means[1]];
            for m in 0..2 {
                act_sum[m] += blend.model_action(p[m]);
                finals[m].push(blend.final_score(pre, Some(p[m]), ra[k]));
            }
            dsum += (blend.model_action(p[0]) - blend.model_action(p[1])).abs();
        }
        let picks = [argmax(&finals[0]), argmax(&finals[1])];
        if picks[0] == picks[1] {
            agree += 1;
        }
        if let Some(s) = spearman(&finals[0], &finals[1]) {
            sp_sum += s;
            sp_n += 1;
        }
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
        let row = table.row(i);
        let y = [
            target.censored_latency_ms(row, lat, ok),
            f64::from(u8::from(target.is_slow(row, lat, ok))),
        ];
        logged[0] += y[0];
        logged[1] += y[1];
        logged_n += 1;
        // The direct method: model A's predicted latency.
        let q = |j: usize| {
            let e = ln_e[j].exp();
            let predicted = e * f64::from(pa[elig[j]]).exp();
            [
                predicted,
                f64::from(u8::from(predicted > target.slow_factor * e)),
            ]
        };
        contributions
            .push([0, 1].map(|m| est[m].add(picks[m] == k, prop, y, q(picks[m]), q(k), clip)));
    }
    let ci = bootstrap::intervals(&contributions, opts.bootstrap, opts.seed);
    let side = |m: usize| ModelSide {
        dir: String::new(),
        model_version: String::new(),
        mean_action: if rows == 0 {
            0.0
        } else {
            act_sum[m] / rows as f64
        },
        off_policy: OffPolicy {
            snips_latency_ci_ms: [ci.a, ci.b][m].snips,
            dr_latency_ci_ms: [ci.a, ci.b][m].dr,
            ..est[m].finish()
        },
    };
    let per = |x: f64| (logged_n > 0).then(|| x / logged_n as f64);
    let (a, b) = (side(0), side(1));
    let diff = |f: fn(&OffPolicy) -> Option<f64>| {
        f(&a.off_policy).zip(f(&b.off_policy)).map(|(x, y)| y - x)
    };
    let snips_diff = diff(|o| o.snips_latency_ms);
    let dr_diff = diff(|o| o.dr_latency_ms);
    let weak_ess: Vec<(&str, f64)> = [("A", &a), ("B", &b)]
        .into_iter()
        .filter(|(_, s)| s.off_policy.weak && s.off_policy.decisions > 0)
        .map(|(name, s)| (name, s.off_policy.ess))
        .collect();
    let verdict = Verdict::new(dr_diff, ci.diff.dr, opts.bootstrap, &weak_ess);
    CompareReport {
        a,
        b,
        decisions,
        partial_feature_decisions: partial,
        candidate_rows: rows,
        top_pick_agreement: if decisions == 0 {
            0.0
        } else {
            agree as f64 / decisions as f64
        },
        mean_spearman: (sp_n > 0).then(|| sp_sum / sp_n as f64),
        spearman_decisions: sp_n,
        mean_abs_action_diff: if rows == 0 { 0.0 } else { dsum / rows as f64 },
        logged_latency_ms: per(logged[0]),
        logged_slow: per(logged[1]),
        clip,
        bootstrap_resamples: opts.bootstrap,
        bootstrap_seed: opts.seed,
        snips_latency_diff_ms: snips_diff,
        snips_latency_diff_ci_ms: ci.diff.snips,
        dr_latency_diff_ms: dr_diff,
        dr_latency_diff_ci_ms: ci.diff.dr,
        verdict,
        target: *target,
    }
}

/// Runs `trainer compare`: loads both models and the logs, compares, and
/// writes the report as JSON to `out`.
///
/// # Errors
/// Model-directory, log and tract errors ([`TrainerError::Refused`] for a
/// model the service would refuse); [`TrainerError::NoData`] when no
/// decision has an eligible candidate; [`TrainerError::InvalidArgument`]
/// for `clip < 1` or a bad target rule.
pub fn run_compare(
    a: &Path,
    b: &Path,
    logs: &[PathBuf],
    target: &TargetRule,
    opts: &CompareOptions,
    out: &Path,
    progress: Progress,
) -> Result<CompareReport> {
    target.validate()?;
    let clip = opts.clip;
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
    let mut report = compare_predictions(&table, &pa, &pbv, target, &Blend::default(), opts);
    if report.decisions == 0 {
        let why = if report.partial_feature_decisions > 0 {
            format!(
                "no logged decision has every candidate's feature vector ({} have only the pick's: raise [log] candidate_features_rate)",
                report.partial_feature_decisions
            )
        } else {
            "no logged decision has an eligible candidate".to_string()
        };
        return Err(TrainerError::NoData(why));
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
        let o = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.3}"));
        let mut s = format!(
            "decisions {}  eligible candidates {}  (left out: {} with only the pick's features)\n\
             top-pick agreement      {:.4}\n\
             mean Spearman (finals)  {} over {} decisions\n\
             mean |action A - B|     {:.4}\n\
             logged policy           mean latency {} ms, slow share {}\n\n",
            self.decisions,
            self.candidate_rows,
            self.partial_feature_decisions,
            self.top_pick_agreement,
            o(self.mean_spearman),
            self.spearman_decisions,
            self.mean_abs_action_diff,
            o(self.logged_latency_ms),
            o(self.logged_slow)
        );
        s.push_str(&format!(
            "{:<3} {:<26} {:>9} {:>9} {:>9} {:>7} {:>7} {:>7} {:>8} {:>11}\n",
            "",
            "model_version",
            "IPS ms",
            "SNIPS ms",
            "DR ms",
            "IPS sl",
            "SNIPS",
            "DR sl",
            "ESS",
            "matches"
        ));
        for (name, m) in [("A", &self.a), ("B", &self.b)] {
            let op = &m.off_policy;
            s.push_str(&format!(
                "{:<3} {:<26} {:>9} {:>9} {:>9} {:>7} {:>7} {:>7} {:>8.1} {:>11}{}\n",
                name,
                m.model_version,
                o(op.ips_latency_ms),
                o(op.snips_latency_ms),
                o(op.dr_latency_ms),
                o(op.ips_slow),
                o(op.snips_slow),
                o(op.dr_slow),
                op.ess,
                format!("{}/{}", op.matches, op.decisions),
                if op.weak { "  WEAK" } else { "" }
            ));
        }
        s.push_str(&format!(
            "(latency censored: a failure counts as at least max(timeout, {} ms); slow = failure or > {} x E; weights clipped at {}; WEAK = ESS < {WEAK_ESS} or under a tenth of the decisions: too few agreeing outcomes to trust IPS/SNIPS. Decisions interact through queues: the closed-loop simulator is the real test)\n",
            self.target.failure_penalty_ms, self.target.slow_factor, self.clip
        ));
        if self.a.off_policy.decisions == 0 {
            s.push_str(
                "(no decision has a picked candidate with an outcome and a propensity: no off-policy estimate; give the outcomes directory too)\n",
            );
        }
        if self.bootstrap_resamples > 0 && self.a.off_policy.decisions > 0 {
            s.push_str(&self.intervals_table());
        }
        s.push_str(&format!("verdict: {}\n", self.verdict.text));
        s
    }
}

#[cfg(test)]
#[path = "compare_tests.rs"]
mod tests;

//! Confidence intervals of `trainer compare`'s mean-latency estimates and
//! the verdict drawn from them.
//!
//! A nonparametric bootstrap over decisions: each resample draws the usable
//! decisions with replacement (as many as there are) and recomputes SNIPS
//! `Σ w·y / Σ w` and DR `(1/n) Σ DR term` for both models from their stored
//! per-decision contributions, so the models are never re-run. The
//! difference B − A is taken within each resample (paired: both policies on
//! the same decisions). Intervals are the 2.5 % and 97.5 % percentiles of
//! the resampled estimates. The resampling is seeded (ChaCha8): the same
//! seed, data and flags give the same intervals.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Default number of bootstrap resamples.
pub const DEFAULT_BOOTSTRAP: usize = 1_000;
/// Default seed of the bootstrap's resampling.
pub const DEFAULT_BOOTSTRAP_SEED: u64 = 42;
/// Confidence level of the intervals, fraction.
pub const CONFIDENCE: f64 = 0.95;

/// A percentile confidence interval at [`CONFIDENCE`]; its unit is that
/// of the field holding it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Lower bound (2.5 % percentile).
    pub low: f64,
    /// Upper bound (97.5 % percentile).
    pub high: f64,
}

impl Interval {
    /// True when `x` lies within the bounds (inclusive).
    pub fn contains(&self, x: f64) -> bool {
        self.low <= x && x <= self.high
    }
}

/// One usable decision's share of a policy's latency estimates.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Contribution {
    /// Clipped importance weight (0 when the policy disagrees with the log).
    pub w: f64,
    /// `w · y`, ms.
    pub wy: f64,
    /// The doubly robust term `q̂(target) + w·(y − q̂(logged))`, ms.
    pub dr: f64,
}

/// Intervals of SNIPS and DR mean latency, ms.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct LatencyIntervals {
    pub snips: Option<Interval>,
    pub dr: Option<Interval>,
}

/// Intervals for A, B and the paired difference B − A.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Intervals {
    pub a: LatencyIntervals,
    pub b: LatencyIntervals,
    pub diff: LatencyIntervals,
}

/// The `q`-quantile of sorted `xs` (linear between order statistics, as
/// numpy's default); `None` when empty.
fn quantile(xs: &[f64], q: f64) -> Option<f64> {
    let last = xs.len().checked_sub(1)?;
    let h = q * last as f64;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(last);
    Some(xs[lo] + (h - lo as f64) * (xs[hi] - xs[lo]))
}

fn interval(mut xs: Vec<f64>) -> Option<Interval> {
    xs.sort_by(f64::total_cmp);
    let tail = (1.0 - CONFIDENCE) / 2.0;
    Some(Interval {
        low: quantile(&xs, tail)?,
        high: quantile(&xs, 1.0 - tail)?,
    })
}

/// Bootstrap intervals from `contributions` (one `[A, B]` pair per usable
/// decision). A resample where a policy has no weight leaves its SNIPS
/// undefined and out of that interval. All `None` when `resamples` is 0 or
/// there is no decision.
pub(crate) fn intervals(
    contributions: &[[Contribution; 2]],
    resamples: usize,
    seed: u64,
) -> Intervals {
    let n = contributions.len();
    if resamples == 0 || n == 0 {
        return Intervals::default();
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut snips = [Vec::new(), Vec::new(), Vec::new()];
    let mut dr = [Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..resamples {
        let mut sum = [Contribution::default(); 2];
        for _ in 0..n {
            let pair = &contributions[rng.random_range(0..n)];
            for m in 0..2 {
                sum[m].w += pair[m].w;
                sum[m].wy += pair[m].wy;
                sum[m].dr += pair[m].dr;
            }
        }
        let s = sum.map(|c| (c.w > 0.0).then(|| c.wy / c.w));
        let d = sum.map(|c| c.dr / n as f64);
        for m in 0..2 {
            if let Some(v) = s[m] {
                snips[m].push(v);
            }
            dr[m].push(d[m]);
        }
        if let (Some(a), Some(b)) = (s[0], s[1]) {
            snips[2].push(b - a);
        }
        dr[2].push(d[1] - d[0]);
    }
    let [sa, sb, sd] = snips.map(interval);
    let [da, db, dd] = dr.map(interval);
    Intervals {
        a: LatencyIntervals { snips: sa, dr: da },
        b: LatencyIntervals { snips: sb, dr: db },
        diff: LatencyIntervals { snips: sd, dr: dd },
    }
}

/// What the DR mean-latency difference B − A shows at [`CONFIDENCE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictOutcome {
    /// The interval lies below 0: B's policy is faster.
    BLowers,
    /// The interval lies above 0: B's policy is slower.
    BRaises,
    /// The interval contains 0.
    NoDetectableDifference,
    /// No interval: the bootstrap is off or there is no DR estimate.
    Undetermined,
}

/// `trainer compare`'s one-line conclusion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// What the DR mean-latency difference shows.
    pub outcome: VerdictOutcome,
    /// Either model's estimate is weak (see the `weak` flags).
    pub weak: bool,
    /// The verdict as printed after `verdict: `.
    pub text: String,
}

impl Verdict {
    /// The verdict on the DR mean-latency difference B − A (`diff_ms`) and
    /// its interval; `weak_ess` holds `(model, ESS)` of each weak side.
    pub(crate) fn new(
        diff_ms: Option<f64>,
        ci_ms: Option<Interval>,
        resamples: usize,
        weak_ess: &[(&str, f64)],
    ) -> Self {
        let (outcome, mut text) = match (diff_ms, ci_ms) {
            (None, _) => (
                VerdictOutcome::Undetermined,
                "none: no off-policy estimate (no decision has a picked candidate with an outcome and a propensity)".to_string(),
            ),
            (Some(d), None) => (
                VerdictOutcome::Undetermined,
                if resamples == 0 {
                    format!("none without the bootstrap (--bootstrap 0); DR B - A: {d:.3} ms")
                } else {
                    format!("none: no interval; DR B - A: {d:.3} ms")
                },
            ),
            (Some(d), Some(ci)) if ci.high < 0.0 => (
                VerdictOutcome::BLowers,
                format!(
                    "B lowers DR mean latency by {:.3} ms (95% CI {:.3} to {:.3} ms)",
                    -d, -ci.high, -ci.low
                ),
            ),
            (Some(d), Some(ci)) if ci.low > 0.0 => (
                VerdictOutcome::BRaises,
                format!(
                    "B raises DR mean latency by {d:.3} ms (95% CI {:.3} to {:.3} ms)",
                    ci.low, ci.high
                ),
            ),
            (Some(d), Some(ci)) => (
                VerdictOutcome::NoDetectableDifference,
                format!(
                    "no detectable difference at 95% (DR B - A: {d:.3} ms, 95% CI {:.3} to {:.3} ms)",
                    ci.low, ci.high
                ),
            ),
        };
        let weak = !weak_ess.is_empty();
        if weak {
            let who: Vec<String> = weak_ess
                .iter()
                .map(|(m, ess)| format!("{m}'s (ESS {ess:.1})"))
                .collect();
            let rest = if who.len() == 1 {
                "estimate rests"
            } else {
                "estimates rest"
            };
            text.push_str(&format!(
                "; weak: {} {rest} on few agreeing outcomes",
                who.join(" and ")
            ));
        }
        Self {
            outcome,
            weak,
            text,
        }
    }
}

/// The interval as `low to high`, or `n/a`.
fn show(ci: Option<Interval>) -> String {
    ci.map_or("n/a".to_string(), |c| {
        format!("{:.3} to {:.3}", c.low, c.high)
    })
}

impl super::CompareReport {
    /// The intervals' lines of [`super::CompareReport::table`].
    pub(super) fn intervals_table(&self) -> String {
        let (a, b) = (&self.a.off_policy, &self.b.off_policy);
        let mut s = format!(
            "\n95% CI, ms (bootstrap: {} resamples of the {} usable decisions, seed {})\n{:<6} {:>22} {:>22}\n",
            self.bootstrap_resamples,
            a.decisions,
            self.bootstrap_seed,
            "",
            "SNIPS mean latency",
            "DR mean latency"
        );
        for (name, snips, dr) in [
            ("A", a.snips_latency_ci_ms, a.dr_latency_ci_ms),
            ("B", b.snips_latency_ci_ms, b.dr_latency_ci_ms),
            (
                "B - A",
                self.snips_latency_diff_ci_ms,
                self.dr_latency_diff_ci_ms,
            ),
        ] {
            s.push_str(&format!("{name:<6} {:>22} {:>22}\n", show(snips), show(dr)));
        }
        s
    }
}

#[cfg(test)]
#[path = "compare_bootstrap_tests.rs"]
mod tests;

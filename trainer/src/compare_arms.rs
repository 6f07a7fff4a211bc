//! `trainer compare --arms A,B`: two arms that ran live side by side (a
//! config canary's `stable` and `canary`, or a model A/B split's `a` and
//! `b`), compared on their own outcomes, from the decision log's `arm`
//! column.
//!
//! Each arm is a set of decisions; its outcomes are those of the picks
//! whose feedback arrived. Per arm: decisions, outcomes, failures, the
//! error rate, mean, p50 and p99 of the observed latency (ms). The
//! **on-policy difference** B − A of the mean, the p99 and the error rate
//! gets a 95 % percentile-bootstrap interval: each resample draws each
//! arm's outcomes with replacement, independently (the arms hold disjoint
//! keys), seeded (ChaCha8). The verdict reads the mean-latency interval.
//!
//! One experiment at a time: arm B's decisions of one config hash (logs
//! holding several canaries name theirs with `--arm-hash`), and arm A's
//! decisions made while those were.
//!
//! The difference is causal only when the split is random with respect to
//! the outcome: a split by key hash is; a split by key prefix compares
//! different keys, whose workloads may differ by themselves.
//!
//! No off-policy estimate is made here: a config changes the rules, which
//! the log keeps only as their result per candidate (rule and final
//! scores), so a logged decision cannot be re-scored under the other arm's
//! config. For two models, `trainer compare --a DIR --b DIR` re-scores
//! every logged decision with each and gives the IPS/SNIPS/DR estimates.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::compare::bootstrap::{CONFIDENCE, Interval};
use crate::dataset::{Decision, LogTable};
use crate::error::{Result, TrainerError};

/// One arm's outcomes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmSummary {
    /// The `arm` value.
    pub arm: String,
    /// Config hashes its decisions were scored with (one, unless the
    /// config changed during the run).
    pub config_hashes: Vec<String>,
    /// Decisions logged in this arm.
    pub decisions: usize,
    /// Of which with an outcome of the pick.
    pub outcomes: usize,
    /// Outcomes with `success = false`.
    pub failures: usize,
    /// failures / outcomes.
    pub error_rate: Option<f64>,
    /// Mean observed latency, ms.
    pub mean_latency_ms: Option<f64>,
    /// Median observed latency, ms.
    pub p50_ms: Option<f64>,
    /// 99th percentile observed latency, ms.
    pub p99_ms: Option<f64>,
}

/// B − A of one statistic, with its interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Difference {
    /// B − A on the logged outcomes.
    pub value: Option<f64>,
    /// 95 % bootstrap interval; `None` without the bootstrap or outcomes.
    pub interval: Option<Interval>,
}

/// The report of `trainer compare --arms`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmsReport {
    /// Arm A, then arm B.
    pub arms: [ArmSummary; 2],
    /// B − A mean latency, ms.
    pub mean_latency_ms: Difference,
    /// B − A p99 latency, ms.
    pub p99_ms: Difference,
    /// B − A error rate, fraction.
    pub error_rate: Difference,
    /// Bootstrap resamples.
    pub bootstrap: usize,
    /// Seed of the resampling.
    pub seed: u64,
    /// One-line conclusion on the mean latency.
    pub verdict: String,
}

/// One arm's outcomes, over its decisions that `keep`: (latency ms,
/// success).
fn outcomes_of(
    t: &LogTable,
    arm: &str,
    keep: &dyn Fn(&Decision) -> bool,
) -> (ArmSummary, Vec<(f64, bool)>) {
    let mut hashes: Vec<String> = Vec::new();
    let mut decisions = 0;
    let mut out = Vec::new();
    for d in t
        .decisions
        .iter()
        .filter(|d| d.arm.as_deref() == Some(arm) && keep(d))
    {
        decisions += 1;
        if !hashes.contains(&d.config_hash) {
            hashes.push(d.config_hash.clone());
        }
        let pick = d.rows.clone().find(|&r| t.picked[r]);
        if let Some(r) = pick
            && let (Some(l), Some(ok)) = (t.latency_ms[r], t.success[r])
        {
            out.push((l, ok));
        }
    }
    let stats = Stats::of(&out);
    let summary = ArmSummary {
        arm: arm.to_owned(),
        config_hashes: hashes,
        decisions,
        outcomes: out.len(),
        failures: out.iter().filter(|o| !o.1).count(),
        error_rate: stats.map(|s| s.error_rate),
        mean_latency_ms: stats.map(|s| s.mean),
        p50_ms: stats.map(|s| s.p50),
        p99_ms: stats.map(|s| s.p99),
    };
    (summary, out)
}

#[derive(Debug, Clone, Copy)]
struct Stats {
    mean: f64,
    p50: f64,
    p99: f64,
    error_rate: f64,
}

impl Stats {
    fn of(o: &[(f64, bool)]) -> Option<Self> {
        if o.is_empty() {
            return None;
        }
        let mut l: Vec<f64> = o.iter().map(|x| x.0).collect();
        let n = o.len() as f64;
        let mean = l.iter().sum::<f64>() / n;
        let error_rate = o.iter().filter(|x| !x.1).count() as f64 / n;
        Some(Self {
            mean,
            p50: quantile(&mut l, 0.5),
            p99: quantile(&mut l, 0.99),
            error_rate,
        })
    }
}

/// The `q`-quantile of `xs` (non-empty), linear between order statistics
/// as numpy's default; reorders `xs`.
fn quantile(xs: &mut [f64], q: f64) -> f64 {
    let last = xs.len() - 1;
    let h = q * last as f64;
    let lo = h.floor() as usize;
    let (_, &mut at_lo, above) = xs.select_nth_unstable_by(lo, f64::total_cmp);
    let at_hi = above
        .iter()
        .copied()
        .min_by(f64::total_cmp)
        .unwrap_or(at_lo);
    at_lo + (h - lo as f64) * (at_hi - at_lo)
}

fn interval(mut xs: Vec<f64>) -> Option<Interval> {
    if xs.is_empty() {
        return None;
    }
    let tail = (1.0 - CONFIDENCE) / 2.0;
    Some(Interval {
        low: quantile(&mut xs, tail),
        high: quantile(&mut xs, 1.0 - tail),
    })
}

/// Arm `b`'s config hashes, each with its decisions and their first and
/// last time (Unix ms), in order of first appearance.
fn hashes_of(table: &LogTable, b: &str) -> Vec<(String, usize, i64, i64)> {
    let mut out: Vec<(String, usize, i64, i64)> = Vec::new();
    for d in table
        .decisions
        .iter()
        .filter(|d| d.arm.as_deref() == Some(b))
    {
        match out.iter_mut().find(|h| h.0 == d.config_hash) {
            Some(h) => {
                h.1 += 1;
                h.2 = h.2.min(d.ts_ms);
                h.3 = h.3.max(d.ts_ms);
            }
            None => out.push((d.config_hash.clone(), 1, d.ts_ms, d.ts_ms)),
        }
    }
    out
}

/// Compares arms `a` and `b` of `table` with `resamples` bootstrap
/// resamples seeded by `seed`. One experiment at a time: with `b_hash`
/// (required when `b` spans several hashes: several canaries in the same
/// logs), arm `b`'s decisions scored with that config and arm `a`'s
/// within the time those span.
///
/// # Errors
/// [`TrainerError::NoData`] when an arm has no decision in the logs (or
/// none with `b_hash`), or `b` spans several config hashes and `b_hash`
/// is `None`.
pub fn compare_arms(
    table: &LogTable,
    [a, b]: [&str; 2],
    b_hash: Option<&str>,
    resamples: usize,
    seed: u64,
) -> Result<ArmsReport> {
    let hashes = hashes_of(table, b);
    let listed = || {
        hashes
            .iter()
            .map(|(h, n, _, _)| format!("{h} ({n} decisions)"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let chosen = match (b_hash, hashes.as_slice()) {
        (Some(h), _) => hashes.iter().find(|x| x.0 == h).ok_or_else(|| {
            TrainerError::NoData(format!(
                "no decision of arm `{b}` with config hash {h} (its hashes: {})",
                if hashes.is_empty() {
                    "none".to_owned()
                } else {
                    listed()
                }
            ))
        })?,
        (None, [one]) => one,
        (None, []) => &(String::new(), 0, i64::MIN, i64::MAX),
        (None, _) => {
            return Err(TrainerError::NoData(format!(
                "arm `{b}` spans {} config hashes, each its own experiment: {}; choose one with --arm-hash",
                hashes.len(),
                listed()
            )));
        }
    };
    // Arm A is windowed to arm B's decisions only when one of several
    // experiments is chosen.
    let (hash, from, to) = match b_hash {
        Some(_) => (chosen.0.clone(), chosen.2, chosen.3),
        None => (String::new(), i64::MIN, i64::MAX),
    };
    let in_window = move |d: &Decision| (from..=to).contains(&d.ts_ms);
    let (sa, oa) = outcomes_of(table, a, &in_window);
    let (sb, ob) = outcomes_of(table, b, &|d| hash.is_empty() || d.config_hash == hash);
    for s in [&sa, &sb] {
        if s.decisions == 0 {
            let mut seen: Vec<&str> = table
                .decisions
                .iter()
                .filter_map(|d| d.arm.as_deref())
                .collect();
            seen.sort_unstable();
            seen.dedup();
            return Err(TrainerError::NoData(format!(
                "no decision of arm `{}` in the logs (arms present: {})",
                s.arm,
                if seen.is_empty() {
                    "none".to_owned()
                } else {
                    seen.join(", ")
                }
            )));
        }
    }
    let (xa, xb) = (Stats::of(&oa), Stats::of(&ob));
    let diff = |f: fn(&Stats) -> f64| xa.zip(xb).map(|(x, y)| f(&y) - f(&x));
    let mut draws = [Vec::new(), Vec::new(), Vec::new()];
    if resamples > 0 && !oa.is_empty() && !ob.is_empty() {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let draw = |o: &[(f64, bool)], rng: &mut ChaCha8Rng| {
            let r: Vec<(f64, bool)> = (0..o.len())
                .map(|_| o[rng.random_range(0..o.len())])
                .collect();
            Stats::of(&r)
        };
        for _ in 0..resamples {
            if let (Some(x), Some(y)) = (draw(&oa, &mut rng), draw(&ob, &mut rng)) {
                draws[0].push(y.mean - x.mean);
                draws[1].push(y.p99 - x.p99);
                draws[2].push(y.error_rate - x.error_rate);
            }
        }
    }
    let [mean_i, p99_i, err_i] = draws.map(interval);
    let mean_latency_ms = Difference {
        value: diff(|s| s.mean),
        interval: mean_i,
    };
    let verdict = verdict(&sa.arm, &sb.arm, mean_latency_ms, resamples);
    Ok(ArmsReport {
        arms: [sa, sb],
        mean_latency_ms,
        p99_ms: Difference {
            value: diff(|s| s.p99),
            interval: p99_i,
        },
        error_rate: Difference {
            value: diff(|s| s.error_rate),
            interval: err_i,
        },
        bootstrap: resamples,
        seed,
        verdict,
    })
}

fn verdict(a: &str, b: &str, d: Difference, resamples: usize) -> String {
    match (d.value, d.interval) {
        (None, _) => format!("none: `{a}` or `{b}` has no outcome"),
        (Some(v), None) if resamples == 0 => {
            format!("none without the bootstrap (--bootstrap 0); {b} - {a}: {v:.3} ms")
        }
        (Some(v), None) => format!("none: no interval; {b} - {a}: {v:.3} ms"),
        (Some(v), Some(ci)) if ci.high < 0.0 => format!(
            "{b} lowers mean latency by {:.3} ms (95% CI {:.3} to {:.3} ms)",
            -v, -ci.high, -ci.low
        ),
        (Some(v), Some(ci)) if ci.low > 0.0 => format!(
            "{b} raises mean latency by {v:.3} ms (95% CI {:.3} to {:.3} ms)",
            ci.low, ci.high
        ),
        (Some(v), Some(ci)) => format!(
            "no detectable difference at 95% ({b} - {a}: {v:.3} ms, 95% CI {:.3} to {:.3} ms)",
            ci.low, ci.high
        ),
    }
}

impl ArmsReport {
    /// The report as a text table.
    pub fn table(&self) -> String {
        let o = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.3}"));
        let ci = |d: &Difference| {
            d.interval.map_or_else(String::new, |i| {
                format!(" (95% CI {:.3} to {:.3})", i.low, i.high)
            })
        };
        let mut s = String::from(
            "arm        decisions  outcomes  error rate  mean ms  p50 ms  p99 ms  config\n",
        );
        for a in &self.arms {
            s.push_str(&format!(
                "{:<10} {:>9}  {:>8}  {:>10}  {:>7}  {:>6}  {:>6}  {}\n",
                a.arm,
                a.decisions,
                a.outcomes,
                o(a.error_rate),
                o(a.mean_latency_ms),
                o(a.p50_ms),
                o(a.p99_ms),
                a.config_hashes.join(",")
            ));
        }
        let (a, b) = (&self.arms[0].arm, &self.arms[1].arm);
        s.push_str(&format!(
            "on-policy {b} - {a}: mean {} ms{}, p99 {} ms{}, error rate {}{}\n",
            o(self.mean_latency_ms.value),
            ci(&self.mean_latency_ms),
            o(self.p99_ms.value),
            ci(&self.p99_ms),
            o(self.error_rate.value),
            ci(&self.error_rate),
        ));
        s.push_str(&format!("verdict: {}\n", self.verdict));
        s
    }
}

#[cfg(test)]
#[path = "compare_arms_tests.rs"]
mod tests;

//! Which seeds tune and which seeds report, and how a scenario's runs on
//! several seeds become one row per arm.
//!
//! - [`TUNING_SEEDS`] (1–10): what the service's defaults, the scenario
//!   presets and the harness were tuned and debugged on (`evaluate sim`
//!   defaults to seed 1).
//! - Training seeds: the shipped model (`models/default`) was trained on
//!   logs of seeds 12–21; `model-retrained` trains on seed + 1000.
//! - [`EVALUATION_SEEDS`] (101–103): what `evaluate all` reports on; no
//!   default was tuned on them and no model trained on them.
//!
//! Each arm's row is the run of its median seed by p99 (with three seeds,
//! the middle one), so every column of the row comes from one run, and
//! [`SeedSpread`] carries the p99 of every seed (the table shows min–max).
//! Targets are judged on those rows.

use serde::Serialize;

use crate::run_summary::PolicyResult;
use crate::runner::ScenarioResults;
use crate::sim::RunRecord;

/// Seeds the defaults were tuned on.
pub const TUNING_SEEDS: std::ops::RangeInclusive<u64> = 1..=10;

/// Seeds `evaluate all` reports on.
pub const EVALUATION_SEEDS: [u64; 3] = [101, 102, 103];

/// Whether `seed` was used for tuning or training (so a report on it is
/// not an evaluation).
pub fn is_tuning_or_training(seed: u64) -> bool {
    TUNING_SEEDS.contains(&seed) || (12..=21).contains(&seed) || seed >= 1_000
}

/// One arm's p99 over the seeds of a scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeedSpread {
    /// The seeds, in run order.
    pub seeds: Vec<u64>,
    /// The seed whose run is the row (median p99).
    pub median_seed: u64,
    /// p99 of each seed, in `seeds` order, ms.
    pub p99_ms: Vec<f64>,
    /// Lowest p99, ms.
    pub p99_ms_min: f64,
    /// Highest p99, ms.
    pub p99_ms_max: f64,
}

/// One scenario run on each of `seeds` (`runs[i]` on `seeds[i]`, same
/// arms in the same order) as one result: each arm's median-seed row with
/// its [`SeedSpread`], the plots' records from that seed.
///
/// # Errors
/// No runs, or runs and seeds of different lengths.
pub fn median_of_seeds(
    seeds: &[u64],
    mut runs: Vec<ScenarioResults>,
) -> Result<ScenarioResults, String> {
    if runs.is_empty() || runs.len() != seeds.len() {
        return Err(format!("{} runs for {} seeds", runs.len(), seeds.len()));
    }
    if runs.len() == 1 {
        return Ok(runs.remove(0));
    }
    let mut out = runs[0].clone();
    out.seeds = seeds.to_vec();
    out.policies.clear();
    out.runs.clear();
    for (i, first) in runs[0].policies.iter().enumerate() {
        let rows: Vec<&PolicyResult> = runs
            .iter()
            .filter_map(|r| r.policies.get(i))
            .filter(|p| p.name == first.name)
            .collect();
        let p99s: Vec<Option<f64>> = rows.iter().map(|p| p.p99_ms).collect();
        let ran = rows.len() == seeds.len() && p99s.iter().all(Option::is_some);
        if !ran {
            // Skipped (or not measured) on some seed: report the first
            // such row as it is.
            let row = rows
                .iter()
                .find(|p| p.p99_ms.is_none())
                .copied()
                .unwrap_or(first);
            out.policies.push(row.clone());
            continue;
        }
        let p99_ms: Vec<f64> = p99s.into_iter().flatten().collect();
        let mut order: Vec<usize> = (0..p99_ms.len()).collect();
        order.sort_by(|&a, &b| p99_ms[a].total_cmp(&p99_ms[b]));
        let m = order[(order.len() - 1) / 2];
        let mut row = rows[m].clone();
        row.seeds = Some(SeedSpread {
            seeds: seeds.to_vec(),
            median_seed: seeds[m],
            p99_ms_min: p99_ms[order[0]],
            p99_ms_max: p99_ms[order[order.len() - 1]],
            p99_ms,
        });
        out.policies.push(row);
        if let Some(rec) = find_run(&runs[m], &first.name) {
            out.runs.push((first.name.clone(), rec));
        }
    }
    Ok(out)
}

fn find_run(r: &ScenarioResults, name: &str) -> Option<RunRecord> {
    r.runs
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, rec)| rec.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arm(name: &str, p99_ms: f64) -> PolicyResult {
        let mut p = PolicyResult::test_ran(name, p99_ms);
        p.p50_ms = Some(p99_ms / 4.0);
        p
    }

    fn run(seed: u64, arms: Vec<PolicyResult>) -> ScenarioResults {
        let mut r = crate::targets::tests::run("homogeneous", arms);
        r.seed = seed;
        r
    }

    #[test]
    fn each_row_is_its_median_seed_with_the_range() {
        let runs = vec![
            run(101, vec![arm("service", 9.0), arm("envoy", 5.0)]),
            run(102, vec![arm("service", 7.0), arm("envoy", 6.0)]),
            run(103, vec![arm("service", 8.0), arm("envoy", 4.0)]),
        ];
        let m = median_of_seeds(&EVALUATION_SEEDS, runs).unwrap();
        assert_eq!(m.seeds, EVALUATION_SEEDS);
        let svc = &m.policies[0];
        assert_eq!((svc.p99_ms, svc.p50_ms), (Some(8.0), Some(2.0)));
        let s = svc.seeds.as_ref().unwrap();
        assert_eq!(s.median_seed, 103);
        assert_eq!((s.p99_ms_min, s.p99_ms_max), (7.0, 9.0));
        assert_eq!(s.p99_ms, [9.0, 7.0, 8.0]);
        let envoy = m.policies[1].seeds.as_ref().unwrap();
        assert_eq!((envoy.median_seed, m.policies[1].p99_ms), (101, Some(5.0)));
    }

    #[test]
    fn a_skipped_arm_stays_skipped_and_bad_input_is_refused() {
        let mut skipped = PolicyResult::skipped("model", "no model");
        skipped.p99_ms = None;
        let runs = vec![
            run(1, vec![arm("model", 3.0)]),
            run(2, vec![skipped.clone()]),
        ];
        let m = median_of_seeds(&[1, 2], runs).unwrap();
        assert_eq!(m.policies[0].status, "skipped");
        assert!(median_of_seeds(&[1], Vec::new()).is_err());
        assert!(median_of_seeds(&[1, 2], vec![run(1, vec![])]).is_err());
        // One seed: the run as it is, no spread.
        let one = median_of_seeds(&[5], vec![run(5, vec![arm("x", 1.0)])]).unwrap();
        assert!(one.policies[0].seeds.is_none() && one.seeds.is_empty());
    }
}

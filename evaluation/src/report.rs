//! Output: `results.json`, a Markdown report and plots per scenario (the
//! column definitions next to every table), and the tables `EVALUATION.md`
//! is made of (see [`crate::evaluate_all`], [`crate::targets`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::run_summary::PolicyResult;
use crate::runner::ScenarioResults;
use crate::scenario::Fault;

/// Files written for one scenario.
#[derive(Debug, Clone)]
pub struct Written {
    /// results.json.
    pub json: PathBuf,
    /// report.md.
    pub markdown: PathBuf,
    /// PNG plots (latency CDF, shares over time); absent when plotting failed.
    pub plots: Vec<PathBuf>,
}

/// Write `results.json`, `report.md` and the plots of `r` into `dir`.
///
/// # Errors
/// I/O or serialisation failures.
pub fn write_scenario(dir: &Path, r: &ScenarioResults, command: &str) -> Result<Written, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let json = dir.join("results.json");
    let mut value = serde_json::to_value(r).map_err(|e| e.to_string())?;
    value["command"] = serde_json::Value::String(command.to_owned());
    let text = serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?;
    std::fs::write(&json, text + "\n").map_err(|e| format!("{}: {e}", json.display()))?;
    let mut plots = Vec::new();
    if !r.runs.is_empty() {
        let cdf = dir.join("latency_cdf.png");
        let title = format!("{} ({}): latency tail (CCDF)", r.scenario, r.mode);
        match crate::plot::latency_cdf(&cdf, &title, &r.runs) {
            Ok(()) => plots.push(cdf),
            Err(e) => eprintln!("plot {}: {e}", cdf.display()),
        }
        let sh = dir.join("shares.png");
        let fault_s = fault_window_s(r);
        let title = format!(
            "{} ({}): share of picks per worker (red: impaired{})",
            r.scenario,
            r.mode,
            if fault_s.is_some() {
                "; shaded: fault"
            } else {
                ""
            }
        );
        match crate::plot::shares_over_time(&sh, &title, &r.runs, r.impaired_worker, fault_s) {
            Ok(()) => plots.push(sh),
            Err(e) => eprintln!("plot {}: {e}", sh.display()),
        }
    }
    let markdown = dir.join("report.md");
    let mut md = format!(
        "# {} ({})\n\n{}\n\n{}\n\nCommand: `{command}`\n\n",
        r.scenario,
        r.mode,
        r.description,
        this_run(r)
    );
    if !r.service_config_default {
        md.push_str("**Diagnostic run: the service arms use a non-default configuration (`--service-config`); not comparable with the default-configuration results.**\n\n");
    }
    if r.routers > 1 {
        let _ = writeln!(
            md,
            "{} independent routers: each baseline runs one instance per router (its own in-flight and outcomes only); the service arms share one service.\n",
            r.routers
        );
    }
    md.push_str(&table_with_columns(&r.policies));
    let notes = model_notes(&r.policies)
        + &router_notes(&r.policies)
        + &crate::testbed::cache::notes(&r.policies)
        + &crate::self_check_series::self_check_notes(&r.policies);
    if !notes.is_empty() {
        md.push('\n');
        md.push_str(&notes);
    }
    for p in &plots {
        if let Some(name) = p.file_name() {
            let _ = writeln!(
                md,
                "\n![{}]({})",
                name.to_string_lossy(),
                name.to_string_lossy()
            );
        }
    }
    std::fs::write(&markdown, md).map_err(|e| format!("{}: {e}", markdown.display()))?;
    Ok(Written {
        json,
        markdown,
        plots,
    })
}

/// What the fault does, with its times in this run, e.g. `worker 0 down
/// (connections refused, silent) from 10.0 s to 17.5 s`.
pub fn describe_fault(fault: &Fault) -> String {
    let s = |ms: f64| format!("{:.1} s", ms / 1000.0);
    match fault {
        Fault::Slow {
            worker,
            from_ms,
            to_ms,
            factor,
        } => format!(
            "worker {worker} {factor}× slower from {} to {}",
            s(*from_ms),
            s(*to_ms)
        ),
        Fault::Compaction {
            worker,
            first_ms,
            period_ms,
            duration_ms,
            put_factor,
            get_factor,
        } => format!(
            "worker {worker} compacts for {} every {} from {} (PUTs {put_factor}×, GETs {get_factor}×)",
            s(*duration_ms),
            s(*period_ms),
            s(*first_ms)
        ),
        Fault::Crash {
            worker,
            from_ms,
            to_ms,
        } => format!(
            "worker {worker} down (connections refused, silent) from {} to {}",
            s(*from_ms),
            s(*to_ms)
        ),
        Fault::Zombie {
            worker,
            from_ms,
            to_ms,
        } => format!(
            "worker {worker} accepts and never answers from {} to {}",
            s(*from_ms),
            s(*to_ms)
        ),
        Fault::Lie {
            worker,
            as_worker,
            from_ms,
            to_ms,
        } => format!(
            "worker {worker} reports worker {as_worker}'s telemetry from {} to {}",
            s(*from_ms),
            s(*to_ms)
        ),
        Fault::Misreport {
            worker,
            from_ms,
            to_ms,
            error_rate,
            queue_depth,
            cpu_usage,
        } => {
            let mut told = Vec::new();
            if let Some(e) = error_rate {
                told.push(format!("error rate {e}"));
            }
            if let Some(q) = queue_depth {
                told.push(format!("queue depth {q}"));
            }
            if let Some(c) = cpu_usage {
                told.push(format!("CPU {c}"));
            }
            format!(
                "worker {worker} reports {} from {} to {}",
                told.join(", "),
                s(*from_ms),
                s(*to_ms)
            )
        }
        Fault::Drain {
            worker,
            from_ms,
            to_ms,
        } => format!(
            "worker {worker} drained by the operator from {} to {}",
            s(*from_ms),
            s(*to_ms)
        ),
        Fault::Memtable {
            worker,
            period_ms,
            peak_bytes,
            ..
        } => format!(
            "worker {worker} memtable fills to {:.1} GiB and flushes every {}",
            *peak_bytes as f64 / f64::from(1u32 << 30),
            s(*period_ms)
        ),
        Fault::Burst {
            worker,
            from_ms,
            to_ms,
            load,
        } => format!(
            "unrouted load of {load}× capacity on worker {worker} from {} to {}",
            s(*from_ms),
            s(*to_ms)
        ),
    }
}

/// The impaired worker's fault window in this run, s, if it has one.
pub fn fault_window_s(r: &ScenarioResults) -> Option<(f64, f64)> {
    let worker = r.impaired_worker?;
    r.parameters
        .as_ref()?
        .faults
        .iter()
        .filter(|f| f.worker() == worker)
        .find_map(crate::scenario::Fault::window_ms)
        .map(|(a, b)| (a / 1000.0, b / 1000.0))
}

/// The run as it was made: length, workers, load, and each fault with its
/// times in this run (the preset descriptions give them for 120 s).
pub fn this_run(r: &ScenarioResults) -> String {
    let mut out = format!(
        "This run: {} s, {} workers, {:.0}% of healthy capacity offered",
        r.duration_s,
        r.workers,
        r.load * 100.0
    );
    if let Some(p) = &r.parameters {
        let _ = write!(
            out,
            "; a `service*` pick costs a score call to a scorer of {} cores ({} µs round trip, \
             in-service time × {} of the calibration), feedback every {} ms or {} outcomes, \
             telemetry {} ms after the snapshot",
            p.scorer_cores,
            p.scorer_round_trip_us,
            p.scorer_service_scale,
            p.feedback_flush_ms,
            p.feedback_batch_max,
            p.telemetry_delay_ms
        );
    }
    match r.parameters.as_ref().map(|p| &p.faults) {
        Some(faults) if !faults.is_empty() => {
            let list: Vec<String> = faults.iter().map(describe_fault).collect();
            let _ = write!(out, "; {}.", list.join("; "));
        }
        Some(_) => out.push_str("; no fault."),
        None => out.push('.'),
    }
    out
}

/// What each column of [`table`] means; written next to every table.
pub const COLUMNS: &str = "Columns: policy = the arm (`service` = the service as shipped: default configuration, default selection policy, shipped model; `service-rules` = the same without the model; `rules-*`, `model*` = diagnostic arms); \
latency percentiles (p50/p95/p99/p99.9, ms) over every request, from its arrival at the router to its final answer, the scorer call and retries included; \
over several seeds each row is the run of the arm's median seed by p99, and the p99 column adds the lowest–highest p99 over the seeds in parentheses; \
× oracle = p99 / the `oracle` arm's p99 (the physical-limit anchor; – without an oracle); \
pick µs = what a pick cost the router, p50/p99 (a baseline decides in the router: 0 in the simulator, its measured local pick in the testbed; a `service*` arm: the score call, drawn from the calibration in the simulator, measured over HTTP in the testbed); \
errors = requests failed after all retries, % of requests; timeouts = attempts that hit the client timeout, % of attempts; \
retries = retry attempts sent; balance CV = coefficient of variation of picks per worker (0 = even); \
oscillations = share swings > 2× between consecutive windows; \
drain ms = time from the fault's start until the impaired worker gets < 10% of its fair share and < 1% of the picks for the rest of the fault, in whole windows (never = not drained); \
recovery ms = time after the fault until it is back to half its fair share; \
peak share on return = its largest share in the 10 s after the fault, × fair share (– = no fault window). \
Definitions: `evaluation/src/run_summary.rs`.";

/// What the router saw besides the table, per arm: herding with several
/// routers, failed or timed-out score calls (answered by the router's own
/// fallback pick), arrivals the load generator could not send, and the
/// cores the processes shared. Empty when none of these was measured.
pub fn router_notes(policies: &[PolicyResult]) -> String {
    let mut s = String::new();
    if let Some(cores) = policies.iter().find_map(|p| p.cores) {
        let _ = writeln!(
            s,
            "- the redis-servers, the service, the agent and the load generator shared {cores} cores"
        );
    }
    let herding: Vec<String> = policies
        .iter()
        .filter_map(|p| p.herding.map(|h| format!("`{}` {h:.2}", p.name)))
        .collect();
    if !herding.is_empty() {
        let _ = writeln!(
            s,
            "- herding (distinct routers that picked the same worker within one 5 ms view interval, mean over the picked (interval, worker) pairs; lower is more spread): {}",
            herding.join(", ")
        );
    }
    for p in policies {
        let (errors, dropped) = (p.scorer_errors.unwrap_or(0), p.dropped.unwrap_or(0));
        if errors > 0 || dropped > 0 {
            let _ = writeln!(
                s,
                "- `{}`: {errors} score calls failed or timed out (the router picked by itself and served the request); {dropped} arrivals not sent (too many outstanding)",
                p.name
            );
        }
    }
    s
}

/// The Markdown table of `policies` followed by [`COLUMNS`].
pub fn table_with_columns(policies: &[PolicyResult]) -> String {
    format!(
        "{}\n{COLUMNS}\n{}",
        table(policies),
        crate::cache_summary::cache_table(policies)
    )
}

fn f(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".to_owned(), |x| format!("{x:.digits$}"))
}

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "never".to_owned(), |x| format!("{:.0}", x))
}

/// p99, with the seeds' lowest–highest when the row is a median of seeds.
fn p99_cell(p: &PolicyResult) -> String {
    match &p.seeds {
        Some(s) => format!(
            "{} ({:.2}–{:.2})",
            f(p.p99_ms, 2),
            s.p99_ms_min,
            s.p99_ms_max
        ),
        None => f(p.p99_ms, 2),
    }
}

/// The pick's cost to the router, p50/p99 µs.
fn pick_cell(p: &PolicyResult) -> String {
    match (p.pick_us_p50, p.pick_us_p99) {
        (Some(a), Some(b)) => format!("{a:.0}/{b:.0}"),
        _ => "–".to_owned(),
    }
}

/// The Markdown table of a scenario's policies.
pub fn table(policies: &[PolicyResult]) -> String {
    let mut s = String::from(
        "| policy | p50 ms | p95 ms | p99 ms | p99.9 ms | × oracle | pick µs | errors | timeouts | retries | balance CV | oscillations | drain ms | recovery ms | peak share on return |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let oracle = policies
        .iter()
        .find(|p| p.name == "oracle" && p.status == "ok")
        .and_then(|p| p.p99_ms);
    for p in policies {
        if p.status != "ok" {
            let _ = writeln!(
                s,
                "| {} | {} | | | | | | | | | | | | | |",
                p.name,
                p.skip_reason.as_deref().unwrap_or("skipped")
            );
            continue;
        }
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            p.name,
            f(p.p50_ms, 2),
            f(p.p95_ms, 2),
            p99_cell(p),
            f(p.p999_ms, 2),
            f(p.p99_ms.zip(oracle).map(|(a, o)| a / o.max(1e-9)), 2),
            pick_cell(p),
            f(p.error_rate.map(|x| x * 100.0), 3) + "%",
            f(p.timeout_rate.map(|x| x * 100.0), 3) + "%",
            p.retries.unwrap_or(0),
            f(p.balance_cv, 3),
            p.oscillations.unwrap_or(0),
            ms(p.time_to_drain_ms),
            ms(p.recovery_ms),
            f(p.recovery_peak_share, 2),
        );
    }
    s
}

/// One line per model arm under a table: the model, how often it was used,
/// how much it separated candidates, and how a retrained model was trained.
pub fn model_notes(policies: &[PolicyResult]) -> String {
    let mut s = String::new();
    for p in policies {
        let Some(m) = &p.model else { continue };
        let fallbacks: u64 = m.fallbacks.iter().map(|(_, n)| n).sum();
        let _ = write!(
            s,
            "- `{}`: model `{}`, selection `{}`, budget {} µs; used on {} of {} decisions ({} fallbacks); \
             spread of the model's cost factors across a decision's candidates (largest / smallest): {}",
            p.name,
            m.version,
            m.selection_policy,
            m.budget_us,
            m.used,
            m.decisions,
            fallbacks,
            match (m.factor_spread_mean, m.factor_spread_max) {
                (Some(mean), Some(max)) => format!("mean ×{mean:.2}, max ×{max:.2}"),
                _ if p.name == crate::targets::EMBEDDED_ARM => {
                    "not measured (the balancer's pick carries no factors)".to_owned()
                }
                _ => "not measured (scored over HTTP, whose compact answer has no factors)"
                    .to_owned(),
            },
        );
        if let Some(t) = &m.retrain {
            let c = &t.target_counts;
            let _ = write!(
                s,
                "; trained on `{}` logs (seed {}): {} decisions, {} rows with a target, {} failures \
                 ({} train, {} validation), validation ln(latency/E) R² {}, MAE {:.3} vs the rules' {:.3}",
                t.logging_arm,
                t.logging_seed,
                c["decisions"],
                c["rows"],
                c["failures"],
                t.train_rows,
                t.valid_rows,
                t.valid_r2
                    .map_or_else(|| "n/a".to_owned(), |a| format!("{a:.3}")),
                t.valid_mae_log,
                t.valid_rules_mae_log,
            );
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod run_tests {
    use super::*;
    use crate::scenario::Scenario;

    fn results(sc: Scenario) -> ScenarioResults {
        ScenarioResults {
            mode: "sim".into(),
            scenario: sc.name.clone(),
            description: sc.description.clone(),
            seed: 1,
            seeds: Vec::new(),
            workers: sc.workers.len(),
            duration_s: sc.duration_ms / 1000.0,
            load: sc.load,
            routers: 1,
            impaired_worker: Some(0),
            parameters: Some(sc),
            service_config_default: true,
            policies: Vec::new(),
            runs: Vec::new(),
        }
    }

    #[test]
    fn a_short_run_is_described_with_its_own_fault_times() {
        let r = results(Scenario::preset("crash-recovery", 12, 30.0).unwrap());
        assert_eq!(fault_window_s(&r), Some((10.0, 17.5)));
        let line = this_run(&r);
        assert!(
            line.contains("30 s, 12 workers")
                && line
                    .contains("worker 0 down (connections refused, silent) from 10.0 s to 17.5 s"),
            "{line}"
        );
        let r = results(Scenario::preset("homogeneous", 12, 30.0).unwrap());
        assert!(this_run(&r).ends_with("; no fault."), "{}", this_run(&r));
        assert!(
            this_run(&r).contains("scorer of 2 cores") && this_run(&r).contains("telemetry 1 ms"),
            "{}",
            this_run(&r)
        );
        assert_eq!(fault_window_s(&r), None);
    }

    #[test]
    fn router_notes_name_failed_calls_drops_and_cores() {
        let mut svc = PolicyResult::skipped("service", "x");
        (svc.scorer_errors, svc.dropped, svc.cores) = (Some(3), Some(1), Some(2));
        let mut base = PolicyResult::skipped("envoy", "x");
        (base.scorer_errors, base.dropped, base.cores) = (Some(0), Some(0), Some(2));
        let notes = router_notes(&[base, svc]);
        assert!(notes.contains("shared 2 cores"), "{notes}");
        assert!(
            notes.contains("`service`: 3 score calls failed")
                && notes.contains("1 arrivals not sent"),
            "{notes}"
        );
        assert!(!notes.contains("`envoy`"), "{notes}");
        assert_eq!(router_notes(&[PolicyResult::skipped("oracle", "x")]), "");
    }
}

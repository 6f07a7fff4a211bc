//! Output: `results.json`, a Markdown report and plots per scenario, and
//! `EVALUATION.md` with every scenario, the targets and whether they were met.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::metrics::PolicyResult;
use crate::runner::ScenarioResults;

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
        let title = format!("{} ({}): latency CDF", r.scenario, r.mode);
        match crate::plot::latency_cdf(&cdf, &title, &r.runs) {
            Ok(()) => plots.push(cdf),
            Err(e) => eprintln!("plot {}: {e}", cdf.display()),
        }
        let sh = dir.join("shares.png");
        let title = format!(
            "{} ({}): share of picks per worker (red: impaired)",
            r.scenario, r.mode
        );
        match crate::plot::shares_over_time(&sh, &title, &r.runs, r.impaired_worker) {
            Ok(()) => plots.push(sh),
            Err(e) => eprintln!("plot {}: {e}", sh.display()),
        }
    }
    let markdown = dir.join("report.md");
    let mut md = format!(
        "# {} ({})\n\n{}\n\nCommand: `{command}`\n\n",
        r.scenario, r.mode, r.description
    );
    if !r.service_config_default {
        md.push_str("**Diagnostic run: the service arms use a non-default configuration (`--service-config`); not comparable with the default-configuration results.**\n\n");
    }
    md.push_str(&table(&r.policies));
    let notes = model_notes(&r.policies);
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

fn f(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".to_owned(), |x| format!("{x:.digits$}"))
}

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "never".to_owned(), |x| format!("{:.0}", x))
}

/// The Markdown table of a scenario's policies.
pub fn table(policies: &[PolicyResult]) -> String {
    let mut s = String::from(
        "| policy | p50 ms | p95 ms | p99 ms | p99.9 ms | errors | timeouts | retries | balance CV | oscillations | drain ms | recovery ms | peak share on return |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for p in policies {
        if p.status != "ok" {
            let _ = writeln!(
                s,
                "| {} | {} | | | | | | | | | | | |",
                p.name,
                p.skip_reason.as_deref().unwrap_or("skipped")
            );
            continue;
        }
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            p.name,
            f(p.p50_ms, 2),
            f(p.p95_ms, 2),
            f(p.p99_ms, 2),
            f(p.p999_ms, 2),
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
             model adjustment spread across a decision's candidates: mean {:.2}, max {:.2} points",
            p.name,
            m.version,
            m.selection_policy,
            m.budget_us,
            m.used,
            m.decisions,
            fallbacks,
            m.spread_mean_points,
            m.spread_max_points,
        );
        if let Some(t) = &m.retrain {
            let c = &t.label_counts;
            let _ = write!(
                s,
                "; trained on `{}` logs (seed {}): {} decisions, {} positive / {} negative labelled rows \
                 ({} train, {} validation), validation AUC {} (rule score {})",
                t.logging_arm,
                t.logging_seed,
                c["decisions"],
                c["positives"],
                c["negatives"],
                t.train_rows,
                t.valid_rows,
                t.valid_auc
                    .map_or_else(|| "n/a".to_owned(), |a| format!("{a:.3}")),
                t.valid_rule_score_auc
                    .map_or_else(|| "n/a".to_owned(), |a| format!("{a:.3}")),
            );
        }
        s.push('\n');
    }
    s
}

/// A target and whether it was met.
#[derive(Debug, Clone)]
pub struct TargetCheck {
    /// The target in words.
    pub target: String,
    /// The measured figures in words.
    pub measured: String,
    /// Met?
    pub met: bool,
}

fn get<'a>(r: &'a ScenarioResults, name: &str) -> Option<&'a PolicyResult> {
    r.policies
        .iter()
        .find(|p| p.name == name && p.status == "ok")
}

/// The service's best policy (lowest p99 among the service arms).
pub fn best_service(r: &ScenarioResults) -> Option<&PolicyResult> {
    r.policies
        .iter()
        .filter(|p| {
            p.status == "ok" && (p.name.starts_with("rules-") || p.name.starts_with("model"))
        })
        .min_by(|a, b| {
            a.p99_ms
                .unwrap_or(f64::MAX)
                .total_cmp(&b.p99_ms.unwrap_or(f64::MAX))
        })
}

/// Slow-worker target: best service p99 ≤ 0.5 × round robin and ≤ 0.85 ×
/// P2C least-request, oscillations ≤ P2C's.
pub fn slow_worker_target(r: &ScenarioResults) -> TargetCheck {
    let target = "slow-worker (sim, 70% load): best service p99 ≤ 0.5 × round-robin and ≤ 0.85 × p2c-least-request, oscillations ≤ p2c-least-request's".to_owned();
    let (Some(best), Some(rr), Some(p2c)) = (
        best_service(r),
        get(r, "round-robin"),
        get(r, "p2c-least-request"),
    ) else {
        return TargetCheck {
            target,
            measured: "not run (a policy is missing)".to_owned(),
            met: false,
        };
    };
    let (b, rrp, pp) = (
        best.p99_ms.unwrap_or(f64::MAX),
        rr.p99_ms.unwrap_or(0.0),
        p2c.p99_ms.unwrap_or(0.0),
    );
    let (bo, po) = (
        best.oscillations.unwrap_or(u64::MAX),
        p2c.oscillations.unwrap_or(0),
    );
    let met = b <= 0.5 * rrp && b <= 0.85 * pp && bo <= po;
    let measured = format!(
        "{}: p99 {b:.2} ms = {:.3} × round-robin ({rrp:.2} ms) and {:.3} × p2c-least-request ({pp:.2} ms); oscillations {bo} vs p2c-least-request {po}",
        best.name,
        b / rrp.max(1e-9),
        b / pp.max(1e-9),
    );
    TargetCheck {
        target,
        measured,
        met,
    }
}

/// Testbed target: best service p99 ≤ 0.5 × round robin under a 3 s CLIENT PAUSE.
pub fn testbed_target(r: &ScenarioResults) -> TargetCheck {
    let target =
        "testbed, 3 s CLIENT PAUSE on 1 of 6 workers: best service p99 ≤ 0.5 × round-robin"
            .to_owned();
    let (Some(best), Some(rr)) = (best_service(r), get(r, "round-robin")) else {
        return TargetCheck {
            target,
            measured: "not run".to_owned(),
            met: false,
        };
    };
    let (b, rrp) = (best.p99_ms.unwrap_or(f64::MAX), rr.p99_ms.unwrap_or(0.0));
    TargetCheck {
        target,
        measured: format!(
            "{}: p99 {b:.2} ms = {:.3} × round-robin ({rrp:.2} ms)",
            best.name,
            b / rrp.max(1e-9)
        ),
        met: b <= 0.5 * rrp,
    }
}

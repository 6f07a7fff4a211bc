//! The model targets: what a model in the scoring path must add to the
//! service as shipped with the model off (`service-rules`), per simulator
//! scenario, at p99.
//!
//! * `model-retrained` (the shipped configuration with a model retrained on
//!   `service-rules` logs, [`crate::arms::model`]) trains and runs on every
//!   scenario, with every training metric measured;
//! * it cuts p99 by ≥ 5 % on at least [`MIN_WINS`] scenarios, by ≥ 20 %
//!   on `hidden-signal`, and is never more than 3 % worse;
//! * `service` (the shipped default model) is never more than 3 % worse
//!   and at least 3 % better on at least [`MIN_WINS`] scenarios.

use super::{TargetCheck, get};
use crate::run_summary::PolicyResult;
use crate::runner::ScenarioResults;

/// The arm the model targets compare with: shipped config, model off.
pub const RULES_ARM: &str = "service-rules";

/// The retrained arm.
pub const RETRAINED_ARM: &str = "model-retrained";

/// Largest p99 ratio to `service-rules` allowed on any scenario.
pub const NEVER_WORSE: f64 = 1.03;

/// p99 ratio that counts as a win for `model-retrained`.
pub const RETRAINED_WIN: f64 = 0.95;

/// p99 ratio that counts as a win for `service` (the shipped model).
pub const SHIPPED_WIN: f64 = 0.97;

/// p99 ratio `model-retrained` must reach on `hidden-signal`.
pub const HIDDEN_SIGNAL_RATIO: f64 = 0.8;

/// Scenarios a model arm must win.
pub const MIN_WINS: usize = 2;

/// (`arm` p99 / `service-rules` p99, `arm` p99 ms, `service-rules` p99 ms).
type Ratio = (f64, f64, f64);

/// One scenario's [`Ratio`], `None` where it was not measured.
type ScenarioRatio<'a> = (&'a str, Option<Ratio>);

/// `arm`'s p99 over `service-rules`' on `r`, `None` if either did not run.
fn ratio(r: &ScenarioResults, arm: &str) -> Option<Ratio> {
    let a = get(r, arm)?.p99_ms?;
    let b = get(r, RULES_ARM)?.p99_ms?;
    Some((a / b.max(1e-9), a, b))
}

/// What is missing from `p`'s training and results: skipped, a latency or
/// error figure absent, or a training metric `null` (n/a); empty when
/// everything was measured.
pub fn missing_metrics(p: Option<&PolicyResult>) -> Vec<String> {
    let Some(p) = p else {
        return vec!["not run".to_owned()];
    };
    if p.status != "ok" {
        return vec![p.skip_reason.clone().unwrap_or_else(|| p.status.clone())];
    }
    let mut out: Vec<String> = [
        ("p50_ms", p.p50_ms),
        ("p95_ms", p.p95_ms),
        ("p99_ms", p.p99_ms),
        ("p999_ms", p.p999_ms),
        ("error_rate", p.error_rate),
    ]
    .into_iter()
    .filter(|(_, v)| v.is_none_or(|x| !x.is_finite()))
    .map(|(k, _)| format!("{k} n/a"))
    .collect();
    let retrain = p.model.as_ref().and_then(|m| m.retrain.as_ref());
    match retrain.map(serde_json::to_value) {
        Some(Ok(v)) => out.extend(null_fields(&v, "")),
        _ => out.push("no training record".to_owned()),
    }
    out
}

/// The `null` fields of `v`, nested objects included, as "a.b n/a".
fn null_fields(v: &serde_json::Value, prefix: &str) -> Vec<String> {
    let serde_json::Value::Object(fields) = v else {
        return Vec::new();
    };
    fields
        .iter()
        .flat_map(|(k, x)| {
            let key = format!("{prefix}{k}");
            if x.is_null() {
                vec![format!("{key} n/a")]
            } else {
                null_fields(x, &format!("{key}."))
            }
        })
        .collect()
}

/// Every scenario: `model-retrained` ran, trained, and has no n/a metric.
pub fn retrained_everywhere_target(sims: &[&ScenarioResults]) -> TargetCheck {
    let target = format!(
        "every simulator scenario: `{RETRAINED_ARM}` trains and runs (not skipped, no n/a metric)"
    );
    let bad: Vec<String> = sims
        .iter()
        .filter_map(|r| {
            let m = missing_metrics(get_any(r, RETRAINED_ARM));
            (!m.is_empty()).then(|| format!("{}: {}", r.scenario, m.join(", ")))
        })
        .collect();
    let ok = sims.len() - bad.len();
    let mut measured = format!("trained and ran on {ok} of {} scenarios", sims.len());
    if !bad.is_empty() {
        measured.push_str("; ");
        measured.push_str(&bad.join("; "));
    }
    TargetCheck {
        target,
        measured,
        met: !sims.is_empty() && bad.is_empty(),
    }
}

/// `name`'s row in `r` whatever its status (a skipped row explains why).
fn get_any<'a>(r: &'a ScenarioResults, name: &str) -> Option<&'a PolicyResult> {
    r.policies.iter().find(|p| p.name == name)
}

/// Per scenario `arm / service-rules` at p99, as "scenario 0.912".
fn ratios_text(rs: &[ScenarioRatio<'_>]) -> String {
    rs.iter()
        .map(|(s, r)| match r {
            Some((x, _, _)) => format!("{s} {x:.3}"),
            None => format!("{s} n/a"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `arm`'s p99 ratios to `service-rules` on every scenario.
fn ratios<'a>(sims: &[&'a ScenarioResults], arm: &str) -> Vec<ScenarioRatio<'a>> {
    sims.iter()
        .map(|r| (r.scenario.as_str(), ratio(r, arm)))
        .collect()
}

/// `arm` p99 ≤ `win` × `service-rules` on at least [`MIN_WINS`] scenarios
/// (with `never_worse`: and ≤ [`NEVER_WORSE`] × on every one).
fn wins_target(sims: &[&ScenarioResults], arm: &str, win: f64, never_worse: bool) -> TargetCheck {
    let rs = ratios(sims, arm);
    let wins: Vec<&str> = rs
        .iter()
        .filter(|(_, r)| r.is_some_and(|(x, _, _)| x <= win))
        .map(|(s, _)| *s)
        .collect();
    let worse: Vec<&str> = rs
        .iter()
        .filter(|(_, r)| r.is_none_or(|(x, _, _)| x > NEVER_WORSE))
        .map(|(s, _)| *s)
        .collect();
    let mut target = format!(
        "`{arm}` p99 ≤ {win:.2} × `{RULES_ARM}` on at least {MIN_WINS} simulator scenarios"
    );
    let mut measured = format!(
        "{} win{} ({}); p99 / {RULES_ARM}: {}",
        wins.len(),
        if wins.len() == 1 { "" } else { "s" },
        if wins.is_empty() {
            "none".to_owned()
        } else {
            wins.join(", ")
        },
        ratios_text(&rs)
    );
    let mut met = wins.len() >= MIN_WINS;
    if never_worse {
        target.push_str(&format!(
            ", and ≤ {NEVER_WORSE:.2} × on every one (never more than 3 % worse)"
        ));
        measured.push_str(&format!(
            "; worse than {NEVER_WORSE:.2} × or not measured: {}",
            if worse.is_empty() {
                "none".to_owned()
            } else {
                worse.join(", ")
            }
        ));
        met &= worse.is_empty();
    }
    TargetCheck {
        target,
        measured,
        met: met && !sims.is_empty(),
    }
}

/// `model-retrained` p99 ≤ [`RETRAINED_WIN`] × `service-rules` on at least
/// [`MIN_WINS`] scenarios.
pub fn retrained_wins_target(sims: &[&ScenarioResults]) -> TargetCheck {
    wins_target(sims, RETRAINED_ARM, RETRAINED_WIN, false)
}

/// `arm`'s scenarios over [`NEVER_WORSE`] × `service-rules` or not
/// measured, as "scenario (1.042)", and its worst ratio.
pub(super) fn over_never_worse<'a>(
    sims: &[&'a ScenarioResults],
    arm: &str,
) -> (Vec<String>, Option<(&'a str, f64)>) {
    let rs = ratios(sims, arm);
    let worse = rs
        .iter()
        .filter(|(_, r)| r.is_none_or(|(x, _, _)| x > NEVER_WORSE))
        .map(|(s, r)| match r {
            Some((x, _, _)) => format!("{s} ({x:.3})"),
            None => format!("{s} (not measured)"),
        })
        .collect();
    let worst = rs
        .iter()
        .filter_map(|(s, r)| r.map(|(x, _, _)| (*s, x)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    (worse, worst)
}

/// `model-retrained` never more than 3 % worse than `service-rules` at p99.
pub fn retrained_never_worse_target(sims: &[&ScenarioResults]) -> TargetCheck {
    let (worse, worst) = over_never_worse(sims, RETRAINED_ARM);
    TargetCheck {
        target: format!(
            "every simulator scenario: `{RETRAINED_ARM}` p99 ≤ {NEVER_WORSE:.2} × `{RULES_ARM}` (never more than 3 % worse)"
        ),
        measured: format!(
            "worst {}; over the limit or not measured: {}",
            worst.map_or_else(|| "n/a".to_owned(), |(s, x)| format!("{s} {x:.3}")),
            if worse.is_empty() {
                "none".to_owned()
            } else {
                worse.join(", ")
            }
        ),
        met: !sims.is_empty() && worse.is_empty(),
    }
}

/// `hidden-signal`: `model-retrained` p99 ≤ [`HIDDEN_SIGNAL_RATIO`] ×
/// `service-rules`.
pub fn hidden_signal_target(r: &ScenarioResults) -> TargetCheck {
    let target = format!(
        "{} (sim): `{RETRAINED_ARM}` p99 ≤ {HIDDEN_SIGNAL_RATIO:.1} × `{RULES_ARM}`",
        r.scenario
    );
    let Some((x, a, b)) = ratio(r, RETRAINED_ARM) else {
        return TargetCheck::not_measured(
            target,
            &format!("`{RETRAINED_ARM}` or `{RULES_ARM}` did not run"),
        );
    };
    TargetCheck {
        measured: format!(
            "p99 {a:.2} ms = {x:.3} × {RULES_ARM} ({b:.2} ms; limit {:.2} ms)",
            HIDDEN_SIGNAL_RATIO * b
        ),
        met: x <= HIDDEN_SIGNAL_RATIO,
        target,
    }
}

/// `service` (the shipped default model) never more than 3 % worse than
/// `service-rules` at p99, and ≥ 3 % better on at least [`MIN_WINS`].
pub fn shipped_model_target(sims: &[&ScenarioResults]) -> TargetCheck {
    wins_target(sims, super::SHIPPED_ARM, SHIPPED_WIN, true)
}

/// Every model target over the simulator scenarios `sims`, in report order
/// (the `hidden-signal` one is missed, not dropped, when that scenario did
/// not run).
pub fn model_targets(sims: &[&ScenarioResults]) -> Vec<TargetCheck> {
    let hidden = sims.iter().find(|r| r.scenario == "hidden-signal").map_or_else(
        || {
            TargetCheck::not_measured(
                format!(
                    "hidden-signal (sim): `{RETRAINED_ARM}` p99 ≤ {HIDDEN_SIGNAL_RATIO:.1} × `{RULES_ARM}`"
                ),
                "the scenario did not run",
            )
        },
        |r| hidden_signal_target(r),
    );
    vec![
        retrained_everywhere_target(sims),
        retrained_wins_target(sims),
        retrained_never_worse_target(sims),
        hidden,
        shipped_model_target(sims),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arms::model::{ModelArmInfo, RetrainInfo};

    fn arm(name: &str, p99_ms: f64) -> PolicyResult {
        let mut p = PolicyResult::test_ran(name, p99_ms);
        (p.p50_ms, p.p95_ms, p.p99_ms, p.p999_ms) =
            (Some(1.0), Some(2.0), Some(p99_ms), Some(2.0 * p99_ms));
        p.error_rate = Some(0.0);
        p
    }

    fn retrained(p99_ms: f64, info: Option<RetrainInfo>) -> PolicyResult {
        let mut p = arm(RETRAINED_ARM, p99_ms);
        p.model = Some(ModelArmInfo {
            version: "retrained-x".to_owned(),
            selection_policy: "max".to_owned(),
            budget_us: 1,
            decisions: 1,
            used: 1,
            fallbacks: Vec::new(),
            factor_spread_mean: None,
            factor_spread_max: None,
            retrain: info,
        });
        p
    }

    /// A scenario where `service-rules` has p99 10 ms, `model-retrained`
    /// 10 × `r` and `service` 10 × `s`.
    fn sc(name: &str, r: f64, s: f64) -> ScenarioResults {
        let mut out = super::super::tests::run(
            name,
            vec![
                arm(RULES_ARM, 10.0),
                retrained(10.0 * r, Some(RetrainInfo::example())),
                arm("service", 10.0 * s),
            ],
        );
        out.description = name.to_owned();
        out
    }

    fn refs(v: &[ScenarioResults]) -> Vec<&ScenarioResults> {
        v.iter().collect()
    }

    #[test]
    fn retrained_must_train_everywhere_with_every_metric() {
        let mut v = vec![sc("a", 1.0, 1.0), sc("b", 1.0, 1.0)];
        assert!(retrained_everywhere_target(&refs(&v)).met);
        // Skipped on one scenario: missed, with the reason.
        v[1].policies[1] = PolicyResult::skipped(RETRAINED_ARM, "skipped: single class");
        let t = retrained_everywhere_target(&refs(&v));
        assert!(
            !t.met && t.measured.contains("b: skipped: single class"),
            "{t:?}"
        );
        // No training record, or no p99.
        v[1].policies[1] = retrained(10.0, None);
        assert!(!retrained_everywhere_target(&refs(&v)).met);
        v[1].policies[1] = retrained(10.0, Some(RetrainInfo::example()));
        v[1].policies[1].p99_ms = None;
        assert!(!retrained_everywhere_target(&refs(&v)).met);
        // Not run at all, and no scenario at all.
        v[1].policies.remove(1);
        assert!(!retrained_everywhere_target(&refs(&v)).met);
        assert!(!retrained_everywhere_target(&[]).met);
        // A training metric that is `null` (n/a) in the training record is
        // named, nested ones too (the record's field names are the
        // trainer's: none is spelt out here).
        let example = serde_json::to_value(RetrainInfo::example()).expect("json");
        assert!(null_fields(&example, "").is_empty(), "{example}");
        let nested = serde_json::json!({"valid_r2": null, "a": {"b": null}, "c": 1});
        assert_eq!(
            null_fields(&nested, ""),
            vec!["a.b n/a".to_owned(), "valid_r2 n/a".to_owned()]
        );
    }

    #[test]
    fn retrained_must_win_twice_by_five_percent() {
        let v = vec![sc("a", 0.95, 1.0), sc("b", 0.96, 1.0), sc("c", 0.9, 1.0)];
        let t = retrained_wins_target(&refs(&v));
        assert!(t.met, "{t:?}");
        assert!(t.measured.starts_with("2 wins (a, c)"), "{}", t.measured);
        let v = vec![sc("a", 0.95, 1.0), sc("b", 0.96, 1.0), sc("c", 1.0, 1.0)];
        let t = retrained_wins_target(&refs(&v));
        assert!(!t.met && t.measured.contains("b 0.960"), "{t:?}");
    }

    #[test]
    fn retrained_must_never_be_more_than_three_percent_worse() {
        let mut v = vec![sc("a", 1.03, 1.0), sc("b", 0.5, 1.0)];
        let t = retrained_never_worse_target(&refs(&v));
        assert!(t.met && t.measured.starts_with("worst a 1.030"), "{t:?}");
        v.push(sc("c", 1.031, 1.0));
        let t = retrained_never_worse_target(&refs(&v));
        assert!(!t.met && t.measured.contains("c (1.031)"), "{t:?}");
        // A scenario where it did not run is not a pass.
        let mut w = vec![sc("a", 1.0, 1.0)];
        w[0].policies.remove(1);
        let t = retrained_never_worse_target(&refs(&w));
        assert!(!t.met && t.measured.contains("a (not measured)"), "{t:?}");
    }

    #[test]
    fn hidden_signal_needs_a_fifth_off() {
        assert!(hidden_signal_target(&sc("hidden-signal", 0.8, 1.0)).met);
        let t = hidden_signal_target(&sc("hidden-signal", 0.81, 1.0));
        assert!(!t.met && t.measured.contains("limit 8.00 ms"), "{t:?}");
        // Listed (missed) even when the scenario did not run.
        let all = model_targets(&refs(&[sc("a", 0.5, 0.5)]));
        assert_eq!(all.len(), 5);
        assert!(!all[3].met && all[3].target.starts_with("hidden-signal"));
        let all = model_targets(&refs(&[sc("hidden-signal", 0.5, 0.5)]));
        assert!(all[3].met, "{:?}", all[3]);
    }

    #[test]
    fn the_shipped_model_never_hurts_and_wins_twice() {
        let v = vec![sc("a", 1.0, 0.97), sc("b", 1.0, 0.9), sc("c", 1.0, 1.03)];
        let t = shipped_model_target(&refs(&v));
        assert!(t.met, "{t:?}");
        // One scenario 3.1 % worse: missed though it wins twice.
        let v = vec![sc("a", 1.0, 0.97), sc("b", 1.0, 0.9), sc("c", 1.0, 1.031)];
        let t = shipped_model_target(&refs(&v));
        assert!(!t.met && t.measured.ends_with("not measured: c"), "{t:?}");
        // Never worse but only one win of ≥ 3 %.
        let v = vec![sc("a", 1.0, 0.97), sc("b", 1.0, 0.971), sc("c", 1.0, 1.0)];
        let t = shipped_model_target(&refs(&v));
        assert!(!t.met && t.measured.starts_with("1 win (a)"), "{t:?}");
    }
}

//! Simulator integration tests: determinism for a seed, and a short version
//! of every scenario (simulated time: nothing sleeps).

use evaluation::arms::POLICIES;
use evaluation::runner::{SimOptions, run_sim};
use evaluation::scenario::SCENARIOS;

fn short(scenario: &str, policies: &[&str]) -> SimOptions {
    let mut o = SimOptions::new(scenario);
    o.workers = 4;
    o.duration_s = 3.0;
    o.policies = policies.iter().map(|s| (*s).to_owned()).collect();
    o
}

#[test]
fn same_seed_gives_the_same_results_json() {
    // Every arm, the model arms included (the retrained model is trained
    // twice and must come out the same).
    let o = short("slow-worker", &POLICIES);
    let dir = std::env::temp_dir().join(format!("eval-det-{}", std::process::id()));
    let mut texts = Vec::new();
    for run in 0..2 {
        let r = run_sim(&o).expect("run");
        let d = dir.join(run.to_string());
        let w = evaluation::report::write_scenario(&d, &r, "test").expect("write");
        texts.push(std::fs::read_to_string(w.json).expect("read"));
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(texts[0], texts[1]);
    // A different seed gives a different workload.
    let mut o2 = o.clone();
    o2.seed = 2;
    let a = run_sim(&o).expect("run");
    let b = run_sim(&o2).expect("run");
    assert_ne!(a.policies[0].p50_ms, b.policies[0].p50_ms);
}

/// Every policy except `model-retrained` (its logging run and training
/// are exercised once, in `model_retrained_closes_the_loop`).
fn all_but_retrained() -> Vec<&'static str> {
    POLICIES
        .iter()
        .copied()
        .filter(|p| *p != "model-retrained")
        .collect()
}

#[test]
fn every_scenario_runs_short_with_every_policy_reported() {
    let policies = all_but_retrained();
    for name in SCENARIOS {
        let r = run_sim(&short(name, &policies)).expect(name);
        assert_eq!(r.policies.len(), policies.len(), "{name}");
        for p in &r.policies {
            assert_eq!(p.status, "ok", "{name}/{}: {:?}", p.name, p.skip_reason);
            assert!(
                p.requests.unwrap_or(0) > 1_000,
                "{name}/{}: {:?}",
                p.name,
                p.requests
            );
            let (p50, p99) = (p.p50_ms.unwrap_or(0.0), p.p99_ms.unwrap_or(0.0));
            assert!(p50 > 0.0 && p50 <= p99, "{name}/{}: {p50} {p99}", p.name);
        }
    }
}

#[test]
fn model_arm_uses_the_shipped_model_on_every_decision() {
    // From another working directory: the default model is found from the
    // crate's manifest directory, not the cwd.
    let o = short("slow-worker", &["rules-p2c", "model"]);
    let r = run_sim(&o).expect("run");
    let rules = &r.policies[0];
    let m = &r.policies[1];
    assert_eq!(m.status, "ok", "{:?}", m.skip_reason);
    let info = m.model.as_ref().expect("model info");
    assert!(info.version.starts_with("default-"), "{}", info.version);
    // As shipped: the configured default policy selects.
    assert_eq!(
        info.selection_policy,
        scorer_engine::config::Config::default()
            .selection
            .default_policy
    );
    assert!(info.decisions > 1_000, "{info:?}");
    // The generous simulator budget: every decision used the model.
    assert_eq!(info.used, info.decisions, "{info:?}");
    assert!(info.fallbacks.is_empty(), "{info:?}");
    assert!(rules.model.is_none());
}

#[test]
fn a_missing_model_is_reported_not_replaced_by_rules() {
    let mut o = short("homogeneous", &["model"]);
    o.model_dir = std::env::temp_dir().join("no-such-model-dir");
    let r = run_sim(&o).expect("run");
    assert_eq!(r.policies[0].status, "skipped");
    assert!(
        r.policies[0]
            .skip_reason
            .as_deref()
            .is_some_and(|s| s.contains("refused")),
        "{:?}",
        r.policies[0].skip_reason
    );
}

#[test]
fn model_retrained_closes_the_loop() {
    // run service-rules with a decision log (held-out seed) -> trainer library
    // -> run with the retrained model; artefacts kept under --log-dir.
    let dir = std::env::temp_dir().join(format!("eval-retrain-{}", std::process::id()));
    // `zombie`: its timed-out attempts give the trainer both classes even
    // with a service that drains the zombie within 100 ms (a short
    // `slow-worker` run may end with no bad outcome at all).
    let mut o = short("zombie", &["model-retrained"]);
    o.log_dir = Some(dir.clone());
    let started = std::time::Instant::now();
    let r = run_sim(&o).expect("run");
    let p = &r.policies[0];
    assert_eq!(p.status, "ok", "{:?}", p.skip_reason);
    let info = p.model.as_ref().expect("model info");
    assert!(info.version.starts_with("retrained-"), "{}", info.version);
    assert_eq!(info.used, info.decisions, "{info:?}");
    let t = info.retrain.as_ref().expect("retrain info");
    assert_eq!(t.logging_arm, "service-rules");
    assert_eq!(
        info.selection_policy,
        scorer_engine::config::Config::default()
            .selection
            .default_policy
    );
    assert_eq!(t.logging_seed, o.seed + 1_000);
    assert!(t.train_rows > 100 && t.valid_rows > 10, "{t:?}");
    let root = dir.join("zombie").join("model-retrained");
    assert!(root.join("retrained").join("card.json").exists());
    assert!(root.join("retrained").join("model.onnx").exists());
    // The retrained arm's own decisions are logged too.
    assert!(root.join("decisions").exists());
    // Same logs, same flags: the same model (the trainer is deterministic).
    let again = run_sim(&o).expect("again");
    assert_eq!(
        again.policies[0].model.as_ref().map(|m| m.version.clone()),
        Some(info.version.clone())
    );
    assert_eq!(again.policies[0].p99_ms, p.p99_ms);
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!(
        "retrain loop twice: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn results_json_has_the_documented_fields() {
    let r = run_sim(&short("homogeneous", &["round-robin", "model"])).expect("run");
    let v = serde_json::to_value(&r).expect("json");
    let ok = &v["policies"][0];
    for f in [
        "name",
        "p50_ms",
        "p95_ms",
        "p99_ms",
        "p999_ms",
        "error_rate",
        "timeout_rate",
        "retries",
        "balance_cv",
        "oscillations",
        "time_to_drain_ms",
    ] {
        assert!(ok.get(f).is_some(), "missing {f} in {ok}");
    }
    assert_eq!(v["policies"][1]["status"], "ok");
    assert!(v["policies"][1]["model"]["version"].is_string());
    assert!(ok.get("model").is_none(), "baselines carry no model block");
    assert_eq!(ok["balance_cv"], 0.0); // round robin is perfectly even
}

#[test]
fn crash_is_drained_by_the_service_and_round_robin_keeps_sending() {
    // Long enough that the 15 s outage (scaled from 30 s of 120 s) outlasts
    // the service's 10 s `dead_after_ms`.
    let mut o = short("crash-recovery", &["round-robin", "rules-softmax"]);
    o.duration_s = 60.0;
    let r = run_sim(&o).expect("run");
    let rr = &r.policies[0];
    let svc = &r.policies[1];
    assert_eq!(rr.time_to_drain_ms, None, "round robin never stops sending");
    assert!(
        svc.time_to_drain_ms.is_some_and(|t| t <= 12_000.0),
        "{:?}",
        svc.time_to_drain_ms
    );
    assert!(svc.recovery_ms.is_some(), "the worker gets traffic again");
}

#[test]
fn an_operators_drain_takes_the_worker_out_of_every_arm_within_a_report_interval() {
    // 30 s: the drain is 10 s to 17.5 s, 1 s windows, 2 s reports.
    let arms = [
        "round-robin",
        "random",
        "p2c-least-request",
        "p2c-peak-ewma",
        "least-request-all",
        "envoy",
        "oracle",
        "service",
        "service-embedded",
    ];
    let mut o = short("drain", &arms);
    o.duration_s = 30.0;
    let r = run_sim(&o).expect("run");
    for p in &r.policies {
        assert!(
            p.time_to_drain_ms.is_some_and(|t| t <= 2_000.0),
            "{}: {:?}",
            p.name,
            p.time_to_drain_ms
        );
        assert!(
            p.recovery_ms.is_some(),
            "{}: the worker gets traffic again after the drain",
            p.name
        );
    }
}

#[test]
fn unknown_names_are_refused() {
    assert!(run_sim(&short("nope", &["random"])).is_err());
    assert!(run_sim(&short("homogeneous", &["nope"])).is_err());
}

#[test]
fn log_dir_writes_the_service_decision_log_for_the_service_arms() {
    use scorer_log::{LogKind, read_dir};
    let dir = std::env::temp_dir().join(format!("eval-log-{}", std::process::id()));
    let mut o = short("slow-worker", &["round-robin", "rules-softmax"]);
    o.log_dir = Some(dir.clone());
    let r = run_sim(&o).expect("run");
    let requests = r.policies[1].requests.unwrap_or(0) as usize;
    let root = dir.join("slow-worker").join("rules-softmax");
    let decisions = read_dir(&root.join("decisions"), LogKind::Decisions).expect("decisions");
    let outcomes = read_dir(&root.join("outcomes"), LogKind::Outcomes).expect("outcomes");
    // One row per candidate (4 workers) per decision; one outcome per
    // attempt. Picks before the first telemetry reaches the service (1 ms
    // in) find no known worker: the router's fallback makes them, unlogged.
    let fallbacks = r.policies[1].fallbacks.unwrap_or(0) as usize;
    assert!(fallbacks < 10, "{fallbacks} fallbacks");
    assert!(
        decisions.rows >= 4 * (requests - fallbacks),
        "{} rows for {requests} requests, {fallbacks} fallbacks",
        decisions.rows
    );
    assert!(
        outcomes.rows >= requests - fallbacks,
        "{} outcomes for {requests} requests, {fallbacks} fallbacks",
        outcomes.rows
    );
    assert!(
        !dir.join("slow-worker").join("round-robin").exists(),
        "baselines do not log"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

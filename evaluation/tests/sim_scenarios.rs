//! Simulator integration tests: determinism for a seed, and a short version
//! of every scenario (simulated time: nothing sleeps).

use evaluation::policies::POLICIES;
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

#[test]
fn every_scenario_runs_short_with_every_policy_reported() {
    for name in SCENARIOS {
        let r = run_sim(&short(name, &POLICIES)).expect(name);
        assert_eq!(r.policies.len(), POLICIES.len(), "{name}");
        for p in &r.policies {
            match p.name.as_str() {
                "model" | "model-retrained" => {
                    assert_eq!(p.status, "skipped", "{name}/{}", p.name);
                    assert!(
                        p.skip_reason
                            .as_deref()
                            .is_some_and(|s| s.contains("issue #6"))
                    );
                }
                _ => {
                    assert_eq!(p.status, "ok", "{name}/{}", p.name);
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
    }
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
    assert_eq!(v["policies"][1]["status"], "skipped");
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
fn unknown_names_are_refused() {
    assert!(run_sim(&short("nope", &["random"])).is_err());
    assert!(run_sim(&short("homogeneous", &["nope"])).is_err());
}

#[test]
fn log_dir_writes_the_service_decision_log_for_the_service_arms() {
    use service::decision_log::{LogKind, read_dir};
    let dir = std::env::temp_dir().join(format!("eval-log-{}", std::process::id()));
    let mut o = short("slow-worker", &["round-robin", "rules-softmax"]);
    o.log_dir = Some(dir.clone());
    let r = run_sim(&o).expect("run");
    let requests = r.policies[1].requests.unwrap_or(0) as usize;
    let root = dir.join("slow-worker").join("rules-softmax");
    let decisions = read_dir(&root.join("decisions"), LogKind::Decisions).expect("decisions");
    let outcomes = read_dir(&root.join("outcomes"), LogKind::Outcomes).expect("outcomes");
    // One row per candidate (4 workers) per decision; one outcome per attempt.
    assert!(
        decisions.rows >= 4 * requests,
        "{} rows for {requests} requests",
        decisions.rows
    );
    assert!(
        outcomes.rows >= requests,
        "{} outcomes for {requests} requests",
        outcomes.rows
    );
    assert!(
        !dir.join("slow-worker").join("round-robin").exists(),
        "baselines do not log"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

//! `service-learning` in short simulated runs: the loop promotes a model
//! that learned a signal, and never one trained on shuffled targets.

use crate::run_summary::PolicyResult;
use crate::runner::{SimOptions, run_sim};

/// `hidden-signal-mid-run` on 12 workers for 31 s (seed 2, a tuning
/// seed), with `policies`: rounds at 15 s and 30 s.
fn run(policies: &[&str]) -> Vec<PolicyResult> {
    let mut opts = SimOptions::new("hidden-signal-mid-run");
    opts.policies = policies.iter().map(|p| (*p).to_owned()).collect();
    opts.workers = 12;
    opts.duration_s = 31.0;
    opts.seed = 2;
    run_sim(&opts).expect("the run").policies
}

#[test]
fn a_candidate_trained_on_shuffled_targets_is_never_promoted_and_changes_no_pick() {
    let ps = run(&["service-rules", "service-learning-shuffled"]);
    let learning = ps[1].learning.as_ref().expect("the loop's record");
    assert_eq!(learning.rounds.len(), 2, "rounds at 15 s and 30 s");
    for r in &learning.rounds {
        assert!(
            r.action == "held" || r.action == "skipped",
            "{}: {}",
            r.action,
            r.line
        );
    }
    assert_eq!(
        (learning.promotions, learning.served_at_end.as_str()),
        (0, "rules")
    );
    // On the rules all along, it picks exactly as `service-rules` does.
    assert_eq!(ps[1].p99_ms, ps[0].p99_ms);
    assert_eq!(ps[1].picks_per_worker, ps[0].picks_per_worker);
}

#[test]
fn the_loop_promotes_a_model_trained_on_the_run_and_it_scores() {
    let ps = run(&["service-learning"]);
    let learning = ps[0].learning.as_ref().expect("the loop's record");
    let lines: Vec<&str> = learning.rounds.iter().map(|r| r.line.as_str()).collect();
    assert!(learning.promotions >= 1, "{lines:#?}");
    assert!(
        lines.iter().any(|l| l.contains(": promoted loop-")),
        "{lines:#?}"
    );
    assert!(learning.served_at_end.starts_with("loop-"), "{lines:#?}");
}

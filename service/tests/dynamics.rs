//! Worker dynamics and selection through the engine (issue #3): flapping,
//! stale-looks-idle, slow start, fair ties, panic mode, reproducibility.
//! Time is driven by passing `now_ms`; randomness by seeded RNGs.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use scorer_core::dynamics::PenaltyState;
use scorer_core::scoring::RequestContext;
use scorer_core::telemetry::Snapshot;
use scorer_engine::Engine;
use scorer_engine::api::{ScoreRequest, ScoreResponse};
use scorer_engine::config::Config;

const WALL: u64 = 1_750_000_000_000;

fn healthy(id: &str, ts: u64) -> Snapshot {
    let mut s = Snapshot::new(id, ts);
    (s.cpu_usage, s.rtt_ms_avg, s.rtt_ms_p99, s.queue_depth) = (0.3, 1.0, 4.0, 2);
    s
}

/// Rule score 100 × 0.7 × 0.5 − 15 (errors) = 20: low at once (flags are not smoothed).
fn broken(id: &str, ts: u64) -> Snapshot {
    let mut s = healthy(id, ts);
    s.compacting = true;
    s.under_repair = true;
    s.error_rate = 0.5;
    s
}

fn busy(id: &str, ts: u64) -> Snapshot {
    let mut s = Snapshot::new(id, ts);
    (s.cpu_usage, s.rtt_ms_avg, s.rtt_ms_p99, s.queue_depth) = (0.9, 8.0, 40.0, 30);
    s
}

fn config() -> Config {
    let mut c = Config::default();
    c.scoring.warmup_ms = 0;
    c
}

struct Sim {
    engine: Engine,
    now: u64,
    ts: u64,
    rng: ChaCha8Rng,
    decisions: u64,
}

impl Sim {
    fn new(c: Config) -> Self {
        Self {
            engine: Engine::new(c),
            now: 0,
            ts: WALL,
            rng: ChaCha8Rng::seed_from_u64(42),
            decisions: 0,
        }
    }

    fn at(&mut self, now: u64) {
        assert!(now >= self.now);
        self.ts += now - self.now;
        self.now = now;
    }

    fn report(&mut self, snaps: &[fn(&str, u64) -> Snapshot], ids: &[&str]) {
        self.ts += 1;
        let batch: Vec<Snapshot> = ids
            .iter()
            .zip(snaps)
            .map(|(id, f)| f(id, self.ts))
            .collect();
        self.engine
            .ingest(&batch, self.now, self.ts)
            .expect("valid telemetry");
    }

    fn score(&mut self, ids: &[&str], policy: &str) -> ScoreResponse {
        let mut req = ScoreRequest::new("user:1:x", ids.iter().map(|s| s.to_string()).collect());
        req.policy = Some(policy.into());
        self.decisions += 1;
        let id = format!("d{}", self.decisions);
        self.engine
            .score(
                &req,
                &RequestContext::default(),
                self.now,
                id,
                &mut self.rng,
            )
            .expect("scored")
    }

    /// [`Sim::score`], and the routed request completes at once: a
    /// successful feedback of `latency_ms` for the pick (a router that
    /// reports its outcomes, so no pick stays outstanding).
    fn decide(&mut self, ids: &[&str], policy: &str, latency_ms: f64) -> ScoreResponse {
        let r = self.score(ids, policy);
        if let Some(pick) = &r.pick {
            let fb = scorer_engine::Feedback {
                decision_id: r.decision_id.clone(),
                worker_id: pick.clone(),
                latency_ms,
                success: true,
                cache_hit: None,
            };
            let out = self.engine.feedback(&fb, self.now).expect("valid");
            assert!(out.released, "{out:?}");
        }
        r
    }

    fn state(&self, id: &str) -> (PenaltyState, Option<u64>, u32) {
        let cfg = self.engine.config();
        let v = self.engine.registry().get(id).expect("known").view_full();
        let p = v.penalty.state_at(self.now, &cfg.penalty);
        (p.state, p.cooldown_until_ms, p.backoff_level)
    }
}

#[test]
fn flapping_worker_backs_off_exponentially_and_loses_share() {
    let mut sim = Sim::new(config());
    let ids = ["f", "a", "b"];
    sim.report(&[healthy, healthy, healthy], &ids);
    let cycle_ms = 20_000;
    let mut cooldowns = Vec::new();
    let mut shares = Vec::new();
    for cycle in 0..5u64 {
        let start = 1_000 + cycle * cycle_ms;
        let mut picks_f = 0;
        let mut picks = 0;
        for step in 0..(cycle_ms / 10) {
            let t = start + step * 10;
            sim.at(t);
            if step < 3 {
                // Three consecutive low reports: observation, then cooldown.
                sim.report(&[broken, healthy, healthy], &ids);
                if step == 2 {
                    let (state, until, _) = sim.state("f");
                    assert_eq!(state, PenaltyState::Cooldown, "cycle {cycle}");
                    cooldowns.push(until.expect("cooldown has an end") - t);
                }
            } else if step % 100 == 0 {
                sim.report(&[healthy, healthy, healthy], &ids);
            }
            let r = sim.score(&ids, "softmax");
            picks += 1;
            picks_f += usize::from(r.pick.as_deref() == Some("f"));
        }
        shares.push(picks_f as f64 / picks as f64);
        // A good report right after recovery does not reset the backoff.
        assert!(sim.state("f").2 >= 1);
    }
    assert_eq!(cooldowns, [1_000, 2_000, 4_000, 8_000, 16_000]);
    for w in shares.windows(2) {
        assert!(w[1] <= w[0] + 0.02, "share rose: {shares:?}");
    }
    assert!(shares[4] < shares[0] - 0.05, "share must fall: {shares:?}");
}

#[test]
fn stale_idle_looking_worker_gets_no_more_than_its_fair_share() {
    // `complete`: each routed request completes at once (a router that
    // reports outcomes), or stays outstanding until it expires.
    for complete in [false, true] {
        for dead_after_ms in [10_000, 120_000] {
            let mut c = config();
            c.telemetry.dead_after_ms = dead_after_ms;
            let mut sim = Sim::new(c);
            sim.at(1_000);
            // A looks idle, but its report is about to go 60 s old.
            sim.report(
                &[
                    |id, ts| {
                        let mut s = Snapshot::new(id, ts);
                        (s.cpu_usage, s.rtt_ms_avg, s.rtt_ms_p99) = (0.02, 0.5, 1.0);
                        s
                    },
                    busy,
                    busy,
                ],
                &["a", "b", "c"],
            );
            sim.at(61_000);
            sim.report(&[busy, busy], &["b", "c"]);
            let mut picks_a = 0;
            for i in 0..200 {
                sim.at(61_000 + i * 5);
                let r = if complete {
                    sim.decide(&["a", "b", "c"], "softmax", 1.0)
                } else {
                    sim.score(&["a", "b", "c"], "softmax")
                };
                picks_a += usize::from(r.pick.as_deref() == Some("a"));
                let a = &r.scores[0];
                assert!(
                    a.rule_score < r.scores[1].rule_score,
                    "stale A must not look better: {r:?}"
                );
                for s in &r.scores {
                    assert!((0.0..=100.0).contains(&s.final_score), "{s:?}");
                }
            }
            // Fair share is a third; allow sampling noise of one standard deviation.
            assert!(
                picks_a <= 67 + 7,
                "complete {complete}, dead_after {dead_after_ms}: A got {picks_a} of 200"
            );
            if dead_after_ms == 10_000 {
                assert_eq!(picks_a, 0, "a dead worker is never picked");
            }
            if dead_after_ms == 120_000 {
                let r = sim.score(&["a", "b"], "none");
                assert!(
                    r.scores[0]
                        .adjustments
                        .iter()
                        .any(|x| x.code == "stale_telemetry")
                );
            }
        }
    }
}

#[test]
fn new_and_returning_workers_get_at_most_their_ramp_share_in_the_first_second() {
    let ramp_share = 0.2 / 3.2;
    let ids = ["a", "b", "c", "new"];
    // `complete`: each routed request completes at once (a router that
    // reports outcomes), or stays outstanding until it expires.
    for complete in [false, true] {
        let mut sim = Sim::new(config());
        let old = ["a", "b", "c"];
        // The old workers report every 5 s: none of them returns from
        // silence (and ramps again) when "new" registers.
        sim.report(&[healthy, healthy, healthy], &old);
        for t in (5_000..100_000).step_by(5_000) {
            sim.at(t);
            sim.report(&[healthy, healthy, healthy], &old);
        }
        sim.at(100_000);
        sim.report(&[healthy, healthy, healthy, healthy], &ids);
        let route = |sim: &mut Sim| {
            if complete {
                sim.decide(&ids, "softmax", 1.0)
            } else {
                sim.score(&ids, "softmax")
            }
        };
        let mut picks_new = 0;
        for i in 0..1_000 {
            sim.at(100_000 + i);
            let r = route(&mut sim);
            picks_new += usize::from(r.pick.as_deref() == Some("new"));
            assert!(
                (r.scores[3].weight - 0.2).abs() < 1e-12,
                "new worker weight is the 0.2 floor"
            );
            assert!(r.scores[..3].iter().all(|s| s.weight == 1.0), "{r:?}");
            let ramp = r.scores[3]
                .adjustments
                .iter()
                .find(|a| a.code == "slow_start")
                .and_then(|a| a.factor);
            // A fifth of its capacity inside the cubic queue term: 0.2^3.
            let ramp = ramp.expect("a slow_start line");
            assert!((ramp - 0.008).abs() < 1e-12, "{:?}", r.scores[3]);
        }
        assert!(
            (picks_new as f64) / 1000.0 <= ramp_share + 0.02,
            "complete {complete}: new worker got {picks_new} of 1000"
        );
        if !complete {
            assert!(picks_new > 0, "slow start is a ramp, not an ejection");
        }

        // Send "new" through a cooldown, then watch its first second back;
        // everyone keeps reporting, and the first phase's picks have expired.
        for t in (105_000..200_000).step_by(5_000) {
            sim.at(t);
            sim.report(&[healthy, healthy, healthy, healthy], &ids);
        }
        sim.at(200_000);
        sim.engine.forget_silent(sim.now);
        for k in 0..3 {
            sim.at(200_000 + k * 10);
            sim.report(&[healthy, healthy, healthy, broken], &ids);
        }
        let (state, until, _) = sim.state("new");
        assert_eq!(state, PenaltyState::Cooldown);
        let back = until.expect("end");
        let mut picks_back = 0;
        for i in 0..1_000 {
            sim.at(back + i);
            if i % 250 == 0 {
                sim.report(&[healthy, healthy, healthy, healthy], &ids);
            }
            let r = route(&mut sim);
            assert_eq!(r.scores[3].penalty_state, "recovering");
            picks_back += usize::from(r.pick.as_deref() == Some("new"));
        }
        assert!(
            (picks_back as f64) / 1000.0 <= ramp_share + 0.02,
            "complete {complete}: returning worker got {picks_back}"
        );
    }
}

#[test]
fn identical_workers_under_max_share_evenly_in_any_order() {
    // Under `max` (lowest routing cost) each pick is outstanding until
    // its feedback: consecutive picks rotate over identical workers, in
    // whatever order the candidates come.
    let c = config();
    let b = c.cost.exponent;
    for order in [["w1", "w2", "w3", "w4"], ["w4", "w3", "w2", "w1"]] {
        let mut sim = Sim::new(c.clone());
        sim.report(
            &[healthy, healthy, healthy, healthy],
            &["w1", "w2", "w3", "w4"],
        );
        sim.at(60_000);
        sim.report(
            &[healthy, healthy, healthy, healthy],
            &["w1", "w2", "w3", "w4"],
        );
        let mut counts = std::collections::HashMap::new();
        let mut block = std::collections::HashSet::new();
        for i in 0..400 {
            let r = sim.score(&order, "max");
            let pick = r.pick.clone().expect("pick");
            let n: Vec<u32> = r
                .scores
                .iter()
                .map(|s| s.outstanding.expect("known"))
                .collect();
            let least = *n.iter().min().expect("candidates");
            assert_eq!(least, i / 4, "picks {i}: {n:?}");
            let k = n.iter().filter(|&&x| x == least).count() as f64;
            for (s, &x) in r.scores.iter().zip(&n) {
                // Ties share the propensity; a worker with one more
                // outstanding pick is never the lowest routing cost.
                let want = if x == least { 1.0 / k } else { 0.0 };
                assert_eq!(s.probability, Some(want), "{s:?}");
                if x > 0 {
                    let line = s
                        .adjustments
                        .iter()
                        .find(|a| a.code == "outstanding")
                        .expect("outstanding line");
                    let f = line.factor.expect("multiply");
                    assert!((f - 1.0 / (1.0 + f64::from(x)).powf(b)).abs() < 1e-12);
                }
            }
            let picked = r
                .scores
                .iter()
                .find(|s| s.worker_id == pick)
                .expect("scored");
            assert_eq!(picked.outstanding, Some(least));
            assert!(block.insert(pick.clone()), "{pick} twice in a block of 4");
            if block.len() == 4 {
                block.clear();
            }
            *counts.entry(pick).or_insert(0usize) += 1;
        }
        for w in ["w1", "w2", "w3", "w4"] {
            assert_eq!(counts.get(w), Some(&100), "{counts:?}");
        }
    }
}

#[test]
fn all_in_cooldown_is_panic_mode_all_dead_is_an_error() {
    let mut sim = Sim::new(config());
    let ids = ["a", "b"];
    sim.report(&[healthy, healthy], &ids);
    sim.at(40_000);
    sim.report(&[healthy, healthy], &ids);
    for k in 0..3 {
        sim.at(40_000 + k);
        sim.report(&[broken, broken], &ids);
    }
    let r = sim.score(&ids, "softmax");
    assert!(r.panic, "{r:?}");
    assert!(
        r.scores
            .iter()
            .all(|s| !s.eligible && s.reason == Some("cooldown"))
    );
    assert!(r.pick.is_some());
    let total: f64 = r.scores.iter().filter_map(|s| s.probability).sum();
    assert!((total - 1.0).abs() < 1e-9);
    assert_eq!(sim.engine.counters().panic_decisions, 1);

    sim.at(100_000); // every report is now older than dead_after_ms
    let mut req = ScoreRequest::new("k", vec!["a".into(), "b".into(), "ghost".into()]);
    req.policy = Some("softmax".into());
    let err = sim
        .engine
        .score(
            &req,
            &RequestContext::default(),
            sim.now,
            "x".into(),
            &mut sim.rng,
        )
        .unwrap_err();
    assert!(
        matches!(err, scorer_engine::ScoreError::NoEligibleWorkers(_)),
        "{err}"
    );
    let empty = ScoreRequest::new("k", vec![]);
    let err = sim
        .engine
        .score(
            &empty,
            &RequestContext::default(),
            sim.now,
            "y".into(),
            &mut sim.rng,
        )
        .unwrap_err();
    assert_eq!(err, scorer_engine::ScoreError::NoCandidates);
}

#[test]
fn same_seed_gives_the_same_pick_sequence() {
    let run = |seed: u64| {
        let mut sim = Sim::new(config());
        sim.rng = ChaCha8Rng::seed_from_u64(seed);
        let ids = ["a", "b", "c", "d"];
        sim.report(&[healthy, busy, healthy, busy], &ids);
        sim.at(40_000);
        sim.report(&[healthy, busy, healthy, busy], &ids);
        (0..50)
            .map(|i| {
                sim.at(40_000 + i * 10);
                let policy = ["softmax", "p2c", "max", "swrr", "hash"][i as usize % 5];
                sim.score(&ids, policy).pick.expect("pick")
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(run(7), run(7));
    assert_ne!(
        run(7),
        run(8),
        "different seeds should differ somewhere over 50 picks"
    );
}

#[test]
fn in_flight_picks_spread_consecutive_requests_and_feedback_releases_them() {
    let mut sim = Sim::new(config());
    let b = sim.engine.config().cost.exponent;
    let ids = ["a", "b"];
    sim.report(&[healthy, healthy], &ids);
    sim.at(40_000);
    sim.report(&[healthy, healthy], &ids);
    let first = sim.score(&ids, "max");
    let picked = first.pick.clone().expect("pick");
    let other = if picked == "a" { "b" } else { "a" };
    let by_id = |r: &ScoreResponse, id: &str| {
        r.scores
            .iter()
            .find(|s| s.worker_id == id)
            .cloned()
            .expect("scored")
    };
    assert!(first.scores.iter().all(|s| s.outstanding == Some(0)));
    let second = sim.score(&ids, "max");
    assert_eq!(
        second.pick.as_deref(),
        Some(other),
        "an outstanding pick makes the other worker win"
    );
    let s = by_id(&second, &picked);
    assert_eq!(s.outstanding, Some(1));
    assert_eq!(s.probability, Some(0.0));
    let line = s
        .adjustments
        .iter()
        .find(|a| a.code == "outstanding")
        .expect("outstanding line");
    assert_eq!(line.stage, scorer_core::scoring::Stage::Cost);
    assert!((line.factor.expect("multiply") - 0.5f64.powf(b)).abs() < 1e-12);
    // Both report a queue of 2 the service did not send (unseen backlog): the
    // pick waits behind 1 + 2, the other behind 2.
    let e = s.cost.expect("cost stage ran");
    let e_other = by_id(&second, other).cost.expect("cost stage ran");
    let want = (4.0f64 / 3.0).powf(b);
    assert!((e / e_other - want).abs() < 1e-9, "{e} vs {e_other}");
    // The expected latencies are in the ratio of the queues themselves.
    let l = s.expected_latency_ms.expect("cost stage ran");
    let l_other = by_id(&second, other)
        .expected_latency_ms
        .expect("cost stage ran");
    assert!((l / l_other - 4.0 / 3.0).abs() < 1e-9, "{l} vs {l_other}");

    // A snapshot does not reset outstanding picks (only feedback or expiry do).
    sim.report(&[healthy, healthy], &ids);
    let r = sim.score(&ids, "none");
    assert!(r.scores.iter().all(|s| s.outstanding == Some(1)), "{r:?}");

    let fb = scorer_engine::Feedback {
        decision_id: first.decision_id.clone(),
        worker_id: picked.clone(),
        latency_ms: 3.2,
        success: true,
        cache_hit: None,
    };
    let out = sim.engine.feedback(&fb, sim.now).expect("valid");
    assert!(out.known_decision && out.worker_was_picked && out.released);
    let third = sim.score(&ids, "none");
    let s = by_id(&third, &picked);
    assert_eq!(s.outstanding, Some(0));
    assert!(
        !s.adjustments.iter().any(|a| a.code == "outstanding"),
        "{s:?}"
    );
    assert_eq!(by_id(&third, other).outstanding, Some(1));
    let unknown = scorer_engine::Feedback {
        decision_id: "never-made".into(),
        ..fb
    };
    let out = sim.engine.feedback(&unknown, sim.now).expect("accepted");
    assert!(!out.known_decision && !out.released);
    assert_eq!(sim.engine.counters().feedback_unknown_decision, 1);

    // Without feedback (and without a timeout) the second pick stops
    // counting `evidence.default_expiry_ms` after it was made.
    let expiry = sim.engine.config().evidence.default_expiry_ms;
    let made = sim.now;
    sim.at(made + expiry / 2);
    sim.report(&[healthy, healthy], &ids);
    sim.at(made + expiry - 1);
    sim.engine.forget_silent(sim.now);
    assert_eq!(by_id(&sim.score(&ids, "none"), other).outstanding, Some(1));
    sim.at(made + expiry);
    sim.engine.forget_silent(sim.now);
    assert_eq!(by_id(&sim.score(&ids, "none"), other).outstanding, Some(0));
}

#[test]
fn warm_up_alone_does_not_eject_a_new_worker() {
    let mut c = Config::default(); // warm-up on: 10 points falling over 30 s
    c.selection.slow_start_new_workers = true;
    let mut sim = Sim::new(c);
    // Rule score without warm-up: 100 × 0.7 − 8 (cpu 0.9) − 15 (p99 20) = 47,
    // inside the 40..=60 band; warm-up would push it to ~37.
    let meh = |id: &str, ts: u64| {
        let mut s = Snapshot::new(id, ts);
        (s.cpu_usage, s.rtt_ms_avg, s.rtt_ms_p99) = (0.9, 5.0, 20.0);
        s.compacting = true;
        s
    };
    for k in 0..3 {
        sim.at(k * 10);
        sim.report(&[meh], &["wu"]);
    }
    let r = sim.score(&["wu"], "none");
    assert!(
        r.scores[0].rule_score < 40.0,
        "warm-up still shows: {}",
        r.scores[0].rule_score
    );
    assert_eq!(sim.state("wu").0, PenaltyState::Healthy);
}

#[test]
fn mistaken_feedback_does_not_consume_the_decision() {
    let mut sim = Sim::new(config());
    sim.report(&[healthy, healthy], &["a", "b"]);
    let r = sim.score(&["a", "b"], "max");
    let picked = r.pick.clone().expect("pick");
    let other = if picked == "a" { "b" } else { "a" };
    let mut fb = scorer_engine::Feedback {
        decision_id: r.decision_id.clone(),
        worker_id: other.into(),
        latency_ms: 1.0,
        success: true,
        cache_hit: None,
    };
    let out = sim.engine.feedback(&fb, sim.now).expect("valid");
    assert!(out.known_decision && !out.released);
    fb.worker_id = picked;
    let out = sim.engine.feedback(&fb, sim.now).expect("valid");
    assert!(out.known_decision && out.released);
}

//! The routing cost through the engine: exact outstanding picks and
//! their expiry, peak-EWMA service time and failures, outlier ejection and
//! slow start on return, the unseen backlog, each cost line, and the R1 case
//! (a failing worker must not outrank a slow healthy one). Time is passed
//! in; randomness is seeded.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use scorer_core::scoring::{Explained, RequestContext, RequestType};
use scorer_core::telemetry::Snapshot;
use scorer_engine::Engine;
use scorer_engine::Feedback;
use scorer_engine::api::{ScoreRequest, ScoreResponse, WorkerScore};
use scorer_engine::config::Config;

const WALL: u64 = 1_750_000_000_000;

fn snap(id: &str, ts: u64) -> Snapshot {
    let mut s = Snapshot::new(id, ts);
    (s.cpu_usage, s.rtt_ms_avg, s.rtt_ms_p99, s.queue_depth) = (0.3, 2.0, 4.0, 0);
    s
}

fn config() -> Config {
    let mut c = Config::default();
    c.scoring.warmup_ms = 0;
    c.selection.slow_start_new_workers = false;
    c
}

struct World {
    engine: Engine,
    rng: ChaCha8Rng,
    next: u64,
}

impl World {
    fn new(c: Config, ids: &[&str], now: u64) -> Self {
        let w = Self {
            engine: Engine::new(c),
            rng: ChaCha8Rng::seed_from_u64(7),
            next: 0,
        };
        w.report(ids, now, |_| {});
        w
    }

    fn report(&self, ids: &[&str], now: u64, f: impl Fn(&mut Snapshot)) {
        let batch: Vec<Snapshot> = ids
            .iter()
            .map(|id| {
                let mut s = snap(id, WALL + now);
                f(&mut s);
                s
            })
            .collect();
        self.engine.ingest(&batch, now, WALL + now).expect("valid");
    }

    fn score(&mut self, ids: &[&str], policy: &str, now: u64, timeout_ms: u64) -> ScoreResponse {
        self.next += 1;
        let mut req = ScoreRequest::new(
            "user:1:profile",
            ids.iter().map(|s| (*s).to_owned()).collect(),
        );
        req.policy = Some(policy.to_owned());
        let ctx = RequestContext {
            request_type: Some(RequestType::Get),
            timeout_ms: Some(timeout_ms),
            ..RequestContext::default()
        };
        match self
            .engine
            .score(&req, &ctx, now, format!("d{}", self.next), &mut self.rng)
        {
            Ok(d) => d,
            Err(e) => {
                let p = self.engine.preview(&req, &ctx, now, &mut self.rng);
                panic!("{e} at {now}: {p:?}");
            }
        }
    }

    fn feedback(&self, d: &ScoreResponse, latency_ms: f64, success: bool, now: u64) {
        let f = Feedback {
            decision_id: d.decision_id.clone(),
            worker_id: d.pick.clone().expect("a pick"),
            latency_ms,
            success,
            cache_hit: None,
        };
        self.engine.feedback(&f, now).expect("valid feedback");
    }
}

fn of<'a>(d: &'a ScoreResponse, id: &str) -> &'a WorkerScore {
    d.scores
        .iter()
        .find(|s| s.worker_id == id)
        .expect("candidate")
}

fn codes(w: &WorkerScore) -> Vec<&'static str> {
    w.adjustments.iter().map(|a| a.code).collect()
}

#[test]
fn outstanding_is_exact_until_feedback_or_expiry() {
    let mut w = World::new(config(), &["a", "b"], 1_000);
    // `max` on identical workers: each pick makes its worker the worse one.
    let d1 = w.score(&["a", "b"], "max", 1_000, 100);
    let d2 = w.score(&["a", "b"], "max", 1_000, 100);
    assert_ne!(
        d1.pick, d2.pick,
        "the second pick avoids the first's worker"
    );
    let d3 = w.score(&["a", "b"], "none", 1_000, 100);
    assert!(d3.scores.iter().all(|s| s.outstanding == Some(1)));
    // A snapshot does not reset the count.
    w.report(&["a", "b"], 1_050, |_| {});
    let d4 = w.score(&["a", "b"], "none", 1_050, 100);
    assert!(d4.scores.iter().all(|s| s.outstanding == Some(1)));
    // Feedback releases d1's pick.
    w.feedback(&d1, 2.0, true, 1_060);
    let d5 = w.score(&["a", "b"], "none", 1_060, 100);
    assert_eq!(of(&d5, d1.pick.as_deref().unwrap()).outstanding, Some(0));
    // d2 never gets feedback: it expires after 2 × its 100 ms timeout.
    w.engine.forget_silent(1_199);
    let still = w.score(&["a", "b"], "none", 1_199, 100);
    assert_eq!(of(&still, d2.pick.as_deref().unwrap()).outstanding, Some(1));
    w.engine.forget_silent(1_200);
    let gone = w.score(&["a", "b"], "none", 1_200, 100);
    assert_eq!(of(&gone, d2.pick.as_deref().unwrap()).outstanding, Some(0));
}

#[test]
fn cost_lines_explain_the_expected_latency_and_replay_exactly() {
    let mut c = config();
    c.evidence.latency_decay_ms = 1_000_000_000; // no return toward the prior here
    c.cost.exponent = 1.0; // expected completion times, for readable arithmetic
    let mut w = World::new(c, &["a", "b"], 1_000);
    // Teach a: 4 ms per request, b: 2 ms.
    for (id, ms) in [("a", 4.0), ("b", 2.0)] {
        for i in 0..3 {
            let d = w.score(&[id], "max", 1_000 + i, 100);
            w.feedback(&d, ms, true, 1_000 + i);
        }
    }
    // One outstanding pick on a.
    let _ = w.score(&["a"], "max", 1_010, 100);
    let d = w.score(&["a", "b"], "none", 1_010, 100);
    let a = of(&d, "a");
    assert_eq!(codes(a), ["service_time", "outstanding"]);
    assert_eq!(
        a.adjustments[0].reason.to_string(),
        "service time 4 ms (peak-EWMA of 3 outcomes) vs 2 ms for the fastest candidate"
    );
    // E = 4 ms × (1 + 1) / health 1 = 8 ms; score = 100 × 2 / 8.
    assert!((a.expected_latency_ms.unwrap() - 8.0).abs() < 1e-6);
    assert!((a.final_score - 25.0).abs() < 1e-6, "{}", a.final_score);
    assert!((Explained::replay(100.0, &a.adjustments) - a.final_score).abs() < 1e-9);
    let b = of(&d, "b");
    assert!((b.expected_latency_ms.unwrap() - 2.0).abs() < 1e-6);
    assert_eq!(d.ranking[0], "b");
}

#[test]
fn a_refused_pick_counts_as_its_timeout_and_five_eject() {
    let mut w = World::new(config(), &["a", "b"], 1_000);
    let mut now = 1_000;
    // b refuses connections: every pick of b fails fast.
    let mut failures = 0;
    while failures < 5 {
        let d = w.score(&["b"], "max", now, 100);
        w.feedback(&d, 0.1, false, now);
        failures += 1;
        now += 1;
        if failures == 1 {
            let v = w.score(&["a", "b"], "none", now, 100);
            // The 0.1 ms refusal is a 100 ms sample: b is the costlier.
            assert!(of(&v, "b").expected_latency_ms.unwrap() >= 100.0);
            assert!(of(&v, "b").final_score < of(&v, "a").final_score);
        }
    }
    let d = w.score(&["a", "b"], "none", now, 100);
    let b = of(&d, "b");
    assert!(!b.eligible);
    assert_eq!(b.reason, Some("outlier_ejected"));
    // Back after Envoy's 30 s base ejection time, in slow start (the
    // workers keep reporting meanwhile).
    let back = now - 1 + 30_000;
    for t in (now..=back).step_by(5_000) {
        w.report(&["a", "b"], t, |_| {});
    }
    let d = w.score(&["a", "b"], "none", back - 1, 100);
    assert_eq!(of(&d, "b").reason, Some("outlier_ejected"));
    let d = w.score(&["a", "b"], "none", back, 100);
    let b = of(&d, "b");
    assert!(b.eligible, "{:?}", b.reason);
    assert!(codes(b).contains(&"slow_start"), "{:?}", codes(b));
    assert!((b.weight - 0.2).abs() < 1e-9, "{}", b.weight);
}

#[test]
fn only_one_worker_of_a_small_pool_is_ejected_at_once() {
    let mut w = World::new(config(), &["a", "b", "c"], 1_000);
    for id in ["a", "b"] {
        for i in 0..5 {
            let d = w.score(&[id], "max", 1_000 + i, 100);
            w.feedback(&d, 100.0, false, 1_000 + i);
        }
    }
    let d = w.score(&["a", "b", "c"], "none", 1_010, 100);
    let ejected = d
        .scores
        .iter()
        .filter(|s| s.reason == Some("outlier_ejected"))
        .count();
    assert_eq!(
        ejected, 1,
        "max_ejection_percent 10 % of 3 still allows one"
    );
}

#[test]
fn the_unseen_backlog_is_the_reported_queue_beyond_our_picks() {
    let mut c = config();
    c.cost.exponent = 1.0;
    let mut w = World::new(c, &["a", "b"], 1_000);
    let _ = w.score(&["a"], "max", 1_000, 1_000);
    let _ = w.score(&["a"], "max", 1_000, 1_000);
    // a reports 5 queued; 2 of them are ours.
    w.report(&["a", "b"], 1_001, |s| {
        if s.worker_id == "a" {
            s.queue_depth = 5;
        }
    });
    let d = w.score(&["a", "b"], "none", 1_001, 1_000);
    let a = of(&d, "a");
    let line = a
        .adjustments
        .iter()
        .find(|x| x.code == "unseen_backlog")
        .expect("line");
    assert_eq!(line.source_value, Some(3.0));
    // E = 2 ms prior × (1 + 2 + 3) = 12 ms.
    assert!((a.expected_latency_ms.unwrap() - 12.0).abs() < 1e-9);
    // Two seconds later the report counts e^-1, the rest is the pool's
    // typical unseen backlog (the median of the reports: 3 and b's 0).
    let d = w.score(&["a", "b"], "none", 3_001, 1_000);
    let u = of(&d, "a")
        .adjustments
        .iter()
        .find(|x| x.code == "unseen_backlog")
        .unwrap();
    let t = (-1f64).exp();
    let want = 3.0 * t + 1.5 * (1.0 - t);
    assert!((u.source_value.unwrap() - want).abs() < 1e-9, "{u:?}");
}

#[test]
fn r1_a_failing_worker_never_outranks_a_slow_healthy_one() {
    // ../shared/cases/r1-failing-worker-looks-fastest.md
    let c = config();
    let engine = Engine::new(c);
    let mut slow = Snapshot::new("r1-slow", WALL);
    (
        slow.cpu_usage,
        slow.queue_depth,
        slow.rtt_ms_avg,
        slow.rtt_ms_p99,
        slow.error_rate,
    ) = (0.60, 4, 40.0, 80.0, 0.0);
    let mut failing = Snapshot::new("r1-failing", WALL);
    (
        failing.cpu_usage,
        failing.queue_depth,
        failing.rtt_ms_avg,
        failing.rtt_ms_p99,
        failing.error_rate,
    ) = (0.05, 0, 1.0, 2.0, 0.85);
    engine.ingest(&[slow, failing], 1_000, WALL).expect("valid");
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let ids = vec!["r1-slow".to_owned(), "r1-failing".to_owned()];
    let mut picks_failing = 0;
    for i in 0..300u64 {
        let now = 1_000 + i;
        let mut req = ScoreRequest::new("k", ids.clone());
        req.policy = Some("max".into());
        let d = engine
            .score(
                &req,
                &RequestContext::default(),
                now,
                format!("d{i}"),
                &mut rng,
            )
            .expect("scored");
        if i == 0 {
            assert!(
                of(&d, "r1-failing").final_score < of(&d, "r1-slow").final_score,
                "{} vs {}",
                of(&d, "r1-failing").final_score,
                of(&d, "r1-slow").final_score
            );
            assert!(codes(of(&d, "r1-failing")).contains(&"failures"));
        }
        let pick = d.pick.clone().expect("a pick");
        let failing = pick == "r1-failing";
        picks_failing += u32::from(failing);
        // The router's outcomes: the slow worker answers in 40 ms, the
        // failing one fails fast 85 % of the time.
        let f = Feedback {
            decision_id: d.decision_id,
            worker_id: pick,
            latency_ms: if failing { 1.0 } else { 40.0 },
            success: !failing || i % 7 == 0,
            cache_hit: None,
        };
        engine.feedback(&f, now).expect("valid");
    }
    assert!(picks_failing <= 3, "{picks_failing} of 300");
}

//! What the simulator charges a remote decision: each test runs the same
//! workload with a probe policy that is remote (a service arm) or local (a
//! baseline) and compares what it saw.

use std::sync::{Arc, Mutex};

use rand_chacha::ChaCha8Rng;
use scorer_core::telemetry::Snapshot;

use super::simulate;
use crate::arms::Arm;
use crate::arms::service::Remote;
use crate::router::{Outcome, Pick, PickRequest, Router};
use crate::scenario::Scenario;

/// When a probe picked, learned and heard telemetry, ms.
#[derive(Debug, Default)]
struct Seen {
    picks_ms: Vec<f64>,
    outcomes_ms: Vec<f64>,
    telemetry_ms: Vec<f64>,
}

/// Round robin that records what it saw.
struct Probe {
    n: usize,
    seen: Arc<Mutex<Seen>>,
}

impl Probe {
    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().expect("not poisoned")
    }
}

impl Router for Probe {
    fn pick(&mut self, req: &PickRequest<'_>, _rng: &mut ChaCha8Rng) -> Pick {
        let mut seen = self.seen();
        seen.picks_ms.push(req.now_ms);
        let k = seen.picks_ms.len();
        Pick {
            worker: k % self.n,
            decision_id: Some(format!("d{k}")),
        }
    }
    fn outcome(&mut self, o: &Outcome<'_>) {
        self.seen().outcomes_ms.push(o.now_ms);
    }
    fn drain(&mut self, _worker: usize, _drained: bool, _now_ms: f64) {}
}

impl Remote for Probe {
    fn telemetry(&mut self, _batch: &[Snapshot], now_ms: f64) {
        self.seen().telemetry_ms.push(now_ms);
    }
}

/// A probe over `n` workers, remote (a service arm) or local (a
/// baseline), and what it will see.
fn probe(remote: bool, n: usize) -> (Arm, Arc<Mutex<Seen>>) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let p = Box::new(Probe {
        n,
        seen: seen.clone(),
    });
    let arm = if remote {
        Arm::Remote(p)
    } else {
        Arm::Local(p)
    };
    (arm, seen)
}

/// What a remote or local probe saw in a run on `sc` with seed 3.
fn run(sc: &Scenario, remote: bool) -> (super::RunRecord, Seen) {
    let (mut arm, seen) = probe(remote, 4);
    let rec = simulate(sc, &mut arm, 3);
    drop(arm);
    let seen = Arc::try_unwrap(seen).expect("the only owner");
    (rec, seen.into_inner().expect("not poisoned"))
}

/// Light load, fixed 2 ms GETs: nothing queues at a worker, so a latency is
/// 2 ms plus what the decision cost.
fn quiet() -> Scenario {
    let mut sc = Scenario {
        duration_ms: 5_000.0,
        load: 0.05,
        sigma: 0.0,
        put_fraction: 0.0,
        scorer_round_trip_us: 1_000.0,
        scorer_service_scale: 0.0,
        ..Scenario::default()
    };
    sc.workers.truncate(4);
    sc
}

#[test]
fn a_remote_pick_waits_for_the_call_and_a_local_one_does_not() {
    let sc = quiet();
    let (local, _) = run(&sc, false);
    let (remote, _) = run(&sc, true);
    assert!(local.decision_ms.is_empty());
    assert_eq!(remote.decision_ms.len() as u64, remote.attempts);
    // A free scorer: the call is the 1 ms round trip, counted in latency.
    for d in &remote.decision_ms {
        assert!((d - 1.0).abs() < 1e-9, "{d}");
    }
    // Every request reaches its worker exactly 1 ms later, so the same
    // requests queue behind each other and each latency is 1 ms longer.
    let sorted = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v
    };
    let (l, r) = (sorted(&local.latencies_ms), sorted(&remote.latencies_ms));
    assert_eq!(l.len(), r.len());
    assert!(
        (l[l.len() / 2] - 2.0).abs() < 1e-9,
        "local median {}",
        l[l.len() / 2]
    );
    for (l, r) in l.iter().zip(&r) {
        assert!((r - l - 1.0).abs() < 1e-9, "local {l}, remote {r}");
    }
}

#[test]
fn the_in_service_time_comes_from_the_calibration() {
    let mut sc = quiet();
    sc.scorer_round_trip_us = 0.0;
    sc.scorer_service_scale = 1.0;
    let (r, _) = run(&sc, true);
    let cal = crate::calibration::HttpScoreCalibration::shipped();
    let mean_ms = r.decision_ms.iter().sum::<f64>() / r.decision_ms.len() as f64;
    let want_ms = cal.mean_in_service_us() / 1_000.0;
    assert!(
        (mean_ms - want_ms).abs() < 0.15 * want_ms,
        "mean {mean_ms} ms vs calibration {want_ms} ms"
    );
}

#[test]
fn outcomes_reach_the_service_in_batches_after_the_flush_tick() {
    let mut sc = quiet();
    sc.feedback_flush_ms = 5.0;
    let (_, remote) = run(&sc, true);
    let (_, local) = run(&sc, false);
    assert_eq!(remote.outcomes_ms.len(), local.outcomes_ms.len());
    // Every batch lands half a round trip after a tick of the 5 ms clock.
    for t in &remote.outcomes_ms {
        let since_tick = (t - 0.5).rem_euclid(5.0);
        assert!(since_tick < 1e-6 || 5.0 - since_tick < 1e-6, "{t}");
    }
    // A baseline hears each outcome when it happens, off the ticks.
    let off_tick = local
        .outcomes_ms
        .iter()
        .filter(|t| ((*t - 0.5).rem_euclid(5.0)) > 1e-3)
        .count();
    assert!(off_tick > local.outcomes_ms.len() / 2);
    // And never later than the remote router does.
    for (l, r) in local.outcomes_ms.iter().zip(&remote.outcomes_ms) {
        assert!(l <= r, "{l} vs {r}");
    }
}

#[test]
fn telemetry_reaches_a_remote_scorer_after_the_transport_delay() {
    let mut sc = quiet();
    sc.telemetry_delay_ms = 0.0;
    let (_, at_once) = run(&sc, true);
    sc.telemetry_delay_ms = 7.0;
    let (_, delayed) = run(&sc, true);
    let (_, local) = run(&sc, false);
    assert_eq!(at_once.telemetry_ms, [0.0, 2_000.0, 4_000.0]);
    assert_eq!(delayed.telemetry_ms, [7.0, 2_007.0, 4_007.0]);
    // A baseline sees no telemetry.
    assert!(local.telemetry_ms.is_empty());
}

#[test]
fn calls_from_many_routers_queue_at_the_scorers_cores() {
    let mut sc = quiet();
    sc.routers = 8;
    sc.load = 0.7;
    sc.scorer_round_trip_us = 0.0;
    // Each call holds a core ~60× the calibrated time: one core is
    // overloaded at this rate, 64 are not.
    sc.scorer_service_scale = 60.0;
    let mean = |cores: usize| {
        let mut sc = sc.clone();
        sc.scorer_cores = cores;
        let (r, _) = run(&sc, true);
        r.decision_ms.iter().sum::<f64>() / r.decision_ms.len() as f64
    };
    let cal = crate::calibration::HttpScoreCalibration::shipped();
    let service_ms = 60.0 * cal.mean_in_service_us() / 1_000.0;
    let (many, one) = (mean(64), mean(1));
    assert!(
        (many - service_ms).abs() < 0.2 * service_ms,
        "{many} vs {service_ms}"
    );
    assert!(one > 3.0 * many, "one core {one} ms, 64 cores {many} ms");
}

#[test]
fn a_router_stops_waiting_for_a_saturated_scorer_and_picks_by_itself() {
    let mut sc = quiet();
    sc.routers = 4;
    sc.load = 0.7;
    sc.scorer_round_trip_us = 0.0;
    sc.scorer_cores = 1;
    // ~60× the calibrated time on one core: the queue grows without bound.
    sc.scorer_service_scale = 60.0;
    sc.scorer_timeout_ms = 20.0;
    let (r, _) = run(&sc, true);
    let requests = r.latencies_ms.len() as u64;
    assert!(
        r.scorer_errors > requests / 2,
        "{} of {requests}",
        r.scorer_errors
    );
    assert_eq!(r.fallbacks, r.scorer_errors);
    // No decision waits past the timeout, and a late answer sends nothing:
    // one attempt per request (no retries at this light per-worker load).
    let slowest = r.decision_ms.iter().copied().fold(0.0, f64::max);
    assert!(slowest <= 20.0 + 1e-9, "{slowest}");
    assert_eq!((r.retries, r.attempts), (0, requests));
    assert_eq!(r.failed, 0);
}

//! One request as the router serves it, on a fake clock: the pick's cost
//! and a late start show up in the latency; refusals and timeouts are
//! retried once on a fresh pick, error replies are not; the fallback is
//! P2C least-request over the router's own outstanding requests.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;

/// A clock that moves only when told to, µs.
struct FakeClock(AtomicU64);

impl FakeClock {
    fn at(ms: f64) -> Self {
        Self(AtomicU64::new((ms * 1000.0) as u64))
    }
    fn advance(&self, ms: f64) {
        self.0.fetch_add((ms * 1000.0) as u64, Ordering::SeqCst);
    }
}

impl Clock for FakeClock {
    fn now_ms(&self) -> f64 {
        self.0.load(Ordering::SeqCst) as f64 / 1000.0
    }
}

/// Picks the scripted workers in turn, each pick costing `pick_ms` on the
/// clock; records what it is told.
struct Scripted {
    clock: Arc<FakeClock>,
    pick_ms: f64,
    picks: Mutex<VecDeque<usize>>,
    told: Mutex<Vec<Done>>,
}

impl Route for Scripted {
    async fn pick(&self, _ask: &Ask<'_>, _router: &RouterState) -> Choice {
        self.clock.advance(self.pick_ms);
        let worker = self
            .picks
            .lock()
            .unwrap()
            .pop_front()
            .expect("a scripted pick");
        Choice {
            worker,
            decision: None,
            fallback: false,
        }
    }
    async fn report(&self, _feedback: &Feedback, done: Done) {
        self.told.lock().unwrap().push(done);
    }
}

/// Each send takes `op_ms` on the clock and ends as scripted (then `Ok`);
/// a worker in `hang` never answers.
struct FakeWorkers {
    clock: Arc<FakeClock>,
    op_ms: f64,
    ends: Mutex<VecDeque<Ended>>,
    hang: Option<usize>,
    /// What every reply says of the cache.
    cache_hit: Option<bool>,
}

impl Backend for FakeWorkers {
    async fn send(&self, worker: usize, _work: &Work) -> Reply {
        if self.hang == Some(worker) {
            std::future::pending::<()>().await;
        }
        self.clock.advance(self.op_ms);
        let ended = self.ends.lock().unwrap().pop_front().unwrap_or(Ended::Ok);
        Reply {
            ended,
            cache_hit: self.cache_hit,
        }
    }
}

fn ctx(
    clock: &Arc<FakeClock>,
    pick_ms: f64,
    picks: &[usize],
    op_ms: f64,
    ends: &[Ended],
    hang: Option<usize>,
    timeout: Duration,
) -> Ctx<Scripted, FakeWorkers> {
    Ctx {
        route: Scripted {
            clock: clock.clone(),
            pick_ms,
            picks: Mutex::new(picks.iter().copied().collect()),
            told: Mutex::new(Vec::new()),
        },
        backend: FakeWorkers {
            clock: clock.clone(),
            op_ms,
            ends: Mutex::new(ends.iter().copied().collect()),
            hang,
            cache_hit: None,
        },
        state: RouterState::new(3, 1),
        feedback: Feedback::PerOutcome,
        n: 3,
        timeout,
    }
}

fn work() -> Work {
    Work {
        op: Op::Get,
        key: "k".to_owned(),
        cost: 1.0,
    }
}

fn block_on<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime")
        .block_on(f)
}

#[test]
fn the_latency_runs_from_the_arrival_and_includes_the_pick() {
    // Arrived at 10 ms, started 2 ms late; the pick costs 7 ms, the Redis
    // operation 1 ms: the user waited 10 ms, the arm is told 1 ms.
    let clock = Arc::new(FakeClock::at(12.0));
    let c = ctx(&clock, 7.0, &[2], 1.0, &[], None, Duration::from_secs(1));
    let s = block_on(serve(&c, &*clock, 10.0, &work()));
    assert!(s.success);
    assert!((s.latency_ms - 10.0).abs() < 1e-9, "{s:?}");
    assert_eq!(s.attempts.len(), 1);
    assert!((s.attempts[0].pick_us - 7000.0).abs() < 1e-6, "{s:?}");
    assert!((s.attempts[0].op_ms - 1.0).abs() < 1e-9, "{s:?}");
    let told = c.route.told.lock().unwrap();
    assert_eq!(told.len(), 1);
    assert!((told[0].op_ms - 1.0).abs() < 1e-9 && told[0].success && told[0].worker == 2);
}

#[test]
fn a_refused_attempt_is_retried_once_on_a_fresh_pick() {
    let clock = Arc::new(FakeClock::at(0.0));
    let c = ctx(
        &clock,
        0.5,
        &[0, 1],
        1.0,
        &[Ended::Refused],
        None,
        Duration::from_secs(1),
    );
    let s = block_on(serve(&c, &*clock, 0.0, &work()));
    assert!(s.success, "{s:?}");
    let workers: Vec<_> = s.attempts.iter().map(|a| (a.worker, a.ended)).collect();
    assert_eq!(workers, vec![(0, Ended::Refused), (1, Ended::Ok)]);
    // Both picks and both operations count: 2 × (0.5 + 1) ms.
    assert!((s.latency_ms - 3.0).abs() < 1e-9, "{s:?}");
    let told: Vec<_> = c
        .route
        .told
        .lock()
        .unwrap()
        .iter()
        .map(|d| (d.worker, d.success))
        .collect();
    assert_eq!(told, vec![(0, false), (1, true)]);

    // A second refusal ends the request: one retry only.
    let c = ctx(
        &clock,
        0.5,
        &[0, 0, 0],
        1.0,
        &[Ended::Refused, Ended::Refused],
        None,
        Duration::from_secs(1),
    );
    let s = block_on(serve(&c, &*clock, clock.now_ms(), &work()));
    assert!(!s.success);
    assert_eq!(s.attempts.len(), MAX_ATTEMPTS);
}

#[test]
fn a_timed_out_attempt_is_retried_and_reported_with_the_timeout() {
    let clock = Arc::new(FakeClock::at(0.0));
    let c = ctx(
        &clock,
        0.0,
        &[0, 1],
        1.0,
        &[],
        Some(0),
        Duration::from_millis(5),
    );
    let s = block_on(serve(&c, &*clock, 0.0, &work()));
    assert!(s.success, "{s:?}");
    assert_eq!(s.attempts[0].ended, Ended::TimedOut);
    assert!((s.attempts[0].op_ms - 5.0).abs() < 1e-9, "{s:?}");
    assert_eq!((s.attempts[1].worker, s.attempts[1].ended), (1, Ended::Ok));
    // Nothing is left outstanding at either worker.
    assert_eq!((c.state.outstanding(0), c.state.outstanding(1)), (0, 0));
}

#[test]
fn an_error_reply_is_not_retried() {
    let clock = Arc::new(FakeClock::at(0.0));
    let c = ctx(
        &clock,
        0.0,
        &[0, 1],
        1.0,
        &[Ended::Error],
        None,
        Duration::from_secs(1),
    );
    let s = block_on(serve(&c, &*clock, 0.0, &work()));
    assert!(!s.success);
    assert_eq!(s.attempts.len(), 1);
}

#[test]
fn the_fallback_is_p2c_least_request_over_the_routers_own_outstanding() {
    let state = RouterState::new(2, 7);
    state.sent(0);
    // Of two distinct workers out of two, the idle one, every time.
    for _ in 0..20 {
        assert_eq!(state.fallback_pick(), 1);
    }
    state.answered(0);
    state.answered(0);
    assert_eq!(state.outstanding(0), 0, "never below zero");
    assert_eq!(state.fallbacks(), 20);
}

#[test]
fn the_arm_is_told_a_hit_or_miss_only_for_an_attempt_that_was_answered() {
    let clock = Arc::new(FakeClock::at(0.0));
    let mut c = ctx(
        &clock,
        0.0,
        &[0, 1],
        1.0,
        &[Ended::Refused],
        None,
        Duration::from_secs(1),
    );
    // A cache-aside GET that found nothing: a miss.
    c.backend.cache_hit = Some(false);
    let s = block_on(serve(&c, &*clock, 0.0, &work()));
    assert!(s.success, "{s:?}");
    let told: Vec<_> = c
        .route
        .told
        .lock()
        .unwrap()
        .iter()
        .map(|d| (d.worker, d.cache_hit))
        .collect();
    assert_eq!(told, vec![(0, None), (1, Some(false))]);

    let mut c = ctx(&clock, 0.0, &[2], 1.0, &[], None, Duration::from_secs(1));
    c.backend.cache_hit = Some(true);
    block_on(serve(&c, &*clock, clock.now_ms(), &work()));
    assert_eq!(c.route.told.lock().unwrap()[0].cache_hit, Some(true));
}

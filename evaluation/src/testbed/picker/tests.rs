//! A failed or late scorer call is counted and the request is served by
//! the router's own fallback; a baseline that also calls the scorer counts
//! the failure and routes by its own pick; every arm retries alike.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::testbed::request::{Backend, Ctx, Ended, Reply, RouterState, Wall, Work, serve};

/// Answers every request at once; refuses the first `refuse` sends.
struct Workers {
    refuse: usize,
    sent: AtomicUsize,
}

impl Workers {
    fn ok() -> Self {
        Self {
            refuse: 0,
            sent: AtomicUsize::new(0),
        }
    }
}

impl Backend for Workers {
    async fn send(&self, _worker: usize, _work: &Work) -> Reply {
        if self.sent.fetch_add(1, Ordering::SeqCst) < self.refuse {
            Ended::Refused.into()
        } else {
            Ended::Ok.into()
        }
    }
}

/// A base URL where nothing listens: the call is refused at once.
fn dead_scorer() -> String {
    let port = super::super::procs::free_port();
    format!("http://127.0.0.1:{port}")
}

fn service(base: String, timeout: Duration) -> Picker {
    Picker::Service {
        http: reqwest::Client::new(),
        base,
        policy: None,
        scorer_timeout: timeout,
    }
}

fn baseline(name: &str, n: usize, score_call: Option<(String, Duration)>) -> Picker {
    use rand::SeedableRng;
    let router = crate::arms::local(name, n).expect(name);
    Picker::Baseline {
        router: std::sync::Arc::new(Mutex::new((router, ChaCha8Rng::seed_from_u64(1)))),
        score_call: score_call.map(|(base, t)| (reqwest::Client::new(), base, t)),
    }
}

fn ctx<B: Backend>(route: Picker, backend: B) -> Ctx<Picker, B> {
    Ctx {
        route,
        backend,
        state: RouterState::new(4, 1),
        feedback: Feedback::PerOutcome,
        n: 4,
        timeout: Duration::from_secs(1),
    }
}

fn work() -> Work {
    Work {
        op: crate::router::Op::Put,
        key: "k".to_owned(),
        cost: 1.0,
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn a_failed_scorer_call_is_counted_and_the_request_served_by_the_fallback() {
    let c = ctx(
        service(dead_scorer(), Duration::from_secs(1)),
        Workers::ok(),
    );
    let clock = Wall(std::time::Instant::now());
    let s = rt().block_on(serve(&c, &clock, 0.0, &work()));
    assert!(s.success, "{s:?}");
    assert_eq!(s.attempts.len(), 1);
    assert!(s.attempts[0].fallback, "{s:?}");
    assert_eq!((c.state.scorer_errors(), c.state.fallbacks()), (1, 1));
}

#[test]
fn a_scorer_call_past_its_timeout_is_counted_too() {
    // Accepts the connection (the kernel's backlog) and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let base = format!("http://{}", silent.local_addr().expect("addr"));
    let c = ctx(service(base, Duration::from_millis(20)), Workers::ok());
    let clock = Wall(std::time::Instant::now());
    let s = rt().block_on(serve(&c, &clock, 0.0, &work()));
    assert!(s.success && s.attempts[0].fallback, "{s:?}");
    assert_eq!(c.state.scorer_errors(), 1);
    // The wait for the scorer is the user's: in the latency, bounded.
    assert!(s.attempts[0].pick_us >= 20_000.0, "{s:?}");
    assert!(s.latency_ms >= 20.0 && s.latency_ms < 1_000.0, "{s:?}");
}

#[test]
fn a_baseline_that_also_calls_the_scorer_counts_its_failure_and_routes_by_itself() {
    let p = baseline(
        "round-robin",
        4,
        Some((dead_scorer(), Duration::from_secs(1))),
    );
    let c = ctx(p, Workers::ok());
    let clock = Wall(std::time::Instant::now());
    let s = rt().block_on(serve(&c, &clock, 0.0, &work()));
    assert!(s.success && !s.attempts[0].fallback, "{s:?}");
    assert_eq!((c.state.scorer_errors(), c.state.fallbacks()), (1, 0));
}

#[test]
fn every_arm_retries_a_refused_attempt_once_on_a_fresh_pick() {
    let clock = Wall(std::time::Instant::now());
    for picker in [
        baseline("round-robin", 4, None),
        baseline("p2c-least-request", 4, None),
        service(dead_scorer(), Duration::from_secs(1)),
    ] {
        let c = ctx(
            picker,
            Workers {
                refuse: 1,
                sent: AtomicUsize::new(0),
            },
        );
        let s = rt().block_on(serve(&c, &clock, 0.0, &work()));
        let ends: Vec<_> = s.attempts.iter().map(|a| a.ended).collect();
        assert_eq!(ends, vec![Ended::Refused, Ended::Ok], "{s:?}");
        assert!(s.success);
    }
}

#[test]
fn a_load_against_a_dead_scorer_is_served_in_full_by_the_fallback() {
    let load = crate::testbed::loadgen::Load {
        rate: 500.0,
        duration: Duration::from_millis(100),
        timeout: Duration::from_secs(1),
        put_fraction: 0.1,
        keys: 10,
        seed: 3,
        max_outstanding: 1000,
        feedback_flush_ms: 2,
        cost_sigma: 0.5,
    };
    let picker = service(dead_scorer(), Duration::from_secs(1));
    let run = rt().block_on(crate::testbed::loadgen::run(
        picker,
        Workers::ok(),
        4,
        &load,
    ));
    assert!(!run.samples.is_empty());
    assert!(run.samples.iter().all(|s| s.success), "{:?}", run.samples);
    assert_eq!(run.dropped, 0);
    assert_eq!(run.scorer_errors, run.samples.len() as u64);
    assert_eq!(run.fallbacks, run.samples.len() as u64);
}

fn done(cache_hit: Option<bool>) -> Done {
    Done {
        worker: 1,
        decision: Some("0192f3a4-0000-7c1e-9d2b-5e6f7a8b9c0d".to_owned()),
        op_ms: 2.5,
        success: true,
        now_ms: 10.0,
        cache_hit,
    }
}

#[test]
fn a_service_arms_feedback_carries_the_hit_or_miss_when_known() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let picker = service(dead_scorer(), Duration::from_secs(1));
    let feedback = Feedback::Batched(tx);
    let rt = rt();
    for hit in [Some(true), Some(false), None] {
        rt.block_on(picker.report(&feedback, done(hit)));
        let body = rx.try_recv().expect("an outcome queued");
        assert_eq!(body["worker_id"], "w1", "{body}");
        match hit {
            Some(h) => assert_eq!(body["cache_hit"], h, "{body}"),
            None => assert!(body.get("cache_hit").is_none(), "{body}"),
        }
    }
}

/// A baseline that only records the cache hits it is told.
struct Told(std::sync::Arc<Mutex<Vec<Option<bool>>>>);

impl Router for Told {
    fn pick(&mut self, _req: &PickRequest<'_>, _rng: &mut ChaCha8Rng) -> crate::router::Pick {
        unreachable!("not picked here")
    }
    fn outcome(&mut self, o: &Outcome<'_>) {
        self.0.lock().expect("lock").push(o.cache_hit);
    }
    fn drain(&mut self, _worker: usize, _drained: bool, _now_ms: f64) {}
}

#[test]
fn a_baseline_learns_the_hit_or_miss_of_its_outcome() {
    use rand::SeedableRng;
    let told = std::sync::Arc::new(Mutex::new(Vec::new()));
    let picker = Picker::Baseline {
        router: std::sync::Arc::new(Mutex::new((
            Box::new(Told(told.clone())) as Box<dyn Router + Send>,
            ChaCha8Rng::seed_from_u64(1),
        ))),
        score_call: None,
    };
    let rt = rt();
    for hit in [Some(false), Some(true), None] {
        rt.block_on(picker.report(&Feedback::PerOutcome, done(hit)));
    }
    assert_eq!(*told.lock().expect("lock"), [Some(false), Some(true), None]);
}

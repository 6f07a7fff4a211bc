//! A compact pick allocates nothing on the heap in the steady state: once
//! the engine's buffers have grown to the pool, a rules-only
//! [`Engine::decide`] of 16 candidates read as [`Output::Pick`], its outcome reported, costs no
//! allocation. Its own test binary, as the counting allocator is global.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use scorer_core::scoring::{RequestContext, RequestType};
use scorer_core::telemetry::Snapshot;
use scorer_engine::Feedback;
use scorer_engine::api::ScoreRequest;
use scorer_engine::config::Config;
use scorer_engine::{DecideCall, Decided, Engine, NoObserver, Output};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use std::alloc::System;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const WALL: u64 = 1_750_000_000_000;
const N: usize = 16;

#[test]
fn a_compact_pick_allocates_nothing_once_warm() {
    let mut cfg = Config::default();
    cfg.scoring.warmup_ms = 0;
    let engine = Engine::new(cfg);
    let batch: Vec<Snapshot> = (0..N)
        .map(|i| {
            let mut s = Snapshot::new(format!("worker-{i}"), WALL);
            s.cpu_usage = (i % 10) as f64 / 10.0;
            s.rtt_ms_avg = 1.0 + (i % 5) as f64;
            s.rtt_ms_p99 = 5.0 + (i % 13) as f64 * 3.0;
            s.queue_depth = (i % 30) as u32;
            s.disk_io_await_ms = Some((i % 9) as f64 * 12.0);
            s
        })
        .collect();
    engine.ingest(&batch, 100_000, WALL).expect("valid batch");
    let mut req = ScoreRequest::new(
        "user:1:profile",
        (0..N).map(|i| format!("worker-{i}")).collect(),
    );
    req.policy = Some("p2c".into());
    let context = RequestContext {
        request_type: Some(RequestType::Get),
        timeout_ms: Some(100),
        ..RequestContext::default()
    };
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    // The decision ids and feedback bodies are the caller's, made up front.
    let calls = 2_000;
    let mut ids: Vec<String> = (0..calls).map(|i| format!("d-{i:08}")).collect();
    let mut feedback = Feedback {
        decision_id: String::with_capacity(16),
        worker_id: String::with_capacity(16),
        latency_ms: 1.0,
        success: true,
        cache_hit: None,
    };
    let mut allocations = Vec::with_capacity(calls);
    let now = 100_000;
    for _ in 0..calls {
        let id = ids.pop().expect("an id a call");
        feedback.decision_id.clone_from(&id);
        let region = Region::new(GLOBAL);
        let call = DecideCall::new(&req, &context, now)
            .expect("a valid call")
            .output(Output::Pick)
            .with_id(id);
        let picked = engine
            .decide(call, &mut rng, &mut NoObserver)
            .expect("a pick");
        let Decided::Pick(picked) = picked else {
            panic!("a pick answer")
        };
        let worker = picked.pick.expect("p2c picks");
        allocations.push(region.change().allocations);
        feedback.worker_id.clear();
        feedback.worker_id.push_str(worker);
        engine.feedback(&feedback, now + 1).expect("valid feedback");
    }
    let warm = &allocations[calls / 2..];
    assert_eq!(
        warm.iter().sum::<usize>(),
        0,
        "allocations per pick, first picks: {:?}, warm: {:?}",
        &allocations[..8],
        &warm[..8]
    );
}

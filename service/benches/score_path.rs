//! The whole in-process score path (rules, dynamics, features, pick) for 16,
//! 256 and 1024 candidates.
//!
//! `cargo bench -p service --bench score_path`

#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{BenchmarkId, Criterion, black_box, criterion_group, criterion_main};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use scorer_core::scoring::{RequestContext, RequestType};
use scorer_core::telemetry::Snapshot;
use scorer_engine::Engine;
use scorer_engine::api::ScoreRequest;
use scorer_engine::config::Config;

/// The allocator the service binary uses (`service/src/main.rs`): mimalloc
/// with the `mimalloc` feature, the system's without.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const WALL: u64 = 1_750_000_000_000;

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("score_path");
    for n in [16usize, 256, 1024] {
        let mut cfg = Config::default();
        cfg.scoring.warmup_ms = 0;
        let engine = Engine::new(cfg);
        let batch: Vec<Snapshot> = (0..n)
            .map(|i| {
                let mut s = Snapshot::new(format!("worker-{i}"), WALL);
                s.cpu_usage = (i % 10) as f64 / 10.0;
                s.rtt_ms_avg = 1.0 + (i % 7) as f64;
                s.rtt_ms_p99 = 5.0 + (i % 13) as f64 * 3.0;
                s.queue_depth = (i % 30) as u32;
                s.error_rate = (i % 4) as f64 / 200.0;
                s.cache_hit_rate = Some(0.5 + (i % 5) as f64 / 10.0);
                s.disk_io_await_ms = Some((i % 9) as f64 * 12.0);
                s
            })
            .collect();
        engine.ingest(&batch, 100_000, WALL).expect("valid");
        let mut req = ScoreRequest::new(
            "user:12345:profile",
            batch.iter().map(|s| s.worker_id.clone()).collect(),
        );
        req.policy = Some("softmax".into());
        let ctx = RequestContext {
            request_type: Some(RequestType::Get),
            timeout_ms: Some(50),
            ..RequestContext::default()
        };
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        group.bench_with_input(BenchmarkId::new("softmax", n), &req, |b, req| {
            b.iter(|| black_box(engine.score(req, &ctx, 101_000, String::new(), &mut rng)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! Model inference and the whole score path with a model (issue #6), as
//! per-call latency percentiles (p50 / p99) over many calls, all measured in
//! the same run:
//!
//! * `runner`: the service's path — tract plan with the project's
//!   `TreeEnsembleRegressor` op, one `SimpleState` reused per thread;
//! * `tract_fresh_state`: the same plan through `RunnableModel::run`, which
//!   builds a new state per call (what the reuse saves);
//! * `flat_evaluator`: `FlatEnsemble::eval_batch` alone (the op's kernel) + sigmoid;
//! * `score_path`: `Engine::score` for 16 and 256 candidates, rules only vs
//!   rules + model (+ pick).
//!
//! The model is `models/default` when present (run from the repository
//! root), else a synthetic ensemble of the same shape (50 trees, depth 6).
//!
//! `cargo bench -p service --bench model_path`

#![allow(missing_docs)]

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use service::Engine;
use service::api::ScoreRequest;
use service::clock::SystemClock;
use service::config::Config;
use service::model::export::{ExportOptions, ensemble_attributes};
use service::model::fixture::{random_model, random_row, write_model_dir};
use service::model::{FlatEnsemble, ModelHub, load_model_dir, run};
use service::scoring::{RequestContext, RequestType};
use service::telemetry::Snapshot;

const WALL: u64 = 1_750_000_000_000;

fn percentiles(mut ns: Vec<u64>) -> (f64, f64) {
    ns.sort_unstable();
    let at = |q: f64| ns[((ns.len() - 1) as f64 * q).round() as usize] as f64 / 1_000.0;
    (at(0.5), at(0.99))
}

fn time(iters: usize, mut f: impl FnMut()) -> (f64, f64) {
    for _ in 0..iters / 10 + 1 {
        f();
    }
    let mut ns = Vec::with_capacity(iters);
    for _ in 0..iters {
        let t = Instant::now();
        f();
        ns.push(t.elapsed().as_nanos() as u64);
    }
    percentiles(ns)
}

fn main() {
    let quick =
        std::env::args().any(|a| a == "--test") || !std::env::args().any(|a| a == "--bench");
    let iters = if quick { 200 } else { 100_000 };
    let tmp = std::env::temp_dir().join(format!("scorer-model-bench-{}", std::process::id()));
    let shipped = Path::new("../models/default");
    let (dir, source) = if shipped.join("card.json").exists() {
        (shipped.to_path_buf(), "models/default")
    } else {
        let m = random_model(50, 6, 42);
        write_model_dir(&tmp, &m, "bench", 20, 1).expect("fixture");
        (tmp.clone(), "synthetic 50 trees, depth 6")
    };
    let mut mcfg = Config::default().model;
    mcfg.dir = dir.clone();
    mcfg.budget_us = 1_000_000;
    let loaded = load_model_dir(&dir, &mcfg, WALL).expect("model loads");
    println!(
        "model: {source} ({} trees), {iters} calls per line; p50 / p99 in µs",
        loaded.card.num_trees
    );

    let plan = service::model::load_model(dir.join("model.onnx").as_path()).expect("plan");
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for n in [1usize, 16] {
        let rows: Vec<f32> = (0..n).flat_map(|_| random_row(&mut rng)).collect();
        let mut out = Vec::new();
        let (p50, p99) = time(iters, || {
            loaded.runner.predict(&rows, n, &mut out).expect("run")
        });
        println!("  runner            n={n:<3} p50 {p50:>8.2}  p99 {p99:>8.2}");
        let (p50, p99) = time(iters.min(20_000), || {
            run(&plan, &rows, n).expect("run");
        });
        println!("  tract_fresh_state n={n:<3} p50 {p50:>8.2}  p99 {p99:>8.2}");
    }
    if source != "models/default" {
        let m = random_model(50, 6, 42);
        let flat = FlatEnsemble::from_attributes(
            &ensemble_attributes(&m, &ExportOptions::default()).expect("attrs"),
        )
        .expect("flat");
        for n in [1usize, 16] {
            let rows: Vec<f32> = (0..n).flat_map(|_| random_row(&mut rng)).collect();
            let mut out = vec![0f32; n];
            let (p50, p99) = time(iters, || {
                flat.eval_batch(&rows, &mut out);
                for p in &mut out {
                    *p = 1.0 / (1.0 + (-*p).exp());
                }
            });
            println!("  flat_evaluator    n={n:<3} p50 {p50:>8.2}  p99 {p99:>8.2}");
        }
    }

    for n in [16usize, 256] {
        for with_model in [false, true] {
            let mut cfg = Config::default();
            cfg.scoring.warmup_ms = 0;
            cfg.inflight.per_pick = 0.0;
            cfg.model = mcfg.clone();
            let mut engine = Engine::new(cfg.clone());
            if with_model {
                engine = engine.with_models(Arc::new(ModelHub::load(
                    &cfg.model,
                    Arc::new(SystemClock::new()),
                )));
            }
            let batch: Vec<Snapshot> = (0..n)
                .map(|i| {
                    let mut s = Snapshot::new(format!("worker-{i}"), WALL);
                    s.cpu_usage = (i % 10) as f64 / 10.0;
                    s.rtt_ms_p99 = 5.0 + (i % 13) as f64 * 3.0;
                    s.queue_depth = (i % 30) as u32;
                    s.disk_io_await_ms = Some((i % 9) as f64 * 12.0);
                    s
                })
                .collect();
            engine.ingest(&batch, 100_000, WALL).expect("valid");
            let mut req = ScoreRequest::new(
                "order:12345",
                batch.iter().map(|s| s.worker_id.clone()).collect(),
            );
            req.policy = Some("softmax".into());
            let ctx = RequestContext {
                request_type: Some(RequestType::Put),
                timeout_ms: Some(30),
                ..RequestContext::default()
            };
            let mut rng = ChaCha8Rng::seed_from_u64(1);
            let r = engine
                .score(&req, &ctx, 101_000, String::new(), &mut rng)
                .expect("score");
            assert_eq!(r.model.used, with_model, "{:?}", r.model);
            let (p50, p99) = time(iters.min(if n > 16 { 10_000 } else { iters }), || {
                let _ = engine.score(&req, &ctx, 101_000, String::new(), &mut rng);
            });
            let label = if with_model {
                "rules+model"
            } else {
                "rules only "
            };
            println!("  score_path {label} n={n:<3} p50 {p50:>8.2}  p99 {p99:>8.2}");
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

//! Model inference and the whole score path with a model (issue #6), as
//! per-call latency percentiles (p50 / p99) over many calls, all measured in
//! the same run:
//!
//! * `runner`: the service's path — tract plan with the project's
//!   `TreeEnsembleRegressor` op, one `SimpleState` reused per thread;
//! * `tract_fresh_state`: the same plan through `RunnableModel::run`, which
//!   builds a new state per call (what the reuse saves);
//! * `complete_layout` / `pointer_walk`: `FlatEnsemble::eval_batch` alone
//!   (the op's kernel) + sigmoid, with the complete-tree layout and without;
//! * `control`: the evaluator alone, [`CONTROL_REPEAT`] times per call, so
//!   about as long as the whole 16-candidate path but pure computation;
//! * `score_path`: `Engine::score` for 16 and 256 candidates, rules only vs
//!   rules + model (+ pick).
//!
//! The model is `models/default` when present (run from the repository
//! root), else a synthetic ensemble of the same shape (50 trees, depth 6).
//!
//! This machine is shared and noisy, so the cases run interleaved: each of
//! [`ROUNDS`] rounds times every case once (a fixed number of calls), and
//! each line reports the median over rounds of the per-round p50 and p99,
//! plus the spread of the per-round p99.
//!
//! Before and after the cases it probes the host for stalls (gaps between
//! back-to-back clock reads, [`host_stalls`]): on a VM a periodic stall of
//! tens of µs lands in a fraction `p50 / interval` of the calls, and once
//! that fraction passes 1% it sets the p99. Each line prints that fraction.
//!
//! The bench binary uses the service's allocator (the system's; mimalloc
//! with `--features mimalloc`).
//!
//! `cargo bench -p service --bench model_path`

#![allow(missing_docs)]

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use scorer_core::clock::SystemClock;
use scorer_core::features::FEATURE_COUNT;
use scorer_core::scoring::{RequestContext, RequestType};
use scorer_core::telemetry::Snapshot;
use scorer_engine::Engine;
use scorer_engine::api::ScoreRequest;
use scorer_engine::config::Config;
use scorer_model::fixture::{random_model, random_row, write_model_dir};
use scorer_model::op::attributes_from_node;
use scorer_model::{FlatEnsemble, ModelHub, load_model_dir, run};

/// The allocator the service binary uses (`service/src/main.rs`): mimalloc
/// with the `mimalloc` feature, the system's without.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const WALL: u64 = 1_750_000_000_000;
/// Evaluator calls in the control case (16 rows each): about the length of
/// the whole 16-candidate score path.
const CONTROL_REPEAT: usize = 3;
/// Interleaved rounds per case.
const ROUNDS: usize = 7;

fn percentiles(mut ns: Vec<u64>) -> (f64, f64) {
    ns.sort_unstable();
    let at = |q: f64| ns[((ns.len() - 1) as f64 * q).round() as usize] as f64 / 1_000.0;
    (at(0.5), at(0.99))
}

fn time(iters: usize, f: &mut dyn FnMut()) -> (f64, f64) {
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

/// A gap between two back-to-back clock reads at least this long is a stall.
const STALL_MIN_NS: u64 = 2_000;
/// How long [`host_stalls`] watches the clock.
const STALL_PROBE_MS: u64 = 1_000;

/// Host stalls seen by a thread that only reads the clock for
/// [`STALL_PROBE_MS`]: mean interval between stalls (µs; `f64::INFINITY`
/// when none), and the median and p90 stall length (µs).
fn host_stalls() -> (f64, f64, f64) {
    let start = Instant::now();
    let mut last = start;
    let mut stalls = Vec::new();
    while start.elapsed().as_millis() < u128::from(STALL_PROBE_MS) {
        let t = Instant::now();
        let gap = t.duration_since(last).as_nanos() as u64;
        if gap >= STALL_MIN_NS {
            stalls.push(gap);
        }
        last = t;
    }
    if stalls.is_empty() {
        return (f64::INFINITY, 0.0, 0.0);
    }
    stalls.sort_unstable();
    let at = |q: f64| stalls[((stalls.len() - 1) as f64 * q).round() as usize] as f64 / 1_000.0;
    let interval_us = (STALL_PROBE_MS * 1_000) as f64 / stalls.len() as f64;
    (interval_us, at(0.5), at(0.9))
}

fn print_stalls(when: &str) -> f64 {
    let (interval_us, p50, p90) = host_stalls();
    println!(
        "host stalls ({when}): one every {interval_us:.0} µs, lasting p50 {p50:.1} µs / p90 {p90:.1} µs"
    );
    interval_us
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A named case: calls per round and the call.
type Case<'a> = (String, usize, Box<dyn FnMut() + 'a>);

/// When set, only the cases whose name contains its value run (for `perf record`).
const ONLY_ENV: &str = "MODEL_PATH_ONLY";

fn run_cases(cases: &mut Vec<Case<'_>>, stall_interval_us: f64) {
    if let Ok(only) = std::env::var(ONLY_ENV) {
        cases.retain(|(name, _, _)| name.contains(&only));
    }
    let mut results: Vec<Vec<(f64, f64)>> = vec![Vec::new(); cases.len()];
    for _ in 0..ROUNDS {
        for (r, (_, iters, f)) in results.iter_mut().zip(cases.iter_mut()) {
            r.push(time(*iters, f.as_mut()));
        }
    }
    for ((name, iters, _), r) in cases.iter().zip(results) {
        let p99s: Vec<f64> = r.iter().map(|x| x.1).collect();
        let (lo, hi) = p99s
            .iter()
            .fold((f64::MAX, 0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        let p50 = median(r.iter().map(|x| x.0).collect());
        println!(
            "  {name:<30} p50 {p50:>8.2}  p99 {:>8.2}  (p99 over rounds {lo:.2}..{hi:.2}; {iters} calls × {ROUNDS}; {:.2}% of calls meet a stall)",
            median(p99s),
            100.0 * p50 / stall_interval_us,
        );
    }
}

fn main() {
    let quick =
        std::env::args().any(|a| a == "--test") || !std::env::args().any(|a| a == "--bench");
    let iters = if quick { 30 } else { 20_000 };
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
        "model: {source} ({} trees); per-call p50 / p99 in µs, median of {ROUNDS} interleaved rounds",
        loaded.card.num_trees
    );

    let plan = scorer_model::load_model(dir.join("model.onnx").as_path()).expect("plan");
    let flat = {
        use prost::Message;
        let bytes = std::fs::read(dir.join("model.onnx")).expect("model.onnx");
        let proto = tract_onnx::pb::ModelProto::decode(bytes.as_slice()).expect("onnx");
        let node = proto
            .graph
            .as_ref()
            .and_then(|g| {
                g.node
                    .iter()
                    .find(|n| n.op_type == scorer_model::op::OP_TYPE)
            })
            .expect("ensemble node");
        FlatEnsemble::from_attributes(&attributes_from_node(node).expect("attributes"))
            .expect("flat")
    };
    assert!(flat.uses_complete_layout());
    let pointer = flat.clone().without_complete_layout();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let rows: Vec<Vec<f32>> = [1usize, 16]
        .iter()
        .map(|&n| (0..n).flat_map(|_| random_row(&mut rng)).collect())
        .collect();

    let mut cases: Vec<Case<'_>> = Vec::new();
    for rows in &rows {
        let n = rows.len() / FEATURE_COUNT;
        let mut out = Vec::new();
        let loaded = &loaded;
        cases.push((
            format!("runner (service path) n={n}"),
            iters,
            Box::new(move || loaded.runner.predict(rows, n, &mut out).expect("run")),
        ));
        let plan = &plan;
        cases.push((
            format!("tract, new state/call n={n}"),
            iters / 4,
            Box::new(move || {
                run(plan, rows, n).expect("run");
            }),
        ));
        for (name, e) in [("complete layout", &flat), ("pointer walk", &pointer)] {
            let mut out = vec![0f32; n];
            cases.push((
                format!("{name} n={n}"),
                iters,
                Box::new(move || {
                    e.eval_batch(std::hint::black_box(rows), &mut out);
                    for p in &mut out {
                        *p = 1.0 / (1.0 + (-*p).exp());
                    }
                }),
            ));
        }
    }
    // Control: pure computation (no allocation, lock or clock read) about as
    // long as the whole 16-candidate path, to tell the host's tail from ours.
    if let Some(rows) = rows.last() {
        let mut out = vec![0f32; rows.len() / FEATURE_COUNT];
        let flat = &flat;
        cases.push((
            format!("control: layout ×{CONTROL_REPEAT} n={}", out.len()),
            iters,
            Box::new(move || {
                for _ in 0..CONTROL_REPEAT {
                    flat.eval_batch(std::hint::black_box(rows), &mut out);
                }
            }),
        ));
    }

    for n in [16usize, 256] {
        for with_model in [false, true] {
            let mut cfg = Config::default();
            cfg.scoring.warmup_ms = 0;
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
            let label = if with_model {
                "rules+model"
            } else {
                "rules only"
            };
            cases.push((
                format!("score path {label} n={n}"),
                if n > 16 { iters / 10 } else { iters },
                Box::new(move || {
                    let _ = engine.score(&req, &ctx, 101_000, String::new(), &mut rng);
                }),
            ));
        }
    }
    let interval_us = print_stalls("before");
    run_cases(&mut cases, interval_us);
    print_stalls("after");
    let _ = std::fs::remove_dir_all(&tmp);
}

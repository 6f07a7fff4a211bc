//! Trainer performance, in one run:
//!
//! 1. **Pipeline**: `trainer synth` of `TRAINER_BENCH_ROWS` decisions
//!    (default 1,000,000; 4 candidates each, so 4 M decision-log rows), then
//!    `trainer train` on them with the default flags (load + join + label +
//!    time split + LightGBM 50 trees depth 6 + ONNX export + parity on the
//!    validation split and golden rows + files), then `trainer validate`
//!    on the same logs. Timed once (wall clock), printed per step.
//! 2. **Inference** of the committed `models/default` (criterion): one row
//!    and 16 rows through the service's ONNX path in tract
//!    (`scorer_model::op::run`), through the `FlatEnsemble` directly
//!    (margin + sigmoid), and through LightGBM's `predict_single_row_fast`
//!    (16 rows = 16 calls) and `predict` (16-row batch).
//!
//! `cargo bench -p trainer --bench train_infer` (release). Under
//! `cargo test --all-targets` (no `--bench` flag) the pipeline runs on
//! 2,000 decisions and each inference benchmark runs once;
//! `TRAINER_BENCH_ROWS=0` skips the pipeline.

#![allow(missing_docs)] // criterion macros generate undocumented items

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

use criterion::Criterion;
use lightgbm3::Booster;
use scorer_core::features::FEATURE_COUNT;
use scorer_model::FlatEnsemble;
use scorer_model::export::{ExportOptions, ensemble_attributes};
use trainer::dataset::TargetRule;
use trainer::pipeline::{TrainOptions, run_train};
use trainer::progress::Progress;
use trainer::synth::{SynthConfig, write_logs};
use trainer::train::TrainParams;
use trainer::validate::run_validate;

/// Criterion's rule: `--bench` without `--test` measures; anything else is a smoke test.
fn bench_mode() -> bool {
    std::env::args().any(|a| a == "--bench") && !std::env::args().any(|a| a == "--test")
}

fn pipeline(rows: usize) {
    let dir = std::env::temp_dir().join(format!("trainer-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let logs = dir.join("logs");
    let t = Instant::now();
    let cfg = SynthConfig {
        decisions: rows,
        seed: 1,
        decisions_per_file: 250_000,
        ..SynthConfig::default()
    };
    let report = write_logs(&cfg, &logs, |_| {}).expect("synth");
    let synth_s = t.elapsed().as_secs_f64();

    let opts = TrainOptions {
        logs: vec![logs.clone()],
        out: dir.join("models/bench"),
        params: TrainParams::default(),
        target: TargetRule::default(),
        valid_fraction: 0.2,
        memory_budget_bytes: trainer::budget::DEFAULT_MEMORY_BUDGET_BYTES,
        sample: None,
        network: None,
        spill_dir: None,
    };
    let t = Instant::now();
    let s = run_train(&opts, Progress::hidden()).expect("train");
    let train_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let v = run_validate(&opts.out, &[logs], Progress::hidden()).expect("validate");
    let validate_s = t.elapsed().as_secs_f64();
    let tm = s.timings;
    println!(
        "pipeline: {} decisions ({} decision-log rows, {} outcome rows): synth {synth_s:.1} s",
        report.decisions, report.decision_rows, report.outcome_rows
    );
    println!(
        "pipeline: trainer train {train_s:.1} s = load+join+label {:.1} s, LightGBM {} trees on {} rows {:.1} s, export+tract load {:.2} s, parity+golden+metrics on {} rows {:.1} s (+ writing files)",
        tm.load_s,
        opts.params.num_trees,
        s.train_rows,
        tm.train_s,
        tm.export_s,
        s.valid_rows,
        tm.validate_s
    );
    let max_dp = s.parity.iter().map(|p| p.max_abs_diff).fold(0.0, f64::max);
    println!(
        "pipeline: validation MAE(log) {:.4} (rules {:.4}), max |dp| {max_dp:e}",
        s.metrics.model.mae_log, s.metrics.rules.mae_log
    );
    println!(
        "pipeline: trainer validate (golden + {} rows with a target) {validate_s:.1} s",
        v.parity.last().map_or(0, |p| p.rows)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn inference(c: &mut Criterion) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/default");
    let golden = scorer_model::read_golden(&dir, FEATURE_COUNT).expect("golden");
    let rows: Vec<f32> = golden
        .rows
        .iter()
        .filter(|r| r.kind == "validation" || r.kind.starts_with("split_boundary"))
        .take(16)
        .flat_map(|r| r.values())
        .collect();
    assert_eq!(rows.len(), 16 * FEATURE_COUNT);
    let one = &rows[..FEATURE_COUNT];

    let plan = scorer_model::load_model(dir.join("model.onnx").as_path()).expect("onnx");
    let text = std::fs::read_to_string(dir.join("model.txt")).expect("model.txt");
    let model = trainer::parse_model_text(&text).expect("parse");
    let attrs = ensemble_attributes(&model, &ExportOptions::default()).expect("attrs");
    let ens = FlatEnsemble::from_attributes(&attrs).expect("ensemble");
    let mut booster = Booster::from_string(&text).expect("booster");
    booster
        .single_row_fast_init::<f32>(Some(&serde_json::json!({"num_threads": 1})))
        .expect("fast init");

    let mut g = c.benchmark_group("infer_default_model");
    g.bench_function("tract_run_1_row", |b| {
        b.iter(|| scorer_model::run(&plan, black_box(one), 1).expect("run"))
    });
    g.bench_function("tract_run_16_rows", |b| {
        b.iter(|| scorer_model::run(&plan, black_box(&rows), 16).expect("run"))
    });
    g.bench_function("flat_ensemble_1_row", |b| {
        let mut out = [0f32; 1];
        b.iter(|| {
            ens.eval_batch(black_box(one), &mut out);
            1.0 / (1.0 + (-out[0]).exp())
        })
    });
    g.bench_function("flat_ensemble_16_rows", |b| {
        let mut out = [0f32; 16];
        b.iter(|| {
            ens.eval_batch(black_box(&rows), &mut out);
            for v in &mut out {
                *v = 1.0 / (1.0 + (-*v).exp());
            }
            out[15]
        })
    });
    g.bench_function("lightgbm_single_row_fast_1_row", |b| {
        b.iter(|| {
            booster
                .predict_single_row_fast(black_box(one))
                .expect("fast")
        })
    });
    g.bench_function("lightgbm_single_row_fast_16_rows", |b| {
        b.iter(|| {
            let mut s = 0.0;
            for r in rows.chunks(FEATURE_COUNT) {
                s += booster.predict_single_row_fast(black_box(r)).expect("fast")[0];
            }
            s
        })
    });
    g.bench_function("lightgbm_predict_16_rows", |b| {
        b.iter(|| {
            booster
                .predict(black_box(&rows), FEATURE_COUNT as i32, true)
                .expect("predict")
        })
    });
    g.finish();
}

fn main() {
    let rows = if bench_mode() {
        std::env::var("TRAINER_BENCH_ROWS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1_000_000)
    } else {
        2_000
    };
    if rows > 0 {
        pipeline(rows);
    }
    let mut c = Criterion::default().configure_from_args();
    inference(&mut c);
    c.final_summary();
}

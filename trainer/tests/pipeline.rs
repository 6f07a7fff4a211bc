//! synth → train → validate → compare through the library, on small data
//! (seconds): files and card contents, parity, the hidden PUT × disk effect
//! learned as a residual of ln(latency / E),
//! determinism, and clear errors for bad inputs.

mod common;

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::Schema;
use common::{TempDir, synth};
use parquet::arrow::ArrowWriter;
use scorer_log::{META_FEATURE_SCHEMA_VERSION, decisions_batch};
use scorer_model::card::{CARD_FILE, GOLDEN_FILE, ONNX_FILE, PARITY_TOLERANCE, TEXT_FILE};
use scorer_model::{read_card, read_golden};
use trainer::TrainerError;
use trainer::compare::{CompareOptions, run_compare};
use trainer::dataset::{TargetRule, load_logs};
use trainer::pipeline::{TrainOptions, run_train};
use trainer::progress::Progress;
use trainer::synth::Synth;
use trainer::synth::SynthConfig;
use trainer::train::TrainParams;
use trainer::validate::run_validate;

fn opts(logs: &std::path::Path, out: std::path::PathBuf, seed: u64) -> TrainOptions {
    TrainOptions {
        logs: vec![logs.to_path_buf()],
        out,
        params: TrainParams {
            num_trees: 30,
            seed,
            ..TrainParams::default()
        },
        target: TargetRule::default(),
        valid_fraction: 0.2,
        memory_budget_bytes: trainer::budget::DEFAULT_MEMORY_BUDGET_BYTES,
        sample: None,
        network: None,
        spill_dir: None,
    }
}

#[test]
fn synth_train_validate_compare_end_to_end() {
    let tmp = TempDir::new("e2e");
    let logs = tmp.join("logs");
    synth(&logs, 6_000, 11);

    let s = run_train(&opts(&logs, tmp.join("models/cand"), 5), Progress::hidden()).unwrap();
    let dir = tmp.join("models/cand");
    for f in [ONNX_FILE, TEXT_FILE, CARD_FILE, GOLDEN_FILE] {
        assert!(dir.join(f).is_file(), "{f}");
    }
    // Target counts add up: every picked row with an outcome has a target,
    // failures included (censored), none dropped between thresholds.
    let c = s.counts;
    assert_eq!(c.decisions, 6_000);
    assert_eq!(c.picked_rows, 6_000);
    assert_eq!(c.missing_outcome + c.rows, c.picked_rows);
    assert!(c.failures > 50 && c.slow > 200, "{c:?}");
    assert_eq!(s.train_rows + s.valid_rows, c.rows);

    // Card.
    let card = read_card(&dir).unwrap();
    let onnx = std::fs::read(dir.join(ONNX_FILE)).unwrap();
    assert_eq!(
        card.model_version,
        trainer::card::model_version("cand", &onnx)
    );
    assert_eq!(card.num_trees, 30);
    assert_eq!(card.n_features, 42);
    assert_eq!(
        card.feature_schema_hash,
        scorer_core::features::schema_hash()
    );
    assert_eq!(card.details["target"]["rule"]["failure_penalty_ms"], 1000.0);
    assert!(
        card.details["target"]["distribution"]["std"]
            .as_f64()
            .unwrap()
            > 0.1
    );
    assert_eq!(card.output, scorer_model::card::MODEL_OUTPUT);
    assert_eq!(card.details["seed"], 5);
    assert_eq!(
        card.details["training_data"]["decision_rows"], 24_000,
        "6000 decisions x 4 candidates"
    );
    assert!(card.details["dataset_params_note"].is_string());
    assert_eq!(card.details["lightgbm_params"]["deterministic"], true);
    // `GET /v1/model` shows `details.metrics` and `details.parity`.
    assert!(card.details["metrics"]["model"]["r2"].as_f64().unwrap() > 0.2);
    assert_eq!(card.details["parity"][0]["set"], "validation");
    assert_eq!(card.details["training_data"]["shadow_rows_dropped"], 0);

    // Parity on validation and golden rows, within the bar.
    assert_eq!(s.parity.len(), 2);
    for p in &s.parity {
        assert!(p.rows > 0 && p.max_abs_diff <= PARITY_TOLERANCE, "{p:?}");
    }
    // Golden rows cover the special values and split boundaries.
    let golden = read_golden(&dir, 42).unwrap();
    let kinds: Vec<&str> = golden.rows.iter().map(|r| r.kind.as_str()).collect();
    for k in [
        "validation",
        "all_nan",
        "all_zero",
        "all_negative_zero",
        "all_inf",
    ] {
        assert!(kinds.contains(&k), "{k} missing from {kinds:?}");
    }
    let boundary = kinds
        .iter()
        .filter(|k| k.starts_with("split_boundary"))
        .count();
    assert!(boundary >= 10, "{boundary} boundary rows");
    assert!((24..=60).contains(&golden.rows.len()));
    let all_neg_zero = golden
        .rows
        .iter()
        .find(|r| r.kind == "all_negative_zero")
        .unwrap();
    assert!(
        all_neg_zero
            .values()
            .iter()
            .all(|v| v.to_bits() == (-0.0f32).to_bits())
    );

    // The model learns what the rules' routing cost misses (the PUT ×
    // disk effect among others): on the (later) validation split, and on
    // its PUT rows, its log error is well below the rules'.
    let (m, r) = (s.metrics.model, s.metrics.rules);
    let (mp, rp) = (s.metrics.model_put.unwrap(), s.metrics.rules_put.unwrap());
    eprintln!("validation: model {m:?} rules {r:?}; PUT: model {mp:?} rules {rp:?}");
    assert!(m.mae_log < 0.8 * r.mae_log, "model {m:?} vs rules {r:?}");
    assert!(
        mp.mae_log < 0.8 * rp.mae_log,
        "PUT: model {mp:?} vs rules {rp:?}"
    );
    assert!(m.r2.unwrap() > 0.2);
    assert!(
        (0.3..0.7).contains(&m.share_above),
        "an L2 model is about a median: {m:?}"
    );

    // validate on fresh logs from another seed (later, unseen traffic).
    let logs2 = tmp.join("logs2");
    synth(&logs2, 3_000, 12);
    let v = run_validate(&dir, std::slice::from_ref(&logs2), Progress::hidden()).unwrap();
    assert_eq!(v.parity.len(), 3);
    assert!(v.parity.iter().all(|p| p.max_abs_diff <= PARITY_TOLERANCE));
    assert_eq!(v.target, Some(TargetRule::default()), "the card's rule");
    let m = v.metrics.unwrap();
    assert!(m.model.mae_log < 0.8 * m.rules.mae_log, "{m:?}");

    // compare against a weaker model.
    let mut weak = opts(&logs, tmp.join("models/weak"), 6);
    weak.params.num_trees = 3;
    weak.params.max_depth = 2;
    run_train(&weak, Progress::hidden()).unwrap();
    let out = tmp.join("compare.json");
    let r = run_compare(
        &dir,
        &tmp.join("models/weak"),
        &[logs2],
        &TargetRule::default(),
        &CompareOptions::default(),
        &out,
        Progress::hidden(),
    )
    .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    for k in [
        "top_pick_agreement",
        "mean_spearman",
        "mean_abs_action_diff",
        "decisions",
        "logged_latency_ms",
        "logged_slow",
        "dr_latency_diff_ms",
        "dr_latency_diff_ci_ms",
        "verdict",
    ] {
        assert!(json.get(k).is_some(), "{k} missing");
    }
    for side in ["a", "b"] {
        for k in [
            "ips_latency_ms",
            "snips_latency_ms",
            "dr_latency_ms",
            "ips_slow",
            "snips_slow",
            "dr_slow",
            "ess",
            "matches",
            "weak",
        ] {
            assert!(json[side]["off_policy"].get(k).is_some(), "{side}.{k}");
        }
    }
    assert_eq!(r.decisions, 3_000);
    assert!((0.0..=1.0).contains(&r.top_pick_agreement));
    assert!(
        r.top_pick_agreement < 1.0,
        "different models disagree sometimes"
    );
    assert!(r.mean_abs_action_diff > 0.0);
    let op = r.a.off_policy;
    assert!(op.matches > 0 && op.ess > 10.0 && op.ess <= op.matches as f64 + 1e-9);
    assert!((0.0..=1.0).contains(&op.snips_slow.unwrap()));
    assert!(op.snips_latency_ms.unwrap() > 0.0 && op.dr_latency_ms.unwrap() > 0.0);
    // Comparing a model with itself: full agreement, no action difference.
    let same = run_compare(
        &dir,
        &dir,
        &[tmp.join("logs")],
        &TargetRule::default(),
        &CompareOptions::default(),
        &tmp.join("self.json"),
        Progress::hidden(),
    )
    .unwrap();
    assert_eq!(same.top_pick_agreement, 1.0);
    assert_eq!(same.mean_abs_action_diff, 0.0);
    assert_eq!(same.a.off_policy, same.b.off_policy);
}

#[test]
fn training_is_deterministic() {
    let tmp = TempDir::new("det");
    let logs = tmp.join("logs");
    synth(&logs, 2_000, 3);
    // Synthetic logs are a pure function of the seed: byte-identical files.
    let logs_again = tmp.join("logs_again");
    synth(&logs_again, 2_000, 3);
    let files = |d: &std::path::Path| {
        let mut v = scorer_log::reader::list_files(d, scorer_log::LogKind::Decisions).unwrap();
        v.extend(scorer_log::reader::list_files(d, scorer_log::LogKind::Outcomes).unwrap());
        v.iter()
            .map(|p| std::fs::read(p).unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(files(&logs), files(&logs_again));

    let a = tmp.join("a");
    let b = tmp.join("b");
    run_train(&opts(&logs, a.clone(), 7), Progress::hidden()).unwrap();
    run_train(&opts(&logs, b.clone(), 7), Progress::hidden()).unwrap();
    for f in [TEXT_FILE, ONNX_FILE, GOLDEN_FILE] {
        assert_eq!(
            std::fs::read(a.join(f)).unwrap(),
            std::fs::read(b.join(f)).unwrap(),
            "{f} differs between two identical trainings"
        );
    }
    // Two threads: the same trees (model.onnx identical; model.txt differs
    // only in its `[num_threads: 2]` parameter line).
    let t2 = tmp.join("t2");
    let mut o2 = opts(&logs, t2.clone(), 7);
    o2.params.threads = 2;
    run_train(&o2, Progress::hidden()).unwrap();
    assert_eq!(
        std::fs::read(a.join(ONNX_FILE)).unwrap(),
        std::fs::read(t2.join(ONNX_FILE)).unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(a.join(TEXT_FILE))
            .unwrap()
            .replace("[num_threads: 1]", "[num_threads: 2]"),
        std::fs::read_to_string(t2.join(TEXT_FILE)).unwrap()
    );
    // Another seed of the generator gives another model.
    let c = tmp.join("c");
    run_train(&opts(&logs_again, c.clone(), 8), Progress::hidden()).unwrap();
    assert_ne!(
        std::fs::read(a.join(TEXT_FILE)).unwrap(),
        std::fs::read(c.join(TEXT_FILE)).unwrap()
    );
}

#[test]
fn bad_inputs_give_clear_errors() {
    let tmp = TempDir::new("bad");
    // Missing directory.
    let err = run_train(
        &opts(&tmp.join("nope"), tmp.join("m"), 1),
        Progress::hidden(),
    )
    .unwrap_err();
    assert!(matches!(err, TrainerError::MissingDir(_)), "{err}");
    assert!(err.to_string().contains("nope"));

    // Empty log directory.
    let empty = tmp.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let err = run_train(&opts(&empty, tmp.join("m"), 1), Progress::hidden()).unwrap_err();
    assert!(matches!(err, TrainerError::NoData(_)), "{err}");
    assert!(err.to_string().contains("no decision rows"), "{err}");
    assert!(!tmp.join("m").exists(), "nothing written on failure");

    // A decisions file of another feature schema version.
    let old = tmp.join("old/dt=2026-11-01");
    std::fs::create_dir_all(&old).unwrap();
    let mut s = Synth::new(SynthConfig {
        decisions: 10,
        ..SynthConfig::default()
    })
    .unwrap();
    let recs: Vec<_> = std::iter::from_fn(|| s.next_decision().map(|(d, _)| d)).collect();
    let batch = decisions_batch(&recs).unwrap();
    let mut meta = batch.schema().metadata().clone();
    meta.insert(META_FEATURE_SCHEMA_VERSION.to_string(), "0".to_string());
    let schema = Arc::new(Schema::new_with_metadata(
        batch.schema().fields().clone(),
        meta,
    ));
    let batch = RecordBatch::try_new(schema.clone(), batch.columns().to_vec()).unwrap();
    let path = old.join("decisions-20261101T000000000Z-000001.parquet");
    let mut w = ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let err = load_logs(&[tmp.join("old")], |_, _, _| {}).unwrap_err();
    assert!(matches!(err, TrainerError::SchemaMismatch { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("feature_schema_version") && msg.contains("decisions-2026"),
        "{msg}"
    );

    // A corrupt file is named.
    let bad = tmp.join("corrupt/dt=2026-11-01");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(
        bad.join("decisions-20261101T000000000Z-000001.parquet"),
        b"not parquet",
    )
    .unwrap();
    let err = load_logs(&[tmp.join("corrupt")], |_, _, _| {}).unwrap_err();
    assert!(err.to_string().contains("decisions-2026"), "{err}");

    // Bad flags.
    let mut o = opts(&empty, tmp.join("m"), 1);
    o.valid_fraction = 1.5;
    synth(&tmp.join("few"), 200, 1);
    o.logs = vec![tmp.join("few")];
    assert!(matches!(
        run_train(&o, Progress::hidden()),
        Err(TrainerError::InvalidArgument(_))
    ));
    let mut o = opts(&tmp.join("few"), tmp.join("m"), 1);
    o.target = TargetRule {
        slow_factor: 0.5,
        ..TargetRule::default()
    };
    assert!(matches!(
        run_train(&o, Progress::hidden()),
        Err(TrainerError::InvalidArgument(_))
    ));

    // validate: missing model directory, model without card.
    let err = run_validate(&tmp.join("no-model"), &[], Progress::hidden()).unwrap_err();
    assert!(matches!(err, TrainerError::MissingModelDir(_)), "{err}");
    assert!(err.to_string().starts_with("model directory"), "{err}");
    let err = run_validate(&empty, &[], Progress::hidden()).unwrap_err();
    assert!(err.to_string().contains("card.json"), "{err}");
}

#[test]
fn shadow_rows_are_dropped() {
    // The service logs a shadow model's scores as extra rows of the same
    // decision with arm = "shadow"; they must not count as candidates.
    let tmp = TempDir::new("shadow");
    let mut s = Synth::new(SynthConfig {
        decisions: 300,
        seed: 5,
        ..SynthConfig::default()
    })
    .unwrap();
    let mut decisions = Vec::new();
    let mut with_shadow = Vec::new();
    let mut outcomes = Vec::new();
    while let Some((d, o)) = s.next_decision() {
        // The service's own shadow record: same decision id, arm "shadow".
        let rows: Vec<Option<(f64, f64)>> =
            d.candidates.iter().map(|_| Some((0.5, 99.0))).collect();
        let sh = d.shadow("shadow-1", &rows);
        with_shadow.push(d.clone());
        with_shadow.push(sh);
        decisions.push(d);
        outcomes.extend(o);
    }
    let write = |dir: &std::path::Path, recs: &[scorer_log::DecisionRecord]| {
        let part = dir.join("dt=2026-11-01");
        std::fs::create_dir_all(&part).unwrap();
        let b = decisions_batch(recs).unwrap();
        let f = std::fs::File::create(part.join("decisions-20261101T000000000Z-000001.parquet"))
            .unwrap();
        let mut w = ArrowWriter::try_new(f, b.schema(), None).unwrap();
        w.write(&b).unwrap();
        w.close().unwrap();
        let b = scorer_log::outcomes_batch(&outcomes).unwrap();
        let f = std::fs::File::create(part.join("outcomes-20261101T000000000Z-000001.parquet"))
            .unwrap();
        let mut w = ArrowWriter::try_new(f, b.schema(), None).unwrap();
        w.write(&b).unwrap();
        w.close().unwrap();
    };
    write(&tmp.join("plain"), &decisions);
    write(&tmp.join("shadow"), &with_shadow);
    let plain = load_logs(&[tmp.join("plain")], |_, _, _| {}).unwrap();
    let shadow = load_logs(&[tmp.join("shadow")], |_, _, _| {}).unwrap();
    assert_eq!(shadow.decision_rows, 2 * plain.decision_rows);
    assert_eq!(shadow.shadow_rows, plain.decision_rows);
    assert_eq!(shadow.decisions, plain.decisions);
    assert_eq!(shadow.features, plain.features);
    assert_eq!(shadow.picked, plain.picked);
    assert_eq!(shadow.latency_ms, plain.latency_ms);
    let rule = TargetRule::default();
    assert_eq!(shadow.labelled(&rule).counts, plain.labelled(&rule).counts);
}

#[test]
fn degenerate_flags_and_repeated_log_dirs_are_caught() {
    let tmp = TempDir::new("degenerate");
    let logs = tmp.join("logs");
    synth(&logs, 2_000, 3);
    let once = run_train(&opts(&logs, tmp.join("m1"), 1), Progress::hidden()).unwrap();

    // The same directory twice (and a sub-directory of it) counts each file once.
    let mut twice = opts(&logs, tmp.join("m2"), 1);
    twice.logs.push(logs.clone());
    twice.logs.push(logs.join("."));
    let s = run_train(&twice, Progress::hidden()).unwrap();
    assert_eq!(
        (s.train_rows, s.valid_rows),
        (once.train_rows, once.valid_rows)
    );

    let mut tiny = opts(&logs, tmp.join("m3"), 1);
    tiny.valid_fraction = 0.00001;
    let err = run_train(&tiny, Progress::hidden()).unwrap_err();
    assert!(matches!(err, TrainerError::NoData(_)), "{err}");
    assert!(err.to_string().contains("--valid-fraction"), "{err}");

    let mut huge_leaf = opts(&logs, tmp.join("m4"), 1);
    huge_leaf.params.min_data_in_leaf = 100_000_000;
    let err = run_train(&huge_leaf, Progress::hidden()).unwrap_err();
    assert!(matches!(err, TrainerError::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("--min-data-in-leaf"), "{err}");

    let mut leaves = opts(&logs, tmp.join("m5"), 1);
    leaves.params.num_leaves = Some(1_000_000);
    let err = run_train(&leaves, Progress::hidden()).unwrap_err();
    assert!(err.to_string().contains("--num-leaves"), "{err}");
    for m in ["m3", "m4", "m5"] {
        assert!(!tmp.join(m).exists(), "nothing written for {m}");
    }
}

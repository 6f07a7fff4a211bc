//! The on-disk layouts: one row per decision with nested candidates, the
//! candidate-features sample, and layout-1 files (one row per candidate)
//! still read.

use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::compute::concat_batches;
use parquet::arrow::ArrowWriter;

use super::sampling::id_unit;
use super::schema::{append_version_metadata, flat_layout_schema};
use super::*;
use scorer_core::clock::ManualClock;
use scorer_core::features::FEATURE_COUNT;

const T0: u64 = 1_709_632_800_000;

fn decision(i: usize, candidates: usize) -> DecisionRecord {
    DecisionRecord {
        decision_id: format!("0192f3a4-{i:08x}-7c1e-9d2b-5e6f7a8b9c0d"),
        ts_ms: T0 as i64 + i as i64,
        key_prefix: format!("user:{}", i % 7),
        shard_id: Some(i as u64),
        request_type: Some("get"),
        client_region: None,
        timeout_ms: Some(50),
        batch_size: None,
        policy: "p2c",
        panic: false,
        model_version: None,
        arm: None,
        config_hash: "cfg".to_string(),
        candidates: (0..candidates)
            .map(|j| CandidateRow {
                worker_id: format!("w-{j}"),
                eligible: true,
                rule_score: j as f64,
                model_action: None,
                final_score: 50.0 + j as f64,
                probability: Some(1.0 / candidates as f64),
                picked: j == i % candidates,
                penalty_state: "none",
                fallback_reason: None,
                features: [(i * 10 + j) as f32; FEATURE_COUNT],
            })
            .collect(),
    }
}

fn write(path: &std::path::Path, batch: &RecordBatch) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let file = std::fs::File::create(path).unwrap();
    let props = rolling::writer_properties(&LogConfig::default());
    let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
    append_version_metadata(&mut w, &batch.schema());
    w.write(batch).unwrap();
    w.close().unwrap();
}

fn file(dir: &std::path::Path, seq: u64) -> std::path::PathBuf {
    dir.join(format!(
        "dt=2024-03-05/decisions-20240305T100000000Z-{seq:06}.parquet"
    ))
}

#[test]
fn layout_1_files_read_as_the_same_candidate_rows_as_layout_2() {
    let tmp = tempfile::tempdir().unwrap();
    let recs: Vec<DecisionRecord> = (0..20).map(|i| decision(i, 3)).collect();
    let nested = decisions_batch(&recs).unwrap();
    let rows = candidate_rows(&nested).unwrap();
    // Layout 1 on disk: those rows, `features` never null, version "1".
    let flat = RecordBatch::try_new(flat_layout_schema(), rows.columns().to_vec()).unwrap();
    let (v1, v2) = (tmp.path().join("v1"), tmp.path().join("v2"));
    write(&file(&v1, 1), &flat);
    write(&file(&v2, 1), &nested);

    let a = read_dir(&v1, LogKind::Decisions).unwrap();
    let b = read_dir(&v2, LogKind::Decisions).unwrap();
    assert!(
        a.skipped.is_empty() && b.skipped.is_empty(),
        "{:?} {:?}",
        a.skipped,
        b.skipped
    );
    assert_eq!((a.rows, b.rows), (60, 60));
    let a = concat_batches(&candidate_rows_schema(), &a.batches).unwrap();
    let b = concat_batches(&candidate_rows_schema(), &b.batches).unwrap();
    assert_eq!(a, b);
    assert_eq!(a, rows);
}

#[test]
fn a_file_of_an_unknown_layout_is_skipped_naming_its_version() {
    let tmp = tempfile::tempdir().unwrap();
    let nested = decisions_batch(&[decision(1, 2)]).unwrap();
    let mut meta = nested.schema().metadata().clone();
    meta.insert(META_LOG_SCHEMA_VERSION.to_string(), "3".to_string());
    let schema = Arc::new(nested.schema().as_ref().clone().with_metadata(meta));
    let batch = RecordBatch::try_new(schema, nested.columns().to_vec()).unwrap();
    write(&file(tmp.path(), 1), &batch);
    let log = read_dir(tmp.path(), LogKind::Decisions).unwrap();
    assert_eq!(log.rows, 0);
    let reason = &log.skipped[0].1;
    assert!(
        reason.contains("log_schema_version is \"3\"") && reason.contains("\"2\" or \"1\""),
        "{reason}"
    );
}

#[test]
fn every_candidates_features_on_the_sample_and_the_picks_always() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        dir: tmp.path().join("decisions"),
        candidate_features_rate: 0.25,
        ..LogConfig::default()
    };
    let log = DecisionLog::start(cfg, Arc::new(ManualClock::new(1_000, T0))).unwrap();
    let n = 400;
    for i in 0..n {
        assert!(log.log_decision(decision(i, 3)));
    }
    log.shutdown().unwrap();
    let d = read_dir(&tmp.path().join("decisions"), LogKind::Decisions).unwrap();
    let b = concat_batches(&candidate_rows_schema(), &d.batches).unwrap();
    assert_eq!(b.num_rows(), 3 * n);
    let ids = b.column_by_name("decision_id").unwrap().as_string::<i32>();
    let picked = b.column_by_name("picked").unwrap().as_boolean();
    let features = b.column_by_name("features").unwrap().as_fixed_size_list();
    let mut sampled = 0;
    for row in 0..b.num_rows() {
        let all = id_unit(ids.value(row)) < 0.25;
        assert_eq!(
            features.is_valid(row),
            all || picked.value(row),
            "row {row}: the pick's vector always, the others' on the sample"
        );
        sampled += usize::from(all && picked.value(row));
        if features.is_valid(row) {
            let v = features.value(row);
            let v = v.as_primitive::<arrow::datatypes::Float32Type>();
            let i = row / 3;
            assert_eq!(v.value(0), (i * 10 + row % 3) as f32);
        }
    }
    assert!(
        (60..=140).contains(&sampled),
        "about a quarter of 400: {sampled}"
    );
}

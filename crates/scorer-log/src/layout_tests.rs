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
        caller: Some(std::sync::Arc::from("edge-1")),
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
                operator_override: (j == 1).then_some("drain"),
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

/// `batch` under `schema`, with only its columns (so without `caller`
/// for layouts 1 and 2) and, in a nested `candidates` column, only the
/// candidate fields of `schema` (so without `operator_override` for
/// layouts 2 and 3).
fn without_caller(batch: &RecordBatch, schema: arrow::datatypes::SchemaRef) -> RecordBatch {
    let columns = schema
        .fields()
        .iter()
        .map(|f| {
            let c = batch.column_by_name(f.name()).unwrap().clone();
            let arrow::datatypes::DataType::List(item) = f.data_type() else {
                return c;
            };
            let arrow::datatypes::DataType::Struct(fields) = item.data_type() else {
                return c;
            };
            let list = c.as_list::<i32>();
            let items = list.values().as_struct();
            let children = fields
                .iter()
                .map(|f| items.column_by_name(f.name()).unwrap().clone())
                .collect();
            let items = arrow::array::StructArray::new(fields.clone(), children, None);
            Arc::new(arrow::array::ListArray::new(
                item.clone(),
                list.offsets().clone(),
                Arc::new(items),
                list.nulls().cloned(),
            )) as arrow::array::ArrayRef
        })
        .collect();
    RecordBatch::try_new(schema, columns).unwrap()
}

#[test]
fn files_of_every_layout_read_as_the_same_candidate_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let recs: Vec<DecisionRecord> = (0..20).map(|i| decision(i, 3)).collect();
    let nested = decisions_batch(&recs).unwrap();
    let rows = candidate_rows(&nested).unwrap();
    // Layout 1 on disk: those rows but `caller`, `features` never null.
    let flat = without_caller(&rows, flat_layout_schema());
    // Layout 2: the nested layout without `caller`.
    let v2_nested = without_caller(&nested, schema::decisions_schema_v2());
    // Layout 3: the nested layout without the candidates' override.
    let v3_nested = without_caller(&nested, schema::decisions_schema_v3());
    // Layout 4: the decisions of layout 5 (only its outcomes differ).
    let v4_nested = without_caller(&nested, schema::decisions_schema_v4());
    let dirs = ["v1", "v2", "v3", "v5", "v4"].map(|d| tmp.path().join(d));
    write(&file(&dirs[0], 1), &flat);
    write(&file(&dirs[1], 1), &v2_nested);
    write(&file(&dirs[2], 1), &v3_nested);
    write(&file(&dirs[3], 1), &nested);
    write(&file(&dirs[4], 1), &v4_nested);

    let read = dirs.map(|d| {
        let log = read_dir(&d, LogKind::Decisions).unwrap();
        assert!(log.skipped.is_empty(), "{:?}", log.skipped);
        assert_eq!(log.rows, 60);
        concat_batches(&candidate_rows_schema(), &log.batches).unwrap()
    });
    assert_eq!(read[3], rows);
    assert_eq!(read[4], rows);
    let callers = read[3].column_by_name("caller").unwrap().as_string::<i32>();
    assert!(callers.iter().all(|c| c == Some("edge-1")));
    let overrides = read[3]
        .column_by_name(schema::OVERRIDE_FIELD)
        .unwrap()
        .as_string::<i32>();
    let drained: Vec<Option<&str>> = overrides.iter().take(3).collect();
    assert_eq!(drained, [None, Some("drain"), None]);
    // Written before each column: the same rows, that column null.
    let nulled = |names: &[&str]| {
        let mut columns = rows.columns().to_vec();
        for name in names {
            let at = rows.schema().index_of(name).unwrap();
            columns[at] =
                arrow::array::new_null_array(&arrow::datatypes::DataType::Utf8, rows.num_rows());
        }
        RecordBatch::try_new(candidate_rows_schema(), columns).unwrap()
    };
    let before_override = nulled(&[schema::OVERRIDE_FIELD]);
    let before_caller = nulled(&["caller", schema::OVERRIDE_FIELD]);
    assert_eq!(read[0], before_caller);
    assert_eq!(read[1], before_caller);
    assert_eq!(read[2], before_override);
}

fn outcome(i: usize, cache_hit: Option<bool>) -> OutcomeRecord {
    OutcomeRecord {
        decision_id: format!("d-{i}"),
        worker_id: "w".into(),
        ts_ms: T0 as i64 + i as i64,
        latency_ms: 1.5,
        success: true,
        caller: Some(Arc::from("edge-1")),
        cache_hit,
    }
}

fn outcomes_file(dir: &std::path::Path, seq: u64) -> std::path::PathBuf {
    dir.join(format!(
        "dt=2024-03-05/outcomes-20240305T100000000Z-{seq:06}.parquet"
    ))
}

fn cache_hits(b: &RecordBatch) -> Vec<Option<bool>> {
    b.column_by_name(schema::CACHE_HIT_COLUMN)
        .unwrap()
        .as_boolean()
        .iter()
        .collect()
}

#[test]
fn outcomes_written_before_caller_or_cache_hit_read_with_them_null() {
    let tmp = tempfile::tempdir().unwrap();
    let out = outcomes_batch(&[outcome(0, Some(true))]).unwrap();
    let v2 = without_caller(&out, schema::outcomes_schema_v2());
    let v3 = without_caller(&out, schema::outcomes_schema_v3());
    let v4 = without_caller(&out, schema::outcomes_schema_v4());
    let layouts = [("v2", v2), ("v3", v3), ("v4", v4)];
    for (name, batch) in &layouts {
        assert!(batch.column_by_name(schema::CACHE_HIT_COLUMN).is_none());
        write(&outcomes_file(&tmp.path().join(name), 1), batch);
    }
    for (name, _) in layouts {
        let log = read_dir(&tmp.path().join(name), LogKind::Outcomes).unwrap();
        assert!(log.skipped.is_empty(), "{name}: {:?}", log.skipped);
        let b = &log.batches[0];
        assert_eq!(b.schema(), outcomes_schema(), "{name}");
        assert_eq!(b.column_by_name("caller").unwrap().is_null(0), name == "v2");
        assert_eq!(cache_hits(b), [None], "{name}: written before cache_hit");
        assert_eq!(
            b.column_by_name("worker_id")
                .unwrap()
                .as_string::<i32>()
                .value(0),
            "w"
        );
    }
}

#[test]
fn an_outcomes_cache_hit_is_written_and_read_back() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        dir: tmp.path().join("decisions"),
        ..LogConfig::default()
    };
    let log = DecisionLog::start(cfg, Arc::new(ManualClock::new(1_000, T0))).unwrap();
    let hits = [Some(true), Some(false), None];
    for (i, hit) in hits.into_iter().enumerate() {
        assert!(log.log_outcome(outcome(i, hit)));
    }
    log.shutdown().unwrap();
    let o = read_dir(&tmp.path().join("outcomes"), LogKind::Outcomes).unwrap();
    assert!(o.skipped.is_empty(), "{:?}", o.skipped);
    let b = concat_batches(&outcomes_schema(), &o.batches).unwrap();
    assert_eq!(cache_hits(&b), hits);
    // On disk: the current layout, `cache_hit` a nullable boolean.
    let file =
        parquet::file::reader::SerializedFileReader::new(std::fs::File::open(&o.files[0]).unwrap())
            .unwrap();
    let kv = parquet::file::reader::FileReader::metadata(&file)
        .file_metadata()
        .key_value_metadata()
        .cloned()
        .unwrap_or_default();
    let version = kv.iter().find(|k| k.key == META_LOG_SCHEMA_VERSION);
    assert_eq!(
        version.and_then(|k| k.value.as_deref()),
        Some(LOG_SCHEMA_VERSION)
    );
    assert_eq!(LOG_SCHEMA_VERSION, "5");
}

#[test]
fn a_file_of_an_unknown_layout_is_skipped_naming_its_version() {
    let tmp = tempfile::tempdir().unwrap();
    let nested = decisions_batch(&[decision(1, 2)]).unwrap();
    let mut meta = nested.schema().metadata().clone();
    meta.insert(META_LOG_SCHEMA_VERSION.to_string(), "6".to_string());
    let schema = Arc::new(nested.schema().as_ref().clone().with_metadata(meta));
    let batch = RecordBatch::try_new(schema, nested.columns().to_vec()).unwrap();
    write(&file(tmp.path(), 1), &batch);
    let log = read_dir(tmp.path(), LogKind::Decisions).unwrap();
    assert_eq!(log.rows, 0);
    let reason = &log.skipped[0].1;
    assert!(
        reason.contains("log_schema_version is \"6\"")
            && reason.contains("\"5\" or \"4\" or \"3\" or \"2\" or \"1\""),
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

#[test]
fn a_stream_yields_what_read_file_loads_and_a_corrupt_file_is_an_error() {
    use stream::{FileStream, Opened};
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<_> = (0..10).map(|i| decision(i, 3)).collect();
    let path = file(dir.path(), 1);
    write(&path, &decisions_batch(&records).unwrap());

    let Opened::Stream(s) = FileStream::open(&path, LogKind::Decisions).unwrap() else {
        panic!("layout 4 should be read")
    };
    assert_eq!(s.rows(), 10, "one nested row per decision");
    assert!(s.row_groups()[0].uncompressed_bytes > 0);
    let streamed: Vec<RecordBatch> = s.map(Result::unwrap).collect();
    let loaded = read_file(&path, LogKind::Decisions).unwrap();
    assert_eq!(streamed, loaded.batches);
    assert_eq!(
        streamed.iter().map(RecordBatch::num_rows).sum::<usize>(),
        30
    );

    let Opened::Mismatch(reason) = FileStream::open(&path, LogKind::Outcomes).unwrap() else {
        panic!("a decisions file is not an outcomes file")
    };
    assert!(reason.contains("columns differ"), "{reason}");
    let bad = dir.path().join("decisions-bad.parquet");
    std::fs::write(&bad, b"PAR1 not really parquet PAR1").unwrap();
    let e = FileStream::open(&bad, LogKind::Decisions).unwrap_err();
    assert!(e.to_string().contains("decisions-bad.parquet"), "{e}");
}

#[test]
fn a_file_of_feature_schema_2_reads_with_the_locality_imputed_and_1_is_skipped() {
    use arrow::datatypes::Float32Type;
    use scorer_core::features::schema::{PREFIX_HIT_RATE_FEATURE, WARM_PROBABILITY_FEATURE};
    use stream::{FileStream, Opened};
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<_> = (0..4).map(|i| decision(i, 3)).collect();
    let batch = decisions_batch(&records).unwrap();
    let with_version = |v: &str| {
        let mut meta = batch.schema().metadata().clone();
        meta.insert(META_FEATURE_SCHEMA_VERSION.to_string(), v.to_string());
        let schema = Arc::new(batch.schema().as_ref().clone().with_metadata(meta));
        let mut columns = batch.columns().to_vec();
        let i = schema.index_of("feature_schema_version").unwrap();
        columns[i] = Arc::new(arrow::array::StringArray::from(vec![v; batch.num_rows()]));
        RecordBatch::try_new(schema, columns).unwrap()
    };
    let (v2, v1) = (file(dir.path(), 1), file(dir.path(), 2));
    write(&v2, &with_version("2"));
    write(&v1, &with_version("1"));

    let log = read_dir(dir.path(), LogKind::Decisions).unwrap();
    assert_eq!(log.files, vec![v2.clone()]);
    assert_eq!(log.skipped.len(), 1);
    let reason = &log.skipped[0].1;
    assert!(
        reason.contains("\"1\"") && reason.contains("readable"),
        "{reason}"
    );
    let rows = concat_batches(&log.batches[0].schema(), &log.batches).unwrap();
    assert_eq!(rows.num_rows(), 12);
    let features = rows
        .column_by_name("features")
        .unwrap()
        .as_fixed_size_list();
    let versions = rows
        .column_by_name("feature_schema_version")
        .unwrap()
        .as_string::<i32>();
    let locality = [WARM_PROBABILITY_FEATURE, PREFIX_HIT_RATE_FEATURE];
    for r in 0..rows.num_rows() {
        assert_eq!(
            versions.value(r),
            "2",
            "rows keep the version they were written under"
        );
        let v = features.value(r);
        let written = records[r / 3].candidates[r % 3].features[0];
        for (i, x) in v.as_primitive::<Float32Type>().values().iter().enumerate() {
            let want = if locality.contains(&i) { -1.0 } else { written };
            assert_eq!(*x, want, "row {r} feature {i}");
        }
    }
    // The stream reads it the same.
    let Opened::Stream(s) = FileStream::open(&v2, LogKind::Decisions).unwrap() else {
        panic!("schema 2 should be read")
    };
    let streamed: Vec<RecordBatch> = s.map(Result::unwrap).collect();
    assert_eq!(streamed, log.batches);
    // A current file is read as written.
    let v3 = file(dir.path(), 3);
    write(&v3, &batch);
    let current = read_file(&v3, LogKind::Decisions).unwrap();
    let f = current.batches[0].column_by_name("features").unwrap();
    let first = f.as_fixed_size_list().value(0);
    assert_eq!(first.as_primitive::<Float32Type>().value(31), 0.0);
}

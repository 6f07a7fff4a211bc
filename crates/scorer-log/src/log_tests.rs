//! End-to-end tests of the decision log: writer thread, files, recovery, reader.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use arrow::array::{Array, AsArray, RecordBatch, StringArray};
use arrow::compute::concat_batches;
use arrow::datatypes::{
    Float32Type, Float64Type, TimestampMillisecondType, UInt32Type, UInt64Type,
};
use parquet::arrow::ArrowWriter;

use super::*;
use scorer_core::clock::ManualClock;
use scorer_core::features::FEATURE_COUNT;

/// 2024-03-05T10:00:00.000Z
const T0: u64 = 1_709_632_800_000;
/// Bound on every poll for background-thread state.
const DEADLINE: Duration = Duration::from_secs(10);

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let p = std::env::temp_dir().join(format!("dlog-{}-{n}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Every candidate's features kept, so that round trips compare whole records.
fn cfg(root: &Path) -> LogConfig {
    LogConfig {
        dir: root.join("decisions"),
        candidate_features_rate: 1.0,
        ..LogConfig::default()
    }
}

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(1_000, T0))
}

fn start(cfg: LogConfig, clock: &Arc<ManualClock>) -> DecisionLog {
    DecisionLog::start(cfg, clock.clone()).unwrap()
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + DEADLINE;
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn features(i: usize, j: usize) -> [f32; FEATURE_COUNT] {
    let mut f = [0f32; FEATURE_COUNT];
    for (k, v) in f.iter_mut().enumerate() {
        *v = (i * 1_000 + j * 100 + k) as f32 * 0.37 - 11.0;
    }
    // Awkward values must survive bit-for-bit.
    f[0] = -0.0;
    f[1] = f32::MIN_POSITIVE / 4.0; // subnormal
    f[2] = f32::INFINITY;
    f[3] = f32::from_bits(0x7fc0_1234); // NaN with payload
    f
}

fn decision(i: usize, candidates: usize) -> DecisionRecord {
    let odd = i % 2 == 1;
    DecisionRecord {
        decision_id: format!("d-{i:05}"),
        ts_ms: T0 as i64 + i as i64,
        key_prefix: format!("user:{}", i % 7),
        shard_id: odd.then_some(i as u64 * 3),
        request_type: if odd { Some("get") } else { None },
        client_region: (!odd).then(|| "eu-west".to_string()),
        timeout_ms: odd.then_some(250),
        batch_size: (!odd).then_some(i as u32),
        policy: "softmax",
        panic: i.is_multiple_of(5),
        model_version: odd.then(|| "m-3".to_string()),
        arm: i.is_multiple_of(3).then(|| "b".to_string()),
        config_hash: "cfg-abc".to_string(),
        caller: odd.then(|| std::sync::Arc::from("edge-1")),
        candidates: (0..candidates)
            .map(|j| CandidateRow {
                worker_id: format!("w-{j}"),
                eligible: j != 1,
                rule_score: i as f64 + j as f64 / 10.0,
                model_action: odd.then_some(j as f64 * -0.5),
                final_score: 1.0 / (1.0 + j as f64),
                probability: (j != 2).then_some(0.25),
                picked: j == 0,
                penalty_state: if j == 1 { "penalized" } else { "none" },
                fallback_reason: (j == 3).then_some("model_timeout"),
                features: features(i, j),
                operator_override: None,
            })
            .collect(),
    }
}

fn outcome(i: usize, worker: usize, latency_ms: f64) -> OutcomeRecord {
    OutcomeRecord {
        decision_id: format!("d-{i:05}"),
        worker_id: format!("w-{worker}"),
        ts_ms: T0 as i64 + 500 + i as i64,
        latency_ms,
        success: !i.is_multiple_of(4),
        // The caller of decision `i`: an outcome joins only its own.
        caller: (i % 2 == 1).then(|| std::sync::Arc::from("edge-1")),
        cache_hit: None,
    }
}

/// One decisions row with owned values; floats as bits.
#[derive(Debug, Clone, PartialEq)]
struct Flat {
    decision_id: String,
    ts_ms: i64,
    key_prefix: String,
    shard_id: Option<u64>,
    request_type: Option<String>,
    client_region: Option<String>,
    timeout_ms: Option<u64>,
    batch_size: Option<u32>,
    worker_id: String,
    eligible: bool,
    rule_score: u64,
    model_action: Option<u64>,
    final_score: u64,
    policy: String,
    probability: Option<u64>,
    picked: bool,
    panic: bool,
    penalty_state: String,
    fallback_reason: Option<String>,
    model_version: Option<String>,
    arm: Option<String>,
    config_hash: String,
    feature_schema_version: String,
    features: Vec<u32>,
}

fn flatten(recs: &[DecisionRecord]) -> Vec<Flat> {
    let mut out = Vec::new();
    for r in recs {
        for c in &r.candidates {
            out.push(Flat {
                decision_id: r.decision_id.clone(),
                ts_ms: r.ts_ms,
                key_prefix: r.key_prefix.clone(),
                shard_id: r.shard_id,
                request_type: r.request_type.map(str::to_string),
                client_region: r.client_region.clone(),
                timeout_ms: r.timeout_ms,
                batch_size: r.batch_size,
                worker_id: c.worker_id.clone(),
                eligible: c.eligible,
                rule_score: c.rule_score.to_bits(),
                model_action: c.model_action.map(f64::to_bits),
                final_score: c.final_score.to_bits(),
                policy: r.policy.to_string(),
                probability: c.probability.map(f64::to_bits),
                picked: c.picked,
                panic: r.panic,
                penalty_state: c.penalty_state.to_string(),
                fallback_reason: c.fallback_reason.map(str::to_owned),
                model_version: r.model_version.clone(),
                arm: r.arm.clone(),
                config_hash: r.config_hash.clone(),
                feature_schema_version: scorer_core::features::FEATURE_SCHEMA_VERSION.to_string(),
                features: c.features.iter().map(|f| f.to_bits()).collect(),
            });
        }
    }
    out
}

fn unflatten(batches: &[RecordBatch]) -> Vec<Flat> {
    let b = concat_batches(&candidate_rows_schema(), batches).unwrap();
    let s = |n: &str| -> StringArray { b.column_by_name(n).unwrap().as_string::<i32>().clone() };
    let opt_s = |a: &StringArray, i: usize| a.is_valid(i).then(|| a.value(i).to_string());
    let (did, kp, rt, cr, wid, pol, ps, fr, mv, arm, ch, fsv) = (
        s("decision_id"),
        s("key_prefix"),
        s("request_type"),
        s("client_region"),
        s("worker_id"),
        s("policy"),
        s("penalty_state"),
        s("fallback_reason"),
        s("model_version"),
        s("arm"),
        s("config_hash"),
        s("feature_schema_version"),
    );
    let col = |n: &str| b.column_by_name(n).unwrap().clone();
    let ts = col("ts_ms");
    let ts = ts.as_primitive::<TimestampMillisecondType>();
    let shard = col("shard_id");
    let shard = shard.as_primitive::<UInt64Type>();
    let tmo = col("timeout_ms");
    let tmo = tmo.as_primitive::<UInt64Type>();
    let bs = col("batch_size");
    let bs = bs.as_primitive::<UInt32Type>();
    let f64s = |n: &str| col(n).as_primitive::<Float64Type>().clone();
    let (rs, ma, fs, pr) = (
        f64s("rule_score"),
        f64s("model_action"),
        f64s("final_score"),
        f64s("probability"),
    );
    let bools = |n: &str| col(n).as_boolean().clone();
    let (el, pk, pa) = (bools("eligible"), bools("picked"), bools("panic"));
    let feats = col("features");
    let feats = feats.as_fixed_size_list();
    (0..b.num_rows())
        .map(|i| Flat {
            decision_id: did.value(i).to_string(),
            ts_ms: ts.value(i),
            key_prefix: kp.value(i).to_string(),
            shard_id: shard.is_valid(i).then(|| shard.value(i)),
            request_type: opt_s(&rt, i),
            client_region: opt_s(&cr, i),
            timeout_ms: tmo.is_valid(i).then(|| tmo.value(i)),
            batch_size: bs.is_valid(i).then(|| bs.value(i)),
            worker_id: wid.value(i).to_string(),
            eligible: el.value(i),
            rule_score: rs.value(i).to_bits(),
            model_action: ma.is_valid(i).then(|| ma.value(i).to_bits()),
            final_score: fs.value(i).to_bits(),
            policy: pol.value(i).to_string(),
            probability: pr.is_valid(i).then(|| pr.value(i).to_bits()),
            picked: pk.value(i),
            panic: pa.value(i),
            penalty_state: ps.value(i).to_string(),
            fallback_reason: opt_s(&fr, i),
            model_version: opt_s(&mv, i),
            arm: opt_s(&arm, i),
            config_hash: ch.value(i).to_string(),
            feature_schema_version: fsv.value(i).to_string(),
            features: feats
                .value(i)
                .as_primitive::<Float32Type>()
                .values()
                .iter()
                .map(|f| f.to_bits())
                .collect(),
        })
        .collect()
}

fn names_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else if e.file_name() != super::dir_lock::LOCK_FILE {
                out.push(
                    e.path()
                        .strip_prefix(dir)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    out.sort();
    out
}

#[test]
fn round_trip_is_exact_and_joins_outcomes() {
    let tmp = TempDir::new("roundtrip");
    let c = clock();
    let log = start(cfg(tmp.path()), &c);
    let (n, cands) = (50, 4);
    let recs: Vec<DecisionRecord> = (0..n).map(|i| decision(i, cands)).collect();
    for r in &recs {
        assert!(log.log_decision(r.clone()));
    }
    // One outcome per decision on the picked worker; decision 7 reported twice.
    for i in 0..n {
        assert!(log.log_outcome(outcome(i, 0, 10.0 + i as f64)));
    }
    assert!(log.log_outcome(outcome(7, 0, 999.0)));
    log.shutdown().unwrap();

    let st = log.stats();
    assert_eq!(st.decisions_logged, 50);
    assert_eq!(st.outcomes_logged, 51);
    assert_eq!(st.dropped, 0);
    // One file row per decision (candidates nested), one per outcome.
    assert_eq!(st.written_rows, 50 + 51);
    assert_eq!(st.files, 2);
    assert_eq!(st.open_rows, 0);
    assert_eq!(st.write_errors, 0);

    let d = read_dir(&tmp.path().join("decisions"), LogKind::Decisions).unwrap();
    assert_eq!(d.rows, n * cands);
    assert_eq!(d.files.len(), 1);
    assert!(d.skipped.is_empty());
    let on_disk: u64 = d
        .files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    let o = read_dir(&tmp.path().join("outcomes"), LogKind::Outcomes).unwrap();
    assert_eq!(o.rows, 51);
    let on_disk = on_disk
        + o.files
            .iter()
            .map(|f| std::fs::metadata(f).unwrap().len())
            .sum::<u64>();
    assert_eq!(st.bytes, on_disk);

    let got = unflatten(&d.batches);
    let want = flatten(&recs);
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
    // Both None and Some survived for every nullable column.
    assert!(got.iter().any(|r| r.shard_id.is_none()) && got.iter().any(|r| r.shard_id.is_some()));
    assert!(got.iter().any(|r| r.fallback_reason.is_some()));
    assert!(got.iter().any(|r| r.probability.is_none()));

    let joined = join_outcomes(&d, &o).unwrap();
    assert_eq!(joined.num_rows(), 200);
    assert_eq!(joined.schema(), joined_schema());
    let lat = joined.column_by_name("latency_ms").unwrap();
    let lat = lat.as_primitive::<Float64Type>();
    let ok = joined.column_by_name("success").unwrap();
    let ok = ok.as_boolean();
    for (row, w) in want.iter().enumerate() {
        let i: usize = w.decision_id[2..].parse().unwrap();
        if w.worker_id == "w-0" {
            let expect = if i == 7 { 999.0 } else { 10.0 + i as f64 };
            assert_eq!(lat.value(row), expect);
            assert_eq!(ok.value(row), !i.is_multiple_of(4));
        } else {
            assert!(lat.is_null(row) && ok.is_null(row));
        }
    }
}

#[test]
fn backpressure_drops_without_blocking() {
    let tmp = TempDir::new("backpressure");
    let c = clock();
    let config = LogConfig {
        channel_capacity: 4,
        ..cfg(tmp.path())
    };
    let log = start(config, &c);
    let hold = log.hold_writer();
    let t = Instant::now();
    let accepted = (0..100)
        .filter(|&i| log.log_decision(decision(i, 3)))
        .count();
    let elapsed = t.elapsed();
    assert!(elapsed < Duration::from_secs(1), "took {elapsed:?}");
    assert_eq!(accepted, 4);
    let st = log.stats();
    assert_eq!((st.dropped, st.decisions_logged), (96, 4));
    drop(hold);
    log.shutdown().unwrap();
    let d = read_dir(&tmp.path().join("decisions"), LogKind::Decisions).unwrap();
    assert_eq!(d.rows, 4 * 3);
    let ids: Vec<String> = unflatten(&d.batches)
        .into_iter()
        .map(|r| r.decision_id)
        .collect();
    let want: Vec<String> = (0..4)
        .flat_map(|i| std::iter::repeat_n(format!("d-{i:05}"), 3))
        .collect();
    assert_eq!(ids, want);
    assert_eq!(log.stats().written_rows, 4);
}

#[test]
fn shutdown_drains_everything_accepted_and_is_idempotent() {
    let tmp = TempDir::new("drain");
    let c = clock();
    let log = start(cfg(tmp.path()), &c);
    let mut accepted = 0;
    for i in 0..2_000 {
        accepted += usize::from(log.log_decision(decision(i, 2)));
        accepted += usize::from(log.log_outcome(outcome(i, 0, 1.0)));
    }
    assert_eq!(accepted, 4_000);
    log.shutdown().unwrap();
    log.shutdown().unwrap();
    assert!(!log.log_decision(decision(1, 2)));
    let st = log.stats();
    assert_eq!(st.dropped, 0);
    assert_eq!(st.written_rows, 2_000 + 2_000);
    let d = read_dir(&tmp.path().join("decisions"), LogKind::Decisions).unwrap();
    let o = read_dir(&tmp.path().join("outcomes"), LogKind::Outcomes).unwrap();
    assert_eq!((d.rows, o.rows), (4_000, 2_000));
    // Dropping after shutdown is fine too.
    drop(log);
}

#[test]
fn sampling_is_deterministic_and_consistent_for_outcomes() {
    let tmp = TempDir::new("sampling");
    let c = clock();
    for (rate, lo, hi) in [(0.0, 0, 0), (1.0, 10_000, 10_000), (0.5, 4_800, 5_200)] {
        let config = LogConfig {
            sample_rate: rate,
            ..cfg(tmp.path())
        };
        let log = start(config, &c);
        let kept = (0..10_000)
            .filter(|i| log.sampled(&format!("d-{i:05}")))
            .count();
        assert!((lo..=hi).contains(&kept), "rate {rate}: {kept}");
        for i in 0..200 {
            let id = format!("d-{i:05}");
            assert_eq!(log.sampled(&id), sampled_at(&id, rate));
            assert_eq!(log.log_outcome(outcome(i, 0, 1.0)), log.sampled(&id));
        }
        assert_eq!(log.stats().dropped, 0);
        log.shutdown().unwrap();
    }
}

#[test]
fn disabled_log_accepts_nothing_and_touches_nothing() {
    let tmp = TempDir::new("disabled");
    let c = clock();
    let config = LogConfig {
        enabled: false,
        ..cfg(tmp.path())
    };
    let log = start(config, &c);
    assert!(!log.sampled("d-00001"));
    assert!(!log.log_decision(decision(1, 2)));
    assert!(!log.log_outcome(outcome(1, 0, 1.0)));
    let _hold = log.hold_writer();
    assert_eq!(log.stats(), LogStats::default());
    log.shutdown().unwrap();
    assert!(!tmp.path().join("decisions").exists());
}

#[test]
fn invalid_config_is_rejected() {
    let tmp = TempDir::new("invalid");
    let config = LogConfig {
        sample_rate: 2.0,
        ..cfg(tmp.path())
    };
    match DecisionLog::start(config, clock()) {
        Err(LogError::Config(msg)) => assert!(msg.contains("sample_rate")),
        other => panic!("expected Config error, got {other:?}"),
    }
}

#[test]
fn decision_log_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<DecisionLog>();
}

#[test]
fn write_failures_are_counted_and_reported_by_shutdown() {
    let tmp = TempDir::new("write-fail");
    let c = clock();
    let config = cfg(tmp.path());
    std::fs::create_dir_all(&config.dir).unwrap();
    // A regular file where the partition directory must go.
    std::fs::write(config.dir.join("dt=2024-03-05"), b"in the way").unwrap();
    let log = start(config, &c);
    assert!(log.log_decision(decision(1, 2)));
    wait_until("write error", || log.stats().write_errors == 1);
    assert!(matches!(log.shutdown(), Err(LogError::Io { .. })));
    let st = log.stats();
    assert_eq!((st.files, st.written_rows, st.open_rows), (0, 0, 0));
    // Stats serialize for the admin endpoint.
    let json = serde_json::to_value(st).unwrap();
    // The first write, and the last try at shutdown.
    assert_eq!(json["write_errors"], 2);
    assert_eq!(json["decisions_logged"], 1);
    assert_eq!(json["dropped_service"], 1, "lost at shutdown, counted");
}

#[test]
fn files_use_the_documented_encodings_and_statistics() {
    use parquet::basic::Encoding;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    let recs: Vec<DecisionRecord> = (0..200).map(|i| decision(i, 4)).collect();
    let props = rolling::writer_properties(&LogConfig::default());
    let tmp = TempDir::new("encodings");
    let path = tmp.path().join("d.parquet");
    let file = std::fs::File::create(&path).unwrap();
    let mut w = ArrowWriter::try_new(file, decisions_schema(), Some(props)).unwrap();
    w.write(&decisions_batch(&recs).unwrap()).unwrap();
    w.close().unwrap();
    let reader = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
    let rg = reader.metadata().row_group(0);
    let column = |name: &str| {
        (0..rg.num_columns())
            .map(|i| rg.column(i))
            .find(|c| c.column_path().string() == name)
            .unwrap_or_else(|| panic!("no column {name}"))
    };
    let dictionary = |name: &str| {
        column(name)
            .encodings()
            .any(|e| matches!(e, Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY))
    };
    let encoded = |name: &str, e: Encoding| column(name).encodings().any(|x| x == e);
    let path = |name: &str| {
        rolling::leaf_paths(name)
            .last()
            .map(|p| p.string())
            .unwrap_or_default()
    };
    let column = |name: &str| column(&path(name));
    let dictionary = |name: &str| dictionary(&path(name));
    let encoded = |name: &str, e: Encoding| encoded(&path(name), e);
    assert_eq!(path("worker_id"), "candidates.list.item.worker_id");
    assert_eq!(path("pick"), "pick");
    for name in rolling::DICTIONARY_COLUMNS {
        assert!(dictionary(name), "{name} should be dictionary-encoded");
    }
    for name in ["decision_id", "key_prefix", "policy", "config_hash"] {
        assert!(!dictionary(name), "{name} should be PLAIN");
        assert!(
            column(name).statistics().is_none(),
            "{name}: no string statistics"
        );
    }
    for name in rolling::DELTA_BINARY_PACKED_COLUMNS {
        assert!(encoded(name, Encoding::DELTA_BINARY_PACKED), "{name}");
    }
    for name in rolling::BYTE_STREAM_SPLIT_COLUMNS {
        assert!(encoded(name, Encoding::BYTE_STREAM_SPLIT), "{name}");
    }
    let features = rolling::FEATURES_LEAF_PATH.join(".");
    assert_eq!(features, "candidates.list.item.features.list.item");
    assert!(
        rg.columns()
            .iter()
            .find(|c| c.column_path().string() == features)
            .is_some_and(|c| c.encodings().any(|e| e == Encoding::BYTE_STREAM_SPLIT))
    );
    // Numeric and timestamp columns keep min/max for pruning.
    let ts = column("ts_ms").statistics().expect("ts_ms statistics");
    assert_eq!(ts.min_bytes_opt(), Some(&(T0 as i64).to_le_bytes()[..]));
    assert_eq!(
        ts.max_bytes_opt(),
        Some(&(T0 as i64 + 199).to_le_bytes()[..])
    );
}

#[path = "caller_join_tests.rs"]
mod caller_join;
#[path = "disk_full_tests.rs"]
mod disk_full;
#[path = "fair_queue_tests.rs"]
mod fair_queue;
#[path = "recovery_tests.rs"]
mod recovery_and_reader;
#[path = "rolling_tests.rs"]
mod rolling_files;

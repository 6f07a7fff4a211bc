//! Sustained throughput of the writer path for 10k decisions × 16
//! candidates, one row per decision, in `RecordBatch`es of 32 decisions
//! (what the service's writer appends at a time: 512 candidates) and of 256:
//! `decisions_batch` + `ArrowWriter` straight to Parquet (zstd, the log's
//! writer properties; the writer before the write-ahead file), then the two
//! halves of today's path: `decisions_batch` + the write-ahead append (Arrow
//! IPC, flushed per batch) on the writer thread, and the compaction of that
//! file to Parquet on the compaction thread.

#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use scorer_core::features::FEATURE_COUNT;
use scorer_log::batch::decisions_batch_sampled;
use scorer_log::compact::compact;
use scorer_log::rolling::writer_properties;
use scorer_log::wal::{WalWriter, file_opener};
use scorer_log::{CandidateRow, DecisionRecord, LogConfig, decisions_schema};
use scorer_log::{FsyncPolicy, LogKind};

const DECISIONS: usize = 10_000;
const CANDIDATES: usize = 16;
/// Decisions per `RecordBatch`: the writer's append (512 candidates).
const CHUNK: usize = 32;
/// A larger append, for comparison.
const BIG_CHUNK: usize = 256;
/// When set to N, the bench writes the file N times without criterion and
/// exits: fixed work to count instructions with `perf stat`.
const PASSES_ENV: &str = "LOG_WRITER_PASSES";

fn records() -> Vec<DecisionRecord> {
    (0..DECISIONS)
        .map(|i| DecisionRecord {
            decision_id: format!("0192f3a4-{i:08x}-7c1e-9d2b-5e6f7a8b9c0d"),
            ts_ms: 1_709_632_800_000 + i as i64,
            key_prefix: format!("tenant-{}:session", i % 97),
            shard_id: Some((i % 64) as u64),
            request_type: Some("get"),
            client_region: Some("eu-west-1".to_string()),
            timeout_ms: Some(250),
            batch_size: Some((i % 32) as u32 + 1),
            policy: "softmax",
            panic: false,
            model_version: Some("model-2024-03-01".to_string()),
            arm: if i.is_multiple_of(2) {
                Some("a".to_string())
            } else {
                None
            },
            config_hash: "9f8e7d6c5b4a".to_string(),
            caller: None,
            candidates: (0..CANDIDATES)
                .map(|j| {
                    let mut features = [0f32; FEATURE_COUNT];
                    for (k, f) in features.iter_mut().enumerate() {
                        // Pseudo-random but deterministic values, like real telemetry.
                        let x = ((i * 31 + j * 17 + k * 7) % 1_009) as f32;
                        *f = x / 1_009.0 * (k as f32 + 1.0);
                    }
                    CandidateRow {
                        worker_id: format!("kv-worker-{j:03}"),
                        eligible: !j.is_multiple_of(5),
                        rule_score: (i * j) as f64 * 0.001,
                        model_action: Some(j as f64 * 0.1),
                        final_score: 1.0 / (j as f64 + 1.0),
                        probability: Some(1.0 / CANDIDATES as f64),
                        picked: j == i % CANDIDATES,
                        penalty_state: "none",
                        fallback_reason: None,
                        features,
                        operator_override: None,
                    }
                })
                .collect(),
        })
        .collect()
}

fn write_file(
    recs: &[DecisionRecord],
    props: &WriterProperties,
    path: &std::path::Path,
    chunk: usize,
    features_rate: f64,
) {
    let file = std::fs::File::create(path).expect("bench temp file");
    let mut w =
        ArrowWriter::try_new(file, decisions_schema(), Some(props.clone())).expect("writer");
    for chunk in recs.chunks(chunk) {
        let batch = decisions_batch_sampled(chunk, features_rate).expect("batch");
        w.write(&batch).expect("write");
    }
    black_box(w.close().expect("close"));
}

fn write_wal(recs: &[DecisionRecord], path: &std::path::Path, chunk: usize, features_rate: f64) {
    let _ = std::fs::remove_file(path);
    let mut w = WalWriter::create(path, &decisions_schema(), FsyncPolicy::Roll, &file_opener())
        .expect("wal");
    for chunk in recs.chunks(chunk) {
        let batch = decisions_batch_sampled(chunk, features_rate).expect("batch");
        w.append(&batch).expect("append");
    }
    black_box(w.seal().expect("seal"));
}

fn bench_wal(c: &mut Criterion, recs: &[DecisionRecord], props: &WriterProperties) {
    let dir = std::env::temp_dir().join(format!("dlog-wal-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("bench dir");
    let wal = dir.join(".decisions-20240305T100000000Z-000001.arrows");
    let parquet = dir.join("decisions-20240305T100000000Z-000001.parquet");
    let mut g = c.benchmark_group("write-ahead");
    g.sample_size(10);
    g.throughput(Throughput::Elements(DECISIONS as u64));
    g.bench_function("appends of 32, every candidate's features on 0.1", |b| {
        b.iter(|| write_wal(recs, &wal, CHUNK, 0.1))
    });
    g.bench_function("compaction to Parquet, features on 0.1", |b| {
        b.iter_batched(
            || {
                let _ = std::fs::remove_file(&parquet);
                write_wal(recs, &wal, CHUNK, 0.1);
            },
            |()| black_box(compact(&wal, &parquet, LogKind::Decisions, props).expect("compact")),
            criterion::BatchSize::PerIteration,
        )
    });
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

fn bench(c: &mut Criterion) {
    let recs = records();
    let props = writer_properties(&LogConfig::default());
    let path = std::env::temp_dir().join(format!("dlog-bench-{}.parquet", std::process::id()));
    if let Some(passes) = std::env::var(PASSES_ENV)
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        // Fixed work, for `perf stat -e instructions:u` (noise-free on a shared machine).
        for _ in 0..passes {
            let rate = std::env::var("LOG_WRITER_RATE")
                .ok()
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(1.0);
            let chunk = std::env::var("LOG_WRITER_CHUNK")
                .ok()
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(CHUNK);
            write_file(&recs, &props, &path, chunk, rate);
        }
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        println!(
            "{passes} passes; file size for {DECISIONS} decisions x {CANDIDATES}: {size} bytes"
        );
        if std::env::var_os("LOG_WRITER_KEEP").is_none() {
            let _ = std::fs::remove_file(&path);
        }
        std::process::exit(0);
    }
    let mut g = c.benchmark_group("writer");
    g.sample_size(10);
    g.throughput(Throughput::Elements(DECISIONS as u64));
    for (chunk, rate) in [(CHUNK, 1.0), (BIG_CHUNK, 1.0), (CHUNK, 0.1), (CHUNK, 0.0)] {
        let name = format!("appends of {chunk}, every candidate's features on {rate}");
        g.bench_function(name, |b| {
            b.iter(|| write_file(&recs, &props, &path, chunk, rate))
        });
    }
    g.finish();
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    println!("file size for {DECISIONS} decisions x {CANDIDATES}: {size} bytes");
    let _ = std::fs::remove_file(&path);
    bench_wal(c, &recs, &props);
}

criterion_group!(benches, bench);
criterion_main!(benches);

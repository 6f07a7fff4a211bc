//! The view stream's fan-out: CPU to produce one full-view tick's events
//! for N subscribers of 2 000 workers, as each stream built and serialised
//! its own `View` before (`per_subscriber`), and as the hub serialises the
//! shared part once and each stream splices its `seq` and load in
//! (`shared`). The difference between N and 1 subscribers, over N − 1, is
//! the cost of one more subscriber.
//!
//! `cargo bench -p service --bench view_fanout`

#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::sync::Arc;

use axum::body::Bytes;
use criterion::{BenchmarkId, Criterion, black_box, criterion_group, criterion_main};
use scorer_core::clock::{Clock, ManualClock};
use scorer_core::telemetry::Snapshot;
use scorer_engine::Engine;
use scorer_engine::config::Config;
use scorer_engine::view::load_board::OthersLoad;
use service::view_hub::{ViewHub, wire};

const WORKERS: usize = 2_000;

fn setup() -> (Engine, ViewHub, u64) {
    let mut cfg = Config::default();
    cfg.scoring.warmup_ms = 0;
    let engine = Engine::new(cfg);
    let clock = ManualClock::new(1_000, 1_750_000_000_000);
    let batch: Vec<Snapshot> = (0..WORKERS)
        .map(|i| {
            serde_json::from_value(serde_json::json!({
                "worker_id": format!("worker-{i:05}"), "timestamp_ms": clock.wall_ms(),
                "cpu_usage": 0.5, "queue_depth": 3, "rtt_ms_avg": 1.25, "rtt_ms_p99": 7.5,
                "error_rate": 0.001, "compacting": false, "under_repair": false, "version_lag": 0,
            }))
            .expect("a snapshot")
        })
        .collect();
    let now = clock.monotonic_ms();
    engine
        .ingest(&batch, now, clock.wall_ms())
        .expect("ingested");
    let hub = ViewHub::default();
    hub.publish(&batch, now);
    (engine, hub, now + 250)
}

fn others() -> OthersLoad {
    OthersLoad {
        load: Vec::new(),
        age_ms: 0,
        routers: 0,
    }
}

/// One tick as each stream did it: its own `View`, serialised whole into
/// an SSE event.
fn per_subscriber(engine: &Engine, hub: &ViewHub, now: u64, n: usize) -> usize {
    let mut bytes = 0;
    for seq in 0..n {
        let mut v = hub.full(engine, now, seq as u64);
        let o = others();
        v.load = Some(o.load);
        v.load_age_ms = Some(o.age_ms);
        v.load_routers = Some(o.routers);
        v.overrides = Some(engine.override_table().list(now));
        let mut event = format!("event: view\nid: {seq}\ndata: ").into_bytes();
        serde_json::to_writer(&mut event, &v).expect("serialised");
        event.extend_from_slice(b"\n\n");
        bytes += Bytes::from(event).len();
    }
    bytes
}

/// One tick as the hub does it: the shared part once, each stream its own.
fn shared(engine: &Engine, hub: &ViewHub, now: u64, n: usize) -> usize {
    let view = hub.shared_full(engine, now);
    let mut bytes = 0;
    for seq in 0..n {
        let load = wire::load(&others(), &[]);
        let event = wire::event(seq as u64, &view, Some(&load));
        bytes += event.iter().map(Bytes::len).sum::<usize>();
    }
    bytes
}

fn bench(c: &mut Criterion) {
    let (engine, hub, now) = setup();
    assert_eq!(
        per_subscriber(&engine, &hub, now, 2),
        shared(&engine, &hub, now, 2),
        "the same bytes either way"
    );
    let engine = Arc::new(engine);
    let mut group = c.benchmark_group("view_tick_2000_workers");
    group.sample_size(10);
    for n in [1usize, 50, 200] {
        group.bench_with_input(BenchmarkId::new("per_subscriber", n), &n, |b, &n| {
            b.iter(|| black_box(per_subscriber(&engine, &hub, now, n)));
        });
        group.bench_with_input(BenchmarkId::new("shared", n), &n, |b, &n| {
            b.iter(|| black_box(shared(&engine, &hub, now, n)));
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! Decision records through NATS into two log writers: `ROUTERS` (64)
//! simulated routers in this process, each its own NATS connection,
//! together publishing `RATE` (50 000) decisions a second of `CANDIDATES`
//! (16) candidates for `SECONDS` (10 s), every `TICK_MS` (or, when the
//! stream's acknowledgements take longer, as soon as the last one came)
//! every decision due as one batch in the log's Arrow IPC schema on `scorer.records.decisions.<router>`
//! (`Bus::publish_records`, awaited until the stream stored it); two
//! service processes with `bus.log_writer` (the `service` binary of this
//! build) share the stream's consumer and write Parquet.
//!
//! It reports the decisions made and stored, the records dropped (must be
//! 0), the decisions in the writers' Parquet once and twice (after both
//! writers stopped with SIGTERM), and CPU per decision from `/proc`: the
//! writers' (the ingest side, beside the HTTP ingest of router records),
//! nats-server's, and this process's (the routers: building, encoding and
//! publishing their batches).
//!
//! `cargo bench -p service --bench records_bus` (or, for a debug build,
//! `cargo test -p service --bench records_bus -- --bench`); `RECORDS_RATE`
//! and `RECORDS_SECONDS` override the rate and the length. Without
//! `nats-server` on PATH it says so and measures nothing.

#![allow(missing_docs)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use arrow::array::{Array, AsArray};
use scorer_bus::Bus;
use scorer_bus::subject::{LOG_WRITERS_CONSUMER, RECORDS_STREAM};
use scorer_core::features::FEATURE_COUNT;
use scorer_engine::config::bus::BusConfig;
use scorer_log::batch::decisions_batch_sampled;
use scorer_log::{CandidateRow, DecisionRecord, LogKind, read_dir};

const ROUTERS: usize = 64;
const RATE: u64 = 50_000;
const SECONDS: u64 = 10;
const CANDIDATES: usize = 16;
const TICK_MS: u64 = 10;
/// The log's default `candidate_features_rate`: every candidate's features
/// on one decision in ten, the pick's on the others.
const ALL_FEATURES_BELOW: f64 = 0.1;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// utime + stime of `pid`, seconds.
fn cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f.get(11..13).map_or(0.0, |t| {
        t.iter().filter_map(|x| x.parse::<f64>().ok()).sum()
    });
    ticks / 100.0
}

fn writer(root: &Path, name: &str, url: &str) -> (Proc, PathBuf) {
    let dir = root.join(name);
    let log = std::fs::File::create(root.join(format!("{name}.log"))).expect("log file");
    let child = Command::new(env!("CARGO_BIN_EXE_service"))
        .env(
            "SCORER_SERVER__LISTEN",
            format!("127.0.0.1:{}", free_port()),
        )
        .env("SCORER_LOG__DIR", dir.join("decisions"))
        .env("SCORER_LOG__OUTCOMES_DIR", dir.join("outcomes"))
        .env("SCORER_BUS__NATS_URL", url)
        .env("SCORER_BUS__REPLICA_ID", name)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("service starts");
    (Proc(child), dir.join("decisions"))
}

fn decision(router: usize, seq: u64) -> DecisionRecord {
    let pick = (seq as usize) % CANDIDATES;
    DecisionRecord {
        decision_id: format!("edge-{router}-{seq:016x}"),
        ts_ms: 1_750_000_000_000 + seq as i64,
        key_prefix: "user:1".to_owned(),
        shard_id: None,
        request_type: Some("get"),
        client_region: None,
        timeout_ms: Some(50),
        batch_size: Some(1),
        policy: "p2c",
        panic: false,
        model_version: None,
        arm: None,
        config_hash: "0123456789abcdef".to_owned(),
        caller: None,
        candidates: (0..CANDIDATES)
            .map(|c| CandidateRow {
                worker_id: format!("w{c}"),
                eligible: true,
                rule_score: 50.0 + c as f64,
                model_action: None,
                final_score: 40.0 + c as f64,
                probability: Some(1.0 / CANDIDATES as f64),
                picked: c == pick,
                penalty_state: "none",
                fallback_reason: None,
                features: [0.5; FEATURE_COUNT],
                operator_override: None,
            })
            .collect(),
    }
}

/// One router: every `TICK_MS` (or as soon as its last batch is stored),
/// every decision due by then at its share of the rate, as one batch.
async fn router(bus: Bus, r: usize, per_s: f64, start: tokio::time::Instant, seconds: u64) -> u64 {
    let mut tick = tokio::time::interval(Duration::from_millis(TICK_MS));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let until = start + Duration::from_secs(seconds);
    let mut seq = 0u64;
    loop {
        tick.tick().await;
        let now = tokio::time::Instant::now().min(until);
        let due = (per_s * (now - start).as_secs_f64()) as u64;
        let recs: Vec<DecisionRecord> = (seq..due).map(|s| decision(r, s)).collect();
        seq = due;
        if !recs.is_empty()
            && let Ok(b) = decisions_batch_sampled(&recs, ALL_FEATURES_BELOW)
        {
            bus.publish_records(LogKind::Decisions, &b).await;
        }
        if now >= until {
            return seq;
        }
    }
}

async fn consumer_idle(js: &scorer_bus::async_nats::jetstream::Context) -> bool {
    let Ok(stream) = js.get_stream(RECORDS_STREAM).await else {
        return false;
    };
    stream
        .consumer_info(LOG_WRITERS_CONSUMER)
        .await
        .is_ok_and(|i| i.num_pending == 0 && i.num_ack_pending == 0)
}

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    if Command::new("nats-server")
        .arg("--version")
        .output()
        .is_err()
    {
        println!("records_bus: no nats-server on PATH, nothing measured");
        return;
    }
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let (rate, seconds) = if quick {
        (2_000, 1)
    } else {
        (env("RECORDS_RATE", RATE), env("RECORDS_SECONDS", SECONDS))
    };
    let root = tempfile::tempdir().expect("root");
    let port = free_port();
    let nats = Proc(
        Command::new("nats-server")
            .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
            .arg(root.path().join("js"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server"),
    );
    let url = format!("nats://127.0.0.1:{port}");
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (mut w1, d1) = writer(root.path(), "writer-1", &url);
    let (mut w2, d2) = writer(root.path(), "writer-2", &url);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let report = rt.block_on(async {
        let cfg = BusConfig {
            nats_url: url.clone(),
            ..BusConfig::default()
        };
        let mut buses = Vec::new();
        for r in 0..ROUTERS {
            buses.push(
                Bus::connect(&cfg, &format!("edge-{r}"))
                    .await
                    .expect("router on the bus"),
            );
        }
        let raw = scorer_bus::async_nats::connect(&url).await.expect("raw");
        let js = scorer_bus::async_nats::jetstream::new(raw);
        // Both writers joined: the consumer exists and each has a pull waiting.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let waiting = match js.get_stream(RECORDS_STREAM).await {
                Ok(s) => s
                    .consumer_info(LOG_WRITERS_CONSUMER)
                    .await
                    .map_or(0, |i| i.num_waiting),
                Err(_) => 0,
            };
            if waiting >= 2 {
                break;
            }
            assert!(Instant::now() < deadline, "the writers did not join");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let cpu0 = (
            cpu_s(w1.0.id()) + cpu_s(w2.0.id()),
            cpu_s(nats.0.id()),
            cpu_s(std::process::id()),
        );
        let t0 = Instant::now();
        let start = tokio::time::Instant::now();
        let per_s = rate as f64 / ROUTERS as f64;
        let tasks: Vec<_> = buses
            .iter()
            .enumerate()
            .map(|(r, b)| tokio::spawn(router(b.clone(), r, per_s, start, seconds)))
            .collect();
        let mut made = 0u64;
        for t in tasks {
            made += t.await.unwrap_or(0);
        }
        let publish_s = t0.elapsed().as_secs_f64();
        let deadline = Instant::now() + Duration::from_secs(600);
        while !consumer_idle(&js).await {
            assert!(Instant::now() < deadline, "the writers did not catch up");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let drained_s = t0.elapsed().as_secs_f64();
        let cpu1 = (
            cpu_s(w1.0.id()) + cpu_s(w2.0.id()),
            cpu_s(nats.0.id()),
            cpu_s(std::process::id()),
        );
        let (mut published, mut dropped) = (0, 0);
        for b in &buses {
            published += b.counters().published_count("decisions");
            dropped += b.counters().dropped_count("decisions");
        }
        (made, published, dropped, publish_s, drained_s, cpu0, cpu1)
    });
    let (made, published, dropped, publish_s, drained_s, cpu0, cpu1) = report;
    for w in [&w1, &w2] {
        let _ = Command::new("kill")
            .args(["-TERM", &w.0.id().to_string()])
            .status();
    }
    let _ = w1.0.wait();
    let _ = w2.0.wait();
    let mut rows: HashMap<(String, String), u32> = HashMap::new();
    for d in [&d1, &d2] {
        let loaded = read_dir(d, LogKind::Decisions).expect("log reads");
        for b in &loaded.batches {
            let ids = b
                .column_by_name("decision_id")
                .expect("id")
                .as_string::<i32>();
            let ws = b
                .column_by_name("worker_id")
                .expect("worker")
                .as_string::<i32>();
            for i in 0..ids.len() {
                *rows
                    .entry((ids.value(i).to_owned(), ws.value(i).to_owned()))
                    .or_default() += 1;
            }
        }
    }
    let twice = rows.values().filter(|n| **n > 1).count();
    let once: std::collections::HashSet<&str> = rows.keys().map(|(id, _)| id.as_str()).collect();
    let per = |s: f64| s * 1e6 / made.max(1) as f64;
    println!(
        "records_bus: {ROUTERS} routers, {rate}/s asked for {seconds} s, {CANDIDATES} candidates, batches every {TICK_MS} ms"
    );
    println!(
        "made {made} ({:.0}/s over {publish_s:.1} s), stored {published}, dropped {dropped}; writers done {drained_s:.1} s after the start",
        made as f64 / publish_s
    );
    println!(
        "in Parquet: {} decisions, {} candidate rows written twice, {} missing",
        once.len(),
        twice,
        made.saturating_sub(once.len() as u64)
    );
    println!(
        "CPU per decision: writers {:.1} µs, nats-server {:.1} µs, routers (this process) {:.1} µs",
        per(cpu1.0 - cpu0.0),
        per(cpu1.1 - cpu0.1),
        per(cpu1.2 - cpu0.2)
    );
    drop(nats);
}

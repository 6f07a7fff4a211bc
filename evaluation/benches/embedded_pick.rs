//! A router's pick with the embedded balancer (`scorer-balancer`) against
//! power of two choices on least requests, the cheapest baseline, in the
//! same run: per-call p50 / p99 in µs for 16 candidates.
//!
//! - `p2c-least-request`: the simulator's baseline
//!   (`evaluation::arms::baselines::p2c_least_request`);
//! - `balancer rules only`: `Balancer::pick` after a full view, no model;
//! - `balancer rules + model`: the same with the shipped model
//!   (`models/default`, else a synthetic ensemble of its shape);
//! - `balancer model + records`: rules + model, every decision also queued
//!   for the service's decision log (`Balancer::with_records`; the buffer is
//!   drained outside the timed call, as the reporter does);
//! - `balancer rules + locality`: rules only, every worker having learnt its
//!   hit and miss times from outcomes that said so, every key's routings
//!   in the routing index: each candidate priced by where the key is warm;
//! - `balancer blackout`: no view within `view_ttl_ms`, local evidence alone;
//! - `rules only, 256` and `rules only, 1024`: `balancer rules only` over
//!   pools of 256 and 1 024 candidates (fewer calls per round: a tenth and
//!   a fortieth).
//!
//! Each pick's outcome is reported outside the timed call, so outstanding
//! counts stay bounded as in a router. The cases run interleaved: each of
//! [`ROUNDS`] rounds times every case once, and each line reports the
//! median over rounds of the per-round p50 and p99 (the host is shared and
//! noisy; compare lines of one run only).
//!
//! `cargo bench -p evaluation --bench embedded_pick`
//!
//! With `-- --calibrate FILE` it also writes the simulator's calibration of
//! the `service-embedded` arm (`evaluation::embedded_calibration`): every
//! `rules + model` pick of the run, as quantile points. With `-- --only
//! NAME` it runs the cases whose name starts with `NAME` alone (the
//! P2C control always runs), for a profiler's count of one case.

#![allow(missing_docs)]

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use evaluation::arms::baselines::p2c_least_request::P2cLeastRequest;
use evaluation::router::{Op, Outcome, PickRequest, Router};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use scorer_balancer::records::{DEFAULT_RECORD_BUFFER, RecordBuffer};
use scorer_balancer::{Balancer, BalancerConfig};
use scorer_core::clock::SystemClock;
use scorer_core::telemetry::Snapshot;
use scorer_engine::api::ScoreRequest;
use scorer_engine::config::Config;
use scorer_engine::view::{View, ViewKind, ViewWorker};
use scorer_model::ModelHub;
use scorer_model::fixture::{random_model, write_model_dir};

const WALL: u64 = 1_750_000_000_000;
const N: usize = 16;
const ROUNDS: usize = 7;
/// The case the `service-embedded` arm runs, and the calibration records.
const MODEL_CASE: &str = "balancer rules + model";

fn percentiles(mut ns: Vec<u64>) -> (f64, f64) {
    ns.sort_unstable();
    let at = |q: f64| ns[((ns.len() - 1) as f64 * q).round() as usize] as f64 / 1_000.0;
    (at(0.5), at(0.99))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Times `pick` `iters` times after a tenth as many untimed; `settle` runs
/// after each call, untimed. The per-call times, ns.
fn time(iters: usize, pick: &mut dyn FnMut(), settle: &mut dyn FnMut()) -> Vec<u64> {
    let mut ns = Vec::with_capacity(iters);
    for i in 0..iters + iters / 10 {
        let t = Instant::now();
        pick();
        let dt = t.elapsed().as_nanos() as u64;
        settle();
        if i >= iters / 10 {
            ns.push(dt);
        }
    }
    ns
}

fn full_view(b: &Balancer, n: usize) -> View {
    let workers = (0..n)
        .map(|i| {
            let mut s = Snapshot::new(format!("worker-{i}"), WALL);
            s.cpu_usage = (i % 10) as f64 / 10.0;
            s.rtt_ms_avg = 1.0 + (i % 5) as f64;
            s.rtt_ms_p99 = 5.0 + (i % 13) as f64 * 3.0;
            s.queue_depth = (i % 30) as u32;
            s.disk_io_await_ms = Some((i % 9) as f64 * 12.0);
            ViewWorker {
                snapshot: s,
                age_ms: 0,
            }
        })
        .collect();
    View {
        kind: ViewKind::Full,
        seq: 0,
        config_hash: b.engine().config_hash().to_string(),
        model_version: None,
        workers,
        load: None,
        load_age_ms: None,
        load_routers: None,
        routed: None,
        overrides: None,
    }
}

type Case<'a> = Box<dyn FnMut(usize) -> Vec<u64> + 'a>;

/// A balancer case: picks among `n` candidates at `now_ms`, each answered
/// 1 ms later.
fn balancer_case<'a>(b: &'a Balancer, now_ms: u64, n: usize) -> Case<'a> {
    let candidates = (0..n).map(|i| format!("worker-{i}")).collect();
    let mut req = ScoreRequest::new("user:1:profile", candidates);
    req.policy = Some("p2c".into());
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    Box::new(move |iters| {
        let last = std::cell::RefCell::new(None);
        time(
            iters,
            &mut || *last.borrow_mut() = b.pick(&req, now_ms, &mut rng).ok(),
            &mut || {
                if let Some(p) = last.borrow_mut().take() {
                    let _ = b.outcome(&p.decision_id, &p.worker, 1.0, true, now_ms);
                }
                // A router's reporter drains the records off the pick path.
                if let Some(r) = b.records() {
                    while r.drain("bench", 4_096).is_some() {}
                }
            },
        )
    })
}

/// A balancer whose workers report hits and misses: every worker has
/// learnt its hit and miss times and the routing index holds the keys'
/// routings, so every candidate is priced by where the key is warm. Picks
/// cycle over 1 024 keys, each answered 1 ms later, a hit when the key
/// went to the same worker last time.
fn locality_case<'a>(b: &'a Balancer, now_ms: u64) -> Case<'a> {
    for w in 0..N {
        let req = ScoreRequest::new(format!("teach:{w}"), vec![format!("worker-{w}")]);
        let mut rng = ChaCha8Rng::seed_from_u64(w as u64);
        for i in 0..20 {
            let p = b.pick(&req, now_ms, &mut rng).expect("a pick");
            let (ms, hit) = if i % 2 == 0 {
                (10.0, false)
            } else {
                (1.0, true)
            };
            let _ =
                b.outcome_with_cache_hit(&p.decision_id, &p.worker, ms, true, Some(hit), now_ms);
        }
    }
    let candidates: Vec<String> = (0..N).map(|i| format!("worker-{i}")).collect();
    let keys: Vec<String> = (0..1_024)
        .map(|k| format!("tenant:{}:user:{k}", k % 100))
        .collect();
    let mut req = ScoreRequest::new("", candidates);
    req.policy = Some("p2c".into());
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut last_worker = vec![String::new(); keys.len()];
    let k = 0usize;
    Box::new(move |iters| {
        let last = std::cell::RefCell::new(None);
        let (req, rng, k, last_worker) = (
            std::cell::RefCell::new(&mut req),
            std::cell::RefCell::new(&mut rng),
            std::cell::Cell::new(k),
            std::cell::RefCell::new(&mut last_worker),
        );
        time(
            iters,
            &mut || {
                let mut r = req.borrow_mut();
                keys[k.get()].clone_into(&mut r.key);
                *last.borrow_mut() = b.pick(&r, now_ms, &mut **rng.borrow_mut()).ok();
            },
            &mut || {
                if let Some(p) = last.borrow_mut().take() {
                    let mut lw = last_worker.borrow_mut();
                    let hit = lw[k.get()] == p.worker;
                    let ms = if hit { 1.0 } else { 10.0 };
                    let _ = b.outcome_with_cache_hit(
                        &p.decision_id,
                        &p.worker,
                        ms,
                        true,
                        Some(hit),
                        now_ms,
                    );
                    lw[k.get()] = p.worker;
                }
                k.set((k.get() + 1) % keys.len());
            },
        )
    })
}

fn p2c_case<'a>() -> Case<'a> {
    let mut p2c = P2cLeastRequest::new(N);
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    Box::new(move |iters| {
        let req = PickRequest {
            now_ms: 0.0,
            key: "user:1:profile",
            op: Op::Get,
            timeout_ms: 100.0,
            router: 0,
        };
        let (p2c, last) = (std::cell::RefCell::new(&mut p2c), std::cell::Cell::new(0));
        time(
            iters,
            &mut || last.set(p2c.borrow_mut().pick(&req, &mut rng).worker),
            &mut || {
                p2c.borrow_mut().outcome(&Outcome {
                    worker: last.get(),
                    decision_id: None,
                    latency_ms: 1.0,
                    success: true,
                    now_ms: 1.0,
                    router: 0,
                    cache_hit: None,
                })
            },
        )
    })
}

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let iters = if quick { 30 } else { 20_000 };
    let tmp = std::env::temp_dir().join(format!("embedded-pick-bench-{}", std::process::id()));
    let shipped = Path::new("../models/default");
    let model_dir = if shipped.join("card.json").exists() {
        shipped.to_path_buf()
    } else {
        write_model_dir(&tmp, &random_model(50, 6, 42), "bench", 20, 1).expect("fixture");
        tmp.clone()
    };

    let mut cfg = Config::default();
    cfg.scoring.warmup_ms = 0;
    cfg.model.budget_us = 1_000_000;
    let view_at_ms = 100_000;
    let build_n = |cfg: Config, hub: Option<Arc<ModelHub>>, n: usize| {
        let mut b = Balancer::new(cfg, BalancerConfig::new("bench")).expect("valid");
        if let Some(hub) = hub {
            b = b.with_models(hub);
        }
        b.apply_view(&full_view(&b, n), view_at_ms, WALL)
            .expect("valid view");
        b
    };
    let build = |cfg: Config, hub: Option<Arc<ModelHub>>| build_n(cfg, hub, N);
    let rules = build(cfg.clone(), None);
    let (pool_256, pool_1024) = (
        build_n(cfg.clone(), None, 256),
        build_n(cfg.clone(), None, 1_024),
    );
    let mut mcfg = cfg.clone();
    mcfg.model.dir = model_dir;
    let hub = Arc::new(ModelHub::load(&mcfg.model, Arc::new(SystemClock::new())));
    let model = build(mcfg.clone(), Some(hub.clone()));
    let records = RecordBuffer::new(
        DEFAULT_RECORD_BUFFER,
        &mcfg.log,
        Arc::new(SystemClock::new()),
    );
    let logged = build(mcfg, Some(hub)).with_records(Arc::new(records));
    let blackout = build(cfg.clone(), None);
    let warm = build(cfg, None);
    let past_ttl = view_at_ms + blackout.config().view_ttl_ms + 1;

    let mut cases: Vec<(&str, Case<'_>)> = vec![
        ("p2c-least-request", p2c_case()),
        ("balancer rules only", balancer_case(&rules, view_at_ms, N)),
        (
            "balancer rules + locality",
            locality_case(&warm, view_at_ms),
        ),
        (MODEL_CASE, balancer_case(&model, view_at_ms, N)),
        (
            "balancer model + records",
            balancer_case(&logged, view_at_ms, N),
        ),
        ("balancer blackout", balancer_case(&blackout, past_ttl, N)),
        ("rules only, 256", balancer_case(&pool_256, view_at_ms, 256)),
        (
            "rules only, 1024",
            balancer_case(&pool_1024, view_at_ms, 1_024),
        ),
    ];
    if let Some(only) = arg_after("--only") {
        cases.retain(|(name, _)| *name == "p2c-least-request" || name.starts_with(&only));
    }
    let mut results = vec![Vec::new(); cases.len()];
    let mut model_ns = Vec::new();
    for _ in 0..ROUNDS {
        for (r, (name, case)) in results.iter_mut().zip(cases.iter_mut()) {
            let calls = match *name {
                "rules only, 256" => (iters / 10).max(30),
                "rules only, 1024" => (iters / 40).max(30),
                _ => iters,
            };
            let ns = case(calls);
            if *name == MODEL_CASE {
                model_ns.extend_from_slice(&ns);
            }
            r.push(percentiles(ns));
        }
    }
    let version = model
        .engine()
        .models()
        .current()
        .primary
        .model()
        .map_or("none loaded".to_owned(), |m| m.card.model_version.clone());
    println!(
        "pick for {N} candidates (policy p2c), per-call µs, median of {ROUNDS} interleaved rounds of {iters}; model: {version}"
    );
    for ((name, _), r) in cases.iter().zip(&results) {
        let p50 = median(r.iter().map(|x| x.0).collect());
        let p99 = median(r.iter().map(|x| x.1).collect());
        println!("  {name:<24} p50 {p50:>8.2}  p99 {p99:>8.2}");
    }
    let _ = std::fs::remove_dir_all(&tmp);
    if let Some(path) = calibrate_path() {
        write_calibration(&path, model_ns, &version);
    }
}

/// The argument after `flag`.
fn arg_after(flag: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == flag)?;
    args.get(i + 1).cloned()
}

/// `--calibrate FILE`, relative to the repository root.
fn calibrate_path() -> Option<std::path::PathBuf> {
    Some(Path::new("..").join(arg_after("--calibrate")?))
}

fn command_output(program: &str, args: &[&str]) -> String {
    std::process::Command::new(program)
        .args(args)
        .current_dir("..")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

fn write_calibration(path: &Path, mut ns: Vec<u64>, model: &str) {
    ns.sort_unstable();
    let q = |p: f64| ns[((ns.len() - 1) as f64 * p).round() as usize] as f64 / 1_000.0;
    let mut points: Vec<f64> = (0..100).map(|i| f64::from(i) / 100.0).collect();
    points.extend([0.995, 0.999, 1.0]);
    let pick_us: Vec<[f64; 2]> = points
        .into_iter()
        .map(|p| [p, (q(p) * 100.0).round() / 100.0])
        .collect();
    let cpu = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model_name = cpu
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map_or("unknown CPU", |l| l.trim_start_matches([' ', '\t', ':']));
    let cores = cpu.lines().filter(|l| l.starts_with("processor")).count();
    // The measured code: the library crates and this bench.
    let status = ["status", "--porcelain", "--untracked-files=no", "--"];
    let dirty = !command_output(
        "git",
        &[&status[..], &["crates", "evaluation/benches"]].concat(),
    )
    .is_empty();
    let cal = evaluation::embedded_calibration::EmbeddedPickCalibration {
        command: format!(
            "cargo bench -p evaluation --bench embedded_pick -- --calibrate {}",
            path.strip_prefix("..").unwrap_or(path).display()
        ),
        date: command_output("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]),
        commit: format!(
            "{}{}",
            command_output("git", &["rev-parse", "HEAD"]),
            if dirty { "-dirty" } else { "" }
        ),
        host: format!(
            "{} {}, {model_name}, {cores} logical cores",
            command_output("uname", &["-s", "-r"]),
            std::env::consts::ARCH
        ),
        candidates: N,
        samples: ns.len(),
        model: model.to_owned(),
        pick_us,
    };
    let text = serde_json::to_string_pretty(&cal).expect("serialisable");
    std::fs::write(path, text + "\n").expect("calibration written");
    println!("calibration written to {}", path.display());
}

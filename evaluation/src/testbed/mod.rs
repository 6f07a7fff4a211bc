//! Real testbed: `redis-server` workers on 127.0.0.1, the telemetry agent,
//! the scoring service over HTTP, and a load generator acting as the router.
//!
//! Per policy a fresh service (the `service` crate's axum app with the
//! default configuration, served in this process on a loopback port) and a
//! fresh agent (default 1 s interval) are started, so no state leaks from one
//! policy to the next; the workers are shared (`policy_run`). Once every
//! worker has reported (bounded polling), the load runs for `duration_s`,
//! the fault ([`faults`]) is injected at `fault_at_s` into worker 0 for
//! `fault_ms` (the [`loaded`] scenario has none: worker 0 is slow
//! throughout; nor has [`cache`]: the workers are caches before an
//! origin, warmed before measuring; nor has [`many_routers`]: several
//! routers send at once), and everything stops by itself. Processes are stopped by
//! pid on drop.
//!
//! What a user sees is measured, the same way for every arm
//! ([`request`]): latency from the request's scheduled arrival at the
//! router to the final reply, the pick (scorer call) and one retry (on a
//! refused connection or a timeout, on a fresh pick) included; a failed or
//! late scorer call is counted and the router picks by itself.

pub mod cache;
pub mod cache_aside;
pub mod conns;
pub mod credentials;
pub mod drain;
mod embedded;
pub mod faults;
pub mod loaded;
pub mod loadgen;
pub mod many_routers;
pub mod picker;
mod policy_run;
pub mod procs;
pub mod request;
mod routers_run;
mod summary;

use std::path::PathBuf;
use std::time::Instant;

use scorer_engine::config::Config;

use crate::arms::{self, Model};
use crate::run_summary::PolicyResult;
use crate::runner::ScenarioResults;
use policy_run::{Setup, retrain, run_policy};
use procs::{RedisProc, Scratch};

/// Options of `evaluate testbed`.
#[derive(clap::Args, Debug, Clone)]
pub struct TestbedArgs {
    /// Fault: `pause` (CLIENT PAUSE), `debug-sleep`, `bgsave`, `kill-restart`,
    /// `drain` (the operator drains worker 0: an override on the service,
    /// the endpoint out of a baseline's set), `scorer-down` (the service
    /// stopped and restarted empty);
    /// or `loaded`: real service times, one slow worker, 70% of capacity
    /// offered (`--rate` and the fault flags unused); or `cache`: the
    /// workers are LRU caches read cache-aside from an origin, the first
    /// 4 s of `--duration-s` warm them (the fault flags unused); or
    /// `many-routers`: `--routers` independent routers at once, real
    /// service times on identical workers, 70% of capacity offered (`--rate`
    /// and the fault flags unused; default arms `service-embedded`,
    /// `least-request-all`, `p2c-least-request`).
    #[arg(long, default_value = "pause")]
    pub scenario: String,
    /// Output directory.
    #[arg(long)]
    pub out: PathBuf,
    /// Comma-separated policy names (default: all).
    #[arg(long, value_delimiter = ',')]
    pub policies: Option<Vec<String>>,
    /// redis-server workers.
    #[arg(long, default_value_t = 6)]
    pub workers: usize,
    /// Load per policy, s.
    #[arg(long, default_value_t = 12.0)]
    pub duration_s: f64,
    /// Requests per second.
    #[arg(long, default_value_t = 400.0)]
    pub rate: f64,
    /// When the fault starts, s after the load starts.
    #[arg(long, default_value_t = 4.0)]
    pub fault_at_s: f64,
    /// Fault length, ms.
    #[arg(long, default_value_t = 3000)]
    pub fault_ms: u64,
    /// Per-attempt timeout, ms (one retry after a timeout or a refusal).
    #[arg(long, default_value_t = 500)]
    pub timeout_ms: u64,
    /// How long the router waits for a score before it picks by itself
    /// (P2C least-request over its own outstanding requests), ms.
    #[arg(long, default_value_t = picker::SCORER_TIMEOUT_MS)]
    pub scorer_timeout_ms: u64,
    /// Seed of the request stream.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The service arms' router sends its outcomes in one batch at least
    /// this often, ms, as the API docs advise; 0 sends one feedback call
    /// per outcome.
    #[arg(long, default_value_t = DEFAULT_FEEDBACK_FLUSH_MS)]
    pub feedback_flush_ms: u64,
    /// Diagnostic: the baselines also ask the service for a score and send
    /// it the outcome on every request, as a service arm does, but route by
    /// their own pick. Their latency then carries the scorer call's cost on
    /// this shared host without the scorer's routing.
    #[arg(long)]
    pub baselines_call_service: bool,
    /// Independent routers in `many-routers` (each its own load generator,
    /// connections, random streams and, embedded, balancer).
    #[arg(long, default_value_t = many_routers::DEFAULT_ROUTERS)]
    pub routers: usize,
}

/// The router's feedback flush interval, ms: the low end of the API docs'
/// advice (2–5 ms), ten Redis operations long on this testbed.
pub const DEFAULT_FEEDBACK_FLUSH_MS: u64 = 2;
/// Longest feedback flush interval, ms.
pub const MAX_FEEDBACK_FLUSH_MS: u64 = 1_000;

impl TestbedArgs {
    /// Defaults for `scenario`, writing to `out`.
    pub fn defaults(scenario: &str, out: &std::path::Path) -> Self {
        Self {
            scenario: scenario.to_owned(),
            out: out.to_path_buf(),
            policies: None,
            workers: 6,
            duration_s: 12.0,
            rate: 400.0,
            fault_at_s: 4.0,
            fault_ms: 3000,
            timeout_ms: 500,
            scorer_timeout_ms: picker::SCORER_TIMEOUT_MS,
            seed: 1,
            feedback_flush_ms: DEFAULT_FEEDBACK_FLUSH_MS,
            baselines_call_service: false,
            routers: many_routers::DEFAULT_ROUTERS,
        }
    }
}

/// The measured part of a run, s: `cache` warms up first.
pub fn measured_s(args: &TestbedArgs) -> f64 {
    if args.scenario == cache::NAME {
        args.duration_s - cache::WARMUP_S
    } else {
        args.duration_s
    }
}

/// Largest testbed pool: one `redis-server` process per worker.
pub const MAX_WORKERS: usize = 64;
/// Longest load per policy, s.
pub const MAX_DURATION_S: f64 = 600.0;
/// Highest request rate, requests/s (one loopback load generator).
pub const MAX_RATE: f64 = 100_000.0;

impl TestbedArgs {
    /// Checks the ranges: `workers` 2..=[`MAX_WORKERS`], `duration_s`
    /// 1..=[`MAX_DURATION_S`], `rate` in (0, [`MAX_RATE`]], `timeout_ms`
    /// ≥ 1, and the fault inside the run (`fault_at_s` ≥ 0 and
    /// `fault_at_s` + `fault_ms` ≤ `duration_s`), so every policy meets the
    /// same fault and none carries into the next policy's setup.
    ///
    /// # Errors
    /// The first value out of range, named by its flag.
    pub fn validate(&self) -> Result<(), String> {
        if !(2..=MAX_WORKERS).contains(&self.workers) {
            return Err(format!(
                "--workers must be in 2..={MAX_WORKERS}, got {}",
                self.workers
            ));
        }
        if !(self.duration_s.is_finite() && (1.0..=MAX_DURATION_S).contains(&self.duration_s)) {
            return Err(format!(
                "--duration-s must be in 1..={MAX_DURATION_S} s, got {}",
                self.duration_s
            ));
        }
        if !(self.rate.is_finite() && self.rate > 0.0 && self.rate <= MAX_RATE) {
            return Err(format!(
                "--rate must be in (0, {MAX_RATE}] requests/s, got {}",
                self.rate
            ));
        }
        if self.scenario == cache::NAME && self.duration_s < cache::WARMUP_S + 1.0 {
            return Err(format!(
                "--duration-s must be at least {} s in `cache` ({} s warm-up, then at least 1 s measured), got {}",
                cache::WARMUP_S + 1.0,
                cache::WARMUP_S,
                self.duration_s
            ));
        }
        if !(1..=many_routers::MAX_ROUTERS).contains(&self.routers) {
            return Err(format!(
                "--routers must be in 1..={}, got {}",
                many_routers::MAX_ROUTERS,
                self.routers
            ));
        }
        if self.timeout_ms == 0 {
            return Err("--timeout-ms must be at least 1".to_owned());
        }
        if self.scorer_timeout_ms == 0 {
            return Err("--scorer-timeout-ms must be at least 1".to_owned());
        }
        if self.feedback_flush_ms > MAX_FEEDBACK_FLUSH_MS {
            return Err(format!(
                "--feedback-flush-ms must be in 0..={MAX_FEEDBACK_FLUSH_MS}, got {}",
                self.feedback_flush_ms
            ));
        }
        if self.fault_ms == 0 {
            return Err("--fault-ms must be at least 1 (the run injects its fault)".to_owned());
        }
        let fault_end_s = self.fault_at_s + self.fault_ms as f64 / 1000.0;
        if !(self.fault_at_s.is_finite()
            && self.fault_at_s >= 0.0
            && fault_end_s <= self.duration_s)
        {
            return Err(format!(
                "the fault must lie inside the run: need 0 <= --fault-at-s ({}) and --fault-at-s + --fault-ms/1000 ({fault_end_s}) <= --duration-s ({})",
                self.fault_at_s, self.duration_s
            ));
        }
        Ok(())
    }
}

/// Run `evaluate testbed` and write its results.
///
/// # Errors
/// As [`run`], or output that cannot be written.
pub fn run_cli(args: &TestbedArgs, command: &str) -> Result<(), String> {
    // Refuse an unusable --out before the run, not after it.
    std::fs::create_dir_all(&args.out).map_err(|e| format!("--out {}: {e}", args.out.display()))?;
    let r = run(args)?;
    let w = crate::report::write_scenario(&args.out, &r, command)?;
    print!("{}", crate::report::table(&r.policies));
    println!("wrote {} and {}", w.json.display(), w.markdown.display());
    Ok(())
}

/// Run the testbed (its own tokio runtime).
///
/// # Errors
/// redis-server missing, a service or agent that cannot start, unknown names.
pub fn run(args: &TestbedArgs) -> Result<ScenarioResults, String> {
    if !faults::FAULTS.contains(&args.scenario.as_str())
        && ![loaded::NAME, cache::NAME, many_routers::NAME].contains(&args.scenario.as_str())
    {
        return Err(format!(
            "unknown testbed scenario `{}`: expected one of {}, {}, {}, {}",
            args.scenario,
            faults::FAULTS.join(", "),
            loaded::NAME,
            cache::NAME,
            many_routers::NAME
        ));
    }
    let default_arms: &[&str] = if args.scenario == many_routers::NAME {
        &many_routers::ARMS
    } else {
        &arms::POLICIES
    };
    let names: Vec<String> = args
        .policies
        .clone()
        .unwrap_or_else(|| default_arms.iter().map(|s| (*s).to_owned()).collect());
    arms::check_names(&names)?;
    args.validate()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let mut running = Box::pin(run_async(args, &names));
    let finished = rt.block_on(async {
        tokio::select! {
            r = &mut running => Some(r),
            () = scorer_signal::interrupt_or_terminate() => None,
        }
    });
    match finished {
        Some(r) => r,
        None => {
            // Dropping the run (outside the runtime: it owns the service's
            // own runtime) stops every redis-server by pid and removes the
            // scratch directory, so SIGINT or SIGTERM leaves nothing behind
            // (found by a fresh-eyes run).
            drop(running);
            Err("interrupted by a signal; workers stopped, scratch removed".to_owned())
        }
    }
}

async fn run_async(args: &TestbedArgs, names: &[String]) -> Result<ScenarioResults, String> {
    let n = args.workers;
    let scratch = Scratch::new("testbed");
    let mut workers = Vec::with_capacity(n);
    for i in 0..n {
        workers.push(RedisProc::start(&scratch.0.join(format!("w{i}"))).await?);
    }
    faults::prepare(&args.scenario, &workers[0]).await?;
    let is_loaded = args.scenario == loaded::NAME;
    let is_cache = args.scenario == cache::NAME;
    let is_many = args.scenario == many_routers::NAME;
    let mut origin = None;
    let mut cache_note = String::new();
    if is_cache {
        let o = RedisProc::start(&scratch.0.join("origin")).await?;
        cache::preload_origin(&o).await?;
        cache_note = cache::describe(&cache::make_caches(&workers).await?);
        origin = Some(o);
    }
    let origin_port = origin.as_ref().map(|o| o.port);
    // The fault window, ms (none in `loaded`: worker 0 is slow throughout;
    // none in `cache` nor in `many-routers`) and none on a worker when the
    // service is what fails.
    let fault =
        (!is_loaded && !is_cache && !is_many && args.scenario != faults::SCORER_DOWN).then(|| {
            let from = args.fault_at_s * 1000.0;
            (0, from, from + args.fault_ms as f64)
        });
    let cores = summary::shared_cores();
    let mut out = ScenarioResults {
        mode: "testbed".to_owned(),
        scenario: args.scenario.clone(),
        description: summary::describe(args, cores, &cache_note),
        seed: args.seed,
        seeds: Vec::new(),
        workers: n,
        duration_s: measured_s(args),
        load: if is_loaded {
            loaded::LOAD
        } else if is_many {
            many_routers::LOAD
        } else {
            0.0
        },
        routers: if is_many { args.routers } else { 1 },
        impaired_worker: (!is_cache && !is_many).then_some(0),
        parameters: None,
        service_config_default: true,
        policies: Vec::new(),
        runs: Vec::new(),
    };
    for name in names {
        let started = Instant::now();
        let mut setup = Setup {
            seed: args.seed,
            origin_port,
            ..Setup::default()
        };
        let arm = arms::spec(name).ok_or_else(|| format!("unknown policy `{name}`"))?;
        if arm.sim_only() {
            out.policies.push(PolicyResult::skipped(
                name,
                "skipped: it reads the simulator's true worker state, which a real cluster does not expose",
            ));
            continue;
        }
        let mut retrained = None;
        if arm.model == Model::Shipped {
            setup.model_dir = Some(arms::model::default_model_dir());
        } else if arm.model == Model::Retrained {
            match retrain(args, &mut workers, origin_port).await {
                Ok(r) => {
                    setup.model_dir = Some(r.model_dir.clone());
                    retrained = Some(r);
                }
                Err(reason) => {
                    out.policies
                        .push(PolicyResult::skipped(name, &format!("skipped: {reason}")));
                    continue;
                }
            }
        }
        let run = run_policy(args, arm, &setup, &mut workers).await?;
        let mut rec = summary::record(&run.load, n, measured_s(args) * 1000.0, summary::WINDOW_MS);
        rec.herding = run.herding;
        let mut p = summary::policy_result(name, &rec, &run.load, fault, cores);
        p.cache = run
            .cache
            .as_ref()
            .map(|c| crate::cache_summary::CacheSummary::from_redis(c, cache::VALUE_BYTES));
        p.redis_cache = run.cache;
        p.model = many_routers::merge_model_infos(
            run.hubs
                .iter()
                .map(|h| {
                    arms::model::ModelArmInfo::from_hub(
                        h,
                        &arms::selection_policy(name, &Config::default()),
                        None,
                        retrained.as_ref().map(|r| r.info.clone()),
                    )
                })
                .collect(),
        );
        eprintln!(
            "testbed {} {name}: {} requests, p99 {} ms, pick p50/p99 {}/{} µs, {} scorer errors, {} retries, {:.1} s",
            args.scenario,
            run.load.samples.len(),
            p.p99_ms.map_or("n/a".to_owned(), |v| format!("{v:.2}")),
            p.pick_us_p50
                .map_or("n/a".to_owned(), |v| format!("{v:.0}")),
            p.pick_us_p99
                .map_or("n/a".to_owned(), |v| format!("{v:.0}")),
            run.load.scorer_errors,
            rec.retries,
            started.elapsed().as_secs_f64()
        );
        if let Some(c) = &p.redis_cache {
            let pct = |v: Option<f64>| v.map_or("n/a".to_owned(), |v| format!("{:.1}%", v * 100.0));
            eprintln!(
                "testbed cache {name}: hit rate {} from Redis INFO, {} counted by the router; {} origin reads, {} keys evicted",
                pct(c.hit_rate_redis),
                pct(c.hit_rate_router),
                c.origin_reads,
                c.evicted_keys
            );
        }
        out.policies.push(p);
        out.runs.push((name.clone(), rec));
    }
    Ok(out)
}

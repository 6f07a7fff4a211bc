//! Real testbed: `redis-server` workers on 127.0.0.1, the telemetry agent,
//! the scoring service over HTTP, and a load generator acting as the router.
//!
//! Per policy a fresh service (the `service` crate's axum app with the
//! default configuration, served in this process on a loopback port) and a
//! fresh agent (default 1 s interval) are started, so no state leaks from one
//! policy to the next; the workers are shared. Once every worker has
//! reported (bounded polling), the load runs for `duration_s`, the fault
//! ([`faults`]) is injected at `fault_at_s` into worker 0 for `fault_ms`,
//! and everything stops by itself. Processes are stopped by pid on drop.

pub mod faults;
pub mod loadgen;
pub mod procs;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use service::clock::SystemClock;
use service::config::Config;
use service::model::ModelHub;
use service::{AppState, Engine};

use crate::metrics::PolicyResult;
use crate::policies::{self, worker_id};
use crate::runner::ScenarioResults;
use crate::sim::RunRecord;
use loadgen::{Conns, Load, Picker};
use procs::{RedisProc, Scratch};

/// Options of `evaluate testbed`.
#[derive(clap::Args, Debug, Clone)]
pub struct TestbedArgs {
    /// Fault: `pause` (CLIENT PAUSE), `debug-sleep`, `bgsave`, `kill-restart`.
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
    /// Per-request timeout, ms.
    #[arg(long, default_value_t = 500)]
    pub timeout_ms: u64,
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
            seed: 1,
            feedback_flush_ms: DEFAULT_FEEDBACK_FLUSH_MS,
            baselines_call_service: false,
        }
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
        if self.timeout_ms == 0 {
            return Err("--timeout-ms must be at least 1".to_owned());
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
    if !faults::FAULTS.contains(&args.scenario.as_str()) {
        return Err(format!(
            "unknown testbed scenario `{}`: expected one of {}",
            args.scenario,
            faults::FAULTS.join(", ")
        ));
    }
    let names: Vec<String> = args
        .policies
        .clone()
        .unwrap_or_else(|| policies::POLICIES.iter().map(|s| (*s).to_owned()).collect());
    policies::check_names(&names)?;
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
            () = service::signal::interrupt_or_terminate() => None,
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
    let fault_from = args.fault_at_s * 1000.0;
    let fault_to = fault_from + args.fault_ms as f64;
    let window_ms = 500.0;
    let mut out = ScenarioResults {
        mode: "testbed".to_owned(),
        scenario: args.scenario.clone(),
        description: format!(
            "{n} real redis-server workers on 127.0.0.1, agent every 1 s, service over HTTP (default config); \
             open-loop Poisson load {:.0} req/s for {:.0} s per policy, 10% SET, timeout {} ms, no retries; \
             fault `{}` on w0 at {:.1} s for {} ms ({}). The service arms' outcomes go back {}.{} \
             Latency is the Redis operation's; the pick's own cost is listed separately.",
            args.rate,
            args.duration_s,
            args.timeout_ms,
            args.scenario,
            args.fault_at_s,
            args.fault_ms,
            faults::describe(&args.scenario),
            if args.feedback_flush_ms == 0 {
                "in one feedback call each".to_owned()
            } else {
                format!(
                    "in feedback batches every {} ms or {} outcomes",
                    args.feedback_flush_ms,
                    loadgen::FEEDBACK_BATCH_MAX
                )
            },
            if args.baselines_call_service {
                " Diagnostic run: the baselines also call the service for a score and send it the \
                 outcome on every request, and route by their own pick."
            } else {
                ""
            },
        ),
        seed: args.seed,
        workers: n,
        duration_s: args.duration_s,
        load: 0.0,
        routers: 1,
        impaired_worker: Some(0),
        parameters: None,
        service_config_default: true,
        policies: Vec::new(),
        runs: Vec::new(),
    };
    for name in names {
        let started = Instant::now();
        let mut setup = Setup {
            seed: args.seed,
            ..Setup::default()
        };
        let mut retrained = None;
        if name == "model" || name == "service" {
            setup.model_dir = Some(crate::model_arms::default_model_dir());
        } else if name == "model-retrained" {
            match retrain(args, &mut workers).await {
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
        let picker = picker_name(name);
        let (samples, dropped, pick_p99, hub) =
            run_policy(args, &picker, &setup, &mut workers).await?;
        let rec = record(&samples, n, args.duration_s * 1000.0, window_ms);
        let mut p = PolicyResult::from_record(name, &rec, Some((0, fault_from, fault_to)));
        p.fallbacks = Some(dropped);
        p.model = hub.map(|h| {
            crate::model_arms::ModelArmInfo::from_hub(
                &h,
                &crate::model_arms::selection_policy(name, &Config::default()),
                None,
                retrained.as_ref().map(|r| r.info.clone()),
            )
        });
        eprintln!(
            "testbed {} {name}: {} requests, p99 {} ms, pick p99 {pick_p99:.2} ms, {:.1} s",
            args.scenario,
            samples.len(),
            p.p99_ms.map_or("n/a".to_owned(), |v| format!("{v:.2}")),
            started.elapsed().as_secs_f64()
        );
        out.policies.push(p);
        out.runs.push((name.clone(), rec));
    }
    Ok(out)
}

/// Window picks and latencies of the samples.
fn record(samples: &[loadgen::Sample], n: usize, duration_ms: f64, window_ms: f64) -> RunRecord {
    let windows = (duration_ms / window_ms).ceil().max(1.0) as usize;
    let mut rec = RunRecord {
        window_picks: vec![vec![0; n]; windows],
        window_ms,
        ..RunRecord::default()
    };
    for s in samples {
        let w = ((s.at_ms / window_ms) as usize).min(windows - 1);
        rec.window_picks[w][s.worker] += 1;
        rec.latencies_ms.push(s.latency_ms);
        rec.attempts += 1;
        if !s.success {
            rec.failed += 1;
        }
        if s.timed_out {
            rec.timeouts += 1;
        }
    }
    rec
}

/// One policy: fresh service and agent, wait for telemetry, load + fault.
/// How one run's service is set up beyond the default config.
#[derive(Debug, Default)]
struct Setup {
    /// Load this model into the scoring path (default budget: wall-clock
    /// time is real here, so budget misses are real and counted in
    /// results.json's `model.fallbacks`).
    model_dir: Option<PathBuf>,
    /// Write the decision log here (the `model-retrained` logging run).
    log_dir: Option<PathBuf>,
    /// Load generator seed.
    seed: u64,
}

/// The policy that picks for `name`: the model arms pick as the shipped
/// service does (`service-rules`: the score request names no policy, so the
/// configured default selects; the model is the setup's).
fn picker_name(name: &str) -> String {
    if policies::is_model_arm(name) {
        "service-rules".to_owned()
    } else {
        name.to_owned()
    }
}

/// `model-retrained` in the testbed: the `service-rules` arm runs with a
/// decision log on a held-out seed (seed + `RETRAIN_SEED_OFFSET`), the
/// trainer library trains on it (`trainer train`'s defaults), and the
/// caller runs the scenario again with that model.
async fn retrain(
    args: &TestbedArgs,
    workers: &mut [RedisProc],
) -> Result<crate::model_arms::Retrained, String> {
    let (work, keep) = crate::model_arms::retrain_dir(None, &format!("testbed-{}", args.scenario));
    let seed = args.seed + crate::model_arms::RETRAIN_SEED_OFFSET;
    let setup = Setup {
        model_dir: None,
        log_dir: Some(work.join("logs")),
        seed,
    };
    run_policy(
        args,
        crate::model_arms::RETRAIN_LOGGING_ARM,
        &setup,
        workers,
    )
    .await?;
    let logs = work.join("logs");
    tokio::task::spawn_blocking(move || crate::model_arms::train_on_logs(&logs, &work, keep, seed))
        .await
        .map_err(|e| e.to_string())?
}

/// One policy: fresh service and agent, wait for telemetry, load + fault.
async fn run_policy(
    args: &TestbedArgs,
    name: &str,
    setup: &Setup,
    workers: &mut [RedisProc],
) -> Result<(Vec<loadgen::Sample>, u64, f64, Option<Arc<ModelHub>>), String> {
    let n = workers.len();
    let mut config = Config::default();
    let mut engine = Engine::new(config.clone());
    let hub = match &setup.model_dir {
        Some(dir) => {
            let hub = crate::model_arms::load_hub(dir, config.model.budget_us, &config)?;
            engine = engine.with_models(hub.clone());
            Some(hub)
        }
        None => None,
    };
    let log = match &setup.log_dir {
        Some(dir) => {
            config.log.dir = dir.join("decisions");
            let log = service::decision_log::DecisionLog::start(
                config.log.clone(),
                Arc::new(SystemClock::new()),
            )
            .map_err(|e| e.to_string())?;
            let log = Arc::new(log);
            engine = engine.with_log(log.clone());
            Some(log)
        }
        None => None,
    };
    // The service and the agent get their own runtime, so the load
    // generator's tasks cannot starve them (and the other way round).
    let svc_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("testbed-service")
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    std_listener
        .set_nonblocking(true)
        .map_err(|e| e.to_string())?;
    let base = format!(
        "http://{}",
        std_listener.local_addr().map_err(|e| e.to_string())?
    );
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = svc_rt.spawn(async move {
        let state = AppState::new(engine, Arc::new(SystemClock::new()));
        let listener = tokio::net::TcpListener::from_std(std_listener)?;
        axum::serve(listener, service::app(state))
            .with_graceful_shutdown(async {
                let _ = stop_rx.await;
            })
            .await
    });
    let specs = workers
        .iter()
        .enumerate()
        .map(|(i, w)| agent::WorkerSpec {
            id: worker_id(i),
            host: "127.0.0.1".to_owned(),
            port: w.port,
        })
        .collect();
    let agent_cfg = agent::AgentConfig::new(base.clone(), specs);
    let (agent_stop_tx, agent_stop_rx) = tokio::sync::oneshot::channel::<()>();
    let agent_task = svc_rt.spawn(agent::run(agent_cfg, async {
        let _ = agent_stop_rx.await;
    }));
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .map_err(|e| e.to_string())?;
    let ready = wait_all_reported(&http, &base, n, Duration::from_secs(10)).await;
    let result = if ready {
        let picker = if let Some(policy) = name.strip_prefix("rules-") {
            Picker::Service {
                http: http.clone(),
                base: base.clone(),
                policy: Some(policy.to_owned()),
            }
        } else if policies::is_shipped_arm(name) {
            // As shipped: the score request names no policy.
            Picker::Service {
                http: http.clone(),
                base: base.clone(),
                policy: None,
            }
        } else {
            let router = policies::build(name, n, None, &Config::default(), None)
                .ok_or_else(|| format!("policy {name}"))?;
            Picker::Baseline {
                router: Box::new(Mutex::new((
                    router,
                    ChaCha8Rng::seed_from_u64(setup.seed ^ 0x0b0c),
                ))),
                score_call: args
                    .baselines_call_service
                    .then(|| (http.clone(), base.clone())),
            }
        };
        let conns = Arc::new(Conns::new(workers.iter().map(|w| w.port).collect()));
        let load = Load {
            rate: args.rate,
            duration: Duration::from_secs_f64(args.duration_s),
            timeout: Duration::from_millis(args.timeout_ms),
            put_fraction: 0.1,
            keys: 1000,
            seed: setup.seed,
            max_outstanding: 4096,
            feedback_flush_ms: args.feedback_flush_ms,
        };
        let load_fut = loadgen::run(Arc::new(picker), conns, n, &load);
        let fault_fut = async {
            tokio::time::sleep(Duration::from_secs_f64(args.fault_at_s)).await;
            faults::inject(
                &args.scenario,
                &mut workers[0],
                Duration::from_millis(args.fault_ms),
            )
            .await
        };
        let ((samples, dropped), fault) = tokio::join!(load_fut, fault_fut);
        fault?;
        let mut picks: Vec<f64> = samples.iter().map(|s| s.pick_ms).collect();
        picks.sort_by(f64::total_cmp);
        let pick_p99 = crate::metrics::percentile_sorted(&picks, 0.99);
        // Let a pause / sleep end before the next policy (a killed worker
        // is back already: its injection returns once it answers again).
        if args.scenario != "kill-restart" {
            tokio::time::sleep(Duration::from_millis(args.fault_ms.min(5_000))).await;
        }
        Ok((samples, dropped, pick_p99, hub))
    } else {
        Err("the agent's telemetry did not reach the service within 10 s".to_owned())
    };
    let _ = agent_stop_tx.send(());
    let _ = agent_task.await;
    let _ = stop_tx.send(());
    let _ = server.await;
    svc_rt.shutdown_background();
    if let Some(log) = log {
        // Requests have drained: close the files so the trainer reads them.
        log.shutdown().map_err(|e| e.to_string())?;
    }
    result
}

/// Poll `/v1/score` (policy none) until every worker is eligible or `limit` passes.
async fn wait_all_reported(http: &reqwest::Client, base: &str, n: usize, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    let body = serde_json::json!({"key": "k", "candidates": (0..n).map(worker_id).collect::<Vec<_>>(), "policy": "none"});
    while Instant::now() < deadline {
        if let Ok(resp) = http
            .post(format!("{base}/v1/score"))
            .json(&body)
            .send()
            .await
            && let Ok(v) = resp.json::<serde_json::Value>().await
            && v["scores"]
                .as_array()
                .is_some_and(|a| a.len() == n && a.iter().all(|s| s["eligible"] == true))
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

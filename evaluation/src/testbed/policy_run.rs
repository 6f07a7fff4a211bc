//! One arm's run: a fresh service (the `service` crate's axum app, served
//! in this process on a loopback port, on its own runtime) and a fresh
//! agent, bounded polling until every worker has reported, then the load
//! with the scenario's fault (or the `loaded` scenario's service times, or
//! the `cache` scenario's flushed caches, warm-up and cache counts).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use scorer_balancer::{Balancer, BalancerConfig};
use scorer_core::clock::SystemClock;
use scorer_engine::Engine;
use scorer_engine::config::Config;
use scorer_model::ModelHub;
use service::AppState;

use super::cache::{self, CacheResult};
use super::cache_aside::CacheAside;
use super::conns::Conns;
use super::drain::{DRAIN, Drainer};
use super::embedded::EmbeddedPicker;
use super::loadgen::{self, Load};
use super::many_routers;
use super::picker::Picker;
use super::procs::RedisProc;
use super::{TestbedArgs, faults, loaded};
use crate::arms::model::{self, RETRAIN_LOGGING_ARM};
use crate::arms::service_ids::worker_id;
use crate::arms::{ArmSpec, Kind};

/// How one run's service is set up beyond the default config.
#[derive(Debug, Default)]
pub(super) struct Setup {
    /// Load this model into the scoring path (default budget: wall-clock
    /// time is real here, so budget misses are real and counted in
    /// results.json's `model.fallbacks`).
    pub model_dir: Option<PathBuf>,
    /// Write the decision log here (the `model-retrained` logging run).
    pub log_dir: Option<PathBuf>,
    /// Load generator seed.
    pub seed: u64,
    /// The `cache` scenario's origin `redis-server` port.
    pub origin_port: Option<u16>,
}

/// What one arm's run saw.
pub(super) struct PolicyRun {
    /// The load's requests and the router's counters (every router's).
    pub load: loadgen::Run,
    /// With several routers: how many picked the same worker at once.
    pub herding: Option<f64>,
    /// The arm's model hubs: the service's, or one per embedded balancer.
    pub hubs: Vec<Arc<ModelHub>>,
    /// The `cache` scenario's figures over the measured run.
    pub cache: Option<CacheResult>,
}

/// `model-retrained` in the testbed: the `service-rules` arm runs with a
/// decision log on a held-out seed (seed + `RETRAIN_SEED_OFFSET`), the
/// trainer library trains on it (`trainer train`'s defaults), and the
/// caller runs the scenario again with that model.
pub(super) async fn retrain(
    args: &TestbedArgs,
    workers: &mut [RedisProc],
    origin_port: Option<u16>,
) -> Result<model::Retrained, String> {
    let (work, keep) = model::retrain_dir(None, &format!("testbed-{}", args.scenario));
    let seed = args.seed + model::RETRAIN_SEED_OFFSET;
    let setup = Setup {
        model_dir: None,
        log_dir: Some(work.join("logs")),
        seed,
        origin_port,
    };
    let arm = crate::arms::spec(RETRAIN_LOGGING_ARM).ok_or("no logging arm")?;
    run_policy(args, arm, &setup, workers).await?;
    let logs = work.join("logs");
    tokio::task::spawn_blocking(move || model::train_on_logs(&logs, &work, keep, seed))
        .await
        .map_err(|e| e.to_string())?
}

/// `service-embedded`: decides in this process with `config` (and `hub`)
/// as router `router_id`, following the service's view stream at `base`.
fn embedded_picker(
    config: &Config,
    router_id: &str,
    n: usize,
    http: &reqwest::Client,
    base: &str,
    seed: u64,
    hub: Option<Arc<ModelHub>>,
) -> Result<Picker, String> {
    let mut b =
        Balancer::new(config.clone(), BalancerConfig::new(router_id)).map_err(|e| e.to_string())?;
    if let Some(hub) = hub {
        b = b.with_models(hub);
    }
    let rng = ChaCha8Rng::seed_from_u64(seed ^ 0x0b0c);
    let picker = EmbeddedPicker::start(b, n, http.clone(), base, rng);
    Ok(Picker::Embedded(Box::new(picker)))
}

/// How `arm` picks, calling the service at `base` when it is a service
/// arm (or, diagnostic, a baseline with `--baselines-call-service`); the
/// model arms pick as the shipped service does (the model is the setup's).
/// A baseline's random choices come from `seed`.
fn picker(
    args: &TestbedArgs,
    arm: &ArmSpec,
    seed: u64,
    n: usize,
    http: &reqwest::Client,
    base: &str,
) -> Result<Picker, String> {
    let scorer_timeout = Duration::from_millis(args.scorer_timeout_ms);
    match arm.kind {
        Kind::Service(selection) => Ok(Picker::Service {
            http: http.clone(),
            base: base.to_owned(),
            policy: selection.policy().map(str::to_owned),
            scorer_timeout,
        }),
        Kind::Local(make) => Ok(Picker::Baseline {
            router: Arc::new(Mutex::new((
                make(n),
                ChaCha8Rng::seed_from_u64(seed ^ 0x0b0c),
            ))),
            score_call: args
                .baselines_call_service
                .then(|| (http.clone(), base.to_owned(), scorer_timeout)),
        }),
        Kind::Oracle(_) | Kind::Embedded => Err(format!("{}: no HTTP picker", arm.name)),
    }
}

/// The measured load of one run: the `loaded` and `many-routers`
/// scenarios offer their share of the workers' capacity (`many-routers`:
/// in all, split over its routers by the caller); the others offer
/// `--rate` (`cache`: after its warm-up, over its key space).
fn load(args: &TestbedArgs, setup: &Setup, n: usize) -> Load {
    let is_cache = args.scenario == cache::NAME;
    Load {
        rate: match args.scenario.as_str() {
            loaded::NAME => loaded::rate(n),
            many_routers::NAME => many_routers::rate(n),
            _ => args.rate,
        },
        duration: Duration::from_secs_f64(super::measured_s(args)),
        timeout: Duration::from_millis(args.timeout_ms),
        put_fraction: 0.1,
        keys: if is_cache { cache::KEYS } else { 1000 },
        seed: setup.seed,
        max_outstanding: 4096,
        feedback_flush_ms: args.feedback_flush_ms,
        cost_sigma: loaded::SIGMA,
    }
}

/// Seed offset of the `cache` scenario's warm-up requests.
const WARMUP_STREAM: u64 = 0x3a23;

/// The `cache` scenario's warm-up: the first [`cache::WARMUP_S`] of the
/// run, with its own requests.
fn warmup(measured: &Load) -> Load {
    Load {
        duration: Duration::from_secs_f64(cache::WARMUP_S),
        seed: measured.seed ^ WARMUP_STREAM,
        ..measured.clone()
    }
}

/// Longest wait for the workers to answer what was queued before the next
/// arm (the `loaded` scenario's timed-out requests still hold their sleeps).
const DRAIN_LIMIT: Duration = Duration::from_secs(30);

/// One policy: fresh service and agent, wait for telemetry, load + fault.
pub(super) async fn run_policy(
    args: &TestbedArgs,
    arm: &ArmSpec,
    setup: &Setup,
    workers: &mut [RedisProc],
) -> Result<PolicyRun, String> {
    let n = workers.len();
    if setup.origin_port.is_some() {
        cache::flush(workers).await?;
    }
    let mut config = Config::default();
    let credentials = super::credentials::RunCredentials::install(&mut config)?;
    // Several routers: each its own token and id, as separate processes.
    let many = args.scenario == many_routers::NAME;
    let mut router_credentials = Vec::new();
    if many {
        for i in 0..args.routers {
            let id = many_routers::router_id(i);
            let c = super::credentials::RunCredentials::add_router(&mut config, &id)?;
            router_credentials.push((id, c));
        }
    }
    let hub = match &setup.model_dir {
        Some(dir) => Some(model::load_hub(dir, config.model.budget_us, &config)?),
        None => None,
    };
    let log = match &setup.log_dir {
        Some(dir) => {
            config.log.dir = dir.join("decisions");
            let log =
                scorer_log::DecisionLog::start(config.log.clone(), Arc::new(SystemClock::new()))
                    .map_err(|e| e.to_string())?;
            Some(Arc::new(log))
        }
        None => None,
    };
    // A fresh engine: at the start, and when `scorer-down` restarts the
    // service (its state is gone; the model and the log carry over).
    let engine = {
        let (config, hub, log) = (config.clone(), hub.clone(), log.clone());
        move || {
            let mut engine = Engine::new(config.clone());
            if let Some(hub) = &hub {
                engine = engine.with_models(hub.clone());
            }
            if let Some(log) = &log {
                engine = engine.with_log(log.clone());
            }
            engine
        }
    };
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    std_listener
        .set_nonblocking(true)
        .map_err(|e| e.to_string())?;
    let base = format!(
        "http://{}",
        std_listener.local_addr().map_err(|e| e.to_string())?
    );
    let http = credentials
        .router
        .apply(reqwest::Client::builder())
        .timeout(Duration::from_secs(2))
        .build()
        .map_err(|e| e.to_string())?;
    // Each embedded balancer loads its own copy of the model: its counters
    // are the arm's, not the service's.
    let embedded = matches!(arm.kind, Kind::Embedded);
    let embedded_hub = || match &setup.model_dir {
        Some(dir) if embedded => model::load_hub(dir, config.model.budget_us, &config).map(Some),
        _ => Ok(None),
    };
    let admin_http = credentials
        .admin
        .apply(reqwest::Client::builder())
        .timeout(Duration::from_secs(2))
        .build()
        .map_err(|e| e.to_string())?;
    // One router (the default), or one per id, each with its own client.
    let mut routers = Vec::new();
    if many {
        for (i, (id, c)) in router_credentials.iter().enumerate() {
            let client = c
                .apply(reqwest::Client::builder())
                .timeout(Duration::from_secs(2))
                .build()
                .map_err(|e| e.to_string())?;
            routers.push((id.clone(), client, many_routers::router_seed(setup.seed, i)));
        }
    } else {
        let id = super::credentials::ROUTER_NAME.to_owned();
        routers.push((id, http.clone(), setup.seed));
    }
    let mut pickers = Vec::with_capacity(routers.len());
    let mut arm_hubs = Vec::new();
    for (id, client, seed) in &routers {
        pickers.push(if embedded {
            let h = embedded_hub()?;
            arm_hubs.extend(h.clone());
            embedded_picker(&config, id, n, client, &base, *seed, h)?
        } else {
            picker(args, arm, *seed, n, client, &base)?
        });
    }
    if !embedded {
        arm_hubs.extend(hub.clone());
    }
    // The service and the agent get their own runtimes, so the load
    // generator's tasks cannot starve them (and the other way round); the
    // service's goes whole when `scorer-down` stops it, connections and all.
    let runtime = |threads: usize, name: &str| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name(name)
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    };
    let addr = std_listener.local_addr().map_err(|e| e.to_string())?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let start_service = |listener: Option<std::net::TcpListener>| {
        let rt = runtime(2, "testbed-service")?;
        let (mut stop_rx, engine) = (stop_rx.clone(), engine());
        let task = rt.spawn(async move {
            let listener = match listener {
                Some(l) => tokio::net::TcpListener::from_std(l)?,
                None => tokio::net::TcpListener::bind(addr).await?,
            };
            let state = AppState::new(engine, Arc::new(SystemClock::new()));
            let hub = state.view_hub.clone();
            axum::serve(listener, service::app(state))
                .with_graceful_shutdown(async move {
                    let _ = stop_rx.wait_for(|s| *s).await;
                    hub.close();
                })
                .await
        });
        Ok::<_, String>((rt, task))
    };
    let server = std::sync::Mutex::new(Some(start_service(Some(std_listener))?));
    let agent_rt = match runtime(1, "testbed-agent") {
        Ok(rt) => rt,
        Err(e) => {
            if let Some((rt, _)) = lock(&server).take() {
                rt.shutdown_background();
            }
            return Err(e);
        }
    };
    let specs = workers
        .iter()
        .enumerate()
        .map(|(i, w)| agent::WorkerSpec {
            id: worker_id(i),
            host: "127.0.0.1".to_owned(),
            port: w.port,
        })
        .collect();
    let mut agent_cfg = agent::AgentConfig::new(base.clone(), specs);
    agent_cfg.credentials = credentials.agent;
    let (agent_stop_tx, agent_stop_rx) = tokio::sync::oneshot::channel::<()>();
    let agent_task = agent_rt.spawn(agent::run(agent_cfg, async {
        let _ = agent_stop_rx.await;
    }));
    let mut ready = wait_all_reported(&http, &base, n, Duration::from_secs(10)).await;
    for p in &pickers {
        if let Picker::Embedded(e) = p {
            ready = ready && e.wait_for_view(Duration::from_secs(5)).await;
        }
    }
    let result = if !ready {
        Err("the agent's telemetry did not reach the service within 10 s".to_owned())
    } else if many {
        let loads = many_routers::split(&load(args, setup, n), pickers.len());
        let ports: Vec<u16> = workers.iter().map(|w| w.port).collect();
        let service_ms = many_routers::service_ms(n);
        let pickers = std::mem::take(&mut pickers);
        super::routers_run::run_routers(pickers, loads, &ports, &service_ms, DRAIN_LIMIT)
            .await
            .map(|merged| PolicyRun {
                load: merged.run,
                herding: merged.herding,
                hubs: arm_hubs,
                cache: None,
            })
    } else if let Some(picker) = pickers.pop() {
        let is_loaded = args.scenario == loaded::NAME;
        let mut conns = Conns::new(
            workers.iter().map(|w| w.port).collect(),
            is_loaded.then(|| loaded::service_ms(n)),
        );
        if let Some(port) = setup.origin_port {
            let penalty = Duration::from_millis(cache::MISS_PENALTY_MS);
            conns =
                conns.with_cache(CacheAside::connect(port, n, penalty, cache::VALUE_BYTES).await?);
        }
        let conns = Arc::new(conns);
        let load = load(args, setup, n);
        let drainer = match picker.baseline() {
            Some(b) => Drainer::Baseline(b),
            None => Drainer::Service {
                http: admin_http,
                base: base.clone(),
            },
        };
        let picker = Arc::new(picker);
        let mut cache_before = None;
        if setup.origin_port.is_some() {
            loadgen::run(picker.clone(), conns.clone(), n, &warmup(&load)).await;
            cache_before = Some((cache::read_stats(workers).await?, conns.cache_counts()));
        }
        let no_fault = is_loaded || setup.origin_port.is_some();
        let load_fut = loadgen::run(picker, conns.clone(), n, &load);
        let fault_fut = async {
            if no_fault {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_secs_f64(args.fault_at_s)).await;
            if args.scenario == DRAIN {
                let len = Duration::from_millis(args.fault_ms);
                return drainer.run(0, len, args.fault_at_s * 1000.0).await;
            }
            if args.scenario == faults::SCORER_DOWN {
                // Down at once, as a crash: every task and socket goes.
                if let Some((rt, _)) = lock(&server).take() {
                    rt.shutdown_background();
                }
                tokio::time::sleep(Duration::from_millis(args.fault_ms)).await;
                *lock(&server) = Some(start_service(None)?);
                return Ok(());
            }
            faults::inject(
                &args.scenario,
                &mut workers[0],
                Duration::from_millis(args.fault_ms),
            )
            .await
        };
        let (run, fault) = tokio::join!(load_fut, fault_fut);
        fault?;
        let cache = match cache_before {
            Some((before, Some(router_before))) => {
                let after = cache::read_stats(workers).await?;
                let router = conns.cache_counts().unwrap_or_default();
                Some(CacheResult::new(
                    &before,
                    &after,
                    &router.since(&router_before),
                ))
            }
            _ => None,
        };
        if is_loaded {
            conns.drain(DRAIN_LIMIT).await;
        } else if !matches!(
            args.scenario.as_str(),
            "kill-restart" | faults::SCORER_DOWN | DRAIN | cache::NAME
        ) {
            // Let a pause / sleep end before the next policy (a killed
            // worker is back already: its injection returns once it
            // answers again).
            tokio::time::sleep(Duration::from_millis(args.fault_ms.min(5_000))).await;
        }
        Ok(PolicyRun {
            load: run,
            herding: None,
            hubs: arm_hubs,
            cache,
        })
    } else {
        Err("no router".to_owned())
    };
    let _ = agent_stop_tx.send(());
    let _ = agent_task.await;
    let _ = stop_tx.send(true);
    let last = lock(&server).take();
    if let Some((rt, task)) = last {
        let _ = task.await;
        rt.shutdown_background();
    }
    agent_rt.shutdown_background();
    if let Some(log) = log {
        // Requests have drained: close the files so the trainer reads them.
        log.shutdown().map_err(|e| e.to_string())?;
    }
    result
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
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

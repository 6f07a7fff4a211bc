//! `service`: serve the scoring API on the configured address.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use scorer_core::clock::SystemClock;
use scorer_engine::Engine;
use scorer_engine::config::Config;
use scorer_log::DecisionLog;
use scorer_model::ModelHub;
use service::config::LoadConfig;
use service::{AppState, EngineLog, app};
use tracing_subscriber::EnvFilter;

/// With the `mimalloc` feature, mimalloc (Microsoft's allocator) instead of
/// the system's: a 16-candidate decision makes ~80 small allocations, and
/// under mimalloc it takes 15% fewer instructions and ~20% less time in
/// service; but mimalloc keeps freed pages, which with the decision log on
/// costs ~30 MiB of resident memory (89–94 MiB against 57–59 MiB with 1 000
/// workers, `http_score` bench). The default build keeps the system
/// allocator and its bounded memory (docs/performance.md; the `model_path`
/// and `score_path` benches follow the same feature).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Worker scoring service for KV-aware routers.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// TOML config file; embedded defaults when absent. Every key can be
    /// overridden as SCORER_<SECTION>__<KEY>, e.g. SCORER_SERVER__LISTEN=127.0.0.1:9000.
    #[arg(long)]
    config: Option<PathBuf>,
}

/// Blocking-pool threads per core. `/v1/score` scores on the blocking pool
/// (see `http::endpoints::score`) while the runtime's workers (one per core)
/// read requests and shed the excess. One pool thread per core means that
/// under overload the scheduler splits the CPU evenly between reading
/// (and cheaply refusing, ~35 µs) and scoring (~250 µs): with more pool
/// threads than workers the workers starve, requests queue unseen in the
/// sockets, and even refused ones wait (measured: `scripts/bench_shedding.sh`).
const BLOCKING_THREADS_PER_CORE: usize = 1;

fn main() -> std::process::ExitCode {
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
    let run = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads((cores * BLOCKING_THREADS_PER_CORE).max(1))
        .build()
        .context("cannot start the async runtime")
        .and_then(|rt| rt.block_on(serve()));
    match run {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // The message and its causes on one line; no backtrace even with
            // RUST_BACKTRACE set (a refused config is not a crash).
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// At shutdown, how long the records' outbox may take to reach the bus, ms.
const RECORDS_DRAIN_MS: u64 = 5_000;

async fn serve() -> anyhow::Result<()> {
    use std::io::IsTerminal as _;
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let args = Args::parse();
    let config = Config::load(args.config.as_deref()).context("invalid configuration")?;
    let listen = config.server.listen.clone();
    tracing::info!(config_hash = %config.hash(), %listen, "starting");
    if config.server.insecure_allow_unauthenticated
        && listen
            .parse::<std::net::SocketAddr>()
            .is_ok_and(|a| !a.ip().is_loopback())
    {
        tracing::warn!(
            %listen,
            "server.insecure_allow_unauthenticated = true: roles without [auth] tokens are open to anyone who reaches this address, who can steer traffic and write the training data"
        );
    }
    if config.auth.reader_open
        && config.auth.reader.is_empty()
        && listen
            .parse::<std::net::SocketAddr>()
            .is_ok_and(|a| !a.ip().is_loopback())
    {
        tracing::warn!(
            %listen,
            "auth.reader_open = true: the workers, stats, metrics and the status page's data are open to anyone who reaches this address"
        );
    }
    let tls = service::http::ServerTls::load(&config.server.tls)
        .context("cannot set up TLS")?
        .map(Arc::new);
    if tls.is_none()
        && listen
            .parse::<std::net::SocketAddr>()
            .is_ok_and(|a| !a.ip().is_loopback())
    {
        tracing::warn!(
            %listen,
            "serving plain HTTP off loopback: bearer tokens and the fleet's state cross the network in clear text; set [server.tls] cert_path and key_path, or put a TLS proxy in front"
        );
    }
    // Bind first: a start that cannot serve must not touch the model or log
    // directories (log recovery renames and quarantines files).
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let clock = Arc::new(SystemClock::new());
    let log_cfg = config.log.clone();
    let models = Arc::new(ModelHub::load(&config.model, clock.clone()));
    let on_bus = config.bus.enabled();
    let bus_writer = config.bus.log_writer;
    let mut engine = Engine::new(config).with_models(models);
    // On the bus, the records go to the stream and a log writer writes
    // them; otherwise to the local log, as ever.
    let mut writer_log = None;
    if log_cfg.enabled && on_bus {
        engine = engine.with_log(Arc::new(service::bus::records::BusSink::new(&log_cfg)));
        if bus_writer {
            let log = DecisionLog::start(log_cfg, clock.clone())
                .context("cannot start the decision log")?;
            writer_log = Some(Arc::new(log));
        }
    } else if log_cfg.enabled {
        let log =
            DecisionLog::start(log_cfg, clock.clone()).context("cannot start the decision log")?;
        engine = engine.with_log(Arc::new(log));
    }
    let config_path = args.config.clone();
    let state = AppState::new(engine, clock)
        .with_config_source(Arc::new(move || Config::load(config_path.as_deref())))
        .with_tls(tls);
    let (state, bus_tasks) = match service::bus::start_with_writer(state.clone(), writer_log)
        .await
        .context("cannot join the bus ([bus])")?
    {
        Some((state, tasks)) => (state, tasks),
        None => (state, Vec::new()),
    };
    #[cfg(unix)]
    let hangup = {
        let state = state.clone();
        tokio::spawn(async move { reload_on_sighup(state).await })
    };
    let sweeper = {
        let (engine, clock) = (state.engine.clone(), state.clock.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
            loop {
                tick.tick().await;
                engine.forget_silent(clock.monotonic_ms());
            }
        })
    };
    let limits = service::http::ConnectionLimits::from_config(&state.engine.config().server);
    service::http::serve(listener, app(state.clone()), limits, state.tls.clone(), {
        let hub = state.view_hub.clone();
        async move {
            shutdown_signal().await;
            // View streams never end by themselves; end them so the
            // connections can drain.
            hub.close();
        }
    })
    .await;
    sweeper.abort();
    if let Some(link) = &state.bus {
        link.drain_records(std::time::Duration::from_millis(RECORDS_DRAIN_MS))
            .await;
    }
    for t in bus_tasks {
        t.abort();
    }
    if let Some(log) = state.bus.as_ref().and_then(|l| l.writer_log()) {
        // Unacknowledged batches go to another writer; what was written
        // is closed into Parquet.
        log.shutdown()
            .context("decision log did not close cleanly")?;
        tracing::info!(stats = ?log.stats(), "decision log closed");
    }
    #[cfg(unix)]
    hangup.abort();
    if let Some(log) = state.engine.decision_log() {
        // Requests have drained: flush and close the current files.
        log.shutdown()
            .context("decision log did not close cleanly")?;
        tracing::info!(stats = ?log.stats(), "decision log closed");
    }
    tracing::info!("stopped");
    Ok(())
}

/// SIGHUP: re-read the configuration and apply it with its models (as `POST
/// /v1/admin/reload` without `force`); a refused reload changes nothing.
#[cfg(unix)]
async fn reload_on_sighup(state: AppState) {
    let mut hup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGHUP");
            return;
        }
    };
    while hup.recv().await.is_some() {
        match (state.config_source)() {
            Ok(cfg) => match service::http::reload_on_own_thread(&state, cfg, false).await {
                Ok(Ok(r)) => tracing::info!(
                    new_hash = %r.new_hash,
                    changed = r.changes.len(),
                    model_generation = r.model.generation,
                    "SIGHUP reload applied"
                ),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "SIGHUP reload refused; nothing changed")
                }
                Err(e) => tracing::warn!(error = %e, "SIGHUP reload task failed"),
            },
            Err(e) => {
                tracing::warn!(error = %e, "SIGHUP: configuration refused; keeping the current one")
            }
        }
    }
}

async fn shutdown_signal() {
    scorer_signal::interrupt_or_terminate().await;
    tracing::info!("shutdown signal received; draining");
}

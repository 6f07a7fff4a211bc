//! A router that routes real Redis commands with the embedded balancer.
//!
//! It follows the scoring service's view (`GET /v1/view`), reports its load
//! (`POST /v1/router/load`) and its decisions and outcomes for the
//! service's decision log (`POST /v1/router/decisions`), and sends `--requests` SET and GET commands to
//! the workers, each to the balancer's pick, telling the balancer each
//! outcome. Then it prints where the commands went, their latency and the
//! balancer's counters.
//!
//! ```sh
//! cargo run --release -p scorer-balancer --example redis_router -- \
//!     --service http://127.0.0.1:8080 --worker w1=127.0.0.1:6379 --worker w2=127.0.0.1:6380
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use scorer_balancer::follow::{FollowConfig, follow_view};
use scorer_balancer::records::{DEFAULT_RECORD_BUFFER, RecordBuffer};
use scorer_balancer::report::report_load;
use scorer_balancer::report_records::report_records;
use scorer_balancer::{Balancer, BalancerConfig};
use scorer_client::{CredentialArgs, Credentials};
use scorer_core::clock::{Clock, SystemClock};
use scorer_engine::api::ScoreRequest;
use scorer_engine::config::Config;

/// A router that sends SET and GET commands to redis-server workers, each to
/// the embedded balancer's pick, following the scoring service's view.
#[derive(Parser, Debug)]
struct Args {
    /// The scoring service's base URL.
    #[arg(long)]
    service: String,
    /// A worker, `id=host:port`, as the telemetry agent names it; repeat.
    #[arg(long = "worker", required = true)]
    workers: Vec<String>,
    /// This router's id.
    #[arg(long, default_value = "example-router")]
    router_id: String,
    /// Commands to send, half SET and half GET.
    #[arg(long, default_value_t = 1_000)]
    requests: u64,
    /// Per-command timeout, ms.
    #[arg(long, default_value_t = 500)]
    timeout_ms: u64,
    #[command(flatten)]
    credentials: CredentialArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let credentials = Credentials::from_args(&args.credentials)?;
    credentials.check_url(&args.service)?;
    let http = credentials.apply(reqwest::Client::builder()).build()?;
    let mut workers = BTreeMap::new();
    for w in &args.workers {
        let (id, addr) = w.split_once('=').context("--worker takes id=host:port")?;
        let client = redis::Client::open(format!("redis://{addr}/"))?;
        let conn = client.get_multiplexed_async_connection().await?;
        workers.insert(id.to_owned(), conn);
    }

    // The balancer decides with the service's default configuration; the
    // view says if the service runs another (`config_mismatches`).
    let config = Config::default();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
    let records = RecordBuffer::new(DEFAULT_RECORD_BUFFER, &config.log, clock.clone());
    let balancer = Balancer::new(config, BalancerConfig::new(&args.router_id))?
        .with_records(Arc::new(records));
    let balancer = Arc::new(balancer);
    let follow = FollowConfig::new(args.service.clone());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stop = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let tasks = [
        tokio::spawn(follow_view(
            balancer.clone(),
            http.clone(),
            follow.clone(),
            clock.clone(),
            |_| {},
            stop(stop_rx.clone()),
        )),
        tokio::spawn(report_load(
            balancer.clone(),
            http.clone(),
            follow.clone(),
            stop(stop_rx.clone()),
        )),
        tokio::spawn(report_records(
            balancer.clone(),
            http,
            follow,
            stop(stop_rx),
        )),
    ];

    // Wait (bounded) for a view naming every worker.
    let deadline = Instant::now() + Duration::from_secs(10);
    while balancer.engine().registry().len() < workers.len() {
        if Instant::now() > deadline {
            bail!("no view of every worker from {} within 10 s", args.service);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let ids: Vec<String> = workers.keys().cloned().collect();
    let mut req = ScoreRequest::new("", ids);
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let (mut picks, mut latencies_us, mut failures) = (BTreeMap::new(), Vec::new(), 0u64);
    for i in 0..args.requests {
        req.key = format!("user:{}:profile", i % 100);
        let pick = balancer.pick(&req, clock.monotonic_ms(), &mut rng)?;
        let conn = workers
            .get_mut(&pick.worker)
            .context("a pick among the workers")?;
        let started = Instant::now();
        let command = if i % 2 == 0 {
            redis::cmd("SET").arg(&req.key).arg(i).to_owned()
        } else {
            redis::cmd("GET").arg(&req.key).to_owned()
        };
        let limit = Duration::from_millis(args.timeout_ms);
        let ok = matches!(
            tokio::time::timeout(limit, command.query_async::<redis::Value>(conn)).await,
            Ok(Ok(_))
        );
        let elapsed = started.elapsed();
        let latency_ms = elapsed.as_secs_f64() * 1_000.0;
        balancer.outcome(
            &pick.decision_id,
            &pick.worker,
            latency_ms,
            ok,
            clock.monotonic_ms(),
        )?;
        *picks.entry((pick.worker, pick.source)).or_insert(0u64) += 1;
        latencies_us.push(elapsed.as_micros() as u64);
        failures += u64::from(!ok);
    }
    // Give the last decisions a moment (bounded) to reach the service's log.
    let deadline = Instant::now() + Duration::from_secs(2);
    let unsent = |b: &Balancer| {
        b.records()
            .map(|r| r.stats())
            .is_some_and(|s| s.sent + s.refused < s.queued)
    };
    while unsent(&balancer) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _ = stop_tx.send(true);
    for t in tasks {
        let _ = t.await;
    }

    latencies_us.sort_unstable();
    let q = |p: f64| latencies_us[((latencies_us.len() - 1) as f64 * p).round() as usize];
    println!("commands: {} ({failures} failed)", args.requests);
    for ((worker, source), n) in &picks {
        println!("  {worker}: {n} ({})", source.as_str());
    }
    println!("latency: p50 {} µs, p99 {} µs", q(0.5), q(0.99));
    let stats = balancer.stats(clock.monotonic_ms());
    println!(
        "balancer: {} views applied, {} refused, {} load reports, view age {} ms",
        stats.views_applied,
        stats.views_refused,
        stats.load_reports,
        stats.view_age_ms.unwrap_or(0)
    );
    if let Some(r) = stats.records {
        println!(
            "decision log: {} records sent, {} refused, {} dropped",
            r.sent, r.refused, r.dropped
        );
    }
    Ok(())
}

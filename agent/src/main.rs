//! `agent`: polls redis-server workers and posts telemetry snapshots to the
//! scoring service, or publishes them on the bus. See `agent --help`.

use agent::{AgentConfig, WorkerSpec, config};
use anyhow::Context;
use clap::Parser;

/// Telemetry agent: polls redis-server workers and posts one snapshot per
/// worker per interval to `{service}/v1/telemetry`.
///
/// Per interval each worker gets timed PINGs (RTT mean/p99 in ms, error
/// rate) and one INFO (CPU fraction of one core, blocked clients, cache hit
/// rate, memory headroom, BGSAVE/AOF-rewrite and loading flags). Log level:
/// RUST_LOG (default `info`).
#[derive(Debug, Parser)]
#[command(name = "agent", version)]
struct Args {
    /// Base URL of the scoring service; snapshots are POSTed to
    /// `{URL}/v1/telemetry`.
    #[arg(long, value_name = "URL", default_value = config::DEFAULT_SERVICE_URL)]
    service: String,

    /// A redis-server to poll, as `id=host:port` (IPv6: `id=[::1]:6379`).
    /// Repeat for each worker; ids must be distinct, 1..=128 bytes.
    #[arg(long = "worker", value_name = "ID=HOST:PORT", required = true)]
    workers: Vec<WorkerSpec>,

    /// Report interval per worker, in milliseconds (at least twice
    /// --probe-timeout-ms, at most 3600000).
    #[arg(long, value_name = "MS", default_value_t = config::DEFAULT_INTERVAL_MS)]
    interval_ms: u64,

    /// Timeout of each PING, INFO and connect attempt, in milliseconds.
    /// A timed-out PING counts as an error and as an RTT sample of this many
    /// milliseconds.
    #[arg(long, value_name = "MS", default_value_t = config::DEFAULT_PROBE_TIMEOUT_MS)]
    probe_timeout_ms: u64,

    /// Timed PINGs per worker per interval (count, 1..=10000), started
    /// evenly over the first (interval - 2 x probe timeout) ms; the last probe
    /// timeout of each interval is reserved for INFO.
    #[arg(long, value_name = "N", default_value_t = config::DEFAULT_PINGS_PER_INTERVAL)]
    pings_per_interval: u32,

    /// Build each worker's cache digest (a Bloom filter of its keys, by
    /// SCAN) at most every MS milliseconds; 0: never. Keep it below the
    /// service's telemetry.dead_after_ms (default 10000).
    #[arg(long, value_name = "MS", default_value_t = agent::digest::DEFAULT_DIGEST_INTERVAL_MS)]
    digest_interval_ms: u64,

    /// Keys the digest is sized for (more raise its false-positive rate).
    #[arg(long, value_name = "N", default_value_t = agent::digest::DEFAULT_DIGEST_MAX_KEYS)]
    digest_max_keys: u64,

    /// Bits per key of the digest (1..=64; 10: about 0.8 % false positives).
    #[arg(long, value_name = "N", default_value_t = 10)]
    digest_bits_per_key: u32,

    /// SCAN COUNT hint of each digest batch (1..=100000).
    #[arg(long, value_name = "N", default_value_t = agent::digest::DEFAULT_DIGEST_SCAN_COUNT)]
    digest_scan_count: u32,

    /// Pause between two digest SCAN batches, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = agent::digest::DEFAULT_DIGEST_BATCH_PAUSE_MS)]
    digest_batch_pause_ms: u64,

    #[command(flatten)]
    credentials: scorer_client::CredentialArgs,

    /// Publish on the bus instead of posting to --service: NATS server
    /// URLs, comma-separated (nats:// or tls://, no credentials in them).
    /// Each snapshot goes to scorer.telemetry.<worker>, which every scorer
    /// replica on that bus follows.
    #[arg(long, value_name = "URLS", env = "SCORER_BUS__NATS_URL")]
    nats_url: Option<String>,

    /// NATS user (with --nats-password).
    #[arg(long, value_name = "USER", env = "SCORER_BUS__USER")]
    nats_user: Option<String>,

    /// NATS password (with --nats-user).
    #[arg(
        long,
        value_name = "PASSWORD",
        env = "SCORER_BUS__PASSWORD",
        hide_env_values = true
    )]
    nats_password: Option<String>,

    /// NATS token, instead of a user and password.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "SCORER_BUS__TOKEN",
        hide_env_values = true
    )]
    nats_token: Option<String>,

    /// NATS user nkey seed (starts with SU), instead of the others.
    #[arg(
        long,
        value_name = "SEED",
        env = "SCORER_BUS__NKEY_SEED",
        hide_env_values = true
    )]
    nats_nkey_seed: Option<String>,

    /// PEM file of the CA that signs the NATS server's certificate (the
    /// connection then requires TLS).
    #[arg(long, value_name = "FILE", env = "SCORER_BUS__TLS_CA_PATH")]
    nats_ca: Option<std::path::PathBuf>,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // One line with its causes, no backtrace (as the service).
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();

    let args = Args::parse();
    let cfg = AgentConfig {
        service_url: args.service,
        workers: args.workers,
        interval_ms: args.interval_ms,
        probe_timeout_ms: args.probe_timeout_ms,
        pings_per_interval: args.pings_per_interval,
        credentials: scorer_client::Credentials::from_args(&args.credentials)
            .context("invalid credentials")?,
        digest: agent::digest::DigestConfig {
            interval_ms: args.digest_interval_ms,
            max_keys: args.digest_max_keys,
            bits_per_key: args.digest_bits_per_key,
            scan_count: args.digest_scan_count,
            batch_pause_ms: args.digest_batch_pause_ms,
        },
        bus: scorer_engine::config::bus::BusConfig {
            nats_url: args.nats_url.unwrap_or_default(),
            user: args.nats_user,
            password: args.nats_password,
            token: args.nats_token,
            nkey_seed: args.nats_nkey_seed,
            tls_ca_path: args.nats_ca,
            ..scorer_engine::config::bus::BusConfig::default()
        },
    };
    agent::run(cfg, scorer_signal::interrupt_or_terminate())
        .await
        .context("agent failed")
}

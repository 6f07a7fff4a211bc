//! The `[server]` section: listener, connection limits and request limits.

use serde::{Deserialize, Serialize};

/// Default listen address: loopback only; binding elsewhere must be explicit.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// Default request body limit, bytes (8 MiB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 8 * 1024 * 1024;
/// Default maximum snapshots in one telemetry batch.
pub const DEFAULT_MAX_BATCH: usize = 10_000;
/// Default maximum outcomes in one feedback batch: below the decision log's
/// default channel capacity, so one batch cannot overflow it.
pub const DEFAULT_MAX_FEEDBACK_BATCH: usize = 1_000;
pub use scorer_core::limits::DEFAULT_MAX_CANDIDATES;
/// Default time a client has to send a request's line and headers, ms.
pub const DEFAULT_HEADER_READ_TIMEOUT_MS: u64 = 10_000;
/// Default time a connection may go without a byte read or written, ms.
pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 30_000;
/// Default time a client has to send a request's whole body, ms.
pub const DEFAULT_BODY_READ_TIMEOUT_MS: u64 = 1_000;
/// Default most open client connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4_096;

/// Where `POST /v1/score` computes (`server.score_dispatch`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScoreDispatch {
    /// Inline on the runtime worker that read the request when no other
    /// score call is in progress; on the blocking pool when one is, so that
    /// under load the concurrency limit counts the backlog and sheds it.
    #[default]
    Adaptive,
    /// Always on the blocking pool (two thread hand-offs per call).
    Pool,
    /// Always inline. Under overload the backlog waits unseen in the
    /// sockets and nothing is shed: for measurement only.
    Inline,
    /// `tokio::task::block_in_place` on the runtime worker (inline on a
    /// current-thread runtime).
    BlockInPlace,
}

/// `[server]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Socket address to listen on. Default `127.0.0.1:8080`. Off loopback
    /// every writing role needs an `[auth]` token (or the next key).
    pub listen: String,
    /// Serve a non-loopback `listen` without tokens for the writing roles:
    /// anyone who reaches the port can then steer traffic. Default false;
    /// logged at warn level when set.
    pub insecure_allow_unauthenticated: bool,
    /// Largest accepted request body, bytes; larger bodies get 413. Default 8 MiB.
    pub max_body_bytes: usize,
    /// Largest telemetry batch, snapshots. Default 10_000.
    pub max_batch: usize,
    /// Largest feedback batch, outcomes; at most `log.channel_capacity`.
    /// Default 1000.
    pub max_feedback_batch: usize,
    /// Most candidates in one score request. Default 1024.
    pub max_candidates: usize,
    /// `POST /v1/score` requests served at once; beyond it requests get 503
    /// with `Retry-After` at once instead of queueing (load shedding). Default 256.
    pub max_concurrent_scores: usize,
    /// Any request taking longer gets 503, ms. Default 2000.
    pub request_timeout_ms: u64,
    /// A connection that has not sent a whole request line and headers this
    /// long after it opened, or after the previous answer on a kept-alive
    /// connection, is closed, ms. Default 10_000.
    pub header_read_timeout_ms: u64,
    /// A connection with no byte read or written for this long is closed,
    /// whatever it is doing (waiting for a request, or a client that stopped
    /// reading its answer), ms; at least `request_timeout_ms`. Default 30_000.
    pub idle_timeout_ms: u64,
    /// A request body not received in full this long after its headers gets
    /// 408 `body_timeout`, ms; below `request_timeout_ms`. Default 1000.
    pub body_read_timeout_ms: u64,
    /// Most client connections open at once; one more is closed as soon as it
    /// is accepted. Default 4096.
    pub max_connections: usize,
    /// Where score calls compute: `adaptive` (default), `pool`, `inline`
    /// or `block_in_place`; see [`ScoreDispatch`].
    pub score_dispatch: ScoreDispatch,
    /// `[server.tls]`: HTTPS and client certificates; off by default.
    pub tls: super::tls::TlsConfig,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: DEFAULT_LISTEN.to_owned(),
            insecure_allow_unauthenticated: false,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_batch: DEFAULT_MAX_BATCH,
            max_feedback_batch: DEFAULT_MAX_FEEDBACK_BATCH,
            max_candidates: DEFAULT_MAX_CANDIDATES,
            max_concurrent_scores: 256,
            request_timeout_ms: 2_000,
            header_read_timeout_ms: DEFAULT_HEADER_READ_TIMEOUT_MS,
            idle_timeout_ms: DEFAULT_IDLE_TIMEOUT_MS,
            body_read_timeout_ms: DEFAULT_BODY_READ_TIMEOUT_MS,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            score_dispatch: ScoreDispatch::Adaptive,
            tls: super::tls::TlsConfig::default(),
        }
    }
}

impl ServerConfig {
    /// Check every value against its documented range.
    ///
    /// # Errors
    /// The first offending dotted key and what is wrong with it.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.listen.parse::<std::net::SocketAddr>().is_err() {
            return Err((
                "server.listen",
                format!(
                    "`{}` is not a socket address like 127.0.0.1:8080",
                    self.listen
                ),
            ));
        }
        for (key, v) in [
            ("server.max_body_bytes", self.max_body_bytes),
            ("server.max_batch", self.max_batch),
            ("server.max_feedback_batch", self.max_feedback_batch),
            ("server.max_candidates", self.max_candidates),
            ("server.max_concurrent_scores", self.max_concurrent_scores),
            ("server.max_connections", self.max_connections),
        ] {
            if v == 0 {
                return Err((key, "must be at least 1".to_owned()));
            }
        }
        for (key, v) in [
            ("server.request_timeout_ms", self.request_timeout_ms),
            ("server.header_read_timeout_ms", self.header_read_timeout_ms),
            ("server.body_read_timeout_ms", self.body_read_timeout_ms),
        ] {
            if v == 0 {
                return Err((key, "must be at least 1".to_owned()));
            }
        }
        if self.body_read_timeout_ms >= self.request_timeout_ms {
            return Err((
                "server.body_read_timeout_ms",
                format!(
                    "must be below server.request_timeout_ms ({}) so that a slow body gets 408, got {}",
                    self.request_timeout_ms, self.body_read_timeout_ms
                ),
            ));
        }
        if self.idle_timeout_ms < self.request_timeout_ms {
            return Err((
                "server.idle_timeout_ms",
                format!(
                    "must be at least server.request_timeout_ms ({}) so that no request in progress is cut, got {}",
                    self.request_timeout_ms, self.idle_timeout_ms
                ),
            ));
        }
        self.tls.validate()
    }
}

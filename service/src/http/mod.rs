//! The HTTP layer: routes, extraction and error answers. The domain lives in
//! [`scorer_engine`]; handlers only translate.
//!
//! Tests call `app(state).oneshot(request)` with no socket.

pub mod auth;
pub mod auth_limiter;
mod bus_metrics;
pub mod endpoints;
pub mod extract;
mod log_metrics;
mod openapi;
pub mod prometheus;
pub mod record_rate;
mod router_identity;
mod self_check_metrics;
pub mod transport;
pub mod warn_limit;

use std::sync::Arc;

use axum::Extension;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post, put};

pub use auth::{Role, bearer_token, token_matches};
pub use endpoints::explain::explain_line;
pub use endpoints::promote;
pub use endpoints::reconfigure::reload_on_own_thread;
pub use extract::error_body::{self, ErrorBody, ErrorDetail};
pub use extract::{ApiError, ApiJson};
pub use openapi::ApiDoc;
pub use prometheus::{HttpMetrics, ScoreStage};
pub use transport::body::BodyPolicy;
pub use transport::body_first::{ReadStart, read_body_first};
pub use transport::dispatch::InProgress;
pub use transport::limits::{OverloadedFuture, RETRY_AFTER_S, shed_layer, timeout_layer};
pub use transport::serve::{ConnectionLimits, serve};
pub use transport::tls::{ClientCertificate, ServerTls, TlsError};

use scorer_core::clock::Clock;
use scorer_engine::Engine;

/// Shared state of every handler.
#[derive(Clone)]
pub struct AppState {
    /// The scoring engine.
    pub engine: Arc<Engine>,
    /// Time source (a [`scorer_core::clock::ManualClock`] in tests).
    pub clock: Arc<dyn Clock>,
    /// Where `POST /v1/admin/reload` (and SIGHUP) read the new configuration.
    /// Defaults to the engine's current configuration (reloading re-reads the
    /// same model directories); the binary re-reads its file and environment.
    pub config_source: ConfigSource,
    /// Request and scoring metrics behind `GET /metrics`.
    pub metrics: Arc<prometheus::HttpMetrics>,
    /// `POST /v1/score` calls in progress (see `http::transport::dispatch`).
    pub in_progress: Arc<InProgress>,
    /// Rate limit of the rejected-telemetry warning.
    pub telemetry_warn: Arc<warn_limit::WarnLimit>,
    /// Rate limit of the refused-request warning.
    pub auth_warn: Arc<warn_limit::WarnLimit>,
    /// Failed-token attempts per peer address.
    pub auth_limiter: Arc<auth_limiter::AuthLimiter>,
    /// Rate limit of the refused-router-records warning.
    pub records_warn: Arc<warn_limit::WarnLimit>,
    /// One router batch at a time checks the log's room and queues its
    /// records, so that concurrent batches cannot overfill it.
    pub records_turn: Arc<tokio::sync::Mutex<()>>,
    /// Model promotions and the directory to roll back to.
    pub promotions: Arc<promote::Promotions>,
    /// The listener's TLS acceptor, replaced on reload; `None` without TLS.
    pub tls: Option<Arc<ServerTls>>,
    /// The latest reports and the feed of accepted batches for `GET /v1/view`.
    pub view_hub: Arc<crate::view_hub::ViewHub>,
    /// The routers' reported load, summed into the view stream.
    pub load_board: Arc<scorer_engine::view::load_board::LoadBoard>,
    /// Open view streams, their limits and metrics.
    pub view_streams: Arc<transport::streams::StreamLimiter>,
    /// Router records per credential per second (`limits.router_records_per_s`).
    pub record_rate: Arc<record_rate::RecordRate>,
    /// The link to the other replicas (`[bus]`); `None` in one process.
    pub bus: Option<Arc<crate::bus::BusLink>>,
}

/// A function producing the configuration to reload to.
pub type ConfigSource = Arc<
    dyn Fn() -> Result<scorer_engine::config::Config, scorer_engine::config::ConfigError>
        + Send
        + Sync,
>;

impl AppState {
    /// State over `engine` reading time from `clock`.
    pub fn new(engine: Engine, clock: Arc<dyn Clock>) -> Self {
        let engine = Arc::new(engine);
        let current = engine.clone();
        let in_progress = Arc::new(InProgress::new(clock.clone()));
        Self {
            engine,
            clock,
            config_source: Arc::new(move || Ok((*current.config()).clone())),
            metrics: Arc::default(),
            in_progress,
            telemetry_warn: Arc::default(),
            auth_warn: Arc::default(),
            auth_limiter: Arc::default(),
            records_warn: Arc::default(),
            records_turn: Arc::default(),
            promotions: Arc::default(),
            tls: None,
            view_hub: Arc::default(),
            load_board: Arc::default(),
            view_streams: Arc::default(),
            record_rate: Arc::default(),
            bus: None,
        }
    }

    /// The Parquet log this process writes: the engine's own, or on the
    /// bus the one it writes as a log writer.
    pub fn decision_log(&self) -> Option<Arc<scorer_log::DecisionLog>> {
        use crate::EngineLog as _;
        self.engine
            .decision_log()
            .or_else(|| self.bus.as_ref().and_then(|b| b.writer_log().cloned()))
    }

    /// Shares what this replica accepted with its peers on the bus.
    pub fn with_bus(mut self, link: Arc<crate::bus::BusLink>) -> Self {
        self.bus = Some(link);
        self
    }

    /// Queues `msg` for the bus; nothing without one.
    pub fn share(&self, msg: crate::bus::Outgoing) {
        if let Some(b) = &self.bus {
            b.send(msg);
        }
    }

    /// Serves TLS with `tls`, whose files a reload re-reads.
    pub fn with_tls(mut self, tls: Option<Arc<ServerTls>>) -> Self {
        self.tls = tls;
        self
    }

    /// Replaces the reload source.
    pub fn with_config_source(mut self, source: ConfigSource) -> Self {
        self.config_source = source;
        self
    }
}

/// The service's router with every v1 route and the body limit from config.
pub fn app(state: AppState) -> Router {
    let cfg = state.engine.config();
    let limit = cfg.server.max_body_bytes;
    let role = |role: Role, routes: Router<AppState>| {
        routes.route_layer(axum::middleware::from_fn_with_state(
            (state.clone(), role),
            auth::require,
        ))
    };
    let admin = Router::new()
        .route("/v1/admin/reload", post(endpoints::reconfigure::reload))
        .route("/v1/admin/config", get(endpoints::reconfigure::config_view))
        .route(
            "/v1/admin/config/rollback",
            post(endpoints::reconfigure::config_rollback),
        )
        .route("/v1/admin/config/canary", post(endpoints::canary::start))
        .route(
            "/v1/admin/config/canary/promote",
            post(endpoints::canary::promote),
        )
        .route(
            "/v1/admin/config/canary/abort",
            post(endpoints::canary::abort),
        )
        .route("/v1/admin/model/promote", post(endpoints::promote::promote))
        .route(
            "/v1/admin/model/rollback",
            post(endpoints::promote::rollback),
        )
        .route(
            "/v1/admin/model/pin",
            post(endpoints::promote::pin).delete(endpoints::promote::unpin),
        )
        .route(
            "/v1/admin/workers/{worker_id}/override",
            put(endpoints::overrides::set_override).delete(endpoints::overrides::clear_override),
        )
        .route(
            "/v1/admin/overrides",
            get(endpoints::overrides::list_overrides).delete(endpoints::overrides::clear_overrides),
        );
    let agent = Router::new().route("/v1/telemetry", post(endpoints::telemetry::telemetry));
    let router = Router::new()
        .route(
            "/v1/score",
            post(endpoints::score::score)
                .layer(transport::limits::shed_layer(
                    cfg.server.max_concurrent_scores,
                ))
                // Outside the limit: a shed request's body is read too, so
                // its keep-alive connection survives the 503.
                .layer(axum::middleware::from_fn(
                    transport::body_first::read_body_first,
                )),
        )
        .route("/v1/feedback", post(endpoints::feedback::feedback))
        .route("/v1/view", get(endpoints::view::view))
        .route("/v1/router/load", post(endpoints::router_load::router_load))
        .route(
            "/v1/router/decisions",
            post(endpoints::router_decisions::router_decisions),
        )
        .route(
            "/v1/model/files/{file}",
            get(endpoints::model_files::model_file),
        );
    let reader = Router::new()
        .route("/v1/stats", get(endpoints::operations::stats))
        .route("/v1/config/canary", get(endpoints::canary::status))
        .route("/v1/log/stats", get(endpoints::operations::log_stats))
        .route("/v1/workers", get(endpoints::workers::workers))
        .route("/v1/features", get(endpoints::operations::features))
        .route("/v1/model", get(endpoints::model::model))
        .route("/v1/shadow", get(endpoints::model::shadow))
        .route("/v1/debug/score", get(endpoints::explain::debug_score))
        .route("/metrics", get(prometheus::metrics));
    Router::new()
        .merge(role(Role::Agent, agent))
        .merge(role(Role::Router, router))
        .merge(role(Role::Reader, reader))
        .merge(role(Role::Admin, admin))
        .route("/openapi.json", get(openapi::openapi_json))
        .route("/", get(endpoints::explain::status_page))
        .route("/healthz", get(endpoints::operations::healthz))
        .route("/readyz", get(endpoints::operations::readyz))
        .fallback(endpoints::operations::not_found)
        .method_not_allowed_fallback(endpoints::operations::method_not_allowed)
        .layer(DefaultBodyLimit::max(limit))
        .layer(Extension(BodyPolicy::from_config(&cfg.server)))
        .layer(transport::limits::timeout_layer(
            cfg.server.request_timeout_ms,
        ))
        // Outside the timeout, so a request answered 503 `timeout` is counted.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            prometheus::track,
        ))
        .with_state(state)
}
